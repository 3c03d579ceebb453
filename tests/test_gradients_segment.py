"""Gradient rules of UnsortedSegmentSum and ScatterNd (ops/segment.py), and of the checks
(ops/checks.py: EnsureShape passes its gradient through, Assert has none): against central
differences and numpy references, negative segment ids, repeated index vectors, the IGNORE
policy, shapes known only at run time, and second order."""

from __future__ import annotations

import numpy as np
import pytest
from _gradients_gather_helpers import op_types, run, total
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops  # noqa: F401 - the op library's rules and operators
from minigraph.testing import assert_gradients_close
from ops import Assert, EnsureShape, GatherV2, ScatterNd, UnsortedSegmentSum

RNG = np.random.default_rng(2112)


@pytest.fixture
def root():
    return mg.Scope.new_root_scope()


def values(shape):
    return RNG.standard_normal(shape)


# -- UnsortedSegmentSum ----------------------------------------------------------------------

SEGMENT_CASES = [
    # (data shape, segment ids, num_segments): negative ids are dropped by the sum.
    ((5, 2), np.array([0, -1, 2, 2, 0], np.int32), 4),
    ((5,), np.array([3, 3, 3, 1, -4], np.int64), 5),
    ((2, 3, 2), np.array([[1, 0, -1], [0, 0, 1]], np.int32), 2),
    ((2, 3), np.array([[1, 0, -1], [0, 0, 1]], np.int16), 3),  # ids shaped as data
    ((3, 2), np.array([-1, -1, -1], np.int32), 2),
    ((0, 2), np.zeros((0,), np.int32), 3),
]


@pytest.mark.parametrize("shape, ids, n", SEGMENT_CASES)
def test_unsorted_segment_sum_gradient_matches_central_differences(shape, ids, n):
    assert_gradients_close(lambda s, d: UnsortedSegmentSum(s, d, ids, n), [values(shape)])


def segment_reference(shape, ids, dy):
    """d data: the output gradient's row at each id, zeros for negative ids."""
    out = np.zeros(shape)
    for position in np.ndindex(*ids.shape):
        i = int(ids[position])
        if i >= 0:
            out[position] = dy[i]
    return out


@pytest.mark.parametrize("shape, ids, n", SEGMENT_CASES)
@pytest.mark.parametrize("static", [True, False])
def test_unsorted_segment_sum_gradient_values(root, shape, ids, n, static):
    data = mg.Placeholder(root.with_op_name("data"), mg.float64, shape if static else None)
    seg = mg.Placeholder(root.with_op_name("seg"), mg.as_dtype(ids.dtype),
                         ids.shape if static else None)  # fmt: skip
    num = mg.Placeholder(root.with_op_name("num"), mg.int32, [])
    out = UnsortedSegmentSum(root.with_op_name("sum"), data, seg, num)
    feeds = {data: values(shape), seg: ids, num: n}
    dy = values(run(root, out, feeds).shape)
    (grad,) = mg.gradients(out, data, grad_ys=mg.Const(root, dy))
    if static:
        assert grad.shape == shape
    np.testing.assert_array_equal(run(root, grad, feeds), segment_reference(shape, ids, dy))


def test_constant_ids_without_negatives_gather_directly(root):
    data = mg.Placeholder(root.with_op_name("data"), mg.float32, [3, 2])
    out = UnsortedSegmentSum(root, data, np.array([2, 0, 2], np.int32), 3)
    (grad,) = mg.gradients(out, data, grad_ys=np.arange(6, dtype=np.float32).reshape(3, 2))
    assert "GatherV2" in op_types(root.graph) and "GatherNd" not in op_types(root.graph)
    np.testing.assert_array_equal(run(root, grad, {data: np.ones((3, 2))}),
                                  [[4, 5], [0, 1], [4, 5]])  # fmt: skip


def test_an_infinite_gradient_of_a_dropped_id_is_not_nan(root):
    # Negative ids get exact zeros (a select), not 0 * the gathered row.
    data = mg.Placeholder(root.with_op_name("data"), mg.float32, [2])
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [2])
    out = UnsortedSegmentSum(root, data, ids, 1)
    (grad,) = mg.gradients(out, data, grad_ys=np.array([np.inf], np.float32))
    np.testing.assert_array_equal(run(root, grad, {data: [1, 2], ids: [0, -1]}), [np.inf, 0])


@pytest.mark.parametrize("static", [True, False])
def test_no_segments_at_all(root, static):
    # num_segments 0: every id is dropped, the output has no rows, the gradient is zeros
    # (TF's rule fails there: its gather at max(ids, 0) reads row 0 of nothing).
    data = mg.Placeholder(root.with_op_name("data"), mg.float64, [3, 2] if static else None)
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [3] if static else None)
    out = UnsortedSegmentSum(root, data, ids, 0)
    (grad,) = mg.gradients(out, data)
    np.testing.assert_array_equal(run(root, grad, {data: values((3, 2)), ids: [-1, -2, -1]}), 0)


@pytest.mark.parametrize("dtype", [mg.float16, mg.bfloat16, mg.float32, mg.complex64])
def test_unsorted_segment_sum_dtypes(dtype):
    value = values((4, 2))
    if dtype.is_complex:
        value = value + 1j * values((4, 2))
    ids = np.array([1, -1, 1, 0], np.int32)
    assert_gradients_close(
        lambda s, d: UnsortedSegmentSum(s, d, ids, 2), [value.astype(dtype.np_dtype)]
    )


def test_densifying_a_sparse_gradient_is_differentiable():
    # convert_to_tensor's UnsortedSegmentSum is on the path of a second gradient.
    def f(s, p):
        rows = GatherV2(s, p, np.array([1, 1, 0], np.int32), 0)
        (grad,) = mg.gradients(rows, p, grad_ys=rows)  # IndexedSlices(p[ids], ids)
        return mg.convert_to_tensor(grad, scope=s)

    assert_gradients_close(f, [values((3, 2))])


def test_unsorted_segment_sum_second_order():
    ids = np.array([1, -1, 1, 0], np.int32)

    def first(s, d):
        summed = UnsortedSegmentSum(s, d * d, ids, 2)
        return mg.gradients(total(s, summed * summed), d)[0]

    assert_gradients_close(first, [values((4, 2))])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.integers(0, 3), max_size=2), st.lists(st.integers(0, 2), max_size=2),
    st.integers(0, 4), st.booleans(), st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_unsorted_segment_sum_gradient_property(i_shape, row_shape, n, static, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(-2, max(n, 1), size=i_shape).astype(np.int32)  # negatives: dropped
    ids[ids >= n] = -1
    shape = tuple(i_shape) + tuple(row_shape)
    root = mg.Scope.new_root_scope()
    data = mg.Placeholder(root, mg.float64, shape if static else None)
    seg = mg.Placeholder(root, mg.int32, ids.shape if static else None)
    out = UnsortedSegmentSum(root, data, seg, n)
    feeds = {data: rng.standard_normal(shape), seg: ids}
    dy = rng.standard_normal(run(root, out, feeds).shape)
    (grad,) = mg.gradients(out, data, grad_ys=mg.Const(root, dy))
    np.testing.assert_array_equal(run(root, grad, feeds), segment_reference(shape, ids, dy))


# -- ScatterNd ---------------------------------------------------------------------------------

SCATTER_CASES = [
    # (indices, updates shape, output shape): repeated index vectors add up.
    (np.array([[1], [1], [0]], np.int32), (3, 4), (3, 4)),
    (np.array([[1, 2], [0, 0], [1, 2]], np.int64), (3,), (2, 3)),
    (np.array([[[1, 2]], [[0, 3]]], np.int32), (2, 1), (2, 4)),
    (np.array([1], np.int32), (3,), (3, 3)),  # one index vector (1-D indices): one row
    (np.zeros((2, 0), np.int32), (2, 2, 3), (2, 3)),  # depth 0: each update to all of it
    (np.array([[0], [2]], np.int16), (2, 2), (3, 2)),
]


# The forward ScatterNd runs only with int32 or int64 indices (TF's kernels: an int16 row is
# placeable only where an optimizer pass rewrites it); its gradient (GatherNd) takes int16 too,
# checked by test_scatter_nd_gradient_values.
RUNNABLE_SCATTER_CASES = [case for case in SCATTER_CASES if case[0].dtype != np.int16]


@pytest.mark.parametrize("indices, u_shape, shape", RUNNABLE_SCATTER_CASES)
def test_scatter_nd_gradient_matches_central_differences(indices, u_shape, shape):
    target = np.array(shape, indices.dtype)
    assert_gradients_close(lambda s, u: ScatterNd(s, indices, u, target), [values(u_shape)])


@pytest.mark.parametrize("indices, u_shape, shape", SCATTER_CASES)
def test_scatter_nd_gradient_values(root, indices, u_shape, shape):
    updates = mg.Placeholder(root.with_op_name("u"), mg.float64, u_shape)
    out = ScatterNd(root, indices, updates, np.array(shape, indices.dtype))
    dy = values(shape)
    (grad,) = mg.gradients(out, updates, grad_ys=mg.Const(root, dy))
    expected = np.zeros(u_shape)
    depth = indices.shape[-1]
    for position in np.ndindex(*indices.shape[:-1]):
        expected[position] = dy[tuple(int(v) for v in indices[position])] if depth else dy
    np.testing.assert_array_equal(run(root, grad, {updates: values(u_shape)}), expected)


def test_scatter_nd_ignored_vectors_get_no_gradient(root):
    indices = np.array([[1], [5], [-1], [0]], np.int32)

    def f(s, u):
        return ScatterNd(s, indices, u, np.array([3, 2], np.int32), bad_indices_policy="IGNORE")

    assert_gradients_close(f, [values((4, 2))])
    updates = mg.Placeholder(root.with_op_name("u"), mg.float64, [4, 2])
    (grad,) = mg.gradients(f(root, updates), updates)
    np.testing.assert_array_equal(run(root, grad, {updates: values((4, 2))}),
                                  [[1, 1], [0, 0], [0, 0], [1, 1]])  # fmt: skip


def test_scatter_nd_shape_known_only_at_run_time(root):
    indices = mg.Placeholder(root.with_op_name("i"), mg.int32, None)
    updates = mg.Placeholder(root.with_op_name("u"), mg.float64, None)
    shape = mg.Placeholder(root.with_op_name("shape"), mg.int32, [None])
    out = ScatterNd(root, indices, updates, shape)
    dy = mg.Placeholder(root.with_op_name("dy"), mg.float64, None)
    (grad,) = mg.gradients(out, updates, grad_ys=dy)
    dy_value = values((3, 2))
    feeds = {indices: [[2], [2]], updates: values((2, 2)), shape: [3, 2], dy: dy_value}
    np.testing.assert_array_equal(run(root, grad, feeds), [dy_value[2], dy_value[2]])


def test_scatter_nd_second_order():
    indices = np.array([[1, 0], [1, 0], [0, 1]], np.int32)

    def first(s, u):
        out = ScatterNd(s, indices, u * u, np.array([2, 2], np.int32))
        return mg.gradients(total(s, out * out), u)[0]

    assert_gradients_close(first, [values((3,))])


# -- EnsureShape and Assert ----------------------------------------------------------------------


def test_ensure_shape_passes_its_gradient_through(root):
    assert_gradients_close(lambda s, x: EnsureShape(s, x * x, shape=[2, None]), [values((2, 3))])
    table = mg.Placeholder(root.with_op_name("table"), mg.float32, [None, 2])
    checked = EnsureShape(root, table, shape=[4, 2])
    rows = GatherV2(root, checked, np.array([3, 3], np.int32), 0)
    (grad,) = mg.gradients(rows, table)
    assert isinstance(grad, mg.IndexedSlices)  # passed through as it is
    value = run(root, grad, {table: np.zeros((4, 2), np.float32)})
    np.testing.assert_array_equal(value.indices, [3, 3])


def test_assert_is_not_differentiable(root):
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, [2])
    rule = mg.registry.gradient_rule("Assert")
    assert rule.fn is None
    check = Assert(root, ops.All(root, ops.Less(root, x, 5.0), 0), [x])
    y = ops.Square(root.with_control_dependencies(check), x)
    (grad,) = mg.gradients(y, x)
    np.testing.assert_array_equal(run(root, grad, {x: [1.0, 2.0]}), [2.0, 4.0])
    with pytest.raises(mg.InvalidArgumentError, match="assertion failed"):
        run(root, [y, grad], {x: [1.0, 9.0]})  # the forward still checks
