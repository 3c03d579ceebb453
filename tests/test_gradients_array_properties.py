"""Property tests of the array family's gradient rules (ops/array.py): random shapes, perms,
axes, multiples, Slice blocks, StridedSlice keys (through `x[...]`, the keys of
tests/test_strided_slice.py) and broadcasts, each input's static shape fully known, partly
known, of known rank only or unknown, and the ops' shape-like inputs constant or known only at
run time. Each gradient is compared with the independent copy reference
(tests/_gradients_array_helpers.adjoint) for a random dy; a sample is also checked against
central differences in float32.
"""

from __future__ import annotations

import numpy as np
from _gradients_array_helpers import adjoint, hidden, knowledge_shape, run_gradients
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_strided_slice import keys

from minigraph.testing import assert_gradients_close
from ops import array as A

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SHAPES = st.lists(st.integers(0, 3), max_size=4).map(tuple)
NONEMPTY_RANK = st.lists(st.integers(0, 3), min_size=1, max_size=4).map(tuple)
KNOWLEDGE = st.sampled_from(["static", "partial", "dims", "rank"])


def values_of(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def check(build, forward, values, knowledge, seed=0):
    """minigraph's gradients of build over placeholders of that knowledge, against the copy
    reference of `forward`, for a random dy."""
    dy = np.random.default_rng(seed + 1).standard_normal(np.shape(forward(*values)))
    shapes = [knowledge_shape(np.shape(x), knowledge) for x in values]
    got, y = run_gradients(build, values, shapes, dy)
    assert np.shape(y) == dy.shape
    for g, want in zip(got, adjoint(forward, values, dy)):
        assert g.shape == want.shape and g.dtype == want.dtype
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


def constant_or_hidden(scope, value, fed):
    return hidden(scope, value) if fed else np.asarray(value, np.int32)


@SETTINGS
@given(SHAPES, st.data(), KNOWLEDGE, st.booleans())
def test_transpose(shape, data, knowledge, fed):
    perm = data.draw(st.permutations(list(range(len(shape)))))
    # Negative entries count from the end.
    perm = [p - len(shape) if data.draw(st.booleans()) else p for p in perm]
    check(lambda s, x: A.Transpose(s, x, constant_or_hidden(s, perm, fed)),
          lambda x: x.transpose([p % len(shape) for p in perm]) if shape else x,
          [values_of(shape, 1)], knowledge)  # fmt: skip


@SETTINGS
@given(keys(), KNOWLEDGE)
def test_strided_slice_keys(case, knowledge):
    shape, key = case
    check(lambda s, x: x[key], lambda x: x[key], [values_of(shape, 2)], knowledge)


@SETTINGS
@given(SHAPES, st.data(), KNOWLEDGE, st.booleans())
def test_slice(shape, data, knowledge, fed):
    begin, size = [], []
    for d in shape:
        b = data.draw(st.integers(0, d))
        begin.append(b)
        size.append(data.draw(st.sampled_from([-1, *range(d - b + 1)])))
    want = tuple(slice(b, d if z == -1 else b + z) for b, z, d in zip(begin, size, shape))
    check(lambda s, x: A.Slice(s, x, constant_or_hidden(s, begin, fed),
                               constant_or_hidden(s, size, fed)),
          lambda x: x[want], [values_of(shape, 3)], knowledge)  # fmt: skip


@SETTINGS
@given(NONEMPTY_RANK, st.data(), KNOWLEDGE, st.booleans())
def test_concat(shape, data, knowledge, fed):
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    n = data.draw(st.integers(2, 4))
    values = []
    for i in range(n):
        own = list(shape)
        own[axis] = data.draw(st.integers(0, 3))
        values.append(values_of(tuple(own), 10 + i))
    check(lambda s, *xs: A.ConcatV2(s, list(xs), constant_or_hidden(s, axis, fed)),
          lambda *xs: np.concatenate(xs, axis), values, knowledge)  # fmt: skip


@SETTINGS
@given(SHAPES, st.data(), KNOWLEDGE)
def test_pack_and_unpack(shape, data, knowledge):
    rank = len(shape)
    n = data.draw(st.integers(1, 3))
    axis = data.draw(st.integers(-rank - 1, rank))
    values = [values_of(shape, 20 + i) for i in range(n)]
    check(lambda s, *xs: A.Pack(s, list(xs), axis=axis),
          lambda *xs: np.stack(xs, axis), values, knowledge)  # fmt: skip
    if rank == 0:
        return
    axis = data.draw(st.integers(-rank, rank - 1))
    num = shape[axis]
    if num == 0:
        return  # no outputs: nothing to differentiate
    # Every output used, in another order: Pack of the outputs reversed.
    check(lambda s, x: A.Pack(s, A.Unpack(s, x, num, axis=axis).outputs[::-1]),
          lambda x: np.stack([np.take(x, i, axis) for i in range(num)][::-1]),
          [values_of(shape, 4)], knowledge)  # fmt: skip


@SETTINGS
@given(SHAPES, st.data(), KNOWLEDGE, st.booleans())
def test_expand_dims_squeeze_and_reshape(shape, data, knowledge, fed):
    rank = len(shape)
    dim = data.draw(st.integers(-rank - 1, rank))
    check(lambda s, x: A.ExpandDims(s, x, constant_or_hidden(s, dim, fed)),
          lambda x: np.expand_dims(x, dim), [values_of(shape, 5)], knowledge)  # fmt: skip
    ones = [i for i, d in enumerate(shape) if d == 1]
    named = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    squeezed = tuple(d for i, d in enumerate(shape) if (i not in named if named else d != 1))
    check(lambda s, x: A.Squeeze(s, x, squeeze_dims=named),
          lambda x: x.reshape(squeezed), [values_of(shape, 6)], knowledge)  # fmt: skip
    target = list(data.draw(st.permutations(list(shape)))) + [1] * data.draw(st.integers(0, 1))
    if target and 0 not in target and data.draw(st.booleans()):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    check(lambda s, x: A.Reshape(s, x, constant_or_hidden(s, target, fed)),
          lambda x: x.reshape(target), [values_of(shape, 7)], knowledge)  # fmt: skip


@SETTINGS
@given(SHAPES, st.data(), KNOWLEDGE, st.booleans())
def test_tile(shape, data, knowledge, fed):
    multiples = [data.draw(st.integers(0, 3)) for _ in shape]
    check(lambda s, x: A.Tile(s, x, constant_or_hidden(s, multiples, fed)),
          lambda x: np.tile(x, multiples) if shape else x, [values_of(shape, 8)],
          knowledge)  # fmt: skip


@st.composite
def broadcastable(draw, count):
    """`count` shapes that broadcast together, and their broadcast."""
    out = draw(st.lists(st.integers(0, 3), max_size=4))
    shapes = []
    for _ in range(count):
        keep = draw(st.integers(0, len(out)))
        tail = out[len(out) - keep :]
        shapes.append(tuple(1 if draw(st.integers(0, 2)) == 0 else d for d in tail))
    return shapes, tuple(out)


@SETTINGS
@given(broadcastable(1), KNOWLEDGE, st.booleans())
def test_broadcast_to(case, knowledge, fed):
    (shape,), target = case
    check(lambda s, x: A.BroadcastTo(s, x, constant_or_hidden(s, list(target), fed)),
          lambda x: np.broadcast_to(x, target), [values_of(shape, 9)], knowledge)  # fmt: skip


@SETTINGS
@given(broadcastable(3), KNOWLEDGE, st.integers(0, 2**31))
def test_select_v2(case, knowledge, seed):
    (c_shape, t_shape, e_shape), _ = case
    cond = np.random.default_rng(seed).integers(0, 2, c_shape).astype(bool)
    check(lambda s, t, e: A.SelectV2(s, cond, t, e), lambda t, e: np.where(cond, t, e),
          [values_of(t_shape, 11), values_of(e_shape, 12)], knowledge)  # fmt: skip


@SETTINGS
@given(SHAPES, KNOWLEDGE, st.booleans(), st.integers(0, 2**31))
def test_select_and_fill(shape, knowledge, fed, seed):
    rng = np.random.default_rng(seed)
    rows = shape[:1] if shape and rng.integers(0, 2) else shape
    cond = rng.integers(0, 2, rows).astype(bool)
    picked = cond.reshape(rows + (1,) * (len(shape) - len(rows)))
    check(lambda s, t, e: A.Select(s, cond, t, e), lambda t, e: np.where(picked, t, e),
          [values_of(shape, 13), values_of(shape, 14)], knowledge)  # fmt: skip
    check(lambda s, x: A.Fill(s, constant_or_hidden(s, list(shape), fed), x),
          lambda x: np.broadcast_to(x, shape), [np.array(1.25)], knowledge)  # fmt: skip


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys(), st.sampled_from(["static", "dims"]))
def test_strided_slice_keys_against_central_differences_in_float32(case, knowledge):
    from _gradients_array_helpers import forget

    shape, key = case
    x = values_of(shape, 15).astype(np.float32)
    how = "static" if knowledge == "static" else "dims"
    assert_gradients_close(lambda s, v: forget(s, v, how)[key], [x])
