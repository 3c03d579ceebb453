"""Scope: TF C++ naming, immutability and per-op properties (minigraph/scope.py)."""

from __future__ import annotations

import pytest

import minigraph as mg
from minigraph import Const, DeviceSpec, Identity, NoOp, Placeholder, Scope
from minigraph.errors import InvalidArgumentError


@pytest.fixture
def root():
    return Scope.new_root_scope()


@pytest.fixture
def x(root):
    return Placeholder(root.with_op_name("x"), mg.float32, [2])


def names(scope):
    return [op.name for op in scope.graph.operations]


# -- naming --------------------------------------------------------------------------------------


def test_repeated_ops_are_uniquified(root):
    a = Identity(root, [1.0])
    b = Identity(root, a)
    c = Identity(root, b)
    assert (a.operation.name, b.operation.name, c.operation.name) == (
        "Identity", "Identity_1", "Identity_2",
    )  # fmt: skip
    assert names(root) == ["Const", "Identity", "Identity_1", "Identity_2"]


def test_nested_sub_scopes(root, x):
    outer = root.new_sub_scope("outer")
    inner = outer.new_sub_scope("inner")
    assert (outer.name_scope, inner.name_scope) == ("outer", "outer/inner")
    assert Identity(inner, x).operation.name == "outer/inner/Identity"
    assert Identity(inner, x).operation.name == "outer/inner/Identity_1"
    assert Identity(outer, x).operation.name == "outer/Identity"
    assert Identity(root, x).operation.name == "Identity"


def test_a_second_sub_scope_of_the_same_name_is_uniquified(root, x):
    first = root.new_sub_scope("outer")
    second = root.new_sub_scope("outer")
    third = root.new_sub_scope("outer")
    assert (first.name_scope, second.name_scope, third.name_scope) == (
        "outer", "outer_1", "outer_2",
    )  # fmt: skip
    assert Identity(second, x).operation.name == "outer_1/Identity"
    assert second.new_sub_scope("inner").name_scope == "outer_1/inner"
    assert first.new_sub_scope("inner").name_scope == "outer/inner"


def test_sub_scope_names_are_per_parent(root):
    a = root.new_sub_scope("a").new_sub_scope("s")
    b = root.new_sub_scope("b").new_sub_scope("s")
    assert (a.name_scope, b.name_scope) == ("a/s", "b/s")


def test_with_op_name_repeated(root, x):
    g = root.with_op_name("g")
    assert Identity(g, x).operation.name == "g"
    assert Identity(g, x).operation.name == "g_1"
    assert Identity(root.with_op_name("g"), x).operation.name == "g_2"


def test_explicit_suffixed_name_is_never_clobbered(root, x):
    # TF's GetUniqueName: names are reserved per name scope; suffixing skips taken names.
    assert Identity(root.with_op_name("g_1"), x).operation.name == "g_1"
    assert Identity(root.with_op_name("g"), x).operation.name == "g"
    assert Identity(root.with_op_name("g"), x).operation.name == "g_2"
    assert Identity(root.with_op_name("g"), x).operation.name == "g_3"
    assert Identity(root.with_op_name("g_1"), x).operation.name == "g_1_1"
    assert names(root) == ["x", "g_1", "g", "g_2", "g_3", "g_1_1"]


def test_default_names_skip_explicit_ones(root, x):
    Identity(root.with_op_name("Identity_1"), x)
    Identity(root, x)
    Identity(root, x)
    assert names(root) == ["x", "Identity_1", "Identity", "Identity_2"]


def test_with_op_name_in_a_sub_scope(root, x):
    outer = root.new_sub_scope("outer")
    assert Identity(outer.with_op_name("g"), x).operation.name == "outer/g"
    assert Identity(root.with_op_name("g"), x).operation.name == "g"


def test_op_and_sub_scope_share_one_namespace(root, x):
    Identity(root.with_op_name("block"), x)
    assert root.new_sub_scope("block").name_scope == "block_1"
    sub = root.new_sub_scope("Identity")
    assert sub.name_scope == "Identity"
    assert Identity(root, x).operation.name == "Identity_1"
    assert Identity(sub, x).operation.name == "Identity/Identity"


def test_explicit_op_name_is_not_inherited_by_sub_scopes(root, x):
    named = root.with_op_name("g")
    sub = named.new_sub_scope("inner")
    assert Identity(sub, x).operation.name == "inner/Identity"
    assert Identity(named.new_sub_scope(""), x).operation.name == "Identity"


def test_empty_sub_scope_keeps_the_name_scope(root, x):
    outer = root.new_sub_scope("outer")
    same = outer.new_sub_scope("")
    assert same.name_scope == "outer"
    assert Identity(outer, x).operation.name == "outer/Identity"
    assert Identity(same, x).operation.name == "outer/Identity_1"


def test_literal_inputs_are_named_in_the_current_name_scope(root):
    outer = root.new_sub_scope("outer")
    Identity(outer.with_op_name("named"), [1, 2])
    Identity(outer, 3)
    assert names(root) == ["outer/Const", "outer/named", "outer/Const_1", "outer/Identity"]


@pytest.mark.parametrize("name", ["", "a/b", "_x", "-x", "a b", "é", 3, None])
def test_invalid_op_names_raise(root, name):
    with pytest.raises(InvalidArgumentError, match="invalid op name"):
        root.with_op_name(name)


@pytest.mark.parametrize("name", ["a/b", "_x", "-x", "a b", "é", 3, None])
def test_invalid_sub_scope_names_raise(root, name):
    with pytest.raises(InvalidArgumentError, match="invalid sub-scope name"):
        root.new_sub_scope(name)


@pytest.mark.parametrize("name", ["a.b", "x-1", "0", "A_b.c-d"])
def test_valid_unusual_names(root, name):
    assert Identity(root.with_op_name(name), [1]).operation.name == name
    assert root.new_sub_scope(name).name_scope == f"{name}_1"


def test_invalid_sub_scope_names_reserve_nothing(root, x):
    with pytest.raises(InvalidArgumentError, match=r"invalid sub-scope name 'a/b'"):
        root.new_sub_scope("a/b")
    assert root.new_sub_scope("a").name_scope == "a"


def test_graphs_name_independently():
    s1, s2 = Scope.new_root_scope(), Scope.new_root_scope()
    assert s1.graph is not s2.graph
    assert Const(s1, 1).operation.name == "Const"
    assert Const(s2, 1).operation.name == "Const"


# -- immutability --------------------------------------------------------------------------------


@pytest.mark.parametrize("attr", ["graph", "_prefix", "name_scope", "device", "anything"])
def test_scopes_are_immutable(root, attr):
    with pytest.raises(AttributeError, match="Scope is immutable"):
        setattr(root, attr, None)


def test_with_methods_return_new_scopes_and_leave_the_original_alone(root, x):
    derived = [
        root.with_op_name("g"),
        root.with_device("/gpu:0"),
        root.with_control_dependencies(x),
        root.colocate_with(x),
        root.with_kernel_label("fast"),
        root.new_sub_scope("sub"),
        root.with_no_control_dependencies(),
        root.clear_colocation(),
    ]
    for scope in derived:
        assert scope is not root
        assert scope.graph is root.graph
    op = Identity(root, x).operation
    assert op.name == "Identity"
    assert op.device == ""
    assert op.control_inputs == ()
    assert op.colocation_group == "Identity"
    assert op.kernel_label == ""
    assert root.name_scope == ""
    assert root.device is None
    assert root.control_dependencies == ()
    assert root.kernel_label == ""


def test_repr(root):
    scope = root.new_sub_scope("a").with_op_name("g").with_device("gpu:1")
    assert repr(scope) == "<Scope name_scope='a' op_name='g' device='/device:GPU:1'>"
    assert repr(root) == "<Scope name_scope=''>"


# -- device --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "device, canonical",
    [
        ("gpu:1", "/device:GPU:1"),
        ("/gpu:1", "/device:GPU:1"),
        ("/cpu:0", "/device:CPU:0"),
        ("CPU", "/device:CPU:*"),
        ("/device:gpu:2", "/device:GPU:2"),
        (
            "/job:localhost/replica:0/task:0/device:GPU:0",
            "/job:localhost/replica:0/task:0/device:GPU:0",
        ),
        ("/job:localhost", "/job:localhost"),
    ],
)  # fmt: skip
def test_with_device_canonicalises(root, device, canonical):
    scope = root.with_device(device)
    assert isinstance(scope.device, DeviceSpec)
    assert scope.device.to_string() == canonical
    op = Identity(scope, [1]).operation
    assert op.device == canonical
    assert op.requested_device == DeviceSpec.from_string(canonical)


def test_with_device_accepts_a_device_spec_and_clears(root):
    spec = DeviceSpec(device_type="gpu", device_index=0)
    scope = root.with_device(spec)
    assert scope.device is spec
    assert scope.with_device("").device is None
    assert scope.with_device(None).device is None
    assert Identity(scope.with_device(""), [1]).operation.device == ""


def test_with_device_replaces_the_previous_device(root):
    scope = root.with_device("/gpu:0").with_device("cpu:0")
    assert scope.device.to_string() == "/device:CPU:0"


@pytest.mark.parametrize(
    "device, message",
    [
        ("/device:GPU:x", r"invalid device name '/device:GPU:x': device index 'x'"),
        ("/replica:a", r"invalid device name '/replica:a': replica must be a number"),
        ("???", r"invalid device name '\?\?\?': unrecognised part"),
        ("gpu/cpu", r"invalid device name 'gpu/cpu': more than one device type"),
    ],
)
def test_with_device_invalid_string_raises(root, device, message):
    with pytest.raises(InvalidArgumentError, match=message):
        root.with_device(device)


def test_with_device_non_string_raises(root):
    with pytest.raises(InvalidArgumentError, match="a device must be a string or DeviceSpec"):
        root.with_device(1)


# -- control dependencies ------------------------------------------------------------------------


def test_with_control_dependencies_accumulates(root, x):
    a = NoOp(root.with_op_name("a"))
    b = Identity(root.with_op_name("b"), x)
    c = Const(root.with_op_name("c"), 1)
    first = root.with_control_dependencies(a)
    both = first.with_control_dependencies([b.output, c.operation])
    assert first.control_dependencies == (a.operation,)
    assert both.control_dependencies == (a.operation, b.operation, c.operation)
    op = Identity(both, x).operation
    assert op.control_inputs == (a.operation, b.operation, c.operation)
    assert op.node_def() == "Identity = Identity[T=float32](x:0, ^a, ^b, ^c)"


def test_control_dependencies_are_deduplicated(root, x):
    a = NoOp(root)
    scope = root.with_control_dependencies([a, a.operation]).with_control_dependencies(a)
    assert scope.control_dependencies == (a.operation,)
    assert Identity(scope, x).operation.control_inputs == (a.operation,)


def test_with_no_control_dependencies_clears(root, x):
    a = NoOp(root)
    scope = root.with_control_dependencies(a).with_no_control_dependencies()
    assert Identity(scope, x).operation.control_inputs == ()


def test_literal_consts_do_not_get_control_dependencies(root):
    a = NoOp(root)
    op = Identity(root.with_control_dependencies(a), [1.0]).operation
    assert op.control_inputs == (a.operation,)
    assert op.inputs[0].op.control_inputs == ()


def test_control_dependency_errors(root):
    other = Scope.new_root_scope()
    foreign = NoOp(other)
    with pytest.raises(InvalidArgumentError, match=r"control dependency 'NoOp' is in another"):
        root.with_control_dependencies(foreign)
    with pytest.raises(
        InvalidArgumentError,
        match="a control dependency must be an Operation, Output or op builder; got str",
    ):
        root.with_control_dependencies(["NoOp"])


# -- colocation and kernel label -----------------------------------------------------------------


def test_colocate_with(root, x):
    target = Identity(root.with_op_name("target"), x)
    assert target.operation.colocation_group == "target"
    scope = root.colocate_with(target)
    follower = Identity(scope, [1.0])
    assert follower.operation.colocation_group == "target"
    # Colocating with a colocated op joins the same group.
    second = Identity(root.colocate_with(follower.output), x)
    assert second.operation.colocation_group == "target"
    assert Identity(scope.clear_colocation(), x).operation.colocation_group == "Identity_2"


def test_colocate_with_errors(root):
    other = NoOp(Scope.new_root_scope())
    with pytest.raises(InvalidArgumentError, match="colocation target 'NoOp' is in another graph"):
        root.colocate_with(other)
    with pytest.raises(InvalidArgumentError, match="a colocation target must be an Operation"):
        root.colocate_with("x")


def test_with_kernel_label(root, x):
    scope = root.with_kernel_label("fast")
    assert scope.kernel_label == "fast"
    assert Identity(scope, x).operation.kernel_label == "fast"
    assert Identity(scope.with_kernel_label(""), x).operation.kernel_label == ""
    with pytest.raises(
        InvalidArgumentError, match="a kernel label is a printable string .*; got 3"
    ):
        root.with_kernel_label(3)


def test_sub_scopes_inherit_device_control_colocation_and_label(root, x):
    a = NoOp(root)
    scope = (
        root.with_device("gpu:0")
        .with_control_dependencies(a)
        .colocate_with(x)
        .with_kernel_label("k")
        .new_sub_scope("sub")
    )
    op = Identity(scope, x).operation
    assert op.name == "sub/Identity"
    assert op.device == "/device:GPU:0"
    assert op.control_inputs == (a.operation,)
    assert op.colocation_group == "x"
    assert op.kernel_label == "k"
