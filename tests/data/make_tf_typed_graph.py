"""Writes shape_typed.pbtxt and shape_typed.npz: a TensorFlow 2.21 text GraphDef whose Shape node
carries `experimental_type` (TF's full type, which TF writes on Shape nodes), and TF's results
for it. tests/test_fidelity_graph_files.py reads them without TensorFlow.

Run it only where TensorFlow 2.21 is installed (never a minigraph dependency), from anywhere:

    python tests/data/make_tf_typed_graph.py
"""

from __future__ import annotations

import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402

tf1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "shape_typed"


def main() -> None:
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        shape = tf.shape(x, name="shape")
        tf.size(x, name="size")
        tf.reshape(x, [-1], name="flat")
        tf.gather(x, [2, 0], name="rows")
        tf.concat([shape, [7]], 0, name="dims")
        tf.gather(shape, [1], name="cols")
    graph_def = graph.as_graph_def()
    typed = [node.name for node in graph_def.node if node.HasField("experimental_type")]
    if not typed:
        raise SystemExit("TensorFlow wrote no experimental_type: not the file this test needs")
    with open(os.path.join(HERE, f"{NAME}.pbtxt"), "w", encoding="utf-8") as f:
        f.write(text_format.MessageToString(graph_def))
    feed = np.arange(12, dtype=np.float32).reshape(4, 3)
    fetches = ["shape:0", "size:0", "flat:0", "rows:0", "dims:0", "cols:0"]
    with tf1.Session(graph=graph) as session:
        values = session.run(fetches, {"x:0": feed})
    arrays = {"fetch_names": np.array([n.encode() for n in fetches], dtype="S"), "feed": feed}
    arrays.update({f"fetch_{i}": np.asarray(v) for i, v in enumerate(values)})
    np.savez(os.path.join(HERE, f"{NAME}.npz"), **arrays)
    print(f"wrote {NAME}.pbtxt ({len(graph_def.node)} nodes; typed: {typed}) and {NAME}.npz")


if __name__ == "__main__":
    main()
