"""Training: one step of an embedding classifier, against TensorFlow, and across table sizes
(issue 22's performance targets).

The model: a [rows, 32] float32 embedding table held in a variable, a batch of 256 examples
of 8 int32 ids each (fed), the mean of each example's 8 rows (ResourceGather, then Mean over
axis 1), one dense layer to 10 classes (MatMul + BiasAdd, weights and bias variables), the mean
sparse softmax cross-entropy against fed int32 labels, and Adagrad with learning rate 0.1
(initial accumulator 0.1, TF 1.x's): the table's gradient is IndexedSlices, applied by
ResourceSparseApplyAdagrad to the rows the batch names; the dense layer's by
ResourceApplyAdagrad: the step is `mg.train.AdagradOptimizer(0.1).minimize(loss)`, which
sums the rows of repeated ids first (Unique + UnsortedSegmentSum), as TF's.

(a) `Session.run(train_op)` of the [1e5, 32] model against TensorFlow 2.x graph mode's
    `session.run(train_op)` for the same model, arrays and feed (tf.compat.v1: tf.Variable,
    tf.gather, AdagradOptimizer(0.1).minimize; ConfigProto(intra_op_parallelism_threads=2,
    inter_op_parallelism_threads=1), Grappler on), TF in a process of its own
    (benchmarks._peer_runner: set MINIGRAPH_BENCH_TF_PYTHON). minigraph runs with
    `SessionConfig(intra_op_threads=2)`. Both start from the same arrays; the losses of their
    first steps must agree (else the section fails). Target: at most 0.80x TensorFlow.
(b) The same step with [1e4, 32], [1e5, 32] and [1e6, 32] tables, interleaved: a sparse step
    costs what its rows cost, not the table. Target: the 1e6 step within 1.30x of the 1e4 one.
(c) Where the step's time goes: cProfile of a run of steps of the [1e5, 32] model, the
    functions with the most time of their own (the figures of a profiled run, slower than
    the plain one; the shares are what to read).

Quick mode keeps every size (the targets are about them) with fewer samples; smoke mode
shrinks the tables to 100, 1000 and 10,000 rows.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import minigraph
from benchmarks import _peer_runner
from benchmarks._config import Bench
from benchmarks._report import cell, num, ratio_cell
from benchmarks._timing import Stats, interleaved, paired
from minigraph import Scope, Session, SessionConfig
from ops import Placeholder
from ops.nn import BiasAdd, MatMul, SparseSoftmaxCrossEntropyWithLogits
from ops.reduction import Mean
from ops.resource_variables import ResourceGather

__all__ = ["BATCH", "IDS_PER_EXAMPLE", "DIM", "CLASSES", "TrainStep", "model_arrays", "run"]

SECTION = "training"
TF_TARGET = "<= 0.80"  # minigraph step / TF step, [1e5, 32] table
SIZE_TARGET = "<= 1.30"  # [1e6, 32] step / [1e4, 32] step

BATCH, IDS_PER_EXAMPLE, DIM, CLASSES = 256, 8, 32, 10
LEARNING_RATE = 0.1
INITIAL_ACCUMULATOR = 0.1  # tf.compat.v1.train.AdagradOptimizer's default
_TF_ROWS = 100_000
_SIZES = (10_000, 100_000, 1_000_000)
_SMOKE_SIZES = (100, 1000, 10_000)


def model_arrays(rows: int, seed: int = 5) -> dict[str, np.ndarray]:
    """The model's initial values and one batch: table [rows, 32], w [32, 10], b [10] (float32),
    ids [256, 8] in [0, rows) and labels [256] in [0, 10) (int32)."""
    rng = np.random.default_rng(seed)
    return {
        "table": rng.standard_normal((rows, DIM), dtype=np.float32) * np.float32(0.1),
        "w": rng.standard_normal((DIM, CLASSES), dtype=np.float32) * np.float32(DIM**-0.5),
        "b": np.zeros(CLASSES, np.float32),
        "ids": rng.integers(0, rows, (BATCH, IDS_PER_EXAMPLE), dtype=np.int32),
        "labels": rng.integers(0, CLASSES, BATCH, dtype=np.int32),
    }


def _numpy_loss(a: dict[str, np.ndarray]) -> float:
    """The model's loss on its batch before any step (float64 NumPy)."""
    h = a["table"].astype(np.float64)[a["ids"]].mean(axis=1)
    logits = h @ a["w"] + a["b"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-log_probs[np.arange(BATCH), a["labels"]].mean())


@dataclass
class TrainStep:
    """A session holding the initialised model: `run()` is one `Session.run(train_op)`,
    `step_loss()` one step returning the loss before it; `how` says how the step was built."""

    session: Session
    train_op: Any
    loss: Any
    feed: dict[Any, np.ndarray]
    how: str

    def run(self) -> Any:
        return self.session.run(self.train_op, self.feed)

    def step_loss(self) -> float:
        return float(self.session.run([self.loss, self.train_op], self.feed)[0])

    def close(self) -> None:
        self.session.close()


def build_step(arrays: dict[str, np.ndarray], threads: int = 2) -> TrainStep:
    """The model of `arrays` in a new graph and session, initialised."""
    root = Scope.new_root_scope()
    table = minigraph.Variable(root, arrays["table"], name="table")
    w = minigraph.Variable(root, arrays["w"], name="w")
    b = minigraph.Variable(root, arrays["b"], name="b")
    ids = Placeholder(root, minigraph.int32, shape=list(arrays["ids"].shape))
    labels = Placeholder(root, minigraph.int32, shape=list(arrays["labels"].shape))
    h = Mean(root, ResourceGather(root, table, ids), 1)
    logits = BiasAdd(root, MatMul(root, h, w), b)
    xent = SparseSoftmaxCrossEntropyWithLogits(root, logits, labels)
    loss = Mean(root, xent.loss, 0).output
    train_op = minigraph.train.AdagradOptimizer(
        LEARNING_RATE, initial_accumulator_value=INITIAL_ACCUMULATOR
    ).minimize(loss)
    how = "mg.train.AdagradOptimizer(0.1).minimize(loss)"
    session = Session(root, SessionConfig(intra_op_threads=threads))
    session.run(minigraph.global_variables_initializer(root))
    feed = {ids: arrays["ids"], labels: arrays["labels"]}
    return TrainStep(session, train_op, loss, feed, how)


def _samples(mode: Any) -> int:
    """Steps timed per figure: one step a sample (milliseconds each), many of them, so that
    the medians and the fastest steps stand out of a shared machine's noise."""
    return 10 * mode.exec_samples


# -- (a) against TensorFlow ----------------------------------------------------------------------


def _check_losses(mine: list[float], want: list[float], who: str) -> list[str]:
    if np.allclose(mine, want, rtol=1e-4, atol=1e-6):
        return []
    return [f"{who}: losses of the first steps {num(want[0])}... differ from minigraph's {mine}"]


def _vs_tf(bench: Bench) -> None:
    report, mode = bench.report, bench.mode
    rows = _SMOKE_SIZES[1] if mode.name == "smoke" else _TF_ROWS
    arrays = model_arrays(rows)
    title = (
        f"One training step, [{rows}, {DIM}] table, batch {BATCH} x {IDS_PER_EXAMPLE} ids, "
        f"Adagrad: Session.run(train_op)"
    )
    mine = build_step(arrays)
    fns: dict[str, Any] = {"minigraph": mine.run}
    notes = [f"minigraph: {mine.how}; SessionConfig(intra_op_threads=2)."]
    problems: list[str] = []
    peer = None
    tmp = tempfile.TemporaryDirectory(prefix="minigraph-train-")
    try:
        losses = [mine.step_loss() for _ in range(3)]
        want = _numpy_loss(arrays)
        if not np.isclose(losses[0], want, rtol=1e-5):
            problems.append(f"minigraph's first loss {losses[0]} differs from NumPy's {want}")
        if bench.peers:
            peer, where = _peer_runner.tf_worker()
            if peer is not None:
                path = os.path.join(tmp.name, "model.npz")
                np.savez(path, **arrays)
                remotes = peer.build("tf1_embedding_train", path=path, intra=2, inter=1)
                tf_losses = [float(remotes["step_loss"].result()) for _ in range(3)]
                problems += _check_losses(losses, tf_losses, "TF")
                fns["TF"] = remotes["step"]
                notes.append(
                    f"TF: {where}; tf.compat.v1 AdagradOptimizer(0.1).minimize, "
                    "ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=1), "
                    "Grappler on. First three losses: minigraph "
                    + ", ".join(f"{x:.6f}" for x in losses)
                    + "; TF "
                    + ", ".join(f"{x:.6f}" for x in tf_losses)
                    + "."
                )
            else:
                notes.append(f"not measured: {where}")
        else:
            notes.append("peers skipped (--no-peers)")
        s = interleaved(fns, _samples(mode), settle_s=mode.settle_s, group=lambda who: who)
    finally:
        mine.close()
        if peer is not None:
            peer.close()
        tmp.cleanup()
    ms = {who: Stats.of(v).scaled(1e3) for who, v in s.items()}
    rows_out = [["minigraph", cell(ms["minigraph"]), "", "", ""]]
    report.add(SECTION, f"step [{rows}, {DIM}]", "minigraph step", ms["minigraph"], "ms")
    if "TF" in s:
        r = paired(lambda a, b: a / b, s["minigraph"], s["TF"])
        target = TF_TARGET if rows == _TF_ROWS else None
        floor = min(s["minigraph"]) / min(s["TF"])
        rows_out.append(["TF", cell(ms["TF"]), ratio_cell(r, target), num(floor), target or ""])
        report.add(
            SECTION, f"step [{rows}, {DIM}]", "minigraph/TF, fastest steps", floor, "x",
            baseline="TF",
        )  # fmt: skip
        report.add(SECTION, f"step [{rows}, {DIM}]", "TF step", ms["TF"], "ms")
        report.add(
            SECTION, f"step [{rows}, {DIM}]", "minigraph/TF", r, "x", target=target,
            baseline="TF",
        )  # fmt: skip
    report.table(
        title,
        ["runtime", "ms per step", "minigraph / it", "fastest / fastest", "target"],
        rows_out,
        [
            f"ms: median (min-max) of {_samples(mode)} interleaved steps, one step a sample "
            "(TF's timed inside its process); ratio: median of per-round ratios; fastest / "
            "fastest: the ratio of the two fastest steps (the machine's noise removed); "
            "' !' marks a miss.",
            *notes,
            *problems,
        ],
    )
    if problems:
        raise RuntimeError("; ".join(problems))


# -- (b) table sizes -----------------------------------------------------------------------------


def _sizes(bench: Bench) -> None:
    report, mode = bench.report, bench.mode
    sizes = _SMOKE_SIZES if mode.name == "smoke" else _SIZES
    steps = {}
    try:
        for rows in sizes:
            steps[rows] = build_step(model_arrays(rows))
        s = interleaved(
            {f"[{rows}, {DIM}]": step.run for rows, step in steps.items()}, _samples(mode)
        )
    finally:
        for step in steps.values():
            step.close()
    small, large = f"[{sizes[0]}, {DIM}]", f"[{sizes[-1]}, {DIM}]"
    target = SIZE_TARGET if sizes == _SIZES else None
    rows_out = []
    for name, samples in s.items():
        t = Stats.of(samples).scaled(1e3)
        r = paired(lambda a, b: a / b, samples, s[small])
        floor = min(samples) / min(s[small])
        rows_out.append(
            [name, cell(t), ratio_cell(r, target if name == large else None), num(floor)]
        )
        report.add(
            SECTION, f"step {name}", f"fastest / fastest step {small}", floor, "x",
            baseline=f"step {small}",
        )  # fmt: skip
        report.add(SECTION, f"step {name}", "time", t, "ms")
        report.add(
            SECTION, f"step {name}", f"/ step {small}", r, "x",
            target=target if name == large else None, baseline=f"step {small}",
        )  # fmt: skip
    report.table(
        "The same step across table sizes (a sparse step costs its rows, not the table)",
        ["table", "ms per step", f"/ {small}", "fastest / fastest"],
        rows_out,
        [
            f"ms: median (min-max) of {_samples(mode)} interleaved steps, one step a sample; "
            "ratio: median of per-round ratios; fastest / fastest: the ratio of the fastest "
            f"steps. Target: {large} {target or '(for 1e4 and 1e6 rows only)'} x the {small} "
            "step.",
        ],
    )


# -- (c) profile ---------------------------------------------------------------------------------


def _where(key: tuple[str, int, str]) -> str:
    path, line, name = key
    if path == "~":
        return name
    parts = path.replace(os.sep, "/").split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 else parts[-1]
    return f"{short}:{line} {name}"


def _profile(bench: Bench, top: int = 12) -> None:
    report, mode = bench.report, bench.mode
    rows = _SMOKE_SIZES[1] if mode.name == "smoke" else _TF_ROWS
    n = 3 if mode.name == "smoke" else 200
    step = build_step(model_arrays(rows))
    try:
        for _ in range(3):
            step.run()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(n):
            step.run()
        profiler.disable()
    finally:
        step.close()
    stats = pstats.Stats(profiler)
    total = sum(v[2] for v in stats.stats.values()) or 1e-12  # own times add up to the run
    ranked = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    out = []
    for key, (_, calls, own, cumulative, _) in ranked:
        out.append(
            [
                _where(key),
                str(calls // n) if calls >= n else f"{calls / n:.2g}",
                num(own / n * 1e6),
                f"{100 * own / total:.1f}",
                num(cumulative / n * 1e6),
            ]
        )
        report.add(SECTION, "profile", _where(key), own / n * 1e6, "us own per step")
    report.table(
        f"Where a step goes: cProfile of {n} steps, [{rows}, {DIM}] table (profiled: slower than "
        "plain; read the shares)",
        ["function", "calls/step", "own us/step", "% own", "cumulative us/step"],
        out,
        [f"the {top} functions with the most time of their own; total {num(total / n * 1e6)} us "
         "per profiled step."],
    )  # fmt: skip


def run(bench: Bench) -> None:
    """Times the step against TensorFlow and across table sizes, and profiles it. A part that
    fails prints its error and the others still run; the section then fails."""
    bench.report.heading(
        "Training: an embedding classifier's Adagrad step vs TensorFlow, across table sizes"
    )
    parts: dict[str, Callable[[], None]] = {
        "vs TF": lambda: _vs_tf(bench),
        "table sizes": lambda: _sizes(bench),
        "profile": lambda: _profile(bench),
    }
    failed = []
    for name, part in parts.items():
        try:
            part()
        except Exception as e:  # report and go on with the next part
            failed.append(name)
            bench.report.note(f"{name}: error: {type(e).__name__}: {e}")
            bench.report.add(SECTION, name, "error", f"{type(e).__name__}: {e}", "")
    if failed:
        raise RuntimeError(f"training section: part(s) {', '.join(failed)} failed (errors above)")
