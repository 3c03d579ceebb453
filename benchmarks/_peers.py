"""Optional peers: ONNX Runtime (with onnx) and TensorFlow, timed only when importable.

Neither is a dependency: `pip install -e '.[bench]'` adds ONNX Runtime and onnx; TensorFlow is
used when it happens to be installed. `load_tf()` / `load_ort()` return None with a reason when
a peer is missing or broken. Peers run with their default thread counts; graph optimisations
are disabled where they would merge the benchmark's identical nodes (ORT's and Grappler's
common-subexpression elimination).

Everything here builds a peer's version of a benchmark job outside the timing and returns a
callable to time: kernels (`ort_gather`, `tf_gather`, ...), executor graphs (`ort_graph_runner`,
`tf1_graph_runner`), first runs of a chain (`ort_first_run`, `tf1_first_run`, ...) and graph
construction (`onnx_chain_builder`, `tf1_chain_builder`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._timing import run_loop

__all__ = [
    "INSTALL_HINT",
    "load_tf",
    "load_ort",
    "tf_gather",
    "tf_gather_nd",
    "ort_gather",
    "ort_gather_nd",
    "tf1_graph_runner",
    "ort_graph_runner",
    "ort_chain_model",
    "ort_first_run",
    "onnx_reference_first_run",
    "tf1_chain_graph",
    "tf1_first_run",
    "onnx_chain_builder",
    "tf1_chain_builder",
]

INSTALL_HINT = (
    "pip install -e '.[bench]' adds ONNX Runtime and onnx; TensorFlow joins when importable "
    "(install tensorflow==2.21 into the same environment, e.g. a separate venv)"
)

_cache: dict[str, tuple[Any, str | None]] = {}


def load_tf() -> tuple[Any, str | None]:
    """(tensorflow, None), or (None, why not)."""
    if "tf" not in _cache:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        try:
            import tensorflow as tf  # noqa: PLC0415 - optional peer

            _cache["tf"] = (tf, None)
        except Exception as e:  # ImportError, or a broken install raising anything
            _cache["tf"] = (None, f"tensorflow not importable ({type(e).__name__}: {e})")
    return _cache["tf"]


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


def tf_gather(
    tf: Any, params: np.ndarray, idx: np.ndarray, axis: int, batch_dims: int
) -> Callable[[], Any]:
    """Eager tf.gather on tf.constant inputs (made once, outside the timing)."""
    p, i = tf.constant(params), tf.constant(idx)
    return lambda: tf.gather(p, i, axis=axis, batch_dims=batch_dims)


def tf_gather_nd(
    tf: Any, params: np.ndarray, idx: np.ndarray, batch_dims: int
) -> Callable[[], Any]:
    """Eager tf.gather_nd on tf.constant inputs."""
    p, i = tf.constant(params), tf.constant(idx)
    return lambda: tf.gather_nd(p, i, batch_dims=batch_dims)


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


def _ort_session(
    ort_onnx: Any,
    nodes: list[Any],
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    initializers: list[Any] = (),
) -> Any:
    ort = ort_onnx[0]
    model = _ort_model(ort_onnx, nodes, inputs, outputs, initializers)
    return ort.InferenceSession(model, _ort_options(ort), providers=["CPUExecutionProvider"])


def ort_gather(ort_onnx: Any, params: np.ndarray, idx: np.ndarray, axis: int) -> Callable[[], Any]:
    """An InferenceSession over one Gather node, both inputs fed (ONNX Gather has no
    batch_dims)."""
    node = ort_onnx[1].helper.make_node("Gather", ["p", "i"], ["y"], axis=axis)
    sess = _ort_session(ort_onnx, [node], {"p": params, "i": idx}, ["y"])
    feeds = {"p": params, "i": idx}
    return lambda: sess.run(None, feeds)[0]


def ort_gather_nd(
    ort_onnx: Any, params: np.ndarray, idx: np.ndarray, batch_dims: int
) -> Callable[[], Any]:
    """An InferenceSession over one GatherND node, both inputs fed."""
    node = ort_onnx[1].helper.make_node("GatherND", ["p", "i"], ["y"], batch_dims=batch_dims)
    sess = _ort_session(ort_onnx, [node], {"p": params, "i": idx}, ["y"])
    feeds = {"p": params, "i": idx}
    return lambda: sess.run(None, feeds)[0]


# -- executor graphs -----------------------------------------------------------------------------

_TINY = np.arange(16, dtype=np.float32).reshape(4, 4)
_IDX = np.array([3, 2, 1, 0], np.int64)


def tf1_graph_runner(tf: Any, chain: int, wide: int) -> Callable[[str], Callable[[int], Any]]:
    """TF1 graph mode: `runner(kind)` for kind in single/chain/wide/identity returns
    `loop(n)`, which runs that graph n times."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4, 4])
        idx = tf.constant(_IDX)
        single = tf.gather(x, idx, axis=0)
        y = x
        for _ in range(chain):
            y = tf.gather(y, idx, axis=0)
        many = [tf.gather(x, idx, axis=0) for _ in range(wide)]
        same = tf.identity(x)
    sess = v1.Session(graph=graph, config=_tf1_config(tf))
    fetches = {"single": single, "chain": y, "wide": many, "identity": same}

    def runner(kind: str) -> Callable[[int], Any]:
        return run_loop(sess.run, fetches[kind], {x: _TINY})

    return runner


def _tf1_config(tf: Any) -> Any:
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config


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
        kind: (_ort_session(ort_onnx, nodes, inputs, names, [idx]), names)
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


def tf1_chain_graph(tf: Any, n: int) -> tuple[Any, Any, Any]:
    """(graph, x, y): a TF1 graph of a chain of n [4,4] gathers (built outside the timing)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4, 4])
        idx = tf.constant(_IDX)
        y = x
        for _ in range(n):
            y = tf.gather(y, idx, axis=0)
    return graph, x, y


def tf1_first_run(tf: Any, built: tuple[Any, Any, Any]) -> Any:
    """Creates a TF1 Session on the graph and runs it once: what is timed."""
    graph, x, y = built
    with tf.compat.v1.Session(graph=graph, config=_tf1_config(tf)) as sess:
        return sess.run(y, {x: _TINY})


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


def tf1_chain_builder(tf: Any, n: int) -> Callable[[], Any]:
    """Builds a TF1 graph-mode chain of n tf.gather nodes with a literal axis."""

    def build() -> Any:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, 4])
            idx = tf.constant(_IDX)
            y = x
            for _ in range(n):
                y = tf.gather(y, idx, axis=0)
        return graph

    return build
