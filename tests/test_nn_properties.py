"""Property tests of the nn ops (ops/nn.py) against references written differently from the
kernels: np.einsum over Python-integer object arrays (wrapped to the dtype's width) for the
matrix products, explicit broadcasting loops for BatchMatMulV2 and BiasAdd, float64 row loops
with math.fsum/math.exp for the softmax family, the cross-entropies and L2Loss. Random shapes
(empty dims included), attrs and every dtype each CPU kernel registers, on constant and fed
inputs; under MINIGRAPH_TEST_SIMULATED_GPUS=2 the GPU kernels (bfloat16 stays on the CPU)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _reduction_nn_helpers import BF16, Case, kernel_dtypes, run_case
from hypothesis import given, settings
from hypothesis import strategies as st

F16 = np.dtype(np.float16)


def dtypes_of(op: str) -> list[np.dtype]:
    return [d.np_dtype for d in kernel_dtypes(op)]


def _ids(v):
    return v if isinstance(v, str) else np.dtype(v).name


def _small(dtype: np.dtype, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """Small integers (complex: both parts), exact in every dtype; products and their sums over
    at most a few terms stay exact in float16 and bfloat16 too."""
    signed = dtype.kind in "ifc" or dtype == BF16
    values = rng.integers(-3 if signed else 0, 4, shape)
    if dtype.kind == "c":
        return (values + 1j * rng.integers(-3, 4, shape)).astype(dtype)
    return values.astype(dtype)


def _wrap_array(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Python integers (an object array) taken modulo 2**bits into `dtype`."""
    if dtype.kind not in "iu":
        return values.astype(np.complex128 if dtype.kind == "c" else np.float64).astype(dtype)
    info = np.iinfo(dtype)
    span = 1 << info.bits
    wrapped = [(int(v) - info.min) % span + info.min for v in values.reshape(-1)]
    return np.array(wrapped, dtype).reshape(values.shape)


def _as_python(x: np.ndarray) -> np.ndarray:
    """x as an object array of Python ints (exact products) or complex/float values."""
    if x.dtype.kind in "iu":
        return np.array([int(v) for v in x.reshape(-1)], dtype=object).reshape(x.shape)
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    return x.astype(wide)


# -- MatMul ------------------------------------------------------------------------------------


def matmul_reference(a, b, ta, tb):
    x = _as_python(a)
    y = _as_python(b)
    x = x.T if ta else x
    y = y.T if tb else y
    return _wrap_array(np.einsum("ik,kj->ij", x, y), a.dtype)


def _check_product(op, x, y, attrs, want, fed):
    got = run_case(Case("p", op, (x, y), attrs), fed)
    assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.complex128), want.astype(np.complex128))


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_matmul_matches_einsum(data):
    dtype = data.draw(st.sampled_from(dtypes_of("MatMul")))
    m, k, n = (data.draw(st.integers(0, 4)) for _ in range(3))
    ta, tb = data.draw(st.booleans()), data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a = _small(dtype, (k, m) if ta else (m, k), rng)
    b = _small(dtype, (n, k) if tb else (k, n), rng)
    attrs = {"transpose_a": ta, "transpose_b": tb}
    _check_product("MatMul", a, b, attrs, matmul_reference(a, b, ta, tb), data.draw(st.booleans()))


@pytest.mark.parametrize("dtype", dtypes_of("MatMul"), ids=_ids)
def test_matmul_every_registered_dtype(dtype):
    rng = np.random.default_rng(0)
    for ta, tb in itertools.product((False, True), repeat=2):
        a = _small(dtype, (3, 4) if ta else (4, 3), rng)
        b = _small(dtype, (5, 3) if tb else (3, 5), rng)
        for fed in (False, True):
            attrs = {"transpose_a": ta, "transpose_b": tb}
            _check_product("MatMul", a, b, attrs, matmul_reference(a, b, ta, tb), fed)


def test_matmul_integers_wrap_like_python_integers_modulo_2_to_the_bits():
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        a = np.array([[info.max, info.max - 1], [info.min, 7]], dtype)
        b = np.array([[info.max, 3], [-5, info.min]], dtype)
        for fed in (False, True):
            want = matmul_reference(a, b, False, False)
            _check_product("MatMul", a, b, {}, want, fed)


# -- BatchMatMulV2 -----------------------------------------------------------------------------


def batch_matmul_reference(x, y, adj_x, adj_y):
    """Loops over the broadcast batch index; each product by einsum over Python values."""
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    px, py = _as_python(x), _as_python(y)

    def pick(arr, idx):
        lead = arr.shape[:-2]
        offset = len(batch) - len(lead)
        return arr[tuple(0 if lead[i] == 1 else idx[offset + i] for i in range(len(lead)))]

    rows = x.shape[-1] if adj_x else x.shape[-2]
    cols = y.shape[-2] if adj_y else y.shape[-1]
    out = np.zeros(batch + (rows, cols), dtype=object)
    for idx in itertools.product(*(range(d) for d in batch)):
        mx, my = pick(px, idx), pick(py, idx)
        mx = np.conj(mx.T) if adj_x else mx
        my = np.conj(my.T) if adj_y else my
        out[idx] = np.einsum("ik,kj->ij", mx, my) if mx.size or my.size else 0
    return _wrap_array(out, x.dtype)


@st.composite
def batch_shapes(draw):
    rank = draw(st.integers(0, 3))
    full = [draw(st.integers(0, 3)) for _ in range(rank)]

    def side():
        dims = [d if draw(st.booleans()) else 1 for d in full]
        return tuple(dims[draw(st.integers(0, rank)) :])

    return side(), side()


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_batch_matmul_matches_the_broadcast_loop(data):
    dtype = data.draw(st.sampled_from(dtypes_of("BatchMatMulV2")))
    bx, by = data.draw(batch_shapes())
    m, k, n = (data.draw(st.integers(0, 3)) for _ in range(3))
    adj_x, adj_y = data.draw(st.booleans()), data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = _small(dtype, bx + ((k, m) if adj_x else (m, k)), rng)
    y = _small(dtype, by + ((n, k) if adj_y else (k, n)), rng)
    want = batch_matmul_reference(x, y, adj_x, adj_y)
    attrs = {"adj_x": adj_x, "adj_y": adj_y}
    _check_product("BatchMatMulV2", x, y, attrs, want, data.draw(st.booleans()))


@pytest.mark.parametrize("dtype", dtypes_of("BatchMatMulV2"), ids=_ids)
def test_batch_matmul_every_registered_dtype(dtype):
    rng = np.random.default_rng(1)
    x = _small(dtype, (2, 1, 3, 4), rng)
    y = _small(dtype, (3, 4, 2), rng)
    for adj_x, adj_y in itertools.product((False, True), repeat=2):
        xx = np.swapaxes(x, -1, -2).copy() if adj_x else x
        yy = np.swapaxes(y, -1, -2).copy() if adj_y else y
        want = batch_matmul_reference(xx, yy, adj_x, adj_y)
        for fed in (False, True):
            _check_product("BatchMatMulV2", xx, yy, {"adj_x": adj_x, "adj_y": adj_y}, want, fed)


# -- the softmax family ------------------------------------------------------------------------

# Tolerances against float64 references: a few units in the last place of each type.
RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-6, F16: 4e-3, BF16: 3e-2}


def _rows(x: np.ndarray):
    flat = x.astype(np.float64).reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    return flat


def softmax_reference(x: np.ndarray, log: bool) -> np.ndarray:
    out = []
    for row in _rows(x):
        top = max(row)
        shifted = [v - top for v in row]
        total = math.fsum(math.exp(v) for v in shifted)
        out.append([v - math.log(total) if log else math.exp(v) / total for v in shifted])
    return np.array(out, np.float64).reshape(x.shape)


def _logits(dtype: np.dtype, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    return (rng.standard_normal(shape) * 4).astype(dtype)


def _assert_close(got, want, dtype):
    assert type(got) is np.ndarray and got.dtype == dtype and got.shape == want.shape
    rtol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_softmax_family_matches_the_row_loop(op, data):
    dtype = data.draw(st.sampled_from(dtypes_of(op)))
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    x = _logits(dtype, shape, np.random.default_rng(data.draw(st.integers(0, 2**16))))
    if data.draw(st.booleans()):
        x = x + dtype.type(50 if dtype != F16 else 10)  # large logits: no overflow
    got = run_case(Case("p", op, (x,)), fed=data.draw(st.booleans()))
    _assert_close(got, softmax_reference(x, op == "LogSoftmax"), dtype)


def sparse_xent_reference(x: np.ndarray, labels: np.ndarray):
    logsm = softmax_reference(x, log=True)
    rows = np.arange(x.shape[0])
    loss = -logsm[rows, labels]
    backprop = np.exp(logsm)
    backprop[rows, labels] -= 1
    return loss, backprop


def xent_reference(x: np.ndarray, labels: np.ndarray):
    shape = np.broadcast_shapes(x.shape, labels.shape)
    f = np.broadcast_to(x.astype(np.float64), shape)
    t = np.broadcast_to(labels.astype(np.float64), shape)
    logsm = softmax_reference(f, log=True)
    loss = np.array([-math.fsum(t[i] * logsm[i]) for i in range(shape[0])], np.float64)
    return loss, np.exp(logsm) - t


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_sparse_cross_entropy_matches_the_reference(data):
    dtype = data.draw(st.sampled_from(dtypes_of("SparseSoftmaxCrossEntropyWithLogits")))
    label_type = data.draw(st.sampled_from([np.int32, np.int64]))
    batch, classes = data.draw(st.integers(0, 5)), data.draw(st.integers(1, 6))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = _logits(dtype, (batch, classes), rng)
    labels = rng.integers(0, classes, batch).astype(label_type)
    case = Case("p", "SparseSoftmaxCrossEntropyWithLogits", (x, labels))
    loss, backprop = run_case(case, fed=data.draw(st.booleans()))
    want_loss, want_backprop = sparse_xent_reference(x, labels)
    _assert_close(loss, want_loss, dtype)
    _assert_close(backprop, want_backprop, dtype)


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_dense_cross_entropy_with_broadcasting_matches_the_reference(data):
    dtype = data.draw(st.sampled_from(dtypes_of("SoftmaxCrossEntropyWithLogits")))
    batch, classes = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shapes = [(batch, classes), (1, classes), (classes,), (batch, 1)]
    fx, fl = data.draw(st.sampled_from(shapes)), data.draw(st.sampled_from(shapes))
    if len(np.broadcast_shapes(fx, fl)) != 2:
        fx = (batch, classes)
    x = _logits(dtype, fx, rng)
    probs = rng.random(fl)
    labels = (probs / probs.sum(axis=-1, keepdims=True)).astype(dtype)
    case = Case("p", "SoftmaxCrossEntropyWithLogits", (x, labels))
    loss, backprop = run_case(case, fed=data.draw(st.booleans()))
    want_loss, want_backprop = xent_reference(x, labels)
    _assert_close(loss, want_loss, dtype)
    _assert_close(backprop, want_backprop, dtype)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "L2Loss"])
@pytest.mark.parametrize("dtype", dtypes_of("Softmax"), ids=_ids)
def test_softmax_family_and_l2_loss_every_registered_dtype(op, dtype):
    x = _logits(dtype, (3, 5), np.random.default_rng(2))
    for fed in (False, True):
        got = run_case(Case("p", op, (x,)), fed)
        if op == "L2Loss":
            want = np.array(math.fsum(float(v) ** 2 for v in x.reshape(-1)) / 2)
        else:
            want = softmax_reference(x, op == "LogSoftmax")
        _assert_close(got, want, dtype)


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_l2_loss_matches_the_sum_of_squares(data):
    dtype = data.draw(st.sampled_from(dtypes_of("L2Loss")))
    rank = data.draw(st.integers(0, 3))
    shape = tuple(data.draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    x = _logits(dtype, shape, np.random.default_rng(data.draw(st.integers(0, 2**16))))
    got = run_case(Case("p", "L2Loss", (x,)), fed=data.draw(st.booleans()))
    want = np.array(math.fsum(float(v) ** 2 for v in x.reshape(-1)) / 2)
    _assert_close(got, want, dtype)


# -- BiasAdd -----------------------------------------------------------------------------------


def bias_add_reference(value: np.ndarray, bias: np.ndarray, nchw: bool) -> np.ndarray:
    channel = 1 if nchw else value.ndim - 1
    pv, pb = _as_python(value), _as_python(bias)
    out = np.zeros(value.shape, dtype=object)
    for idx in itertools.product(*(range(d) for d in value.shape)):
        out[idx] = pv[idx] + pb[idx[channel]]
    return _wrap_array(out, value.dtype)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_bias_add_matches_the_loop(data):
    dtype = data.draw(st.sampled_from(dtypes_of("BiasAdd")))
    nchw = data.draw(st.booleans())
    rank = data.draw(st.integers(3 if nchw else 2, 5))
    shape = tuple(data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)  # any values: sums wrap
        value = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        bias = rng.integers(
            info.min, info.max, shape[1 if nchw else -1], dtype=dtype, endpoint=True
        )
    else:
        value, bias = _small(dtype, shape, rng), _small(dtype, (shape[1 if nchw else -1],), rng)
    attrs = {"data_format": "NCHW" if nchw else "NHWC"}
    got = run_case(Case("p", "BiasAdd", (value, bias), attrs), fed=data.draw(st.booleans()))
    want = bias_add_reference(value, bias, nchw)
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got.astype(np.complex128), want.astype(np.complex128))


@pytest.mark.parametrize("dtype", dtypes_of("BiasAdd"), ids=_ids)
def test_bias_add_every_registered_dtype(dtype):
    rng = np.random.default_rng(4)
    for shape, nchw in (((2, 3), False), ((2, 3, 4), True), ((1, 2, 2, 3), False)):
        value = _small(dtype, shape, rng)
        bias = _small(dtype, (shape[1 if nchw else -1],), rng)
        attrs = {"data_format": "NCHW" if nchw else "NHWC"}
        for fed in (False, True):
            got = run_case(Case("p", "BiasAdd", (value, bias), attrs), fed)
            np.testing.assert_array_equal(
                got.astype(np.complex128),
                bias_add_reference(value, bias, nchw).astype(np.complex128),
            )
