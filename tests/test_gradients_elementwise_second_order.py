"""Second-order gradients of the elementwise family: the gradient of the gradient against
central differences (of the first-order gradient, itself checked in
test_gradients_elementwise.py), for real and complex inputs; and the rules of TF's gradient
ops (ReluGrad, ..., ReciprocalGrad, Conj) themselves, with respect to both of their inputs.

A few rules build ops of ops/array.py (SelectV2, ZerosLike, OnesLike, Reshape): their second
order needs those ops' own rules, and is skipped, saying which, while they are missing."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph.testing import assert_gradients_close
from ops import math as M

RNG = np.random.default_rng(11)


def needs_rules(*op_types: str) -> None:
    missing = []
    for op_type in op_types:
        try:
            mg.registry.gradient_rule(op_type)
        except mg.NotFoundError:
            missing.append(op_type)
    if missing:
        pytest.skip(f"needs the gradient rules of {', '.join(missing)} (ops/array.py)")


def gradient_of(build, seed=None):
    """f(scope, *xs) = the sum of the gradients of build(scope, *xs) with respect to each x
    (seeded with `seed`, ones by default): differentiating f is the second order."""

    def f(scope, *xs):
        y = build(scope, *xs)
        grad_ys = None
        if seed is not None:
            grad_ys = mg.Const(scope, seed.astype(y.dtype.np_dtype))
        grads = mg.gradients(y, list(xs), grad_ys=grad_ys)
        total = grads[0]
        for g in grads[1:]:
            total = M.AddV2(scope, total, g)
        return total

    return f


def away_from(values, points, gap=0.1):
    out = values.copy()
    for p in points:
        near = np.abs(out - p) < gap
        out[near] = p + np.where(out[near] >= p, gap, -gap)
    return out


UNARY = {
    "Neg": lambda s: RNG.uniform(-2, 2, s),
    "Abs": lambda s: away_from(RNG.uniform(-2, 2, s), (0.0,)),
    "Square": lambda s: RNG.uniform(-2, 2, s),
    "Sqrt": lambda s: RNG.uniform(0.4, 3, s),
    "Rsqrt": lambda s: RNG.uniform(0.4, 3, s),
    "Reciprocal": lambda s: RNG.choice([-1.0, 1.0], s) * RNG.uniform(0.4, 2, s),
    "Exp": lambda s: RNG.uniform(-2, 2, s),
    "Log": lambda s: RNG.uniform(0.4, 3, s),
    "Log1p": lambda s: RNG.uniform(-0.5, 3, s),
    "Tanh": lambda s: RNG.uniform(-2, 2, s),
    "Sigmoid": lambda s: RNG.uniform(-3, 3, s),
    "Relu": lambda s: away_from(RNG.uniform(-2, 2, s), (0.0,)),
    "Relu6": lambda s: away_from(RNG.uniform(-2, 8, s), (0.0, 6.0)),
    "Elu": lambda s: away_from(RNG.uniform(-2, 2, s), (0.0,)),
    "Softplus": lambda s: RNG.uniform(-3, 3, s),
    "Sign": lambda s: away_from(RNG.uniform(-2, 2, s), (0.0,)),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_second_order_of_unary_ops(op, dtype):
    if op == "Sign":
        needs_rules("ZerosLike")
    x = UNARY[op]((2, 3)).astype(dtype)
    seed = RNG.uniform(0.5, 1.5, (2, 3))
    assert_gradients_close(gradient_of(lambda s, v: getattr(M, op)(s, v), seed), [x])


def binary_values(op, x_shape, y_shape):
    x, y = RNG.uniform(0.5, 2, x_shape), RNG.uniform(0.5, 2, y_shape)
    if op == "Maximum":
        x, y = RNG.uniform(0.5, 1.0, x_shape), RNG.choice([0.2, 1.8], y_shape)
    if op == "Minimum":
        x, y = RNG.uniform(0.5, 1.0, x_shape), RNG.choice([0.2, 1.8], y_shape)
    return x, y


BINARY_NEEDS = {
    "AddV2": (), "Sub": (), "Mul": (), "RealDiv": (), "Div": (), "SquaredDifference": (),
    "Pow": ("SelectV2", "OnesLike", "ZerosLike"), "Maximum": ("SelectV2",),
    "Minimum": ("SelectV2",), "FloorMod": (),
}  # fmt: skip


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3))], ids=str)
@pytest.mark.parametrize("op", sorted(BINARY_NEEDS))
def test_second_order_of_binary_ops(op, shapes):
    needs_rules(*BINARY_NEEDS[op])
    if op == "FloorMod":
        x = 4.0 * RNG.integers(-2, 3, shapes[0]) + RNG.uniform(0.3, 0.7, shapes[0])
        y = RNG.choice([-2.0, -1.0, 1.0, 2.0], shapes[1])
    else:
        x, y = binary_values(op, *shapes)
    out_shape = np.broadcast_shapes(*shapes)
    seed = RNG.uniform(0.5, 1.5, out_shape)
    assert_gradients_close(gradient_of(lambda s, a, b: getattr(M, op)(s, a, b), seed), [x, y])


def test_second_order_through_a_reshaping_reduction():
    # [4, 2, 3] against [2, 1]: the gradient of y sums away dim 0 and sums dim 2 to 1 (Sum and
    # Reshape); its own gradient goes back through both.
    needs_rules("Reshape")
    x, y = RNG.uniform(0.5, 2, (4, 2, 3)), RNG.uniform(0.5, 2, (2, 1))
    assert_gradients_close(gradient_of(lambda s, a, b: M.Mul(s, M.Mul(s, a, b), b)), [x, y])


COMPLEX = ["Neg", "Square", "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log", "Log1p", "Tanh",
           "Sigmoid", "Conj"]  # fmt: skip


@pytest.mark.parametrize("op", COMPLEX)
def test_second_order_of_complex_unary_ops(op):
    x = RNG.uniform(0.5, 2, (2, 2)) + 1j * RNG.uniform(-1, 1, (2, 2))
    seed = RNG.uniform(0.5, 1.5, (2, 2)) + 1j * RNG.uniform(-1, 1, (2, 2))
    assert_gradients_close(gradient_of(lambda s, v: getattr(M, op)(s, v), seed), [x])


@pytest.mark.parametrize("op", ["AddV2", "Sub", "Mul", "RealDiv", "SquaredDifference"])
def test_second_order_of_complex_binary_ops(op):
    x = RNG.uniform(0.5, 2, (2, 3)) + 1j * RNG.uniform(-1, 1, (2, 3))
    y = RNG.uniform(0.5, 2, (2, 3)) + 1j * RNG.uniform(-1, 1, (2, 3))
    seed = RNG.uniform(0.5, 1.5, (2, 3)) + 1j * RNG.uniform(-1, 1, (2, 3))
    assert_gradients_close(gradient_of(lambda s, a, b: getattr(M, op)(s, a, b), seed), [x, y])


def test_third_order_of_tanh():
    # The rules of TanhGrad build TanhGrad and Mul again: any order works.
    x = RNG.uniform(-1.5, 1.5, (3,))
    assert_gradients_close(gradient_of(gradient_of(lambda s, v: M.Tanh(s, v))), [x])


# -- the rules of TF's gradient ops, with respect to both inputs -------------------------------


def grad_op_values(op, shape, dtype=np.float64):
    """(first input, second input) in the op's domain: for the y-dy ops y is a value of the
    function (tanh in (-1, 1), ...), away from the kinks of the activation ones."""
    if op in ("ReluGrad", "Relu6Grad", "SoftplusGrad"):
        grads = RNG.uniform(-2, 2, shape)
        features = away_from(RNG.uniform(-2, 8, shape), (0.0, 6.0))
        return grads.astype(dtype), features.astype(dtype)
    if op == "EluGrad":
        outputs = away_from(RNG.uniform(-0.9, 2, shape), (0.0,))
        return RNG.uniform(-2, 2, shape).astype(dtype), outputs.astype(dtype)
    y = {"SigmoidGrad": RNG.uniform(0.1, 0.9, shape), "TanhGrad": RNG.uniform(-0.9, 0.9, shape)}
    y = y.get(op, RNG.uniform(0.4, 2.5, shape))
    dy = RNG.uniform(-2, 2, shape)
    if np.dtype(dtype).kind == "c":
        y = y + 1j * RNG.uniform(-0.5, 0.5, shape)
        dy = dy + 1j * RNG.uniform(-1, 1, shape)
    return y.astype(dtype), dy.astype(dtype)


GRAD_OPS = ["ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad", "SigmoidGrad", "TanhGrad",
            "RsqrtGrad", "SqrtGrad", "ReciprocalGrad"]  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op", GRAD_OPS)
def test_rules_of_the_gradient_ops_match_central_differences(op, dtype):
    a, b = grad_op_values(op, (2, 3), dtype)
    assert_gradients_close(lambda s, u, v: getattr(M, op)(s, u, v), [a, b])


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("op", ["SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad",
                                "ReciprocalGrad"])  # fmt: skip
def test_complex_rules_of_the_gradient_ops(op, dtype):
    # RsqrtGrad and ReciprocalGrad are antiholomorphic in y (conj(y) ** 3, ** 2): their rules
    # conjugate the incoming gradient for y, as TF's.
    a, b = grad_op_values(op, (2, 2), dtype)
    assert_gradients_close(lambda s, u, v: getattr(M, op)(s, u, v), [a, b])


def test_relu_second_order_is_zero_away_from_the_kink():
    # d/dx of relu'(x) * g is 0; the gradient with respect to the seed is relu'(x).
    def build(s, x, g):
        (dx,) = mg.gradients(M.Relu(s, x), x, grad_ys=g)
        return dx

    x = np.array([-1.0, 2.0, 0.5])
    root = mg.Scope.new_root_scope()
    px = mg.Placeholder(root, mg.float64, [3])
    pg = mg.Placeholder(root, mg.float64, [3])
    ddx, dg = mg.gradients(build(root, px, pg), [px, pg])
    with mg.Session(root) as sess:
        values = sess.run([g for g in (ddx, dg) if g is not None], {px: x, pg: np.ones(3)})
    if ddx is not None:
        assert values[0].tolist() == [0.0, 0.0, 0.0]
    assert values[-1].tolist() == [0.0, 1.0, 1.0]
