"""The optimizers' values after N steps equal TensorFlow 2.21's (tf.compat.v1 graph mode, the same
model, data and initial values): every variable, slots and global_step included, by name, for
every optimizer, dense and sparse gradients (a gather and embedding_lookup over two shards, ids
repeated), float32 (1e-4) and float64 (1e-7 relative). The references are in
tests/data/tf_train.npz (tests/data/make_tf_train.py); with TensorFlow installed,
test_values_equal_tensorflows_live recomputes them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
import ops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _train_cases import CASES, case_data  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "tf_train.npz"


def tolerance(dtype: str) -> dict[str, float]:
    return {"rtol": 1e-7, "atol": 1e-12} if dtype == "float64" else {"rtol": 1e-4, "atol": 1e-5}


def make_optimizer(spec: dict, scope: mg.Scope):
    kind, args = spec["optimizer"], dict(spec["args"])
    if args.pop("lr_tensor", False):
        args["learning_rate"] = ops.Const(scope, np.array(args["learning_rate"], spec["dtype"]))
    return getattr(mg.train, kind)(**args)


def build(case: str):
    """The case's model in minigraph: (scope, train_op, {variable name: Variable})."""
    spec = CASES[case]
    data = case_data(case)
    s = mg.Scope.new_root_scope()

    def var(name, value, trainable=True):
        return mg.Variable(s, value, trainable=trainable, name=name)

    w = var("w", data["w"])
    b = var("b", data["b"])
    if spec["model"] == "dense":
        h = ops.Tanh(s, ops.MatMul(s, data["x"], var("dense", data["dense"])))
    elif spec["model"] == "gather":
        table = var("emb", data["emb"])
        h = ops.Mean(s, table.sparse_read(data["ids"]), 1)
    else:
        shards = [var("emb0", data["emb0"]), var("emb1", data["emb1"])]
        h = ops.Mean(s, ops.embedding_lookup(s, shards, data["ids"]), 1)
    logits = ops.BiasAdd(s, ops.MatMul(s, h, w), b)
    xent = ops.SparseSoftmaxCrossEntropyWithLogits(s, logits, data["labels"])
    loss = ops.Mean(s, xent.loss, 0)
    step = var("global_step", np.int64(0), trainable=False)
    train = make_optimizer(spec, s).minimize(loss, global_step=step)
    return s, train, {v.op.name: v for v in mg.global_variables(s)}


def run(case: str) -> dict[str, np.ndarray]:
    s, train, variables = build(case)
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        for _ in range(CASES[case]["steps"]):
            sess.run(train)
        names = sorted(variables)
        return dict(zip(names, sess.run([variables[n] for n in names])))


def reference(case: str) -> dict[str, np.ndarray]:
    with np.load(DATA) as f:
        return {k.split("|", 1)[1]: f[k] for k in f.files if k.split("|", 1)[0] == case}


def check(case: str, expected: dict[str, np.ndarray]) -> None:
    got = run(case)
    assert sorted(got) == sorted(expected), "the variables (and slots) differ from TF's"
    for name, value in expected.items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_allclose(
            got[name], value, err_msg=f"{case}: {name}", **tolerance(CASES[case]["dtype"])
        )
    # The step moved every trainable variable (a test of the references, too).
    initial = case_data(case)
    for name in ("w", "b"):
        assert not np.array_equal(got[name], initial[name])
    assert got["global_step"] == CASES[case]["steps"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_equal_tensorflows(case):
    check(case, reference(case))


def test_the_reference_file_covers_every_case():
    with np.load(DATA) as f:
        cases = {k.split("|", 1)[0] for k in f.files}
    assert cases == set(CASES)


@pytest.mark.parametrize(
    "case", ["shards-adam-float64", "gather-adagrad-float32", "dense-nesterov-float64"]
)
def test_values_equal_tensorflows_live(case):
    pytest.importorskip("tensorflow")
    sys.path.insert(0, str(DATA.parent))
    from make_tf_train import tf_values  # noqa: PLC0415

    check(case, tf_values(case))


@pytest.mark.parametrize(
    "case", ["shards-adagrad-float32", "gather-adam-float64", "dense-nesterov-float32"]
)
def test_tensorflow_runs_the_exported_training_graph(case):
    # The GraphDef of a minigraph training graph (slots, Unique, sparse apply ops, the
    # global_step increment) imports into TF, and TF's steps give minigraph's values.
    tf = pytest.importorskip("tensorflow")
    tf1 = tf.compat.v1
    s, train, variables = build(case)
    graph_def = tf1.GraphDef.FromString(s.graph.as_graph_def().SerializeToString())
    names = sorted(variables)
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
        inits = [graph.get_operation_by_name(f"{n}/Assign") for n in names]
        with tf1.Session(graph=graph) as sess:
            sess.run(inits)
            for _ in range(CASES[case]["steps"]):
                sess.run(train.name)
            values = sess.run([f"{n}/Read/ReadVariableOp:0" for n in names])
    ours = run(case)
    for name, value in zip(names, values):
        np.testing.assert_allclose(
            ours[name], value, err_msg=name, **tolerance(CASES[case]["dtype"])
        )
