"""Building gradient graphs: `minigraph.gradients` over a chain, against building the chain.

A chain of N BenchGradTanh nodes (y = tanh(x), TF's Tanh) over a float32 Placeholder [4]; its
gradient rule builds one BenchGradTanhGrad node (TF's TanhGrad(y, dy)), so the gradient graph
has as many nodes as the forward chain plus the seed. Both ops are this benchmark's own (the
op library's rules are not what is measured: the machinery around them is). Timed, interleaved:
building the forward chain, and `gradients(chain_end, x)` over a chain built before (untimed).

Targets (issue 21): the gradient of a 1000-node chain builds in at most 3x the time of the chain
itself, and the build is linear in the graph's size: 10,000 nodes in at most 12x the 1000-node
time.

    python -m benchmarks.gradients [--quick]   # this section alone
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import minigraph as mg
from benchmarks._config import MODES, Bench
from benchmarks._report import Report, cell, ratio_cell
from benchmarks._timing import Stats, interleaved, paired
from minigraph.op_def import OpDef

__all__ = ["run"]

SECTION = "gradients"
TARGET_RATIO = "<= 3"  # gradient build / forward build, 1000-node chain
TARGET_GROWTH = "<= 12"  # 10,000-node gradient build / 1000-node one


def _register() -> tuple[Any, Any]:
    """The benchmark's ops (registered once per process; registering again is a no-op)."""
    same = lambda ctx: ctx.input_shapes[0]  # noqa: E731 - a shape function
    tanh = mg.register_op(
        OpDef("BenchGradTanh", inputs=["x: T"], outputs=["y: T"], attrs=["T: {float32}"],
              shape_fn=same)
    )  # fmt: skip
    tanh_grad = mg.register_op(
        OpDef("BenchGradTanhGrad", inputs=["y: T", "dy: T"], outputs=["z: T"],
              attrs=["T: {float32}"], shape_fn=same)
    )  # fmt: skip

    def _tanh_grad(op: Any, grad: Any) -> Any:
        return tanh_grad(mg.current_scope(op.graph), op.outputs[0], grad)

    mg.register_gradient("BenchGradTanh")(_tanh_grad)
    return tanh, tanh_grad


def _chain(tanh: Any, n: int) -> tuple[Any, Any]:
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [4])
    y = x
    for _ in range(n):
        y = tanh(root, y)
    return x, y


def run(bench: Bench) -> None:
    """Times forward and gradient construction of chains of two sizes."""
    report, mode = bench.report, bench.mode
    tanh, _ = _register()
    small = max(10, mode.build_nodes // 10)  # 1000 in full and quick modes
    large = 10 * small
    repeats = max(3, mode.build_repeats)
    report.heading(f"Gradient graph construction: chains of {small} and {large} Tanh nodes")
    prepared: dict[int, list[tuple[Any, Any]]] = {}

    def forward(n: int) -> Any:
        return lambda: _chain(tanh, n)

    def backward(n: int) -> Any:
        def build() -> Any:
            x, y = prepared[n].pop()
            return mg.gradients(y, x)

        return build

    def prepare() -> None:
        gc.collect()

    for n in (small, large):
        # One prebuilt chain per timed gradient call (and the warm-up), built untimed.
        prepared[n] = [_chain(tanh, n) for _ in range(repeats + 1)]
    samples = interleaved(
        {
            f"forward {small}": forward(small),
            f"gradients {small}": backward(small),
            f"forward {large}": forward(large),
            f"gradients {large}": backward(large),
        },
        repeats,
        warmup=1,
        before=prepare,
    )
    # The targets are for chains of 1000 and 10,000 nodes (smaller ones measure fixed costs).
    ratio_target = TARGET_RATIO if small == 1000 else None
    growth_target = TARGET_GROWTH if small == 1000 else None
    ratio = paired(lambda b, f: b / f, samples[f"gradients {small}"], samples[f"forward {small}"])
    growth = paired(
        lambda big, little: big / little, samples[f"gradients {large}"],
        samples[f"gradients {small}"],
    )  # fmt: skip
    rows = []
    for name, s in samples.items():
        n = small if name.endswith(f" {small}") else large
        per_node = Stats.of(s).scaled(1e6 / n)
        total = Stats.of(s).scaled(1e3)
        rows.append([name, cell(per_node), cell(total)])
        report.add(SECTION, name, "per node", per_node, "us")
        report.add(SECTION, name, "total", total, "ms")
    report.add(SECTION, f"chain {small}", "gradients / forward", ratio, "x", target=ratio_target)
    report.add(
        SECTION, f"chains {large} / {small}", "gradients growth", growth, "x",
        target=growth_target,
    )  # fmt: skip
    report.table(
        "",
        ["build", "us/node", "ms"],
        rows,
        [
            f"gradients / forward, {small} nodes: {ratio_cell(ratio, ratio_target)} "
            f"(target {ratio_target or 'for 1000 nodes only'})",
            f"gradients {large} / gradients {small}: {ratio_cell(growth, growth_target)} "
            f"(target {growth_target or 'for 1000 nodes only'}; 10 means linear)",
            f"median (min-max) over {repeats} interleaved builds, gc.collect() before each "
            "(untimed); the chains differentiated are built beforehand, untimed.",
        ],
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    mode = MODES["quick" if "--quick" in args else "full"]
    run(Bench(mode, Report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
