"""Writes TensorFlow's reference values for the variable tests, so that the normal test suite
checks them without TensorFlow (tests/test_variables_refs.py).

Run it only where TensorFlow 2.21 is installed (never a minigraph dependency), from anywhere:

    python tests/data/make_variable_refs.py

It writes:

- variables_apply.npz: for every case of tests/_variables_cases.py (the training ops, dense
  and sparse, float32 and float64, repeated indices), `<case>/in/<name>` the inputs (initial
  values and per-step gradients and indices) and `<case>/out/<name>` the variables' values
  TensorFlow's kernels give after the steps.
- tf_variables.pb: a TF 1.x graph with resource variables (tf.compat.v1.Variable, a
  read_value, an assign_add, a gather of a variable, an initializer), and tf_variables.npz
  with what TensorFlow computes from it: `after_init/<tensor>` and, after running
  `step` twice, `after_steps/<tensor>`.
"""

from __future__ import annotations

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import _variables_cases as cases  # noqa: E402

tf1 = tf.compat.v1

#: The tensors tf_variables.npz holds, by name.
TF_GRAPH_FETCHES = ["w/Read/ReadVariableOp:0", "b/Read/ReadVariableOp:0", "y:0", "rows:0"]


def write_apply_refs() -> None:
    arrays = {}
    for case in cases.CASES:
        data = cases.inputs(case)
        for name, value in data.items():
            arrays[f"{case.name}/in/{name}"] = value
        for name, value in cases.run_tf(case, data).items():
            arrays[f"{case.name}/out/{name}"] = value
    np.savez_compressed(os.path.join(HERE, "variables_apply.npz"), **arrays)


def write_tf_graph() -> None:
    graph = tf.Graph()
    with graph.as_default():
        w = tf1.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w", use_resource=True)
        b = tf1.Variable([0.5, -0.5], name="b", use_resource=True)
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        tf.identity(tf.matmul(x, w) + b, name="y")
        tf.identity(tf.gather(w, [2, 0]), name="rows")
        with tf1.control_dependencies([w.assign_add(tf.ones([3, 2]))]):
            tf.group(b.assign_sub([0.25, 0.25]), name="step")
        tf1.global_variables_initializer()  # "init"
    graph_def = graph.as_graph_def()
    with open(os.path.join(HERE, "tf_variables.pb"), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    feed = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    out = {"x": feed}
    with tf1.Session(graph=graph) as sess:
        sess.run("init")
        for name, value in zip(TF_GRAPH_FETCHES, sess.run(TF_GRAPH_FETCHES, {"x:0": feed})):
            out[f"after_init/{name}"] = value
        sess.run("step")
        sess.run("step")
        for name, value in zip(TF_GRAPH_FETCHES, sess.run(TF_GRAPH_FETCHES, {"x:0": feed})):
            out[f"after_steps/{name}"] = value
    np.savez_compressed(os.path.join(HERE, "tf_variables.npz"), **out)


if __name__ == "__main__":
    tf1.disable_eager_execution()
    write_apply_refs()
    write_tf_graph()
    print("wrote variables_apply.npz, tf_variables.pb, tf_variables.npz in", HERE)
