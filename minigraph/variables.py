"""`Variable`: TensorFlow 2.x graph mode's resource variable, and the graph's variable lists.

    v = Variable(scope, [1.0, 2.0], name="v")   # nodes v, v/Initializer/initial_value,
                                                 # v/IsInitialized/..., v/Assign, v/Read/...
    init = global_variables_initializer(scope)
    y = ops.Mul(scope, v, 2.0)                   # reads v afresh, in scope
    sess.run(init); sess.run(v.assign_add([1.0, 1.0])); sess.run(v)

A Variable is a handle (a VarHandleOp node) to state that each Session keeps for itself (see
`minigraph.resources`): a new session starts with it uninitialized, `sess.run(v.initializer)`
gives it its initial value, and reading it before is a FailedPreconditionError naming it.

Reads, as TF's: every use of a Variable as an op input (a builder argument, an operator) makes
a fresh ReadVariableOp in the consuming node's scope, with that scope's control dependencies,
so `scope.with_control_dependencies([v.assign(...)])` sees the assigned value. Fetching a
Variable, or feeding it, uses its own read made with it, `v.value()` (TF's graph element:
`v/Read/ReadVariableOp:0`); feeding it changes only what consumes that read. Every node a
Variable builds (reads, assigns, its initializer) is colocated with its VarHandleOp, so the
state lives on one device and the placer keeps these nodes there; none takes the device
request of the scope it is built in.

The nodes come from the op library (ops/resource_variables.py) by op type name, through the
registry: the runtime does not import it (`import ops` loads it).

Variable lists: each graph's Variables, in creation order, are in its collections (TF's
GraphKeys: `Graph.get_collection("variables")`), `global_variables(graph)` and
`trainable_variables(graph)`. Graphs imported from a GraphDef have VarHandleOps but no Variable
objects (TF keeps its collections in a MetaGraphDef).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from minigraph import dtypes
from minigraph.builder import OpBuilder, as_output
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError, NotFoundError
from minigraph.graph import Graph, Operation, Output, apply_operator, check_name, symbolic_message
from minigraph.registry import get_op_def
from minigraph.scope import Scope, current_scope
from minigraph.tensor_shape import TensorShape, as_shape

__all__ = [
    "GLOBAL_VARIABLES",
    "TRAINABLE_VARIABLES",
    "Variable",
    "global_variables",
    "trainable_variables",
    "global_variables_initializer",
    "variables_initializer",
]


def _op_def(op_type: str) -> Any:
    try:
        return get_op_def(op_type)
    except NotFoundError:
        raise NotFoundError(
            f"Variables are made of {op_type} nodes, an op of minigraph's op library: "
            "`import ops` registers it"
        ) from None


class Variable:
    """`Variable(scope, initial_value, dtype=None, shape=None, trainable=True, name=None)`:
    a resource variable, as TF 2.x graph mode's `tf.Variable`.

    Args:
        scope: where its nodes go (the name scope, a device request, a colocation); its
            control dependencies are not taken (TF's init_scope).
        initial_value: the value its initializer assigns: a tensor (Output, builder, another
            Variable: read when the initializer runs), a literal (numpy array, Python list or
            scalar, made a Const `<name>/Initializer/initial_value`), or a callable taking a
            Scope (`<name>/Initializer`) and returning one of those.
        dtype: converts a literal to it (a tensor must have it already); None: the value's.
        shape: the variable's declared shape, compatible with the initial value's; None: the
            initial value's, which must then be fully known. `TensorShape(None)` allows
            assigns of any shape.
        trainable: whether `trainable_variables` lists it (both lists do by default).
        name: the VarHandleOp's name ("Variable" by default), made unique in the scope.

    Raises:
        InvalidArgumentError: a bad argument, an initial value of another dtype than `dtype`
            or of a shape `shape` cannot have, or of an unknown shape with no `shape`.
    """

    __slots__ = (
        "_graph", "_handle", "_dtype", "_shape", "_trainable", "_initial_value",
        "_initializer", "_value", "_is_initialized", "_group", "__weakref__",
    )  # fmt: skip

    def __init__(
        self,
        scope: Scope,
        initial_value: Any,
        dtype: Any = None,
        shape: Any = None,
        trainable: bool = True,
        name: str | None = None,
    ):
        if not isinstance(scope, Scope):
            raise InvalidArgumentError(
                "Variable: the first argument must be a Scope (e.g. Scope.new_root_scope()); "
                f"got {type(scope).__name__}"
            )
        if not isinstance(trainable, bool):
            raise InvalidArgumentError(
                f"Variable: trainable must be a bool; got {type(trainable).__name__}"
            )
        base = "Variable" if name is None else name
        check_name(base, "variable")
        target = None if dtype is None else dtypes.as_dtype(dtype)
        if target is dtypes.resource:
            raise InvalidArgumentError("Variable: a variable cannot hold resource handles")
        declared = None if shape is None else as_shape(shape)
        if initial_value is None:
            raise InvalidArgumentError("Variable: initial_value must be given")
        graph = scope.graph
        with graph.transaction():
            self._build(scope, base, initial_value, target, declared, trainable)
        _register(self)

    def _build(
        self,
        scope: Scope,
        base: str,
        initial_value: Any,
        dtype: DType | None,
        declared: TensorShape | None,
        trainable: bool,
    ) -> None:
        graph = scope.graph
        prefix = scope.name_scope
        # The handle's name, taken below once its dtype and shape are known (the graph's lock
        # is held: nothing else can take it meanwhile).
        local = graph.unique_name(prefix, base, reserve=False)
        full = f"{prefix}/{local}" if prefix else local
        init_scope = Scope(graph, f"{full}/Initializer", None, None, (), None, "")
        value = self._initial(init_scope, initial_value, dtype, full)
        if value.dtype is dtypes.resource:
            raise InvalidArgumentError(
                f"Variable {full!r}: the initial value {value.name!r} is a resource handle"
            )
        if dtype is not None and value.dtype is not dtype:
            raise InvalidArgumentError(
                f"Variable {full!r}: dtype {dtype.name} was asked for, but the initial value "
                f"{value.name!r} is {value.dtype.name}"
            )
        if declared is None:
            if not value.shape.is_fully_defined():
                raise InvalidArgumentError(
                    f"Variable {full!r}: the initial value {value.name!r} has shape "
                    f"{value.shape}, not fully known: give the variable's shape (shape=..., "
                    "TensorShape(None) for any)"
                )
            declared = value.shape
        elif not value.shape.is_compatible_with(declared):
            raise InvalidArgumentError(
                f"Variable {full!r}: the initial value's shape ({value.shape}) is not "
                f"compatible with the explicitly supplied `shape` argument ({declared})"
            )
        attrs = {
            "container": "", "shared_name": full, "debug_name": full, "dtype": value.dtype,
            "shape": declared, "allowed_devices": [],
        }  # fmt: skip
        # The user's scope decides the handle's device request and colocation (a slot variable
        # made in `scope.colocate_with(var.op)` lives with its variable), not its dependencies.
        handle_scope = scope.with_no_control_dependencies().with_op_name(base)
        op = handle_scope.create_op(_op_def("VarHandleOp"), [], attrs, "VarHandleOp")
        if op.name != full:  # an initial-value callable took the name meanwhile
            raise InvalidArgumentError(
                f"Variable {full!r}: the initial value's nodes took the name {full!r} that the "
                f"variable's VarHandleOp needs (it got {op.name!r}); build them in the scope "
                "the callable is given"
            )
        self._graph = graph
        self._handle = op.outputs[0]
        self._dtype = value.dtype
        self._shape = declared
        self._trainable = trainable
        self._initial_value = value
        self._group = op.colocation_group
        self._is_initialized = self._node(
            self._scope(f"{full}/IsInitialized"), "VarIsInitializedOp", [self._handle], {}
        ).outputs[0]
        self._initializer = self._node(
            Scope(graph, full, "Assign", None, (), self._group, ""),
            "AssignVariableOp", [self._handle, value], {"dtype": value.dtype},
        )  # fmt: skip
        self._value = self._node(
            self._scope(f"{full}/Read"), "ReadVariableOp", [self._handle], {"dtype": value.dtype}
        ).outputs[0]

    def _initial(self, init_scope: Scope, value: Any, dtype: DType | None, full: str) -> Output:
        """The initial value as an Output (literals become a Const colocated with the handle:
        the group is the handle's name, which the handle gets)."""
        if callable(value) and not isinstance(value, (Output, OpBuilder, Variable)):
            value = value(init_scope)
        out = as_output(value, init_scope)
        if out is not None:
            if out.graph is not init_scope.graph:
                raise InvalidArgumentError(
                    f"Variable {full!r}: the initial value {out.name!r} belongs to another graph"
                )
            return out
        if isinstance(value, Operation):
            raise InvalidArgumentError(
                f"Variable {full!r}: the initial value is the Operation {value.name!r}; pass one "
                "of its outputs"
            )
        try:
            array = dtypes.convert_to_array(value, dtype)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(
                f"Variable {full!r}: cannot convert the initial value to a tensor: {e.message}"
            ) from None
        where = Scope(init_scope.graph, init_scope.name_scope, "initial_value", None, (), full, "")
        attrs = {"value": array, "dtype": dtypes.as_dtype(array.dtype)}
        return where.create_op(_op_def("Const"), [], attrs, "Const").outputs[0]

    def _scope(self, prefix: str) -> Scope:
        """A scope of name scope `prefix` whose nodes are colocated with the handle."""
        return Scope(self._graph, prefix, None, None, (), self._group, "")

    def _read(self, scope: Scope) -> Output:
        read = self._node(scope, "ReadVariableOp", [self._handle], {"dtype": self._dtype})
        return read.outputs[0]

    @staticmethod
    def _node(scope: Scope, op_type: str, inputs: list[Any], attrs: dict[str, Any]) -> Operation:
        return scope.create_op(_op_def(op_type), inputs, attrs, op_type)

    # -- properties ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """TF's variable name: the handle's, `v:0`."""
        return self._handle.name

    @property
    def op(self) -> Operation:
        """The VarHandleOp."""
        return self._handle.op

    @property
    def handle(self) -> Output:
        """The resource handle (the VarHandleOp's output, dtype resource)."""
        return self._handle

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        """The declared shape (what every value assigned must be compatible with)."""
        return self._shape

    def get_shape(self) -> TensorShape:
        """`shape` (TF's alias)."""
        return self._shape

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def device(self) -> str:
        """The device the VarHandleOp requests ('' for none)."""
        return self._handle.op.device

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def initializer(self) -> Operation:
        """The AssignVariableOp giving the variable its initial value (`v/Assign`)."""
        return self._initializer

    @property
    def initial_value(self) -> Output:
        return self._initial_value

    def value(self) -> Output:
        """The variable's own read, made with it (`v/Read/ReadVariableOp:0`): what fetching and
        feeding the Variable use (TF's graph element)."""
        return self._value

    def is_initialized(self) -> Output:
        """Whether the variable has a value in the running session (a bool scalar:
        `v/IsInitialized/VarIsInitializedOp:0`)."""
        return self._is_initialized

    # -- building ----------------------------------------------------------------------------------

    def _where(self, scope: Scope | None, op_name: str | None = None) -> Scope:
        """`scope` (default: the current scope of the variable's graph), for nodes colocated
        with the handle: its name scope and control dependencies, no device request."""
        if scope is None:
            scope = current_scope(self._graph)
        elif not isinstance(scope, Scope):
            raise InvalidArgumentError(f"scope must be a Scope; got {type(scope).__name__}")
        if scope.graph is not self._graph:
            raise InvalidArgumentError(
                f"variable {self.name!r} belongs to another graph than the scope using it"
            )
        if op_name is not None:
            check_name(op_name, "op")
        return Scope(
            self._graph, scope.name_scope, op_name, None, scope.control_dependencies,
            self._group, "",
        )  # fmt: skip

    def read_value(self, scope: Scope | None = None) -> Output:
        """A fresh read (`Read/ReadVariableOp` in `scope`, default the current scope), after the
        scope's control dependencies."""
        where = self._where(scope)
        with self._graph.transaction():  # the name scope is reserved only with the node
            return self._read(where.new_sub_scope("Read"))

    def _as_graph_output(self, scope: Scope | None) -> Output:
        """`minigraph.builder.as_output`'s protocol: a fresh read in the consuming node's scope,
        or (no scope: fetches and feeds) the variable's own read."""
        if scope is None:
            return self._value
        where = self._where(scope)
        return self._read(where)

    def sparse_read(
        self, indices: Any, scope: Scope | None = None, name: str | None = None, batch_dims: int = 0
    ) -> Output:
        """The rows `indices` name (ResourceGather: only those rows are read), as TF's
        `sparse_read`; `batch_dims` as ResourceGather's."""
        where = self._where(scope, name)
        attrs = {"dtype": self._dtype, "batch_dims": batch_dims}
        return self._node(where, "ResourceGather", [self._handle, indices], attrs).outputs[0]

    def assign(
        self, value: Any, read_value: bool = True, name: str | None = None, scope: Any = None
    ) -> Any:
        """Assigns `value` (AssignVariableOp in `scope`, default the current scope).

        Returns a read of the new value, which runs the assign first (fetching it gives the
        value), or with `read_value=False` the AssignVariableOp itself.

        Raises:
            InvalidArgumentError: a value of another dtype, or of a shape the variable's
                declared shape is not compatible with (both named).
        """
        return self._update("AssignVariableOp", "assign", value, read_value, name, scope)

    def assign_add(
        self, delta: Any, read_value: bool = True, name: str | None = None, scope: Any = None
    ) -> Any:
        """Adds `delta` (AssignAddVariableOp); returns as `assign` does."""
        return self._update("AssignAddVariableOp", "add", delta, read_value, name, scope)

    def assign_sub(
        self, delta: Any, read_value: bool = True, name: str | None = None, scope: Any = None
    ) -> Any:
        """Subtracts `delta` (AssignSubVariableOp); returns as `assign` does."""
        return self._update("AssignSubVariableOp", "subtract", delta, read_value, name, scope)

    def _update(
        self, op_type: str, verb: str, value: Any, read_value: bool, name: Any, scope: Any
    ) -> Any:
        if not isinstance(read_value, bool):
            raise InvalidArgumentError(
                f"read_value must be a bool; got {type(read_value).__name__}"
            )
        where = self._where(scope, name)
        with self._graph.transaction():
            out = as_output(value, where)
            if out is not None:
                if out.dtype is not self._dtype:
                    raise InvalidArgumentError(
                        f"Cannot {verb} a {out.dtype.name} value ({out.name!r}) "
                        f"{'to' if verb != 'subtract' else 'from'} variable {self.name!r} of "
                        f"dtype {self._dtype.name}"
                    )
                if not out.shape.is_compatible_with(self._shape):
                    raise InvalidArgumentError(
                        f"Cannot {verb} a value of shape {out.shape} ({out.name!r}) "
                        f"{'to' if verb != 'subtract' else 'from'} variable {self.name!r} of "
                        f"shape {self._shape}"
                    )
                value = out
            op = self._node(where, op_type, [self._handle, value], {"dtype": self._dtype})
            if not read_value:
                return op
            after = Scope(self._graph, where.name_scope, None, None, (op,), self._group, "")
            return self._read(after)

    # -- a Variable stands for its value ----------------------------------------------------------

    def _read_here(self) -> Output:
        return self._as_graph_output(current_scope(self._graph))

    def __getitem__(self, index: Any) -> Any:
        return apply_operator("getitem", self._read_here(), index)

    def __iter__(self) -> Any:
        raise TypeError(f"Variable {self.name!r} is symbolic: a tensor is not iterable")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(symbolic_message(f"Variable {self.name!r}", "a numpy array"))

    def __bool__(self) -> bool:
        raise TypeError(symbolic_message(f"Variable {self.name!r}", "a Python bool"))

    def __repr__(self) -> str:
        return f"<minigraph.Variable {self.name!r} shape={self._shape} dtype={self._dtype.name}>"


def _delegating(name: str) -> Any:
    def operator(self: Variable, *args: Any) -> Any:
        return getattr(self._read_here(), name)(*args)

    operator.__name__ = name
    operator.__doc__ = f"`Output.{name}` of a fresh read of the variable."
    return operator


for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
    "__rpow__", "__matmul__", "__rmatmul__", "__lt__", "__le__", "__gt__", "__ge__", "__and__",
    "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__neg__", "__abs__", "__invert__",
):  # fmt: skip
    setattr(Variable, _name, _delegating(_name))
Variable.__array_priority__ = 100  # numpy's operators defer to the reflected ones
del _name


# -- the graph's variables ---------------------------------------------------------------------

#: The graph collections (`Graph.get_collection`) of its Variables, as TF's GraphKeys.
GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"


def _register(variable: Variable) -> None:
    variable.graph.add_to_collection(GLOBAL_VARIABLES, variable)
    if variable.trainable:
        variable.graph.add_to_collection(TRAINABLE_VARIABLES, variable)


def _graph_of(value: Any, what: str) -> Graph:
    if isinstance(value, Graph):
        return value
    if isinstance(value, Scope):
        return value.graph
    raise InvalidArgumentError(f"{what} takes a Graph or a Scope; got {type(value).__name__}")


def global_variables(graph: Graph | Scope) -> list[Variable]:
    """The Variables built in `graph` (or a scope's graph), in creation order (TF's
    GLOBAL_VARIABLES collection)."""
    return _graph_of(graph, "global_variables").get_collection(GLOBAL_VARIABLES)


def trainable_variables(graph: Graph | Scope) -> list[Variable]:
    """The Variables of `graph` built with `trainable=True`, in creation order (TF's
    TRAINABLE_VARIABLES collection)."""
    return _graph_of(graph, "trainable_variables").get_collection(TRAINABLE_VARIABLES)


def variables_initializer(
    scope: Scope, var_list: Iterable[Variable], name: str = "init"
) -> Operation:
    """A NoOp (`name`, in `scope`) that runs the initializer of every variable of `var_list`."""
    if not isinstance(scope, Scope):
        raise InvalidArgumentError(
            f"variables_initializer takes a Scope first; got {type(scope).__name__}"
        )
    check_name(name, "op")
    variables = list(var_list)
    for v in variables:
        if not isinstance(v, Variable):
            raise InvalidArgumentError(
                f"variables_initializer: var_list holds Variables; got {type(v).__name__}"
            )
        if v.graph is not scope.graph:
            raise InvalidArgumentError(
                f"variables_initializer: {v.name!r} belongs to another graph than the scope"
            )
    deps = [v.initializer for v in variables]
    where = scope.with_no_control_dependencies().with_op_name(name)
    if deps:
        where = where.with_control_dependencies(deps)
    return where.create_op(get_op_def("NoOp"), [], {}, "NoOp")


def global_variables_initializer(scope: Scope) -> Operation:
    """A NoOp `init` (in `scope`) that runs the initializer of every variable of the scope's
    graph (TF's `tf.compat.v1.global_variables_initializer()`)."""
    if not isinstance(scope, Scope):
        raise InvalidArgumentError(
            f"global_variables_initializer takes a Scope; got {type(scope).__name__}"
        )
    return variables_initializer(scope, global_variables(scope.graph), "init")
