"""Gradient graphs are ordinary graphs: written to a GraphDef file, the `minigraph run` CLI
imports and runs them to the values a Session gives in the process that built them (a dense
gradient, and the three components of a sparse one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import minigraph as mg
import ops

ROOT = Path(__file__).resolve().parent.parent


def _model():
    """An embedding lookup, a dense layer with bias and ReLU, and the mean sparse softmax
    cross-entropy; the gradients of the table (sparse) and of the weights and bias (dense)."""
    root = mg.Scope.new_root_scope()
    rng = np.random.default_rng(3)
    table = mg.Placeholder(root.with_op_name("table"), mg.float32, [None, 4])
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [None])
    labels = mg.Placeholder(root.with_op_name("labels"), mg.int32, [None])
    w = mg.Const(root.with_op_name("w"), rng.standard_normal((4, 3)).astype(np.float32))
    b = mg.Const(root.with_op_name("b"), np.float32([0.1, -0.2, 0.3]))
    rows = ops.gather(root.with_op_name("rows"), table, ids)
    hidden = ops.Relu(root, ops.BiasAdd(root, ops.MatMul(root, rows, w), b))
    xent = ops.SparseSoftmaxCrossEntropyWithLogits(root, hidden, labels).loss
    loss = ops.Mean(root.with_op_name("loss"), xent, [0])
    d_table, d_w, d_b = mg.gradients(loss, [table, w, b])
    assert isinstance(d_table, mg.IndexedSlices)
    fetches = {
        "values": d_table.values.name, "indices": d_table.indices.name,
        "dense_shape": d_table.dense_shape.name, "d_w": d_w.name, "d_b": d_b.name,
    }  # fmt: skip
    feeds = {
        "table:0": rng.standard_normal((6, 4)).astype(np.float32),
        "ids:0": np.array([5, 0, 5, 2], np.int32),
        "labels:0": np.array([2, 0, 1, 1], np.int32),
    }
    return root, fetches, feeds


def test_the_cli_runs_a_gradient_graph_to_the_sessions_values(tmp_path):
    root, fetches, feeds = _model()
    path = mg.write_graph(root.graph, str(tmp_path / "grads.pb"))
    with mg.Session(root) as session:
        expected = session.run(
            list(fetches.values()), {root.graph.get_output(k): v for k, v in feeds.items()}
        )
    argv = [sys.executable, "-m", "minigraph", "run", path, "--out", str(tmp_path / "out")]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name.split(':')[0]}.npy", value)
        argv += ["--feed", f"{name}={tmp_path / (name.split(':')[0] + '.npy')}"]
    for name in fetches.values():
        argv += ["--fetch", name]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    for name, want in zip(fetches.values(), expected):
        saved = tmp_path / "out" / (name.replace("/", "_").replace(":", "_") + ".npy")
        got = np.load(saved)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)
    # A non-zero gradient (the ReLU does not swallow everything): the test can fail.
    assert np.abs(expected[3]).sum() > 0 and np.abs(expected[0]).sum() > 0
    np.testing.assert_array_equal(expected[1], feeds["ids:0"])
