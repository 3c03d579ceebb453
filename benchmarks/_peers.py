"""Optional in-process peer: ONNX Runtime (with onnx), timed only when importable.

`pip install -e '.[bench]'` adds ONNX Runtime and onnx. `load_ort()` returns None with a reason
when it is missing or broken. TensorFlow is not here: it runs in a process of its own
(benchmarks._peer_runner and its worker, benchmarks/_peer_worker.py), because loaded beside
minigraph it slows minigraph's own kernels. ONNX Runtime stays in this process: loaded and run
here, it does not move minigraph's figures (measured: see the README's Benchmarks section).

Peers run with their default thread counts unless a job says otherwise; graph optimisations
are disabled where they would merge the benchmark's identical nodes (ORT's common-subexpression
elimination).

Everything here builds ORT's version of a benchmark job outside the timing and returns a
callable to time: kernels (`ort_gather`, `ort_gather_nd`), executor graphs
(`ort_graph_runner`), first runs of a chain (`ort_first_run`, `onnx_reference_first_run`),
graph construction (`onnx_chain_builder`) and the ops section's MLP (`ort_mlp`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._timing import run_loop

__all__ = [
    "INSTALL_HINT",
    "load_ort",
    "ort_gather",
    "ort_gather_nd",
    "ort_graph_runner",
    "ort_chain_model",
    "ort_first_run",
    "onnx_reference_first_run",
    "onnx_chain_builder",
    "ort_session",
    "ort_mlp",
]

INSTALL_HINT = "pip install -e '.[bench]' adds ONNX Runtime and onnx"

_cache: dict[str, tuple[Any, str | None]] = {}


def load_ort() -> tuple[Any, str | None]:
    """((onnxruntime, onnx), None), or (None, why not)."""
    if "ort" not in _cache:
        try:
            import onnx  # noqa: PLC0415 - optional peer
            import onnxruntime  # noqa: PLC0415

            _cache["ort"] = ((onnxruntime, onnx), None)
        except Exception as e:
            _cache["ort"] = (None, f"onnxruntime/onnx not importable ({type(e).__name__}: {e})")
    return _cache["ort"]


# -- kernels -------------------------------------------------------------------------------------


def _ort_model(
    ort_onnx: Any,
    nodes: list[Any],
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    initializers: list[Any] = (),
) -> bytes:
    onnx = ort_onnx[1]
    helper, tp = onnx.helper, onnx.TensorProto
    kinds = {np.dtype(np.float32): tp.FLOAT, np.dtype(np.int64): tp.INT64}
    graph = helper.make_graph(
        nodes,
        "benchmark",
        [
            helper.make_tensor_value_info(n, kinds[a.dtype], list(a.shape))
            for n, a in inputs.items()
        ],
        [helper.make_tensor_value_info(n, tp.FLOAT, None) for n in outputs],
        initializer=list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what every ORT release since 1.10 reads
    return model.SerializeToString()


def _ort_options(ort: Any) -> Any:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


def ort_session(
    ort_onnx: Any,
    nodes: list[Any],
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    initializers: list[Any] = (),
    options: Any = None,
) -> Any:
    """An InferenceSession (CPU) over a graph of `nodes`; `options` default to graph
    optimisations off."""
    ort = ort_onnx[0]
    model = _ort_model(ort_onnx, nodes, inputs, outputs, initializers)
    options = _ort_options(ort) if options is None else options
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def ort_gather(ort_onnx: Any, params: np.ndarray, idx: np.ndarray, axis: int) -> Callable[[], Any]:
    """An InferenceSession over one Gather node, both inputs fed (ONNX Gather has no
    batch_dims)."""
    node = ort_onnx[1].helper.make_node("Gather", ["p", "i"], ["y"], axis=axis)
    sess = ort_session(ort_onnx, [node], {"p": params, "i": idx}, ["y"])
    feeds = {"p": params, "i": idx}
    return lambda: sess.run(None, feeds)[0]


def ort_gather_nd(
    ort_onnx: Any, params: np.ndarray, idx: np.ndarray, batch_dims: int
) -> Callable[[], Any]:
    """An InferenceSession over one GatherND node, both inputs fed."""
    node = ort_onnx[1].helper.make_node("GatherND", ["p", "i"], ["y"], batch_dims=batch_dims)
    sess = ort_session(ort_onnx, [node], {"p": params, "i": idx}, ["y"])
    feeds = {"p": params, "i": idx}
    return lambda: sess.run(None, feeds)[0]


# -- executor graphs -----------------------------------------------------------------------------

_TINY = np.arange(16, dtype=np.float32).reshape(4, 4)
_IDX = np.array([3, 2, 1, 0], np.int64)


def ort_graph_runner(ort_onnx: Any, chain: int, wide: int) -> Callable[[str], Callable[[int], Any]]:
    """ONNX Runtime: `runner(kind)` for kind in single/chain/wide/identity returns `loop(n)`."""
    helper = ort_onnx[1].helper
    idx = ort_onnx[1].numpy_helper.from_array(_IDX, "idx")
    inputs = {"x": _TINY}

    def gather(src: str, dst: str) -> Any:
        return helper.make_node("Gather", [src, "idx"], [dst], axis=0)

    graphs = {
        "single": ([gather("x", "y")], ["y"]),
        "chain": (
            [gather("x" if k == 0 else f"c{k - 1}", f"c{k}") for k in range(chain)],
            [f"c{chain - 1}"],
        ),
        "wide": ([gather("x", f"w{k}") for k in range(wide)], [f"w{k}" for k in range(wide)]),
        "identity": ([helper.make_node("Identity", ["x"], ["y"])], ["y"]),
    }
    sessions = {
        kind: (ort_session(ort_onnx, nodes, inputs, names, [idx]), names)
        for kind, (nodes, names) in graphs.items()
    }

    def runner(kind: str) -> Callable[[int], Any]:
        sess, names = sessions[kind]
        return run_loop(sess.run, names, inputs)

    return runner


# -- first run of a chain ------------------------------------------------------------------------


def ort_chain_model(ort_onnx: Any, n: int) -> bytes:
    """The serialized ONNX model of a chain of n [4,4] Gathers (built outside the timing)."""
    helper = ort_onnx[1].helper
    idx = ort_onnx[1].numpy_helper.from_array(_IDX, "idx")
    nodes = [
        helper.make_node("Gather", ["x" if k == 0 else f"c{k - 1}", "idx"], [f"c{k}"], axis=0)
        for k in range(n)
    ]
    return _ort_model(ort_onnx, nodes, {"x": _TINY}, [f"c{n - 1}"], [idx])


def ort_first_run(ort_onnx: Any, model: bytes) -> Any:
    """Creates an InferenceSession from `model` and runs it once: what is timed."""
    ort = ort_onnx[0]
    sess = ort.InferenceSession(model, _ort_options(ort), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": _TINY})[0]


def onnx_reference_first_run(ort_onnx: Any, model: bytes) -> Any:
    """onnx's pure-Python ReferenceEvaluator on `model`: creation plus one run."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415 - optional peer

    return ReferenceEvaluator(model).run(None, {"x": _TINY})[0]


# -- construction --------------------------------------------------------------------------------


def onnx_chain_builder(ort_onnx: Any, n: int) -> Callable[[], Any]:
    """Builds an ONNX chain of n Gathers (one helper.make_node per node, each with its axis
    as an attribute) and infers its shapes: ONNX's graph construction with shape inference."""
    onnx = ort_onnx[1]
    helper, tp = onnx.helper, onnx.TensorProto

    def build() -> Any:
        idx = onnx.numpy_helper.from_array(_IDX, "idx")
        nodes = [
            helper.make_node("Gather", ["x" if k == 0 else f"c{k - 1}", "idx"], [f"c{k}"], axis=0)
            for k in range(n)
        ]
        graph = helper.make_graph(
            nodes,
            "chain",
            [helper.make_tensor_value_info("x", tp.FLOAT, [None, 4])],
            [helper.make_tensor_value_info(f"c{n - 1}", tp.FLOAT, None)],
            initializer=[idx],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        return onnx.shape_inference.infer_shapes(model)

    return build


# -- the ops section's MLP -----------------------------------------------------------------------


def ort_mlp(ort_onnx: Any, arrays: dict[str, np.ndarray], threads: int) -> Callable[[], Any]:
    """softmax(relu(x @ w1 + b1) @ w2 + b2) built with onnx.helper (MatMul, Add, Relu, MatMul,
    Add, Softmax over the last axis; weights as initializers, x fed), run by an
    InferenceSession with `threads` intra-op threads, one inter-op thread and ORT's default
    graph optimisations (it may fuse MatMul + Add)."""
    ort, onnx = ort_onnx
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    weights = [numpy_helper.from_array(arrays[k], k) for k in ("w1", "b1", "w2", "b2")]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["xw1"]),
        helper.make_node("Add", ["xw1", "b1"], ["z1"]),
        helper.make_node("Relu", ["z1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["hw2"]),
        helper.make_node("Add", ["hw2", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    x = arrays["x"]
    sess = ort_session(ort_onnx, nodes, {"x": x}, ["probs"], weights, options)
    feeds = {"x": x}
    return lambda: sess.run(None, feeds)[0]
