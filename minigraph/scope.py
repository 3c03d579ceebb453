"""`Scope`, mirroring `tensorflow::Scope` (tensorflow/cc/framework/scope.h).

A scope is an immutable value: the graph, a name scope, and the properties every op created
through it receives (explicit op name, device, control dependencies, colocation, kernel label).
Each `with_*` / `new_sub_scope` call returns a new scope sharing the graph.

Naming follows TF C++ exactly: ops are named after their type, uniquified per name scope
(`GatherNd`, `GatherNd_1`); sub-scopes nest with '/' and are uniquified in the same namespace
(`outer`, `outer_1`); `with_op_name("g")` twice gives `g` and `g_1`; suffixing skips names
already taken, so an explicit `g_1` is never clobbered.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.builder import OpBuilder, as_output
from minigraph.device_spec import DeviceSpec, as_device_spec
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError, ResourceExhaustedError
from minigraph.graph import (
    Graph,
    Operation,
    Output,
    check_name,
    const_value_key,
    user_source,
)
from minigraph.op_def import OpDef
from minigraph.registry import check_device_type, get_op_def

# as_output is builder.py's, re-exported here where callers have always found it.
__all__ = ["Scope", "as_output", "current_scope"]

# TF's node-name grammar (without '/', which only name scopes introduce). Used with fullmatch:
# `$` would also match before a trailing newline, and such names break the placement log.


class Scope:
    """An immutable construction context. Start with `Scope.new_root_scope()`."""

    __slots__ = ("graph", "_prefix", "_op_name", "_device", "_control", "_coloc", "_label")

    def __init__(
        self,
        graph: Graph,
        prefix: str = "",
        op_name: str | None = None,
        device: DeviceSpec | None = None,
        control: tuple[Operation, ...] = (),
        coloc: str | None = None,
        label: str = "",
    ):
        set_ = object.__setattr__
        set_(self, "graph", graph)
        set_(self, "_prefix", prefix)
        set_(self, "_op_name", op_name)
        set_(self, "_device", device)
        set_(self, "_control", control)
        set_(self, "_coloc", coloc)
        set_(self, "_label", label)

    def __setattr__(self, key, value):
        raise AttributeError("Scope is immutable; use the with_* methods")

    def _replace(self, **changes: Any) -> Scope:
        fields = {
            "graph": self.graph, "prefix": self._prefix, "op_name": self._op_name,
            "device": self._device, "control": self._control, "coloc": self._coloc,
            "label": self._label,
        }  # fmt: skip
        fields.update(changes)
        return Scope(**fields)

    # -- constructors ----------------------------------------------------------------------------

    @classmethod
    def new_root_scope(cls) -> Scope:
        """A scope over a new, empty graph."""
        return cls(Graph())

    def new_sub_scope(self, name: str) -> Scope:
        """A child name scope; its name is uniquified among this scope's names (`outer_1`).

        The explicit op name (if any) is not inherited; device, control dependencies,
        colocation and kernel label are.
        """
        if type(name) is str and name == "":
            return self._replace(op_name=None)
        check_name(name, "sub-scope")
        with self.graph.lock:
            unique = self.graph.unique_name(self._prefix, name, reserve=True)
        prefix = f"{self._prefix}/{unique}" if self._prefix else unique
        return self._replace(prefix=prefix, op_name=None)

    def with_op_name(self, name: str) -> Scope:
        """Ops created in the returned scope are named `name` (uniquified: `name_1`, ...)."""
        check_name(name, "op")
        return self._replace(op_name=name)

    def with_device(self, device: str | DeviceSpec | None) -> Scope:
        """Requests a device, full or partial (`/device:GPU:1`, `gpu`, `CPU:0`,
        `/job:worker/task:1/device:CPU:0`); '' clears.

        Raises:
            InvalidArgumentError: not a device name, or an unknown device type ("CPU", "GPU"
                and those added with `registry.register_device_type` are known).
        """
        spec = as_device_spec(device)
        if spec is not None and spec.device_type is not None:
            try:
                check_device_type(spec.device_type)
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"with_device({device!r}): {e.message}") from None
        return self._replace(device=spec)

    def with_control_dependencies(
        self, ops: Operation | Output | OpBuilder | Iterable[Any]
    ) -> Scope:
        """Ops created in the returned scope run after `ops` (added to the current ones)."""
        if isinstance(ops, (Operation, Output, OpBuilder)):
            ops = [ops]
        elif (
            isinstance(ops, (str, bytes))
            or not isinstance(ops, Iterable)
            or (isinstance(ops, np.ndarray) and ops.ndim == 0)  # iterable by type only
        ):
            raise InvalidArgumentError(
                "with_control_dependencies takes an Operation, Output or op builder, or a list "
                f"of them; got {type(ops).__name__}"
            )
        deps = list(self._control)
        for item in ops:
            op = _as_operation(item, "control dependency")
            if op.graph is not self.graph:
                raise InvalidArgumentError(f"control dependency {op.name!r} is in another graph")
            deps.append(op)
        return self._replace(control=tuple(dict.fromkeys(deps)))

    def with_no_control_dependencies(self) -> Scope:
        """A scope whose ops have no control dependencies."""
        return self._replace(control=())

    def colocate_with(self, op: Operation | Output | OpBuilder) -> Scope:
        """Ops created in the returned scope are placed on the same device as `op`."""
        target = _as_operation(op, "colocation target")
        if target.graph is not self.graph:
            raise InvalidArgumentError(f"colocation target {target.name!r} is in another graph")
        return self._replace(coloc=target.colocation_group)

    def clear_colocation(self) -> Scope:
        """A scope whose ops are not colocated with anything."""
        return self._replace(coloc=None)

    def with_kernel_label(self, label: str) -> Scope:
        """Ops created in the returned scope use kernels registered with this label."""
        if not isinstance(label, str) or not label.isprintable():
            raise InvalidArgumentError(
                f"a kernel label is a printable string (no newlines); got {label!r}"
            )
        return self._replace(label=label)

    # -- properties ------------------------------------------------------------------------------

    @property
    def name_scope(self) -> str:
        """The name scope ('' for the root, `outer/inner` when nested)."""
        return self._prefix

    @property
    def op_name(self) -> str | None:
        """The op name `with_op_name` gave (None when there is none): also the name scope of a
        composition built through this scope (`embedding_lookup`), as TF's `name=`."""
        return self._op_name

    @property
    def device(self) -> DeviceSpec | None:
        """The requested device (None when there is none)."""
        return self._device

    @property
    def control_dependencies(self) -> tuple[Operation, ...]:
        """The operations that ops created in this scope will run after."""
        return self._control

    @property
    def kernel_label(self) -> str:
        """The kernel label given to ops created in this scope ('' for none)."""
        return self._label

    # -- the default scope (operators, gradient rules) ----------------------------------------

    def as_default(self) -> _DefaultScope:
        """Makes this scope the one that code building nodes without a scope argument uses for
        its graph, in this thread or task: tensor operators (`x + 1`, `x[1:]`), gradient
        rules, `minigraph.gradients`. As TF 1.x's `graph.as_default()` with a name scope; the
        scope itself stays immutable, and blocks nest (`with scope.as_default(): ...`)."""
        return _DefaultScope(self)

    def __repr__(self) -> str:
        parts = [f"name_scope={self._prefix!r}"]
        if self._op_name:
            parts.append(f"op_name={self._op_name!r}")
        if self._device:
            parts.append(f"device={self._device.to_string()!r}")
        return f"<Scope {' '.join(parts)}>"

    # -- op creation (used by builders) ----------------------------------------------------------

    def create_op(
        self,
        op_def: OpDef,
        inputs: Sequence[Any],
        attrs: dict[str, Any],
        default_name: str | None = None,
        source: tuple[Any, int] | str | None = None,
    ) -> Operation:
        """Adds a node of `op_def` with these inputs (literals become Consts) and attrs: the
        op builders' entry point (`OpBuilder._build`); users call the builders.

        `source` is where user code asked for the node (found here when not given).
        """
        if source is None:
            source = user_source()
        graph = self.graph
        if op_def.has_list_inputs:
            return self._create_op_with_lists(op_def, inputs, attrs, default_name, source)
        outputs: list[Output | None] = []
        only_scalars = True  # whether every input that is no tensor is a Python scalar
        for value in inputs:
            if type(value) is not Output:
                if type(value) in _SCALARS:  # a literal (an axis): never a tensor-like object
                    outputs.append(None)
                    continue
                # Inline for builders, the usual input: their single output is in __dict__.
                single = value.__dict__.get("output") if isinstance(value, OpBuilder) else None
                # Objects that build their tensor (a Variable's read) do so under the lock below.
                value = single if single is not None else as_output(value, build=False)
                if value is None:
                    only_scalars = False
            outputs.append(value)
        if None not in outputs:  # Outputs compare by identity: this is a C-level scan
            return graph.add(
                op_def, outputs, attrs, self._prefix, self._op_name or default_name,
                self._device, self._control, self._coloc, self._label, source,
            )  # fmt: skip
        if only_scalars:
            op = self._create_with_scalar_literals(op_def, inputs, outputs, attrs, default_name,
                                                   source)  # fmt: skip
            if op is not None:
                return op
        with graph.lock:
            mark = graph.checkpoint()
            try:
                for i, value in enumerate(inputs):
                    if outputs[i] is None and type(value) not in _SCALARS:
                        outputs[i] = as_output(value, self)  # a Variable: a read in this scope
                hints = _DtypeHints(op_def, outputs, attrs)
                for i, value in enumerate(inputs):
                    if outputs[i] is None:
                        outputs[i] = self._literal(op_def, i, None, value, hints, source)
                op = graph.add(
                    op_def, outputs, attrs, self._prefix, self._op_name or default_name,
                    self._device, self._control, self._coloc, self._label, source,
                )  # fmt: skip
            except BaseException:
                graph.rollback(mark)
                raise
            graph.release(mark)
            return op

    def _create_with_scalar_literals(
        self,
        op_def: OpDef,
        inputs: Sequence[Any],
        outputs: list[Output | None],
        attrs: dict[str, Any],
        default_name: str | None,
        source: Any,
    ) -> Operation | None:
        """`create_op` for a node whose only literal inputs are Python scalars converted
        before (a literal axis, as `GatherV2(s, x, i, 0)`): the same Consts (from the memo
        `_literal_consts`) and node as the general path, in the same order, without its
        per-literal conversion steps. None (nothing added) when some literal is not memoised:
        the general path then converts it (and memoises it)."""
        args = op_def.inputs
        peers = _type_attr_peers(op_def)
        converted: dict[str, DType] | None = None  # type attr -> dtype of a literal before
        consts = []
        for i, value in enumerate(inputs):
            if outputs[i] is None:
                arg = args[i]
                hint = arg.dtype
                type_attr = arg.type_attr
                if hint is None and type_attr is not None:
                    # _DtypeHints, inline (no list args here): the dtype of the first tensor
                    # input bound to the same type attr, else of a literal converted before,
                    # else the attr's value.
                    for j in peers[i]:
                        out = outputs[j]
                        if out is not None:
                            hint = out._dtype
                            break
                    else:
                        if converted is not None:
                            hint = converted.get(type_attr)
                        if hint is None and type_attr in attrs:
                            hint = _as_dtype_or_none(attrs[type_attr])
                # Keys as `_literal` makes them (no key holds the float 0.0: its sign matters).
                hit = _literal_consts.get((type(value), value, hint))
                if hit is None:
                    return None
                if type_attr is not None:
                    if converted is None:
                        converted = {}
                    converted.setdefault(type_attr, hit[0])
                consts.append((i, hit[1], hit[2]))
        return self.graph.add_after_consts(
            _const_def(), consts, op_def, outputs, attrs, self._prefix,
            self._op_name or default_name, self._device, self._control, self._coloc,
            self._label, source,
        )  # fmt: skip

    def _create_op_with_lists(
        self,
        op_def: OpDef,
        inputs: Sequence[Any],
        attrs: dict[str, Any],
        default_name: str | None,
        source: Any,
    ) -> Operation:
        """`create_op` for ops with list args (`N * T`, type lists): such an input is a list
        whose elements may be Outputs, builders or literals."""
        graph = self.graph
        if len(inputs) != len(op_def.inputs):
            names = ", ".join(a.name for a in op_def.inputs)
            raise InvalidArgumentError(
                f"{op_def.name}: expected {len(op_def.inputs)} inputs ({names}), got {len(inputs)}"
            )
        # One entry per arg: an Output (or None for a literal), or a list of those.
        outputs: list[Any] = []
        for arg, value in zip(op_def.inputs, inputs):
            if not arg.is_list:
                outputs.append(as_output(value, build=False))
                continue
            if as_output(value, build=False) is not None or not isinstance(value, (list, tuple)):
                raise InvalidArgumentError(
                    f"{op_def.name}: input '{arg.name}' ({arg.type_text}) takes a list of "
                    f"tensors; got {type(value).__name__}"
                )
            outputs.append([as_output(v, build=False) for v in value])
        with graph.lock:
            mark = graph.checkpoint()
            try:
                for i, (arg, value) in enumerate(zip(op_def.inputs, inputs)):
                    # Variables: reads in this scope, before literals take their dtypes.
                    if not arg.is_list:
                        if outputs[i] is None:
                            outputs[i] = as_output(value, self)
                        continue
                    for k, element in enumerate(value):
                        if outputs[i][k] is None:
                            outputs[i][k] = as_output(element, self)
                hints = _DtypeHints(op_def, outputs, attrs)
                for i, (arg, value) in enumerate(zip(op_def.inputs, inputs)):
                    if not arg.is_list:
                        if outputs[i] is None:
                            outputs[i] = self._literal(op_def, i, None, value, hints, source)
                        continue
                    for k, element in enumerate(value):
                        if outputs[i][k] is None:
                            outputs[i][k] = self._literal(op_def, i, k, element, hints, source)
                op = graph.add(
                    op_def, outputs, attrs, self._prefix, self._op_name or default_name,
                    self._device, self._control, self._coloc, self._label, source,
                )  # fmt: skip
            except BaseException:
                graph.rollback(mark)
                raise
            graph.release(mark)
            return op

    def _literal(
        self,
        op_def: OpDef,
        i: int,
        element: int | None,
        value: Any,
        hints: _DtypeHints,
        source: Any,
    ) -> Output:
        arg = op_def.inputs[i]
        hint = hints.hint(arg, element)
        kind = type(value)
        if hint is None and kind in (list, tuple) and _empty_sequence(value):
            # An empty literal has no dtype of its own: as TF's op_def_library, it takes the
            # default of its type attr (`Sum(s, x, [])`: Tidx's int32), else tf.constant's.
            hint = _type_attr_default(op_def, arg)
        # Python scalars (literal axes, sizes) convert the same way every time, so their
        # Consts' canonical attrs and output specs are memoised (-0.0 is a key equal to 0.0).
        key = None
        if kind in _SCALARS and not (kind is float and value == 0.0):
            key = (kind, value, hint)
            hit = _literal_consts.get(key)
            if hit is not None:
                hints.converted(arg, hit[0])
                const = self.graph.add_const(_const_def(), self._prefix, source, *hit[1:])
                return const.outputs[0]
        if isinstance(value, Operation):
            raise InvalidArgumentError(
                f"{op_def.name}: input {_label(arg, element)} got the Operation {value.name!r}; "
                "pass one of its outputs (op.outputs[i])"
            )
        try:
            array = dtypes.convert_to_array(value, hint)
            array = dtypes.frozen_copy(array)  # what the Const holds: its copy checked here
        except (InvalidArgumentError, ResourceExhaustedError) as e:
            raise type(e)(
                f"{op_def.name}: cannot convert input {_label(arg, element)} to a tensor: "
                f"{e.message}"
            ) from None
        dtype = dtypes.as_dtype(array.dtype)
        hints.converted(arg, dtype)
        # Literal inputs become Consts in this name scope, as TF's Input::Initializer does, but
        # without the scope's op name, control dependencies or device request: as generator
        # nodes the placer puts them with their consumer (on the host for a host-memory input
        # such as GatherV2's axis), so they are never copied on each run.
        attrs = {"value": array, "dtype": dtype}
        const = self.graph.add(
            _const_def(), [], attrs, self._prefix, "Const", None, (), None, "", source
        )
        if key is not None:
            if len(_literal_consts) >= _LITERAL_MEMO_MAX:
                _literal_consts.clear()
            resolved = (const.attrs, const.output_specs)
            _literal_consts[key] = (dtype, resolved, const_value_key(const))
        return const.outputs[0]


# The scopes made default with Scope.as_default, innermost last (a context variable: each thread
# and asyncio task has its own).
_default_scopes: contextvars.ContextVar[tuple[Scope, ...]] = contextvars.ContextVar(
    "minigraph_default_scopes", default=()
)


class _DefaultScope:
    """The context manager of `Scope.as_default`: a class rather than a generator-based one,
    since the gradient machinery enters one per differentiated op (2.5x cheaper per use)."""

    __slots__ = ("_scope", "_token")

    def __init__(self, scope: Scope):
        self._scope = scope
        self._token: Any = None

    def __enter__(self) -> Scope:
        self._token = _default_scopes.set(_default_scopes.get() + (self._scope,))
        return self._scope

    def __exit__(self, *exc: Any) -> None:
        _default_scopes.reset(self._token)


def current_scope(graph: Graph) -> Scope:
    """The scope that nodes built for `graph` without an explicit scope go through: the
    innermost `Scope.as_default()` block over that graph, else the graph's root scope (no name
    scope, device or dependencies). Tensor operators and gradient rules build with it."""
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(
            f"current_scope takes a Graph (output.graph); got {type(graph).__name__}"
        )
    for scope in reversed(_default_scopes.get()):
        if scope.graph is graph:
            return scope
    return Scope(graph)


_SCALARS = (int, float, bool)
# (type, value, dtype hint) of a Python scalar literal -> (its dtype, (canonical Const attrs,
# output specs), value key): all immutable, so every Const made from that literal shares them.
_literal_consts: dict[tuple[Any, ...], tuple[DType, tuple[Any, Any], Any]] = {}
_LITERAL_MEMO_MAX = 1024


def _empty_sequence(value: Any) -> bool:
    """Whether `value` is a (possibly nested) list or tuple holding no element."""
    return isinstance(value, (list, tuple)) and all(_empty_sequence(v) for v in value)


def _type_attr_default(op_def: OpDef, arg: Any) -> DType | None:
    if arg.type_attr is None:
        return None
    attr_def = op_def.attr(arg.type_attr)
    return attr_def.default if attr_def.has_default else None


def _label(arg: Any, element: int | None) -> str:
    label = f"'{arg.name}'"
    return label if element is None else f"{label} (element {element})"


@functools.cache
def _const_def() -> OpDef:
    return get_op_def("Const")


class _DtypeHints:
    """The dtype each literal input should take, as TF's op_def_library decides it: a fixed
    input dtype, a type attr given explicitly, or the dtype of an input already converted for
    the same type attr (an Output, or a literal converted before it, in input order)."""

    def __init__(self, op_def: OpDef, outputs: list[Any], attrs: dict[str, Any]):
        self.attrs = attrs
        known: dict[str, DType] = {}  # type attr -> dtype of an input bound to it
        for (type_attr, is_list), out in zip(_input_type_attrs(op_def), outputs):
            if type_attr is not None:
                if not is_list:
                    if out is not None and type_attr not in known:
                        # A slot read: `out.dtype` costs +0.9% of building a 3000-node chain.
                        known[type_attr] = out._dtype
                    continue
                for element in out:
                    if element is not None:
                        known.setdefault(type_attr, element.dtype)
        self.known = known

    def hint(self, arg: Any, element: int | None) -> DType | None:
        if arg.dtype is not None:
            return arg.dtype
        if arg.type_list_attr is not None:
            given = self.attrs.get(arg.type_list_attr)
            if isinstance(given, (list, tuple)) and element is not None and element < len(given):
                return _as_dtype_or_none(given[element])
            return None
        known = self.known.get(arg.type_attr)
        if known is None and arg.type_attr in self.attrs:
            return _as_dtype_or_none(self.attrs[arg.type_attr])
        return known

    def converted(self, arg: Any, dtype: DType) -> None:
        if arg.type_attr is not None:
            self.known.setdefault(arg.type_attr, dtype)


@functools.cache
def _type_attr_peers(op_def: OpDef) -> tuple[tuple[int, ...], ...]:
    """Per input arg of `op_def`: the positions of the input args bound to the same type attr,
    in order (itself included; none for an input of a fixed dtype)."""
    attrs = [arg.type_attr for arg in op_def.inputs]
    return tuple(
        tuple(j for j, other in enumerate(attrs) if attr is not None and other == attr)
        for attr in attrs
    )


@functools.cache
def _input_type_attrs(op_def: OpDef) -> tuple[tuple[str | None, bool], ...]:
    """(type attr or None, is a list) per input arg of `op_def`."""
    return tuple((arg.type_attr, arg.is_list) for arg in op_def.inputs)


def _as_dtype_or_none(value: Any) -> DType | None:
    try:
        return dtypes.as_dtype(value)
    except InvalidArgumentError:
        return None  # reported by attr validation, with the node's context


def _as_operation(value: Any, what: str) -> Operation:
    if isinstance(value, Operation):
        return value
    if isinstance(value, Output):
        return value.op
    if isinstance(value, OpBuilder):
        return value.operation
    raise InvalidArgumentError(
        f"a {what} must be an Operation, Output or op builder; got {type(value).__name__}"
    )
