"""UnsortedSegmentSum: TF's documented examples and TF 2.21's observed values, every dtype TF's
CPU kernel registers, properties against the element-by-element reference of
_segment_helpers (CPU and simulated-GPU code paths), shape functions over partial shapes, and
the construction-time and run-time error tables (messages as TF 2.21 words them)."""

from __future__ import annotations

import numpy as np
import pytest
from _segment_helpers import (
    CTXS,
    INDEX_DTYPES,
    SEGMENT_SUM_DTYPES,
    assert_same,
    cpu_ctx,
    on_device,
    on_host,
    ref_segment_sum,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import InvalidArgumentError, ResourceExhaustedError, SessionConfig
from minigraph.testing import simulated_gpus
from ops import segment as S
from ops.segment import UnsortedSegmentSum

CHECKED = SessionConfig(check_kernel_outputs=True)


def kernel(ctx, data, ids, n, num_type=np.int32):
    out = S._unsorted_segment_sum_kernel(
        ctx, on_device(ctx, data), on_device(ctx, ids), np.asarray(n, num_type)
    )
    return on_host(ctx, out)


def run(scope, fetch, feeds=None, config=CHECKED):
    with mg.Session(scope, config) as sess:
        return sess.run(fetch, feeds)


def segment_sum(data, ids, n, **kw):
    scope = mg.Scope.new_root_scope()
    out = UnsortedSegmentSum(scope, data, ids, n, **kw)
    return run(scope, out)


# -- TF's documented examples and TF 2.21's values ----------------------------------------------


def test_tf_doc_example():
    # tf.math.unsorted_segment_sum's docstring.
    c = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [4, 3, 2, 1]], np.int32)
    got = segment_sum(c, np.array([0, 1, 0], np.int32), 2)
    assert_same(got, np.array([[5, 5, 5, 5], [5, 6, 7, 8]], np.int32))


def test_negative_ids_are_dropped_as_tf_2_21_does():
    # TF 2.21: unsorted_segment_sum([1., 2, 3, 4], [0, -1, 2, 0], 3) == [5, 0, 3].
    got = segment_sum(np.array([1, 2, 3, 4], np.float32), np.array([0, -1, 2, 0], np.int32), 3)
    assert_same(got, np.array([5, 0, 3], np.float32))
    # Every id negative and no segment at all: an empty result, not an error.
    got = segment_sum(np.ones((2, 3), np.float64), np.array([-1, -5], np.int64), 0)
    assert_same(got, np.zeros((0, 3), np.float64))


def test_tf_values_for_rank_2_ids_scalar_ids_and_int64_num_segments():
    got = segment_sum(np.array([[1, 2], [3, 4]], np.int32), np.array([0, 0], np.int32),
                      np.int64(2))  # fmt: skip
    assert_same(got, np.array([[4, 6], [0, 0]], np.int32))
    assert_same(segment_sum(np.float32(5), np.int32(1), 3), np.array([0, 5, 0], np.float32))
    data = np.arange(12, dtype=np.int64).reshape(2, 3, 2)
    got = segment_sum(data, np.array([[1, 0, 1], [-1, 1, 0]], np.int16), 2)
    assert_same(got, np.array([[2 + 10, 3 + 11], [0 + 4 + 8, 1 + 5 + 9]], np.int64))


def test_sums_are_sequential_from_plus_zero_as_tf_computes_them():
    # TF 2.21 (CPU): float16 [2048, 1, 1, 1, 1] in one segment sums to 2048 (each + 1 rounds
    # back); numpy's pairwise/float32 sum gives 2052.
    got = segment_sum(np.array([2048, 1, 1, 1, 1], np.float16), np.zeros(5, np.int32), 1)
    assert_same(got, np.array([2048], np.float16))
    # TF: [1e8, 1, -1e8, 1] sums to 1.0 in float32 (pairwise would give 0).
    got = segment_sum(np.array([1e8, 1, -1e8, 1], np.float32), np.zeros(4, np.int32), 1)
    assert_same(got, np.array([1], np.float32))
    # TF: a segment of -0.0 alone (or several) is +0.0 (0 + -0 = +0).
    got = segment_sum(np.array([-0.0, -0.0, -0.0, 1], np.float32), np.array([0, 1, 1, 2]), 3)
    assert_same(got, np.array([0, 0, 1], np.float32))
    assert not np.signbit(got).any()
    # Complex: TF's [1, 2] -> 3+0j.
    got = segment_sum(np.array([1, 2], np.complex64), np.array([0, 0], np.int32), 1)
    assert_same(got, np.array([3], np.complex64))


def test_integers_wrap_around():
    # TF 2.21: int8 [100, 100] in one segment -> -56.
    got = segment_sum(np.array([100, 100], np.int8), np.array([0, 0], np.int16), 2)
    assert_same(got, np.array([-56, 0], np.int8))
    big = np.iinfo(np.uint64).max
    got = segment_sum(np.array([big, 2], np.uint64), np.array([0, 0], np.int32), 1)
    assert_same(got, np.array([1], np.uint64))


# -- every dtype, every index type -----------------------------------------------------------


def typed_sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.integers(-20, 20, size=shape)
    if dtype.is_complex:
        values = values + 1j * rng.integers(-20, 20, size=shape)
    if dtype.is_unsigned:
        values = np.abs(values)
    return values.astype(dtype.np_dtype)


@pytest.mark.parametrize("dtype", SEGMENT_SUM_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("index_type", INDEX_DTYPES, ids=lambda d: d.name)
def test_every_registered_dtype(dtype, index_type):
    data = typed_sample(dtype, (6, 2, 3))
    ids = np.array([[4, 0], [4, -1], [2, 4], [0, 0], [-3, 4], [1, 4]], index_type.np_dtype)
    scope = mg.Scope.new_root_scope()
    d = mg.Placeholder(scope, dtype, shape=[None, None, 3])
    i = mg.Placeholder(scope, index_type, shape=[None, 2])
    out = UnsortedSegmentSum(scope, d, i, np.int64(6))
    assert out.dtype is dtype and out.shape.as_list() == [6, 3]
    got = run(scope, out, {d: data, i: ids})
    assert_same(got, ref_segment_sum(data, ids, 6))


def test_op_def_is_tf_2_21s():
    op_def = mg.registry.get_op_def("UnsortedSegmentSum")
    assert [a.name for a in op_def.inputs] == ["data", "segment_ids", "num_segments"]
    assert [a.name for a in op_def.attrs] == ["T", "Tindices", "Tnumsegments"]
    allowed = {a.name: a for a in op_def.attrs}
    assert {d.name for d in allowed["T"].allowed} == {d.name for d in SEGMENT_SUM_DTYPES}
    assert [d.name for d in allowed["Tindices"].allowed] == ["int16", "int32", "int64"]
    assert allowed["Tnumsegments"].default is mg.int32
    with pytest.raises(InvalidArgumentError, match="bool"):
        UnsortedSegmentSum(mg.Scope.new_root_scope(), [True, False], [0, 0], 2)


# -- properties against the reference ----------------------------------------------------------

FLOATS = [mg.float16, mg.bfloat16, mg.float32, mg.float64, mg.complex64]


@st.composite
def segment_cases(draw):
    dtype = draw(st.sampled_from(FLOATS + [mg.int8, mg.int32, mg.uint16, mg.int64]))
    id_shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=2)))
    row = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    n = draw(st.integers(0, 6))
    size = int(np.prod(id_shape, dtype=np.int64))
    # Ids from -2 (dropped) to n - 1; few distinct values make repeats likely.
    ids = draw(st.lists(st.integers(-2, max(n - 1, -1)), min_size=size, max_size=size))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    shape = id_shape + row
    if dtype.is_floating or dtype.is_complex:
        values = rng.normal(size=shape) * rng.choice([1, 1e-3, 1e4], size=shape)
        if dtype.is_complex:
            values = values + 1j * rng.normal(size=shape)
    else:
        values = rng.integers(-300, 300, size=shape)
    data = np.asarray(values).astype(dtype.np_dtype)
    return data, np.array(ids, np.int32).reshape(id_shape), n


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=segment_cases(), device=st.sampled_from(sorted(CTXS)))
def test_matches_the_sequential_reference(case, device):
    data, ids, n = case
    ctx = CTXS[device]()
    if device == "gpu" and data.dtype == mg.bfloat16.np_dtype:
        ctx = cpu_ctx()  # no bfloat16 on GPUs: such nodes stay on the CPU
    got = kernel(ctx, data, ids, n)
    want = ref_segment_sum(data, ids, n)
    if ctx.device.is_host or data.dtype.kind in "iu":
        assert_same(got, want)  # bit for bit: the CPU sums in TF's order
    else:
        # GPU atomics add in no defined order: equal up to rounding.
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128),
                                   rtol=1e-2, atol=1e-2)  # fmt: skip


@pytest.mark.parametrize("spread", ["all one id", "few ids", "many repeats", "zipf", "unique"])
def test_heavy_and_light_repeats_are_summed_in_order(spread):
    # The rounds (one per occurrence) and the per-row finish (fewer than _FEW_GROUPS repeated
    # ids) both reproduce the sequential float32 sums bit for bit.
    rng = np.random.default_rng(7)
    n = 3000
    ids = {
        "all one id": np.full(n, 3),
        "few ids": rng.integers(0, 5, n),
        "many repeats": rng.integers(0, 400, n),
        "zipf": np.minimum(rng.zipf(1.3, n), 999),
        "unique": rng.permutation(n),
    }[spread].astype(np.int64)
    data = (rng.normal(size=(n, 3)) * 1e3).astype(np.float32)
    num = int(ids.max()) + 2
    assert_same(kernel(cpu_ctx(), data, ids, num), ref_segment_sum(data, ids, num))
    # numpy's unbuffered add.at also adds one value at a time, in order.
    expected = np.zeros((num, 3), np.float32)
    np.add.at(expected, ids, data)
    assert_same(kernel(cpu_ctx(), data, ids, num), expected)


def test_a_huge_table_of_narrow_rows_numbers_the_ids_densely(monkeypatch):
    # Above _OWNER_TABLE_BYTES the first-writer table is over the distinct ids, not the rows.
    monkeypatch.setattr(S, "_OWNER_TABLE_BYTES", 1 << 10)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 5000, 800) * 97
    data = rng.integers(-100, 100, 800).astype(np.int8)
    num = 5000 * 97
    assert_same(kernel(cpu_ctx(), data, ids, num), ref_segment_sum(data, ids, num))


@pytest.mark.parametrize("threads", [1, 2])
def test_large_float32_densify_matches_add_at(threads):
    # The benchmark's shape, scaled down: 2e4 rows of 64 (5 MB: zeroing, the +0.0 pass and the
    # first put split over two threads) into a 1e5-row table.
    rng = np.random.default_rng(11)
    ids = rng.integers(0, 100_000, 20_000)
    data = rng.normal(size=(20_000, 64)).astype(np.float32)
    data[::7, ::3] = -0.0
    expected = np.zeros((100_000, 64), np.float32)
    np.add.at(expected, ids, data)
    scope = mg.Scope.new_root_scope()
    d = mg.Placeholder(scope, mg.float32, shape=[None, 64])
    i = mg.Placeholder(scope, mg.int64, shape=[None])
    out = UnsortedSegmentSum(scope, d, i, 100_000)
    with mg.Session(scope, SessionConfig(intra_op_threads=threads)) as sess:
        for _ in range(2):  # the second run reuses pooled memory: it must be zeroed again
            assert_same(sess.run(out, {d: data, i: ids}), expected)


def test_non_contiguous_inputs():
    data = np.arange(48, dtype=np.float64).reshape(4, 12)[:, ::3]  # [4, 4], strided
    ids = np.array([2, 0, 2, 1, 7, 7], np.int64)[::2][::-1]  # [7, 2, 2], negative stride
    assert not data.flags.c_contiguous and not ids.flags.c_contiguous
    got = kernel(cpu_ctx(), data[:3], ids, 8)
    assert_same(got, ref_segment_sum(data[:3], ids, 8))


def test_inputs_are_never_written_and_outputs_are_new_arrays():
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    ids = np.array([1, 1, 0, 1], np.int32)
    before = data.copy(), ids.copy()
    scope = mg.Scope.new_root_scope()
    d = mg.Placeholder(scope, mg.float32)
    i = mg.Placeholder(scope, mg.int32)
    out = UnsortedSegmentSum(scope, d, i, 2)
    for config in (None, CHECKED):
        got = run(scope, out, {d: data, i: ids}, config)
        assert type(got) is np.ndarray and not np.shares_memory(got, data)
        assert_same(data, before[0])
        assert_same(ids, before[1])


# -- shapes ------------------------------------------------------------------------------------

SHAPES = [
    # (data, segment_ids, num_segments constant or None, TF 2.21's output shape)
    ([None, 3, 4], [5, None], 7, [7, 4]),
    ([None, 3, 4], [5, None], None, [None, 4]),
    (None, [5, None], 7, None),
    ([None, 3, 4], None, 7, None),
    ([6, 3, 4], [6], 7, [7, 3, 4]),
    ([], [], 7, [7]),
    ([6, 3, 4], [6], 2**40, [2**40, 3, 4]),
    ([0, 5], [0], 0, [0, 5]),
]


@pytest.mark.parametrize("data, ids, num, expected", SHAPES)
def test_shape_function_over_partial_shapes(data, ids, num, expected):
    scope = mg.Scope.new_root_scope()
    d = mg.Placeholder(scope, mg.float32, shape=data)
    i = mg.Placeholder(scope, mg.int32, shape=ids)
    n = np.int64(num) if num is not None else mg.Placeholder(scope, mg.int64, shape=[])
    out = UnsortedSegmentSum(scope, d, i, n)
    assert out.shape == mg.TensorShape(expected)


CONSTRUCTION_ERRORS = [
    # (data shape, ids shape or constant, num_segments, message)
    ([6, 3, 4], [5], 7, "data.shape = [6,3,4] does not start with segment_ids.shape = [5]"),
    ([6, 3, 4], [6, 3, 4, 1], 7,
     "data.shape = [6,3,4] does not start with segment_ids.shape = [6,3,4,1]"),
    ([6, 3, 4], [6], -7, "Input num_segments == -7 must not be negative."),
    ([6, 3, 4], [6], [7], "Shape must be rank 0 but is rank 1"),
    ([6], np.array([0, 1, 2, 3, 4, 9], np.int32), 7, "segment_ids[5] = 9 is out of range [0, 7)"),
    ([2, 3], np.array([[0, 1, 2], [3, 0, 3]], np.int32), 3,
     "segment_ids[1,0] = 3 is out of range [0, 3)"),
    ([6, 3, 4], [6], 2**62, "more than 2**63 - 1 elements"),
]  # fmt: skip


@pytest.mark.parametrize("data, ids, num, message", CONSTRUCTION_ERRORS)
def test_construction_errors_leave_the_graph_unchanged(data, ids, num, message):
    scope = mg.Scope.new_root_scope()
    d = mg.Placeholder(scope, mg.float32, shape=data)
    i = ids if isinstance(ids, np.ndarray) else mg.Placeholder(scope, mg.int32, shape=ids)
    before = len(scope.graph)
    with pytest.raises(InvalidArgumentError) as info:
        UnsortedSegmentSum(scope.with_op_name("seg"), d, i, np.int64(num) if np.ndim(num) == 0
                           else np.array(num, np.int64))  # fmt: skip
    assert message in str(info.value) and "'seg' (UnsortedSegmentSum)" in str(info.value)
    # A constant `i` made a Const node before the failing one; the failing node is not added.
    assert "seg" not in scope.graph and len(scope.graph) <= before + 2


def test_negative_constant_ids_are_fine_and_unknown_num_segments_checks_nothing():
    scope = mg.Scope.new_root_scope()
    out = UnsortedSegmentSum(scope, [1.0, 2.0], [-1, -1], 0)
    assert out.shape.as_list() == [0]
    n = mg.Placeholder(scope, mg.int32, shape=[])
    out = UnsortedSegmentSum(scope, [1.0, 2.0], [5, 9], n)  # known at run time only
    assert out.shape.as_list() == [None]
    with pytest.raises(InvalidArgumentError, match=r"segment_ids\[1\] = 9 is out of range"):
        run(scope, out, {n: 6})


RUN_ERRORS = [
    # (data, ids, num_segments, TF 2.21's message)
    ([1.0, 2, 3, 4], [0, 5, 2, 0], 3, "segment_ids[1] = 5 is out of range [0, 3)"),
    ([[1.0, 2], [3, 4]], [[0, 7], [1, 1]], 3, "segment_ids[0,1] = 7 is out of range [0, 3)"),
    ([1.0, 2, 3, 4], [0, 1], 3, "data.shape = [4] does not start with segment_ids.shape = [2]"),
    ([1.0, 2, 3, 4], [0, 1, 1, 1], -1, "Input num_segments == -1 must not be negative."),
    ([1.0, 2, 3, 4], [0, 1, 1, 1], [3], "num_segments should be a scalar, not shape [1]"),
    ([1.0, 2, 3, 4], [0, 1, 1, 1], 0, "segment_ids[0] = 0 is out of range [0, 0)"),
    # An id past the end comes first in C order, whatever negative ids precede it.
    ([1.0, 2, 3], [-4, 3, 9], 2, "segment_ids[1] = 3 is out of range [0, 2)"),
]


@pytest.mark.parametrize("data, ids, num, message", RUN_ERRORS)
@pytest.mark.parametrize("device", ["CPU", "default"])
def test_run_time_errors(data, ids, num, message, device):
    # The same error on every device (TF's GPU kernel drops out-of-range ids instead).
    scope = mg.Scope.new_root_scope()
    if device == "CPU":
        scope = scope.with_device("/device:CPU:0")
    d = mg.Placeholder(scope, mg.float32)
    i = mg.Placeholder(scope, mg.int32)
    n = mg.Placeholder(scope, mg.int32)
    out = UnsortedSegmentSum(scope.with_op_name("seg"), d, i, n)
    with pytest.raises(InvalidArgumentError) as info:
        run(scope, out, {d: data, i: ids, n: num})
    assert message in str(info.value) and "node seg (UnsortedSegmentSum)" in str(info.value)


def test_an_output_too_large_to_allocate_is_resource_exhausted():
    scope = mg.Scope.new_root_scope()
    n = mg.Placeholder(scope, mg.int64)
    out = UnsortedSegmentSum(scope, np.ones((2, 3), np.float32), [0, 1], n)
    with pytest.raises(ResourceExhaustedError, match=r"OOM when allocating tensor with shape\["):
        run(scope, out, {n: 2**61})


def test_empty_inputs():
    assert_same(segment_sum(np.zeros((0, 3), np.float32), np.zeros(0, np.int32), 4),
                np.zeros((4, 3), np.float32))  # fmt: skip
    assert_same(segment_sum(np.zeros((0, 3), np.float32), np.zeros(0, np.int32), 0),
                np.zeros((0, 3), np.float32))  # fmt: skip
    assert_same(
        segment_sum(np.zeros((5, 0), np.int64), np.arange(5), 6), np.zeros((6, 0), np.int64)
    )
    # Rows of no elements still have their ids checked.
    with pytest.raises(InvalidArgumentError, match=r"segment_ids\[4\] = 4 is out of range"):
        kernel(cpu_ctx(), np.zeros((5, 0), np.int64), np.arange(5), 4)


def test_nan_and_inf_propagate():
    data = np.array([np.inf, 1, np.nan, -np.inf, np.inf], np.float32)
    got = segment_sum(data, np.array([0, 0, 1, 2, 2], np.int32), 3)
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2])


# -- devices -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", SEGMENT_SUM_DTYPES, ids=lambda d: d.name)
def test_simulated_gpu_gives_the_cpu_values(dtype):
    data = typed_sample(dtype, (5, 3), seed=2)
    ids = np.array([3, 1, 3, -1, 3], np.int64)
    with simulated_gpus(1):
        scope = mg.Scope.new_root_scope()
        d = mg.Placeholder(scope, dtype)
        i = mg.Placeholder(scope, mg.int64)
        n = mg.Placeholder(scope.with_op_name("n"), mg.int32, shape=[])
        out = UnsortedSegmentSum(scope.with_op_name("seg"), d, i, n)
        metadata = mg.RunMetadata()
        with mg.Session(scope, CHECKED) as sess:
            got = sess.run(out, {d: data, i: ids, n: 4}, run_metadata=metadata)
        where = metadata.placement["seg"]
        assert where.endswith("CPU:0" if dtype is mg.bfloat16 else "GPU:0"), where
        assert_same(got, ref_segment_sum(data, ids, 4))
        with pytest.raises(InvalidArgumentError, match=r"segment_ids\[0\] = 3 is out of range"):
            with mg.Session(scope) as sess:
                sess.run(out, {d: data, i: ids, n: 2})


def test_num_segments_lives_in_host_memory_on_gpus():
    kernels = {k.device_type: k for k in mg.registry.kernels_for("UnsortedSegmentSum")}
    assert set(kernels) == {"CPU", "GPU"}
    assert "num_segments" in kernels["GPU"].host_memory
    assert all(k.trusted for k in kernels.values())
