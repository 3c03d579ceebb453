"""Every row of the coverage table (tests/test_gradients_coverage.py: one per gradient rule)
as a gradient graph exported to GraphDef: TensorFlow 2.21 imports it and runs it to the values
minigraph's Session gives. Runs in the TF venv: `/work/tfvenv/bin/python -m pytest` this file.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_gradients_coverage import CASES

import minigraph as mg

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")
tf1 = tf.compat.v1


NONE_GRADIENTS = {"Ceil", "Floor", "FloorDiv", "Round"}


def _components(grad):
    if isinstance(grad, mg.IndexedSlices):
        return [grad.values.name, grad.indices.name, grad.dense_shape.name]
    return [grad.name]


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_gradient_graph_runs_in_tensorflow_with_the_same_values(op_type):
    f, values = CASES[op_type]
    values = [np.asarray(x) for x in values]
    root = mg.Scope.new_root_scope()
    xs = [
        mg.Placeholder(root.with_op_name(f"x{i}"), mg.as_dtype(x.dtype), list(x.shape))
        for i, x in enumerate(values)
    ]
    with root.as_default():
        y = mg.builder.as_output(f(root, *xs))
    rng = np.random.default_rng(5)
    with mg.Session(root) as session:
        y_value = np.asarray(session.run(y, dict(zip(xs, values))))
    seed = rng.standard_normal(y_value.shape).astype(y_value.dtype)
    if y_value.dtype.kind == "c":
        seed = seed + 1j * rng.standard_normal(y_value.shape).astype(y_value.dtype)
    grads = mg.gradients(y, xs, grad_ys=mg.Const(root.with_op_name("seed"), seed))
    fetches = [name for g in grads if g is not None for name in _components(g)]
    if not fetches:  # TF's rules of these piecewise-constant ops return None too
        assert op_type in NONE_GRADIENTS, f"{op_type}: no gradient at all"
        return
    feeds = {x.name: value for x, value in zip(xs, values)}
    with mg.Session(root) as session:
        mine = session.run(fetches, {root.graph.get_output(k): v for k, v in feeds.items()})

    graph_def = tf1.GraphDef.FromString(root.graph.as_graph_def().SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
    with tf1.Session(graph=graph) as session:
        theirs = session.run(fetches, feeds)
    for name, a, b in zip(fetches, mine, theirs):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, err_msg=f"{op_type}: {name}")


# Where minigraph's registry and TF's differ in kind only, with the same gradients:
# - TF registers a rule that returns None for ArgMax and ArgMin (ours: no_gradient);
# - TF registers nothing for ops whose outputs never carry a gradient (bool outputs, no
#   outputs, variable handles and updates), so its machinery never asks (ours: no_gradient,
#   which says so explicitly).
KIND_DIFFERENCES = {
    "ArgMax": "rule", "ArgMin": "rule", "All": "missing", "Any": "missing", "NoOp": "missing",
    "Placeholder": "missing", "VarHandleOp": "missing", "AssignVariableOp": "missing",
    "AssignAddVariableOp": "missing", "AssignSubVariableOp": "missing",
    "DestroyResourceOp": "missing", "ResourceScatterAdd": "missing",
    "ResourceScatterSub": "missing", "ResourceScatterUpdate": "missing",
    "ResourceApplyGradientDescent": "missing", "ResourceApplyMomentum": "missing",
    "ResourceApplyAdagrad": "missing", "ResourceApplyAdam": "missing",
    "ResourceSparseApplyAdagrad": "missing", "ResourceSparseApplyMomentum": "missing",
}  # fmt: skip


def _tf_kind(op_type: str) -> str:
    from tensorflow.python.framework import ops as tf_ops  # noqa: PLC0415 - TF's registry

    try:
        fn = tf_ops._gradient_registry.lookup(op_type)
    except LookupError:
        return "missing"
    return "no_gradient" if fn is None else "rule"


def _our_kind(op_type: str) -> str:
    try:
        rule = mg.registry.gradient_rule(op_type)
    except mg.NotFoundError:
        return "missing"
    return "rule" if rule.fn is not None else "no_gradient"


def test_every_op_is_differentiable_exactly_where_tensorflow_s_is():
    """Our registry against TF 2.21's own (rule / NotDifferentiable / nothing), op by op."""
    from test_gradients_coverage import _library_op_types  # noqa: PLC0415

    problems = []
    for op_type in _library_op_types():
        ours, theirs = _our_kind(op_type), _tf_kind(op_type)
        if ours != theirs and KIND_DIFFERENCES.get(op_type) != theirs:
            problems.append(f"{op_type}: ours {ours}, TF's {theirs}")
    assert not problems, "\n".join(problems)
