"""embedding_lookup where it differed from TensorFlow (issue 24): the static shape for every
shard count, shards whose row counts are known only at run time (both strategies, checked
there), the composition's name scope from `scope.with_op_name`, and an id check made of ops
TensorFlow has (tests/test_fidelity_tf.py runs such graphs in TensorFlow itself)."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import assert_array_same, msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import InvalidArgumentError, Scope, Session
from minigraph.testing import simulated_gpus
from minigraph.tf_compat import tf_incompatibilities
from ops import GatherV2, Placeholder, embedding_lookup
from ops.embedding import shard_sizes
from ops.math import Abs

TF_OPS = {
    "Const", "Placeholder", "Identity", "GatherV2", "Reshape", "Shape", "Size", "Range", "Cast",
    "FloorDiv", "FloorMod", "Maximum", "Minimum", "Sub", "AddV2", "Mul", "DynamicPartition",
    "DynamicStitch", "ConcatV2", "Min", "Max", "Sum", "All", "Less", "GreaterEqual", "Equal",
    "LogicalAnd", "Assert", "Pack", "Rank", "EnsureShape",
}  # fmt: skip


def shard(table: np.ndarray, n: int, strategy: str) -> list[np.ndarray]:
    if strategy == "mod":
        return [table[p::n] for p in range(n)]
    return np.array_split(table, n)


def run(scope, fetch, feed=None):
    with Session(scope, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        return sess.run(fetch, feed)


# -- the static shape --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize(
    "ids_shape", [[3], [2, 3], [], [None], [None, 2], [4, None, 1], None], ids=str
)
@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_the_static_shape_is_ids_shape_plus_row_shape_for_every_shard_count(n, ids_shape, strategy):
    # The issue's case: shards [3,10] and [2,10] with ids of shape [3] gave [?,10].
    root = Scope.new_root_scope()
    table = np.arange(50, dtype=np.float32).reshape(5, 10)
    ids = Placeholder(root, mg.int32, shape=ids_shape)
    out = embedding_lookup(root, shard(table, n, strategy), ids, strategy)
    want = None if ids_shape is None else [*ids_shape, 10]
    assert out.shape == mg.TensorShape(want)
    concrete = [2, 3] if ids_shape is None else [2 if d is None else d for d in ids_shape]
    value = np.arange(int(np.prod(concrete)), dtype=np.int32).reshape(concrete) % 5
    got = run(root, out, {ids: value.astype(np.int32)})
    assert_array_same(got, table[value])


def test_the_issues_two_shards():
    root = Scope.new_root_scope()
    shards = [np.zeros((3, 10), np.float32), np.ones((2, 10), np.float32)]
    out = embedding_lookup(root, shards, Placeholder(root, mg.int64, shape=[3]))
    assert out.shape == [3, 10]


# -- row counts known only at run time ---------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    total=st.integers(0, 30),
    n=st.integers(2, 6),
    strategy=st.sampled_from(["mod", "div"]),
    unknown=st.lists(st.booleans(), min_size=6, max_size=6),
    rank_unknown=st.booleans(),
    id_type=st.sampled_from([np.int16, np.int32, np.int64]),
    ids_shape=st.lists(st.integers(0, 4), min_size=1, max_size=2),
    seed=st.integers(0, 2**32 - 1),
)
def test_unknown_row_counts_give_the_single_gathers_values(
    total, n, strategy, unknown, rank_unknown, id_type, ids_shape, seed
):
    rng = np.random.default_rng(seed)
    table = rng.integers(-99, 99, (total, 2)).astype(np.float32)
    if total == 0:
        ids_shape = [0]
    ids = rng.integers(0, max(total, 1), ids_shape).astype(id_type)
    unknown = unknown[:n]
    unknown[0] = True  # at least one
    root = Scope.new_root_scope()
    parts, feed = [], {}
    for k, (piece, hidden) in enumerate(zip(shard(table, n, strategy), unknown)):
        if hidden:
            shape = None if rank_unknown and k == 0 else [None, 2]
            holder = Placeholder(root.with_op_name(f"p{k}"), mg.float32, shape=shape)
            parts.append(holder)
            feed[holder] = piece
        else:
            parts.append(piece)
    out = embedding_lookup(root, parts, ids, strategy)
    assert out.shape == [*ids_shape, 2]  # the other shards (n >= 2) know the row shape
    single = GatherV2(root, table, ids, 0)
    got, want = run(root, [out, single], feed)
    assert_array_same(got, want)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_run_time_row_counts_are_checked_against_the_strategy(strategy):
    root = Scope.new_root_scope()
    holders = [Placeholder(root, mg.float32, shape=[None, 2]) for _ in range(3)]
    out = embedding_lookup(root, holders, [0], strategy)
    feed = {h: np.zeros((rows, 2), np.float32) for h, rows in zip(holders, [4, 5, 4])}
    text = (
        f"assertion failed: [embedding_lookup: the {strategy} strategy splits] [13] "
        "[rows over 3 shards as] [5 4 4] [; got shard sizes] [4 5 4]"
    )
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        run(root, out, feed)
    # The construction-time message, for the same sizes known statically:
    with pytest.raises(InvalidArgumentError, match=msg("as [5, 4, 4]; got shard sizes [4, 5, 4]")):
        embedding_lookup(root, [np.zeros((r, 2)) for r in (4, 5, 4)], [0], strategy)
    feed = {h: np.zeros((rows, 2), np.float32) for h, rows in zip(holders, [5, 4, 4])}
    assert run(root, out, feed).shape == (1, 2)


@pytest.mark.parametrize(
    "sizes, text",
    [
        ([None, 6, 7], "got shard sizes [?, 6, 7] (params[1] has 6 rows and params[2] 7)"),
        ([5, None, 3], "got shard sizes [5, ?, 3] (params[0] has 5 rows and params[2] 3)"),
    ],
)
def test_known_row_counts_that_no_total_fits_fail_at_construction(sizes, text):
    root = Scope.new_root_scope()
    parts = [
        Placeholder(root, mg.float32, shape=[None, 2]) if s is None else np.zeros((s, 2))
        for s in sizes
    ]
    parts = [p if not isinstance(p, np.ndarray) else p.astype(np.float32) for p in parts]
    before = [op.name for op in root.graph.operations]
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        embedding_lookup(root, parts, [0])
    assert [op.name for op in root.graph.operations] == before  # nothing left behind
    embedding_lookup(root, [np.zeros((1, 2))], [0])
    assert root.graph.get_operation("embedding_lookup/params_0")  # the name was not taken


def test_construction_errors_leave_the_graph_unchanged():
    root = Scope.new_root_scope()
    for bad in ([np.zeros((6, 2)), np.zeros((7, 2))], [np.zeros((3, 2)), np.zeros((3, 3))]):
        with pytest.raises(InvalidArgumentError):
            embedding_lookup(root.with_op_name("emb"), bad, [0])
        assert len(root.graph) == 0
    with pytest.raises(InvalidArgumentError, match="the first argument must be a Scope"):
        embedding_lookup([np.zeros((3, 2))], [0], "mod")  # tf.nn.embedding_lookup's order


def test_unknown_row_counts_read_only_the_shape_where_the_shard_lives():
    root = Scope.new_root_scope()
    fed = [Placeholder(root, mg.float32, shape=[None, 2]) for _ in range(2)]
    shards = [
        Abs(root.with_device(f"/device:GPU:{k}").with_op_name(f"s{k}"), fed[k]).output
        for k in range(2)
    ]
    ids = Placeholder(root, mg.int64, shape=[None])
    out = embedding_lookup(root, shards, ids)
    shapes = [op for op in root.graph.operations if op.type == "Shape"]
    assert sorted(op.colocation_group for op in shapes) == ["s0", "s1"]
    feed = {fed[0]: np.ones((3, 2), np.float32), fed[1]: np.zeros((2, 2), np.float32)}
    with simulated_gpus(2):
        metadata = mg.RunMetadata()
        with Session(root) as sess:
            got = sess.run(out, {**feed, ids: [4, 1]}, run_metadata=metadata)
    assert_array_same(got, np.array([[1, 1], [0, 0]], np.float32))
    for op in shapes:
        where = metadata.placement[op.colocation_group]
        assert metadata.placement[op.name] == where, op.name
        assert where.endswith(f"GPU:{op.colocation_group[1]}")


# -- naming --------------------------------------------------------------------------------------


def test_the_scopes_op_name_is_the_compositions_name_scope():
    root = Scope.new_root_scope()
    shards = [np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32)]
    a = embedding_lookup(root.with_op_name("emb"), shards, [0, 3])
    b = embedding_lookup(root.with_op_name("emb"), shards, [1])
    c = embedding_lookup(root.with_op_name("ignored"), shards, [1], name="given")
    d = embedding_lookup(root.with_op_name("one"), shards[:1], [1])
    assert a.op.name.startswith("emb/") and b.op.name.startswith("emb_1/")
    assert c.op.name.startswith("given/") and d.op.name.startswith("one/")
    names = [op.name for op in root.graph.operations]
    assert not [n for n in names if n.startswith("embedding_lookup")]
    assert not [n for n in names if n.startswith("ignored")]
    # Nodes created in the composition all sit in its scope (the shards' Consts included).
    assert all(n.split("/")[0] in ("emb", "emb_1", "given", "one") for n in names)


def test_without_an_op_name_the_scope_is_embedding_lookup():
    root = Scope.new_root_scope().new_sub_scope("model")
    out = embedding_lookup(root, [np.zeros((2, 2)), np.zeros((1, 2))], [0])
    assert out.op.name.startswith("model/embedding_lookup/")


# -- the id check is made of TensorFlow's ops ----------------------------------------------------


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("known", [True, False])
def test_graphs_using_embedding_lookup_are_plain_tensorflow_graphs(n, known):
    root = Scope.new_root_scope()
    shards = [np.zeros((4, 2), np.float32) for _ in range(n)]
    if not known:
        shards[0] = Placeholder(root, mg.float32, shape=[None, 2])
    embedding_lookup(root, shards, Placeholder(root, mg.int64, shape=[None, 2]), "div")
    assert tf_incompatibilities(root.graph) == []
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == 0
    assert {node.op for node in graph_def.node} <= TF_OPS
    assert all(node.attr["bad_indices_policy"].s in (b"",) for node in graph_def.node)


@pytest.mark.parametrize("device", ["CPU", "GPU"])
@pytest.mark.parametrize(
    "ids, low, high", [([-1, 0], -1, 0), ([0, 7], 0, 7), ([7], 7, 7), ([-5, 9], -5, 9)]
)
@pytest.mark.parametrize("n", [1, 2])
def test_bad_ids_raise_on_every_device_naming_the_extremes(device, ids, low, high, n):
    root = Scope.new_root_scope().with_device(device)
    table = np.arange(14, dtype=np.float32).reshape(7, 2)
    out = embedding_lookup(root, shard(table, n, "mod"), Placeholder(root, mg.int32, [None]))
    text = (
        "assertion failed: [embedding_lookup: every id must be in [0, rows) for a table of] "
        f"[7] [rows; got ids from] [{low}] [to] [{high}]"
    )
    with simulated_gpus(1):
        with pytest.raises(InvalidArgumentError, match=msg(text)):
            run(root, out, {"Placeholder:0": ids})


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64])
def test_the_check_of_empty_ids_and_of_the_bounds_themselves(dtype):
    root = Scope.new_root_scope()
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    ids = Placeholder(root, mg.as_dtype(dtype), [None])
    out = embedding_lookup(root, shard(table, 2, "div"), ids, "div")
    assert run(root, out, {ids: np.zeros(0, dtype)}).shape == (0, 2)
    assert_array_same(run(root, out, {ids: np.array([0, 2], dtype)}), table[[0, 2]])
    info = np.iinfo(dtype)
    for bad in (info.min, info.max, 3, -1):
        with pytest.raises(InvalidArgumentError, match="every id must be in"):
            run(root, out, {ids: np.array([1, bad], dtype)})


def test_an_empty_table_refuses_every_id():
    root = Scope.new_root_scope()
    ids = Placeholder(root, mg.int64, [None])
    out = embedding_lookup(root, [np.zeros((0, 2)), np.zeros((0, 2))], ids)
    assert run(root, out, {ids: np.zeros(0, np.int64)}).shape == (0, 2)
    with pytest.raises(InvalidArgumentError, match=msg("a table of] [0] [rows")):
        run(root, out, {ids: [0]})


def test_shard_sizes_is_what_both_strategies_give():
    assert shard_sizes(13, 5) == [3, 3, 3, 2, 2]
    assert shard_sizes(2, 3) == [1, 1, 0]
