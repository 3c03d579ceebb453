"""Writes tests/data/tf_train.npz: TensorFlow 2.21's values after N training steps of small models
(tf.compat.v1 graph mode, resource variables), for every optimizer of minigraph.train, dense and
sparse gradients, float32 and float64. tests/test_train_optimizers.py builds the same models
(tests/_train_cases.py) in minigraph and compares every variable (slots and global_step
included) by name.

Run with TensorFlow installed: /work/tfvenv/bin/python tests/data/make_tf_train.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from _train_cases import CASES, case_data  # noqa: E402


def tf_values(case: str) -> dict[str, np.ndarray]:
    """The values of every global variable after the case's steps, by variable name."""
    import tensorflow as tf  # noqa: PLC0415

    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    spec = CASES[case]
    data = case_data(case)
    dtype = tf.as_dtype(spec["dtype"])
    graph = tf.Graph()
    with graph.as_default():

        def var(name, value, trainable=True):
            return tf1.Variable(value, name=name, use_resource=True, trainable=trainable)

        w = var("w", data["w"])
        b = var("b", data["b"])
        if spec["model"] == "dense":
            x = tf.constant(data["x"])
            h = tf.tanh(tf.matmul(x, var("dense", data["dense"])))
        elif spec["model"] == "gather":
            table = var("emb", data["emb"])
            h = tf.reduce_mean(tf.gather(table, tf.constant(data["ids"])), axis=1)
        else:  # "shards": embedding_lookup over two shards, "mod"
            shards = [var("emb0", data["emb0"]), var("emb1", data["emb1"])]
            h = tf.reduce_mean(tf1.nn.embedding_lookup(shards, tf.constant(data["ids"])), axis=1)
        logits = tf.nn.bias_add(tf.matmul(h, w), b)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.constant(data["labels"]), logits=logits
            )
        )
        step = var("global_step", np.int64(0), trainable=False)
        opt = make_tf_optimizer(tf1, spec, dtype)
        train = opt.minimize(loss, global_step=step)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(spec["steps"]):
                sess.run(train)
            variables = tf1.global_variables()
            values = sess.run(variables)
    return {v.op.name: value for v, value in zip(variables, values)}


def make_tf_optimizer(tf1, spec, dtype):
    kind, args = spec["optimizer"], dict(spec["args"])
    if args.pop("lr_tensor", False):
        args["learning_rate"] = tf1.constant(args["learning_rate"], dtype=dtype)
    return getattr(tf1.train, kind)(**args)


def main() -> None:
    out = {}
    for case in CASES:
        for name, value in tf_values(case).items():
            out[f"{case}|{name}"] = value
    path = HERE / "tf_train.npz"
    np.savez_compressed(path, **out)
    print(f"wrote {path}: {len(CASES)} cases, {len(out)} arrays")


if __name__ == "__main__":
    main()
