"""GraphDef: minigraph's graph format, TensorFlow's, in both directions.

- `as_graph_def(graph, add_shapes=False)` (also `Graph.as_graph_def`) writes a graph as a
  `GraphDef` message, wire- and text-compatible with TensorFlow 2.x.
- `import_graph_def(scope, graph_def, input_map=None, return_elements=None, name="import")`
  adds a GraphDef's nodes to a graph, with `tf.compat.v1.import_graph_def`'s semantics.
- `write_graph(graph_or_graph_def, path, as_text=None)` and `read_graph(path)`: `.pb` (binary)
  and `.pbtxt` (text) files.

Import builds every node through `Graph.add_operation` with the registered OpDef, so attr
validation and shape inference run exactly as for built nodes, inside one `Graph.transaction`:
on any error the graph is left as it was. Reading never executes code: the input is parsed by
protobuf and validated field by field; a Const may declare at most `MAX_CONST_BYTES`.

Graphs that need semantics TensorFlow lacks (an attr TF's op does not have, set to a value other
than its default, such as GatherNd's `batch_dims=1`) are written with
`versions.min_consumer = MINIGRAPH_MIN_CONSUMER`, above any TensorFlow version, so TensorFlow
refuses them ("Please upgrade TensorFlow") instead of ignoring the attr and computing something
else. Op libraries say which attrs TF's op has with `register_tf_attrs`; at their defaults the
others are left out, so ordinary graphs are plain TensorFlow graphs.

protobuf (and, for graphs whose nodes are not in dependency order, networkx) is imported on
first use, never by `import minigraph`.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from minigraph import dtypes, registry
from minigraph.device_spec import DeviceSpec
from minigraph.dtypes import DType
from minigraph.errors import (
    InvalidArgumentError,
    NotFoundError,
    OpError,
    UnimplementedError,
)
from minigraph.graph import Graph, Operation, Output
from minigraph.tensor_shape import TensorShape

if TYPE_CHECKING:
    from minigraph.scope import Scope

__all__ = [
    "as_graph_def",
    "import_graph_def",
    "write_graph",
    "read_graph",
    "parse_graph_def",
    "looks_like_text",
    "register_tf_attrs",
    "tf_incompatibilities",
    "PRODUCER_VERSION",
    "MINIGRAPH_MIN_CONSUMER",
    "MAX_CONST_BYTES",
]

# versions.producer of written graphs: TensorFlow 2.21's TF_GRAPH_DEF_VERSION, the TF release
# whose op semantics minigraph's ops follow.
PRODUCER_VERSION = 2474
# versions.min_consumer of a graph that needs minigraph's semantics: TensorFlow refuses a
# GraphDef whose min_consumer is above its own graph version (2474 for 2.21, growing by about
# one a day), and minigraph reads graphs whose min_consumer is at most this.
MINIGRAPH_MIN_CONSUMER = 1 << 30
# The largest Const value a GraphDef may declare (bytes: elements times the item size, 8 for
# strings), checked before anything is allocated.
MAX_CONST_BYTES = 1 << 30

# TF's DataType numbers (tensorflow/core/framework/types.proto).
_DT_NUMBER: dict[DType, int] = {
    dtypes.float32: 1, dtypes.float64: 2, dtypes.int32: 3, dtypes.uint8: 4, dtypes.int16: 5,
    dtypes.int8: 6, dtypes.string: 7, dtypes.complex64: 8, dtypes.int64: 9, dtypes.bool_: 10,
    dtypes.bfloat16: 14, dtypes.uint16: 17, dtypes.complex128: 18, dtypes.float16: 19,
    dtypes.uint32: 22, dtypes.uint64: 23,
}  # fmt: skip
_DTYPE_OF: dict[int, DType] = {number: dtype for dtype, number in _DT_NUMBER.items()}

# The TensorProto field holding typed values of each dtype.
_VALUE_FIELD: dict[DType, str] = {
    dtypes.float32: "float_val", dtypes.float64: "double_val", dtypes.int32: "int_val",
    dtypes.int16: "int_val", dtypes.int8: "int_val", dtypes.uint16: "int_val",
    dtypes.uint8: "int_val", dtypes.int64: "int64_val", dtypes.uint32: "uint32_val",
    dtypes.uint64: "uint64_val", dtypes.bool_: "bool_val", dtypes.float16: "half_val",
    dtypes.bfloat16: "half_val", dtypes.complex64: "scomplex_val",
    dtypes.complex128: "dcomplex_val", dtypes.string: "string_val",
}  # fmt: skip

# The AttrValue field of each scalar attr type, and of each list element type.
_ATTR_FIELD = {
    "int": "i", "float": "f", "bool": "b", "string": "s", "type": "type", "shape": "shape",
    "tensor": "tensor",
}  # fmt: skip

# TF's node-name grammar, one '/'-separated component at a time (as Scope checks op names).
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-]*$")
_INDEX_RE = re.compile(r"^[0-9]+$")
_TEXT_SUFFIXES = (".pbtxt", ".txt", ".textproto", ".prototxt")

# Op type -> the attrs TensorFlow's op of that name has (see register_tf_attrs).
_tf_attrs: dict[str, frozenset[str]] = {}


def register_tf_attrs(op_type: str, attrs: Iterable[str]) -> None:
    """Declares which attrs TensorFlow's own `op_type` has.

    On export, the node's other attrs are left out when they hold their default value (so the
    file is a plain TensorFlow graph), and a graph where one holds another value is marked with
    `versions.min_consumer = MINIGRAPH_MIN_CONSUMER`, which TensorFlow refuses: TensorFlow would
    otherwise ignore the attr and compute something else. Ops never declared are written with
    all their attrs (TensorFlow refuses op types it does not know by itself).
    """
    if not isinstance(op_type, str) or isinstance(attrs, str):
        raise InvalidArgumentError("register_tf_attrs(op_type: str, attrs: list of str)")
    _tf_attrs[op_type] = frozenset(attrs)


def _proto() -> Any:
    # protobuf is imported here, on first use, never by `import minigraph`.
    from minigraph import proto  # noqa: PLC0415

    return proto


# -- export ------------------------------------------------------------------------------------


def as_graph_def(graph: Graph, add_shapes: bool = False) -> Any:
    """`graph` as a GraphDef message (`minigraph.proto.GraphDef`).

    Nodes are written in creation order (a topological order) with all attrs, defaults
    included, as TensorFlow writes them; Consts hold their values; requested devices, control
    inputs (`^name`), colocation (`_class: ["loc:@group"]`) and kernel labels (`_kernel`) are
    kept. With `add_shapes`, each node gets TF's `_output_shapes` attr. For byte-identical files
    from equal graphs serialize with `SerializeToString(deterministic=True)` (write_graph does).
    """
    if not isinstance(graph, Graph):
        graph = getattr(graph, "graph", graph)  # a Scope
        if not isinstance(graph, Graph):
            raise InvalidArgumentError(f"as_graph_def needs a Graph; got {type(graph).__name__}")
    proto = _proto()
    graph_def = proto.GraphDef()
    needs_minigraph = False
    ops = graph.operations
    nodes = graph_def.node
    plans: dict[Any, list[tuple[str, Any, Any, bool]]] = {}
    for op in ops:
        node = nodes.add()
        node.name = op.name
        node.op = op.type
        inputs = [_input_name(t) for t in op.inputs]
        if op.control_inputs:
            inputs += ["^" + c.name for c in op.control_inputs]
        if inputs:
            node.input.extend(inputs)
        device = op.requested_device
        if device is not None:
            node.device = device.to_string()
        plan = plans.get(op.op_def)
        if plan is None:
            plan = plans[op.op_def] = _attr_plan(op.op_def)
        attr_map = node.attr
        attrs = op.attrs
        for name, encode, default, tf_lacks in plan:
            value = attrs[name]
            if tf_lacks:
                if default is not _NO_DEFAULT and _same(value, default):
                    continue
                needs_minigraph = True
            encode(attr_map[name], value)
        if op.colocation_group != op.name:
            attr_map["_class"].list.s.append(("loc:@" + op.colocation_group).encode("utf-8"))
        if op.kernel_label:
            attr_map["_kernel"].s = op.kernel_label.encode("utf-8")
        if add_shapes:
            shapes = attr_map["_output_shapes"].list
            shapes.SetInParent()
            for out in op.outputs:
                _fill_shape(shapes.shape.add(), out.shape)
    graph_def.versions.producer = PRODUCER_VERSION
    if needs_minigraph:
        graph_def.versions.min_consumer = MINIGRAPH_MIN_CONSUMER
    return graph_def


def tf_incompatibilities(graph: Graph) -> list[str]:
    """Why TensorFlow would refuse `graph` once exported: one line per node and attr that
    holds a value TensorFlow's op cannot express (empty when TensorFlow can run it, as far as
    the ops' `register_tf_attrs` declarations tell)."""
    problems = []
    for op in graph.operations:
        known = _tf_attrs.get(op.type)
        if known is None:
            continue
        for attr_def in op.op_def.attrs:
            if attr_def.name in known:
                continue
            value = op.attrs[attr_def.name]
            if attr_def.has_default and _same(value, attr_def.default):
                continue
            problems.append(
                f"node {op.name!r} ({op.type}): attr {attr_def.name}={_show_value(value)}, "
                f"which TensorFlow's {op.type} does not have"
            )
    return problems


_NO_DEFAULT = object()


def _attr_plan(op_def: Any) -> list[tuple[str, Any, Any, bool]]:
    """(name, encoder, default, TF lacks it) per attr of `op_def`, in declaration order."""
    known = _tf_attrs.get(op_def.name)
    plan = []
    for attr_def in op_def.attrs:
        default = attr_def.default if attr_def.has_default else _NO_DEFAULT
        tf_lacks = known is not None and attr_def.name not in known
        plan.append((attr_def.name, _ENCODERS[attr_def.type], default, tf_lacks))
    return plan


def _same(value: Any, default: Any) -> bool:
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return (
            isinstance(value, np.ndarray)
            and isinstance(default, np.ndarray)
            and value.dtype == default.dtype
            and np.array_equal(value, default)
        )
    return type(value) is type(default) and value == default


def _show_value(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array(shape={list(value.shape)}, dtype={value.dtype})"
    return repr(value) if isinstance(value, str) else str(value)


def _input_name(tensor: Output) -> str:
    # TF writes output 0 as the bare node name.
    return tensor.op.name if tensor.index == 0 else tensor.name


def _fill_shape(proto: Any, shape: TensorShape) -> None:
    proto.SetInParent()
    dims = shape.dims
    if dims is None:
        proto.unknown_rank = True
        return
    add = proto.dim.add
    for d in dims:
        add(size=-1 if d is None else d)


def _fill_tensor(proto: Any, array: np.ndarray) -> None:
    """Writes `array` as TF's make_tensor_proto does: strings in string_val, a single value (or
    one repeated value: TF's "splat") in the typed field, anything else in tensor_content."""
    dtype = dtypes.as_dtype(array.dtype)
    proto.dtype = _DT_NUMBER[dtype]
    _fill_shape(proto.tensor_shape, TensorShape(array.shape))
    if dtype.is_string:
        proto.string_val.extend(array.reshape(-1).tolist())
        return
    if array.size == 0:
        return
    flat = array.reshape(-1)
    first = flat[:1]
    if array.size > 1 and not (flat == first[0]).all():
        if sys.byteorder == "big" and array.dtype.itemsize > 1:  # TF's bytes are little-endian
            array = array.byteswap()
        proto.tensor_content = np.ascontiguousarray(array).tobytes()
        return
    field = getattr(proto, _VALUE_FIELD[dtype])
    if dtype is dtypes.float16 or dtype is dtypes.bfloat16:
        field.append(int(first.view(np.uint16)[0]))
    elif dtype.is_complex:
        field.extend([float(first.real[0]), float(first.imag[0])])
    else:
        field.append(first[0].item())


def _enc_int(av: Any, value: int) -> None:
    av.i = value


def _enc_float(av: Any, value: float) -> None:
    av.f = value


def _enc_bool(av: Any, value: bool) -> None:
    av.b = value


def _enc_string(av: Any, value: str) -> None:
    av.s = value.encode("utf-8")


def _enc_type(av: Any, value: DType) -> None:
    av.type = _DT_NUMBER[value]


def _enc_shape(av: Any, value: TensorShape) -> None:
    _fill_shape(av.shape, value)


def _enc_tensor(av: Any, value: np.ndarray) -> None:
    _fill_tensor(av.tensor, value)


def _list_encoder(element: str) -> Any:
    def encode(av: Any, values: tuple[Any, ...]) -> None:
        lst = av.list
        lst.SetInParent()
        if element == "string":
            lst.s.extend([v.encode("utf-8") for v in values])
        elif element == "type":
            lst.type.extend([_DT_NUMBER[v] for v in values])
        elif element == "shape":
            for v in values:
                _fill_shape(lst.shape.add(), v)
        elif element == "tensor":
            for v in values:
                _fill_tensor(lst.tensor.add(), v)
        else:
            getattr(lst, _ATTR_FIELD[element]).extend(values)

    return encode


_ENCODERS: dict[str, Any] = {
    "int": _enc_int, "float": _enc_float, "bool": _enc_bool, "string": _enc_string,
    "type": _enc_type, "shape": _enc_shape, "tensor": _enc_tensor,
}  # fmt: skip
_ENCODERS.update({f"list({t})": _list_encoder(t) for t in list(_ENCODERS)})


# -- reading -----------------------------------------------------------------------------------


def parse_graph_def(data: bytes | bytearray | memoryview | str, *, text: bool | None = None) -> Any:
    """A GraphDef message from serialized bytes (binary) or text format.

    `text=None` detects the format: text when the data looks like it (a field name first),
    else binary; either way the other format is tried when the first fails.

    Raises:
        InvalidArgumentError: the data is neither (truncated, garbage, wrong field types).
    """
    proto = _proto()
    if isinstance(data, str):
        data, text = data.encode("utf-8"), True if text is None else text
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise InvalidArgumentError(
            f"a GraphDef is parsed from bytes or text; got {type(data).__name__}"
        )
    if text is None:
        order = (
            (_parse_text, _parse_binary) if looks_like_text(data) else (_parse_binary, _parse_text)
        )
    else:
        order = (_parse_text,) if text else (_parse_binary,)
    first_error = None
    for parse in order:
        try:
            return parse(proto, data)
        except InvalidArgumentError as e:
            first_error = first_error or e
    raise first_error


# Text format starts with a comment or a field name followed by ':', '{' or '<'. A binary
# GraphDef starts with a field tag byte (0x0a for `node`) and a length, which may be a letter.
_TEXT_START_RE = re.compile(rb"^\s*(#|[A-Za-z_][A-Za-z0-9_]*\s*[:{<])")


def looks_like_text(data: bytes) -> bool:
    """Whether serialized GraphDef `data` looks like text format (else binary)."""
    return not data.strip() or _TEXT_START_RE.match(data[:512]) is not None


def _parse_binary(proto: Any, data: bytes) -> Any:
    from google.protobuf.message import DecodeError  # noqa: PLC0415

    try:
        return proto.GraphDef.FromString(data)
    except (DecodeError, ValueError, RuntimeError, RecursionError) as e:
        raise InvalidArgumentError(
            f"cannot parse {len(data)} bytes as a binary GraphDef (truncated or not a GraphDef): "
            f"{e}"
        ) from None


def _parse_text(proto: Any, data: bytes) -> Any:
    from google.protobuf import text_format  # noqa: PLC0415

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidArgumentError(f"a text GraphDef must be UTF-8: {e}") from None
    try:
        return text_format.Parse(text, proto.GraphDef())
    except (text_format.ParseError, ValueError, RecursionError) as e:
        raise InvalidArgumentError(f"cannot parse text GraphDef: {e}") from None


def read_graph(path: str | os.PathLike[str]) -> Any:
    """Reads a GraphDef file, binary (`.pb`) or text (`.pbtxt`): the format is detected.

    Raises:
        NotFoundError: no such file.
        InvalidArgumentError: the file is not a GraphDef.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise NotFoundError(f"no such graph file: {os.fspath(path)!r}") from None
    except IsADirectoryError:
        raise InvalidArgumentError(f"{os.fspath(path)!r} is a directory, not a file") from None
    try:
        return parse_graph_def(data)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{os.fspath(path)}: {e.message}") from None


def write_graph(
    graph_or_graph_def: Any, path: str | os.PathLike[str], as_text: bool | None = None
) -> str:
    """Writes a Graph (or Scope) or a GraphDef message to `path`; returns the path.

    Text format when `as_text` is true, or when it is None and the path ends in `.pbtxt` or
    `.txt`; binary otherwise (serialized deterministically). The file is replaced atomically.
    """
    graph_def = _as_message(graph_or_graph_def, allow_graph=True)
    path = os.fspath(path)
    if as_text is None:
        as_text = path.lower().endswith(_TEXT_SUFFIXES)
    if as_text:
        from google.protobuf import text_format  # noqa: PLC0415

        data = text_format.MessageToString(graph_def).encode("utf-8")
    else:
        data = graph_def.SerializeToString(deterministic=True)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".minigraph-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _as_message(value: Any, allow_graph: bool = False) -> Any:
    """Our GraphDef message from ours, serialized bytes, another GraphDef class (TF's), or a
    Graph/Scope when allowed."""
    proto = _proto()
    if isinstance(value, proto.GraphDef):
        return value
    if allow_graph:
        graph = getattr(value, "graph", value)
        if isinstance(graph, Graph):
            return as_graph_def(graph)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return parse_graph_def(value, text=False)
    if isinstance(value, str):
        raise InvalidArgumentError(
            "got a str: pass the GraphDef message or its serialized bytes (read_graph(path) "
            "reads a file)"
        )
    serialize = getattr(value, "SerializeToString", None)
    if callable(serialize) and type(value).__name__ == "GraphDef":
        # Another GraphDef class with TF's schema (tf.compat.v1.GraphDef): same wire format.
        return parse_graph_def(serialize(), text=False)
    raise InvalidArgumentError(
        f"expected a GraphDef message or its serialized bytes; got {type(value).__name__}"
    )


# -- import ------------------------------------------------------------------------------------


class _Node:
    """What import needs to know about one NodeDef, validated before the graph is touched."""

    __slots__ = (
        "index", "name", "node_def", "op_def", "prefix", "base", "inputs", "controls",
        "coloc", "deps",
    )  # fmt: skip

    def __init__(self, index: int, name: str, node_def: Any) -> None:
        self.index = index
        self.name = name
        self.node_def = node_def
        self.op_def: Any = None
        self.prefix = ""
        self.base = name
        self.inputs: list[tuple[str, int]] = []
        self.controls: list[str] = []
        self.coloc: list[str] = []
        self.deps: list[int] = []


def import_graph_def(
    scope: Scope,
    graph_def: Any,
    input_map: Mapping[str, Any] | None = None,
    return_elements: Sequence[str] | None = None,
    name: str | None = "import",
    *,
    source: str | None = None,
) -> list[Operation | Output] | None:
    """Adds the nodes of `graph_def` to `scope`'s graph, as `tf.compat.v1.import_graph_def`.

    Args:
        scope: where the nodes go: its name scope, plus `name` (uniquified: `import`,
            `import_1`, ...; "" or None adds no prefix). Nodes that request no device get the
            scope's device, and nodes without inputs get its control dependencies.
        graph_def: a GraphDef message (minigraph's or TensorFlow's) or its serialized bytes.
        input_map: replaces imported tensors with existing ones: `{"x:0": output}` (`"x"` is
            `"x:0"`), and control inputs with existing operations: `{"^x": op}`.
        return_elements: names in `graph_def` to return: `"x"` gives the Operation, `"x:1"` the
            Output, in order.
        name: the name scope for the imported nodes.
        source: where run-time errors say the nodes were defined (e.g. the file's path;
            default: the line that called import_graph_def).

    Returns:
        The Operations and Outputs named by `return_elements`, or None without it.

    Raises:
        NotFoundError: op types not registered (one error naming every missing type and the
            first node using each).
        InvalidArgumentError: a malformed graph (bad names, inputs, attrs, values, a cycle),
            bad `input_map` keys or `return_elements`, or a failed construction check.
        UnimplementedError: graph functions, function-valued attrs or dtypes minigraph lacks.

    On any error the graph is left exactly as it was. Node names are uniquified as in TF when
    they clash with existing ones (only possible with `name=""`).
    """
    from minigraph.scope import Scope  # noqa: PLC0415 - scope imports graph, which imports us

    if not isinstance(scope, Scope):
        raise InvalidArgumentError(
            f"import_graph_def needs a Scope first; got {type(scope).__name__}"
        )
    message = _as_message(graph_def)
    _check_versions(message)
    if message.HasField("library") and message.library.ByteSize():
        raise UnimplementedError(
            "the GraphDef has a function library (GraphDef.library): minigraph has no graph "
            "functions"
        )
    nodes, by_name = _index_nodes(message.node)
    tensor_map, control_map = _check_input_map(input_map, by_name, scope.graph)
    returns = _check_return_elements(return_elements, by_name)
    order = _order(nodes, tensor_map, control_map)
    graph = scope.graph
    with graph.transaction():
        base = scope.new_sub_scope(name) if name else scope
        built = _build(base, nodes, order, tensor_map, control_map, source)
        for node_name, index in tensor_map:
            _output(built[node_name], index, f"input_map key '{node_name}:{index}'")
        if returns is None:
            return None
        results: list[Operation | Output] = []
        for element, node_name, index in returns:
            op = built[node_name]
            if index is None:
                results.append(op)
            else:
                results.append(_output(op, index, f"return element {element!r}"))
        return results


def _check_versions(message: Any) -> None:
    versions = message.versions
    if versions.min_consumer > MINIGRAPH_MIN_CONSUMER:
        raise UnimplementedError(
            f"GraphDef min consumer version {versions.min_consumer} is above minigraph's "
            f"({MINIGRAPH_MIN_CONSUMER}): the graph needs a newer reader"
        )
    if MINIGRAPH_MIN_CONSUMER in versions.bad_consumers:
        raise UnimplementedError("the GraphDef lists minigraph's version as a bad consumer")


def _check_node_name(name: str, node: str | None = None) -> None:
    if not name or not all(_NAME_PART_RE.match(part) for part in name.split("/")):
        raise InvalidArgumentError(
            f"illegal node name {name!r}: node names are '/'-separated parts of letters, "
            "digits, '_', '.' and '-', each starting with a letter, digit or '.'",
            node or name,
        )


def _index_nodes(node_defs: Any) -> tuple[list[_Node], dict[str, _Node]]:
    """Validates names, op types and input syntax; everything that needs no graph."""
    nodes: list[_Node] = []
    by_name: dict[str, _Node] = {}
    for i, node_def in enumerate(node_defs):
        name = node_def.name
        if name in by_name:
            raise InvalidArgumentError(f"node name {name!r} is not unique in the GraphDef", name)
        if not _NAME_PART_RE.match(name):
            _check_node_name(name)
        node = _Node(i, name, node_def)
        prefix, sep, base = name.rpartition("/")
        if sep:
            node.prefix, node.base = prefix, base
        nodes.append(node)
        by_name[name] = node
    # Op types: one error naming every missing type and the first node using it.
    op_defs: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for node in nodes:
        op_type = node.node_def.op
        op_def = op_defs.get(op_type)
        if op_def is None and op_type not in missing:
            if not op_type:
                raise InvalidArgumentError(f"node {node.name!r} has no op type", node.name)
            try:
                op_def = op_defs[op_type] = registry.get_op_def(op_type)
            except NotFoundError:
                missing[op_type] = node.name
        node.op_def = op_def
    if missing:
        listed = ", ".join(f"{t!r} (first used by node {n!r})" for t, n in missing.items())
        first_type, first_node = next(iter(missing.items()))
        kind = "type" if len(missing) == 1 else "types"
        raise NotFoundError(
            f"Op {kind} not registered: {listed}. Registered ops: "
            f"{', '.join(registry.list_ops())}; is the op library that defines "
            f"{'it' if len(missing) == 1 else 'them'} imported?",
            first_node,
            first_type,
        )
    for node in nodes:
        _parse_inputs(node, by_name)
        _parse_colocation(node, by_name)
    return nodes, by_name


def _parse_tensor_name(text: str) -> tuple[str, int] | None:
    """("node", index) for "node" or "node:3"; None when malformed."""
    node, sep, index = text.rpartition(":")
    if not sep:
        return text, 0
    if not node or not _INDEX_RE.match(index):
        return None
    return node, int(index)


def _parse_inputs(node: _Node, by_name: Mapping[str, _Node]) -> None:
    where = f"node {node.name!r} ({node.node_def.op})"
    for text in node.node_def.input:
        if text.startswith("^"):
            source = text[1:]
            if source not in by_name:
                raise InvalidArgumentError(
                    f"{where}: control input {text!r} names no node of the GraphDef", node.name
                )
            node.controls.append(source)
            continue
        if node.controls:
            raise InvalidArgumentError(
                f"{where}: data input {text!r} comes after a control input; control inputs "
                "('^name') must come last",
                node.name,
            )
        parsed = _parse_tensor_name(text)
        if parsed is None:
            raise InvalidArgumentError(
                f"{where}: malformed input {text!r} (expected 'node', 'node:index' or '^node')",
                node.name,
            )
        if parsed[0] not in by_name:
            raise InvalidArgumentError(
                f"{where}: input {text!r} names no node of the GraphDef", node.name
            )
        node.inputs.append(parsed)


def _parse_colocation(node: _Node, by_name: Mapping[str, _Node]) -> None:
    attr = node.node_def.attr
    if "_class" not in attr:
        return
    av = attr["_class"]
    if av.WhichOneof("value") != "list" or len(av.list.s) != _list_length(av.list):
        raise InvalidArgumentError(
            f"node {node.name!r}: attr '_class' must be a list of strings ('loc:@node')",
            node.name,
        )
    for entry in av.list.s:
        text = entry.decode("utf-8", errors="replace")
        if not text.startswith("loc:@"):
            continue
        target = text[5:]
        if target not in by_name:
            raise InvalidArgumentError(
                f"node {node.name!r} is colocated with {target!r} ('_class' {text!r}), which is "
                "not a node of the GraphDef",
                node.name,
            )
        if target != node.name and target not in node.coloc:
            node.coloc.append(target)


def _list_length(lst: Any) -> int:
    return sum(len(values) for _, values in lst.ListFields())


def _check_input_map(
    input_map: Mapping[str, Any] | None, by_name: Mapping[str, _Node], graph: Graph
) -> tuple[dict[tuple[str, int], Output], dict[str, Operation]]:
    from minigraph.scope import as_output  # noqa: PLC0415

    tensors: dict[tuple[str, int], Output] = {}
    controls: dict[str, Operation] = {}
    if input_map is None:
        return tensors, controls
    if not isinstance(input_map, Mapping):
        raise InvalidArgumentError(
            f"input_map must be a dict of names to Outputs; got {type(input_map).__name__}"
        )
    missing = []
    for key, value in input_map.items():
        if not isinstance(key, str):
            raise InvalidArgumentError(
                f"input_map keys are tensor names ('x:0', '^x'); got {key!r}"
            )
        control = key.startswith("^")
        parsed = (key[1:], None) if control else _parse_tensor_name(key)
        if parsed is None:
            raise InvalidArgumentError(f"malformed input_map key {key!r}")
        if parsed[0] not in by_name:
            missing.append(key)
            continue
        if control:
            op = value if isinstance(value, Operation) else None
            if op is None:
                out = as_output(value)
                op = out.op if out is not None else None
            if op is None:
                raise InvalidArgumentError(
                    f"input_map[{key!r}] must be an Operation or Output; got {type(value).__name__}"
                )
            if op.graph is not graph:
                raise InvalidArgumentError(f"input_map[{key!r}] belongs to another graph")
            controls[parsed[0]] = op
            continue
        out = as_output(value)
        if out is None:
            raise InvalidArgumentError(
                f"input_map[{key!r}] must be an Output (or a single-output builder); got "
                f"{type(value).__name__}"
            )
        if out.graph is not graph:
            raise InvalidArgumentError(f"input_map[{key!r}] belongs to another graph")
        tensors[parsed] = out
    if missing:
        raise InvalidArgumentError(
            f"input_map names tensors that are not in the GraphDef: {missing}"
        )
    return tensors, controls


def _check_return_elements(
    names: Sequence[str] | None, by_name: Mapping[str, _Node]
) -> list[tuple[str, str, int | None]] | None:
    if names is None:
        return None
    if isinstance(names, str):
        raise InvalidArgumentError("return_elements is a list of names, not a single string")
    out = []
    for element in names:
        if not isinstance(element, str):
            raise InvalidArgumentError(f"return_elements are names; got {element!r}")
        if ":" in element:
            parsed = _parse_tensor_name(element)
            if parsed is None:
                raise InvalidArgumentError(f"malformed return element {element!r}")
            node_name, index = parsed
        else:
            node_name, index = element, None
        if node_name not in by_name:
            raise InvalidArgumentError(
                f"return element {element!r}: the GraphDef has no node {node_name!r}"
            )
        out.append((element, node_name, index))
    return out


def _order(
    nodes: list[_Node],
    tensor_map: Mapping[tuple[str, int], Output],
    control_map: Mapping[str, Operation],
) -> list[_Node]:
    """The nodes in dependency order: the GraphDef's order when it already is one (graphs that
    minigraph and TensorFlow write), else a topological sort with networkx, stable with respect
    to the file's order; a cycle is an error that shows it."""
    by_name = {node.name: node for node in nodes}
    ordered = True
    for node in nodes:
        deps = node.deps
        for source, index in node.inputs:
            if (source, index) not in tensor_map:
                deps.append(by_name[source].index)
        for source in node.controls:
            if source not in control_map:
                deps.append(by_name[source].index)
        for source in node.coloc:
            deps.append(by_name[source].index)
        if ordered and deps and max(deps) >= node.index:
            ordered = False
    if ordered:
        return nodes
    import networkx as nx  # noqa: PLC0415 - imported on use: it is slow to import

    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(nodes)))
    dag.add_edges_from((dep, node.index) for node in nodes for dep in node.deps)
    try:
        return [nodes[i] for i in nx.lexicographical_topological_sort(dag)]
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(dag)
        path = [nodes[u].name for u, _ in cycle] + [nodes[cycle[0][0]].name]
        raise InvalidArgumentError(
            f"the GraphDef has a cycle: {' -> '.join(path)} (through inputs, control inputs "
            "or colocation)",
            path[0],
        ) from None


def _build(
    scope: Scope,
    nodes: list[_Node],
    order: list[_Node],
    tensor_map: Mapping[tuple[str, int], Output],
    control_map: Mapping[str, Operation],
    source: str | None,
) -> dict[str, Operation]:
    graph = scope.graph
    prefix = scope.name_scope
    default_device = scope.device
    default_controls = scope.control_dependencies
    default_label = scope.kernel_label
    built: dict[str, Operation] = {}
    devices: dict[str, DeviceSpec | None] = {"": default_device}
    attr_tables: dict[Any, tuple[dict[str, Any], bool]] = {}
    add = graph.add_operation
    for node in order:
        node_def = node.node_def
        op_def = node.op_def
        entry = attr_tables.get(op_def)
        if entry is None:
            entry = attr_tables[op_def] = (
                {a.name: a.type for a in op_def.attrs},
                any(getattr(arg, "is_list", False) for arg in op_def.inputs),
            )
        table, has_list_args = entry
        attrs, extras = _decode_attrs(node, table)
        inputs = []
        for key in node.inputs:
            tensor = tensor_map.get(key)
            if tensor is None:
                tensor = _output(built[key[0]], key[1], f"input '{key[0]}:{key[1]}'", node)
            inputs.append(tensor)
        controls = [control_map.get(c) or built[c] for c in node.controls]
        if not inputs and not controls and default_controls:
            controls = list(default_controls)
        device_text = node_def.device
        device = devices.get(device_text, _NO_DEFAULT)
        if device is _NO_DEFAULT:
            try:
                device = devices[device_text] = DeviceSpec.from_string(device_text)
            except InvalidArgumentError as e:
                raise InvalidArgumentError(
                    f"node {node.name!r}: {e.message}", node.name, op_def.name
                ) from None
        group = None
        for target in node.coloc:
            target_group = built[target].colocation_group
            if group is not None and target_group != group:
                raise UnimplementedError(
                    f"node {node.name!r} is colocated with nodes of two groups ({group!r} and "
                    f"{target_group!r}); minigraph keeps one colocation group per node",
                    node.name,
                    op_def.name,
                )
            group = target_group
        label = extras.get("_kernel", default_label)
        node_prefix = node.prefix
        if prefix:
            node_prefix = f"{prefix}/{node_prefix}" if node_prefix else prefix
        if has_list_args:
            inputs = _split_inputs(op_def, inputs, attrs, node)
        op = add(
            op_def, inputs, attrs, prefix=node_prefix, base_name=node.base,
            requested_device=device, control_inputs=controls, colocation_group=group,
            kernel_label=label, source=source,
        )  # fmt: skip
        if source is None:
            source = op.source  # the caller's line, found once
        shapes = extras.get("_output_shapes")
        if shapes is not None:
            _check_output_shapes(op, shapes, node)
        built[node.name] = op
    return built


def _split_inputs(op_def: Any, flat: list[Output], attrs: Mapping[str, Any], node: _Node) -> list:
    """A NodeDef's flat inputs regrouped per input arg (a list for `N * T` and list(type) args)."""
    try:
        return op_def.split_inputs(flat, attrs)
    except OpError as e:
        raise type(e)(
            f"node {node.name!r} ({op_def.name}): {e.message}", node.name, op_def.name
        ) from None


def _output(op: Operation, index: int, what: str, node: _Node | None = None) -> Output:
    outputs = op.outputs
    if index >= len(outputs):
        where = f"node {node.name!r}: " if node is not None else ""
        raise InvalidArgumentError(
            f"{where}{what} refers to output {index} of {op.name!r} ({op.type}), which has "
            f"{len(outputs)} output{'s' if len(outputs) != 1 else ''}",
            node.name if node is not None else op.name,
        )
    return outputs[index]


def _check_output_shapes(op: Operation, shapes: tuple[TensorShape, ...], node: _Node) -> None:
    outputs = op.outputs
    if len(shapes) != len(outputs):
        raise InvalidArgumentError(
            f"node {node.name!r} ({op.type}): '_output_shapes' lists {len(shapes)} shapes for "
            f"{len(outputs)} outputs",
            op.name,
            op.type,
        )
    for out, shape in zip(outputs, shapes):
        if not out.shape.is_compatible_with(shape):
            raise InvalidArgumentError(
                f"node {node.name!r} ({op.type}): '_output_shapes' says output {out.index} has "
                f"shape {shape}, but its inputs give {out.shape}",
                op.name,
                op.type,
            )


def _decode_attrs(node: _Node, table: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(attrs of the OpDef, TF's special '_' attrs minigraph uses) of a NodeDef."""
    attrs: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for key, av in node.node_def.attr.items():
        kind = table.get(key)
        if kind is not None:
            attrs[key] = _decode(av, kind, key, node)
        elif key.startswith("_"):
            if key == "_kernel":
                extras[key] = _decode(av, "string", key, node)
            elif key == "_output_shapes":
                extras[key] = _decode(av, "list(shape)", key, node)
            # _class was read when ordering; other "_" attrs (TF's internal annotations, such
            # as _has_manual_control_dependencies) have no meaning here and are ignored.
        else:
            op_def = node.op_def
            raise InvalidArgumentError(
                f"node {node.name!r} ({op_def.name}) has attr {key!r}, which {op_def.name} does "
                f"not have (its attrs: {sorted(table)}); the graph may need a newer op library",
                node.name,
                op_def.name,
            )
    return attrs, extras


def _decode(av: Any, kind: str, key: str, node: _Node) -> Any:
    which = av.WhichOneof("value")
    is_list = kind.startswith("list(")
    expected = "list" if is_list else _ATTR_FIELD[kind]
    if which != expected:
        if which in ("func", "placeholder"):
            raise UnimplementedError(
                f"node {node.name!r}: attr {key!r} holds a {which}; minigraph has no graph "
                "functions",
                node.name,
                node.node_def.op,
            )
        raise InvalidArgumentError(
            f"node {node.name!r} ({node.node_def.op}): attr {key!r} must be {kind}, but the "
            f"AttrValue holds {which or 'nothing'}",
            node.name,
            node.node_def.op,
        )
    try:
        if not is_list:
            return _SCALAR_DECODERS[kind](getattr(av, expected))
        element = kind[5:-1]
        field = _ATTR_FIELD[element]
        lst = av.list
        for descriptor, _ in lst.ListFields():
            if descriptor.name != field:
                raise InvalidArgumentError(
                    f"the list holds {descriptor.name} values, not {element}"
                )
        decode = _SCALAR_DECODERS[element]
        return tuple([decode(v) for v in getattr(lst, field)])
    except OpError as e:
        raise type(e)(
            f"node {node.name!r} ({node.node_def.op}): attr {key!r}: {e.message}",
            node.name,
            node.node_def.op,
        ) from None


def _dec_string(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"string {value[:40]!r} is not UTF-8") from None


def _dec_type(number: int) -> DType:
    dtype = _DTYPE_OF.get(number)
    if dtype is None:
        raise UnimplementedError(f"dtype {_dtype_name(number)} is not supported by minigraph")
    return dtype


def _dtype_name(number: int) -> str:
    try:
        return _proto().DataType.Name(number)
    except ValueError:
        return f"DataType {number}"


def _dec_shape(proto: Any) -> TensorShape:
    dims = proto.dim
    if proto.unknown_rank:
        if len(dims):
            raise InvalidArgumentError("a shape with unknown_rank must have no dims")
        return TensorShape(None)
    sizes = [d.size for d in dims]
    if sizes and min(sizes) < -1:
        raise InvalidArgumentError(f"shape dims must be >= -1 (-1: unknown); got {sizes}")
    return TensorShape([None if s == -1 else s for s in sizes])


def _dec_tensor(proto: Any) -> np.ndarray:
    return tensor_from_proto(proto)


_SCALAR_DECODERS: dict[str, Any] = {
    "int": int, "float": float, "bool": bool, "string": _dec_string, "type": _dec_type,
    "shape": _dec_shape, "tensor": _dec_tensor,
}  # fmt: skip

# Allowed ranges of values held in wider typed fields (int_val is int32, half_val 16 bits).
_INT_RANGE = {
    dtypes.int8: (-(1 << 7), (1 << 7) - 1), dtypes.int16: (-(1 << 15), (1 << 15) - 1),
    dtypes.uint8: (0, (1 << 8) - 1), dtypes.uint16: (0, (1 << 16) - 1),
    dtypes.float16: (0, (1 << 16) - 1), dtypes.bfloat16: (0, (1 << 16) - 1),
}  # fmt: skip
_TENSOR_FIELDS = frozenset(["dtype", "tensor_shape", "version_number", "tensor_content"])


def tensor_from_proto(proto: Any) -> np.ndarray:
    """The read-only numpy array a TensorProto holds (tensor_content, typed values with TF's
    splat rule, or zeros when it holds none).

    Raises:
        InvalidArgumentError: inconsistent dtype, shape and values, or over MAX_CONST_BYTES.
        UnimplementedError: a dtype minigraph lacks.
    """
    dtype = _dec_type(proto.dtype)
    shape = _dec_shape(proto.tensor_shape)
    if not shape.is_fully_defined():
        raise InvalidArgumentError(f"a tensor's shape must be fully defined; got {shape}")
    dims = tuple(shape.dims)
    count = 1
    for d in dims:
        count *= d
    np_dtype = dtype.np_dtype
    if count * np_dtype.itemsize > MAX_CONST_BYTES:
        raise InvalidArgumentError(
            f"a {dtype.name} tensor of shape {shape} ({count * np_dtype.itemsize} bytes) is over "
            f"the {MAX_CONST_BYTES}-byte limit for constants in graph files "
            "(minigraph.graph_def.MAX_CONST_BYTES)"
        )
    field = _VALUE_FIELD[dtype]
    for descriptor, _ in proto.ListFields():
        name = descriptor.name
        if name not in _TENSOR_FIELDS and name != field:
            raise InvalidArgumentError(
                f"a {dtype.name} tensor holds values in {name}; expected tensor_content or {field}"
            )
    content = proto.tensor_content
    if content:
        if dtype.is_string:
            raise InvalidArgumentError("a string tensor cannot use tensor_content")
        if len(getattr(proto, field)):
            raise InvalidArgumentError(f"the tensor holds both tensor_content and {field}")
        if len(content) != count * np_dtype.itemsize:
            raise InvalidArgumentError(
                f"tensor_content has {len(content)} bytes, but a {dtype.name} tensor of shape "
                f"{shape} needs {count * np_dtype.itemsize}"
            )
        array = np.frombuffer(content, dtype=np_dtype)
        if sys.byteorder == "big" and np_dtype.itemsize > 1:
            array = array.byteswap()
        return array.reshape(dims)
    values = getattr(proto, field)
    per_element = 2 if dtype.is_complex else 1
    given = len(values)
    if given % per_element:
        raise InvalidArgumentError(f"{field} holds {given} numbers: not (real, imaginary) pairs")
    given //= per_element
    if given > count:
        raise InvalidArgumentError(
            f"{field} holds {given} values, but shape {shape} has {count} elements"
        )
    if dtype.is_string:
        flat = np.empty(given, dtype=object)
        flat[:] = list(values)
    elif given == 0:
        flat = np.zeros(0, np_dtype)
    else:
        flat = _typed_values(dtype, values)
    if given == 0:
        array = np.full(count, b"", dtype=object) if dtype.is_string else np.zeros(count, np_dtype)
    elif given < count:  # TF's splat: the last value fills the rest
        array = np.concatenate([flat, np.full(count - given, flat[-1], dtype=flat.dtype)])
    else:
        array = flat
    array = array.reshape(dims)
    array.flags.writeable = False
    return array


def _typed_values(dtype: DType, values: Any) -> np.ndarray:
    bounds = _INT_RANGE.get(dtype)
    if dtype.is_complex:
        parts = np.array(values, dtype=np.float32 if dtype is dtypes.complex64 else np.float64)
        return parts.view(dtype.np_dtype)
    if bounds is None:
        return np.array(values, dtype=dtype.np_dtype)
    wide = np.array(values, dtype=np.int64)
    low, high = bounds
    if wide.min() < low or wide.max() > high:
        bad = int(wide[(wide < low) | (wide > high)][0])
        raise InvalidArgumentError(
            f"value {bad} does not fit a {dtype.name} tensor"
            + (
                " (half_val holds the 16 bits of each value)"
                if bounds[1] == 65535 and dtype.is_floating
                else ""
            )
        )
    if dtype.is_floating:  # float16 and bfloat16: the bits
        return wide.astype(np.uint16).view(dtype.np_dtype)
    return wide.astype(dtype.np_dtype)
