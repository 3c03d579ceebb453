"""Issue 21's coverage promise, as a table: every op type the op library registers has a
gradient rule or is declared `no_gradient`, and every rule is checked against central
differences (`assert_gradients_close`) by a row of CASES here whose forward graph really
contains an op of that type. A new op without a rule, or a new rule without a row, fails
`test_every_registered_op_is_covered`.

The rows are deliberately small (a few elements, float64, points away from kinks and ties);
the rules' conventions at kinks, broadcasting, sparse gradients and second order are tested
in the per-family files (tests/test_gradients_{elementwise,reduction,nn,array,gather,...}.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import minigraph as mg
import ops
from minigraph import Variable, registry
from minigraph.testing import assert_gradients_close

rng = np.random.default_rng(21)


def B(op_type: str) -> Any:  # noqa: N802 - a builder, by op type
    return registry.builder(op_type)


def v(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape)


def pos(*shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(*shape: int) -> np.ndarray:
    """Values in [-2, -0.5] U [0.5, 2]: clear of the kinks of Abs, Relu, Sign, Elu at 0."""
    return pos(*shape) * rng.choice([-1.0, 1.0], shape)


def distinct(*shape: int) -> np.ndarray:
    """Values whose elements differ by at least 0.1: no ties for Max, Min, Maximum."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.25 - n * 0.1).reshape(shape)


def cat(s: mg.Scope, outputs: list[Any]) -> Any:
    """One tensor from several: their flattened concatenation."""
    return ops.ConcatV2(s, [ops.Reshape(s, o, [-1]) for o in outputs], 0)


I32 = np.int32

# op type -> (f(scope, *xs), the xs' values). Each f builds a graph containing the op type.
Case = tuple[Callable[..., Any], list[np.ndarray]]
CASES: dict[str, Case] = {
    # elementwise, unary
    "Abs": (lambda s, x: ops.Abs(s, x), [away_from_zero(2, 3)]),
    "Neg": (lambda s, x: ops.Neg(s, x), [v(3)]),
    "Exp": (lambda s, x: ops.Exp(s, x), [v(3)]),
    "Log": (lambda s, x: ops.Log(s, x), [pos(3)]),
    "Log1p": (lambda s, x: ops.Log1p(s, x), [pos(3)]),
    "Sqrt": (lambda s, x: ops.Sqrt(s, x), [pos(3)]),
    "Rsqrt": (lambda s, x: ops.Rsqrt(s, x), [pos(3)]),
    "Reciprocal": (lambda s, x: ops.Reciprocal(s, x), [away_from_zero(3)]),
    "Square": (lambda s, x: ops.Square(s, x), [v(3)]),
    "Sigmoid": (lambda s, x: ops.Sigmoid(s, x), [v(3)]),
    "Tanh": (lambda s, x: ops.Tanh(s, x), [v(3)]),
    "Relu": (lambda s, x: ops.Relu(s, x), [away_from_zero(2, 3)]),
    "Relu6": (lambda s, x: ops.Relu6(s, x), [np.array([-1.0, 0.5, 3.0, 5.5, 7.0])]),
    "Elu": (lambda s, x: ops.Elu(s, x), [away_from_zero(2, 3)]),
    "Softplus": (lambda s, x: ops.Softplus(s, x), [v(3)]),
    "Sign": (lambda s, x: ops.Sign(s, x), [away_from_zero(3)]),
    "Floor": (lambda s, x: ops.Floor(s, x), [np.array([-1.3, 0.4, 2.7])]),
    "Ceil": (lambda s, x: ops.Ceil(s, x), [np.array([-1.3, 0.4, 2.7])]),
    "Round": (lambda s, x: ops.Round(s, x), [np.array([-1.3, 0.2, 2.7])]),
    "Conj": (
        lambda s, x: ops.Mul(s, ops.Conj(s, x), np.complex128(1 + 2j)),
        [v(3) + 1j * v(3)],
    ),
    # elementwise, binary (with broadcasting)
    "AddV2": (lambda s, x, y: ops.AddV2(s, x, y), [v(2, 3), v(3)]),
    "Sub": (lambda s, x, y: ops.Sub(s, x, y), [v(2, 3), v(2, 1)]),
    "Mul": (lambda s, x, y: ops.Mul(s, x, y), [v(2, 3), v(3)]),
    "Div": (lambda s, x, y: ops.Div(s, x, y), [v(2, 3), away_from_zero(3)]),
    "RealDiv": (lambda s, x, y: ops.RealDiv(s, x, y), [v(2, 3), away_from_zero(1, 3)]),
    "FloorDiv": (lambda s, x, y: ops.FloorDiv(s, x, y), [np.array([1.3, 2.6]), pos(2)]),
    "FloorMod": (
        lambda s, x, y: ops.FloorMod(s, x, y),
        [np.array([1.3, -2.6, 3.7]), np.array([1.0, 1.5, 2.0])],
    ),
    "Pow": (lambda s, x, y: ops.Pow(s, x, y), [pos(2, 3), v(3)]),
    "Maximum": (lambda s, x, y: ops.Maximum(s, x, y), [distinct(2, 3), distinct(3) + 0.05]),
    "Minimum": (lambda s, x, y: ops.Minimum(s, x, y), [distinct(2, 3), distinct(3) + 0.05]),
    "SquaredDifference": (lambda s, x, y: ops.SquaredDifference(s, x, y), [v(2, 3), v(3)]),
    "AddN": (lambda s, x, y: ops.AddN(s, [x, y, x]), [v(2, 2), v(2, 2)]),
    "Select": (
        lambda s, x, y: ops.Select(s, np.array([True, False, True]), x, y),
        [v(3), v(3)],
    ),
    "SelectV2": (
        lambda s, x, y: ops.SelectV2(s, np.array([[True], [False]]), x, y),
        [v(2, 3), v(3)],
    ),
    "Cast": (lambda s, x: ops.Cast(s, x, mg.float32), [v(3)]),
    # TF's gradient helper ops (their own rules make second order work)
    "ReluGrad": (lambda s, g, f: ops.ReluGrad(s, g, f), [v(4), away_from_zero(4)]),
    "Relu6Grad": (
        lambda s, g, f: ops.Relu6Grad(s, g, f),
        [v(4), np.array([-1.0, 0.5, 3.0, 7.0])],
    ),
    "EluGrad": (lambda s, g, y: ops.EluGrad(s, g, y), [v(4), np.array([-0.7, -0.2, 0.5, 2.0])]),
    "SoftplusGrad": (lambda s, g, f: ops.SoftplusGrad(s, g, f), [v(4), v(4)]),
    "SigmoidGrad": (lambda s, y, dy: ops.SigmoidGrad(s, y, dy), [v(4), v(4)]),
    "TanhGrad": (lambda s, y, dy: ops.TanhGrad(s, y, dy), [v(4), v(4)]),
    "RsqrtGrad": (lambda s, y, dy: ops.RsqrtGrad(s, y, dy), [v(4), v(4)]),
    "SqrtGrad": (lambda s, y, dy: ops.SqrtGrad(s, y, dy), [away_from_zero(4), v(4)]),
    "ReciprocalGrad": (lambda s, y, dy: ops.ReciprocalGrad(s, y, dy), [v(4), v(4)]),
    "BiasAddGrad": (lambda s, g: ops.BiasAddGrad(s, g), [v(2, 3, 4)]),
    "StridedSliceGrad": (
        lambda s, dy: B("StridedSliceGrad")(s, np.array([4, 3], I32), [1, 0], [4, 3], [2, 1], dy),
        [v(2, 3)],
    ),
    # reductions and scans
    "Sum": (lambda s, x: ops.Sum(s, x, [1]), [v(2, 3)]),
    "Mean": (lambda s, x: ops.Mean(s, x, [0], keep_dims=True), [v(2, 3)]),
    "Prod": (lambda s, x: ops.Prod(s, x, [1]), [away_from_zero(2, 3)]),
    "Max": (lambda s, x: ops.Max(s, x, [1]), [distinct(2, 3)]),
    "Min": (lambda s, x: ops.Min(s, x, [0]), [distinct(2, 3)]),
    "L2Loss": (lambda s, x: ops.L2Loss(s, x), [v(2, 3)]),
    "Cumsum": (lambda s, x: ops.Cumsum(s, x, 1, reverse=True), [v(2, 3)]),
    "Cumprod": (lambda s, x: ops.Cumprod(s, x, 0, exclusive=True), [away_from_zero(3, 2)]),
    # nn
    "MatMul": (lambda s, a, b: ops.MatMul(s, a, b, transpose_b=True), [v(2, 3), v(4, 3)]),
    "BatchMatMulV2": (lambda s, a, b: ops.BatchMatMulV2(s, a, b), [v(2, 2, 3), v(3, 2)]),
    "BiasAdd": (lambda s, x, b: ops.BiasAdd(s, x, b), [v(2, 3), v(3)]),
    "Softmax": (lambda s, x: ops.Softmax(s, x), [v(2, 3)]),
    "LogSoftmax": (lambda s, x: ops.LogSoftmax(s, x), [v(2, 3)]),
    "SoftmaxCrossEntropyWithLogits": (
        lambda s, x, p: ops.SoftmaxCrossEntropyWithLogits(s, x, p).loss,
        [v(2, 3), np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])],
    ),
    "SparseSoftmaxCrossEntropyWithLogits": (
        lambda s, x: ops.SparseSoftmaxCrossEntropyWithLogits(s, x, np.array([2, 0], I32)).loss,
        [v(2, 3)],
    ),
    # array
    "Identity": (lambda s, x: mg.Identity(s, x), [v(3)]),
    "EnsureShape": (lambda s, x: ops.EnsureShape(s, x, [2, 3]), [v(2, 3)]),
    "Reshape": (lambda s, x: ops.Reshape(s, x, [3, 2]), [v(2, 3)]),
    "ExpandDims": (lambda s, x: ops.ExpandDims(s, x, 1), [v(2, 3)]),
    "Squeeze": (lambda s, x: ops.Squeeze(s, x, squeeze_dims=[1]), [v(2, 1, 3)]),
    "Transpose": (lambda s, x: ops.Transpose(s, x, [2, 0, 1]), [v(2, 3, 2)]),
    "Tile": (lambda s, x: ops.Tile(s, x, [2, 1]), [v(2, 3)]),
    "BroadcastTo": (lambda s, x: ops.BroadcastTo(s, x, [2, 2, 3]), [v(1, 3)]),
    "Fill": (lambda s, x: ops.Fill(s, [2, 3], ops.Reshape(s, x, [])), [v(1)]),
    "Slice": (lambda s, x: ops.Slice(s, x, [1, 0], [1, -1]), [v(3, 3)]),
    "StridedSlice": (lambda s, x: ops.StridedSlice(s, x, [2, 0], [0, 3], [-1, 2]), [v(3, 3)]),
    "ConcatV2": (lambda s, x, y: ops.ConcatV2(s, [x, y], 1), [v(2, 3), v(2, 1)]),
    "Pack": (lambda s, x, y: ops.Pack(s, [x, y], axis=1), [v(2, 3), v(2, 3)]),
    "Unpack": (lambda s, x: cat(s, ops.Unpack(s, x, 3, axis=1).outputs[::2]), [v(2, 3)]),
    # gathers, scatters, partition, segments
    "GatherV2": (lambda s, x: ops.GatherV2(s, x, np.array([2, 0, 2], I32), 0), [v(3, 2)]),
    "GatherNd": (lambda s, x: ops.GatherNd(s, x, np.array([[1, 0], [1, 0]], I32)), [v(2, 3)]),
    "ScatterNd": (
        lambda s, u: ops.ScatterNd(s, np.array([[1], [0], [1]], I32), u, np.array([3, 2], I32)),
        [v(3, 2)],
    ),
    "UnsortedSegmentSum": (
        lambda s, x: ops.UnsortedSegmentSum(s, x, np.array([2, 0, 2], I32), 4),
        [v(3, 2)],
    ),
    "DynamicPartition": (
        lambda s, x: cat(s, ops.DynamicPartition(s, x, np.array([1, 0, 1], I32), 3).outputs),
        [v(3, 2)],
    ),
    # duplicate stitch indices: only the winner (the later data) gets gradient
    "DynamicStitch": (
        lambda s, x, y: ops.DynamicStitch(
            s, [np.array([0, 2], I32), np.array([2, 1], I32)], [x, y]
        ),
        [v(2, 2), v(2, 2)],
    ),
    "ParallelDynamicStitch": (
        lambda s, x, y: ops.ParallelDynamicStitch(
            s, [np.array([0, 2], I32), np.array([3, 1], I32)], [x, y]
        ),
        [v(2, 2), v(2, 2)],
    ),
}

# Rules checked elsewhere against central differences, with the reason they cannot be a row:
# a variable's value is not a placeholder the checker can perturb.
CHECKED_ELSEWHERE = {
    "ReadVariableOp": "test_variable_rules_match_central_differences",
    "ResourceGather": "test_variable_rules_match_central_differences",
}

# TF's NotDifferentiable ops (and the runtime's framework ops): declared `no_gradient`.
NOT_DIFFERENTIABLE = {
    "All", "Any", "ArgMax", "ArgMin", "Assert", "BroadcastGradientArgs", "Const", "Equal",
    "Greater", "GreaterEqual", "InvertPermutation", "Less", "LessEqual", "LogicalAnd",
    "LogicalNot", "LogicalOr", "NoOp", "NotEqual", "OneHot", "OnesLike", "Placeholder", "Range",
    "Rank", "Shape", "Size", "StopGradient", "ZerosLike",
    # variables and their updates: a gradient reaches a variable through its reads
    "AssignAddVariableOp", "AssignSubVariableOp", "AssignVariableOp", "DestroyResourceOp",
    "ResourceApplyAdagrad", "ResourceApplyAdam", "ResourceApplyGradientDescent",
    "ResourceApplyMomentum", "ResourceScatterAdd", "ResourceScatterSub",
    "ResourceScatterUpdate", "ResourceSparseApplyAdagrad", "ResourceSparseApplyMomentum",
    "VarHandleOp", "VarIsInitializedOp", "VariableShape",
}  # fmt: skip


# Ops TF registers neither a gradient nor NotDifferentiable for: a gradient through them is
# TF's LookupError, here a NotFoundError (also a LookupError) naming the node.
WITHOUT_RULE_AS_IN_TF = {
    "Unique": "the optimizers' deduplication of sparse gradients (ops/resource_variables.py)",
}


def _kind(op_type: str) -> str:
    if op_type not in registry.list_ops():
        return "unregistered"
    try:
        rule = registry.gradient_rule(op_type)
    except mg.NotFoundError:
        return "missing"
    return "rule" if rule.fn is not None else "no_gradient"


def _library_op_types() -> list[str]:
    """The op types of the runtime and the op library alone, listed in a fresh interpreter
    (this process also holds the test modules' own ops)."""
    code = "import ops\nfrom minigraph import registry\nprint(*registry.list_ops())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return result.stdout.split()


def test_every_registered_op_is_covered():
    """Every op of the library has a rule with a numeric check here, or is no_gradient."""
    problems = []
    library = _library_op_types()
    assert "GatherV2" in library and "Placeholder" in library
    for op_type in sorted(library):
        kind = _kind(op_type)
        if kind == "missing" and op_type not in WITHOUT_RULE_AS_IN_TF:
            problems.append(f"{op_type}: neither a gradient rule nor no_gradient")
        elif kind == "rule" and op_type not in CASES and op_type not in CHECKED_ELSEWHERE:
            problems.append(f"{op_type}: a rule without a numeric check (add a row to CASES)")
        elif kind == "no_gradient" and op_type not in NOT_DIFFERENTIABLE:
            problems.append(f"{op_type}: no_gradient, but TF differentiates it")
    assert not problems, "\n".join(problems)


def test_the_table_names_only_what_is_registered():
    for op_type in CASES:
        assert _kind(op_type) == "rule", op_type
    for op_type in CHECKED_ELSEWHERE:
        assert _kind(op_type) == "rule", op_type
    for op_type in NOT_DIFFERENTIABLE:
        assert _kind(op_type) == "no_gradient", op_type
    for op_type in WITHOUT_RULE_AS_IN_TF:
        assert _kind(op_type) in ("missing", "unregistered"), op_type


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_rule_matches_central_differences(op_type):
    f, values = CASES[op_type]
    graphs = []

    def recorded(s, *xs):
        graphs.append(s.graph)
        return f(s, *xs)

    assert_gradients_close(recorded, [np.array(x) for x in values])
    # The row really exercises the op type (in the graph differentiated, not only elsewhere).
    assert any(op.type == op_type for g in graphs for op in g.operations), op_type


def _variable_loss(values: np.ndarray, weights: np.ndarray, read: str) -> float:
    """sum(weights * read(v)) for a variable v holding `values`, run in a fresh graph."""
    root = mg.Scope.new_root_scope()
    var = Variable(root, values, name="v")
    rows = ops.gather(root, var, np.array([2, 0, 2], I32)) if read == "gather" else var.value()
    loss = ops.Sum(root, ops.Mul(root, rows, weights), list(range(weights.ndim)))
    with mg.Session(root) as sess:
        sess.run(var.initializer)
        return float(sess.run(loss))


@pytest.mark.parametrize(
    "read, op_type", [("value", "ReadVariableOp"), ("gather", "ResourceGather")]
)
def test_variable_rules_match_central_differences(read, op_type):
    values = v(3, 2)
    weights = v(3, 2)
    root = mg.Scope.new_root_scope()
    var = Variable(root, values, name="v")
    rows = ops.gather(root, var, np.array([2, 0, 2], I32)) if read == "gather" else var.value()
    assert mg.builder.as_output(rows).op.type == op_type
    loss = ops.Sum(root, ops.Mul(root, rows, weights), [0, 1])
    (grad,) = mg.gradients(loss, var)
    assert isinstance(grad, mg.IndexedSlices) == (read == "gather")
    with mg.Session(root) as sess:
        sess.run(var.initializer)
        got = sess.run(grad)
    if read == "gather":
        dense = np.zeros_like(values)
        np.add.at(dense, got.indices, got.values)
        got = dense
    delta = 1.0 / 1024
    numeric = np.zeros_like(values)
    for i in np.ndindex(values.shape):
        up, down = values.copy(), values.copy()
        up[i] += delta
        down[i] -= delta
        numeric[i] = (_variable_loss(up, weights, read) - _variable_loss(down, weights, read)) / (
            2 * delta
        )
    np.testing.assert_allclose(got, numeric, rtol=1e-9, atol=1e-9)
