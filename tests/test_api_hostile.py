"""Public entry points given what they do not take end in typed errors that say what was
expected and what came: not an AttributeError, TypeError or ValueError from deep inside, and
not a silently accepted value. (Graph.add_operation's own are in test_public_names.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import dot, dtypes, graph_def, memory, registry, shape_inference, tensor_shape
from minigraph.errors import InvalidArgumentError, NotFoundError


@pytest.fixture
def x():
    return mg.Placeholder(mg.Scope.new_root_scope(), mg.float32, [2])


# -- DeviceSpec ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("job", "a/b", "job must be None or a letter"),
        ("job", "", "job must be None or a letter"),
        ("job", 5, "job must be None or a letter.*got int 5"),
        ("job", ["w"], "job must be None or a letter.*got list"),
        ("replica", -1, "replica must be None or an int >= 0; got int -1"),
        ("replica", "0", "replica must be None or an int >= 0; got str '0'"),
        ("task", 1.5, "task must be None or an int >= 0; got float 1.5"),
        ("task", True, "task must be None or an int >= 0; got bool True"),
        ("device_type", 5, "device_type must be None or a letter.*got int 5"),
        ("device_type", "G P U", "device_type must be None or a letter"),
        ("device_type", np.array([1, 2]), "device_type must be None or a letter.*got ndarray"),
        ("device_index", float("nan"), "device_index must be None or an int >= 0"),
        ("device_index", [0], "device_index must be None or an int >= 0; got list"),
    ],
)
def test_device_spec_fields_are_checked(field, value, expected):
    # These were stored as given: DeviceSpec(job=5) printed '/job:5', device_type=5 was an
    # AttributeError, a list an unhashable TypeError.
    with pytest.raises(InvalidArgumentError, match=expected):
        mg.DeviceSpec(**{field: value})


def test_device_spec_canonicalises_numpy_fields():
    spec = mg.DeviceSpec(np.str_("w"), np.int64(1), np.int32(0), "gpu", np.int64(2))
    assert spec.to_string() == "/job:w/replica:1/task:0/device:GPU:2"
    assert type(spec.replica) is int and type(spec.device_index) is int
    assert spec == mg.DeviceSpec.from_string("/job:w/replica:1/task:0/device:GPU:2")
    assert mg.DeviceSpec(device_type="").device_type is None  # as before: no type


@pytest.mark.parametrize("value", [None, b"/cpu:0", 0, ["/cpu:0"]])
def test_device_spec_from_string_takes_a_string(value):
    with pytest.raises(InvalidArgumentError, match="from_string: a device name is a string"):
        mg.DeviceSpec.from_string(value)


def test_device_spec_merge_and_compare_take_a_spec_or_a_string():
    spec = mg.DeviceSpec.from_string("/cpu:0")
    assert spec.merge_from("/job:w").to_string() == "/job:w/device:CPU:0"
    assert not spec.is_compatible_with("/cpu:1")
    with pytest.raises(InvalidArgumentError, match="merge_from: expected a DeviceSpec.*NoneType"):
        spec.merge_from(None)
    with pytest.raises(InvalidArgumentError, match="is_compatible_with: expected a DeviceSpec"):
        spec.is_compatible_with(3)


# -- dtypes ------------------------------------------------------------------------------------


def test_as_dtype_of_a_tensor_is_refused(x):
    # numpy's ValueError ("Could not convert ... via `.dtype`") escaped.
    with pytest.raises(InvalidArgumentError, match="cannot interpret Output .* as a dtype"):
        mg.as_dtype(x.output)
    with pytest.raises(InvalidArgumentError, match="cannot interpret Placeholder .* as a dtype"):
        mg.as_dtype(x)
    loop: dict = {}
    loop["a"] = loop
    with pytest.raises(InvalidArgumentError, match="cannot interpret dict"):
        mg.as_dtype(loop)
    assert (mg.float32 == x.output) is False  # == never raises


def test_convert_to_array_canonicalises_its_dtype():
    assert dtypes.convert_to_array(1, "float64").dtype == np.float64
    assert dtypes.convert_to_array(1.5, np.float64).dtype == np.float64
    with pytest.raises(InvalidArgumentError, match="cannot interpret int 5 as a dtype"):
        dtypes.convert_to_array(1, 5)


# -- shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["with_rank", "with_rank_at_least", "with_rank_at_most"])
@pytest.mark.parametrize("rank", [None, "1", np.array([1, 2]), 1.5, -1, True])
def test_tensor_shape_rank_arguments(method, rank):
    for shape in (mg.TensorShape([2, None]), mg.TensorShape(None)):
        with pytest.raises(InvalidArgumentError, match="a rank is an int >= 0"):
            getattr(shape, method)(rank)


def test_tensor_shape_rank_accepts_numpy_ints():
    assert mg.TensorShape(None).with_rank(np.int64(2)).as_list() == [None, None]
    assert mg.TensorShape([2]).with_rank_at_least(np.int32(1)) == [2]


@pytest.mark.parametrize("dim", [np.array([1, 2]), int, np.bool_(True)])
def test_tensor_shape_dims_of_the_wrong_kind(dim):
    with pytest.raises(InvalidArgumentError, match="a dimension must be an int >= 0 or None"):
        mg.TensorShape([dim])


def test_shape_inference_helpers_take_dims_lists():
    assert shape_inference.with_rank([2, None], 2) == [2, None]
    assert shape_inference.with_rank_at_least((2,), 1) == [2]
    with pytest.raises(InvalidArgumentError, match="a shape is a list of dims"):
        shape_inference.with_rank(3, 1)  # was AttributeError: 'int' has no 'with_rank'
    with pytest.raises(InvalidArgumentError, match="a shape is a list of dims"):
        shape_inference.with_rank_at_most("ab", 1)
    with pytest.raises(InvalidArgumentError, match="a rank is an int >= 0; got NoneType"):
        tensor_shape.check_rank(None)
    with pytest.raises(InvalidArgumentError, match="a shape is a list of dims"):
        tensor_shape.check_size(3)


# -- graph, operations, scopes -----------------------------------------------------------------


def test_graph_consumers_takes_an_output_of_its_graph(x):
    graph = x.operation.graph
    y = mg.Identity(mg.Scope(graph), x)
    assert graph.consumers(x.output) == [y.operation]
    with pytest.raises(InvalidArgumentError, match="consumers takes an Output; got Placeholder "):
        graph.consumers(x)  # was AttributeError: no attribute 'op'
    with pytest.raises(InvalidArgumentError, match="consumers takes an Output; got NoneType"):
        graph.consumers(None)
    with pytest.raises(InvalidArgumentError, match="'Placeholder:0' belongs to a different graph"):
        mg.Graph().consumers(x.output)  # was [], as if it had no consumers


def test_in_graph_takes_a_name(x):
    graph = x.operation.graph
    assert "Placeholder" in graph and "nope" not in graph
    with pytest.raises(InvalidArgumentError, match="takes a node name .*; got list"):
        [] in graph  # noqa: B015 - the test is that it raises
    # An Operation is in its graph: a silent False would be wrong.
    with pytest.raises(InvalidArgumentError, match=r"got Operation \(test its .name\)"):
        x.operation in graph  # noqa: B015


def test_attr_names_are_strings(x):
    op = x.operation
    with pytest.raises(InvalidArgumentError, match="get_attr on node 'Placeholder'.*got list"):
        op.get_attr(["dtype"])
    with pytest.raises(NotFoundError, match="has no attr 'nope'"):
        op.get_attr("nope")
    with pytest.raises(InvalidArgumentError, match="op Placeholder: attr: an attr name is a str"):
        op.op_def.attr(["dtype"])
    with pytest.raises(InvalidArgumentError, match="has_attr: an attr name is a string; got dict"):
        op.op_def.has_attr({})


def test_scope_methods_refuse_arrays(x):
    scope = mg.Scope(x.operation.graph)
    with pytest.raises(InvalidArgumentError, match="sub-scope"):
        scope.new_sub_scope(np.array([1, 2]))  # was numpy's ambiguous truth value
    with pytest.raises(InvalidArgumentError, match="or a list of them; got ndarray"):
        scope.with_control_dependencies(np.array(x.operation))  # 0-d: "iteration over" error


def test_list_attr_refuses_a_0d_array():
    with pytest.raises(InvalidArgumentError, match=r"attr 'a' \(list\(int\)\): expected a list"):
        mg.AttrDef("a", "list(int)").canonicalize(np.array(3))
    assert mg.AttrDef("a", "list(int)").canonicalize(np.array([3, 4])) == (3, 4)


def test_hand_written_builder_build_arguments(x):
    class Ident(mg.OpBuilder):
        op_def = registry.get_op_def("Identity")

        def __init__(self, scope, inputs, attrs):
            self._build(scope, inputs, attrs)

    scope = mg.Scope(x.operation.graph)
    n = len(scope.graph)
    with pytest.raises(InvalidArgumentError, match="Identity: _build takes the attrs as a dict"):
        Ident(scope, [x], None)  # was TypeError: 'NoneType' object is not iterable
    with pytest.raises(InvalidArgumentError, match="Identity: _build takes the inputs as a list"):
        Ident(scope, x, {})
    assert len(scope.graph) == n
    assert Ident(scope, (x,), {}).output.dtype == mg.float32


# -- registry ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: registry.get_op_def(["GatherV2"]),
        lambda: registry.get_op_def(3),
        lambda: registry.signature({}),
        lambda: registry.alias_of(["Gather"]),
        lambda: registry.kernels_for(["Identity"]),
        lambda: registry.kernel_device_types(np.array(["Identity"])),
        lambda: registry.add_alias(["A"], registry.get_op_def("Identity")),
        lambda: registry.find_kernel(["Identity"], "CPU", {}),
        lambda: mg.op_builder(["Identity"]),
    ],
)
def test_registry_lookups_take_op_type_names(call):
    # Unhashable names were bare TypeErrors ("unhashable type: 'list'").
    with pytest.raises(InvalidArgumentError, match=r"must be an op type name \(a string"):
        call()


def test_registry_other_arguments():
    with pytest.raises(InvalidArgumentError, match="add_alias: op_def must be an OpDef; got str"):
        registry.add_alias("Alias", "Identity")
    with pytest.raises(InvalidArgumentError, match="find_kernel: device_type must be a string"):
        registry.find_kernel("Identity", None, {"T": mg.float32})


# -- session -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["output", "builder", "array"])
def test_run_with_a_tensor_as_feed_dict(x, kind):
    y = mg.Identity(mg.Scope(x.operation.graph), x)
    value = {"output": x.output, "builder": x, "array": np.ones(2, np.float32)}[kind]
    with mg.Session(x.operation.graph) as session:
        # `run(y, x)`: the truth value of an Output raised "symbolic tensor" TypeError, an
        # array numpy's ValueError.
        with pytest.raises(InvalidArgumentError, match="feed_dict must be a dict"):
            session.run(y, value)
        np.testing.assert_array_equal(session.run(y, {x: [1.0, 2.0]}), [1.0, 2.0])


def test_chrome_trace_path_with_a_nul():
    with pytest.raises(InvalidArgumentError, match="cannot write the trace"):
        mg.RunMetadata().chrome_trace("a\x00b")  # was ValueError: embedded null byte


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"max_bytes": -1}, "max_bytes must be an int >= 0; got int -1"),
        ({"max_bytes": 1.5}, "max_bytes must be an int >= 0; got float"),
        ({"min_bytes": float("nan")}, "min_bytes must be an int >= 1; got float nan"),
        ({"min_bytes": 0}, "min_bytes must be an int >= 1; got int 0"),
        ({"max_idle": "8"}, "max_idle must be an int >= 1; got str"),
        ({"max_idle": None}, "max_idle must be an int >= 1; got NoneType"),
    ],
)
def test_buffer_pool_arguments(kwargs, expected):
    with pytest.raises(InvalidArgumentError, match=expected):
        memory.BufferPool(**kwargs)


# -- graph files and drawings ------------------------------------------------------------------


def test_graph_def_helpers_take_their_types(x):
    assert graph_def.looks_like_text(b"node {}") and graph_def.looks_like_text(bytearray(b""))
    with pytest.raises(InvalidArgumentError, match="looks_like_text takes the file's bytes"):
        graph_def.looks_like_text("node {}")
    for value in (None, np.ones(2), x.output, x.operation.graph.as_graph_def()):
        with pytest.raises(InvalidArgumentError, match="tensor_from_proto takes a TensorProto"):
            graph_def.tensor_from_proto(value)


def test_dot_functions_take_their_types(x, tmp_path):
    graph = x.operation.graph
    assert "Placeholder" in dot.graph_to_dot(graph)
    assert "Placeholder" in dot.graph_def_to_dot(graph.as_graph_def())
    with pytest.raises(InvalidArgumentError, match=r"takes a Graph \(scope.graph\); got Scope"):
        dot.graph_to_dot(mg.Scope(graph))
    with pytest.raises(InvalidArgumentError, match="GraphDef message; got Graph .*graph_to_dot"):
        dot.graph_def_to_dot(graph)
    svg = str(tmp_path / "g.svg")
    with pytest.raises(InvalidArgumentError, match="render_svg: dot_text must be a str; got byt"):
        dot.render_svg(b"digraph {}", svg)
    with pytest.raises(InvalidArgumentError, match="render_svg: path must be a file path"):
        dot.render_svg("digraph {}", "a\x00b")
    for timeout in (float("nan"), float("inf"), 0, -1, "5", 10**9):
        with pytest.raises(InvalidArgumentError, match="render_svg: timeout must be a number"):
            dot.render_svg("digraph {}", svg, timeout)


# -- flag arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [np.array([1, 2]), "yes", 2, 1.5, None], ids=["array", "str", "int", "float", "None"]
)
def test_flag_arguments_are_booleans(x, value):
    # Truthiness would take an array's ambiguity error, or any string as "yes".
    graph = x.operation.graph
    with pytest.raises(InvalidArgumentError, match=r"as_graph_def: add_shapes is True or False"):
        graph.as_graph_def(add_shapes=value)
    with pytest.raises(InvalidArgumentError, match=r"list_devices: verbose is True or False"):
        mg.list_devices(verbose=value)
    if value is not None:  # None is parse_graph_def's "detect the format"
        with pytest.raises(InvalidArgumentError, match=r"parse_graph_def: text is None, True"):
            graph_def.parse_graph_def(b"", text=value)


def test_flag_arguments_take_numpy_booleans(x):
    graph = x.operation.graph
    assert graph.as_graph_def(add_shapes=np.bool_(True)).node[0].attr["_output_shapes"]
    assert mg.list_devices(verbose=np.bool_(False)) == mg.list_devices()
    assert (
        len(
            graph_def.parse_graph_def(
                graph.as_graph_def().SerializeToString(), text=np.bool_(False)
            ).node
        )
        == 1
    )
