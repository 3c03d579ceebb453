"""Graph construction with shape inference: microseconds per GatherV2 node.

A chain of 10,000 GatherV2 nodes over a float32 Placeholder [None, 4], built three ways:
- `GatherV2(scope, x, idx, axis)` with the indices Const and the axis Const made once;
- `GatherV2(scope, x, idx, 0)`: a Python literal axis, so each call also adds a Const;
- `ops.gather(scope, x, idx)`: the tf.gather-style wrapper (default axis, a Const per call).
Baseline (interleaved): a plain-Python floor that appends the same nodes to a dict node table
with the output-shape rule inline and no validation. Each build starts from a fresh graph after
a `gc.collect()` (untimed). With onnx installed (the bench extra) and peers on, ONNX's own
construction is timed in the same rounds: one `onnx.helper.make_node` per Gather (axis as an
attribute) plus `onnx.shape_inference` over the model; issue 23 asks the literal-axis build
for at most 1.0x of it ("x onnx").

Also timed: the first `Session.run` of the 10,000-node chain (prune, place, specialise, run
the steps through the interpreter), the second (which generates the plan's code) and a third.
Reference (PERFORMANCE.md, not measured here): TF1 graph mode 188 us per GatherV2 node, and
3.7 s for the first Session.run of a 10k-node graph.
"""

from __future__ import annotations

import functools
import gc
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import minigraph
from benchmarks import _peers
from benchmarks._config import Bench
from benchmarks._graphs import gather_chain
from benchmarks._report import cell, ratio_cell
from benchmarks._timing import Stats, interleaved, once, paired
from minigraph import Scope, Session
from ops import Const, GatherV2, Placeholder, gather

__all__ = ["run"]

SECTION = "construction"
TARGET = "< 10"  # us per node
ONNX = "onnx.helper + shape inference"
ONNX_TARGET = "<= 1.00"  # the literal-axis build / ONNX's, per node


def _builders(n: int, growth: list[tuple[float, float]]) -> dict[str, Callable[[], Any]]:
    """The builds to time. The first also appends (s/node over the first tenth of the nodes,
    s/node over the last tenth) to `growth`: a cost that grows with the graph shows there."""
    tenth = max(1, n // 10)

    def const_axis() -> Any:
        root = Scope.new_root_scope()
        x = Placeholder(root, minigraph.float32, shape=[None, 4])
        idx = Const(root, np.array([3, 2, 1, 0], dtype=np.int64))
        axis = Const(root, 0)
        y = x
        start = time.perf_counter_ns()
        for _ in range(tenth):
            y = GatherV2(root, y, idx, axis)
        first = time.perf_counter_ns() - start
        for _ in range(n - 2 * tenth):
            y = GatherV2(root, y, idx, axis)
        start = time.perf_counter_ns()
        for _ in range(tenth):
            y = GatherV2(root, y, idx, axis)
        growth.append((first * 1e-9 / tenth, (time.perf_counter_ns() - start) * 1e-9 / tenth))
        return root, x, y

    def literal_axis() -> Any:
        return gather_chain(n, literal_axis=True)

    def ops_gather() -> Any:
        root = Scope.new_root_scope()
        x = Placeholder(root, minigraph.float32, shape=[None, 4])
        idx = Const(root, np.array([3, 2, 1, 0], dtype=np.int64))
        y = x
        for _ in range(n):
            y = gather(root, y, idx)
        return root, x, y

    def floor() -> Any:
        nodes: dict[str, tuple[Any, ...]] = {}
        shape: tuple[int | None, ...] = (None, 4)
        nodes["Placeholder"] = ("Placeholder", (), {"dtype": "float32", "shape": shape}, shape)
        nodes["Const"] = ("Const", (), {"value": (3, 2, 1, 0)}, (4,))
        nodes["Const_1"] = ("Const", (), {"value": 0}, ())
        prev = "Placeholder"
        for k in range(n):
            name = f"GatherV2_{k}" if k else "GatherV2"
            shape = (4,) + shape[1:]  # params.shape[:0] + indices.shape + params.shape[1:]
            nodes[name] = ("GatherV2", (prev, "Const", "Const_1"), {"batch_dims": 0}, shape)
            prev = name
        return nodes

    return {
        "GatherV2, Consts made once": const_axis,
        "GatherV2, literal axis 0 (+1 Const/node)": literal_axis,
        "ops.gather(scope, x, idx) (+1 Const/node)": ops_gather,
        "floor: plain dict node table": floor,
    }


def run(bench: Bench) -> None:
    """Times graph building and the first (compiling) Session.run."""
    report, mode = bench.report, bench.mode
    n = mode.build_nodes
    report.heading(f"Graph construction with shape inference: chain of {n} GatherV2 nodes")
    growth: list[tuple[float, float]] = []
    builders = _builders(n, growth)
    timed: dict[str, Callable[[], Any]] = dict(builders)
    ort = _peers.load_ort()[0] if bench.peers else None
    if ort is not None:
        timed[ONNX] = _peers.onnx_chain_builder(ort, n)
    samples = interleaved(timed, mode.build_repeats, warmup=0, before=gc.collect)
    floor = "floor: plain dict node table"
    literal = "GatherV2, literal axis 0 (+1 Const/node)"
    rows = []
    for name, s in samples.items():
        per_node = Stats.of(s).scaled(1e6 / n)
        total = Stats.of(s).scaled(1e3)
        if name == floor:
            ratio, target = None, None
        else:
            ratio = paired(lambda a, b: a / b, s, samples[floor])
            target = TARGET if name != ONNX else None
        vs_onnx, onnx_target = None, None
        if ONNX in samples and name not in (ONNX, floor):
            vs_onnx = paired(lambda a, b: a / b, s, samples[ONNX])
            onnx_target = ONNX_TARGET if name == literal else None
        rows.append(
            [
                name,
                ratio_cell(per_node, target, spread=True),
                cell(total),
                ratio_cell(ratio),
                ratio_cell(vs_onnx, onnx_target),
                target or "",
            ]
        )
        report.add(SECTION, name, "per node", per_node, "us", target=target)
        report.add(SECTION, name, "total", total, "ms")
        if ratio is not None:
            report.add(SECTION, name, "ratio to floor", ratio, "x", baseline=floor)
        if vs_onnx is not None:
            report.add(
                SECTION, name, "ratio to onnx", vs_onnx, "x", target=onnx_target, baseline=ONNX
            )
    early = Stats.of(g[0] for g in growth).scaled(1e6)
    late = Stats.of(g[1] for g in growth).scaled(1e6)
    late_ratio = Stats.of(g[1] / g[0] for g in growth)
    report.add(SECTION, "GatherV2, Consts made once", "per node, first tenth", early, "us")
    report.add(SECTION, "GatherV2, Consts made once", "per node, last tenth", late, "us")
    report.add(SECTION, "GatherV2, Consts made once", "last tenth / first tenth", late_ratio, "x")
    report.table(
        "",
        ["builder", "us/node", f"ms for {n}", "x floor", "x onnx", "target us"],
        rows,
        [
            f"median (min-max) over {mode.build_repeats} interleaved builds, gc.collect() "
            "before each (untimed); ' !' marks a miss.",
            f"x onnx: per-round ratio to {ONNX} (one make_node per Gather, axis an attribute, "
            f"then shape inference over the model); target {ONNX_TARGET} for the literal axis"
            + ("" if ONNX in samples else " (not measured: onnx not importable or --no-peers)")
            + ".",
            f"growth: 'Consts made once' costs {cell(early)} us/node over its first "
            f"{max(1, n // 10)} nodes and {cell(late)} over its last (ratio "
            f"{ratio_cell(late_ratio)}; ~1 means no per-node cost that grows with the graph).",
            "TF1 graph mode: ~188 us per GatherV2 node (PERFORMANCE.md, not measured here).",
        ],
    )

    # First (compiling, interpreted), second (generating code) and third Session.run.
    runs: list[list[float]] = [[], [], []]
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    for _ in range(mode.build_repeats):
        root, x, y = builders["GatherV2, Consts made once"]()
        gc.collect()
        with Session(root) as sess:
            run_chain = functools.partial(sess.run, y, {x: value})
            for samples in runs:
                samples.append(once(run_chain)[0])
        del root, x, y, run_chain
    first_ms, second_ms, third_ms = (Stats.of(r).scaled(1e3) for r in runs)
    report.add(SECTION, f"chain {n}", "first Session.run (compile + run)", first_ms, "ms")
    report.add(SECTION, f"chain {n}", "second Session.run (generates code)", second_ms, "ms")
    report.add(SECTION, f"chain {n}", "third Session.run", third_ms, "ms")
    report.table(
        "",
        ["Session.run of the chain", "ms"],
        [
            ["first (prune, place, specialise, run step by step)", cell(first_ms)],
            ["second (generate the plan's code, run it)", cell(second_ms)],
            ["third (generated code)", cell(third_ms)],
        ],
        [
            "The peers section compares the first run with ONNX Runtime's session creation "
            "plus first run, and TF1's."
        ],
    )
