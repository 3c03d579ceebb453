"""Peers: minigraph beside ONNX Runtime and TensorFlow on the same jobs.

ONNX Runtime (with onnx; `pip install -e '.[bench]'`) runs in this process. TensorFlow runs in
a process of its own (benchmarks._peer_runner: the environment variable
MINIGRAPH_BENCH_TF_PYTHON names a Python that has tensorflow, else the current interpreter
when it has it), since TensorFlow loaded beside minigraph slows minigraph's own kernels; its
worker times each sample itself. Without either peer the section prints how to get them and
the other sections run as usual. Every figure is timed interleaved with the peers' (round-robin,
rotating order: a TensorFlow sample is taken in its process while this one waits) and reported
as minigraph / peer ratios, per round, with their median; "best" is the fastest peer on that
figure.

Jobs (each peer builds its own version outside the timing):
- executor on [4,4] float32 gathers with constant indices, one fed input: fixed cost of a
  one-node graph; added cost per node of a chain of 1000; per extra node and fetched output
  of 100 independent gathers fetched together; feed -> Identity -> fetch. Peers: ORT
  InferenceSession, TF1 `Session.run` (graph optimisations off in both).
- first run of a chain of 10,000 gathers: session creation plus first run, the graph built
  beforehand. Peers: ORT (InferenceSession from the serialized model), TF1, and onnx's
  ReferenceEvaluator.
- kernels: the kernel section's gathers on fed inputs. Peers: ORT (fed inputs), TF eager
  (tensors made once).
- construction: a chain of GatherV2 with a literal axis (a Const per call) and with Consts made
  once, per node; peers: onnx.helper nodes plus shape inference, TF1 graph-mode tf.gather.
- import: `import minigraph, ops` after numpy, in fresh interpreters with bytecode caches
  written; peers: `import onnxruntime` (this interpreter), `import tensorflow` (TensorFlow's).
- memory: resident-set high-water mark above the start of one run of a chain of 100 gathers of
  8 MiB each (Linux: /proc/self/clear_refs resets it), minigraph and peers alike.
- interference (full mode): minigraph's own times in fresh interpreters with ONNX Runtime (and,
  as the control, TensorFlow) loaded and running, against minigraph alone
  (benchmarks._interference): why ONNX Runtime may stay in this process and TensorFlow may not.

Runtimes' thread pools spin-wait after their work (ONNX Runtime's intra-op threads about 70 ms,
OpenBLAS's about 100 ms here), so a sample of one runtime that follows another's waits
`Mode.settle_s` first: on two cores it would otherwise share the CPU with them.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import _interference, _peer_runner, _peers
from benchmarks._config import Bench
from benchmarks._graphs import gather_chain, gather_fanout
from benchmarks._peer_worker import fix_mmap_threshold, footprint_mib
from benchmarks._report import MISS, met, num
from benchmarks._timing import Stats, interleaved, interleaved_loops, paired, run_loop
from benchmarks.kernels import CASES, build_graph, make_inputs
from minigraph import Session
from ops import Identity

__all__ = ["run"]

SECTION = "peers"
PEERS = ("ORT", "TF")


class _Table:
    """Rows of figure | minigraph | each peer | mg/peer ratios | mg/best | target."""

    def __init__(self, bench: Bench, peers: list[str]):
        self.bench = bench
        self.peers = peers
        self.rows: list[list[str]] = []
        self.notes: list[str] = []

    def add(
        self,
        figure: str,
        unit: str,
        mine: Stats | None,
        theirs: dict[str, Stats],
        ratios: dict[str, Stats],
        target: tuple[str, str] | None = None,
        note: str | None = None,
    ) -> None:
        """`target`: (peer or 'abs', bound such as '<= 0.80'); 'abs' bounds minigraph's own
        figure in `unit`."""
        report = self.bench.report
        # A peer whose per-round figures reach zero or below (a difference of two noisy
        # timings) is too noisy to be called the best.
        ranked = [p for p in theirs if theirs[p].min > 0]
        best = min(ranked, key=lambda p: theirs[p].median) if ranked else None
        if len(ranked) < len(theirs):
            noisy = ", ".join(p for p in theirs if p not in ranked)
            self.notes.append(f"{figure}: {noisy} not ranked (its figure reached <= 0: noise)")
        row = [figure, _fmt(mine)]
        row += [_fmt(theirs.get(p)) for p in self.peers]
        for p in self.peers:
            r = ratios.get(p)
            bound = target[1] if target and target[0] == p else None
            row.append(_ratio(r, bound))
        best_ratio = ratios.get(best) if best else None
        row.append(f"{_ratio(best_ratio)} ({best})" if best_ratio else "-")
        if target is None:
            row.append("")
        elif target[0] == "abs":
            miss = mine is not None and met(mine.median, target[1]) is False
            row.append(f"{target[1]} {unit}" + (MISS if miss else ""))
        else:
            row.append(f"{target[0]} {target[1]}")
        self.rows.append(row)
        if mine is not None:
            abs_target = target[1] if target and target[0] == "abs" else None
            report.add(SECTION, figure, "minigraph", mine, unit, target=abs_target, note=note)
        for p, s in theirs.items():
            report.add(SECTION, figure, p, s, unit)
        for p, r in ratios.items():
            bound = target[1] if target and target[0] == p else None
            report.add(SECTION, figure, f"minigraph/{p}", r, "x", target=bound, baseline=p)
        if best_ratio is not None:
            report.add(SECTION, figure, "minigraph/best peer", best_ratio, "x", baseline=best)

    def print(self, notes: list[str]) -> None:
        header = ["figure", "minigraph", *self.peers]
        header += [f"mg/{p}" for p in self.peers] + ["mg/best", "target"]
        self.bench.report.table("", header, self.rows, notes)


def _fmt(s: Stats | None) -> str:
    return "-" if s is None else num(s.median)


def _ratio(s: Stats | None, target: str | None = None) -> str:
    if s is None:
        return "-"
    text = f"{s.median:.2f}"
    return text + (MISS if target and met(s.median, target) is False else "")


def _ratios(samples: dict[str, list[float]], mine: str, peers: dict[str, str]) -> dict:
    return {
        p: paired(lambda a, b: a / b, samples[mine], samples[key])
        for p, key in peers.items()
        if key in samples
    }


def _runtime(name: str) -> str:
    """The runtime a sample's name starts with ("mg chain" -> "mg"): settle between them."""
    return name.split(" ", 1)[0]


# -- executor --------------------------------------------------------------------------------------


def _mg_runner(chain: int, wide: int) -> tuple[Callable[[str], Callable[[int], Any]], Any]:
    g = gather_fanout(chain, wide)
    x = g["x"]
    same = Identity(g["root"], x)
    sess = Session(g["root"])
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    fetches = {"single": g["single"], "chain": g["chain"], "wide": g["wide"], "identity": same}

    def runner(kind: str) -> Callable[[int], Any]:
        return run_loop(sess.run, fetches[kind], {x: value})

    return runner, sess


def _executor(bench: Bench, table: _Table, loaded: dict[str, Any]) -> None:
    mode = bench.mode
    chain, wide = mode.chain_nodes, mode.wide_nodes
    runners: dict[str, Callable[[str], Callable[[int], Any]]] = {}
    mg, sess = _mg_runner(chain, wide)
    runners["mg"] = mg
    if "ORT" in loaded:
        runners["ORT"] = _peers.ort_graph_runner(loaded["ORT"], chain, wide)
    kinds = ("single", "chain", "wide", "identity")
    loops: dict[str, Any] = {
        f"{who} {kind}": r(kind) for who, r in runners.items() for kind in kinds
    }
    remote = {}
    if "TF" in loaded:
        remote = loaded["TF"].build("tf1_executor", chain=chain, wide=wide)
        loops.update({f"TF {kind}": remote[kind] for kind in kinds})
    try:
        s = interleaved_loops(
            loops, mode.exec_samples, mode.exec_sample_s, settle_s=mode.settle_s, group=_runtime
        )
    finally:
        sess.close()
        if remote:
            loaded["TF"].drop(remote)
    peers = [p for p in runners if p != "mg"] + (["TF"] if remote else [])
    who_all = ["mg", *peers]

    def figure(name: str, fn: Callable[..., float], kinds_used: tuple[str, ...], target=None):
        per_round = {
            who: [fn(*v) for v in zip(*[s[f"{who} {k}"] for k in kinds_used])] for who in who_all
        }
        ratios = {p: Stats.of(a / b for a, b in zip(per_round["mg"], per_round[p])) for p in peers}
        theirs = {p: Stats.of(per_round[p]) for p in peers}
        table.add(name, "us", Stats.of(per_round["mg"]), theirs, ratios, target)

    figure("run() fixed cost, one [4,4] gather, us", lambda a: a * 1e6, ("single",),
           ("ORT", "<= 0.80"))  # fmt: skip
    figure(
        f"added cost per node, chain of {chain}, us",
        lambda c, a: (c - a) / (chain - 1) * 1e6,
        ("chain", "single"),
    )
    figure(
        f"per fetched output ({wide} wide), us",
        lambda w, a: (w - a) / (wide - 1) * 1e6,
        ("wide", "single"),
        ("ORT", "<= 0.80"),
    )
    figure("feed -> Identity -> fetch, us", lambda a: a * 1e6, ("identity",),
           ("ORT", "<= 0.80"))  # fmt: skip


# -- first run of a chain ------------------------------------------------------------------------


def _first_run(bench: Bench, table: _Table, loaded: dict[str, Any]) -> None:
    n = bench.mode.build_nodes
    rounds = max(1, bench.mode.build_repeats)
    root, x, y = gather_chain(n, shape=[4, 4])
    value = np.arange(16, dtype=np.float32).reshape(4, 4)

    def mine() -> Any:
        with Session(root) as sess:
            return sess.run(y, {x: value})

    fns: dict[str, Callable[[], Any]] = {"mg": mine}
    if "ORT" in loaded:
        model = _peers.ort_chain_model(loaded["ORT"], n)
        fns["ORT"] = lambda: _peers.ort_first_run(loaded["ORT"], model)
        fns["ONNX ref"] = lambda: _peers.onnx_reference_first_run(loaded["ORT"], model)
    if "TF" in loaded:
        fns["TF"] = loaded["TF"].build("tf1_first_run", n=n)["run"]
    s = interleaved(fns, rounds, warmup=0, before=gc.collect, settle_s=bench.mode.settle_s)
    if "TF" in loaded:
        loaded["TF"].drop([fns["TF"]])
    peers = [p for p in fns if p != "mg"]
    ratios = {p: paired(lambda a, b: a / b, s["mg"], s[p]) for p in peers}
    theirs = {p: Stats.of(s[p]).scaled(1e3) for p in peers}
    extra = theirs.pop("ONNX ref", None)
    ref_ratio = ratios.pop("ONNX ref", None)
    table.add(
        f"first run of a {n}-node chain (create + run), ms",
        "ms",
        Stats.of(s["mg"]).scaled(1e3),
        theirs,
        ratios,
        ("ORT", "<= 1.00"),
    )
    if extra is not None:
        bench.report.add(SECTION, "first run", "ONNX ReferenceEvaluator", extra, "ms")
        bench.report.add(SECTION, "first run", "minigraph/ONNX ref", ref_ratio, "x")
        table.notes.append(
            f"first run: onnx's ReferenceEvaluator (pure Python) takes {num(extra.median)} ms "
            f"(minigraph / it: {ref_ratio.median:.2f})."
        )


# -- kernels -------------------------------------------------------------------------------------


def _kernels(bench: Bench, table: _Table, loaded: dict[str, Any]) -> None:
    mode = bench.mode
    rng = np.random.default_rng(0)
    for base in CASES:
        case = base.resized(divisor=mode.kernel_divisor)
        params, idx = make_inputs(case, rng)
        p, i, g = build_graph(case)
        feed = {p: params, i: idx}
        sess = Session(g.operation.graph)
        fns: dict[str, Callable[[], Any]] = {
            "mg": lambda sess=sess, g=g, feed=feed: sess.run(g, feed)
        }
        if "ORT" in loaded:
            ort = loaded["ORT"]
            if case.op == "GatherNd":
                fns["ORT"] = _peers.ort_gather_nd(ort, params, idx, case.batch_dims)
            elif case.batch_dims == 0:
                fns["ORT"] = _peers.ort_gather(ort, params, idx, case.axis)
        if "TF" in loaded:
            fns["TF"] = _tf_gather(loaded["TF"], case)
        try:
            s = interleaved(fns, mode.kernel_repeats, warmup=1, settle_s=mode.settle_s)
        finally:
            sess.close()
            if "TF" in fns:
                loaded["TF"].drop([fns["TF"]])
        peers = [q for q in fns if q != "mg"]
        ratios = {q: paired(lambda a, b: a / b, s["mg"], s[q]) for q in peers}
        target = ("ORT", "<= 1.00") if "ORT" in peers else ("TF", "<= 0.80") if peers else None
        table.add(
            f"{case.name}, ms",
            "ms",
            Stats.of(s["mg"]).scaled(1e3),
            {q: Stats.of(s[q]).scaled(1e3) for q in peers},
            ratios,
            target,
        )
        if "TF" in ratios and "ORT" in peers:
            tf_ratio = ratios["TF"].median
            if tf_ratio > 0.80:
                table.rows[-1][-1] += f"; TF <= 0.80{MISS}"
            else:
                table.rows[-1][-1] += "; TF <= 0.80"
        del params, idx, feed, fns, s


def _tf_gather(peer: _peer_runner.PeerProcess, case: Any) -> _peer_runner.Remote:
    """TF eager's gather of `case` in the TF worker, on inputs it makes from the case's recipe
    (kernels.make_inputs: uniform float32 params, valid random int64 indices)."""
    params = {"shape": list(case.params), "dtype": "float32"}
    if case.op == "GatherV2":
        high: Any = case.params[case.axis]
        indices = {"shape": list(case.indices), "high": high, "dtype": "int64"}
        return peer.build(
            "tf_gather", params=params, indices=indices, axis=case.axis,
            batch_dims=case.batch_dims,
        )["run"]  # fmt: skip
    bd, depth = case.batch_dims, case.indices[-1]
    high = list(case.params[bd : bd + depth])
    indices = {"shape": list(case.indices), "high": high, "dtype": "int64"}
    return peer.build("tf_gather_nd", params=params, indices=indices, batch_dims=bd)["run"]


# -- construction --------------------------------------------------------------------------------


def _construction(bench: Bench, table: _Table, loaded: dict[str, Any]) -> None:
    n = bench.mode.build_nodes
    rounds = max(1, bench.mode.build_repeats)

    def literal() -> Any:
        return gather_chain(n, literal_axis=True)[0]

    def consts_once() -> Any:
        return gather_chain(n)[0]

    fns: dict[str, Callable[[], Any]] = {"mg literal": literal, "mg consts": consts_once}
    tf_nodes = min(n, 2000)  # TF1 graph mode takes ~0.2 ms per node
    if "ORT" in loaded:
        fns["ORT"] = _peers.onnx_chain_builder(loaded["ORT"], n)
    if "TF" in loaded:
        fns["TF"] = loaded["TF"].build("tf1_chain_builder", n=tf_nodes)["run"]
    s = interleaved(
        fns, rounds, warmup=0, before=gc.collect, settle_s=bench.mode.settle_s, group=_runtime
    )
    if "TF" in loaded:
        loaded["TF"].drop([fns["TF"]])
    per = {k: [t / (tf_nodes if k == "TF" else n) * 1e6 for t in v] for k, v in s.items()}
    peers = [p for p in fns if not p.startswith("mg")]
    theirs = {p: Stats.of(per[p]) for p in peers}
    for key, label, target in (
        ("mg literal", "construction, one literal input (+1 Const), us per call", ("abs", "<= 10")),
        ("mg consts", "construction per node, Consts made once, us", None),
    ):
        ratios = {p: paired(lambda a, b: a / b, per[key], per[p]) for p in peers}
        table.add(label, "us", Stats.of(per[key]), theirs, ratios, target)
    if "ORT" in peers:
        table.notes.append(
            "construction, ORT column: onnx.helper.make_node per node (axis as an attribute) "
            "plus onnx.shape_inference over the model, per node."
        )


# -- import --------------------------------------------------------------------------------------

_IMPORTS = {
    "mg": "import minigraph, ops",
    "ORT": "import onnxruntime",
    "TF": "import tensorflow",
}


def _import_time(stmt: str, env: dict[str, str], python: str = sys.executable) -> float:
    code = f"import time, numpy\nt = time.perf_counter()\n{stmt}\nprint(time.perf_counter() - t)\n"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _import(bench: Bench, table: _Table, loaded: dict[str, Any]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    who = ["mg"] + [p for p in PEERS if p in loaded]
    python = {w: loaded["TF"].python if w == "TF" else sys.executable for w in who}
    for w in who:  # writes bytecode caches, as any installed package has them
        _import_time(_IMPORTS[w], env, python[w])
    rounds = max(3, bench.mode.build_repeats * 2)
    fns = {w: (lambda w=w: _import_time(_IMPORTS[w], env, python[w])) for w in who}
    samples: dict[str, list[float]] = {w: [] for w in who}
    for r in range(rounds):
        for w in who[r % len(who) :] + who[: r % len(who)]:
            samples[w].append(fns[w]())
    peers = who[1:]
    ratios = {p: Stats.of(a / b for a, b in zip(samples["mg"], samples[p])) for p in peers}
    table.add(
        "import minigraph + ops (numpy imported), ms",
        "ms",
        Stats.of(samples["mg"]).scaled(1e3),
        {p: Stats.of(samples[p]).scaled(1e3) for p in peers},
        ratios,
        ("ORT", "<= 1.00"),
    )


# -- memory --------------------------------------------------------------------------------------


def _memory_setups(who: str, rows: int, nodes: int) -> Callable[[], Callable[[], Any]]:
    """`setup()` for `who`'s chain of `nodes` gathers over [rows, 1024] float32 (minigraph
    or ORT; TensorFlow's is the worker's `tf1_gather_chain` job)."""
    value = np.random.default_rng(0).random((rows, 1024), dtype=np.float32)
    order = np.arange(rows - 1, -1, -1, dtype=np.int64)
    if who == "mg":
        root, x, y = gather_chain(nodes, shape=[rows, 1024], indices=order)

        def mine() -> Callable[[], Any]:
            sess = Session(root)
            return lambda: sess.run(y, {x: value})

        return mine
    if who == "ORT":
        ort_onnx, _ = _peers.load_ort()
        helper = ort_onnx[1].helper
        init = ort_onnx[1].numpy_helper.from_array(order, "idx")
        chain = [
            helper.make_node("Gather", ["x" if k == 0 else f"c{k - 1}", "idx"], [f"c{k}"], axis=0)
            for k in range(nodes)
        ]

        def ort_setup() -> Callable[[], Any]:
            sess = _peers.ort_session(ort_onnx, chain, {"x": value}, [f"c{nodes - 1}"], [init])
            return lambda: sess.run(None, {"x": value})[0]

        return ort_setup
    raise ValueError(f"no in-process memory job for {who!r}")


def _memory_child(who: str, rows: int, nodes: int) -> None:
    """In a fresh interpreter: prints `who`'s footprint (MiB) for its first session, as JSON
    (runtimes keep arenas for the process: later sessions would reuse the first's)."""
    fix_mmap_threshold()
    setup = _memory_setups(who, rows, nodes)
    print(json.dumps(footprint_mib(setup)))


def _memory(bench: Bench, table: _Table, loaded: dict[str, Any]) -> None:
    try:
        footprint_mib(lambda: lambda: None, 1)
    except OSError as e:
        table.notes.append(f"memory row skipped: {e}")
        return
    rows, nodes = bench.mode.memory_rows, bench.mode.memory_nodes
    rounds = max(3, bench.mode.memory_repeats)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    who_all = ["mg"] + [p for p in PEERS if p in loaded]
    samples: dict[str, list[float]] = {w: [] for w in who_all}
    for r in range(rounds):  # a fresh interpreter per runtime and round, in turns
        for who in who_all[r % len(who_all) :] + who_all[: r % len(who_all)]:
            if who == "TF":
                with _peer_runner.PeerProcess(loaded["TF"].python) as fresh:
                    mib = fresh.footprint("tf1_gather_chain", rows=rows, nodes=nodes)
                samples[who].append(mib)
                continue
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.peers", "memory", who, str(rows), str(nodes)],
                capture_output=True, text=True, env=env, timeout=600,
            )  # fmt: skip
            if out.returncode != 0:
                raise RuntimeError(
                    f"the {who} memory child exited with {out.returncode}: "
                    + (out.stderr.strip()[-800:] or "no message")
                )
            samples[who].append(json.loads(out.stdout.strip().splitlines()[-1]))
    peers = [p for p in who_all if p != "mg"]
    size = rows * 1024 * 4 / 2**20
    ratios = {
        p: Stats.of(a / b for a, b in zip(samples["mg"], samples[p]))
        for p in peers
        if min(samples[p]) > 0  # a runtime whose memory RSS does not show has no ratio
    }
    table.add(
        f"memory: RSS peak over 5 runs of a chain of {nodes} x {size:g} MiB, MiB",
        "MiB",
        Stats.of(samples["mg"]),
        {p: Stats.of(samples[p]) for p in peers},
        ratios,
        ("abs", f"<= {2 * size + 1:g}"),
    )
    table.notes.append(
        "memory: resident-set high-water mark (Linux VmHWM, reset through /proc/self/clear_refs) "
        "above the resident set before the first of five runs of a runtime's first session, "
        "results dropped, in a fresh interpreter per runtime and round, glibc's mmap threshold "
        "fixed at 1 MiB (freed tensors leave the resident set): two tensors is the floor."
    )


# -- the section ---------------------------------------------------------------------------------


def _load(bench: Bench) -> tuple[dict[str, Any], list[str], list[str]]:
    """(loaded peers, what was not loaded and why, where each loaded one runs). "ORT" is
    (onnxruntime, onnx) in this process; "TF" a `_peer_runner.PeerProcess` with TensorFlow."""
    loaded: dict[str, Any] = {}
    missing: list[str] = []
    versions: list[str] = []
    ort, why = _peers.load_ort()
    if ort is not None:
        loaded["ORT"] = ort
        versions.append(f"ONNX Runtime {ort[0].__version__} (this process)")
    else:
        missing.append(f"ORT: {why}; {_peers.INSTALL_HINT}")
    peer, where = _peer_runner.tf_worker()
    if peer is not None:
        loaded["TF"] = peer
        versions.append(where)
    else:
        missing.append(where)
    return loaded, missing, versions


def run(bench: Bench) -> None:
    """Times minigraph beside every available peer and prints one table of ratios."""
    report = bench.report
    report.heading(
        "Peers: minigraph beside ONNX Runtime (this process) and TensorFlow (its own process)"
    )
    if not bench.peers:
        report.note("skipped (--no-peers)")
        return
    loaded, missing, versions = _load(bench)
    try:
        _run(bench, loaded, missing, versions)
    finally:
        if "TF" in loaded:
            loaded["TF"].close()


def _run(bench: Bench, loaded: dict[str, Any], missing: list[str], versions: list[str]) -> None:
    report = bench.report
    if not loaded:
        report.note("no peer is available, so there is nothing to compare:")
        for line in missing:
            report.note(line)
        report.add(SECTION, "peers", "installed", "none", "")
        return
    report.note("peers: " + "; ".join(versions))
    peers = [p for p in PEERS if p in loaded]
    table = _Table(bench, peers)
    started = time.perf_counter()
    for part in (_executor, _first_run, _kernels, _construction, _import, _memory):
        try:
            part(bench, table, loaded)
        except Exception as e:  # report and go on with the next part
            table.notes.append(f"{part.__name__.strip('_')}: error: {type(e).__name__}: {e}")
    notes = [
        "medians over interleaved rounds; mg/X: median of per-round ratios (< 1: minigraph "
        "is faster); best: the fastest peer on that figure. ' !' marks a missed target.",
        "executor peers: ORT InferenceSession and TF1 Session.run, graph optimisations off; "
        "kernels: ORT with both inputs fed, TF eager on tensors made once (in its process, "
        "from the same recipe).",
        *table.notes,
        *[f"not measured: {m}" for m in missing],
        f"[{time.perf_counter() - started:.0f} s]",
    ]
    table.print(notes)
    if bench.mode.name == "full":
        tf_python = loaded["TF"].python if "TF" in loaded else None
        _interference.run_check(bench, "ORT" in loaded, tf_python)
    else:
        report.note(
            "(the check that ONNX Runtime in this process leaves minigraph's figures alone, "
            "benchmarks._interference, runs in full mode only)"
        )


if __name__ == "__main__":
    # `python -m benchmarks.peers memory WHO ROWS NODES`: the memory row's child process.
    if len(sys.argv) == 5 and sys.argv[1] == "memory":
        _memory_child(sys.argv[2], *map(int, sys.argv[3:]))
    else:
        raise SystemExit("usage: python -m benchmarks.peers memory WHO ROWS NODES")
