"""A peer's side of a benchmark, in a process of its own: `python _peer_worker.py`.

TensorFlow loaded beside minigraph slows minigraph's own kernels (issue 23), so the benchmarks
time TensorFlow in a separate interpreter, which may be another virtual environment's (the one
that has TensorFlow): this file is a standalone script that needs only the standard library
and numpy, and imports TensorFlow when a job asks for it. `benchmarks._peer_runner` starts it
and talks to it; nothing here imports minigraph or the benchmarks package.

Protocol: one JSON object per line on stdin, one JSON reply per line on stdout
(`{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`); the worker handles one
request at a time, so the parent is blocked (using no CPU) while the worker times, and the
worker is blocked reading while the parent times its own job. Requests (`"op"`):

- `hello`: the interpreter's and numpy's versions, and TensorFlow's when `load` names it.
- `build` {job, args}: builds a job (graph, session, inputs: never timed) and returns
  `{"handles": {kind: handle}}`, one zero-argument callable per kind of run the job offers.
- `calibrate` {handle, target_s}: how many calls of the handle fill about `target_s`.
- `measure` {handle, n, collect}: seconds that n calls take, timed here with
  `time.perf_counter_ns` (a result is dropped after the clock is read, as the parent's
  timing does); `collect` runs `gc.collect()` first, untimed.
- `drop` {handles}: forgets those handles (and what their jobs hold).
- `result` {handle, path}: calls the handle once and saves what it returns to `path` (.npy),
  for the parent's correctness checks.
- `footprint` {job, args, runs}: resident-set high-water mark, MiB, above the resident set
  before `runs` runs of the job's callable, in this (fresh) process: ask it first.
- `quit`.

Jobs (`JOBS`): `noop` (no peer: the protocol's own cost, and the tests'), and TensorFlow's:
`tf1_executor`, `tf1_first_run`, `tf_gather`, `tf_gather_nd`, `tf1_chain_builder`, `tf1_mlp`,
`tf1_gather_chain`, `tf1_embedding_train`, `tf1_mlp_grad` (each documented where it is
defined). Arrays the parent does not send
(large gather inputs) are made here from a spec: `{"shape": [...], "dtype": "float32"}` gives
uniform floats in [0, 1), with `"high"` (an int or one per last-dim entry) integers in
[0, high); the same recipe as the parent's, not the same values.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["main", "JOBS", "rss_kib", "footprint_mib", "fix_mmap_threshold"]

_now = time.perf_counter_ns

# -- resident memory (also used by the parent's memory figures) ----------------------------------


def rss_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS, VmHWM); OSError where there is none."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")


def footprint_mib(setup: Callable[[], Callable[[], Any]], runs: int = 5) -> float:
    """Resident-set high-water mark, MiB, above the resident set before the first of `runs`
    runs (results dropped) of what `setup()` built: the memory a runtime takes to run the job
    and keeps for it (its arenas and pools included)."""
    run = setup()
    gc.collect()
    start = rss_kib("VmRSS")
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")  # resets VmHWM to the current RSS
    for _ in range(runs):
        result = run()
        del result
    peak = rss_kib("VmHWM")
    del run
    return (peak - start) / 1024


def fix_mmap_threshold() -> None:
    """glibc: large blocks always mmapped and unmapped on free, so RSS shows live memory."""
    try:
        import ctypes  # noqa: PLC0415 - only the memory figures need it

        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


# -- inputs --------------------------------------------------------------------------------------


def make_array(spec: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """An array from a spec (see the module docstring)."""
    shape = tuple(spec["shape"])
    if "high" in spec:
        high = np.asarray(spec["high"], dtype=np.int64)
        return rng.integers(0, high, size=shape, dtype=np.dtype(spec.get("dtype", "int64")))
    return rng.random(shape, dtype=np.dtype(spec.get("dtype", "float32")))


# -- TensorFlow jobs -----------------------------------------------------------------------------

_TINY = np.arange(16, dtype=np.float32).reshape(4, 4)
_IDX = np.array([3, 2, 1, 0], np.int64)


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # noqa: PLC0415 - the peer, loaded only when a job needs it

    return tf


def _tf1_config(tf: Any, intra: int = 0, inter: int = 0, optimize: bool = False) -> Any:
    """A ConfigProto: thread counts (0: TF's default, one per core) and, unless `optimize`,
    Grappler off (its common-subexpression elimination would merge the executor graphs'
    identical nodes)."""
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter
    )
    if not optimize:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config


def _tf1_executor(chain: int, wide: int) -> dict[str, Callable[[], Any]]:
    """TF1 graph mode on [4,4] float32 gathers with constant indices, one fed placeholder:
    `single` (one gather), `chain` (`chain` gathers in a row), `wide` (`wide` gathers of the
    feed fetched together) and `identity` (feed -> Identity -> fetch); Grappler off."""
    tf = _tf()
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
    feed = {x: _TINY}
    fetches = {"single": single, "chain": y, "wide": many, "identity": same}
    return {kind: (lambda f=f: sess.run(f, feed)) for kind, f in fetches.items()}


def _tf1_chain_graph(tf: Any, n: int, shape: list[int], indices: np.ndarray) -> tuple:
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, shape)
        idx = tf.constant(indices)
        y = x
        for _ in range(n):
            y = tf.gather(y, idx, axis=0)
    return graph, x, y


def _tf1_first_run(n: int) -> dict[str, Callable[[], Any]]:
    """`run`: creates a TF1 Session on a chain of n [4,4] gathers (built beforehand), runs it
    once and closes it."""
    tf = _tf()
    graph, x, y = _tf1_chain_graph(tf, n, [4, 4], _IDX)

    def first_run() -> Any:
        with tf.compat.v1.Session(graph=graph, config=_tf1_config(tf)) as sess:
            return sess.run(y, {x: _TINY})

    return {"run": first_run}


def _tf_gather(params: dict, indices: dict, axis: int = 0, batch_dims: int = 0, seed: int = 0):
    """`run`: eager tf.gather on tf.constant inputs (made once) of the given specs."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    p, i = tf.constant(make_array(params, rng)), tf.constant(make_array(indices, rng))
    return {"run": lambda: tf.gather(p, i, axis=axis, batch_dims=batch_dims)}


def _tf_gather_nd(params: dict, indices: dict, batch_dims: int = 0, seed: int = 0):
    """`run`: eager tf.gather_nd on tf.constant inputs (made once) of the given specs."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    p, i = tf.constant(make_array(params, rng)), tf.constant(make_array(indices, rng))
    return {"run": lambda: tf.gather_nd(p, i, batch_dims=batch_dims)}


def _tf1_chain_builder(n: int) -> dict[str, Callable[[], Any]]:
    """`run`: builds a TF1 graph-mode chain of n tf.gather nodes with a literal axis."""
    tf = _tf()

    def build() -> Any:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, 4])
            idx = tf.constant(_IDX)
            y = x
            for _ in range(n):
                y = tf.gather(y, idx, axis=0)
        return graph

    return {"run": build}


def _tf1_mlp(path: str, intra: int = 2, inter: int = 1) -> dict[str, Callable[[], Any]]:
    """`run`: TF1 `Session.run` of the MLP whose arrays `path` (.npz: x, w1, b1, w2, b2)
    holds: softmax(relu(x @ w1 + b1) @ w2 + b2), weights as constants, x fed; `intra` and
    `inter` op threads, Grappler on (TF's defaults: it may fuse MatMul + BiasAdd + Relu)."""
    tf = _tf()
    v1 = tf.compat.v1
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, arrays["x"].shape)
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, tf.constant(arrays["w1"])), arrays["b1"]))
        logits = tf.nn.bias_add(tf.matmul(h, tf.constant(arrays["w2"])), arrays["b2"])
        probs = tf.nn.softmax(logits)
    sess = v1.Session(graph=graph, config=_tf1_config(tf, intra, inter, optimize=True))
    feed = {x: arrays["x"]}
    return {"run": lambda: sess.run(probs, feed)}


def _tf1_embedding_train(path: str, intra: int = 2, inter: int = 1) -> dict[str, Callable]:
    """The embedding classifier of `benchmarks.training` in TF1 graph mode, arrays from `path`
    (.npz: table, w, b, ids, labels): a variable table gathered by the fed int32 ids, the
    mean over axis 1, logits = h @ w + b (w, b variables), mean sparse softmax cross-entropy,
    `tf.compat.v1.train.AdagradOptimizer(0.1).minimize` (its sparse path: Unique,
    UnsortedSegmentSum, ResourceSparseApplyAdagrad). The build runs the initializer. `step`:
    `session.run(train_op)`; `step_loss`: one step, returning the loss before it; `intra`
    and `inter` op threads, Grappler on (TF's defaults)."""
    tf = _tf()
    v1 = tf.compat.v1
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    graph = tf.Graph()
    with graph.as_default():
        table = tf.Variable(arrays["table"], name="table")
        w = tf.Variable(arrays["w"], name="w")
        b = tf.Variable(arrays["b"], name="b")
        ids = v1.placeholder(tf.int32, arrays["ids"].shape)
        labels = v1.placeholder(tf.int32, arrays["labels"].shape)
        h = tf.reduce_mean(tf.gather(table, ids), axis=1)
        logits = tf.nn.bias_add(tf.matmul(h, w), b)
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        loss = tf.reduce_mean(xent)
        train = v1.train.AdagradOptimizer(0.1).minimize(loss)
        init = v1.global_variables_initializer()
    sess = v1.Session(graph=graph, config=_tf1_config(tf, intra, inter, optimize=True))
    sess.run(init)
    feed = {ids: arrays["ids"], labels: arrays["labels"]}
    return {
        "step": lambda: sess.run(train, feed),
        "step_loss": lambda: sess.run([loss, train], feed)[0],
    }


def _tf1_mlp_grad(path: str, intra: int = 2, inter: int = 1) -> dict[str, Callable]:
    """`run`: TF1 `Session.run` of `tf.gradients(loss, [w1, w2])` for the MLP of `path`
    (.npz: x, w1, b1, w2, b2, labels): logits = relu(x @ w1 + b1) @ w2 + b2, loss the mean
    sparse softmax cross-entropy; weights as constants, x and labels fed; `flat`: the same,
    both gradients raveled into one vector (for the parent's check). Grappler on."""
    tf = _tf()
    v1 = tf.compat.v1
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, arrays["x"].shape)
        labels = v1.placeholder(tf.int32, arrays["labels"].shape)
        w1, w2 = tf.constant(arrays["w1"]), tf.constant(arrays["w2"])
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), arrays["b1"]))
        logits = tf.nn.bias_add(tf.matmul(h, w2), arrays["b2"])
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        grads = tf.gradients(tf.reduce_mean(xent), [w1, w2])
    sess = v1.Session(graph=graph, config=_tf1_config(tf, intra, inter, optimize=True))
    feed = {x: arrays["x"], labels: arrays["labels"]}
    return {
        "run": lambda: sess.run(grads, feed),
        "flat": lambda: np.concatenate([g.ravel() for g in sess.run(grads, feed)]),
    }


def _tf1_gather_chain(rows: int, nodes: int) -> dict[str, Callable[[], Any]]:
    """`run`: a TF1 Session (made by the build: time its first runs) of a chain of `nodes`
    gathers over a fed [rows, 1024] float32 tensor, each taking all rows reversed."""
    tf = _tf()
    value = np.random.default_rng(0).random((rows, 1024), dtype=np.float32)
    order = np.arange(rows - 1, -1, -1, dtype=np.int64)
    graph, x, y = _tf1_chain_graph(tf, nodes, [rows, 1024], order)
    sess = tf.compat.v1.Session(graph=graph, config=_tf1_config(tf))
    return {"run": lambda: sess.run(y, {x: value})}


def _noop() -> dict[str, Callable[[], Any]]:
    """`run`: does nothing (what a sample costs here besides the job)."""
    return {"run": lambda: None}


JOBS: dict[str, Callable[..., dict[str, Callable[[], Any]]]] = {
    "noop": _noop,
    "tf1_executor": _tf1_executor,
    "tf1_first_run": _tf1_first_run,
    "tf_gather": _tf_gather,
    "tf_gather_nd": _tf_gather_nd,
    "tf1_chain_builder": _tf1_chain_builder,
    "tf1_mlp": _tf1_mlp,
    "tf1_gather_chain": _tf1_gather_chain,
    "tf1_embedding_train": _tf1_embedding_train,
    "tf1_mlp_grad": _tf1_mlp_grad,
}

# -- the request loop ----------------------------------------------------------------------------


def _calibrate(fn: Callable[[], Any], target_s: float, cap: int = 1_000_000) -> int:
    """How many calls of fn fill `target_s` (as benchmarks._timing.loop_count)."""
    n = 1
    while True:
        start = _now()
        for _ in range(n):
            fn()
        elapsed = (_now() - start) * 1e-9
        if elapsed >= target_s / 4 or n >= cap:
            break
        n *= 4 if elapsed < target_s / 64 else 2
    return max(1, min(cap, round(n * target_s / max(elapsed, 1e-9))))


def _measure(fn: Callable[[], Any], n: int) -> float:
    if n == 1:
        start = _now()
        result = fn()
        stop = _now()
        del result
        return (stop - start) * 1e-9
    start = _now()
    for _ in range(n):
        fn()
    return (_now() - start) * 1e-9


def _job(name: str) -> Callable[..., dict[str, Callable[[], Any]]]:
    if name not in JOBS:
        raise ValueError(f"unknown job {name!r}; jobs: {', '.join(JOBS)}")
    return JOBS[name]


class _Worker:
    def __init__(self) -> None:
        self.handles: dict[int, Callable[[], Any]] = {}

    def handle(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "hello":
            info = {"python": sys.version.split()[0], "numpy": np.__version__}
            info["executable"] = sys.executable
            if request.get("load") == "tensorflow":
                info["tensorflow"] = _tf().__version__
            return info
        if op == "build":
            made = _job(request["job"])(**request.get("args", {}))
            handles = {}
            for kind, fn in made.items():
                handles[kind] = len(self.handles)
                self.handles[len(self.handles)] = fn
            return {"handles": handles}
        if op == "calibrate":
            return _calibrate(self.handles[request["handle"]], float(request["target_s"]))
        if op == "measure":
            fn = self.handles[request["handle"]]
            if request.get("collect"):
                gc.collect()
            return _measure(fn, int(request.get("n", 1)))
        if op == "drop":  # frees what the handles hold (a large gather's inputs)
            for h in request["handles"]:
                self.handles.pop(h, None)
            gc.collect()
            return len(self.handles)
        if op == "result":
            value = np.asarray(self.handles[request["handle"]]())
            if value.dtype.hasobject:
                raise TypeError(f"the job returned no array (got {value.dtype} values)")
            np.save(request["path"], value)
            return request["path"]
        if op == "footprint":
            fix_mmap_threshold()
            made = _job(request["job"])
            args = request.get("args", {})
            return footprint_mib(lambda: made(**args)["run"], int(request.get("runs", 5)))
        raise ValueError(f"unknown request {op!r}")


def main() -> int:
    """Serves requests from stdin until `quit` or end of input."""
    out = sys.stdout
    sys.stdout = sys.stderr  # a peer's prints must not corrupt the replies
    worker = _Worker()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if request.get("op") == "quit":
                break
            reply = {"ok": True, "result": worker.handle(request)}
        except Exception as e:  # reported to the parent, which raises it there
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
