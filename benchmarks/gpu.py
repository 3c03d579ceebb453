"""GPU kernels: GatherV2 and GatherNd through `Session.run` on GPU:0, against a device copy.

Runs only when cupy imports, `cupy.cuda.is_available()` and minigraph sees a GPU; otherwise it
prints one line saying why. Run it alone with `python -m benchmarks --only gpu`.

Kernel table: the CPU section's cases scaled *up* (x40 down to x1, the largest that fits the
memory cap) with inputs generated on the device and fed as cupy arrays. The timed run fetches
the gather's Operation (not its output), so the output is computed on the device and nothing
is copied back (Session.run returns host arrays for fetched tensors). Timed with CUDA events
around the whole call (Python launch gaps included), interleaved with:
- cupy direct: the same job written by hand (one bounds-check reduction, one take);
- copy: `cupy.copyto` of the output's size between preallocated device arrays (the floor).
Bandwidth = 2 x output bytes (read + write) / time; the figure to watch is the gather's
bandwidth as a percentage of the copy's (target >= 60% for the large axis-0 gathers).

Transfer table: host->device cost (numpy feeds minus device feeds) and device->host cost
(fetching the output minus fetching the Operation), each next to a bare cupy.asarray /
cupy.asnumpy of the same bytes.

Every case is guarded: an error is printed with the case and the section goes on. The hidden
`--gpu-simulate` flag runs this code on minigraph's simulated GPU through its cupy double,
`minigraph.testing.simulated_cupy` (a code-path check; its figures mean nothing).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import minigraph
from benchmarks._config import Bench
from benchmarks._report import cell, num, ratio_cell
from benchmarks._timing import Stats, interleaved, paired
from benchmarks.kernels import CASES, Case, build_graph, make_inputs
from minigraph import RunMetadata, Session

__all__ = ["run", "unavailable_reason"]

SECTION = "gpu"
DEVICE = "/device:GPU:0"
TARGET = ">= 60"  # % of copy bandwidth, large axis-0 gathers
#: Kernel results up to this size are checked against cupy's (a device->host copy each).
_CHECK_BYTES = 512 << 20


class _Cupy:
    """cupy on GPU:0, timed with CUDA events on the current stream."""

    simulated = False

    def __init__(self, cp: Any):
        self.xp = cp
        self._start = cp.cuda.Event()
        self._end = cp.cuda.Event()

    def describe(self) -> str:
        cp = self.xp
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else name
        free, total = cp.cuda.runtime.memGetInfo()
        return (
            f"{name}, {total / 2**30:.0f} GiB ({free / 2**30:.0f} GiB free), cupy "
            f"{cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}"
        )

    def free_bytes(self) -> int:
        return int(self.xp.cuda.runtime.memGetInfo()[0])

    def clock(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        self._start.record()
        result = fn()
        self._end.record()
        self._end.synchronize()
        return self.xp.cuda.get_elapsed_time(self._start, self._end) * 1e-3, result

    def random(self, shape: tuple[int, ...]) -> Any:
        return self.xp.random.random(shape, dtype=self.xp.float32)

    def randint(self, high: int, shape: tuple[int, ...]) -> Any:
        return self.xp.random.randint(0, high, size=shape, dtype=self.xp.int64)

    def to_device(self, array: np.ndarray) -> Any:
        return self.xp.asarray(array)

    def to_host(self, array: Any) -> np.ndarray:
        return self.xp.asnumpy(array)

    def release(self) -> None:
        self.xp.cuda.Device(0).synchronize()
        self.xp.get_default_memory_pool().free_all_blocks()


class _Simulated:
    """minigraph's simulated GPU (`minigraph.testing.simulated_cupy`): exercises this module's
    code on device arrays as cupy's would be (kernels, feeds, fetches and transfers take the
    same paths), measures nothing."""

    simulated = True

    def __init__(self) -> None:
        from minigraph.testing import simulated_cupy  # noqa: PLC0415 - only when simulating

        self.xp = simulated_cupy
        self._rng = np.random.default_rng(0)

    def describe(self) -> str:
        return "simulated GPU (minigraph.testing.simulated_cupy; figures are meaningless)"

    def free_bytes(self) -> int:
        return 1 << 30

    def clock(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        start = time.perf_counter_ns()
        result = fn()
        return (time.perf_counter_ns() - start) * 1e-9, result

    def random(self, shape: tuple[int, ...]) -> Any:
        return self.xp.asarray(self._rng.random(shape, dtype=np.float32))

    def randint(self, high: int, shape: tuple[int, ...]) -> Any:
        return self.xp.asarray(self._rng.integers(0, high, size=shape, dtype=np.int64))

    def to_device(self, array: np.ndarray) -> Any:
        return self.xp.asarray(array)

    def to_host(self, array: Any) -> np.ndarray:
        return self.xp.asnumpy(array)

    def release(self) -> None:
        pass


def unavailable_reason() -> str | None:
    """Why the GPU section cannot run here (None when it can)."""
    try:
        import cupy  # noqa: PLC0415 - optional
    except Exception as e:
        return f"cupy cannot be imported ({type(e).__name__}: {e})"
    try:
        if not cupy.cuda.is_available():
            return "cupy imports but cupy.cuda.is_available() is False (no CUDA device/driver)"
    except Exception as e:
        return f"cupy.cuda.is_available() failed ({type(e).__name__}: {e})"
    reason = minigraph.gpu_unavailable_reason()
    if reason:
        return f"minigraph sees no GPU: {reason}"
    return None


def _device_inputs(backend: Any, case: Case) -> tuple[Any, Any]:
    """Random float32 params and valid int64 indices, generated on the device."""
    xp = backend.xp
    params = backend.random(case.params)
    if case.op == "GatherV2":
        return params, backend.randint(case.params[case.axis], case.indices)
    depth = case.indices[-1]
    bd = case.batch_dims
    dims = case.params[bd : bd + depth]
    rows = case.indices[:-1]
    columns = [backend.randint(d, rows) for d in dims]
    return params, xp.stack(columns, axis=-1) if columns else backend.randint(1, case.indices)


def _direct(xp: Any, case: Case, params: Any, idx: Any) -> Callable[[], Any]:
    """The job written by hand with the array module: one bounds check, one take."""
    out_shape = case.out_shape
    bd = case.batch_dims
    if case.op == "GatherV2":
        axis = case.axis
        n = case.params[axis]
        unsigned = idx.view(np.uint64)
        if bd == 0:

            def gather_v2() -> Any:
                if idx.size and int(unsigned.max()) >= n:
                    raise IndexError("index out of range")
                return xp.take(params, idx, axis=axis)

            return gather_v2
        batch = math.prod(case.params[:bd])
        outer = math.prod(case.params[bd:axis])
        inner = math.prod(case.params[axis + 1 :])
        m = math.prod(case.indices[bd:])
        table = params.reshape(batch * outer * n, inner)

        def gather_v2_batched() -> Any:
            if idx.size and int(unsigned.max()) >= n:
                raise IndexError("index out of range")
            base = (xp.arange(batch * outer, dtype=np.int64) * n).reshape(batch, outer, 1)
            rows = (idx.reshape(batch, 1, m) + base).reshape(-1)
            return xp.take(table, rows, axis=0).reshape(out_shape)

        return gather_v2_batched
    depth = case.indices[-1]
    dims = case.params[bd : bd + depth]
    batch = math.prod(case.params[:bd])
    per_batch = math.prod(dims)
    m = math.prod(case.indices[bd:-1])
    table = params.reshape(batch * per_batch, *case.params[bd + depth :])
    rows = idx.reshape(-1, depth)
    limits = xp.asarray(np.array(dims, dtype=np.uint64))

    def gather_nd() -> Any:
        if rows.size and bool((rows.view(np.uint64) >= limits).any()):
            raise IndexError("index out of range")
        flat = rows[:, 0]
        for k in range(1, depth):
            flat = flat * dims[k] + rows[:, k]
        if bd:
            offsets = xp.arange(batch, dtype=np.int64)[:, None] * per_batch
            flat = (flat.reshape(batch, m) + offsets).reshape(-1)
        return xp.take(table, flat, axis=0).reshape(out_shape)

    return gather_nd


def _estimate(case: Case) -> int:
    """Device bytes a case needs: inputs, two outputs, the copy's two buffers, index temps."""
    b = case.nbytes()
    return b["params"] + 4 * b["indices"] + 4 * b["output"]


def _fit(case: Case, factors: tuple[int, ...], cap: int) -> tuple[Case, int] | None:
    for f in factors:
        sized = case.resized(factor=f)
        if _estimate(sized) <= cap:
            return sized, f
    return None


def _has_target(case: Case) -> bool:
    """The large axis-0 gathers: GatherV2 axis 0, rows of 16 floats (64 B) or more."""
    return case.op == "GatherV2" and case.axis == 0 and math.prod(case.params[1:]) >= 16


def _check_placement(sess: Session, g: Any, feed: dict[Any, Any]) -> str | None:
    md = RunMetadata()
    sess.run(g.operation, feed, run_metadata=md)
    device = md.placement.get(g.operation.name, "?")
    return None if "GPU" in device else f"gather placed on {device}, not on a GPU"


def _kernel_case(bench: Bench, backend: Any, case: Case) -> dict[str, Any]:
    xp = backend.xp
    params, idx = _device_inputs(backend, case)
    p, i, g = build_graph(case, DEVICE)
    feed = {p: params, i: idx}
    out_shape = case.out_shape
    src = backend.random(out_shape)
    dst = xp.empty_like(src)
    with Session(g.operation.graph) as sess:
        warning = _check_placement(sess, g, feed)
        direct = _direct(xp, case, params, idx)
        if case.nbytes()["output"] <= _CHECK_BYTES:  # larger outputs: checked in _transfers
            got = sess.run(g, feed)
            if not np.array_equal(got, backend.to_host(direct())):
                warning = (warning + "; " if warning else "") + "minigraph's result differs"
            del got
        fns = {
            "minigraph": lambda: sess.run(g.operation, feed),
            "cupy direct": direct,
            "copy": lambda: xp.copyto(dst, src),
        }
        samples = interleaved(fns, bench.mode.gpu_repeats, warmup=2, clock=backend.clock)
    return {"samples": samples, "warning": warning}


def _transfer_case(bench: Bench, backend: Any, case: Case) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    host_params, host_idx = make_inputs(case, rng)
    params, idx = backend.to_device(host_params), backend.to_device(host_idx)
    p, i, g = build_graph(case, DEVICE)
    dev_feed = {p: params, i: idx}
    host_feed = {p: host_params, i: host_idx}
    out = _direct(backend.xp, case, params, idx)()
    with Session(g.operation.graph) as sess:
        if not np.array_equal(sess.run(g, dev_feed), backend.to_host(out)):
            raise AssertionError("minigraph's result differs from cupy's")
        fns = {
            "device feeds, fetch op": lambda: sess.run(g.operation, dev_feed),
            "host feeds, fetch op": lambda: sess.run(g.operation, host_feed),
            "device feeds, fetch value": lambda: sess.run(g, dev_feed),
            "bare to_device": lambda: (backend.to_device(host_params), backend.to_device(host_idx)),
            "bare to_host": lambda: backend.to_host(out),
        }
        samples = interleaved(fns, bench.mode.gpu_repeats, warmup=2, clock=backend.clock)
    return {"samples": samples}


@contextlib.contextmanager
def _backend(bench: Bench) -> Iterator[Any]:
    if bench.gpu_simulate:
        import minigraph.testing  # noqa: PLC0415

        with minigraph.testing.simulated_gpus(1):
            yield _Simulated()
        return
    import cupy  # noqa: PLC0415 - checked by unavailable_reason

    with cupy.cuda.Device(0):
        yield _Cupy(cupy)


def run(bench: Bench) -> None:
    """Times the GPU kernels and transfers, or says why it cannot."""
    report = bench.report
    report.heading("GPU: Session.run on GPU:0 with device inputs, vs a device-to-device copy")
    if not bench.gpu_simulate:
        reason = unavailable_reason()
        if reason:
            report.note(f"GPU section skipped: {reason}.")
            report.add(SECTION, "all", "skipped", reason, "")
            return
    with _backend(bench) as backend:
        try:
            report.note(f"device: {backend.describe()}")
        except Exception as e:
            report.note(f"device: GPU:0 (no description: {type(e).__name__}: {e})")
        _kernels(bench, backend)
        _transfers(bench, backend)


def _kernels(bench: Bench, backend: Any) -> None:
    report, mode = bench.report, bench.mode
    rows, notes = [], []
    if backend.simulated:
        factors, divisor = (1,), max(mode.kernel_divisor, 100)
    else:
        factors, divisor = mode.gpu_factors, 1
    for full in CASES:
        start = full.resized(divisor=divisor)
        cap = min(mode.gpu_cap_bytes, int(backend.free_bytes() * 0.8))
        fitted = _fit(start, factors, cap)
        if fitted is None:
            notes.append(f"{start.name}: skipped, does not fit {cap / 2**30:.1f} GiB even at x1")
            continue
        case, factor = fitted
        try:
            result = _kernel_case(bench, backend, case)
        except Exception as e:
            rows.append([case.name, f"x{factor}", "error (below)"])
            notes.append(f"{case.name}: error: {type(e).__name__}: {e}")
            report.add(SECTION, case.name, "error", f"{type(e).__name__}: {e}", "")
            continue
        finally:
            backend.release()
        s = result["samples"]
        if result["warning"]:
            notes.append(f"{case.name}: WARNING: {result['warning']}")
        moved = 2 * case.nbytes()["output"]  # output bytes read + written
        ms = {name: Stats.of(v).scaled(1e3) for name, v in s.items()}
        gbps = {name: Stats.of(moved / t / 1e9 for t in v) for name, v in s.items()}
        pct = paired(lambda t, c: 100 * c / t, s["minigraph"], s["copy"])
        vs_direct = paired(lambda a, b: a / b, s["minigraph"], s["cupy direct"])
        target = TARGET if _has_target(case) else None
        rows.append(
            [
                case.name,
                f"x{factor}",
                num(case.nbytes()["output"] / 2**30),
                cell(ms["minigraph"]),
                cell(ms["cupy direct"]),
                ratio_cell(vs_direct),
                num(ms["copy"].median),
                num(gbps["minigraph"].median),
                num(gbps["copy"].median),
                ratio_cell(pct, target),
            ]
        )
        for name in s:
            report.add(SECTION, case.name, f"time {name}", ms[name], "ms")
            report.add(SECTION, case.name, f"bandwidth {name}", gbps[name], "GB/s")
        report.add(
            SECTION, case.name, "minigraph / cupy direct", vs_direct, "x", baseline="cupy direct"
        )
        report.add(
            SECTION,
            case.name,
            "bandwidth % of copy",
            pct,
            "%",
            target=target,
            baseline="cupy.copyto",
        )
    width = 10
    rows = [r + [""] * (width - len(r)) for r in rows]
    report.table(
        "",
        [
            "case",
            "size",
            "out GiB",
            "minigraph ms",
            "cupy direct ms",
            "mg/cupy",
            "copy ms",
            "mg GB/s",
            "copy GB/s",
            "% of copy",
        ],
        rows,
        [
            f"CUDA-event time of the whole call, median (min-max) over {mode.gpu_repeats} "
            "interleaved repeats; minigraph fetches the Operation (no device->host copy).",
            "GB/s = 2 x output bytes / time; '% of copy' target "
            f"{TARGET} for GatherV2 axis 0 with rows >= 64 B; ' !' marks a miss.",
            f"size = multiplier of the CPU section's full sizes (largest of {list(factors)} "
            f"within {mode.gpu_cap_bytes / 2**30:g} GiB).",
            *notes,
        ],
    )


def _gbps(nbytes: int, ms: Stats) -> str:
    """Bandwidth of moving `nbytes` in the median time ('-' when noise made it <= 0)."""
    return num(nbytes / ms.median / 1e6) if ms.median > 0 else "-"


def _transfers(bench: Bench, backend: Any) -> None:
    report, mode = bench.report, bench.mode
    divisor = max(mode.kernel_divisor, 100) if backend.simulated else mode.kernel_divisor
    rows, notes = [], []
    for base in CASES[:2]:
        case = base.resized(divisor=divisor)
        try:
            s = _transfer_case(bench, backend, case)["samples"]
        except Exception as e:
            notes.append(f"{case.name}: error: {type(e).__name__}: {e}")
            report.add(SECTION, case.name, "transfer error", f"{type(e).__name__}: {e}", "")
            continue
        finally:
            backend.release()
        b = case.nbytes()
        h2d = paired(
            lambda a, d: (a - d) * 1e3, s["host feeds, fetch op"], s["device feeds, fetch op"]
        )
        d2h = paired(
            lambda a, d: (a - d) * 1e3, s["device feeds, fetch value"], s["device feeds, fetch op"]
        )
        bare_h2d = Stats.of(s["bare to_device"]).scaled(1e3)
        bare_d2h = Stats.of(s["bare to_host"]).scaled(1e3)
        run_ms = Stats.of(s["device feeds, fetch op"]).scaled(1e3)
        h2d_bytes = b["params"] + b["indices"]
        rows.append(
            [
                case.name,
                "host->device (feed numpy)",
                num(h2d_bytes / 2**20),
                cell(h2d),
                cell(bare_h2d),
                _gbps(h2d_bytes, h2d),
                cell(run_ms),
            ]
        )
        rows.append(
            [
                case.name,
                "device->host (fetch value)",
                num(b["output"] / 2**20),
                cell(d2h),
                cell(bare_d2h),
                _gbps(b["output"], d2h),
                "",
            ]
        )
        report.add(SECTION, case.name, "host->device cost in Session.run", h2d, "ms")
        report.add(SECTION, case.name, "bare cupy.asarray of the inputs", bare_h2d, "ms")
        report.add(SECTION, case.name, "device->host cost in Session.run", d2h, "ms")
        report.add(SECTION, case.name, "bare cupy.asnumpy of the output", bare_d2h, "ms")
        report.add(SECTION, case.name, "run with device feeds, fetch op", run_ms, "ms")
    report.table(
        "Transfers (host memory is pageable numpy)",
        [
            "case",
            "transfer",
            "MiB",
            "in Session.run ms",
            "bare cupy ms",
            "run GB/s",
            "on-device run ms",
        ],
        rows,
        [
            "in Session.run: (numpy feeds - device feeds) and (fetch value - fetch Operation), "
            "paired per repeat; bare: cupy.asarray / cupy.asnumpy of the same bytes.",
            *notes,
        ],
    )
