"""Peak memory of a chain of 100 GatherV2 nodes over 8 MiB tensors.

A [2048, 1024] float32 tensor (8 MiB) is fed; each of 100 chained GatherV2 nodes gathers all
2048 rows in reversed order (constant indices, axis 0); the last one is fetched. The figure is
the peak of traced memory above the start of the run, in units of the tensor's size, measured
with tracemalloc (numpy reports its data allocations to it). The fed tensor exists before the
start, the fetched one is part of the peak: a runtime that frees each value after its last use
peaks at about 2-3 tensors.

Baselines (same measurement, round-robin with the runtime): a naive interpreter that keeps every
intermediate in a list (about 100 tensors) and a loop that drops each tensor after use.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._config import Bench
from benchmarks._graphs import gather_chain
from benchmarks._report import ratio_cell
from benchmarks._timing import Stats
from minigraph import RunOptions, Session, SessionConfig

__all__ = ["run", "peak_bytes"]

SECTION = "memory"
TARGET = "<= 2.05"  # tensors: two, plus the plan's own objects on a first run


def peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak traced memory above the start while `fn()` runs (its result included)."""
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - start
        del result
    finally:
        if started:
            tracemalloc.stop()
    return peak


def run(bench: Bench) -> None:
    """Measures peak memory of the chain in minigraph and in the two numpy loops."""
    report, mode = bench.report, bench.mode
    rows_, nodes = mode.memory_rows, mode.memory_nodes
    size = rows_ * 1024 * 4
    report.heading(
        f"Peak memory: chain of {nodes} GatherV2 nodes over [{rows_},1024] float32 tensors "
        f"({size / 2**20:g} MiB each)"
    )
    idx_value = np.arange(rows_ - 1, -1, -1, dtype=np.int64)
    root, x, y = gather_chain(nodes, shape=[rows_, 1024], indices=idx_value)
    value = np.random.default_rng(0).random((rows_, 1024), dtype=np.float32)
    feed = {x: value}

    def keep_all() -> np.ndarray:
        values = [value]
        for _ in range(nodes):
            values.append(values[-1].take(idx_value, axis=0))
        return values[-1]

    def drop_each() -> np.ndarray:
        v = value
        for _ in range(nodes):
            v = v.take(idx_value, axis=0)
        return v

    default = Session(root)
    parallel = Session(root, SessionConfig(inter_op_threads=2))
    traced = Session(root)
    trace = RunOptions(trace=True)
    sessions = {
        "minigraph, steady run": default,
        "minigraph inter_op_threads=2": parallel,
        "minigraph RunOptions(trace=True)": traced,
    }
    candidates: dict[str, tuple[Callable[[], Any], str | None]] = {
        "minigraph, first run (compiles the plan)": (lambda: Session(root).run(y, feed), TARGET),
        "minigraph, steady run": (lambda: default.run(y, feed), TARGET),
        "minigraph inter_op_threads=2": (lambda: parallel.run(y, feed), TARGET),
        "minigraph RunOptions(trace=True)": (lambda: traced.run(y, feed, options=trace), None),
        "numpy loop keeping every intermediate": (keep_all, None),
        "numpy loop dropping each after use": (drop_each, None),
    }
    try:
        # Warm-up (compiles the plans), then round-robin repeats.
        expected = drop_each()
        for sess in (default, parallel):
            if not np.array_equal(sess.run(y, feed), expected):
                report.note("WARNING: minigraph's result differs from numpy's")
        traced.run(y, feed, options=trace)
        samples: dict[str, list[float]] = {name: [] for name in candidates}
        held: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(mode.memory_repeats):
            for name, (fn, _target) in candidates.items():
                samples[name].append(peak_bytes(fn) / size)
                if name in sessions:
                    held[name].append(sessions[name]._buffers.held_bytes / size)
        growth = _rerun_growth(lambda: default.run(y, feed), 20) / size
    finally:
        for sess in (default, parallel, traced):
            sess.close()
    rows = []
    for name, (_fn, target) in candidates.items():
        s = Stats.of(samples[name])
        kept = Stats.of(held[name]) if name in held else None
        footprint = Stats.of(a + b for a, b in zip(samples[name], held[name])) if kept else s
        rows.append(
            [
                name,
                ratio_cell(s, spread=True),
                ratio_cell(kept) if kept else "-",
                ratio_cell(footprint, target),
                target or "",
            ]
        )
        case = f"chain {nodes} x {size >> 20} MiB"
        report.add(SECTION, case, name, s, "tensors")
        if kept is not None:
            report.add(SECTION, case, f"{name}: held by the buffer pool", kept, "tensors")
        report.add(SECTION, case, f"{name}: footprint", footprint, "tensors", target=target)
    report.add(
        SECTION, f"chain {nodes} x {size >> 20} MiB", "growth over 20 reruns", growth, "tensors",
        target="<= 0.01",
    )  # fmt: skip
    report.table(
        "",
        ["run", "peak above start", "pool holds", "footprint", "target"],
        rows,
        [
            f"tensors of {size / 2**20:g} MiB; tracemalloc peak minus traced memory at the start; "
            f"median (min-max) of {mode.memory_repeats} round-robin repeat(s).",
            "pool holds: what the session's buffer pool keeps between runs (recycled outputs and "
            "intermediates, already mapped); footprint = peak above start + pool holds.",
            "The fed tensor predates the start; the fetched result counts. ' !' marks a miss.",
            f"growth over 20 more steady runs, results dropped: {growth:.3f} tensors (target 0).",
            "PERFORMANCE.md: ONNX ReferenceEvaluator +800 MiB (keeps all), TF1 +41 MiB, ORT +17 "
            "MiB, a drop-after-use loop +16 MiB; the peers section measures ORT and TF here.",
        ],
    )


def _rerun_growth(fn: Callable[[], Any], runs: int) -> int:
    """Traced bytes after `runs` more calls of `fn` (results dropped) minus before them."""
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        fn()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(runs):
            fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        if started:
            tracemalloc.stop()
