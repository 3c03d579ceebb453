"""The reductions' and nn ops' gradient rules against a live TensorFlow 2.21: `tf.gradients` and
`mg.gradients` of the same graphs (every reduction, axis form and keep_dims; ties, zeros, NaN;
axes and shapes known only at run time; MatMul and BatchMatMulV2 in every transpose case, with
batch broadcasting; the softmax family, the cross-entropies (second derivatives included),
L2Loss, BiasAdd), the ops the rules add (BiasAddGrad, Cumsum, Cumprod) against TF's raw ops,
and gradient graphs exported as GraphDefs that TF imports and runs to the same values. Runs
only where `tensorflow` is importable
(`/work/tfvenv/bin/python -m pytest tests/test_gradients_reduction_nn_tf.py`)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

import minigraph as mg  # noqa: E402
from ops import nn, reduction  # noqa: E402
from ops.math import Relu  # noqa: E402

tf1 = tf.compat.v1
RNG = np.random.default_rng(21)


def _tf_gradients(build, values, grad_y=None, order=1, feeds_extra=None):
    """tf.gradients of y = build(*placeholders) (of the values' dtypes and unknown shapes
    when `values` entries are (array, None)), weighted by grad_y; order 2 differentiates the
    sum of the first gradients weighted by fixed weights, as `_mg_gradients` does."""
    graph = tf.Graph()
    with graph.as_default():
        holders = []
        for v in values:
            array, shape = v if isinstance(v, tuple) else (v, v.shape)
            holders.append(tf1.placeholder(tf.as_dtype(array.dtype), shape))
        y = build(*holders)
        grads = tf1.gradients(y, holders, grad_ys=None if grad_y is None else tf.constant(grad_y))
        if order == 2:
            total = tf.add_n([tf.reduce_sum(g * _weights(g.shape, g.dtype)) for g in grads])
            grads = tf1.gradients(total, holders)
        with tf1.Session(graph=graph) as session:
            feed = {h: (v[0] if isinstance(v, tuple) else v) for h, v in zip(holders, values)}
            return session.run(grads, feed)


def _weights(shape, dtype):
    dims = [int(d) for d in shape]
    return np.random.default_rng(99).standard_normal(dims).astype(dtype.as_numpy_dtype)


def _mg_gradients(build, values, grad_y=None, order=1):
    root = mg.Scope.new_root_scope()
    holders = []
    for i, v in enumerate(values):
        array, shape = v if isinstance(v, tuple) else (v, v.shape)
        dims = None if shape is None else list(shape)
        holders.append(mg.Placeholder(root.with_op_name(f"x{i}"), mg.as_dtype(array.dtype), dims))
    with root.as_default():
        y = build(root, *holders)
        grads = mg.gradients(y, holders, grad_ys=grad_y)
        if order == 2:
            terms = []
            for g in grads:
                w = _weights(g.shape.dims, tf.as_dtype(g.dtype.np_dtype))
                terms.append(reduction.Sum(root, g * w, list(range(len(w.shape)))).output)
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            grads = mg.gradients(total, holders)
    with mg.Session(root) as session:
        feed = {h: (v[0] if isinstance(v, tuple) else v) for h, v in zip(holders, values)}
        return session.run(grads, feed)


def _assert_same(ours, theirs, rtol=1e-12, atol=1e-13):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        b = np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# -- reductions ------------------------------------------------------------------------------------

TF_REDUCTIONS = {
    "Sum": tf.raw_ops.Sum, "Mean": tf.raw_ops.Mean, "Max": tf.raw_ops.Max,
    "Min": tf.raw_ops.Min, "Prod": tf.raw_ops.Prod,
}  # fmt: skip


@pytest.mark.parametrize("name", list(TF_REDUCTIONS))
@pytest.mark.parametrize("axis", [0, -1, [1], [2, 0], [], [0, 1, 2]], ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reductions_match_tensorflow(name, axis, keep_dims):
    # Small integers: ties (Max/Min) and zeros (Prod) throughout.
    x = RNG.integers(-2, 3, (2, 3, 4)).astype(np.float64)
    out_shape = np.sum(x, axis=tuple(np.atleast_1d(axis).tolist()), keepdims=keep_dims).shape
    dy = RNG.uniform(-1, 1, out_shape)
    a = np.array(axis, np.int32)
    theirs = _tf_gradients(
        lambda v: TF_REDUCTIONS[name](input=v, axis=a, keep_dims=keep_dims), [x], dy
    )
    build = lambda s, v: getattr(reduction, name)(s, v, a, keep_dims=keep_dims)  # noqa: E731
    _assert_same(_mg_gradients(build, [x], dy), theirs)


@pytest.mark.parametrize("name", list(TF_REDUCTIONS))
def test_reductions_with_run_time_axes_match_tensorflow(name):
    x = RNG.integers(-2, 3, (3, 4, 2)).astype(np.float64)
    x[0] = [[1.0, np.nan], [0.0, 2.0], [2.0, 2.0], [-1.0, 0.0]]  # a NaN and ties
    for axis in ([1], [0, -1], 2, []):
        a = np.array(axis, np.int32)

        def tf_build(v, a=a):
            hidden = tf1.placeholder_with_default(a, a.shape)
            return TF_REDUCTIONS[name](input=v, axis=hidden, keep_dims=False)

        def mg_build(s, v, a=a):
            hidden = mg.Identity(s, mg.Const(s, a))
            return getattr(reduction, name)(s, v, hidden)

        theirs = _tf_gradients(tf_build, [(x, None)])
        _assert_same(_mg_gradients(mg_build, [(x, None)]), theirs)


def test_int64_run_time_axes_tensorflow_cannot_differentiate():
    # TF 2.21's reduced_shape passes int64 axes to DynamicStitch, which takes int32 only: its
    # gradient fails to build. minigraph casts them.
    graph = tf.Graph()
    with graph.as_default():
        x, axis = tf1.placeholder(tf.float64), tf1.placeholder(tf.int64)
        with pytest.raises(TypeError, match="'indices' of 'DynamicStitch' Op have types"):
            tf1.gradients(tf.raw_ops.Sum(input=x, axis=axis), x)
    value = RNG.standard_normal((2, 3))
    for name in TF_REDUCTIONS:
        theirs = _tf_gradients(
            lambda v, n=name: TF_REDUCTIONS[n](input=v, axis=np.int32(1)), [value]
        )
        ours = _mg_gradients(
            lambda s, v, n=name: getattr(reduction, n)(
                s, v, mg.Identity(s, mg.Const(s, np.int64(1)))
            ),
            [(value, None)],
        )
        _assert_same(ours, theirs)


def test_float32_reductions_match_tensorflow():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    for name in TF_REDUCTIONS:
        theirs = _tf_gradients(lambda v, n=name: TF_REDUCTIONS[n](input=v, axis=[1]), [x])
        _assert_same(
            _mg_gradients(lambda s, v, n=name: getattr(reduction, n)(s, v, [1]), [x]),
            theirs, rtol=1e-6, atol=1e-6,
        )  # fmt: skip


def test_reduction_second_derivatives_match_tensorflow():
    x = RNG.uniform(0.5, 1.5, (2, 3))
    for name in TF_REDUCTIONS:
        theirs = _tf_gradients(
            lambda v, n=name: TF_REDUCTIONS[n](input=v * v, axis=[1]), [x], order=2
        )
        ours = _mg_gradients(
            lambda s, v, n=name: getattr(reduction, n)(s, v * v, [1]), [x], order=2
        )
        _assert_same(ours, theirs)


# -- MatMul, BatchMatMulV2 -------------------------------------------------------------------------


@pytest.mark.parametrize("t_a", [False, True])
@pytest.mark.parametrize("t_b", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_matmul_matches_tensorflow(t_a, t_b, dtype):
    def value(shape):
        v = RNG.standard_normal(shape)
        return (v + 1j * RNG.standard_normal(shape) if dtype == np.complex128 else v).astype(dtype)

    a = value((3, 2) if t_a else (2, 3))
    b = value((4, 3) if t_b else (3, 4))
    dy = value((2, 4))
    theirs = _tf_gradients(
        lambda p, q: tf.raw_ops.MatMul(a=p, b=q, transpose_a=t_a, transpose_b=t_b), [a, b], dy
    )
    ours = _mg_gradients(
        lambda s, p, q: nn.MatMul(s, p, q, transpose_a=t_a, transpose_b=t_b), [a, b], dy
    )
    _assert_same(ours, theirs)
    if dtype == np.float64:
        theirs = _tf_gradients(
            lambda p, q: tf.reduce_sum(
                tf.square(tf.raw_ops.MatMul(a=p, b=q, transpose_a=t_a, transpose_b=t_b))
            ), [a, b], order=2,
        )  # fmt: skip
        ours = _mg_gradients(
            lambda s, p, q: reduction.Sum(
                s, nn.MatMul(s, p, q, transpose_a=t_a, transpose_b=t_b) ** 2, [0, 1]
            ), [a, b], order=2,
        )  # fmt: skip
        _assert_same(ours, theirs)


@pytest.mark.parametrize(
    "sx, sy",
    [((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5))],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
@pytest.mark.parametrize("known", [True, False], ids=["static", "run-time"])
def test_batch_matmul_matches_tensorflow(sx, sy, adj_x, adj_y, known):
    def value(shape, adj):
        shape = shape[:-2] + (shape[-1], shape[-2]) if adj else shape
        return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)

    x, y = value(sx, adj_x), value(sy, adj_y)
    values = [x, y] if known else [(x, [None] * x.ndim), (y, [None] * y.ndim)]
    z = np.matmul(np.conj(np.swapaxes(x, -1, -2)) if adj_x else x,
                  np.conj(np.swapaxes(y, -1, -2)) if adj_y else y)  # fmt: skip
    dz = RNG.standard_normal(z.shape) + 1j * RNG.standard_normal(z.shape)
    theirs = _tf_gradients(
        lambda p, q: tf.raw_ops.BatchMatMulV2(x=p, y=q, adj_x=adj_x, adj_y=adj_y), values, dz
    )
    ours = _mg_gradients(
        lambda s, p, q: nn.BatchMatMulV2(s, p, q, adj_x=adj_x, adj_y=adj_y), values, dz
    )
    _assert_same(ours, theirs)


# -- softmax, cross-entropies, L2Loss, BiasAdd -----------------------------------------------------


@pytest.mark.parametrize("order", [1, 2])
def test_softmax_family_matches_tensorflow(order):
    x = RNG.standard_normal((3, 4))
    for tf_op, op in ((tf.raw_ops.Softmax, nn.Softmax), (tf.raw_ops.LogSoftmax, nn.LogSoftmax)):
        theirs = _tf_gradients(lambda v, f=tf_op: tf.reduce_sum(f(logits=v) ** 2), [x], order=order)
        ours = _mg_gradients(
            lambda s, v, f=op: reduction.Sum(s, f(s, v) ** 2, [0, 1]), [x], order=order
        )
        _assert_same(ours, theirs)


@pytest.mark.parametrize("order", [1, 2])
def test_sparse_cross_entropy_matches_tensorflow(order):
    x = RNG.standard_normal((4, 3))
    labels = np.array([0, 2, 1, 2])
    theirs = _tf_gradients(
        lambda v: tf.reduce_mean(
            tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=v, labels=labels)[0]
        ), [x], order=order,
    )  # fmt: skip
    ours = _mg_gradients(
        lambda s, v: reduction.Mean(
            s, nn.SparseSoftmaxCrossEntropyWithLogits(s, v, labels).loss, [0]
        ), [x], order=order,
    )  # fmt: skip
    _assert_same(ours, theirs)


@pytest.mark.parametrize("order", [1, 2])
def test_dense_cross_entropy_matches_tensorflow(order):
    x = RNG.standard_normal((4, 3))
    p = np.exp(RNG.standard_normal((4, 3)))
    p /= p.sum(-1, keepdims=True)

    # TF's labels gradient leaves out the backprop's -grad_grad term (minigraph's includes it):
    # compared where it does not arise, the gradient with respect to the features.
    def tf_build(v, q):
        return tf.reduce_sum(tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=v, labels=q)[0])

    def mg_build(s, v, q):
        return reduction.Sum(s, nn.SoftmaxCrossEntropyWithLogits(s, v, q).loss, [0])

    theirs = _tf_gradients(tf_build, [x, p], order=order)
    ours = _mg_gradients(mg_build, [x, p], order=order)
    _assert_same(ours[:1], theirs[:1])
    if order == 1:
        _assert_same(ours, theirs)


def test_dense_cross_entropy_broadcasting_tensorflow_refuses():
    graph = tf.Graph()
    with graph.as_default():
        f, q = tf1.placeholder(tf.float64, [1, 3]), tf1.placeholder(tf.float64, [2, 3])
        loss = tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=f, labels=q)[0]
        with pytest.raises(ValueError, match="Incompatible shapes between op input and calc"):
            tf1.gradients(loss, [f, q])
    # minigraph sums the broadcast gradient back: d loss / d f = sum over the batch.
    x, p = RNG.standard_normal((1, 3)), np.full((2, 3), 1 / 3)
    dx, dp = _mg_gradients(lambda s, v, w: nn.SoftmaxCrossEntropyWithLogits(s, v, w).loss, [x, p])
    sm = np.exp(x) / np.exp(x).sum()
    np.testing.assert_allclose(dx, (sm - p).sum(0, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(dp, np.broadcast_to(-np.log(sm), (2, 3)), rtol=1e-13)


@pytest.mark.parametrize(
    "shape, fmt", [((3, 4), "NHWC"), ((2, 3, 4, 2), "NHWC"), ((2, 3, 4, 2), "NCHW")], ids=str
)
@pytest.mark.parametrize("order", [1, 2])
def test_bias_add_and_l2_loss_match_tensorflow(shape, fmt, order):
    value = RNG.standard_normal(shape)
    bias = RNG.standard_normal(shape[1] if fmt == "NCHW" else shape[-1])
    theirs = _tf_gradients(
        lambda v, b: tf.raw_ops.L2Loss(t=tf.raw_ops.BiasAdd(value=v * v, bias=b, data_format=fmt)),
        [value, bias], order=order,
    )  # fmt: skip
    ours = _mg_gradients(
        lambda s, v, b: nn.L2Loss(s, nn.BiasAdd(s, v * v, b, data_format=fmt)),
        [value, bias], order=order,
    )  # fmt: skip
    _assert_same(ours, theirs)


# -- the ops the rules add -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int8])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_bias_add_grad_op_matches_tensorflow(dtype, fmt):
    x = RNG.integers(-50, 50, (3, 4, 5)).astype(dtype) / (1 if dtype in (np.int32, np.int8) else 7)
    x = x.astype(dtype)
    theirs = tf.raw_ops.BiasAddGrad(out_backprop=x, data_format=fmt).numpy()
    root = mg.Scope.new_root_scope()
    ours = mg.Session(root).run(nn.BiasAddGrad(root, x, data_format=fmt))
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-6 if dtype != np.float16 else 1e-3)


@pytest.mark.parametrize("op", ["Cumsum", "Cumprod"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans_match_tensorflow(op, exclusive, reverse):
    x = RNG.integers(-3, 4, (3, 4, 2))
    for dtype in (np.float64, np.int32, np.complex64):
        for axis in (0, 1, -1):
            v = x.astype(dtype)
            theirs = getattr(tf.raw_ops, op)(x=v, axis=axis, exclusive=exclusive, reverse=reverse)
            root = mg.Scope.new_root_scope()
            ours = mg.Session(root).run(getattr(reduction, op)(
                root, v, np.int32(axis), exclusive=exclusive, reverse=reverse
            ))  # fmt: skip
            np.testing.assert_array_equal(ours, theirs.numpy())
    real = RNG.uniform(0.5, 2.0, (3, 4))
    theirs = _tf_gradients(lambda v: getattr(tf.raw_ops, op)(
        x=v, axis=1, exclusive=exclusive, reverse=reverse), [real])  # fmt: skip
    ours = _mg_gradients(lambda s, v: getattr(reduction, op)(
        s, v, np.int32(1), exclusive=exclusive, reverse=reverse), [real])  # fmt: skip
    _assert_same(ours, theirs)


# -- gradient graphs exported to TensorFlow --------------------------------------------------------


def _run_in_tf(graph_def, fetches, feeds):
    tf_graph_def = tf1.GraphDef.FromString(graph_def.SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf_graph_def, name="")
    with tf1.Session(graph=graph) as session:
        return session.run(fetches, feeds)


def _mlp(root, known):
    rng = np.random.default_rng(3)
    shape = [64, 128] if known else [None, None]
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, shape)
    labels = mg.Placeholder(root.with_op_name("labels"), mg.int64, [64] if known else [None])
    w1 = mg.Const(root.with_op_name("w1"), (rng.standard_normal((128, 256)) / 11).astype("f"))
    w2 = mg.Const(root.with_op_name("w2"), (rng.standard_normal((256, 10)) / 16).astype("f"))
    b1 = mg.Const(root.with_op_name("b1"), rng.standard_normal(256).astype("f"))
    h = Relu(root, nn.BiasAdd(root, nn.MatMul(root, x, w1), b1))
    logits = nn.MatMul(root, h, w2)
    loss = reduction.Mean(root, nn.SparseSoftmaxCrossEntropyWithLogits(root, logits, labels).loss,
                          [0])  # fmt: skip
    grads = mg.gradients(loss, [w1, w2, b1])
    feeds = {
        "x:0": rng.standard_normal((64, 128)).astype(np.float32),
        "labels:0": rng.integers(0, 10, 64).astype(np.int64),
    }
    return [g.name for g in grads], feeds


def _reductions(root, known):
    x = mg.Placeholder(root.with_op_name("x"), mg.float64, [3, 4, 2] if known else None)
    axis = mg.Placeholder(root.with_op_name("axis"), mg.int32, [2])
    fetches = []
    for name in TF_REDUCTIONS:
        for a in ([0, 2], axis):
            y = getattr(reduction, name)(root.with_op_name(f"{name}_{len(fetches)}"), x, a)
            fetches.append(mg.gradients(y, x)[0].name)
    ys = nn.BatchMatMulV2(root, x, mg.Placeholder(root.with_op_name("y"), mg.float64, None))
    fetches.extend(g.name for g in mg.gradients(ys, [x, root.graph.get_operation("y").outputs[0]]))
    value = RNG.integers(-2, 3, (3, 4, 2)).astype(np.float64)
    y_value = RNG.standard_normal((1, 2, 3))
    feeds = {"x:0": value, "axis:0": np.array([-1, 1], np.int32), "y:0": y_value}
    return fetches, feeds


def _nn_ops(root, known):
    x = mg.Placeholder(root.with_op_name("x"), mg.float64, [2, 3, 4] if known else None)
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, [6, 4] if known else None)
    bias = mg.Const(root.with_op_name("bias"), np.arange(3.0))
    y = nn.BiasAdd(root, x, bias, data_format="NCHW")
    flat = mg.Placeholder(root.with_op_name("flat"), mg.float64, [6, 4] if known else None)
    xent = nn.SoftmaxCrossEntropyWithLogits(root, flat, p)
    total = nn.L2Loss(root, y) + reduction.Sum(root, xent.loss, [0])
    total = total + reduction.Sum(root, nn.LogSoftmax(root, x), [0, 1, 2])
    grads = mg.gradients(total, [x, flat, p])
    second = mg.gradients(reduction.Sum(root, grads[1] * grads[1], [0, 1]), [flat])
    probabilities = np.full((6, 4), 0.25)
    feeds = {"x:0": RNG.standard_normal((2, 3, 4)), "p:0": probabilities,
             "flat:0": RNG.standard_normal((6, 4))}  # fmt: skip
    return [g.name for g in grads + second], feeds


@pytest.mark.parametrize("model", [_mlp, _reductions, _nn_ops], ids=["mlp", "reductions", "nn"])
@pytest.mark.parametrize("known", [True, False], ids=["static", "run-time"])
def test_gradient_graphs_run_in_tensorflow_with_the_same_values(model, known):
    root = mg.Scope.new_root_scope()
    fetches, feeds = model(root, known)
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == 0  # nothing only minigraph can run
    ours = mg.Session(root).run(fetches, feeds)
    theirs = _run_in_tf(graph_def, fetches, feeds)
    for name, a, b in zip(fetches, ours, theirs):
        b = np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_allclose(
            a,
            b,
            rtol=2e-5 if a.dtype == np.float32 else 1e-12,
            atol=1e-6 if a.dtype == np.float32 else 1e-13,
            err_msg=name,
        )
    types = {node.op for node in graph_def.node}
    if model is _mlp:
        assert {"BiasAddGrad", "ReluGrad", "MatMul"} <= types
