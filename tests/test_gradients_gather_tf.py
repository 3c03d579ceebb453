"""Gradient graphs of the gather family against a live TensorFlow (runs only where `tensorflow`
is importable: /work/tfvenv/bin/python -m pytest tests/test_gradients_gather_tf.py):

- exported to a GraphDef, TensorFlow imports and runs them to the same values as minigraph;
- the values equal those of TensorFlow's own rules (tf.gradients of the same forward graph),
  except for a DynamicStitch with repeated indices, where TF 2.21 also differentiates the
  overwritten values (tests/test_gradients_partition.py shows which is right).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

import minigraph as mg  # noqa: E402
import ops  # noqa: E402,F401 - the op library's rules
from ops import (  # noqa: E402
    DynamicPartition,
    DynamicStitch,
    EnsureShape,
    GatherNd,
    GatherV2,
    ScatterNd,
    UnsortedSegmentSum,
    embedding_lookup,
    gather,
)

tf1 = tf.compat.v1
RNG = np.random.default_rng(7)
TABLE = RNG.standard_normal((6, 3)).astype(np.float32)
CUBE = RNG.standard_normal((3, 4, 2)).astype(np.float32)


def run_in_tf(graph_def, fetches, feeds):
    tf_graph_def = tf1.GraphDef.FromString(graph_def.SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf_graph_def, name="")
    with tf1.Session(graph=graph) as session:
        return session.run(fetches, feeds)


def components(grad):
    """The tensor names to fetch for one gradient: an IndexedSlices' three, else its own."""
    if isinstance(grad, mg.IndexedSlices):
        return [grad.values.name, grad.indices.name, grad.dense_shape.name]
    return [grad.name]


class Model:
    """Forward ops and their gradients in one minigraph graph, named so that TensorFlow can
    fetch them after importing it."""

    def __init__(self):
        self.root = mg.Scope.new_root_scope()
        r = self.root
        self.table = mg.Placeholder(r.with_op_name("table"), mg.float32, [None, 3])
        self.cube = mg.Placeholder(r.with_op_name("cube"), mg.float32, [3, None, 2])
        self.ids = mg.Placeholder(r.with_op_name("ids"), mg.int32, [None])
        self.axis = mg.Placeholder(r.with_op_name("axis"), mg.int32, [])
        self.u = mg.Placeholder(r.with_op_name("u"), mg.float32, [3, 3])
        self.v = mg.Placeholder(r.with_op_name("v"), mg.float32, [2, 3])
        self.feeds = {
            "table:0": TABLE, "cube:0": CUBE, "ids:0": np.array([5, 0, 5, 2], np.int32),
            "axis:0": np.array(1, np.int32), "u:0": TABLE[:3], "v:0": TABLE[4:],
        }  # fmt: skip
        self.grads = {}  # case -> its gradient
        self.dys = {}  # case -> its grad_ys, where not ones

    def add(self, case, y, x, dy=None):
        grad_ys = None if dy is None else mg.Const(self.root, dy)
        (grad,) = mg.gradients(y, x, grad_ys=grad_ys, name=f"grad_{case}")
        if dy is not None:
            self.dys[case] = dy
        assert grad is not None, case
        self.grads[case] = grad


def build_model() -> Model:
    m = Model()
    r, table, cube, ids = m.root, m.table, m.cube, m.ids
    m.add("rows", gather(r.with_op_name("rows"), table, ids), table)
    m.add("rows2d", GatherV2(r, table, np.array([[1, 1], [4, 0]], np.int64), 0), table,
          dy=RNG.standard_normal((2, 2, 3)).astype(np.float32))  # fmt: skip
    m.add("cols", gather(r, table, [2, 2, 0], axis=1), table)
    m.add("last", gather(r, cube, [[1, 1, 0]], axis=-1), cube)
    m.add("batched", gather(r, cube, [[3, 3], [0, 1], [2, 3]], axis=1, batch_dims=1), cube,
          dy=RNG.standard_normal((3, 2, 2)).astype(np.float32))  # fmt: skip
    m.add("batched2", gather(r, cube, [[1, 1], [0, 1], [0, 0]], axis=2, batch_dims=1), cube)
    m.add("run_time_axis", GatherV2(r, cube, [1, 0, 1], m.axis), cube)
    inner = GatherV2(r, table, ids, 0)
    m.add("gather_of_gather", GatherV2(r, inner, [3, 3, 1], 0), table)
    m.add("nd", GatherNd(r, cube, [[2, 3], [2, 3], [0, 1]]), cube)
    m.add("nd_rows", GatherNd(r, table, [[4], [4], [1]]), table)
    m.add("nd_one_vector", GatherNd(r, cube, [1, 2]), cube)
    m.add("nd_ignore", GatherNd(r, cube, [[2, 3], [9, 0], [2, 3]], bad_indices_policy="IGNORE"),
          cube)  # fmt: skip
    m.add("segment_sum", UnsortedSegmentSum(r, table, [1, -1, 1, 0, 3, -2], 4), table,
          dy=RNG.standard_normal((4, 3)).astype(np.float32))  # fmt: skip
    m.add("scatter_nd", ScatterNd(r, [[1], [1], [0]], ops.Square(r, m.u), [4, 3]), m.u)
    parts = DynamicPartition(r, table, [1, 0, 1, 2, 2, 1], num_partitions=3).outputs
    m.add("partition", parts[1], table, dy=RNG.standard_normal((3, 3)).astype(np.float32))
    stitched = DynamicStitch(r, [[0, 2, 4], [1, 3]], [m.u, m.v])
    m.add("stitch", stitched, m.u, dy=RNG.standard_normal((5, 3)).astype(np.float32))
    repeated = DynamicStitch(r, [[0, 2, 2], [[2, 1]]], [m.u, ops.Reshape(r, m.v, [1, 2, 3])])
    m.add("stitch_repeated", repeated, m.u, dy=RNG.standard_normal((3, 3)).astype(np.float32))
    shards = [mg.Const(r.with_op_name(f"shard{k}"), TABLE[k::2]) for k in range(2)]
    lookup = embedding_lookup(r.with_op_name("lookup"), shards, ids)
    for k, s in enumerate(shards):
        m.add(f"lookup_shard{k}", lookup, s)
    m.add("ensure_shape", EnsureShape(r, gather(r, table, ids), shape=[4, 3]), table)
    return m


def test_gradient_graphs_run_in_tensorflow_with_the_same_values():
    m = build_model()
    fetches = [name for grad in m.grads.values() for name in components(grad)]
    ours = mg.Session(m.root).run(fetches, m.feeds)
    theirs = run_in_tf(m.root.graph.as_graph_def(), fetches, m.feeds)
    for name, a, b in zip(fetches, ours, theirs):
        b = np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=name)


def dense(value, shape):
    if hasattr(value, "indices"):  # minigraph's or TF's IndexedSlicesValue
        out = np.zeros(shape, np.float64)
        np.add.at(out, np.asarray(value.indices), np.asarray(value.values, np.float64))
        return out
    return np.asarray(value, np.float64)


TF_CASES = [
    # (case, TF's forward over placeholders p (table, cube, ids, u), what it differentiates)
    ("rows", lambda p: tf.gather(p["table"], p["ids"]), "table"),
    ("cols", lambda p: tf.gather(p["table"], [2, 2, 0], axis=1), "table"),
    ("last", lambda p: tf.gather(p["cube"], [[1, 1, 0]], axis=-1), "cube"),
    ("batched2",
     lambda p: tf.gather(p["cube"], [[1, 1], [0, 1], [0, 0]], axis=2, batch_dims=1), "cube"),
    ("nd", lambda p: tf.gather_nd(p["cube"], [[2, 3], [2, 3], [0, 1]]), "cube"),
    ("nd_rows", lambda p: tf.gather_nd(p["table"], [[4], [4], [1]]), "table"),
    ("scatter_nd", lambda p: tf.scatter_nd([[1], [1], [0]], tf.square(p["u"]), [4, 3]), "u"),
    ("segment_sum",
     lambda p: tf.math.unsorted_segment_sum(p["table"], [1, -1, 1, 0, 3, -2], 4), "table"),
    ("partition",
     lambda p: tf.dynamic_partition(p["table"], [1, 0, 1, 2, 2, 1], num_partitions=3)[1],
     "table"),
    ("stitch", lambda p: tf.dynamic_stitch([[0, 2, 4], [1, 3]], [p["u"], p["v"]]), "u"),
    ("stitch_repeated",
     lambda p: tf.dynamic_stitch([[0, 2, 2], [[2, 1]]], [p["u"], tf.reshape(p["v"], [1, 2, 3])]),
     "u"),
]  # fmt: skip


@pytest.mark.parametrize("case, forward, x", TF_CASES, ids=[c[0] for c in TF_CASES])
def test_values_equal_tensorflow_s_own_rules(case, forward, x):
    m = build_model()
    grad = m.grads[case]
    ours = mg.Session(m.root).run(grad, m.feeds)
    shapes = {"table": [None, 3], "cube": [3, None, 2], "ids": [None], "u": [3, 3], "v": [2, 3]}
    graph = tf.Graph()
    with graph.as_default():
        p = {
            name: tf1.placeholder(tf.int32 if name == "ids" else tf.float32, shape, name=name)
            for name, shape in shapes.items()
        }
        y = forward(p)
        dy = m.dys.get(case)
        (tf_grad,) = tf.gradients(y, p[x], grad_ys=dy)
        assert isinstance(tf_grad, tf.IndexedSlices) == isinstance(grad, mg.IndexedSlices)
        with tf1.Session() as session:
            theirs = session.run(tf_grad, {p[k]: m.feeds[f"{k}:0"] for k in shapes})
    shape = m.feeds[f"{x}:0"].shape
    if case == "stitch_repeated":
        # TF 2.21 also differentiates u[1] and u[2], which u[2] and v[0] overwrote.
        want = dense(theirs, shape)
        want[1:] = [0.0, 0.0, 0.0]
        np.testing.assert_allclose(dense(ours, shape), want, rtol=1e-6)
        assert not np.allclose(dense(theirs, shape), want)
        return
    np.testing.assert_allclose(dense(ours, shape), dense(theirs, shape), rtol=1e-6, atol=1e-6)
