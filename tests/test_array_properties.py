"""Property tests of the array ops against numpy references written differently from the
kernels: element by element through index arithmetic (`np.indices`, `np.ndindex`), never the
numpy function the kernel calls. Random shapes (0-d and empty included), dtypes and
parameters; inputs fed through placeholders whose static shapes know some, all or none of the
dims, and the static shape each op infers is checked to be compatible with its result.
"""

from __future__ import annotations

import numpy as np
from _gather_helpers import ALL_DTYPES, sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops  # noqa: F401
from minigraph import Placeholder, Scope, Session
from ops import array as A

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DIMS = st.lists(st.integers(0, 4), max_size=4).map(tuple)
DTYPES = st.sampled_from(ALL_DTYPES)


def feed_and_run(build, arrays, knowledge):
    """build(scope, *placeholders) -> output; the placeholders' static shapes keep every dim
    ("all"), every other dim ("some") or no rank ("none"). Returns (static shape, value)."""
    scope = Scope.new_root_scope()
    holders = []
    for a in arrays:
        some = [d if i % 2 else None for i, d in enumerate(a.shape)]
        shape = {"all": list(a.shape), "some": some, "none": None}[knowledge]
        holders.append(Placeholder(scope, mg.as_dtype(a.dtype), shape=shape).output)
    out = build(scope, *holders)
    out = out if isinstance(out, mg.Output) else out.output
    value = Session(scope).run(out, dict(zip(holders, arrays)))
    assert out.shape.is_compatible_with(value.shape), (out.shape, value.shape)
    assert type(value) is np.ndarray and value.dtype == out.dtype.np_dtype
    return out.shape, value


KNOWLEDGE = st.sampled_from(["all", "some", "none"])


@SETTINGS
@given(DIMS, DTYPES, st.data(), KNOWLEDGE)
def test_tile(dims, dtype, data, knowledge):
    x = sample(dtype, dims, 1)
    reps = data.draw(st.lists(st.integers(0, 3), min_size=len(dims), max_size=len(dims)))
    multiples = np.array(reps, np.int32).reshape(-1)
    _, got = feed_and_run(lambda s, h: A.Tile(s, h, multiples), [x], knowledge)
    out_shape = tuple(d * r for d, r in zip(dims, reps))
    # out[i] = x[i mod dims], dimension by dimension.
    index = np.indices(out_shape, sparse=True)
    want = x[tuple(i % d for i, d in zip(index, dims))] if x.ndim else x.copy()
    assert got.shape == out_shape
    np.testing.assert_array_equal(got, np.broadcast_to(want, out_shape))


@SETTINGS
@given(DIMS, DTYPES, st.data(), KNOWLEDGE)
def test_transpose(dims, dtype, data, knowledge):
    x = sample(dtype, dims, 2)
    perm = data.draw(st.permutations(range(len(dims))))
    negative = [p - len(dims) if data.draw(st.booleans()) else p for p in perm]
    _, got = feed_and_run(lambda s, h: A.Transpose(s, h, np.array(negative, np.int64).reshape(-1)),
                          [x], knowledge)  # fmt: skip
    out_shape = tuple(dims[p] for p in perm)
    # y[j] = x[k] with k[perm[i]] = j[i].
    j = np.indices(out_shape)
    k = [None] * len(dims)
    for i, p in enumerate(perm):
        k[p] = j[i]
    want = x[tuple(k)] if dims else x
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(DIMS, DTYPES, st.data(), KNOWLEDGE)
def test_slice(dims, dtype, data, knowledge):
    x = sample(dtype, dims, 3)
    begin = [data.draw(st.integers(0, d)) for d in dims]
    size = [
        data.draw(st.sampled_from([-1, data.draw(st.integers(0, d - b))]))
        for d, b in zip(dims, begin)
    ]
    _, got = feed_and_run(
        lambda s, h: A.Slice(s, h, np.array(begin, np.int32).reshape(-1),
                             np.array(size, np.int32).reshape(-1)), [x], knowledge)  # fmt: skip
    want = x
    for axis, (d, b, n) in enumerate(zip(dims, begin, size)):
        want = np.take(want, np.arange(b, d if n == -1 else b + n), axis=axis)
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(DIMS, DTYPES, st.integers(1, 3), st.data(), KNOWLEDGE)
def test_pack_and_unpack(dims, dtype, n, data, knowledge):
    xs = [sample(dtype, dims, 10 + k) for k in range(n)]
    axis = data.draw(st.integers(-len(dims) - 1, len(dims)))
    _, got = feed_and_run(lambda s, *h: A.Pack(s, list(h), axis=axis), xs, knowledge)
    a = axis % (len(dims) + 1)
    assert got.shape == dims[:a] + (n,) + dims[a:]
    for k, x in enumerate(xs):  # the k-th slice along `axis` is the k-th input
        np.testing.assert_array_equal(got[(slice(None),) * a + (k,)], x)
    stacked = got
    for k in range(n):
        _, part = feed_and_run(
            lambda s, h, k=k: A.Unpack(s, h, n, axis=axis)[k], [stacked], knowledge
        )
        np.testing.assert_array_equal(part, xs[k])


@SETTINGS
@given(
    st.lists(st.sampled_from([1, 1, 2, 3, 0]), max_size=4).map(tuple), DTYPES, st.data(), KNOWLEDGE
)
def test_expand_dims_and_squeeze(dims, dtype, data, knowledge):
    x = sample(dtype, dims, 4)
    dim = data.draw(st.integers(-len(dims) - 1, len(dims)))
    _, got = feed_and_run(lambda s, h: A.ExpandDims(s, h, dim), [x], knowledge)
    at = dim % (len(dims) + 1)
    np.testing.assert_array_equal(got, x.reshape(dims[:at] + (1,) + dims[at:]))
    ones = [i for i, d in enumerate(dims) if d == 1]
    chosen = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    chosen = [c - len(dims) if data.draw(st.booleans()) else c for c in chosen]
    kept = [d for i, d in enumerate(dims) if (i not in {c % len(dims) for c in chosen}
            if chosen else d != 1)]  # fmt: skip
    _, got = feed_and_run(lambda s, h: A.Squeeze(s, h, squeeze_dims=chosen), [x], knowledge)
    np.testing.assert_array_equal(got, x.reshape(kept))


@st.composite
def broadcastable(draw, count: int):
    """`count` shapes that broadcast together: suffixes of one shape, some dims made 1."""
    out = draw(st.lists(st.integers(0, 3), max_size=3))
    shapes = []
    for _ in range(count):
        tail = out[len(out) - draw(st.integers(0, len(out))) :]
        shapes.append(tuple(1 if draw(st.integers(0, 2)) == 0 else d for d in tail))
    return shapes, tuple(out)


def _gather_broadcast(x: np.ndarray, out_shape: tuple) -> np.ndarray:
    """x broadcast to out_shape by index arithmetic: index 0 along its dims of size 1."""
    if not x.ndim:
        return np.full(out_shape, x[()], dtype=x.dtype)
    index = np.indices(out_shape)[len(out_shape) - x.ndim :]
    return x[tuple(i if d != 1 else np.zeros_like(i) for i, d in zip(index, x.shape))]


@SETTINGS
@given(broadcastable(3), DTYPES, KNOWLEDGE)
def test_select_v2(case, dtype, knowledge):
    (cs, ts, es), out_shape = case
    cond = sample(mg.bool_, cs, 5)
    t, e = sample(dtype, ts, 6), sample(dtype, es, 7)
    _, got = feed_and_run(lambda s, c, a, b: A.SelectV2(s, c, a, b), [cond, t, e], knowledge)
    shape = np.broadcast_shapes(cs, ts, es)
    want = np.empty(shape, dtype=t.dtype)
    for idx in np.ndindex(*shape):
        pick = [_at(v, idx) for v in (cond, t, e)]
        want[idx] = pick[1] if pick[0] else pick[2]
    np.testing.assert_array_equal(got, want)


def _at(v: np.ndarray, idx: tuple) -> object:
    """v[idx] under broadcasting: trailing alignment, index 0 on dims of size 1."""
    own = idx[len(idx) - v.ndim :] if v.ndim else ()
    return v[tuple(0 if d == 1 else i for i, d in zip(own, v.shape))]


@SETTINGS
@given(broadcastable(1), DTYPES, KNOWLEDGE)
def test_broadcast_to(case, dtype, knowledge):
    (xs,), target = case
    x = sample(dtype, xs, 8)
    _, got = feed_and_run(
        lambda s, h: A.BroadcastTo(s, h, np.array(target, np.int64).reshape(-1)), [x], knowledge
    )
    np.testing.assert_array_equal(got, _gather_broadcast(x, target))


@SETTINGS
@given(DIMS, DTYPES, st.integers(0, 4), st.data(), KNOWLEDGE)
def test_one_hot(dims, dtype, depth, data, knowledge):
    index = data.draw(st.sampled_from([np.uint8, np.int8, np.int32, np.int64]))
    low = 0 if index is np.uint8 else -2
    count = int(np.prod(dims))
    indices = np.array(data.draw(st.lists(st.integers(low, depth + 1), min_size=count,
                                          max_size=count)), dtype=index).reshape(dims)  # fmt: skip
    pair = sample(dtype, (2,), 9)
    on, off = pair[0], pair[1]
    axis = data.draw(st.integers(-1, len(dims)))
    _, got = feed_and_run(
        lambda s, h: A.OneHot(s, h, depth, on, off, axis=axis), [indices], knowledge
    )
    at = len(dims) if axis == -1 else axis
    shape = dims[:at] + (depth,) + dims[at:]
    want = np.empty(shape, dtype=pair.dtype)
    for idx in np.ndindex(*shape):
        j = idx[at]
        want[idx] = on if indices[idx[:at] + idx[at + 1 :]] == j else off
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(st.lists(st.integers(0, 4), max_size=4), DTYPES, KNOWLEDGE)
def test_fill_zeros_ones(dims, dtype, knowledge):
    value = sample(dtype, (), 11)
    dims_array = np.array(dims, np.int64).reshape(-1)
    _, got = feed_and_run(lambda s, d, v: A.Fill(s, d, v), [dims_array, value], knowledge)
    assert got.shape == tuple(dims)
    assert all(got[idx] == value for idx in np.ndindex(*dims))
    x = sample(dtype, tuple(dims), 12)
    _, zeros = feed_and_run(lambda s, h: A.ZerosLike(s, h), [x], knowledge)
    zero = b"" if dtype.is_string else dtype.np_dtype.type(0)
    assert zeros.shape == x.shape and all(zeros[idx] == zero for idx in np.ndindex(*dims))
    if not dtype.is_string:
        _, ones = feed_and_run(lambda s, h: A.OnesLike(s, h), [x], knowledge)
        assert all(ones[idx] == dtype.np_dtype.type(1) for idx in np.ndindex(*dims))
