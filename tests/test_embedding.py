"""ops.embedding_lookup: TF's documented partition strategies, agreement with one GatherV2 over
the unsharded table for any shard count, strategy, ids shape and dtype, construction-time and
run-time error tables, colocation of the per-shard gathers, and simulated GPUs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _gather_helpers import assert_array_same, msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import InvalidArgumentError, RunMetadata, Scope, Session, UnimplementedError
from minigraph.testing import simulated_gpus
from ops import Const, GatherV2, Placeholder, embedding_lookup
from ops import partition as partition_ops
from ops.embedding import shard_sizes

GPU = "/job:localhost/replica:0/task:0/device:GPU:{}"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def shard(table: np.ndarray, n: int, strategy: str) -> list[np.ndarray]:
    """The reference sharding: "mod" deals rows round-robin, "div" cuts contiguous blocks
    (np.array_split gives the first len % n blocks one more row, as TF's "div")."""
    if strategy == "mod":
        return [table[p::n] for p in range(n)]
    return np.array_split(table, n)


def run(scope, fetch, feed=None, run_metadata=None):
    with Session(scope, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        return sess.run(fetch, feed, run_metadata=run_metadata)


# -- TF's documentation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy, split",
    [
        ("mod", [[0, 5, 10], [1, 6, 11], [2, 7, 12], [3, 8], [4, 9]]),
        ("div", [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10], [11, 12]]),
    ],
)
def test_documented_split_of_13_ids_over_5_partitions(strategy, split):
    # Shard p holds, in its rows, the ids the document assigns to partition p: looking every
    # id up gives the ids back exactly when the lookup uses that assignment.
    root = Scope.new_root_scope()
    shards = [np.array(ids, np.int64) * 10 for ids in split]
    assert [len(s) for s in split] == shard_sizes(13, 5)
    out = embedding_lookup(root, shards, np.arange(13), partition_strategy=strategy)
    assert_array_same(run(root, out), np.arange(13, dtype=np.int64) * 10)


def test_result_shape_is_ids_shape_plus_row_shape():
    root = Scope.new_root_scope()
    table = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    ids = np.array([[5, 0, 3], [1, 1, 2]])
    for params in (table, shard(table, 2, "mod"), shard(table, 4, "div")):
        strategy = "div" if isinstance(params, list) and len(params) == 4 else "mod"
        out = embedding_lookup(root, params, ids, strategy)
        assert out.shape == [2, 3, 2, 2]
        assert_array_same(run(root, out), table[ids])


# -- against one gather over the unsharded table -----------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    total=st.integers(0, 40),
    n=st.integers(1, 7),
    strategy=st.sampled_from(["mod", "div"]),
    ids_shape=st.lists(st.integers(0, 4), min_size=0, max_size=3),
    rows=st.lists(st.integers(0, 3), min_size=0, max_size=2),
    id_type=st.sampled_from([np.int16, np.int32, np.int64]),
    feed_ids=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_matches_a_single_gather(total, n, strategy, ids_shape, rows, id_type, feed_ids, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(-1000, 1000, (total, *rows)).astype(np.float32)
    if total == 0:
        ids_shape = [0, *ids_shape[:2]]  # only an empty lookup is valid
    ids = rng.integers(0, max(total, 1), ids_shape).astype(id_type)
    root = Scope.new_root_scope()
    ids_in = Placeholder(root, mg.as_dtype(id_type)) if feed_ids else ids
    out = embedding_lookup(root, shard(table, n, strategy), ids_in, strategy)
    single = GatherV2(root, table, ids_in, 0)
    feed = {ids_in: ids} if feed_ids else None
    got, want = run(root, [out, single], feed)
    assert_array_same(got, want)
    assert_array_same(got, table[ids].reshape(ids.shape + table.shape[1:]))


def test_int16_ids_into_a_table_larger_than_int16():
    root = Scope.new_root_scope()
    table = np.arange(40_000, dtype=np.int32)
    ids = np.array([0, 32767, 19_999, 20_000, 7], np.int16)
    for strategy in ("mod", "div"):
        out = embedding_lookup(root, shard(table, 2, strategy), ids, strategy)
        assert_array_same(run(root, out), table[ids.astype(np.int64)])


@pytest.mark.parametrize(
    "ids_shape, rows_known, static",
    [
        ([None, 3], True, [None, 3, 2]),
        ([None, None], True, [None, None, 2]),
        (None, True, None),
        # ids.shape + row shape, as TF's set_shape (an EnsureShape where the stitch loses it).
        ([4], False, [4, None]),
        ([None, 2], False, [None, 2, None]),
    ],
)
def test_partially_known_shapes(ids_shape, rows_known, static):
    root = Scope.new_root_scope()
    table = np.arange(10, dtype=np.float64).reshape(5, 2)
    ids_value = np.array([[4, 0], [2, 2]]) if ids_shape != [4] else np.array([4, 0, 2, 2])
    if ids_shape is not None and ids_shape[-1] == 3:
        ids_value = np.array([[4, 0, 1]])
    ids = Placeholder(root, mg.int64, shape=ids_shape)
    shards = shard(table, 2, "div")
    if not rows_known:
        shards = [Placeholder(root, mg.float64, shape=[len(s), None]) for s in shards]
    out = embedding_lookup(root, shards, ids, "div")
    assert out.shape == mg.TensorShape(static)
    feed = {ids: ids_value}
    if not rows_known:
        feed.update({p: s for p, s in zip(shards, shard(table, 2, "div"))})
    assert_array_same(run(root, out, feed), table[ids_value])


def test_one_shard_is_a_plain_gather_that_checks_ids():
    root = Scope.new_root_scope()
    out = embedding_lookup(root, [np.zeros((3, 2))], [1, 2])
    # TF's plain gather (its default policy), after an Assert on the ids: TF ops only.
    assert out.op.type == "GatherV2" and out.op.attrs["bad_indices_policy"] == ""
    assert [op.type for op in out.op.control_inputs] == ["Assert"]
    assert root.graph.as_graph_def().versions.min_consumer == 0


# -- construction errors -----------------------------------------------------------------------

TABLE = np.zeros((13, 2), np.float32)


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"params": TABLE, "partition_strategy": "Mod"}, InvalidArgumentError,
         "Unrecognized partition strategy: 'Mod' (expected 'mod' or 'div')"),
        ({"params": shard(TABLE, 2, "mod"), "partition_strategy": None}, InvalidArgumentError,
         "Unrecognized partition strategy: None"),
        ({"params": []}, InvalidArgumentError, "Need at least one param"),
        ({"params": TABLE, "max_norm": 1.0}, UnimplementedError, "max_norm=1.0 is not"),
        ({"params": TABLE, "ids": [0.5]}, InvalidArgumentError,
         "ids must be int16, int32 or int64; got float32"),
        ({"params": [np.zeros((7, 2)), np.zeros((6, 3))]}, InvalidArgumentError,
         "every shard must have the same row shape; params[1] has shape [6,3], rows [3]"),
        ({"params": [np.zeros((7, 2)), np.zeros((6, 2), np.float16)]}, InvalidArgumentError,
         "params[0] is float64 and params[1] is float16"),
        ({"params": [np.zeros((6, 2)), np.zeros((7, 2))]}, InvalidArgumentError,
         "the 'mod' strategy splits 13 rows over 2 shards as [7, 6]; got shard sizes [6, 7]"),
        ({"params": [np.zeros((6, 2)), np.zeros((7, 2))], "partition_strategy": "div"},
         InvalidArgumentError, "the 'div' strategy splits 13 rows over 2 shards as [7, 6]"),
        ({"params": [np.zeros(3), np.float64(1)]}, InvalidArgumentError,
         "params[1] must be at least 1-D"),
        ({"params": [[1, 2], "x"]}, InvalidArgumentError, "dtype"),
    ],
)  # fmt: skip
def test_construction_errors(kwargs, error, text):
    root = Scope.new_root_scope()
    kwargs.setdefault("ids", [0, 1])
    with pytest.raises(error, match=msg(text)):
        embedding_lookup(root, **kwargs)


def test_shard_row_counts_unknown_at_construction_are_read_at_run_time():
    # (tests/test_fidelity_embedding.py covers both strategies and the run-time checks.)
    root = Scope.new_root_scope()
    shards = [Placeholder(root, mg.float32, shape=[None, 2]), np.zeros((3, 2), np.float32)]
    out = embedding_lookup(root, shards, [0, 5])
    got = run(root, out, {shards[0]: np.arange(8, dtype=np.float32).reshape(4, 2)})
    assert_array_same(got, np.array([[0, 1], [0, 0]], np.float32))
    embedding_lookup(root, shards[:1], [0])


# -- run-time errors ---------------------------------------------------------------------------


ID_CHECK = (
    "assertion failed: [embedding_lookup: every id must be in [0, rows) for a table of] [{}] "
    "[rows; got ids from] [{}] [to] [{}]"
)


@pytest.mark.parametrize("n, strategy", [(1, "mod"), (3, "mod"), (3, "div"), (5, "div")])
@pytest.mark.parametrize(
    "bad, text",
    [
        ([[0, 4], [13, 1]], ID_CHECK.format(13, 0, 13)),
        ([[0, -1], [1, 1]], ID_CHECK.format(13, -1, 1)),
        ([[0, 1], [2, 14]], ID_CHECK.format(13, 0, 14)),
    ],
)
@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_ids_out_of_range_name_the_id(n, strategy, bad, text, device):
    root = Scope.new_root_scope().with_device(device)
    ids = Placeholder(root, mg.int64, shape=[2, 2])
    out = embedding_lookup(root, shard(TABLE, n, strategy), ids, strategy)
    with simulated_gpus(1):
        with pytest.raises(InvalidArgumentError, match=msg(text)):
            run(root, out, {ids: bad})


# -- placement ---------------------------------------------------------------------------------


def test_per_shard_gathers_run_where_their_shards_live():
    root = Scope.new_root_scope()
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    devices = ["/device:GPU:1", "/device:CPU:0", "/device:GPU:0"]
    shards = [
        Const(root.with_device(d).with_op_name(f"shard{k}"), s)
        for k, (d, s) in enumerate(zip(devices, shard(table, 3, "mod")))
    ]
    ids = Placeholder(root, mg.int64, shape=[None])
    # The lookup's own scope asks for another device: the gathers still follow their shards.
    out = embedding_lookup(root.with_device("/device:GPU:1"), shards, ids)
    md = RunMetadata()
    with simulated_gpus(2):
        got = run(root, out, {ids: [9, 0, 4, 4]}, run_metadata=md)
    assert_array_same(got, table[[9, 0, 4, 4]])
    gathers = {
        op.name: op for op in root.graph.operations
        if op.type == "GatherV2" and op.name.endswith(("GatherV2", "GatherV2_1", "GatherV2_2"))
        and op.inputs[0].op.name.startswith("shard")
    }  # fmt: skip
    assert len(gathers) == 3
    for op in gathers.values():
        assert md.placement[op.name] == md.placement[op.inputs[0].op.name]
    wanted = {"shard0": GPU.format(1), "shard1": CPU0, "shard2": GPU.format(0)}
    assert {k: md.placement[k] for k in wanted} == wanted


def test_lookup_with_string_rows_stays_on_the_cpu():
    root = Scope.new_root_scope()
    table = np.array([b"a", b"bb", b"", b"ccc", b"d"], dtype=object)
    out = embedding_lookup(root, shard(table, 2, "div"), [[4, 0], [3, 3]], "div")
    with simulated_gpus(1):
        got = run(root, out)
    assert_array_same(got, table[np.array([[4, 0], [3, 3]])])


# -- the README's snippet ----------------------------------------------------------------------


def test_readme_sharded_lookup_snippet_runs_as_documented(capsys):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.index("### Sharded embedding lookups")
    start = readme.index("```python\n", section) + len("```python\n")
    code = readme[start : readme.index("```\n", start)]
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "[?,2,2]",
        "[[24.0, 25.0], [0.0, 1.0]]",
        "/job:localhost/replica:0/task:0/device:GPU:0",
        ID_CHECK.format(13, 0, 13),
        "[10 20 50] [30 40] [7,2]",
        "[[1, 2], [11, 12], [21, 22], [31, 32], [41, 42], [51, 52], [61, 62]]",
    ]


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_stitch_takes_its_windowed_path_in_a_session(monkeypatch, strategy):
    # The partitioned positions are ascending, so the stitch scatters window by window into
    # the session's pooled memory; small windows make every run cross many of them.
    monkeypatch.setattr(partition_ops, "_STITCH_WINDOW_BYTES", 3 * 8)
    monkeypatch.setattr(partition_ops, "_STITCH_WINDOWED_BYTES", 0)
    rng = np.random.default_rng(7)
    table = rng.random((101, 2))
    root = Scope.new_root_scope()
    ids = Placeholder(root, mg.int64, shape=[None, 2])
    out = embedding_lookup(root, shard(table, 3, strategy), ids, strategy)
    with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        for _ in range(3):  # later runs reuse (dirty) pooled buffers
            value = rng.integers(0, 101, (400, 2))
            assert_array_same(sess.run(out, {ids: value}), table[value])


# -- the id arithmetic's dtype -----------------------------------------------------------------


def _arithmetic_dtype(root):
    (name,) = {op.get_attr("T").name for op in root.graph.get_operations() if op.type == "FloorDiv"}
    return name


def _casts(root):
    return [
        (op.get_attr("SrcT").name, op.get_attr("DstT").name)
        for op in root.graph.get_operations()
        if op.type == "Cast"
    ]


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize(
    "ids_dtype, rows, casts",
    [
        # int64 ids go to int32 once (the assignments need no Cast of their own).
        (mg.int64, 40_000, [("int64", "int32")]),
        # int16 ids that cannot name every row widen to int32 (not int64).
        (mg.int16, 40_000, [("int16", "int32")]),
        # int16 ids that can: int16 arithmetic, the assignments cast for DynamicPartition.
        (mg.int16, 300, [("int16", "int32")]),
        (mg.int32, 300, []),
    ],
)
def test_id_arithmetic_runs_in_int32_when_the_row_count_fits(strategy, ids_dtype, rows, casts):
    rng = np.random.default_rng(3)
    table = rng.random((rows, 2))
    root = Scope.new_root_scope()
    ids = Placeholder(root, ids_dtype, shape=[None])
    out = embedding_lookup(root, shard(table, 3, strategy), ids, strategy)
    assert _casts(root) == casts
    assert _arithmetic_dtype(root) == (
        "int16" if rows == 300 and ids_dtype is mg.int16 else "int32"
    )
    hi = min(rows, np.iinfo(ids_dtype.np_dtype).max + 1)
    value = np.concatenate([rng.integers(0, hi, 500), [0, hi - 1, hi - 2, hi - 3]])
    value = value.astype(ids_dtype.np_dtype)
    with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        assert_array_same(sess.run(out, {ids: value}), table[value.astype(np.int64)])
        with pytest.raises(InvalidArgumentError, match=msg(f"a table of] [{rows}] [rows")):
            sess.run(out, {ids: np.array([1, rows if hi == rows else -1], ids_dtype.np_dtype)})


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("total", [2**31 - 1, 2**31 + 3])
def test_row_counts_at_and_past_int32_keep_every_id(strategy, total):
    # Zero-width shards: a table of 2**31 rows and more that holds no bytes. Past int32 the
    # arithmetic stays int64; narrowed wrongly, the large ids would wrap to negative shards.
    n = 3
    root = Scope.new_root_scope()
    shards = [Placeholder(root, mg.float32, shape=[size, 0]) for size in shard_sizes(total, n)]
    ids = Placeholder(root, mg.int64, shape=[None])
    out = embedding_lookup(root, shards, ids, strategy)
    # Past int32 the one Cast is the assignments' (int64 to DynamicPartition's int32).
    assert _casts(root) == [("int64", "int32")]
    assert _arithmetic_dtype(root) == ("int32" if total < 2**31 else "int64")
    value = np.array([total - 1, 0, total - 2, 2**31 - 2, 5, total // 2], np.int64)
    feed = {ids: value, **{s: np.zeros(s.shape.dims, np.float32) for s in shards}}
    with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        assert sess.run(out, feed).shape == (6, 0)
        with pytest.raises(InvalidArgumentError, match=msg(ID_CHECK.format(total, 1, total))):
            sess.run(out, {**feed, ids: np.array([1, total], np.int64)})
