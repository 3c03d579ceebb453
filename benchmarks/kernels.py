"""Kernels on CPU: GatherV2 and GatherNd through `Session.run`, against single-threaded numpy.

What is timed: one `sess.run(g, {params: ..., indices: ...})` of a one-node graph whose inputs
are fed through Placeholders (float32 params, random valid int64 indices), with the default
SessionConfig (intra-op threads: one per CPU) and with `SessionConfig(intra_op_threads=1)`.

Baseline (timed interleaved with it): the best single-threaded numpy for the same job, bounds
check included, into a fresh output array:
- GatherV2: `idx.min()`/`idx.max()` checked, then `np.take(params, idx, axis, mode="clip")`;
  with batch_dims, flat row offsets `idx + batch * n` and one take.
- GatherNd: `np.ravel_multi_index` (checks bounds, flattens), then
  `params.reshape(-1, *slice).take(flat, axis=0, mode="clip")`; batch_dims as flat offsets.
Floors: `np.copyto` of the output's size into a preallocated array (no page faults), on one
thread ("copy") and split in two halves over two threads ("copy2", the machine's two-thread
copy bandwidth). "mg BW/copy2" is minigraph's output rate (output bytes per second) over
copy2's, per round: issue 23 asks >= 0.75 of it on every case (a gather reads its indices and
scattered rows besides writing the output, so small outputs with many indices cannot reach it).
The peers section times the same cases beside ONNX Runtime and TensorFlow.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import minigraph
from benchmarks._config import Bench
from benchmarks._report import cell, num, ratio_cell
from benchmarks._timing import Stats, interleaved, paired
from minigraph import Scope, Session, SessionConfig
from ops import GatherNd, GatherV2, Placeholder

__all__ = ["Case", "CASES", "build_graph", "make_inputs", "numpy_gather", "run"]

SECTION = "kernels"
TARGET = "<= 1.10"  # minigraph / numpy
BW_TARGET = ">= 0.75"  # minigraph's output bytes per second / the two-thread copy's


@dataclass(frozen=True)
class Case:
    """One gather job. `scale_params` / `scale_indices`: the dims that quick mode divides (and
    the GPU section multiplies)."""

    op: str  # "GatherV2" or "GatherNd"
    params: tuple[int, ...]
    indices: tuple[int, ...]
    axis: int = 0
    batch_dims: int = 0
    scale_params: tuple[int, ...] = (0,)
    scale_indices: tuple[int, ...] = (0,)

    @property
    def name(self) -> str:
        if self.op == "GatherV2":
            kind = f"V2 axis={self.axis}"
        else:
            kind = "Nd"
        if self.batch_dims:
            kind += f" bd={self.batch_dims}"
        p = ",".join(map(str, self.params))
        i = ",".join(map(str, self.indices))
        return f"{kind} p[{p}] i[{i}]"

    def resized(self, divisor: int = 1, factor: int = 1) -> Case:
        """The case with its scaled dims divided by `divisor` and multiplied by `factor`."""

        def scale(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(
                max(1, d * factor // divisor) if k in dims else d for k, d in enumerate(shape)
            )

        return replace(
            self,
            params=scale(self.params, self.scale_params),
            indices=scale(self.indices, self.scale_indices),
        )

    @property
    def out_shape(self) -> tuple[int, ...]:
        p, i, a, bd = self.params, self.indices, self.axis, self.batch_dims
        if self.op == "GatherV2":
            return p[:a] + i[bd:] + p[a + 1 :]
        depth = i[-1]
        return p[:bd] + i[bd:-1] + p[bd + depth :]

    def nbytes(self) -> dict[str, int]:
        """Bytes of params (float32), indices (int64) and output (float32)."""
        return {
            "params": 4 * math.prod(self.params),
            "indices": 8 * math.prod(self.indices),
            "output": 4 * math.prod(self.out_shape),
        }


CASES: list[Case] = [
    Case("GatherV2", (100_000, 64), (100_000,)),
    Case("GatherV2", (1_000_000, 16), (1_000_000,)),
    Case("GatherV2", (10_000, 1), (1_000_000,), scale_params=()),
    Case("GatherV2", (1_000_000, 256), (100_000,)),
    Case("GatherV2", (1000, 10_000), (5000,), axis=1, scale_indices=()),
    Case("GatherV2", (64, 1000, 128), (64, 500), axis=1, batch_dims=1),
    Case("GatherNd", (1000, 1000, 16), (1_000_000, 2)),
    Case("GatherNd", (1_000_000,), (1_000_000, 1)),
    Case("GatherNd", (100, 100, 100), (1_000_000, 3), scale_params=()),
    Case("GatherNd", (64, 128, 128, 16), (64, 16384, 2), batch_dims=1),
]


def make_inputs(case: Case, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random float32 params (every page touched) and random valid int64 indices."""
    params = rng.random(case.params, dtype=np.float32)
    if case.op == "GatherV2":
        idx = rng.integers(0, case.params[case.axis], size=case.indices, dtype=np.int64)
    else:
        depth = case.indices[-1]
        bd = case.batch_dims
        high = np.array(case.params[bd : bd + depth], dtype=np.int64)
        idx = rng.integers(0, high, size=case.indices, dtype=np.int64)
    return params, idx


def build_graph(case: Case, device: str | None = None) -> tuple[Any, Any, Any]:
    """(params placeholder, indices placeholder, gather node) of a new one-node graph."""
    root = Scope.new_root_scope()
    if device is not None:
        root = root.with_device(device)
    p = Placeholder(root, minigraph.float32, shape=[None, *case.params[1:]])
    i = Placeholder(root, minigraph.int64, shape=[None, *case.indices[1:]])
    if case.op == "GatherV2":
        g = GatherV2(root, p, i, case.axis, batch_dims=case.batch_dims)
    else:
        g = GatherNd(root, p, i, batch_dims=case.batch_dims)
    return p, i, g


def numpy_gather(case: Case, params: np.ndarray, idx: np.ndarray) -> Callable[[], np.ndarray]:
    """The baseline: best single-threaded numpy for the job, bounds check included."""
    out_shape = case.out_shape
    bd = case.batch_dims
    if case.op == "GatherV2":
        axis = case.axis
        n = case.params[axis]
        if bd == 0:

            def gather_v2() -> np.ndarray:
                if idx.size and (idx.min() < 0 or idx.max() >= n):
                    raise IndexError("index out of range")
                return np.take(params, idx, axis=axis, mode="clip")

            return gather_v2
        batch = math.prod(case.params[:bd])
        outer = math.prod(case.params[bd:axis])
        inner = math.prod(case.params[axis + 1 :])
        m = math.prod(case.indices[bd:])
        table = params.reshape(batch * outer * n, inner)

        def gather_v2_batched() -> np.ndarray:
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise IndexError("index out of range")
            base = (np.arange(batch * outer, dtype=np.int64) * n).reshape(batch, outer, 1)
            rows = (idx.reshape(batch, 1, m) + base).reshape(-1)
            return table.take(rows, axis=0, mode="clip").reshape(out_shape)

        return gather_v2_batched
    depth = case.indices[-1]
    dims = case.params[bd : bd + depth]
    batch = math.prod(case.params[:bd])
    per_batch = math.prod(dims)
    m = math.prod(case.indices[bd:-1])
    table = params.reshape(batch * per_batch, *case.params[bd + depth :])
    rows = idx.reshape(-1, depth)

    def gather_nd() -> np.ndarray:
        flat = np.ravel_multi_index(tuple(rows.T), dims)
        if bd:
            offsets = np.arange(batch, dtype=np.int64)[:, None] * per_batch
            flat = (flat.reshape(batch, m) + offsets).reshape(-1)
        return table.take(flat, axis=0, mode="clip").reshape(out_shape)

    return gather_nd


def copy_floor(case: Case, rng: np.random.Generator) -> Callable[[], None]:
    """`np.copyto` of the output's size into a preallocated (already faulted-in) array."""
    src = rng.random(case.out_shape, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return lambda: np.copyto(dst, src)


def copy2_floor(case: Case, rng: np.random.Generator, pool: ThreadPoolExecutor) -> Callable:
    """`np.copyto` of the output's size into a preallocated array, in two halves on the two
    threads of `pool` (np.copyto releases the GIL): the two-thread copy bandwidth."""
    src = rng.random(math.prod(case.out_shape), dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    half = src.size // 2
    halves = [(dst[:half], src[:half]), (dst[half:], src[half:])]

    def copy2() -> None:
        for done in [pool.submit(np.copyto, d, s) for d, s in halves]:
            done.result()

    return copy2


def _time_case(
    bench: Bench, case: Case, rng: np.random.Generator, pool: ThreadPoolExecutor
) -> dict[str, Any]:
    params, idx = make_inputs(case, rng)
    p, i, g = build_graph(case)
    feed = {p: params, i: idx}
    sessions = {
        "minigraph": Session(g.operation.graph),
        "minigraph intra=1": Session(g.operation.graph, SessionConfig(intra_op_threads=1)),
    }
    try:
        baseline = numpy_gather(case, params, idx)
        expected = baseline()
        problems = []
        for name, sess in sessions.items():
            got = sess.run(g, feed)
            if got.shape != expected.shape or not np.array_equal(got, expected):
                problems.append(f"{name} returned a wrong result")
        del expected
        fns: dict[str, Callable[[], Any]] = {"numpy": baseline}
        for name, sess in sessions.items():
            fns[name] = lambda sess=sess: sess.run(g, feed)
        fns["copy"] = copy_floor(case, rng)
        fns["copy2"] = copy2_floor(case, rng, pool)
        samples = interleaved(fns, bench.mode.kernel_repeats, warmup=1)
    finally:
        for sess in sessions.values():
            sess.close()
    stats = {name: Stats.of(s).scaled(1e3) for name, s in samples.items()}
    ratios = {
        name: paired(lambda a, b: a / b, samples[name], samples["numpy"])
        for name in samples
        if name not in ("numpy", "copy", "copy2")
    }
    # Output bytes per second over copy2's = copy2's time / minigraph's, per round.
    bandwidth = paired(lambda mine, floor: floor / mine, samples["minigraph"], samples["copy2"])
    return {"stats": stats, "ratios": ratios, "bandwidth": bandwidth, "problems": problems}


def run(bench: Bench) -> None:
    """Times every kernel case and prints one table."""
    report, mode = bench.report, bench.mode
    title = "Kernels on CPU: Session.run of one fed gather vs single-threaded numpy"
    if mode.scaled:
        title += f" [{mode.name}: sizes scaled down, leading dims / {mode.kernel_divisor}]"
    report.heading(title)
    rng = np.random.default_rng(0)
    rows = []
    notes = []
    with ThreadPoolExecutor(2, thread_name_prefix="copy2") as pool:
        for base_case in CASES:
            case = base_case.resized(divisor=mode.kernel_divisor)
            try:
                result = _time_case(bench, case, rng, pool)
            except Exception as e:  # report and go on with the next case
                rows.append([case.name, "error (below)"])
                notes.append(f"{case.name}: error: {type(e).__name__}: {e}")
                report.add(SECTION, case.name, "error", f"{type(e).__name__}: {e}", "")
                continue
            rows.append(_row(report, case, result))
            notes += [f"{case.name}: {text}" for text in result["problems"]]
    header = [
        "case",
        "out MiB",
        "minigraph ms",
        "mg 1-thread ms",
        "numpy ms",
        "mg/np",
        "mg1/np",
        "copy ms",
        "copy2 ms",
        "mg BW/copy2",
    ]
    width = len(header)
    rows = [r if len(r) == width else r + [""] * (width - len(r)) for r in rows]
    notes = [
        "ms: median (min-max) over "
        f"{mode.kernel_repeats} interleaved repeats; ratios: median of per-repeat ratios.",
        f"mg/np target {TARGET}; ' !' marks a miss. numpy = bounds check + np.take into a "
        "fresh array (1 thread); copy = np.copyto of the output size (floor), copy2 = the same "
        "in two halves on two threads.",
        f"mg BW/copy2: minigraph's output bytes/s over copy2's, target {BW_TARGET}.",
        f"minigraph = default SessionConfig (intra_op_threads={os.cpu_count()}); "
        "mg1 = SessionConfig(intra_op_threads=1).",
        *notes,
    ]
    report.table("", header, rows, notes)


def _row(report: Any, case: Case, result: dict[str, Any]) -> list[str]:
    """The case's table row; records its figures in the report."""
    stats, ratios, bandwidth = result["stats"], result["ratios"], result["bandwidth"]
    for name, s in stats.items():
        report.add(SECTION, case.name, f"time {name}", s, "ms")
    for name, s in ratios.items():
        target = TARGET if name.startswith("minigraph") else None
        report.add(
            SECTION, case.name, f"ratio {name}/numpy", s, "x", target=target, baseline="numpy"
        )
    report.add(
        SECTION, case.name, "output bandwidth / two-thread copy", bandwidth, "x",
        target=BW_TARGET, baseline="copy2",
    )  # fmt: skip
    return [
        case.name,
        num(case.nbytes()["output"] / 2**20),
        cell(stats["minigraph"]),
        cell(stats["minigraph intra=1"]),
        cell(stats["numpy"]),
        ratio_cell(ratios["minigraph"], TARGET),
        ratio_cell(ratios["minigraph intra=1"], TARGET),
        num(stats["copy"].median),
        num(stats["copy2"].median),
        ratio_cell(bandwidth, BW_TARGET),
    ]
