"""The graph-file commands: `minigraph show`, `run` and `convert`, and DOT pictures."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
from minigraph import dot
from minigraph.__main__ import main
from ops import GatherNd, gather

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TF_FILE = str(DATA / "gather_basic.pb")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("minigraph: ")
    return lines[0]


@pytest.fixture
def model(tmp_path) -> str:
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3])
    k = mg.Placeholder(root.with_op_name("k"), mg.int32, shape=[None])
    rows = gather(root.with_op_name("rows").with_device("/device:CPU:0"), x, k)
    words = mg.Const(root.with_op_name("words"), ["a", "b", "c"])
    gather(root.with_op_name("word"), words, k)
    mg.NoOp(root.with_control_dependencies([rows]).with_op_name("done"))
    path = tmp_path / "model.pb"
    mg.write_graph(root.graph, path)
    return str(path)


# -- show ---------------------------------------------------------------------------------------


def test_show_summarises_a_graph_file(capsys, model):
    status, out, err = cli(capsys, "show", model)
    assert status == 0, err
    assert out.splitlines()[0] == (
        f"{model}: TensorFlow GraphDef (binary), 8 nodes; producer 2474, min_consumer 0"
    )
    assert "  Const        3\n" in out and "  GatherV2     2\n" in out
    inputs = out.split("inputs (placeholders):\n")[1].split("outputs")[0]
    assert inputs.splitlines() == ["  x:0  float32  [?,3]", "  k:0  int32  [?]"]
    outputs = out.split("outputs (tensors no node consumes):\n")[1].split("devices")[0]
    assert outputs.splitlines() == [
        "  rows:0  float32  [?,3]",  # `done` only waits for it: no node reads it
        "  word:0  string  [?]",
        "  done  (NoOp: no outputs; fetch it to run it)",
    ]
    assert "  (none)  7 nodes" in out and "  /device:CPU:0  1 node\n" in out


def test_show_a_tf_file_in_text_format(capsys, tmp_path):
    status, out, _ = cli(capsys, "show", str(DATA / "gather_basic.pbtxt"))
    assert status == 0
    assert "TensorFlow GraphDef (text), 30 nodes" in out.splitlines()[0]
    assert "  anything:0  int32  <unknown>" in out
    assert "  words:0  string  [2]" in out


def test_show_a_graph_with_unknown_ops_still_summarises_it(capsys, tmp_path):
    # A TF graph using an op minigraph has not registered: `show` still summarises what the
    # file says (op counts, inputs with their declared dtypes), then says why it cannot import.
    path = tmp_path / "unknown.pbtxt"
    path.write_text(
        'node { name: "params" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
        'node { name: "a" op: "FancyUnknownOp" input: "params" }\n'
        'node { name: "b" op: "FancyUnknownOp" input: "a" }\n'
        'node { name: "out/Reshape_3" op: "Identity" input: "b"'
        ' attr { key: "T" value { type: DT_FLOAT } } }\n'
    )
    status, out, _ = cli(capsys, "show", str(path))
    assert status == 0
    note = "note: not importable here (NotFoundError: Op type not registered: 'FancyUnknownOp'"
    assert note in out
    assert "  FancyUnknownOp  2" in out
    assert "  params:0  DT_FLOAT" in out
    assert "  out/Reshape_3  (Identity)" in out


def test_show_marks_graphs_tensorflow_refuses(capsys, tmp_path):
    root = mg.Scope.new_root_scope()
    GatherNd(root, np.arange(6).reshape(2, 3), [[1], [0]], batch_dims=1)
    path = tmp_path / "nd.pbtxt"
    mg.write_graph(root, path)
    status, out, _ = cli(capsys, "show", str(path))
    assert status == 0
    assert "min_consumer 1073741824" in out
    assert "uses minigraph semantics TensorFlow lacks (min_consumer): TensorFlow refuses it" in out


def test_show_dot_writes_a_picture(capsys, model, tmp_path):
    out_file = tmp_path / "model.dot"
    status, out, _ = cli(capsys, "show", model, "--dot", str(out_file))
    assert status == 0 and f"wrote {out_file}" in out
    text = out_file.read_text()
    assert text.startswith("digraph minigraph {") and text.rstrip().endswith("}")
    assert 'label="GatherV2\\nrows"' in text
    assert 'label="float32 [?,3]"' in text  # x -> rows
    assert "style=dashed" in text  # rows -> done, a control edge
    assert 'label="/device:CPU:0"' in text  # the legend


def test_show_dot_of_an_unimportable_graph(capsys, tmp_path):
    out_file = tmp_path / "lowered.dot"
    status, _, _ = cli(
        capsys, "show", str(DATA / "gather_nd_batch_dims_lowered.pb"), "--dot", str(out_file)
    )
    assert status == 0
    assert 'label="StridedSlice\\ngathered/strided_slice"' in out_file.read_text()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_show_svg_with_graphviz(capsys, model, tmp_path):
    out_file = tmp_path / "model.svg"
    status, out, err = cli(capsys, "show", model, "--svg", str(out_file))
    assert status == 0, err
    svg = out_file.read_text()
    assert "<svg" in svg and "GatherV2" in svg and "rows" in svg


def test_show_svg_without_graphviz_says_how_to_get_it(capsys, model, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` there
    status, out, err = cli(capsys, "show", model, "--svg", str(tmp_path / "m.svg"))
    assert status == 1
    line = one_error_line(err)
    assert "Graphviz's `dot` program is needed to draw SVG" in line
    assert "apt-get install graphviz" in line and "--dot OUT.dot" in line
    assert not (tmp_path / "m.svg").exists()
    assert "ops:" in out  # the summary was printed before


# -- run ------------------------------------------------------------------------------------------


def test_run_prints_results(capsys, model, tmp_path):
    values = tmp_path / "x.npy"
    np.save(values, np.arange(6, dtype=np.float32).reshape(2, 3))
    status, out, err = cli(
        capsys, "run", model, "--feed", f"x:0={values}", "--feed", "k:0=[1, 0, 1]",
        "--fetch", "rows:0", "--fetch", "word:0", "--fetch", "done",
    )  # fmt: skip
    assert status == 0, err
    assert out == (
        "rows:0 (float32 [3, 3]):\n[[3., 4., 5.],\n [0., 1., 2.],\n [3., 4., 5.]]\n"
        "word:0 (string [3]):\n[b'b', b'a', b'b']\n"
        "done: ran (an operation: no value)\n"
    )


def test_run_saves_npy_files(capsys, model, tmp_path):
    out_dir = tmp_path / "results"
    status, out, err = cli(
        capsys, "run", model, "--feed", "x=[[1, 2, 3]]", "--feed", "k:0=[0]",
        "--out", str(out_dir),
    )  # fmt: skip
    assert status == 0, err
    # Without --fetch: the likely outputs (word:0; done has no value to save).
    assert f"word:0 -> {out_dir / 'word_0.npy'}  (string [1])" in out
    saved = np.load(out_dir / "word_0.npy", allow_pickle=False)
    assert saved.tolist() == [b"a"]
    status, out, _ = cli(
        capsys, "run", model, "--feed", "x:0=[[1, 2, 3]]", "--feed", "k:0=[0, 0]",
        "--fetch", "rows:0", "--out", str(out_dir),
    )  # fmt: skip
    np.testing.assert_array_equal(np.load(out_dir / "rows_0.npy"), [[1, 2, 3], [1, 2, 3]])


def test_run_a_tf_file(capsys):
    status, out, err = cli(
        capsys, "run", TF_FILE, "--feed", "x:0=[[1,2,3],[4,5,6],[7,8,9]]", "--fetch", "rows:0"
    )
    assert status == 0, err
    assert out.startswith("rows:0 (float32 [2, 3]):\n[[7., 8., 9.],\n [1., 2., 3.]]")


def test_run_on_gpu_falls_back_with_a_note(capsys, model, no_gpu):
    status, out, err = cli(
        capsys, "run", model, "--feed", "k:0=[2]", "--fetch", "word:0", "--device", "gpu"
    )
    assert status == 0
    assert err.startswith("minigraph: note: no GPU (") and "nodes run on the CPU" in err
    assert "[b'c']" in out


RUN_ERRORS = [
    (["--feed", "k:0=[5]", "--fetch", "word:0"],
     "minigraph: InvalidArgumentError: indices[0] = 5 is not in [0, 3) [[node word (GatherV2) "
     "on /job:localhost/replica:0/task:0/device:CPU:0, defined at MODEL]]"),
    (["--fetch", "word:0"], "You must feed a value for placeholder tensor 'k'"),
    (["--feed", "k:0=[1]", "--fetch", "wrod:0"],
     "minigraph: NotFoundError: The graph has no node named 'wrod'. Did you mean 'word', 'words'?"),
    (["--feed", "k:0", "--fetch", "word:0"], "--feed 'k:0': expected NAME=VALUE"),
    (["--feed", "k:0=[1,", "--fetch", "word:0"],
     "--feed k:0: '[1,' is neither a .npy file nor a Python literal"),
    (["--feed", "k:0=__import__('os')", "--fetch", "word:0"],
     "is neither a .npy file nor a Python literal"),
    (["--feed", "k:0=[1.5]", "--fetch", "word:0"],
     "InvalidArgumentError: --feed k:0: cannot convert [1.5] to int32 without changing its "
     "value"),
    (["--feed", "k:0=missing.npy", "--fetch", "word:0"], "No such file or directory"),
    (["--feed", "nope:0=[1]"], "NotFoundError: The graph has no node named 'nope'"),
]  # fmt: skip


@pytest.mark.parametrize("args, message", RUN_ERRORS, ids=lambda v: str(v)[:30])
def test_run_errors_are_one_clean_line(capsys, model, args, message):
    status, out, err = cli(capsys, "run", model, *args)
    assert status == 1
    assert message.replace("MODEL", model) in one_error_line(err)


def test_run_refuses_pickled_npy(capsys, model, tmp_path):
    pickled = tmp_path / "evil.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    status, _, err = cli(capsys, "run", model, "--feed", f"k:0={pickled}", "--fetch", "word:0")
    assert status == 1
    assert "cannot load" in one_error_line(err) and "pickle" in err


def test_run_as_a_process_exits_non_zero_with_one_line(model):
    result = subprocess.run(
        [sys.executable, "-m", "minigraph", "run", model, "--feed", "k:0=[9]", "--fetch",
         "word:0"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == ""
    assert one_error_line(result.stderr).startswith("minigraph: InvalidArgumentError: indices[0]")


# -- convert ----------------------------------------------------------------------------------


def test_convert_both_ways_is_lossless(capsys, tmp_path):
    text = tmp_path / "g.pbtxt"
    binary = tmp_path / "g.pb"
    status, out, _ = cli(capsys, "convert", TF_FILE, str(text))
    assert (status, out) == (0, f"wrote {text} (text, 30 nodes)\n")
    assert text.read_text().startswith('node {\n  name: "x"\n  op: "Placeholder"')
    status, out, _ = cli(capsys, "convert", str(text), str(binary))
    assert (status, out) == (0, f"wrote {binary} (binary, 30 nodes)\n")
    assert binary.read_bytes() == Path(TF_FILE).read_bytes()  # TF's own bytes, exactly
    status, out, _ = cli(capsys, "convert", TF_FILE, str(tmp_path / "forced.pb"), "--text")
    assert "(text, 30 nodes)" in out


@pytest.mark.parametrize(
    "source, target, message",
    [
        ("missing.pb", "out.pb", "NotFoundError: no such graph file"),
        ("BAD", "out.pb", "InvalidArgumentError: BAD: cannot parse"),
        ("TF", "no/such/dir/out.pb", "NotFoundError: no such directory"),
    ],  # fmt: skip
)
def test_convert_errors(capsys, tmp_path, source, target, message):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\x00garbage")
    source = {"BAD": str(bad), "TF": TF_FILE}.get(source, str(tmp_path / source))
    status, _, err = cli(capsys, "convert", source, str(tmp_path / target))
    assert status == 1
    assert message.replace("BAD", str(bad)) in one_error_line(err)


# -- DOT --------------------------------------------------------------------------------------


def test_to_dot_colours_nodes_by_device_and_labels_edges():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x").with_device("/device:CPU:0"), mg.int32, [4])
    y = gather(root.with_op_name("y").with_device("/device:GPU:0"), x, [1])
    mg.NoOp(root.with_control_dependencies([y]).with_op_name("z"))
    text = root.graph.to_dot()
    lines = text.splitlines()
    node_x = next(line for line in lines if 'label="Placeholder\\nx"' in line)
    node_y = next(line for line in lines if 'label="GatherV2\\ny"' in line)
    colour = lambda line: line.split("fillcolor=")[1].split(",")[0]  # noqa: E731
    assert colour(node_x) != colour(node_y)
    node_z = next(line for line in lines if 'label="NoOp\\nz"' in line)
    assert colour(node_z) == '"#ffffff"'  # no device requested
    assert '  n0 -> n3 [label="int32 [4]"];' in lines
    assert "  n3 -> n4 [style=dashed];" in lines
    assert 'device0 [label="/device:CPU:0"' in text and 'label="/device:GPU:0"' in text


def test_dot_labels_multi_output_edges_and_escapes_names():
    graph_def = mg.graph_def.parse_graph_def(
        'node { name: "a\\"b\\\\c" op: "Split" } node { name: "d" op: "X" input: "a\\"b\\\\c:1" '
        'input: "^a\\"b\\\\c" input: "gone" }'
    )
    text = dot.graph_def_to_dot(graph_def)
    assert 'label="Split\\na\\"b\\\\c"' in text
    assert '  n0 -> n1 [label=":1"];' in text and "  n0 -> n1 [style=dashed];" in text
    assert text.count("->") == 2  # the reference to a missing node is not drawn


# -- the example ----------------------------------------------------------------------------------


def test_the_graph_files_example(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "graph_files.py"), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "result [[10.0], [1.0]] matches the original: True" in out
    assert "copy/middle:0 with picks [1, 1, 2]: [[4.0], [4.0], [7.0]]" in out
    assert "attr batch_dims=1, which TensorFlow's GatherNd does not have" in out
    assert "$ python -m minigraph show" in out and "  middle:0  float32  [?,1]" in out
    assert "middle:0 (float32 [2, 1]):\n[[10.],\n [ 1.]]" in out
    assert "(text, 7 nodes)" in out
    assert {"model.pb", "model.pbtxt", "model.dot", "converted.pbtxt"} <= {
        p.name for p in tmp_path.iterdir()
    }
