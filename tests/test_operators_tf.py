"""Python operators on tensors (ops/operators.py) build what TF 1.x graph tensors' operators
build: the same op types, node names, dtypes, static shapes and values.

The expected graphs are TF 2.21's, recorded (op types in creation order, the result node's
name, its dtype and static shape); the values are checked against numpy written directly.
With TensorFlow (`/work/tfvenv/bin/python -m pytest tests/test_operators_tf.py`) each
expression is also built and run in TF's graph mode and compared with minigraph's graph and
values.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import minigraph as mg
import ops  # noqa: F401 - registers the operators

X = np.array([-2.5, 0.0, 1.5, 3.0], np.float32)
I = np.array([-7, 0, 5, 9], np.int32)  # noqa: E741
B = np.array([True, False, True, False])
M = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
ONES32 = np.ones((3, 2), np.float32)


def _np_mod(a, b):
    return a - np.floor(a / b) * b


def _np_rdiv(a, b):
    with np.errstate(divide="ignore"):  # 2 / 0.0 is inf
        return a / b


# (id, expression over (x, i, b, m), numpy reference over the fed values, TF's op types of the
# new nodes in order, TF's name of the result node, dtype, static shape).
CASES = [
    ("add_literal", lambda x, i, b, m: x + 1, lambda: X + 1, ["Const", "AddV2"], "add",
     "float32", [4]),
    ("radd_literal", lambda x, i, b, m: 1 + x, lambda: 1 + X, ["Const", "AddV2"], "add",
     "float32", [4]),
    ("rsub_literal", lambda x, i, b, m: 1 - x, lambda: np.float32(1) - X, ["Const", "Sub"],
     "sub", "float32", [4]),
    ("mul_float_literal", lambda x, i, b, m: x * 2.5, lambda: X * np.float32(2.5),
     ["Const", "Mul"], "mul", "float32", [4]),
    ("truediv", lambda x, i, b, m: x / 2, lambda: X / np.float32(2), ["Const", "RealDiv"],
     "truediv", "float32", [4]),
    ("rtruediv", lambda x, i, b, m: 2 / x, lambda: _np_rdiv(np.float32(2), X), ["Const", "RealDiv"],
     "truediv", "float32", [4]),
    ("int_truediv_casts_to_float64", lambda x, i, b, m: i / 2,
     lambda: I.astype(np.float64) / 2.0, ["Const", "Cast", "Cast", "RealDiv"], "truediv",
     "float64", [4]),
    ("floordiv", lambda x, i, b, m: i // 3, lambda: np.floor_divide(I, 3), ["Const", "FloorDiv"],
     "floordiv", "int32", [4]),
    ("mod_int", lambda x, i, b, m: i % 3, lambda: np.array([2, 0, 2, 0], np.int32),
     ["Const", "FloorMod"], "mod", "int32", [4]),
    ("mod_float_negative_divisor", lambda x, i, b, m: x % -2.0,
     lambda: _np_mod(X, np.float32(-2)), ["Const", "FloorMod"], "mod", "float32", [4]),
    ("pow", lambda x, i, b, m: x**2, lambda: X * X, ["Const", "Pow"], "pow", "float32", [4]),
    ("rpow", lambda x, i, b, m: 2**x, lambda: np.exp2(X), ["Const", "Pow"], "pow", "float32",
     [4]),
    ("neg", lambda x, i, b, m: -x, lambda: -X, ["Neg"], "Neg", "float32", [4]),
    ("abs", lambda x, i, b, m: abs(i), lambda: np.array([7, 0, 5, 9], np.int32), ["Abs"], "Abs",
     "int32", [4]),
    ("less", lambda x, i, b, m: x < 1, lambda: X < 1, ["Const", "Less"], "Less", "bool", [4]),
    ("reflected_less_is_greater", lambda x, i, b, m: 1 < x, lambda: X > 1, ["Const", "Greater"],
     "Greater", "bool", [4]),
    ("greater_equal", lambda x, i, b, m: i >= 2, lambda: I >= 2, ["Const", "GreaterEqual"],
     "GreaterEqual", "bool", [4]),
    ("and", lambda x, i, b, m: b & (x > 0), lambda: B & (X > 0),
     ["Const", "Greater", "LogicalAnd"], "and", "bool", [4]),
    ("or_literal", lambda x, i, b, m: b | True, lambda: np.ones(4, bool), ["Const", "LogicalOr"],
     "or", "bool", [4]),
    ("xor", lambda x, i, b, m: b ^ (x > 0), lambda: B ^ (X > 0),
     ["Const", "Greater", "LogicalOr", "LogicalAnd", "LogicalNot", "LogicalAnd"], "xor", "bool",
     [4]),
    ("invert", lambda x, i, b, m: ~b, lambda: ~B, ["LogicalNot"], "LogicalNot", "bool", [4]),
    ("matmul_rank_2", lambda x, i, b, m: m @ ONES32, lambda: M @ ONES32, ["Const", "MatMul"],
     "matmul", "float32", [2, 2]),
    ("getitem_slices", lambda x, i, b, m: m[1:, ::-1], lambda: M[1:, ::-1],
     ["Const", "Const", "Const", "StridedSlice"], "strided_slice", "float32", [1, 3]),
    ("getitem_ellipsis_newaxis_negative", lambda x, i, b, m: m[..., None, -1],
     lambda: M[..., None, -1], ["Const", "Const", "Const", "StridedSlice"], "strided_slice",
     "float32", [2, 1]),
]  # fmt: skip

PARAMS = [pytest.param(*case[1:], id=case[0]) for case in CASES]


def _mg_inputs(scope):
    return [
        mg.Placeholder(scope.with_op_name(n), d, shape=s).output
        for n, d, s in (("x", mg.float32, [4]), ("i", mg.int32, [4]), ("b", mg.bool_, [4]),
                        ("m", mg.float32, [2, 3]))
    ]  # fmt: skip


def _build_ours(expression):
    scope = mg.Scope.new_root_scope()
    inputs = _mg_inputs(scope)
    before = len(scope.graph.as_graph_def().node)
    out = expression(*inputs)
    new = scope.graph.as_graph_def().node[before:]
    return scope, inputs, out, new


@pytest.mark.parametrize("expression, reference, types, name, dtype, shape", PARAMS)
def test_operators_build_tfs_ops(expression, reference, types, name, dtype, shape):
    scope, inputs, out, new = _build_ours(expression)
    assert [n.op for n in new] == types
    assert out.op.name == name and out.dtype.name == dtype and out.shape.as_list() == shape
    with mg.Session(scope) as session:
        got = session.run(out, dict(zip(inputs, (X, I, B, M))))
    want = np.asarray(reference())
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6) if got.dtype.kind == "f" else (
        np.testing.assert_array_equal(got, want)
    )


def test_matmul_of_higher_or_unknown_rank_is_batch_matmul():
    scope = mg.Scope.new_root_scope()
    m = mg.Placeholder(scope, mg.float32, shape=[2, 3]).output
    unknown = mg.Placeholder(scope, mg.float32).output
    batch = mg.Placeholder(scope, mg.float32, shape=[4, 3, 5]).output
    assert (unknown @ m).op.type == "BatchMatMulV2" and (unknown @ m).shape.rank is None
    assert (m @ batch).op.type == "BatchMatMulV2" and (m @ batch).shape.as_list() == [4, 2, 5]


def test_literals_take_the_tensors_dtype_or_are_refused():
    scope = mg.Scope.new_root_scope()
    i = mg.Placeholder(scope, mg.int64, shape=[2]).output
    h = mg.Placeholder(scope, mg.float16, shape=[2]).output
    assert (1 - i).dtype is mg.int64 and (h * 3).dtype is mg.float16
    with pytest.raises(mg.InvalidArgumentError):
        i + 1.5  # noqa: B018 - TF: "Cannot convert 1.5 to EagerTensor of dtype int64"
    with pytest.raises(mg.InvalidArgumentError, match="bool"):
        i & i  # noqa: B018 - logical operators take bool tensors only
    with pytest.raises(mg.InvalidArgumentError, match="bool"):
        ~i  # noqa: B018


def test_equality_stays_identity_and_outputs_are_keys():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.float32, shape=[2]).output
    y = mg.Placeholder(scope, mg.float32, shape=[2]).output
    assert (x == x) is True and (x == y) is False and (x != y) is True
    assert {x: 1, y: 2}[x] == 1
    assert ops.Equal(scope, x, y).output.op.type == "Equal"


def test_operators_on_single_output_builders_and_indexing_multi_output_ones():
    scope = mg.Scope.new_root_scope()
    logits = mg.Placeholder(scope, mg.float32, shape=[2, 3])
    labels = mg.Placeholder(scope, mg.int32, shape=[2])
    soft = ops.Softmax(scope, logits)
    assert (soft + 1).op.type == "AddV2" and (soft[0]).op.type == "StridedSlice"
    xent = ops.SparseSoftmaxCrossEntropyWithLogits(scope, logits, labels)
    assert xent[1] is xent.backprop and xent[0] is xent.loss  # selects an output
    assert (xent.loss * 2).op.type == "Mul"


# -- against TensorFlow itself ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize("expression, reference, types, name, dtype, shape", PARAMS)
def test_tf_builds_and_computes_the_same(expression, reference, types, name, dtype, shape, tf):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        inputs = [tf1.placeholder(d, s, name=n) for n, d, s in (
            ("x", tf.float32, [4]), ("i", tf.int32, [4]), ("b", tf.bool, [4]),
            ("m", tf.float32, [2, 3]))]  # fmt: skip
        before = len(graph.get_operations())
        out = expression(*inputs)
        new = graph.get_operations()[before:]
        with tf1.Session(graph=graph) as session:
            theirs = session.run(out, dict(zip(inputs, (X, I, B, M))))
    assert [o.type for o in new] == types
    assert (out.op.name, out.dtype.name, out.shape.as_list()) == (name, dtype, shape)
    scope, our_inputs, ours_out, _ = _build_ours(expression)
    with mg.Session(scope) as session:
        ours = session.run(ours_out, dict(zip(our_inputs, (X, I, B, M))))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)
