"""Kernels: every dtype, every index dtype, layouts, scalar/empty indices, zero-size dims,
bad_indices_policy on the CPU, and the kernels' caching and purity.

Tests of CPU behaviour (errors for out-of-range indices, intra-op threads) pin the CPU; the
others run wherever sessions place them, so the CI's simulated-GPU variant runs them on the GPU
kernels (see tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import (
    ALL_DTYPES,
    INDEX_DTYPES,
    INT64_MAX,
    INT64_MIN,
    assert_array_same,
    ids,
    msg,
    non_contiguous,
    ref_gather,
    ref_gather_batched,
    ref_gather_nd,
    run,
    sample,
    zero_of,
)

import minigraph
from minigraph import InvalidArgumentError, Scope, Session, SessionConfig
from ops import GatherNd, GatherV2, Placeholder, gather

# (params shape, indices shape, axis, batch_dims) for GatherV2, all indices valid
V2_CASES = [
    ((5,), (), 0, 0),
    ((5,), (3,), 0, 0),
    ((4, 3), (2, 2), 0, 0),
    ((4, 3), (2, 2), 1, 0),
    ((4, 3), (5,), -1, 0),
    ((2, 3, 4), (), 1, 0),
    ((2, 3, 4), (3, 2), -2, 0),
    ((3, 5), (3, 2), 1, 1),
    ((2, 3, 4), (2, 5), 2, 1),
    ((2, 3, 4), (2, 5), 1, -1),
    ((2, 3, 4, 2), (2, 3, 2), 2, 2),
    ((2, 3, 4, 2), (2, 3), 3, -1),
]

# (params shape, indices depth, extra index dims, batch_dims) for GatherNd
ND_CASES = [
    ((4,), 1, (3,), 0),
    ((4, 3), 2, (5,), 0),
    ((4, 3), 1, (2, 2), 0),
    ((2, 3, 4), 3, (), 0),
    ((2, 3, 4), 0, (2,), 0),
    ((2, 3, 4), 2, (2, 3), 0),
    ((3, 4, 5), 1, (2,), 1),
    ((3, 4, 5), 2, (2,), 1),
    ((3, 4, 5), 1, (), 2),
    ((3, 4, 5), 0, (2,), 1),
]


def valid_indices(rng, shape, limit, dtype):
    return rng.integers(0, limit, size=shape).astype(dtype.np_dtype)


def v2_indices(rng, p_shape, i_shape, axis, batch_dims, dtype):
    bd = batch_dims if batch_dims >= 0 else batch_dims + len(i_shape)
    assert tuple(p_shape[:bd]) == tuple(i_shape[:bd])  # the case table's batch dims agree
    return valid_indices(rng, i_shape, p_shape[axis % len(p_shape)], dtype)


def nd_indices(rng, p_shape, depth, extra, batch_dims, dtype):
    dims = p_shape[batch_dims : batch_dims + depth]
    shape = tuple(p_shape[:batch_dims]) + tuple(extra)
    columns = [rng.integers(0, d, size=shape) for d in dims]
    stacked = np.stack(columns, axis=-1) if columns else np.zeros(shape + (0,), np.int64)
    return stacked.astype(dtype.np_dtype)


# -- every dtype, every index dtype ----------------------------------------------------------


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=ids)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
def test_gather_v2_every_dtype_constant_inputs(dtype, index_dtype):
    rng = np.random.default_rng(0)
    for k, (p_shape, i_shape, axis, batch_dims) in enumerate(V2_CASES):
        params = sample(dtype, p_shape, seed=k)
        indices = v2_indices(rng, p_shape, i_shape, axis, batch_dims, index_dtype)
        root = Scope.new_root_scope()
        g = GatherV2(root, params, indices, axis, batch_dims=batch_dims)
        out = run(root, g)
        expected = ref_gather(params, indices, axis, batch_dims)
        assert_array_same(out, expected)
        assert_array_same(out, ref_gather_batched(params, indices, axis, batch_dims))
        assert g.shape.as_list() == list(expected.shape)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=ids)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
def test_gather_v2_every_dtype_fed_inputs(dtype, index_dtype):
    rng = np.random.default_rng(1)
    root = Scope.new_root_scope()
    params = Placeholder(root, dtype)
    indices = Placeholder(root, index_dtype)
    axis = Placeholder(root, minigraph.int64, shape=[])
    graphs = {bd: GatherV2(root, params, indices, axis, batch_dims=bd) for bd in (-1, 0, 1, 2)}
    with Session(root) as sess:
        for k, (p_shape, i_shape, a, bd) in enumerate(V2_CASES):
            p = sample(dtype, p_shape, seed=k)
            i = v2_indices(rng, p_shape, i_shape, a, bd, index_dtype)
            out = sess.run(graphs[bd], {params: p, indices: i, axis: a})
            assert_array_same(out, ref_gather(p, i, a, bd))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=ids)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
def test_gather_nd_every_dtype(dtype, index_dtype):
    rng = np.random.default_rng(2)
    for k, (p_shape, depth, extra, bd) in enumerate(ND_CASES):
        params = sample(dtype, p_shape, seed=k)
        indices = nd_indices(rng, p_shape, depth, extra, bd, index_dtype)
        root = Scope.new_root_scope()
        g = GatherNd(root, params, indices, batch_dims=bd)
        out = run(root, g)
        expected = ref_gather_nd(params, indices, bd)
        assert_array_same(out, expected)
        assert g.shape.as_list() == list(expected.shape)
        # The same through placeholders of unknown shape.
        root = Scope.new_root_scope()
        p = Placeholder(root, dtype)
        i = Placeholder(root, index_dtype)
        assert_array_same(
            run(root, GatherNd(root, p, i, batch_dims=bd), {p: params, i: indices}), expected
        )


def test_gather_nd_matches_numpy_advanced_indexing():
    """A second oracle: params[tuple(indices.T)] for full-depth and partial-depth indices."""
    rng = np.random.default_rng(3)
    params = sample(minigraph.float64, (4, 5, 6), seed=3)
    for depth in (1, 2, 3):
        indices = nd_indices(rng, params.shape, depth, (7,), 0, minigraph.int32)
        root = Scope.new_root_scope()
        out = run(root, GatherNd(root, params, indices))
        assert_array_same(out, params[tuple(indices.T)])


# -- layouts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
def test_non_contiguous_feeds(dtype):
    rng = np.random.default_rng(4)
    base = sample(dtype, (4, 6, 5), seed=4)
    layouts = {
        "strided": non_contiguous(base),
        "reversed": base[::-1, :, ::-1],
        "transposed": base.transpose(2, 0, 1),
        "fortran": np.asfortranarray(base),
        "broadcast": np.broadcast_to(base[:1], (3, 6, 5)),
    }
    root = Scope.new_root_scope()
    params = Placeholder(root, dtype, shape=[None, None, None])
    indices = Placeholder(root, minigraph.int32)
    nd_indices_ph = Placeholder(root, minigraph.int64)
    g_axis1 = GatherV2(root, params, indices, 1)
    g_batch = GatherV2(root, params, indices, 2, batch_dims=1)
    g_nd = GatherNd(root, params, nd_indices_ph)
    with Session(root) as sess:
        for name, p in layouts.items():
            if name != "broadcast":
                assert not p.flags.c_contiguous or name == "fortran"
            i = non_contiguous(rng.integers(0, p.shape[1], size=(3, 2)).astype(np.int32)).T
            assert not i.flags.c_contiguous
            assert_array_same(sess.run(g_axis1, {params: p, indices: i}), ref_gather(p, i, 1))
            ib = non_contiguous(rng.integers(0, p.shape[2], size=(p.shape[0], 3)).astype(np.int32))
            assert_array_same(sess.run(g_batch, {params: p, indices: ib}), ref_gather(p, ib, 2, 1))
            ind = np.stack(
                [rng.integers(0, p.shape[0], 4), rng.integers(0, p.shape[1], 4)], axis=0
            ).T  # a transposed (non-contiguous) [4, 2] array
            assert not ind.flags.c_contiguous
            assert_array_same(
                sess.run(g_nd, {params: p, nd_indices_ph: ind}), ref_gather_nd(p, ind)
            )


@pytest.mark.usefixtures("cpu_only")
def test_non_contiguous_bad_indices_are_found_in_logical_order():
    """The first bad index is in C order of the logical array, not of its memory."""
    indices = np.array([[0, 9], [7, 1]], np.int32).T  # logical [[0, 7], [9, 1]]
    root = Scope.new_root_scope()
    params = Placeholder(root, minigraph.float32)
    idx = Placeholder(root, minigraph.int32)
    g = GatherV2(root.with_op_name("g"), params, idx, 0)
    with pytest.raises(InvalidArgumentError, match=msg("indices[0,1] = 7 is not in [0, 3)")):
        run(root, g, {params: np.zeros(3, np.float32), idx: indices})
    nd = GatherNd(root.with_op_name("nd"), params, idx)
    vectors = np.array([[0, 5], [0, 1]], np.int32).T  # logical rows [0, 0], [5, 1]
    with pytest.raises(InvalidArgumentError, match=msg("indices[1] = [5, 1] does not index")):
        run(root, nd, {params: np.zeros((3, 3), np.float32), idx: vectors})


# -- scalar and empty indices, zero-size dims ------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
def test_scalar_indices(dtype):
    for p_shape in [(4,), (4, 3), (2, 3, 4)]:
        params = sample(dtype, p_shape, seed=len(p_shape))
        for axis in range(-len(p_shape), len(p_shape)):
            index = p_shape[axis] - 1
            root = Scope.new_root_scope()
            ph = Placeholder(root, minigraph.int32, shape=[])
            g = GatherV2(root, params, ph, axis)
            expected = np.take(params, index, axis=axis)
            expected = np.asarray(expected, dtype=params.dtype)
            assert_array_same(run(root, g, {ph: index}), expected)
            assert g.shape.as_list() == list(expected.shape)
            root = Scope.new_root_scope()
            assert_array_same(run(root, GatherV2(root, params, np.int16(index), axis)), expected)


def test_scalar_index_into_a_vector_gives_a_0d_array():
    for dtype in ALL_DTYPES:
        params = sample(dtype, (3,), seed=9)
        root = Scope.new_root_scope()
        out = run(root, gather(root, params, 2), check=False)
        assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == params.dtype
        assert out[()] == params[2]


@pytest.mark.parametrize(
    "p_shape, i_shape, axis, expected",
    [
        ((4, 3), (0,), 0, (0, 3)),
        ((4, 3), (0,), 1, (4, 0)),
        ((4, 3), (2, 0), 1, (4, 2, 0)),
        ((4, 3), (0, 5), 0, (0, 5, 3)),
        ((0, 3), (2,), 1, (0, 2)),
        ((0, 3), (0,), 0, (0, 3)),
        ((2, 0, 3), (0,), 1, (2, 0, 3)),
        ((2, 3, 0), (4,), 1, (2, 4, 0)),
        ((2, 3, 0), (4,), 0, (4, 3, 0)),
    ],
)
@pytest.mark.parametrize("dtype", [minigraph.float32, minigraph.string, minigraph.bool_], ids=ids)
def test_gather_v2_empty_indices_and_zero_size_dims(p_shape, i_shape, axis, expected, dtype):
    params = sample(dtype, p_shape)
    indices = np.zeros(i_shape, np.int64) if 0 in i_shape else np.ones(i_shape, np.int64)
    if 0 not in i_shape:
        indices = np.minimum(indices, p_shape[axis] - 1)
    root = Scope.new_root_scope()
    g = GatherV2(root, params, indices, axis)
    out = run(root, g)
    assert out.shape == expected and out.dtype == params.dtype
    assert g.shape.as_list() == list(expected)
    assert_array_same(out, ref_gather(params, indices, axis))


def test_gather_v2_batched_zero_size_dims():
    root = Scope.new_root_scope()
    cases = [
        ((0, 3), (0, 2), 1, 1, (0, 2)),
        ((2, 0, 4), (2, 3), 2, 1, (2, 0, 3)),
        ((2, 3, 4), (2, 0), 2, 1, (2, 3, 0)),
        ((2, 3, 0), (2, 5), 1, 1, (2, 5, 0)),
    ]
    for p_shape, i_shape, axis, bd, expected in cases:
        params = sample(minigraph.int32, p_shape)
        indices = np.zeros(i_shape, np.int32)
        g = GatherV2(root, params, indices, axis, batch_dims=bd)
        out = run(root, g)
        assert out.shape == expected
        assert g.shape.as_list() == list(expected)


@pytest.mark.parametrize("dtype", [minigraph.float32, minigraph.string, minigraph.int8], ids=ids)
def test_gather_nd_zero_size_params_with_valid_indices(dtype):
    """GatherNd on zero-size params with valid indices returns the empty result (TF raises
    'Requested more than 0 entries')."""
    cases = [
        ((2, 0), [[1]], (1, 0)),
        ((2, 0), [[1], [0], [1]], (3, 0)),
        ((2, 0, 4), [[1]], (1, 0, 4)),
        ((2, 3, 0), [[1, 2], [0, 0]], (2, 0)),
        ((0, 3), np.zeros((0, 1), np.int32), (0, 3)),
        ((0, 3), np.zeros((0, 2), np.int32), (0,)),
        ((2, 0), np.zeros((4, 0), np.int32), (4, 2, 0)),
    ]
    for p_shape, indices, expected in cases:
        params = sample(dtype, p_shape)
        root = Scope.new_root_scope()
        g = GatherNd(root, params, np.asarray(indices, np.int32))
        out = run(root, g)
        assert out.shape == expected and out.dtype == params.dtype
        assert g.shape.as_list() == list(expected)
        root = Scope.new_root_scope()
        p = Placeholder(root, dtype)
        i = Placeholder(root, minigraph.int32)
        assert (
            run(root, GatherNd(root, p, i), {p: params, i: np.asarray(indices, np.int32)}).shape
            == expected
        )


def test_gather_nd_empty_indices():
    params = sample(minigraph.float64, (3, 4))
    for i_shape, expected in [((0, 2), (0,)), ((0, 1), (0, 4)), ((2, 0, 1), (2, 0, 4))]:
        root = Scope.new_root_scope()
        out = run(root, GatherNd(root, params, np.zeros(i_shape, np.int16)))
        assert out.shape == expected and out.dtype == np.float64


def test_gather_nd_index_depth_zero_takes_everything():
    params = sample(minigraph.int64, (2, 3))
    root = Scope.new_root_scope()
    out = run(root, GatherNd(root, params, np.zeros((3, 0), np.int32)))
    assert_array_same(out, np.stack([params] * 3))
    out = run(root, GatherNd(root, params, np.zeros((2, 0), np.int32), batch_dims=1))
    assert_array_same(out, params)


@pytest.mark.usefixtures("cpu_only")
@pytest.mark.parametrize("depth", [7, 8, 9])
def test_gather_nd_index_depth_beyond_seven(depth):
    """TF's kernel stops at depth 7; any depth up to rank(params) works here."""
    p_shape = (2, 3, 2, 2, 3, 2, 2, 3, 2)
    params = sample(minigraph.int32, p_shape)
    rng = np.random.default_rng(depth)
    indices = nd_indices(rng, p_shape, depth, (5,), 0, minigraph.int64)
    root = Scope.new_root_scope()
    g = GatherNd(root, params, indices)
    out = run(root, g)
    assert_array_same(out, ref_gather_nd(params, indices))
    assert g.shape.as_list() == [5] + list(p_shape[depth:])
    bad = indices.copy()
    bad[3, depth - 1] = p_shape[depth - 1]
    g = GatherNd(root.with_op_name("bad"), params, bad)
    vector = ", ".join(str(v) for v in bad[3])
    with pytest.raises(InvalidArgumentError, match=msg(f"indices[3] = [{vector}] does not")):
        run(root, g)


@pytest.mark.usefixtures("cpu_only")
def test_large_index_arrays():
    """Past the small-array fast path (32 indices): the same answers and errors."""
    rng = np.random.default_rng(5)
    params = sample(minigraph.float32, (50, 3))
    indices = rng.integers(0, 50, size=(20, 30)).astype(np.int32)
    root = Scope.new_root_scope()
    assert_array_same(run(root, GatherV2(root, params, indices, 0)), ref_gather(params, indices))
    vectors = np.stack([rng.integers(0, 50, 600), rng.integers(0, 3, 600)], axis=-1)
    assert_array_same(run(root, GatherNd(root, params, vectors)), params[tuple(vectors.T)])
    bad = indices.copy()
    bad[11, 4] = -3
    bad[15, 0] = 50
    g = GatherV2(root.with_op_name("g"), params, bad, 0)
    with pytest.raises(InvalidArgumentError, match=msg("indices[11,4] = -3 is not in [0, 50)")):
        run(root, g)


# -- bad_indices_policy on the CPU -------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
def test_ignore_writes_zeros_on_cpu(dtype):
    params = sample(dtype, (3, 4))
    indices = np.array([[0, 4], [-1, 2], [INT64_MAX, INT64_MIN]], np.int64)
    root = Scope.new_root_scope()
    g = GatherV2(root, params, indices, 1, bad_indices_policy="IGNORE")
    out = run(root, g)
    assert_array_same(out, ref_gather(params, indices, 1, ignore_bad=True))
    assert out[0, 0, 1] == zero_of(dtype) and out[0, 0, 0] == params[0, 0]
    batched = GatherV2(root, params, indices, 1, batch_dims=1, bad_indices_policy="IGNORE")
    assert_array_same(run(root, batched), ref_gather(params, indices, 1, 1, ignore_bad=True))
    vectors = np.array([[0, 3], [3, 0], [-1, 0], [2, INT64_MAX], [INT64_MIN, 1]], np.int64)
    nd = GatherNd(root, params, vectors, bad_indices_policy="IGNORE")
    out = run(root, nd)
    assert_array_same(out, ref_gather_nd(params, vectors, ignore_bad=True))
    if dtype.is_string:
        assert out.tolist() == [params[0, 3], b"", b"", b"", b""]
    slices = GatherNd(root, params, [[1], [3], [-2]], bad_indices_policy="IGNORE")
    expected = np.stack(
        [params[1], np.full(4, zero_of(dtype), params.dtype)]
        + [np.full(4, zero_of(dtype), params.dtype)]
    )
    assert_array_same(run(root, slices), expected)


def test_ignore_with_scalar_index_into_a_vector():
    root = Scope.new_root_scope()
    for dtype in ALL_DTYPES:
        params = sample(dtype, (3,))
        g = GatherV2(root, params, np.int32(7), 0, bad_indices_policy="IGNORE")
        assert_array_same(run(root, g), np.asarray(zero_of(dtype), dtype=params.dtype))


def test_ignore_on_zero_size_gather_axis():
    root = Scope.new_root_scope()
    params = np.zeros((2, 0, 3), np.float32)
    g = GatherV2(root, params, [0, 1], 1, bad_indices_policy="IGNORE")
    assert_array_same(run(root, g), np.zeros((2, 2, 3), np.float32))
    g = GatherV2(root, params, [[0], [5]], 1, batch_dims=1, bad_indices_policy="IGNORE")
    assert_array_same(run(root, g), np.zeros((2, 1, 3), np.float32))
    nd = GatherNd(root, params, [[0, 0], [1, 0]], bad_indices_policy="IGNORE")
    assert_array_same(run(root, nd), np.zeros((2, 3), np.float32))
    strings = np.zeros((0, 2), dtype=object)
    nd = GatherNd(root, strings, [[0], [1]], bad_indices_policy="IGNORE")
    assert_array_same(run(root, nd), np.array([[b"", b""], [b"", b""]], dtype=object))


@pytest.mark.usefixtures("cpu_only")
@pytest.mark.parametrize("policy", ["", "DEFAULT", "ERROR"], ids=ids)
def test_cpu_raises_for_every_policy_but_ignore(policy):
    root = Scope.new_root_scope()
    g = GatherV2(root.with_op_name("g"), [1, 2, 3], [[0, 3]], 0, bad_indices_policy=policy)
    with pytest.raises(InvalidArgumentError, match=msg("indices[0,1] = 3 is not in [0, 3)")):
        run(root, g)
    nd = GatherNd(
        root.with_op_name("nd"), [[1, 2], [3, 4]], [[0, 0], [2, 0]], bad_indices_policy=policy
    )
    with pytest.raises(InvalidArgumentError, match=msg("indices[1] = [2, 0] does not index")):
        run(root, nd)


# -- caching, purity, repeat runs --------------------------------------------------------------


@pytest.mark.usefixtures("cpu_only")
def test_constant_indices_are_rechecked_when_params_shape_changes():
    """The kernel caches the bad-index scan of constant indices; the cache must follow the
    size of the gathered dimension."""
    root = Scope.new_root_scope()
    params = Placeholder(root, minigraph.int32, shape=[None])
    g = GatherV2(root.with_op_name("g"), params, [0, 2], 0)
    with Session(root) as sess:
        assert_array_same(sess.run(g, {params: [5, 6, 7]}), np.array([5, 7], np.int32))
        with pytest.raises(InvalidArgumentError, match=msg("indices[1] = 2 is not in [0, 2)")):
            sess.run(g, {params: [5, 6]})
        assert_array_same(sess.run(g, {params: [1, 2, 3, 4]}), np.array([1, 3], np.int32))
        assert_array_same(sess.run(g, {params: [8, 9, 10]}), np.array([8, 10], np.int32))
        with pytest.raises(InvalidArgumentError, match=msg("indices[0] = 0 is not in [0, 0)")):
            sess.run(g, {params: np.zeros(0, np.int32)})


def test_inputs_are_not_modified():
    params = sample(minigraph.float32, (3, 4))
    indices = np.array([[0, 9], [-1, 2]], np.int32)
    vectors = np.array([[0, 9], [2, 1]], np.int32)
    p0, i0, v0 = params.copy(), indices.copy(), vectors.copy()
    root = Scope.new_root_scope()
    p = Placeholder(root, minigraph.float32)
    i = Placeholder(root, minigraph.int32)
    fetches = [
        GatherV2(root, p, i, 1, bad_indices_policy="IGNORE"),
        GatherV2(root, p, i, 1, batch_dims=-1, bad_indices_policy="IGNORE"),
        GatherNd(root, p, i, bad_indices_policy="IGNORE"),
    ]
    feeds = [{p: params, i: indices}, {p: params[:2], i: indices}, {p: params, i: vectors}]
    with Session(root) as sess:
        outs = [sess.run(f, d) for f, d in zip(fetches, feeds)]
        for out in outs:  # the results are fresh arrays: writing them changes no input
            out[...] = 0
        again = [sess.run(f, d) for f, d in zip(fetches, feeds)]
    np.testing.assert_array_equal(params, p0)
    np.testing.assert_array_equal(indices, i0)
    np.testing.assert_array_equal(vectors, v0)
    assert_array_same(again[0], ref_gather(p0, i0, 1, ignore_bad=True))
    assert_array_same(again[1], ref_gather(p0[:2], i0, 1, 1, ignore_bad=True))
    assert_array_same(again[2], ref_gather_nd(p0, v0, ignore_bad=True))


def test_constant_params_survive_repeated_runs():
    root = Scope.new_root_scope()
    params = sample(minigraph.int64, (4,))
    g = GatherV2(root, params, [3, -1, 0], 0, bad_indices_policy="IGNORE")
    with Session(root) as sess:
        first = sess.run(g)
        first[...] = 42
        second = sess.run(g)
    assert_array_same(second, np.array([params[3], 0, params[0]], np.int64))


def test_fast_path_and_checked_path_agree():
    """The generated plan (no output checks) and the interpreter give the same values."""
    params = sample(minigraph.complex64, (3, 4, 2))
    indices = np.array([[1, 0, 3], [2, 2, 0], [3, 1, 1]], np.int16)
    for batch_dims in (0, 1):
        root = Scope.new_root_scope()
        g = GatherV2(root, params, indices, 1, batch_dims=batch_dims)
        assert_array_same(run(root, g, check=False), run(root, g, check=True))


def test_fed_axis_every_value():
    params = sample(minigraph.float64, (2, 3, 4))
    indices = np.array([[1, 0], [0, 1]], np.int32)
    for axis_dtype in (minigraph.int32, minigraph.int64):
        root = Scope.new_root_scope()
        axis = Placeholder(root, axis_dtype, shape=[])
        g = GatherV2(root, params, indices, axis)
        with Session(root) as sess:
            for a in range(-3, 3):
                assert_array_same(sess.run(g, {axis: a}), ref_gather(params, indices, a))


# -- intra-op threads ----------------------------------------------------------------------------


@pytest.mark.usefixtures("cpu_only")
@pytest.mark.parametrize("threads", [2, 3])
def test_large_gathers_split_over_intra_op_threads_agree_with_numpy(threads):
    # Outputs above 4 MiB are gathered in chunks by several threads; the result is the same.
    rng = np.random.default_rng(7)
    params = rng.standard_normal((20000, 64)).astype(np.float32)
    rows = rng.integers(0, 20000, size=(5000, 5))
    table = rng.standard_normal((100, 200, 64)).astype(np.float32)
    vectors = np.stack([rng.integers(0, 100, 30000), rng.integers(0, 200, 30000)], axis=1)
    root = Scope.new_root_scope()
    g = GatherV2(root, params, rows, 0)
    nd = GatherNd(root, table, vectors)
    with Session(root, SessionConfig(intra_op_threads=threads)) as sess:
        out, out_nd = sess.run([g, nd])
    np.testing.assert_array_equal(out, np.take(params, rows, axis=0))
    np.testing.assert_array_equal(out_nd, table[vectors[:, 0], vectors[:, 1]])


@pytest.mark.usefixtures("cpu_only")
def test_large_gathers_on_inner_axes_split_over_intra_op_threads():
    rng = np.random.default_rng(8)
    params = rng.standard_normal((300, 5000)).astype(np.float32)
    columns = rng.integers(0, 5000, size=4000)
    root = Scope.new_root_scope()
    g = GatherV2(root, params, columns, 1)
    scalar = GatherV2(root, rng.standard_normal((2000, 3000)).astype(np.float32), 7, 1)
    with Session(root, SessionConfig(intra_op_threads=2)) as sess:
        out = sess.run(g)
    np.testing.assert_array_equal(out, params[:, columns])
    with Session(root, SessionConfig(intra_op_threads=2)) as sess:
        assert sess.run(scalar).shape == (2000,)
