"""Review findings in graph files and the command line: file arguments of the wrong kind (an
int is a file descriptor to open()), file-system errors, return_elements that are not a
list, tensors whose zero-size shapes numpy refuses, `mg.graph_def` before first use, and the
CLI started with its stdout closed. Each was found by tests/hostile/battery.py."""

import os
import subprocess
import sys

import numpy as np
import pytest

import minigraph as mg
from minigraph import FailedPreconditionError, InvalidArgumentError, NotFoundError
from ops import gather

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def graph():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, shape=[None, 3])
    gather(scope.with_op_name("rows"), x, [1, 0])
    return scope.graph


@pytest.mark.parametrize("path", [None, 5, 0, True, 1.5, ["g.pb"], ""])
def test_read_graph_takes_a_path_only(path):
    with pytest.raises(InvalidArgumentError, match="path"):
        mg.read_graph(path)


def test_read_graph_never_opens_or_closes_a_file_descriptor(tmp_path):
    r, w = os.pipe()
    try:
        with pytest.raises(InvalidArgumentError):
            mg.read_graph(r)
        os.write(w, b"still open")  # open(r) would have read and closed it
        assert os.read(r, 10) == b"still open"
    finally:
        os.close(r)
        os.close(w)


def test_read_graph_takes_bytes_and_path_like(tmp_path, graph):
    path = tmp_path / "g.pb"
    mg.write_graph(graph, path)
    assert len(mg.read_graph(os.fsencode(path)).node) == len(graph)


@pytest.mark.parametrize("path", [None, 5, b"", "", ["x"]])
def test_write_graph_takes_a_path_only(graph, path):
    with pytest.raises(InvalidArgumentError, match="path"):
        mg.write_graph(graph, path)


def test_write_graph_file_system_errors_are_typed(tmp_path, graph):
    with pytest.raises(NotFoundError, match="no such directory"):
        mg.write_graph(graph, tmp_path / "missing" / "g.pb")
    with pytest.raises(InvalidArgumentError, match="directory"):
        mg.write_graph(graph, tmp_path)
    (tmp_path / "a_file").write_bytes(b"")
    with pytest.raises(NotFoundError):
        mg.write_graph(graph, tmp_path / "a_file" / "g.pb")
    with pytest.raises(InvalidArgumentError, match="directory"):
        mg.read_graph(tmp_path)
    with pytest.raises(NotFoundError, match="no such graph file"):
        mg.read_graph(tmp_path / "missing.pb")
    assert sorted(os.listdir(tmp_path)) == ["a_file"]  # no temporary file left behind


def test_other_os_errors_are_typed(tmp_path, graph, monkeypatch):
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(FailedPreconditionError, match="Permission denied"):
        mg.write_graph(graph, tmp_path / "g.pb")


@pytest.mark.parametrize("as_text", ["yes", 1, "false"])
def test_write_graph_as_text_is_a_bool(tmp_path, graph, as_text):
    with pytest.raises(InvalidArgumentError, match="as_text"):
        mg.write_graph(graph, tmp_path / "g.pb", as_text=as_text)


@pytest.mark.parametrize("names", [5, 1.5, object()])
def test_return_elements_that_are_not_a_list_are_typed(graph, names):
    scope = mg.Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match="return_elements"):
        mg.import_graph_def(scope, graph.as_graph_def(), return_elements=names)
    assert len(scope.graph) == 0


@pytest.mark.parametrize("dims", [[0, 2**62], [2**62, 0, 4], [0, 2**63 - 1, 2]])
def test_an_empty_const_whose_other_dims_numpy_refuses_is_over_the_bound(dims):
    from minigraph import proto

    graph_def = proto.GraphDef()
    node = graph_def.node.add(name="c", op="Const")
    node.attr["dtype"].type = 1
    tensor = node.attr["value"].tensor
    tensor.dtype = 1
    for d in dims:
        tensor.tensor_shape.dim.add(size=d)
    scope = mg.Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match="without its zero dims"):
        mg.import_graph_def(scope, graph_def)
    assert len(scope.graph) == 0


def test_an_empty_const_with_small_dims_still_imports():
    scope = mg.Scope.new_root_scope()
    c = mg.Const(scope.with_op_name("c"), np.zeros((0, 1000), np.float32))
    loaded = mg.Scope.new_root_scope()
    (out,) = mg.import_graph_def(loaded, scope.graph.as_graph_def(), return_elements=["c:0"])
    assert mg.Session(loaded).run(out).shape == (0, 1000) and c.shape.dims == (0, 1000)


def test_mg_graph_def_is_there_before_any_graph_function_ran():
    # A fresh process: the README uses mg.graph_def.parse_graph_def and MAX_CONST_BYTES.
    code = (
        'import minigraph as mg; gd = mg.graph_def.parse_graph_def(\'node { name: "n" op: '
        '"NoOp" }\'); print(len(gd.node), mg.graph_def.MAX_CONST_BYTES)'
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", str(1 << 30)]


@pytest.mark.parametrize("command", [["ops"], ["describe", "GatherV2"], ["devices"]])
def test_the_cli_with_stdout_closed_ends_without_a_traceback(command):
    out = subprocess.run(
        " ".join([sys.executable, "-m", "minigraph", *command]) + " >&-",
        shell=True, capture_output=True, text=True, cwd=ROOT, timeout=120,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
