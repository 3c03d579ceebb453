"""The variable ops against a live TensorFlow 2.21 (runs only where `tensorflow` is importable:
`/work/tfvenv/bin/python -m pytest tests/test_variables_tf.py`; tests/test_variables_refs.py
checks TF's values without it): OpDefs and CPU kernel dtypes, the training ops' values after
several steps (dense and sparse, float32 and float64), error messages, and graphs with
variables in both directions."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

from _variables_cases import CASES, inputs, run_minigraph, run_tf  # noqa: E402
from tensorflow.python.framework import kernels as tf_kernels  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

import minigraph as mg  # noqa: E402
import ops  # noqa: E402
import ops.resource_variables as rv  # noqa: E402

tf1 = tf.compat.v1

OPS = [name for name in rv.__all__ if name[0].isupper()]
MG_TYPES = {d.name for d in mg.dtypes.ALL_DTYPES} | {"resource"}


@pytest.fixture(autouse=True, scope="module")
def graph_mode():
    tf1.disable_eager_execution()
    yield


def _tf_name(number: int) -> str:
    return tf.as_dtype(number).name


@pytest.mark.parametrize("op_type", OPS)
def test_op_defs_are_tensorflows(op_type):
    theirs = op_def_registry.get(op_type)
    mine = mg.registry.get_op_def(op_type)
    assert mine.is_stateful == theirs.is_stateful
    for ours_args, tf_args in ((mine.inputs, theirs.input_arg), (mine.outputs, theirs.output_arg)):
        assert [a.name for a in ours_args] == [a.name for a in tf_args]
        for a, t in zip(ours_args, tf_args):
            assert (a.type_attr or "") == t.type_attr
            if t.type:
                assert a.dtype.name == _tf_name(t.type)
    assert [a.name for a in mine.attrs] == [a.name for a in theirs.attr]
    for t in theirs.attr:
        attr = mine.attr(t.name)
        assert attr.type == t.type, t.name
        if t.type == "type":
            allowed = [_tf_name(x) for x in t.allowed_values.list.type]
            want = [x for x in allowed if x in MG_TYPES] if allowed else None
            got = [d.name for d in attr.allowed] if attr.allowed else None
            assert got == want, t.name
        if t.HasField("default_value"):
            field = t.default_value.WhichOneof("value")
            value = getattr(t.default_value, field)
            if field == "type":
                value = mg.as_dtype(_tf_name(value))
            elif field == "list":
                value = tuple(value.s)
            elif field == "s":
                value = value.decode()
            assert attr.default == value, t.name
        else:
            assert not attr.has_default, t.name


def _tf_cpu_types(op_type: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for k in tf_kernels.get_registered_kernels_for_op(op_type).kernel:
        if k.device_type != "CPU":
            continue
        for c in k.constraint:
            found.setdefault(c.name, set()).update(_tf_name(t) for t in c.allowed_values.list.type)
    return found


@pytest.mark.parametrize("op_type", OPS)
def test_cpu_kernels_take_the_dtypes_tfs_register(op_type):
    (kernel,) = [k for k in mg.registry.kernels_for(op_type) if k.device_type == "CPU"]
    for attr, tf_types in _tf_cpu_types(op_type).items():
        want = {t for t in tf_types if t in MG_TYPES} - {"resource"}
        declared = mg.registry.get_op_def(op_type).attr(attr).allowed or mg.dtypes.ALL_DTYPES
        got = {d.name for d in kernel.type_constraints.get(attr, declared)}
        assert got == want, attr


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_training_ops_after_steps_are_tensorflows(case):
    data = inputs(case)
    theirs = run_tf(case, data)
    mine = run_minigraph(case, data)
    tol = 1e-4 if case.dtype == "float32" else 1e-7  # the bounds
    for name, want in theirs.items():
        np.testing.assert_allclose(mine[name], want, rtol=tol, atol=tol)


# -- errors ----------------------------------------------------------------------------------------


def _tf_error(build, feeds=None):
    graph = tf.Graph()
    with graph.as_default():
        v = tf1.Variable(np.zeros((3, 2), np.float32), name="v", use_resource=True)
        a = tf1.Variable(np.ones((3, 2), np.float32), name="a", use_resource=True)
        node = build(v.handle, a.handle)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            with pytest.raises(tf.errors.OpError) as info:
                sess.run(node, feeds)
    return type(info.value).__name__, _tf_text(info.value.message)


def _mg_error(build, feeds=None):
    root = mg.Scope.new_root_scope()
    v = mg.Variable(root, np.zeros((3, 2), np.float32), name="v")
    a = mg.Variable(root.colocate_with(v.op), np.ones((3, 2), np.float32), name="a")
    node = build(root, v, a)
    with mg.Session(root) as sess:
        sess.run(mg.global_variables_initializer(root))
        with pytest.raises(mg.OpError) as info:
            sess.run(node, feeds)
    return type(info.value).__name__, _without_node(info.value.message)


def _without_node(message: str) -> str:
    return message.split("\n\t [[")[0]


def _tf_text(message: str) -> str:
    found = re.search(r"Node: '[^']*'\n(.*?)\n\t \[\[", message, re.S)
    return (found.group(1) if found else message).strip()


def test_run_time_errors_are_tensorflows():
    cases = [
        (lambda v, a: tf.raw_ops.ResourceGather(resource=v, indices=[5], dtype=tf.float32),
         lambda s, v, a: rv.ResourceGather(s, v, [5])),
        (lambda v, a: tf.raw_ops.ResourceScatterAdd(resource=v, indices=[[0, -1]],
                                                    updates=np.ones((1, 2, 2), np.float32)),
         lambda s, v, a: rv.ResourceScatterAdd(s, v, [[0, -1]], np.ones((1, 2, 2), np.float32))),
        (lambda v, a: tf.raw_ops.ResourceSparseApplyAdagrad(
            var=v, accum=a, lr=0.1, grad=np.ones((2, 2), np.float32), indices=[0, 7]),
         lambda s, v, a: rv.ResourceSparseApplyAdagrad(s, v, a, 0.1, np.ones((2, 2)), [0, 7])),
        (lambda v, a: tf.raw_ops.ResourceSparseApplyMomentum(
            var=v, accum=a, lr=0.1, grad=np.ones((1, 2), np.float32), indices=[-3],
            momentum=0.9),
         lambda s, v, a: rv.ResourceSparseApplyMomentum(s, v, a, 0.1, np.ones((1, 2)), [-3], 0.9)),
    ]  # fmt: skip
    for tf_build, mg_build in cases:
        tf_kind, tf_message = _tf_error(tf_build)
        mg_kind, mg_message = _mg_error(mg_build)
        assert (mg_kind, mg_message) == (tf_kind, tf_message)


def test_fed_shape_errors_are_tensorflows():
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        v = tf1.Variable(np.zeros((3, 2), np.float32), name="v", use_resource=True)
        g = tf1.placeholder(tf.float32, None)
        lr = tf1.placeholder(tf.float32, None)
        apply = tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=lr, delta=g)
        add = tf.raw_ops.AssignAddVariableOp(resource=v.handle, value=g)
        with tf1.Session(graph=tf_graph) as sess:
            sess.run(v.initializer)
            tf_messages = []
            for node, feeds in ((apply, {lr: 0.1, g: np.ones((2, 2))}),
                                (apply, {lr: [0.1], g: np.ones((3, 2))}),
                                (add, {g: np.ones(4)})):  # fmt: skip
                with pytest.raises(tf.errors.InvalidArgumentError) as info:
                    sess.run(node, feeds)
                tf_messages.append(_tf_text(info.value.message))
    root = mg.Scope.new_root_scope()
    mv = mg.Variable(root, np.zeros((3, 2), np.float32), name="v")
    mg_g, mg_lr = mg.Placeholder(root, mg.float32, None), mg.Placeholder(root, mg.float32, None)
    m_apply = rv.ResourceApplyGradientDescent(root, mv, mg_lr, mg_g)
    m_add = rv.AssignAddVariableOp(root, mv, mg_g)
    with mg.Session(root) as sess:
        sess.run(mv.initializer)
        for (node, feeds), want in zip(
            ((m_apply, {mg_lr: 0.1, mg_g: np.ones((2, 2))}),
             (m_apply, {mg_lr: [0.1], mg_g: np.ones((3, 2))}),
             (m_add, {mg_g: np.ones(4)})),
            tf_messages,
        ):  # fmt: skip
            with pytest.raises(mg.InvalidArgumentError) as info:
                sess.run(node, feeds)
            assert _without_node(info.value.message) == want


def test_reading_an_uninitialized_variable_says_what_tf_says():
    graph = tf.Graph()
    with graph.as_default():
        v = tf1.Variable(1.0, name="v", use_resource=True)
        with tf1.Session(graph=graph) as sess:
            with pytest.raises(tf.errors.FailedPreconditionError) as info:
                sess.run(v.read_value())
    tf_start = re.search(r"(Could not find variable v\..*?uninitialized)", info.value.message)
    root = mg.Scope.new_root_scope()
    mv = mg.Variable(root, 1.0, name="v")
    with mg.Session(root) as sess, pytest.raises(mg.FailedPreconditionError) as mine:
        sess.run(mv)
    assert mine.value.message.startswith(tf_start.group(1))


# -- graphs with variables, both directions ------------------------------------------------------


def test_tensorflow_runs_minigraphs_variable_graphs():
    root = mg.Scope.new_root_scope()
    w = mg.Variable(root, np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
    mg.Variable(root.new_sub_scope("layer"), [b"a", b"b"], name="s")
    mg.Variable(root, np.array([1 + 2j], np.complex128), name="c")
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, [None, 3])
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, [None])
    ops.Identity(root.with_op_name("y"), ops.MatMul(root, x, w))
    ops.Identity(root.with_op_name("rows"), ops.gather(root, w, ids))
    step = w.assign_add(np.ones((3, 2), np.float32), name="step")
    ops.Identity(root.with_op_name("after"), step)
    mg.global_variables_initializer(root)
    graph_def = root.graph.as_graph_def()
    feeds = {"x:0": np.ones((1, 3), np.float32), "ids:0": [2, 0]}
    fetches = ["y:0", "rows:0", "layer/s/Read/ReadVariableOp:0", "c/Read/ReadVariableOp:0"]
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf1.import_graph_def(tf1.GraphDef.FromString(graph_def.SerializeToString()), name="")
    with tf1.Session(graph=tf_graph) as sess:
        sess.run("init")
        theirs = sess.run(fetches, feeds)
        theirs_after = sess.run("after:0")
    with mg.Session(root) as sess:
        sess.run("init")
        mine = sess.run(fetches, feeds)
        mine_after = sess.run("after:0")
    for a, b in zip(mine, theirs):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(mine_after, theirs_after)
