"""Freezing variables into constants (`minigraph.graph_util`, `minigraph freeze`): the frozen
GraphDef holds only what the outputs need, each variable a Const of its value (TF's
conversions), runs to the session's values in minigraph and in TensorFlow (the TF tests
importorskip it: `/work/tfvenv/bin/python -m pytest tests/test_freeze.py`)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import minigraph as mg
import ops
import ops.resource_variables as rv
from minigraph import Scope, Session, Variable
from minigraph.graph_util import (
    convert_variables_to_constants,
    extract_sub_graph,
    freeze_graph_def,
)
from minigraph.train import Saver, load_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
X = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], np.float32)
IDS = np.array([[2, 0], [1, 1]], np.int32)


def _model():
    """A small classifier with variables: a dense layer, an embedding gather (ResourceGather),
    a batched gather, a shape read, an update the outputs do not need."""
    root = Scope.new_root_scope()
    w = Variable(root, np.arange(6, dtype=np.float32).reshape(3, 2) / 10, name="w")
    b = Variable(root.new_sub_scope("dense"), [0.5, -0.5], name="b")
    table = Variable(root, np.arange(8, dtype=np.float32).reshape(4, 2), name="table")
    batched = Variable(root, np.arange(12, dtype=np.float32).reshape(2, 3, 2), name="batched")
    x = ops.Placeholder(root.with_op_name("x"), mg.float32, [None, 3])
    ids = ops.Placeholder(root.with_op_name("ids"), mg.int32, [None, 2])
    dense = ops.BiasAdd(root, ops.MatMul(root, x, w), b)
    emb = ops.Sum(root, ops.embedding_lookup(root, table, ids), [1])
    picked = ops.Sum(root, rv.ResourceGather(root, batched, ids, batch_dims=1), [1, 2])
    shape = ops.Cast(root, rv.VariableShape(root, table), DstT=mg.float32)
    logits = ops.AddV2(root, ops.AddV2(root, dense, emb), ops.ExpandDims(root, picked, 1))
    ops.Identity(root.with_op_name("probs"), ops.Softmax(root, logits))
    ops.Identity(root.with_op_name("shape"), shape)
    step = table.assign_add(np.ones((4, 2), np.float32), read_value=False, name="train")
    return root, step


def _trained():
    root, step = _model()
    sess = Session(root)
    sess.run(mg.global_variables_initializer(root))
    sess.run(step)  # the frozen values are the current ones, not the initial ones
    return root, sess


def _run_frozen(graph_def, fetches=("probs:0", "shape:0")):
    scope = Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    names = {op.name for op in scope.graph.operations}
    feeds = {f"{k}:0": v for k, v in (("x", X), ("ids", IDS)) if k in names}
    with Session(scope) as sess:
        return sess.run(list(fetches), feeds)


STATEFUL = {"VarHandleOp", "ReadVariableOp", "ResourceGather", "VariableShape",
            "AssignVariableOp", "AssignAddVariableOp", "VarIsInitializedOp", "NoOp"}  # fmt: skip


def test_frozen_graphs_hold_constants_and_compute_the_sessions_values():
    root, sess = _trained()
    with sess:
        want = sess.run(["probs:0", "shape:0"], {"x:0": X, "ids:0": IDS})
        frozen = convert_variables_to_constants(sess, root.graph, ["probs", "shape"])
    kinds = {n.op for n in frozen.node}
    assert not kinds & STATEFUL, kinds & STATEFUL
    names = {n.name: n for n in frozen.node}
    for var in ("w", "dense/b", "table", "batched"):
        assert names[var].op == "Const"  # the VarHandleOp's name, now its value
    assert names["w/Read/ReadVariableOp"].op == "Identity" if "w/Read/ReadVariableOp" in names \
        else True  # fmt: skip
    gathers = [n for n in frozen.node if n.op == "GatherV2" and n.input[0] == "batched"]
    assert gathers and gathers[0].attr["batch_dims"].i == 1
    assert "train" not in names and "init" not in names  # updates and initializers pruned
    got = _run_frozen(frozen)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_only_the_nodes_the_outputs_need_are_kept():
    root, sess = _trained()
    with sess:
        frozen = convert_variables_to_constants(sess, root.graph.as_graph_def(), ["shape"])
    names = {n.name for n in frozen.node}
    assert "table" in names and "w" not in names and "probs" not in names


def test_white_and_black_lists_keep_variables():
    root, sess = _trained()
    with sess:
        only_w = convert_variables_to_constants(sess, root.graph, ["probs"], ["w"])
        not_w = convert_variables_to_constants(sess, root.graph, ["probs"], None, ["w"])
    kinds = {n.name: n.op for n in only_w.node}
    assert kinds["w"] == "Const" and kinds["table"] == "VarHandleOp"
    kinds = {n.name: n.op for n in not_w.node}
    assert kinds["w"] == "VarHandleOp" and kinds["table"] == "Const"


def test_outputs_that_update_a_variable_cannot_be_frozen():
    root, _ = _model()
    with Session(root) as sess:
        sess.run(mg.global_variables_initializer(root))
        with pytest.raises(
            mg.InvalidArgumentError,
            match="need node 'train' "
            r"\(AssignAddVariableOp\), which updates or uses variable 'table'",
        ):
            convert_variables_to_constants(sess, root.graph, ["train"])
        with pytest.raises(mg.InvalidArgumentError, match=r"need node '\w+/Assign'"):
            convert_variables_to_constants(sess, root.graph, ["init"])


def test_an_identity_of_a_handle_freezes_to_an_identity_of_the_value():
    root, _ = _model()
    table = root.graph.get_operation("table").outputs[0]
    alias = ops.Identity(root.with_op_name("alias"), table)
    rv.ReadVariableOp(root.with_op_name("read_alias"), alias, mg.float32)
    with Session(root) as sess:
        sess.run(mg.global_variables_initializer(root))
        frozen = convert_variables_to_constants(sess, root.graph, ["read_alias"])
    kinds = {n.name: n.op for n in frozen.node}
    assert kinds == {"table": "Const", "alias": "Identity", "read_alias": "Identity"}
    (value,) = _run_frozen(frozen, ["read_alias:0"])
    np.testing.assert_array_equal(value, np.arange(8, dtype=np.float32).reshape(4, 2))


def test_freezing_an_uninitialized_variable_names_it():
    root, _ = _model()
    with Session(root) as sess, pytest.raises(mg.FailedPreconditionError, match="variable w"):
        convert_variables_to_constants(sess, root.graph, ["probs"])


def test_unknown_outputs_and_bad_arguments():
    root, sess = _trained()
    with sess:
        with pytest.raises(mg.NotFoundError, match="no node 'nope'"):
            convert_variables_to_constants(sess, root.graph, ["nope"])
        with pytest.raises(mg.InvalidArgumentError, match="non-empty list of node names"):
            convert_variables_to_constants(sess, root.graph, "probs")
    with pytest.raises(mg.InvalidArgumentError, match="values maps variable names"):
        freeze_graph_def(root.graph, ["probs"], [1, 2])


def test_freezing_from_checkpoint_values(tmp_path):
    root, sess = _trained()
    with sess:
        want = sess.run(["probs:0", "shape:0"], {"x:0": X, "ids:0": IDS})
        path = Saver().save(sess, tmp_path / "model.ckpt")
    values = load_checkpoint(path)
    frozen = freeze_graph_def(root.graph.as_graph_def(), ["probs", "shape"], values)
    for a, b in zip(_run_frozen(frozen), want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    missing = {k: v for k, v in values.items() if k != "w"}
    with pytest.raises(mg.NotFoundError, match="no value for variable 'w'"):
        freeze_graph_def(root.graph, ["probs"], missing)
    wrong = dict(values, w=np.zeros((2, 3), np.float32))
    with pytest.raises(mg.InvalidArgumentError, match=r"variable 'w' has shape \[3,2\], its "
                       r"value \[2, 3\]"):  # fmt: skip
        freeze_graph_def(root.graph, ["probs"], wrong)
    wrong = dict(values, w=np.zeros((3, 2), np.float64))
    with pytest.raises(mg.InvalidArgumentError, match="variable 'w' is float32, its value float64"):
        freeze_graph_def(root.graph, ["probs"], wrong)


def test_extract_sub_graph():
    root, _ = _model()
    sub = extract_sub_graph(root.graph, ["shape"])
    assert {n.name for n in sub.node} >= {"table", "shape"}
    assert "w" not in {n.name for n in sub.node}


# -- the command line ----------------------------------------------------------------------------


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "minigraph", *args], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )  # fmt: skip


def test_the_freeze_command(tmp_path):
    root, sess = _trained()
    graph = mg.write_graph(root.graph, str(tmp_path / "model.pb"))
    with sess:
        want = sess.run(["probs:0", "shape:0"], {"x:0": X, "ids:0": IDS})
        ckpt = Saver().save(sess, tmp_path / "model.ckpt")
    out = str(tmp_path / "frozen.pbtxt")
    result = _cli("freeze", graph, ckpt, out, "--outputs", "probs,shape")
    assert result.returncode == 0, result.stderr
    assert "4 variables frozen into constants" in result.stdout
    frozen = mg.read_graph(out)
    for a, b in zip(_run_frozen(frozen), want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_the_freeze_command_errors(tmp_path):
    root, sess = _trained()
    graph = mg.write_graph(root.graph, str(tmp_path / "model.pb"))
    with sess:
        ckpt = Saver().save(sess, tmp_path / "model.ckpt")
    out = str(tmp_path / "frozen.pb")
    missing = _cli("freeze", graph, str(tmp_path / "nope.ckpt"), out, "--outputs", "probs")
    assert (
        missing.returncode == 1 and "minigraph: NotFoundError: no checkpoint at" in missing.stderr
    )
    bad = _cli("freeze", graph, ckpt, out, "--outputs", "nope")
    assert bad.returncode == 1 and "no node 'nope'" in bad.stderr
    usage = _cli("freeze", graph, ckpt, out)
    assert usage.returncode == 2 and "--outputs" in usage.stderr
    open(ckpt, "r+b").truncate(100)
    corrupt = _cli("freeze", graph, ckpt, out, "--outputs", "probs")
    assert corrupt.returncode == 1 and "DataLossError" in corrupt.stderr
    assert not os.path.exists(out)


# -- TensorFlow runs frozen graphs ----------------------------------------------------------------


def test_tensorflow_runs_the_frozen_graph():
    tf = pytest.importorskip("tensorflow")
    tf1 = tf.compat.v1
    root, sess = _trained()
    with sess:
        want = sess.run(["probs:0", "shape:0"], {"x:0": X, "ids:0": IDS})
        frozen = convert_variables_to_constants(sess, root.graph, ["probs", "shape"])
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf1.GraphDef.FromString(frozen.SerializeToString()), name="")
        assert not {op.type for op in graph.get_operations()} & STATEFUL
    with tf1.Session(graph=graph) as tf_sess:
        got = tf_sess.run(["probs:0", "shape:0"], {"x:0": X, "ids:0": IDS})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
