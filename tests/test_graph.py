"""Graph construction: Graph/Operation/Output, builders, inputs, attr inference, shape
functions, framework ops, and the unchanged-graph guarantee after any failed construction
(minigraph/graph.py, builder.py, scope.py, shape_inference.py, framework_ops.py)."""

from __future__ import annotations

import itertools
import os
import sys
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import (
    Const,
    Identity,
    NoOp,
    OpBuilder,
    OpDef,
    Placeholder,
    Scope,
    TensorShape,
    registry,
)
from minigraph.errors import InternalError, InvalidArgumentError, NotFoundError
from minigraph.graph import Operation, Output
from minigraph.shape_inference import canonical_axis, merge, with_rank_at_least

_counter = itertools.count()


def unique_op_name(stem: str) -> str:
    """A CamelCase op type name not used elsewhere (the op registry is process-global)."""
    while True:
        name = f"GraphTest{stem}{next(_counter)}"
        if name not in registry.list_ops():
            return name


def define(stem: str, shape_fn=None, **specs) -> type[OpBuilder]:
    return mg.register_op(OpDef(unique_op_name(stem), shape_fn=shape_fn, **specs))


def _lineno() -> int:
    return sys._getframe(1).f_lineno


# -- test ops ------------------------------------------------------------------------------------


def _add_shape(ctx):
    a, b = ctx.input_shapes
    if a.rank == 0:
        return b
    if b.rank == 0:
        return a
    return merge(a, b)  # no broadcasting beyond scalars


Add = define(
    "Add",
    inputs=["x: T", "y: T"],
    outputs=["z: T"],
    attrs=["T: {int32, int64, float32, float64}"],
    shape_fn=_add_shape,
)

RECORDED: list = []


def _gather_shape(ctx):
    RECORDED.append(ctx)
    params = with_rank_at_least(ctx.input_shapes[0], 1)
    indices = ctx.input_shapes[1]
    axis = ctx.constant_value(2)
    if axis is None or params.rank is None:
        return None
    axis = canonical_axis(int(axis), params.rank)
    return params[:axis].concatenate(indices).concatenate(params[axis + 1 :])


Gather = define(
    "Gather",
    inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
    outputs=["output: Tparams"],
    attrs=[
        "batch_dims: int = 0",
        "Tparams: type",
        "Tindices: {int32, int64}",
        "Taxis: {int32, int64}",
    ],
    shape_fn=_gather_shape,
)


def _split_shape(ctx):
    shape = with_rank_at_least(ctx.input_shapes[0], 1)
    if shape.rank is None:
        return [None, None]
    first = None if shape[0] is None else shape[0] // 2
    half = TensorShape([first]).concatenate(shape[1:])
    return [half, half]


Split2 = define(
    "Split",
    inputs=["x: T"],
    attrs=["T: type"],
    outputs=["first: T", "second: T"],
    shape_fn=_split_shape,
)

WithAxis = define("WithAxis", inputs=["x: T", "axis: int64"], attrs=["T: type"], outputs=["y: T"])

Configured = define(
    "Configured",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=[
        "T: type",
        "n: int >= 1",
        'mode: {"a", "b"} = "a"',
        "scale: float = 1.0",
        "dims: list(int) = []",
        "flag: bool = false",
        "dtype_out: type = int64",
    ],
    shape_fn=lambda ctx: ctx.input_shapes[0],
)

BadShape = define(
    "BadShape",
    inputs=["x: T"],
    attrs=["T: type"],
    outputs=["y: T"],
    shape_fn=lambda ctx: with_rank_at_least(ctx.input_shapes[0], 3),
)
CrashShape = define(
    "CrashShape", inputs=["x: T"], attrs=["T: type"], outputs=["y: T"], shape_fn=lambda ctx: 1 // 0
)
WrongCount = define(
    "WrongCount",
    inputs=["x: T"],
    attrs=["T: type"],
    outputs=["y: T"],
    shape_fn=lambda ctx: [[1], [2]],
)


class Abort(BaseException):
    """Not an Exception: checks that rollback also covers e.g. KeyboardInterrupt."""


def _abort(ctx):
    raise Abort("stop")


Aborting = define("Aborting", inputs=["x: T"], attrs=["T: type"], outputs=["y: T"], shape_fn=_abort)

# Outputs named like builder members must neither crash the builder nor shadow its members.
MemberNames = define(
    "MemberNames",
    inputs=["x: T"],
    attrs=["T: type"],
    outputs=["shape: T", "node: T", "name: T", "size: int32"],
    shape_fn=lambda ctx: [ctx.input_shapes[0]] * 3 + [[]],
)

# Output dtypes left to the shape function: (shape, dtype) pairs.
PairOne = define(
    "PairOne",
    inputs=["x: T"],
    attrs=["T: type"],
    outputs=["y"],
    shape_fn=lambda ctx: ([7], mg.int64),
)
PairTwo = define(
    "PairTwo",
    inputs=["x: T"],
    attrs=["T: type"],
    outputs=["a", "b: T"],
    shape_fn=lambda ctx: [(TensorShape([1]), mg.string), ctx.input_shapes[0]],
)
DimsList = define(
    "DimsList", inputs=["x: T"], attrs=["T: type"], outputs=["y: T"], shape_fn=lambda ctx: (2, None)
)
NoShapeFn = define("NoShapeFn", inputs=["x: T"], attrs=["T: type"], outputs=["y: T", "z: int32"])


@pytest.fixture
def s():
    return Scope.new_root_scope()


@pytest.fixture
def x(s):
    return Placeholder(s.with_op_name("x"), mg.float32, [2, 3])


# -- Graph: order and look-up --------------------------------------------------------------------


def test_operations_in_creation_order(s, x):
    a = Identity(s, x)
    b = NoOp(s)
    c = Add(s, a, x)
    graph = s.graph
    assert [op.name for op in graph.operations] == ["x", "Identity", "NoOp", c.operation.name]
    assert list(graph) == graph.operations
    assert len(graph) == 4
    assert "Identity" in graph and "missing" not in graph
    ops = graph.operations
    ops.clear()
    assert len(graph.operations) == 4
    assert graph.get_operation("NoOp") is b.operation
    assert repr(graph) == "<Graph with 4 operations>"


def test_get_operation_get_output_and_as_graph_element(s, x):
    split = Split2(s.with_op_name("split"), x)
    graph = s.graph
    assert graph.get_operation("split") is split.operation
    assert graph.as_graph_element("split") is split.operation
    assert isinstance(graph.as_graph_element("split"), Operation)
    out = graph.as_graph_element("split:1")
    assert isinstance(out, Output)
    assert out is split.second
    assert graph.get_output("split:0") is split.first
    assert graph.get_output("split") is split.first
    assert graph.get_output("x:0") is x.output


def test_missing_names_raise_not_found_with_suggestions(s, x):
    Identity(s, x)
    graph = s.graph
    with pytest.raises(
        NotFoundError, match=r"^The graph has no node named 'Identiy'\. Did you mean 'Identity'\?$"
    ):
        graph.get_operation("Identiy")
    with pytest.raises(NotFoundError, match=r"no node named 'Identiy'\. Did you mean 'Identity'"):
        graph.as_graph_element("Identiy:0")
    with pytest.raises(NotFoundError, match=r"^The graph has no node named 'qqqq'\.$"):
        graph.get_output("qqqq")
    with pytest.raises(
        NotFoundError, match=r"node 'Identity' \(Identity\) has 1 outputs; 'Identity:3' does not"
    ):
        graph.as_graph_element("Identity:3")
    with pytest.raises(NotFoundError, match=r"no node named 'x:a'"):
        graph.get_output("x:a")


def test_consumers(s, x):
    a = Identity(s, x)
    b = Add(s, x, a)
    c = Add(s, a, a)
    assert x.output.consumers() == [a.operation, b.operation]
    assert s.graph.consumers(a.output) == [b.operation, c.operation, c.operation]
    assert c.output.consumers() == []
    split = Split2(s, x)
    d = Identity(s, split.second)
    assert split.first.consumers() == []
    assert split.second.consumers() == [d.operation]


def test_to_networkx(s, x):
    a = Identity(s, x)
    b = Add(s.with_control_dependencies(a), a, a)
    g = s.graph.to_networkx()
    assert isinstance(g, nx.MultiDiGraph)
    assert list(g.nodes) == ["x", "Identity", b.operation.name]
    assert g.nodes["Identity"] == {"type": "Identity", "device": "", "attrs": {"T": mg.float32}}
    assert g.nodes["x"]["attrs"] == {"dtype": mg.float32, "shape": TensorShape([2, 3])}
    assert g.number_of_edges("x", "Identity") == 1
    assert g.get_edge_data("x", "Identity")[0] == {
        "output": 0, "input": 0, "dtype": "float32", "control": False,
    }  # fmt: skip
    # Two data edges (inputs 0 and 1) and one control edge, all in parallel.
    edges = sorted(
        (d["control"], d.get("input", -1))
        for d in g.get_edge_data("Identity", b.operation.name).values()
    )
    assert edges == [(False, 0), (False, 1), (True, -1)]
    assert nx.is_directed_acyclic_graph(g)
    assert list(nx.topological_sort(g))[0] == "x"


def test_to_networkx_includes_the_requested_device(s):
    op = NoOp(s.with_device("gpu:0"))
    assert s.graph.to_networkx().nodes[op.operation.name]["device"] == "/device:GPU:0"


def test_inputs_from_another_graph_are_refused(s, x):
    other = Scope.new_root_scope()
    with pytest.raises(
        InvalidArgumentError, match=r"Identity 'Identity': input 'x:0' belongs to a different graph"
    ):
        Identity(other, x)
    assert len(other.graph) == 0


# -- Output --------------------------------------------------------------------------------------


def test_output_identity_and_hashing(s, x):
    a = Identity(s, x)
    out = a.output
    assert out.name == "Identity:0"
    assert out.op is a.operation
    assert out.index == 0
    assert out.dtype is mg.float32
    assert out.shape == TensorShape([2, 3])
    assert out.graph is s.graph
    assert out == a.operation.outputs[0]
    assert out == s.graph.get_output("Identity:0")
    assert out != x.output
    assert out != "Identity:0"
    feeds = {out: 1, x.output: 2}
    assert feeds[s.graph.get_output("Identity")] == 1
    assert len({out, a.operation.outputs[0], s.graph.get_output("Identity:0")}) == 1
    assert repr(out) == "<Output 'Identity:0' dtype=float32 shape=[2,3]>"


def test_outputs_of_different_graphs_are_distinct():
    a = Const(Scope.new_root_scope(), 1).output
    b = Const(Scope.new_root_scope(), 1).output
    assert a.name == b.name
    assert a != b
    assert len({a, b}) == 2


def test_output_is_immutable(x):
    with pytest.raises(AttributeError, match="has no setter"):
        x.output.dtype = mg.int32
    with pytest.raises(AttributeError, match="has no attribute"):
        x.output.extra = 1
    assert x.output.dtype is mg.float32


def test_output_index_out_of_range(x):
    with pytest.raises(
        InvalidArgumentError, match=r"output index 1 out of range for 'x', which has 1"
    ):
        Output(x.operation, 1)


# -- Operation -----------------------------------------------------------------------------------


def test_operation_fields(s, x):
    op = Add(s.with_op_name("sum"), x, 1.0).operation
    assert op.name == "sum"
    assert op.type == Add.op_def.name
    assert op.op_def is Add.op_def
    assert op.graph is s.graph
    assert op.inputs == (x.output, s.graph.get_output("Const:0"))
    assert op.control_inputs == ()
    assert op.output is op.outputs[0]
    assert op.device == "" and op.requested_device is None
    assert op.kernel_label == ""
    assert op.colocation_group == "sum"
    assert repr(op) == f"<Operation 'sum' type={op.type}>"
    assert op.node_def() == f"sum = {op.type}[T=float32](x:0, Const:0)"
    assert hash(op) == hash(s.graph.get_operation("sum"))


def test_operation_source_points_at_the_line_that_built_it(s):
    node, line = Identity(s, [1.0]), _lineno()
    assert node.operation.source == f"{__file__}:{line}"
    const = node.operation.inputs[0].op
    assert const.source == f"{__file__}:{line}"
    assert not node.operation.source.startswith(os.path.dirname(mg.__file__))


def test_operation_source_in_a_helper_function(s):
    def helper(scope):
        return Const(scope, 1), _lineno()

    const, line = helper(s)
    assert const.operation.source == f"{__file__}:{line}"


def test_attrs_are_read_only_canonical_values(s, x):
    op = Configured(s, x, n=np.int64(2), mode=b"b", scale=3, dims=[1, np.int32(2)]).operation
    assert dict(op.attrs) == {
        "T": mg.float32, "n": 2, "mode": "b", "scale": 3.0, "dims": (1, 2), "flag": False,
        "dtype_out": mg.int64,
    }  # fmt: skip
    assert type(op.attrs["n"]) is int
    assert type(op.attrs["scale"]) is float
    assert op.get_attr("mode") == "b"
    with pytest.raises(TypeError, match="does not support item assignment"):
        op.attrs["n"] = 5
    with pytest.raises(
        NotFoundError,
        match=r"node 'GraphTestConfigured\d+' \(GraphTestConfigured\d+\) has no attr 'm'; "
        r"it has \['T', 'dims', 'dtype_out', 'flag', 'mode', 'n', 'scale'\]$",
    ):
        op.get_attr("m")
    assert op.get_attr("n") == 2


def test_operation_is_read_only(x):
    op = x.operation
    with pytest.raises(AttributeError, match="has no setter"):
        op.name = "y"
    with pytest.raises(AttributeError, match="has no attribute"):
        op.device_hint = "gpu"
    assert op.name == "x"


def test_operation_output_for_multi_output_ops_raises(s, x):
    op = Split2(s, x).operation
    with pytest.raises(InvalidArgumentError, match=r"has 2 outputs; use \.outputs\[i\]"):
        _ = op.output
    assert NoOp(s).operation.outputs == ()


# -- builder objects -----------------------------------------------------------------------------


def test_single_output_builder(s, x):
    node = Identity(s, x)
    assert isinstance(node, OpBuilder)
    assert node.node() is node.operation
    assert node.outputs == (node.output,)
    assert node.output.name == "Identity:0"
    assert node.name == "Identity:0"
    assert node.dtype is mg.float32
    assert node.shape == [2, 3]
    assert repr(node) == "<Identity 'Identity' dtype=float32 shape=[2,3]>"


def test_multi_output_builder_has_named_outputs(s, x):
    split = Split2(s, x)
    assert split.outputs == split.operation.outputs
    assert split.first is split.outputs[0]
    assert split.second is split.outputs[1]
    assert split.first.name.endswith(":0") and split.second.name.endswith(":1")
    assert split.first.shape == [1, 3]
    assert not hasattr(split, "output")
    with pytest.raises(InvalidArgumentError, match=r"has 2 outputs; pick one with \.outputs\[i\]"):
        _ = split.name
    assert repr(split) == f"<{Split2.__name__} {split.operation.name!r}>"


def test_output_names_that_clash_with_builder_members(s, x):
    before = len(s.graph)
    node = MemberNames(s, x)
    assert len(s.graph) == before + 1
    assert node.size is node.outputs[3]
    assert node.node() is node.operation  # not shadowed by the output called "node"
    assert [o.name.rsplit(":")[1] for o in node.outputs] == ["0", "1", "2", "3"]
    assert node.outputs[0].shape == [2, 3]
    with pytest.raises(InvalidArgumentError, match="has 4 outputs"):
        _ = node.shape


def test_builder_objects_are_accepted_as_inputs(s, x):
    a = Identity(s, x)
    b = Add(s, a, x)
    assert b.operation.inputs == (a.output, x.output)


def test_inputs_by_keyword(s, x):
    node = Add(s, y=x, x=Identity(s, x))
    assert [i.op.name for i in node.operation.inputs] == ["Identity", "x"]


def test_too_many_and_missing_inputs(s, x):
    with pytest.raises(InvalidArgumentError, match=r"Identity takes 1 inputs \(input\); got 2"):
        Identity(s, x, x)
    with pytest.raises(InvalidArgumentError, match=r": missing input 'y' \(inputs: x, y\)"):
        Add(s, x)


def test_multi_output_builder_is_not_an_input(s, x):
    split = Split2(s.with_op_name("split"), x)
    with pytest.raises(
        InvalidArgumentError, match=r"'split' \(\w+\) has 2 outputs; pick one with \.outputs"
    ):
        Identity(s, split)
    assert Identity(s, split.second).operation.inputs == (split.second,)


def test_an_operation_is_not_an_input(s, x):
    with pytest.raises(
        InvalidArgumentError,
        match=r"Identity: input 'input' got the Operation 'x'; pass one of its outputs",
    ):
        Identity(s, x.operation)


# -- literal inputs ------------------------------------------------------------------------------


def test_literal_inputs_become_consts(s, x):
    a = Identity(s, np.arange(3, dtype=np.int64))
    b = Add(s, 1.5, [2.5])
    c = Identity(s, [[1, 2], [3, 4]])
    names = [op.name for op in s.graph.operations]
    assert names == [
        "x", "Const", "Identity", "Const_1", "Const_2", b.operation.name, "Const_3", "Identity_1",
    ]  # fmt: skip
    assert a.dtype is mg.int64
    assert b.dtype is mg.float32
    assert b.shape == [1]
    assert c.dtype is mg.int32 and c.shape == [2, 2]
    const = c.operation.inputs[0].op
    assert const.type == "Const"
    np.testing.assert_array_equal(const.get_attr("value"), [[1, 2], [3, 4]])
    assert const.get_attr("dtype") is mg.int32


def test_literal_consts_are_named_in_the_current_name_scope(s, x):
    sub = s.new_sub_scope("block")
    Add(sub, x, 1.0)
    Add(sub.with_op_name("named"), 2.0, x)
    names = [op.name for op in s.graph.operations]
    assert names[1:] == ["block/Const", f"block/{Add.op_def.name}", "block/Const_1", "block/named"]


def test_literal_numpy_array_is_copied_and_frozen(s):
    source = np.array([1.0, 2.0], np.float32)
    node = Identity(s, source)
    source[0] = 100.0
    value = node.operation.inputs[0].op.get_attr("value")
    np.testing.assert_array_equal(value, [1.0, 2.0])
    assert not value.flags.writeable


def test_literal_bound_to_an_inferred_type_attr_takes_that_dtype(s):
    p64 = Placeholder(s, mg.float64)
    after = Add(s, p64, 1)
    before = Add(s, 2, p64)
    for node in (after, before):
        assert node.operation.get_attr("T") is mg.float64
        consts = [i for i in node.operation.inputs if i.op.type == "Const"]
        assert [c.dtype for c in consts] == [mg.float64]
    i64 = Placeholder(s, mg.int64)
    assert Add(s, i64, 3).operation.inputs[1].dtype is mg.int64


def test_literal_for_a_fixed_dtype_input_takes_that_dtype(s, x):
    node = WithAxis(s, x, 1)
    assert node.operation.inputs[1].dtype is mg.int64
    node = WithAxis(s, [1, 2], 0)
    assert node.operation.inputs[0].dtype is mg.int32
    assert node.operation.inputs[1].dtype is mg.int64


def test_literal_takes_an_explicitly_given_type_attr(s):
    node = Add(s, 1, 2, T=mg.float64)
    assert [i.dtype for i in node.operation.inputs] == [mg.float64, mg.float64]
    assert node.operation.get_attr("T") is mg.float64


def test_literal_that_does_not_fit_the_hinted_dtype(s):
    i32 = Placeholder(s, mg.int32)
    with pytest.raises(
        InvalidArgumentError,
        match=r": cannot convert input 'y' to a tensor: cannot convert 1\.5 to int32 without",
    ):
        Add(s, i32, 1.5)


def test_ragged_list_input_is_a_clear_error(s, x):
    with pytest.raises(
        InvalidArgumentError, match=r"cannot convert input 'y' to a tensor: .*ragged nested"
    ):
        Add(s, x, [[1.0, 2.0], [3.0]])


# -- type-attr inference -------------------------------------------------------------------------


def test_type_attrs_are_inferred_from_inputs(s, x):
    indices = Placeholder(s, mg.int64, [4])
    node = Gather(s, x, indices, np.int32(1))
    assert dict(node.operation.attrs) == {
        "batch_dims": 0, "Tparams": mg.float32, "Tindices": mg.int64, "Taxis": mg.int32,
    }  # fmt: skip
    assert node.dtype is mg.float32
    assert Add(s, x, x).operation.get_attr("T") is mg.float32


def test_conflicting_dtypes_for_one_type_attr_name_both_inputs(s, x):
    i = Placeholder(s, mg.int32)
    name = Add.op_def.name
    with pytest.raises(
        InvalidArgumentError,
        match=rf"^{name} '{name}': inputs 'x' and 'y' share type attr 'T' but have dtypes "
        r"float32 and int32$",
    ) as info:
        Add(s, x, i)
    assert info.value.node_name == name
    assert info.value.op_type == name


def test_dtype_outside_the_allowed_set_lists_allowed_dtypes(s):
    b = Placeholder(s, mg.bool_)
    with pytest.raises(
        InvalidArgumentError,
        match=r"input 'x' has dtype bool, but attr 'T' allows only "
        r"\{int32, int64, float32, float64\}$",
    ):
        Add(s, b, b)
    with pytest.raises(
        InvalidArgumentError,
        match=r"input 'indices' has dtype float32, but attr 'Tindices' allows only "
        r"\{int32, int64\}",
    ):
        Gather(s, [1.0], [0.5], 0)


def test_explicit_type_attr_conflicting_with_input_dtype(s, x):
    with pytest.raises(
        InvalidArgumentError,
        match=r"attr 'T' was given as int32 but input 'x' has dtype float32$",
    ):
        Add(s, x, x, T=mg.int32)
    assert Add(s, x, x, T="float").operation.get_attr("T") is mg.float32


def test_fixed_dtype_input_with_wrong_dtype(s, x):
    axis = Placeholder(s.with_op_name("axis"), mg.int32)
    with pytest.raises(
        InvalidArgumentError, match=r": input 'axis' must be int64, got int32 \(from 'axis:0'\)$"
    ):
        WithAxis(s, x, axis)


def test_unknown_attr_kwarg(s, x):
    with pytest.raises(
        InvalidArgumentError, match=r": unknown attr 'bogus'; \w+ has attrs \['T'\]$"
    ):
        Add(s, x, x, bogus=1)


def test_missing_required_attr(s, x):
    with pytest.raises(InvalidArgumentError, match=r": attr 'n' \(int\) is required$"):
        Configured(s, x)


@pytest.mark.parametrize(
    "attrs, message",
    [
        (dict(n=True), r"attr 'n' \(int\): expected an int, got true"),
        (dict(n=0), r"attr 'n' must be >= 1; got 0"),
        (dict(n=1, mode="c"), r"attr 'mode' must be one of \{\"a\", \"b\"\}; got 'c'"),
        (dict(n=1, scale="x"), r"attr 'scale' \(float\): expected a float, got 'x'"),
        (dict(n=1, dims=5), r"attr 'dims' \(list\(int\)\): expected a list, got 5"),
        (dict(n=1, flag=1), r"attr 'flag' \(bool\): expected a bool, got 1"),
        (dict(n=1, dtype_out="int33"), r"attr 'dtype_out' \(type\): expected a dtype"),
    ],
)
def test_bad_attr_values_name_the_node_and_attr(s, x, attrs, message):
    name = Configured.op_def.name
    with pytest.raises(InvalidArgumentError, match=rf"^{name} '{name}': {message}") as info:
        Configured(s, x, **attrs)
    assert info.value.node_name == name


def test_attr_defaults_are_filled_in(s, x):
    attrs = Configured(s, x, n=1).operation.attrs
    assert dict(attrs) == {
        "T": mg.float32, "n": 1, "mode": "a", "scale": 1.0, "dims": (), "flag": False,
        "dtype_out": mg.int64,
    }  # fmt: skip


# -- shape functions -----------------------------------------------------------------------------


def test_shape_function_sees_shapes_dtypes_attrs_and_constant_values(s, x):
    indices = Placeholder(s, mg.int32, [None, 5])
    RECORDED.clear()
    node = Gather(s.with_op_name("g"), x, indices, 1, batch_dims=0)
    (ctx,) = RECORDED
    assert ctx.op_type == Gather.op_def.name
    assert ctx.node_name == "g"
    assert ctx.num_inputs == 3
    assert ctx.input_shapes == (TensorShape([2, 3]), TensorShape([None, 5]), TensorShape([]))
    assert ctx.input_shape(1) == [None, 5]
    assert ctx.input_dtypes == (mg.float32, mg.int32, mg.int32)
    assert dict(ctx.attrs) == {
        "batch_dims": 0, "Tparams": mg.float32, "Tindices": mg.int32, "Taxis": mg.int32,
    }  # fmt: skip
    assert ctx.attr("Tparams") is mg.float32
    assert ctx.constant_value(0) is None
    assert ctx.constant_value(1) is None
    axis = ctx.constant_value(2)
    assert axis.dtype == np.int32 and axis == 1
    assert not axis.flags.writeable
    assert node.shape == [2, None, 5]


def test_constant_value_of_an_explicit_const_input(s, x):
    axis = Const(s, np.int64(0))
    RECORDED.clear()
    node = Gather(s, x, [[0, 1, 1]], axis)
    assert RECORDED[0].constant_value(2) == 0
    np.testing.assert_array_equal(RECORDED[0].constant_value(1), [[0, 1, 1]])
    assert node.shape == [1, 3, 3]


def test_unknown_dims_and_ranks_propagate(s):
    unknown = Placeholder(s, mg.float32)
    partial = Placeholder(s, mg.float32, [None, 4])
    assert unknown.shape == TensorShape(None)
    assert Identity(s, unknown).shape == TensorShape(None)
    assert Identity(s, partial).shape == [None, 4]
    assert Add(s, unknown, partial).shape == [None, 4]
    assert Add(s, partial, [[1.0, 2.0, 3.0, 4.0]]).shape == [1, 4]
    assert Gather(s, partial, [0], Placeholder(s, mg.int32)).shape == TensorShape(None)
    assert Gather(s, unknown, [0], 0).shape == TensorShape(None)
    split = Split2(s, partial)
    assert split.first.shape == [None, 4]
    assert Split2(s, unknown).second.shape == TensorShape(None)


def test_ops_without_shape_function_have_unknown_shapes(s, x):
    node = NoShapeFn(s, x)
    assert node.outputs[0].shape == TensorShape(None)
    assert node.outputs[1].shape == TensorShape(None)
    assert node.outputs[1].dtype is mg.int32


def test_shape_function_results_in_every_documented_form(s, x):
    one = PairOne(s, x)
    assert (one.dtype, one.shape) == (mg.int64, TensorShape([7]))
    two = PairTwo(s, x)
    assert (two.a.dtype, two.a.shape) == (mg.string, TensorShape([1]))
    assert (two.b.dtype, two.b.shape) == (mg.float32, TensorShape([2, 3]))
    dims = DimsList(s, x)
    assert dims.shape == [2, None]


def test_shape_function_error_names_node_and_op_type(s, x):
    name = BadShape.op_def.name
    with pytest.raises(
        InvalidArgumentError,
        match=rf"^Shape must be at least rank 3 but is rank 2 for 'bad' \({name}\) with input "
        r"shapes: \[2,3\]\.$",
    ) as info:
        BadShape(s.with_op_name("bad"), x)
    assert info.value.node_name == "bad"
    assert info.value.op_type == name


def test_shape_function_error_lists_every_input_shape(s, x):
    with pytest.raises(
        InvalidArgumentError,
        match=r"Shapes \[2,3\] and \[3\] are not compatible: ranks 2 and 1 differ for "
        r"'GraphTestAdd\d+' \(GraphTestAdd\d+\) with input shapes: \[2,3\], \[3\]\.$",
    ):
        Add(s, x, [1.0, 2.0, 3.0])
    with pytest.raises(
        InvalidArgumentError,
        match=r"^Expected axis in the range \[-2, 2\), but got 5 for 'GraphTestGather\d+' "
        r"\(GraphTestGather\d+\) with input shapes: \[2,3\], \[1\], \[\]\.$",
    ):
        Gather(s, x, [0], 5)


def test_shape_function_crash_becomes_internal_error(s, x):
    name = CrashShape.op_def.name
    with pytest.raises(
        InternalError,
        match=rf"^{name} '{name}': the shape function of {name} raised ZeroDivisionError: "
        r"integer division or modulo by zero$",
    ) as info:
        CrashShape(s, x)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert info.value.node_name == name
    assert info.value.op_type == name


def test_shape_function_with_the_wrong_number_of_outputs(s, x):
    with pytest.raises(
        InternalError, match=r"returned 2 shapes \(list \[\[1\], \[2\]\]\); the node has 1 outputs"
    ):
        WrongCount(s, x)


# -- framework ops -------------------------------------------------------------------------------


def test_const(s):
    c = Const(s, [[1, 2, 3]])
    assert c.operation.type == "Const"
    assert c.operation.inputs == ()
    assert c.dtype is mg.int32
    assert c.shape == [1, 3]
    np.testing.assert_array_equal(c.operation.get_attr("value"), [[1, 2, 3]])
    assert c.operation.get_attr("dtype") is mg.int32
    assert not c.operation.get_attr("value").flags.writeable


@pytest.mark.parametrize(
    "value, dtype, expected",
    [
        ([1, 2], mg.float32, np.float32),
        ([1, 2], "double", np.float64),
        (3, np.int8, np.int8),
        (0.1, mg.float16, np.float16),
        (np.array([1, 2], np.int32), mg.int64, np.int64),
        ("abc", None, object),
        ([b"a\x00"], mg.string, object),
        (np.float64(2.5), None, np.float64),
    ],
)
def test_const_dtype_conversion(s, value, dtype, expected):
    c = Const(s, value, dtype)
    array = c.operation.get_attr("value")
    assert array.dtype == expected
    assert c.dtype is mg.as_dtype(expected)


def test_const_string_value(s):
    c = Const(s, ["é", b"x\x00"])
    assert c.dtype is mg.string
    assert c.operation.get_attr("value").tolist() == ["é".encode(), b"x\x00"]


@pytest.mark.parametrize(
    "value, dtype, message",
    [
        (1.5, mg.int32, r"cannot convert 1\.5 to int32 without changing its value"),
        (256, mg.uint8, r"cannot convert 256 to uint8 without changing its value"),
        (np.array([1e300]), mg.float32, r"the value 1e\+300 at \[0\] overflows float32"),
        ([[1], [2, 3]], None, r"ragged nested sequence"),
        (1, "int33", r"unknown dtype name 'int33'"),
    ],
)
def test_const_conversion_errors(s, value, dtype, message):
    with pytest.raises(InvalidArgumentError, match=message):
        Const(s, value, dtype)
    assert len(s.graph) == 0


def test_placeholder(s):
    p = Placeholder(s, mg.float32, [None, 3])
    assert p.dtype is mg.float32
    assert p.shape == [None, 3]
    assert p.operation.get_attr("shape") == TensorShape([None, 3])
    assert p.operation.inputs == ()
    q = Placeholder(s, "int64")
    assert q.dtype is mg.int64
    assert q.shape == TensorShape(None)
    assert q.operation.name == "Placeholder_1"
    assert Placeholder(s, np.bool_, []).shape == TensorShape([])


@pytest.mark.parametrize(
    "dtype, shape, message",
    [
        ("nope", None, r"attr 'dtype' \(type\): expected a dtype, got 'nope'"),
        (None, None, r"attr 'dtype' \(type\): expected a dtype, got None"),
        (mg.float32, [-3], r"attr 'shape' \(shape\): expected a shape, got \[-3\]"),
        (mg.float32, 3, r"attr 'shape' \(shape\): expected a shape, got 3"),
    ],
)
def test_placeholder_errors(s, dtype, shape, message):
    with pytest.raises(InvalidArgumentError, match=rf"^Placeholder 'Placeholder': {message}"):
        Placeholder(s, dtype, shape)
    assert len(s.graph) == 0


def test_identity(s, x):
    node = Identity(s, x)
    assert node.operation.type == "Identity"
    assert node.operation.get_attr("T") is mg.float32
    assert (node.dtype, node.shape) == (mg.float32, x.shape)
    assert Identity(s, "text").dtype is mg.string


def test_no_op(s, x):
    node = NoOp(s)
    assert node.operation.type == "NoOp"
    assert node.outputs == ()
    assert node.operation.attrs == {}
    with pytest.raises(InvalidArgumentError, match=r"'NoOp' \(NoOp\) has 0 outputs"):
        _ = node.name
    dependent = Identity(s.with_control_dependencies(node), x)
    assert dependent.operation.control_inputs == (node.operation,)


# -- the unchanged-graph guarantee ---------------------------------------------------------------


def build_base():
    """A small graph in which every namespace the failures below touch is already in use."""
    s = Scope.new_root_scope()
    ns = SimpleNamespace(s=s)
    ns.x = Placeholder(s.with_op_name("x"), mg.float32, [2])
    ns.i = Placeholder(s.with_op_name("i"), mg.int32, [3])
    ns.b = Placeholder(s.with_op_name("b"), mg.bool_, [2])
    ns.split = Split2(s, ns.x)
    Add(s, ns.x, 1.0)
    ns.sub = s.new_sub_scope("sub")
    Add(ns.sub, ns.x, 2.0)
    ns.foreign = Placeholder(Scope.new_root_scope(), mg.float32, [2])
    return ns


def probe(ns):
    """Builds nodes whose names reveal any name reservation a failure leaked."""
    s, x = ns.s, ns.x
    Add(s, x, 3.0)
    Add(s.with_op_name("g"), 1.0, x)
    Add(ns.sub, x, [1.0, 2.0])
    Identity(ns.sub.with_op_name("g"), [1.0])
    Gather(s, x, [0], 0)
    Configured(s, x, n=1)
    WithAxis(s, x, 0)
    for name in ("g", "Const", "sub", Add.op_def.name, "Placeholder", "Identity"):
        Identity(s.new_sub_scope(name), x)
    Const(s, 5)
    Placeholder(s, mg.int32)
    Identity(s, x)
    NoOp(s)
    for op_type in (BadShape, CrashShape, WrongCount, Aborting, PairOne):
        Identity(s.new_sub_scope(op_type.op_def.name), x)


def snapshot(graph):
    return [
        (
            op.name,
            op.type,
            tuple(i.name for i in op.inputs),
            tuple(c.name for c in op.control_inputs),
            tuple(tuple(c.name for c in out.consumers()) for out in op.outputs),
        )
        for op in graph.operations
    ]


FAILURES = [
    ("bad attr value", lambda ns: Configured(ns.s, ns.x, n="3"), InvalidArgumentError,
     r"attr 'n' \(int\): expected an int"),
    ("attr below minimum", lambda ns: Configured(ns.s, ns.x, n=0), InvalidArgumentError,
     r"attr 'n' must be >= 1"),
    ("unknown attr", lambda ns: Configured(ns.s, ns.x, n=1, bogus=1), InvalidArgumentError,
     r"unknown attr 'bogus'"),
    ("missing attr", lambda ns: Configured(ns.s, ns.x), InvalidArgumentError,
     r"attr 'n' \(int\) is required"),
    ("literal then bad attr", lambda ns: Configured(ns.s, [1.0], n=-1), InvalidArgumentError,
     r"attr 'n' must be >= 1"),
    ("dtype not allowed", lambda ns: Add(ns.s, ns.b, ns.b), InvalidArgumentError,
     r"allows only \{int32, int64, float32, float64\}"),
    ("literals with dtype not allowed", lambda ns: Add(ns.s, True, False), InvalidArgumentError,
     r"input 'x' has dtype bool"),
    ("conflicting dtypes", lambda ns: Add(ns.s, ns.x, ns.i), InvalidArgumentError,
     r"share type attr 'T' but have dtypes float32 and int32"),
    # As TF's op_def_library: a literal takes the dtype of an earlier input of its type attr.
    ("literal then conflicting dtype", lambda ns: Add(ns.s, 1.0, "a"), InvalidArgumentError,
     r"cannot convert input 'y' to a tensor: cannot convert a string value to a float32"),
    ("explicit type attr conflict", lambda ns: Add(ns.s, ns.x, 1.0, T=mg.int32),
     InvalidArgumentError, r"was given as int32 but input 'x' has dtype float32"),
    ("fixed dtype mismatch", lambda ns: WithAxis(ns.s, ns.x, ns.i), InvalidArgumentError,
     r"input 'axis' must be int64, got int32"),
    ("shape error", lambda ns: BadShape(ns.s, ns.x), InvalidArgumentError,
     r"Shape must be at least rank 3 but is rank 1"),
    ("literal then shape error", lambda ns: Add(ns.s, ns.x, [1.0, 2.0, 3.0]),
     InvalidArgumentError, r"Shapes \[2\] and \[3\] are not compatible"),
    ("two literals then shape error", lambda ns: Gather(ns.s, ns.x, [0], 4),
     InvalidArgumentError, r"Expected axis in the range \[-1, 1\), but got 4"),
    ("literals then shape error in a sub-scope", lambda ns: Add(ns.sub, [1.0], [1.0, 2.0, 3.0]),
     InvalidArgumentError, r"Shapes \[1\] and \[3\] are not compatible"),
    ("named op shape error", lambda ns: Add(ns.s.with_op_name("g"), ns.x, [1.0, 2.0, 3.0]),
     InvalidArgumentError, r"for 'g(_\d+)?' \("),
    ("shape fn crash", lambda ns: CrashShape(ns.s, ns.x), InternalError,
     r"raised ZeroDivisionError"),
    ("literal then shape fn crash", lambda ns: CrashShape(ns.s, [[1.0]]), InternalError,
     r"raised ZeroDivisionError"),
    ("wrong output count", lambda ns: WrongCount(ns.s, 1.0), InternalError,
     r"returned 2 shapes"),
    ("BaseException in shape fn", lambda ns: Aborting(ns.s.with_op_name("g"), [1.0]), Abort,
     r"^stop$"),
    ("ragged literal", lambda ns: Add(ns.s, ns.x, [[1.0], [2.0, 3.0]]), InvalidArgumentError,
     r"ragged"),
    ("ragged literal first", lambda ns: Add(ns.s, [[1], [2, 3]], ns.x), InvalidArgumentError,
     r"ragged"),
    ("literal then ragged literal", lambda ns: Add(ns.s, 1.0, [[1.0], [2.0, 3.0]]),
     InvalidArgumentError, r"cannot convert input 'y'.*ragged"),
    ("literal then unsupported literal", lambda ns: Add(ns.sub, [1.0], None),
     InvalidArgumentError, r"cannot convert input 'y'.*unsupported element types"),
    ("hinted literal conversion", lambda ns: Add(ns.s, ns.i, 1.5), InvalidArgumentError,
     r"cannot convert 1\.5 to int32"),
    ("literal then bad fixed-dtype literal", lambda ns: WithAxis(ns.s, [1.0], 0.5),
     InvalidArgumentError, r"cannot convert 0\.5 to int64"),
    ("literal then operation input", lambda ns: Add(ns.s, 1.0, ns.x.operation),
     InvalidArgumentError, r"got the Operation 'x'; pass one of its outputs"),
    ("literal then foreign input", lambda ns: Add(ns.s, 1.0, ns.foreign), InvalidArgumentError,
     r"belongs to a different graph"),
    ("multi-output builder input", lambda ns: Add(ns.s, 1.0, ns.split), InvalidArgumentError,
     r"has 2 outputs"),
    ("too many inputs", lambda ns: Identity(ns.s, ns.x, 1.0), InvalidArgumentError,
     r"takes 1 inputs"),
    ("missing input", lambda ns: Add(ns.s, 1.0), InvalidArgumentError, r"missing input 'y'"),
    ("lossy const", lambda ns: Const(ns.s, 1.5, mg.int32), InvalidArgumentError,
     r"cannot convert 1\.5 to int32"),
    ("bad placeholder dtype", lambda ns: Placeholder(ns.s, "nope"), InvalidArgumentError,
     r"expected a dtype"),
    ("bad placeholder shape", lambda ns: Placeholder(ns.s.with_op_name("g"), mg.int32, [-4]),
     InvalidArgumentError, r"expected a shape"),
]  # fmt: skip


@pytest.mark.parametrize(
    "fail, exc, match", [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES]
)
def test_failed_construction_leaves_the_graph_unchanged(fail, exc, match):
    reference = build_base()
    probe(reference)
    expected = snapshot(reference.s.graph)

    ns = build_base()
    graph = ns.s.graph
    before = snapshot(graph)
    networkx_before = nx.to_dict_of_dicts(graph.to_networkx())
    with pytest.raises(exc, match=match):
        fail(ns)
    assert snapshot(graph) == before
    assert nx.to_dict_of_dicts(graph.to_networkx()) == networkx_before
    # No name reservation leaked: the same nodes get the same names as in a graph that never
    # saw the failure.
    probe(ns)
    assert snapshot(graph) == expected


def test_repeated_failures_leave_no_trace():
    reference = build_base()
    probe(reference)
    ns = build_base()
    for _ in range(3):
        for _, fail, exc, match in FAILURES:
            with pytest.raises(exc, match=match):
                fail(ns)
    probe(ns)
    assert snapshot(ns.s.graph) == snapshot(reference.s.graph)


GOOD_STEPS = [
    lambda ns: Add(ns.s, ns.x, 1.0),
    lambda ns: Identity(ns.sub, [3, 4]),
    lambda ns: Add(ns.s.with_op_name("g"), [1.0, 2.0], ns.x),
    lambda ns: Gather(ns.s, ns.x, [1], 0),
    lambda ns: ns.s.new_sub_scope("Const"),
    lambda ns: Const(ns.sub, 1),
]


@settings(deadline=None, max_examples=60)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("good"), st.integers(0, len(GOOD_STEPS) - 1)),
            st.tuples(st.just("bad"), st.integers(0, len(FAILURES) - 1)),
        ),
        max_size=12,
    )
)
def test_failures_interleaved_with_successes_leave_no_trace(steps):
    reference = build_base()
    ns = build_base()
    for kind, index in steps:
        if kind == "good":
            GOOD_STEPS[index](reference)
            GOOD_STEPS[index](ns)
        else:
            _, fail, exc, match = FAILURES[index]
            with pytest.raises(exc, match=match):
                fail(ns)
    probe(reference)
    probe(ns)
    assert snapshot(ns.s.graph) == snapshot(reference.s.graph)
