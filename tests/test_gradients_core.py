"""minigraph.gradients, the algorithm: TF 1.x's tf.gradients semantics on the test ops of
tests/_grad_ops.py (their own rules), so these tests do not depend on the op library's rules.

Values are checked against hand-derived derivatives; TF's documented examples (stop_gradients,
unconnected_gradients) and behaviours checked in TF 2.21 (`tf.compat.v1.gradients`) are noted
where they are reproduced.
"""

from __future__ import annotations

import _grad_ops as g
import numpy as np
import pytest

import minigraph as mg
from minigraph import Placeholder, Scope, Session

F32 = mg.float32


def library(*names):
    """Skips a test that needs op-library ops (built by name by the machinery) not loaded yet."""
    import ops  # noqa: F401 - registers the library

    missing = [n for n in names if n not in mg.registry.list_ops()]
    return pytest.mark.skipif(bool(missing), reason=f"op library lacks {missing}")


def rule(*op_types):
    """Skips a test that needs the op library's gradient rules for `op_types`."""
    import ops  # noqa: F401 - registers the library and its rules

    missing = []
    for op_type in op_types:
        try:
            mg.registry.gradient_rule(op_type)
        except mg.NotFoundError:
            missing.append(op_type)
    return pytest.mark.skipif(bool(missing), reason=f"op library lacks rules for {missing}")


def operators():
    """Skips a test that needs the op library's tensor operators."""
    import ops  # noqa: F401

    missing = mg.registry.operator_function("add") is None
    return pytest.mark.skipif(missing, reason="op library registers no tensor operators")


@pytest.fixture
def root():
    return Scope.new_root_scope()


def run(scope, fetches, feeds=None):
    with Session(scope) as session:
        return session.run(fetches, feeds)


def ph(scope, name, shape=(), dtype=F32):
    return Placeholder(scope.with_op_name(name), dtype, list(shape)).output


# -- values --------------------------------------------------------------------------------------


def test_a_chain(root):
    x = ph(root, "x", [3])
    y = g.Sum(root, g.Square(root, g.Square(root, x)))  # sum(x^4)
    (dx,) = mg.gradients(y, x)
    value = np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_allclose(run(root, dx, {x: value}), 4 * value**3, rtol=1e-6)


def test_xs_and_ys_may_be_builders_and_one_x_gives_a_list_of_one(root):
    x = Placeholder(root, F32, [2])
    y = g.Sum(root, g.Square(root, x))
    result = mg.gradients(y, x)
    assert isinstance(result, list) and len(result) == 1
    np.testing.assert_allclose(run(root, result[0], {x: [1.0, 3.0]}), [2.0, 6.0])


def test_a_diamond_sums_the_gradients_that_meet(root):
    x = ph(root, "x")
    a = g.Square(root.with_op_name("a"), x)  # x^2
    b = g.Exp(root.with_op_name("b"), x)  # e^x
    y = g.Mul(root.with_op_name("y"), a, b)  # x^2 e^x
    (dx,) = mg.gradients(y, x)
    assert dx.op.type == "AddN" and dx.op.name == "gradients/AddN"
    assert len(dx.op.inputs) == 2
    v = 1.5
    np.testing.assert_allclose(run(root, dx, {x: v}), (2 * v + v * v) * np.exp(v), rtol=1e-6)


def test_a_diamond_below_an_op_reaches_it_once_summed(root):
    # h's rule must run once, on the sum of both paths' gradients (pending counts).
    x = ph(root, "x")
    h = g.Square(root.with_op_name("h"), x)  # x^2
    y = g.Mul(root, g.Scale(root, h, alpha=3.0), g.Exp(root, h))  # 3h e^h
    (dx,) = mg.gradients(y, x)
    rule_nodes = [op for op in root.graph.operations if op.name.startswith("gradients/h_grad/")]
    assert len(rule_nodes) == 2  # one Scale, one Mul: the rule ran once
    v = 0.5
    hv = v * v
    np.testing.assert_allclose(run(root, dx, {x: v}), 3 * (1 + hv) * np.exp(hv) * 2 * v, rtol=1e-6)


def test_an_input_used_twice_by_one_op(root):
    x = ph(root, "x")
    y = g.Mul(root, x, x)
    (dx,) = mg.gradients(y, x)
    assert run(root, dx, {x: 3.0}) == 6.0


def test_the_gradient_of_several_ys_is_that_of_their_sum(root):
    x = ph(root, "x")
    y1 = g.Square(root, x)
    y2 = g.Scale(root, x, alpha=5.0)
    (dx,) = mg.gradients([y1, y2], [x])
    assert run(root, dx, {x: 2.0}) == 4.0 + 5.0


def test_a_y_listed_twice_counts_twice_and_a_repeated_x_gets_the_same_gradient(root):
    # TF: gradients([y, y], [x, x]) gives the same tensor twice, 2 * dy/dx.
    x = ph(root, "x")
    y = g.Scale(root, x, alpha=3.0)
    dx1, dx2 = mg.gradients([y, y], [x, x])
    assert dx1 is dx2
    assert run(root, dx1, {x: 1.0}) == 6.0


def test_several_xs(root):
    x = ph(root, "x")
    w = ph(root, "w")
    y = g.Mul(root, g.Square(root, x), w)
    dx, dw = mg.gradients(y, [x, w])
    assert run(root, [dx, dw], {x: 3.0, w: 2.0}) == [12.0, 9.0]


def test_the_gradient_of_y_with_respect_to_itself_is_grad_ys(root):
    x = ph(root, "x")
    y = g.Square(root, x)
    (dy,) = mg.gradients(y, y)
    assert run(root, dy, {x: 4.0}) == 1.0
    (dy,) = mg.gradients(y, y, grad_ys=np.float32(7.0))
    assert run(root, dy, {x: 4.0}) == 7.0


def test_xs_feeding_each_other_give_total_derivatives(root):
    # TF 2.21: x1 = 2 * x0; y = x1 * x0; gradients(y, [x0, x1]) at x0 = 3 is [12, 3].
    x0 = ph(root, "x0")
    x1 = g.Scale(root, x0, alpha=2.0)
    y = g.Mul(root, x1, x0)
    d0, d1 = mg.gradients(y, [x0, x1])
    assert run(root, [d0, d1], {x0: 3.0}) == [12.0, 3.0]


def test_an_x_that_is_another_output_of_a_y_op(root):
    x = ph(root, "x")
    split = g.Split(root, x)  # (2x, 3x)
    (da,) = mg.gradients(split.b, split.a)
    assert da is None  # b does not depend on a
    (db,) = mg.gradients(split.b, split.b)
    assert run(root, db, {x: 1.0}) == 1.0


# -- grad_ys ------------------------------------------------------------------------------------


def test_grad_ys_weight_the_ys(root):
    x = ph(root, "x", [2])
    y1 = g.Square(root, x)
    y2 = g.Scale(root, x, alpha=10.0)
    seed = Placeholder(root, F32, [2])
    (dx,) = mg.gradients([y1, y2], x, grad_ys=[seed, None])  # None: ones
    got = run(root, dx, {x: [1.0, 2.0], seed: [3.0, -1.0]})
    np.testing.assert_allclose(got, [2 * 1 * 3 + 10, 2 * 2 * -1 + 10])


def test_grad_ys_as_one_tensor_and_as_numpy_values(root):
    x = ph(root, "x", [2])
    y = g.Square(root, x)
    (a,) = mg.gradients(y, x, grad_ys=mg.Const(root, np.array([1.0, 2.0], np.float32)))
    (b,) = mg.gradients(y, x, grad_ys=[[1.0, 2.0]])  # a list aligned with ys: one literal
    (c,) = mg.gradients(y, x, grad_ys=np.array([1.0, 2.0]))  # converted to float32
    assert a.dtype is b.dtype is c.dtype is F32
    for d in (a, b, c):
        np.testing.assert_allclose(run(root, d, {x: [3.0, 4.0]}), [6.0, 16.0])


def test_default_grad_ys_are_small_consts_or_fills(root):
    x = ph(root, "x", [2])
    (dx,) = mg.gradients(g.Sum(root, g.Square(root, x)), x)
    seed = root.graph.get_operation("gradients/grad_ys_0")
    assert seed.type == "Const" and seed.get_attr("value").tolist() == 1.0


@library("Fill", "Shape")
def test_default_grad_ys_of_unknown_or_large_shapes_are_fills(root):
    x = ph(root, "x", [None])
    (dx,) = mg.gradients(g.Square(root, x), x)
    assert root.graph.get_operation("gradients/grad_ys_0").type == "Fill"
    np.testing.assert_allclose(run(root, dx, {x: [1.0, 2.0, 3.0]}), [2.0, 4.0, 6.0])
    big = ph(root, "big", [1000])
    (db,) = mg.gradients(g.Square(root, big), big)
    fill = root.graph.get_operation("gradients_1/grad_ys_0")
    assert fill.type == "Fill" and fill.inputs[0].op.type == "Const"
    assert db.shape == mg.TensorShape([1000])
    np.testing.assert_allclose(run(root, db, {big: np.ones(1000, np.float32)}), 2.0)


def test_user_grad_ys_go_through_an_identity_named_grad_ys(root):
    x = ph(root, "x")
    seed = ph(root, "seed")
    (dx,) = mg.gradients(x, x, grad_ys=seed)
    assert dx.op.name == "gradients/grad_ys_0" and dx.op.type == "Identity"
    assert run(root, dx, {x: 1.0, seed: 5.0}) == 5.0  # feedable and fetchable apart


@pytest.mark.parametrize(
    "grad_ys, match",
    [
        ([None, None], r"Length mismatch. Passed 2 grad_ys for 1 ys"),
        (np.zeros(3, np.float32), r"grad_ys\[0\] has shape \[3\], which 'y:0' \(shape \[2\]\)"),
        ([["a", "b"]], r"cannot convert grad_ys\[0\] to the dtype of 'y:0' \(float32\)"),
    ],
)
def test_bad_grad_ys(root, grad_ys, match):
    x = ph(root, "x", [2])
    y = g.Square(root.with_op_name("y"), x)
    before = len(root.graph)
    with pytest.raises(mg.InvalidArgumentError, match=match):
        mg.gradients(y, x, grad_ys=grad_ys)
    assert len(root.graph) == before


def test_grad_ys_tensors_must_have_their_ys_dtype_and_shape(root):
    x = ph(root, "x", [2])
    y = g.Square(root.with_op_name("y"), x)
    wrong_dtype = Placeholder(root, mg.float64, [2])
    with pytest.raises(mg.InvalidArgumentError, match=r"dtype float64 but 'y:0' has dtype float32"):
        mg.gradients(y, x, grad_ys=wrong_dtype)
    wrong_shape = Placeholder(root, F32, [3])
    with pytest.raises(mg.InvalidArgumentError, match=r"shape \[3\], incompatible with 'y:0'"):
        mg.gradients(y, x, grad_ys=wrong_shape)
    with pytest.raises(mg.InvalidArgumentError, match="got the Operation"):
        mg.gradients(y, x, grad_ys=wrong_shape.operation)


def test_complex_ys_need_grad_ys(root):
    # TF: "Gradients of complex tensors (...) must set grad_ys (y.dtype = complex64)".
    x = ph(root, "x", [2], mg.complex64)
    y = mg.Identity(root.with_op_name("y"), x)
    with pytest.raises(mg.InvalidArgumentError, match=r"must set grad_ys \(y.dtype = complex64\)"):
        mg.gradients(y, x)
    (dx,) = mg.gradients(y, x, grad_ys=np.array([1 + 2j, 3j], np.complex64))
    np.testing.assert_array_equal(run(root, dx, {x: [0j, 0j]}), [1 + 2j, 3j])


# -- stop_gradients, unconnected, integers ------------------------------------------------------


def test_stop_gradients_give_partial_derivatives(root):
    # TF's documented example: a = 0; b = 2a; gradients(a + b, [a, b]) is [3, 1], and with
    # stop_gradients=[a, b] it is [1, 1].
    a = ph(root, "a")
    b = g.Scale(root, a, alpha=2.0)
    total = mg.gradients(g.Add(root, a, b), [a, b])
    partial = mg.gradients(g.Add(root, a, b), [a, b], stop_gradients=[a, b])
    assert run(root, total, {a: 0.0}) == [3.0, 1.0]
    assert run(root, partial, {a: 0.0}) == [1.0, 1.0]


def test_a_stop_gradient_cuts_the_path_through_its_op(root):
    x = ph(root, "x")
    mid = g.Square(root, x)
    y = g.Add(root, mid, x)
    (dx,) = mg.gradients(y, x, stop_gradients=mid)
    assert run(root, dx, {x: 5.0}) == 1.0


def test_unconnected_gradients_none_or_zero(root):
    # TF's documented example: a = ones([1, 2]); b = ones([3, 1]); gradients(b, a) is [None],
    # or zeros of a's shape with unconnected_gradients='zero'.
    a = ph(root, "a", [1, 2])
    b = ph(root, "b", [3, 1])
    y = g.Square(root, b)
    assert mg.gradients(y, a) == [None]
    assert mg.gradients(y, a, unconnected_gradients="none") == [None]
    (zero,) = mg.gradients(y, a, unconnected_gradients="zero")
    assert zero.dtype is F32 and zero.shape == mg.TensorShape([1, 2])
    np.testing.assert_array_equal(run(root, zero), np.zeros((1, 2), np.float32))


@library("ZerosLike")
def test_zero_gradients_of_unknown_shape_are_zeros_like(root):
    a = ph(root, "a", [None, 2])
    (zero,) = mg.gradients(g.Square(root, ph(root, "b")), a, unconnected_gradients="zero")
    assert zero.op.type == "ZerosLike" and zero.op.name == "gradients/zeros_like"
    np.testing.assert_array_equal(run(root, zero, {a: np.ones((3, 2), np.float32)}), 0.0)


def test_unknown_unconnected_gradients_value(root):
    x = ph(root, "x")
    with pytest.raises(mg.InvalidArgumentError, match="Unknown value for unconnected_gradients"):
        mg.gradients(x, x, unconnected_gradients="zeros")


def test_integer_tensors_carry_no_gradient(root):
    # TF 2.21: y = float(int(x)) * x has gradient float(int(x)) only: the int path is constant.
    x = ph(root, "x")
    n = g.ToInt(root, x)
    y = g.Mul(root, g.ToFloat(root, n), x)
    (dx,) = mg.gradients(y, x)
    assert run(root, dx, {x: 2.5}) == 2.0
    assert mg.gradients(g.ToFloat(root, n), x) == [None]
    assert mg.gradients(n, x) == [None]


def test_integer_xs(root):
    # TF 2.21: gradients(2 * xi, xi) is [None]; gradients(xi, xi) is grad_ys (int ones); with
    # 'zero', zeros of xi's dtype.
    xi = ph(root, "xi", [], mg.int32)
    y = g.ToFloat(root, xi)
    assert mg.gradients(y, xi) == [None]
    (same,) = mg.gradients(xi, xi)
    assert same.dtype is mg.int32 and run(root, same, {xi: 3}) == 1
    (zero,) = mg.gradients(y, xi, unconnected_gradients="zero")
    assert zero.dtype is mg.int32 and run(root, zero) == 0


def test_an_int_output_of_a_multi_output_op_gets_none_and_float_ones_get_zeros(root):
    x = ph(root, "x", [2])
    count = g.Count(root, x)  # (3x, size): the rule asserts that the int output gets None
    (dx,) = mg.gradients(g.Sum(root, count.y), x)
    np.testing.assert_allclose(run(root, dx, {x: [1.0, 2.0]}), [3.0, 3.0])


@library("ZerosLike")
def test_an_unused_float_output_gets_zeros(root):
    x = ph(root, "x", [2])
    split = g.Split(root.with_op_name("split"), x)  # (2x, 3x); only b is used
    (dx,) = mg.gradients(g.Sum(root, split.b), x)
    zeros = root.graph.get_operation("gradients/zeros_like")
    assert zeros.type == "ZerosLike" and zeros.inputs[0] is split.a
    np.testing.assert_allclose(run(root, dx, {x: [1.0, 2.0]}), [3.0, 3.0])


# -- rules: missing, not differentiable, misbehaving ----------------------------------------------


def test_an_op_without_a_rule_is_an_error_naming_it(root):
    x = ph(root, "x")
    mid = g.NoRule(root.with_op_name("mystery"), x)
    y = g.Square(root, mid)
    before = [op.name for op in root.graph.operations]
    with pytest.raises(mg.NotFoundError) as info:
        mg.gradients(y, x)
    message = str(info.value)
    assert "No gradient defined for operation 'mystery' (op type: GradTestNoRule)" in message
    assert "register_gradient('GradTestNoRule')" in message and "no_gradient" in message
    assert isinstance(info.value, LookupError)  # as TF's LookupError
    assert (info.value.node_name, info.value.op_type) == ("mystery", "GradTestNoRule")
    # The graph is unchanged, names included: the next call gets `gradients` again.
    assert [op.name for op in root.graph.operations] == before
    (dm,) = mg.gradients(y, mid)
    assert dm.op.name.startswith("gradients/")


def test_an_op_without_a_rule_is_fine_where_no_gradient_flows(root):
    x = ph(root, "x")
    other = ph(root, "other")
    y = g.Add(root, g.Square(root, x), g.NoRule(root, other))
    (dx,) = mg.gradients(y, x)  # NoRule is not between x and y
    assert run(root, dx, {x: 2.0, other: 0.0}) == 4.0
    stopped = g.NoRule(root, x)
    (dx,) = mg.gradients(g.Add(root, stopped, x), x, stop_gradients=[stopped])
    assert run(root, dx, {x: 2.0}) == 1.0


def test_no_gradient_ops_pass_nothing_on(root):
    x = ph(root, "x")
    y = g.Add(root, g.NotDiff(root, x), g.Square(root, x))
    (dx,) = mg.gradients(y, x)
    assert run(root, dx, {x: 3.0}) == 6.0
    assert mg.gradients(g.NotDiff(root, x), x) == [None]


def test_identity_passes_gradients_through(root):
    x = ph(root, "x")
    y = mg.Identity(root, mg.Identity(root, g.Square(root, x)))
    (dx,) = mg.gradients(y, x)
    assert run(root, dx, {x: 3.0}) == 6.0


def bad(root, mode, shape=(2,)):
    x = ph(root, "x", shape)
    return x, g.Bad(root.with_op_name("bad"), x, mode=mode)


@pytest.mark.parametrize(
    "mode, error, match",
    [
        ("count", mg.InvalidArgumentError, r"Num gradients 2 generated for op bad = GradTestBad"),
        ("dtype", mg.InvalidArgumentError, r"input 0: the gradient has dtype float64 but the "),
        ("shape", mg.InvalidArgumentError, r"Incompatible shapes between op input and calculated "
         r"input gradient. Forward operation: bad. Input index: 0. Original input shape: \[2\]. "
         r"Calculated input gradient shape: \[\]"),
        ("literal", mg.InvalidArgumentError, r"a gradient is an Output, an IndexedSlices or None; "
         r"got ndarray"),
        ("builder", mg.InvalidArgumentError, r"which has 2 outputs; return one of them"),
        ("graph", mg.InvalidArgumentError, r"the gradient belongs to another graph"),
    ],
)  # fmt: skip
def test_a_rule_returning_a_bad_gradient_is_refused(root, mode, error, match):
    x, y = bad(root, mode)
    before = len(root.graph)
    with pytest.raises(error, match=match) as info:
        mg.gradients(y, x)
    assert "_grad_ops._bad_grad" in str(info.value)  # the rule at fault
    assert len(root.graph) == before


def test_a_rule_returning_too_few_gradients(root):
    x = ph(root, "x")
    y = g.Bad2(root.with_op_name("two"), x, x)
    with pytest.raises(mg.InvalidArgumentError, match=r"Num gradients 1 .* num inputs 2"):
        mg.gradients(y, x)


def test_a_rule_that_raises_says_which_node_it_was_differentiating(root):
    x, y = bad(root, "raise")
    before = len(root.graph)
    with pytest.raises(ValueError, match="this rule is broken") as info:
        mg.gradients(y, x)
    assert "of node 'bad' (GradTestBad)" in "".join(getattr(info.value, "__notes__", []))
    assert len(root.graph) == before


# -- arguments ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ys, xs, match",
    [
        (None, "x", r"ys must be an Output or a single-output op builder; got NoneType"),
        ("y", 1.0, r"xs must be an Output .* got float"),
        ("y", ["x", [1]], r"xs\[1\] must be an Output .* got list"),
        ("split", "x", r"ys: 'GradTestSplit' has 2 outputs: pick one"),
        ("y", "op", r"pass one of its outputs"),
    ],
)
def test_bad_arguments(root, ys, xs, match):
    x = ph(root, "x")
    things = {"x": x, "y": g.Square(root, x), "split": g.Split(root, x), "op": x.op}

    def pick(v):
        if isinstance(v, list):
            return [pick(i) for i in v]
        return things.get(v, v) if isinstance(v, str) else v

    with pytest.raises(mg.InvalidArgumentError, match=match):
        mg.gradients(pick(ys), pick(xs))


def test_tensors_of_different_graphs_are_refused(root):
    x = ph(root, "x")
    other = Scope.new_root_scope()
    z = ph(other, "z")
    with pytest.raises(mg.InvalidArgumentError, match="belong to different graphs"):
        mg.gradients(g.Square(root, x), z)


def test_empty_lists(root):
    x = ph(root, "x")
    assert mg.gradients([], []) == []
    assert mg.gradients([], [x]) == [None]
    assert mg.gradients(g.Square(root, x), []) == []


# -- names and scopes ------------------------------------------------------------------------------


def test_names_mirror_tf(root):
    x = ph(root, "x")
    layer = root.new_sub_scope("layer")
    h = g.Square(layer.with_op_name("sq"), x)
    h2 = g.Scale(layer.with_op_name("scale"), h, alpha=2.0)
    y = g.Sum(root.with_op_name("loss"), h2)
    mg.gradients(y, x)
    names = [op.name for op in root.graph.operations if op.name.startswith("gradients")]
    assert names == [
        "gradients/grad_ys_0",
        "gradients/loss_grad/GradTestFillLike",
        "gradients/layer/scale_grad/GradTestScale",
        "gradients/layer/sq_grad/GradTestScale",
        "gradients/layer/sq_grad/GradTestMul",
    ]
    mg.gradients(y, x)
    assert root.graph.get_operation("gradients_1/layer/sq_grad/GradTestMul")
    mg.gradients(y, x, name="backprop")
    assert root.graph.get_operation("backprop/loss_grad/GradTestFillLike")
    with pytest.raises(mg.InvalidArgumentError, match="invalid sub-scope name"):
        mg.gradients(y, x, name="a/b")


def test_gradients_go_under_the_current_default_scope(root):
    x = ph(root, "x")
    y = g.Square(root.with_op_name("y"), x)
    with root.new_sub_scope("train").as_default():
        (dx,) = mg.gradients(y, x)
    assert dx.op.name == "train/gradients/y_grad/GradTestMul"


def test_second_order_names_and_values(root):
    x = ph(root, "x")
    y = g.Square(root.with_op_name("y"), g.Square(root.with_op_name("sq"), x))  # x^4
    (dx,) = mg.gradients(y, x)  # 4x^3
    (ddx,) = mg.gradients(dx, x)  # 12x^2: x reaches dx by two paths, summed by AddN
    assert ddx.op.name == "gradients_1/AddN"
    assert root.graph.get_operation("gradients_1/gradients/sq_grad/GradTestMul_grad/GradTestMul")
    assert run(root, [dx, ddx], {x: 2.0}) == [32.0, 48.0]


@rule("AddN")
def test_third_order_through_addn(root):
    x = ph(root, "x")
    y = g.Square(root, g.Square(root, x))  # x^4
    (d3,) = mg.gradients(mg.gradients(mg.gradients(y, x)[0], x)[0], x)  # 24x
    assert run(root, d3, {x: 2.0}) == 48.0


def test_rules_run_under_their_scope_as_default(root):
    PROBED.clear()
    x = ph(root, "x")
    y = Probe(root.with_op_name("probe"), x)
    mg.gradients(y, x)
    assert PROBED == ["gradients/probe_grad"]


Probe = mg.register_op(
    mg.OpDef("GradTestCoreScopeProbe", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
             shape_fn=lambda ctx: ctx.input_shapes[0])
)  # fmt: skip
PROBED: list[str] = []


@mg.register_gradient("GradTestCoreScopeProbe")
def _probe_grad(op, grad):
    PROBED.append(mg.current_scope(op.graph).name_scope)
    return grad


@operators()
def test_rules_may_use_tensor_operators(root):
    x = ph(root, "x")
    y = OperatorSquare(root.with_op_name("sq"), x)
    (dx,) = mg.gradients(y, x)
    assert dx.op.name.startswith("gradients/sq_grad/")
    assert run(root, dx, {x: 3.0}) == 6.0


OperatorSquare = mg.register_op(
    mg.OpDef("GradTestCoreOperatorSquare", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
             shape_fn=lambda ctx: ctx.input_shapes[0])
)  # fmt: skip
mg.register_kernel("GradTestCoreOperatorSquare", "CPU", lambda ctx, x, T: x * x)


@mg.register_gradient("GradTestCoreOperatorSquare")
def _operator_square_grad(op, grad):
    return grad * (op.inputs[0] + op.inputs[0])


# -- devices ---------------------------------------------------------------------------------------


def gradient_ops(graph, prefix="gradients/"):
    return [op for op in graph.operations if op.name.startswith(prefix)]


def test_gradient_nodes_request_their_forward_ops_device(root):
    x = ph(root, "x", [2])
    y = g.Square(root.with_op_name("y").with_device("/device:CPU:0"), x)
    z = g.Sum(root.with_op_name("z"), y)
    mg.gradients(z, x)
    graph = root.graph
    rule_y = [op for op in gradient_ops(graph) if op.name.startswith("gradients/y_grad/")]
    assert rule_y and all(op.device == "/device:CPU:0" for op in rule_y)
    assert all(op.colocation_group == op.name for op in rule_y)  # a request, not colocation
    rule_z = graph.get_operation("gradients/z_grad/GradTestFillLike")
    assert rule_z.device == "" and rule_z.colocation_group == rule_z.name


def test_gradient_nodes_join_their_forward_ops_colocation(root):
    table = ph(root.with_device("/device:CPU:0"), "table", [None, 2])
    near = root.colocate_with(table)
    rows = g.Gather(near.with_op_name("rows"), table, np.array([1, 3], np.int32))
    y = g.Sum(root, g.Square(root, rows))
    (dt,) = mg.gradients(y, table)
    assert isinstance(dt, mg.IndexedSlices)
    shape_op = dt.dense_shape.op
    assert shape_op.name == "gradients/rows_grad/GradTestShape"
    assert shape_op.colocation_group == "table"


def test_a_device_in_the_users_scope_decides_for_all_gradient_nodes(root):
    x = ph(root, "x", [2])
    y = g.Square(root.with_op_name("y").with_device("/device:GPU:0"), x)
    with root.with_device("/device:CPU:0").as_default():
        mg.gradients(g.Sum(root, y), x)
    assert all(op.device == "/device:CPU:0" for op in gradient_ops(root.graph))


def test_default_grad_ys_and_sums_follow_their_ops(root):
    x = ph(root, "x")
    dev = root.with_device("/device:CPU:0")
    y = g.Mul(dev.with_op_name("y"), g.Square(root, x), g.Exp(root, x))
    mg.gradients(y, x)
    graph = root.graph
    assert graph.get_operation("gradients/grad_ys_0").device == "/device:CPU:0"
    assert graph.get_operation("gradients/AddN").device == ""  # x has no request


def test_gradient_nodes_do_not_take_the_users_kernel_label_but_take_its_dependencies(root):
    x = ph(root, "x")
    y = g.Square(root, x)
    dep = mg.NoOp(root.with_op_name("dep"))
    with root.with_kernel_label("special").with_control_dependencies(dep).as_default():
        mg.gradients(y, x)
    ops = gradient_ops(root.graph)
    assert ops and all(op.kernel_label == "" for op in ops)
    assert all(dep.operation in op.control_inputs for op in ops)


def test_gradients_run_on_gpus_where_their_kernels_are(sim_gpus, root):
    x = ph(root, "x", [3])
    y = g.Sum(root, g.Square(root, x))
    (dx,) = mg.gradients(y, x)
    metadata = mg.RunMetadata()
    with Session(root) as session:
        value = session.run(dx, {x: [1.0, 2.0, 3.0]}, run_metadata=metadata)
    np.testing.assert_allclose(value, [2.0, 4.0, 6.0])
    assert metadata.placement[dx.op.name].endswith("GPU:0")


# -- the graph changes as a unit ----------------------------------------------------------------


def test_a_finalized_graph_refuses_gradients(root):
    x = ph(root, "x")
    y = g.Square(root, x)
    root.graph.finalize()
    with pytest.raises(mg.FailedPreconditionError, match="finalized"):
        mg.gradients(y, x)


# -- gradient graphs are ordinary graphs -------------------------------------------------------


def test_a_gradient_graph_round_trips_through_a_graph_def(root):
    table = ph(root.with_device("/device:CPU:0"), "table", [None, 2])
    rows = g.Gather(
        root.colocate_with(table).with_op_name("rows"), table, np.array([1, 1], np.int32)
    )
    loss = g.Sum(root.with_op_name("loss"), g.Square(root, rows))
    (dt,) = mg.gradients(loss, table)
    graph_def = root.graph.as_graph_def()
    other = Scope.new_root_scope()
    values, indices = mg.import_graph_def(
        other, graph_def, return_elements=[dt.values.name, dt.indices.name], name=""
    )
    shape_op = other.graph.get_operation(dt.dense_shape.op.name)
    assert shape_op.colocation_group == "table"  # the colocation travels as TF's _class
    feed = {other.graph.get_output("table:0"): np.arange(6, dtype=np.float32).reshape(3, 2)}
    expected = run(root, [dt.values, dt.indices], {table: feed[next(iter(feed))]})
    got = run(other, [values, indices], feed)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
