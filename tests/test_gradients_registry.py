"""register_gradient / no_gradient: TF's RegisterGradient and NotDifferentiable, one visible
call each; registering twice is refused unless identical."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import minigraph as mg
from minigraph import registry
from minigraph.op_def import OpDef

_counter = itertools.count()


def new_op() -> str:
    """A fresh op type (op names are global to the process)."""
    name = f"GradTestRegistry{next(_counter)}"
    mg.register_op(
        OpDef(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
              shape_fn=lambda ctx: ctx.input_shapes[0])
    )  # fmt: skip
    return name


def _rule(op, grad):
    return grad


def test_register_gradient_is_a_decorator_returning_the_function():
    name = new_op()

    @mg.register_gradient(name)
    def grad(op, g):
        return g

    assert grad.__name__ == "grad"
    rule = registry.gradient_rule(name)
    assert rule.fn is grad and rule.op_type == name and not rule.accepts_indexed_slices
    assert repr(rule) == f"GradientRule({name}: {__name__}.{grad.__qualname__})"
    with pytest.raises(AttributeError, match="immutable"):
        rule.fn = None


def test_registering_the_same_function_again_does_nothing():
    name = new_op()
    mg.register_gradient(name)(_rule)
    assert mg.register_gradient(name)(_rule) is _rule
    assert registry.gradient_rule(name).fn is _rule


def test_a_cell_run_twice_registers_its_rule_once():
    name = new_op()
    source = "def again(op, grad):\n    return grad\n"
    for _ in range(2):
        namespace: dict = {"__name__": __name__}
        exec(compile(source, "<cell>", "exec"), namespace)
        mg.register_gradient(name)(namespace["again"])
    assert registry.gradient_rule(name).fn.__name__ == "again"


def test_another_rule_for_the_same_op_is_refused():
    name = new_op()
    mg.register_gradient(name)(_rule)

    def other(op, grad):
        return None

    already = (
        rf"a gradient for op type '{name}' is already registered \(.*\._rule\); it cannot "
        r"also be .*\.other"
    )
    with pytest.raises(mg.AlreadyExistsError, match=already):
        mg.register_gradient(name)(other)
    with pytest.raises(mg.AlreadyExistsError, match="cannot also be"):
        mg.register_gradient(name, accepts_indexed_slices=True)(_rule)  # another flag
    assert registry.gradient_rule(name).fn is _rule


def test_no_gradient_and_its_conflicts():
    name = new_op()
    mg.no_gradient(name)
    mg.no_gradient(name)  # again: nothing
    assert registry.gradient_rule(name).fn is None
    assert "not differentiable" in repr(registry.gradient_rule(name))
    with pytest.raises(mg.AlreadyExistsError, match="registered as not differentiable"):
        mg.register_gradient(name)(_rule)
    other = new_op()
    mg.register_gradient(other)(_rule)
    with pytest.raises(mg.AlreadyExistsError, match="cannot also be declared not differentiable"):
        mg.no_gradient(other)


def test_unknown_op_types_are_refused():
    with pytest.raises(mg.NotFoundError, match="Op type not registered: 'GradTestNoSuchOp'"):
        mg.register_gradient("GradTestNoSuchOp")
    with pytest.raises(mg.NotFoundError, match="Op type not registered"):
        mg.no_gradient("GradTestNoSuchOp")
    with pytest.raises(mg.InvalidArgumentError, match="op type name"):
        mg.register_gradient(3)
    with pytest.raises(mg.NotFoundError, match="No gradient defined for op type 'NoSuchOp'"):
        registry.gradient_rule("NoSuchOp")
    with pytest.raises(mg.InvalidArgumentError, match="op type name"):
        registry.gradient_rule(None)


def test_bad_rules_and_flags_are_refused():
    name = new_op()
    with pytest.raises(mg.InvalidArgumentError, match=r"decorates a function fn\(op, "):
        mg.register_gradient(name)("not callable")
    with pytest.raises(mg.InvalidArgumentError, match="accepts_indexed_slices must be a bool"):
        mg.register_gradient(name, accepts_indexed_slices=1)
    with pytest.raises(mg.NotFoundError):
        registry.gradient_rule(name)  # nothing was registered


def test_an_op_with_a_builder_alias_is_registered_under_its_op_type():
    # `Gather` is a builder aliasing GatherV2: rules are per op type, as TF's.
    import ops  # noqa: F401

    with pytest.raises(mg.NotFoundError, match="use get_op_def"):
        mg.register_gradient("Gather")


def test_framework_ops_rules():
    assert registry.gradient_rule("Identity").accepts_indexed_slices
    for op_type in ("Const", "Placeholder", "NoOp"):
        assert registry.gradient_rule(op_type).fn is None
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [2])
    (dx,) = mg.gradients(mg.Identity(root, x), x)
    with mg.Session(root) as session:
        np.testing.assert_array_equal(session.run(dx, {x: [1.0, 2.0]}), [1.0, 1.0])
    c = mg.Const(root, 1.0)
    assert mg.gradients(mg.Identity(root, c), c) != [None]  # the gradient w.r.t. c itself
