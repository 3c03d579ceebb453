"""Graph, Operation and Output.

A `Graph` is append-only: operations are added in creation order, each with its inputs already
in the graph, so cycles cannot be built. `Graph.add_operation` validates everything that is
knowable without data (input count and dtypes, attrs, shapes via the op's shape function) and
either commits the whole node or raises and leaves the graph exactly as it was.

Users do not call `add_operation` directly; op builders (`GatherNd(scope, ...)`) do, through
their `Scope`, which supplies the name, device, control dependencies and colocation.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from types import MappingProxyType
from typing import Any

import numpy as np

from minigraph.device_spec import DeviceSpec
from minigraph.dtypes import DType, resource
from minigraph.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    describe_exception,
)
from minigraph.op_def import MAX_LIST_OUTPUTS, OpDef, show_value
from minigraph.registry import operator_function
from minigraph.shape_inference import SEEN_THROUGH, SHAPE_DTYPES, InferenceContext
from minigraph.tensor_shape import MAX_RANK, TensorShape, as_shape

# Besides the user-facing classes, helpers the op builders (builder.py, scope.py) share.
__all__ = [
    "Graph",
    "Operation",
    "Output",
    "apply_operator",
    "check_name",
    "const_value_key",
    "install_graph_writers",
    "symbolic_message",
    "user_source",
]


class Output:
    """A symbolic handle to output `index` of `op`: what TF calls `tf::Output` / a Tensor.

    There is exactly one Output object per (op, index): `Output(op, i)` returns
    `op.outputs[i]`. Equality is therefore identity, and hashing is object hashing, which keeps
    feed dicts and plan caches on C-speed paths. `dtype` and `shape` are the statically
    inferred ones.
    """

    # Fields live in private slots behind read-only properties: assigning a public field
    # raises, while construction (one per output of every node) stays a few plain stores.
    __slots__ = ("_op", "_index", "_dtype", "_shape", "__weakref__")

    op = property(attrgetter("_op"), doc="The operation producing this output.")
    index = property(attrgetter("_index"), doc="Which output of `op`.")
    dtype = property(attrgetter("_dtype"), doc="The static dtype.")
    shape = property(attrgetter("_shape"), doc="The static (partial) shape.")

    def __new__(cls, op: Operation, index: int) -> Output:
        if not isinstance(index, int) or not 0 <= index < len(op.outputs):
            raise InvalidArgumentError(
                f"output index {index} out of range for {op.name!r}, which has "
                f"{len(op.outputs)} outputs"
            )
        return op.outputs[index]

    @property
    def name(self) -> str:
        """`op_name:index`, as TF names tensors."""
        return f"{self.op.name}:{self.index}"

    @property
    def graph(self) -> Graph:
        """The graph of `op`."""
        return self.op.graph

    def consumers(self) -> list[Operation]:
        """Operations that take this output as an input, in creation order."""
        return self.op.graph.consumers(self)

    # -- TF 1.x names (aliases, as tf.Tensor has them) --------------------------------------------

    @property
    def value_index(self) -> int:
        """TF 1.x's name of `index`."""
        return self._index

    @property
    def device(self) -> str:
        """The device requested for `op` ('' when none was), as TF 1.x's `Tensor.device`."""
        return self._op.device

    def get_shape(self) -> TensorShape:
        """TF 1.x's name of `shape`."""
        return self._shape

    # -- a symbolic tensor has no value ------------------------------------------------------------

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(symbolic_message(f"Output {self.name!r}", "a numpy array"))

    def __bool__(self) -> bool:
        raise TypeError(symbolic_message(f"Output {self.name!r}", "a Python bool"))

    def __repr__(self) -> str:
        return f"<Output {self.name!r} dtype={self.dtype.name} shape={self.shape}>"

    # -- operators: each builds a TF op through the op library's registered function -------------
    # (`==` and `!=` stay identity: Outputs are dictionary keys, as TF 1.x graph tensors.)

    #: numpy's binary operators defer to the reflected ones (`np_array + x` builds AddV2, not an
    #: object array), as for tf.Tensor; an explicit ufunc call (`np.add(x, 1)`) still asks for
    #: `__array__`, which says the tensor is symbolic.
    __array_priority__ = 100

    def __add__(self, other: Any) -> Output:
        return apply_operator("add", self, other)

    def __radd__(self, other: Any) -> Output:
        return apply_operator("add", other, self)

    def __sub__(self, other: Any) -> Output:
        return apply_operator("sub", self, other)

    def __rsub__(self, other: Any) -> Output:
        return apply_operator("sub", other, self)

    def __mul__(self, other: Any) -> Output:
        return apply_operator("mul", self, other)

    def __rmul__(self, other: Any) -> Output:
        return apply_operator("mul", other, self)

    def __truediv__(self, other: Any) -> Output:
        return apply_operator("truediv", self, other)

    def __rtruediv__(self, other: Any) -> Output:
        return apply_operator("truediv", other, self)

    def __floordiv__(self, other: Any) -> Output:
        return apply_operator("floordiv", self, other)

    def __rfloordiv__(self, other: Any) -> Output:
        return apply_operator("floordiv", other, self)

    def __mod__(self, other: Any) -> Output:
        return apply_operator("mod", self, other)

    def __rmod__(self, other: Any) -> Output:
        return apply_operator("mod", other, self)

    def __pow__(self, other: Any) -> Output:
        return apply_operator("pow", self, other)

    def __rpow__(self, other: Any) -> Output:
        return apply_operator("pow", other, self)

    def __matmul__(self, other: Any) -> Output:
        return apply_operator("matmul", self, other)

    def __rmatmul__(self, other: Any) -> Output:
        return apply_operator("matmul", other, self)

    def __lt__(self, other: Any) -> Output:
        return apply_operator("lt", self, other)

    def __le__(self, other: Any) -> Output:
        return apply_operator("le", self, other)

    def __gt__(self, other: Any) -> Output:
        return apply_operator("gt", self, other)

    def __ge__(self, other: Any) -> Output:
        return apply_operator("ge", self, other)

    def __and__(self, other: Any) -> Output:
        return apply_operator("and", self, other)

    def __rand__(self, other: Any) -> Output:
        return apply_operator("and", other, self)

    def __or__(self, other: Any) -> Output:
        return apply_operator("or", self, other)

    def __ror__(self, other: Any) -> Output:
        return apply_operator("or", other, self)

    def __xor__(self, other: Any) -> Output:
        return apply_operator("xor", self, other)

    def __rxor__(self, other: Any) -> Output:
        return apply_operator("xor", other, self)

    def __neg__(self) -> Output:
        return apply_operator("neg", self)

    def __abs__(self) -> Output:
        return apply_operator("abs", self)

    def __invert__(self) -> Output:
        return apply_operator("invert", self)

    def __getitem__(self, key: Any) -> Output:
        return apply_operator("getitem", self, key)

    def __iter__(self) -> Iterator[Any]:
        # Without this, `__getitem__` would make every Output iterable (x[0], x[1], ... until
        # an error), endlessly for an unknown length. TF refuses it for graph tensors too.
        raise TypeError(
            f"Output {self.name!r} is a symbolic tensor and is not iterable; index it "
            "(x[i]) or split it with Unpack"
        )

    __hash__ = object.__hash__  # identity, as __eq__


_OPERATOR_SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "pow": "**", "matmul": "@", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&",
    "or": "|", "xor": "^", "neg": "unary -", "abs": "abs()", "invert": "~", "getitem": "x[...]",
}  # fmt: skip


def apply_operator(name: str, *operands: Any) -> Any:
    """Builds tensor operator `name` over `operands` with the function the op library
    registered (`minigraph.registry.register_operator`); the runtime defines none itself."""
    fn = operator_function(name)
    if fn is None:
        raise TypeError(
            f"the operator {_OPERATOR_SYMBOLS[name]} on tensors is defined by an op library, and "
            "none is loaded: `import ops` (minigraph's op library) registers them"
        )
    return fn(*operands)


def symbolic_message(what: str, target: str) -> str:
    """TF's refusal to use a graph tensor as a value, with the way to get its value."""
    return (
        f"{what} is a symbolic tensor: it has no value to convert to {target} until a Session "
        "runs it. Fetch its value with Session(scope).run(...), then use the numpy array."
    )


def _new_output(op: Operation, index: int, dtype: DType, shape: TensorShape) -> Output:
    # The one place that creates Outputs, called by Operation.__init__.
    out = _object_new(Output)
    out._op = op
    out._index = index
    out._dtype = dtype
    out._shape = shape
    return out


_object_new = object.__new__


class Operation:
    """A node of the graph. Created by `Graph.add_operation`; read-only afterwards."""

    # As Output: private slots, read-only public properties, cheap construction.
    __slots__ = (
        "_graph", "_name", "_type", "_op_def", "_inputs", "_control_inputs", "_attrs",
        "_requested_device", "_colocation_group", "_kernel_label", "_source", "_outputs",
        "_output_specs", "_index", "_value_key",
    )  # fmt: skip

    graph = property(attrgetter("_graph"))
    name = property(attrgetter("_name"), doc="Unique name in the graph.")
    type = property(attrgetter("_type"), doc="The op type, e.g. 'GatherV2'.")
    op_def = property(attrgetter("_op_def"))
    inputs = property(attrgetter("_inputs"))
    control_inputs = property(attrgetter("_control_inputs"))
    requested_device = property(
        attrgetter("_requested_device"), doc="The device asked for by the scope, or None."
    )
    colocation_group = property(
        attrgetter("_colocation_group"), doc="Nodes with the same group share a device."
    )
    kernel_label = property(attrgetter("_kernel_label"))

    @property
    def source(self) -> str:
        """`file:line` of the user code that created the node."""
        source = self._source
        if type(source) is not str:
            source = self._source = _format_source(source)
        return source

    outputs = property(attrgetter("_outputs"))
    output_specs = property(
        attrgetter("_output_specs"), doc="(dtype, static shape) of each output, as a tuple."
    )
    creation_index = property(
        attrgetter("_index"),
        doc="The node's position in creation order (topological: the graph is append-only).",
    )

    def __init__(
        self,
        graph: Graph,
        name: str,
        op_def: OpDef,
        inputs: tuple[Output, ...],
        control_inputs: tuple[Operation, ...],
        attrs: Mapping[str, Any],
        requested_device: DeviceSpec | None,
        colocation_group: str,
        kernel_label: str,
        source: tuple[Any, int] | str,
        output_specs: tuple[tuple[DType, TensorShape], ...],
        index: int,
    ):
        self._graph = graph
        self._name = name
        self._type = op_def.name
        self._op_def = op_def
        self._inputs = inputs
        self._control_inputs = control_inputs
        self._attrs = attrs
        self._requested_device = requested_device
        self._colocation_group = colocation_group
        self._kernel_label = kernel_label
        self._source = source
        self._output_specs = output_specs
        self._index = index
        self._value_key = None  # see _shape_key
        if len(output_specs) == 1:
            self._outputs = (_new_output(self, 0, *output_specs[0]),)
        else:
            self._outputs = tuple(
                [
                    _new_output(self, i, dtype, shape)
                    for i, (dtype, shape) in enumerate(output_specs)
                ]
            )

    attrs = property(attrgetter("_attrs"), doc="The canonical attr values (read-only mapping).")

    def get_attr(self, name: str) -> Any:
        """The canonical value of attr `name` (NotFoundError names the attrs there are)."""
        try:
            return self._attrs[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            if not isinstance(name, str):
                raise InvalidArgumentError(
                    f"get_attr on node {self.name!r} ({self.type}): an attr name is a string; "
                    f"got {type(name).__name__} {show_value(name)}",
                    self.name,
                    self.type,
                ) from None
            raise NotFoundError(
                f"node {self.name!r} ({self.type}) has no attr {name!r}; "
                f"it has {sorted(self._attrs)}",
                self.name,
                self.type,
            ) from None

    @property
    def device(self) -> str:
        """The requested device as a string ('' when none was requested)."""
        return "" if self.requested_device is None else self.requested_device.to_string()

    def values(self) -> tuple[Output, ...]:
        """The outputs (TF 1.x's `Operation.values()`)."""
        return self._outputs

    @property
    def output(self) -> Output:
        """The only output (raises for ops with zero or several outputs)."""
        if len(self.outputs) != 1:
            raise InvalidArgumentError(
                f"{self.name!r} ({self.type}) has {len(self.outputs)} outputs; use .outputs[i]",
                self.name,
                self.type,
            )
        return self.outputs[0]

    def __repr__(self) -> str:
        return f"<Operation {self.name!r} type={self.type}>"

    def node_def(self) -> str:
        """A one-line, NodeDef-like text of the node, for logs and errors."""
        attrs = ", ".join(f"{k}={show_value(v)}" for k, v in sorted(self._attrs.items()))
        ins = ", ".join(i.name for i in self.inputs)
        ctrl = ", ".join("^" + c.name for c in self.control_inputs)
        args = ", ".join(x for x in (ins, ctrl) if x)
        return f"{self.name} = {self.type}[{attrs}]({args})"


def _internal_dirs() -> tuple[str, ...]:
    # Frames in these directories are framework code; the first frame outside them is where the
    # user created the node. They are found by file location, never by module name: a user's
    # own `ops.py` may be what `import ops` finds, and its frames are user code. The op library
    # that ships with minigraph (`ops/`) is installed next to `minigraph/`.
    package = os.path.dirname(os.path.abspath(__file__))
    library = os.path.join(os.path.dirname(package), "ops")
    return tuple(os.path.join(d, "") for d in (package, library))


_INTERNAL_DIRS = _internal_dirs()


def user_source(depth: int = 2) -> tuple[Any, int] | str:
    """`file:line` of the innermost frame outside minigraph/ and its ops/, looking from `depth`
    frames above this one (callers that know how deep they are skip the framework frames)."""
    internal = _INTERNAL_DIRS
    # sys._getframe(n) reaches frame n without materialising the frames in between, which
    # walking f_back from the innermost frame would do (one allocation per frame).
    frame = sys._getframe(depth)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(internal):
            # The line number is decoded only if someone asks (Operation.source): finding it
            # from the instruction offset costs more than everything else here.
            return (code, frame.f_lasti)
        frame = frame.f_back
    return "<unknown>"


def _format_source(source: tuple[Any, int] | str) -> str:
    if isinstance(source, str):
        return source
    code, offset = source
    for start, end, line in code.co_lines():
        if start <= offset < end:
            return f"{code.co_filename}:{line}"
    return f"{code.co_filename}:{code.co_firstlineno}"


# Unknown-name suggestions: graphs with up to this many nodes are searched in full; larger ones
# only within this many names of where the unknown name sorts.
_SUGGEST_ALL = 2000
_SUGGEST_WINDOW = 200


# TF's node-name grammar, per name-scope part.
_NAME_RE = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-]*")


def check_name(name: str, what: str) -> None:
    """Refuses a name that TF's node-name grammar rejects (`what`: "op", "sub-scope", ...)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidArgumentError(
            f"invalid {what} name {name!r}: use letters, digits, '_', '.', '-' "
            "(not starting with '_' or '-'; no '/': nest with new_sub_scope)"
        )


def _checked_add_arguments(
    op_def: Any,
    inputs: Any,
    attrs: Any,
    prefix: Any,
    base_name: Any,
    requested_device: Any,
    control_inputs: Any,
    colocation_group: Any,
    kernel_label: Any,
    source: Any,
) -> tuple[list[Any], DeviceSpec | None, tuple[Operation, ...]]:
    """`add_operation`'s arguments checked by type and canonicalised (a device string becomes
    a DeviceSpec): (inputs, requested_device, control_inputs). What depends on the op (input
    counts, dtypes, attr values) is `add`'s to check."""

    def bad(what: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"Graph.add_operation: {what}")

    if not isinstance(op_def, OpDef):
        raise bad(
            f"op_def must be an OpDef (minigraph.registry.get_op_def(op_type)); got "
            f"{type(op_def).__name__} {show_value(op_def)}"
        )
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise bad(
            f"inputs must be a list with one entry per input arg; got {type(inputs).__name__}"
        )
    checked = []
    for i, entry in enumerate(inputs):
        if type(entry) is Output:
            checked.append(entry)
            continue
        if isinstance(entry, (list, tuple)) and all(type(x) is Output for x in entry):
            checked.append(list(entry))  # a list arg's elements
            continue
        hint = ""
        if hasattr(entry, "outputs"):  # an op builder or an Operation
            hint = " (pass one of its outputs: `.output`, `.outputs[k]`)"
        raise bad(
            f"inputs[{i}] must be an Output, or a list of Outputs for a list arg; got "
            f"{type(entry).__name__}{hint}"
        )
    if not isinstance(attrs, Mapping):
        raise bad(f"attrs must be a mapping of attr name to value; got {type(attrs).__name__}")
    if not isinstance(prefix, str):
        raise bad(f"prefix must be a name scope string; got {type(prefix).__name__}")
    for part in prefix.split("/") if prefix else ():
        check_name(part, "name-scope")
    if base_name is not None:
        if not isinstance(base_name, str):
            raise bad(f"base_name must be a node name or None; got {type(base_name).__name__}")
        for part in base_name.split("/"):  # a name inside the prefix may nest scopes itself
            check_name(part, "op")
    if isinstance(requested_device, str):
        requested_device = DeviceSpec.from_string(requested_device)
    elif requested_device is not None and not isinstance(requested_device, DeviceSpec):
        raise bad(
            "requested_device must be a DeviceSpec, a device string or None; got "
            f"{type(requested_device).__name__}"
        )
    if isinstance(control_inputs, (str, bytes)) or not isinstance(control_inputs, Sequence):
        raise bad(
            f"control_inputs must be a list of Operations; got {type(control_inputs).__name__}"
        )
    for i, dep in enumerate(control_inputs):
        if type(dep) is not Operation:
            hint = " (pass its `.op`)" if type(dep) is Output else ""
            raise bad(f"control_inputs[{i}] must be an Operation; got {type(dep).__name__}{hint}")
    if colocation_group is not None and not isinstance(colocation_group, str):
        raise bad(
            f"colocation_group must be a node name or None; got {type(colocation_group).__name__}"
        )
    if not isinstance(kernel_label, str):
        raise bad(f"kernel_label must be a string; got {type(kernel_label).__name__}")
    if (
        source is not None
        and not isinstance(source, str)
        and not (isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], int))
    ):
        raise bad(f"source must be 'file:line', a (code, line) pair or None; got {source!r}")
    return checked, requested_device, tuple(control_inputs)


class Graph:
    """A dataflow graph: operations in creation order, with unique names.

    Users add nodes with op builders, `add_operation` and `transaction`. `Scope` uses the
    lower-level construction protocol below them: `lock` (an RLock held while the graph
    changes), `unique_name`, `add` (`add_operation` with positional arguments), `add_const`,
    and `checkpoint` / `rollback` / `release`, which undo a failed builder call.
    """

    def __init__(self) -> None:
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        # Per name scope: {name: last suffix}, as TF's Scope::Impl::name_map_.
        self._name_maps: dict[str, dict[str, int]] = {}
        self.lock = threading.RLock()  # the construction protocol's lock (see the class doc)
        # Undo log of name-map writes, kept only while a builder call may still fail (see
        # `checkpoint`): a builder that added Const nodes for literal inputs and then fails
        # must leave the graph exactly as it was.
        self._journal: list[tuple[dict[str, int], str, int | None]] | None = None
        self._finalized = False
        # Node names in sorted order, for suggestions in large graphs (see _close_names).
        self._sorted_names: tuple[Any, list[str]] | None = None
        self._collections: dict[str, list[Any]] = {}

    # -- collections (TF 1.x's Graph.add_to_collection) -----------------------------------------

    def add_to_collection(self, name: str, value: Any) -> None:
        """Appends `value` to the collection `name` (TF's graph collections: the Variables
        of a graph are in "variables" and "trainable_variables"); the graph keeps it alive."""
        if not isinstance(name, str):
            raise InvalidArgumentError(f"a collection name is a str; got {type(name).__name__}")
        with self.lock:
            self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str) -> list[Any]:
        """The values of collection `name`, in the order they were added (a new list)."""
        if not isinstance(name, str):
            raise InvalidArgumentError(f"a collection name is a str; got {type(name).__name__}")
        with self.lock:
            return list(self._collections.get(name, ()))

    # -- naming (used by Scope) -----------------------------------------------------------------

    def unique_name(self, prefix: str, base: str, reserve: bool) -> str:
        """TF's Scope::Impl::GetUniqueName within the name scope `prefix` (construction
        protocol; the caller holds `lock`)."""
        if reserve and self._finalized:
            raise self._finalized_error(f"the name scope {base!r}")
        local, names, count = self._peek_name(prefix, base)
        if reserve:
            self._reserve_name(names, base, local, count)
        return local

    # -- finalize (TF 1.x's Graph.finalize) ------------------------------------------------------

    def finalize(self) -> None:
        """Makes the graph read-only: adding a node (or a name scope) afterwards raises
        FailedPreconditionError, as TF 1.x's `Graph.finalize` (useful to catch code that keeps
        building nodes in a loop of Session.run calls). Running it is unaffected."""
        with self.lock:
            self._finalized = True

    @property
    def finalized(self) -> bool:
        """True once `finalize()` was called."""
        return self._finalized

    def _finalized_error(self, what: str) -> FailedPreconditionError:
        return FailedPreconditionError(
            f"Graph is finalized and cannot be modified: cannot add {what} "
            f"(the graph has {len(self._ops)} operations)"
        )

    def _peek_name(self, prefix: str, base: str) -> tuple[str, dict[str, int], int]:
        """The unique name `base` would get, without taking it: (name, name map, suffix)."""
        names = self._name_maps.get(prefix)
        if names is None:
            names = self._name_maps[prefix] = {}
        count = names.get(base)
        if count is None:
            return base, names, 0
        while True:
            count += 1
            candidate = f"{base}_{count}"
            if candidate not in names:
                return candidate, names, count

    def _reserve_name(self, names: dict[str, int], base: str, local: str, count: int) -> None:
        journal = self._journal
        if journal is not None:  # _log, inline: once per node built in a checkpoint
            journal.append((names, base, names.get(base)))
            if local != base:
                journal.append((names, local, names.get(local)))
        if local == base:
            names[base] = 0
        else:
            names[base] = count
            names[local] = 0

    def _log(self, names: dict[str, int], key: str) -> None:
        if self._journal is not None:
            self._journal.append((names, key, names.get(key)))

    def checkpoint(self) -> tuple[int, int, bool]:
        """Marks the current state (construction protocol); the caller holds `lock` until
        `rollback` or `release`."""
        fresh = self._journal is None
        if fresh:
            self._journal = []
        return (len(self._ops), len(self._journal), fresh)

    def release(self, mark: tuple[int, int, bool]) -> None:
        """Keeps everything added since `mark` (construction protocol)."""
        if mark[2]:
            self._journal = None

    def rollback(self, mark: tuple[int, int, bool]) -> None:
        """Removes every operation and name reservation made since `mark` (construction
        protocol). A mark this graph's open checkpoint cannot have made is refused before
        anything is removed (failure paths only: the check costs no successful build)."""
        journal = self._journal
        if not (
            type(mark) is tuple
            and len(mark) == 3
            and type(mark[0]) is int
            and type(mark[1]) is int
            and type(mark[2]) is bool
            and journal is not None
            and 0 <= mark[0] <= len(self._ops)
            and 0 <= mark[1] <= len(journal)
        ):
            raise InvalidArgumentError(
                f"Graph.rollback: {mark!r} is not a mark of this graph's open checkpoint (take "
                "one with checkpoint() while holding the graph's lock)"
            )
        n_ops, n_log, _ = mark
        while len(self._ops) > n_ops:
            op = self._ops.pop()
            del self._by_name[op.name]
        while len(journal) > n_log:
            names, key, old = journal.pop()
            if old is None:
                names.pop(key, None)
            else:
                names[key] = old
        self.release(mark)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Graph]:
        """Adds several nodes as one unit: `with graph.transaction(): ...` holds the graph's lock
        for the block, and if the block raises, every node and name reserved in it is removed,
        leaving the graph exactly as before (import_graph_def builds a whole GraphDef so)."""
        with self.lock:
            mark = self.checkpoint()
            try:
                yield self
            except BaseException:
                self.rollback(mark)
                raise
            self.release(mark)

    # -- construction ----------------------------------------------------------------------------

    def add_operation(
        self,
        op_def: OpDef,
        inputs: Sequence[Output | Sequence[Output]],
        attrs: Mapping[str, Any],
        *,
        prefix: str = "",
        base_name: str | None = None,
        requested_device: DeviceSpec | None = None,
        control_inputs: Sequence[Operation] = (),
        colocation_group: str | None = None,
        kernel_label: str = "",
        source: tuple[Any, int] | str | None = None,
    ) -> Operation:
        """Validates and adds a node; returns its Operation. On error nothing is added.

        `inputs` holds one entry per input arg of `op_def`: an Output, or a list of Outputs for
        a list arg (`N * T`, a type list). The Operation's `inputs` are flat, as a NodeDef's.

        Raises:
            InvalidArgumentError: wrong input count or dtypes, bad attrs, or a shape function
                error; the message names the op type and the node.
        """
        inputs, requested_device, control_inputs = _checked_add_arguments(
            op_def, inputs, attrs, prefix, base_name, requested_device, control_inputs,
            colocation_group, kernel_label, source,
        )  # fmt: skip
        if source is None:
            source = user_source()
        return self.add(
            op_def, inputs, attrs, prefix, base_name, requested_device, control_inputs,
            colocation_group, kernel_label, source,
        )  # fmt: skip

    def add(
        self,
        op_def: OpDef,
        inputs: Sequence[Output],
        attrs: Mapping[str, Any],
        prefix: str,
        base_name: str | None,
        requested_device: DeviceSpec | None,
        control_inputs: Sequence[Operation],
        colocation_group: str | None,
        kernel_label: str,
        source: tuple[Any, int] | str,
    ) -> Operation:
        """`add_operation` with positional arguments and a known `source` (construction
        protocol: Scope's path, called once per node)."""
        with self.lock:
            if self._finalized:
                raise self._finalized_error(f"a node of type {op_def.name}")
            base = base_name or op_def.name
            local, names, count = self._peek_name(prefix, base)
            name = f"{prefix}/{local}" if prefix else local
            if name in self._by_name:
                raise InvalidArgumentError(f"Duplicate node name in graph: {name!r}", name)
            lengths = None
            if op_def.has_list_inputs:
                ctx = f"{op_def.name} '{name}'"
                inputs, lengths = _flatten_list_args(op_def, inputs, ctx, name)
            for inp in inputs:
                if inp._op._graph is not self:
                    raise InvalidArgumentError(
                        f"{op_def.name} '{name}': input {inp.name!r} belongs to a different graph",
                        name,
                    )
            for dep in control_inputs:
                if dep.graph is not self:
                    raise InvalidArgumentError(
                        f"{op_def.name} '{name}': control input {dep.name!r} belongs to a "
                        "different graph",
                        name,
                    )
            canonical, specs = _resolve_node(op_def, inputs, attrs, name, lengths)
            op = Operation(
                self,
                name,
                op_def,
                tuple(inputs),
                tuple(dict.fromkeys(control_inputs)) if control_inputs else (),
                canonical,
                requested_device,
                colocation_group or name,
                kernel_label,
                source,
                specs,
                len(self._ops),
            )
            # Commit: nothing below can fail.
            self._reserve_name(names, base, local, count)
            self._by_name[name] = op
            self._ops.append(op)
            return op

    def add_const(
        self,
        op_def: OpDef,
        prefix: str,
        source: tuple[Any, int] | str,
        resolved: tuple[Mapping[str, Any], tuple[Any, ...]],
        value_key: Any,
    ) -> Operation:
        """A Const from a memoised literal (construction protocol): `add` for a node without
        inputs whose canonical attrs, output specs and value key are known (`value_key` as
        `const_value_key` gives it). The caller holds `lock`."""
        if self._finalized:
            raise self._finalized_error("a node of type Const")
        local, names, count = self._peek_name(prefix, "Const")
        name = f"{prefix}/{local}" if prefix else local
        if name in self._by_name:
            raise InvalidArgumentError(f"Duplicate node name in graph: {name!r}", name)
        canonical, specs = resolved
        op = Operation(
            self, name, op_def, (), (), canonical, None, name, "", source, specs, len(self._ops)
        )
        op._value_key = value_key
        self._reserve_name(names, "Const", local, count)
        self._by_name[name] = op
        self._ops.append(op)
        return op

    def add_after_consts(
        self,
        const_def: OpDef,
        consts: Sequence[tuple[int, tuple[Mapping[str, Any], tuple[Any, ...]], Any]],
        op_def: OpDef,
        inputs: list[Output | None],
        attrs: Mapping[str, Any],
        prefix: str,
        base_name: str | None,
        requested_device: DeviceSpec | None,
        control_inputs: Sequence[Operation],
        colocation_group: str | None,
        kernel_label: str,
        source: tuple[Any, int] | str,
    ) -> Operation:
        """Memoised literal Consts (`add_const`), then the node that reads them (`add`), as one
        unit (construction protocol: Scope's path for scalar literal inputs). `consts` holds
        (input position, resolved, value key) per Const; `inputs` has None at those positions,
        filled in place. If anything fails, the Consts are removed and the graph is as before.
        Without an open checkpoint this undoes its own few steps instead of journaling them
        (the journal costs ~15% of building such a node)."""
        with self.lock:
            journal = self._journal
            if journal is None:
                n_ops = len(self._ops)
                names = self._name_maps.get(prefix)
                base = base_name or op_def.name
                before = (None, None) if names is None else (names.get("Const"), names.get(base))
            else:
                mark = self.checkpoint()  # inside a transaction: its journal records the names
            try:
                for i, resolved, value_key in consts:
                    const = self.add_const(const_def, prefix, source, resolved, value_key)
                    inputs[i] = const._outputs[0]
                return self.add(
                    op_def, inputs, attrs, prefix, base_name, requested_device, control_inputs,
                    colocation_group, kernel_label, source,
                )  # fmt: skip
            except BaseException:
                if journal is None:
                    self._remove_since(n_ops, prefix, (("Const", before[0]), (base, before[1])))
                else:
                    self.rollback(mark)
                raise

    def _remove_since(
        self, n_ops: int, prefix: str, counters: tuple[tuple[str, int | None], ...]
    ) -> None:
        """Removes the operations added (in `prefix`, outside a checkpoint) since the graph had
        `n_ops`, with their names; `counters` gives the name map's entries of their base
        names before them (None: absent). Each removed name was new when reserved."""
        names = self._name_maps.get(prefix, {})
        start = len(prefix) + 1 if prefix else 0
        while len(self._ops) > n_ops:
            op = self._ops.pop()
            del self._by_name[op._name]
            names.pop(op._name[start:], None)
        for key, count in counters:
            if count is None:
                names.pop(key, None)
            else:
                names[key] = count

    # -- look-up ---------------------------------------------------------------------------------

    @property
    def operations(self) -> list[Operation]:
        """All operations in creation order (a copy)."""
        return list(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[Operation]:
        return iter(list(self._ops))

    def __contains__(self, name: str) -> bool:
        """Whether a node is called `name` (a string: `op.name in graph`)."""
        if type(name) is not str and not isinstance(name, str):
            hint = " (test its .name)" if isinstance(name, (Operation, Output)) else ""
            raise InvalidArgumentError(
                f"`in graph` takes a node name (a string); got {type(name).__name__}{hint}"
            )
        return name in self._by_name

    def get_operation(self, name: str) -> Operation:
        """The operation called `name`.

        Raises:
            NotFoundError: no such node; close names are suggested.
        """
        if not isinstance(name, str):
            raise InvalidArgumentError(f"a node name is a string; got {type(name).__name__}")
        op = self._by_name.get(name)
        if op is None:
            close = self._close_names(name)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise NotFoundError(f"The graph has no node named {name!r}.{hint}", name)
        return op

    def _close_names(self, name: str) -> list[str]:
        """Up to 3 names like `name`, in time bounded whatever the graph's size: small graphs
        are searched in full, large ones only around where `name` sorts (a typo after the
        first characters keeps a name there). The sorted names are kept until the graph
        changes."""
        import bisect  # noqa: PLC0415 - error path only
        import difflib  # noqa: PLC0415

        if len(self._by_name) <= _SUGGEST_ALL:
            candidates = list(self._by_name)
        else:
            ops = self._ops
            state = (len(ops), ops[-1] if ops else None)  # append-only, or rolled back at the end
            cached = self._sorted_names
            if cached is None or cached[0] != state:
                cached = self._sorted_names = (state, sorted(self._by_name))
            ordered = cached[1]
            i = bisect.bisect_left(ordered, name)
            candidates = ordered[max(0, i - _SUGGEST_WINDOW) : i + _SUGGEST_WINDOW]
        return difflib.get_close_matches(name, candidates, n=3)

    def get_output(self, name: str) -> Output:
        """The output called `"op:i"` (or `"op"` for output 0)."""
        if not isinstance(name, str):
            raise InvalidArgumentError(f"a tensor name is a string 'op:i'; got {name!r}")
        op_name, sep, index = name.rpartition(":")
        if not sep or not index.isdigit():
            op_name, index = name, "0"
        op = self.get_operation(op_name)
        i = int(index)
        if i >= len(op.outputs):
            raise NotFoundError(
                f"node {op_name!r} ({op.type}) has {len(op.outputs)} outputs; "
                f"{name!r} does not exist",
                op_name,
                op.type,
            )
        return op.outputs[i]

    # -- TF 1.x names (aliases) --------------------------------------------------------------

    def get_operations(self) -> list[Operation]:
        """All operations in creation order (TF 1.x's name of `operations`)."""
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        """TF 1.x's name of `get_operation`."""
        return self.get_operation(name)

    def get_tensor_by_name(self, name: str) -> Output:
        """The output called `"op:i"`, as TF 1.x's `Graph.get_tensor_by_name`.

        Raises:
            InvalidArgumentError: `name` is not of the form `op:i` (TF requires the index).
            NotFoundError: no such node or output.
        """
        if not isinstance(name, str):
            raise InvalidArgumentError(f"a tensor name is a string 'op:i'; got {name!r}")
        op_name, sep, index = name.rpartition(":")
        if not sep or not (index.isascii() and index.isdigit()):
            raise InvalidArgumentError(
                f"The name {name!r} looks like an operation name, not a tensor name: tensor "
                "names have the form '<op_name>:<output_index>', e.g. 'x:0'"
            )
        return self.get_output(name)

    def as_graph_element(self, name: str) -> Operation | Output:
        """`"name"` gives the Operation, `"name:i"` the Output."""
        if isinstance(name, str) and ":" in name:
            return self.get_output(name)
        return self.get_operation(name)

    def consumers(self, output: Output) -> list[Operation]:
        """Operations that read `output`, in creation order."""
        # A scan rather than an index kept on every add_operation: construction is the hot
        # path, and consumer queries are rare (analysis, tooling).
        # An op that reads the output twice is listed twice, once per input edge.
        if type(output) is not Output:
            hint = " (pass one of its outputs)" if hasattr(output, "outputs") else ""
            raise InvalidArgumentError(
                f"Graph.consumers takes an Output; got {type(output).__name__}{hint}"
            )
        if output._op._graph is not self:
            raise InvalidArgumentError(
                f"Graph.consumers: {output.name!r} belongs to a different graph"
            )
        later = self._ops[output.op._index + 1 :]
        return [op for op in later for inp in op._inputs if inp is output]

    def to_networkx(self) -> Any:
        """The graph as a `networkx.MultiDiGraph`: one node per operation (with its type,
        requested device and attrs), one edge per data input (`output`, `input` indices, dtype)
        and per control input (`control=True`)."""
        import networkx as nx  # noqa: PLC0415 - imported on use: it is slow to import

        g = nx.MultiDiGraph()
        for op in self._ops:
            g.add_node(op.name, type=op.type, device=op.device, attrs=dict(op.attrs))
        for op in self._ops:
            for j, inp in enumerate(op.inputs):
                g.add_edge(
                    inp.op.name, op.name, output=inp.index, input=j, dtype=inp.dtype.name,
                    control=False,
                )  # fmt: skip
            for dep in op.control_inputs:
                g.add_edge(dep.name, op.name, control=True)
        return g

    def as_graph_def(self, add_shapes: bool = False) -> Any:
        """The graph as a TensorFlow `GraphDef` message (see `minigraph.graph_def`)."""
        return _writers["as_graph_def"](self, add_shapes=add_shapes)

    def to_dot(self) -> str:
        """The graph as Graphviz DOT text (see `minigraph.dot`), e.g. for a notebook."""
        return _writers["to_dot"](self)

    def __repr__(self) -> str:
        return f"<Graph with {len(self._ops)} operations>"


# Writing and drawing a graph live in layers above this module (minigraph.graph_def, which
# loads protobuf, and minigraph.dot): the package's __init__ installs them here, so that every
# import points down a layer while `graph.as_graph_def()` stays a method.
_writers: dict[str, Any] = {}


def install_graph_writers(as_graph_def: Any, to_dot: Any) -> None:
    """Installs the functions behind `Graph.as_graph_def` and `Graph.to_dot` (for
    `minigraph/__init__.py`, the one module above both)."""
    _writers["as_graph_def"] = as_graph_def
    _writers["to_dot"] = to_dot


def _flatten_list_args(
    op_def: OpDef, inputs: Sequence[Any], ctx: str, node: str
) -> tuple[tuple[Output, ...], tuple[int, ...]]:
    """The flat inputs of an op with list args (one entry per arg, a list for list args), and
    how many each arg holds."""
    if len(inputs) != len(op_def.inputs):
        names = ", ".join(a.name for a in op_def.inputs)
        raise InvalidArgumentError(
            f"{ctx}: expected {len(op_def.inputs)} inputs ({names}), got {len(inputs)}",
            node,
            op_def.name,
        )
    flat: list[Output] = []
    lengths = []
    for arg, value in zip(op_def.inputs, inputs):
        if not arg.is_list:
            flat.append(value)
            lengths.append(1)
            continue
        if not isinstance(value, (list, tuple)):
            raise InvalidArgumentError(
                f"{ctx}: input '{arg.name}' ({arg.type_text}) takes a list of tensors; got "
                f"{type(value).__name__}",
                node,
                op_def.name,
            )
        flat.extend(value)
        lengths.append(len(value))
    for inp in flat:
        if type(inp) is not Output:
            raise InvalidArgumentError(
                f"{ctx}: inputs must be Outputs; got {type(inp).__name__}", node, op_def.name
            )
    return tuple(flat), tuple(lengths)


def _input_label(arg: Any, element: int | None) -> str:
    """`input 'values'`, or `input 'values' (element 3)` for an element of a list arg."""
    return f"input '{arg.name}'" if element is None else f"input '{arg.name}' (element {element})"


def _resolve_attrs(
    op_def: OpDef,
    inputs: Sequence[Output],
    given: Mapping[str, Any],
    ctx: str,
    node: str,
    lengths: tuple[int, ...] | None = None,
) -> dict[str, Any]:
    """Canonical attrs: type, number and type-list attrs inferred from inputs, the rest
    validated, defaults filled. `lengths` gives the element count of each input arg of an op
    with list args (None: one input per arg)."""
    if lengths is None:
        if len(inputs) != len(op_def.inputs):
            names = ", ".join(a.name for a in op_def.inputs)
            raise InvalidArgumentError(
                f"{ctx}: expected {len(op_def.inputs)} inputs ({names}), got {len(inputs)}", node
            )
        elements: Any = zip(op_def.inputs, [None] * len(inputs), inputs)
    else:
        elements = _list_elements(op_def, inputs, lengths)
    inferred: dict[str, Any] = {}
    source: dict[str, str] = {}

    def fail(message: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{ctx}: {message}", node, op_def.name)

    for arg, element, inp in elements:
        dtype = inp.dtype
        if arg.dtype is not None:
            if dtype is not arg.dtype:
                raise fail(
                    f"{_input_label(arg, element)} must be {arg.dtype.name}, got {dtype.name} "
                    f"(from {inp.name!r})"
                )
            continue
        attr = arg.type_attr
        if attr is None:  # a type-list arg: inferred as a whole below
            continue
        seen = inferred.get(attr)
        if seen is None:
            inferred[attr] = dtype
            source[attr] = _input_label(arg, element)
        elif seen is not dtype:
            raise fail(
                f"{_both(source[attr], _input_label(arg, element))} share type attr '{attr}' "
                f"but have dtypes {seen.name} and {dtype.name}"
            )
    if lengths is not None:
        _infer_list_attrs(op_def, inputs, lengths, inferred, source, fail)
    for key in given:
        if not op_def.has_attr(key):
            known = sorted(a.name for a in op_def.attrs)
            raise fail(f"unknown attr {key!r}; {op_def.name} has attrs {known}")
    out: dict[str, Any] = {}
    for attr_def in op_def.attrs:
        name = attr_def.name
        try:
            if name in inferred:
                value = _check_inferred(attr_def, inferred[name], given, source[name])
            elif name in given:
                value = attr_def.canonicalize(given[name])
            elif attr_def.has_default:
                value = attr_def.default
            else:
                raise InvalidArgumentError(f"attr '{name}' ({attr_def.type}) is required")
        except InvalidArgumentError as e:
            raise fail(e.message) from None
        out[name] = value
    return out


def _both(first: str, second: str) -> str:
    """`inputs 'x' and 'y'` for two plain inputs, else both labels in full."""
    if "(element" not in first + second:
        return f"inputs {first[len('input ') :]} and {second[len('input ') :]}"
    return f"{first} and {second}"


def _list_elements(
    op_def: OpDef, inputs: Sequence[Output], lengths: tuple[int, ...]
) -> Iterator[tuple[Any, int | None, Output]]:
    """(arg, element index or None for plain args, input) over the flat inputs."""
    pos = 0
    for arg, n in zip(op_def.inputs, lengths):
        for k in range(n):
            yield arg, (k if arg.is_list else None), inputs[pos + k]
        pos += n


def _infer_list_attrs(
    op_def: OpDef,
    inputs: Sequence[Output],
    lengths: tuple[int, ...],
    inferred: dict[str, Any],
    source: dict[str, str],
    fail: Any,
) -> None:
    """Number attrs from list lengths, type-list attrs from the lists' dtypes."""
    pos = 0
    for arg, n in zip(op_def.inputs, lengths):
        if arg.number_attr is not None:
            attr = arg.number_attr
            if attr in inferred and inferred[attr] != n:
                raise fail(
                    f"{source[attr]} and input '{arg.name}' share number attr '{attr}' but "
                    f"have {inferred[attr]} and {n} elements"
                )
            inferred[attr] = n
            source.setdefault(attr, f"input '{arg.name}'")
        elif arg.type_list_attr is not None:
            attr = arg.type_list_attr
            value = tuple(inp.dtype for inp in inputs[pos : pos + n])
            if attr in inferred and inferred[attr] != value:
                raise fail(
                    f"{source[attr]} and input '{arg.name}' share type-list attr '{attr}' but "
                    f"have dtypes {show_value(inferred[attr])} and {show_value(value)}"
                )
            inferred[attr] = value
            source.setdefault(attr, f"input '{arg.name}'")
        pos += n


def _check_inferred(attr_def: Any, value: Any, given: Mapping[str, Any], source: str) -> Any:
    """An attr value inferred from the inputs, checked against an explicitly given value, the
    allowed set and the minimum."""
    name = attr_def.name
    if name in given:
        explicit = attr_def.canonicalize(given[name])
        if explicit is not value and explicit != value:
            what = "has dtype" if attr_def.type == "type" else "gives"
            shown = value.name if attr_def.type == "type" else show_value(value)
            raise InvalidArgumentError(
                f"attr '{name}' was given as {show_value(given[name])} but {source} {what} {shown}"
            )
    if attr_def.type == "type":
        if not attr_def.allows(value):
            raise InvalidArgumentError(
                f"{source} has dtype {value.name}, but attr '{name}' "
                f"allows only {show_value(attr_def.allowed).replace('[', '{').replace(']', '}')}"
            )
        return value
    if attr_def.type == "int":
        minimum = attr_def.minimum
        if minimum is not None and value < minimum:
            raise InvalidArgumentError(
                f"{source} needs at least {minimum} tensor{'s' if minimum != 1 else ''} "
                f"(attr '{name}' >= {minimum}); got {value}"
            )
        return value
    try:
        return attr_def.canonicalize(value)  # a type list: allowed dtypes and minimum length
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{source}: {e.message}") from None


# Everything add_operation derives from its arguments, canonical attrs and output specs, is a
# pure function of the op, the given attrs, the input dtypes and shapes and the values of
# constant inputs (shape functions are pure). Graphs repeat a few such signatures (a chain of
# gathers has one), so results are memoised. Keys hold attr values with their types (so that
# batch_dims=True is not mistaken for batch_dims=1); signatures with unhashable attr values or
# large constants are not memoised.
_node_memo: dict[tuple[Any, ...], tuple[Mapping[str, Any], tuple[Any, ...]]] = {}
_NODE_MEMO_MAX = 4096
_SMALL_CONSTANT = 16


def const_value_key(op: Operation) -> Any:
    """A Const's value as a memo key, computed once per Const: (shape, bytes) when small,
    else False."""
    value_key = op._value_key
    if value_key is None:
        value = op._attrs["value"]
        small = value.size <= _SMALL_CONSTANT and value.dtype.kind != "O"
        value_key = op._value_key = (value.shape, value.tobytes()) if small else False
    return value_key


def _node_key(
    op_def: OpDef, inputs: Sequence[Output], given: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    key: list[Any] = [op_def]
    if given:
        for k, v in given.items():
            if type(v) is np.ndarray:
                # Small tensor attrs (a Const's value) key by content; equal values may then
                # share one frozen canonical array, which is safe as it is read-only.
                if v.size > _SMALL_CONSTANT or v.dtype.kind == "O":
                    return None
                key.append((k, v.dtype, v.shape, v.tobytes()))
            else:
                key.append((k, type(v), v))
    for inp in inputs:
        op = inp._op
        if op._type == "Const":
            value_key = op._value_key
            if value_key is None:
                value_key = const_value_key(op)
            if value_key is False:
                return None
            key.append((inp._dtype, value_key))
        else:
            if inp._dtype is resource:
                return None  # its shape function reads the handle's producer (handle data)
            if op._type in SEEN_THROUGH and inp._dtype in SHAPE_DTYPES:
                return None  # a value shape functions may see (shape_inference.constant_value)
            # TensorShape's slot: its `dims` property costs +0.7% of building a 3000-node chain.
            key.append((inp._dtype, inp._shape._dims))
    return tuple(key)


def _resolve_node(
    op_def: OpDef,
    inputs: Sequence[Output],
    given: Mapping[str, Any],
    node: str,
    lengths: tuple[int, ...] | None = None,
) -> tuple[Mapping[str, Any], tuple[tuple[DType, TensorShape], ...]]:
    """(canonical attrs, (dtype, shape) per flat output) of a new node, memoised (except for
    ops with list inputs, whose `lengths` give each input arg's element count)."""
    key = _node_key(op_def, inputs, given) if lengths is None else None
    if key is not None:
        try:
            hit = _node_memo.get(key)
        except TypeError:  # an unhashable attr value (a list, an array)
            key = hit = None
        if hit is not None:
            return hit
    ctx = f"{op_def.name} '{node}'"
    canonical = MappingProxyType(_resolve_attrs(op_def, inputs, given, ctx, node, lengths))
    result = (canonical, _run_shape_fn(op_def, inputs, canonical, ctx, node))
    if key is not None:
        if len(_node_memo) >= _NODE_MEMO_MAX:
            _node_memo.clear()
        _node_memo[key] = result
    return result


def _output_elements(
    op_def: OpDef, attrs: Mapping[str, Any], ctx: str, node: str
) -> list[tuple[str, DType | None]]:
    """(label, dtype from the OpDef or None) per flat output."""
    if not op_def.has_list_outputs:
        return [
            (f"'{arg.name}'", attrs[arg.type_attr] if arg.type_attr is not None else arg.dtype)
            for arg in op_def.outputs
        ]
    elements = []
    for arg, n in zip(op_def.outputs, op_def.output_arg_lengths(attrs)):
        if not 0 <= n <= MAX_LIST_OUTPUTS:
            raise InvalidArgumentError(
                f"{ctx}: output '{arg.name}' would have {n} tensors (attr "
                f"'{arg.number_attr or arg.type_list_attr}' = "
                f"{n if arg.number_attr else 'a list of that length'}); it must be >= 0 and "
                f"<= {MAX_LIST_OUTPUTS} (minigraph.op_def.MAX_LIST_OUTPUTS)",
                node,
                op_def.name,
            )
        for k in range(n):
            if arg.type_list_attr is not None:
                dtype = attrs[arg.type_list_attr][k]
            else:
                dtype = attrs[arg.type_attr] if arg.type_attr is not None else arg.dtype
            label = f"'{arg.name}' (element {k})" if arg.is_list else f"'{arg.name}'"
            elements.append((label, dtype))
    return elements


def _run_shape_fn(
    op_def: OpDef, inputs: Sequence[Output], attrs: Mapping[str, Any], ctx: str, node: str
) -> tuple[tuple[DType, TensorShape], ...]:
    """Runs the shape function; returns (dtype, shape) per flat output."""
    elements = _output_elements(op_def, attrs, ctx, node)
    n_out = len(elements)
    shapes: Any
    if op_def.shape_fn is None:
        shapes = [None] * n_out
    else:
        ictx = InferenceContext(
            op_def.name,
            node,
            tuple([inp.shape for inp in inputs]),
            tuple([inp.dtype for inp in inputs]),
            attrs,
            inputs,
        )
        try:
            shapes = op_def.shape_fn(ictx)
        except OpError as e:
            shown = ", ".join(str(inp.shape) for inp in inputs)
            raise type(e)(
                f"{e.message} for '{node}' ({op_def.name}) with input shapes: {shown}.",
                node,
                op_def.name,
            ) from None
        except Exception as e:
            raise InternalError(
                f"{ctx}: the shape function of {op_def.name} raised {describe_exception(e)}",
                node,
                op_def.name,
            ) from e
        if isinstance(shapes, TensorShape) or shapes is None:
            shapes = [shapes]
        elif not isinstance(shapes, (list, tuple)):
            raise InternalError(
                f"{ctx}: the shape function of {op_def.name} returned {_show_returned(shapes)}; "
                f"expected a shape per output ({n_out}): a TensorShape, a list of dims, None, "
                "or a list of those",
                node,
                op_def.name,
            )
        elif n_out == 1 and _is_shape_dtype_pair(shapes):
            shapes = [shapes]  # a single output's (shape, dtype) pair
        elif n_out == 1 and all(d is None or isinstance(d, int) for d in shapes):
            shapes = [shapes]  # a single output's dims given as a plain list
    if len(shapes) != n_out:
        raise InternalError(
            f"{ctx}: the shape function of {op_def.name} returned {len(shapes)} shapes "
            f"({_show_returned(shapes)}); the node has {n_out} outputs",
            node,
            op_def.name,
        )
    specs = []
    for (label, dtype), entry in zip(elements, shapes):
        if _is_shape_dtype_pair(entry):
            entry, dtype = entry
        if dtype is None:
            raise InternalError(
                f"{ctx}: output {label} has no dtype: the OpDef does not give one and the "
                "shape function did not return (shape, dtype)",
                node,
            )
        if not isinstance(entry, TensorShape):
            if isinstance(entry, (list, tuple)) and len(entry) > MAX_RANK:
                raise InvalidArgumentError(
                    f"{ctx}: output {label} would have rank {len(entry)}, above the limit of "
                    f"{MAX_RANK} dimensions (numpy's maximum)",
                    node,
                    op_def.name,
                )
            try:
                entry = as_shape(entry)
            except (OpError, TypeError) as e:
                raise InternalError(
                    f"{ctx}: the shape function of {op_def.name} returned {entry!r} for output "
                    f"{label}, which is not a shape: {e}",
                    node,
                    op_def.name,
                ) from e
        specs.append((dtype, entry))
    return tuple(specs)


def _show_returned(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{type(value).__name__} {text}"


def _is_shape_dtype_pair(entry: Any) -> bool:
    return isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], DType)
