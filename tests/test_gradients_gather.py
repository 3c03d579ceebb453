"""Gradient rules of GatherV2 and GatherNd (ops/gather_ops.py): against central differences
(minigraph.testing), against numpy references, the sparse form (IndexedSlices) exactly where TF
gives it, shapes known only at run time, the IGNORE policy, placement, second order, and a
gradient graph written to a file and run by the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _gradients_gather_helpers import (
    dense,
    gather_grad_reference,
    gather_nd_grad_reference,
    op_types,
    run,
    total,
)

import minigraph as mg
import ops  # noqa: F401 - the op library's rules and operators
from minigraph.testing import assert_gradients_close
from ops import GatherNd, GatherV2, gather, gather_nd

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(21)


@pytest.fixture
def root():
    return mg.Scope.new_root_scope()


def params_value(shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


# -- GatherV2 ----------------------------------------------------------------------------------

# (params shape, indices, axis, batch_dims): repeated indices in most, every axis and sign.
GATHER_CASES = [
    ((5, 3), np.array([4, 1, 4, 4], np.int32), 0, 0),
    ((5, 3), np.array(2, np.int32), 0, 0),  # a scalar index
    ((5, 3, 2), np.array([[1, 1], [0, 4]], np.int64), 0, 0),
    ((4,), np.array([3, 3, 0], np.int32), 0, 0),
    ((5, 3, 2), np.array([2, 0, 2], np.int32), 1, 0),
    ((5, 3, 2), np.array([[1], [1]], np.int32), 2, 0),
    ((5, 3, 2), np.array([1, 0, 1], np.int32), -1, 0),
    ((5, 3, 2), np.array([2, 2], np.int32), -2, 0),
    ((5, 3, 2), np.array([4, 4, 1], np.int32), -3, 0),  # negative, normalising to 0: dense
    ((3, 4, 2), np.array([[3, 3], [0, 1], [2, 3]], np.int32), 1, 1),
    ((3, 4, 2), np.array([[1, 1, 0], [0, 0, 0], [1, 0, 1]], np.int32), 2, 1),
    ((3, 2, 4), np.array([[[3, 3], [0, 1]], [[2, 2], [1, 0]], [[0, 0], [3, 1]]], np.int32), 2, 2),
    ((3, 2, 4), np.array([[[1], [0]], [[1], [1]], [[0], [0]]], np.int32), 1, -2),
    ((3, 4), np.array([[3, 0, 3], [1, 1, 2], [0, 0, 0]], np.int32), -1, 1),
]


@pytest.mark.parametrize("shape, indices, axis, batch_dims", GATHER_CASES)
def test_gather_v2_gradient_matches_central_differences(shape, indices, axis, batch_dims):
    def f(s, p):
        return gather(s, p, indices, axis=axis, batch_dims=batch_dims)

    assert_gradients_close(f, [params_value(shape)])


@pytest.mark.parametrize("shape, indices, axis, batch_dims", GATHER_CASES)
def test_gather_v2_gradient_form_and_values(root, shape, indices, axis, batch_dims):
    # Sparse exactly for the literal axis 0 (TF's rule); dense, params' shape, otherwise.
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, shape)
    y = gather(root.with_op_name("y"), p, indices, axis=axis, batch_dims=batch_dims)
    dy_value = params_value(tuple(y.shape.dims))
    (grad,) = mg.gradients(y, p, grad_ys=dy_value)
    assert isinstance(grad, mg.IndexedSlices) == (axis == 0)
    value = run(root, grad, {p: params_value(shape)})
    if axis == 0:
        assert isinstance(value, mg.IndexedSlicesValue)
        np.testing.assert_array_equal(value.indices, indices.reshape(-1))
        assert value.values.shape == (indices.size,) + shape[1:]
        assert value.dense_shape.tolist() == list(shape)
    else:
        assert grad.shape == shape and value.shape == shape
    expected = gather_grad_reference(shape, indices, axis, batch_dims, dy_value)
    np.testing.assert_allclose(dense(value, shape), expected, rtol=1e-12)


def test_repeated_ids_add_up_and_the_slices_are_the_output_gradient(root):
    table = mg.Placeholder(root.with_op_name("table"), mg.float32, [4, 2])
    ids = mg.Const(root.with_op_name("ids"), np.array([[2, 2], [0, 2]], np.int32))
    rows = GatherV2(root.with_op_name("rows"), table, ids, 0)
    dy = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    (grad,) = mg.gradients(rows, table, grad_ys=dy)
    assert grad.dtype is mg.float32 and grad.shape == [4, 2]
    assert grad.dense_shape.op.type == "Shape"
    value = run(root, grad, {table: np.zeros((4, 2), np.float32)})
    np.testing.assert_array_equal(value.values, dy.reshape(4, 2))
    np.testing.assert_array_equal(value.indices, [2, 2, 0, 2])
    np.testing.assert_array_equal(value.dense_shape, [4, 2])
    densified = run(root, mg.convert_to_tensor(grad), {table: np.zeros((4, 2), np.float32)})
    np.testing.assert_array_equal(densified, [[4, 5], [0, 0], [0 + 2 + 6, 1 + 3 + 7], [0, 0]])


@pytest.mark.parametrize("dtype", [mg.float16, mg.bfloat16, mg.float32, mg.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_float_dtypes(dtype, axis):
    value = params_value((4, 3)).astype(dtype.np_dtype)
    ids = np.array([1, 0, 1], np.int32)
    assert_gradients_close(lambda s, p: gather(s, p, ids, axis=axis), [value])


@pytest.mark.parametrize("axis", [0, 1])
def test_complex_params(axis):
    value = (params_value((3, 3)) + 1j * params_value((3, 3))).astype(np.complex128)
    ids = np.array([2, 2, 0], np.int64)
    assert_gradients_close(lambda s, p: gather(s, p, ids, axis=axis), [value])


@pytest.mark.parametrize("index_dtype", [np.int16, np.int32, np.int64])
def test_index_dtypes(root, index_dtype):
    # IndexedSlices take int32 or int64 indices: int16 ones are widened to int32.
    p = mg.Placeholder(root.with_op_name("p"), mg.float32, [6, 2])
    ids = np.array([5, 0, 5], index_dtype)
    (sparse,) = mg.gradients(GatherV2(root, p, ids, 0), p)
    expected = {np.int16: mg.int32, np.int32: mg.int32, np.int64: mg.int64}[index_dtype]
    assert sparse.indices.dtype is expected
    (dense_grad,) = mg.gradients(GatherV2(root, p, (ids % 2).reshape(1, 3), 1), p)
    value = run(root, [sparse, dense_grad], {p: np.zeros((6, 2), np.float32)})
    np.testing.assert_array_equal(value[0].indices, [5, 0, 5])
    np.testing.assert_array_equal(value[1], [[1, 2]] * 6)


def test_no_gradient_for_indices_and_axis(root):
    p = mg.Placeholder(root.with_op_name("p"), mg.float32, [3, 2])
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [2])
    axis = mg.Placeholder(root.with_op_name("axis"), mg.int32, [])
    y = GatherV2(root.with_op_name("y"), p, ids, axis)
    rule = mg.registry.gradient_rule("GatherV2")
    with root.as_default():
        grads = rule.fn(y.operation, mg.Const(root, np.ones((3, 2), np.float32)))
    assert grads[1] is None and grads[2] is None


# -- shapes known only at run time --------------------------------------------------------------

RUN_TIME_CASES = [
    # (params static shape, indices static shape, axis, batch_dims, params value shape, indices)
    ([None, 3], [None], 0, 0, (5, 3), np.array([4, 0, 4], np.int32)),
    (None, None, 0, 0, (5, 3, 2), np.array([[1, 4], [1, 1]], np.int32)),
    ([None, None], [None], 1, 0, (2, 4), np.array([3, 3, 1], np.int64)),
    (None, None, 1, 0, (3, 4, 2), np.array([[0, 3]], np.int32)),
    (None, None, -1, 0, (3, 4, 2), np.array([1, 1, 0], np.int32)),
    ([3, None, 2], [3, None], 1, 1, (3, 4, 2), np.array([[0, 3], [2, 2], [1, 0]], np.int32)),
    (None, None, 2, 1, (3, 4, 2), np.array([[0, 1], [1, 1], [1, 0]], np.int32)),
    (None, [3, 2], 2, -1, (3, 4, 2), np.array([[0, 1], [1, 1], [1, 0]], np.int32)),
    (None, None, 2, -1, (3, 4, 2), np.array([[0, 1], [1, 1], [1, 0]], np.int32)),
    (None, None, 0, 0, (0, 3), np.zeros((0,), np.int32)),
    (None, None, 1, 0, (2, 0, 3), np.zeros((4,), np.int32)[:0]),
    (None, None, 1, 1, (2, 3, 0), np.array([[0, 2], [1, 1]], np.int32)),
]


@pytest.mark.parametrize("p_shape, i_shape, axis, bd, shape, indices", RUN_TIME_CASES)
def test_shapes_known_only_at_run_time(root, p_shape, i_shape, axis, bd, shape, indices):
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, p_shape)
    i = mg.Placeholder(root.with_op_name("i"), mg.as_dtype(indices.dtype), i_shape)
    y = gather(root.with_op_name("y"), p, i, axis=axis, batch_dims=bd)
    dy = mg.Placeholder(root.with_op_name("dy"), mg.float64, None)
    (grad,) = mg.gradients(y, p, grad_ys=dy)
    assert isinstance(grad, mg.IndexedSlices) == (axis == 0)
    p_value = params_value(shape)
    y_value = run(root, y, {p: p_value, i: indices})
    dy_value = params_value(y_value.shape)
    value = run(root, grad, {p: p_value, i: indices, dy: dy_value})
    expected = gather_grad_reference(shape, indices, axis, bd, dy_value)
    np.testing.assert_allclose(dense(value, shape), expected, rtol=1e-12)


@pytest.mark.parametrize("axis_value", [0, 1, 2, -1, -3])
def test_an_axis_known_only_at_run_time_is_dense(root, axis_value):
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, [3, 4, 2])
    axis = mg.Placeholder(root.with_op_name("axis"), mg.int64, [])
    indices = np.array([[1, 0], [1, 1]], np.int32)
    y = GatherV2(root.with_op_name("y"), p, indices, axis)
    (grad,) = mg.gradients(y, p)
    assert isinstance(grad, mg.Output) and grad.shape == [3, 4, 2]
    p_value = params_value((3, 4, 2))
    y_value = run(root, y, {p: p_value, axis: axis_value})
    got = run(root, grad, {p: p_value, axis: axis_value})
    expected = gather_grad_reference((3, 4, 2), indices, axis_value, 0, np.ones(y_value.shape))
    np.testing.assert_array_equal(got, expected)


def test_empty_ids_give_an_empty_sparse_gradient(root):
    p = mg.Placeholder(root.with_op_name("p"), mg.float32, [4, 3])
    (grad,) = mg.gradients(GatherV2(root, p, np.zeros((0, 2), np.int32), 0), p)
    value = run(root, grad, {p: np.ones((4, 3), np.float32)})
    assert value.values.shape == (0, 3) and value.indices.shape == (0,)
    np.testing.assert_array_equal(run(root, mg.convert_to_tensor(grad), {p: np.ones((4, 3))}), 0)


def test_slices_of_no_element_keep_their_count(root):
    # values [ids, 0]: no -1 in the reshape (it cannot be read off zero elements).
    p = mg.Placeholder(root.with_op_name("p"), mg.float32, [4, 0])
    i = mg.Placeholder(root.with_op_name("i"), mg.int32, [None, None])
    (grad,) = mg.gradients(GatherV2(root, p, i, 0), p)
    value = run(root, grad, {p: np.ones((4, 0), np.float32), i: [[1, 2], [3, 3], [0, 0]]})
    assert value.values.shape == (6, 0)


# -- bad_indices_policy ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, indices, axis, batch_dims",
    [
        ((4, 2), np.array([3, -1, 7, 3], np.int32), 0, 0),
        ((4, 2), np.array([[1, 4], [-2, 0]], np.int64), 0, 0),
        ((2, 4), np.array([3, 9, -1, 0], np.int32), 1, 0),
        # A bad id in batch row 1 must not reach a row of batch row 0 or 2 (the offsets).
        ((3, 4), np.array([[0, 4], [-1, 3], [5, 1]], np.int32), 1, 1),
    ],
)
def test_ignored_out_of_range_ids_get_no_gradient(root, shape, indices, axis, batch_dims):
    def f(s, p):
        return GatherV2(s, p, indices, axis, batch_dims=batch_dims, bad_indices_policy="IGNORE")

    assert_gradients_close(f, [params_value(shape)])
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, shape)
    y = f(root, p)
    (grad,) = mg.gradients(y, p)
    value = run(root, grad, {p: params_value(shape)})
    if axis == 0:  # the sparse gradient leaves them out
        valid = indices[(indices >= 0) & (indices < shape[0])]
        np.testing.assert_array_equal(value.indices, valid.reshape(-1))
    expected = gather_grad_reference(shape, indices, axis, batch_dims, np.ones(y.shape.dims))
    np.testing.assert_array_equal(dense(value, shape), expected)


def test_default_policy_keeps_tf_s_indices(root):
    # As TF: the ids pass through unchecked; densifying refuses one past the end.
    p = mg.Placeholder(root.with_op_name("p"), mg.float32, [3, 2])
    i = mg.Placeholder(root.with_op_name("i"), mg.int32, [2])
    (grad,) = mg.gradients(GatherV2(root, p, i, 0), p)
    with pytest.raises(mg.InvalidArgumentError, match="out of range"):
        run(root, mg.convert_to_tensor(grad), {p: np.ones((3, 2), np.float32), i: [0, 3]})


# -- sparse gradients reaching a gather ----------------------------------------------------------


@pytest.mark.parametrize("inner_ids", [np.array([1, 3, 1], np.int32), np.array([[1, 3], [3, 0]])])
def test_a_gather_of_a_gather_stays_sparse(root, inner_ids):
    table = mg.Placeholder(root.with_op_name("table"), mg.float64, [4, 2])
    inner = GatherV2(root.with_op_name("inner"), table, inner_ids, 0)
    outer = GatherV2(root.with_op_name("outer"), inner, np.array([2 % len(inner_ids), 0, 0]), 0)
    dy = params_value(tuple(outer.shape.dims))
    (grad,) = mg.gradients(outer, table, grad_ys=dy)
    assert isinstance(grad, mg.IndexedSlices)
    assert "UnsortedSegmentSum" not in op_types(root.graph)  # nothing was densified
    value = run(root, grad, {table: params_value((4, 2))})
    middle = gather_grad_reference(tuple(inner.shape.dims), np.array([2 % len(inner_ids), 0, 0]),
                                   0, 0, dy)  # fmt: skip
    expected = gather_grad_reference((4, 2), inner_ids, 0, 0, middle)
    np.testing.assert_allclose(dense(value, (4, 2)), expected, rtol=1e-12)


def test_a_sparse_gradient_reaching_another_axis_is_densified(root):
    table = mg.Placeholder(root.with_op_name("table"), mg.float64, [2, 3])
    cols = GatherV2(root.with_op_name("cols"), table, np.array([2, 2, 0]), 1)
    rows = GatherV2(root.with_op_name("rows"), cols, np.array([1, 1]), 0)
    (grad,) = mg.gradients(rows, table)
    assert isinstance(grad, mg.Output)
    value = run(root, grad, {table: params_value((2, 3))})
    np.testing.assert_array_equal(value, [[0, 0, 0], [2, 0, 4]])


def test_gathers_of_a_scalar_index_take_the_dense_path_for_sparse_gradients(root):
    # rows = table[1] has shape [3]; a sparse gradient of it indexes table's dim 1, not rows.
    table = mg.Placeholder(root.with_op_name("table"), mg.float64, [2, 3])
    row = GatherV2(root.with_op_name("row"), table, np.int32(1), 0)
    picked = GatherV2(root.with_op_name("picked"), row, np.array([2, 2]), 0)
    (grad,) = mg.gradients(picked, table)
    value = run(root, grad, {table: params_value((2, 3))})
    np.testing.assert_array_equal(dense(value, (2, 3)), [[0, 0, 0], [0, 0, 2]])


# -- placement -------------------------------------------------------------------------------


def test_the_dense_shape_is_colocated_with_params(root):
    table = mg.Placeholder(root.with_op_name("table").with_device("/device:CPU:0"), mg.float32,
                           [5, 2])  # fmt: skip
    rows = GatherV2(root.with_op_name("rows").with_device("/device:GPU:0"), table, [1, 1], 0)
    (grad,) = mg.gradients(rows, table)
    shape_op = grad.dense_shape.op
    assert shape_op.colocation_group == "table" and shape_op.requested_device is None
    assert grad.values.op.requested_device == mg.DeviceSpec.from_string("/device:GPU:0")
    (dense_grad,) = mg.gradients(GatherV2(root, table, [1, 1], 1), table)
    shapes = [op for op in root.graph.operations if op.type == "Shape"]
    assert all(op.colocation_group == "table" for op in shapes)
    assert dense_grad.shape == [5, 2]


# -- second order -------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1])
def test_second_order(axis):
    ids = np.array([2, 0, 2], np.int32)

    def first(s, p):
        rows = gather(s, p, ids, axis=axis)
        (grad,) = mg.gradients(total(s, rows * rows * rows), p)
        return mg.convert_to_tensor(grad, scope=s)

    assert_gradients_close(first, [params_value((3, 3))])


def test_second_order_batched():
    ids = np.array([[1, 1], [0, 1]], np.int32)

    def first(s, p):
        rows = gather(s, p, ids, axis=2, batch_dims=1)
        (grad,) = mg.gradients(total(s, rows * rows), p)
        return grad

    assert_gradients_close(first, [params_value((2, 3, 2))])


# -- GatherNd ---------------------------------------------------------------------------------

# (params shape, indices, batch_dims): every index depth, repeated index vectors.
GATHER_ND_CASES = [
    ((4, 3), np.array([[1, 2], [1, 2], [3, 0]], np.int32), 0),
    ((4, 3), np.array([[1], [1], [3]], np.int64), 0),  # [N, 1]: sparse, as TF
    ((4, 3), np.array([[[1], [1]], [[0], [2]]], np.int32), 0),
    ((4, 3), np.array([3, 1], np.int32), 0),
    ((4, 3), np.zeros((3, 0), np.int32), 0),  # depth 0: whole params, three times
    ((3, 2, 2), np.array([[2, 1, 0], [2, 1, 0]], np.int32), 0),
    ((3, 2, 2), np.array([[[1], [0]], [[1], [1]], [[0], [0]]], np.int32), 1),
    ((3, 2, 2), np.array([[[1, 1]], [[0, 1]], [[1, 1]]], np.int32), 1),
    ((3, 2, 2), np.array([[[1, 0], [1, 1]], [[0, 0], [0, 0]], [[1, 1], [0, 1]]], np.int32), 1),
    ((2, 3, 2), np.array([[[[2], [2]]], [[[0], [1]]]], np.int32), 1),  # [2, 1, 2, 1]
    ((2, 2, 3), np.array([[[2], [0]], [[1], [1]]], np.int32), 2),
    ((2, 2, 3), np.zeros((2, 2, 0), np.int32), 2),
]


@pytest.mark.parametrize("shape, indices, batch_dims", GATHER_ND_CASES)
def test_gather_nd_gradient_matches_central_differences(shape, indices, batch_dims):
    assert_gradients_close(
        lambda s, p: gather_nd(s, p, indices, batch_dims=batch_dims), [params_value(shape)]
    )


@pytest.mark.parametrize("shape, indices, batch_dims", GATHER_ND_CASES)
def test_gather_nd_gradient_form_and_values(root, shape, indices, batch_dims):
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, shape)
    y = gather_nd(root.with_op_name("y"), p, indices, batch_dims=batch_dims)
    dy_value = params_value(tuple(y.shape.dims))
    (grad,) = mg.gradients(y, p, grad_ys=dy_value)
    sparse = batch_dims == 0 and indices.ndim == 2 and indices.shape[1] == 1
    assert isinstance(grad, mg.IndexedSlices) == sparse
    if not sparse:
        assert "ScatterNd" in op_types(root.graph)
    value = run(root, grad, {p: params_value(shape)})
    expected = gather_nd_grad_reference(shape, indices, batch_dims, dy_value)
    np.testing.assert_allclose(dense(value, shape), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "p_shape, i_shape, bd, shape, indices",
    [
        (None, None, 0, (4, 3), np.array([[1, 2], [1, 2]], np.int32)),
        ([None, 3], [None, 1], 0, (4, 3), np.array([[3], [3], [0]], np.int32)),
        (None, None, 1, (3, 2, 2), np.array([[[1], [0]], [[1], [1]], [[0], [0]]], np.int64)),
        ([None, 2, 2], [None, None, 2], 1, (3, 2, 2), np.array([[[1, 1]], [[0, 1]], [[1, 1]]])),
        (None, None, 2, (2, 2, 3), np.array([[[2], [0]], [[1], [1]]], np.int32)),
        (None, None, 1, (2, 0, 3), np.zeros((2, 4, 1), np.int32)[:, :0]),
    ],
)
def test_gather_nd_shapes_known_only_at_run_time(root, p_shape, i_shape, bd, shape, indices):
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, p_shape)
    i = mg.Placeholder(root.with_op_name("i"), mg.as_dtype(indices.dtype), i_shape)
    y = GatherNd(root.with_op_name("y"), p, i, batch_dims=bd)
    dy = mg.Placeholder(root.with_op_name("dy"), mg.float64, None)
    (grad,) = mg.gradients(y, p, grad_ys=dy)
    p_value = params_value(shape)
    dy_value = params_value(run(root, y, {p: p_value, i: indices}).shape)
    value = run(root, grad, {p: p_value, i: indices, dy: dy_value})
    expected = gather_nd_grad_reference(shape, indices, bd, dy_value)
    np.testing.assert_allclose(dense(value, shape), expected, rtol=1e-12)


@pytest.mark.parametrize("indices", [[[2], [2]], [[2, 1], [2, 1]]])
def test_gather_nd_int16_indices(root, indices):
    indices = np.array(indices, np.int16)
    p = mg.Placeholder(root.with_op_name("p"), mg.float32, [3, 2])
    y = GatherNd(root, p, indices)
    (grad,) = mg.gradients(y, p)
    got = dense(run(root, grad, {p: np.zeros((3, 2), np.float32)}), (3, 2))
    dy = np.ones(y.shape.dims)
    np.testing.assert_array_equal(got, gather_nd_grad_reference((3, 2), indices, 0, dy))


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_ignored_index_vectors_get_no_gradient(root, batch_dims):
    shape = (3, 4)
    indices = np.array([[[1, 3], [7, 0]], [[-1, 2], [0, 0]], [[1, 1], [2, 9]]], np.int32)
    if batch_dims:
        indices = indices[:, :, 1:]

    def f(s, p):
        return GatherNd(s, p, indices, batch_dims=batch_dims, bad_indices_policy="IGNORE")

    assert_gradients_close(f, [params_value(shape)])
    p = mg.Placeholder(root.with_op_name("p"), mg.float64, shape)
    (grad,) = mg.gradients(f(root, p), p)
    dy = np.ones(f(root, p).shape.dims)
    np.testing.assert_array_equal(
        run(root, grad, {p: params_value(shape)}),
        gather_nd_grad_reference(shape, indices, batch_dims, dy),
    )


def test_gather_nd_second_order():
    indices = np.array([[1, 0], [1, 0], [2, 1]], np.int32)

    def first(s, p):
        picked = gather_nd(s, p, indices)
        (grad,) = mg.gradients(total(s, picked * picked * picked), p)
        return grad

    assert_gradients_close(first, [params_value((3, 2))])


# -- gradient graphs are graphs: a file the CLI runs ----------------------------------------------


def test_the_cli_runs_a_gradient_graph_file(tmp_path):
    root = mg.Scope.new_root_scope()
    table = mg.Placeholder(root.with_op_name("table"), mg.float32, [4, 2])
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [None])
    rows = gather(root.with_op_name("rows"), table, ids)
    cols = gather(root.with_op_name("cols"), table, [1, 1], axis=1)
    (sparse,) = mg.gradients(rows, table)
    (dense_grad,) = mg.gradients([rows, cols], table, name="both")
    path = tmp_path / "grad.pb"
    mg.write_graph(root.graph, path)
    result = subprocess.run(
        [sys.executable, "-m", "minigraph", "run", str(path), "--feed", "ids:0=[3, 0, 3]",
         "--feed", "table:0=[[1, 2], [3, 4], [5, 6], [7, 8]]",
         "--fetch", sparse.indices.name, "--fetch", sparse.values.name,
         "--fetch", dense_grad.name],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"{sparse.indices.name} (int32 [3]):\n[3, 0, 3]" in out
    assert f"{sparse.values.name} (float32 [3, 2]):\n[[1., 1.],\n [1., 1.],\n [1., 1.]]" in out
    both = "[[1., 3.],\n [0., 2.],\n [0., 2.],\n [2., 4.]]"
    assert f"{dense_grad.name} (float32 [4, 2]):\n{both}" in out
