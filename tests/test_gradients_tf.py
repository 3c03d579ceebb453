"""minigraph.gradients against TensorFlow 2.21's tf.compat.v1.gradients: the same random graphs
(minigraph's test ops beside the TF ops they stand for), the same ys, xs, grad_ys and
stop_gradients, the same values; and the IndexedSlices conventions (fetched values, the large
densification warning). Runs in the TF venv: `/work/tfvenv/bin/python -m pytest` this file."""

from __future__ import annotations

import warnings

import _grad_ops as g
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gradients_properties import build, graphs

import minigraph as mg
import ops  # noqa: F401 - AddN sums the gradients that meet

tf = pytest.importorskip("tensorflow").compat.v1


TF_OPS = {
    "square": lambda a: tf.square(a[0]),
    "scale": lambda a: a[0] * 0.5,
    "exp": lambda a: tf.exp(a[0]),
    "identity": lambda a: tf.identity(a[0]),
    "add": lambda a: tf.add(*a),
    "mul": lambda a: tf.multiply(*a),
}


def tf_build(xs, nodes, ys):
    made = list(xs)
    for kind, args in nodes:
        made.append(TF_OPS[kind]([made[i] for i in args]))
    return made, [made[i] for i in ys]


@settings(max_examples=25, deadline=None)
@given(graphs(), st.data())
def test_random_graphs_match_tensorflow(recipe, data):
    n_x, nodes, ys, values = recipe
    n_nodes = len(nodes)
    stops = data.draw(st.lists(st.integers(n_x, n_x + n_nodes - 1), max_size=2, unique=True))
    seeds = data.draw(st.lists(st.booleans(), min_size=len(ys), max_size=len(ys)))
    seed_values = [np.array([0.5, -2.0]) if s else None for s in seeds]
    unconnected = data.draw(st.sampled_from(["none", "zero"]))

    graph = tf.Graph()
    with graph.as_default():
        txs = [tf.placeholder(tf.float64, [2]) for _ in range(n_x)]
        made, tys = tf_build(txs, nodes, ys)
        tgrads = tf.gradients(
            tys, txs, grad_ys=[None if v is None else tf.constant(v) for v in seed_values],
            stop_gradients=[made[i] for i in stops], unconnected_gradients=unconnected,
        )  # fmt: skip
        fetch = [t for t in tgrads if t is not None]
        with tf.Session(graph=graph) as session:
            tf_values = session.run(fetch, dict(zip(txs, values)))

    root = mg.Scope.new_root_scope()
    xs = [mg.Placeholder(root, mg.float64, [2]).output for _ in range(n_x)]
    mine = build_with_made(root, xs, nodes)
    grads = mg.gradients(
        [mine[i] for i in ys], xs, grad_ys=seed_values, stop_gradients=[mine[i] for i in stops],
        unconnected_gradients=unconnected,
    )  # fmt: skip
    assert [t is None for t in grads] == [t is None for t in tgrads]
    with mg.Session(root) as session:
        got = session.run([t for t in grads if t is not None], dict(zip(xs, values)))
    for a, b in zip(got, tf_values):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def build_with_made(scope, xs, nodes):
    made = list(xs)
    for kind, args in nodes:
        made.append(build(scope, [made[i] for i in args], [(kind, tuple(range(len(args))))],
                          [len(args)])[0])  # fmt: skip
    return made


def test_integer_paths_and_xs_as_tensorflow():
    # TF 2.21: the int path is constant; d(int x)/d(int x) is grad_ys; 'zero' gives int zeros.
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [])
        y = tf.cast(tf.cast(x, tf.int32), tf.float32) * x
        xi = tf.placeholder(tf.int32, [])
        tf_result = [
            tf.gradients(tf.cast(x, tf.int32), x),
            tf.gradients(xi, xi)[0].dtype,
            tf.gradients(tf.cast(xi, tf.float32), xi, unconnected_gradients="zero")[0].dtype,
        ]
        with tf.Session(graph=graph) as session:
            tf_value = session.run(tf.gradients(y, x), {x: 2.5})
    root = mg.Scope.new_root_scope()
    mx = mg.Placeholder(root, mg.float32, []).output
    my = g.Mul(root, g.ToFloat(root, g.ToInt(root, mx)), mx)
    mxi = mg.Placeholder(root, mg.int32, []).output
    assert mg.gradients(g.ToInt(root, mx), mx) == tf_result[0] == [None]
    assert mg.gradients(mxi, mxi)[0].dtype.name == tf_result[1].name == "int32"
    zero = mg.gradients(g.ToFloat(root, mxi), mxi, unconnected_gradients="zero")[0]
    assert zero.dtype.name == tf_result[2].name
    with mg.Session(root) as session:
        assert session.run(mg.gradients(my, mx), {mx: 2.5}) == tf_value


def test_indexed_slices_conventions_match_tensorflow():
    from tensorflow.python.framework import indexed_slices as tf_indexed_slices

    assert mg.IndexedSlicesValue._fields == tf_indexed_slices.IndexedSlicesValue._fields
    limit = tf_indexed_slices._LARGE_SPARSE_NUM_ELEMENTS
    assert mg.indexed_slices.LARGE_SPARSE_NUM_ELEMENTS == limit
    graph = tf.Graph()
    with graph.as_default():
        values = tf.placeholder(tf.float32, [None, 1000])
        indices = tf.placeholder(tf.int32, [None])
        sparse = tf.IndexedSlices(values, indices, tf.constant([limit // 1000, 1000]))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tf.convert_to_tensor(sparse)
        with tf.Session(graph=graph) as session:
            fetched = session.run(
                tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([0]), tf.constant([2, 1]))
            )
    tf_message = str(caught[0].message)
    root = mg.Scope.new_root_scope()
    mine = mg.IndexedSlices(
        mg.Placeholder(root, mg.float32, [None, 1000]), mg.Placeholder(root, mg.int32, [None]),
        mg.Const(root, np.array([limit // 1000, 1000], np.int32)),
    )  # fmt: skip
    with pytest.warns(UserWarning) as record:
        mg.convert_to_tensor(mine)
    assert str(record[0].message).startswith(tf_message)  # TF's sentence, then more detail
    assert type(fetched).__name__ == "IndexedSlicesValue"
    with mg.Session(root) as session:
        ours = session.run(
            mg.IndexedSlices(
                mg.Const(root, np.array([[1.0]], np.float32)),
                mg.Const(root, np.array([0])),
                mg.Const(root, np.array([2, 1])),
            )  # fmt: skip
        )
    assert type(ours).__name__ == "IndexedSlicesValue"
    for a, b in zip(ours, fetched):
        np.testing.assert_array_equal(a, b)
