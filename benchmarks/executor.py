"""Executor overhead: what `Session.run` costs around tiny kernels.

Graphs of tiny GatherV2 nodes ([4, 4] float32 params, constant int64 indices [3, 2, 1, 0],
axis 0), one fed Placeholder:
- fixed cost: one run of a single-node graph; baseline one bare `ndarray.take(idx, axis=0)`;
- per chained node: (t_chain - t_single) / (N - 1) on a chain of N = 1000 nodes (each gathers
  the previous output); baseline the per-step cost of a bare `x = x.take(idx, axis=0)` loop;
- per wide node: (t_wide - t_single) / (W - 1) on W = 100 independent gathers of the fed input
  fetched together as a list, minus the bare loop's per-step cost (what each extra node and
  fetched output costs above doing the work by hand);
- the same graphs with SessionConfig(inter_op_threads=2) against the default (1);
- user kernels: the same single node and chain, with the GatherV2 kernel registered again
  without `trusted=True` (under a kernel label), against the built-in (trusted) one: what the
  per-run output checks cost per node, and what a fed array seen by a user kernel costs per
  run (a read-only view of the feed, the output check, the check that no result is a view of
  the feed; plans of trusted kernels skip all three);
- plan compilation of wide fetches: the first run of N and 4N Identity nodes over one feed,
  fetched together; the cost per fetched output should not grow with N (linear compile);
- no-copy checks: a fed [4, 4] array comes back through an Identity node as the same object.

All loops (minigraph's and the baselines') are timed interleaved, each sample an inner loop
calibrated to a few milliseconds. The peers section compares the same graphs with ONNX Runtime
and TF1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import minigraph
from benchmarks._config import Bench
from benchmarks._graphs import gather_fanout
from benchmarks._report import cell, ratio_cell
from benchmarks._timing import Stats, interleaved_loops, once, paired, run_loop
from minigraph import Scope, Session, SessionConfig
from ops import GatherV2, Identity, Placeholder

__all__ = ["run"]

SECTION = "executor"
#: Per chained node, as a multiple of a bare `x = x.take(idx, axis=0)` loop step.
PER_NODE_TARGET = "<= 1.15"


#: The kernel label under which GatherV2's CPU kernel is registered again, untrusted.
USER_LABEL = "benchmark-user-kernel"


def _register_user_kernel() -> None:
    """GatherV2's CPU kernel again, as a user would register it (not trusted), once."""
    kernels = minigraph.registry.kernels_for("GatherV2")
    if any(k.label == USER_LABEL for k in kernels):
        return
    builtin = next(k for k in kernels if k.device_type == "CPU" and not k.label)
    minigraph.register_kernel(
        "GatherV2", "CPU", builtin.fn,
        type_constraints=builtin.type_constraints, host_memory=builtin.host_memory,
        label=USER_LABEL,
    )  # fmt: skip


def _graphs(chain: int, wide: int) -> dict[str, Any]:
    """One graph holding the single node, the chain and the wide fan-out over one feed, and
    the single node and chain again with the untrusted (user) kernel."""
    _register_user_kernel()
    g = gather_fanout(chain, wide)
    x, idx, axis = g["x"], g["idx"], g["axis"]
    user = g["root"].with_kernel_label(USER_LABEL)
    g["user single"] = GatherV2(user, x, idx, axis)
    u = x
    for _ in range(chain):
        u = GatherV2(user, u, idx, axis)
    g["user chain"] = u
    return g


def _wide_compile(n: int) -> float:
    """Seconds of the first run (compile + run) of n Identity nodes of one feed, fetched."""
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[2])
    outs = [Identity(root, x) for _ in range(n)]
    feed = {x: np.zeros(2, np.float32)}
    with Session(root) as sess:
        seconds, _ = once(lambda: sess.run(outs, feed))
    return seconds


def _bare_loops(value: np.ndarray, steps: int) -> dict[str, Callable[[int], None]]:
    idx = np.array([3, 2, 1, 0], dtype=np.int64)

    def bare_take(n: int) -> None:
        for _ in range(n):
            value.take(idx, axis=0)

    def bare_chain(n: int) -> None:
        for _ in range(n):
            x = value
            for _ in range(steps):
                x = x.take(idx, axis=0)

    return {"bare take": bare_take, "bare chain": bare_chain}


def _no_copy_checks() -> list[tuple[str, bool]]:
    """(description, passed): a fed [4, 4] array fetched back is the very same object (no copy
    in or out), and a tensor that passes it through (Identity) is a copy, since only the fed
    tensor itself may come back as the caller's array."""
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[4, 4])
    y = Identity(root, x)
    fed = np.arange(16, dtype=np.float32).reshape(4, 4)
    checks = []
    for label, config in (
        ("default", SessionConfig()),
        ("inter_op_threads=2", SessionConfig(inter_op_threads=2)),
    ):
        with Session(root, config) as sess:
            single = sess.run(x, {x: fed})
            listed, through = sess.run([x, y], {x: fed})
        checks.append((f"fed tensor fetched is fed, single fetch, {label}", single is fed))
        checks.append((f"fed tensor fetched is fed, list fetch, {label}", listed is fed))
        copied = through is not fed and not np.shares_memory(through, fed)
        checks.append((f"Identity(fed) is a copy of fed, {label}", copied))
    return checks


def run(bench: Bench) -> None:
    """Times the executor's fixed, per-node and per-output costs and prints two tables."""
    report, mode = bench.report, bench.mode
    n_chain, n_wide = mode.chain_nodes, mode.wide_nodes
    report.heading(
        f"Executor overhead: [4,4] float32 GatherV2 nodes, one feed "
        f"(chain of {n_chain}, wide graph of {n_wide})"
    )
    g = _graphs(n_chain, n_wide)
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    feed = {g["x"]: value}
    sessions = {1: Session(g["root"]), 2: Session(g["root"], SessionConfig(inter_op_threads=2))}
    loops: dict[str, Callable[[int], None]] = {}
    for threads, sess in sessions.items():
        for kind in ("single", "chain", "wide"):
            loops[f"{kind} inter={threads}"] = run_loop(sess.run, g[kind], feed)
    for kind in ("single", "chain"):
        loops[f"user {kind}"] = run_loop(sessions[1].run, g[f"user {kind}"], feed)
    loops.update(_bare_loops(value, n_chain))
    try:
        s = interleaved_loops(loops, mode.exec_samples, mode.exec_sample_s)
    finally:
        for sess in sessions.values():
            sess.close()
    us = {name: Stats.of(v).scaled(1e6) for name, v in s.items()}
    step = [t / n_chain for t in s["bare chain"]]  # seconds per bare loop step, per sample

    def per_node(kind: str, who: str) -> Stats:
        n = n_chain if kind == "chain" else n_wide
        return paired(lambda a, b: (a - b) / (n - 1) * 1e6, s[f"{kind} {who}"], s[f"single {who}"])

    def wide_above(who: str) -> Stats:
        return paired(
            lambda w, one, b: ((w - one) / (n_wide - 1) - b) * 1e6,
            s[f"wide {who}"],
            s[f"single {who}"],
            step,
        )

    fixed = us["single inter=1"]
    fixed_ratio = paired(lambda a, b: a / b, s["single inter=1"], s["bare take"])
    chain_node = per_node("chain", "inter=1")
    chain_ratio = paired(
        lambda c, one, b: (c - one) / (n_chain - 1) / b,
        s["chain inter=1"],
        s["single inter=1"],
        step,
    )
    wide_node = wide_above("inter=1")
    bare_take = us["bare take"]
    bare_step = Stats.of(t * 1e6 for t in step)

    rows = [
        [
            "fixed cost per run (1 node), us",
            ratio_cell(fixed, "< 10", spread=True),
            cell(bare_take),
            ratio_cell(fixed_ratio, "< 12"),
            "< 10 us, < 12x",
        ],
        [
            f"per chained node (N={n_chain}), us",
            ratio_cell(chain_node, spread=True),
            cell(bare_step),
            ratio_cell(chain_ratio, PER_NODE_TARGET),
            f"{PER_NODE_TARGET}x",
        ],
        [
            f"per wide node above bare step (W={n_wide}), us",
            ratio_cell(wide_node, "< 1.5", spread=True),
            "-",
            "-",
            "< 1.5 us",
        ],
        [
            f"per wide node+fetch (W={n_wide}), us",
            cell(per_node("wide", "inter=1")),
            cell(bare_step),
            "-",
            "",
        ],
    ]
    notes = [
        f"median (min-max) over {mode.exec_samples} interleaved samples, each an inner loop "
        f"of ~{mode.exec_sample_s * 1e3:g} ms; ratios and differences taken per sample.",
        "floor: bare ndarray.take(idx, axis=0) for the fixed cost; per step of a bare "
        f"`x = x.take(idx, axis=0)` loop of {n_chain} for the per-node costs.",
        f"wide: (t_wide - t_single) / {n_wide - 1}, i.e. per extra node and fetched output; "
        "'above bare step' subtracts the bare loop's step cost. ' !' marks a missed target.",
    ]
    report.table(
        "",
        ["figure", "minigraph", "floor", "ratio", "target"],
        rows,
        notes,
    )
    report.add(SECTION, "single node", "fixed cost per run", fixed, "us", target="< 10")
    report.add(
        SECTION,
        "single node",
        "fixed cost / bare take",
        fixed_ratio,
        "x",
        target="< 12",
        baseline="ndarray.take",
    )
    report.add(SECTION, "bare take", "time per call", bare_take, "us")
    report.add(SECTION, "bare loop", "time per step", bare_step, "us")
    report.add(SECTION, f"chain {n_chain}", "per node", chain_node, "us")
    report.add(
        SECTION,
        f"chain {n_chain}",
        "per node / bare step",
        chain_ratio,
        "x",
        target=PER_NODE_TARGET,
        baseline="bare take loop step",
    )
    report.add(
        SECTION,
        f"wide {n_wide}",
        "per node above bare step",
        wide_node,
        "us",
        target="< 1.5",
        baseline="bare take loop step",
    )
    # inter_op_threads=2 against the default.
    rows = []
    faster = []
    for kind, label in (
        ("single", "single node"),
        ("chain", f"chain of {n_chain}"),
        ("wide", f"wide, {n_wide} fetched"),
    ):
        r = paired(lambda a, b: a / b, s[f"{kind} inter=2"], s[f"{kind} inter=1"])
        faster.append((label, r.median))
        extra = "-" if kind == "single" else cell(per_node(kind, "inter=2"))
        rows.append(
            [
                label,
                cell(us[f"{kind} inter=1"]),
                cell(us[f"{kind} inter=2"]),
                ratio_cell(r, spread=True),
                extra,
            ]
        )
        report.add(SECTION, label, "time per run inter=1", us[f"{kind} inter=1"], "us")
        report.add(SECTION, label, "time per run inter=2", us[f"{kind} inter=2"], "us")
        report.add(SECTION, label, "inter=2 / inter=1", r, "x", baseline="inter_op_threads=1")
        if kind != "single":
            report.add(SECTION, label, "per node inter=2", per_node(kind, "inter=2"), "us")
    slower = [label for label, r in faster if r > 1]
    verdict = (
        "inter_op_threads=1 (the default) is faster on all three graphs"
        if len(slower) == len(faster)
        else "inter_op_threads=2 is faster on: " + ", ".join(label for label, r in faster if r <= 1)
    )
    report.table(
        "inter_op_threads=2 vs the default inter_op_threads=1 (same graphs, same samples)",
        ["graph", "inter=1 us/run", "inter=2 us/run", "ratio 2/1", "inter=2 us/node"],
        rows,
        [f"faster default: {verdict}."],
    )

    _trust_table(bench, s, n_chain)
    _wide_compile_table(bench)

    report.print()
    report.print("No-copy checks (a fed tensor comes back uncopied; pass-throughs are copies):")
    for text, ok in _no_copy_checks():
        report.note(f"{'yes' if ok else 'NO '}  {text}")
        report.add(SECTION, "no copy", text, ok, "bool", target="yes")


def _trust_table(bench: Bench, s: dict[str, list[float]], n_chain: int) -> None:
    """What checking user kernels costs, from the interleaved samples of `run`."""
    report = bench.report
    per_node = paired(lambda u, t: (u - t) / n_chain * 1e6, s["user chain"], s["chain inter=1"])
    per_run = paired(lambda u, t: (u - t) * 1e6, s["user single"], s["single inter=1"])
    ratio = paired(lambda u, t: u / t, s["user single"], s["single inter=1"])
    user_us = Stats.of(v * 1e6 for v in s["user single"])
    trusted_us = Stats.of(v * 1e6 for v in s["single inter=1"])
    rows = [
        ["output check, per user node (chain)", cell(per_node), "-"],
        ["single user node reading the feed, extra per run", cell(per_run), ratio_cell(ratio)],
        ["  its run / the trusted kernel's run, us", f"{cell(user_us)} / {cell(trusted_us)}", ""],
    ]
    report.table(
        "User kernels: the same GatherV2 kernel registered untrusted vs the built-in (trusted)",
        ["figure", "us", "ratio"],
        rows,
        [
            "per user node: (t_user_chain - t_chain) / N; the output check (dtype, shape, array "
            "type) of each step.",
            "extra per run: a read-only view of the fed array, the output check, and the check "
            "that no result is a view of the feed; trusted plans pay none of it.",
        ],
    )
    report.add(SECTION, "user kernel", "output check per node", per_node, "us")
    report.add(SECTION, "user kernel", "extra per run with a fed array", per_run, "us")
    report.add(SECTION, "user kernel", "single node user / trusted", ratio, "x")


def _wide_compile_table(bench: Bench) -> None:
    """First-run time of wide fetches at two sizes: linear compile keeps the per-fetch cost."""
    report, mode = bench.report, bench.mode
    small = mode.build_nodes
    sizes = (small, 4 * small)
    repeats = 1 if mode.name == "smoke" else 3
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            samples[n].append(_wide_compile(n))
    per_fetch = {n: Stats.of(t / n * 1e6 for t in samples[n]) for n in sizes}
    growth = paired(lambda a, b: (a / sizes[1]) / (b / sizes[0]), samples[sizes[1]], samples[small])
    rows = [
        [f"{n} fetched outputs", cell(Stats.of(t * 1e3 for t in samples[n])), cell(per_fetch[n])]
        for n in sizes
    ]
    rows.append([f"per-fetch cost, {sizes[1]} / {sizes[0]}", ratio_cell(growth, "< 2"), ""])
    report.table(
        "Plan compile, wide fetch: first run of N Identity nodes of one feed, fetched together",
        ["case", "first run, ms", "per fetch, us"],
        rows,
        [
            f"median (min-max) of {repeats} runs; a linear compile keeps the per-fetch cost "
            "(ratio 1, a little more as the cyclic GC's full collections grow with the heap); "
            "a quadratic one multiplies it by 4.",
        ],
    )
    for n in sizes:
        report.add(SECTION, f"wide fetch {n}", "first run per fetch", per_fetch[n], "us")
    report.add(
        SECTION, "wide fetch", f"per-fetch cost {sizes[1]} / {sizes[0]}", growth, "x",
        target="< 2",
    )  # fmt: skip
