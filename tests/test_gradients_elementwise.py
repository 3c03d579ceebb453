"""The gradient rules of the elementwise family (ops/math.py): every rule against the numeric
Jacobian (minigraph.testing, float64 and float32, complex where the op takes it), TF's
conventions at kinks and ties with exact values, the ops without gradients (None), integer and
bool tensors (None), Cast and AddN, and sparse gradients passing through Neg, Conj, Cast and
AddN. Broadcasting (sum_to, broadcast_gradients, shapes known at run time) is in
test_gradients_elementwise_broadcast.py, second order in ..._second_order.py, the gradient ops'
kernels in ..._ops.py, TF itself in ..._tf.py."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph.testing import assert_gradients_close, compute_gradient
from ops import gather
from ops import math as M

RNG = np.random.default_rng(2024)


def away_from(values: np.ndarray, points: tuple[float, ...], gap: float = 0.05) -> np.ndarray:
    """`values` moved at least `gap` away from each of `points` (kinks, where central
    differences straddle two slopes)."""
    out = values.copy()
    for p in points:
        near = np.abs(out - p) < gap
        out[near] = p + np.where(out[near] >= p, gap, -gap)
    return out


def uniform(low: float, high: float, shape: tuple[int, ...]) -> np.ndarray:
    return RNG.uniform(low, high, shape)


def nonzero(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.choice([-1.0, 1.0], shape) * RNG.uniform(0.4, 2.5, shape)


# op -> a sample of its domain, away from kinks and singularities (float64).
UNARY_DOMAINS = {
    "Neg": lambda s: uniform(-3, 3, s),
    "Abs": lambda s: away_from(uniform(-3, 3, s), (0.0,)),
    "Sign": lambda s: away_from(uniform(-3, 3, s), (0.0,)),
    "Square": lambda s: uniform(-3, 3, s),
    "Sqrt": lambda s: uniform(0.3, 3, s),
    "Rsqrt": lambda s: uniform(0.3, 3, s),
    "Reciprocal": nonzero,
    "Exp": lambda s: uniform(-2, 2, s),
    "Log": lambda s: uniform(0.3, 3, s),
    "Log1p": lambda s: uniform(-0.6, 3, s),
    "Tanh": lambda s: uniform(-2, 2, s),
    "Sigmoid": lambda s: uniform(-4, 4, s),
    "Relu": lambda s: away_from(uniform(-3, 3, s), (0.0,)),
    "Relu6": lambda s: away_from(uniform(-2, 8, s), (0.0, 6.0)),
    "Elu": lambda s: away_from(uniform(-3, 3, s), (0.0,)),
    "Softplus": lambda s: uniform(-4, 4, s),
}


def binary_domain(op: str, x_shape, y_shape) -> tuple[np.ndarray, np.ndarray]:
    """x and y of these shapes in op's domain, away from its kinks for every broadcast pair."""
    if op in ("RealDiv", "Div"):
        return uniform(-3, 3, x_shape), nonzero(y_shape)
    if op == "Pow":
        return uniform(0.3, 2.5, x_shape), uniform(-2, 2, y_shape)
    if op == "FloorMod":
        # y in {+-1, +-2}, x = 4k + r with r in [0.3, 0.7]: x / y is at least 0.15 from an
        # integer for every pair, so floor(x / y) is constant around each point.
        y = RNG.choice([-2.0, -1.0, 1.0, 2.0], y_shape)
        x = 4.0 * RNG.integers(-2, 3, x_shape) + RNG.uniform(0.3, 0.7, x_shape)
        return x, y
    if op in ("Maximum", "Minimum"):
        # x on the grid k + 0.25, y on k + 0.75 (+- 0.1): every pair at least 0.3 apart.
        x = RNG.integers(-3, 3, x_shape) + 0.25 + RNG.uniform(-0.1, 0.1, x_shape)
        y = RNG.integers(-3, 3, y_shape) + 0.75 + RNG.uniform(-0.1, 0.1, y_shape)
        return x, y
    return uniform(-3, 3, x_shape), uniform(-3, 3, y_shape)


BINARY = ["AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "Pow",
          "SquaredDifference", "FloorMod"]  # fmt: skip
SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), (2, 3)), ((2, 1), (1, 3)), ((), (2,)),
          ((4, 1, 3), (2, 1))]  # fmt: skip


def unary(op: str):
    return lambda s, x: getattr(M, op)(s, x)


def binary(op: str):
    return lambda s, x, y: getattr(M, op)(s, x, y)


def grad_values(build, *values, grad_ys=None):
    """The gradients of `build(scope, *placeholders)` with respect to each placeholder, run:
    a list (None for no gradient)."""
    root = mg.Scope.new_root_scope()
    phs = [mg.Placeholder(root, mg.as_dtype(np.asarray(v).dtype), np.shape(v)) for v in values]
    y = build(root, *phs)
    grads = mg.gradients(y, phs, grad_ys=grad_ys)
    with mg.Session(root) as sess:
        feeds = dict(zip(phs, values))
        return [None if g is None else sess.run(g, feeds) for g in grads]


# -- every rule against central differences ------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op", sorted(UNARY_DOMAINS))
def test_unary_rules_match_central_differences(op, dtype):
    x = UNARY_DOMAINS[op]((2, 3)).astype(dtype)
    assert_gradients_close(unary(op), [x])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", BINARY)
def test_binary_rules_match_central_differences(op, shapes, dtype):
    x, y = binary_domain(op, *shapes)
    theoretical, _ = assert_gradients_close(binary(op), [x.astype(dtype), y.astype(dtype)])
    assert [t.shape[1] for t in theoretical] == [x.size, y.size]  # reduced to each operand


@pytest.mark.parametrize("op", ["Mul", "Tanh", "SquaredDifference", "Sigmoid", "Maximum"])
def test_half_precision_rules(op):
    shape = (2, 3)
    if op in ("Tanh", "Sigmoid"):
        args = [UNARY_DOMAINS[op](shape)]
    else:
        args = list(binary_domain(op, shape, (3,)))
    for dtype in (mg.float16, mg.bfloat16):
        assert_gradients_close(
            unary(op) if len(args) == 1 else binary(op), [a.astype(dtype.np_dtype) for a in args]
        )


def complex_values(shape, low=0.4, high=2.0):
    return RNG.uniform(low, high, shape) + 1j * RNG.uniform(-1.0, 1.0, shape)


COMPLEX_UNARY = ["Neg", "Square", "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log", "Log1p",
                 "Tanh", "Sigmoid", "Conj"]  # fmt: skip
COMPLEX_BINARY = ["AddV2", "Sub", "Mul", "RealDiv", "Div", "Pow", "SquaredDifference"]


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("op", COMPLEX_UNARY)
def test_complex_unary_rules_follow_tf_conjugation(op, dtype):
    # TF's convention: the gradient of a real loss L is dL/d(re x) + i dL/d(im x); the checker
    # builds the Jacobian of real and imaginary parts from it, as TF's checker does.
    assert_gradients_close(unary(op), [complex_values((2, 2)).astype(dtype)])


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("op", COMPLEX_BINARY)
def test_complex_binary_rules_follow_tf_conjugation(op, dtype):
    x, y = complex_values((2, 3)), complex_values((3,))
    assert_gradients_close(binary(op), [x.astype(dtype), y.astype(dtype)])


def test_complex_squared_difference_takes_only_the_real_part_of_its_gradient():
    # z = |x - y|^2 is real: an imaginary upstream gradient reaches neither operand (TF's rule
    # 2 * grad * (x - y) would send 2j * (x - y)); a real one gives 2 re(grad) (x - y).
    x = np.array([1 + 2j, -1j])
    y = np.array([0.5 - 1j, 2 + 0j])
    for seed, want in ((np.array([1j, 1j]), 0 * x), (np.array([3 + 0j, 1 + 0j]), None)):
        gx, gy = grad_values(binary("SquaredDifference"), x, y, grad_ys=seed)
        expected = 2 * seed.real * (x - y) if want is None else want
        np.testing.assert_allclose(gx, expected, atol=1e-12)
        np.testing.assert_allclose(gy, -expected, atol=1e-12)


def test_complex_sign_has_zero_gradient_as_in_tf():
    # TF's rule for Sign is zeros, for complex x too (where x / |x| is not constant).
    (g,) = grad_values(unary("Sign"), np.array([1 + 1j, -2j]), grad_ys=np.array([1 + 0j, 1j]))
    assert g.tolist() == [0j, 0j]


# -- kinks and ties: TF's conventions, exact values -----------------------------------------


def test_abs_relu_relu6_have_gradient_zero_at_their_kinks():
    x = np.array([-0.0, 0.0, 6.0, -1.0, 1.0, 7.0], np.float32)
    (abs_g,) = grad_values(unary("Abs"), x)
    (relu_g,) = grad_values(unary("Relu"), x)
    (relu6_g,) = grad_values(unary("Relu6"), x)
    assert abs_g.tolist() == [0.0, 0.0, 1.0, -1.0, 1.0, 1.0]
    assert relu_g.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert relu6_g.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]


def test_elu_has_gradient_one_at_zero():
    x = np.array([0.0, -0.0, -1.0, 2.0])
    (g,) = grad_values(unary("Elu"), x)
    assert g.tolist()[:2] == [1.0, 1.0] and g[3] == 1.0
    assert g[2] == pytest.approx(np.exp(-1.0), rel=1e-15)


@pytest.mark.parametrize("op, tied", [("Maximum", True), ("Minimum", True)])
def test_maximum_minimum_send_a_tie_to_x(op, tied):
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 0.0, 5.0])
    gx, gy = grad_values(binary(op), x, y)
    x_wins = x >= y if op == "Maximum" else x <= y
    assert gx.tolist() == x_wins.astype(float).tolist()
    assert gy.tolist() == (~x_wins).astype(float).tolist()
    assert gx[0] == 1.0 and gy[0] == 0.0  # the tie
    # Broadcast: a scalar y tied with two elements of x gets the gradient of the others only.
    gx, gy = grad_values(binary(op), np.array([2.0, 2.0, 9.0 if op == "Maximum" else -9.0]),
                         np.array(2.0))  # fmt: skip
    assert gx.tolist() == [1.0, 1.0, 1.0] and gy.shape == () and gy == 0.0


def test_maximum_and_minimum_with_nan_follow_tf():
    # TF's masks x >= y / x <= y are false for NaN: the gradient goes to y.
    gx, gy = grad_values(binary("Maximum"), np.array([np.nan, 1.0]), np.array([0.0, np.nan]))
    assert gx.tolist() == [0.0, 0.0] and gy.tolist() == [1.0, 1.0]


def test_pow_gradient_of_the_exponent_is_zero_where_the_base_is_not_positive():
    x = np.array([0.0, -2.0, -3.0, 2.0, 0.0])
    y = np.array([2.0, 2.0, 3.0, 3.0, 0.5])
    gx, gy = grad_values(binary("Pow"), x, y)
    assert gy.tolist()[:3] == [0.0, 0.0, 0.0]  # base <= 0: 0, not log of a non-positive
    assert gy[3] == pytest.approx(8 * np.log(2.0), rel=1e-15)
    assert gy[4] == 0.0
    # d/dx x^y = y x^(y-1): 0 at 0 and -4 at -2 for y = 2, 27 at -3 for y = 3, inf at 0 for
    # y = 0.5.
    assert gx.tolist()[:4] == [0.0, -4.0, 27.0, 12.0] and gx[4] == np.inf


def test_pow_of_a_negative_base_to_a_fractional_exponent_is_nan_as_in_tf():
    # x ** y is NaN there, and so is its gradient with respect to x; TF's exponent gradient is
    # conj(z) * 0 = NaN too.
    gx, gy = grad_values(binary("Pow"), np.array([-2.0]), np.array([0.5]))
    assert np.isnan(gx[0]) and np.isnan(gy[0])


def test_complex_pow_exponent_gradient_is_zero_only_at_zero():
    # Complex x: the mask is x != 0 (negative reals have a complex logarithm).
    x = np.array([0j, -2 + 0j])
    y = np.array([2 + 0j, 2 + 0j])
    gx, gy = grad_values(binary("Pow"), x, y, grad_ys=np.ones(2, np.complex128))
    assert gy[0] == 0
    z = np.exp(y[1] * np.log(x[1]))
    assert gy[1] == pytest.approx(np.conj(z) * np.log(np.conj(x[1])), rel=1e-12)


def test_sqrt_rsqrt_reciprocal_gradients_at_zero():
    # TF's SqrtGrad/RsqrtGrad/ReciprocalGrad: the formula (inf at 0 for Sqrt, -inf for
    # Reciprocal), but 0 wherever the incoming gradient is 0.
    x = np.array([0.0, 4.0])
    (s,) = grad_values(unary("Sqrt"), x)
    assert s.tolist() == [np.inf, 0.25]
    (s0,) = grad_values(unary("Sqrt"), x, grad_ys=np.array([0.0, 1.0]))
    assert s0.tolist() == [0.0, 0.25]
    (r,) = grad_values(unary("Reciprocal"), x, grad_ys=np.array([0.0, 2.0]))
    assert r.tolist() == [0.0, -2.0 / 16]
    (q,) = grad_values(unary("Rsqrt"), x, grad_ys=np.array([0.0, 1.0]))
    assert q.tolist() == [0.0, -0.5 * 0.5**3]


def test_sign_has_zero_gradient_and_floor_ceil_round_floordiv_have_none():
    (g,) = grad_values(unary("Sign"), np.array([-1.5, 0.0, 2.0]))
    assert g.tolist() == [0.0, 0.0, 0.0]
    for op in ("Floor", "Ceil", "Round"):
        assert grad_values(unary(op), np.array([0.5, 1.5])) == [None], op
        zeros = grad_values_zero(unary(op), np.array([0.5, 1.5]))
        assert zeros[0].tolist() == [0.0, 0.0]
    assert grad_values(binary("FloorDiv"), np.array([3.0]), np.array([2.0])) == [None, None]


def grad_values_zero(build, *values):
    root = mg.Scope.new_root_scope()
    phs = [mg.Placeholder(root, mg.as_dtype(np.asarray(v).dtype), np.shape(v)) for v in values]
    grads = mg.gradients(build(root, *phs), phs, unconnected_gradients="zero")
    with mg.Session(root) as sess:
        return sess.run(grads, dict(zip(phs, values)))


# -- what has no gradient --------------------------------------------------------------------

NOT_DIFFERENTIABLE = ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
                      "LogicalAnd", "LogicalOr", "LogicalNot", "BroadcastGradientArgs",
                      "Range"]  # fmt: skip


@pytest.mark.parametrize("op", NOT_DIFFERENTIABLE)
def test_ops_tf_marks_not_differentiable_are_declared_so(op):
    assert mg.registry.gradient_rule(op).fn is None


def test_every_op_of_the_module_has_a_rule_or_is_declared_not_differentiable():
    names = [row.name for row in M.ELEMENTWISE_OPS + M.GRADIENT_OPS]
    for op in names + ["AddN", "Cast", "Range", "BroadcastGradientArgs"]:
        mg.registry.gradient_rule(op)  # raises NotFoundError when neither


def test_comparisons_pass_no_gradient_to_their_operands():
    # y = x * cast(x > c): only the direct path carries a gradient.
    def build(s, x):
        mask = M.Cast(s, M.Greater(s, x, 0.5), mg.float64)
        return M.Mul(s, x, mask)

    (g,) = grad_values(build, np.array([0.2, 0.9]))
    assert g.tolist() == [0.0, 1.0]
    # Range, with float bounds from x: none.
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [])
    r = M.Range(root, x, 5.0, 1.0)
    assert mg.gradients(r, x) == [None]


@pytest.mark.parametrize("dtype", [mg.int32, mg.int64, mg.uint8, mg.int8])
def test_integer_tensors_carry_no_gradient(dtype):
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, dtype, [3])
    y = mg.Placeholder(root, dtype, [3])
    for z in (M.Mul(root, x, y), M.AddV2(root, x, y), M.Div(root, x, y), M.Square(root, x),
              M.Maximum(root, x, y), M.FloorMod(root, x, y)):  # fmt: skip
        assert mg.gradients(z, [x, y]) == [None, None]
    # A float function of an integer tensor: still none for the integer one.
    f = M.Cast(root, x, mg.float32)
    assert mg.gradients(M.Square(root, f), x) == [None]


def test_bool_tensors_carry_no_gradient():
    root = mg.Scope.new_root_scope()
    b = mg.Placeholder(root, mg.bool_, [2])
    x = mg.Placeholder(root, mg.float32, [2])
    y = M.Mul(root, M.Cast(root, M.LogicalNot(root, b), mg.float32), x)
    assert mg.gradients(y, [b, x])[0] is None


# -- Cast, AddN --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src, dst",
    [
        (np.float32, np.float64),
        (np.float64, np.float32),
        (np.float32, np.float16),
        (np.float64, np.complex128),
        (np.complex64, np.complex128),
        (np.complex128, np.float64),
        (np.float32, mg.bfloat16.np_dtype),
    ],  # fmt: skip
)
def test_cast_between_float_and_complex_types_casts_the_gradient_back(src, dst):
    dst_type = mg.as_dtype(dst)
    complex_src = np.dtype(src).kind == "c"
    if dst_type.is_complex:
        # A complex y needs grad_ys: check the real-valued |cast(x)|^2 instead.
        def build(s, v):
            c = M.Cast(s, v, dst_type)
            return M.Cast(s, M.Mul(s, c, M.Conj(s, c)), mg.float64)

        delta = None
        x = RNG.uniform(-2, 2, (2, 2)) + (1j * RNG.uniform(-1, 1, (2, 2)) if complex_src else 0)
    else:
        # y = 3 cast(x), at x on a grid of 1/8 with steps of 1/8: exact in every dtype, so
        # the differences of a narrowing cast are exact too.
        def build(s, v):
            return M.Mul(s, M.Cast(s, v, dst_type), 3)

        delta = 0.125
        x = RNG.integers(-12, 12, (2, 2)) / 8 + (1j * RNG.integers(-8, 8, (2, 2)) / 8
                                                 if complex_src else 0)  # fmt: skip
    x = x.astype(src)
    theoretical, _ = assert_gradients_close(build, [x], delta=delta)
    assert theoretical[0].shape[1] == x.size * (2 if complex_src else 1)
    (g,) = grad_values(build, x)
    assert g.dtype == np.dtype(src)


def test_complex_to_real_cast_passes_the_real_gradient_only():
    # y = re(x): dy/d(re x) = 1, dy/d(im x) = 0, so the gradient is grad + 0j.
    (g,) = grad_values(lambda s, v: M.Cast(s, v, mg.float64), np.array([1 + 2j, 3 - 1j]),
                       grad_ys=np.array([2.0, -1.0]))  # fmt: skip
    assert g.tolist() == [2 + 0j, -1 + 0j]


def test_cast_to_and_from_integers_has_no_gradient():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [2])
    i = M.Cast(root, x, mg.int32)
    back = M.Cast(root, i, mg.float32)
    assert mg.gradients(M.Square(root, back), x) == [None]
    assert mg.gradients(i, x) == [None]  # an integer y: nothing flows
    bools = M.Cast(root, M.Cast(root, x, mg.bool_), mg.float32)
    assert mg.gradients(bools, x) == [None]


def test_add_n_sends_its_gradient_to_every_input():
    def build(s, a, b):
        return M.AddN(s, [a, b, a, M.Mul(s, b, b)])

    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    ga, gb = grad_values(build, a, b, grad_ys=np.array([2.0, 5.0]))
    assert ga.tolist() == [4.0, 10.0]  # twice
    assert gb.tolist() == [2.0 * (1 + 2 * 3.0), 5.0 * (1 + 2 * -1.0)]
    assert_gradients_close(build, [a, b])


# -- sparse gradients stay sparse through Neg, Conj, Cast and AddN ------------------------------


@pytest.mark.parametrize("through", ["Neg", "Cast", "AddN", "Conj"])
def test_sparse_gradients_pass_through_sparsely(through):
    root = mg.Scope.new_root_scope()
    dtype = mg.complex64 if through == "Conj" else mg.float32
    params = mg.Placeholder(root, dtype, [5, 2])
    if through == "Neg":
        mid = M.Neg(root, params)
    elif through == "Conj":
        mid = M.Conj(root, params)
    elif through == "Cast":
        mid = M.Cast(root, params, mg.float64)
    else:
        mid = M.AddN(root, [params, params])
    rows = gather(root, mid, [3, 1, 3])
    seed = np.arange(6).reshape(3, 2).astype(rows.dtype.np_dtype) + (1j if through == "Conj" else 0)
    (g,) = mg.gradients(rows, params, grad_ys=seed)
    if through == "AddN":
        # Each input of AddN gets the sparse gradient; both reach params: concatenated.
        assert isinstance(g, mg.IndexedSlices)
    else:
        assert isinstance(g, mg.IndexedSlices) and g.values.dtype is dtype
    with mg.Session(root) as sess:
        value = sess.run(mg.convert_to_tensor(g), {params: np.ones((5, 2), dtype.np_dtype)})
    dense = np.zeros((5, 2), seed.dtype)
    np.add.at(dense, [3, 1, 3], seed)
    want = {"Neg": -dense, "Conj": np.conj(dense), "Cast": dense, "AddN": 2 * dense}[through]
    np.testing.assert_allclose(value, want.astype(value.dtype))


def test_compute_gradient_shapes_for_broadcast_operands():
    # The Jacobian with respect to a broadcast operand has one column per element of it.
    theoretical, numerical = compute_gradient(binary("Mul"), [np.ones((2, 3)), np.ones((1, 3))])
    assert theoretical[1].shape == (6, 3)
    np.testing.assert_allclose(theoretical[1], numerical[1], atol=1e-9)
