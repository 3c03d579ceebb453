"""Gradient rules of DynamicPartition, DynamicStitch and ParallelDynamicStitch
(ops/partition.py), and the gradient of embedding_lookup that they and GatherV2's rule give:
against central differences and numpy references; a repeated stitch index gives gradient
only to the value that won it (TensorFlow 2.21 also gives it to the values it overwrote:
the TF test below shows the difference); each shard's gradient is an IndexedSlices computed
on the shard's device."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _gradients_gather_helpers import dense, op_types, run, total
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops  # noqa: F401 - the op library's rules and operators
from minigraph.testing import assert_gradients_close, compute_gradient
from ops import DynamicPartition, DynamicStitch, ParallelDynamicStitch, embedding_lookup
from ops.embedding import shard_sizes

RNG = np.random.default_rng(2121)


@pytest.fixture
def root():
    return mg.Scope.new_root_scope()


def values(shape):
    return RNG.standard_normal(shape)


# -- DynamicPartition --------------------------------------------------------------------------

PARTITION_CASES = [
    # (data shape, partitions, num_partitions)
    ((5, 2), np.array([0, 2, 1, 0, 2], np.int32), 3),
    ((5,), np.array([1, 1, 1, 1, 1], np.int32), 3),  # empty partitions 0 and 2
    ((2, 3, 2), np.array([[1, 0, 1], [0, 0, 1]], np.int32), 2),
    ((2, 3), np.array([[1, 0, 1], [0, 0, 1]], np.int32), 2),  # partitions shaped as data
    ((3, 2), np.array(1, np.int32), 2),  # a scalar partition: all of data, or nothing
    ((0, 4), np.zeros((0,), np.int32), 2),
    ((4, 2), np.array([0, 0, 0, 0], np.int32), 1),
]


@pytest.mark.parametrize("shape, partitions, n", PARTITION_CASES)
@pytest.mark.parametrize("which", [0, -1])
def test_dynamic_partition_gradient_matches_central_differences(shape, partitions, n, which):
    def f(s, d):
        return DynamicPartition(s, d, partitions, num_partitions=n).outputs[which]

    assert_gradients_close(f, [values(shape)])


def partition_reference(shape, partitions, dys):
    """Each partition's gradient rows back at the data rows they came from."""
    out = np.zeros(shape)
    flat = partitions.reshape(-1)
    rows = out.reshape((flat.size,) + shape[partitions.ndim :])
    for p, dy in enumerate(dys):
        rows[np.flatnonzero(flat == p)] = dy
    return out


@pytest.mark.parametrize("shape, partitions, n", PARTITION_CASES)
@pytest.mark.parametrize("static", [True, False])
def test_dynamic_partition_gradient_values(root, shape, partitions, n, static):
    data = mg.Placeholder(root.with_op_name("data"), mg.float64, shape if static else None)
    parts = mg.Placeholder(root.with_op_name("parts"), mg.int32,
                           partitions.shape if static else None)  # fmt: skip
    outs = DynamicPartition(root.with_op_name("split"), data, parts, num_partitions=n).outputs
    feeds = {data: values(shape), parts: partitions}
    dys = [values(v.shape) for v in run(root, outs, feeds)]
    (grad,) = mg.gradients(outs, data, grad_ys=[mg.Const(root, dy) for dy in dys])
    if static:
        assert grad.shape == shape
    np.testing.assert_array_equal(
        run(root, grad, feeds), partition_reference(shape, partitions, dys)
    )


def test_an_unused_partition_gets_zeros(root):
    data = mg.Placeholder(root.with_op_name("data"), mg.float64, [4])
    outs = DynamicPartition(root, data, np.array([1, 0, 1, 1], np.int32), num_partitions=2).outputs
    (grad,) = mg.gradients(outs[1], data)
    np.testing.assert_array_equal(run(root, grad, {data: values(4)}), [1, 0, 1, 1])


def test_dynamic_partition_second_order():
    partitions = np.array([1, 0, 1, 2], np.int32)

    def first(s, d):
        outs = DynamicPartition(s, d, partitions, num_partitions=3).outputs
        loss = total(s, outs[0] * outs[0] * outs[0]) + total(s, outs[1] * outs[1])
        return mg.gradients(loss, d)[0]

    assert_gradients_close(first, [values((4, 2))])


# -- DynamicStitch and ParallelDynamicStitch -------------------------------------------------------

STITCH_CASES = [
    # (indices per tensor, data shape per tensor): repeated indices within and across tensors.
    ([[0, 2, 4], [1, 3]], [(3, 2), (2, 2)]),  # no repeats
    ([[0, 2, 2], [[2, 1]]], [(3, 2), (1, 2, 2)]),  # 2 three times: the last, in tensor 1, wins
    ([[1, 1, 1]], [(3,)]),  # one tensor, the last of three wins
    ([[3, 0], [0, 3], [3]], [(2, 1, 2), (2, 1, 2), (1, 1, 2)]),
    ([5, [0, 5]], [(2,), (2, 2)]),  # a scalar index tensor; rows 1-4 named by nothing
    ([[], [2, 0]], [(0, 3), (2, 3)]),
]


def stitch_reference(indices, shapes, dy):
    """The gradient of each data tensor: dy at its index where that occurrence is the last
    one in list-then-C order, else zeros."""
    last = {}
    for m, idx in enumerate(indices):
        for k, i in enumerate(np.asarray(idx).reshape(-1).tolist()):
            last[i] = (m, k)
    grads = []
    for m, (idx, shape) in enumerate(zip(indices, shapes)):
        idx = np.asarray(idx, np.int32)
        g = np.zeros(shape).reshape((idx.size,) + shape[idx.ndim :])
        for k, i in enumerate(idx.reshape(-1).tolist()):
            if last[i] == (m, k):
                g[k] = dy[i]
        grads.append(g.reshape(shape))
    return grads


@pytest.mark.parametrize("indices, shapes", STITCH_CASES)
@pytest.mark.parametrize("op", [DynamicStitch, ParallelDynamicStitch])
def test_stitch_gradient_matches_central_differences(indices, shapes, op):
    consts = [np.array(i, np.int32) for i in indices]
    assert_gradients_close(lambda s, *d: op(s, consts, list(d)), [values(sh) for sh in shapes])


@pytest.mark.parametrize("indices, shapes", STITCH_CASES)
@pytest.mark.parametrize("static", [True, False])
def test_stitch_gradient_values(root, indices, shapes, static):
    idx = [np.array(i, np.int32) for i in indices]
    phs = [
        mg.Placeholder(root.with_op_name(f"i{m}"), mg.int32, i.shape if static else None)
        for m, i in enumerate(idx)
    ]
    data = [
        mg.Placeholder(root.with_op_name(f"d{m}"), mg.float64, s if static else None)
        for m, s in enumerate(shapes)
    ]
    merged = DynamicStitch(root.with_op_name("merged"), phs, data)
    feeds = {**dict(zip(phs, idx)), **{d: values(s) for d, s in zip(data, shapes)}}
    dy = values(run(root, merged, feeds).shape)
    grads = mg.gradients(merged, data, grad_ys=mg.Const(root, dy))
    got = run(root, grads, feeds)
    for g, want, shape in zip(got, stitch_reference(indices, shapes, dy), shapes):
        assert g.shape == shape
        np.testing.assert_array_equal(g, want)


def test_overwritten_values_get_no_gradient(root):
    a = mg.Placeholder(root.with_op_name("a"), mg.float32, [3])
    b = mg.Placeholder(root.with_op_name("b"), mg.float32, [2])
    merged = DynamicStitch(root, [np.array([0, 1, 1], np.int32), np.array([1, 2], np.int32)],
                           [a, b])  # fmt: skip
    grad_a, grad_b = mg.gradients(merged, [a, b], grad_ys=np.array([1, 2, 3], np.float32))
    got = run(root, [grad_a, grad_b], {a: np.zeros(3), b: np.zeros(2)})
    np.testing.assert_array_equal(got[0], [1, 0, 0])  # a[1] and a[2] were overwritten by b[0]
    np.testing.assert_array_equal(got[1], [2, 3])


def test_the_partitioned_positions_of_a_range_gather_directly(root):
    # Indices that cannot repeat (outputs of one DynamicPartition of a Range, as
    # embedding_lookup's): no winner stitch, one gather per data tensor, as TF's rule.
    parts = mg.Placeholder(root.with_op_name("parts"), mg.int32, [None])
    positions = ops.Range(root, 0, ops.Size(root, parts), 1)
    split = DynamicPartition(root, positions, parts, num_partitions=2).outputs
    d0 = mg.Placeholder(root.with_op_name("d0"), mg.float32, [None, 2])
    d1 = mg.Placeholder(root.with_op_name("d1"), mg.float32, [None, 2])
    merged = DynamicStitch(root.with_op_name("merged"), list(split), [d0, d1])
    grads = mg.gradients(merged, [d0, d1])
    assert op_types(root.graph).count("DynamicStitch") == 0
    assert op_types(root.graph).count("GatherV2") == 2
    feeds = {parts: [1, 0, 1], d0: np.ones((1, 2)), d1: np.ones((2, 2))}
    got = run(root, grads, feeds)
    assert got[0].shape == (1, 2) and got[1].shape == (2, 2)
    # The same indices fed as tensors of unknown origin take the general rule.
    other = mg.Placeholder(root.with_op_name("other"), mg.int32, [None])
    merged = DynamicStitch(root.with_op_name("merged2"), [split[0], other], [d0, d1])
    mg.gradients(merged, [d0, d1], name="general")
    assert op_types(root.graph, "general").count("DynamicStitch") == 1


@pytest.mark.parametrize(
    "source, pick",
    [
        ("range", (0, 0)),  # one partition of distinct positions, used twice: repeats
        ("const", (0, 1)),  # partitions of values that repeat (not a Range)
    ],
)
def test_partitioned_indices_that_can_repeat_take_the_general_rule(source, pick):
    def f(s, a, b):
        if source == "range":
            positions = ops.Range(s, 0, 3, 1)
        else:
            positions = mg.Const(s, np.array([1, 1, 0], np.int32))
        split = DynamicPartition(s, positions, np.array([0, 1, 0], np.int32), num_partitions=2)
        return DynamicStitch(s, [split.outputs[k] for k in pick], [a, b])

    sizes = {0: 2, 1: 1}
    assert_gradients_close(f, [values((sizes[pick[0]], 2)), values((sizes[pick[1]], 2))])


def test_tensorflow_2_21_also_differentiates_overwritten_values():
    """TF's _DynamicStitchGrads gathers the output gradient for every occurrence of an index,
    so a value that a later one overwrote gets the winner's gradient; the numeric Jacobian
    says it has none, and so does minigraph's rule."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow")
    tf1 = tf.compat.v1
    indices = [np.array([0, 1, 1], np.int32), np.array([1, 2], np.int32)]
    a_value, b_value = np.arange(3.0), np.arange(2.0) + 10
    dy = np.array([1.0, 2.0, 3.0])
    graph = tf.Graph()
    with graph.as_default():
        a = tf1.placeholder(tf.float64, [3])
        b = tf1.placeholder(tf.float64, [2])
        merged = tf.dynamic_stitch(indices, [a, b])
        tf_grads = tf.gradients(merged, [a, b], grad_ys=dy)
        with tf1.Session() as session:
            tf_merged, tf_a, tf_b = session.run([merged] + tf_grads, {a: a_value, b: b_value})
    root = mg.Scope.new_root_scope()
    pa = mg.Placeholder(root.with_op_name("a"), mg.float64, [3])
    pb = mg.Placeholder(root.with_op_name("b"), mg.float64, [2])
    ours = DynamicStitch(root, indices, [pa, pb])
    our_grads = mg.gradients(ours, [pa, pb], grad_ys=dy)
    our_merged, our_a, our_b = run(root, [ours] + our_grads, {pa: a_value, pb: b_value})
    np.testing.assert_array_equal(our_merged, tf_merged)  # the same forward values
    np.testing.assert_array_equal(tf_a, [1.0, 2.0, 2.0])  # TF: merged[1]'s, to a[1] and a[2]
    np.testing.assert_array_equal(our_a, [1.0, 0.0, 0.0])  # ours: b[0] overwrote a[1] and a[2]
    np.testing.assert_array_equal(tf_b, our_b)
    # Central differences of sum(dy * merged) with respect to a: a[1] does not move it.
    theoretical, numerical = compute_gradient(
        lambda s, x: DynamicStitch(s, indices, [x, mg.Const(s, b_value)]), [a_value]
    )
    np.testing.assert_allclose(dy @ numerical[0], [1.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-9)
    assert not np.allclose(dy @ numerical[0], tf_a)


@st.composite
def stitches(draw):
    """(indices per tensor, data shape per tensor): small index ranges, so indices repeat."""
    rows = draw(st.integers(1, 5))
    row_shape = tuple(draw(st.lists(st.integers(0, 2), max_size=2)))
    indices, shapes = [], []
    for _ in range(draw(st.integers(1, 3))):
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
        count = int(np.prod(shape))
        flat = draw(st.lists(st.integers(0, rows - 1), min_size=count, max_size=count))
        indices.append(np.array(flat, np.int32).reshape(shape))
        shapes.append(shape + row_shape)
    return indices, shapes


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(stitches(), st.booleans(), st.integers(0, 2**32 - 1))
def test_stitch_gradient_property(case, static, seed):
    indices, shapes = case
    rng = np.random.default_rng(seed)
    root = mg.Scope.new_root_scope()
    idx = [mg.Placeholder(root, mg.int32, i.shape if static else None) for i in indices]
    data = [mg.Placeholder(root, mg.float64, s if static else None) for s in shapes]
    merged = DynamicStitch(root, idx, data)
    feeds = {**dict(zip(idx, indices)), **{d: rng.standard_normal(s) for d, s in zip(data, shapes)}}
    dy = rng.standard_normal(run(root, merged, feeds).shape)
    got = run(root, mg.gradients(merged, data, grad_ys=mg.Const(root, dy)), feeds)
    for g, want in zip(got, stitch_reference(indices, shapes, dy)):
        np.testing.assert_array_equal(g, want)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.integers(0, 3), max_size=2), st.lists(st.integers(0, 2), max_size=2),
    st.integers(1, 4), st.booleans(), st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_partition_gradient_property(p_shape, row_shape, n, static, seed):
    rng = np.random.default_rng(seed)
    partitions = rng.integers(0, n, size=p_shape).astype(np.int32)
    shape = tuple(p_shape) + tuple(row_shape)
    root = mg.Scope.new_root_scope()
    data = mg.Placeholder(root, mg.float64, shape if static else None)
    parts = mg.Placeholder(root, mg.int32, partitions.shape if static else None)
    outs = DynamicPartition(root, data, parts, num_partitions=n).outputs
    feeds = {data: rng.standard_normal(shape), parts: partitions}
    dys = [rng.standard_normal(v.shape) for v in run(root, outs, feeds)]
    (grad,) = mg.gradients(outs, data, grad_ys=[mg.Const(root, dy) for dy in dys])
    np.testing.assert_array_equal(
        run(root, grad, feeds), partition_reference(shape, partitions, dys)
    )


# -- embedding_lookup --------------------------------------------------------------------------


SHARDINGS = [(1, "mod"), (2, "mod"), (3, "mod"), (2, "div"), (3, "div")]


def shard(table, n, strategy):
    """The reference sharding (as tests/test_embedding.py's)."""
    if strategy == "mod":
        return [table[p::n] for p in range(n)]
    bounds = np.cumsum([0] + shard_sizes(len(table), n))
    return [table[bounds[p] : bounds[p + 1]] for p in range(n)]


@pytest.mark.parametrize(
    "n, strategy", [(1, "mod"), (2, "mod"), (3, "mod"), (2, "div"), (3, "div")]
)
def test_embedding_lookup_gradient_is_sparse_per_shard(root, n, strategy):
    table = values((7, 3))
    ids = np.array([6, 0, 3, 3, 1, 6, 6], np.int64)
    shards = [mg.Placeholder(root.with_op_name(f"s{k}"), mg.float64, s.shape)
              for k, s in enumerate(shard(table, n, strategy))]  # fmt: skip
    out = embedding_lookup(root, shards, ids, strategy)
    dy = values(out.shape.dims)
    grads = mg.gradients(out, shards, grad_ys=mg.Const(root, dy))
    assert all(isinstance(g, mg.IndexedSlices) for g in grads)
    feeds = dict(zip(shards, shard(table, n, strategy)))
    got = run(root, grads, feeds)
    expected = np.zeros_like(table)
    np.add.at(expected, ids, dy)
    for value, s, want in zip(got, shard(table, n, strategy), shard(expected, n, strategy)):
        np.testing.assert_allclose(dense(value, s.shape), want, rtol=1e-12)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_gradient_matches_central_differences(strategy):
    table = values((5, 2))
    ids = np.array([4, 0, 4, 2], np.int32)
    assert_gradients_close(
        lambda s, *p: embedding_lookup(s, list(p), ids, strategy), shard(table, 2, strategy)
    )


def test_embedding_lookup_gradient_for_ids_of_any_rank():
    table = values((5, 2))
    ids = np.array([[4, 0], [4, 2], [1, 1]], np.int32)
    assert_gradients_close(lambda s, *p: embedding_lookup(s, list(p), ids), shard(table, 2, "mod"))


def test_each_shard_s_gradient_is_computed_on_its_device(root, sim_gpus):
    devices = ["/device:GPU:0", "/device:GPU:1", "/device:CPU:0"]
    table = values((7, 2)).astype(np.float32)
    shards = [
        mg.Const(root.with_op_name(f"shard{k}").with_device(d), s)
        for k, (d, s) in enumerate(zip(devices, shard(table, 3, "mod")))
    ]
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [None])
    out = embedding_lookup(root, shards, ids)
    grads = mg.gradients(out, shards)
    for k, g in enumerate(grads):
        for part in (g.values, g.indices, g.dense_shape):
            assert part.op.colocation_group == f"shard{k}", part
    metadata = mg.RunMetadata()
    with mg.Session(root) as session:
        got = session.run(grads, {ids: [6, 1, 6, 2]}, run_metadata=metadata)
    for g, device in zip(grads, devices):
        for part in (g.values, g.indices, g.dense_shape):
            assert metadata.placement[part.op.name].endswith(device.split(":", 1)[1]), part
    expected = np.zeros_like(table)
    np.add.at(expected, [6, 1, 6, 2], 1.0)
    for value, s, want in zip(got, shard(table, 3, "mod"), shard(expected, 3, "mod")):
        np.testing.assert_array_equal(dense(value, s.shape), want)


def test_one_shard_s_gradient_is_colocated_with_the_table(root):
    table = mg.Placeholder(root.with_op_name("table"), mg.float32, [4, 2])
    rows = embedding_lookup(root, table, np.array([3, 3, 0], np.int32))
    (grad,) = mg.gradients(rows, table)
    assert isinstance(grad, mg.IndexedSlices)
    assert {grad.values.op.colocation_group, grad.dense_shape.op.colocation_group} == {"table"}
    value = run(root, grad, {table: np.zeros((4, 2), np.float32)})
    np.testing.assert_array_equal(value.indices, [3, 3, 0])


def test_variable_shards_get_their_gradients_on_their_devices(root, sim_gpus):
    # The shards' gathers are ResourceGathers (ops/resource_variables.py's rule); the stitch
    # and partition rules here bring each shard its rows' gradient, on its device.
    devices = ["/device:GPU:0", "/device:GPU:1", "/device:CPU:0"]
    table = values((7, 2)).astype(np.float32)
    variables = [
        mg.Variable(root.with_device(d), s, name=f"v{k}")
        for k, (d, s) in enumerate(zip(devices, shard(table, 3, "mod")))
    ]
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [None])
    out = embedding_lookup(root, variables, ids)
    dy = values((4, 2)).astype(np.float32)
    grads = mg.gradients(out, variables, grad_ys=dy)
    assert all(isinstance(g, mg.IndexedSlices) for g in grads)
    alone, both = mg.RunMetadata(), mg.RunMetadata()
    with mg.Session(root) as session:
        session.run(mg.global_variables_initializer(root))
        # The gradient alone, and a training step's run: the lookup and its gradient.
        session.run(grads, {ids: [6, 1, 6, 2]}, run_metadata=alone)
        _, got = session.run([out, grads], {ids: [6, 1, 6, 2]}, run_metadata=both)
    for k, (g, device) in enumerate(zip(grads, devices)):
        for part in (g.values, g.indices):
            assert part.op.colocation_group == f"v{k}", part
            for metadata in (alone, both):
                assert metadata.placement[part.op.name].endswith(device.split(":", 1)[1]), part
    expected = np.zeros_like(table)
    np.add.at(expected, [6, 1, 6, 2], dy)
    for value, s, want in zip(got, shard(table, 3, "mod"), shard(expected, 3, "mod")):
        np.testing.assert_allclose(dense(value, s.shape), want, rtol=1e-6)
