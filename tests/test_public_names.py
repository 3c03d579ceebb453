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
