"""GraphDef: minigraph's graph format, TensorFlow's, in both directions.

- `as_graph_def(graph, add_shapes=False)` (also `Graph.as_graph_def`) writes a graph as a
  `GraphDef` message, wire- and text-compatible with TensorFlow 2.x.
- `import_graph_def(scope, graph_def, input_map=None, return_elements=None, name="import")`
  adds a GraphDef's nodes to a graph, with `tf.compat.v1.import_graph_def`'s semantics.
- `write_graph(graph_or_graph_def, path, as_text=None)` and `read_graph(path)`: `.pb` (binary)
  and `.pbtxt` (text) files.

Import builds every node through `Graph.add` (add_operation's path) with the registered OpDef,
so attr validation and shape inference run exactly as for built nodes, inside one
`Graph.transaction`: on any error the graph is left as it was. Reading never executes code:
the input is parsed by protobuf and validated field by field; a Const may declare at most
`MAX_CONST_BYTES`.

Graphs that need semantics TensorFlow lacks (an attr TF's op does not have, set to a value other
than its default, such as GatherNd's `batch_dims=1`) are written with
`versions.min_consumer = MINIGRAPH_MIN_CONSUMER`, above any TensorFlow version, so TensorFlow
refuses them ("Please upgrade TensorFlow") instead of ignoring the attr and computing something
else. Op libraries say which attrs TF's op has with `minigraph.tf_compat.register_tf_attrs`; at
their defaults the others are left out, so ordinary graphs are plain TensorFlow graphs.

protobuf (and, for graphs whose nodes are not in dependency order, networkx) is imported on
first use, never by `import minigraph`.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from minigraph import dtypes, libraries, registry
from minigraph.builder import OpBuilder
from minigraph.device_spec import DeviceSpec
from minigraph.dtypes import DType
from minigraph.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    ResourceExhaustedError,
    UnimplementedError,
)
from minigraph.graph import Graph, Operation, Output, user_source
from minigraph.memory import available_bytes
from minigraph.tensor_shape import TensorShape
from minigraph.tf_compat import same_attr_value, tf_attrs

if TYPE_CHECKING:
    from minigraph.scope import Scope

__all__ = [
    "as_graph_def",
    "import_graph_def",
    "write_graph",
    "read_graph",
    "parse_graph_def",
    "looks_like_text",
    "tensor_from_proto",
    "PRODUCER_VERSION",
    "MINIGRAPH_MIN_CONSUMER",
    "MAX_CONST_BYTES",
    "MAX_IMPORT_BYTES",
    "MAX_GRAPH_FILE_BYTES",
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
# The most memory the values of one import may take (bytes), every copy the import holds
# counted, checked before anything is allocated; the memory available caps it further. No
# graph file holds more than protobuf's 2 GiB of values, so more can only come from values a
# few bytes declare (TF's splat rule: a shape and no values is all zeros).
MAX_IMPORT_BYTES = 2 << 30
# The largest graph file read_graph reads: protobuf's limit for one message.
MAX_GRAPH_FILE_BYTES = (2 << 30) - 1

# TF's DataType numbers (tensorflow/core/framework/types.proto).
_DT_NUMBER: dict[DType, int] = {
    dtypes.float32: 1, dtypes.float64: 2, dtypes.int32: 3, dtypes.uint8: 4, dtypes.int16: 5,
    dtypes.int8: 6, dtypes.string: 7, dtypes.complex64: 8, dtypes.int64: 9, dtypes.bool_: 10,
    dtypes.bfloat16: 14, dtypes.uint16: 17, dtypes.complex128: 18, dtypes.float16: 19,
    dtypes.uint32: 22, dtypes.uint64: 23, dtypes.resource: 20,
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

# TF's node-name grammar (a first character of [A-Za-z0-9.], then also '_', '-', '/', '>'),
# checked one '/'-separated part at a time: unlike TF, empty parts ("a//b", "a/") are refused.
# (fullmatch: `$` would also accept a trailing newline)
_NAME_PART_RE = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\->]*")
_INDEX_RE = re.compile(r"[0-9]+")
_TEXT_SUFFIXES = (".pbtxt", ".txt", ".textproto", ".prototxt")


def _proto() -> Any:
    # protobuf is imported here, on first use, never by `import minigraph`.
    from minigraph import proto  # noqa: PLC0415

    return proto


def _check_flag(value: Any, what: str, none_ok: bool = False) -> None:
    """Refuses a flag argument that is not a bool (truthiness would take any string as yes,
    and an array raises numpy's own error); `none_ok`: None means "decide for me"."""
    if isinstance(value, (bool, np.bool_)) or (none_ok and value is None):
        return
    choices = "None, True or False" if none_ok else "True or False"
    raise InvalidArgumentError(f"{what} is {choices}; got {value!r}")


# -- export ------------------------------------------------------------------------------------


def as_graph_def(graph: Graph, add_shapes: bool = False) -> Any:
    """`graph` as a GraphDef message (`minigraph.proto.GraphDef`).

    Nodes are written in creation order (a topological order) with all attrs, defaults
    included, as TensorFlow writes them; Consts hold their values; requested devices, control
    inputs (`^name`), colocation (`_class: ["loc:@group"]`) and kernel labels (`_kernel`) are
    kept. With `add_shapes`, each node gets TF's `_output_shapes` attr. For byte-identical files
    from equal graphs serialize with `SerializeToString(deterministic=True)` (write_graph does).
    """
    _check_flag(add_shapes, "as_graph_def: add_shapes")
    if not isinstance(graph, Graph):
        graph = getattr(graph, "graph", graph)  # a Scope
        if not isinstance(graph, Graph):
            raise InvalidArgumentError(f"as_graph_def needs a Graph; got {type(graph).__name__}")
    proto = _proto()
    graph_def = proto.GraphDef()
    needs_minigraph = False
    nodes = graph_def.node
    plans: dict[Any, tuple[list[tuple[str, Any, Any, bool]], bool]] = {}
    # Nodes built alike share one canonical attrs mapping (Graph memoises construction): their
    # attrs are encoded once, into a NodeDef template merged into each (one C call).
    templates: dict[tuple[int, int], tuple[Any, Any, Any]] = {}
    for op in graph.operations:
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
        attrs = op.attrs
        key = (id(attrs), id(op.op_def))
        cached = templates.get(key)
        if cached is not None:
            node.MergeFrom(cached[0])
        else:
            entry = plans.get(op.op_def)
            if entry is None:
                entry = plans[op.op_def] = _attr_plan(op.op_def)
            plan, has_tensors = entry
            # Tensor values (Consts) are written straight into their node: copying them
            # through a template would cost a copy each, and they are rarely shared.
            target = node if has_tensors else proto.NodeDef()
            attr_map = target.attr
            for name, encode, default, tf_lacks in plan:
                value = attrs[name]
                if tf_lacks:
                    if default is not _NO_DEFAULT and same_attr_value(value, default):
                        continue
                    needs_minigraph = True
                encode(attr_map[name], value)
            if not has_tensors:
                # The mapping and OpDef stay alive with the template: their ids are not reused.
                templates[key] = (target, attrs, op.op_def)
                node.MergeFrom(target)
        if op.colocation_group != op.name:
            node.attr["_class"].list.s.append(("loc:@" + op.colocation_group).encode("utf-8"))
        if op.kernel_label:
            node.attr["_kernel"].s = op.kernel_label.encode("utf-8")
        if add_shapes:
            shapes = node.attr["_output_shapes"].list
            shapes.SetInParent()
            for out in op.outputs:
                _fill_shape(shapes.shape.add(), out.shape)
    graph_def.versions.producer = PRODUCER_VERSION
    if needs_minigraph:
        graph_def.versions.min_consumer = MINIGRAPH_MIN_CONSUMER
    return graph_def


_NO_DEFAULT = object()


def _attr_plan(op_def: Any) -> tuple[list[tuple[str, Any, Any, bool]], bool]:
    """(name, encoder, default, TF lacks it) per attr of `op_def`, in declaration order; and
    whether it has tensor-valued attrs."""
    known = tf_attrs(op_def.name)
    plan = []
    for attr_def in op_def.attrs:
        default = attr_def.default if attr_def.has_default else _NO_DEFAULT
        tf_lacks = known is not None and attr_def.name not in known
        plan.append((attr_def.name, _ENCODERS[attr_def.type], default, tf_lacks))
    return plan, any(a.type in ("tensor", "list(tensor)") for a in op_def.attrs)


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
    _check_flag(text, "parse_graph_def: text", none_ok=True)
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
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            f"looks_like_text takes the file's bytes; got {type(data).__name__}"
        )
    data = bytes(data) if not isinstance(data, bytes) else data
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
    path = _check_path(path, "read_graph")
    try:
        with open(path, "rb") as f:
            data = _read_file(f, path)
    except OSError as e:
        raise _file_error(e, path, "read") from None
    except MemoryError:
        raise ResourceExhaustedError(f"{path}: out of memory reading the file") from None
    try:
        return parse_graph_def(data)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{os.fspath(path)}: {e.message}") from None


def _read_file(f: Any, path: str) -> bytes:
    """The bytes of a graph file, at most MAX_GRAPH_FILE_BYTES: a regular file's size is
    checked before reading; a pipe or device (`/dev/stdin`, `/dev/zero`) is read in pieces,
    and refused at once when its first byte starts no GraphDef."""
    info = os.fstat(f.fileno())
    if stat.S_ISREG(info.st_mode):
        size = info.st_size
        if size > MAX_GRAPH_FILE_BYTES:
            raise _too_large(path, size)
        data = f.read(size + 1)
        if len(data) <= size:
            return data
        chunks = [data]  # it grew while read: the rest as a pipe's, within the limit
    else:
        chunks = []
    total = sum(map(len, chunks))
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            return b"".join(chunks)
        if not chunks and chunk[0] < 8:
            # A binary GraphDef starts with a field tag, (field << 3) | wire type with fields
            # numbered from 1; a text one with whitespace, a comment or a field name.
            raise InvalidArgumentError(
                f"{path}: not a GraphDef: it starts with the byte {chunk[:1]!r}, which starts "
                "neither a binary GraphDef (a field tag) nor a text one"
            )
        total += len(chunk)
        if total > MAX_GRAPH_FILE_BYTES:
            raise _too_large(path)
        chunks.append(chunk)


def _too_large(path: str, size: int | None = None) -> InvalidArgumentError:
    what = "it holds more" if size is None else f"its {size} bytes are more"
    return InvalidArgumentError(
        f"{path}: not a GraphDef: {what} than the {MAX_GRAPH_FILE_BYTES} bytes protobuf allows "
        "for one message (minigraph.graph_def.MAX_GRAPH_FILE_BYTES)"
    )


def write_graph(
    graph_or_graph_def: Any, path: str | os.PathLike[str], as_text: bool | None = None
) -> str:
    """Writes a Graph (or Scope) or a GraphDef message to `path`; returns the path.

    Text format when `as_text` is true, or when it is None and the path ends in `.pbtxt` or
    `.txt`; binary otherwise (serialized deterministically). The file is replaced atomically.
    """
    graph_def = _as_message(graph_or_graph_def, allow_graph=True)
    path = _check_path(path, "write_graph")
    _check_flag(as_text, "write_graph: as_text", none_ok=True)
    if as_text is None:
        as_text = path.lower().endswith(_TEXT_SUFFIXES)
    if as_text:
        from google.protobuf import text_format  # noqa: PLC0415

        data = text_format.MessageToString(graph_def).encode("utf-8")
    else:
        data = graph_def.SerializeToString(deterministic=True)
    # Through a symlink to the file it names (as writing to it would), which must be a regular
    # file or nothing: replacing anything else (/dev/null, a FIFO) would destroy it.
    target = os.path.realpath(path)
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise _file_error(e, path, "write") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise InvalidArgumentError(f"{path!r} is a directory, not a file")
        raise InvalidArgumentError(
            f"cannot write a graph to {path!r}: it is {_file_kind(info.st_mode)}, not a regular "
            "file; write_graph replaces regular files only (atomically), or creates one"
        )
    # The permissions any file written there gets: an existing file's own, else what the
    # umask leaves of 0666 (mkstemp makes 0600).
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
    directory = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".minigraph-", dir=directory)
    except OSError as e:
        raise _file_error(e, path, "write") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, target)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _file_error(e, path, "write") from None
        raise
    return path


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
    ):  # fmt: skip
        if test(mode):
            return kind
    return "not a regular file"


_umask_lock = threading.Lock()


def _umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux's
    /proc/self/status); elsewhere set and restored, which other threads creating files at that
    instant could notice (with 022, the common umask, in the meantime)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _check_path(path: Any, what: str) -> str:
    """A file path as a str (bytes and os.PathLike too; not an int, which open() would take
    as a file descriptor)."""
    if isinstance(path, (bool, int)) or not isinstance(path, (str, bytes, os.PathLike)):
        raise InvalidArgumentError(f"{what}: a path is a str or os.PathLike; got {path!r}")
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path or "\0" in path:
        raise InvalidArgumentError(f"{what}: not a file path: {path!r}")
    return path


def _file_error(e: OSError, path: str, action: str) -> OpError:
    """The typed error for a file that cannot be read or written (TF's file errors)."""
    reason = e.strerror or str(e)
    if isinstance(e, (FileNotFoundError, NotADirectoryError)):
        if action == "read":
            return NotFoundError(f"no such graph file: {path!r}")
        return NotFoundError(f"cannot write {path!r}: no such directory ({reason})")
    if isinstance(e, IsADirectoryError):
        return InvalidArgumentError(f"{path!r} is a directory, not a file")
    return FailedPreconditionError(f"cannot {action} {path!r}: {reason}")


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


class _NotInOrder(Exception):
    """A NodeDef refers to a node that comes later in the file: sort first (see _build)."""


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
            scope's device, nodes without inputs get its control dependencies, and nodes
            without a `_kernel` attr its kernel label.
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
    view = _view(graph_def)
    _check_versions(view)
    if view.HasField("library") and view.library.ByteSize():
        raise UnimplementedError(
            "the GraphDef has a function library (GraphDef.library): minigraph has no graph "
            "functions"
        )
    graph = scope.graph
    tensor_map, control_map = _check_input_map(input_map, graph)
    returns = _check_return_elements(return_elements)
    nodes = view.node
    attrs = _AttrTable()
    budget = _import_budget
    outer = budget.remaining
    budget.remaining = _check_import_size(nodes)
    try:
        return _import_nodes(
            scope, graph, nodes, attrs, name, tensor_map, control_map, returns, input_map, source
        )
    except ResourceExhaustedError:  # a MemoryError too: the budget's own, already typed
        raise
    except MemoryError:  # past the estimate (other memory in use): the graph is unchanged
        raise ResourceExhaustedError(
            "import_graph_def ran out of memory building the graph's constants; the graph is "
            "left as it was"
        ) from None
    finally:
        budget.remaining = outer


def _import_nodes(
    scope: Scope,
    graph: Graph,
    nodes: Any,
    attrs: _AttrTable,
    name: str | None,
    tensor_map: dict[tuple[str, int], Output],
    control_map: dict[str, Operation],
    returns: list[tuple[str, str, int | None]] | None,
    input_map: Mapping[str, Any] | None,
    source: str | None,
) -> list[Operation | Output] | None:
    with graph.transaction():
        base = scope.new_sub_scope(name) if name else scope
        try:
            # Graphs that minigraph and TensorFlow write list every node after its inputs:
            # build them in one pass. A forward reference undoes that pass (inner transaction).
            with graph.transaction():
                built = _build(base, nodes, tensor_map, control_map, attrs, source)
        except _NotInOrder:
            order = _sort(nodes, tensor_map, control_map, attrs)
            try:
                built = _build(base, order, tensor_map, control_map, attrs, source)
            except _NotInOrder:  # _sort validated every reference
                raise InternalError(
                    "import_graph_def: a sorted GraphDef was out of order"
                ) from None
        missing = [k for k in input_map or () if k.lstrip("^").partition(":")[0] not in built]
        if missing:
            raise InvalidArgumentError(
                f"input_map names tensors that are not in the GraphDef: {missing}"
            )
        for node_name, index in tensor_map:
            _output(built[node_name], node_name, index, f"input_map key '{node_name}:{index}'")
        if returns is None:
            return None
        results: list[Operation | Output] = []
        for element, node_name, index in returns:
            op = built.get(node_name)
            if op is None:
                raise InvalidArgumentError(
                    f"return element {element!r}: the GraphDef has no node {node_name!r}"
                )
            if index is not None:
                op = _output(op, node_name, index, f"return element {element!r}")
            results.append(op)
        return results


def _view(graph_def: Any) -> Any:
    """A GraphDefView (the same wire format, attrs left serialized) of a GraphDef message,
    minigraph's or TensorFlow's, or of its serialized bytes."""
    proto = _proto()
    if isinstance(graph_def, (bytes, bytearray, memoryview)):
        data = bytes(graph_def)
    elif isinstance(graph_def, proto.GraphDef) or (
        type(graph_def).__name__ == "GraphDef"
        and callable(getattr(graph_def, "SerializeToString", None))
    ):
        data = graph_def.SerializeToString()
    elif isinstance(graph_def, str):
        raise InvalidArgumentError(
            "got a str: pass the GraphDef message or its serialized bytes (read_graph(path) "
            "reads a file)"
        )
    else:
        raise InvalidArgumentError(
            f"expected a GraphDef message or its serialized bytes; got {type(graph_def).__name__}"
        )
    from google.protobuf.message import DecodeError  # noqa: PLC0415

    try:
        return proto.GraphDefView.FromString(data)
    except (DecodeError, ValueError, RuntimeError, RecursionError) as e:
        raise InvalidArgumentError(
            f"cannot parse {len(data)} bytes as a binary GraphDef (truncated or not a GraphDef): "
            f"{e}"
        ) from None


def _check_versions(message: Any) -> None:
    versions = message.versions
    if versions.min_consumer > MINIGRAPH_MIN_CONSUMER:
        raise UnimplementedError(
            f"GraphDef min consumer version {versions.min_consumer} is above minigraph's "
            f"({MINIGRAPH_MIN_CONSUMER}): the graph needs a newer reader"
        )
    if MINIGRAPH_MIN_CONSUMER in versions.bad_consumers:
        raise UnimplementedError("the GraphDef lists minigraph's version as a bad consumer")


def _check_node_name(name: str) -> None:
    if not name or not all(_NAME_PART_RE.fullmatch(part) for part in name.split("/")):
        raise InvalidArgumentError(
            f"illegal node name {name!r}: node names are '/'-separated parts of letters, "
            "digits, '_', '.', '-' and '>', each starting with a letter, digit or '.'",
            name,
        )


def _missing_op_types(node_defs: Any) -> NotFoundError | None:
    """One NotFoundError naming every op type of `node_defs` that is not registered and the
    first node using it; None when all are. Missing op types first load the op libraries that
    installed packages announce (once per process: minigraph.libraries)."""
    missing: dict[str, str] = {}
    for attempt in range(2):
        missing.clear()
        known = set(registry.list_ops())
        for node_def in node_defs:
            op_type = node_def.op
            if op_type not in known and op_type not in missing:
                missing[op_type] = node_def.name
        if not missing or attempt or not libraries.load_announced():
            break
    if not missing:
        return None
    listed = ", ".join(f"{t!r} (first used by node {n!r})" for t, n in missing.items())
    first_type, first_node = next(iter(missing.items()))
    one = len(missing) == 1
    return NotFoundError(
        f"Op type{'' if one else 's'} not registered: {listed}. "
        f"{libraries.missing_ops_hint(one)} (`minigraph ops` lists the registered ops)",
        first_node,
        first_type,
    )


def _parse_tensor_name(text: str) -> tuple[str, int] | None:
    """("node", index) for "node" or "node:3"; None when malformed."""
    node, sep, index = text.rpartition(":")
    if not sep:
        return text, 0
    if not node or not _INDEX_RE.fullmatch(index):
        return None
    return node, int(index)


def _where(node_def: Any) -> str:
    return f"node {node_def.name!r} ({node_def.op})"


def _split_input_list(node_def: Any) -> tuple[list[tuple[str, int]], list[str]]:
    """(data inputs as (node, index), control inputs) of a NodeDef, syntax checked."""
    inputs: list[tuple[str, int]] = []
    controls: list[str] = []
    for text in node_def.input:
        if text[:1] == "^":
            controls.append(text[1:])
            continue
        if controls:
            raise InvalidArgumentError(
                f"{_where(node_def)}: data input {text!r} comes after a control input; "
                "control inputs ('^name') must come last",
                node_def.name,
            )
        parsed = _parse_tensor_name(text)
        if parsed is None or not parsed[0]:
            raise InvalidArgumentError(
                f"{_where(node_def)}: malformed input {text!r} (expected 'node', 'node:index' "
                "or '^node')",
                node_def.name,
            )
        inputs.append(parsed)
    return inputs, controls


class _NodeAttrs:
    """A NodeDef's attrs, decoded: the OpDef's (by name), and what TF's "_" attrs say."""

    __slots__ = ("attrs", "label", "shapes", "colocation")

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}
        self.label: str | None = None  # _kernel
        self.shapes: tuple[TensorShape, ...] | None = None  # _output_shapes
        self.colocation: list[str] = []  # _class: the "loc:@name" targets


# Attr maps up to this size (serialized) are decoded once per import and shared by every node
# whose entries are byte-identical; larger ones (Const values) are decoded each time.
_SHARED_ATTRS_MAX = 1024


class _AttrTable:
    """Decodes NodeDef attr entries per op type, once per distinct (op, serialized entries)."""

    def __init__(self) -> None:
        self._decoders: dict[str, dict[str, Any]] = {}
        self._seen: dict[tuple[str, tuple[bytes, ...]], _NodeAttrs] = {}

    def decoders(self, op_def: Any) -> dict[str, Any]:
        table = self._decoders.get(op_def.name)
        if table is None:
            table = self._decoders[op_def.name] = {
                a.name: _attr_decoder(a.name, a.type) for a in op_def.attrs
            }
        return table

    def get(self, op_def: Any, node_def: Any) -> _NodeAttrs:
        entries = tuple(node_def.attr)
        key = (op_def.name, entries)
        shared = sum(map(len, entries)) <= _SHARED_ATTRS_MAX
        if shared:
            found = self._seen.get(key)
            if found is not None:
                return found
        try:
            decoded = self._decode(op_def, entries)
        except OpError as e:
            raise type(e)(f"{_where(node_def)}: {e.message}", node_def.name, op_def.name) from None
        if shared:
            self._seen[key] = decoded
        return decoded

    def _decode(self, op_def: Any, entries: tuple[bytes, ...]) -> _NodeAttrs:
        from google.protobuf.message import DecodeError  # noqa: PLC0415

        entry_class = _proto().AttrEntry
        decoders = self.decoders(op_def)
        out = _NodeAttrs()
        budget = _import_budget
        for data in entries:
            try:
                entry = entry_class.FromString(data)
            except (DecodeError, ValueError, RuntimeError, RecursionError) as e:
                raise InvalidArgumentError(f"an attr entry cannot be parsed: {e}") from None
            key = entry.key
            value = entry.value
            decode = decoders.get(key)
            if decode is not None:
                # Entries too large to cost before the import (see _check_import_size) are
                # charged as their tensors are decoded.
                budget.charging = len(data) > _PREPASS_ENTRY_MAX
                try:
                    out.attrs[key] = decode(value)
                finally:
                    budget.charging = False
            elif key[:1] == "_":
                # Other "_" attrs are TF's annotations (_has_manual_control_dependencies, ...),
                # meaningless here.
                if key == "_class":
                    out.colocation = _colocation_targets(value)
                elif key == "_kernel":
                    out.label = _decode(value, "string", key)
                    if not out.label.isprintable():  # as Scope.with_kernel_label requires
                        raise InvalidArgumentError(
                            f"attr '_kernel': a kernel label is a printable string; got "
                            f"{out.label!r}"
                        )
                elif key == "_output_shapes":
                    out.shapes = _decode(value, "list(shape)", key)
            else:
                raise InvalidArgumentError(
                    f"unknown attr {key!r}: {op_def.name} has {sorted(decoders)}; the graph "
                    "may need a newer op library"
                )
        return out


# What an import holds at once of a string tensor, per element: the pointer in the decoded
# array and in each of the three arrays and lists the node's conversion makes (measured with
# tracemalloc: 32 bytes per element), plus a bytes object per value the file holds.
_STRING_ELEMENT_BYTES = 32
_BYTES_OBJECT_BYTES = 33  # sys.getsizeof(b""): a bytes object's size besides its contents


# Attr entries up to this size (serialized) are costed before the import builds anything;
# larger ones (real data: parsing them twice would cost seconds) when their node is built,
# right before their value is allocated.
_PREPASS_ENTRY_MAX = 64 * 1024


class _ImportBudget(threading.local):
    """The bytes the import running on this thread may still allocate for the values of
    large attr entries (None: no import, or no budget); `charging`: the entry being decoded
    is one of those."""

    remaining: int | None = None
    charging = False

    def charge(self, proto: Any) -> None:
        if not self.charging or self.remaining is None:
            return
        cost = _tensor_cost(proto)
        left = self.remaining
        if cost > _ALWAYS_AVAILABLE:
            available = available_bytes()
            if available is not None:
                left = min(left, available)
        if cost > left:
            raise ResourceExhaustedError(
                f"importing this value would take {cost} bytes, and the import may allocate "
                f"{left} more (minigraph.graph_def.MAX_IMPORT_BYTES = {MAX_IMPORT_BYTES} for "
                "all of its values, and no more than the memory available); nothing more was "
                "allocated"
            )
        self.remaining -= cost


_import_budget = _ImportBudget()


def _check_import_size(node_defs: Any) -> int:
    """Refuses, before anything is allocated, a GraphDef whose tensor values (Consts', and any
    other tensor attr's) would take more memory than MAX_IMPORT_BYTES or than is available;
    returns what the values of its large attr entries may still take (`_ImportBudget`).

    Each distinct value counts once (nodes whose attrs are byte-identical share it, as
    `_AttrTable` does), at what its import holds at once (`_tensor_cost`). Tensors that break
    the per-constant limit, or are malformed, count nothing here: building them reports them."""
    proto = _proto()
    tensor_attrs: dict[str, frozenset[str] | None] = {}
    seen: set[tuple[str, tuple[bytes, ...]]] = set()
    costs: list[tuple[int, str]] = []
    for node_def in node_defs:
        op_type = node_def.op
        if op_type in tensor_attrs:
            names = tensor_attrs[op_type]
        else:
            try:
                op_def = registry.get_op_def(op_type)
            except NotFoundError:
                names = None  # not loaded yet: any attr may hold tensors
            else:
                names = frozenset(
                    a.name for a in op_def.attrs if a.type in ("tensor", "list(tensor)")
                )
            tensor_attrs[op_type] = names
        if names is not None and not names:
            continue
        entries = tuple(node_def.attr)
        if sum(map(len, entries)) <= _SHARED_ATTRS_MAX:  # decoded once and shared
            key = (op_type, entries)
            if key in seen:
                continue
            seen.add(key)
        cost = 0
        for data in entries:
            if len(data) > _PREPASS_ENTRY_MAX:
                continue  # costed when built
            try:
                entry = proto.AttrEntry.FromString(data)
            except Exception:  # noqa: BLE001 - malformed: building the node reports it
                continue
            if names is not None and entry.key not in names:
                continue
            value = entry.value
            which = value.WhichOneof("value")
            if which == "tensor":
                cost += _tensor_cost(value.tensor)
            elif which == "list":
                cost += sum(_tensor_cost(t) for t in value.list.tensor)
        if cost:
            costs.append((cost, node_def.name))
    total = sum(c for c, _ in costs)
    limit = MAX_IMPORT_BYTES
    # Asking the system is only worth it past what any machine has to spare.
    available = available_bytes() if total > _ALWAYS_AVAILABLE else None
    if available is not None:
        limit = min(limit, available)
    if total <= limit:
        return limit - total
    if total > MAX_IMPORT_BYTES:
        over = (
            f"the {MAX_IMPORT_BYTES}-byte limit for one import "
            "(minigraph.graph_def.MAX_IMPORT_BYTES)"
        )
    else:
        over = f"the {available} bytes of memory available"
    largest = ", ".join(f"{name!r} {cost}" for cost, name in sorted(costs, reverse=True)[:3])
    raise ResourceExhaustedError(
        f"the GraphDef's tensor values would take {total} bytes to import (largest, in bytes: "
        f"{largest}{', ...' if len(costs) > 3 else ''}), over {over}; nothing was allocated. "
        "Each value counts what importing it holds at once; a value a file declares by its "
        "shape alone (TF's splat rule: no values is all zeros) counts in full."
    )


#: Imports whose values take up to this much are not checked against the memory available.
_ALWAYS_AVAILABLE = 64 << 20


def _tensor_cost(proto: Any) -> int:
    """The bytes that importing TensorProto `proto` holds at once (see tensor_from_proto): its
    array; a second copy while typed values are converted and frozen; for strings, the
    pointers of the conversion's arrays and a bytes object per value. 0 for what the
    per-constant checks refuse."""
    dtype = _DTYPE_OF.get(proto.dtype)
    shape = proto.tensor_shape
    if dtype is None or dtype not in _VALUE_FIELD or shape.unknown_rank:
        return 0  # refused by tensor_from_proto (resource handles are no constants)
    count = nonzero = 1
    for dim in shape.dim:
        if dim.size < 0:
            return 0
        count *= dim.size
        nonzero *= dim.size or 1
    itemsize = dtype.np_dtype.itemsize
    if max(count, nonzero) * itemsize > MAX_CONST_BYTES:
        return 0  # refused by tensor_from_proto, with its own message
    if dtype.is_string:
        given = len(proto.string_val)
        # ByteSize: at least the values' lengths, what their bytes objects hold.
        return count * _STRING_ELEMENT_BYTES + given * _BYTES_OBJECT_BYTES + proto.ByteSize()
    nbytes = count * itemsize
    given = len(getattr(proto, _VALUE_FIELD[dtype]))
    if not given:
        # tensor_content (viewed where it is; reading it would copy it) or zeros, made frozen;
        # big-endian machines swap a copy, and freeze it.
        return nbytes if sys.byteorder == "little" or itemsize == 1 else 3 * nbytes
    return 2 * nbytes + given * 8  # the values (as int64 when range-checked), their copy


def _colocation_targets(av: Any) -> list[str]:
    """The nodes a `_class` attr names ("loc:@name" entries; others are ignored, as TF does)."""
    if av.WhichOneof("value") != "list" or len(av.list.s) != _list_length(av.list):
        raise InvalidArgumentError("attr '_class' must be a list of strings ('loc:@node')")
    targets = []
    for entry in av.list.s:
        text = entry.decode("utf-8", errors="replace")
        if text.startswith("loc:@") and text[5:] not in targets:
            targets.append(text[5:])
    return targets


def _list_length(lst: Any) -> int:
    return sum(len(values) for _, values in lst.ListFields())


def _check_input_map(
    input_map: Mapping[str, Any] | None, graph: Graph
) -> tuple[dict[tuple[str, int], Output], dict[str, Operation]]:
    """input_map as {(node, index): Output} and {node: Operation} (for "^node" keys); whether
    the GraphDef has those nodes is checked once it is read."""
    from minigraph.scope import as_output  # noqa: PLC0415

    tensors: dict[tuple[str, int], Output] = {}
    controls: dict[str, Operation] = {}
    if input_map is None:
        return tensors, controls
    if not isinstance(input_map, Mapping):
        raise InvalidArgumentError(
            f"input_map must be a dict of names to Outputs; got {type(input_map).__name__}"
        )
    for key, value in input_map.items():
        if not isinstance(key, str):
            raise InvalidArgumentError(
                f"input_map keys are tensor names ('x:0', '^x'); got {key!r}"
            )
        control = key.startswith("^")
        parsed = (key[1:], 0) if control else _parse_tensor_name(key)
        if parsed is None or not parsed[0]:
            raise InvalidArgumentError(f"malformed input_map key {key!r}")
        if control:
            op = value if isinstance(value, Operation) else None
            if isinstance(value, Output):
                op = value.op
            elif isinstance(value, OpBuilder):
                op = value.operation
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
    return tensors, controls


def _check_return_elements(names: Sequence[str] | None) -> list[tuple[str, str, int | None]] | None:
    if names is None:
        return None
    if isinstance(names, (str, bytes)):
        raise InvalidArgumentError("return_elements is a list of names, not a single string")
    if not isinstance(names, Iterable):
        raise InvalidArgumentError(
            f"return_elements is a list of names; got {type(names).__name__}"
        )
    out = []
    for element in names:
        if not isinstance(element, str):
            raise InvalidArgumentError(f"return_elements are names; got {element!r}")
        if ":" in element:
            parsed = _parse_tensor_name(element)
            if parsed is None:
                raise InvalidArgumentError(f"malformed return element {element!r}")
            out.append((element, parsed[0], parsed[1]))
        else:
            out.append((element, element, None))
    return out


def _sort(
    node_defs: Any,
    tensor_map: Mapping[tuple[str, int], Output],
    control_map: Mapping[str, Operation],
    attrs: _AttrTable,
) -> list[Any]:
    """The NodeDefs in dependency order, for files that do not list every node after its
    inputs: validated (names, references), then sorted topologically with networkx, stable
    with respect to the file's order. A cycle is an error that shows it."""
    position: dict[str, int] = {}
    for i, node_def in enumerate(node_defs):
        name = node_def.name
        if name in position:
            raise InvalidArgumentError(f"node name {name!r} is not unique in the GraphDef", name)
        _check_node_name(name)
        position[name] = i
    error = _missing_op_types(node_defs)
    if error is not None:
        raise error
    edges = []
    for i, node_def in enumerate(node_defs):
        inputs, controls = _split_input_list(node_def)
        sources = [key[0] for key in inputs if key not in tensor_map]
        sources += [c for c in controls if c not in control_map]
        what = ["input"] * len(sources)
        targets = attrs.get(registry.get_op_def(node_def.op), node_def).colocation
        targets = [t for t in targets if t != node_def.name]
        sources += targets
        what += ["colocation target"] * len(targets)
        for source, kind in zip(sources, what):
            j = position.get(source)
            if j is None:
                raise InvalidArgumentError(
                    f"{_where(node_def)}: {kind} {source!r} names no node of the GraphDef",
                    node_def.name,
                )
            edges.append((j, i))
    import networkx as nx  # noqa: PLC0415 - imported on use: it is slow to import

    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(position)))
    dag.add_edges_from(edges)
    try:
        return [node_defs[i] for i in nx.lexicographical_topological_sort(dag)]
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(dag)
        path = [node_defs[u].name for u, _ in cycle] + [node_defs[cycle[0][0]].name]
        raise InvalidArgumentError(
            f"the GraphDef has a cycle: {' -> '.join(path)} (through inputs, control inputs "
            "or colocation)",
            path[0],
        ) from None


def _build(
    scope: Scope,
    node_defs: Any,
    tensor_map: Mapping[tuple[str, int], Output],
    control_map: Mapping[str, Operation],
    attr_table: _AttrTable,
    source: tuple[Any, int] | str | None,
) -> dict[str, Operation]:
    """Adds `node_defs`, in this order, through the graph's construction protocol (`add`);
    returns {GraphDef name: Operation}. Raises _NotInOrder at a reference to a node not
    built yet."""
    graph = scope.graph
    prefix = scope.name_scope
    default_controls = list(scope.control_dependencies)
    default_label = scope.kernel_label
    built: dict[str, Operation] = {}
    devices: dict[str, DeviceSpec | None] = {"": scope.device}
    prefixes: dict[str, str] = {"": prefix}
    op_defs: dict[str, tuple[Any, bool]] = {}
    # The GraphDef's names, devices, inputs and controls are checked and canonical here, so
    # nodes go through the construction protocol's `add` (add_operation less its type checks).
    add = graph.add
    if source is None:
        source = user_source()
    name_ok = _NAME_PART_RE.fullmatch
    get_op_def = registry.get_op_def
    get_attrs = attr_table.get
    for node_def in node_defs:
        name = node_def.name
        if name in built:
            raise InvalidArgumentError(f"node name {name!r} is not unique in the GraphDef", name)
        if not name_ok(name):
            _check_node_name(name)
        op_type = node_def.op
        entry = op_defs.get(op_type)
        if entry is None:
            try:
                op_def = get_op_def(op_type)
            except NotFoundError:
                error = _missing_op_types(node_defs)  # None: announced libraries define it
                if error is not None:
                    raise error from None
                op_def = get_op_def(op_type)
            entry = op_defs[op_type] = (op_def, any(arg.is_list for arg in op_def.inputs))
        op_def, has_list_args = entry
        # Inputs: "node" (the common case, resolved inline), "node:i", then "^node".
        inputs = []
        controls = None
        for text in node_def.input:
            if ":" not in text and text[:1] != "^" and controls is None and not tensor_map:
                op = built.get(text)
                if op is None:
                    raise _NotInOrder
                outputs = op.outputs
                if not outputs:
                    _output(op, text, 0, f"input {text!r}", node_def)
                inputs.append(outputs[0])
                continue
            if text[:1] == "^":
                dep = text[1:]
                op = control_map.get(dep) or built.get(dep)
                if op is None:
                    raise _NotInOrder
                if controls is None:
                    controls = []
                controls.append(op)
                continue
            parsed = _parse_tensor_name(text)
            if controls is not None or parsed is None or not parsed[0]:
                _split_input_list(node_def)  # raises the syntax error
            tensor = tensor_map.get(parsed)
            if tensor is None:
                op = built.get(parsed[0])
                if op is None:
                    raise _NotInOrder
                tensor = _output(op, parsed[0], parsed[1], f"input {text!r}", node_def)
            inputs.append(tensor)
        if controls is None:
            controls = () if inputs else default_controls
        decoded = get_attrs(op_def, node_def)
        attrs = decoded.attrs
        group = _colocation_group(decoded.colocation, name, built, node_def)
        device_text = node_def.device
        device = devices.get(device_text, _NO_DEFAULT)
        if device is _NO_DEFAULT:
            device = devices[device_text] = _device(node_def)
        head, _, base = name.rpartition("/")
        node_prefix = prefixes.get(head)
        if node_prefix is None:
            node_prefix = prefixes[head] = f"{prefix}/{head}" if prefix else head
        if has_list_args:
            inputs = _split_inputs(op_def, inputs, attrs, node_def)
        label = decoded.label
        op = add(
            op_def, inputs, attrs, node_prefix, base, device, controls, group,
            default_label if label is None else label, source,
        )  # fmt: skip
        if decoded.shapes is not None:
            _check_output_shapes(op, decoded.shapes, node_def)
        built[name] = op
    return built


def _device(node_def: Any) -> DeviceSpec:
    try:
        return DeviceSpec.from_string(node_def.device)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(
            f"{_where(node_def)}: {e.message}", node_def.name, node_def.op
        ) from None


def _colocation_group(
    targets: list[str], name: str, built: Mapping[str, Operation], node_def: Any
) -> str | None:
    group = None
    for target in targets:
        if target == name:
            continue
        op = built.get(target)
        if op is None:
            raise _NotInOrder
        if group is not None and op.colocation_group != group:
            raise UnimplementedError(
                f"{_where(node_def)}: colocated with nodes of two groups ({group!r} and "
                f"{op.colocation_group!r}); minigraph keeps one colocation group per node",
                name,
                node_def.op,
            )
        group = op.colocation_group
    return group


def _split_inputs(op_def: Any, flat: list[Output], attrs: Mapping[str, Any], node_def: Any) -> list:
    """A NodeDef's flat inputs regrouped per input arg (a list for `N * T` and list(type) args),
    by the counts its attrs give (TF writes them: N, or the type list)."""
    try:
        for arg in op_def.inputs:
            count_attr = arg.number_attr or arg.type_list_attr
            if count_attr is None:
                continue
            if count_attr not in attrs:
                raise InvalidArgumentError(
                    f"attr {count_attr!r} is missing: it says how many tensors input "
                    f"'{arg.name}' has"
                )
            if arg.number_attr is not None and attrs[count_attr] < 0:
                raise InvalidArgumentError(
                    f"attr {count_attr!r} must be >= 0; got {attrs[count_attr]}"
                )
        return op_def.split_inputs(flat, attrs)
    except OpError as e:
        raise type(e)(f"{_where(node_def)}: {e.message}", node_def.name, op_def.name) from None


def _output(op: Operation, name: str, index: int, what: str, node_def: Any = None) -> Output:
    """Output `index` of `op` (GraphDef node `name`), or an error saying how many it has."""
    outputs = op.outputs
    if index >= len(outputs):
        where = f"{_where(node_def)}: " if node_def is not None else ""
        raise InvalidArgumentError(
            f"{where}{what} refers to output {index} of {name!r} ({op.type}), which has "
            f"{len(outputs)} output{'s' if len(outputs) != 1 else ''}",
            node_def.name if node_def is not None else name,
        )
    return outputs[index]


def _check_output_shapes(op: Operation, shapes: tuple[TensorShape, ...], node_def: Any) -> None:
    outputs = op.outputs
    if len(shapes) != len(outputs):
        raise InvalidArgumentError(
            f"{_where(node_def)}: '_output_shapes' lists {len(shapes)} shapes for "
            f"{len(outputs)} outputs",
            op.name,
            op.type,
        )
    for out, shape in zip(outputs, shapes):
        if not out.shape.is_compatible_with(shape):
            raise InvalidArgumentError(
                f"{_where(node_def)}: '_output_shapes' says output {out.index} has shape "
                f"{shape}, but its inputs give {out.shape}",
                op.name,
                op.type,
            )


def _attr_decoder(key: str, kind: str) -> Any:
    """A function decoding the AttrValue of attr `key` of type `kind` (fast for the common
    scalar kinds)."""
    if kind == "type":

        def decode_type(av: Any) -> DType:
            if av.WhichOneof("value") == "type":
                dtype = _DTYPE_OF.get(av.type)
                if dtype is not None:
                    return dtype
            return _decode(av, kind, key)

        return decode_type
    if kind == "int":

        def decode_int(av: Any) -> int:
            if av.WhichOneof("value") == "i":
                return av.i
            return _decode(av, kind, key)

        return decode_int
    return lambda av: _decode(av, kind, key)


def _decode(av: Any, kind: str, key: str) -> Any:
    """The canonical value of AttrValue `av` for an attr of type `kind`."""
    which = av.WhichOneof("value")
    is_list = kind.startswith("list(")
    expected = "list" if is_list else _ATTR_FIELD[kind]
    if which != expected:
        if which in ("func", "placeholder"):
            raise UnimplementedError(
                f"attr {key!r} holds a {which}; minigraph has no graph functions"
            )
        raise InvalidArgumentError(
            f"attr {key!r} must be {kind}, but the AttrValue holds {which or 'nothing'}"
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
        raise type(e)(f"attr {key!r}: {e.message}") from None


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
    _import_budget.charge(proto)  # before anything is allocated
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
    number = getattr(proto, "dtype", None)
    shape_proto = getattr(proto, "tensor_shape", None)
    if type(number) is not int or shape_proto is None:
        raise InvalidArgumentError(
            f"tensor_from_proto takes a TensorProto; got {type(proto).__name__}"
        )
    dtype = _dec_type(number)
    if dtype not in _VALUE_FIELD:  # DT_RESOURCE: a handle is made by its op, not stored
        raise InvalidArgumentError(
            f"a {dtype.name} tensor cannot be a constant: resource handles are made by the op "
            "that owns the resource (VarHandleOp)"
        )
    shape = _dec_shape(shape_proto)
    if not shape.is_fully_defined():
        raise InvalidArgumentError(f"a tensor's shape must be fully defined; got {shape}")
    dims = tuple(shape.dims)
    count = 1
    for d in dims:
        count *= d
    np_dtype = dtype.np_dtype
    # numpy refuses shapes whose non-zero dims multiply past its size limit, even for an
    # empty array ([0, 2**62]): such shapes are over the bound as well.
    nonzero = 1
    for d in dims:
        nonzero *= d or 1
    if max(count, nonzero) * np_dtype.itemsize > MAX_CONST_BYTES:
        raise InvalidArgumentError(
            f"a {dtype.name} tensor of shape {shape} ({count * np_dtype.itemsize} bytes"
            + ("" if count else f"; {nonzero * np_dtype.itemsize} without its zero dims")
            + f") is over the {MAX_CONST_BYTES}-byte limit for constants in graph files "
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
        # All zeros, made in frozen storage: the node built from it keeps it without a copy.
        return np.frombuffer(bytes(count * np_dtype.itemsize), np_dtype).reshape(dims)
    else:
        flat = _typed_values(dtype, values)
    if given == 0:
        array = np.full(count, b"", dtype=object)
    elif given < count:  # TF's splat: the last value fills the rest
        # Repeats the last element itself (np.full would make a bytes object per string).
        array = np.concatenate([flat, np.broadcast_to(flat[-1:], (count - given,))])
    else:
        array = flat
    array = array.reshape(dims)
    if not dtype.is_string:
        return dtypes.frozen_copy(array)  # what a node holds: built without another copy
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
