"""minigraph.testing's gradient checker (TF's tf.test.compute_gradient) on functions whose
Jacobians are known in closed form, and its failure reports."""

from __future__ import annotations

import _grad_ops as g
import numpy as np
import pytest

import minigraph as mg
import ops  # noqa: F401 - the library ops the gradient graphs use (AddN)
from minigraph.op_def import OpDef
from minigraph.testing import (
    assert_gradients_close,
    compute_gradient,
    compute_gradient_error,
    gradient_checker,
    max_error,
)


def test_known_jacobians_of_an_elementwise_function():
    x = np.array([1.0, -2.0, 0.5], np.float32)
    (theoretical,), (numerical,) = compute_gradient(lambda s, v: g.Square(s, v), [x])
    assert theoretical.dtype == numerical.dtype == np.float64
    np.testing.assert_array_equal(theoretical, np.diag(2 * x.astype(np.float64)))
    np.testing.assert_allclose(numerical, np.diag(2 * x.astype(np.float64)), atol=1e-9)


def test_jacobians_are_y_size_by_x_size_for_each_argument():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    w = np.full((2, 3), 2.0)
    (jx, jw), (nx, nw) = compute_gradient(lambda s, a, b: g.Mul(s, a, b), [x, w])
    np.testing.assert_array_equal(jx, np.diag(w.ravel()))
    np.testing.assert_array_equal(jw, np.diag(x.ravel()))
    np.testing.assert_allclose(nx, jx, atol=1e-9)
    (js,), (ns,) = compute_gradient(lambda s, a: g.Sum(s, a), [x])
    assert js.shape == (1, 6)
    np.testing.assert_array_equal(js, np.ones((1, 6)))
    (_, jv), _ = compute_gradient(lambda s, a, v: g.FillLike(s, a, v), [x, np.float64(3.0)])
    assert jv.shape == (6, 1)
    np.testing.assert_array_equal(jv, np.ones((6, 1)))


def test_sparse_gradients_are_densified_with_repeated_indices_added():
    ids = np.array([2, 0, 2], np.int32)
    params = np.arange(6, dtype=np.float32).reshape(3, 2)
    (theoretical,), (numerical,) = compute_gradient(lambda s, p: g.Gather(s, p, ids), [params])
    expected = np.zeros((6, 6))
    for row, i in enumerate(ids):  # y[row, k] = params[i, k]
        for k in range(2):
            expected[2 * row + k, 2 * i + k] = 1.0
    np.testing.assert_array_equal(theoretical, expected)
    np.testing.assert_allclose(numerical, expected, atol=1e-9)
    assert_gradients_close(lambda s, p: g.Sum(s, g.Square(s, g.Gather(s, p, ids))), [params])


def test_complex_values_count_twice():
    # Identity of a complex vector: the Jacobian of (re, im) pairs is the identity.
    x = np.array([1 + 2j, -1j], np.complex64)
    (theoretical,), (numerical,) = compute_gradient(lambda s, v: mg.Identity(s, v), [x])
    np.testing.assert_array_equal(theoretical, np.eye(4))
    np.testing.assert_allclose(numerical, np.eye(4), atol=1e-9)


def test_low_precision_rules_are_checked_against_float64_differences():
    x = np.array([0.3, 1.7, -2.2], np.float16)
    result = gradient_checker._compute(lambda s, v: g.Exp(s, v), [x], None)
    assert result.numeric_dtype is None  # f built again over float64
    exact = np.diag(np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(result.numerical[0], exact, rtol=1e-6)  # float64-accurate
    np.testing.assert_allclose(result.theoretical[0], exact, rtol=2e-3)  # float16-accurate
    assert_gradients_close(lambda s, v: g.Exp(s, v), [x])


def test_a_function_that_only_builds_in_its_own_dtype_is_differenced_there():
    def f(s, v):
        return g.Mul(s, v, mg.Const(s, np.full(3, 2.0, np.float32)))  # a float32 constant

    x = np.array([1.0, 2.0, 3.0], np.float32)
    result = gradient_checker._compute(f, [x], None)
    assert result.numeric_dtype is mg.float32
    np.testing.assert_allclose(result.numerical[0], np.diag([2.0] * 3), rtol=1e-3)
    assert_gradients_close(f, [x])


def test_second_order():
    def grad_of_quartic(s, v):  # d/dv sum(v^4) = 4 v^3
        return mg.gradients(g.Sum(s, g.Square(s, g.Square(s, v))), v)[0]

    x = np.array([1.0, -2.0])
    (theoretical,), _ = assert_gradients_close(grad_of_quartic, [x])
    np.testing.assert_allclose(theoretical, np.diag(12 * x**2))  # d/dv 4v^3 = 12v^2


def test_an_empty_y_needs_zero_gradients():
    ids = np.zeros(0, np.int32)
    (theoretical,), (numerical,) = compute_gradient(
        lambda s, p: g.Gather(s, p, ids), [np.ones((3, 2), np.float32)]
    )
    assert theoretical.shape == numerical.shape == (0, 6)


def test_max_error_and_compute_gradient_error():
    assert max_error([np.zeros((2, 2))], [np.full((2, 2), 0.5)]) == 0.5
    assert max_error([np.zeros((0, 3))], [np.zeros((0, 3))]) == 0.0
    error = compute_gradient_error(lambda s, v: g.Square(s, v), [np.array([1.0, 3.0])])
    assert error < 1e-6


Wrong = mg.register_op(
    OpDef("GradTestCheckerWrong", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
          shape_fn=lambda ctx: ctx.input_shapes[0])
)  # fmt: skip
mg.register_kernel("GradTestCheckerWrong", "CPU", lambda ctx, x, T: x * x)
mg.register_gradient("GradTestCheckerWrong")(lambda op, grad: grad)  # should be 2x * grad


def test_a_wrong_rule_fails_with_the_worst_element():
    x = np.array([1.0, 3.0], np.float32)
    with pytest.raises(AssertionError) as info:
        assert_gradients_close(lambda s, v: Wrong(s, v), [x])
    message = str(info.value)
    assert "the gradient with respect to argument 0 (float32) does not match" in message
    assert "2 of 4 Jacobian elements differ" in message
    assert "the worst, d y[1] / d x0[1]: theoretical 1.0, numerical 6.0" in message
    assert "rtol=0.0001, atol=1e-05" in message
    # Looser tolerances pass it (the error is 5).
    assert_gradients_close(lambda s, v: Wrong(s, v), [x], atol=5.0, rtol=0.0)


def test_nan_jacobians_fail():
    with pytest.raises(AssertionError, match="does not match"):
        assert_gradients_close(lambda s, v: g.Square(s, v), [np.array([np.nan])])


@pytest.mark.parametrize(
    "f, x, kwargs, match",
    [
        (lambda s, v: g.Square(s, v), np.ones(2), {}, r"`x` must be a list or tuple"),
        (lambda s, v: v, [np.ones(2, np.int32)], {}, r"unsupported type int32 of argument 0"),
        (lambda s, v: g.ToInt(s, v), [np.ones(2)], {}, r"unsupported type int32 of y"),
        (lambda s, v: [v], [np.ones(2)], {}, r"f must return one tensor"),
        (lambda s, v: g.Square(s, v), [np.ones(2)], {"delta": 0.0}, r"delta must be a positive"),
        ("f", [np.ones(2)], {}, r"f must be callable"),
    ],
)
def test_errors(f, x, kwargs, match):
    with pytest.raises(mg.InvalidArgumentError, match=match):
        compute_gradient(f, x, **kwargs)


def test_a_perturbation_too_small_for_the_dtype_is_refused():
    def f(s, v):  # builds only in float16 (a float16 constant)
        return g.Mul(s, v, mg.Const(s, np.ones(1, np.float16)))

    with pytest.raises(mg.InvalidArgumentError, match="does not change argument 0's element 0"):
        compute_gradient(f, [np.array([1000.0], np.float16)])
