"""Property tests of the GatherV2 and GatherNd gradient rules over random shapes, axes (either
sign), batch_dims (either sign), index depths and repeated indices: the sparse or dense form TF
gives each case, values equal to an element-by-element numpy reference, with static or
run-time shapes, and a sample against central differences."""

from __future__ import annotations

import numpy as np
from _gradients_gather_helpers import dense, gather_grad_reference, gather_nd_grad_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops  # noqa: F401 - the op library's rules
from minigraph.testing import assert_gradients_close
from ops import GatherNd, GatherV2

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def gathers(draw):
    """(params shape, indices, axis as given, batch_dims as given, static shapes?)."""
    rank = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    a = draw(st.integers(0, rank - 1))
    b = draw(st.integers(0, a))
    extra = draw(st.lists(st.integers(0, 3), min_size=0, max_size=2))
    i_shape = tuple(shape[:b]) + tuple(extra)
    n = shape[a]
    if n == 0 and int(np.prod(i_shape)):
        shape[a] = n = draw(st.integers(1, 3))  # ids need a row to name
    count = int(np.prod(i_shape))
    values = draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=count, max_size=count))
    indices = np.array(values, dtype=draw(st.sampled_from([np.int32, np.int64]))).reshape(i_shape)
    axis = a - rank if draw(st.booleans()) else a
    batch_dims = b - len(i_shape) if b and draw(st.booleans()) else b
    return tuple(shape), indices, axis, batch_dims, draw(st.booleans())


@SETTINGS
@given(gathers(), st.integers(0, 2**32 - 1))
def test_gather_v2_gradient(case, seed):
    shape, indices, axis, batch_dims, static = case
    rng = np.random.default_rng(seed)
    root = mg.Scope.new_root_scope()
    # Run-time shapes: dims unknown (an unknown rank: tests/test_gradients_gather.py).
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, shape if static else [None] * len(shape))
    i = mg.Placeholder(root.with_op_name("i"), mg.as_dtype(indices.dtype),
                       indices.shape if static else [None] * indices.ndim)  # fmt: skip
    y = GatherV2(root.with_op_name("y"), p, i, np.int32(axis), batch_dims=batch_dims)
    p_value = rng.standard_normal(shape)
    with mg.Session(root) as session:
        y_value = session.run(y, {p: p_value, i: indices})
        dy_value = rng.standard_normal(y_value.shape)
        (grad,) = mg.gradients(y, p, grad_ys=mg.Const(root, dy_value))
        # Sparse exactly for the literal axis 0 (batch_dims is then 0), as TF's rule.
        assert isinstance(grad, mg.IndexedSlices) == (axis == 0)
        value = session.run(grad, {p: p_value, i: indices})
    if static:
        assert grad.shape == shape
    expected = gather_grad_reference(shape, indices, axis, batch_dims, dy_value)
    np.testing.assert_allclose(dense(value, shape), expected, rtol=1e-12, atol=1e-12)


@st.composite
def gather_nds(draw):
    """(params shape, indices, batch_dims, static shapes?)."""
    rank = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    b = draw(st.integers(0, rank - 1))
    depth = draw(st.integers(0, rank - b))
    extra = draw(st.lists(st.integers(0, 3), min_size=0, max_size=2))
    if b and not extra and draw(st.booleans()):
        extra = [draw(st.integers(1, 2))]
    outer = tuple(shape[:b]) + tuple(extra)
    columns = [
        draw(st.lists(st.integers(0, shape[b + k] - 1), min_size=int(np.prod(outer)),
                      max_size=int(np.prod(outer))))
        for k in range(depth)
    ]  # fmt: skip
    vectors = np.array(columns, dtype=np.int32).T.reshape(outer + (depth,))
    return tuple(shape), vectors, b, draw(st.booleans())


@SETTINGS
@given(gather_nds(), st.integers(0, 2**32 - 1))
def test_gather_nd_gradient(case, seed):
    shape, indices, batch_dims, static = case
    rng = np.random.default_rng(seed)
    root = mg.Scope.new_root_scope()
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, shape if static else None)
    i = mg.Placeholder(root.with_op_name("i"), mg.int32, indices.shape if static else None)
    y = GatherNd(root.with_op_name("y"), p, i, batch_dims=batch_dims)
    p_value = rng.standard_normal(shape)
    with mg.Session(root) as session:
        dy_value = rng.standard_normal(session.run(y, {p: p_value, i: indices}).shape)
        (grad,) = mg.gradients(y, p, grad_ys=mg.Const(root, dy_value))
        sparse = static and batch_dims == 0 and indices.ndim == 2 and indices.shape[1] == 1
        assert isinstance(grad, mg.IndexedSlices) == sparse
        value = session.run(grad, {p: p_value, i: indices})
    expected = gather_nd_grad_reference(shape, indices, batch_dims, dy_value)
    np.testing.assert_allclose(dense(value, shape), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(gathers(), st.integers(0, 2**32 - 1))
def test_gather_v2_gradient_matches_central_differences(case, seed):
    shape, indices, axis, batch_dims, _ = case
    value = np.random.default_rng(seed).standard_normal(shape)
    assert_gradients_close(
        lambda s, p: GatherV2(s, p, indices, np.int32(axis), batch_dims=batch_dims), [value]
    )


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(gather_nds(), st.integers(0, 2**32 - 1))
def test_gather_nd_gradient_matches_central_differences(case, seed):
    shape, indices, batch_dims, _ = case
    value = np.random.default_rng(seed).standard_normal(shape)
    assert_gradients_close(lambda s, p: GatherNd(s, p, indices, batch_dims=batch_dims), [value])
