"""The fast paths the training benchmark's profile led to (ops/resource_variables.py): Unique's
integer keys (one plain sort of value * n + position) and ResourceSparseApplyAdagrad's split of
rows named once (take/put) from repeated ones (the scans). Each must give what the general
path gives: here against references written differently, at the edges of the integer types.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph as mg
from ops import Placeholder
from ops import resource_variables as rv


def _unique_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values in order of first appearance, and each element's position among them."""
    seen: dict = {}
    for v in x.tolist():
        seen.setdefault(v, len(seen))
    y = np.array(list(seen), dtype=x.dtype)
    return y, np.array([seen[v] for v in x.tolist()], dtype=np.int32)


def _run_unique(x: np.ndarray, out_idx=mg.int32) -> tuple[np.ndarray, np.ndarray]:
    root = mg.Scope.new_root_scope()
    p = Placeholder(root, mg.as_dtype(x.dtype), shape=[None])
    u = rv.Unique(root, p, out_idx=out_idx)
    with mg.Session(root) as sess:
        return tuple(sess.run([u.y, u.idx], {p: x}))


I32, I64, U64 = np.iinfo(np.int32), np.iinfo(np.int64), np.iinfo(np.uint64)
_EDGES = [
    np.array([I64.max, I64.min, 0, I64.max], np.int64),
    np.array([U64.max, 0, U64.max, 7], np.uint64),
    np.array(
        [np.iinfo(np.int32).min, np.iinfo(np.int32).max, -1, np.iinfo(np.int32).min], np.int32
    ),
    np.array([-128, 127, -128, 0, 127], np.int8),
    np.array([255, 0, 255], np.uint8),
    np.array([5, 5, 5, 5], np.int16),
    np.array([3], np.int64),
    np.array([2**40, -(2**40), 2**40], np.int64),  # keys fit: the fast path at a wide range
]


@pytest.mark.parametrize("x", _EDGES, ids=lambda x: f"{x.dtype}-{x.size}")
def test_unique_at_the_edges_of_the_integer_types(x, cpu_only):
    want_y, want_idx = _unique_reference(x)
    y, idx = _run_unique(x)
    assert y.dtype == x.dtype and idx.dtype == np.int32
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(idx, want_idx)


def test_unique_integer_keys_fall_back_where_they_would_overflow():
    wide = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64)
    assert rv._stable_int_keys(np, wide) is None
    assert rv._stable_int_keys(np, np.array([1.0, 1.0])) is None  # floats: the general path
    keys = rv._stable_int_keys(np, np.array([4, -2, 4], np.int32))
    np.testing.assert_array_equal(keys, [6 * 3 + 0, 0 * 3 + 1, 6 * 3 + 2])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-(2**62), 2**62), max_size=40),
    st.sampled_from(["int64", "int32", "uint16"]),
    st.sampled_from([mg.int32, mg.int64]),
)
def test_unique_matches_the_reference_over_random_ranges(values, dtype, out_idx):
    info = np.iinfo(dtype)
    x = np.array([min(max(v, info.min), info.max) for v in values], dtype=dtype)
    if x.size == 0:
        return
    want_y, want_idx = _unique_reference(x)
    y, idx = _run_unique(x, out_idx)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(idx.astype(np.int64), want_idx)


def _sequential_adagrad(var, accum, lr, grad, indices, vector):
    """TF's CPU kernel: each index in order, accum += g*g, then var -= lr * g * rsqrt(accum)
    (var -= lr * g / sqrt(accum) for a vector)."""
    var, accum = var.copy(), accum.copy()
    for i, row in enumerate(indices.tolist()):
        g = grad[i]
        accum[row] = accum[row] + g * g
        if vector:
            var[row] = var[row] - lr * g / np.sqrt(accum[row])
        else:
            var[row] = var[row] - (lr * g) * (np.float64(1) / np.sqrt(accum[row])).astype(var.dtype)
    return var, accum


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 12),
    n=st.integers(1, 30),
    inner=st.integers(1, 3),
    vector=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_sparse_adagrad_singles_and_repeats_match_the_sequential_kernel(
    rows, n, inner, vector, seed
):
    rng = np.random.default_rng(seed)
    inner = 1 if vector else inner
    var = rng.standard_normal((rows, inner))
    accum = rng.random((rows, inner)) + 0.1
    indices = rng.integers(0, rows, n)  # some named once, some repeated
    grad = rng.standard_normal((n, inner))
    lr = np.float64(0.25)
    want_var, want_accum = _sequential_adagrad(var, accum, lr, grad, indices, vector)
    got_var, got_accum = var.copy(), accum.copy()
    attrs = {"update_slots": True, "_var_rank": 1 if vector else 2}
    rv._sparse_adagrad(np, [got_var, got_accum], {"lr": lr}, grad, indices.astype(np.int64), attrs)
    np.testing.assert_allclose(got_accum, want_accum, rtol=1e-12)
    np.testing.assert_allclose(got_var, want_var, rtol=1e-12, atol=1e-15)


def test_put_rows_writes_each_row_where_it_belongs():
    table = np.zeros((6, 3), np.float32)
    rv._put_rows(np, table, np.array([4, 0, 2]), np.arange(9, dtype=np.float32).reshape(3, 3))
    np.testing.assert_array_equal(table[[4, 0, 2]], np.arange(9).reshape(3, 3))
    assert not table[[1, 3, 5]].any()
    strided = np.zeros((6, 6), np.float32)[:, ::2]  # not contiguous: the fancy-index path
    rv._put_rows(np, strided, np.array([1]), np.ones((1, 3), np.float32))
    np.testing.assert_array_equal(strided[1], [1, 1, 1])
