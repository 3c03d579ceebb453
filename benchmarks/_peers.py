"""Optional peers: TensorFlow and ONNX Runtime, timed only when they happen to be importable.

Neither is a dependency. `load_tf()` / `load_ort()` return None with a reason when the peer is
missing or broken, and the sections then print one note line. Peers run with their default
thread counts; graph optimisations are disabled where they would merge the benchmark's
identical nodes (ORT's and Grappler's common-subexpression elimination).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "load_tf",
    "load_ort",
    "tf_gather",
    "tf_gather_nd",
    "ort_gather",
    "ort_gather_nd",
    "tf1_graph_runner",
    "ort_graph_runner",
]

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


def _ort_session(
    ort_onnx: Any,
    nodes: list[Any],
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    initializers: list[Any] = (),
) -> Any:
    ort, onnx = ort_onnx
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
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def ort_gather(ort_onnx: Any, params: np.ndarray, idx: np.ndarray, axis: int) -> Callable[[], Any]:
    """An InferenceSession over one Gather node (ONNX Gather has no batch_dims)."""
    node = ort_onnx[1].helper.make_node("Gather", ["p", "i"], ["y"], axis=axis)
    sess = _ort_session(ort_onnx, [node], {"p": params, "i": idx}, ["y"])
    feeds = {"p": params, "i": idx}
    return lambda: sess.run(None, feeds)[0]


def ort_gather_nd(
    ort_onnx: Any, params: np.ndarray, idx: np.ndarray, batch_dims: int
) -> Callable[[], Any]:
    """An InferenceSession over one GatherND node."""
    node = ort_onnx[1].helper.make_node("GatherND", ["p", "i"], ["y"], batch_dims=batch_dims)
    sess = _ort_session(ort_onnx, [node], {"p": params, "i": idx}, ["y"])
    feeds = {"p": params, "i": idx}
    return lambda: sess.run(None, feeds)[0]


# -- executor graphs -----------------------------------------------------------------------------


def tf1_graph_runner(tf: Any, chain: int, wide: int) -> Callable[[str], Callable[[int], Any]]:
    """TF1 graph mode: `runner(kind)` for kind in single/chain/wide returns `loop(n)`."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4, 4])
        idx = tf.constant([3, 2, 1, 0], tf.int64)
        single = tf.gather(x, idx, axis=0)
        y = x
        for _ in range(chain):
            y = tf.gather(y, idx, axis=0)
        many = [tf.gather(x, idx, axis=0) for _ in range(wide)]
    config = v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    sess = v1.Session(graph=graph, config=config)
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    fetches = {"single": single, "chain": y, "wide": many}

    def runner(kind: str) -> Callable[[int], Any]:
        fetch, feed, run = fetches[kind], {x: value}, sess.run

        def loop(n: int) -> None:
            for _ in range(n):
                run(fetch, feed)

        return loop

    return runner


def ort_graph_runner(ort_onnx: Any, chain: int, wide: int) -> Callable[[str], Callable[[int], Any]]:
    """ONNX Runtime: `runner(kind)` for kind in single/chain/wide returns `loop(n)`."""
    helper = ort_onnx[1].helper
    numpy_helper = ort_onnx[1].numpy_helper
    idx = numpy_helper.from_array(np.array([3, 2, 1, 0], np.int64), "idx")
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    inputs = {"x": value}

    def gather(src: str, dst: str) -> Any:
        return helper.make_node("Gather", [src, "idx"], [dst], axis=0)

    sessions = {
        "single": (_ort_session(ort_onnx, [gather("x", "y")], inputs, ["y"], [idx]), ["y"]),
        "chain": (
            _ort_session(
                ort_onnx,
                [gather("x" if k == 0 else f"c{k - 1}", f"c{k}") for k in range(chain)],
                inputs,
                [f"c{chain - 1}"],
                [idx],
            ),
            [f"c{chain - 1}"],
        ),
        "wide": (
            _ort_session(
                ort_onnx,
                [gather("x", f"w{k}") for k in range(wide)],
                inputs,
                [f"w{k}" for k in range(wide)],
                [idx],
            ),
            [f"w{k}" for k in range(wide)],
        ),
    }

    def runner(kind: str) -> Callable[[int], Any]:
        sess, names = sessions[kind]
        run = sess.run

        def loop(n: int) -> None:
            for _ in range(n):
                run(names, inputs)

        return loop

    return runner
