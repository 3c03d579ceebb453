"""`x[...]` on Outputs and single-output builders: TF's `Tensor.__getitem__` (ops.array's
`slice_helper`), registered by ops/array.py as the `getitem` tensor operator. Values against
numpy's basic indexing, the graph it builds (node names, Consts or Packs for the bounds, the
Index dtype, the masks), the current scope, scalar tensors as indices and bounds, and TF's
errors for the keys it refuses, with the graph left unchanged after any error.
tests/test_array_tf.py compares random keys with TF itself, masks and Index dtype included.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_strided_slice import keys

import minigraph as mg
import ops  # noqa: F401 - registers the operator
from minigraph import Placeholder, Scope, Session, TensorShape
from ops import array as A

X = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5)


@pytest.fixture
def root():
    return Scope.new_root_scope()


def ph(scope, dtype, shape, name=None):
    return Placeholder(scope.with_op_name(name) if name else scope, dtype, shape=shape).output


def test_the_operator_is_slice_helper():
    assert mg.registry.operator_function("getitem") is A.slice_helper


def test_slices_steps_newaxis_and_ellipsis(root):
    x = ph(root, mg.float32, [None, 4, 5], "x")
    y = x[1:, ::-1, None, ...]
    assert y.op.type == "StridedSlice" and y.op.name == "strided_slice"
    assert y.shape == TensorShape([None, 4, 1, 5])
    attrs = {k: y.op.get_attr(k) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                          "new_axis_mask", "shrink_axis_mask")}  # fmt: skip
    assert attrs == {
        "begin_mask": 2,
        "end_mask": 3,
        "ellipsis_mask": 8,
        "new_axis_mask": 4,
        "shrink_axis_mask": 0,
    }  # fmt: skip (TF's, for the same key)
    begin, end, strides = (i.op for i in y.op.inputs[1:])
    assert [op.type for op in (begin, end, strides)] == ["Const"] * 3
    assert [op.name for op in (begin, end, strides)] == ["stack", "stack_1", "stack_2"]
    assert begin.get_attr("value").tolist() == [1, 0, 0, 0]
    assert end.get_attr("value").tolist() == [0, 0, 0, 0]
    assert strides.get_attr("value").tolist() == [1, -1, 1, 1]
    assert y.op.get_attr("Index") is mg.int32
    np.testing.assert_array_equal(Session(root).run(y, {x: X}), X[1:, ::-1, None, ...])
    assert x[0].op.name == "strided_slice_1" and x[:, 2].op.name == "strided_slice_2"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys())
def test_getitem_is_numpy_basic_indexing(case):
    shape, key = case
    data = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    scope = Scope.new_root_scope()
    x = mg.Const(scope, data).output
    y = x[key]
    want = data[key]
    assert y.shape == TensorShape(want.shape)
    np.testing.assert_array_equal(Session(scope).run(y), want)
    assert x[list(key)].shape == y.shape  # a list is a tuple, as in TF


def test_builders_slice_their_output_and_multi_output_builders_pick_one(root):
    filled = A.Fill(root, [3, 2], 7)
    assert filled[1:].shape == TensorShape([2, 2])
    parts = A.Unpack(root, np.arange(6).reshape(3, 2), 3)
    assert parts[2] is parts.outputs[2]  # indexing a list output selects, as before
    got = Session(root).run([filled[-1, ::-1], parts[2][0]])
    assert got[0].tolist() == [7, 7] and got[1].tolist() == 4


def test_scalar_tensors_as_indices_and_bounds(root):
    x = ph(root, mg.float32, [None, 4, 5], "x")
    i = ph(root, mg.int32, [], "i")
    j = ph(root, mg.int32, None, "j")  # unknown rank: accepted, checked at run time
    by_index, by_bounds, stepped = x[i], x[:, i:j], x[0, ::i]
    assert by_index.shape == TensorShape([4, 5])  # an index removes the dim, whatever it is
    assert by_bounds.shape == TensorShape([None, None, 5])
    assert by_index.op.inputs[1].op.type == "Pack"
    assert by_index.op.inputs[2].op.type == "Pack"  # the index itself: end is ignored
    assert by_index.op.inputs[3].op.type == "Const"
    assert by_bounds.op.get_attr("Index") is mg.int32
    got = Session(root).run([by_index, by_bounds, stepped], {x: X, i: -1, j: 3})
    np.testing.assert_array_equal(got[0], X[-1])
    np.testing.assert_array_equal(got[1], X[:, -1:3])
    np.testing.assert_array_equal(got[2], X[0, ::-1])


@pytest.mark.parametrize("dtype", [mg.int16, mg.int64])
def test_int16_and_int64_tensors_give_their_index_dtype(root, dtype):
    x = ph(root, mg.float32, [2, 4, 5], "x")
    k = ph(root, dtype, [], "k")
    y = x[k, 1:]
    assert y.op.get_attr("Index") is dtype
    assert all(inp.dtype is dtype for inp in y.op.inputs[1:])
    np.testing.assert_array_equal(Session(root).run(y, {x: X, k: 1}), X[1, 1:])


@pytest.mark.parametrize("dtype", [mg.int16, mg.int64])
def test_omitted_bounds_of_a_slice_take_its_tensors_dtype(root, dtype):
    # x[k:]: TF fills in end as a tensor of k's dtype, so no cast is needed (and int16 works).
    x = ph(root, mg.float32, [2, 4, 5], "x")
    k = ph(root, dtype, [], "k")
    y = x[k:, ::2]
    assert y.op.get_attr("Index") is dtype
    assert "Cast" not in {op.type for op in root.graph.operations}
    np.testing.assert_array_equal(Session(root).run(y, {x: X, k: 1}), X[1:, ::2])


def test_python_ints_beyond_int32_make_the_bounds_int64(root):
    x = ph(root, mg.float32, [None], "x")
    i = ph(root, mg.int32, [], "i")
    big, cast = x[2**40 :], x[i : 2**40]
    assert big.op.get_attr("Index") is mg.int64
    assert {inp.op.type for inp in big.op.inputs[1:]} == {"Const"}  # built as int64 directly
    assert cast.op.get_attr("Index") is mg.int64
    assert [inp.op.type for inp in cast.op.inputs[1:]] == ["Cast", "Const", "Const"]
    got = Session(root).run([big, cast], {x: np.arange(5, dtype=np.float32), i: 3})
    assert got[0].tolist() == [] and got[1].tolist() == [3.0, 4.0]


def test_the_current_scope_is_used(root):
    x = ph(root, mg.float32, [2, 4, 5], "x")
    with root.new_sub_scope("outer").with_device("/cpu:0").as_default():
        y = x[0]
    assert y.op.name == "outer/strided_slice"
    assert y.op.inputs[1].op.name == "outer/stack"
    assert y.op.requested_device.to_string() == "/device:CPU:0"
    assert x[0].op.name == "strided_slice"  # outside the block: the graph's root scope


def test_empty_key_and_python_quirks_kept(root):
    x = mg.Const(root, X).output
    whole = x[()]
    assert [inp.op.name for inp in whole.op.inputs[1:]] == ["Const_1"] * 3  # one empty Const
    scalar = np.int64(1), np.array(1, np.int32), True
    got = Session(root).run([whole, x[scalar[0]], x[scalar[1]], x[scalar[2], 0], x[[1, 2]]])
    np.testing.assert_array_equal(got[0], X)
    np.testing.assert_array_equal(got[1], X[1])
    np.testing.assert_array_equal(got[2], X[1])
    np.testing.assert_array_equal(got[3], X[1, 0])  # True is the index 1, as in TF
    np.testing.assert_array_equal(got[4], X[1, 2])  # a list is a tuple, as in TF


_MESSAGE = (
    "Only integers, slices \\(`:`\\), ellipsis \\(`...`\\), tf.newaxis \\(`None`\\) and scalar "
    "tf.int32/tf.int64 tensors are valid indices, got "
)


@pytest.mark.parametrize(
    "key, match",
    [
        (1.0, _MESSAGE + "1.0"),
        ("a", _MESSAGE + "'a'"),
        ([[1]], _MESSAGE + "\\[1\\]"),
        (np.array([1, 2]), _MESSAGE + "array"),
        (slice(0.5, None), _MESSAGE + "0.5"),
        (slice(None, None, "x"), _MESSAGE + "'x'"),
        (2**63, "outside the int64 range"),
        ((Ellipsis, 0, np.float32(1)), _MESSAGE),
        (True, "boolean mask"),
        (np.array([True, False]), "boolean mask"),
    ],
)  # fmt: skip
def test_keys_tf_refuses_are_type_errors(root, key, match):
    x = ph(root, mg.float32, [2, 4, 5], "x")
    before = len(root.graph.operations)
    with pytest.raises(TypeError, match=match):
        x[key]
    assert len(root.graph.operations) == before


def test_tensor_keys_tf_refuses(root):
    x = ph(root, mg.float32, [2, 4, 5], "x")
    floats = ph(root, mg.float32, [], "f")
    vector = ph(root, mg.int32, [2], "v")
    mask = ph(root, mg.bool_, [2], "m")
    i32, i16 = ph(root, mg.int32, [], "i32"), ph(root, mg.int16, [], "i16")
    i64 = ph(root, mg.int64, [], "i64")
    before = len(root.graph.operations)
    for key, match in [
        (floats, _MESSAGE + "<Output 'f:0'"),
        (vector, _MESSAGE),
        (mask, "boolean mask"),
        ((i32, i64),
         "Tensors in list passed to 'values' of 'Pack' Op have types \\[int32, int64\\]"),
        (slice(i16, 3), "Input 'end' of 'StridedSlice' Op has type int32 that does not match type "
                        "int16 of argument 'begin'"),
    ]:  # fmt: skip
        with pytest.raises(TypeError, match=match):
            x[key]
    assert len(root.graph.operations) == before


def test_keys_the_shape_function_refuses_leave_the_graph_unchanged(root):
    x = ph(root, mg.float32, [2, 4, 5], "x")
    i = ph(root, mg.int32, [], "i")
    before = [op.name for op in root.graph.operations]
    for key, match in [
        ((0, 0, 0, 0), "Index out of range using input dim 3; input has only 3 dims"),
        ((2,), "slice index 2 of dimension 0 out of bounds"),
        ((Ellipsis, Ellipsis), "Multiple ellipses in slice spec not allowed"),
        ((slice(None, None, 0),), "strides\\[0\\] must be non-zero"),
        ((i, 2**40), "2\\*\\*40|1099511627776|int32"),
    ]:
        with pytest.raises(mg.InvalidArgumentError, match=match):
            x[key]
    assert [op.name for op in root.graph.operations] == before
    assert x[0].op.name == "strided_slice"  # no name was used up by the failures


def test_an_index_from_another_graph_is_refused(root):
    x = ph(root, mg.float32, [2, 4, 5], "x")
    other = ph(Scope.new_root_scope(), mg.int32, [], "i")
    before = len(root.graph.operations)
    with pytest.raises(mg.InvalidArgumentError, match="different graph"):
        x[other]
    assert len(root.graph.operations) == before


def test_run_time_errors_of_tensor_indices(root):
    x = ph(root, mg.float32, [None, 4, 5], "x")
    i = ph(root, mg.int32, None, "i")
    with pytest.raises(mg.InvalidArgumentError, match="slice index 7 of dimension 0 out of bounds"):
        Session(root).run(x[i], {x: X, i: 7})
    with pytest.raises(mg.InvalidArgumentError, match="Expected begin, end, and strides"):
        Session(root).run(x[i], {x: X, i: [[1]]})
