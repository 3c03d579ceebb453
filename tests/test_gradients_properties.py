"""Property test of the gradient algorithm: random graphs of the test ops (shared inputs,
diamonds, several xs and ys, unused branches, stop_gradients) against central differences,
and against the gradient computed the naive way (one call per y, summed)."""

from __future__ import annotations

import _grad_ops as g
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops  # noqa: F401 - AddN sums the gradients that meet
from minigraph.testing import assert_gradients_close

UNARY = ("square", "scale", "exp", "identity")
BINARY = ("add", "mul")


@st.composite
def graphs(draw):
    """A recipe: per node, (op, input indices into the values made so far)."""
    n_x = draw(st.integers(1, 3))
    nodes = []
    for k in range(draw(st.integers(1, 8))):
        available = n_x + k
        if draw(st.booleans()):
            nodes.append((draw(st.sampled_from(UNARY)), (draw(st.integers(0, available - 1)),)))
        else:
            pair = draw(st.tuples(st.integers(0, available - 1), st.integers(0, available - 1)))
            nodes.append((draw(st.sampled_from(BINARY)), pair))
    n_y = draw(st.integers(1, min(3, len(nodes))))
    ys = draw(st.lists(st.integers(n_x, n_x + len(nodes) - 1), min_size=n_y, max_size=n_y))
    values = draw(
        st.lists(st.lists(st.floats(-1.0, 1.0), min_size=2, max_size=2), min_size=n_x, max_size=n_x)
    )
    return n_x, nodes, ys, [np.array(v) for v in values]


def build(scope, xs, nodes, ys):
    made = list(xs)
    for kind, args in nodes:
        a = [made[i] for i in args]
        if kind == "square":
            out = g.Square(scope, a[0])
        elif kind == "scale":
            out = g.Scale(scope, a[0], alpha=0.5)
        elif kind == "exp":
            out = g.Exp(scope, a[0])
        elif kind == "identity":
            out = mg.Identity(scope, a[0])
        elif kind == "add":
            out = g.Add(scope, *a)
        else:
            out = g.Mul(scope, *a)
        made.append(out.output)
    return [made[i] for i in ys]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_match_central_differences(recipe):
    n_x, nodes, ys, values = recipe

    def f(scope, *xs):
        outs = build(scope, xs, nodes, ys)
        total = g.Sum(scope, outs[0])
        for out in outs[1:]:
            total = g.Add(scope, total, g.Sum(scope, out))
        return total

    assert_gradients_close(f, values)


@settings(max_examples=30, deadline=None)
@given(graphs())
def test_the_gradient_of_several_ys_is_the_sum_of_their_gradients(recipe):
    n_x, nodes, ys, values = recipe
    root = mg.Scope.new_root_scope()
    xs = [mg.Placeholder(root, mg.float64, [2]).output for _ in range(n_x)]
    outs = build(root, xs, nodes, ys)
    together = mg.gradients(outs, xs, unconnected_gradients="zero")
    apart = [mg.gradients(y, xs, unconnected_gradients="zero") for y in outs]
    feeds = dict(zip(xs, values))
    with mg.Session(root) as session:
        got = session.run(together, feeds)
        parts = session.run(apart, feeds)
    for i in range(n_x):
        np.testing.assert_allclose(got[i], sum(p[i] for p in parts), rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(graphs(), st.data())
def test_stop_gradients_equal_feeding_the_stopped_tensors(recipe, data):
    # Holding tensors constant is the same as differentiating the graph cut at them, with the
    # cut tensors fed as placeholders.
    n_x, nodes, ys, values = recipe
    root = mg.Scope.new_root_scope()
    xs = [mg.Placeholder(root, mg.float64, [2]).output for _ in range(n_x)]
    made = list(xs)
    for kind, args in nodes:
        made.append(
            build(root, [made[i] for i in args], [(kind, tuple(range(len(args))))], [len(args)])[0]
        )
    stopped = data.draw(st.lists(st.sampled_from(range(n_x, len(made))), max_size=2, unique=True))
    loss = [made[i] for i in ys]
    (held,) = [mg.gradients(loss, xs, stop_gradients=[made[i] for i in stopped],
                            unconnected_gradients="zero")]  # fmt: skip
    feeds = dict(zip(xs, values))
    with mg.Session(root) as session:
        expected_inputs = session.run([made[i] for i in stopped], feeds)
    # The cut graph: the stopped tensors become constants of their values.
    cut = mg.Scope.new_root_scope()
    cxs = [mg.Placeholder(cut, mg.float64, [2]).output for _ in range(n_x)]
    cmade = list(cxs)
    for index, (kind, args) in enumerate(nodes, start=n_x):
        if index in stopped:
            value = expected_inputs[stopped.index(index)]
            cmade.append(mg.Const(cut, value).output)
            continue
        cmade.append(
            build(cut, [cmade[i] for i in args], [(kind, tuple(range(len(args))))], [len(args)])[0]
        )
    want = mg.gradients([cmade[i] for i in ys], cxs, unconnected_gradients="zero")
    with mg.Session(root) as session:
        got = session.run(held, feeds)
    with mg.Session(cut) as session:
        expected = session.run(want, dict(zip(cxs, values)))
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
