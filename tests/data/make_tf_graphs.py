"""Writes the TensorFlow-made graph files that tests/test_graph_def_tf_files.py imports, with
TensorFlow's own results, so that the normal test suite checks TF compatibility without TF.

Run it only where TensorFlow 2.21 is installed (never a minigraph dependency), from anywhere:

    python tests/data/make_tf_graphs.py

Without arguments it writes every graph; `python tests/data/make_tf_graphs.py NAME ...` writes
only those. For each graph NAME it writes NAME.pb (binary GraphDef, TF's `as_graph_def()`; for
the frozen models mlp_classifier, embedding_classifier and attention_block, the graph with its
variables converted to Consts), and for graphs
that run, NAME.npz: `feed_names`/`fetch_names`/`fetch_dtypes` (byte strings) and
`feed_<i>`/`fetch_<i>` arrays (string tensors as fixed-width bytes, so that no pickle is ever
needed to read them; bfloat16 as float32, which holds every bfloat16 value exactly).
gather_basic is also written as text (gather_basic.pbtxt).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))


def _save(name: str, graph: tf.Graph, feeds: dict, fetches: list, add_shapes: bool = False):
    graph_def = graph.as_graph_def(add_shapes=add_shapes)
    with open(os.path.join(HERE, f"{name}.pb"), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    if not fetches:
        return graph_def
    with tf1.Session(graph=graph) as session:
        values = session.run(fetches, {graph.get_tensor_by_name(k): v for k, v in feeds.items()})
    dtypes = [graph.get_tensor_by_name(f).dtype.name for f in fetches]
    arrays = {
        "feed_names": np.array([k.encode() for k in feeds], dtype="S"),
        "fetch_names": np.array([f.encode() for f in fetches], dtype="S"),
        "fetch_dtypes": np.array([d.encode() for d in dtypes], dtype="S"),
    }
    for i, value in enumerate(feeds.values()):
        arrays[f"feed_{i}"] = _storable(np.asarray(value))
    for i, value in enumerate(values):
        arrays[f"fetch_{i}"] = _storable(np.asarray(value))
    np.savez(os.path.join(HERE, f"{name}.npz"), **arrays)
    return graph_def


def _storable(array: np.ndarray) -> np.ndarray:
    if array.dtype == object:  # TF's string tensors: bytes objects
        return array.astype("S")
    if array.dtype == tf.bfloat16.as_numpy_dtype:  # .npy has no bfloat16; float32 holds it exactly
        return array.astype(np.float32)
    return array


def gather_basic() -> None:
    """tf.gather with axis and batch_dims, raw GatherV2/GatherNd, placeholders, a name scope,
    devices, colocation, control dependencies, Identity and NoOp."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        k = tf1.placeholder(tf.int64, [None], name="k")
        anything = tf1.placeholder(tf.int32, None, name="anything")  # unknown rank
        rows = tf.gather(x, [2, 0], axis=0, name="rows")
        cols = tf.gather(x, k, axis=1, name="cols")
        with tf.name_scope("batched"):
            params = tf.constant(np.arange(24, dtype=np.int64).reshape(2, 3, 4), name="params")
            picks = tf.constant([[2, 0], [1, 1]], dtype=tf.int32, name="picks")
            per_batch = tf.gather(params, picks, axis=1, batch_dims=1, name="per_batch")
            last_axis = tf.gather(params, picks, axis=-1, batch_dims=1, name="last_axis")
        with tf.device("/device:CPU:0"):
            raw = tf.raw_ops.GatherV2(
                params=x,
                indices=tf.constant([[1], [0]], tf.int16),
                axis=tf.constant(0, tf.int64),
                name="raw_v2",
            )
            nd = tf.raw_ops.GatherNd(
                params=params, indices=tf.constant([[1, 2], [0, 0]], tf.int64), name="nd"
            )
        with tf1.colocate_with(nd):
            nd_copy = tf.identity(nd, name="nd_copy")
        ignore = tf.raw_ops.GatherNd(
            params=params,
            indices=[[1, 2, 3], [5, 0, 0]],
            bad_indices_policy="IGNORE",
            name="ignore",
        )
        words = tf.gather_nd(tf.constant([["a", "b"], ["c", "d"]]), [[1, 0], [0, 1]], name="words")
        scalar_axis = tf.gather(anything, 1, name="scalar_index")
        with tf.control_dependencies([rows, nd_copy]):
            after = tf.identity(cols, name="after")
            done = tf.no_op(name="done")
        del done
        feeds = {
            "x:0": np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.float32),
            "k:0": np.array([2, 2, 0], np.int64),
            "anything:0": np.array([[1, 2], [3, 4]], np.int32),
        }
        fetches = [t.name for t in (rows, cols, per_batch, last_axis, raw, nd, nd_copy, ignore,
                                    words, scalar_axis, after)]  # fmt: skip
    graph_def = _save("gather_basic", graph, feeds, fetches, add_shapes=True)
    with open(os.path.join(HERE, "gather_basic.pbtxt"), "w") as f:
        f.write(str(graph_def))


def consts() -> None:
    """Consts of every dtype minigraph supports: scalars and small ones in the typed fields,
    larger ones in tensor_content, one-value fills ("splat")."""
    graph = tf.Graph()
    fetches = []
    rng = np.random.default_rng(9)
    with graph.as_default():
        for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.int16,
                      tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool,
                      tf.complex64, tf.complex128):  # fmt: skip
            name = dtype.name
            np_dtype = dtype.as_numpy_dtype
            if dtype.is_bool:
                big = rng.integers(0, 2, size=(3, 5)).astype(bool)
                one = True
            elif dtype.is_complex:
                big = (rng.normal(size=(3, 5)) + 1j * rng.normal(size=(3, 5))).astype(np_dtype)
                one = 1.5 - 2j
            elif dtype.is_floating:
                big = rng.normal(size=(3, 5)).astype(np_dtype)
                one = -2.5
            else:
                info = np.iinfo(np_dtype)
                big = rng.integers(info.min, info.max, size=(3, 5), dtype=np_dtype)
                big[0, 0], big[0, 1] = info.min, info.max
                one = info.max
            fetches.append(tf.constant(one, dtype=dtype, name=f"{name}_scalar").name)
            fetches.append(tf.constant(big, dtype=dtype, name=f"{name}_big").name)
            fetches.append(tf.constant(one, dtype=dtype, shape=[2, 3], name=f"{name}_fill").name)
            fetches.append(tf.zeros([2, 2], dtype=dtype, name=f"{name}_zeros").name)
        fetches.append(tf.constant("héllo", name="string_scalar").name)
        fetches.append(tf.constant([[b"a", b""], [b"\x00\xff", b"long" * 10]], name="string_big")
                       .name)  # fmt: skip
        fetches.append(tf.constant(np.zeros((0, 3), np.float32), name="empty").name)
    _save("consts", graph, {}, fetches)


def variadic() -> None:
    """Ops with lists of inputs and outputs (N * T): DynamicPartition, DynamicStitch, ConcatV2,
    as tf.dynamic_partition / tf.dynamic_stitch / tf.concat write them."""
    graph = tf.Graph()
    with graph.as_default():
        data = tf1.placeholder(tf.float32, [None, 2], name="data")
        parts = tf1.placeholder(tf.int32, [None], name="parts")
        pieces = tf.dynamic_partition(data, parts, 3, name="split")
        positions = tf.dynamic_partition(tf.range(tf.size(parts)), parts, 3, name="positions")
        tf.dynamic_stitch(positions, pieces, name="merged")
        tf.concat([pieces[2], pieces[0], data], axis=0, name="joined")
        feeds = {
            "data:0": np.arange(10, dtype=np.float32).reshape(5, 2),
            "parts:0": np.array([2, 0, 2, 1, 0], np.int32),
        }
        fetches = ["split:0", "split:1", "split:2", "merged:0", "joined:0"]
    _save("variadic", graph, feeds, fetches)


def unsupported() -> None:
    """tf.gather_nd with batch_dims=1, which TF lowers to a subgraph of ops minigraph lacks."""
    graph = tf.Graph()
    with graph.as_default():
        params = tf1.placeholder(tf.float32, [2, 3, 4], name="params")
        tf.gather_nd(params, [[1], [2]], batch_dims=1, name="gathered")
    _save("gather_nd_batch_dims_lowered", graph, {}, [])


# -- frozen models: what TF writes for ordinary networks (tests/test_tf_models.py) -----------------


def _save_frozen(name: str, graph: tf.Graph, session: Any, feeds: dict, fetches: list) -> None:
    """Freezes `graph`'s variables into Consts (convert_variables_to_constants, as TF 1.x's
    freeze_graph does), writes NAME.pb, then imports the frozen file into a fresh graph and
    records what TF computes from it in NAME.npz (the _save format)."""
    outputs = sorted({f.partition(":")[0] for f in fetches})
    frozen = tf1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), outputs)
    frozen_graph = tf.Graph()
    with frozen_graph.as_default():
        tf1.import_graph_def(frozen, name="")
    with open(os.path.join(HERE, f"{name}.pb"), "wb") as f:
        f.write(frozen.SerializeToString(deterministic=True))
    with tf1.Session(graph=frozen_graph) as frozen_session:
        values = frozen_session.run(fetches, feeds)
    dtypes = [frozen_graph.get_tensor_by_name(f).dtype.name for f in fetches]
    arrays = {
        "feed_names": np.array([k.encode() for k in feeds], dtype="S"),
        "fetch_names": np.array([f.encode() for f in fetches], dtype="S"),
        "fetch_dtypes": np.array([d.encode() for d in dtypes], dtype="S"),
    }
    for i, value in enumerate(feeds.values()):
        arrays[f"feed_{i}"] = _storable(np.asarray(value))
    for i, value in enumerate(values):
        arrays[f"fetch_{i}"] = _storable(np.asarray(value))
    np.savez(os.path.join(HERE, f"{name}.npz"), **arrays)


def _weights(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> Any:
    """A float32 variable with a fixed random initial value (frozen into a Const later)."""
    scale = 1.0 / np.sqrt(shape[0])
    value = (rng.normal(size=shape) * scale).astype(np.float32)
    return tf1.get_variable(name, initializer=tf.constant(value))


def mlp_classifier() -> None:
    """An MLP classifier as TF 1.x code writes one: a [batch, 4, 4] float32 input flattened with
    a dynamic Reshape (Shape, StridedSlice, Pack), two dense layers (MatMul, BiasAdd, Relu) and a
    softmax, with the predicted class (ArgMax); variables frozen into Consts."""
    rng = np.random.default_rng(20)
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 4, 4], name="features")
        batch = tf.shape(x)[0]
        flat = tf.reshape(x, tf.stack([batch, 16]), name="flatten")
        with tf1.variable_scope("dense1"):
            w1, b1 = _weights(rng, "kernel", (16, 32)), _weights(rng, "bias", (32,))
            hidden = tf.nn.relu(tf.nn.bias_add(tf.matmul(flat, w1), b1), name="relu")
        with tf1.variable_scope("dense2"):
            w2, b2 = _weights(rng, "kernel", (32, 5)), _weights(rng, "bias", (5,))
            logits = tf.nn.bias_add(tf.matmul(hidden, w2), b2, name="logits")
        probs = tf.nn.softmax(logits, name="probabilities")
        tf.argmax(probs, axis=1, name="predictions")
        feeds = {"features:0": rng.normal(size=(7, 4, 4)).astype(np.float32)}
        fetches = ["probabilities:0", "predictions:0", "dense2/logits:0", "dense1/relu:0"]
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            _save_frozen("mlp_classifier", graph, session, feeds, fetches)


def embedding_classifier() -> None:
    """A bag-of-ids classifier: tf.compat.v1.nn.embedding_lookup over a 23 x 8 table split in 3
    shards, once "mod" and once "div" (TF writes DynamicPartition, GatherV2 per shard,
    ParallelDynamicStitch and the id arithmetic), the mean over each example's 5 ids, then a
    dense layer with ReLU and a softmax layer."""
    rng = np.random.default_rng(21)
    vocab, dim, shards = 23, 8, 3
    table = rng.normal(size=(vocab, dim)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.placeholder(tf.int64, [None, 5], name="ids")
        outputs = []
        for strategy in ("mod", "div"):
            with tf1.variable_scope(strategy):
                if strategy == "mod":
                    parts = [table[k::shards] for k in range(shards)]
                else:
                    sizes = [vocab // shards + (k < vocab % shards) for k in range(shards)]
                    parts = np.split(table, np.cumsum(sizes)[:-1])
                shard_vars = [
                    tf1.get_variable(f"shard_{k}", initializer=tf.constant(p))
                    for k, p in enumerate(parts)
                ]
                rows = tf1.nn.embedding_lookup(shard_vars, ids, partition_strategy=strategy,
                                               name="lookup")  # fmt: skip
                bag = tf.reduce_mean(rows, axis=1, name="bag")
                w1, b1 = _weights(rng, "kernel1", (dim, 16)), _weights(rng, "bias1", (16,))
                hidden = tf.nn.relu(tf.nn.bias_add(tf.matmul(bag, w1), b1))
                w2, b2 = _weights(rng, "kernel2", (16, 4)), _weights(rng, "bias2", (4,))
                logits = tf.nn.bias_add(tf.matmul(hidden, w2), b2)
                outputs.append(tf.nn.softmax(logits, name="probabilities"))
                outputs.append(tf.identity(rows, name="rows"))
        feeds = {"ids:0": rng.integers(0, vocab, size=(6, 5)).astype(np.int64)}
        fetches = [t.name for t in outputs]
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            _save_frozen("embedding_classifier", graph, session, feeds, fetches)


def attention_block() -> None:
    """A small self-attention block over [batch, 6, 8] inputs: one-hot positions tiled over the
    dynamic batch and concatenated to the features, query/key/value projections (MatMul on
    3-D inputs: BatchMatMulV2), scaled scores with an adjoint (BatchMatMulV2 adj_y), softmax,
    transpose, reshape, strided slices (a step, a shrunk axis, a new axis, negative indices)
    and gather_nd of one token per example."""
    rng = np.random.default_rng(22)
    steps, width, heads_dim = 6, 8, 4
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, steps, width], name="tokens")
        picks = tf1.placeholder(tf.int32, [None, 2], name="picks")
        batch = tf.shape(x)[0]
        positions = tf.one_hot(tf.range(steps), steps, name="positions")
        tiled = tf.tile(tf.expand_dims(positions, 0), tf.stack([batch, 1, 1]), name="tiled")
        features = tf.concat([x, tiled], axis=2, name="features")
        size = width + steps
        wq = _weights(rng, "wq", (size, heads_dim))
        wk = _weights(rng, "wk", (size, heads_dim))
        wv = _weights(rng, "wv", (size, heads_dim))
        q, k, v = (tf.matmul(features, w) for w in (wq, wk, wv))
        scores = tf.matmul(q, k, transpose_b=True) / np.float32(np.sqrt(heads_dim))
        weights = tf.nn.softmax(scores, name="weights")
        attended = tf.matmul(weights, v, name="attended")
        transposed = tf.transpose(attended, [0, 2, 1], name="transposed")
        flat = tf.reshape(transposed, [-1, heads_dim * steps], name="flat")
        every_other = tf.identity(attended[:, ::2, 1:], name="every_other")
        last = tf.identity(attended[:, -1, tf.newaxis, :], name="last")
        picked = tf.gather_nd(attended, picks, name="picked")
        feeds = {
            "tokens:0": rng.normal(size=(3, steps, width)).astype(np.float32),
            "picks:0": np.array([[0, 5], [2, 0], [1, 3], [2, 2]], np.int32),
        }
        fetches = [t.name for t in (weights, attended, flat, every_other, last, picked)]
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            _save_frozen("attention_block", graph, session, feeds, fetches)


def segment_ops() -> None:
    """UnsortedSegmentSum, ScatterNd and ParallelDynamicStitch as TF writes them: fed data and
    ids (negative ids dropped), float16 sums (TF's rounding at every step), int64
    num_segments, repeated index vectors (numbers add, bools or, strings concatenate),
    bad_indices_policy="IGNORE", and tf.dynamic_stitch's parallel form."""
    graph = tf.Graph()
    with graph.as_default():
        data = tf1.placeholder(tf.float32, [None, 3], name="data")
        ids = tf1.placeholder(tf.int64, [None], name="ids")
        tf.math.unsorted_segment_sum(data, ids, tf.constant(5, tf.int64), name="sums")
        halves = tf.constant(np.array([2048, 1, 1, 1, -0.0, 3], np.float16))
        tf.math.unsorted_segment_sum(halves, [0, 0, 0, 0, 1, -1], 3, name="halves")
        tf.scatter_nd([[0, 1], [2, 0], [0, 1]], tf.constant([1.5, 2.0, 3.0]), [3, 2], name="sn")
        tf.scatter_nd([[1], [1], [0]], [True, False, False], [3], name="sn_bool")
        tf.scatter_nd([[1], [1], [0]], ["a", "b", "c"], [2], name="sn_string")
        tf.raw_ops.ScatterNd(indices=[[1], [9], [0]], updates=tf.constant([5, 6, 7], tf.int64),
                             shape=[3], bad_indices_policy="IGNORE", name="sn_ignore")  # fmt: skip
        positions = tf1.placeholder(tf.int32, [None], name="positions")
        tf.raw_ops.ParallelDynamicStitch(indices=[positions, [1]], data=[data, [[7.0, 8, 9]]],
                                         name="stitched")  # fmt: skip
        feeds = {
            "data:0": np.arange(12, dtype=np.float32).reshape(4, 3) - 2.5,
            "ids:0": np.array([4, -1, 0, 4], np.int64),
            "positions:0": np.array([3, 0, 5, 2], np.int32),
        }
        fetches = ["sums:0", "halves:0", "sn:0", "sn_bool:0", "sn_string:0", "sn_ignore:0",
                   "stitched:0"]  # fmt: skip
    _save("segment_ops", graph, feeds, fetches)


GENERATORS = {
    "gather_basic": gather_basic,
    "consts": consts,
    "variadic": variadic,
    "unsupported": unsupported,
    "mlp_classifier": mlp_classifier,
    "embedding_classifier": embedding_classifier,
    "attention_block": attention_block,
    "segment_ops": segment_ops,
}


def main(argv: list[str] | None = None) -> int:
    """Writes every graph, or those named on the command line (`make_tf_graphs.py consts`)."""
    names = list(sys.argv[1:] if argv is None else argv) or list(GENERATORS)
    unknown = [n for n in names if n not in GENERATORS]
    if unknown:
        print(f"unknown graph(s) {unknown}; choose from {list(GENERATORS)}", file=sys.stderr)
        return 2
    if not tf.__version__.startswith("2.21"):
        print(f"warning: these files were made with TF 2.21; this is {tf.__version__}")
    tf1.disable_eager_execution()
    for name in names:
        GENERATORS[name]()
    print(f"wrote {', '.join(names)} to {HERE} with TensorFlow {tf.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
