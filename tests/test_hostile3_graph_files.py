"""Graph files and feed files that are small but huge, and files written over what is not a
file (issue 24, sections 2 and 3: "Small files, huge memory", "CLI feeds and inputs", "Writing
over special files", write_graph's permissions, GraphDef int_val boundaries).

- An import is budgeted as a whole, before anything is allocated: every tensor value at what
  importing it holds at once (strings at their real cost), identical values once.
- read_graph reads at most protobuf's 2 GiB, sizes checked first; `.npy` feeds are read as
  numpy's format says, their declared size checked against the file.
- write_graph replaces regular files only (or creates one), with the permissions any file
  written there gets.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
from minigraph import graph_def as gd_module
from minigraph import proto
from minigraph.__main__ import main

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("cpu_only")

DT = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7,
      "bfloat16": 14, "uint16": 17, "float16": 19}  # fmt: skip


def const_graph(*consts) -> bytes:
    """A GraphDef of Consts: (name, dtype name, shape, {typed field: values}) each."""
    graph_def = proto.GraphDef()
    for name, dtype, shape, values in consts:
        node = graph_def.node.add(name=name, op="Const")
        node.attr["dtype"].type = DT[dtype]
        tensor = node.attr["value"].tensor
        tensor.dtype = DT[dtype]
        for d in shape:
            tensor.tensor_shape.dim.add(size=d)
        for field, items in (values or {}).items():
            getattr(tensor, field).extend(items)
    return graph_def.SerializeToString()


def refused(data, error, match):
    scope = mg.Scope.new_root_scope()
    mg.Const(scope.with_op_name("existing"), 1.0)
    with pytest.raises(error, match=match) as info:
        mg.import_graph_def(scope, data)
    assert [op.name for op in scope.graph.operations] == ["existing"]
    return info.value


# -- the import budget ---------------------------------------------------------------------------

SIX_DISTINCT = const_graph(
    *[(f"c{i}", "float32", [2**28 - 64 - i], None) for i in range(6)]
)  # 6 GiB of zeros in a few hundred bytes
STRINGS = const_graph(("s", "string", [2**27 - 64], None))  # 2**27 empty strings


def test_the_hostile_files_are_small():
    assert len(SIX_DISTINCT) < 400 and len(STRINGS) < 64


@pytest.mark.parametrize("data", [SIX_DISTINCT, STRINGS], ids=["floats", "strings"])
def test_refusing_allocates_nothing_even_under_an_address_space_limit(tmp_path, data):
    # First in the file: were the budget broken, the tests below would allocate gigabytes.
    # A child process whose address space allows 512 MiB more than it maps after imports: an
    # import that allocated its values would fail with MemoryError (as it did before the
    # budget), which the import reports differently ("ran out of memory").
    path = tmp_path / "g.pb"
    path.write_bytes(data)
    code = (
        "import resource, sys\n"
        "import minigraph as mg\n"
        "mapped = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (mapped + (512 << 20), resource.RLIM_INFINITY))\n"
        "try:\n"
        f"    mg.import_graph_def(mg.Scope.new_root_scope(), open({str(path)!r}, 'rb').read())\n"
        "except mg.ResourceExhaustedError as e:\n"
        "    print('refused' if 'nothing was allocated' in e.message else 'late: ' + e.message)\n"
    )
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc/self/statm (Linux)")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.stdout.strip() == "refused", result.stdout + result.stderr


def test_a_small_file_of_huge_constants_is_refused_before_anything_is_allocated():
    e = refused(SIX_DISTINCT, mg.ResourceExhaustedError, "nothing was allocated")
    assert "over the 2147483648-byte limit for one import" in e.message
    assert "'c0' 1073741568" in e.message  # the largest, with their cost


def test_the_cli_prints_the_refusal_as_one_line(capsys, tmp_path):
    path = tmp_path / "huge.pb"
    path.write_bytes(SIX_DISTINCT)
    assert main(["run", str(path), "--fetch", "c0:0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("minigraph: ResourceExhaustedError: the GraphDef's tensor values")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert main(["show", str(path)]) == 0  # summarised from the file, not importable here
    assert "not importable here (ResourceExhaustedError" in capsys.readouterr().out


def test_identical_values_count_once_and_are_shared(monkeypatch):
    # Six byte-identical Consts (names apart) decode once: one array, one MiB, for all six.
    monkeypatch.setattr(gd_module, "MAX_IMPORT_BYTES", 2 << 20)
    data = const_graph(*[(f"c{i}", "float32", [1 << 18], None) for i in range(6)])
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, data, name="")
    values = [scope.graph.get_operation(f"c{i}").attrs["value"] for i in range(6)]
    assert all(v is values[0] for v in values) and not values[0].any()
    assert not values[0].flags.writeable
    with pytest.raises(ValueError):
        values[0].flags.writeable = True  # frozen: what every Const value is


COSTS = [
    # (consts, their cost in bytes)
    ([("a", "float32", [1000], None), ("b", "float32", [999], None)], 4000 + 3996),
    ([("a", "float32", [1000], {"float_val": [1.5]})], 2 * 4000 + 8),
    ([("a", "int8", [1000], {"int_val": [1, 2, 3]})], 2 * 1000 + 3 * 8),
    ([("a", "float64", [10, 10], {"double_val": list(range(100))})], 2 * 800 + 800),
]


@pytest.mark.parametrize("consts, cost", COSTS, ids=["zeros", "splat", "int8 values", "full"])
def test_the_budget_is_exact_at_its_boundary(monkeypatch, consts, cost):
    data = const_graph(*consts)
    monkeypatch.setattr(gd_module, "MAX_IMPORT_BYTES", cost)
    mg.import_graph_def(mg.Scope.new_root_scope(), data)
    monkeypatch.setattr(gd_module, "MAX_IMPORT_BYTES", cost - 1)
    e = refused(data, mg.ResourceExhaustedError, f"would take {cost} bytes to import")
    assert f"over the {cost - 1}-byte limit" in e.message


def test_strings_count_their_pointers_and_their_bytes_objects(monkeypatch):
    values = [b"alpha", b"beta", b"gamma"]
    data = const_graph(("s", "string", [1000], {"string_val": values}))
    node = proto.GraphDef.FromString(data).node[0]
    expected = 1000 * 32 + 3 * 33 + node.attr["value"].tensor.ByteSize()
    monkeypatch.setattr(gd_module, "MAX_IMPORT_BYTES", expected - 1)
    refused(data, mg.ResourceExhaustedError, f"would take {expected} bytes")
    monkeypatch.setattr(gd_module, "MAX_IMPORT_BYTES", expected)
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, data, name="")
    got = scope.graph.get_operation("s").attrs["value"]
    assert got[:3].tolist() == values and got[-1] == b"gamma"


def test_a_string_constant_counts_its_real_cost():
    # 2**27 - 64 strings of 8 bytes each were under the 1 GiB per-constant limit; importing
    # them holds 32 bytes per element (the conversion's arrays and lists): 4 GiB.
    tensor = proto.GraphDef.FromString(STRINGS).node[0].attr["value"].tensor
    cost = (2**27 - 64) * 32 + tensor.ByteSize()
    e = refused(STRINGS, mg.ResourceExhaustedError, "nothing was allocated")
    assert f"would take {cost} bytes to import (largest, in bytes: 's' {cost})" in e.message


def test_a_large_attr_entry_is_charged_right_before_its_value_is_allocated(monkeypatch):
    # An entry over 64 KiB (real data, costly to parse twice) is costed when its node is
    # built; refused there, the graph is left as it was.
    monkeypatch.setattr(gd_module, "MAX_IMPORT_BYTES", 1 << 20)
    data = const_graph(
        ("small", "float32", [10], None),
        ("big", "float32", [1 << 20], {"float_val": [float(i) for i in range(20000)]}),
    )
    e = refused(data, mg.ResourceExhaustedError, "importing this value would take 8548608 bytes")
    assert e.node_name == "big"


def test_the_budget_is_capped_by_the_memory_available(monkeypatch):
    monkeypatch.setattr(gd_module, "available_bytes", lambda: 50 << 20)
    data = const_graph(("z", "float32", [100 << 18], None))  # 100 MiB of zeros
    refused(data, mg.ResourceExhaustedError, f"over the {50 << 20} bytes of memory available")


def test_a_memory_error_while_importing_is_resource_exhausted(monkeypatch):
    def out_of_memory(proto_):
        raise MemoryError

    monkeypatch.setattr(gd_module, "tensor_from_proto", out_of_memory)
    data = const_graph(("a", "float32", [4], None))
    refused(data, mg.ResourceExhaustedError, "ran out of memory")


# -- int_val and half_val at their dtype's range ---------------------------------------------------

INT_FIELDS = [
    ("int8", "int_val", -128, 127), ("int16", "int_val", -(2**15), 2**15 - 1),
    ("uint8", "int_val", 0, 255), ("uint16", "int_val", 0, 2**16 - 1),
    ("float16", "half_val", 0, 2**16 - 1), ("bfloat16", "half_val", 0, 2**16 - 1),
]  # fmt: skip


@pytest.mark.parametrize("dtype, field, low, high", INT_FIELDS, ids=[c[0] for c in INT_FIELDS])
def test_typed_values_at_both_ends_of_the_range_import_exactly(dtype, field, low, high):
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, const_graph(("c", dtype, [2], {field: [low, high]})), name="")
    value = np.asarray(mg.Session(scope).run("c:0"))
    if field == "half_val":
        value = value.view(np.uint16)  # the bits
    assert value.tolist() == [low, high]


@pytest.mark.parametrize("dtype, field, low, high", INT_FIELDS, ids=[c[0] for c in INT_FIELDS])
@pytest.mark.parametrize("side", ["below", "above"])
def test_typed_values_one_past_the_range_are_refused(dtype, field, low, high, side):
    bad = low - 1 if side == "below" else high + 1
    data = const_graph(("c", dtype, [2], {field: [bad, low] if side == "below" else [low, bad]}))
    refused(data, mg.InvalidArgumentError, rf"value {bad} does not fit a {dtype} tensor")


# -- reading graph files -------------------------------------------------------------------------


def test_dev_zero_is_refused_at_its_first_byte():
    with pytest.raises(mg.InvalidArgumentError, match=r"starts with the byte b'\\x00'"):
        mg.read_graph("/dev/zero")


def test_converting_dev_zero_is_one_line(capsys, tmp_path):
    out = tmp_path / "out.pb"
    assert main(["convert", "/dev/zero", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("minigraph: InvalidArgumentError: /dev/zero: not a GraphDef")
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def fifo_with(tmp_path, data: bytes, name: str = "fifo") -> str:
    """A FIFO that a thread writes `data` into (once a reader opens it)."""
    path = str(tmp_path / name)
    os.mkfifo(path)

    def write():
        with open(path, "wb") as f:
            try:
                f.write(data)
            except BrokenPipeError:  # the reader stopped early: what it should do
                pass

    threading.Thread(target=write, daemon=True).start()
    return path


def test_a_graph_is_read_from_a_pipe(tmp_path):
    data = const_graph(("a", "float32", [3], {"float_val": [1.0, 2.0, 3.0]}))
    assert [n.name for n in mg.read_graph(fifo_with(tmp_path, data)).node] == ["a"]


def test_a_pipe_holding_more_than_the_limit_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(gd_module, "MAX_GRAPH_FILE_BYTES", 1 << 16)
    data = b"# a comment\n" * 20000  # a text GraphDef, 240 kB
    with pytest.raises(mg.InvalidArgumentError, match="holds more than the 65536 bytes"):
        mg.read_graph(fifo_with(tmp_path, data))


def test_a_file_larger_than_the_limit_is_refused_before_it_is_read(monkeypatch, tmp_path):
    monkeypatch.setattr(gd_module, "MAX_GRAPH_FILE_BYTES", 1000)
    path = tmp_path / "big.pbtxt"
    path.write_bytes(b"# " + b"x" * 2000)
    with pytest.raises(mg.InvalidArgumentError, match="its 2002 bytes are more than the 1000"):
        mg.read_graph(path)


# -- .npy feeds on the command line ----------------------------------------------------------------


def npy_bytes(header: str, data: bytes = b"") -> bytes:
    text = header.encode("latin1")
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


@pytest.fixture
def model(tmp_path):
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32)
    mg.Identity(scope.with_op_name("y"), x)
    path = tmp_path / "m.pb"
    mg.write_graph(scope.graph, path)
    return str(path)


BAD_NPY = [
    ("empty", b"", "not a .npy file"),
    ("ten to the twelve", npy_bytes("{'descr': '<f4', 'fortran_order': False, "
     "'shape': (1000000, 1000000), }"), "declares float32 \\[1000000, 1000000\\] "
     "\\(4000000000000 bytes of data\\), but the file holds 0 bytes after its header"),
    ("truncated data", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }",
     b"\0" * 12), "but the file holds 12 bytes after its header"),
    ("header not a literal (tokens)", npy_bytes("{'descr': '<f4', 'shape': (3,) '''"),
     "not a .npy file \\(TokenError"),
    ("header is code", npy_bytes("__import__('os').system('echo owned')"),
     "its header is not a Python literal"),
    ("negative dim", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"),
     "declares the shape \\[-1\\]"),
    ("65 dims", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,) * 65, }"),
     "not a .npy file"),
    ("version 9", b"\x93NUMPY\x09\x00" + b"\0" * 64, "not a .npy file"),
]  # fmt: skip


@pytest.mark.parametrize("data, match", [c[1:] for c in BAD_NPY], ids=[c[0] for c in BAD_NPY])
def test_a_bad_npy_feed_is_one_line(capsys, model, tmp_path, data, match):
    path = tmp_path / "f.npy"
    path.write_bytes(data)
    status = main(["run", model, "--feed", f"x:0={path}", "--fetch", "y:0"])
    err = capsys.readouterr().err
    assert status == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"minigraph: --feed x:0: cannot load '{path}': ")
    assert re.search(match, err), err


def test_npy_feeds_keep_their_order_and_byte_order(capsys, model, tmp_path):
    value = np.asfortranarray(np.arange(6, dtype=">f4").reshape(2, 3))
    path = tmp_path / "f.npy"
    np.save(path, value)
    assert main(["run", model, "--feed", f"x:0={path}", "--fetch", "y:0", "--out",
                 str(tmp_path / "out")]) == 0  # fmt: skip
    capsys.readouterr()
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y_0.npy"), value)


def test_an_npy_feed_from_a_pipe(capsys, model, tmp_path):
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.array([1.5, 2.5], np.float32))
    pipe = fifo_with(tmp_path, buffer.getvalue(), "f.npy")
    assert main(["run", model, "--feed", f"x:0={pipe}", "--fetch", "y:0"]) == 0
    assert "[1.5, 2.5]" in capsys.readouterr().out
    (tmp_path / "lying").mkdir()
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,), }"
    lying = fifo_with(tmp_path / "lying", npy_bytes(header, b"\0" * 16), "f.npy")
    assert main(["run", model, "--feed", f"x:0={lying}", "--fetch", "y:0"]) == 1
    assert "but the file ends after 16 of them" in capsys.readouterr().err


# -- writing over what is not a regular file -------------------------------------------------------


@pytest.fixture
def graph():
    scope = mg.Scope.new_root_scope()
    mg.Const(scope.with_op_name("c"), [1.0, 2.0])
    return scope.graph


def special_files(tmp_path):
    """(kind, path) of a FIFO, a socket and, where this user may make one, a character
    device, all in tmp_path (never the system's own: a broken check would replace them)."""
    made = []
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    made.append(("a FIFO (named pipe)", fifo))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    made.append(("a socket", tmp_path / "sock"))
    try:
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        made.append(("a character device", tmp_path / "null"))
    except (PermissionError, OSError):
        pass
    return made, sock


def test_special_files_are_refused_and_left_as_they_are(tmp_path, graph):
    made, sock = special_files(tmp_path)
    try:
        for kind, path in made:
            before = os.stat(path).st_mode
            expected = f"it is {re.escape(kind)}, not a regular file"
            with pytest.raises(mg.InvalidArgumentError, match=expected):
                mg.write_graph(graph, path)
            assert os.stat(path).st_mode == before  # not replaced
            link = tmp_path / f"link-to-{path.name}"
            link.symlink_to(path)
            with pytest.raises(mg.InvalidArgumentError, match="not a regular file"):
                mg.write_graph(graph, link)
            assert link.is_symlink() and os.stat(path).st_mode == before
    finally:
        sock.close()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".minigraph-")]


def test_convert_refuses_a_special_file_in_one_line(capsys, tmp_path, graph):
    source = tmp_path / "m.pb"
    mg.write_graph(graph, source)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    assert main(["convert", str(source), str(fifo)]) == 1
    err = capsys.readouterr().err
    assert "it is a FIFO (named pipe), not a regular file" in err
    assert len(err.strip().splitlines()) == 1 and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_symlink_to_a_file_is_written_through(tmp_path, graph):
    target = tmp_path / "real.pb"
    target.write_bytes(b"old")
    link = tmp_path / "link.pb"
    link.symlink_to(target)
    mg.write_graph(graph, link)
    assert link.is_symlink() and target.read_bytes() == mg.read_graph(link).SerializeToString(
        deterministic=True
    )


# -- permissions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002, 0o027, 0o000])
def test_a_new_file_gets_what_the_umask_leaves_as_any_file_does(tmp_path, graph, umask):
    old = os.umask(umask)
    try:
        mg.write_graph(graph, tmp_path / "g.pb")
        mg.write_graph(graph, tmp_path / "g.pbtxt")
        with open(tmp_path / "plain", "w"):  # any other file written here
            pass
    finally:
        os.umask(old)
    expected = stat.S_IMODE(os.stat(tmp_path / "plain").st_mode)
    assert expected == 0o666 & ~umask
    for name in ("g.pb", "g.pbtxt"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == expected, oct(expected)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o444, 0o755])
def test_replacing_a_file_keeps_its_permissions(tmp_path, graph, mode):
    path = tmp_path / "g.pb"
    path.write_bytes(b"old")
    os.chmod(path, mode)
    mg.write_graph(graph, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode
    assert len(mg.read_graph(path).node) == 1


def test_the_umask_is_read_without_being_changed(monkeypatch):
    old = os.umask(0o027)
    try:
        assert gd_module._umask() == 0o027
        assert os.umask(0o027) == 0o027  # unchanged by reading it
    finally:
        os.umask(old)
