"""The public names runtime modules use of each other (standard 8): read-only accessors of
Operation and OpDef, Graph's construction protocol, and the registry's alias rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import minigraph as mg
from minigraph import Const, Identity, Placeholder, Scope, registry
from minigraph.builder import op_builder
from minigraph.op_def import AttrDef, OpDef

_counter = itertools.count()


@pytest.fixture
def root():
    return Scope.new_root_scope()


# -- Operation ------------------------------------------------------------------------------------


def test_creation_index_is_the_position_in_the_graph(root):
    x = Placeholder(root, mg.float32, [2, None])
    y = Identity(root, x)
    ops = root.graph.operations
    assert [op.creation_index for op in ops] == list(range(len(ops)))
    assert y.operation.creation_index > x.operation.creation_index


def test_output_specs_are_each_outputs_dtype_and_static_shape(root):
    x = Placeholder(root, mg.float32, [2, None])
    op = Identity(root, x).operation
    assert op.output_specs == ((mg.float32, mg.TensorShape([2, None])),)
    assert op.output_specs == tuple((o.dtype, o.shape) for o in op.outputs)


@pytest.mark.parametrize("field", ["creation_index", "output_specs", "attrs"])
def test_operation_fields_are_read_only(root, field):
    op = Const(root, 1.0).operation
    with pytest.raises(AttributeError):
        setattr(op, field, getattr(op, field))


# -- OpDef and AttrDef ---------------------------------------------------------------------------


def test_list_flags_say_which_args_are_lists():
    plain = OpDef("PublicNamesPlain", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"])
    listed = OpDef(
        "PublicNamesList",
        inputs=["values: N * T", "axis: int32"],
        outputs=["parts: M * T"],
        attrs=["N: int >= 1", "M: int >= 1", "T: type"],
    )
    assert (plain.has_list_inputs, plain.has_list_outputs) == (False, False)
    assert (listed.has_list_inputs, listed.has_list_outputs) == (True, True)
    with pytest.raises(AttributeError, match="immutable"):
        plain.has_list_inputs = True


def test_has_attr_and_allows():
    op_def = OpDef("PublicNamesAttrs", inputs=["x: T"], attrs=["T: {int32, int64}", "k: int"])
    assert op_def.has_attr("T") and op_def.has_attr("k")
    assert not op_def.has_attr("x") and not op_def.has_attr("K")
    t = op_def.attr("T")
    assert t.allows(mg.int32) and not t.allows(mg.float32)
    assert AttrDef("free", "type").allows(mg.float32)  # no allowed set: anything


def test_a_disallowed_inferred_dtype_is_still_refused(root):
    op_def = OpDef("PublicNamesAllowed", inputs=["x: T"], outputs=["y: T"], attrs=["T: {int32}"])
    x = Placeholder(root, mg.float32, [2])
    with pytest.raises(mg.InvalidArgumentError, match=r"allows only \{int32\}"):
        root.graph.add_operation(op_def, [x.output], {})


# -- Graph's construction protocol ---------------------------------------------------------------


def test_rollback_removes_nodes_and_frees_their_names(root):
    graph = root.graph
    Const(root, 1.0)
    with graph.lock:
        mark = graph.checkpoint()
        Const(root, 2.0)
        Const(root, 3.0)
        graph.rollback(mark)
    assert [op.name for op in graph.operations] == ["Const"]
    assert Const(root, 4.0).operation.name == "Const_1"


def test_release_keeps_what_was_added(root):
    graph = root.graph
    with graph.lock:
        mark = graph.checkpoint()
        Const(root, np.float32(2.0))
        graph.release(mark)
    assert [op.name for op in graph.operations] == ["Const"]


def test_unique_name_reserves_within_a_name_scope(root):
    graph = root.graph
    with graph.lock:
        assert graph.unique_name("", "block", reserve=True) == "block"
        assert graph.unique_name("", "block", reserve=False) == "block_1"
        assert graph.unique_name("", "block", reserve=True) == "block_1"
    assert root.new_sub_scope("block").name_scope == "block_2"


# -- the registry's aliases ----------------------------------------------------------------------


def test_an_alias_is_recorded_only_for_the_registered_op_def():
    name = f"PublicNamesAliased{next(_counter)}"
    op_def = OpDef(name, outputs=["y: float"])
    op_builder(op_def, f"{name}Alias")  # not registered: no alias
    assert registry.alias_of(f"{name}Alias") is None
    mg.register_op(op_def)
    op_builder(name, f"{name}Alias")
    assert registry.alias_of(f"{name}Alias") == name


# -- Graph.add_operation: the public entry checks its arguments ---------------------------------


def _add_operation_cases():
    """(name, arguments -> kwargs for add_operation, message) for each bad argument."""
    identity = registry.get_op_def("Identity")

    def call(x, **kw):
        base = {"op_def": identity, "inputs": [x.output], "attrs": {"T": mg.float32}}
        base.update(kw)
        return base

    return [
        ("op type string", lambda x: call(x, op_def="Identity"), r"op_def must be an OpDef"),
        (
            "builder input",
            lambda x: call(x, inputs=[x]),
            r"inputs\[0\] must be an Output.*\.output",
        ),
        ("operation input", lambda x: call(x, inputs=[x.operation]), r"inputs\[0\].*Operation"),
        ("array input", lambda x: call(x, inputs=[np.ones(2)]), r"inputs\[0\].*ndarray"),
        ("None input", lambda x: call(x, inputs=[None]), r"inputs\[0\].*NoneType"),
        ("inputs not a list", lambda x: call(x, inputs=5), r"inputs must be a list.*int"),
        ("inputs a string", lambda x: call(x, inputs="x:0"), r"inputs must be a list.*str"),
        ("mixed list", lambda x: call(x, inputs=[[x.output, 1]]), r"inputs\[0\].*list"),
        ("attrs None", lambda x: call(x, attrs=None), r"attrs must be a mapping"),
        ("prefix int", lambda x: call(x, prefix=5), r"prefix must be a name scope"),
        ("prefix bad part", lambda x: call(x, prefix="a//b"), r"invalid name-scope name ''"),
        ("base name int", lambda x: call(x, base_name=5), r"base_name must be a node name"),
        ("base name empty part", lambda x: call(x, base_name="a//b"), r"invalid op name ''"),
        ("base name underscore", lambda x: call(x, base_name="_a"), r"invalid op name '_a'"),
        ("device int", lambda x: call(x, requested_device=3), r"requested_device must be"),
        ("device garbage", lambda x: call(x, requested_device="/gpu:x"), r"device"),
        ("controls int", lambda x: call(x, control_inputs=5), r"control_inputs must be a list"),
        ("control Output", lambda x: call(x, control_inputs=[x.output]), r"\[0\].*its `\.op`"),
        ("control builder", lambda x: call(x, control_inputs=[x]), r"control_inputs\[0\]"),
        ("colocation int", lambda x: call(x, colocation_group=5), r"colocation_group must be"),
        ("label None", lambda x: call(x, kernel_label=None), r"kernel_label must be a string"),
        ("source int", lambda x: call(x, source=5), r"source must be"),
    ]


@pytest.mark.parametrize(
    "make, message",
    [c[1:] for c in _add_operation_cases()],
    ids=[c[0] for c in _add_operation_cases()],
)
def test_add_operation_refuses_bad_arguments_with_typed_errors(root, make, message):
    x = Placeholder(root, mg.float32, [2])
    graph = root.graph
    before = [op.name for op in graph.operations]
    with pytest.raises(mg.InvalidArgumentError, match=message):
        graph.add_operation(**make(x))
    assert [op.name for op in graph.operations] == before


def test_add_operation_canonicalises_a_device_string(root):
    x = Placeholder(root, mg.float32, [2])
    op = root.graph.add_operation(
        registry.get_op_def("Identity"), [x.output], {"T": mg.float32},
        requested_device="/gpu:0", control_inputs=(x.operation,), base_name="nested/copy",
        prefix="outer/inner",
    )  # fmt: skip
    assert op.name == "outer/inner/nested/copy"
    assert op.device == "/device:GPU:0"
    assert list(op.control_inputs) == [x.operation]


@pytest.mark.parametrize(
    "mark",
    [None, (0, 0), ("0", 0, True), (0, 0, 1), (99, 0, True), (-1, 0, True), (0, 99, True)],
    ids=["None", "pair", "str", "int flag", "past the end", "negative", "past the journal"],
)
def test_rollback_refuses_a_mark_it_cannot_have_made(root, mark):
    graph = root.graph
    Const(root, 1.0)
    names = [op.name for op in graph.operations]
    with graph.lock:
        good = graph.checkpoint()
        Const(root, 2.0)
        with pytest.raises(mg.InvalidArgumentError, match=r"Graph.rollback: .* is not a mark"):
            graph.rollback(mark)
        assert len(graph.operations) == len(names) + 1  # nothing removed by the refusal
        graph.rollback(good)
    assert [op.name for op in graph.operations] == names


def test_rollback_after_release_is_refused(root):
    graph = root.graph
    with graph.lock:
        mark = graph.checkpoint()
        Const(root, 1.0)
        graph.release(mark)
    with pytest.raises(mg.InvalidArgumentError, match=r"open checkpoint"):
        graph.rollback(mark)
    assert len(graph.operations) == 1
