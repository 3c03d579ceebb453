"""Does a peer loaded into minigraph's process slow minigraph down? (The peers section's check.)

TensorFlow does (issue 23), which is why it runs in a process of its own; ONNX Runtime stays
in the benchmarks' process only because this check finds that it does not. Each round starts
one fresh interpreter per condition, in rotating order: minigraph alone, minigraph with ONNX
Runtime imported and running its MLP between minigraph's samples (as the interleaved peers
figures do), and, when a Python with TensorFlow is known, the same with TensorFlow in that
interpreter (the control: the check must see what issue 23 reported) and minigraph alone in
that interpreter (its baseline). Each child times minigraph's jobs (median of its samples); the
figure per job is the median over rounds of (time with the peer) / (time alone).

Jobs: AddV2 on [1000, 1000] float32 (fed), GatherV2 [100000, 64] x 100000 (fed), the ops
section's MLP, and the fixed cost of a run of one [4, 4] gather.

    python -m benchmarks._interference WHO SAMPLES SAMPLE_S SETTLE_S   # one child: JSON
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._config import Bench
from benchmarks._report import ratio_cell
from benchmarks._timing import Stats, loop_count

__all__ = ["run_check", "child"]

SECTION = "peers"
JOBS = ("AddV2 [1000,1000]", "GatherV2 [100000,64] x 100000", "MLP (ops section)", "run() fixed")
TARGET = "<= 1.05"  # a peer that moves minigraph's figures by more does not stay in-process
_now = time.perf_counter_ns


def _minigraph_jobs() -> dict[str, Callable[[], Any]]:
    import minigraph  # noqa: PLC0415 - the child imports minigraph before any peer
    from benchmarks._graphs import gather_fanout  # noqa: PLC0415
    from benchmarks.ops import _mlp_minigraph, mlp_arrays  # noqa: PLC0415
    from minigraph import Scope, Session  # noqa: PLC0415
    from ops import GatherV2, Placeholder  # noqa: PLC0415
    from ops.math import AddV2  # noqa: PLC0415

    rng = np.random.default_rng(0)
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[1000, 1000])
    y = Placeholder(root, minigraph.float32, shape=[1000, 1000])
    p = Placeholder(root, minigraph.float32, shape=[100_000, 64])
    i = Placeholder(root, minigraph.int64, shape=[100_000])
    add, gather = AddV2(root, x, y), GatherV2(root, p, i, 0)
    sess = Session(root)
    add_feed = {x: rng.random((1000, 1000), np.float32), y: rng.random((1000, 1000), np.float32)}
    gather_feed = {
        p: rng.random((100_000, 64), np.float32),
        i: rng.integers(0, 100_000, 100_000, dtype=np.int64),
    }
    _, mlp = _mlp_minigraph(mlp_arrays())
    g = gather_fanout(1, 1)
    tiny_sess = Session(g["root"])
    tiny = {g["x"]: np.arange(16, dtype=np.float32).reshape(4, 4)}
    return {
        JOBS[0]: lambda: sess.run(add, add_feed),
        JOBS[1]: lambda: sess.run(gather, gather_feed),
        JOBS[2]: mlp,
        JOBS[3]: lambda: tiny_sess.run(g["single"], tiny),
    }


def _peer_job(who: str) -> Callable[[], Any] | None:
    """The peer's MLP, loaded into this process (None for `none`)."""
    from benchmarks.ops import mlp_arrays  # noqa: PLC0415

    arrays = mlp_arrays()
    if who == "none":
        return None
    if who == "ORT":
        from benchmarks import _peers  # noqa: PLC0415

        ort, why = _peers.load_ort()
        if ort is None:
            raise RuntimeError(why)
        return _peers.ort_mlp(ort, arrays, threads=2)
    if who == "TF":
        from benchmarks._peer_worker import JOBS as PEER_JOBS  # noqa: PLC0415

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "mlp.npz")
            np.savez(path, **arrays)
            return PEER_JOBS["tf1_mlp"](path=path, intra=2, inter=1)["run"]
    raise ValueError(f"unknown peer {who!r}")


def child(who: str, samples: int, sample_s: float, settle_s: float) -> dict[str, float]:
    """In a fresh interpreter: minigraph's jobs' median seconds per call, with `who` ("none",
    "ORT", "TF") loaded and running between the samples, each sample `settle_s` after the
    peer's run (as the interleaved figures wait for thread pools to stop spinning)."""
    jobs = _minigraph_jobs()
    peer = _peer_job(who)
    peer_n = 0
    if peer is not None:
        peer_n = loop_count(lambda n: [peer() for _ in range(n)], sample_s)
    result = {}
    for name, fn in jobs.items():
        n = loop_count(lambda n, fn=fn: [fn() for _ in range(n)], sample_s)
        times = []
        for _ in range(samples):
            if peer is not None:
                for _ in range(peer_n):
                    peer()
            time.sleep(settle_s)
            start = _now()
            for _ in range(n):
                fn()
            times.append((_now() - start) / n * 1e-9)
        result[name] = float(np.median(times))
    return result


def _run_child(
    python: str, who: str, samples: int, sample_s: float, settle_s: float
) -> dict[str, float]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [python, "-m", "benchmarks._interference", who, str(samples), str(sample_s),
         str(settle_s)],
        capture_output=True, text=True, env=env, timeout=900, cwd=root,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(
            f"the interference child ({who}) exited with {out.returncode}: "
            + (out.stderr.strip()[-800:] or "no message")
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_check(bench: Bench, ort: bool, tf_python: str | None) -> None:
    """Runs the children, prints a table and records the figures."""
    mode = bench.mode
    rounds = {"full": 5, "quick": 2}.get(mode.name, 1)
    samples = max(3, mode.exec_samples // 2)
    sample_s = max(0.002, mode.exec_sample_s / 2)
    conditions: list[tuple[str, str, str]] = []  # (label, python, who)
    if ort:
        conditions += [("alone", sys.executable, "none"), ("ORT", sys.executable, "ORT")]
    if tf_python is not None:
        conditions += [("alone (TF's Python)", tf_python, "none"), ("TF", tf_python, "TF")]
    if not conditions:
        return
    got: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in conditions}
    for r in range(rounds):
        k = r % len(conditions)
        for label, python, who in conditions[k:] + conditions[:k]:
            got[label].append(_run_child(python, who, samples, sample_s, mode.settle_s))
    pairs = []
    if ort:
        pairs.append(("ORT", "alone"))
    if tf_python is not None:
        pairs.append(("TF", "alone (TF's Python)"))
    rows = []
    for job in JOBS:
        row = [job]
        for peer, base in pairs:
            ratio = Stats.of(a[job] / b[job] for a, b in zip(got[peer], got[base]))
            target = TARGET if peer == "ORT" else None
            row.append(ratio_cell(ratio, target, spread=True))
            bench.report.add(
                SECTION, f"interference: {job}", f"minigraph with {peer} in-process / alone",
                ratio, "x", target=target, baseline=base,
            )  # fmt: skip
        rows.append(row)
    bench.report.table(
        "A peer in minigraph's process: minigraph's own times with it / without",
        ["minigraph job", *[f"with {p} / alone" for p, _ in pairs]],
        rows,
        [
            f"median (min-max) over {rounds} round(s) of fresh interpreters per condition, each "
            f"job's median of {samples} samples of ~{sample_s * 1e3:g} ms; the peer imported "
            f"and running its MLP between minigraph's samples (each sample {mode.settle_s:g} s "
            "after it, as the interleaved figures wait for spinning thread pools). ORT stays "
            f"in-process when its column is {TARGET}; TF (the control) runs in its own "
            "process.",
        ],
    )


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit("usage: python -m benchmarks._interference WHO SAMPLES SAMPLE_S SETTLE_S")
    who, samples, sample_s, settle_s = sys.argv[1:]
    print(json.dumps(child(who, int(samples), float(sample_s), float(settle_s))))
