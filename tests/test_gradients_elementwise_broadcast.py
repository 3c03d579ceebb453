"""Gradients of broadcast operands (ops.math.sum_to, broadcast_gradients and the binary rules
that use them): the nodes built when static shapes decide the reduction axes (none, a Sum over
constant axes, a Reshape only when needed) and when only run time can (Shape,
BroadcastGradientArgs, Sum, Reshape); the values against numpy and against central
differences for random broadcasting pairs, with dims and ranks hidden from the graph
(placeholders of unknown shape) as hypothesis draws them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from ops import math as M

RNG = np.random.default_rng(7)


def new_ops(root: mg.Scope, before: int) -> list[str]:
    return [op.type for op in root.graph.operations[before:]]


def built_by(fn, grad_shape, target_shape, other_shape=None):
    """(op types built, result) of fn on placeholders of these (partial) shapes, inside a
    rule-like scope."""
    root = mg.Scope.new_root_scope()
    grad = mg.Placeholder(root.with_op_name("grad"), mg.float32, grad_shape).output
    target = mg.Placeholder(root.with_op_name("target"), mg.float32, target_shape).output
    other = None
    if other_shape is not None:
        other = mg.Placeholder(root.with_op_name("other"), mg.float32, other_shape).output
    before = len(root.graph.operations)
    with root.new_sub_scope("rule").as_default():
        result = fn(grad, target, other)
    return new_ops(root, before), result, root, (grad, target, other)


def sum_to(grad, target, other):
    return M.sum_to(grad, target)


# -- the nodes built ---------------------------------------------------------------------------


def test_sum_to_of_equal_shapes_builds_nothing():
    types, result, _, (grad, _, _) = built_by(sum_to, [2, 3], [2, 3])
    assert types == [] and result is grad


@pytest.mark.parametrize(
    "grad_shape, target_shape, types, axes, keep",
    [
        ([2, 3], [3], ["Const", "Sum"], [0], False),  # a missing dim: summed away
        ([2, 3], [2, 1], ["Const", "Sum"], [1], True),  # a dim of 1: kept
        ([4, 2, 3], [2, 1], ["Const", "Sum", "Const", "Reshape"], [0, 2], False),  # both
        ([2, 3], [], ["Const", "Sum"], [0, 1], False),  # to a scalar
        ([None, 3], [3], ["Const", "Sum"], [0], False),  # an unknown dim that is summed away
        ([None, 3], [1, 3], ["Const", "Sum"], [0], True),  # 1 against unknown: summed
        ([2, None], [2, 1], ["Const", "Sum"], [1], True),
        ([1, 1], [None, 1], [], [], None),  # the gradient's 1s: nothing was broadcast
        ([None, 1], [None], ["Const", "Sum"], [0], False),  # the 1 decides: own dim is its dim
        ([0, 3], [1, 3], ["Const", "Sum"], [0], True),  # an empty broadcast: zeros
    ],
)
def test_sum_to_uses_constant_axes_when_static_shapes_decide(
    grad_shape, target_shape, types, axes, keep
):
    built, result, root, (grad, target, _) = built_by(sum_to, grad_shape, target_shape)
    assert built == types
    assert result.shape.is_compatible_with(target.shape)
    if not types:
        assert result is grad
        return
    total = next(op for op in root.graph.operations if op.type == "Sum")
    assert total.inputs[1].op.get_attr("value").tolist() == axes
    assert total.get_attr("keep_dims") is keep
    if "Reshape" in built:
        shape = result.op.inputs[1].op.get_attr("value").tolist()
        assert shape == target_shape


@pytest.mark.parametrize(
    "grad_shape, target_shape",
    [([None, 3], [None, 3]), ([None], [None]), (None, [3]), ([2, 3], None), ([4, 3], [None, 3])],
)
def test_sum_to_finds_axes_at_run_time_when_static_shapes_cannot(grad_shape, target_shape):
    built, result, _, _ = built_by(sum_to, grad_shape, target_shape)
    assert sorted(built) == sorted(["Shape", "Shape", "BroadcastGradientArgs", "Sum", "Reshape"])
    assert result.op.type == "Reshape"


def test_broadcast_gradients_use_the_other_operand_to_decide():
    # x [None, 3] against y [3]: y has no dim 0 and 3 at dim 1, so x is not broadcast (its
    # unknown dim is the output's); y is summed over dim 0. No run-time shapes needed.
    def both(grad, x, y):
        return M.broadcast_gradients(grad, x, y)

    built, (gx, gy), _, (grad, _, _) = built_by(both, [None, 3], [None, 3], [3])
    assert gx is grad and built == ["Const", "Sum"] and gy.shape.dims == (3,)
    # x [None] against y [1]: y's 1 says x is the output.
    built, (gx, gy), _, (grad, _, _) = built_by(both, [None], [None], [1])
    assert gx is grad and built == ["Const", "Sum"]


def test_broadcast_gradients_share_one_broadcast_gradient_args():
    def both(grad, x, y):
        return M.broadcast_gradients(grad, x, y)

    built, (gx, gy), _, _ = built_by(both, [None], [None], [None])
    assert built.count("BroadcastGradientArgs") == 1 and built.count("Shape") == 2
    assert gx.op.type == gy.op.type == "Reshape"
    assert gx.op.inputs[0].op.inputs[1].index == 0 and gy.op.inputs[0].op.inputs[1].index == 1


def test_broadcast_gradients_take_a_pair_and_keep_none():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [2, 3]).output
    y = mg.Placeholder(root, mg.float32, [3]).output
    gx_in = mg.Placeholder(root, mg.float32, [2, 3]).output
    with root.as_default():
        gx, gy = M.broadcast_gradients((gx_in, None), x, y)
    assert gx is gx_in and gy is None


def test_the_binary_rules_build_no_reduction_for_equal_static_shapes():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [2, 3])
    y = mg.Placeholder(root, mg.float32, [2, 3])
    for op in ("AddV2", "Sub", "Mul", "RealDiv", "Maximum", "SquaredDifference", "Pow"):
        z = getattr(M, op)(root, x, y)
        before = len(root.graph.operations)
        mg.gradients(z, [x, y])
        types = new_ops(root, before)
        assert not {"Sum", "Reshape", "Shape", "BroadcastGradientArgs"} & set(types), (op, types)
    before = len(root.graph.operations)
    mg.gradients(M.AddV2(root, x, y), [x, y])
    assert new_ops(root, before + 1) == ["Const"]  # only the seed of ones


def test_the_gradient_graph_is_made_of_tf_ops_when_shapes_are_unknown():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, None)
    y = mg.Placeholder(root, mg.float32, None)
    z = M.Mul(root, x, y)
    before = len(root.graph.operations)
    gx, gy = mg.gradients(z, [x, y])
    types = new_ops(root, before)
    assert types.count("BroadcastGradientArgs") == 1
    assert {"Shape", "Sum", "Reshape", "Mul"} <= set(types)
    with mg.Session(root) as sess:
        a, b = np.arange(6.0).reshape(2, 3), np.array([[1.0], [2.0]])
        ga, gb = sess.run([gx, gy], {x: a, y: b})
    np.testing.assert_array_equal(ga, np.broadcast_to(b, (2, 3)))
    np.testing.assert_array_equal(gb, a.sum(axis=1, keepdims=True))


def test_sum_to_refuses_what_was_not_broadcast():
    root = mg.Scope.new_root_scope()
    grad = mg.Placeholder(root, mg.float32, [3]).output
    target = mg.Placeholder(root, mg.float32, [2, 3]).output
    with root.as_default():
        with pytest.raises(mg.InvalidArgumentError, match="Cannot reduce a gradient of shape"):
            M.sum_to(grad, target)
        with pytest.raises(mg.InvalidArgumentError, match="sum_to: grad must be an Output"):
            M.sum_to(np.ones(3), target)
        with pytest.raises(mg.InvalidArgumentError, match="broadcast_gradients: y must be an"):
            M.broadcast_gradients(grad, grad, [1.0])


def test_sum_to_accepts_builders_and_keeps_dtypes():
    root = mg.Scope.new_root_scope()
    grad = mg.Placeholder(root, mg.complex64, [2, 3])
    target = mg.Placeholder(root, mg.complex64, [1, 3])
    with root.as_default():
        out = M.sum_to(grad, target)
    assert out.dtype is mg.complex64 and out.shape.dims == (1, 3)
    value = (np.arange(6) + 1j).reshape(2, 3).astype(np.complex64)
    with mg.Session(root) as sess:
        got = sess.run(out, {grad: value, target: np.zeros((1, 3), np.complex64)})
    np.testing.assert_array_equal(got, value.sum(axis=0, keepdims=True))


# -- values: numpy reference and central differences, shapes hidden at random -----------------


@st.composite
def broadcast_pairs(draw, max_rank=3):
    """(x shape, y shape) that broadcast, with masks saying which dims (or whole ranks) the
    graph is not told."""
    rank = draw(st.integers(0, max_rank))
    out = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    shapes = []
    for _ in range(2):
        own_rank = draw(st.integers(0, rank))
        dims = [draw(st.sampled_from([d, 1])) for d in out[rank - own_rank :]]
        shapes.append(tuple(dims))
    hidden = []
    for shape in shapes:
        if draw(st.integers(0, 4)) == 0:
            hidden.append(None)  # unknown rank
        else:
            hidden.append([None if draw(st.booleans()) else d for d in shape])
    return shapes[0], shapes[1], hidden[0], hidden[1]


def reference_sum_to(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """numpy's own reduction of a broadcast, written differently from sum_to: sum the leading
    dims, then every dim where shape has 1."""
    lead = grad.ndim - len(shape)
    total = grad.sum(axis=tuple(range(lead))) if lead else grad
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and total.shape[i] != 1)
    return total.sum(axis=axes, keepdims=True) if axes else total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broadcast_pairs())
def test_sum_to_matches_numpy_whatever_the_graph_knows(pair):
    x_shape, y_shape, x_hidden, _ = pair
    grad_shape = np.broadcast_shapes(x_shape, y_shape)
    grad_value = RNG.standard_normal(grad_shape)
    root = mg.Scope.new_root_scope()
    grad = mg.Placeholder(root, mg.float64, None if x_hidden is None else list(grad_shape))
    target = mg.Placeholder(root, mg.float64, x_hidden)
    with root.as_default():
        out = M.sum_to(grad, target)
    assert out.shape.is_compatible_with(x_shape)
    with mg.Session(root) as sess:
        got = sess.run(out, {grad: grad_value, target: np.zeros(x_shape)})
    want = reference_sum_to(grad_value, x_shape)
    assert got.shape == x_shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def jacobians(build, values, shapes, delta=1e-4):
    """(theoretical, numerical) Jacobians of y = build(scope, *xs) with respect to each x, the
    xs being placeholders of the partial `shapes` (the checker of minigraph.testing gives its
    placeholders full shapes): a run per element of y with a one-hot grad_ys fed through a
    placeholder of unknown shape, and central differences (float64)."""
    values = [np.array(v, np.float64) for v in values]  # 0-d arrays, not numpy scalars
    root = mg.Scope.new_root_scope()
    phs = [mg.Placeholder(root, mg.float64, s) for s in shapes]
    y = build(root, *phs)
    dy = mg.Placeholder(root, mg.float64, None)
    grads = mg.gradients(y, phs, grad_ys=dy)
    feeds = dict(zip(phs, values))
    with mg.Session(root) as sess:
        y_value = sess.run(y, feeds)
        theoretical = [np.zeros((y_value.size, v.size)) for v in values]
        for row in range(y_value.size):
            seed = np.zeros(y_value.size)
            seed[row] = 1
            got = sess.run(grads, {**feeds, dy: seed.reshape(y_value.shape)})
            for j, g in enumerate(got):
                assert g.shape == values[j].shape
                theoretical[j][row] = g.reshape(-1)
        numerical = []
        for j, v in enumerate(values):
            jac = np.zeros((y_value.size, v.size))
            for col in range(v.size):
                up, down = v.copy(), v.copy()
                up.flat[col] += delta
                down.flat[col] -= delta
                hi = sess.run(y, {**feeds, phs[j]: up})
                lo = sess.run(y, {**feeds, phs[j]: down})
                jac[:, col] = ((hi - lo) / (2 * delta)).reshape(-1)
            numerical.append(jac)
    return theoretical, numerical


SMOOTH_BINARY = ["AddV2", "Sub", "Mul", "RealDiv", "SquaredDifference", "Pow", "Maximum"]


def operands(op, x_shape, y_shape):
    x = np.array(RNG.uniform(0.5, 2.0, x_shape))
    y = np.array(RNG.uniform(0.5, 2.0, y_shape))
    if op == "Maximum":  # no ties: x in [0.5, 1], y near 0.2 or 1.8
        x = np.array(RNG.uniform(0.5, 1.0, x_shape))
        y = np.array(RNG.choice([0.2, 1.8], y_shape) + RNG.uniform(-0.1, 0.1, y_shape))
    if op in ("Sub", "Mul") and x.size:
        x.flat[0] = -x.flat[0]
    return x, y


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broadcast_pairs(), st.sampled_from(SMOOTH_BINARY))
def test_binary_rules_match_central_differences_for_hidden_shapes(pair, op):
    x_shape, y_shape, x_hidden, y_hidden = pair
    x, y = operands(op, x_shape, y_shape)
    theoretical, numerical = jacobians(
        lambda s, a, b: getattr(M, op)(s, a, b), [x, y], [x_hidden, y_hidden]
    )
    for t, n in zip(theoretical, numerical):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", SMOOTH_BINARY + ["FloorMod", "Minimum", "Div"])
def test_rules_with_unknown_ranks_and_dims(op):
    x_shape, y_shape = (2, 1, 3), (4, 1)
    if op == "FloorMod":
        x = 4.0 * RNG.integers(-2, 3, x_shape) + RNG.uniform(0.3, 0.7, x_shape)
        y = RNG.choice([-2.0, -1.0, 1.0, 2.0], y_shape)
    elif op == "Minimum":
        x, y = RNG.uniform(0.5, 1.0, x_shape), RNG.uniform(0.2, 0.3, y_shape)
        y[0] = 1.8
    else:
        x, y = operands(op, x_shape, y_shape)
    for shapes in ([None, None], [[None, None, None], [None, 1]], [[2, None, 3], None]):
        theoretical, numerical = jacobians(lambda s, a, b: getattr(M, op)(s, a, b), [x, y], shapes)
        for t, n in zip(theoretical, numerical):
            np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7, err_msg=f"{op} {shapes}")
