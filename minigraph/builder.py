"""Op builder classes and `register_op`, the public way to add an op type.

Every registered op gets a builder class named after it, as TF's C++ `ops::GatherNd`:
`g = GatherNd(scope, params, indices, batch_dims=1)` adds a node and returns an object with
`.operation`, `.output` (ops with one output) or one attribute per named output, `.outputs`
and `.node()`. A builder object is accepted wherever an `Output` is (inputs, fetches, feeds).

Inputs are positional (or keyword, by input name) and may be Outputs, builder objects, numpy
arrays, Python scalars or nested lists; literals become Const nodes. Attrs without a default
(and not inferred from the inputs) may follow the inputs positionally, in OpDef order, as in
TF's C++ API (`Cast(scope, x, DstT)`); every attr may be given by keyword.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from keyword import iskeyword
from typing import TYPE_CHECKING, Any

from minigraph import registry
from minigraph.errors import InvalidArgumentError
from minigraph.graph import (
    Operation,
    Output,
    apply_operator,
    check_name,
    symbolic_message,
    user_source,
)
from minigraph.op_def import OpDef

if TYPE_CHECKING:
    from minigraph.scope import Scope

__all__ = ["OpBuilder", "register_op", "op_builder", "as_output"]


class OpBuilder:
    """Base class of op builders; subclasses set `op_def` (and may set `default_name`).

    Subclasses with a hand-written `__init__` call `self._build(scope, inputs, attrs)`.
    """

    op_def: OpDef
    default_name: str | None = None

    def __init__(self, scope: Scope, *args: Any, **kwargs: Any):
        op_def = self.op_def
        n_in = len(op_def.inputs)
        if not kwargs and len(args) == n_in and hasattr(scope, "create_op"):
            self._build(scope, list(args), kwargs)  # the usual call: the inputs, by position
            return
        if not hasattr(scope, "create_op"):
            # `GatherNd(params, indices)`, a TF Python habit: say that the scope is missing
            # before counting the inputs (it would be "missing input 'indices'").
            raise _not_a_scope(op_def.name, scope)
        inputs = args[:n_in]
        if len(args) > n_in:
            # As TF's C++ wrappers: attrs without a default follow the inputs, in OpDef order.
            required = _required_attrs(op_def)
            extra = args[n_in:]
            if len(extra) > len(required):
                then = f" then its required attrs ({', '.join(required)})" if required else ""
                raise InvalidArgumentError(
                    f"{op_def.name} takes {n_in} inputs ({self._input_names()}){then}; got "
                    f"{len(args)} (its other attrs are passed by keyword)"
                )
            for name, value in zip(required, extra):
                if name in kwargs:
                    raise InvalidArgumentError(
                        f"{op_def.name}: attr '{name}' given both by position and by keyword"
                    )
                kwargs[name] = value
        values = list(inputs)
        if kwargs:
            for arg in op_def.inputs[: len(inputs)]:
                if arg.name in kwargs:
                    raise InvalidArgumentError(
                        f"{op_def.name}: input '{arg.name}' given both by position and by keyword"
                    )
        for arg in op_def.inputs[len(inputs) :]:
            if arg.name not in kwargs:
                raise InvalidArgumentError(
                    f"{op_def.name}: missing input '{arg.name}' (inputs: {self._input_names()})"
                )
            values.append(kwargs.pop(arg.name))
        self._build(scope, values, kwargs)

    @classmethod
    def _input_names(cls) -> str:
        return ", ".join(a.name for a in cls.op_def.inputs)

    def _build(self, scope: Scope, inputs: list[Any], attrs: dict[str, Any]) -> None:
        try:
            create = scope.create_op
        except AttributeError:
            raise _not_a_scope(self.op_def.name, scope) from None
        # Hand-written builders pass these: the generated one always passes a list and a dict.
        if type(inputs) is not list and not isinstance(inputs, (list, tuple)):
            raise InvalidArgumentError(
                f"{self.op_def.name}: _build takes the inputs as a list (one entry per input "
                f"arg); got {type(inputs).__name__}"
            )
        if type(attrs) is not dict and not isinstance(attrs, Mapping):
            raise InvalidArgumentError(
                f"{self.op_def.name}: _build takes the attrs as a dict {{name: value}}; got "
                f"{type(attrs).__name__}"
            )
        # Three frames up (past this method and the builder's __init__) is the calling code.
        op = create(self.op_def, inputs, attrs, self.default_name, user_source(3))
        outputs = op._outputs  # the slot behind the `outputs` property
        fields = self.__dict__
        fields["operation"] = op
        fields["outputs"] = outputs
        if len(outputs) == 1:
            fields["output"] = outputs[0]
        cls = type(self)
        names = cls.__dict__.get("_output_attrs")
        if names is None:
            # An output named like a builder member (`shape`, `name`, `node`, ...) would fail or
            # shadow it after the node is committed; such an output is reached via .outputs.
            names = tuple(
                (i, a.name) for i, a in enumerate(self.op_def.outputs)
                if a.name not in ("operation", "outputs") and not hasattr(cls, a.name)
            )  # fmt: skip
            cls._output_attrs = names
        if not self.op_def.has_list_outputs:
            for i, name in names:
                fields[name] = outputs[i]
            return
        # List output args (`N * T`) span several flat outputs: their attribute is a tuple.
        spans = []
        start = 0
        for arg, n in zip(self.op_def.outputs, self.op_def.output_arg_lengths(op.attrs)):
            spans.append(outputs[start : start + n] if arg.is_list else outputs[start])
            start += n
        for i, name in names:
            fields[name] = spans[i]

    def __getitem__(self, index: Any) -> Any:
        """On a builder of several outputs (or a list output), `builder[i]` is
        `builder.outputs[i]` (flat outputs, as TF's `op.outputs`); on a single-output builder
        it slices the output as `output[...]` does (StridedSlice)."""
        if self._multi_output():
            return self.outputs[index]
        return apply_operator("getitem", self._as_output(), index)

    def __iter__(self) -> Any:
        if self._multi_output():
            return iter(self.outputs)
        return iter(self._as_output())  # raises: a symbolic tensor is not iterable

    def _multi_output(self) -> bool:
        op_def = self.op_def
        return len(op_def.outputs) != 1 or op_def.has_list_outputs

    def node(self) -> Operation:
        """The created node (TF's `node()`)."""
        return self.operation

    def consumers(self) -> list[Operation]:
        """Operations that take the single output as an input, in creation order."""
        return self._as_output().consumers()

    # A builder stands for its output: it has no value until a Session runs it.
    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(
            symbolic_message(f"{type(self).__name__} {self.operation.name!r}", "a numpy array")
        )

    def __bool__(self) -> bool:
        raise TypeError(
            symbolic_message(f"{type(self).__name__} {self.operation.name!r}", "a Python bool")
        )

    def _as_output(self) -> Output:
        outputs = self.operation.outputs
        if len(outputs) != 1:
            raise InvalidArgumentError(
                f"{self.operation.name!r} ({self.operation.type}) has {len(outputs)} outputs; "
                "pick one with .outputs[i] or its name",
                self.operation.name,
                self.operation.type,
            )
        return outputs[0]

    # Single-output conveniences, as TF's implicit conversion to Output.
    @property
    def name(self) -> str:
        """The name of the single output, `op:0`."""
        return self._as_output().name

    @property
    def dtype(self) -> Any:
        """The dtype of the single output."""
        return self._as_output().dtype

    @property
    def shape(self) -> Any:
        """The static shape of the single output."""
        return self._as_output().shape

    def __repr__(self) -> str:
        op = self.operation
        if len(op.outputs) == 1:
            out = op.outputs[0]
            return f"<{type(self).__name__} {op.name!r} dtype={out.dtype.name} shape={out.shape}>"
        return f"<{type(self).__name__} {op.name!r}>"


def _delegating(name: str) -> Any:
    def operator(self: OpBuilder, *args: Any) -> Any:
        return getattr(self._as_output(), name)(*args)

    operator.__name__ = name
    operator.__doc__ = f"`Output.{name}` of the single output."
    return operator


# A single-output builder stands for its output in operators too (`GatherV2(...) + 1`).
for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
    "__rpow__", "__matmul__", "__rmatmul__", "__lt__", "__le__", "__gt__", "__ge__", "__and__",
    "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__neg__", "__abs__", "__invert__",
):  # fmt: skip
    setattr(OpBuilder, _name, _delegating(_name))
OpBuilder.__array_priority__ = 100  # numpy's operators defer to the reflected ones, as Output
OpBuilder.__hash__ = object.__hash__  # identity, as __eq__ (builders are dictionary keys)
del _name


def as_output(value: Any, scope: Any = None, *, build: bool = True) -> Output | None:
    """The Output that `value` stands for (an Output or single-output builder), else None.

    Objects of other types stand for a tensor through the `_as_graph_output(scope)` protocol
    (TF's `_as_graph_element`), a method of their type: a `minigraph.Variable` is read. Given
    the `scope` of the node that consumes it, the object may build nodes there (a Variable
    makes a fresh read under that scope, with its control dependencies); without one it gives
    its own tensor (a Variable's read made with it, which fetches and feeds use). With
    `build=False` such objects give None, for callers that build them later, inside their own
    graph checkpoint (`Scope.create_op`, so that a node that fails leaves no read behind).
    """
    if isinstance(value, OpBuilder):
        out = value.__dict__.get("output")
        return out if out is not None else value._as_output()
    if isinstance(value, Output):
        return value
    hook = getattr(type(value), "_as_graph_output", None)
    if hook is None or not build:
        return None
    return hook(value, scope)


def _not_a_scope(what: str, value: Any) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{what}: the first argument must be a Scope (e.g. Scope.new_root_scope()); got "
        f"{type(value).__name__}"
    )


def _required_attrs(op_def: OpDef) -> tuple[str, ...]:
    """The attrs a node of `op_def` must be given (no default, not inferred from an input), in
    OpDef order: a builder takes them positionally after the inputs, as TF's C++ wrappers do
    (`DynamicPartition(scope, data, partitions, num_partitions)`, `Cast(scope, x, DstT)`)."""
    return tuple(
        a.name for a in op_def.attrs if not a.has_default and a.name not in op_def.inferred_attrs
    )


def _signature(op_def: OpDef) -> inspect.Signature:
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("scope", positional)]
    params += [inspect.Parameter(a.name, positional) for a in op_def.inputs]
    required = _required_attrs(op_def)
    params += [inspect.Parameter(name, positional) for name in required]
    for attr in op_def.attrs:
        if attr.name in op_def.inferred_attrs or attr.name in required:
            continue
        default = attr.default if attr.has_default else inspect.Parameter.empty
        params.append(inspect.Parameter(attr.name, inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(params)


# Names a generated builder's call takes besides inputs and attrs (`__init__(self, scope, ...)`).
_BUILDER_PARAMS = ("self", "scope")


def _builder_name_problem(op_def: OpDef, generated: bool) -> str | None:
    """Why the builder of `op_def` could not take its inputs and attrs as Python arguments;
    None when it can. Checked before anything is registered."""
    for kind, names in (
        ("input", [a.name for a in op_def.inputs]),
        ("output", [a.name for a in op_def.outputs]),
        ("attr", [a.name for a in op_def.attrs]),
    ):
        for name in names:
            if not name.isidentifier() or iskeyword(name):
                return f"{kind} name {name!r} is a Python keyword, which no builder can take"
    # Outputs named like builder members (`shape`, `node`) are allowed: they are reached
    # through `.outputs` (see OpBuilder._build).
    if not generated:
        return None  # a hand-written builder decides how it takes inputs and attrs
    params = [a.name for a in op_def.inputs] + [
        a.name for a in op_def.attrs if a.name not in op_def.inferred_attrs
    ]
    for name in params:
        if name in _BUILDER_PARAMS:
            return f"{name!r} cannot name an input or attr: the builder's call takes {name!r}"
    inputs = {a.name for a in op_def.inputs}
    for attr in op_def.attrs:
        if attr.name in inputs and attr.name not in op_def.inferred_attrs:
            return f"attr {attr.name!r} has the name of an input; builders take both by name"
    return None


def op_builder(
    op_type: str | OpDef,
    class_name: str | None = None,
    default_name: str | None = None,
    *,
    _module: str | None = None,
) -> type[OpBuilder]:
    """A builder class for a registered op (e.g. an alias with another default node name:
    `Gather = op_builder("GatherV2", "Gather", default_name="Gather")`).

    A `class_name` other than the op type is recorded as an alias of the op, which
    `python -m minigraph describe` explains (`Gather` makes `GatherV2` nodes).

    Raises:
        InvalidArgumentError: an invalid class or default node name.
        AlreadyExistsError: `class_name` is an op type, or an alias of another op.
    """
    op_def = op_type if isinstance(op_type, OpDef) else registry.get_op_def(op_type)
    if default_name is not None:
        check_name(default_name, "default node")
    name = class_name or op_def.name
    if not isinstance(name, str) or not name.isidentifier() or iskeyword(name):
        raise InvalidArgumentError(f"class_name must be a Python identifier; got {name!r}")
    problem = _builder_name_problem(op_def, generated=True)
    if problem is not None:
        raise InvalidArgumentError(f"op {op_def.name}: {problem}")
    doc = f"{op_def.signature()}\n\n{op_def.doc.strip()}" if op_def.doc else op_def.signature()
    cls = type(
        name,
        (OpBuilder,),
        {
            "op_def": op_def,
            "default_name": default_name,
            "__doc__": doc,
            "__module__": _module or sys._getframe(1).f_globals.get("__name__", ""),
        },
    )
    cls.__signature__ = _signature(op_def)  # type: ignore[attr-defined]
    if name != op_def.name:
        registry.add_alias(name, op_def)
    return cls


def register_op(op_def: OpDef, builder: type[OpBuilder] | None = None) -> type[OpBuilder]:
    """Registers `op_def` and returns its builder class.

    Pass `builder`, an `OpBuilder` subclass with a hand-written `__init__`, for a friendlier
    signature; otherwise a generic builder is generated (inputs positional, attrs keyword-only).

    Everything is checked before anything is registered: a failed call leaves the registry
    unchanged. Registering an identical OpDef again (same inputs, outputs, attrs, docs and
    shape function, as when a notebook cell runs twice) returns the builder registered first
    (or `builder`, bound to the registered OpDef).

    Raises:
        InvalidArgumentError: names the builder cannot take as Python arguments (keywords,
            `scope`, `self`, an attr named like an input).
        AlreadyExistsError: a different op of that name is already registered.
    """
    if builder is not None and not (isinstance(builder, type) and issubclass(builder, OpBuilder)):
        raise InvalidArgumentError("builder must be an OpBuilder subclass")
    if not isinstance(op_def, OpDef):
        raise InvalidArgumentError(f"expected an OpDef, got {type(op_def).__name__}")
    problem = _builder_name_problem(op_def, generated=builder is None)
    if problem is not None:
        raise InvalidArgumentError(f"op {op_def.name}: {problem}")
    module = sys._getframe(1).f_globals.get("__name__", "")
    made = op_builder(op_def, _module=module) if builder is None else builder
    registered = registry.add_op_def(op_def, made)
    if builder is None:
        return registered if registered is not None else made
    builder.op_def = registry.get_op_def(op_def.name)
    return builder
