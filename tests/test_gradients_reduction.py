"""The reductions' gradient rules (ops/reduction.py): Sum, Mean, Max, Min, Prod (and the scans
Cumsum, Cumprod that Prod's rule builds), against central differences and against numpy
references written element by element; static shapes and constant axes, unknown dims, unknown
ranks and axes known only at run time; keep_dims, negative, repeated-sign and empty axes; TF's
conventions at ties (Max/Min split evenly) and zeros (Prod, exact); no gradient for All, Any,
ArgMax, ArgMin; second derivatives."""

from __future__ import annotations

import numpy as np
import pytest
from _gradients_reduction_nn_helpers import (
    forget,
    gradient_norm,
    hidden,
    reference_grad,
    run_gradients,
)

import minigraph as mg
from minigraph.testing import assert_gradients_close, compute_gradient
from ops import reduction
from ops.math import Square
from ops.reduction import Cumprod, Cumsum, Max, Mean, Prod, Sum

REDUCTIONS = ["Sum", "Mean", "Max", "Min", "Prod"]
AXES = [0, -1, [1], [0, 2], [2, 0], [-1, -3], [], [0, 1, 2]]


def _op(name):
    return getattr(reduction, name)


def _values(shape, seed=0, dtype=np.float64):
    # Distinct values (no accidental ties), away from 0 (Prod's products stay moderate).
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    return x.astype(dtype)


# -- first derivatives, every axis form ------------------------------------------------------------


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_rules_match_central_differences(name, axis, keep_dims):
    x = _values((2, 3, 4))
    assert_gradients_close(lambda s, v: _op(name)(s, v, axis, keep_dims=keep_dims), [x])


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("how", ["dims", "rank"])
@pytest.mark.parametrize("axis_known", [True, False], ids=["const-axis", "run-time-axis"])
@pytest.mark.parametrize("axis", [[1], [0, -1], [], -2], ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_rules_with_shapes_or_axes_known_only_at_run_time(name, how, axis_known, axis, keep_dims):
    x = _values((2, 3, 4), seed=1)

    def f(s, v):
        a = axis if axis_known else hidden(s, axis)
        return _op(name)(s, forget(s, v, how), a, keep_dims=keep_dims)

    assert_gradients_close(f, [x])


@pytest.mark.parametrize("name", REDUCTIONS)
def test_run_time_axes_without_a_static_shape_give_the_same_values(name):
    # One gradient graph over an unknown-rank input and a fed axis, run for several axes and
    # shapes: the run-time machinery, against the element-by-element reference.
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float64)
    axis = mg.Placeholder(root.with_op_name("axis"), mg.int64)
    keep = name in ("Sum", "Max")
    y = _op(name)(root, x, axis, keep_dims=keep)
    dy = mg.Placeholder(root.with_op_name("dy"), mg.float64)
    (dx,) = mg.gradients(y, x, grad_ys=dy)
    assert dx.shape.rank is None
    with mg.Session(root) as session:
        for shape, a in [((2, 3), [1]), ((2, 3), [0, 1]), ((2, 3, 4), [-1, 0]), ((4,), []),
                         ((3, 2, 2), 1), ((), [])]:  # fmt: skip
            value = _values(shape, seed=len(shape))
            axes = tuple(np.asarray(a, np.int64).reshape(-1).tolist())
            out_shape = np.sum(value, axis=axes, keepdims=keep).shape
            seed = _values(out_shape, seed=3)
            got = session.run(dx, {x: value, axis: np.asarray(a, np.int64), dy: seed})
            want = reference_grad(name, value, a, keep, seed)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_narrow_float_types(name, dtype):
    x = _values((3, 4), seed=2, dtype=dtype)
    assert_gradients_close(lambda s, v: _op(name)(s, v, [1]), [x])
    assert_gradients_close(lambda s, v: _op(name)(s, v, [0, 1], keep_dims=True), [x])


@pytest.mark.parametrize("name", ["Sum", "Mean", "Prod"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64], ids=["complex128", "complex64"])
def test_complex_inputs(name, dtype):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(dtype)
    for axis in ([0], [1], [], [0, 1]):
        assert_gradients_close(lambda s, v, axis=axis: _op(name)(s, v, axis), [x])


def test_scalar_and_empty_inputs():
    # A scalar reduces over nothing; empty inputs get empty gradients (zeros of their shape).
    for name in REDUCTIONS:
        assert_gradients_close(lambda s, v, name=name: _op(name)(s, v, []), [np.array(1.5)])
        for shape, axis in [((0, 3), [0]), ((0, 3), [1]), ((2, 0), [1])]:
            build = lambda s, v, name=name, axis=axis: _op(name)(s, v, axis)  # noqa: E731
            got = run_gradients(build, [np.zeros(shape)])[0]
            assert got.shape == shape and got.dtype == np.float64


def test_integer_reductions_carry_no_gradient():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.int32, [3])
    assert mg.gradients(Sum(root, x, 0), x) == [None]


# -- TF's conventions: ties, zeros, NaN ------------------------------------------------------------


@pytest.mark.parametrize("name", ["Max", "Min"])
def test_ties_split_the_gradient_evenly(name):
    x = np.array([[1.0, 3.0, 3.0, -2.0], [2.0, 2.0, 2.0, 2.0], [-2.0, 5.0, -2.0, 0.0]])
    for axis, keep in [([1], False), ([0], True), ([0, 1], False), (-1, True)]:
        y_shape = np.sum(x, axis=tuple(np.atleast_1d(axis)), keepdims=keep).shape
        seed = np.arange(1.0, 1.0 + np.prod(y_shape)).reshape(y_shape)
        build = lambda s, v, axis=axis, keep=keep: _op(name)(s, v, axis, keep_dims=keep)  # noqa: E731
        (got,) = run_gradients(build, [x], seed)
        np.testing.assert_allclose(got, reference_grad(name, x, axis, keep, seed), rtol=1e-15)
    (got,) = run_gradients(lambda s, v: Max(s, v, [1]), [x])
    np.testing.assert_array_equal(got[1], [0.25, 0.25, 0.25, 0.25])  # four-way tie


def test_a_nan_result_gives_nan_gradients_to_its_group():
    # TF: Equal(NaN, x) matches nothing, 0 / 0 tied elements: NaN for the whole group.
    x = np.array([[1.0, np.nan, 0.0], [1.0, 2.0, 0.0]])
    (got,) = run_gradients(lambda s, v: Max(s, v, 1), [x])
    assert np.isnan(got[0]).all()
    np.testing.assert_array_equal(got[1], [0.0, 1.0, 0.0])


def test_prod_with_zeros_is_exact():
    x = np.array([[0.0, 3.0, 2.0], [0.0, 0.0, 2.0], [4.0, 5.0, 0.5], [-0.0, 7.0, 1.0]])
    (got,) = run_gradients(lambda s, v: Prod(s, v, 1), [x])
    np.testing.assert_array_equal(
        got, [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0], [2.5, 2.0, 20.0], [7.0, 0.0, 0.0]]
    )
    for axis in ([0], [0, 1], -1, []):
        (got,) = run_gradients(lambda s, v, axis=axis: Prod(s, v, axis), [x])
        np.testing.assert_array_equal(got, reference_grad("Prod", x, axis, False, 1.0))
    # No division anywhere: a product that overflows does not make the others' inf / inf.
    big = np.array([1e200, 1e200, 1e-200])
    (got,) = run_gradients(lambda s, v: Prod(s, v, 0), [big])
    np.testing.assert_allclose(got, [1e200 * 1e-200, 1e200 * 1e-200, np.inf], rtol=1e-15)


def test_prod_with_zeros_matches_central_differences():
    x = np.array([[0.0, 3.0, 2.0], [0.0, 0.0, 2.0], [4.0, -1.5, 0.5]])
    for axis in ([1], [0], [0, 1]):
        assert_gradients_close(lambda s, v, axis=axis: Prod(s, v, axis), [x])
        hide = lambda s, v, axis=axis: Prod(s, forget(s, v, "rank"), hidden(s, axis))  # noqa: E731
        assert_gradients_close(hide, [x])
    z = np.array([[0.0, 1 + 2j, 2 - 1j], [1j, 1.0, 0.5]])
    assert_gradients_close(lambda s, v: Prod(s, v, [1]), [z])


def test_mean_gradient_is_the_sum_gradient_over_the_count():
    x = _values((4, 6), seed=4)
    (got,) = run_gradients(lambda s, v: Mean(s, forget(s, v, "dims"), 0), [x])
    np.testing.assert_array_equal(got, np.full((4, 6), 0.25))
    (got,) = run_gradients(lambda s, v: Mean(s, v, [0, 1]), [x])
    np.testing.assert_allclose(got, np.full((4, 6), 1 / 24), rtol=1e-15)


# -- the graphs the rules build --------------------------------------------------------------------


def _gradient_op_types(build, shape, dtype=mg.float32):
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), dtype, shape)
    y = build(root, x)
    mg.gradients(y, x)
    # Consts left out (the seed, shape and count constants).
    return [
        op.type
        for op in root.graph.operations
        if op.name.startswith("gradients/") and op.type != "Const"
    ]


def test_static_shapes_build_no_shape_computations():
    for name in REDUCTIONS:
        for axis in ([0], [1], [0, 1], -1):
            build = lambda s, x, name=name, axis=axis: _op(name)(s, x, axis)  # noqa: E731
            types = _gradient_op_types(build, [3, 4])
            assert not {"Shape", "Size", "DynamicStitch", "Range"} & set(types), (name, types)
    # Reducing leading dims needs no Reshape (the output broadcasts as it is); Mean divides by
    # a constant count.
    assert _gradient_op_types(lambda s, x: Sum(s, x, 0), [3, 4]) == ["BroadcastTo"]
    types = _gradient_op_types(lambda s, x: Mean(s, x, [1]), [3, 4])
    assert types.count("Reshape") == 1 and "RealDiv" in types
    assert _gradient_op_types(lambda s, x: Sum(s, x, [0, 1], keep_dims=True), [1, 1]) == []


def test_unknown_shapes_use_tensorflows_reduced_shape():
    types = _gradient_op_types(lambda s, x: Sum(s, x, hidden(s, 1)), None)
    assert {"Shape", "Size", "FloorMod", "Fill", "Range", "DynamicStitch", "Reshape",
            "BroadcastTo"} <= set(types)  # fmt: skip
    types = _gradient_op_types(lambda s, x: Prod(s, x, hidden(s, 1)), None)
    assert {"DynamicPartition", "DynamicStitch", "Cumprod", "Transpose", "Pack"} <= set(types)


def test_rule_nodes_are_named_under_the_forward_op():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, [3, 4])
    y = Max(root.new_sub_scope("layer").with_op_name("top"), x, 1)
    (dx,) = mg.gradients(y, x)
    assert dx.op.name.startswith("gradients/layer/top_grad/")


@pytest.mark.parametrize("name", ["All", "Any", "ArgMax", "ArgMin"])
def test_not_differentiable(name):
    assert mg.registry.gradient_rule(name).fn is None
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [3, 4])
    if name.startswith("Arg"):
        # A float fed to ArgMax carries no gradient through it, and asking is not an error.
        picked = mg.Identity(root, _op(name)(root, x, 1)).output
        assert mg.gradients(picked, x, unconnected_gradients="none") in ([None], [])


# -- Cumsum and Cumprod ----------------------------------------------------------------------------


def _scan_reference(how, x, axis, exclusive, reverse):
    x = np.moveaxis(np.asarray(x), axis, 0)
    out = np.empty_like(x)
    n = x.shape[0]
    for i in range(n):
        idx = range(i + 1, n) if reverse else range(i)
        if not exclusive:
            idx = list(idx) + [i]
        acc = np.zeros_like(x[0]) if how == "Cumsum" else np.ones_like(x[0])
        for j in idx if not reverse else sorted(idx, reverse=True):
            acc = acc + x[j] if how == "Cumsum" else acc * x[j]
        out[i] = acc
    return np.moveaxis(out, 0, axis)


@pytest.mark.parametrize("how", ["Cumsum", "Cumprod"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int8, np.complex64])
def test_scans_against_an_element_by_element_reference(how, exclusive, reverse, dtype):
    op = Cumsum if how == "Cumsum" else Cumprod
    x = (np.arange(24).reshape(2, 3, 4) % 5 - 1).astype(dtype)
    for axis in (0, 1, 2, -1):
        root = mg.Scope.new_root_scope()
        y = op(root, x, np.int32(axis), exclusive=exclusive, reverse=reverse)
        got = mg.Session(root).run(y)
        want = _scan_reference(how, x, axis % 3, exclusive, reverse).astype(dtype)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)


def test_scans_of_empty_and_single_dims():
    for op in (Cumsum, Cumprod):
        root = mg.Scope.new_root_scope()
        for shape in [(0, 3), (3, 0), (1, 2)]:
            x = np.ones(shape, np.float32)
            got = mg.Session(root).run(op(root, x, np.int32(0), exclusive=True))
            want = np.zeros(shape) if op is Cumsum else np.ones(shape)
            np.testing.assert_array_equal(got, want.astype(np.float32))


def test_integer_scans_wrap_around():
    root = mg.Scope.new_root_scope()
    got = mg.Session(root).run(Cumsum(root, np.array([100, 100, 100], np.int8), np.int32(0)))
    np.testing.assert_array_equal(got, np.array([100, -56, 44], np.int8))


def test_scan_errors():
    root = mg.Scope.new_root_scope()
    x = np.ones((2, 3), np.float32)
    with pytest.raises(mg.InvalidArgumentError, match=r"ScanOp: axis must be a scalar, not \[2\]"):
        Cumsum(root, x, np.array([0, 1], np.int32))
    with pytest.raises(
        mg.InvalidArgumentError,
        match=r"ScanOp: Expected scan axis in the range \[-2, 2\), but got -1",
    ):
        Cumprod(root, x, np.int32(-3))
    # Known only at run time: the kernel's error, TF's message.
    y = Cumsum(root.with_op_name("late"), x, hidden(root, 2))
    with pytest.raises(mg.InvalidArgumentError, match=r"range \[-2, 2\), but got 2"):
        mg.Session(root).run(y)
    z = Cumsum(root.with_op_name("scalar"), np.float32(1), hidden(root, 0))
    with pytest.raises(mg.InvalidArgumentError, match=r"range \[0, 0\), but got 0"):
        mg.Session(root).run(z)


@pytest.mark.parametrize("how", ["Cumsum", "Cumprod"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_gradients(how, exclusive, reverse):
    op = Cumsum if how == "Cumsum" else Cumprod
    x = _values((3, 4), seed=6)
    for axis in (0, -1):
        assert_gradients_close(
            lambda s, v, a=axis: op(s, v, np.int32(a), exclusive=exclusive, reverse=reverse), [x]
        )
    z = x + 1j * _values((3, 4), seed=7)
    assert_gradients_close(
        lambda s, v: op(s, v, np.int32(1), exclusive=exclusive, reverse=reverse), [z]
    )


# -- second derivatives ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis", [[1], [0], [0, 1]], ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_second_derivatives(name, axis, keep_dims):
    x = _values((2, 3), seed=8)

    def f(s, v):
        # Square first, so the gradient depends on x (Sum's and Mean's alone are constant).
        return gradient_norm(s, _op(name)(s, Square(s, v), axis, keep_dims=keep_dims), [v])

    assert_gradients_close(f, [x])


def test_second_derivatives_at_run_time_axes():
    x = _values((2, 3), seed=9)
    for name in REDUCTIONS:

        def f(s, v, name=name):
            return gradient_norm(s, _op(name)(s, Square(s, v), hidden(s, [1])), [v])

        theoretical, numerical = compute_gradient(f, [x])
        np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", ["Cumsum", "Cumprod"])
def test_scan_kernels_keep_the_trusted_promise(how):
    # A new array of x's dtype and shape on the kernel's device (never a view of x; x
    # unchanged), for every dtype each kernel registers, on junk-filled pooled memory.
    from _reduction_nn_helpers import dirty_ctx, kernel_dtypes

    import minigraph.testing
    from minigraph.testing import SimulatedGpuDevice

    for kernel in mg.registry.kernels_for(how):
        assert kernel.trusted and "axis" in kernel.host_memory
        gpu = kernel.device_type == "GPU"
        ctx = mg.KernelContext(SimulatedGpuDevice(0), "n", how) if gpu else dirty_ctx()
        array_type = minigraph.testing.SimulatedArray if gpu else np.ndarray
        for dtype in kernel_dtypes(how, kernel.device_type):
            x = (np.arange(12).reshape(3, 4) % 3 + 1).astype(dtype.np_dtype)
            before = x.copy()
            arg = ctx.device.from_host(x) if gpu else x
            for exclusive in (False, True):
                for reverse in (False, True):
                    out = kernel.fn(ctx, arg, np.int32(1), exclusive=exclusive, reverse=reverse)
                    assert type(out) is array_type and out.dtype == x.dtype
                    assert out.shape == x.shape
                    host = ctx.device.to_host(out) if gpu else out
                    want = _scan_reference(how, x.astype(np.complex128), 1, exclusive, reverse)
                    np.testing.assert_allclose(host.astype(np.complex128), want, rtol=1e-2)
                    out.fill(0)
            np.testing.assert_array_equal(ctx.device.to_host(arg) if gpu else arg, before)
