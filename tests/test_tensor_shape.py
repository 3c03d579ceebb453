"""TensorShape: partially known shapes (minigraph/tensor_shape.py)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigraph import TensorShape
from minigraph.errors import InvalidArgumentError
from minigraph.tensor_shape import as_shape, scalar, unknown_shape

UNKNOWN = TensorShape(None)


# -- construction and queries --------------------------------------------------------------------


def test_unknown_rank():
    assert UNKNOWN.dims is None
    assert UNKNOWN.rank is None
    assert UNKNOWN.ndims is None
    assert not UNKNOWN.is_fully_defined()
    assert UNKNOWN.num_elements() is None
    assert str(UNKNOWN) == "<unknown>"
    assert repr(UNKNOWN) == "TensorShape(None)"
    assert UNKNOWN == unknown_shape()
    assert UNKNOWN[0] is None
    assert UNKNOWN[1:] == UNKNOWN


def test_unknown_rank_as_list_len_and_iter_raise():
    with pytest.raises(InvalidArgumentError, match=r"as_list\(\) is not defined on an unknown"):
        UNKNOWN.as_list()
    with pytest.raises(InvalidArgumentError, match="Cannot take the length of shape with unknown"):
        len(UNKNOWN)
    with pytest.raises(InvalidArgumentError, match="Cannot iterate over a shape with unknown"):
        list(UNKNOWN)


def test_known_rank_with_unknown_dims():
    shape = TensorShape([2, None, 4])
    assert shape.dims == (2, None, 4)
    assert shape.rank == 3
    assert len(shape) == 3
    assert list(shape) == [2, None, 4]
    assert shape.as_list() == [2, None, 4]
    assert not shape.is_fully_defined()
    assert shape.num_elements() is None
    assert str(shape) == "[2,?,4]"
    assert repr(shape) == "TensorShape([2, None, 4])"
    assert shape[1] is None
    assert shape[-1] == 4
    assert shape[1:] == TensorShape([None, 4])


def test_minus_one_means_unknown_dim():
    assert TensorShape([-1, 3]).dims == (None, 3)
    assert str(TensorShape([-1, 3])) == "[?,3]"


def test_scalar_and_fully_defined_shapes():
    assert scalar() == TensorShape([])
    assert str(scalar()) == "[]"
    assert scalar().rank == 0
    assert scalar().num_elements() == 1
    assert TensorShape([2, 3, 4]).num_elements() == 24
    assert TensorShape([0, 5]).num_elements() == 0
    assert TensorShape([2, 3]).is_fully_defined()


def test_numpy_integer_dims_are_accepted():
    shape = TensorShape([np.int64(2), np.int32(3)])
    assert shape.dims == (2, 3)
    assert all(type(d) is int for d in shape.dims)
    assert TensorShape(np.zeros((4, 5)).shape) == [4, 5]


@pytest.mark.parametrize("dim", [-2, -10])
def test_negative_dims_other_than_minus_one_raise(dim):
    with pytest.raises(
        InvalidArgumentError, match=f"a dimension must be an int >= 0 or None; got {dim}"
    ):
        TensorShape([1, dim])


@pytest.mark.parametrize("dim", [True, 2.0, "3", [1]])
def test_non_integer_dims_raise(dim):
    with pytest.raises(InvalidArgumentError, match="a dimension must be an int >= 0 or None"):
        TensorShape([dim])


def test_copy_construction_and_helpers():
    shape = TensorShape([1, None])
    assert TensorShape(shape) == shape
    assert as_shape(shape) is shape
    assert as_shape([1, None]) == shape
    assert as_shape(None) == UNKNOWN
    assert unknown_shape(2) == TensorShape([None, None])
    assert unknown_shape(0) == scalar()


# -- combination ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, merged",
    [
        ([2, None], [None, 3], [2, 3]),
        ([2, 3], [2, 3], [2, 3]),
        (None, [1, None], [1, None]),
        ([1, None], None, [1, None]),
        (None, None, None),
        ([], [], []),
        ([None, None], [None, 5], [None, 5]),
    ],
)
def test_merge_with(a, b, merged):
    assert TensorShape(a).merge_with(b) == TensorShape(merged)
    assert TensorShape(a).merge_with(TensorShape(b)) == TensorShape(merged)


def test_merge_with_incompatible_rank_raises():
    with pytest.raises(
        InvalidArgumentError,
        match=r"Shapes \[2,\?\] and \[2,3,4\] are not compatible: ranks 2 and 3 differ",
    ):
        TensorShape([2, None]).merge_with([2, 3, 4])


def test_merge_with_incompatible_dim_raises():
    with pytest.raises(
        InvalidArgumentError,
        match=r"Shapes \[2,3\] and \[\?,4\] are not compatible: dimension 1 is 3 vs 4",
    ):
        TensorShape([2, 3]).merge_with([None, 4])


@pytest.mark.parametrize(
    "a, b, compatible",
    [
        (None, [1, 2], True),
        ([1, 2], None, True),
        ([1, None], [1, 7], True),
        ([1, 2], [1, 2], True),
        ([1, 2], [1, 3], False),
        ([1, 2], [1, 2, 3], False),
        ([], [None], False),
        ([], [], True),
    ],
)
def test_is_compatible_with(a, b, compatible):
    assert TensorShape(a).is_compatible_with(b) is compatible
    assert TensorShape(b).is_compatible_with(TensorShape(a)) is compatible


@pytest.mark.parametrize(
    "a, b, result",
    [
        ([1, 2], [3], [1, 2, 3]),
        ([], [None], [None]),
        ([1], [], [1]),
        (None, [1], None),
        ([1], None, None),
    ],
)
def test_concatenate(a, b, result):
    assert TensorShape(a).concatenate(b) == TensorShape(result)


def test_with_rank():
    assert UNKNOWN.with_rank(2) == TensorShape([None, None])
    shape = TensorShape([1, 2])
    assert shape.with_rank(2) is shape
    with pytest.raises(InvalidArgumentError, match="^Shape must be rank 3 but is rank 2$"):
        shape.with_rank(3)


def test_with_rank_at_least():
    assert UNKNOWN.with_rank_at_least(3) is UNKNOWN
    assert TensorShape([1, 2]).with_rank_at_least(2) == [1, 2]
    with pytest.raises(InvalidArgumentError, match="^Shape must be at least rank 1 but is rank 0$"):
        scalar().with_rank_at_least(1)


def test_with_rank_at_most():
    assert UNKNOWN.with_rank_at_most(0) is UNKNOWN
    assert TensorShape([1]).with_rank_at_most(1) == [1]
    with pytest.raises(InvalidArgumentError, match="^Shape must be at most rank 1 but is rank 2$"):
        TensorShape([1, 2]).with_rank_at_most(1)


# -- value protocol ------------------------------------------------------------------------------


def test_equality_and_hash():
    a = TensorShape([2, None])
    b = TensorShape([2, -1])
    assert a == b
    assert hash(a) == hash(b)
    assert a == [2, None]
    assert a == (2, None)
    assert a != [2, 3]
    assert a != TensorShape([2])
    assert UNKNOWN == TensorShape(None)
    assert hash(UNKNOWN) == hash(TensorShape(None))
    assert UNKNOWN != []
    assert UNKNOWN != scalar()
    assert a != "[2,?]"
    assert len({a, b, TensorShape([2, 3]), UNKNOWN, TensorShape(None)}) == 3
    assert {a: "x"}[TensorShape([2, None])] == "x"


def test_immutability():
    shape = TensorShape([1, 2])
    with pytest.raises(AttributeError, match="has no setter|can't set attribute"):
        shape.dims = (3,)
    with pytest.raises(AttributeError, match="has no setter|can't set attribute"):
        shape.rank = 5
    with pytest.raises(AttributeError, match="has no attribute 'extra'"):
        shape.extra = 1
    assert shape == [1, 2]


def test_list_input_is_copied():
    dims = [1, 2]
    shape = TensorShape(dims)
    dims.append(3)
    assert shape == [1, 2]
    listed = shape.as_list()
    listed.append(9)
    assert shape == [1, 2]


@pytest.mark.parametrize("dims", [None, [], [None], [1, None, 3]])
def test_pickle_round_trip(dims):
    shape = TensorShape(dims)
    assert pickle.loads(pickle.dumps(shape)) == shape


# -- property tests ------------------------------------------------------------------------------

_dims = st.lists(st.one_of(st.none(), st.integers(0, 4)), max_size=4)
shapes = st.one_of(st.none(), _dims).map(TensorShape)


@given(shapes, shapes)
def test_compatibility_is_symmetric_and_matches_merge(a, b):
    compatible = a.is_compatible_with(b)
    assert compatible == b.is_compatible_with(a)
    if compatible:
        merged = a.merge_with(b)
        assert merged == b.merge_with(a)
        assert merged.is_compatible_with(a) and merged.is_compatible_with(b)
    else:
        with pytest.raises(InvalidArgumentError, match="are not compatible"):
            a.merge_with(b)
        with pytest.raises(InvalidArgumentError, match="are not compatible"):
            b.merge_with(a)


@given(shapes, shapes)
def test_merge_keeps_every_known_dim(a, b):
    if not a.is_compatible_with(b):
        return
    merged = a.merge_with(b)
    if a.rank is None and b.rank is None:
        assert merged.rank is None
        return
    assert merged.rank == (a.rank if a.rank is not None else b.rank)
    for shape in (a, b):
        if shape.rank is not None:
            for m, d in zip(merged.dims, shape.dims):
                assert d is None or m == d


@given(shapes)
def test_merge_with_self_and_unknown_is_identity(a):
    assert a.merge_with(a) == a
    assert a.merge_with(None) == a
    assert UNKNOWN.merge_with(a) == a
    assert a.is_compatible_with(a)


@given(shapes, shapes, shapes)
def test_merge_is_associative(a, b, c):
    try:
        left = a.merge_with(b).merge_with(c)
    except InvalidArgumentError:
        left = "error"
    try:
        right = a.merge_with(b.merge_with(c))
    except InvalidArgumentError:
        right = "error"
    assert left == right


@given(shapes, shapes)
def test_concatenate_rank(a, b):
    joined = a.concatenate(b)
    if a.rank is None or b.rank is None:
        assert joined.rank is None
    else:
        assert joined.dims == a.dims + b.dims


@given(_dims)
def test_num_elements_and_str(dims):
    shape = TensorShape(dims)
    if None in dims:
        assert shape.num_elements() is None
    else:
        assert shape.num_elements() == math.prod(dims)
    assert str(shape) == "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"
