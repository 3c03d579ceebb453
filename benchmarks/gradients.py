"""Building gradient graphs: `minigraph.gradients` over a chain, against building the chain.

A chain of N BenchGradTanh nodes (y = tanh(x), TF's Tanh) over a float32 Placeholder [4]; its
gradient rule builds one BenchGradTanhGrad node (TF's TanhGrad(y, dy)), so the gradient graph
has as many nodes as the forward chain plus the seed. Both ops are this benchmark's own (the
op library's rules are not what is measured: the machinery around them is). Timed, interleaved:
building the forward chain, and `gradients(chain_end, x)` over a chain built before (untimed).

Targets (issue 21): the gradient of a 1000-node chain builds in at most 3x the time of the chain
itself, and the build is linear in the graph's size: 10,000 nodes in at most 12x the 1000-node
time.

The optimized gradient graph (issue 23): the frozen TF MLP (tests/data/mlp_classifier.pb,
imported), its mean sparse softmax cross-entropy against fed labels, and `mg.gradients` of
that loss with respect to its four weights (Consts, the graph being frozen); one step fetches
the loss and the four gradients for a batch of 64. Run with the graph optimizer on (the
default) and off (`SessionConfig(optimizer=False)`), in one process, interleaved. Targets: the
optimized plan at most 0.7x the unoptimized one's node count (every node the plan holds,
constants included: `RunMetadata.optimizer`'s counts) and at most 0.9x its step time. The
notes also give the kernel steps each plan runs (constants are no steps).

    python -m benchmarks.gradients [--quick]   # this section alone
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import numpy as np

import minigraph as mg
from benchmarks._config import MODES, Bench
from benchmarks._report import Report, cell, ratio_cell
from benchmarks._timing import Stats, interleaved, interleaved_loops, paired
from minigraph.op_def import OpDef

__all__ = ["run", "mlp_gradient_step"]

SECTION = "gradients"
TARGET_RATIO = "<= 3"  # gradient build / forward build, 1000-node chain
TARGET_GROWTH = "<= 12"  # 10,000-node gradient build / 1000-node one
TARGET_NODES = "<= 0.70"  # optimized / unoptimized plan nodes, the MLP's gradient step
TARGET_STEP = "<= 0.90"  # optimized / unoptimized step time
MLP_FILE = Path(__file__).resolve().parent.parent / "tests" / "data" / "mlp_classifier.pb"
WEIGHTS = ("dense1/kernel:0", "dense1/bias:0", "dense2/kernel:0", "dense2/bias:0")
BATCH = 64


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


def mlp_gradient_step(batch: int = BATCH) -> tuple[Any, list[Any], dict[Any, Any]]:
    """(root scope, fetches: the loss and its gradients w.r.t. the MLP's weights, feeds)."""
    import ops  # noqa: PLC0415 - the op library (the frozen graph's ops, the loss)

    root = mg.Scope.new_root_scope()
    mg.import_graph_def(root, mg.read_graph(MLP_FILE), name="")
    graph = root.graph
    logits = graph.get_tensor_by_name("dense2/logits:0")
    labels = ops.Placeholder(root.with_op_name("labels"), mg.int64, shape=[None])
    xent = ops.SparseSoftmaxCrossEntropyWithLogits(root.with_op_name("xent"), logits, labels)
    loss = ops.Mean(root.with_op_name("loss"), xent.loss, [0]).output
    grads = mg.gradients(loss, [graph.get_tensor_by_name(w) for w in WEIGHTS])
    rng = np.random.default_rng(0)
    feeds = {
        graph.get_tensor_by_name("features:0"): rng.random((batch, 4, 4), dtype=np.float32),
        labels: rng.integers(0, 5, batch),
    }
    return root, [loss, *grads], feeds


def _plan_sizes(sess: Any, fetches: Any, feeds: Any) -> tuple[int, int, int]:
    """(plan nodes before the optimizer, after it, kernel steps run) of one traced run."""
    meta = mg.RunMetadata()
    sess.run(fetches, feeds, run_metadata=meta, options=mg.RunOptions(trace=True))
    steps = len(meta.step_stats)
    if not meta.optimizer:
        return -1, -1, steps
    before = meta.optimizer[0].nodes_before
    # Each report counts its own pass's changes from the count before it first ran.
    after = before + sum(r.nodes_after - r.nodes_before for r in meta.optimizer)
    return before, after, steps


def _mlp(bench: Bench) -> None:
    """The optimized against the unoptimized gradient step of the frozen MLP."""
    report, mode = bench.report, bench.mode
    root, fetches, feeds = mlp_gradient_step()
    case = f"MLP gradient step, batch {BATCH}"
    report.heading("The optimized gradient graph: the frozen TF MLP's loss and weight gradients")
    on = mg.Session(root, mg.SessionConfig(optimizer=True))
    off = mg.Session(root, mg.SessionConfig(optimizer=False))
    try:
        before, after, steps_on = _plan_sizes(on, fetches, feeds)
        _, _, steps_off = _plan_sizes(off, fetches, feeds)
        same = all(
            np.allclose(a, b, rtol=1e-6, atol=1e-7)
            for a, b in zip(on.run(fetches, feeds), off.run(fetches, feeds))
        )

        def steps(sess: Any) -> Any:
            def loop(n: int) -> None:
                for _ in range(n):
                    sess.run(fetches, feeds)

            return loop

        repeats = max(5, mode.kernel_repeats)
        samples = interleaved_loops(
            {"optimized": steps(on), "unoptimized": steps(off)}, repeats, mode.exec_sample_s
        )
    finally:
        on.close()
        off.close()
    nodes = after / before
    time_ratio = paired(lambda a, b: a / b, samples["optimized"], samples["unoptimized"])
    t_on = Stats.of(samples["optimized"]).scaled(1e6)
    t_off = Stats.of(samples["unoptimized"]).scaled(1e6)
    report.add(SECTION, case, "plan nodes optimized", float(after), "nodes")
    report.add(SECTION, case, "plan nodes unoptimized", float(before), "nodes")
    report.add(SECTION, case, "node ratio", nodes, "x", target=TARGET_NODES,
               baseline="unoptimized")  # fmt: skip
    report.add(SECTION, case, "step optimized", t_on, "us")
    report.add(SECTION, case, "step unoptimized", t_off, "us")
    report.add(SECTION, case, "step time ratio", time_ratio, "x", target=TARGET_STEP,
               baseline="unoptimized")  # fmt: skip
    rows = [
        ["plan nodes", str(after), str(before), ratio_cell(Stats.of([nodes]), TARGET_NODES)],
        ["kernel steps", str(steps_on), str(steps_off), f"{steps_on / steps_off:.3f}"],
        ["step us", cell(t_on), cell(t_off), ratio_cell(time_ratio, TARGET_STEP)],
    ]
    notes = [
        f"targets: plan nodes {TARGET_NODES}, step time {TARGET_STEP} (' !' marks a miss); "
        f"step time: median (min-max) over {repeats} interleaved samples (loops of about "
        f"{mode.exec_sample_s * 1e3:.0f} ms); ratio: median of per-sample ratios.",
        "plan nodes: every node the plan holds, constants included (minigraph's constants "
        "are no steps); kernel steps: the nodes that run a kernel.",
    ]
    if not same:
        notes.append("PROBLEM: the optimized step's values differ from the unoptimized one's")
    report.table("", [case, "optimized", "unoptimized", "ratio"], rows, notes)


def run(bench: Bench) -> None:
    """Times forward and gradient construction of chains of two sizes, then the optimized
    gradient step of the frozen MLP."""
    _chains(bench)
    _mlp(bench)


def _chains(bench: Bench) -> None:
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
