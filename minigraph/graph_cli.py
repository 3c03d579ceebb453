"""The command line's graph-file commands: `show`, `run`, `convert` and `freeze` (see
minigraph.__main__).

    minigraph show model.pb [--dot OUT.dot] [--svg OUT.svg]
    minigraph run model.pb --feed x:0=values.npy --feed k:0='[1, 2]' --fetch y:0 [--out DIR]
                           [--device CPU|GPU]
    minigraph convert model.pb model.pbtxt
    minigraph freeze model.pb model.ckpt frozen.pb --outputs probs [--outputs ...]

Every error is one line on stderr, `minigraph: ErrorType: message`, with exit status 1.
Reading a file never executes code: graphs are protobuf, `.npy` feeds are loaded without
pickle, and literal feeds are parsed with `ast.literal_eval`.
"""

from __future__ import annotations

import argparse
import ast
import os
import stat
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.devices import gpu_unavailable_reason
from minigraph.errors import InvalidArgumentError, NotFoundError, OpError
from minigraph.scope import Scope
from minigraph.session import Session

__all__ = ["add_commands"]


def add_commands(commands: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Adds `show`, `run` and `convert` to an argparse sub-parser set; returns their handlers."""
    show = commands.add_parser(
        "show",
        help="summarise a graph file (.pb/.pbtxt); draw it with --dot/--svg",
        description="Summarises a GraphDef file: node count per op type, inputs (placeholders "
        "with dtype and shape), likely outputs (tensors no node consumes) and devices.",
    )
    show.add_argument("file", metavar="FILE", help="a GraphDef file, binary or text")
    show.add_argument("--dot", metavar="OUT.dot", help="write a Graphviz DOT picture")
    show.add_argument("--svg", metavar="OUT.svg", help="draw an SVG (needs Graphviz's dot)")
    run = commands.add_parser(
        "run",
        help="run a graph file and print or save the fetched tensors",
        description="Imports a GraphDef file and runs it once.",
    )
    run.add_argument("file", metavar="FILE", help="a GraphDef file, binary or text")
    run.add_argument(
        "--feed",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="feed tensor NAME (x:0) from a .npy file or a Python literal ('[1, 2]'); repeatable",
    )
    run.add_argument(
        "--fetch",
        action="append",
        default=[],
        metavar="NAME",
        help="tensor (y:0) or operation (y) to fetch; repeatable; default: the likely outputs",
    )
    run.add_argument("--out", metavar="DIR", help="save each result as DIR/NAME.npy")
    run.add_argument(
        "--device",
        type=str.upper,
        choices=["CPU", "GPU"],
        help="request this device for every node that requests none (soft placement applies)",
    )
    convert = commands.add_parser(
        "convert",
        help="convert a graph file between binary (.pb) and text (.pbtxt)",
        description="Reads IN (binary or text, detected) and writes OUT: text when OUT ends in "
        ".pbtxt or .txt, binary otherwise, unless --text or --binary says.",
    )
    convert.add_argument("input", metavar="IN")
    convert.add_argument("output", metavar="OUT")
    form = convert.add_mutually_exclusive_group()
    form.add_argument("--text", dest="as_text", action="store_const", const=True, default=None)
    form.add_argument("--binary", dest="as_text", action="store_const", const=False)
    freeze = commands.add_parser(
        "freeze",
        help="turn a graph's variables into constants, from a checkpoint, for inference",
        description="Reads GRAPH (a GraphDef file with variables) and CHECKPOINT (written by "
        "minigraph.train.Saver; variables saved under their VarHandleOp's name, the Saver's "
        "default) and writes OUT: the nodes the --outputs need, each variable they read a "
        "Const of its saved value (minigraph.graph_util.freeze_graph_def), a graph TensorFlow "
        "imports and runs. Text when OUT ends in .pbtxt or .txt, unless --text or --binary.",
    )
    freeze.add_argument("graph", metavar="GRAPH", help="a GraphDef file, binary or text")
    freeze.add_argument("checkpoint", metavar="CHECKPOINT", help="a minigraph checkpoint")
    freeze.add_argument("output", metavar="OUT", help="the frozen GraphDef file to write")
    freeze.add_argument(
        "--outputs",
        action="append",
        required=True,
        metavar="NODE",
        help="an output node name (repeatable, or comma-separated)",
    )
    form = freeze.add_mutually_exclusive_group()
    form.add_argument("--text", dest="as_text", action="store_const", const=True, default=None)
    form.add_argument("--binary", dest="as_text", action="store_const", const=False)
    return {
        "show": _guard(_cmd_show), "run": _guard(_cmd_run), "convert": _guard(_cmd_convert),
        "freeze": _guard(_cmd_freeze),
    }  # fmt: skip


class _UsageError(Exception):
    """A bad command-line value (a feed that does not parse, ...)."""


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _guard(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Runs a command; every expected error becomes one clean line and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except OpError as e:
            message = f"{type(e).__name__}: {_one_line(e)}"
        except _UsageError as e:
            message = _one_line(e)
        except BrokenPipeError:
            raise  # the reader went away (`| head`): the caller's business
        except OSError as e:
            message = f"{type(e).__name__}: {_one_line(e.strerror or e)}" + (
                f": {e.filename!r}" if e.filename else ""
            )
        except MemoryError:  # what the size checks could not foresee: still one line
            message = "ResourceExhaustedError: out of memory"
        print(f"minigraph: {message}", file=sys.stderr)
        return 1

    run.__name__ = command.__name__
    return run


def _gd() -> Any:
    # minigraph.graph_def is loaded when a graph command runs, not by every CLI start.
    from minigraph import graph_def  # noqa: PLC0415

    return graph_def


def _import(graph_def: Any, path: str, device: str | None = None) -> Scope:
    scope = Scope.new_root_scope()
    if device:
        scope = scope.with_device(device)
    _gd().import_graph_def(scope, graph_def, name="", source=path)
    return scope


# -- show --------------------------------------------------------------------------------------


def _cmd_show(args: argparse.Namespace) -> int:
    graph_def = _gd().read_graph(args.file)
    nodes = graph_def.node
    versions = graph_def.versions
    kind = _file_kind(args.file)
    print(
        f"{args.file}: TensorFlow GraphDef ({kind}), {len(nodes)} nodes; producer "
        f"{versions.producer}, min_consumer {versions.min_consumer}"
    )
    if versions.min_consumer >= _gd().MINIGRAPH_MIN_CONSUMER:
        print("  uses minigraph semantics TensorFlow lacks (min_consumer): TensorFlow refuses it")
    graph = None
    try:
        graph = _import(graph_def, args.file).graph
    except OpError as e:
        print(f"  note: not importable here ({type(e).__name__}: {_one_line(e)})")
        print("  dtypes and shapes below are what the file declares")
    print("ops:")
    counts = Counter(node.op for node in nodes)
    width = max((len(t) for t in counts), default=0)
    for op_type, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {op_type:<{width}}  {count}")
    print("inputs (placeholders):")
    rows = _inputs(graph, graph_def)
    for row in rows or [("(none)",)]:
        print("  " + "  ".join(row))
    print("outputs (tensors no node consumes):")
    for row in _outputs(graph, graph_def) or [("(none)",)]:
        print("  " + "  ".join(row))
    print("devices (requested):")
    devices = Counter(node.device or "(none)" for node in nodes)
    for device, count in sorted(devices.items()):
        print(f"  {device}  {count} node{'s' if count != 1 else ''}")
    if args.dot or args.svg:
        from minigraph import dot  # noqa: PLC0415

        text = dot.graph_to_dot(graph) if graph is not None else dot.graph_def_to_dot(graph_def)
        if args.dot:
            with open(args.dot, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {args.dot}")
        if args.svg:
            dot.render_svg(text, args.svg)
            print(f"wrote {args.svg}")
    return 0


def _file_kind(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(512)
    return "text" if _gd().looks_like_text(head) else "binary"


def _inputs(graph: Any, graph_def: Any) -> list[tuple[str, ...]]:
    if graph is not None:
        return [
            (op.outputs[0].name, op.outputs[0].dtype.name, str(op.outputs[0].shape))
            for op in graph.operations
            if op.type == "Placeholder"
        ]
    rows = []
    for node in graph_def.node:
        if node.op == "Placeholder":
            dtype = node.attr["dtype"].type if "dtype" in node.attr else 0
            rows.append((f"{node.name}:0", _dtype_name(dtype)))
    return rows


def _dtype_name(number: int) -> str:
    from minigraph import proto  # noqa: PLC0415

    try:
        return proto.DataType.Name(number)
    except ValueError:
        return f"DataType {number}"


def _outputs(graph: Any, graph_def: Any) -> list[tuple[str, ...]]:
    if graph is not None:
        consumed = {t for op in graph.operations for t in op.inputs}
        controlling = {c for op in graph.operations for c in op.control_inputs}
        rows = []
        for op in graph.operations:
            for out in op.outputs:
                if out not in consumed:
                    rows.append((out.name, out.dtype.name, str(out.shape)))
            if not op.outputs and op not in controlling:
                rows.append((op.name, f"({op.type}: no outputs; fetch it to run it)"))
        return rows
    used = set()
    for node in graph_def.node:
        for text in node.input:
            used.add(text.lstrip("^").partition(":")[0])
    return [(node.name, f"({node.op})") for node in graph_def.node if node.name not in used]


# -- run ---------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    graph_def = _gd().read_graph(args.file)
    if args.device == "GPU" and gpu_unavailable_reason() is not None:
        print(
            f"minigraph: note: no GPU ({gpu_unavailable_reason()}); nodes run on the CPU",
            file=sys.stderr,
        )
    scope = _import(graph_def, args.file, args.device)
    graph = scope.graph
    feeds = {}
    for spec in args.feed:
        name, value = _parse_feed(spec, graph)
        feeds[name] = value
    fetches = args.fetch or [row[0] for row in _outputs(graph, graph_def) if ":" in row[0]]
    if not fetches:
        raise _UsageError("nothing to fetch: give --fetch NAME")
    for name in fetches:
        graph.as_graph_element(name)  # a NotFoundError with suggestions for a typo
    with Session(scope) as session:
        values = session.run(list(fetches), feeds)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    written: dict[str, str] = {}
    for name, value in zip(fetches, values):
        if args.out is None:
            print(_show_result(name, value))
            continue
        if value is None:
            print(f"{name}: ran (an operation: no value)")
            continue
        file_name = name.replace("/", "_").replace(":", "_") + ".npy"
        if file_name in written:
            raise _UsageError(f"--out: {name!r} and {written[file_name]!r} map to {file_name}")
        written[file_name] = name
        path = os.path.join(args.out, file_name)
        np.save(path, _savable(value), allow_pickle=False)
        print(f"{name} -> {path}  ({dtypes.as_dtype(value.dtype).name} {list(value.shape)})")
    return 0


def _parse_feed(spec: str, graph: Any) -> tuple[str, Any]:
    name, sep, text = spec.partition("=")
    if not sep or not name:
        raise _UsageError(f"--feed {spec!r}: expected NAME=VALUE, e.g. x:0=values.npy")
    tensor = graph.get_output(name)
    if text.endswith(".npy") or os.path.isfile(text):
        return tensor.name, _load_npy(name, text)
    try:
        literal = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
        raise _UsageError(
            f"--feed {name}: {text!r} is neither a .npy file nor a Python literal "
            f"({_not_literal(text, e)})"
        ) from None
    try:
        return tensor.name, dtypes.convert_to_array(literal, tensor.dtype)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"--feed {name}: {e.message}") from None


def _load_npy(name: str, path: str) -> np.ndarray:
    """The array a .npy file holds, read as numpy's format defines it, checked before anything
    is allocated: the header must parse (as a literal, never code), hold no Python objects
    (those need pickle, which can run code), and declare no more data than the file holds.
    The array is read-only (a feed is never written)."""
    from numpy.lib import format as npy  # noqa: PLC0415 - only for .npy feeds

    def refuse(why: str) -> _UsageError:
        return _UsageError(f"--feed {name}: cannot load {path!r}: {why}")

    with open(path, "rb") as f:
        try:
            version = npy.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = npy.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = npy.read_array_header_2_0(f)
            else:
                raise ValueError(f"format version {version[0]}.{version[1]} is not supported")
        except Exception as e:  # noqa: BLE001 - a truncated file, a header that is no literal
            why = f"{type(e).__name__}: {_one_line(e)}"
            if "<ast." in why:  # literal_eval's message shows only the repr of an AST node
                why = "its header is not a Python literal"
            raise refuse(f"not a .npy file ({why})") from None
        if dtype.hasobject:
            raise refuse(
                "it holds Python objects, which .npy stores with pickle: refused, as pickle "
                "can run code"
            )
        if len(shape) > 64 or any(d < 0 for d in shape):  # numpy's arrays have <= 64 dims
            raise refuse(f"its header declares the shape {list(shape)}")
        count = 1
        for d in shape:
            count *= d
        nbytes = count * dtype.itemsize
        declared = f"its header declares {dtype} {list(shape)} ({nbytes} bytes of data)"
        info = os.fstat(f.fileno())
        if stat.S_ISREG(info.st_mode):
            held = info.st_size - f.tell()
            if held < nbytes:
                raise refuse(f"{declared}, but the file holds {held} bytes after its header")
            data = f.read(nbytes)
        else:  # a pipe: read in pieces, so that a false header allocates nothing
            pieces = []
            got = 0
            while got < nbytes:
                piece = f.read(min(1 << 20, nbytes - got))
                if not piece:
                    break
                pieces.append(piece)
                got += len(piece)
            data = b"".join(pieces)
        if len(data) < nbytes:
            raise refuse(f"{declared}, but the file ends after {len(data)} of them")
    if dtype.itemsize == 0:
        return np.empty(shape, dtype)
    array = np.frombuffer(data, dtype=dtype, count=count)
    return array.reshape(shape, order="F" if fortran else "C")


def _not_literal(text: str, error: Exception) -> str:
    """What makes `text` no Python literal, for a person: literal_eval's own ValueError shows
    only the repr of an AST node (`malformed node or string: <ast.Name object at 0x...>`)."""
    if isinstance(error, SyntaxError):
        return f"a syntax error at column {error.offset}: {error.msg}"
    if not isinstance(error, ValueError):
        return type(error).__name__
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return str(error)
    literal = (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp,
               ast.expr_context, ast.unaryop, ast.operator)  # fmt: skip
    for node in ast.walk(tree.body):
        if isinstance(node, literal) and not isinstance(node, ast.BinOp):
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            continue  # complex literals (1+2j); literal_eval checks the operands
        source = ast.get_source_segment(text.strip(), node) or type(node).__name__
        if isinstance(node, ast.Name):
            return f'{source!r} is a name, not a value (a string needs quotes: "{source}")'
        return f"{source!r} is not a literal (a {type(node).__name__} expression)"
    return str(error)


def _show_result(name: str, value: Any) -> str:
    if value is None:
        return f"{name}: ran (an operation: no value)"
    dtype = dtypes.as_dtype(value.dtype).name
    text = np.array2string(np.asarray(value), separator=", ", threshold=1000)
    return f"{name} ({dtype} {list(value.shape)}):\n{text}"


def _savable(value: np.ndarray) -> np.ndarray:
    # String tensors are object arrays of bytes, which .npy stores only with pickle.
    return value.astype("S") if value.dtype == object else value


# -- convert -----------------------------------------------------------------------------------


def _cmd_convert(args: argparse.Namespace) -> int:
    graph_def = _gd().read_graph(args.input)
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise NotFoundError(f"no such directory for {args.output!r}")
    _gd().write_graph(graph_def, args.output, as_text=args.as_text)
    as_text = args.as_text
    if as_text is None:
        as_text = args.output.lower().endswith((".pbtxt", ".txt", ".textproto", ".prototxt"))
    kind = "text" if as_text else "binary"
    print(f"wrote {args.output} ({kind}, {len(graph_def.node)} nodes)")
    return 0


# -- freeze ------------------------------------------------------------------------------------


def _cmd_freeze(args: argparse.Namespace) -> int:
    from minigraph import graph_util  # noqa: PLC0415 - loaded by this command only
    from minigraph.train import load_checkpoint  # noqa: PLC0415

    outputs = [name.strip() for spec in args.outputs for name in spec.split(",") if name.strip()]
    if not outputs:
        raise _UsageError("freeze: --outputs names no node")
    graph_def = _gd().read_graph(args.graph)
    values = load_checkpoint(args.checkpoint)
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise NotFoundError(f"no such directory for {args.output!r}")
    frozen = graph_util.freeze_graph_def(graph_def, outputs, values)
    _gd().write_graph(frozen, args.output, as_text=args.as_text)
    constants = sum(1 for node in frozen.node if node.op == "Const" and node.name in values)
    print(
        f"wrote {args.output} ({len(frozen.node)} nodes, {constants} variables frozen into "
        "constants)"
    )
    return 0
