"""Writes the TensorFlow-made graph files that tests/test_graph_def_tf_files.py imports, with
TensorFlow's own results, so that the normal test suite checks TF compatibility without TF.

Run it only where TensorFlow 2.21 is installed (never a minigraph dependency), from anywhere:

    python tests/data/make_tf_graphs.py

For each graph NAME it writes NAME.pb (binary GraphDef, TF's `as_graph_def()`), and for graphs
that run, NAME.npz: `feed_names`/`fetch_names`/`fetch_dtypes` (byte strings) and
`feed_<i>`/`fetch_<i>` arrays (string tensors as fixed-width bytes, so that no pickle is ever
needed to read them; bfloat16 as float32, which holds every bfloat16 value exactly).
gather_basic is also written as text (gather_basic.pbtxt).
"""

from __future__ import annotations

import os
import sys

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


def main() -> int:
    if not tf.__version__.startswith("2.21"):
        print(f"warning: these files were made with TF 2.21; this is {tf.__version__}")
    tf1.disable_eager_execution()
    gather_basic()
    consts()
    variadic()
    unsupported()
    print(f"wrote graph files to {HERE} with TensorFlow {tf.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
