"""UnsortedSegmentSum, ScatterNd and ParallelDynamicStitch against a live TensorFlow 2.21: values
(bit for bit on the CPU, float16 and bfloat16 included), TF's error messages, TF's shape
functions over partial shapes, and GraphDef interop both ways. Runs only where `tensorflow` is
importable (the TF venv: `/work/tfvenv/bin/python -m pytest tests/test_segment_tf.py`)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import minigraph as mg  # noqa: E402
from ops.partition import ParallelDynamicStitch  # noqa: E402
from ops.segment import ScatterNd, UnsortedSegmentSum  # noqa: E402

tf1 = tf.compat.v1
pytestmark = pytest.mark.usefixtures("cpu_only")  # TF's CPU kernels are the reference

SEGMENT_TYPES = ["bfloat16", "float16", "float32", "float64", "complex64", "complex128", "int8",
                 "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]  # fmt: skip


def ours(build, *values):
    scope = mg.Scope.new_root_scope()
    holders = [mg.Placeholder(scope, mg.as_dtype(np.asarray(v).dtype)) for v in values]
    out = build(scope, *holders)
    return mg.Session(scope).run(out, dict(zip(holders, values)))


def tf_error(fn) -> str:
    try:
        fn()
    except tf.errors.OpError as e:
        return e.message.split(" [Op:")[0].split("}} ")[-1]
    raise AssertionError("TF raised nothing")


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), (a, b)


@st.composite
def segment_case(draw):
    dtype = np.dtype(mg.as_dtype(draw(st.sampled_from(SEGMENT_TYPES))).np_dtype)
    ids_shape = tuple(draw(st.lists(st.integers(0, 5), max_size=2)))
    row = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 9999)))
    ids = rng.integers(-1, n, size=ids_shape).astype(draw(st.sampled_from([np.int32, np.int64])))
    values = rng.normal(size=ids_shape + row) * 300
    if dtype.kind == "c":
        values = values + 1j * rng.normal(size=values.shape)
    if dtype.kind in "iu":
        values = np.round(values) % 256 if dtype.kind == "u" else np.round(values)
    return values.astype(dtype), ids, n


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=segment_case())
def test_unsorted_segment_sum_is_bit_identical_to_tf(case):
    data, ids, n = case
    want = tf.math.unsorted_segment_sum(data, ids, n).numpy()
    got = ours(lambda s, d, i: UnsortedSegmentSum(s, d, i, n), data, ids)
    same_bits(got, want)


def test_long_segments_of_float16_and_bfloat16_round_at_every_step_as_tf():
    rng = np.random.default_rng(5)
    for dtype in (np.float16, mg.bfloat16.np_dtype, np.float32):
        data = (rng.random((4000, 2)) * 10).astype(dtype)
        for ids in (np.zeros(4000, np.int32), rng.integers(0, 3, 4000).astype(np.int32),
                    rng.integers(0, 900, 4000).astype(np.int32)):  # fmt: skip
            want = tf.math.unsorted_segment_sum(data, ids, 901).numpy()
            same_bits(ours(lambda s, d, i: UnsortedSegmentSum(s, d, i, 901), data, ids), want)


@st.composite
def scatter_case(draw):
    dtype = draw(st.sampled_from(SEGMENT_TYPES + ["bool", "string"]))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    depth = draw(st.integers(1, len(shape)))
    outer = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    rng = np.random.default_rng(draw(st.integers(0, 9999)))
    indices = np.stack([rng.integers(0, d, size=outer) for d in shape[:depth]], -1)
    update_shape = outer + shape[depth:]
    if dtype == "string":
        flat = np.array([f"u{v}".encode() for v in rng.integers(0, 9, int(np.prod(update_shape)))],
                        dtype=object)  # fmt: skip
        updates = flat.reshape(update_shape)
    elif dtype == "bool":
        updates = rng.integers(0, 2, size=update_shape).astype(bool)
    else:
        np_dtype = np.dtype(mg.as_dtype(dtype).np_dtype)
        values = rng.normal(size=update_shape) * 100
        if np_dtype.kind in "iu":
            values = np.abs(np.round(values))
        updates = values.astype(np_dtype)
    return indices.astype(draw(st.sampled_from([np.int32, np.int64]))), updates, shape


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scatter_case())
def test_scatter_nd_is_bit_identical_to_tf(case):
    indices, updates, shape = case
    want = tf.scatter_nd(indices, updates, np.array(shape, indices.dtype)).numpy()
    got = ours(lambda s, i, u: ScatterNd(s, i, u, np.array(shape, indices.dtype)), indices,
               updates)  # fmt: skip
    if updates.dtype == object:
        assert got.tolist() == want.tolist()
    else:
        same_bits(got, want)


ERROR_CASES = [
    ("uss", ([1.0, 2, 3, 4], [0, 5, 2, 0], 3)),
    ("uss", ([[1.0, 2], [3, 4]], [[0, 7], [1, 1]], 3)),
    ("uss", ([1.0, 2, 3, 4], [0, 1], 3)),
    ("uss", ([1.0, 2, 3, 4], [0, 1, 1, 1], -1)),
    ("uss", ([1.0, 2, 3, 4], [0, 1, 1, 1], [3])),
    ("uss", ([1.0, 2, 3, 4], [0, 1, 1, 1], 0)),
    ("sn", ([[4], [9], [1], [7]], [9, 10, 11, 12], [8])),
    ("sn", ([[4], [-1], [1], [7]], [9, 10, 11, 12], [8])),
    ("sn", ([[[4, 1]], [[9, 0]]], [[9], [10]], [8, 2])),
    ("sn", ([[1]], [9], [-8])),
    ("sn", ([[1]], [[9, 9]], [3])),
    ("sn", ([[1], [2]], [9, 1, 1], [3])),
    ("sn", ([[1], [2]], [[9, 1, 1], [1, 1, 1]], [3, 4])),
    ("sn", ([1], 9, [3])),
    ("sn", (1, [9], [3])),
    ("sn", ([[1]], [9], [[3]])),
    ("pds", ([[0, -1]], [[1.0, 2]])),
    ("pds", ([[0, 1]], [[1.0, 2, 3]])),
    ("pds", ([[0, 1], [2]], [[[1.0, 2], [3, 4]], [[5.0, 6, 7]]])),
]


@pytest.mark.parametrize("op, args", ERROR_CASES)
def test_run_time_errors_carry_tfs_messages(op, args):
    def tf_run():
        if op == "uss":
            return tf.raw_ops.UnsortedSegmentSum(data=args[0], segment_ids=args[1],
                                                 num_segments=args[2])  # fmt: skip
        if op == "sn":
            return tf.raw_ops.ScatterNd(indices=args[0], updates=args[1], shape=args[2])
        return tf.raw_ops.ParallelDynamicStitch(indices=args[0], data=args[1])

    want = tf_error(tf_run)
    scope = mg.Scope.new_root_scope()
    if op == "pds":
        i = [mg.Placeholder(scope, mg.int32) for _ in args[0]]
        d = [mg.Placeholder(scope, mg.float32) for _ in args[1]]
        out = ParallelDynamicStitch(scope, i, d)
        feeds = dict(zip(i + d, list(args[0]) + list(args[1])))
    else:
        types = (mg.float32, mg.int32, mg.int32) if op == "uss" else (mg.int32,) * 3
        holders = [mg.Placeholder(scope, t) for t in types]
        out = (UnsortedSegmentSum if op == "uss" else ScatterNd)(scope, *holders)
        feeds = dict(zip(holders, args))
    with pytest.raises(mg.InvalidArgumentError) as info:
        mg.Session(scope).run(out, feeds)
    assert want in info.value.message, (want, info.value.message)


SHAPE_CASES = [
    ("uss", ([None, 3, 4], [5, None], 7)),
    ("uss", ([None, 3, 4], [5, None], None)),
    ("uss", (None, [5, None], 7)),
    ("uss", ([None, 3, 4], None, 7)),
    ("uss", ([6, 3, 4], [6], 7)),
    ("sn", ([None, 2], [None, 5], [3, 4, 5])),
    ("sn", ([None, 2], [None, 5], ("fed", [3]))),
    ("sn", ([None, 2], [None, 5], ("fed", [None]))),
    ("sn", (None, [None, 5], [3, 4, 5])),
    ("sn", ([7, None], [7, 5], [3, 4, 5])),
    ("pds", ([[None], [2]], [[None, 3], [2, 3]])),
    ("pds", ([None, [2]], [None, [2, 3]])),
]


@pytest.mark.parametrize("op, args", SHAPE_CASES)
def test_static_shapes_are_tfs(op, args):
    def build(framework, scope):
        def holder(dtype, shape):
            if framework == "tf":
                return tf1.placeholder(dtype, shape)
            return mg.Placeholder(scope, {tf.float32: mg.float32, tf.int32: mg.int32}[dtype],
                                  shape=shape)  # fmt: skip

        if op == "uss":
            data, ids, n = holder(tf.float32, args[0]), holder(tf.int32, args[1]), args[2]
            n = holder(tf.int32, []) if n is None else np.int32(n)
            if framework == "tf":
                return tf.raw_ops.UnsortedSegmentSum(data=data, segment_ids=ids, num_segments=n)
            return UnsortedSegmentSum(scope, data, ids, n)
        if op == "sn":
            i, u = holder(tf.int32, args[0]), holder(tf.float32, args[1])
            shape = args[2]
            shape = holder(tf.int32, shape[1]) if isinstance(shape, tuple) else np.int32(shape)
            if framework == "tf":
                return tf.raw_ops.ScatterNd(indices=i, updates=u, shape=shape)
            return ScatterNd(scope, i, u, shape)
        i = [holder(tf.int32, s) for s in args[0]]
        d = [holder(tf.float32, s) for s in args[1]]
        if framework == "tf":
            return tf.raw_ops.ParallelDynamicStitch(indices=i, data=d)
        return ParallelDynamicStitch(scope, i, d)

    graph = tf.Graph()
    with graph.as_default():
        theirs = build("tf", None).shape
    mine = build("mg", mg.Scope.new_root_scope()).shape
    expected = None if theirs.rank is None else theirs.as_list()
    assert mine == mg.TensorShape(expected), (mine, theirs)


def test_our_graphs_run_in_tensorflow_with_the_same_results():
    scope = mg.Scope.new_root_scope()
    data = mg.Placeholder(scope.with_op_name("data"), mg.float32, shape=[None, 3])
    ids = mg.Placeholder(scope.with_op_name("ids"), mg.int64, shape=[None])
    fetches = [
        UnsortedSegmentSum(scope.with_op_name("sums"), data, ids, np.int64(5)),
        UnsortedSegmentSum(
            scope.with_op_name("bf16"),
            np.arange(6, dtype=mg.bfloat16.np_dtype),
            [1, 1, -1, 0, 2, 1],
            4,
        ),  # fmt: skip
        ScatterNd(
            scope.with_op_name("scattered"),
            [[0, 1], [2, 0], [0, 1]],
            np.array([1.5, 2.0, 3.0], np.float32),
            [3, 2],
        ),  # fmt: skip
        ScatterNd(scope.with_op_name("words"), [[1], [1]], np.array([b"a", b"b"], object), [2]),
        ScatterNd(
            scope.with_op_name("ignored"), [[1], [9]], [5, 6], [3], bad_indices_policy="IGNORE"
        ),  # fmt: skip
        ParallelDynamicStitch(
            scope.with_op_name("stitched"), [[0, 2], [1]], [[[1.0], [2.0]], [[3.0]]]
        ),  # fmt: skip
    ]
    names = [f.name for f in fetches]
    feeds = {"data:0": np.arange(12, dtype=np.float32).reshape(4, 3),
             "ids:0": np.array([4, -1, 0, 4], np.int64)}  # fmt: skip
    mine = mg.Session(scope).run(names, feeds)
    graph_def = tf1.GraphDef.FromString(scope.graph.as_graph_def().SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
    with tf1.Session(graph=graph) as session:
        theirs = session.run(names, feeds)
    for name, a, b in zip(names, mine, theirs):
        b = np.asarray(b)
        if a.dtype == object:
            assert a.tolist() == b.tolist(), name
        else:
            same_bits(a, b)


def test_tensorflows_graphs_import_and_run_here():
    graph = tf.Graph()
    with graph.as_default():
        data = tf1.placeholder(tf.float32, [None, 2], name="data")
        ids = tf1.placeholder(tf.int32, [None], name="ids")
        tf.math.unsorted_segment_sum(data, ids, 4, name="sums")
        tf.scatter_nd(tf.constant([[1], [1], [3]]), tf.constant([1.0, 2.0, 4.0]), [5], name="sn")
        table = [tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2) + 10 * k)
                 for k in range(2)]  # fmt: skip
        tf1.nn.embedding_lookup(table, ids, name="rows")  # ParallelDynamicStitch inside
    feeds = {"data:0": np.arange(10, dtype=np.float32).reshape(5, 2),
             "ids:0": np.array([3, 0, 3, 1, 2], np.int32)}  # fmt: skip
    names = ["sums:0", "sn:0", "rows:0"]
    with tf1.Session(graph=graph) as session:
        theirs = session.run(names, feeds)
    graph_def = graph.as_graph_def()
    assert "ParallelDynamicStitch" in {n.op for n in graph_def.node}
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def.SerializeToString(), name="")
    mine = mg.Session(scope).run(names, feeds)
    for a, b in zip(mine, theirs):
        same_bits(a, np.asarray(b))
