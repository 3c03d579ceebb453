"""DynamicPartition / DynamicStitch kernels and shape logic, called directly, against the
element-by-element references of _partition_helpers (CPU and simulated-GPU code paths)."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _gather_helpers import ALL_DTYPES, assert_array_same, ids, msg, sample
from _partition_helpers import cpu_ctx, gpu_ctx, ref_partition, ref_stitch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minigraph import InvalidArgumentError, KernelContext, TensorShape
from minigraph.devices import CpuDevice
from minigraph.memory import BufferPool
from ops import partition as P

CTXS = {"cpu": cpu_ctx, "gpu": gpu_ctx}


def on_device(ctx, value, dtype=None):
    """A host value as the kernel's device holds it (a simulated GPU's array on a GPU)."""
    array = np.asarray(value, dtype)
    return array if ctx.device.is_host else ctx.device.from_host(array)


def on_host(ctx, value):
    return value if ctx.device.is_host else ctx.device.to_host(value)


def partition(ctx, data, partitions, n):
    out = P._dynamic_partition_kernel(
        ctx, on_device(ctx, data), on_device(ctx, partitions, np.int32), num_partitions=n
    )
    return [on_host(ctx, o) for o in out]


def stitch(ctx, indices, data):
    out = P._dynamic_stitch_kernel(
        ctx, [on_device(ctx, i, np.int32) for i in indices], [on_device(ctx, d) for d in data]
    )
    return on_host(ctx, out)


# -- DynamicPartition --------------------------------------------------------------------------


@pytest.mark.parametrize("device", CTXS)
def test_partition_doc_examples(device):
    ctx = CTXS[device]()
    out = partition(ctx, [10, 20], 1, 2)  # scalar partitions
    assert_array_same(out[0], np.empty((0, 2), np.int64))
    assert_array_same(out[1], np.array([[10, 20]]))
    out = partition(ctx, [10, 20, 30, 40, 50], [0, 0, 1, 1, 0], 2)
    assert_array_same(out[0], np.array([10, 20, 50]))
    assert_array_same(out[1], np.array([30, 40]))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
@pytest.mark.parametrize("device", CTXS)
def test_partition_every_dtype(device, dtype):
    if device == "gpu" and (dtype.is_string or dtype.name == "bfloat16"):
        pytest.skip("not a GPU dtype")
    data = sample(dtype, (6, 2, 3))
    parts = np.array([[0, 2], [2, 1], [0, 0], [1, 1], [2, 0], [0, 2]], np.int32)
    out = partition(CTXS[device](), data, parts, 3)
    for got, want in zip(out, ref_partition(data, parts, 3)):
        assert_array_same(got, want)


@pytest.mark.parametrize("n", [1, 3, P._COMPRESS_MAX, P._COMPRESS_MAX + 1, 300])
@pytest.mark.parametrize("device", CTXS)
def test_partition_both_strategies(device, n):
    # Few partitions compress once each; many sort: both must give the stable order.
    rng = np.random.default_rng(n)
    parts = rng.integers(0, n, 500).astype(np.int32)
    data = rng.integers(0, 1000, (500, 2))
    out = partition(CTXS[device](), data, parts, n)
    assert len(out) == n
    for got, want in zip(out, ref_partition(data, parts, n)):
        assert_array_same(got, want)


@pytest.mark.parametrize(
    "parts, n, text",
    [
        ([[0, 1, 17], [0, 0, 0]], 7, "partitions[0,2] = 17 is not in [0, 7)"),
        ([[0, 1, 2], [0, -1, 9]], 7, "partitions[1,1] = -1 is not in [0, 7)"),
        (17, 7, "partitions = 17 is not in [0, 7)"),
        ([3, 2, 1, 0], 2, "partitions[0] = 3 is not in [0, 2)"),
        ([-2147483648], 1, "partitions[0] = -2147483648 is not in [0, 1)"),
    ],
)
@pytest.mark.parametrize("device", CTXS)
def test_partition_bad_values_name_the_first_in_c_order(device, parts, n, text):
    parts = np.asarray(parts, np.int32)
    data = np.zeros(parts.shape + (2,), np.float32)
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        partition(CTXS[device](), data, parts, n)


@pytest.mark.parametrize("device", CTXS)
def test_partition_bad_values_raise_with_nothing_to_copy(device):
    data = np.zeros((2, 0), np.float32)  # zero-size rows: nothing would be copied
    with pytest.raises(InvalidArgumentError, match=msg("partitions[1] = 5 is not in [0, 3)")):
        partition(CTXS[device](), data, [0, 5], 3)


@pytest.mark.parametrize("device", CTXS)
def test_partition_data_must_start_with_partitions_shape(device):
    text = "data.shape must start with partitions.shape, got data.shape = [5,2], "
    text += "partitions.shape = [3]"
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        partition(CTXS[device](), np.zeros((5, 2)), [0, 1, 0], 2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 20),
    st.lists(st.integers(0, 4), min_size=0, max_size=3),
    st.lists(st.integers(0, 3), min_size=0, max_size=2),
    st.sampled_from(sorted(CTXS)),
    st.integers(0, 2**32 - 1),
)
def test_partition_matches_reference(n, p_shape, suffix, device, seed):
    rng = np.random.default_rng(seed)
    parts = rng.integers(0, n, p_shape).astype(np.int32)
    data = rng.integers(-100, 100, tuple(p_shape) + tuple(suffix))
    out = partition(CTXS[device](), data, parts, n)
    for got, want in zip(out, ref_partition(data, parts, n), strict=True):
        assert_array_same(got, want)


# -- DynamicStitch -----------------------------------------------------------------------------


@pytest.mark.parametrize("device", CTXS)
def test_stitch_doc_example(device):
    indices = [6, [4, 1], [[5, 2], [0, 3]]]
    data = [[61, 62], [[41, 42], [11, 12]], [[[51, 52], [21, 22]], [[1, 2], [31, 32]]]]
    merged = [[1, 2], [11, 12], [21, 22], [31, 32], [41, 42], [51, 52], [61, 62]]
    assert_array_same(stitch(CTXS[device](), indices, data), np.array(merged))


@pytest.mark.parametrize("device", CTXS)
def test_stitch_merges_partitions_back(device):
    # The documents' round trip: partition by a condition, change one part, stitch back.
    x = np.array([0.1, -1.0, 5.2, 4.3, -1.0, 7.4], np.float32)
    mask = (x != -1.0).astype(np.int32)
    ctx = CTXS[device]()
    kept, changed = partition(ctx, x, mask, 2)
    where = partition(ctx, np.arange(6, dtype=np.int32), mask, 2)
    out = stitch(ctx, where, [kept, changed + 1])
    assert_array_same(out, np.array([1.1, -1.0, 6.2, 5.3, -1.0, 8.4], np.float32))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
@pytest.mark.parametrize("device", CTXS)
def test_stitch_every_dtype_zero_fills(device, dtype):
    if device == "gpu" and (dtype.is_string or dtype.name == "bfloat16"):
        pytest.skip("not a GPU dtype")
    a, b = sample(dtype, (2, 3), seed=1), sample(dtype, (1, 3), seed=2)
    out = stitch(CTXS[device](), [[5, 1], [3]], [a, b])
    assert_array_same(out, ref_stitch([np.array([5, 1]), np.array([3])], [a, b]))
    zero = out[0].tolist()
    assert zero == [b""] * 3 if dtype.is_string else not np.asarray(out[0]).any()


@pytest.mark.parametrize("device", CTXS)
def test_stitch_last_writer_wins(device):
    out = stitch(CTXS[device](), [[0, 1, 0, 0], [1, 2], [2]], [[1, 2, 3, 4], [5, 6], [7]])
    assert_array_same(out, np.array([4, 5, 7]))


@pytest.mark.parametrize("device", CTXS)
def test_stitch_empty(device):
    data = [np.zeros((0, 3)), np.zeros((0, 2, 3))]
    out = stitch(CTXS[device](), [np.zeros(0), np.zeros((0, 2))], data)
    assert out.shape == (0, 3) and out.dtype == np.float64


@pytest.mark.parametrize(
    "indices, text",
    [
        ([[0, 1], [2, -3, 1]], "indices[1] is out of range (indices list element 1 holds -3)"),
        ([[[0, 1], [-1, -2]]], "indices[2] is out of range (indices list element 0 holds -1)"),
        ([-7, [-1]], "indices[0] is out of range (indices list element 0 holds -7)"),
    ],
)
@pytest.mark.parametrize("device", CTXS)
def test_stitch_negative_index(device, indices, text):
    data = [np.zeros(np.shape(i) + (2,), np.float32) for i in indices]
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        stitch(CTXS[device](), indices, data)


@pytest.mark.parametrize(
    "indices, data, text",
    [
        (
            [[0, 1]],
            [np.zeros((3, 2))],
            "data[0].shape = [3,2] does not start with indices[0].shape = [2]",
        ),
        (
            [[0, 1], [2]],
            [np.zeros((2, 3)), np.zeros((1, 4))],
            "Need data[0].shape[1:] = data[1].shape[1:], got data[0].shape = [2,3], "
            "data[1].shape = [1,4], indices[0].shape = [2], indices[1].shape = [1]",
        ),
    ],
)
@pytest.mark.parametrize("device", CTXS)
def test_stitch_shape_errors(device, indices, data, text):
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        stitch(CTXS[device](), indices, data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=2), min_size=1, max_size=4),
    st.lists(st.integers(0, 3), min_size=0, max_size=2),
    st.integers(1, 12),
    st.sampled_from(sorted(CTXS)),
    st.integers(0, 2**32 - 1),
)
def test_stitch_matches_reference(index_shapes, extra, high, device, seed):
    # Small index ranges make repeated indices (last writer wins) and holes (zeros) common.
    rng = np.random.default_rng(seed)
    indices = [rng.integers(0, high, s).astype(np.int32) for s in index_shapes]
    data = [rng.integers(1, 100, tuple(s) + tuple(extra)) for s in index_shapes]
    assert_array_same(stitch(CTXS[device](), indices, data), ref_stitch(indices, data))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_partition_then_stitch_is_the_identity(n, size, seed):
    rng = np.random.default_rng(seed)
    data = rng.random((size, 3))
    parts = rng.integers(0, n, size).astype(np.int32)
    ctx = cpu_ctx()
    pieces = partition(ctx, data, parts, n)
    where = partition(ctx, np.arange(size, dtype=np.int32), parts, n)
    out = stitch(ctx, where, pieces)
    assert_array_same(out, data)


# -- DynamicStitch on the CPU: pooled output, windowed scatter --------------------------------
#
# The CPU kernel writes into `ctx.empty` memory, which the session's pool hands out dirty, and
# scatters window by window when every index tensor is ascending. The contexts below hand out
# dirty pooled memory and the windows are made a few rows long, so that holes (zeros), repeated
# indices across windows and tensors, and window edges are all exercised on small inputs.

JUNK = 0xA5


# Each dirty context's pool, to read its counters.
dirty_pools: dict[KernelContext, BufferPool] = {}


def dirty_ctx(op_type: str = "DynamicStitch") -> KernelContext:
    """A CPU context whose `ctx.empty` returns pooled memory full of junk bytes."""
    pool = BufferPool(min_bytes=1)
    for k in range(68):  # one junk-filled buffer in every bucket up to 128 KiB
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = JUNK
    ctx = KernelContext(CpuDevice(0), "node", op_type, buffers=pool)
    dirty_pools[ctx] = pool
    return ctx


def window_rows(monkeypatch, rows: int, row_bytes: int) -> None:
    """Windows of `rows` rows, taken by stitches of any size."""
    monkeypatch.setattr(P, "_STITCH_WINDOW_BYTES", rows * row_bytes)
    monkeypatch.setattr(P, "_STITCH_WINDOWED_BYTES", 0)


WINDOW_DTYPES = [np.int64, np.float32, np.bool_, np.complex64, np.uint8]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=4),
    st.lists(st.integers(1, 3), min_size=0, max_size=2),
    st.integers(1, 30),
    st.integers(1, 5),
    st.sampled_from(WINDOW_DTYPES),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_windowed_stitch_matches_reference(sizes, extra, high, window, dtype, ordered, seed):
    # Ascending indices take the windowed scatter; shuffled ones the plain one. Both write into
    # dirty pooled memory: every row no index names must come out zero.
    rng = np.random.default_rng(seed)
    indices = [np.sort(rng.integers(0, high, k)).astype(np.int32) for k in sizes]
    if not ordered:
        indices = [rng.permutation(i) for i in indices]
    data = [rng.integers(1, 100, (k, *extra)).astype(dtype) for k in sizes]
    row_bytes = int(np.prod(extra, dtype=np.int64)) * np.dtype(dtype).itemsize
    with pytest.MonkeyPatch.context() as mp:
        window_rows(mp, window, row_bytes)
        out = stitch(dirty_ctx(), indices, data)
    assert_array_same(out, ref_stitch(indices, data))


def test_windowed_stitch_repeated_indices_across_tensors_and_windows(monkeypatch):
    # Rows 1 and 5 are written by both tensors (the second wins) and row 1 twice by the first
    # (its later value, then the second tensor's); rows 3 and 4 are holes; windows of 2 rows.
    window_rows(monkeypatch, 2, 16)
    indices = [[0, 1, 1, 5], [1, 2, 5, 6]]
    data = [
        [[1, 1], [2, 2], [3, 3], [4, 4]],
        [[5, 5], [6, 6], [7, 7], [8, 8]],
    ]
    out = stitch(dirty_ctx(), indices, np.array(data, np.int64))
    want = [[1, 1], [5, 5], [6, 6], [0, 0], [0, 0], [7, 7], [8, 8]]
    assert_array_same(out, np.array(want, np.int64))


def test_windowed_stitch_puts_partitioned_rows_back(monkeypatch):
    # embedding_lookup's pattern: positions partitioned (ascending per part) and rows per part.
    window_rows(monkeypatch, 7, 12)
    rng = np.random.default_rng(3)
    data = rng.random((500, 3)).astype(np.float32)
    parts = rng.integers(0, 4, 500).astype(np.int32)
    ctx = dirty_ctx()
    pieces = partition(ctx, data, parts, 4)
    where = partition(ctx, np.arange(500, dtype=np.int32), parts, 4)
    assert_array_same(stitch(ctx, where, pieces), data)


def test_stitch_negative_index_in_an_ascending_tensor_names_its_first_position():
    # An ascending tensor's bounds are its ends: the first negative value is at position 0.
    with pytest.raises(InvalidArgumentError, match=msg("indices[0] is out of range (indices "
                                                       "list element 1 holds -4)")):  # fmt: skip
        stitch(dirty_ctx(), [[0, 1], [-4, -2, 3]], [np.zeros((2, 2)), np.zeros((3, 2))])


def test_stitch_output_is_never_a_view_of_its_inputs():
    data = [np.arange(6.0).reshape(3, 2)]
    out = stitch(cpu_ctx(), [[0, 1, 2]], data)
    assert not np.shares_memory(out, data[0])


@pytest.mark.parametrize("make_ctx", [cpu_ctx, dirty_ctx], ids=["malloc", "dirty pool"])
@pytest.mark.parametrize("p_shape", [(), (4,), (2, 2)])
def test_single_partition_is_the_input_or_a_copy(p_shape, make_ctx):
    # A trusted kernel may return its input itself, never another view of it.
    data = np.arange(8.0).reshape(p_shape + (-1,) if p_shape else (8,))
    (out,) = partition(make_ctx(), data, np.zeros(p_shape, np.int32), 1)
    assert out is data or not np.shares_memory(out, data)
    assert_array_same(out, ref_partition(data, np.zeros(p_shape, np.int32), 1)[0])


# -- DynamicPartition in pooled memory ----------------------------------------------------------
# With a few partitions the CPU kernel takes every part's rows into slices of one `ctx.empty`
# array: pooled memory that holds junk from earlier use. Every byte must be overwritten, each
# part must start where the previous one ends, and no output may be a view of the input.


def requests(ctx: KernelContext) -> int:
    """How many arrays the context's pool has handed out so far."""
    pool = dirty_pools[ctx]
    return pool.hits + pool.misses


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
@pytest.mark.parametrize(
    "d_shape, p_shape, n, used",
    [
        ((9,), (9,), 5, [0, 3, 4]),  # scalar rows; parts 1 and 2 empty
        ((9, 2, 3), (9,), 4, [1, 2]),  # the first and last parts empty
        ((3, 3, 2), (3, 3), 3, [0, 1, 2]),  # rank-2 partitions
        ((4,), (4,), P._COMPRESS_MAX, [P._COMPRESS_MAX - 1]),  # everything in the last part
        ((2, 5), (), 3, [1]),  # scalar partitions: one row, the whole of data
        ((0, 2), (0,), 3, [0]),  # no rows at all
        ((6, 0), (6,), 2, [0, 1]),  # rows of no elements
        ((9, 2, 3), (9,), P._COMPRESS_MAX + 3, [0, 5, P._COMPRESS_MAX + 2]),  # the sort path
        ((3, 3), (3, 3), P._COMPRESS_MAX + 1, [2, P._COMPRESS_MAX]),  # sorted, scalar rows
        ((0, 2), (0,), P._COMPRESS_MAX + 1, [0]),  # sorted, no rows at all
    ],
)
def test_partition_into_dirty_pooled_memory(dtype, d_shape, p_shape, n, used):
    rng = np.random.default_rng(len(d_shape) * 10 + n)
    data = sample(dtype, d_shape)
    parts = rng.choice(used, p_shape).astype(np.int32)
    ctx = dirty_ctx("DynamicPartition")
    before = requests(ctx)
    out = partition(ctx, data, parts, n)
    want = ref_partition(data, parts, n)
    assert len(out) == n
    for got, expected in zip(out, want, strict=True):
        assert_array_same(got, expected)
        assert not np.shares_memory(got, data)
        assert got.flags.c_contiguous
    # Strings (object arrays) keep numpy's compress; every other dtype takes pooled memory
    # (where there are rows: the pool hands zero bytes out of malloc).
    assert (requests(ctx) > before) == (not dtype.is_string and parts.size > 0)


def test_partition_parts_tile_one_pooled_array_in_order():
    # Part i's rows follow part i - 1's in one buffer: an off-by-one at a bound would either
    # overlap two parts or leave junk between them.
    ctx = dirty_ctx("DynamicPartition")
    data = np.arange(40, dtype=np.int64).reshape(20, 2)
    parts = np.array([2, 0, 1, 2, 2, 0, 1, 1, 0, 2, 1, 0, 0, 2, 1, 1, 2, 0, 1, 2], np.int32)
    out = partition(ctx, data, parts, 3)
    whole = np.concatenate(out)
    for i, got in enumerate(out):
        assert_array_same(got, data[parts == i])
        for other in out[i + 1 :]:
            assert not np.shares_memory(got, other)
    assert_array_same(whole, data[np.argsort(parts, kind="stable")])


def test_partition_reuses_the_pool_across_runs_without_stale_rows():
    # Several runs through one context: each run's parts go into memory that an earlier run's
    # (now dropped) parts filled; results still held stay intact while later runs write.
    ctx = dirty_ctx("DynamicPartition")
    rng = np.random.default_rng(7)
    kept = []
    for run in range(6):
        n = 2 + run % 4
        data = rng.integers(-(10**6), 10**6, (300, 3))
        parts = rng.integers(0, n, 300).astype(np.int32)
        out = partition(ctx, data, parts, n)
        for i, got in enumerate(out):
            assert_array_same(got, data[parts == i])
        if run % 2:
            kept.append((out, data.copy(), parts))
    for out, data, parts in kept:
        for i, got in enumerate(out):
            assert_array_same(got, data[parts == i])
    assert dirty_pools[ctx].hits > 0  # the runs did share buffers


def test_partition_runs_in_a_session_reuse_pooled_memory():
    # Parts of over a MiB each come from the session's pool; results of an earlier run that
    # the caller still holds must survive later runs.
    from minigraph import Scope, Session, SessionConfig, int32, int64
    from ops import DynamicPartition, Placeholder

    rng = np.random.default_rng(11)
    root = Scope.new_root_scope().with_device("/cpu:0")
    d = Placeholder(root, int64, shape=[None])
    p = Placeholder(root, int32, shape=[None])
    dp = DynamicPartition(root, d, p, num_partitions=3)
    held = []
    with Session(root, SessionConfig(check_kernel_outputs=True)) as sess:
        for run in range(4):
            data = rng.integers(0, 1 << 40, 600_000)
            parts = rng.integers(0, 3, 600_000).astype(np.int32)
            out = sess.run(dp.outputs, {d: data, p: parts})
            for i, got in enumerate(out):
                assert_array_same(got, data[parts == i])
            if run == 1:
                held = [(out, data, parts)]
    for out, data, parts in held:
        for i, got in enumerate(out):
            assert_array_same(got, data[parts == i])


def test_partition_of_a_non_contiguous_input():
    data = np.arange(60, dtype=np.float64).reshape(6, 10)[:, ::3]  # strided rows
    parts = np.array([1, 0, 1, 1, 0, 2], np.int32)
    out = P._dynamic_partition_kernel(dirty_ctx("DynamicPartition"), data, parts, num_partitions=3)
    for i, got in enumerate(out):
        assert_array_same(got, data[parts == i])
        assert not np.shares_memory(got, data)


def test_partition_bad_value_raises_before_writing_pooled_memory():
    with pytest.raises(InvalidArgumentError, match=msg("partitions[3] = 4 is not in [0, 4)")):
        partition(dirty_ctx("DynamicPartition"), np.zeros((5, 2)), [0, 1, 2, 4, 9], 4)


# -- intra-op threads: the windowed stitch and the counting partition split their work ---------


class CountingPool(ThreadPoolExecutor):
    """A real thread pool that counts the chunks handed to it."""

    def __init__(self, workers: int):
        super().__init__(workers)
        self.submitted = 0

    def submit(self, fn, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def threaded():
    """Dirty-pool CPU contexts whose kernels may use `threads` intra-op threads."""
    pools = []

    def make(threads: int, op_type: str) -> KernelContext:
        base = dirty_ctx(op_type)
        pool = CountingPool(threads - 1)
        pools.append(pool)
        return KernelContext(
            CpuDevice(0), "node", op_type, intra_op_threads=threads, pool=pool,
            buffers=dirty_pools[base],
        )  # fmt: skip

    yield make
    for pool in pools:
        pool.shutdown()


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("windows", [1, 2, 3, 7, 40])
def test_windowed_stitch_on_threads_writes_every_window(threaded, monkeypatch, threads, windows):
    # The windows are dealt out in contiguous runs; every one must be zero-filled and written
    # exactly once, whatever the split (fewer windows than threads included), with repeated
    # indices and holes inside windows and across tensors.
    rng = np.random.default_rng(threads * 100 + windows)
    rows = 8 * windows
    window_rows(monkeypatch, 8, 3 * 4)
    indices = [np.sort(rng.integers(0, rows, k)).astype(np.int32) for k in (rows // 2, rows, 5)]
    data = [rng.integers(1, 1000, (i.size, 3)).astype(np.float32) for i in indices]
    ctx = threaded(threads, "DynamicStitch")
    out = stitch(ctx, indices, data)
    assert_array_same(out, ref_stitch(indices, data))
    assert (ctx._pool.submitted > 0) == (min(threads, windows) > 1)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("n", [2, 3, 4, 8, P._COMPRESS_MAX])
def test_partition_on_threads_matches_reference(threaded, monkeypatch, threads, n):
    # Parts are dealt out to the threads in both passes (positions, then rows): each part's
    # slice of the one pooled array must hold exactly its rows, in C order.
    monkeypatch.setattr(P, "_PARALLEL_PARTITION_ROWS", 0)
    rng = np.random.default_rng(n * 10 + threads)
    data = rng.integers(-(10**6), 10**6, (257, 2)).astype(np.int64)
    parts = rng.integers(0, n, 257).astype(np.int32)
    parts[:3] = n - 1  # the last part is never empty
    ctx = threaded(threads, "DynamicPartition")
    out = partition(ctx, data, parts, n)
    for got, want in zip(out, ref_partition(data, parts, n)):
        assert_array_same(got, want)
    assert ctx._pool.submitted == 2 * (min(threads, n) - 1)


def test_large_partitions_and_stitches_use_the_threads_in_a_session():
    # At the real thresholds (no monkeypatching): a session with two intra-op threads splits a
    # large partition and a large ordered stitch, and the round trip gives the data back.
    from minigraph import Scope, Session, SessionConfig, float32, int32
    from ops import DynamicPartition, DynamicStitch, Placeholder

    size = max(P._PARALLEL_PARTITION_ROWS, P._STITCH_WINDOWED_BYTES // 16) + 3
    rng = np.random.default_rng(5)
    data = rng.random((size, 4), dtype=np.float32)
    parts = rng.integers(0, 4, size).astype(np.int32)
    root = Scope.new_root_scope().with_device("/cpu:0")
    d = Placeholder(root, float32, shape=[None, 4])
    p = Placeholder(root, int32, shape=[None])
    positions = DynamicPartition(root, np.arange(size, dtype=np.int32), p, num_partitions=4)
    pieces = DynamicPartition(root, d, p, num_partitions=4)
    back = DynamicStitch(root, positions.outputs, pieces.outputs)
    config = SessionConfig(intra_op_threads=2, check_kernel_outputs=True)
    with Session(root, config) as sess:
        got, *parts_out = sess.run([back, *pieces.outputs], {d: data, p: parts})
    assert_array_same(got, data)
    for i, part in enumerate(parts_out):
        assert_array_same(part, data[parts == i])


# -- shape logic -------------------------------------------------------------------------------


def test_partition_shapes():
    S = TensorShape
    assert P.partition_shapes(S([5, 2]), S([5]), 3) == [S([None, 2])] * 3
    assert P.partition_shapes(S([None, 2, 4]), S([None, 2]), 2) == [S([None, 4])] * 2
    assert P.partition_shapes(S(None), S([5]), 2) == [S(None)] * 2
    assert P.partition_shapes(S([5, 2]), S(None), 2) == [S(None)] * 2
    got = P.partition_shapes(S([5, 2]), S([5]), 3, np.array([0, 2, 2, 0, 0], np.int32))
    assert got == [S([3, 2]), S([0, 2]), S([2, 2])]
    with pytest.raises(InvalidArgumentError, match=msg("partitions[1] = 3 is not in [0, 3)")):
        P.partition_shapes(S([2, 2]), S([2]), 3, np.array([0, 3], np.int32))
    with pytest.raises(InvalidArgumentError, match="must start with partitions.shape"):
        P.partition_shapes(S([5, 2]), S([4]), 3)
    with pytest.raises(InvalidArgumentError, match="must start with partitions.shape"):
        P.partition_shapes(S([5]), S([5, 2]), 3)


def test_stitch_shape():
    S = TensorShape
    i32 = np.int32
    assert P.stitch_shape([S([2]), S([3])], [S([2, 4]), S([3, None])], [None, None]) == S([None, 4])
    assert P.stitch_shape([S(None)], [S([2, 4])], [None]) == S(None)
    consts = [np.array([0, 5], i32), np.array([[1]], i32)]
    assert P.stitch_shape([S([2]), S([1, 1])], [S([2]), S([1, 1])], consts) == S([6])
    empty = [np.zeros(0, i32)]
    assert P.stitch_shape([S([0])], [S([0, 3])], empty) == S([0, 3])
    with pytest.raises(InvalidArgumentError, match="does not start with"):
        P.stitch_shape([S([2])], [S([3, 4])], [None])
    with pytest.raises(
        InvalidArgumentError, match=msg("Need data[0].shape[1:] = data[1].shape[1:]")
    ):
        P.stitch_shape([S([2]), S([1])], [S([2, 4]), S([1, 5])], [None, None])
    with pytest.raises(InvalidArgumentError, match=msg("indices[1] is out of range")):
        P.stitch_shape([S([2])], [S([2])], [np.array([0, -1], i32)])
    with pytest.raises(InvalidArgumentError, match="2147483648 rows"):
        P.stitch_shape([S([1])], [S([1])], [np.array([2**31 - 1], i32)])
