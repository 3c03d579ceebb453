"""The math kernels (ops/math.py) against references written differently: Python's integers
for FloorDiv/FloorMod and Range, numpy's own ufuncs and astype elsewhere, bit patterns for
Cast's truncation, TF's own results (pasted) for BroadcastGradientArgs, half-precision
activations and Truncate. Kernels run on contexts whose pooled memory is full of junk, so an
element a fast path forgets to write shows up; the simulated GPU runs the cupy code on the
same cases. Also: writing into a dying input's buffer (forwarding) gives the same values."""

# ruff: noqa: E501 - tables of TF's results read best one case a line

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


def cpu_kernel(op_type: str):
    """The built-in CPU kernel function of `op_type` (from the elementwise table)."""
    (kernel,) = [k for k in mg.registry.kernels_for(op_type) if k.device_type == "CPU"]
    return kernel.fn


FLOOR_DIV, FLOOR_MOD = cpu_kernel("FloorDiv"), cpu_kernel("FloorMod")
SUB, MAXIMUM = cpu_kernel("Sub"), cpu_kernel("Maximum")

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
            div = FLOOR_DIV(dirty_ctx(), x, y)
            mod = FLOOR_MOD(dirty_ctx(), x, y)
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
        assert_array_same(FLOOR_DIV(dirty_ctx(), a, b), want_div)
        assert_array_same(FLOOR_MOD(dirty_ctx(), a, b), want_mod)


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kernel", [FLOOR_DIV, FLOOR_MOD])
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
    for kernel in (SUB, MAXIMUM, FLOOR_DIV, FLOOR_MOD):
        for y in (4, 3):
            out = kernel(dirty_ctx(), np.array(-7, np.int32), np.array(y, np.int32))
            assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.int32
    assert FLOOR_MOD(dirty_ctx(), np.array(-7), np.array(4))[()] == 1
    assert FLOOR_DIV(dirty_ctx(), np.array(-7), np.array(4))[()] == -2
    assert FLOOR_MOD(dirty_ctx(), np.array(-7), np.array(3))[()] == 2


# -- floats ------------------------------------------------------------------------------------

FLOAT_VALUES = [0.0, -0.0, 1.0, -1.0, 5.5, -5.5, 2.0, -2.0, 1e30, -1e-30, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_floor_div_and_mod_keep_tf_formulas_bit_for_bit(dtype):
    with np.errstate(all="ignore"):  # 1e30 is inf in float16; 1e30 / -1e-30 overflows
        x, y = np.meshgrid(np.array(FLOAT_VALUES, dtype), np.array(FLOAT_VALUES, dtype))
        want_div = np.floor(x / y).astype(dtype)
        m = np.fmod(x, y)
        want_mod = np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m).astype(dtype)
        div = FLOOR_DIV(dirty_ctx(), x, y)
        mod = FLOOR_MOD(dirty_ctx(), x, y)
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
    assert_array_same(SUB(dirty_ctx(), x, y), x - y)
    assert_array_same(MAXIMUM(dirty_ctx(), x, y), np.maximum(x, y))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        SUB(dirty_ctx(), x, np.zeros(3, np.float32))


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
    out = M._cast_kernel(dirty_ctx(), x, SrcT=src, DstT=mg.as_dtype(dst), Truncate=False)
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


# -- Cast with Truncate=True -------------------------------------------------------------------

inf = float("inf")

# (source, destination, inputs, TF 2.21's results with Truncate=True): truncation toward zero
# where rounding would go up (65519.9 -> 65504 where rounding gives inf in float16), NaN and
# infinities kept; float64 -> complex64 keeps only the top 11 bits (TF zeroes 53).
TRUNCATE_TF = [
    ('float32', 'bfloat16', [6.404226837730675e-08, 0.00010490011482033879, -5.356693577596161e-07, 65519.8984375, 65535.8984375, 3.3999999521443642e+38, 1.0000001192092896, 3.0, -3.0, inf], [6.379559636116028e-08, 0.00010442733764648438, -5.327165126800537e-07, 65280.0, 65280.0, 3.3895313892515355e+38, 1.0, 3.0, -3.0, inf]),
    ('float32', 'float16', [0.00010490011482033879, 3.615950481616892e-05, -0.007037352304905653, 65519.8984375, 65535.8984375, 3.3999999521443642e+38, 1.0000001192092896, 3.0, -3.0, inf], [0.00010484457015991211, 3.612041473388672e-05, -0.0070343017578125, 65504.0, 65504.0, inf, 1.0, 3.0, -3.0, inf]),
    ('float64', 'float16', [0.00010490011715303971, 3.6159505490948474e-05, -0.007037352358069926, 65519.9, 65535.9, 3.4e+38, 1.0000001, 2.9999999, -2.9999999, inf], [0.00010484457015991211, 3.612041473388672e-05, -0.0070343017578125, 65504.0, 65504.0, inf, 1.0, 2.998046875, -2.998046875, inf]),
    ('float64', 'float32', [1257302.210933933, 6.40422650443282e-08, -0.0012654214710460525, 65519.9, 65535.9, 3.4e+38, 1.0000001, 2.9999999, -2.9999999, inf], [1257302.125, 6.40422612718794e-08, -0.001265421393327415, 65519.8984375, 65535.8984375, 3.3999999521443642e+38, 1.0, 2.999999761581421, -2.999999761581421, inf]),
    ('float64', 'complex64', [1257302.210933933, -0.1321048632913019, 6.40422650443282e-08, 65519.9, 65535.9, 3.4e+38, 1.0000001, 2.9999999, -2.9999999, inf], [(524288+0j), (-0.125+0j), (2.9802322387695312e-08+0j), (32768+0j), (32768+0j), (1.7014118346046923e+38+0j), (0.5+0j), (2+0j), (-2+0j), (inf+0j)]),
    ('complex64', 'float16', [(0.00010490011482033879+3j), (-0.007037352304905653+9.99994610111476e-41j), (-0.0012654215097427368+5.99999978589949e-08j), (65519.8984375-1.245910971192643e-05j), (65535.8984375-2.325030800420791e-05j), (3.3999999521443642e+38+4.132597908323987e-08j), (1.0000001192092896-5.356693577596161e-07j), (3+0.00010490011482033879j), (-3+6.404226837730675e-08j), (inf+3.615950481616892e-05j)], [0.00010484457015991211, -0.0070343017578125, -0.0012645721435546875, 65504.0, 65504.0, inf, 1.0, 3.0, -3.0, inf]),
    ('complex128', 'float16', [(0.00010490011715303971+2.9999999j), (-0.007037352358069926+1e-40j), (-0.0012654214710460525+6e-08j), (65519.9-1.2459109472530652e-05j), (65535.9-2.3250307746388346e-05j), (3.4e+38+4.13259793472436e-08j), (1.0000001-5.356693731611109e-07j), (2.9999999+0.00010490011715303971j), (-2.9999999+6.40422650443282e-08j), (inf+3.6159505490948474e-05j)], [0.00010484457015991211, -0.0070343017578125, -0.0012645721435546875, 65504.0, 65504.0, inf, 1.0, 2.998046875, -2.998046875, inf]),
    ('complex128', 'float32', [(1257302.210933933+1.5j), (6.40422650443282e-08-2.9999999j), (-0.0012654214710460525+6e-08j), (65519.9-1.2459109472530652e-05j), (65535.9-2.3250307746388346e-05j), (3.4e+38+4.13259793472436e-08j), (1.0000001-5.356693731611109e-07j), (2.9999999+0.00010490011715303971j), (-2.9999999+6.40422650443282e-08j), (inf+3.6159505490948474e-05j)], [1257302.125, 6.40422612718794e-08, -0.001265421393327415, 65519.8984375, 65535.8984375, 3.3999999521443642e+38, 1.0, 2.999999761581421, -2.999999761581421, inf]),
    ('complex128', 'complex64', [(1257302.210933933+1.5j), (6.40422650443282e-08-2.9999999j), (0.00010490011715303971+2.9999999j), (65519.9-1.2459109472530652e-05j), (65535.9-2.3250307746388346e-05j), (3.4e+38+4.13259793472436e-08j), (1.0000001-5.356693731611109e-07j), (2.9999999+0.00010490011715303971j), (-2.9999999+6.40422650443282e-08j), (inf+3.6159505490948474e-05j)], [(1257302.125+1.5j), (6.40422612718794e-08-2.999999761581421j), (0.00010490011482033879+2.999999761581421j), (65519.8984375-1.2459108802431729e-05j), (65535.8984375-2.3250306185218506e-05j), (3.3999999521443642e+38+4.132597908323987e-08j), (1-5.356693577596161e-07j), (2.999999761581421+0.00010490011482033879j), (-2.999999761581421+6.40422612718794e-08j), (inf+3.615950481616892e-05j)]),
]  # fmt: skip


def _bits(array: np.ndarray) -> list[list[int]]:
    """Each element's bytes."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.view(np.uint8).reshape(flat.size, flat.dtype.itemsize).tolist()


@pytest.mark.parametrize(
    "src, dst, x, want", TRUNCATE_TF, ids=[f"{r[0]}-{r[1]}" for r in TRUNCATE_TF]
)
def test_cast_truncate_gives_tfs_values(src, dst, x, want):
    s, d = mg.as_dtype(src), mg.as_dtype(dst)
    x = np.array(x, s.np_dtype)
    got = run_cast(x, d, truncate=True)
    want = np.array(want, d.np_dtype)
    assert got.dtype == want.dtype and _bits(got) == _bits(want)
    # Without Truncate the same values round (65519.9 -> inf in float16, 1.0000001 -> 1).
    with np.errstate(all="ignore"):
        rounded = (x.real if s.is_complex and not d.is_complex else x).astype(d.np_dtype)
    assert _bits(run_cast(x, d, truncate=False)) == _bits(rounded)


def run_cast(x: np.ndarray, dst: mg.DType, truncate: bool) -> np.ndarray:
    root = Scope.new_root_scope()
    p = Placeholder(root, mg.as_dtype(x.dtype))
    with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess, np.errstate(
        all="ignore"
    ):  # fmt: skip
        return sess.run(Cast(root, p, dst, Truncate=truncate), {p: x})


def _truncate_reference(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """Truncation written per element with Python integers: clear the low mantissa bits the
    destination lacks (not for NaN), then round as usual."""
    width = {np.float64: 53, np.float32: 24}[x.real.dtype.type]
    # Destination mantissa digits, as TF counts them: complex64's are float32's from complex
    # values, 0 from float64 (numeric_limits<complex<float>>::digits).
    keep = {np.float16: 11, np.float32: 24, np.complex64: 24 if x.dtype.kind == "c" else 0}.get(
        dst.type,
        8,  # bfloat16
    )
    drop = width - keep
    bits = 8 * x.real.dtype.itemsize
    parts = [x.real, x.imag] if x.dtype.kind == "c" else [x]
    cleared = []
    for part in parts:
        words = part.view(f"u{bits // 8}").tolist()
        out = [w if math.isnan(v) else w >> drop << drop for w, v in zip(words, part.tolist())]
        cleared.append(np.array(out, f"u{bits // 8}").view(part.dtype))
    value = cleared[0]
    if len(cleared) == 2:  # (not re + 1j * im: 1j * inf is nan + inf j)
        value = np.empty(x.shape, x.dtype)
        value.real, value.imag = cleared
    if x.dtype.kind == "c" and dst.kind != "c":
        value = value.real
    with np.errstate(all="ignore"):
        return value.astype(dst)


@pytest.mark.parametrize("src, dst", sorted({(s.name, d.name) for s, d in M._TRUNCATED_BITS}))
def test_cast_truncate_matches_a_bitwise_reference(src, dst):
    rng = np.random.default_rng(7)
    s, d = mg.as_dtype(src), mg.as_dtype(dst)
    real = s.np_dtype.type(0).real.dtype
    values = (rng.standard_normal(400) * 10.0 ** rng.integers(-6, 6, 400)).astype(real)
    values[:6] = [np.nan, -np.inf, 0.0, -0.0, 65519.9, 1.0 + 2**-20]
    # A NaN whose payload is only low bits: cleared, it would become inf (TF keeps NaNs).
    values[6:7] = np.array([0x7FF0000000000001 if real == np.float64 else 0x7F800001],
                           f"u{real.itemsize}").view(real)  # fmt: skip
    x = np.empty(values.shape, s.np_dtype)
    x.real = values
    if s.is_complex:
        x.imag = values[::-1]
    assert _bits(run_cast(x, d, truncate=True)) == _bits(_truncate_reference(x, d.np_dtype))


def test_cast_truncate_elsewhere_casts_as_without_it():
    x = np.array([1.7, -2.5, 3e9, np.nan], np.float64)
    for dst in (mg.int32, mg.bfloat16, mg.float64, mg.complex128, mg.bool_):
        assert _bits(run_cast(x, dst, truncate=True)) == _bits(run_cast(x, dst, truncate=False))
    scalar = np.array(65519.9, np.float32)
    assert run_cast(scalar, mg.float16, truncate=True).shape == ()
    assert run_cast(scalar, mg.float16, truncate=True).tolist() == 65504.0
    z = np.array(1.0000001 + 2.9999999j, np.complex128)
    got = run_cast(z, mg.complex64, truncate=True)
    assert got.shape == () and got.tolist() == (1 + 2.999999761581421j)
    assert run_cast(np.zeros((0, 2)), mg.float16, truncate=True).shape == (0, 2)


# -- half-precision activations: bit for bit TF's ---------------------------------------------

# TF 2.21's results (as uint16 bit patterns) for these float16 / bfloat16 inputs: Sigmoid in
# T's arithmetic (e / (1 + e)), Softplus with Eigen's epsilon (2**-13 for half), Rsqrt in
# float32 rounded once, Elu as exp(x) - 1.
HALF_TF = {
    "float16": {
        "x": [52306, 51712, 51405, 50947, 50944, 50440, 50417, 49592, 49584, 37913, 0, 14336, 16896, 17551, 18829, 18944],
        "Sigmoid": [1, 103, 1135, 4960, 4982, 7844, 8004, 10992, 11017, 14335, 14336, 14587, 15263, 15339, 15360, 15360],
        "Softplus": [1, 103, 1135, 4962, 4983, 7850, 8010, 11042, 11070, 14731, 14732, 15307, 16921, 17554, 18829, 18944],
        "Elu": [48128, 48128, 48128, 48126, 48126, 48115, 48113, 48011, 48009, 37888, 0, 14336, 16896, 17551, 18829, 18944],
        "Rsqrt": [13235, 13470, 13610, 13835, 13836, 14114, 14131, 14523, 14526, 20455, 31744, 15784, 14494, 14206, 13517, 13470],
    },
    "bfloat16": {
        "x": [49546, 49472, 49434, 49376, 49376, 49313, 49310, 49207, 49206, 47747, 0, 16128, 16448, 16530, 16690, 16704],
        "Sigmoid": [13066, 14030, 14475, 14959, 14959, 15316, 15337, 15711, 15714, 16128, 16128, 16159, 16244, 16253, 16256, 16256],
        "Softplus": [13066, 14030, 14475, 14959, 14959, 15318, 15339, 15723, 15719, 16177, 16177, 16249, 16448, 16530, 16690, 16704],
        "Elu": [49024, 49024, 49024, 49024, 49024, 49022, 49022, 49009, 49009, 0, 0, 16128, 16448, 16530, 16690, 16704],
        "Rsqrt": [15991, 16020, 16037, 16066, 16066, 16100, 16102, 16151, 16152, 16893, 32640, 16309, 16148, 16112, 16026, 16020],
    },
}  # fmt: skip


@pytest.mark.parametrize("dtype", sorted(HALF_TF))
@pytest.mark.parametrize("op", ["Sigmoid", "Softplus", "Elu", "Rsqrt"])
def test_half_precision_activations_are_tfs_bit_for_bit(dtype, op):
    t = mg.as_dtype(dtype).np_dtype
    x = np.array(HALF_TF[dtype]["x"], np.uint16).view(t)
    if op == "Rsqrt":
        x = np.abs(x)
    got = cpu_kernel(op)(dirty_ctx(op), x)
    assert got.dtype == t and got.view(np.uint16).tolist() == HALF_TF[dtype][op]


# -- BroadcastGradientArgs ---------------------------------------------------------------------

# (s0, s1, TF's r0, TF's r1)
BCAST_TF = [
    ([2, 3], [3], [], [0]), ([2, 3], [2, 3], [], []), ([2, 1], [1], [1], [0, 1]),
    ([1], [2, 1], [0, 1], [1]), ([5, 1, 3], [4, 1], [1], [0, 2]), ([], [2, 3], [0, 1], []),
    ([1, 1], [1], [0, 1], [0, 1]), ([0], [1], [], [0]), ([3, 1, 1], [1, 2, 1], [1, 2], [0, 2]),
    ([1, 2, 1, 4], [3, 1, 1, 1], [0, 2], [1, 2, 3]),
    ([1, 2, 1, 4], [3, 1, 2, 1, 1], [0, 1, 3], [1, 3, 4]), ([], [], [], []), ([1], [], [0], [0]),
    ([-1], [-1], [], []), ([2, -1], [-1], [], [0]),
    ([2, 1], [2, 1], [], []), ([1], [1], [], []),  # equal shapes: TF's fast path, 1s ignored
]  # fmt: skip


@pytest.mark.parametrize("s0, s1, r0, r1", BCAST_TF)
@pytest.mark.parametrize("dtype", [mg.int32, mg.int64])
def test_broadcast_gradient_args_are_tfs(s0, s1, r0, r1, dtype):
    root = Scope.new_root_scope()
    a, b = Placeholder(root, dtype, shape=[None]), Placeholder(root, dtype, shape=[None])
    fed = M.BroadcastGradientArgs(root, a, b)
    const = M.BroadcastGradientArgs(
        root, np.array(s0, dtype.np_dtype), np.array(s1, dtype.np_dtype)
    )
    assert [o.shape.as_list() for o in const.outputs] == [[len(r0)], [len(r1)]]
    assert [o.shape.as_list() for o in fed.outputs] == [[None], [None]]
    with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        got = sess.run([*fed.outputs, *const.outputs], {a: s0, b: s1})
    for value, want in zip(got, [r0, r1, r0, r1]):
        assert_array_same(value, np.array(want, dtype.np_dtype))


def test_broadcast_gradient_args_reduce_back_to_the_inputs():
    # The reduction indices undo a broadcast: summing the broadcast result over r0 (and
    # reshaping) gives x's shape, as gradient graphs use them.
    rng = np.random.default_rng(3)
    for _ in range(50):
        rank = int(rng.integers(0, 4))
        out = rng.integers(1, 4, rank).tolist()
        x = [d if rng.random() < 0.5 else 1 for d in out][int(rng.integers(0, rank + 1)) :]
        y = [d if rng.random() < 0.5 else 1 for d in out]
        r0, r1 = M.broadcast_gradient_args(x, y)
        full = np.ones(np.broadcast_shapes(tuple(x), tuple(y)))
        assert full.sum(axis=tuple(r0)).reshape(x).shape == tuple(x)
        assert full.sum(axis=tuple(r1)).reshape(y).shape == tuple(y)


# -- AddN --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", M._ADD_N_TYPES)
def test_add_n_into_dirty_pooled_memory(dtype):
    t = mg.as_dtype(dtype).np_dtype
    rng = np.random.default_rng(4)
    inputs = [rng.integers(0, 50, (700, 3)).astype(t) for _ in range(5)]  # pooled sizes
    got = cpu_kernel("AddN")(dirty_ctx("AddN"), inputs)
    want = inputs[0].copy()
    for v in inputs[1:]:
        want = (want + v).astype(t)
    assert_array_same(got, want)
    for v in inputs:
        assert not np.shares_memory(got, v)
    assert cpu_kernel("AddN")(dirty_ctx("AddN"), inputs[:1]) is inputs[0]  # TF forwards it


# -- forwarding: a result written into a dying input's buffer ---------------------------------


def _forwarding_ctx(device: str = "CPU") -> KernelContext:
    ctx = dirty_ctx() if device == "CPU" else KernelContext(SimulatedGpuDevice(0), "n", "T")
    ctx.forwardable_inputs = frozenset({0, 1})
    return ctx


def _operand(dtype: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    values = rng.integers(1, 9, shape)
    if dtype.kind == "c":
        return (values + 1j * rng.integers(1, 9, shape)).astype(dtype)
    values = values.astype(dtype)
    if dtype.kind not in "iu":
        values.flat[0] = 100  # exp overflows: the paths that fix that up run too
    return values


@pytest.mark.parametrize("row", M.ELEMENTWISE_OPS, ids=lambda r: r.name)
def test_forwarded_results_equal_fresh_ones(row):
    """Every kernel, with its inputs' buffers offered for its result: the values are those of
    a fresh output; kernels whose rows say `forward` write into an input whose shape and dtype
    are the result's, the others never do."""
    kernel = cpu_kernel(row.name)
    for dtype_name in row.cpu or row.types or ("bool",):
        t = mg.as_dtype(dtype_name).np_dtype
        if t.kind == "O":
            continue
        for x_shape, y_shape in (((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4))):
            x, y = _operand(t, x_shape, 1), _operand(t, y_shape, 2)
            args = (x,) if len(row.inputs) == 1 else (x, y)
            attrs = {"incompatible_shape_error": True} if row.attrs else {}
            with np.errstate(all="ignore"):
                fresh = kernel(dirty_ctx(), *(a.copy() for a in args), **attrs)
                copies = [a.copy() for a in args]
                forwarded = kernel(_forwarding_ctx(), *copies, **attrs)
            np.testing.assert_array_equal(forwarded, fresh, strict=True)
            reused = any(forwarded is c for c in copies)
            same = [c for c in copies if c.shape == fresh.shape and c.dtype == fresh.dtype]
            assert reused == (row.forward and bool(same)), (row.name, dtype_name, x_shape)


def test_add_n_forwards_only_its_first_two_inputs():
    x = np.arange(4.0)
    ctx = _forwarding_ctx()
    a, b = x.copy(), x.copy()
    assert cpu_kernel("AddN")(ctx, [a, b, x]) is a
    ctx.forwardable_inputs = frozenset({2})
    c = x.copy()
    got = cpu_kernel("AddN")(ctx, [x, x, c])
    assert got is not c and got.tolist() == (3 * x).tolist() and c.tolist() == x.tolist()
    # The same array twice: the first addition may overwrite it, the second must not read it.
    ctx.forwardable_inputs = frozenset({0})
    d = x.copy()
    got = cpu_kernel("AddN")(ctx, [d, x, d])
    assert got is not d and got.tolist() == (3 * x).tolist()


# -- TF's quirks on complex numbers and special values (checked against TF 2.21) ---------------


def _complex(re: list[float], im: list[float], dtype=np.complex64) -> np.ndarray:
    out = np.empty(len(re), dtype)
    out.real, out.imag = re, im  # (re + 1j * im would turn inf * 1j into nan + inf j)
    return out


@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_complex_quirks(device):
    ctx = dirty_ctx() if device == "CPU" else KernelContext(SimulatedGpuDevice(0), "n", "T")
    put = (lambda v: v) if device == "CPU" else ctx.device.from_host
    get = (lambda v: v) if device == "CPU" else ctx.device.to_host

    def run(op, *values):
        with np.errstate(all="ignore"):
            return get(cpu_kernel(op)(ctx, *(put(v) for v in values))).tolist()

    # Rsqrt takes a zero imaginary part as +0: 1 / sqrt(-4 - 0j) is -0.5j (numpy: +0.5j).
    assert run("Rsqrt", _complex([-4, -4, 4], [-0.0, 0.0, -0.0])) == [-0.5j, -0.5j, 0.5 + 0j]
    # Sign: part by part, so inf + 1j gives nan + 0j; 0 for 0.
    sign = run("Sign", _complex([np.inf, 0, 3], [1, 0, 4]))
    assert math.isnan(sign[0].real) and sign[0].imag == 0
    assert sign[1:] == np.array([0j, 0.6 + 0.8j], np.complex64).tolist()
    # Sigmoid: 1 / (1 + exp(-x)), 0 where that denominator is infinite (numpy: NaN).
    sig = run("Sigmoid", _complex([100, -100, 90], [0, 1, -0.04]))
    assert [v.real for v in sig] == [1.0, 0.0, 1.0]
    # Pow: exp(y * log(x)), so 0 ** 0 is NaN and 1j ** 2 is not exactly -1.
    powers = run("Pow", _complex([0, 0, 2], [0, 1, 0]), _complex([0, 2, 0.5], [0, 0, 0]))
    assert math.isnan(powers[0].real) and powers[1] != -1 and abs(powers[1] + 1) < 1e-6
    assert abs(powers[2] - 2**0.5) < 1e-6
    # SquaredDifference: (x - y) * conj(x - y), real.
    assert run("SquaredDifference", _complex([3, 0], [4, 1]), _complex([0, 0], [0, 0])) == [
        25 + 0j,
        1 + 0j,
    ]


def test_no_floating_point_warnings_escape_as_tf_computes_silently():
    # Overflow, inf - inf, 0 / 0, log(0), sqrt(-1): TF computes them silently, so no kernel
    # may let numpy warn (warnings turned into errors, numpy set to warn).
    import warnings

    with warnings.catch_warnings(), np.errstate(all="warn"):
        warnings.simplefilter("error")
        for row in M.ELEMENTWISE_OPS:
            kernel = cpu_kernel(row.name)
            for name in row.cpu or row.types or ():
                t = mg.as_dtype(name).np_dtype
                if t.kind not in "fcV":
                    continue
                with np.errstate(all="ignore"):
                    big = float(np.finfo(np.float32 if t.kind == "V" else t).max)
                    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, big, -big, 1.0, -1.0])
                    special = special.astype(t)
                # Every pair (inf - inf, max + max, 0 / 0, ...) for binary ops.
                args = (special,) if len(row.inputs) == 1 else (special[:, None], special)
                attrs = {"incompatible_shape_error": True} if row.attrs else {}
                kernel(dirty_ctx(), *args, **attrs)
        for dtype in (np.float16, np.float32):
            x = np.array([np.inf, -np.inf, 6e4], dtype)
            cpu_kernel("AddN")(dirty_ctx(), [x, -x, x])


# -- Div of integers: C's truncating division -------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_integer_div_rounds_towards_zero(dtype):
    # TF: [-7, 7, -7, 7] / [2, -2, -2, 2] is [-3, -3, 3, 3]; INT_MIN / -1 wraps to INT_MIN.
    div = cpu_kernel("Div")
    x, y = np.array([-7, 7, -7, 7, 6, -6], dtype), np.array([2, -2, -2, 2, 3, 4], dtype)
    assert_array_same(div(dirty_ctx(), x, y), np.array([-3, -3, 3, 3, 2, -1], dtype))
    low = np.iinfo(dtype).min
    assert_array_same(div(dirty_ctx(), np.array([low], dtype), np.array(-1, dtype)),
                      np.array([low], dtype))  # fmt: skip
    samples = int_samples(dtype)
    for d in divisors(dtype):
        want = [abs(a) // abs(d) * (1 if (a < 0) == (d < 0) else -1) for a in samples.tolist()]
        assert_array_same(div(dirty_ctx(), samples, np.array(d, dtype)), wrap(want, dtype))


# -- special values, one op at a time ---------------------------------------------------------

FLOATS = ["bfloat16", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", FLOATS)
def test_special_values(dtype):
    t = mg.as_dtype(dtype).np_dtype

    def run(op, *values):
        with np.errstate(all="ignore"):
            arrays = [np.array(v, np.float64).astype(t) for v in values]
            return cpu_kernel(op)(dirty_ctx(), *arrays).astype(np.float64)

    nan = np.nan
    for op in ("Maximum", "Minimum"):  # NaN wins, on either side
        got = run(op, [nan, 1.0, nan, 2.0], [1.0, nan, nan, 3.0])
        assert np.isnan(got[:3]).all() and got[3] == (3.0 if op == "Maximum" else 2.0)
    sign = run("Sign", [-0.0, 0.0, nan, -np.inf, 5.0])
    assert sign[:2].tolist() == [0.0, 0.0] and not np.signbit(sign[:2]).any()
    assert np.isnan(sign[2]) and sign[3:].tolist() == [-1.0, 1.0]
    relu = run("Relu", [-0.0, nan, -2.0, 3.0])  # (the sign of a zero: unspecified, as TF's)
    assert relu[0] == 0 and np.isnan(relu[1]) and relu[2:].tolist() == [0.0, 3.0]
    relu6 = run("Relu6", [nan, -1.0, 5.0, 7.0, np.inf])
    assert np.isnan(relu6[0]) and relu6[1:].tolist() == [0.0, 5.0, 6.0, 6.0]
    assert run("Round", [0.5, 1.5, 2.5, -0.5, -2.5]).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    assert run("Rsqrt", [0.0, -0.0, -1.0])[:2].tolist() == [np.inf, -np.inf]
    assert run("Reciprocal", [0.0, -0.0]).tolist() == [np.inf, -np.inf]
    assert run("Log", [0.0, -0.0, 1.0]).tolist() == [-np.inf, -np.inf, 0.0]
    assert run("Sigmoid", [np.inf, -np.inf, 0.0]).tolist() == [1.0, 0.0, 0.5]
    assert run("Softplus", [np.inf, -np.inf]).tolist() == [np.inf, 0.0]
    assert run("Elu", [-np.inf, np.inf]).tolist() == [-1.0, np.inf]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_round_of_integers_is_the_identity(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, -3, 0, 7, info.max], dtype)
    assert_array_same(cpu_kernel("Round")(dirty_ctx(), x), x)
