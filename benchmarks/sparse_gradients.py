"""Sparse gradients and gradient steps (issue 21's performance targets, beside the gradient
construction of benchmarks/gradients.py).

(a) The sparse gradient of a gather: a fed [1e6, 64] float32 table, 1e5 random int64 ids
    (repeats included). `Session.run` of the forward GatherV2 against `Session.run` of
    `minigraph.gradients(rows, table)[0]`, an IndexedSlices (values: the seed reshaped;
    indices; the table's shape): with the default seed (ones: the forward gather runs for
    its shape) and with a fed `grad_ys`. Target: the default-seed gradient at most 1.20x
    the forward gather.
(b) Densifying it: `Session.run(convert_to_tensor(that IndexedSlices))` (UnsortedSegmentSum
    into [1e6, 64], fed grad_ys), against NumPy over the same values and ids: the best
    formulation found (an output reused, memset; the rows put as void records, the last
    writer of each row found by a put/take of positions; repeated ids' rows added in rounds),
    sort + np.add.reduceat into a reused output, and np.zeros + np.add.at (slow: shown for
    scale). Target: at most 1.50x the best NumPy formulation.
(c) One gradient step of benchmarks.ops' MLP (batch 64, 128 -> 256 ReLU -> 10; weights as
    Consts, x and int32 labels fed): the mean sparse softmax cross-entropy and
    `minigraph.gradients(loss, [w1, w2])`, `Session.run` of both gradients
    (`SessionConfig(intra_op_threads=2)`), against TensorFlow 2.x graph mode's `Session.run`
    of `tf.gradients` for the same model and arrays (ConfigProto(intra_op_parallelism_threads=2,
    inter_op_parallelism_threads=1), Grappler on), TF in a process of its own
    (benchmarks._peer_runner). The two gradients must agree. Target: at most 1.00x TF.
(d) Gradient construction with the op library's own rules: a chain of N Tanh nodes (ops.math;
    its rule builds TanhGrad) over a [4] float32 placeholder, built, and differentiated
    (`gradients(end, x)` over a chain built beforehand, untimed), interleaved, for 1000 and
    10,000 nodes. Targets (as benchmarks/gradients.py's, which uses an op of its own): the
    1000-node gradient at most 3x the 1000-node chain, the 10,000-node gradient at most 12x
    the 1000-node one.

Quick mode divides the gather's table and ids by 10, smoke mode by 1000 (the titles say so);
the MLP keeps its size; smoke mode builds chains of 20 and 200 nodes.
"""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

import minigraph
from benchmarks import _peer_runner
from benchmarks._config import Bench
from benchmarks._report import cell, ratio_cell
from benchmarks._timing import Stats, interleaved, interleaved_loops, paired
from minigraph import Scope, Session, SessionConfig
from ops import Const, Placeholder
from ops.gather_ops import GatherV2
from ops.math import Relu, Tanh
from ops.nn import BiasAdd, MatMul, SparseSoftmaxCrossEntropyWithLogits
from ops.reduction import Mean

__all__ = ["GatherGradient", "mlp_grad_arrays", "numpy_densify", "run"]

SECTION = "sparse_gradients"
SPARSE_TARGET = "<= 1.20"  # default-seed sparse gradient / forward gather
DENSE_TARGET = "<= 1.50"  # densified / best NumPy
MLP_TARGET = "<= 1.00"  # minigraph gradient step / TF's
BUILD_TARGET = "<= 3"  # 1000-node gradient build / forward build
GROWTH_TARGET = "<= 12"  # 10,000-node gradient build / 1000-node one

_TABLE, _WIDTH, _IDS = 1_000_000, 64, 100_000


# -- (a), (b) the gather's gradient --------------------------------------------------------------


class GatherGradient:
    """The gather, its sparse gradients and the densified one, in one session over fed arrays
    (`table` [rows, width] float32, `ids` int64, `dy` [len(ids), width] float32)."""

    def __init__(self, table: np.ndarray, ids: np.ndarray, dy: np.ndarray):
        root = Scope.new_root_scope()
        t = Placeholder(root.with_op_name("table"), minigraph.float32, shape=list(table.shape))
        i = Placeholder(root.with_op_name("ids"), minigraph.int64, shape=[None])
        d = Placeholder(root.with_op_name("dy"), minigraph.float32, shape=[None, table.shape[1]])
        self.rows = GatherV2(root.with_op_name("rows"), t, i, 0).output
        (self.sparse_ones,) = minigraph.gradients(self.rows, t)
        (self.sparse_fed,) = minigraph.gradients(self.rows, t, grad_ys=d)
        self.dense = minigraph.convert_to_tensor(self.sparse_fed, scope=root)
        self.session = Session(root)
        self.feed = {t: table, i: ids}
        self.fed = {t: table, i: ids, d: dy}

    def forward(self) -> Any:
        return self.session.run(self.rows, self.feed)

    def gradient_ones(self) -> Any:
        return self.session.run(self.sparse_ones, self.feed)

    def gradient_fed(self) -> Any:
        return self.session.run(self.sparse_fed, self.fed)

    def densified(self) -> Any:
        return self.session.run(self.dense, self.fed)

    def close(self) -> None:
        self.session.close()


def numpy_densify(ids: np.ndarray, data: np.ndarray, rows: int) -> Callable[[], np.ndarray]:
    """The best NumPy formulation found of `zeros([rows, width]); out[ids] += data` (repeats
    summed in order): an output reused and memset; each row put as one void record (the last
    writer of a repeated row wins); the repeated rows then rebuilt from their first writer,
    adding the others in rounds (one round per repeat count)."""
    n, width = data.shape
    out = np.empty((rows, width), data.dtype)
    void = np.dtype((np.void, width * data.dtype.itemsize))
    owner = np.empty(rows, np.int64)
    positions = np.arange(n, dtype=np.int64)
    source = np.ascontiguousarray(data).view(void).reshape(n)

    def densify() -> np.ndarray:
        out.reshape(-1).view(np.uint8).fill(0)
        target = out.view(void).reshape(rows)
        owner.put(ids, positions)
        repeated = owner.take(ids) != positions  # not the last writer of its row
        target.put(ids, source)
        repeated[owner.take(ids[repeated])] = True  # and the last writers of repeated rows
        rest, first = np.flatnonzero(repeated), True
        while rest.size:
            keys, here = ids.take(rest), positions[: rest.size]
            owner.put(keys[::-1], here[::-1])  # the first of each row among the rest
            leads = owner.take(keys) == here
            at = rest[leads]
            at_rows = ids.take(at)
            if first:
                target.put(at_rows, source.take(at))
            else:
                current = out.take(at_rows, axis=0)
                current += data.take(at, axis=0)
                target.put(at_rows, current.view(void).reshape(-1))
            rest, first = rest[~leads], False
        return out

    return densify


def _numpy_reduceat(ids: np.ndarray, data: np.ndarray, rows: int) -> Callable[[], np.ndarray]:
    out = np.empty((rows, data.shape[1]), data.dtype)

    def densify() -> np.ndarray:
        out.reshape(-1).view(np.uint8).fill(0)
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        out[ordered[starts]] = np.add.reduceat(data[order], starts, axis=0)
        return out

    return densify


def _numpy_add_at(ids: np.ndarray, data: np.ndarray, rows: int) -> Callable[[], np.ndarray]:
    def densify() -> np.ndarray:
        out = np.zeros((rows, data.shape[1]), data.dtype)
        np.add.at(out, ids, data)
        return out

    return densify


def _gather(bench: Bench) -> None:
    report, mode = bench.report, bench.mode
    div = mode.kernel_divisor
    rows, n = max(10, _TABLE // div), max(1, _IDS // div)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, rows, n).astype(np.int64)
    table = rng.standard_normal((rows, _WIDTH), dtype=np.float32)
    dy = rng.standard_normal((n, _WIDTH), dtype=np.float32)
    scaled = f" [{mode.name}: sizes / {div}]" if mode.scaled else ""
    g = GatherGradient(table, ids, dy)
    problems = []
    try:
        expected = np.zeros((rows, _WIDTH), np.float32)
        np.add.at(expected, ids, dy)
        value = g.gradient_fed()
        if not (
            np.array_equal(value.values, dy)
            and np.array_equal(value.indices, ids)
            and list(value.dense_shape) == [rows, _WIDTH]
        ):
            problems.append("the sparse gradient is not (dy, ids, the table's shape)")
        ones = g.gradient_ones()
        if not (np.all(ones.values == 1) and ones.values.shape == (n, _WIDTH)):
            problems.append("the default-seed sparse gradient's values are not ones")
        if not np.allclose(g.densified(), expected, rtol=1e-6, atol=1e-6):
            problems.append("the densified gradient differs from np.add.at's")
        numpy_fns = {
            "numpy best": numpy_densify(ids, dy, rows),
            "sort + np.add.reduceat": _numpy_reduceat(ids, dy, rows),
            "np.zeros + np.add.at": _numpy_add_at(ids, dy, rows),
        }
        for name, fn in numpy_fns.items():
            if not np.allclose(fn(), expected, rtol=1e-6, atol=1e-6):
                problems.append(f"{name} differs from np.add.at's result")
        repeats = max(3, mode.kernel_repeats)
        sparse = interleaved(
            {
                "forward gather": g.forward,
                "sparse gradient, default seed": g.gradient_ones,
                "sparse gradient, fed grad_ys": g.gradient_fed,
            },
            repeats,
            before=gc.collect,
        )
        dense = interleaved(
            {"densified (UnsortedSegmentSum)": g.densified, **numpy_fns},
            repeats,
            before=gc.collect,
        )
    finally:
        g.close()
    rows_out = []
    full = div == 1  # the targets are for the sizes (smaller ones weigh fixed costs)
    for name, samples in sparse.items():
        target = SPARSE_TARGET if full and name == "sparse gradient, default seed" else None
        r = paired(lambda a, b: a / b, samples, sparse["forward gather"])
        t = Stats.of(samples).scaled(1e3)
        shown = "" if name == "forward gather" else ratio_cell(r, target)
        rows_out.append([name, cell(t), shown, target or ""])
        report.add(SECTION, "gather gradient", f"{name}: time", t, "ms")
        if name != "forward gather":
            report.add(
                SECTION, "gather gradient", f"{name} / forward gather", r, "x", target=target,
                baseline="forward gather",
            )  # fmt: skip
    report.table(
        f"Sparse gradient of a gather: [{rows}, {_WIDTH}] float32 table, {n} int64 ids{scaled}",
        ["Session.run of", "ms", "/ forward", "target"],
        rows_out,
        [
            f"ms: median (min-max) of {repeats} interleaved runs, gc.collect() before each "
            "(untimed); ratios: median of per-run ratios; ' !' marks a miss.",
            "default seed: gradients(rows, table) (a Fill of ones shaped as the forward "
            "output, so the gather runs too); fed: gradients(rows, table, grad_ys=dy). Target "
            f"{SPARSE_TARGET} at the full sizes only.",
            *problems,
        ],
    )
    rows_out = []
    base = "numpy best"
    for name, samples in dense.items():
        target = DENSE_TARGET if full and name.startswith("densified") else None
        r = paired(lambda a, b: a / b, samples, dense[base])
        t = Stats.of(samples).scaled(1e3)
        shown = "" if name == base else ratio_cell(r, target)
        rows_out.append([name, cell(t), shown, target or ""])
        report.add(SECTION, "densify", f"{name}: time", t, "ms")
        if name != base:
            report.add(
                SECTION, "densify", f"{name} / {base}", r, "x", target=target, baseline=base
            )  # fmt: skip
    report.table(
        f"Densifying it: convert_to_tensor (UnsortedSegmentSum into [{rows}, {_WIDTH}]) vs NumPy"
        f"{scaled}",
        ["run", "ms", f"/ {base}", "target"],
        rows_out,
        [
            f"ms: median (min-max) of {repeats} interleaved runs, fed grad_ys. numpy best: a "
            "reused output, memset, rows put as void records, repeated ids' rows added in "
            "rounds; sort + np.add.reduceat: a reused output too; np.zeros + np.add.at: the "
            f"textbook one. Target {DENSE_TARGET} at the full sizes only.",
            *problems,
        ],
    )
    if problems:
        raise RuntimeError("; ".join(problems))


# -- (c) the MLP's gradient step -----------------------------------------------------------------


def mlp_grad_arrays(batch: int = 64, seed: int = 3) -> dict[str, np.ndarray]:
    """benchmarks.ops.mlp_arrays plus int32 labels in [0, 10)."""
    from benchmarks.ops import mlp_arrays  # noqa: PLC0415 - the ops section's model

    arrays = mlp_arrays(batch, seed)
    arrays["labels"] = np.random.default_rng(seed + 1).integers(0, 10, batch, dtype=np.int32)
    return arrays


def _numpy_mlp_grads(a: dict[str, np.ndarray]) -> np.ndarray:
    """Both weight gradients raveled, float64 NumPy."""
    x, w1, b1, w2, b2 = (a[k].astype(np.float64) for k in ("x", "w1", "b1", "w2", "b2"))
    pre = x @ w1 + b1
    h = np.maximum(pre, 0)
    logits = h @ w2 + b2
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(x)), a["labels"]] -= 1
    dlogits = p / len(x)
    dw2 = h.T @ dlogits
    dh = (dlogits @ w2.T) * (pre > 0)
    return np.concatenate([(x.T @ dh).ravel(), dw2.ravel()])


def _mlp_grad_minigraph(a: dict[str, np.ndarray]) -> tuple[Session, Callable[[], Any]]:
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=list(a["x"].shape))
    labels = Placeholder(root, minigraph.int32, shape=list(a["labels"].shape))
    w1, w2 = Const(root, a["w1"]).output, Const(root, a["w2"]).output
    h = Relu(root, BiasAdd(root, MatMul(root, x, w1), Const(root, a["b1"])))
    logits = BiasAdd(root, MatMul(root, h, w2), Const(root, a["b2"]))
    loss = Mean(root, SparseSoftmaxCrossEntropyWithLogits(root, logits, labels).loss, 0)
    grads = minigraph.gradients(loss, [w1, w2])
    sess = Session(root, SessionConfig(intra_op_threads=2))
    feed = {x: a["x"], labels: a["labels"]}
    return sess, lambda: sess.run(grads, feed)


def _loop(fn: Callable[[], Any]) -> Callable[[int], None]:
    def loop(n: int) -> None:
        for _ in range(n):
            fn()

    return loop


def _flat(grads: Any) -> np.ndarray:
    return np.concatenate([np.asarray(g).ravel() for g in grads])


def _mlp_grad(bench: Bench) -> None:
    report, mode = bench.report, bench.mode
    arrays = mlp_grad_arrays()
    want = _numpy_mlp_grads(arrays)
    sess, mine = _mlp_grad_minigraph(arrays)
    fns: dict[str, Any] = {"minigraph": _loop(mine)}
    notes: list[str] = []
    problems: list[str] = []
    peer = None
    tmp = tempfile.TemporaryDirectory(prefix="minigraph-mlp-grad-")
    try:
        if not np.allclose(_flat(mine()), want, rtol=1e-4, atol=1e-6):
            problems.append("minigraph's gradients differ from NumPy's")
        if bench.peers:
            peer, where = _peer_runner.tf_worker()
            if peer is not None:
                path = os.path.join(tmp.name, "mlp.npz")
                np.savez(path, **arrays)
                remotes = peer.build("tf1_mlp_grad", path=path, intra=2, inter=1)
                if not np.allclose(remotes["flat"].result(), want, rtol=1e-4, atol=1e-6):
                    problems.append("TF's gradients differ from NumPy's")
                fns["TF"] = remotes["run"]
                notes.append(f"TF: {where}.")
            else:
                notes.append(f"not measured: {where}")
        else:
            notes.append("peers skipped (--no-peers)")
        s = interleaved_loops(
            fns, mode.exec_samples, mode.exec_sample_s, settle_s=mode.settle_s,
            group=lambda who: who,
        )  # fmt: skip
    finally:
        sess.close()
        if peer is not None:
            peer.close()
        tmp.cleanup()
    us = {who: Stats.of(v).scaled(1e6) for who, v in s.items()}
    rows_out = [["minigraph", cell(us["minigraph"]), "", ""]]
    report.add(SECTION, "MLP gradient step", "minigraph Session.run", us["minigraph"], "us")
    if "TF" in s:
        r = paired(lambda a, b: a / b, s["minigraph"], s["TF"])
        rows_out.append(["TF", cell(us["TF"]), ratio_cell(r, MLP_TARGET), MLP_TARGET])
        report.add(SECTION, "MLP gradient step", "TF Session.run", us["TF"], "us")
        report.add(
            SECTION, "MLP gradient step", "minigraph/TF", r, "x", target=MLP_TARGET,
            baseline="TF",
        )  # fmt: skip
    report.table(
        "MLP gradient step: batch 64, 128 -> 256 ReLU -> 10, mean sparse softmax cross-entropy, "
        "gradients of w1 and w2",
        ["runtime", "us per run", "minigraph / it", "target"],
        rows_out,
        [
            f"us: median (min-max) of {mode.exec_samples} interleaved samples, each a loop of "
            f"~{mode.exec_sample_s * 1e3:g} ms (TF's timed inside its process); ratio: median "
            "of per-sample ratios; ' !' marks a miss.",
            "minigraph: minigraph.gradients(loss, [w1, w2]), SessionConfig(intra_op_threads=2); "
            "TF: tf.gradients, ConfigProto(intra_op_parallelism_threads=2, "
            "inter_op_parallelism_threads=1), Grappler on. Both checked against NumPy.",
            "minigraph's MatMuls are NumPy's BLAS with its own threads (see the header): on "
            "a loaded machine threaded small products stall; OPENBLAS_NUM_THREADS=1 avoids it.",
            *notes,
            *problems,
        ],
    )
    if problems:
        raise RuntimeError("; ".join(problems))


# -- (d) construction with the library's rules ----------------------------------------------------


def _tanh_chain(n: int) -> tuple[Any, Any]:
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[4])
    y = x
    for _ in range(n):
        y = Tanh(root, y)
    return x, y


def _construction(bench: Bench) -> None:
    report, mode = bench.report, bench.mode
    small = 20 if mode.name == "smoke" else 1000
    large = 10 * small
    repeats = max(3, mode.build_repeats)
    prepared = {n: [_tanh_chain(n) for _ in range(repeats + 1)] for n in (small, large)}

    def backward(n: int) -> Callable[[], Any]:
        def build() -> Any:
            x, y = prepared[n].pop()
            return minigraph.gradients(y, x)

        return build

    samples = interleaved(
        {
            f"forward {small}": lambda: _tanh_chain(small),
            f"gradients {small}": backward(small),
            f"forward {large}": lambda: _tanh_chain(large),
            f"gradients {large}": backward(large),
        },
        repeats,
        before=gc.collect,
    )
    build_target = BUILD_TARGET if small == 1000 else None
    growth_target = GROWTH_TARGET if small == 1000 else None
    ratio = paired(lambda b, f: b / f, samples[f"gradients {small}"], samples[f"forward {small}"])
    growth = paired(
        lambda b, s: b / s, samples[f"gradients {large}"], samples[f"gradients {small}"]
    )
    rows_out = []
    for name, s in samples.items():
        n = small if name.endswith(f" {small}") else large
        total = Stats.of(s).scaled(1e3)
        rows_out.append([name, cell(Stats.of(s).scaled(1e6 / n)), cell(total)])
        report.add(SECTION, f"Tanh chain: {name}", "total", total, "ms")
    report.add(
        SECTION, f"Tanh chain {small}", "gradients / forward", ratio, "x", target=build_target
    )
    report.add(
        SECTION, f"Tanh chains {large} / {small}", "gradients growth", growth, "x",
        target=growth_target,
    )  # fmt: skip
    report.table(
        f"Gradient construction with the library's rules: chains of {small} and {large} Tanh",
        ["build", "us/node", "ms"],
        rows_out,
        [
            f"gradients / forward, {small} nodes: {ratio_cell(ratio, build_target)} "
            f"(target {build_target or 'for 1000 nodes only'}); gradients {large} / {small}: "
            f"{ratio_cell(growth, growth_target)} (target "
            f"{growth_target or 'for 1000 nodes only'}; 10 means linear).",
            f"median (min-max) over {repeats} interleaved builds, gc.collect() before each "
            "(untimed); the chains differentiated are built beforehand, untimed.",
        ],
    )


def run(bench: Bench) -> None:
    """Times the gather's sparse and densified gradients, the MLP's gradient step against
    TensorFlow, and gradient construction. A part that fails prints its error and the others
    still run; the section then fails."""
    bench.report.heading(
        "Sparse gradients: a gather's gradient, densifying it, the MLP's gradient step"
    )
    parts: dict[str, Callable[[], None]] = {
        "gather gradient": lambda: _gather(bench),
        "MLP gradient step": lambda: _mlp_grad(bench),
        "construction": lambda: _construction(bench),
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
        raise RuntimeError(
            f"sparse_gradients section: part(s) {', '.join(failed)} failed (errors above)"
        )
