"""Ops: the core op families through `Session.run`, against NumPy, and a small MLP beside
TensorFlow and ONNX Runtime (issue 20's performance targets).

(a) Elementwise ops and reductions on [1000, 1000] float32 arrays (1e6 elements; int32 for
    FloorDiv): `Session.run` of a one-node graph on fed arrays (constant axes), against the
    same NumPy expression on the same arrays (`x + y`, `x.sum(axis=0)`, ...), each sample a
    loop of calls, the two interleaved. Target: at most 1.10x.
(b) MatMul [512,512]x[512,512] and [64,128]x[128,256] float32, both operands fed, against
    NumPy's `a @ b` (the same BLAS, its own threads). Target: at most 1.05x.
(c) BiasAdd -> Relu -> BiasAdd -> Relu on a fed [1024, 1024] float32 tensor (biases are
    Consts): the chain's nodes write into their dying input (input forwarding) instead of a new
    output per node. Measured with tracemalloc (numpy reports its data allocations to it): the
    peak above the start of a fresh session's first run, and the memory the session keeps after
    it (its buffer pool), in tensors, with forwarding on (the default) and off
    (`OptimizerConfig(input_forwarding=False)`); and the run times against NumPy's expression
    and an in-place NumPy loop. Target: one tensor with forwarding (four nodes, one output).
(d) An MLP: batch 64, 128 -> 256 with ReLU -> 10 with softmax, float32, weights as Consts,
    x fed (MatMul, BiasAdd, Relu, MatMul, BiasAdd, Softmax), with
    `SessionConfig(intra_op_threads=2)`; against TensorFlow 2.x graph mode's `Session.run` of
    the same model (tf.compat.v1, ConfigProto(intra_op_parallelism_threads=2,
    inter_op_parallelism_threads=1), Grappler on), run in a process of its own
    (benchmarks._peer_runner: set MINIGRAPH_BENCH_TF_PYTHON), and ONNX Runtime on the same
    model built with onnx.helper (MatMul, Add, Relu, MatMul, Add, Softmax;
    intra_op_num_threads=2, its default graph optimisations), in this process. Targets: at
    most 0.80x TensorFlow, at most 1.00x ONNX Runtime. The NumPy expression of the model is
    timed beside them (the floor of any Python executor). `--no-peers` leaves only minigraph
    and NumPy.

Quick mode divides the leading dim of the inputs of (a) and of MatMul's first operand by 10
(smoke mode by 1000) and says so in the titles; the chain of (c) (whose memory figures need
tensors the buffer pool serves) and the MLP keep their sizes but in smoke mode.
"""

from __future__ import annotations

import gc
import os
import tempfile
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import minigraph
from benchmarks import _peer_runner, _peers
from benchmarks._config import Bench
from benchmarks._report import cell, num, ratio_cell
from benchmarks._timing import Stats, interleaved_loops, paired
from minigraph import OptimizerConfig, Scope, Session, SessionConfig
from ops import Const, Placeholder
from ops.math import AddV2, Exp, FloorDiv, Maximum, Mul, RealDiv, Relu, Sigmoid, Tanh
from ops.nn import BiasAdd, MatMul, Softmax
from ops.reduction import ArgMax, Max, Mean, Sum

__all__ = ["OpCase", "ELEMENTWISE_CASES", "MATMUL_CASES", "mlp_arrays", "run"]

SECTION = "ops"
ELEMENTWISE_TARGET = "<= 1.10"  # minigraph / NumPy
MATMUL_TARGET = "<= 1.05"
FORWARDING_TARGET = "<= 1.05"  # tensors at the first run's peak, forwarding on
MLP_TF_TARGET = "<= 0.80"
MLP_ORT_TARGET = "<= 1.00"

_ROWS, _COLS = 1000, 1000


@dataclass(frozen=True)
class OpCase:
    """One op on fed inputs. `inputs`: (kind, shape) per input, kinds `normal` (standard
    normal float32), `positive` (float32 in [0.5, 1.5)), `int` (int32 in [-2**20, 2**20))
    and `divisor` (nonzero int32 in +-[1, 1000]); `build(root, *placeholders)` makes the node,
    `numpy(*arrays)` is the NumPy expression (`expression` its text)."""

    name: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    build: Callable[..., Any]
    numpy: Callable[..., Any]
    expression: str
    #: The inputs whose leading dim quick and smoke modes divide (None: every input).
    scaled: tuple[int, ...] | None = None

    def resized(self, divisor: int) -> OpCase:
        """The case with the leading dim of its scaled inputs divided by `divisor` (at least
        1)."""
        inputs = tuple(
            (k, (max(1, s[0] // divisor), *s[1:]) if self.scaled is None or i in self.scaled else s)
            for i, (k, s) in enumerate(self.inputs)
        )
        return replace(self, inputs=inputs)

    @property
    def shapes(self) -> str:
        return " x ".join("[" + ",".join(map(str, s)) + "]" for _, s in self.inputs)


_M = (_ROWS, _COLS)
_X = (("normal", _M),)
_XY = (("normal", _M), ("positive", _M))

ELEMENTWISE_CASES: list[OpCase] = [
    OpCase("AddV2", _XY, AddV2, lambda x, y: x + y, "x + y"),
    OpCase("Mul", _XY, Mul, lambda x, y: x * y, "x * y"),
    OpCase("RealDiv", _XY, RealDiv, lambda x, y: x / y, "x / y"),
    OpCase("Maximum", _XY, Maximum, np.maximum, "np.maximum(x, y)"),
    OpCase("Exp", _X, Exp, np.exp, "np.exp(x)"),
    OpCase("Tanh", _X, Tanh, np.tanh, "np.tanh(x)"),
    OpCase("Sigmoid", _X, Sigmoid, lambda x: 1 / (1 + np.exp(-x)), "1 / (1 + np.exp(-x))"),
    OpCase("Relu", _X, Relu, lambda x: np.maximum(x, 0), "np.maximum(x, 0)"),
    OpCase("Sum, all", _X, lambda r, x: Sum(r, x, [0, 1]), lambda x: x.sum(), "x.sum()"),
    OpCase("Sum, axis 0", _X, lambda r, x: Sum(r, x, 0), lambda x: x.sum(axis=0), "x.sum(axis=0)"),
    OpCase("Mean, all", _X, lambda r, x: Mean(r, x, [0, 1]), lambda x: x.mean(), "x.mean()"),
    OpCase(
        "Mean, axis 1",
        _X,
        lambda r, x: Mean(r, x, 1),
        lambda x: x.mean(axis=1),
        "x.mean(axis=1)",
    ),
    OpCase("Max, all", _X, lambda r, x: Max(r, x, [0, 1]), lambda x: x.max(), "x.max()"),
    OpCase("Max, axis 1", _X, lambda r, x: Max(r, x, 1), lambda x: x.max(axis=1), "x.max(axis=1)"),
    OpCase(
        "ArgMax, axis 1",
        _X,
        lambda r, x: ArgMax(r, x, 1),
        lambda x: x.argmax(axis=1),
        "x.argmax(axis=1)",
    ),
    OpCase(
        "FloorDiv int32",
        (("int", _M), ("divisor", _M)),
        FloorDiv,
        lambda x, y: x // y,
        "x // y",
    ),
]

MATMUL_CASES: list[OpCase] = [
    OpCase(
        "MatMul",
        (("normal", (512, 512)), ("normal", (512, 512))),
        MatMul,
        lambda a, b: a @ b,
        "a @ b",
        scaled=(0,),
    ),
    OpCase(
        "MatMul",
        (("normal", (64, 128)), ("normal", (128, 256))),
        MatMul,
        lambda a, b: a @ b,
        "a @ b",
        scaled=(0,),
    ),
]


def _array(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape, dtype=np.float32)
    if kind == "positive":
        return rng.random(shape, dtype=np.float32) + np.float32(0.5)
    if kind == "int":
        return rng.integers(-(2**20), 2**20, size=shape, dtype=np.int32)
    if kind == "divisor":
        magnitude = rng.integers(1, 1001, size=shape, dtype=np.int32)
        return np.where(rng.random(shape) < 0.5, -magnitude, magnitude).astype(np.int32)
    raise ValueError(f"unknown input kind {kind!r}")


def _graph(case: OpCase, arrays: Sequence[np.ndarray]) -> tuple[Scope, Any, dict]:
    """(root, node, feed) of a one-node graph on placeholders of the arrays' shapes."""
    root = Scope.new_root_scope()
    holders = [Placeholder(root, minigraph.as_dtype(a.dtype), shape=list(a.shape)) for a in arrays]
    node = case.build(root, *holders)
    return root, node, dict(zip(holders, arrays))


def _same(got: Any, want: Any) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind == "f":
        return bool(np.allclose(got, want, rtol=2e-6, atol=1e-7))
    return bool(np.array_equal(got, want))


def _loop(fn: Callable[[], Any]) -> Callable[[int], None]:
    def loop(n: int) -> None:
        for _ in range(n):
            fn()

    return loop


def _time_case(bench: Bench, case: OpCase, rng: np.random.Generator) -> dict[str, Any]:
    """Interleaved samples of Session.run of the case's node and of its NumPy expression."""
    mode = bench.mode
    arrays = [_array(kind, shape, rng) for kind, shape in case.inputs]
    root, node, feed = _graph(case, arrays)
    problems = []
    with Session(root) as sess:
        if not _same(sess.run(node, feed), case.numpy(*arrays)):
            problems.append("minigraph's result differs from NumPy's")
        loops = {
            "minigraph": _loop(lambda: sess.run(node, feed)),
            "numpy": _loop(lambda: case.numpy(*arrays)),
        }
        s = interleaved_loops(loops, mode.exec_samples, mode.exec_sample_s)
    return {
        "mg": Stats.of(s["minigraph"]).scaled(1e3),
        "np": Stats.of(s["numpy"]).scaled(1e3),
        "ratio": paired(lambda a, b: a / b, s["minigraph"], s["numpy"]),
        "problems": problems,
    }


def _kernel_table(bench: Bench, title: str, cases: list[OpCase], target: str) -> None:
    report, mode = bench.report, bench.mode
    if mode.scaled:
        title += f" [{mode.name}: leading dims / {mode.kernel_divisor}]"
    rows: list[list[str]] = []
    failures: list[str] = []
    rng = np.random.default_rng(0)
    for base in cases:
        case = base.resized(mode.kernel_divisor)
        label = f"{case.name} {case.shapes}"
        try:
            got = _time_case(bench, case, rng)
        except Exception as e:  # report and go on with the next case
            rows.append([label, "error (below)", "", "", "", ""])
            failures.append(f"{label}: error: {type(e).__name__}: {e}")
            report.add(SECTION, label, "error", f"{type(e).__name__}: {e}", "")
            continue
        failures += [f"{label}: {p}" for p in got["problems"]]
        rows.append(
            [
                label,
                cell(got["mg"]),
                cell(got["np"]),
                case.expression,
                ratio_cell(got["ratio"], target),
                target,
            ]
        )
        report.add(SECTION, label, "time minigraph", got["mg"], "ms")
        report.add(SECTION, label, f"time numpy ({case.expression})", got["np"], "ms")
        report.add(
            SECTION, label, "ratio minigraph/numpy", got["ratio"], "x", target=target,
            baseline=case.expression,
        )  # fmt: skip
    report.table(
        title,
        ["case", "minigraph ms", "numpy ms", "numpy expression", "mg/np", "target"],
        rows,
        [
            f"ms per call: median (min-max) of {mode.exec_samples} interleaved samples, each a "
            f"loop of ~{mode.exec_sample_s * 1e3:g} ms; mg/np: median of per-sample ratios; "
            "' !' marks a miss.",
            "minigraph: Session.run of the one-node graph, inputs fed, default SessionConfig.",
            *failures,
        ],
    )
    if failures:
        raise RuntimeError("; ".join(failures))


# -- (c) BiasAdd -> Relu chain -------------------------------------------------------------------


def _chain_graph(rows: int, cols: int) -> tuple[Scope, Any, Any, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(1)
    b1 = rng.standard_normal(cols, dtype=np.float32)
    b2 = rng.standard_normal(cols, dtype=np.float32)
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[rows, cols])
    y = Relu(root, BiasAdd(root, Relu(root, BiasAdd(root, x, Const(root, b1))), Const(root, b2)))
    return root, x, y, (b1, b2)


def _traced(fn: Callable[[], Any]) -> tuple[int, int]:
    """(peak above the start while fn() runs, what stays allocated after it with its result
    dropped), traced bytes."""
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - start
        del result
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    return peak, kept


def _forwarding(bench: Bench) -> None:
    report, mode = bench.report, bench.mode
    # The memory figures need tensors the buffer pool serves (from 1 MiB) and plan objects
    # small beside them: full size but in smoke mode, which only runs the code.
    rows_, cols = max(1, mode.memory_rows // 2), 1024
    title = f"BiasAdd -> Relu -> BiasAdd -> Relu on a fed [{rows_},{cols}] float32 tensor"
    root, x, y, (b1, b2) = _chain_graph(rows_, cols)
    value = np.random.default_rng(2).standard_normal((rows_, cols), dtype=np.float32)
    tensor = value.nbytes
    feed = {x: value}
    configs = {
        "forwarding on": SessionConfig(),
        "forwarding off": SessionConfig(optimizer=OptimizerConfig(input_forwarding=False)),
    }
    expected = np.maximum(np.maximum(value + b1, 0) + b2, 0)
    memory: dict[str, dict[str, float]] = {}
    problems = []
    repeats = max(1, min(5, mode.memory_repeats + 2))
    for label, config in configs.items():
        first_peak, first_kept, steady = [], [], []
        for _ in range(repeats):  # a fresh session each time: its first run
            sess = Session(root, config)
            try:
                peak, kept = _traced(lambda sess=sess: sess.run(y, feed))
                first_peak.append(peak / tensor)
                first_kept.append(kept / tensor)
                steady.append(_traced(lambda sess=sess: sess.run(y, feed))[0] / tensor)
                if not np.allclose(sess.run(y, feed), expected, rtol=1e-6, atol=1e-6):
                    problems.append(f"{label}: the chain's result differs from NumPy's")
            finally:
                sess.close()
        memory[label] = {
            "first run peak": Stats.of(first_peak),
            "kept after the first run": Stats.of(first_kept),
            "later run peak": Stats.of(steady),
        }
    sessions = {label: Session(root, config) for label, config in configs.items()}

    def numpy_expression() -> np.ndarray:
        return np.maximum(np.maximum(value + b1, 0) + b2, 0)

    def numpy_in_place() -> np.ndarray:
        out = np.add(value, b1)
        np.maximum(out, 0, out=out)
        np.add(out, b2, out=out)
        return np.maximum(out, 0, out=out)

    loops = {label: _loop(lambda s=s: s.run(y, feed)) for label, s in sessions.items()}
    loops["numpy"] = _loop(numpy_expression)
    loops["numpy in place"] = _loop(numpy_in_place)
    try:
        s = interleaved_loops(loops, mode.exec_samples, mode.exec_sample_s)
    finally:
        for sess in sessions.values():
            sess.close()
    rows = []
    for label in configs:
        m = memory[label]
        target = FORWARDING_TARGET if label == "forwarding on" else None
        rows.append(
            [
                f"minigraph, {label}",
                ratio_cell(m["first run peak"], target),
                num(m["kept after the first run"].median),
                num(m["later run peak"].median),
                cell(Stats.of(s[label]).scaled(1e3)),
                ratio_cell(paired(lambda a, b: a / b, s[label], s["numpy"])),
                ratio_cell(paired(lambda a, b: a / b, s[label], s["numpy in place"])),
            ]
        )
        for metric, stats in m.items():
            report.add(
                SECTION, "BiasAdd-Relu chain", f"{label}: {metric}", stats, "tensors",
                target=target if metric == "first run peak" else None,
            )  # fmt: skip
        report.add(
            SECTION, "BiasAdd-Relu chain", f"{label}: time", Stats.of(s[label]).scaled(1e3), "ms"
        )
        for base in ("numpy", "numpy in place"):
            report.add(
                SECTION, "BiasAdd-Relu chain", f"{label} / {base}",
                paired(lambda a, b: a / b, s[label], s[base]), "x", baseline=base,
            )  # fmt: skip
    for base in ("numpy", "numpy in place"):
        t = Stats.of(s[base]).scaled(1e3)
        rows.append([base, "-", "-", "-", cell(t), "", ""])
        report.add(SECTION, "BiasAdd-Relu chain", f"time {base}", t, "ms")
    report.table(
        title,
        [
            "run",
            "1st-run peak",
            "kept after",
            "later peak",
            "ms per run",
            "/ numpy",
            "/ in place",
        ],
        rows,
        [
            "peak and kept: tracemalloc, in tensors of "
            f"{tensor / 2**20:g} MiB; 1st-run peak: above the start of a fresh session's first "
            "run (the fetched result included); kept after: what the session holds after it "
            "(the buffer pool); later peak: a second run's. Medians of "
            f"{repeats} fresh sessions. Target: 1st-run peak {FORWARDING_TARGET} tensors with "
            "forwarding on (one output for the four nodes).",
            "numpy: np.maximum(np.maximum(x + b1, 0) + b2, 0); in place: one np.add into a new "
            "array, then maximum / add / maximum with out= into it.",
            *problems,
        ],
    )
    if problems:
        raise RuntimeError("; ".join(problems))


# -- (d) MLP -------------------------------------------------------------------------------------


def mlp_arrays(batch: int = 64, seed: int = 3) -> dict[str, np.ndarray]:
    """The MLP's input and weights: x [batch, 128], w1 [128, 256], b1, w2 [256, 10], b2."""
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)

    return {
        "x": normal(batch, 128),
        "w1": normal(128, 256, scale=128**-0.5),
        "b1": normal(256, scale=0.1),
        "w2": normal(256, 10, scale=256**-0.5),
        "b2": normal(10, scale=0.1),
    }


def _mlp_numpy(a: dict[str, np.ndarray]) -> Callable[[], np.ndarray]:
    x, w1, b1, w2, b2 = a["x"], a["w1"], a["b1"], a["w2"], a["b2"]

    def mlp() -> np.ndarray:
        h = np.maximum(x @ w1 + b1, 0)
        logits = h @ w2 + b2
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return mlp


def _mlp_minigraph(a: dict[str, np.ndarray]) -> tuple[Session, Callable[[], Any]]:
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=list(a["x"].shape))
    h = Relu(root, BiasAdd(root, MatMul(root, x, Const(root, a["w1"])), Const(root, a["b1"])))
    logits = BiasAdd(root, MatMul(root, h, Const(root, a["w2"])), Const(root, a["b2"]))
    probs = Softmax(root, logits)
    sess = Session(root, SessionConfig(intra_op_threads=2))
    feed = {x: a["x"]}
    return sess, lambda: sess.run(probs, feed)


def _mlp(bench: Bench) -> None:
    report, mode = bench.report, bench.mode
    arrays = mlp_arrays()
    title = (
        "MLP: batch 64, 128 -> 256 ReLU -> 10 softmax, float32, weights as Consts; "
        "Session.run, two intra-op threads each"
    )
    fns: dict[str, Any] = {"numpy": _mlp_numpy(arrays)}
    sess, mine = _mlp_minigraph(arrays)
    fns["minigraph"] = mine
    notes: list[str] = []
    wrong: list[str] = []
    peer = None
    tmp = tempfile.TemporaryDirectory(prefix="minigraph-mlp-")
    try:
        if bench.peers:
            ort, why = _peers.load_ort()
            if ort is not None:
                fns["ORT"] = _peers.ort_mlp(ort, arrays, threads=2)
                notes.append(f"ORT: ONNX Runtime {ort[0].__version__}, in this process.")
            else:
                notes.append(f"not measured: ORT: {why}; {_peers.INSTALL_HINT}")
            peer, where = _peer_runner.tf_worker()
            if peer is not None:
                path = os.path.join(tmp.name, "mlp.npz")
                np.savez(path, **arrays)
                fns["TF"] = peer.build("tf1_mlp", path=path, intra=2, inter=1)["run"]
                notes.append(f"TF: {where}.")
            else:
                notes.append(f"not measured: {where}")
        else:
            notes.append("peers skipped (--no-peers)")
        want = fns["numpy"]()
        for who, fn in fns.items():
            got = fn.result() if isinstance(fn, _peer_runner.Remote) else fn()
            if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                wrong.append(f"{who}: its probabilities differ from NumPy's")
        loops = {
            who: fn if isinstance(fn, _peer_runner.Remote) else _loop(fn) for who, fn in fns.items()
        }
        s = interleaved_loops(
            loops, mode.exec_samples, mode.exec_sample_s, settle_s=mode.settle_s,
            group=lambda who: who if who in ("ORT", "TF") else "here",
        )  # fmt: skip
    finally:
        sess.close()
        if peer is not None:
            peer.close()
        tmp.cleanup()
    us = {who: Stats.of(v).scaled(1e6) for who, v in s.items()}
    targets = {"TF": MLP_TF_TARGET, "ORT": MLP_ORT_TARGET, "numpy": None}
    rows = [["minigraph", cell(us["minigraph"]), "", "", ""]]
    report.add(SECTION, "MLP", "minigraph Session.run", us["minigraph"], "us")
    for who in ("TF", "ORT", "numpy"):
        if who not in s:
            continue
        r = paired(lambda a, b: a / b, s["minigraph"], s[who])
        target = targets[who]
        floor = "" if who == "numpy" else ratio_cell(paired(lambda a, b: a / b, s["numpy"], s[who]))
        rows.append([who, cell(us[who]), ratio_cell(r, target), floor, target or ""])
        report.add(SECTION, "MLP", f"{who} run", us[who], "us")
        report.add(
            SECTION, "MLP", f"minigraph/{who}", r, "x", target=target, baseline=who
        )  # fmt: skip
        if who != "numpy":
            report.add(
                SECTION, "MLP", f"numpy/{who}", paired(lambda a, b: a / b, s["numpy"], s[who]),
                "x", baseline=who, note="the floor of an executor calling NumPy per node",
            )  # fmt: skip
    report.table(
        title,
        ["runtime", "us per run", "minigraph / it", "numpy / it", "target"],
        rows,
        [
            f"us: median (min-max) of {mode.exec_samples} interleaved samples, each a loop of "
            f"~{mode.exec_sample_s * 1e3:g} ms (TF's timed inside its process); ratios: "
            "median of per-sample ratios; ' !' marks a miss.",
            "minigraph: SessionConfig(intra_op_threads=2); TF: tf.compat.v1 Session.run, "
            "ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=1), "
            "Grappler on; ORT: InferenceSession, intra_op_num_threads=2, default "
            "optimisations; numpy: the model as one NumPy expression (numpy / it: the floor of "
            "any executor that calls NumPy per node).",
            *notes,
            *wrong,
        ],
    )
    if wrong:
        raise RuntimeError("; ".join(wrong))


def run(bench: Bench) -> None:
    """Times every part of the section and prints four tables. A part that fails prints its
    error and the others still run; the section then fails (exit status 1)."""
    bench.report.heading("Ops: elementwise, reductions, MatMul, BiasAdd+Relu forwarding, an MLP")
    parts: dict[str, Callable[[], None]] = {
        "elementwise": lambda: _kernel_table(
            bench,
            "Elementwise ops and reductions: Session.run of one node on fed arrays vs NumPy",
            ELEMENTWISE_CASES,
            ELEMENTWISE_TARGET,
        ),
        "matmul": lambda: _kernel_table(
            bench, "MatMul, both operands fed, vs NumPy's @", MATMUL_CASES, MATMUL_TARGET
        ),
        "forwarding": lambda: _forwarding(bench),
        "mlp": lambda: _mlp(bench),
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
        raise RuntimeError(f"ops section: part(s) {', '.join(failed)} failed (errors above)")
