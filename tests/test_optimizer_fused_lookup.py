"""The fused sharded lookup (ops/embedding.py, `fused_sharded_lookup`, remapping pass): the
composition embedding_lookup writes (DynamicPartition of the positions -> per-shard GatherV2
of the new ids -> GatherV2 per shard -> DynamicStitch) and TensorFlow's own (the new ids
partitioned too, ParallelDynamicStitch), every node on one CPU device, become one
FusedShardedLookup node that gathers straight into the output: the same values, and the same
errors, word for word and naming the same nodes, as the composition run node by node. The
user's graph (and its GraphDef) keep the composition.

Tests that check whether the fusion happened pin the CPU (the fused kernel is CPU-only);
value comparisons run on whatever devices the suite's variant gives.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import Const, Placeholder, Scope, Session, SessionConfig
from minigraph.devices import CpuDevice
from minigraph.testing import pinned_devices
from ops import (
    Cast,
    DynamicPartition,
    DynamicStitch,
    FloorDiv,
    FloorMod,
    GatherV2,
    ParallelDynamicStitch,
    Range,
    Size,
    embedding_lookup,
)
from ops.embedding import shard_sizes

DATA = Path(__file__).resolve().parent / "data"
ON = SessionConfig(optimizer=True)
OFF = SessionConfig(optimizer=False)
FUSED = "fused_sharded_lookup"


def fused_nodes(metadata):
    return [node for r in metadata.optimizer if r.name == "remapping" for node, rule in r.fused
            if rule == FUSED]  # fmt: skip


def run_both(root, fetches, feeds=None, config=None, runs=2):
    """(optimized result, unoptimized result, optimized run's metadata)."""
    config = config or {}
    metadata = mg.RunMetadata()
    results = []
    for optimizer in (True, False):
        with Session(root, SessionConfig(optimizer=optimizer, **config)) as sess:
            for _ in range(runs):  # interpreted, then generated code
                got = sess.run(fetches, feeds, run_metadata=metadata if optimizer else None)
            results.append(got)
    return results[0], results[1], metadata


def errors_both(root, fetches, feeds):
    """The error each way (InvalidArgumentError expected): (optimized, unoptimized). Each
    raises twice, the same: interpreted, then from the plan's generated code."""
    found = []
    for config in (ON, OFF):
        with Session(root, config) as sess:
            seen = []
            for _ in range(2):
                with pytest.raises(mg.InvalidArgumentError) as info:
                    sess.run(fetches, feeds)
                seen.append(info.value)
        assert str(seen[0]) == str(seen[1]) and seen[0].node_name == seen[1].node_name
        found.append(seen[0])
    return found


def split_table(table, count, strategy):
    if strategy == "mod":
        return [np.ascontiguousarray(table[k::count]) for k in range(count)]
    starts = np.cumsum([0] + shard_sizes(len(table), count))
    return [table[starts[k] : starts[k + 1]] for k in range(count)]


def composition(root, shards, ids, form="gathered", policy="", stitch=DynamicStitch):
    """A sharded "mod" lookup written by hand, without embedding_lookup's id check: the
    gathers' own bounds errors are what a bad id meets."""
    n = len(shards)
    parts = FloorMod(root.with_op_name("assign"), ids, np.array(n, ids.dtype.np_dtype)).output
    parts = ops_cast(root, parts)
    new_ids = FloorDiv(root.with_op_name("new_ids"), ids, np.array(n, ids.dtype.np_dtype)).output
    positions = Range(root.with_op_name("positions"), 0, Size(root.with_op_name("size"), ids), 1)
    split = DynamicPartition(root.with_op_name("split"), positions, parts, num_partitions=n)
    if form == "partitioned":
        id_parts = DynamicPartition(root.with_op_name("id_split"), new_ids, parts,
                                    num_partitions=n).outputs  # fmt: skip
    rows = []
    for k, shard in enumerate(shards):
        if form == "gathered":
            wanted = GatherV2(root.with_op_name(f"shard_ids_{k}"), new_ids, split.outputs[k], 0,
                              bad_indices_policy=policy).output  # fmt: skip
        else:
            wanted = id_parts[k]
        rows.append(GatherV2(root.with_op_name(f"rows_{k}"), shard, wanted, 0,
                             bad_indices_policy=policy).output)  # fmt: skip
    return stitch(root.with_op_name("stitch"), list(split.outputs), rows).output


def ops_cast(root, t):
    if t.dtype == mg.int32:
        return t
    return Cast(root.with_op_name("assign_i32"), t, DstT=mg.int32).output


# -- embedding_lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_embedding_lookup_is_fused_and_gives_the_same_rows(cpu_only, strategy, id_dtype):
    table = np.arange(13 * 3, dtype=np.float32).reshape(13, 3)
    root = Scope.new_root_scope()
    shards = [Const(root.with_op_name(f"s{k}"), s) for k, s in
              enumerate(split_table(table, 4, strategy))]  # fmt: skip
    ids = Placeholder(root.with_op_name("ids"), mg.as_dtype(id_dtype), shape=[None])
    y = embedding_lookup(root, shards, ids, partition_strategy=strategy)
    value = np.array([12, 0, 5, 5, 7, 12, 1], id_dtype)  # duplicates, both ends
    on, off, meta = run_both(root, y, {ids: value})
    assert fused_nodes(meta) == [y.op.name if y.op.type == "DynamicStitch" else
                                 "embedding_lookup/DynamicStitch"]  # fmt: skip
    np.testing.assert_array_equal(on, table[value])
    np.testing.assert_array_equal(off, table[value])
    steps = {s.op_type for s in _traced(root, y, {ids: value})}
    assert "FusedShardedLookup" in steps and not {"DynamicPartition", "DynamicStitch"} & steps


def _traced(root, fetch, feeds):
    meta = mg.RunMetadata()
    with Session(root, ON) as sess:
        sess.run(fetch, feeds, run_metadata=meta, options=mg.RunOptions(trace=True))
    return meta.step_stats


@pytest.mark.parametrize("ids_value", [np.zeros([0], np.int64), np.zeros([2, 0], np.int64),
                                       np.array([[3, 1], [0, 4]], np.int64)])  # fmt: skip
def test_empty_and_two_dimensional_ids(cpu_only, ids_value):
    table = np.arange(20, dtype=np.float64).reshape(5, 4)
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=None)  # unknown rank
    y = embedding_lookup(root, [Const(root, s) for s in split_table(table, 2, "mod")], ids)
    on, off, meta = run_both(root, y, {ids: ids_value})
    assert fused_nodes(meta)
    assert on.shape == off.shape == ids_value.shape + (4,)
    np.testing.assert_array_equal(on, table[ids_value])


def test_unknown_shard_shapes_fed(cpu_only):
    table = np.arange(30, dtype=np.float32).reshape(10, 3)
    root = Scope.new_root_scope()
    feeds_in = [Placeholder(root, mg.float32, shape=[None, None]) for _ in range(3)]
    ids = Placeholder(root, mg.int32, shape=[None])
    for strategy in ("mod", "div"):
        y = embedding_lookup(root, feeds_in, ids, partition_strategy=strategy)
        value = np.array([9, 0, 4, 4], np.int32)
        feeds = {ids: value, **dict(zip(feeds_in, split_table(table, 3, strategy)))}
        on, off, meta = run_both(root, y, feeds)
        assert fused_nodes(meta)
        np.testing.assert_array_equal(on, table[value])
        np.testing.assert_array_equal(off, table[value])
        # The run-time checks still run: a bad id is the Assert's error both ways.
        bad = {**feeds, ids: np.array([10], np.int32)}
        fused, plain = errors_both(root, y, bad)
        assert fused.message == plain.message and "every id must be in [0, rows)" in str(fused)


def test_shards_on_different_devices_are_not_fused():
    with pinned_devices([CpuDevice(0), CpuDevice(1)]):
        root = Scope.new_root_scope()
        table = np.arange(12, dtype=np.float32).reshape(6, 2)
        shards = [Const(root.with_device(f"/cpu:{k % 2}"), s) for k, s in
                  enumerate(split_table(table, 2, "mod"))]  # fmt: skip
        ids = Placeholder(root, mg.int64, shape=[None])
        y = embedding_lookup(root, shards, ids)
        on, off, meta = run_both(root, y, {ids: [5, 0, 3]})
        assert fused_nodes(meta) == []
        np.testing.assert_array_equal(on, table[[5, 0, 3]])
        # On one device (the other one), it is fused.
        root = Scope.new_root_scope()
        shards = [Const(root.with_device("/cpu:1"), s) for s in split_table(table, 2, "mod")]
        ids = Placeholder(root, mg.int64, shape=[None])
        y = embedding_lookup(root.with_device("/cpu:1"), shards, ids)
        on, _, meta = run_both(root, y, {ids: [5, 0, 3]})
        assert fused_nodes(meta)
        np.testing.assert_array_equal(on, table[[5, 0, 3]])


def test_on_simulated_gpus_the_values_are_the_same(sim_gpus):
    table = np.arange(24, dtype=np.float32).reshape(8, 3)
    root = Scope.new_root_scope()
    shards = [Const(root.with_device(f"/gpu:{k % 2}"), s) for k, s in
              enumerate(split_table(table, 4, "div"))]  # fmt: skip
    ids = Placeholder(root, mg.int64, shape=[None])
    y = embedding_lookup(root, shards, ids, partition_strategy="div")
    on, off, meta = run_both(root, y, {ids: [7, 1, 1, 0]})
    assert fused_nodes(meta) == []  # two devices
    np.testing.assert_array_equal(on, table[[7, 1, 1, 0]])
    np.testing.assert_array_equal(off, table[[7, 1, 1, 0]])


def test_the_graph_keeps_the_composition(cpu_only):
    root = Scope.new_root_scope()
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    ids = Placeholder(root, mg.int64, shape=[None])
    y = embedding_lookup(root, [Const(root, s) for s in split_table(table, 3, "mod")], ids)
    before = root.graph.as_graph_def().SerializeToString(deterministic=True)
    _, _, meta = run_both(root, y, {ids: [1, 2]})
    assert fused_nodes(meta)
    graph_def = root.graph.as_graph_def()
    assert graph_def.SerializeToString(deterministic=True) == before
    types = {node.op for node in graph_def.node}
    assert {"DynamicPartition", "DynamicStitch", "GatherV2"} <= types
    assert "FusedShardedLookup" not in types
    assert "FusedShardedLookup" not in mg.registry.list_ops()


def test_tensorflows_frozen_graph_is_fused_and_gives_tfs_outputs(cpu_only):
    from test_tf_models import assert_tf_value, recorded

    scope = Scope.new_root_scope()
    mg.import_graph_def(scope, mg.read_graph(DATA / "embedding_classifier.pb"), name="")
    feeds, fetches, dtypes, values = recorded("embedding_classifier")
    on, off, meta = run_both(scope, fetches, feeds)
    assert sorted(fused_nodes(meta)) == ["div/lookup", "mod/lookup"]  # ParallelDynamicStitch
    for name, dtype, want, a, b in zip(fetches, dtypes, values, on, off):
        assert_tf_value(name, a, dtype, want)
        np.testing.assert_array_equal(a, b)


# -- the composition by hand: errors --------------------------------------------------------------

SHARDS = [np.arange(k * 10, k * 10 + 6, dtype=np.float32).reshape(3, 2) for k in range(3)]


@pytest.mark.parametrize("form", ["gathered", "partitioned"])
@pytest.mark.parametrize("stitch", [DynamicStitch, ParallelDynamicStitch])
def test_a_hand_written_composition_is_fused(cpu_only, form, stitch):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    y = composition(root, [Const(root, s) for s in SHARDS], ids, form, stitch=stitch)
    value = np.array([8, 0, 4, 4, 3], np.int64)  # id -> shard id % 3, row id // 3
    on, off, meta = run_both(root, y, {ids: value})
    assert fused_nodes(meta) == ["stitch"]
    want = np.stack([SHARDS[i % 3][i // 3] for i in value])
    np.testing.assert_array_equal(on, want)
    np.testing.assert_array_equal(off, want)


@pytest.mark.parametrize("form", ["gathered", "partitioned"])
@pytest.mark.parametrize(
    "value, node, text",
    [
        ([1, 9, 4], "rows_0", r"indices\[0\] = 3 is not in \[0, 3\)"),  # 9: shard 0, row 3
        ([2, 5, 11], "rows_2", r"indices\[2\] = 3 is not in \[0, 3\)"),
        ([2, 5, 11, 13], "rows_1", r"indices\[0\] = 4 is not in \[0, 3\)"),  # the first shard's
    ],
)
def test_out_of_range_ids_raise_the_gathers_errors(cpu_only, form, value, node, text):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    y = composition(root, [Const(root, s) for s in SHARDS], ids, form)
    fused, plain = errors_both(root, y, {ids: np.array(value, np.int64)})
    assert str(fused) == str(plain)  # message, node, device and source line
    assert fused.node_name == plain.node_name == node and fused.op_type == "GatherV2"
    assert re.search(text, fused.message)


def test_negative_ids_and_bad_partitions_raise_their_nodes_errors(cpu_only):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    y = composition(root, [Const(root, s) for s in SHARDS], ids)
    # FloorMod/FloorDiv of -1 by 3: shard 2, row -1.
    fused, plain = errors_both(root, y, {ids: np.array([0, -1], np.int64)})
    assert str(fused) == str(plain) and fused.node_name == "rows_2"
    assert "indices[0] = -1 is not in [0, 3)" in fused.message
    # Partitions fed directly: out of [0, 3).
    root = Scope.new_root_scope()
    parts = Placeholder(root.with_op_name("parts"), mg.int32, shape=[None])
    new_ids = Placeholder(root.with_op_name("new_ids"), mg.int64, shape=[None])
    positions = Range(root, 0, Size(root, parts), 1)
    split = DynamicPartition(root.with_op_name("split"), positions, parts, num_partitions=3)
    rows = [GatherV2(root.with_op_name(f"rows_{k}"), Const(root, s),
                     GatherV2(root.with_op_name(f"ids_{k}"), new_ids, split.outputs[k], 0), 0)
            for k, s in enumerate(SHARDS)]  # fmt: skip
    y = DynamicStitch(root.with_op_name("stitch"), list(split.outputs), rows)
    feeds = {parts: np.array([0, 3], np.int32), new_ids: np.array([0, 0], np.int64)}
    fused, plain = errors_both(root, y, feeds)
    assert str(fused) == str(plain) and fused.node_name == "split"
    assert "partitions[1] = 3 is not in [0, 3)" in fused.message
    # New ids shorter than the partitions: the shard ids' gather raises.
    feeds = {parts: np.array([0, 1, 1], np.int32), new_ids: np.array([0, 0], np.int64)}
    fused, plain = errors_both(root, y, feeds)
    assert str(fused) == str(plain) and fused.node_name == "ids_1"
    _, _, meta = run_both(root, y, {parts: np.array([2, 0], np.int32),
                                    new_ids: np.array([1, 2], np.int64)})  # fmt: skip
    assert fused_nodes(meta) == ["stitch"]


def test_ignore_policy_gives_zero_rows_both_ways(cpu_only):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    y = composition(root, [Const(root, s) for s in SHARDS], ids, policy="IGNORE")
    on, off, meta = run_both(root, y, {ids: np.array([4, 9, -1, 2], np.int64)})
    assert fused_nodes(meta) == ["stitch"]
    np.testing.assert_array_equal(on, off)
    np.testing.assert_array_equal(on[1], [0, 0])


def test_mixed_policies_are_not_fused(cpu_only):
    root = Scope.new_root_scope()
    ids = Placeholder(root, mg.int64, shape=[None])
    shards = [Const(root, s) for s in SHARDS]
    n = 3
    parts = ops_cast(root, FloorMod(root, ids, np.int64(n)).output)
    new_ids = FloorDiv(root, ids, np.int64(n)).output
    split = DynamicPartition(root, Range(root, 0, Size(root, ids), 1), parts, num_partitions=n)
    rows = [GatherV2(root, s, GatherV2(root, new_ids, split.outputs[k], 0), 0,
                     bad_indices_policy="IGNORE" if k == 1 else "")
            for k, s in enumerate(shards)]  # fmt: skip
    y = DynamicStitch(root, list(split.outputs), rows)
    on, off, meta = run_both(root, y, {ids: [4, 2]})
    assert fused_nodes(meta) == []
    np.testing.assert_array_equal(on, off)


def test_unplain_cases_run_the_composition(cpu_only):
    # Strings (object arrays), a shard with no rows, shards of different row shapes fed
    # (the stitch's error), the same shard twice.
    root = Scope.new_root_scope()
    ids = Placeholder(root, mg.int64, shape=[None])
    words = [np.array([[b"a"], [b"b"]]), np.array([[b"c"]])]
    y = composition(root, [Const(root, w) for w in words], ids)
    on, off, meta = run_both(root, y, {ids: [2, 0, 1]})
    assert fused_nodes(meta) == ["stitch"]
    assert on.tolist() == off.tolist() == [[b"b"], [b"a"], [b"c"]]

    root = Scope.new_root_scope()
    ids = Placeholder(root, mg.int64, shape=[None])
    fed = [Placeholder(root, mg.float32, shape=[None, None]) for _ in range(2)]
    y = composition(root, fed, ids)
    feeds = {ids: [0, 1], fed[0]: np.ones((2, 2), np.float32), fed[1]: np.ones((2, 3), np.float32)}
    fused, plain = errors_both(root, y, feeds)
    assert str(fused) == str(plain) and fused.node_name == "stitch"
    same = np.arange(6, dtype=np.float32).reshape(3, 2)
    feeds = {ids: [5, 0, 1, 4], fed[0]: same, fed[1]: same}
    on, off, _ = run_both(root, y, feeds)
    np.testing.assert_array_equal(on, off)
    np.testing.assert_array_equal(on, same[[2, 0, 0, 2]])
    feeds = {ids: [0, 2], fed[0]: same, fed[1]: np.zeros((0, 2), np.float32)}
    on, off, _ = run_both(root, y, feeds)
    np.testing.assert_array_equal(on, off)
    fused, plain = errors_both(root, y, {**feeds, ids: [0, 1]})
    assert str(fused) == str(plain) and fused.node_name == "rows_1"


def test_large_lookups_on_two_threads_and_a_bad_id_in_the_second_half(cpu_only):
    rng = np.random.default_rng(0)
    table = rng.random((4000, 32), dtype=np.float32)
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    y = composition(root, [Const(root, s) for s in split_table(table, 4, "mod")], ids)
    value = rng.integers(0, 4000, 60_000)  # 7.7 MB of rows: two threads
    on, off, meta = run_both(root, y, {ids: value}, {"intra_op_threads": 2})
    assert fused_nodes(meta) == ["stitch"]
    np.testing.assert_array_equal(on, table[value])
    np.testing.assert_array_equal(off, on)
    value[-5] = 4000 + 3  # shard 3, row 1000
    fused, plain = errors_both(root, y, {ids: value})
    assert str(fused) == str(plain) and fused.node_name == "rows_3"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.integers(1, 40),
    count=st.integers(1, 5),
    width=st.integers(0, 3),
    strategy=st.sampled_from(["mod", "div"]),
    dtype=st.sampled_from(
        [np.float32, np.int8, np.float64, np.bool_, np.complex64, mg.bfloat16.np_dtype]
    ),
    data=st.data(),
)
def test_random_lookups_equal_numpy(cpu_only, rows, count, width, strategy, dtype, data):
    count = min(count, rows)
    table = (np.arange(rows * width).reshape(rows, width) % 7).astype(dtype)
    ids_value = np.array(data.draw(st.lists(st.integers(0, rows - 1), max_size=30)), np.int64)
    root = Scope.new_root_scope()
    ids = Placeholder(root, mg.int64, shape=[None])
    y = embedding_lookup(root, [Const(root, s) for s in split_table(table, count, strategy)],
                         ids, partition_strategy=strategy)  # fmt: skip
    on, off, meta = run_both(root, y, {ids: ids_value}, runs=1)
    want = table[ids_value]
    assert on.dtype == want.dtype and on.shape == want.shape
    np.testing.assert_array_equal(on, want)
    np.testing.assert_array_equal(off, want)
    assert bool(fused_nodes(meta)) == (count > 1)


@pytest.mark.parametrize("aligned", [True, False])
def test_both_gather_paths(cpu_only, monkeypatch, aligned):
    """Shards a whole number of rows apart (views of one table: one take over a view of
    all of them) and shards that are not (misaligned buffers: through the scratch)."""
    import ops.embedding as embedding

    views = []
    real = embedding.as_strided
    monkeypatch.setattr(embedding, "as_strided", lambda *a, **k: views.append(1) or real(*a, **k))
    table = np.arange(9 * 4, dtype=np.float32).reshape(9, 4)
    if aligned:
        parts = [table[0:3], table[3:6], table[6:9]]  # "div" blocks of one array
    else:
        parts = []
        for k in range(3):
            buf = np.zeros(3 * 16 + 4 * (k + 1), np.uint8)
            view = np.frombuffer(buf, np.float32, count=12, offset=4 * (k + 1)).reshape(3, 4)
            parts.append(view)
            buf[4 * (k + 1) :].view(np.float32)[:12] = table[3 * k : 3 * k + 3].reshape(-1)
    root = Scope.new_root_scope()
    fed = [Placeholder(root, mg.float32, shape=[3, 4]) for _ in range(3)]
    ids = Placeholder(root, mg.int64, shape=[None])
    y = embedding_lookup(root, fed, ids, partition_strategy="div")
    value = np.array([8, 0, 4, 4, 3, 2, 6], np.int64)
    with Session(root, ON) as sess:
        got = sess.run(y, {ids: value, **dict(zip(fed, parts))})
    np.testing.assert_array_equal(got, table[value])
    assert bool(views) == aligned


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(1, 4),
    rows=st.integers(0, 4),
    form=st.sampled_from(["gathered", "partitioned"]),
    stitch=st.sampled_from([DynamicStitch, ParallelDynamicStitch]),
    ids_value=st.lists(st.integers(-3, 20), max_size=12),
)
def test_random_ids_give_the_compositions_values_or_errors(
    cpu_only, count, rows, form, stitch, ids_value
):
    """Any ids (out of range, negative, none): the fused node gives the composition's rows, or
    raises its error, word for word and naming the same node."""
    shards = [np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) + 100 * k
              for k in range(count)]  # fmt: skip
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    y = composition(root, [Const(root, s) for s in shards], ids, form, stitch=stitch)
    feeds = {ids: np.array(ids_value, np.int64)}
    outcomes = []
    for config in (ON, OFF):
        with Session(root, config) as sess:
            try:
                outcomes.append(("value", sess.run(y, feeds)))
            except mg.InvalidArgumentError as e:
                outcomes.append(("error", (str(e), e.node_name, e.op_type)))
    (kind, a), (other, b) = outcomes
    assert kind == other
    if kind == "value":
        assert a.shape == b.shape and np.array_equal(a, b)
    else:
        assert a == b
