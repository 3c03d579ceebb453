"""The nn ops' gradient rules (ops/nn.py): MatMul (every transpose case), BatchMatMulV2 (adjoints,
batch broadcasting, static and run-time), Softmax, LogSoftmax, the two cross-entropies (labels,
broadcasting, second derivatives), L2Loss, BiasAdd and the BiasAddGrad op its rule builds
(TF's OpDef, kernels, data formats, its own gradient); against central differences, numpy
references and the structure of TF's gradient graphs."""

from __future__ import annotations

import numpy as np
import pytest
from _gradients_reduction_nn_helpers import Forget, forget, gradient_norm, run_gradients, softmax
from _reduction_nn_helpers import dirty_ctx, kernel_dtypes

import minigraph as mg
import minigraph.testing
from minigraph import KernelContext
from minigraph.testing import SimulatedGpuDevice, assert_gradients_close
from ops.math import Relu, Square
from ops.nn import (
    BatchMatMulV2,
    BiasAdd,
    BiasAddGrad,
    L2Loss,
    LogSoftmax,
    MatMul,
    Softmax,
    SoftmaxCrossEntropyWithLogits,
    SparseSoftmaxCrossEntropyWithLogits,
)
from ops.reduction import Mean, Sum

TRANSPOSES = [(False, False), (False, True), (True, False), (True, True)]


def _r(*shape, seed=0, complex_=False):
    rng = np.random.default_rng(seed + sum(shape))
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex_ else x


def _probabilities(*shape, seed=0):
    return softmax(_r(*shape, seed=seed + 11))


def _operands(t_a, t_b, m=2, k=3, n=4, **kw):
    a = _r(*((k, m) if t_a else (m, k)), seed=1, **kw)
    b = _r(*((n, k) if t_b else (k, n)), seed=2, **kw)
    return a, b


# -- MatMul ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("t_a, t_b", TRANSPOSES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_matmul(t_a, t_b, dtype):
    a, b = _operands(t_a, t_b, complex_=np.dtype(dtype).kind == "c")
    f = lambda s, p, q: MatMul(s, p, q, transpose_a=t_a, transpose_b=t_b)  # noqa: E731
    assert_gradients_close(f, [a.astype(dtype), b.astype(dtype)])


@pytest.mark.parametrize("t_a, t_b", TRANSPOSES)
def test_matmul_gradient_graph_is_tensorflows(t_a, t_b):
    # TF's _MatMulGrad: one MatMul per input, transposes by the forward case, grad_a/grad_b
    # set; complex inputs conjugated first.
    for dtype, conj in ((mg.float32, 0), (mg.complex64, 2)):
        root = mg.Scope.new_root_scope()
        a = mg.Placeholder(root.with_op_name("a"), dtype, [3, 3])
        b = mg.Placeholder(root.with_op_name("b"), dtype, [3, 3])
        y = MatMul(root.with_op_name("mm"), a, b, transpose_a=t_a, transpose_b=t_b)
        da, db = mg.gradients(y, [a, b], grad_ys=mg.Placeholder(root, dtype, [3, 3]))
        want = {(False, False): ((False, True), (True, False)),
                (False, True): ((False, False), (True, False)),
                (True, False): ((False, True), (False, False)),
                (True, True): ((True, True), (True, True))}[(t_a, t_b)]  # fmt: skip
        for g, (ta, tb), hint in ((da, want[0], "grad_a"), (db, want[1], "grad_b")):
            assert g.op.type == "MatMul" and g.op.name.startswith("gradients/mm_grad/MatMul")
            assert (g.op.get_attr("transpose_a"), g.op.get_attr("transpose_b")) == (ta, tb)
            assert g.op.get_attr(hint)
        types = [op.type for op in root.graph.operations if op.name.startswith("gradients/mm")]
        assert types.count("Conj") == conj


def test_matmul_of_empty_matrices():
    a, b = np.zeros((2, 0)), np.zeros((0, 3))
    da, db = run_gradients(lambda s, p, q: MatMul(s, p, q), [a, b])
    assert da.shape == (2, 0) and db.shape == (0, 3)
    a, b = np.ones((0, 2)), np.ones((2, 3))
    da, db = run_gradients(lambda s, p, q: MatMul(s, p, q), [a, b])
    np.testing.assert_array_equal(db, np.zeros((2, 3)))


def test_matmul_unknown_shapes():
    a, b = _operands(False, True)
    assert_gradients_close(
        lambda s, p, q: MatMul(s, forget(s, p, "dims"), forget(s, q, "dims"), transpose_b=True),
        [a, b],
    )


@pytest.mark.parametrize("t_a, t_b", TRANSPOSES)
def test_matmul_second_derivatives(t_a, t_b):
    a, b = _operands(t_a, t_b)

    def f(s, p, q):
        y = MatMul(s, p, q, transpose_a=t_a, transpose_b=t_b)
        return gradient_norm(s, Sum(s, Square(s, y), [0, 1]), [p, q])

    assert_gradients_close(f, [a, b])

    def cross(s, p, q):  # d/dq of a function of dL/dp: the mixed second derivatives
        y = MatMul(s, p, q, transpose_a=t_a, transpose_b=t_b)
        return gradient_norm(s, Sum(s, Square(s, y), [0, 1]), [p])

    assert_gradients_close(cross, [a, b])


# -- BatchMatMulV2 ---------------------------------------------------------------------------------

BATCH_SHAPES = [
    ((2, 3, 4), (2, 4, 5)),  # equal batches
    ((2, 3, 4), (4, 5)),  # y has none
    ((3, 4), (2, 2, 4, 5)),  # x has none
    ((2, 1, 3, 4), (5, 4, 2)),  # both broadcast
    ((1, 3, 4), (2, 4, 5)),  # a batch dim of 1
    ((3, 4), (4, 5)),  # plain matrices
]


def _adjoined(shape, adj):
    return shape[:-2] + (shape[-1], shape[-2]) if adj else shape


@pytest.mark.parametrize("sx, sy", BATCH_SHAPES, ids=str)
@pytest.mark.parametrize("adj_x, adj_y", TRANSPOSES)
def test_batch_matmul(sx, sy, adj_x, adj_y):
    x = _r(*_adjoined(sx, adj_x), seed=3, complex_=True)
    y = _r(*_adjoined(sy, adj_y), seed=4, complex_=True)
    f = lambda s, p, q: BatchMatMulV2(s, p, q, adj_x=adj_x, adj_y=adj_y)  # noqa: E731
    assert_gradients_close(f, [x, y])
    assert_gradients_close(f, [x.real.astype(np.float32), y.real.astype(np.float32)])


@pytest.mark.parametrize("sx, sy", BATCH_SHAPES, ids=str)
@pytest.mark.parametrize("how", ["dims", "rank"])
def test_batch_matmul_broadcast_known_only_at_run_time(sx, sy, how):
    x, y = _r(*sx, seed=5), _r(*sy, seed=6)
    f = lambda s, p, q: BatchMatMulV2(s, forget(s, p, how), forget(s, q, how))  # noqa: E731
    assert_gradients_close(f, [x, y])


def test_batch_matmul_reduces_statically_when_it_can():
    def types(sx, sy, shape_of=lambda s, t: t):
        root = mg.Scope.new_root_scope()
        x = mg.Placeholder(root.with_op_name("x"), mg.float32, sx)
        y = mg.Placeholder(root.with_op_name("y"), mg.float32, sy)
        mg.gradients(BatchMatMulV2(root, x, y), [x, y])
        return [op.type for op in root.graph.operations if op.name.startswith("gradients/")]

    assert "Sum" not in types([2, 3, 4], [2, 4, 5])
    static = types([2, 1, 3, 4], [5, 4, 2])
    assert "Sum" in static and "Shape" not in static and "BroadcastGradientArgs" not in static
    dynamic = types([None, 3, 4], [None, 4, 5])
    assert {"Shape", "BroadcastGradientArgs", "Sum", "Reshape"} <= set(dynamic)


def test_batch_matmul_second_derivatives():
    x, y = _r(2, 1, 2, 3, seed=7), _r(3, 3, 2, seed=8)

    def f(s, p, q):
        return gradient_norm(s, Sum(s, Square(s, BatchMatMulV2(s, p, q)), [0, 1, 2, 3]), [p, q])

    assert_gradients_close(f, [x, y])


# -- Softmax, LogSoftmax ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", [Softmax, LogSoftmax], ids=["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 2, 3), (3, 1)], ids=str)
def test_softmax_family(op, shape):
    assert_gradients_close(lambda s, v: op(s, v), [_r(*shape, seed=9)])
    assert_gradients_close(lambda s, v: op(s, v), [_r(*shape, seed=9).astype(np.float32)])
    assert_gradients_close(lambda s, v: op(s, forget(s, v, "rank")), [_r(*shape, seed=9)])


@pytest.mark.parametrize("op", [Softmax, LogSoftmax], ids=["Softmax", "LogSoftmax"])
def test_softmax_family_second_derivatives(op):
    def f(s, v):
        return gradient_norm(s, Sum(s, Square(s, op(s, v)), [0, 1]), [v])

    assert_gradients_close(f, [_r(2, 3, seed=10)])


def test_softmax_gradient_is_zero_along_a_shift():
    # softmax(x + c) = softmax(x): the gradient of anything through it sums to 0 per row.
    (got,) = run_gradients(
        lambda s, v: Sum(s, Square(s, Softmax(s, v)), [0, 1]), [_r(3, 5, seed=11)]
    )
    np.testing.assert_allclose(got.sum(axis=-1), 0, atol=1e-15)


# -- the cross-entropies ---------------------------------------------------------------------------


@pytest.mark.parametrize("label_dtype", [np.int64, np.int32])
def test_sparse_cross_entropy(label_dtype):
    labels = np.array([0, 3, 1, 3], label_dtype)
    x = _r(4, 4, seed=12)
    assert_gradients_close(lambda s, v: SparseSoftmaxCrossEntropyWithLogits(s, v, labels).loss, [x])
    # The backprop output's own gradient (softmax's Jacobian): the second-order term.
    assert_gradients_close(
        lambda s, v: SparseSoftmaxCrossEntropyWithLogits(s, v, labels).backprop, [x]
    )
    assert_gradients_close(
        lambda s, v: SparseSoftmaxCrossEntropyWithLogits(s, v, labels).loss,
        [x.astype(np.float32)],
    )
    # Labels get none (integers).
    root = mg.Scope.new_root_scope()
    logits = mg.Placeholder(root, mg.float32, [2, 3])
    lab = mg.Placeholder(root, mg.as_dtype(label_dtype), [2])
    assert mg.gradients(SparseSoftmaxCrossEntropyWithLogits(root, logits, lab).loss, lab) == [None]


def test_sparse_cross_entropy_values():
    # grad_loss[:, None] * (softmax - one_hot): the reference written out.
    x, labels, g = _r(3, 4, seed=13), np.array([2, 0, 3]), np.array([1.0, -2.0, 0.5])
    (got,) = run_gradients(
        lambda s, v: SparseSoftmaxCrossEntropyWithLogits(s, v, labels).loss, [x], g
    )
    want = (softmax(x) - np.eye(4)[labels]) * g[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-16)


def test_cross_entropy_second_derivatives():
    # TF 2.21 differentiates the cross-entropies twice (its rules use the backprop output's
    # gradient): the Hessian of the loss is softmax's Jacobian.
    labels = np.array([0, 2])
    x = _r(2, 3, seed=14)

    def sparse(s, v):
        return gradient_norm(s, SparseSoftmaxCrossEntropyWithLogits(s, v, labels).loss, [v])

    assert_gradients_close(sparse, [x])
    p = _probabilities(2, 3)

    def dense(s, v, q):
        return gradient_norm(s, SoftmaxCrossEntropyWithLogits(s, v, q).loss, [v, q])

    assert_gradients_close(dense, [x, p])
    # The mean loss of a batch, as a training step takes it.
    assert_gradients_close(
        lambda s, v: gradient_norm(
            s, Mean(s, SparseSoftmaxCrossEntropyWithLogits(s, v, labels).loss, [0]), [v]
        ),
        [x],
    )


@pytest.mark.parametrize(
    "sf, sl",
    [((3, 4), (3, 4)), ((1, 4), (3, 4)), ((3, 4), (1, 4)), ((4,), (3, 4)), ((3, 4), (4,)),
     ((3, 1), (3, 4))],
    ids=str,
)  # fmt: skip
def test_dense_cross_entropy_with_broadcasting(sf, sl):
    features, labels = _r(*sf, seed=15), _probabilities(*sl)
    # The features' gradient is TF's (backprop): the derivative for rows of labels summing to 1,
    # which broadcasting keeps only where labels are not broadcast along the classes.
    if sl[-1] == 4:
        assert_gradients_close(
            lambda s, f, q: SoftmaxCrossEntropyWithLogits(s, f, q).loss, [features, labels]
        )
    assert_gradients_close(
        lambda s, f, q: SoftmaxCrossEntropyWithLogits(s, f, q).backprop, [features, labels]
    )
    for how in ("dims", "rank"):
        if how == "rank" and len(sf) != 2:
            continue  # TF's shape function needs the broadcast rank

        def unknown(s, f, q, how=how):
            return SoftmaxCrossEntropyWithLogits(s, forget(s, f, how), forget(s, q, how)).backprop

        assert_gradients_close(unknown, [features, labels])


def test_dense_cross_entropy_labels_gradient():
    x, p, g = _r(2, 3, seed=16), _probabilities(2, 3), np.array([2.0, -1.0])
    dx, dp = run_gradients(lambda s, f, q: SoftmaxCrossEntropyWithLogits(s, f, q).loss, [x, p], g)
    log_softmax = x - np.log(np.exp(x).sum(-1, keepdims=True))
    np.testing.assert_allclose(dp, -log_softmax * g[:, None], rtol=1e-14)
    np.testing.assert_allclose(dx, (softmax(x) - p) * g[:, None], rtol=1e-13, atol=1e-16)


# -- L2Loss, BiasAdd -------------------------------------------------------------------------------


def test_l2_loss():
    for shape in [(), (3,), (2, 3)]:
        assert_gradients_close(lambda s, v: L2Loss(s, v), [_r(*shape, seed=17)])
    (got,) = run_gradients(lambda s, v: L2Loss(s, v), [np.array([1.0, -2.0])], np.float64(3))
    np.testing.assert_array_equal(got, [3.0, -6.0])
    assert_gradients_close(lambda s, v: gradient_norm(s, L2Loss(s, Square(s, v)), [v]), [_r(3)])


@pytest.mark.parametrize(
    "shape, data_format",
    [((3, 4), "NHWC"), ((2, 3, 4), "NHWC"), ((2, 3, 4, 2), "NHWC"), ((2, 3, 4), "NCHW"),
     ((2, 3, 2, 2), "NCHW")],
    ids=str,
)  # fmt: skip
def test_bias_add(shape, data_format):
    channels = shape[1] if data_format == "NCHW" else shape[-1]
    value, bias = _r(*shape, seed=18), _r(channels, seed=19)
    f = lambda s, v, b: BiasAdd(s, v, b, data_format=data_format)  # noqa: E731
    assert_gradients_close(f, [value, bias])
    for how in ("dims", "rank"):
        g = lambda s, v, b, how=how: BiasAdd(  # noqa: E731
            s, forget(s, v, how), b, data_format=data_format
        )
        assert_gradients_close(g, [value, bias])
    # The bias gradient is one BiasAddGrad node, as TF builds it.
    root = mg.Scope.new_root_scope()
    v = mg.Placeholder(root, mg.float32, list(shape))
    b = mg.Placeholder(root, mg.float32, [channels])
    dv, db = mg.gradients(BiasAdd(root, v, b, data_format=data_format), [v, b])
    assert db.op.type == "BiasAddGrad" and db.op.get_attr("data_format") == data_format
    assert dv.op.name == "gradients/grad_ys_0"  # the value's gradient is grad itself


def test_bias_add_second_derivatives():
    def f(s, v, b):
        return gradient_norm(s, Sum(s, Square(s, BiasAdd(s, v, b)), [0, 1]), [v, b])

    assert_gradients_close(f, [_r(2, 3, seed=20), _r(3, seed=21)])


# -- BiasAddGrad -----------------------------------------------------------------------------------


def _bias_add_grad_reference(x, data_format):
    channel = 1 if data_format == "NCHW" else x.ndim - 1
    out = np.zeros(x.shape[channel], dtype=np.float64 if x.dtype.kind == "f" else x.dtype)
    for index in np.ndindex(x.shape):
        out[index[channel]] += x[index]
    return out


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 3, 2, 2), (0, 3), (2, 0, 3)], ids=str)
def test_bias_add_grad_values(data_format, shape):
    if data_format == "NCHW" and len(shape) < 3:
        pytest.skip("TF's shape function wants rank >= 3 for NCHW")
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) - 3
    root = mg.Scope.new_root_scope()
    for fed in (False, True):
        value = mg.Placeholder(root, mg.float64) if fed else mg.Const(root, x)
        y = BiasAddGrad(root, value, data_format=data_format)
        got = mg.Session(root).run(y, {value: x} if fed else None)
        np.testing.assert_array_equal(got, _bias_add_grad_reference(x, data_format))


def test_bias_add_grad_types():
    # Half types sum in float32 (3000 * 0.1 is 300, not float16's 256); integers wrap.
    root = mg.Scope.new_root_scope()
    half = mg.Session(root).run(BiasAddGrad(root, np.full((3000, 2), 0.1, np.float16)))
    np.testing.assert_array_equal(half, np.array([300.0, 300.0], np.float16))
    ints = mg.Session(root).run(BiasAddGrad(root, np.full((3, 2), 100, np.int8)))
    np.testing.assert_array_equal(ints, np.array([44, 44], np.int8))
    z = mg.Session(root).run(BiasAddGrad(root, np.array([[1 + 2j, 3j], [1, 1]], np.complex64)))
    np.testing.assert_array_equal(z, np.array([2 + 2j, 1 + 3j], np.complex64))


def test_bias_add_grad_op_def_and_errors():
    op_def = mg.registry.get_op_def("BiasAddGrad")
    assert [a.name for a in op_def.inputs] == ["out_backprop"]
    assert [a.name for a in op_def.outputs] == ["output"]
    assert [a.name for a in op_def.attrs] == ["T", "data_format"]
    root = mg.Scope.new_root_scope()
    with pytest.raises(mg.InvalidArgumentError, match="must be at least rank 2"):
        BiasAddGrad(root, mg.Placeholder(root, mg.float32, [3]))
    with pytest.raises(mg.InvalidArgumentError, match="must be at least rank 3"):
        BiasAddGrad(root, mg.Placeholder(root, mg.float32, [2, 3]), data_format="NCHW")
    assert BiasAddGrad(root, mg.Placeholder(root, mg.float32, [None, 5])).shape == [5]
    assert BiasAddGrad(root, mg.Placeholder(root, mg.float32)).shape == [None]
    late = BiasAddGrad(
        root.with_op_name("late"), Forget(root, np.zeros(3, np.float32), known_rank=False)
    )
    with pytest.raises(mg.InvalidArgumentError, match=r"Input tensor must be at least 2D: \[3\]"):
        mg.Session(root).run(late)
    # Rank 2 NCHW passes the kernel (TF's kernel takes it): channel dim 1, the last.
    unknown = Forget(root, np.ones((2, 3), np.float32), known_rank=False)
    nchw = BiasAddGrad(root, unknown, data_format="NCHW")
    np.testing.assert_array_equal(mg.Session(root).run(nchw), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("how", ["static", "dims", "rank"])
def test_bias_add_grad_gradient(data_format, how):
    x = _r(2, 3, 2, seed=22)
    f = lambda s, v: BiasAddGrad(s, forget(s, v, how), data_format=data_format)  # noqa: E731
    assert_gradients_close(f, [x])
    assert_gradients_close(f, [_r(2, 3, 2, 2, seed=23)])
    if data_format == "NHWC":
        assert_gradients_close(f, [_r(4, 3, seed=24)])


def test_bias_add_grad_kernels_keep_the_trusted_promise():
    for kernel in mg.registry.kernels_for("BiasAddGrad"):
        assert kernel.trusted
        gpu = kernel.device_type == "GPU"
        ctx = KernelContext(SimulatedGpuDevice(0), "n", "BiasAddGrad") if gpu else dirty_ctx()
        for dtype in kernel_dtypes("BiasAddGrad", kernel.device_type):
            for shape, fmt in [((2, 3), "NHWC"), ((2, 3, 4), "NCHW"), ((0, 3), "NHWC")]:
                x = (np.arange(np.prod(shape)) % 4).reshape(shape).astype(dtype.np_dtype)
                before = x.copy()
                arg = ctx.device.from_host(x) if gpu else x
                out = kernel.fn(ctx, arg, data_format=fmt)
                channels = shape[1] if fmt == "NCHW" else shape[-1]
                want_type = minigraph.testing.SimulatedArray if gpu else np.ndarray
                assert type(out) is want_type and out.dtype == dtype.np_dtype
                assert out.shape == (channels,)
                host = ctx.device.to_host(out) if gpu else out
                want = _bias_add_grad_reference(x.astype(np.complex128), fmt)
                np.testing.assert_allclose(host.astype(np.complex128), want, rtol=1e-2)
                out.fill(0)
                np.testing.assert_array_equal(x, before)


# -- a training step -------------------------------------------------------------------------------


def test_mlp_training_step_against_a_numpy_backward_pass():
    rng = np.random.default_rng(25)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    w1 = (rng.standard_normal((5, 7)) * 0.5).astype(np.float32)
    w2 = (rng.standard_normal((7, 3)) * 0.5).astype(np.float32)
    b1, b2 = rng.standard_normal(7).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    labels = rng.integers(0, 3, 8)
    root = mg.Scope.new_root_scope()
    c = {k: mg.Const(root.with_op_name(k), v).output for k, v in dict(w1=w1, w2=w2, b1=b1,
                                                                      b2=b2).items()}  # fmt: skip
    h = Relu(root, BiasAdd(root, MatMul(root, x, c["w1"]), c["b1"]))
    logits = BiasAdd(root, MatMul(root, h, c["w2"]), c["b2"])
    loss = Mean(root, SparseSoftmaxCrossEntropyWithLogits(root, logits, labels).loss, [0])
    grads = mg.gradients(loss, [c["w1"], c["w2"], c["b1"], c["b2"]])
    got = mg.Session(root).run(grads)
    # numpy's backward pass, in float64
    pre = x @ w1.astype(np.float64) + b1
    hv = np.maximum(pre, 0)
    z = hv @ w2 + b2
    dz = (softmax(z) - np.eye(3)[labels]) / 8
    dw2, db2 = hv.T @ dz, dz.sum(0)
    dh = dz @ w2.T * (pre > 0)
    dw1, db1 = x.T @ dh, dh.sum(0)
    for g, want in zip(got, [dw1, dw2, db1, db2]):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-6)


def test_first_derivatives_of_the_losses_build_no_second_order_terms():
    # The backprop output gets only the machinery's zeros: no Softmax, no BroadcastTo of equal
    # static shapes (a training step stays as small as TF's).
    for dense in (False, True):
        root = mg.Scope.new_root_scope()
        logits = mg.Placeholder(root, mg.float32, [4, 3])
        if dense:
            labels = mg.Placeholder(root, mg.float32, [4, 3])
            loss = SoftmaxCrossEntropyWithLogits(root, logits, labels).loss
        else:
            labels = mg.Placeholder(root, mg.int64, [4])
            loss = SparseSoftmaxCrossEntropyWithLogits(root, logits, labels).loss
        mg.gradients(Mean(root, loss, [0]), [logits])
        ops_of = lambda rule, graph=root.graph: [  # noqa: E731
            op.type for op in graph.operations if op.name.startswith(f"gradients/{rule}")
        ]
        xent = ops_of("SoftmaxCrossEntropyWithLogits" if dense else "SparseSoftmax")
        assert not {"Softmax", "BroadcastTo", "Sub", "AddV2", "Sum"} & set(xent), xent
        assert ops_of("Mean_grad") == ["Const", "BroadcastTo", "Const", "RealDiv"]
