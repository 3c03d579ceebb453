"""The reduction and nn case tables (tests/test_reduction_ops.py, tests/test_nn_ops.py) run
against TensorFlow itself: every expected value is TF's CPU result, every run-time error
message is TF's, and every construction-time error is one TF raises too (at graph
construction, or, where minigraph deliberately fails earlier, when its kernel runs). Random
inputs then compare minigraph with TF op by op. Runs only where `tensorflow` is importable
(`/work/tfvenv/bin/python -m pytest tests/test_reduction_nn_tf.py`)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

import test_nn_ops as nn_cases  # noqa: E402
import test_reduction_ops as red_cases  # noqa: E402
from _reduction_nn_helpers import (  # noqa: E402
    BF16,
    TF_INPUTS,
    Close,
    assert_close,
    assert_same,
    kernel_dtypes,
    run_case,
)

import minigraph as mg  # noqa: E402

tf1 = tf.compat.v1

# Construction errors minigraph raises where TF's shape function lets the node through and
# its kernel always refuses it: TF's run-time message for each.
EARLIER_THAN_TF = {
    "axis twice": r"Axes contains duplicate dimension: 0",
    "axis twice negative": r"Axes contains duplicate dimension: 1",
    "argmax of a scalar": r"Expected dimension in the range \[0, 0\), but got 0",
    "argmax of a vector, dim 5": r"Expected dimension in the range \[-1, 1\), but got 5",
    "argmax empty dim": r"Reduction axis 1 is empty in shape \[2,0\]",
    "argmin empty vector": r"Reduction axis -1 is empty in shape \[0\]",
    "sparse labels out of range": r"Received a label value of 5",
    "sparse no class": r"Must have at least one class",
}


def _tf_attrs(attrs: dict) -> dict:
    return {k: tf.as_dtype(v.name) if isinstance(v, mg.DType) else v for k, v in attrs.items()}


def tf_eager(case) -> object:
    with tf.device("/cpu:0"):
        fn = getattr(tf.raw_ops, case.op)
        out = fn(**dict(zip(TF_INPUTS[case.op], case.inputs)), **_tf_attrs(case.attrs))
    if isinstance(out, (list, tuple)):
        return tuple(o.numpy() for o in out)
    return np.asarray(out.numpy())


def tf_message(error: Exception) -> str:
    """TF's message without its `{{function_node ...}}` prefix and ` [Op:...]` suffix."""
    text = getattr(error, "message", str(error))
    text = re.sub(r"^\{\{function_node [^}]*\}\} ", "", text)
    return re.sub(r" \[Op:\w+\].*$", "", text, flags=re.S)


def tf_graph_error(case) -> str | None:
    """TF's graph-construction error for the case on constant inputs, or None if it builds."""
    graph = tf.Graph()
    try:
        with graph.as_default():
            inputs = [tf.constant(v) for v in case.inputs]
            getattr(tf.raw_ops, case.op)(
                **dict(zip(TF_INPUTS[case.op], inputs)), **_tf_attrs(case.attrs)
            )
    except (ValueError, TypeError, tf.errors.OpError) as e:
        return str(e)
    return None


def _value_cases():
    cases = red_cases.ALL_CASES + nn_cases.VALUE_CASES
    return [pytest.param(c, id=c.id) for c in cases]


@pytest.mark.parametrize("case", _value_cases())
def test_expected_values_are_tf_values(case):
    got = tf_eager(case)
    want = case.expected
    if isinstance(want, Close):
        assert_close(got if isinstance(got, tuple) else np.asarray(got), want.value, want.rtol)
        return
    if isinstance(want, tuple):
        assert_same(tuple(np.asarray(g) for g in got), want)
    else:
        assert_same(np.asarray(got), want)


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.id) for c in red_cases.RUN_TIME_ERRORS + nn_cases.RUN_TIME_ERRORS],
)
def test_run_time_messages_are_tf_messages(case):
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        tf_eager(case)
    assert re.search(case.expected.pattern, tf_message(info.value)), tf_message(info.value)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id)
        for c in red_cases.CONSTRUCTION_ERRORS + nn_cases.CONSTRUCTION_ERRORS
    ],
)
def test_construction_errors_are_tf_errors(case):
    message = tf_graph_error(case)
    if case.id in EARLIER_THAN_TF:
        assert message is None, message  # TF builds the node ...
        with pytest.raises(tf.errors.InvalidArgumentError) as info:  # ... and cannot run it
            tf_eager(case)
        assert re.search(EARLIER_THAN_TF[case.id], tf_message(info.value))
        return
    assert message is not None, "TF builds this node"
    if "allows only" in case.expected.pattern or "must be bool" in case.expected.pattern:
        return  # a dtype TF's OpDef refuses: TF's own wording
    if "output_type" in case.expected.pattern:
        return
    assert re.search(case.expected.pattern.lstrip("^").split(" for 'node'")[0], message), message


# -- shapes: minigraph's shape functions against TF's over partial shapes ---------------------


def _tf_shape(build) -> list | None:
    graph = tf.Graph()
    with graph.as_default():
        out = build()
    shape = out.shape
    return None if shape.rank is None else shape.as_list()


@pytest.mark.parametrize("shape, axis, keep, want", red_cases.REDUCTION_SHAPES)
def test_reduction_shapes_are_tf_shapes(shape, axis, keep, want):
    def build():
        x = tf1.placeholder(tf.float32, shape)
        if isinstance(axis, tuple):
            axis_t = tf1.placeholder(tf.int32, axis[1])
        else:
            axis_t = tf.constant(np.array(axis, np.int32))
        return tf.raw_ops.Sum(input=x, axis=axis_t, keep_dims=keep)

    assert _tf_shape(build) == want


@pytest.mark.parametrize("shape, dim, want", red_cases.ARG_SHAPES)
def test_arg_shapes_are_tf_shapes(shape, dim, want):
    def build():
        x = tf1.placeholder(tf.float32, shape)
        d = tf1.placeholder(tf.int32, []) if dim == red_cases.UNKNOWN else dim
        return tf.raw_ops.ArgMax(input=x, dimension=d)

    assert _tf_shape(build) == want


@pytest.mark.parametrize("case", nn_cases.SHAPE_CASES, ids=lambda c: c[0])
def test_nn_shapes_are_tf_shapes(case):
    _, op, shapes, attrs, want = case
    graph = tf.Graph()
    with graph.as_default():
        holders = [tf1.placeholder(tf.as_dtype(dtype), shape) for shape, dtype in shapes]
        out = getattr(tf.raw_ops, op)(**dict(zip(TF_INPUTS[op], holders)), **attrs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    got = [None if o.shape.rank is None else o.shape.as_list() for o in outs]
    assert got == want


# -- random inputs, minigraph against TF ------------------------------------------------------


def _random(dtype: np.dtype, shape: tuple, rng: np.random.Generator, special: bool) -> np.ndarray:
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    values = rng.standard_normal(shape) * 3
    if dtype.kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    values = values.astype(dtype)
    if special and values.size and (dtype.kind == "f" or dtype == BF16):
        flat = values.reshape(-1)
        picks = rng.integers(0, flat.size, max(1, flat.size // 5)) if flat.size else []
        for i, p in enumerate(picks):
            flat[p] = (np.nan, np.inf, -np.inf)[i % 3]
    return values


REDUCTION_DTYPES = {
    op: [d.np_dtype for d in kernel_dtypes(op)]
    for op in ("Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin")
}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod", "All", "Any"])
def test_random_reductions_against_tf(op, seed):
    rng = np.random.default_rng(seed)
    dtypes = [np.dtype(bool)] if op in ("All", "Any") else REDUCTION_DTYPES[op]
    for dtype in dtypes:
        rank = int(rng.integers(0, 4))
        shape = tuple(int(d) for d in rng.integers(0, 5, rank))
        x = _random(dtype, shape, rng, special=seed % 2 == 1)
        k = int(rng.integers(0, rank + 1))
        axes = [int(v) for v in rng.permutation(rank)[:k]]
        axes = [v - rank if rng.random() < 0.5 else v for v in axes]
        case = red_cases.Case("r", op, (x, np.array(axes, np.int32)),
                              {"keep_dims": bool(rng.random() < 0.5)})  # fmt: skip
        want = tf_eager(case)
        for fed in (False, True):
            got = run_case(case, fed)
            _compare(got, want, dtype, op)


def _compare(got, want, dtype, op):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    if dtype.kind in "iub" or op in ("Max", "Min", "ArgMax", "ArgMin"):
        np.testing.assert_array_equal(got, want)  # exact: integers, comparisons
        return
    g, w = got.astype(np.complex128), want.astype(np.complex128)
    rtol = {np.dtype(np.float16): 2e-2, BF16: 4e-2}.get(dtype, 1e-5)
    if op == "Prod" and dtype in (np.float16, BF16):
        rtol = 0.1
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_random_arg_reductions_against_tf(op, seed):
    # Ties, NaN, infinities and the extreme finite values, where TF's rule is subtle.
    rng = np.random.default_rng(seed)
    for dtype in REDUCTION_DTYPES[op]:
        rank = int(rng.integers(1, 4))
        shape = tuple(int(d) for d in rng.integers(1, 6, rank))
        if dtype.kind == "f" or dtype == BF16:
            info = np.finfo(np.float32) if dtype == BF16 else np.finfo(dtype)
            pool = np.array([np.nan, np.inf, -np.inf, 1.0, -1.0, 0.0], np.float64)
            if dtype != BF16:
                pool = np.append(pool, [info.max, info.min])
            x = rng.choice(pool, shape).astype(dtype)
        else:
            x = rng.integers(0, 3, shape).astype(dtype)
        dim = int(rng.integers(-rank, rank))
        case = red_cases.Case("r", op, (x, np.array(dim, np.int32)))
        want = tf_eager(case)
        for fed in (False, True):
            np.testing.assert_array_equal(run_case(case, fed), want)


# -- graph files, both ways --------------------------------------------------------------------


def _tf_graph():
    """A TF graph with every op of both modules, from TF's own Python API."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 4], name="x")
        labels = tf1.placeholder(tf.int64, [None], name="labels")
        w = tf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w")
        logits = tf.nn.bias_add(tf.matmul(x, w), tf.constant([0.1, 0.2, 0.3]), name="logits")
        batch = tf.raw_ops.BatchMatMulV2(x=tf.reshape(x, [-1, 2, 2]), y=tf.ones([2, 2]),
                                         adj_y=True, name="batch")  # fmt: skip
        outs = [
            tf.reduce_sum(x, 1, name="sum"), tf.reduce_mean(x, [0, 1], name="mean"),
            tf.reduce_max(x, -1, keepdims=True, name="max"), tf.reduce_min(x, 0, name="min"),
            tf.reduce_prod(x, 1, name="prod"), tf.reduce_all(x > 0, 1, name="all"),
            tf.reduce_any(x > 0, 1, name="any"), tf.argmax(x, 1, name="argmax"),
            tf.argmin(x, 0, output_type=tf.int32, name="argmin"), batch,
            tf.nn.softmax(logits, name="softmax"), tf.nn.log_softmax(logits, name="logsoftmax"),
            tf.nn.l2_loss(x, name="l2"),
            tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels,
                                                           name="sparse")[0],
            tf.raw_ops.SoftmaxCrossEntropyWithLogits(
                features=logits, labels=tf.nn.softmax(x[:, :3]), name="dense")[1],
        ]  # fmt: skip
    return graph, [o.name for o in outs]


FEEDS = {
    "x:0": np.array([[0.5, -1.0, 2.0, 0.0], [3.0, 1.5, -0.5, 1.0]], np.float32),
    "labels:0": np.array([2, 0], np.int64),
}


def _close(a_values, b_values):
    for a_v, b_v in zip(a_values, b_values):
        a_v, b_v = np.asarray(a_v), np.asarray(b_v)
        assert a_v.dtype == b_v.dtype and a_v.shape == b_v.shape
        np.testing.assert_allclose(a_v.astype(np.float64), b_v.astype(np.float64), rtol=1e-5)


def test_tf_written_graph_imports_and_runs():
    graph, names = _tf_graph()
    with tf1.Session(graph=graph) as sess:
        want = sess.run(names, FEEDS)
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph.as_graph_def().SerializeToString(), name="")
    got = mg.Session(scope).run(names, FEEDS)
    _close(got, want)


def test_minigraph_written_graph_imports_and_runs_in_tf():
    from ops import nn, reduction  # noqa: PLC0415

    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, shape=[None, 4])
    labels = mg.Placeholder(scope.with_op_name("labels"), mg.int64, shape=[None])
    w = mg.Const(scope, np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    logits = nn.BiasAdd(scope, nn.MatMul(scope, x, w), [0.1, 0.2, 0.3])
    outs = [
        reduction.Sum(scope, x, 1), reduction.Mean(scope, x, [0, 1]),
        reduction.Max(scope, x, -1, keep_dims=True), reduction.ArgMax(scope, x, 1),
        reduction.ArgMin(scope, x, 0, output_type=mg.int32), reduction.Prod(scope, x, []),
        nn.Softmax(scope, logits), nn.LogSoftmax(scope, logits), nn.L2Loss(scope, x),
        nn.SparseSoftmaxCrossEntropyWithLogits(scope, logits, labels).loss,
        nn.BatchMatMulV2(scope, x, w, adj_x=False),
    ]  # fmt: skip
    names = [o.name for o in outs]
    want = mg.Session(scope).run(names, FEEDS)
    graph_def = tf1.GraphDef.FromString(scope.graph.as_graph_def().SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
    with tf1.Session(graph=graph) as sess:
        got = sess.run(names, FEEDS)
    _close(got, want)
