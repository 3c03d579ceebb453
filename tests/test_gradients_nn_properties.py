"""Property tests of MatMul's and BatchMatMulV2's gradient rules: random matrix sizes (empty
included), the four transpose / adjoint cases, random batch shapes that broadcast (missing
dims, dims of 1 on either side), static or unknown dims and ranks, real and complex; against
a numpy reference written with einsum over the broadcast batch, and a sample against central
differences."""

from __future__ import annotations

import numpy as np
from _gradients_reduction_nn_helpers import forget, run_gradients
from hypothesis import given, settings
from hypothesis import strategies as st

from minigraph.testing import assert_gradients_close
from ops.nn import BatchMatMulV2, MatMul


def _reduce_to(g: np.ndarray, shape: tuple) -> np.ndarray:
    """g summed over the dims broadcasting added to `shape`."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _adjoint(m: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(m, -1, -2))


def _reference(x, y, adj_x, adj_y, dz):
    """dL/dx and dL/dy of z = op(x) @ op(y) for dL/dz = dz (the conjugate convention of the
    rules: a gradient of a complex tensor is dL/d(re) + i dL/d(im))."""
    a = _adjoint(x) if adj_x else x
    b = _adjoint(y) if adj_y else y
    da = np.einsum("...ij,...kj->...ik", dz, np.conj(b))  # dz @ b^H
    db = np.einsum("...ki,...kj->...ij", np.conj(a), dz)  # a^H @ dz
    dx = _adjoint(da) if adj_x else da
    dy = _adjoint(db) if adj_y else db
    return _reduce_to(dx, x.shape), _reduce_to(dy, y.shape)


@st.composite
def batch_cases(draw):
    rank = draw(st.integers(0, 3))
    batch = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    bx, by = [], []
    for d in batch:
        kind = draw(st.sampled_from(["both", "x1", "y1"]))
        bx.append(1 if kind == "x1" else d)
        by.append(1 if kind == "y1" else d)
    bx = bx[draw(st.integers(0, rank)) :]  # x may lack leading batch dims
    by = by[draw(st.integers(0, rank)) :]
    m, k, n = (draw(st.integers(0, 3)) for _ in range(3))
    adj_x, adj_y = draw(st.booleans()), draw(st.booleans())
    sx = tuple(bx) + ((k, m) if adj_x else (m, k))
    sy = tuple(by) + ((n, k) if adj_y else (k, n))
    complex_ = draw(st.booleans())
    how = draw(st.sampled_from(["static", "dims", "rank"]))
    return sx, sy, adj_x, adj_y, complex_, how, draw(st.integers(0, 2**31))


def _values(shape, rng, complex_):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex_ else x


@settings(max_examples=120, deadline=None)
@given(batch_cases())
def test_batch_matmul_gradients_match_the_reference(case):
    sx, sy, adj_x, adj_y, complex_, how, seed = case
    rng = np.random.default_rng(seed)
    x, y = _values(sx, rng, complex_), _values(sy, rng, complex_)
    z_shape = np.matmul(_adjoint(x) if adj_x else x, _adjoint(y) if adj_y else y).shape
    dz = _values(z_shape, rng, complex_)

    def f(s, p, q):
        return BatchMatMulV2(s, forget(s, p, how), forget(s, q, how), adj_x=adj_x, adj_y=adj_y)

    dx, dy = run_gradients(f, [x, y], dz)
    want_x, want_y = _reference(x, y, adj_x, adj_y, dz)
    assert dx.shape == x.shape and dy.shape == y.shape
    np.testing.assert_allclose(dx, want_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dy, want_y, rtol=1e-12, atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.booleans(), st.booleans(),
    st.booleans(), st.integers(0, 2**31),
)  # fmt: skip
def test_matmul_gradients_match_the_reference(m, k, n, t_a, t_b, complex_, seed):
    rng = np.random.default_rng(seed)
    a = _values((k, m) if t_a else (m, k), rng, complex_)
    b = _values((n, k) if t_b else (k, n), rng, complex_)
    dz = _values((m, n), rng, complex_)
    da, db = run_gradients(
        lambda s, p, q: MatMul(s, p, q, transpose_a=t_a, transpose_b=t_b), [a, b], dz
    )
    # transpose_a is a plain transpose (no conjugation): a = op(x) with op = T.
    x = a.T if t_a else a
    y = b.T if t_b else b
    dx, dy = dz @ np.conj(y).T, np.conj(x).T @ dz
    np.testing.assert_allclose(da, dx.T if t_a else dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(db, dy.T if t_b else dy, rtol=1e-12, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(batch_cases())
def test_batch_matmul_gradients_match_central_differences(case):
    sx, sy, adj_x, adj_y, complex_, how, seed = case
    rng = np.random.default_rng(seed)
    x, y = _values(sx, rng, complex_), _values(sy, rng, complex_)

    def f(s, p, q):
        return BatchMatMulV2(s, forget(s, p, how), forget(s, q, how), adj_x=adj_x, adj_y=adj_y)

    assert_gradients_close(f, [x, y])
