"""StridedSlice against Python/numpy basic indexing: random shapes and keys (indices, slices
with any step, `...`, None), each encoded into begin/end/strides and the five masks here, from
TF's documented meaning of the masks (independently of ops/array.py's parser), run through the
op and compared with numpy's `x[key]`; the static shape with constant, partially known and
unknown inputs; the masks' corner cases; and the kernel's run-time checks. tests/test_array_tf.py
compares the op with TensorFlow itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops  # noqa: F401
from minigraph import Placeholder, Scope, Session, TensorShape
from ops import array as A

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def encode(key: tuple) -> tuple[list[int], list[int], list[int], dict[str, int]]:
    """begin, end, strides and masks for a numpy basic-indexing key, from the documentation of
    tf.strided_slice: bit i of each mask speaks of key entry i."""
    begin, end, strides = [], [], []
    masks = dict.fromkeys(
        ["begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"], 0
    )
    for i, part in enumerate(key):
        if part is Ellipsis:
            masks["ellipsis_mask"] |= 1 << i
            begin.append(0), end.append(0), strides.append(1)  # noqa: B018 - ignored values
        elif part is None:
            masks["new_axis_mask"] |= 1 << i
            begin.append(0), end.append(0), strides.append(1)  # noqa: B018
        elif isinstance(part, slice):
            if part.start is None:
                masks["begin_mask"] |= 1 << i
            if part.stop is None:
                masks["end_mask"] |= 1 << i
            begin.append(part.start or 0)
            end.append(part.stop or 0)
            strides.append(1 if part.step is None else part.step)
        else:
            masks["shrink_axis_mask"] |= 1 << i
            begin.append(part)
            end.append(part + 1)
            strides.append(1)
    return begin, end, strides, masks


@st.composite
def keys(draw, valid: bool = True):
    """(shape, key): a numpy basic-indexing key for an array of that shape. Indices are in
    range when `valid`; slice bounds are anything (numpy and TF clamp them)."""
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=4)))
    consuming = draw(st.lists(st.sampled_from(["index", "slice", "slice"]), max_size=len(shape)))
    parts: list = []
    for kind in consuming:
        parts.extend([None] * draw(st.integers(0, 1)) if draw(st.integers(0, 3)) == 0 else [])
        parts.append(kind)
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), Ellipsis)
    if draw(st.integers(0, 4)) == 0:
        parts.append(None)
    # Which dim each consuming entry takes: from the front before `...`, from the back after.
    after = parts[parts.index(Ellipsis) + 1 :] if Ellipsis in parts else []
    n_after = sum(1 for p in after if p is not None)
    first_after = len(shape) - n_after
    key: list = []
    front = 0
    seen_ellipsis = False
    for part in parts:
        if part is None or part is Ellipsis:
            seen_ellipsis = seen_ellipsis or part is Ellipsis
            key.append(part)
            continue
        if seen_ellipsis:
            dim, first_after = first_after, first_after + 1
        else:
            dim, front = front, front + 1
        size = shape[dim]
        if part == "index":
            if valid and size == 0:
                key.append(slice(None))
            elif valid:
                key.append(draw(st.integers(-size, size - 1)))
            else:
                key.append(draw(st.integers(-size - 3, size + 3)))
        else:
            bound = st.one_of(st.none(), st.integers(-8, 8))
            step = draw(st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2, -5])))
            key.append(slice(draw(bound), draw(bound), step))
    return shape, tuple(key)


def _slice_op(scope, x, key, index=np.int32, **fed):
    begin, end, strides, masks = encode(key)
    values = [np.array(v, index).reshape(len(v)) for v in (begin, end, strides)]
    return A.StridedSlice(scope, x, *values, **masks), values


@SETTINGS
@given(keys(), st.sampled_from([np.int16, np.int32, np.int64]))
def test_strided_slice_is_numpy_basic_indexing(case, index):
    shape, key = case
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    scope = Scope.new_root_scope()
    out, _ = _slice_op(scope, data, key, index)
    want = data[key]
    assert out.shape == TensorShape(want.shape)  # constant bounds: the exact shape
    got = Session(scope).run(out)
    assert type(got) is np.ndarray and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(keys(), st.sampled_from(["partial", "rank", "unknown"]))
def test_static_shapes_with_unknown_dims_and_bounds(case, knowledge):
    # Placeholders for the input (some dims unknown) and for begin/end (values unknown): the
    # static shape is compatible with the result, and what it knows is what TF's shape
    # function knows without the bounds (masked ranges, indices, new axes).
    shape, key = case
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    begin, end, strides, masks = encode(key)
    scope = Scope.new_root_scope()
    static = [None if (knowledge == "rank" or i % 2) else d for i, d in enumerate(shape)]
    x = Placeholder(scope, mg.float32, shape=None if knowledge == "unknown" else static).output
    b = Placeholder(scope, mg.int32, shape=[len(begin)]).output
    e = Placeholder(scope, mg.int32, shape=[len(end)]).output
    out = A.StridedSlice(scope, x, b, e, np.array(strides, np.int32).reshape(-1), **masks)
    want = data[key]
    if knowledge == "unknown":
        assert out.shape.rank is None
    else:
        assert out.shape.rank == want.ndim
        assert out.shape == TensorShape(_known_without_bounds(static, key))
    got = Session(scope).run(
        out,
        {x: data, b: np.array(begin, np.int32).reshape(-1), e: np.array(end, np.int32).reshape(-1)},
    )
    np.testing.assert_array_equal(got, want)


def _known_without_bounds(static: list, key: tuple) -> list:
    """The dims known from `static` and `key` alone, without the bounds' values."""
    entries = list(key)
    if Ellipsis not in entries:
        entries.append(Ellipsis)
    consumed = sum(1 for k in entries if k is not None and k is not Ellipsis)
    dims: list = []
    at = 0
    for part in entries:
        if part is None:
            dims.append(1)
        elif part is Ellipsis:
            span = len(static) - consumed
            dims.extend(static[at : at + span])
            at += span
        elif isinstance(part, slice):
            d = static[at]
            whole = part.start is None and part.stop is None
            dims.append(len(range(d)[:: part.step or 1]) if whole and d is not None else None)
            at += 1
        else:
            at += 1  # an index: the dim goes
    return dims


@SETTINGS
@given(keys(valid=False))
def test_out_of_range_indices_fail_where_numpy_raises_index_error(case):
    shape, key = case
    data = np.zeros(shape, np.float32)
    try:
        want = data[key]
    except IndexError:
        want = None
    scope = Scope.new_root_scope()
    if want is None:
        with pytest.raises(mg.InvalidArgumentError, match="out of bounds"):
            _slice_op(scope, data, key)  # constant bounds and shape: at construction
        holder = Placeholder(scope, mg.float32).output
        out, _ = _slice_op(scope, holder, key)
        with pytest.raises(mg.InvalidArgumentError, match="out of bounds"):
            Session(scope).run(out, {holder: data})
    else:
        np.testing.assert_array_equal(Session(scope).run(_slice_op(scope, data, key)[0]), want)


# -- masks, one at a time --------------------------------------------------------------------

X = np.arange(2 * 3 * 4).reshape(2, 3, 4)


@pytest.mark.parametrize(
    "begin, end, strides, masks, want",
    [
        ([0, 1], [0, 3], [1, 1], {"begin_mask": 1, "end_mask": 1}, X[:, 1:3]),
        ([1, -1], [0, 0], [1, -1], {"end_mask": 3}, X[1:, ::-1]),
        ([0, 0], [0, 2], [1, 1], {"ellipsis_mask": 1}, X[..., 0:2]),
        ([1, 0], [2, 0], [1, 1], {"ellipsis_mask": 2}, X[1:2, ...]),
        ([0, 0, 0], [0, 0, 0], [1, 1, 1], {"new_axis_mask": 5, "ellipsis_mask": 2},
         X[None, ..., None]),
        ([-1, 0], [0, 0], [1, 1], {"shrink_axis_mask": 1, "ellipsis_mask": 2}, X[-1, ...]),
        ([0, 2], [0, 0], [1, 1], {"new_axis_mask": 1, "shrink_axis_mask": 1}, X[None, 2:]),
        ([0], [0], [1], {"ellipsis_mask": 1, "new_axis_mask": 1}, X[...]),  # `...` wins
        ([1, 2, 3], [2, 3, 4], [1, 1, 1], {"shrink_axis_mask": 7}, X[1, 2, 3]),
        ([5, -9], [-9, 9], [-1, 2], {}, X[5:-9:-1, -9:9:2]),
        ([0], [0], [-2], {"begin_mask": 1, "end_mask": 1}, X[::-2]),
        ([], [], [], {}, X),
        ([0], [0], [1], {"begin_mask": -1, "end_mask": -1}, X[:]),  # bits past the spec: unused
        ([0, 1], [0, 2], [1, 1], {"ellipsis_mask": -(2**31)}, X[0:0, 1:2]),  # bit 31 only
    ],
)  # fmt: skip
def test_masks(begin, end, strides, masks, want):
    scope = Scope.new_root_scope()
    out = A.StridedSlice(
        scope, X, *[np.array(v, np.int32).reshape(len(v)) for v in (begin, end, strides)], **masks
    )
    assert out.shape == TensorShape(want.shape)
    got = Session(scope).run(out)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_end_is_ignored_on_a_shrunk_axis():
    # TF re-creates end as begin + 1: x[-1] is (begin -1, end 0), not an empty interval.
    scope = Scope.new_root_scope()
    out = A.StridedSlice(scope, X, [-1], [0], [1], shrink_axis_mask=1)
    np.testing.assert_array_equal(Session(scope).run(out), X[-1])
    b = Placeholder(scope, mg.int64, shape=[1]).output
    e = Placeholder(scope, mg.int64, shape=[1]).output
    fed = A.StridedSlice(scope, X, b, e, np.array([1], np.int64), shrink_axis_mask=1)
    got = Session(scope).run(fed, {b: np.array([1]), e: np.array([-100])})
    np.testing.assert_array_equal(got, X[1])


def test_extreme_bounds_clamp_and_extreme_strides_step_out():
    big = np.iinfo(np.int64)
    scope = Scope.new_root_scope()
    outs = [
        A.StridedSlice(scope, X, np.array([big.min]), np.array([big.max]), np.array([1])),
        A.StridedSlice(scope, X, np.array([big.max]), np.array([big.min]), np.array([-1])),
        A.StridedSlice(scope, X, np.array([0]), np.array([3]), np.array([big.max])),
        A.StridedSlice(scope, X, np.array([2]), np.array([big.min]), np.array([big.min])),
    ]
    got = Session(scope).run(outs)
    np.testing.assert_array_equal(got[0], X)
    np.testing.assert_array_equal(got[1], X[::-1])
    np.testing.assert_array_equal(got[2], X[0 : 3 : big.max])
    np.testing.assert_array_equal(got[3], X[2 :: big.min])
    assert [o.shape for o in outs] == [TensorShape(g.shape) for g in got]


def test_results_are_views_of_the_input_and_inputs_stay_unwritten(cpu_only):
    # The kernel returns views (untrusted: the session copies what would alias a feed).
    scope = Scope.new_root_scope()
    x = Placeholder(scope, mg.float32, shape=[4, 4]).output
    out = A.StridedSlice(scope, x, [0, 3], [0, 0], [2, -1], begin_mask=1, end_mask=3)
    data = np.arange(16, dtype=np.float32).reshape(4, 4)
    before = data.copy()
    got = Session(scope).run(out, {x: data})
    np.testing.assert_array_equal(got, data[::2, 3::-1])
    assert not np.shares_memory(got, data)
    np.testing.assert_array_equal(data, before)


def test_a_constant_spec_is_planned_once_per_input_shape(cpu_only):
    scope = Scope.new_root_scope()
    x = Placeholder(scope, mg.float32, shape=None).output
    out = A.StridedSlice(scope, x, [1], [0], [1], end_mask=1)
    with Session(scope) as sess:
        for shape in [(3,), (5, 2), (3,), (1, 1, 1)]:
            data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
            np.testing.assert_array_equal(sess.run(out, {x: data}), data[1:])
