"""GraphDef export and import against building the same graph through the builders.

The graph is construction.py's chain: a float32 Placeholder [None, 4], an int64 indices Const
and an axis Const made once, then n GatherV2 nodes each reading the previous one. Timed
interleaved, `gc.collect()` (untimed) before each sample:
- build: the builders (`GatherV2(scope, y, idx, axis)` n times), the baseline;
- export: `graph.as_graph_def()`, and the same plus `SerializeToString()`;
- import: `import_graph_def(Scope.new_root_scope(), data, name="")` from the bytes (parse,
  validation, shape inference for every node: the whole construction path);
- import, nodes out of order: the same bytes with the node list reversed, which adds the
  validating pass and the networkx topological sort.
Targets (issue 9): export at most 1x, import at most 2x the build.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import minigraph
from benchmarks._config import Bench
from benchmarks._graphs import gather_chain
from benchmarks._report import cell, ratio_cell
from benchmarks._timing import Stats, interleaved, paired
from minigraph import Scope

__all__ = ["run"]

SECTION = "graph_def"
TARGETS = {"export": "<= 1.0", "import": "<= 2.0"}


def _chain(n: int) -> Scope:
    return gather_chain(n)[0]


def _cases(n: int) -> dict[str, Callable[[], Any]]:
    graph = _chain(n).graph
    data = graph.as_graph_def().SerializeToString()
    reversed_def = graph.as_graph_def()
    nodes = list(reversed_def.node)[::-1]
    del reversed_def.node[:]
    reversed_def.node.extend(nodes)
    shuffled = reversed_def.SerializeToString()

    def import_bytes(payload: bytes) -> Callable[[], Any]:
        def run() -> Any:
            scope = Scope.new_root_scope()
            minigraph.import_graph_def(scope, payload, name="")
            return scope

        return run

    return {
        "build through the builders": lambda: _chain(n),
        "export: as_graph_def()": graph.as_graph_def,
        "export + SerializeToString()": lambda: graph.as_graph_def().SerializeToString(),
        "import_graph_def(bytes)": import_bytes(data),
        "import_graph_def(bytes), nodes reversed": import_bytes(shuffled),
    }


def run(bench: Bench) -> None:
    """Times export and import of the chain against building it."""
    report, mode = bench.report, bench.mode
    n = mode.build_nodes
    report.heading(f"GraphDef export and import: chain of {n} GatherV2 nodes")
    cases = _cases(n)
    size = len(cases["export + SerializeToString()"]())
    samples = interleaved(cases, mode.build_repeats, warmup=1, before=gc.collect)
    base = "build through the builders"
    rows = []
    for name, s in samples.items():
        total = Stats.of(s).scaled(1e3)
        per_node = Stats.of(s).scaled(1e6 / n)
        target = None
        if name == "export: as_graph_def()":
            target = TARGETS["export"]
        elif name == "import_graph_def(bytes)":
            target = TARGETS["import"]
        ratio = None if name == base else paired(lambda a, b: a / b, s, samples[base])
        rows.append([name, cell(total), cell(per_node), ratio_cell(ratio, target), target or ""])
        report.add(SECTION, name, "total", total, "ms")
        report.add(SECTION, name, "per node", per_node, "us")
        if ratio is not None:
            report.add(SECTION, name, "ratio to build", ratio, "x", target=target, baseline=base)
    report.add(SECTION, "serialized GraphDef", "size", float(size), "bytes")
    report.table(
        "",
        ["case", f"ms for {n}", "us/node", "x build", "target"],
        rows,
        [
            f"median (min-max) over {mode.build_repeats} interleaved repeats, gc.collect() "
            "before each (untimed); ratios are per-repeat; ' !' marks a miss.",
            f"serialized size: {size} bytes ({size / max(n, 1):.0f} per node).",
        ],
    )
