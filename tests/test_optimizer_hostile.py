"""The graph optimizer and the fused sharded lookup attacked as a hostile user would (issue 23,
"The optimizer"): a rewrite never changes a value, an error (class, message, node named), a
side effect, or what a fetch, feed or control edge means. Every graph here runs with the
optimizer on and off (`SessionConfig(optimizer=True/False)`, whatever MINIGRAPH_TEST_OPTIMIZER
says) and the two are compared: values bit for bit (dtype, shape, bytes), errors word for word.

Each test that starts with a bug's description is its regression test.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import minigraph as mg
import ops
from minigraph import Const, Identity, NoOp, Placeholder, Scope, Session, SessionConfig
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
    StridedSlice,
    embedding_lookup,
    gather,
)

DATA = Path(__file__).resolve().parent / "data"
ON = SessionConfig(optimizer=True)
OFF = SessionConfig(optimizer=False)


def _key(value):
    """What must be equal both ways: dtype, shape and bytes (object arrays by value)."""
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if isinstance(value, np.ndarray):
        raw = repr(value.tolist()) if value.dtype.hasobject else value.tobytes()
        return (value.dtype.str, value.shape, raw)
    return repr(value)


def outcome(root, fetches, feeds=None, config=ON, runs=2, metadata=None):
    """The run's result key, or (error class, message, node) when it raises; each run `runs`
    times in one session (interpreted, then from the plan's generated code): the same each
    time."""
    seen = []
    with Session(root, config) as sess:
        for _ in range(runs):
            try:
                seen.append(_key(sess.run(fetches, feeds, run_metadata=metadata)))
            except mg.OpError as e:
                seen.append((type(e).__name__, str(e), e.node_name))
    assert all(s == seen[0] for s in seen), seen
    return seen[0]


def same_both_ways(root, fetches, feeds=None, **config):
    """The outcome with the optimizer on, asserted equal to the one with it off; and the
    optimized run's metadata."""
    metadata = mg.RunMetadata()
    on = outcome(root, fetches, feeds, SessionConfig(optimizer=True, **config), 2, metadata)
    off = outcome(root, fetches, feeds, SessionConfig(optimizer=False, **config))
    assert on == off
    return on, metadata


def fused(metadata):
    return [n for r in metadata.optimizer if r.name == "remapping" for n, rule in r.fused
            if rule == "fused_sharded_lookup"]  # fmt: skip


def hand_lookup(root, shards, ids):
    """A "mod" sharded lookup written by hand (no id check: the gathers' errors show)."""
    n = len(shards)
    parts = FloorMod(root.with_op_name("assign"), ids, np.array(n, ids.dtype.np_dtype)).output
    if parts.dtype != mg.int32:
        parts = Cast(root.with_op_name("assign_i32"), parts, DstT=mg.int32).output
    new_ids = FloorDiv(root.with_op_name("new_ids"), ids, np.array(n, ids.dtype.np_dtype))
    positions = Range(root.with_op_name("positions"), 0, Size(root.with_op_name("size"), ids), 1)
    split = DynamicPartition(root.with_op_name("split"), positions, parts, num_partitions=n)
    rows = []
    for k, shard in enumerate(shards):
        wanted = GatherV2(root.with_op_name(f"shard_ids_{k}"), new_ids, split.outputs[k], 0)
        rows.append(GatherV2(root.with_op_name(f"rows_{k}"), shard, wanted, 0).output)
    return DynamicStitch(root.with_op_name("stitch"), list(split.outputs), rows).output


# -- the fused lookup ------------------------------------------------------------------------------


@pytest.mark.parametrize("unused", [False, True])
def test_a_0d_shard_after_a_1d_one_raises_the_gathers_error(cpu_only, unused):
    """Bug: the fused kernel's fast path checked the rank of the first shard only; a 0-d shard
    after a 1-D one has the same (empty) row shape, and the kernel crashed with an IndexError
    ("tuple index out of range", naming the stitch) where the composition raises
    "params must be at least 1 dimensional" from that shard's GatherV2. Fixed: every shard's
    rank is checked (ops/embedding.py, `_fast_lookup`)."""
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    s0 = Placeholder(root.with_op_name("s0"), mg.float32, shape=None)
    s1 = Placeholder(root.with_op_name("s1"), mg.float32, shape=None)
    out = hand_lookup(root, [s0, s1], ids)
    feeds = {ids: np.array([0, 2] if unused else [0, 1]), s0: np.ones(2, np.float32),
             s1: np.float32(1)}  # fmt: skip
    got, metadata = same_both_ways(root, out, feeds)
    assert fused(metadata) == ["stitch"]
    assert got[0] == "InvalidArgumentError" and got[2] == "rows_1", got
    assert got[1].startswith("params must be at least 1 dimensional"), got


@pytest.mark.parametrize(
    "feeds",
    [
        {"s0": np.ones((2, 2), np.float32), "s1": np.ones((2, 3), np.float32)},  # row shapes
        {"s0": np.ones((2, 2), np.float32), "s1": np.ones(2, np.float32)},  # row ranks
        {"s0": np.ones((2, 4), np.float32)[:, ::2], "s1": np.ones((2, 2), np.float32)},  # strided
        {"s0": np.ones((2, 2), np.float32), "s1": np.ones((2, 2), np.float64)},  # converted
        {"s0": np.zeros((0, 2), np.float32), "s1": np.ones((2, 2), np.float32)},  # empty shard
        {"s0": np.ones(2, np.float32), "s1": np.zeros(2, np.float32)},  # 1-D shards
    ],
    ids=["row-shapes", "row-ranks", "strided", "dtypes", "empty-shard", "1-d"],
)
@pytest.mark.parametrize(
    "ids_value",
    [[0, 1, 2, 3], [3, 0], [4], [-1], [2**63 - 1, 0], [-(2**63)], [], [1, 1, 1]],
    ids=["all", "two", "over", "negative", "int64-max", "int64-min", "none", "repeated"],
)
def test_fed_shards_of_every_kind_give_the_compositions_result(cpu_only, feeds, ids_value):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    s0 = Placeholder(root.with_op_name("s0"), mg.float32, shape=None)
    s1 = Placeholder(root.with_op_name("s1"), mg.float32, shape=None)
    out = hand_lookup(root, [s0, s1], ids)
    fed = {ids: np.array(ids_value, np.int64), s0: feeds["s0"], s1: feeds["s1"]}
    same_both_ways(root, [out, s0], fed)  # a shard fetched as well


def test_the_size_of_another_tensor_and_shards_that_overlap_in_memory(cpu_only):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    other = Placeholder(root.with_op_name("other"), mg.int64, shape=[None])
    table = Placeholder(root.with_op_name("table"), mg.float32, shape=[5, 2])
    # Two views of one array, a row apart: the fused kernel's single-view path reads both.
    a = StridedSlice(root.with_op_name("a"), table, [0], [3], [1])
    b = StridedSlice(root.with_op_name("b"), table, [1], [4], [1])
    n = 2
    parts = Cast(root.with_op_name("p"), FloorMod(root.with_op_name("pm"), ids, np.int64(n)),
                 DstT=mg.int32)  # fmt: skip
    new_ids = FloorDiv(root.with_op_name("nid"), ids, np.int64(n))
    positions = Range(root.with_op_name("pos"), 0, Size(root.with_op_name("size"), other), 1)
    split = DynamicPartition(root.with_op_name("split"), positions, parts, num_partitions=n)
    rows = [GatherV2(root.with_op_name(f"rows{k}"), shard,
                     GatherV2(root.with_op_name(f"sid{k}"), new_ids, split.outputs[k], 0), 0)
            for k, shard in enumerate([a, b])]  # fmt: skip
    out = DynamicStitch(root.with_op_name("stitch"), list(split.outputs), rows)
    values = np.arange(10, dtype=np.float32).reshape(5, 2)
    for count in (3, 4, 5):  # Size of a tensor that is not the ids: shorter, equal, longer
        feeds = {ids: np.array([0, 1, 2, 5]), other: np.zeros(count, np.int64), table: values}
        got, metadata = same_both_ways(root, out, feeds)
        assert fused(metadata) == ["stitch"]
        assert (count == 4) == (got[0] != "InvalidArgumentError"), got


@pytest.mark.parametrize(
    "row_dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.complex128, np.int8, np.bool_]
)
@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_of_every_row_dtype_and_id_form(cpu_only, row_dtype, strategy):
    root = Scope.new_root_scope()
    table = (np.arange(14 * 3) % 7).astype(row_dtype).reshape(14, 3)
    shards = [Const(root.with_op_name(f"s{k}"), part)
              for k, part in enumerate(_split(table, 3, strategy))]  # fmt: skip
    ids = Placeholder(root.with_op_name("ids"), mg.int32, shape=None)
    out = embedding_lookup(root.with_op_name("emb"), shards, ids, partition_strategy=strategy)
    for value in (np.int32(13), np.array([[0, 13], [5, 5]], np.int32), np.zeros((0, 2), np.int32),
                  np.array([14], np.int32), np.array([2**31 - 1], np.int32)):  # fmt: skip
        got, metadata = same_both_ways(root, out, {ids: value})
        assert fused(metadata) == ["emb/DynamicStitch"]


def _split(table, count, strategy):
    if strategy == "mod":
        return [np.ascontiguousarray(table[k::count]) for k in range(count)]
    sizes = [len(table) // count + (k < len(table) % count) for k in range(count)]
    starts = np.cumsum([0, *sizes])
    return [table[starts[k] : starts[k + 1]] for k in range(count)]


def test_a_stitch_of_another_partition_or_of_swapped_shards_is_not_fused(cpu_only):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    shards = [Const(root.with_op_name(f"t{k}"), np.arange(6, dtype=np.float32).reshape(3, 2)
                    + 10 * k) for k in range(2)]  # fmt: skip
    parts = Cast(root.with_op_name("p"), FloorMod(root.with_op_name("pm"), ids, np.int64(2)),
                 DstT=mg.int32)  # fmt: skip
    other_parts = Cast(root.with_op_name("q"), FloorDiv(root.with_op_name("qm"), ids,
                       np.int64(3)), DstT=mg.int32)  # fmt: skip
    new_ids = FloorDiv(root.with_op_name("nid"), ids, np.int64(2))
    positions = Range(root.with_op_name("pos"), 0, Size(root.with_op_name("size"), ids), 1)
    split = DynamicPartition(root.with_op_name("split"), positions, parts, num_partitions=2)
    other = DynamicPartition(root.with_op_name("other"), positions, other_parts, num_partitions=2)
    id_parts = DynamicPartition(root.with_op_name("id_split"), new_ids, other_parts,
                                num_partitions=2)  # fmt: skip
    by_other = [GatherV2(root.with_op_name(f"a{k}"), shards[k], id_parts.outputs[k], 0)
                for k in range(2)]  # fmt: skip
    swapped = [
        GatherV2(
            root.with_op_name(f"b{k}"),
            shards[k],
            GatherV2(root.with_op_name(f"bi{k}"), new_ids, split.outputs[1 - k], 0),
            0,
        )
        for k in range(2)
    ]
    cases = [
        ParallelDynamicStitch(root.with_op_name("by_other"), list(split.outputs), by_other),
        DynamicStitch(root.with_op_name("swapped"), list(split.outputs), swapped),
        DynamicStitch(root.with_op_name("mixed"), list(other.outputs), [
            GatherV2(root.with_op_name(f"c{k}"), shards[k], GatherV2(
                root.with_op_name(f"ci{k}"), new_ids, split.outputs[k], 0), 0)
            for k in range(2)]),
    ]  # fmt: skip
    for out in cases:
        for value in ([0, 1, 2, 3, 4, 5], [0, 3], [5, 5, 1]):
            _, metadata = same_both_ways(root, out, {ids: np.array(value)})
            assert fused(metadata) == []


# -- folding, merging, simplifying -----------------------------------------------------------------


def test_feeds_of_constants_and_of_folded_nodes_between_runs_of_one_session(cpu_only):
    root = Scope.new_root_scope()
    c = Const(root.with_op_name("c"), np.float32(2.0))
    d = ops.Mul(root.with_op_name("d"), c, np.float32(3))
    i = Identity(root.with_op_name("i"), d)
    e = ops.AddV2(root.with_op_name("e"), i, np.float32(-0.0))
    runs = [(e, None), (e, {c: np.float32(5)}), (e, {d: np.float32(7)}), (e, {i: -0.0}),
            (e, None), ([e, d, i], None), ([e, i], {c: np.float32(1)}), (i, {d: np.nan}),
            ([d, d, c], {c: np.float32(-0.0)}), (e, None)]  # fmt: skip
    results = []
    for config in (ON, OFF):
        with Session(root, config) as sess:
            results.append([_key(sess.run(f, feeds)) for f, feeds in runs])
    assert results[0] == results[1]
    before = root.graph.as_graph_def()
    with Session(root, ON) as sess:
        sess.run(e, {c: np.float32(5)})
    assert root.graph.as_graph_def() == before  # the user's graph is left as it was built


def test_a_fetch_of_a_pass_through_of_a_folded_value_is_a_new_writable_array(cpu_only):
    """Bug: a fetched Identity (StopGradient, a Cast to its own dtype, ...) of a node that
    constant folding (or a Shape rewrite) turned into a Const handed out the constant's own
    array, as the Identity kernel returns its input: read-only (`result[0] = 1` raised
    "assignment destination is read-only") and the same array every run, where the graph as
    built gives a new, writable array each run. Fixed: such constants are read through a
    plan-private copy node (minigraph/optimizer.py, `_copy_exposed_constants`)."""
    root = Scope.new_root_scope()
    c = Const(root.with_op_name("c"), np.arange(4, dtype=np.float32))
    d = ops.Mul(root.with_op_name("d"), c, np.float32(3))
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2, 3])
    fetches = [
        Identity(root.with_op_name("i"), d),
        ops.StopGradient(root.with_op_name("sg"), d),
        Identity(root.with_op_name("ii"), Identity(root.with_op_name("inner"), d)),
        Cast(root.with_op_name("same"), d, DstT=mg.float32),
        Identity(root.with_op_name("shape"), ops.Shape(root, x)),
        # A folded value whose static shape was unknown: the Identity's output is too.
        Identity(root.with_op_name("unique"), ops.Unique(root, ops.Neg(root, d)).y),
    ]
    feeds = {x: np.ones((2, 3), np.float32)}
    for fetch in fetches:
        for config in (ON, OFF):
            with Session(root, config) as sess:
                first = sess.run(fetch, feeds)
                assert first.flags.writeable, (fetch, config)
                want = first.copy()
                first[...] = 42  # the user's array: the next run must not see it
                second = sess.run(fetch, feeds)
                assert not np.shares_memory(first, second)
                np.testing.assert_array_equal(second, want)
        same_both_ways(root, fetch, feeds)
    with Session(root, ON) as sess:  # the user's own constant stays read-only, as without it
        assert not sess.run(Identity(root, c)).flags.writeable


def test_a_folded_value_on_a_gpu_fetched_through_a_cpu_identity_is_new_each_run(sim_gpus):
    """Bug: the same, across devices: a value folded on a GPU and read by a fetched Identity on
    the CPU was copied to the CPU once, when the plan was made (a constant), and that one
    writable array was every run's result: what the user wrote into one run's result, the
    next run returned. Fixed: such a constant is read through a copy node on the host."""
    root = Scope.new_root_scope()
    gpu, cpu = root.with_device("/device:GPU:0"), root.with_device("/device:CPU:0")
    c = Const(gpu.with_op_name("c"), np.arange(4, dtype=np.float32))
    d = ops.Mul(gpu.with_op_name("d"), c, np.float32(3))
    fetches = [Identity(cpu.with_op_name("j"), d), Identity(gpu.with_op_name("i"), d),
               Identity(cpu.with_op_name("s"), ops.Shape(gpu, d))]  # fmt: skip
    for fetch in fetches:
        for config in (ON, OFF):
            with Session(root, config) as sess:
                first = sess.run(fetch)
                want = first.copy()
                first[...] = 42
                np.testing.assert_array_equal(sess.run(fetch), want)
        same_both_ways(root, fetch)


def test_zeros_like_of_a_resource_handle_is_left_to_its_kernel(cpu_only):
    """Bug: the ZerosLike rewrite (ops/rewrites.py, `_fill_of_known_shape`) excluded strings
    but not resource handles: `ZerosLike(variable.handle)` made the run fail with an
    InternalError naming the rewrite (np.full cannot make a handle), where the graph as built
    runs the kernel. Fixed: only numbers and bools become constants."""
    root = Scope.new_root_scope()
    v = mg.Variable(root.with_op_name("v"), np.float32([1, 2]))
    zeros = Identity(root, ops.ZerosLike(root.with_op_name("z"), v.handle))
    strings = Identity(root, ops.ZerosLike(root, Const(root, np.array([b"a"], object))))
    results = []
    for config in (ON, OFF):
        with Session(root, config) as sess:
            sess.run(v.initializer)
            results.append(_key(sess.run([zeros, strings])))
    assert results[0] == results[1]


def test_fetching_and_feeding_both_of_two_duplicates(cpu_only):
    root = Scope.new_root_scope()
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2])
    a = ops.Mul(root.with_op_name("a"), x, x)
    b = ops.Mul(root.with_op_name("b"), x, x)
    s = ops.Sub(root.with_op_name("s"), a, b)
    x_value = np.array([1, -0.0], np.float32)
    other = np.array([7, np.nan], np.float32)
    for fetches, feeds in [
        ([a, b], {x: x_value}),
        (s, {x: x_value, a: other}),
        (s, {x: x_value, b: other}),
        ([s, a, b], {x: x_value, b: other}),
    ]:
        same_both_ways(root, fetches, feeds)  # fmt: skip


def test_duplicate_constants_merge_only_when_dtype_shape_and_bits_agree(cpu_only):
    root = Scope.new_root_scope()
    x = Placeholder(root.with_op_name("x"), mg.int32, shape=None)
    y = Placeholder(root.with_op_name("y"), mg.uint8, shape=None)
    z = Placeholder(root.with_op_name("z"), mg.bool_, shape=None)
    f = Placeholder(root.with_op_name("f"), mg.float32, shape=None)
    fetches = [
        ops.AddV2(root, x, Const(root, np.array([1], np.int32))),
        ops.AddV2(root, x, Const(root, np.array([[1]], np.int32))),
        ops.LogicalAnd(root, z, Const(root, np.array([True, False]))),
        ops.AddV2(root, y, Const(root, np.array([1, 0], np.uint8))),
        ops.Mul(root, f, Const(root, np.float32(0.0))),
        ops.Mul(root, f, Const(root, np.float32(-0.0))),
        Identity(root, Const(root, np.array([b"a", b"b"], object))),
        Identity(root, Const(root, np.array([b"a", b"b\x00"], object))),
    ]
    feeds = {x: np.int32(3), y: np.uint8(2), z: True, f: np.float32(np.inf)}
    same_both_ways(root, fetches, feeds)


def test_many_distinct_constants_compile_in_linear_time(cpu_only):
    """Bug: common_subgraph_elimination kept the nodes of one (op, inputs) bucket in a list
    and compared each newcomer with every earlier one: every Const shares a bucket (no
    inputs), so a plan of n distinct constants took O(n**2) (4000: 2.3 s, 9x the plan without
    the optimizer; 8000: four times that). Input forwarding counted each input of a node in
    the node's input tuple (AddN of n inputs: O(n**2) too). Fixed: a bucket maps full keys to
    the node they merge into; inputs are counted once per step."""

    def compile_seconds(n, config):
        root = Scope.new_root_scope()
        x = Placeholder(root.with_op_name("x"), mg.float32, shape=[])
        total = ops.AddN(root, [ops.AddV2(root, x, Const(root, np.float32(k))) for k in range(n)])
        start = time.perf_counter()
        with Session(root, config) as sess:
            value = sess.run(total, {x: np.float32(1)})
        assert value == n + n * (n - 1) / 2
        return time.perf_counter() - start

    on, off = (min(compile_seconds(4000, config) for _ in range(2)) for config in (ON, OFF))
    # The optimizer's passes are linear: they add under 2x (the quadratic ones added 8x).
    assert on < 3.5 * off + 0.1, (on, off)


@pytest.mark.parametrize(
    "dtype, values",
    [
        (np.float32, [np.nan, -0.0, np.inf, -np.inf, 3e38]),
        (np.float16, [65504, -0.0, np.nan]),
        (ml_dtypes.bfloat16, [1.5, -0.0, np.inf]),
        (np.complex64, [1 + 2j, complex(np.nan, -0.0), complex(np.inf, 0)]),
        (np.int32, [2**31 - 1, -(2**31), 0]),
        (np.uint8, [255, 0, 1]),
    ],
)
def test_folding_and_simplifying_special_values_is_bitwise(cpu_only, dtype, values):
    root = Scope.new_root_scope()
    v = Const(root.with_op_name("v"), np.array(values, dtype))
    x = Placeholder(root.with_op_name("x"), mg.as_dtype(np.dtype(dtype)), shape=[len(values)])
    one, zero = np.array(1, dtype), np.array(0, dtype)
    neg_zero = np.array(-0.0, dtype) if np.dtype(dtype).kind in "fcV" else zero
    fetches = [
        Identity(root, ops.Mul(root, v, v)),  # folded
        Identity(root, ops.Mul(root, ops.Mul(root, x, one), ops.AddV2(root, x, zero))),
        Identity(root, ops.AddV2(root, ops.Sub(root, x, zero), neg_zero)),
        Identity(root, ops.Mul(root, one, ops.Sub(root, v, x))),
    ]
    same_both_ways(root, fetches, {x: np.array(values[::-1], dtype)})


def test_constant_subgraphs_that_raise_raise_at_run_time_naming_their_nodes(cpu_only):
    root = Scope.new_root_scope()
    a = Const(root.with_op_name("a"), np.int32([1, 2]))
    q = ops.FloorDiv(root.with_op_name("q"), a, np.int32([0, 1]))
    table = Const(root.with_op_name("t"), np.arange(6.0).reshape(3, 2))
    g = gather(root.with_op_name("g"), table, [5])
    g2 = gather(root.with_op_name("g2"), g, [0])
    big = ops.Fill(root.with_op_name("big"), [4, 1024, 1024], np.float32(1))  # 16 MiB: kept
    s = ops.Sum(root.with_op_name("s"), big, [0, 1, 2])
    for fetch, node in ((Identity(root, ops.AddV2(root, q, np.int32(1))), "q"),
                        (Identity(root, g2), "g"), (s, None)):  # fmt: skip
        got, metadata = same_both_ways(root, fetch)
        if node is not None:
            assert got[0] == "InvalidArgumentError" and got[2] == node, got


def test_gathers_of_gathers_keep_every_bounds_error(cpu_only):
    root = Scope.new_root_scope()
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3, 2])
    y = Placeholder(root.with_op_name("y"), mg.float32, shape=[None, 2])
    value = np.arange(6, dtype=np.float32).reshape(3, 2)
    cases = [
        (x, [0, 7], [0]),
        (x, [-1, 1], [1]),
        (x, [0, 1], [2]),
        (x, [[0, 1], [1, 2]], [1]),
        (x, np.zeros(0, np.int32), np.zeros(0, np.int32)),
        (x, [9], np.zeros(0, np.int32)),
        (x, np.array([2, 0], np.int64), np.array([1, 0, 1], np.int32)),
        (y, [0], [0, 0]),
    ]
    for k, (params, inner, outer) in enumerate(cases):  # fmt: skip
        g = gather(root.with_op_name(f"g{k}"), params, inner)
        out = Identity(root.with_op_name(f"o{k}"), gather(root.with_op_name(f"h{k}"), g, outer))
        same_both_ways(root, out, {x: value, y: np.zeros((0, 2), np.float32)})


# -- state, control edges, threads ----------------------------------------------------------------


def test_reads_of_a_variable_separated_by_an_assign_are_never_merged(cpu_only):
    root = Scope.new_root_scope()
    v = mg.Variable(root.with_op_name("v"), np.float32(1.0))
    first = v.read_value()
    assign = v.assign(np.float32(5.0), read_value=False)
    after = root.with_control_dependencies([assign])
    second, third = v.read_value(after), v.read_value(after)
    bumped = v.assign_add(np.float32(1.0), read_value=False)
    fourth = v.read_value(root.with_control_dependencies([bumped]))
    results = []
    for config in (ON, OFF):
        with Session(root, config) as sess:
            sess.run(v.initializer)
            got = [_key(sess.run([second, third, ops.Mul(root, second, np.float32(1))]))]
            sess.run(v.initializer)
            got.append(_key(sess.run(first)))
            got += [_key(sess.run([fourth, Identity(root, fourth)])) for _ in range(2)]
            results.append(got)
    assert results[0] == results[1]
    assert results[0][0][:2] == (_key(np.array(5, np.float32)),) * 2
    assert [results[0][k][0] for k in (2, 3)] == [_key(np.array(v, np.float32)) for v in (2, 3)]


def test_control_edges_on_removed_identities_and_noops_keep_their_effects(cpu_only):
    root = Scope.new_root_scope()
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[])
    v = mg.Variable(root.with_op_name("v"), np.float32(0.0))
    bump = v.assign_add(np.float32(1.0), read_value=False)
    noop = NoOp(root.with_op_name("n").with_control_dependencies([bump]))
    i = Identity(root.with_op_name("i").with_control_dependencies([noop]), x)
    j = Identity(root.with_op_name("j"), ops.Mul(root.with_op_name("m"), i, np.float32(1)))
    k = NoOp(root.with_op_name("k").with_control_dependencies([j.operation]))
    counts = []
    for config in (ON, OFF):
        with Session(root, config) as sess:
            sess.run(v.initializer)
            seen = []
            for fetch in (j, j, noop, i, k, [j, k]):
                sess.run(fetch, {x: np.float32(2)})
                seen.append(float(sess.run(v.value())))
            counts.append(seen)
    assert counts[0] == counts[1] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_concurrent_runs_of_one_session_with_different_fetches_and_feeds(cpu_only):
    root = Scope.new_root_scope()
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[None])
    table = Const(root.with_op_name("t"), np.arange(100, dtype=np.float32))
    outs = [ops.AddV2(root, ops.Mul(root, x, np.float32(1)), gather(root, table, [k, k + 1]))
            for k in range(6)]  # fmt: skip
    results = []
    for config in (ON, OFF):
        with Session(root, config) as sess:
            got: dict[int, list] = {}
            errors: list[BaseException] = []

            def work(t, sess=sess, got=got, errors=errors):
                try:
                    for j in range(15):
                        fetch = outs[t % 6] if j % 2 else outs[: t % 6 + 1]
                        value = sess.run(fetch, {x: np.float32([j, -j])})
                        got.setdefault(t, []).append(_key(value))
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            results.append(got)
    assert results[0] == results[1]


# -- whole graphs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    ["mlp_classifier", "embedding_classifier", "attention_block", "consts", "gather_basic",
     "segment_ops", "variadic"],
)  # fmt: skip
def test_tensorflows_frozen_graphs_bitwise_and_their_graph_def_unchanged(model):
    root = Scope.new_root_scope()
    graph_def = mg.read_graph(DATA / f"{model}.pb")
    mg.import_graph_def(root, graph_def, name="")
    with np.load(DATA / f"{model}.npz", allow_pickle=False) as data:
        feeds = {n.decode(): data[f"feed_{i}"] for i, n in enumerate(data["feed_names"])}
        fetches = [n.decode() for n in data["fetch_names"]]
    before = root.graph.as_graph_def()
    _, metadata = same_both_ways(root, fetches, feeds)
    assert any(r.changed for r in metadata.optimizer) or model == "consts"
    assert root.graph.as_graph_def() == before


def test_the_gradient_graph_of_the_frozen_mlp_bitwise():
    from benchmarks.gradients import mlp_gradient_step  # noqa: PLC0415

    root, fetches, feeds = mlp_gradient_step(batch=16)
    before = root.graph.as_graph_def()
    _, metadata = same_both_ways(root, fetches, feeds)
    reports = [r for r in metadata.optimizer if r.changed]
    assert reports
    # Folded weights read by fetched MatMuls are computed on, never copied for the fetch.
    assert not [n for n in metadata.placement if n.endswith("/copy")]
    # The reports' counts chain: each pass starts where the one before it ended.
    first = metadata.optimizer[0].nodes_before
    after = first + sum(r.nodes_after - r.nodes_before for r in metadata.optimizer)
    assert after < first
    removed = [n for r in metadata.optimizer for n in r.removed]
    assert len(removed) == len(set(removed))
    assert root.graph.as_graph_def() == before


@pytest.mark.parametrize(
    "fed",
    ["split:0", "split:1", "rows_0:0", "shard_ids_1:0", "positions:0", "size:0", "assign_i32:0",
     "new_ids:0", "stitch:0", "t0:0"],
)  # fmt: skip
def test_feeding_any_tensor_of_the_composition(cpu_only, fed):
    root = Scope.new_root_scope()
    ids = Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    shards = [Const(root.with_op_name(f"t{k}"), np.arange(6, dtype=np.float32).reshape(3, 2)
                    + 10 * k) for k in range(2)]  # fmt: skip
    out = hand_lookup(root, shards, ids)
    tensor = root.graph.get_tensor_by_name(fed)
    ids_value = np.array([0, 1, 2, 5])
    with Session(root, OFF) as sess:
        value = sess.run(tensor, {ids: ids_value})
    value = value[::-1].copy() if value.ndim else value  # another value of the same shape
    for fetches in (out, [out, tensor]):
        _, metadata = same_both_ways(root, fetches, {ids: ids_value, tensor: value})
        # Fed inside the composition: never fused; fed around it: still fused.
        assert (fused(metadata) == ["stitch"]) == (fed in ("assign_i32:0", "new_ids:0", "t0:0"))
