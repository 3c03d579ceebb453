"""ScatterNd: TF's documented examples and TF 2.21's observed values (duplicates add, bool or,
strings concatenated), every dtype TF's CPU kernel registers, bad_indices_policy, properties
against the element-by-element reference of _segment_helpers (CPU and simulated-GPU code
paths), shape functions over partial shapes and the error tables (TF 2.21's messages)."""

from __future__ import annotations

import numpy as np
import pytest
from _segment_helpers import (
    CTXS,
    INDEX_DTYPES,
    SCATTER_ND_DTYPES,
    assert_same,
    cpu_ctx,
    on_device,
    on_host,
    ref_scatter_nd,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import InvalidArgumentError, SessionConfig
from minigraph.testing import simulated_gpus
from ops import segment as S
from ops.segment import ScatterNd

CHECKED = SessionConfig(check_kernel_outputs=True)
POLICIES = ["", "DEFAULT", "ERROR", "IGNORE"]


def kernel(ctx, indices, updates, shape, policy="", index_type=np.int32):
    out = S._scatter_nd_kernel(
        ctx,
        on_device(ctx, indices, index_type),
        on_device(ctx, updates),
        np.asarray(shape, index_type),
        bad_indices_policy=policy,
    )
    return on_host(ctx, out)


def run(scope, fetch, feeds=None, config=CHECKED):
    with mg.Session(scope, config) as sess:
        return sess.run(fetch, feeds)


def scatter(indices, updates, shape, **kw):
    scope = mg.Scope.new_root_scope()
    return run(scope, ScatterNd(scope, indices, updates, shape, **kw))


def objects(values):
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


# -- TF's documented examples and TF 2.21's values ----------------------------------------------


def test_tf_doc_examples():
    got = scatter(np.array([[4], [3], [1], [7]], np.int32), np.array([9, 10, 11, 12], np.int32),
                  np.array([8], np.int32))  # fmt: skip
    assert_same(got, np.array([0, 11, 0, 10, 9, 0, 0, 12], np.int32))
    block = [[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]]
    got = scatter(np.array([[0], [2]], np.int32), np.array([block, block], np.int32),
                  np.array([4, 4, 4], np.int32))  # fmt: skip
    expected = np.zeros((4, 4, 4), np.int32)
    expected[0] = expected[2] = block
    assert_same(got, expected)


def test_duplicates_combine_as_tf_2_21s_kernels_do():
    # Numbers add, bools are or-ed, strings concatenate in order (TF 2.21's values).
    assert_same(scatter([[0], [0], [2]], np.array([1.5, 2.0, 3.0], np.float32), [3]),
                np.array([3.5, 0, 3], np.float32))  # fmt: skip
    assert_same(scatter([[0], [0]], [True, False], [2]), np.array([True, False]))
    assert_same(scatter([[0], [0]], [False, True], [2]), np.array([True, False]))
    got = scatter([[0], [0], [1]], objects([b"a", b"b", b"c"]), [2])
    assert got.tolist() == [b"ab", b"c"]
    # float16 adds one value at a time from +0.0, as TF: 2048 + 1 stays 2048.
    assert_same(scatter([[0], [0]], np.array([2048, 1], np.float16), [1]),
                np.array([2048], np.float16))  # fmt: skip
    got = scatter([[0]], np.array([-0.0], np.float32), [2])
    assert not np.signbit(got).any()
    got = scatter([[1, 0]], np.array([1 + 2j], np.complex128), [3, 1])
    assert_same(got, np.array([[0], [1 + 2j], [0]], np.complex128))


@pytest.mark.parametrize("distinct", [3, 300])
def test_many_repeats_combine_in_order(distinct):
    # 300 distinct index vectors repeated 4 times each go through the kernel's per-occurrence
    # rounds, 3 through its per-row finish: both keep C order (strings show it).
    rng = np.random.default_rng(8)
    indices = rng.permutation(np.repeat(np.arange(distinct), 4)).reshape(-1, 1)
    words = objects([f"{k},".encode() for k in range(indices.shape[0])])
    got = kernel(cpu_ctx(), indices, words, [distinct])
    assert got.tolist() == ref_scatter_nd(indices, words, (distinct,)).tolist()
    halves = (rng.random(indices.shape[0]) * 100).astype(np.float16)
    assert_same(kernel(cpu_ctx(), indices, halves, [distinct]),
                ref_scatter_nd(indices, halves, (distinct,)))  # fmt: skip


def test_bad_indices_policies():
    indices = np.array([[4], [9], [1], [7]], np.int32)
    updates = np.array([9, 10, 11, 12], np.int32)
    scope = mg.Scope.new_root_scope()
    i = mg.Placeholder(scope, mg.int32)
    for policy in ["", "DEFAULT", "ERROR"]:
        out = ScatterNd(scope.with_op_name("s"), i, updates, [8], bad_indices_policy=policy)
        with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = \[9\] does not index"):
            run(scope, out, {i: indices})
    out = ScatterNd(scope, i, updates, [8], bad_indices_policy="IGNORE")
    # TF 2.21: IGNORE skips the bad index vector.
    assert_same(run(scope, out, {i: indices}), np.array([0, 11, 0, 0, 9, 0, 0, 12], np.int32))
    with pytest.raises(InvalidArgumentError, match="bad_indices_policy"):
        ScatterNd(scope, i, updates, [8], bad_indices_policy="FOO")


def test_op_def_is_tf_2_21s():
    op_def = mg.registry.get_op_def("ScatterNd")
    assert [a.name for a in op_def.inputs] == ["indices", "updates", "shape"]
    assert [a.name for a in op_def.attrs] == ["T", "Tindices", "bad_indices_policy"]
    attrs = {a.name: a for a in op_def.attrs}
    assert attrs["T"].allowed is None
    assert [d.name for d in attrs["Tindices"].allowed] == ["int16", "int32", "int64"]
    assert attrs["bad_indices_policy"].default == ""
    kernels = {k.device_type: k for k in mg.registry.kernels_for("ScatterNd")}
    assert "shape" in kernels["GPU"].host_memory and all(k.trusted for k in kernels.values())


# -- every dtype -------------------------------------------------------------------------------


def typed_sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype.is_string:
        flat = objects([f"s{v}".encode() for v in rng.integers(0, 99, int(np.prod(shape)))])
        return flat.reshape(shape)
    if dtype.is_bool:
        return rng.integers(0, 2, size=shape).astype(bool)
    values = rng.integers(-20, 20, size=shape)
    if dtype.is_complex:
        values = values + 1j * rng.integers(-20, 20, size=shape)
    if dtype.is_unsigned:
        values = np.abs(values)
    return values.astype(dtype.np_dtype)


@pytest.mark.parametrize("dtype", SCATTER_ND_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("index_type", INDEX_DTYPES, ids=lambda d: d.name)
def test_every_dtype(dtype, index_type):
    indices = np.array([[[1, 0], [2, 1]], [[1, 0], [0, 0]], [[1, 0], [2, 1]]], index_type.np_dtype)
    updates = typed_sample(dtype, (3, 2, 2))
    scope = mg.Scope.new_root_scope()
    i = mg.Placeholder(scope, index_type, shape=[None, 2, 2])
    u = mg.Placeholder(scope, dtype, shape=[None, 2, None])
    out = ScatterNd(scope, i, u, np.array([3, 2, 2], index_type.np_dtype))
    assert out.dtype is dtype and out.shape.as_list() == [3, 2, 2]
    got = run(scope, out, {i: indices, u: updates})
    assert_same(got, ref_scatter_nd(indices, updates, (3, 2, 2)))


# -- properties against the reference ----------------------------------------------------------


@st.composite
def scatter_cases(draw):
    dtype = draw(st.sampled_from(SCATTER_ND_DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=3)))
    depth = draw(st.integers(0, len(shape)))
    outer = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=2)))
    ignore = draw(st.booleans())
    count = int(np.prod(outer, dtype=np.int64))
    # Index values one past each dim (and -1) only when bad vectors are ignored.
    lows = [-1 if ignore else 0] * depth
    highs = [d if ignore else d - 1 for d in shape[:depth]]
    if not ignore and any(h < 0 for h in highs) and count:
        count, outer = 0, (0,) + outer[1:]
    vectors = [
        [draw(st.integers(lo, max(hi, lo))) for lo, hi in zip(lows, highs)] for _ in range(count)
    ]
    indices = np.array(vectors, np.int64).reshape(outer + (depth,))
    updates = typed_sample(dtype, outer + shape[depth:], seed=draw(st.integers(0, 999)))
    return indices, updates, shape, ignore


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scatter_cases(), device=st.sampled_from(sorted(CTXS)))
def test_matches_the_reference(case, device):
    indices, updates, shape, ignore = case
    ctx = CTXS[device]()
    if device == "gpu" and (updates.dtype.kind == "O" or updates.dtype == mg.bfloat16.np_dtype):
        ctx = cpu_ctx()  # strings and bfloat16 stay on the CPU
    if updates.ndim == 0:  # 1-D indices as deep as the shape: TF wants updates of rank >= 1
        with pytest.raises(InvalidArgumentError, match="Updates shape must have rank at least"):
            kernel(cpu_ctx(), indices, updates, shape)
        return
    try:
        want = ref_scatter_nd(indices, updates, shape, ignore)
    except IndexError:
        with pytest.raises(InvalidArgumentError, match="does not index into shape"):
            kernel(ctx, indices, updates, shape, "IGNORE" if ignore else "", np.int64)
        return
    got = kernel(ctx, indices, updates, shape, "IGNORE" if ignore else "", np.int64)
    assert_same(got, want)  # small integers: exact on every device and in any order


def test_index_depth_zero_adds_every_update_to_the_whole_output():
    # Beyond TF's kernel (which refuses depth 0): GatherNd's gradient needs it.
    updates = np.arange(6, dtype=np.float64).reshape(3, 2)
    got = scatter(np.zeros((3, 0), np.int32), updates, [2])
    assert_same(got, updates.sum(axis=0))


def test_one_dimensional_indices_are_one_index_vector():
    # As TF's shape function (and GatherNd) read them: indices [1] is the vector (1,).
    got = scatter(np.array([1], np.int32), np.array([5, 6, 7], np.int32), [2, 3])
    assert_same(got, np.array([[0, 0, 0], [5, 6, 7]], np.int32))
    got = scatter(np.array([1, 2], np.int32), np.array([5], np.int32), [3, 3, 1])
    assert_same(got[1, 2], np.array([5], np.int32))


def test_empty_cases():
    assert_same(scatter(np.zeros((0, 1), np.int32), np.zeros(0, np.float32), [0]),
                np.zeros(0, np.float32))  # fmt: skip
    assert_same(scatter(np.zeros((0, 1), np.int32), np.zeros(0, np.float32), [3]),
                np.zeros(3, np.float32))  # fmt: skip
    # Slices of no element: valid index vectors, an empty output (TF's kernel refuses it).
    assert_same(scatter([[1]], np.zeros((1, 0), np.int64), [3, 0]), np.zeros((3, 0), np.int64))
    # Into dims of no element, every index vector is out of range (IGNORE: skipped).
    scope = mg.Scope.new_root_scope()
    i = mg.Placeholder(scope, mg.int32)
    out = ScatterNd(scope, i, np.ones((1, 3), np.float32), [0, 3], bad_indices_policy="IGNORE")
    assert_same(run(scope, out, {i: [[0]]}), np.zeros((0, 3), np.float32))


# -- shapes ------------------------------------------------------------------------------------

SHAPES = [
    # (indices, updates, shape: constant list, or the static shape of a fed vector), TF 2.21's
    ([None, 2], [None, 5], [3, 4, 5], [3, 4, 5]),
    ([None, 2], [None, 5], ("fed", [3]), [None, None, None]),
    ([None, 2], [None, 5], ("fed", [None]), None),
    (None, [None, 5], [3, 4, 5], [3, 4, 5]),
    ([0, 2], [0, 5], [3, 0, 5], [3, 0, 5]),
    ([7, None], [7, 5], [3, 4, 5], [3, 4, 5]),
    ([7, None], [7, 5], ("fed", [3]), [None, None, None]),
]


@pytest.mark.parametrize("indices, updates, shape, expected", SHAPES)
def test_shape_function_over_partial_shapes(indices, updates, shape, expected):
    scope = mg.Scope.new_root_scope()
    i = mg.Placeholder(scope, mg.int32, shape=indices)
    u = mg.Placeholder(scope, mg.float32, shape=updates)
    if isinstance(shape, tuple):
        shape = mg.Placeholder(scope, mg.int32, shape=shape[1])
    out = ScatterNd(scope, i, u, shape)
    assert out.shape == mg.TensorShape(expected)


CONSTRUCTION_ERRORS = [
    # (indices, updates, shape, message: TF 2.21's shape function's, or the kernel's where
    # TF's shape function lets it through)
    ([None, 2], [None, 6], [3, 4, 5],
     "Dimensions [2,3) of input[shape=[3,4,5]] = [5] must match dimensions [1,2) of "
     "updates[shape=[?,6]] = [6]"),
    ([7, 2], [6, 5], [3, 4, 5],
     "Dimensions [0,1) of indices[shape=[7,2]] = [7] must match dimensions [0,1) of "
     "updates[shape=[6,5]] = [6]"),
    ([7, 2], [7, 5, 1], [3, 4, 5],
     "Dimensions [2,3) of input[shape=[3,4,5]] = [5] must match dimensions [1,3) of "
     "updates[shape=[7,5,1]] = [5,1]"),
    ([7, 2], [7, 5], [3, -4, 5], "Dimension -4 must be >= 0"),
    ([7, 2], [7, 5], [3, 0, 5], "Indices and updates specified for empty output"),
    ([7, 2], [7, 5], [[3, 4, 5]], "Shape must be rank 1 but is rank 2"),
    ([], [7, 5], [3, 4, 5], "Shape must be at least rank 1 but is rank 0"),
    ([7, 2], [], [3, 4, 5], "Shape must be at least rank 1 but is rank 0"),
    ([7, 4], [7], [3, 4, 5],
     "indices.shape[-1] must be <= rank(shape), but saw indices shape: [7,4] and shape: "
     "[3,4,5]"),
    (np.array([[0, 9]], np.int32), [1], [3, 4],
     "indices[0] = [0, 9] does not index into shape [3,4]"),
    (np.array([[[1, 1]], [[3, -1]]], np.int32), [2, 1], [3, 4],
     "indices[1,0] = [3, -1] does not index into shape [3,4]"),
    ([2, 1], [2, 3], [2**40, 2**40, 2**40], "more than 2**63 - 1 elements"),
]  # fmt: skip


@pytest.mark.parametrize("indices, updates, shape, message", CONSTRUCTION_ERRORS)
def test_construction_errors_leave_the_graph_unchanged(indices, updates, shape, message):
    scope = mg.Scope.new_root_scope()
    if not isinstance(indices, np.ndarray):
        indices = mg.Placeholder(scope, mg.int64, shape=indices)
    u = mg.Placeholder(scope, mg.float32, shape=updates)
    before = len(scope.graph)
    with pytest.raises(InvalidArgumentError) as info:
        ScatterNd(scope.with_op_name("s"), indices, u, np.array(shape, np.int64))
    assert message in str(info.value) and "'s' (ScatterNd)" in str(info.value)
    assert "s" not in scope.graph and len(scope.graph) <= before + 2  # no ScatterNd node


def test_ignore_accepts_constant_out_of_range_indices():
    scope = mg.Scope.new_root_scope()
    out = ScatterNd(scope, [[0, 9], [1, 1]], [1.0, 2.0], [3, 4], bad_indices_policy="IGNORE")
    got = run(scope, out)
    expected = np.zeros((3, 4), np.float32)
    expected[1, 1] = 2
    assert_same(got, expected)


RUN_ERRORS = [
    # (indices, updates, shape, TF 2.21's kernel message)
    ([[4], [9], [1], [7]], [9, 10, 11, 12], [8], "indices[1] = [9] does not index into shape [8]"),
    ([[4], [-1], [1], [7]], [9, 10, 11, 12], [8],
     "indices[1] = [-1] does not index into shape [8]"),
    ([[[4, 1]], [[9, 0]]], [[9], [10]], [8, 2],
     "indices[1,0] = [9, 0] does not index into shape [8,2]"),
    ([[1]], [9], [-8], "Dimension -8 must be >= 0"),
    ([[1]], [[9, 9]], [3],
     "Dimensions [1,1) of input[shape=[3]] must match dimensions [1,2) of updates[shape=[1,2]]"),
    ([[1], [2]], [9, 1, 1], [3],
     "Dimensions [0,1) of indices[shape=[2,1]] must match dimensions [0,1) of "
     "updates[shape=[3]]"),
    ([[1], [2]], [[9, 1, 1], [1, 1, 1]], [3, 4],
     "Dimensions [1,2) of input[shape=[3,4]] must match dimensions [1,2) of "
     "updates[shape=[2,3]]"),
    ([1], 9, [3], "Updates shape must have rank at least one. Found:[]"),
    (1, [9], [3], "Indices shape must have rank at least one. Found:[]"),
    ([[1]], [9], 3, "Shape must be a vector"),
    ([[1]], [9], [[3]], "Shape must be a vector"),
    ([[1, 1, 1]], [9], [3, 3],
     "indices.shape[-1] must be <= rank(shape), but saw indices shape: [1,3] and shape: [3,3]"),
    ([[1]], [9], [0], "indices[0] = [1] does not index into shape [0]"),
]  # fmt: skip


@pytest.mark.parametrize("indices, updates, shape, message", RUN_ERRORS)
@pytest.mark.parametrize("device", ["CPU", "default"])
def test_run_time_errors(indices, updates, shape, message, device):
    scope = mg.Scope.new_root_scope()
    if device == "CPU":
        scope = scope.with_device("/device:CPU:0")
    i = mg.Placeholder(scope, mg.int32)
    u = mg.Placeholder(scope, mg.int32)
    s = mg.Placeholder(scope, mg.int32)
    out = ScatterNd(scope.with_op_name("s"), i, u, s)
    with pytest.raises(InvalidArgumentError) as info:
        run(scope, out, {i: indices, u: updates, s: shape})
    assert message in str(info.value) and "node s (ScatterNd)" in str(info.value)


def test_non_contiguous_inputs():
    indices = np.array([[1, 9, 0], [0, 9, 1], [1, 9, 1]], np.int64)[:, ::2]  # strided
    updates = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    assert not indices.flags.c_contiguous and not updates.flags.c_contiguous
    got = kernel(cpu_ctx(), indices, updates, [2, 2, 2], index_type=np.int64)
    assert_same(got, ref_scatter_nd(indices, updates, (2, 2, 2)))


def test_inputs_are_never_written():
    indices = np.array([[1], [1], [0]], np.int64)
    updates = np.arange(6, dtype=np.float32).reshape(3, 2)
    before = indices.copy(), updates.copy()
    scope = mg.Scope.new_root_scope()
    i = mg.Placeholder(scope, mg.int64)
    u = mg.Placeholder(scope, mg.float32)
    out = ScatterNd(scope, i, u, np.array([2, 2], np.int64))
    for config in (None, CHECKED):
        got = run(scope, out, {i: indices, u: updates}, config)
        assert not np.shares_memory(got, updates)
        assert_same(indices, before[0])
        assert_same(updates, before[1])


# -- devices -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", SCATTER_ND_DTYPES, ids=lambda d: d.name)
def test_simulated_gpu_gives_the_cpu_values(dtype):
    indices = np.array([[3, 1], [1, 0], [3, 1], [0, 2]], np.int64)
    updates = typed_sample(dtype, (4, 2), seed=5)
    with simulated_gpus(1):
        scope = mg.Scope.new_root_scope()
        i = mg.Placeholder(scope, mg.int64)
        u = mg.Placeholder(scope, dtype)
        out = ScatterNd(scope.with_op_name("s"), i, u, np.array([4, 3, 2], np.int64))
        metadata = mg.RunMetadata()
        with mg.Session(scope, CHECKED) as sess:
            got = sess.run(out, {i: indices, u: updates}, run_metadata=metadata)
        stays = dtype.is_string or dtype is mg.bfloat16
        assert metadata.placement["s"].endswith("CPU:0" if stays else "GPU:0")
        assert_same(got, ref_scatter_nd(indices, updates, (4, 3, 2)))
        bad = np.array([[3, 1], [1, 3]], np.int64)
        with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = \[1, 3\] does not index"):
            with mg.Session(scope) as sess:
                sess.run(out, {i: bad, u: updates[:2]})
