"""The math kernels' fast paths (ops/math.py) against references written differently: Python's
integers for FloorDiv/FloorMod and Range, numpy's own ufuncs and astype elsewhere. Kernels
run on contexts whose pooled memory is full of junk, so an element a fast path forgets to
write shows up; the simulated GPU runs the cupy code on the same cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _gather_helpers import assert_array_same

import minigraph as mg
from minigraph import InvalidArgumentError, KernelContext, Scope, Session
from minigraph.devices import CpuDevice
from minigraph.memory import BufferPool
from minigraph.testing import SimulatedGpuDevice, simulated_gpus
from ops import Cast, FloorDiv, FloorMod, Maximum, Placeholder, Range, Sub
from ops import math as M

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
JUNK = 0xA5


def dirty_ctx(op_type: str = "Test") -> KernelContext:
    """A CPU context whose `ctx.empty` returns pooled memory full of junk bytes."""
    pool = BufferPool(min_bytes=1)
    for k in range(72):  # one junk-filled buffer in every bucket up to 256 KiB
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = JUNK
    return KernelContext(CpuDevice(0), "node", op_type, buffers=pool)


def wrap(values: list[int], dtype: type) -> np.ndarray:
    """Python integers taken modulo 2**bits into `dtype` (two's complement)."""
    info = np.iinfo(dtype)
    span = 1 << info.bits
    return np.array([(v - info.min) % span + info.min for v in values], dtype)


def int_samples(dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    values = {lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, 7, 64, 100} | {v for v in (-1, -2, -7, -64)}
    rng = np.random.default_rng(0)
    extra = rng.integers(lo, hi, 200, dtype=dtype, endpoint=True).tolist()
    return np.array(sorted(v for v in values if lo <= v <= hi) + extra, dtype)


def divisors(dtype: type) -> list[int]:
    info = np.iinfo(dtype)
    top = int(info.max) // 2 + 1  # the largest power of two the dtype holds
    cands = [1, 2, 4, 8, 64, top, 3, 7, 100, int(info.max), -1, -2, -4, -3, -64, int(info.min)]
    return [d for d in cands if info.min <= d <= info.max and d != 0]


# -- integer FloorDiv / FloorMod ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
def test_integer_floor_div_and_mod_by_one_divisor_match_python(dtype):
    # A single divisor takes the fast paths: a shift / low bits for positive powers of two,
    # x - (x // y) * y for the others (INT_MIN // -1 wraps and its mod is 0).
    x = int_samples(dtype)
    for d in divisors(dtype):
        for y in (np.array(d, dtype), np.array([d], dtype), np.array([[d]], dtype)):
            div = M._floor_div_kernel(dirty_ctx(), x, y)
            mod = M._floor_mod_kernel(dirty_ctx(), x, y)
            shape = np.broadcast_shapes(x.shape, y.shape)
            want_div = wrap([a // d for a in x.tolist()], dtype).reshape(shape)
            want_mod = wrap([a % d for a in x.tolist()], dtype).reshape(shape)
            assert_array_same(div, want_div)
            assert_array_same(mod, want_mod)
            # numpy's own ufuncs agree (the kernels' former formulas).
            with np.errstate(over="ignore"):
                assert_array_same(div, np.floor_divide(x, y))
            assert_array_same(mod, np.remainder(x, y))


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
def test_integer_floor_div_and_mod_by_arrays_and_broadcasts(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (3, 40), dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, (1, 40), dtype=dtype, endpoint=True)
    y[y == 0] = 1
    for a, b in ((x, y), (y, x[:, :1] | 1), (x[0, 0].reshape(()), y)):
        shape = np.broadcast_shapes(a.shape, b.shape)
        pa, pb = np.broadcast_to(a, shape).ravel().tolist(), np.broadcast_to(b, shape).ravel()
        pb = pb.tolist()
        want_div = wrap([p // q for p, q in zip(pa, pb)], dtype).reshape(shape)
        want_mod = wrap([p % q for p, q in zip(pa, pb)], dtype).reshape(shape)
        assert_array_same(M._floor_div_kernel(dirty_ctx(), a, b), want_div)
        assert_array_same(M._floor_mod_kernel(dirty_ctx(), a, b), want_mod)


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kernel", [M._floor_div_kernel, M._floor_mod_kernel])
def test_integer_zero_divisor_raises_before_any_fast_path(dtype, kernel):
    for x, y in (
        (np.arange(5, dtype=dtype), np.array(0, dtype)),
        (np.arange(5, dtype=dtype), np.array([1, 2, 0, 1, 1], dtype)),
        (np.zeros(0, dtype), np.array([0], dtype)),  # nothing to divide: raises all the same
    ):
        with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
            kernel(dirty_ctx(), x, y)


def test_shift_paths_are_chosen_for_single_positive_powers_of_two_on_the_host():
    # The fast paths give the general paths' values, so only the choice itself can be seen.
    chosen = M._host_power_of_two
    assert chosen(dirty_ctx(), np.array(4, np.int64)) == 2
    assert chosen(dirty_ctx(), np.array([[1]], np.int8)) == 0
    assert chosen(dirty_ctx(), np.array([64], np.int8)) == 6
    assert chosen(dirty_ctx(), np.array(2**63, np.uint64)) == 63
    for y in (np.array(3), np.array(-4), np.array(-(2**63)), np.array([4, 4]), np.array(6)):
        assert chosen(dirty_ctx(), y) is None
    gpu = KernelContext(SimulatedGpuDevice(0), "node", "Test")
    assert chosen(gpu, gpu.device.from_host(np.array(4))) is None  # cupy: remainder


def test_zero_d_operands_give_zero_d_arrays():
    for kernel in (M._sub_kernel, M._maximum_kernel, M._floor_div_kernel, M._floor_mod_kernel):
        for y in (4, 3):
            out = kernel(dirty_ctx(), np.array(-7, np.int32), np.array(y, np.int32))
            assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.int32
    assert M._floor_mod_kernel(dirty_ctx(), np.array(-7), np.array(4))[()] == 1
    assert M._floor_div_kernel(dirty_ctx(), np.array(-7), np.array(4))[()] == -2
    assert M._floor_mod_kernel(dirty_ctx(), np.array(-7), np.array(3))[()] == 2


# -- floats ------------------------------------------------------------------------------------

FLOAT_VALUES = [0.0, -0.0, 1.0, -1.0, 5.5, -5.5, 2.0, -2.0, 1e30, -1e-30, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_floor_div_and_mod_keep_tf_formulas_bit_for_bit(dtype):
    with np.errstate(all="ignore"):  # 1e30 is inf in float16; 1e30 / -1e-30 overflows
        x, y = np.meshgrid(np.array(FLOAT_VALUES, dtype), np.array(FLOAT_VALUES, dtype))
        want_div = np.floor(x / y).astype(dtype)
        m = np.fmod(x, y)
        want_mod = np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m).astype(dtype)
        div = M._floor_div_kernel(dirty_ctx(), x, y)
        mod = M._floor_mod_kernel(dirty_ctx(), x, y)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    # NaNs compared as NaNs, everything else bit for bit (the sign of zero included).
    for got, want in ((div, want_div), (mod, want_mod)):
        assert got.dtype == dtype and got.shape == want.shape
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        assert np.array_equal(got[~nan].view(bits), want[~nan].view(bits))
    # Where both are defined and non-zero, numpy's remainder agrees with TF's floor-mod.
    with np.errstate(all="ignore"):
        ref = np.remainder(x, y)
    ok = np.isfinite(ref) & np.isfinite(mod) & (ref != 0)
    assert np.array_equal(mod[ok], ref[ok])


def test_sub_and_maximum_broadcast_into_pooled_memory():
    x = np.arange(12, dtype=np.float32).reshape(3, 1, 4)
    y = np.array([[1.0, np.nan, 3.0, 20.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    assert_array_same(M._sub_kernel(dirty_ctx(), x, y), x - y)
    assert_array_same(M._maximum_kernel(dirty_ctx(), x, y), np.maximum(x, y))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        M._sub_kernel(dirty_ctx(), x, np.zeros(3, np.float32))


# -- Cast --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, dst",
    [
        (np.array([2**31 + 5, -(2**40) - 3, 7], np.int64), np.int32),
        (np.array([1.7, -1.7, np.nan, np.inf, -np.inf, 1e20], np.float64), np.int32),
        (np.array([1.7, -0.0, 0.0, np.nan], np.float32), np.bool_),
        (np.array([1 + 2j, -3.5 - 1j], np.complex64), np.float64),
        (np.array([300, -1, 65535], np.int32), np.uint8),
        (np.array(-3, np.int64), np.uint16),
        (np.array([[1.5, 2.25e38]], np.float32), np.float16),
    ],
)
def test_cast_into_pooled_memory_matches_astype(x, dst):
    src = mg.as_dtype(x.dtype)
    out = M._cast_kernel(dirty_ctx(), x, SrcT=src, DstT=mg.as_dtype(dst))
    with np.errstate(all="ignore"):
        want = (x.real if x.dtype.kind == "c" else x).astype(dst)
    assert_array_same(out, want)


# -- Range -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [
        (0, 0, 1, np.int32),
        (0, 1, 1, np.int32),
        (5, 6000, 1, np.int32),
        (0, 1024, 1, np.int64),  # exactly one block
        (0, 1025, 1, np.int64),  # one element past it
        (7, 2 * 1024 + 9, 3, np.int16),
        (-30000, 30000, 1, np.int16),  # k * delta overflows int16: added modulo 2**16
        (32767, -32768, -1, np.int16),
        (-128, 127, 1, np.int8),
        (127, -128, -3, np.int8),
        (0, 65535, 1, np.uint16),
        (2**32 - 50001, 2**32 - 1, 1, np.uint32),
        (2**31 - 3, -(2**31), -(2**20), np.int32),
        (-(2**63), 2**63 - 1, 2**50 + 1, np.int64),  # k * delta overflows int64
        (2**63 - 1, -(2**63), -(2**49) - 7, np.int64),
    ],
)
def test_integer_range_matches_python_range(start, limit, delta, dtype):
    t = mg.as_dtype(dtype)
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    out = M._range_kernel(dirty_ctx(), *args, Tidx=t)
    assert_array_same(out, np.array(list(range(start, limit, delta)), dtype))


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [
        (0.0, 10.0, 0.1, np.float32),
        (5.0, -3000.0, -0.7, np.float64),
        (1.0, 2.0, 0.25, np.float16),
        (0.0, 0.0, 1.0, np.float32),
    ],
)
def test_float_range_accumulates_in_dirty_pooled_memory(start, limit, delta, dtype):
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    out = M._range_kernel(dirty_ctx(), *args, Tidx=mg.as_dtype(dtype))
    # One rounded addition per element, as TF's kernel: a Python loop in the dtype.
    size = math.ceil(abs((float(args[1]) - float(args[0])) / float(args[2])))
    acc = [args[0][()]] if size else []
    while len(acc) < size:
        acc.append(dtype(acc[-1] + args[2][()]))
    assert_array_same(out, np.array(acc, dtype))


def test_range_in_a_session_reuses_dirty_pooled_buffers():
    root = Scope.new_root_scope()
    n = Placeholder(root, mg.int32, shape=[])
    r = Range(root, np.int32(3), n, np.int32(2))
    with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        for size in (700_001, 700_001, 650_000):  # 1.4 MiB: pooled
            out = sess.run(r, {n: size})
            assert_array_same(out, np.arange(3, size, 2, dtype=np.int32))
            out[:] = -1  # junk the buffer the next run gets back
            del out


# -- the same on the simulated GPU (the cupy code) ---------------------------------------------


@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_kernels_in_sessions_on_both_devices(device):
    with simulated_gpus(1):
        root = Scope.new_root_scope().with_device(device)
        x = Placeholder(root, mg.int64, shape=[None])
        y = Placeholder(root, mg.int64, shape=[])
        f = Placeholder(root, mg.float32, shape=[None])
        fetches = [
            FloorDiv(root, x, y),
            FloorMod(root, x, y),
            Cast(root, x, DstT=mg.int32),
            Sub(root, x, y),
            Maximum(root, f, np.float32(0.5)),
            FloorMod(root, f, np.float32(-2)),
            Range(root, np.int64(-5), np.int64(3000), np.int64(3)),
        ]
        xv = np.random.default_rng(2).integers(-(2**40), 2**40, 5000)
        fv = np.linspace(-9, 9, 301, dtype=np.float32)
        with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess:
            for d in (4, 1, 7, -4, -1):
                got = sess.run(fetches, {x: xv, y: d, f: fv})
                assert_array_same(got[0], np.array([a // d for a in xv.tolist()]))
                assert_array_same(got[1], np.array([a % d for a in xv.tolist()]))
                assert_array_same(got[2], xv.astype(np.int32))
                assert_array_same(got[3], xv - d)
                assert_array_same(got[4], np.maximum(fv, np.float32(0.5)))
                assert_array_same(got[5], np.array([a % -2.0 for a in fv.tolist()], np.float32))
                assert_array_same(got[6], np.arange(-5, 3000, 3, dtype=np.int64))
            with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
                sess.run(fetches[1], {x: xv, y: 0})
