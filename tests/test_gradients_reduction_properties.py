"""Property tests of the reductions' gradient rules: random shapes (0-d and empty included),
random axis sets (negative, unordered), keep_dims, static or unknown dims and ranks, constant
or run-time axes, random ties (small integer values), random zeros for Prod; each against the
element-by-element numpy reference, and a sample against central differences."""

from __future__ import annotations

import numpy as np
from _gradients_reduction_nn_helpers import forget, hidden, reference_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph.testing import assert_gradients_close
from ops import reduction

NAMES = ["Sum", "Mean", "Max", "Min", "Prod"]


@st.composite
def cases(draw, max_rank=4, max_dim=3, min_dim=0):
    rank = draw(st.integers(0, max_rank))
    shape = tuple(draw(st.lists(st.integers(min_dim, max_dim), min_size=rank, max_size=rank)))
    dims = draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank))
    axis = [d - rank if draw(st.booleans()) else d for d in dims] if rank else []
    if len(axis) == 1 and draw(st.booleans()):
        axis = axis[0]  # a scalar axis
    name = draw(st.sampled_from(NAMES))
    keep = draw(st.booleans())
    how = draw(st.sampled_from(["static", "dims", "rank"]))
    axis_known = draw(st.booleans())
    # Small integers: ties for Max/Min and zeros for Prod happen often.
    seed = draw(st.integers(0, 2**31))
    values = np.random.default_rng(seed).integers(-2, 3, shape).astype(np.float64)
    return name, values, axis, keep, how, axis_known


def _build(name, axis, keep, how, axis_known):
    def f(s, v):
        a = axis if axis_known else hidden(s, axis)
        return getattr(reduction, name)(s, forget(s, v, how), a, keep_dims=keep)

    return f


@settings(max_examples=120, deadline=None)
@given(cases(), st.integers(0, 2**31))
def test_gradients_match_the_reference(case, seed):
    name, x, axis, keep, how, axis_known = case
    root = mg.Scope.new_root_scope()
    holder = mg.Placeholder(root.with_op_name("x"), mg.float64, x.shape)
    with root.as_default():
        y = _build(name, axis, keep, how, axis_known)(root, holder)
    out_shape = np.sum(x, axis=tuple(np.atleast_1d(axis).tolist()), keepdims=keep).shape
    dy_value = np.random.default_rng(seed).uniform(-2, 2, out_shape)
    dy = mg.Placeholder(root.with_op_name("dy"), mg.float64, out_shape)
    (dx,) = mg.gradients(y, holder, grad_ys=dy)
    assert dx.shape.is_compatible_with(x.shape)
    with mg.Session(root) as session:
        got = session.run(dx, {holder: x, dy: dy_value})
    want = reference_grad(name, x, axis, keep, dy_value)
    assert got.shape == x.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@settings(max_examples=30, deadline=None)
@given(cases(max_rank=3, max_dim=3, min_dim=1))
def test_gradients_match_central_differences(case):
    name, x, axis, keep, how, axis_known = case
    if name in ("Max", "Min"):
        # Distinct values (central differences are not defined at ties).
        x = x + np.arange(x.size).reshape(x.shape) * 0.125
    assert_gradients_close(_build(name, axis, keep, how, axis_known), [x])
