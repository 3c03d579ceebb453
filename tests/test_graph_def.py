"""GraphDef export and import: the API, round trips, TF's conventions (minigraph.graph_def)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from google.protobuf import text_format

import minigraph as mg
from minigraph import graph_def as gd_module
from minigraph.proto import GraphDef, TensorProto
from minigraph.tf_compat import tf_incompatibilities
from ops import GatherNd, GatherV2, gather

CPU = "/device:CPU:0"


def sample_graph() -> mg.Scope:
    """Every feature a GraphDef carries: placeholders of known and unknown shape, Consts,
    gathers with attrs, a name scope, devices, colocation, a kernel label, control inputs."""
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3])
    k = mg.Placeholder(root.with_op_name("k"), mg.int64)  # unknown rank
    table = mg.Const(root.with_op_name("table"), np.arange(24, dtype=np.int64).reshape(2, 3, 4))
    rows = gather(root.with_op_name("rows").with_device(CPU), x, [2, 0])
    layer = root.new_sub_scope("layer")
    per_batch = gather(layer.with_op_name("per_batch"), table, [[2, 0], [1, 1]], 1, batch_dims=1)
    nd = GatherNd(layer.with_op_name("nd"), table, np.array([[1, 2], [0, 0]], np.int16))
    copy = mg.Identity(root.colocate_with(nd).with_op_name("copy"), nd)
    cols = GatherV2(root.with_op_name("cols"), x, k, 1)
    labelled = mg.Identity(root.with_kernel_label("plain").with_op_name("labelled"), rows)
    done = mg.NoOp(root.with_control_dependencies([rows, copy]).with_op_name("done"))
    after = mg.Identity(root.with_control_dependencies([done]).with_op_name("after"), per_batch)
    del cols, labelled, after
    return root


FETCHES = ["rows:0", "layer/per_batch:0", "layer/nd:0", "copy:0", "cols:0", "after:0", "done"]


def describe(graph: mg.Graph, prefix: str = "") -> list[tuple]:
    """What a round trip must keep, per node, with `prefix` removed from names."""

    def strip(name: str) -> str:
        return name[len(prefix) :] if prefix and name.startswith(prefix) else name

    rows = []
    for op in graph.operations:
        attrs = {
            k: (v.dtype, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else v
            for k, v in op.attrs.items()
        }
        rows.append(
            (
                strip(op.name), op.type, attrs, op.device,
                [strip(t.name) for t in op.inputs], [strip(c.name) for c in op.control_inputs],
                strip(op.colocation_group), op.kernel_label,
                [(o.dtype, o.shape) for o in op.outputs],
            )
        )  # fmt: skip
    return rows


def run_plain(graph_or_scope, fetches=FETCHES, prefix=""):
    scope = graph_or_scope
    graph = scope.graph
    with mg.Session(scope) as session:
        feeds = {graph.get_output(prefix + name): value for name, value in _named_feeds().items()}
        return session.run([prefix + f for f in fetches], feeds)


def _named_feeds() -> dict:
    return {
        "x:0": np.arange(9, dtype=np.float32).reshape(3, 3),
        "k:0": np.array([2, 0], np.int64),
    }


# -- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["message", "bytes", "text"])
def test_round_trip_reproduces_names_types_attrs_devices_and_edges(form):
    original = sample_graph()
    graph_def = original.graph.as_graph_def()
    if form == "bytes":
        graph_def = graph_def.SerializeToString()
    elif form == "text":
        graph_def = text_format.Parse(text_format.MessageToString(graph_def), GraphDef())
    scope = mg.Scope.new_root_scope()
    assert mg.import_graph_def(scope, graph_def, name="") is None
    assert describe(scope.graph) == describe(original.graph)


def test_round_trip_under_a_prefix_keeps_everything_else():
    original = sample_graph()
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, original.graph.as_graph_def())
    assert scope.graph.operations[0].name == "import/x"
    assert describe(scope.graph, "import/") == describe(original.graph)
    # Colocation follows the renamed group; the kernel label is kept.
    assert scope.graph.get_operation("import/copy").colocation_group == "import/layer/nd"


def test_round_trip_gives_the_same_results():
    original = sample_graph()
    data = original.graph.as_graph_def().SerializeToString()
    imported = mg.Scope.new_root_scope()
    mg.import_graph_def(imported, data, name="imported")
    want = run_plain(original)
    got = run_plain(imported, prefix="imported/")
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if a is None:
            assert b is None
            continue
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(want[0], [[6, 7, 8], [0, 1, 2]])


def test_export_is_deterministic_and_reimport_exports_the_same_bytes():
    first = sample_graph().graph.as_graph_def().SerializeToString(deterministic=True)
    second = sample_graph().graph.as_graph_def().SerializeToString(deterministic=True)
    assert first == second
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, first, name="")
    assert scope.graph.as_graph_def().SerializeToString(deterministic=True) == first


def test_graph_and_module_functions_agree():
    root = sample_graph()
    assert root.graph.as_graph_def() == gd_module.as_graph_def(root.graph)
    assert gd_module.as_graph_def(root) == root.graph.as_graph_def()  # a Scope works too


# -- what export writes ----------------------------------------------------------------------------


def node(graph_def, name):
    (found,) = [n for n in graph_def.node if n.name == name]
    return found


def test_export_writes_tf_conventions():
    graph_def = sample_graph().graph.as_graph_def()
    assert graph_def.versions.producer == gd_module.PRODUCER_VERSION == 2474
    assert graph_def.versions.min_consumer == 0
    rows = node(graph_def, "rows")
    assert list(rows.input) == ["x", "Const", "Const_1"]  # output 0 as the bare name
    assert rows.device == CPU
    # Default-valued attrs are written, as TF writes them...
    assert rows.attr["batch_dims"].i == 0
    assert rows.attr["Tparams"].type == 1 and rows.attr["Tindices"].type == 3
    # ...except those TF's GatherV2 lacks (bad_indices_policy), left out at their default.
    assert "bad_indices_policy" not in rows.attr
    nd = node(graph_def, "layer/nd")
    assert "batch_dims" not in nd.attr  # TF's GatherNd has no batch_dims
    assert nd.attr["bad_indices_policy"].s == b""  # ...but has bad_indices_policy
    assert list(node(graph_def, "done").input) == ["^rows", "^copy"]
    assert list(node(graph_def, "after").input) == ["layer/per_batch", "^done"]
    assert list(node(graph_def, "copy").attr["_class"].list.s) == [b"loc:@layer/nd"]
    assert node(graph_def, "labelled").attr["_kernel"].s == b"plain"
    k = node(graph_def, "k")
    assert k.attr["shape"].shape.unknown_rank and k.attr["dtype"].type == 9
    x = node(graph_def, "x")
    assert [d.size for d in x.attr["shape"].shape.dim] == [-1, 3]
    assert "_output_shapes" not in x.attr


def test_add_shapes_writes_output_shapes_as_tf_does():
    graph_def = sample_graph().graph.as_graph_def(add_shapes=True)
    shapes = node(graph_def, "rows").attr["_output_shapes"].list.shape
    assert [[d.size for d in s.dim] for s in shapes] == [[2, 3]]
    assert node(graph_def, "k").attr["_output_shapes"].list.shape[0].unknown_rank
    assert len(node(graph_def, "done").attr["_output_shapes"].list.shape) == 0
    assert node(graph_def, "done").attr["_output_shapes"].WhichOneof("value") == "list"


def test_semantics_tf_lacks_raise_min_consumer():
    root = mg.Scope.new_root_scope()
    params = mg.Const(root, np.arange(6).reshape(2, 3))
    GatherNd(root.with_op_name("nd"), params, [[1], [0]], batch_dims=1)
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == gd_module.MINIGRAPH_MIN_CONSUMER
    assert node(graph_def, "nd").attr["batch_dims"].i == 1
    assert tf_incompatibilities(root.graph) == [
        "node 'nd' (GatherNd): attr batch_dims=1, which TensorFlow's GatherNd does not have"
    ]
    # minigraph itself reads it back, semantics included.
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    assert scope.graph.get_operation("nd").get_attr("batch_dims") == 1
    np.testing.assert_array_equal(mg.Session(scope).run("nd:0"), [1, 3])


def test_a_policy_gatherv2_lacks_raises_min_consumer():
    root = mg.Scope.new_root_scope()
    GatherV2(root.with_op_name("g"), [1, 2, 3], [0], 0, bad_indices_policy="ERROR")
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == gd_module.MINIGRAPH_MIN_CONSUMER
    assert node(graph_def, "g").attr["bad_indices_policy"].s == b"ERROR"
    assert "bad_indices_policy='ERROR'" in tf_incompatibilities(root.graph)[0]


def test_ordinary_graphs_have_no_tf_incompatibilities():
    assert tf_incompatibilities(sample_graph().graph) == []


# -- Const values: TensorProto -------------------------------------------------------------------


def tensor_of(value) -> TensorProto:
    root = mg.Scope.new_root_scope()
    mg.Const(root.with_op_name("c"), value)
    return node(root.graph.as_graph_def(), "c").attr["value"].tensor


def test_tensor_encoding_follows_make_tensor_proto():
    # Several distinct values: tensor_content, little-endian bytes in C order.
    proto = tensor_of(np.array([[1, 2], [3, 4]], np.float32))
    assert proto.dtype == 1 and [d.size for d in proto.tensor_shape.dim] == [2, 2]
    assert proto.tensor_content == np.array([1, 2, 3, 4], "<f4").tobytes()
    assert len(proto.float_val) == 0
    # One value, or one value repeated: the typed field (TF's splat).
    assert list(tensor_of(np.int32(7)).int_val) == [7]
    assert list(tensor_of(np.zeros((3, 3), np.int64)).int64_val) == [0]
    assert list(tensor_of(np.full(4, 2.5)).double_val) == [2.5]
    # 16-bit floats as their bits in half_val; complex as (real, imaginary).
    assert list(tensor_of(np.float16(1.0)).half_val) == [0x3C00]
    assert list(tensor_of(np.array(1.5, mg.bfloat16.np_dtype)).half_val) == [0x3FC0]
    assert list(tensor_of(np.complex64(1 - 2j)).scomplex_val) == [1.0, -2.0]
    assert list(tensor_of(np.array([True])).bool_val) == [True]
    assert list(tensor_of(np.uint64(2**64 - 1)).uint64_val) == [2**64 - 1]
    # Strings: every element in string_val, bytes as they are.
    strings = tensor_of(np.array([b"a", b"\x00\xff"], dtype=object))
    assert list(strings.string_val) == [b"a", b"\x00\xff"] and not strings.tensor_content
    # Empty: the shape only.
    empty = tensor_of(np.zeros((0, 3), np.float32))
    assert [d.size for d in empty.tensor_shape.dim] == [0, 3] and not empty.tensor_content


def make_tensor(text: str) -> np.ndarray:
    return gd_module.tensor_from_proto(text_format.Parse(text, TensorProto()))


def test_tensor_decoding_splat_zeros_and_content():
    shape = "tensor_shape { dim { size: 2 } dim { size: 3 } }"
    np.testing.assert_array_equal(
        make_tensor(f"dtype: DT_INT32 {shape} int_val: 1 int_val: 2"), [[1, 2, 2], [2, 2, 2]]
    )
    np.testing.assert_array_equal(make_tensor(f"dtype: DT_FLOAT {shape}"), np.zeros((2, 3)))
    strings = make_tensor(f'dtype: DT_STRING {shape} string_val: "x"')
    assert strings.dtype == object and strings.tolist() == [[b"x"] * 3] * 2
    assert make_tensor(f"dtype: DT_STRING {shape}").tolist() == [[b""] * 3] * 2
    content = np.arange(6, dtype="<i8").tobytes()
    value = make_tensor(f"dtype: DT_INT64 {shape} tensor_content: {_bytes_literal(content)}")
    np.testing.assert_array_equal(value, np.arange(6).reshape(2, 3))
    assert value.dtype == np.int64 and not value.flags.writeable
    half = make_tensor("dtype: DT_HALF tensor_shape { dim { size: 2 } } half_val: 15360")
    assert half.dtype == np.float16 and half.tolist() == [1.0, 1.0]
    pair = make_tensor("dtype: DT_COMPLEX128 tensor_shape {} dcomplex_val: 1 dcomplex_val: -2")
    assert pair.dtype == np.complex128 and pair.item() == 1 - 2j
    small = make_tensor("dtype: DT_INT8 tensor_shape {} int_val: -128")
    assert small.dtype == np.int8 and small.item() == -128


def _bytes_literal(data: bytes) -> str:
    return '"' + "".join(f"\\{b:03o}" for b in data) + '"'


@pytest.mark.parametrize(
    "dtype",
    [d for d in mg.dtypes.ALL_DTYPES if not d.is_string],
    ids=lambda d: d.name,
)
def test_every_dtype_round_trips_exactly(dtype):
    rng = np.random.default_rng(3)
    if dtype.is_bool:
        values = rng.integers(0, 2, (3, 4)).astype(bool)
    elif dtype.is_integer:
        info = np.iinfo(dtype.np_dtype)
        values = rng.integers(info.min, info.max, (3, 4), dtype=dtype.np_dtype, endpoint=True)
        values[0, :2] = info.min, info.max
    elif dtype.is_complex:
        values = (rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))).astype(dtype.np_dtype)
    else:
        values = rng.normal(size=(3, 4)).astype(dtype.np_dtype)
        values[0, 0] = np.inf
        values[0, 1] = np.nan
    for value in (values, values[0, 0], np.full((2, 2), values[1, 1])):
        array = np.asarray(value, dtype=dtype.np_dtype)
        back = gd_module.tensor_from_proto(tensor_of(array))
        assert back.dtype == array.dtype and back.shape == array.shape
        assert back.tobytes() == array.tobytes()


# -- import semantics ---------------------------------------------------------------------------


def small_graph_def():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.int32, shape=[3])
    y = gather(root.with_op_name("y"), x, [2, 0])
    mg.Identity(root.with_op_name("z"), y)
    mg.NoOp(root.with_control_dependencies([y]).with_op_name("done"))
    return root.graph.as_graph_def()


def test_prefixes_are_uniquified_and_nested_under_the_scope():
    scope = mg.Scope.new_root_scope()
    graph_def = small_graph_def()
    mg.import_graph_def(scope, graph_def)
    mg.import_graph_def(scope, graph_def)
    mg.import_graph_def(scope.new_sub_scope("outer"), graph_def, name="inner")
    names = [op.name for op in scope.graph.operations]
    assert "import/y" in names and "import_1/y" in names and "outer/inner/y" in names
    consumer = scope.graph.get_operation("import_1/z")
    assert consumer.inputs[0].name == "import_1/y:0"


def test_name_empty_keeps_names_and_uniquifies_clashes_as_tf():
    scope = mg.Scope.new_root_scope()
    graph_def = small_graph_def()
    mg.import_graph_def(scope, graph_def, name="")
    mg.import_graph_def(scope, graph_def, name="")
    graph = scope.graph
    assert [op.name for op in graph.operations[:5]] == ["x", "Const", "Const_1", "y", "z"]
    # TF's import_graph_def(name="") renames a clash to x_1 and rewires its consumers.
    assert graph.get_operation("z_1").inputs[0].name == "y_1:0"
    assert graph.get_operation("y_1").inputs[0].name == "x_1:0"


def test_input_map_replaces_tensors_and_control_inputs():
    scope = mg.Scope.new_root_scope()
    values = mg.Const(scope.with_op_name("values"), [10, 20, 30])
    gate = mg.NoOp(scope.with_op_name("gate"))
    z, done = mg.import_graph_def(
        scope, small_graph_def(), input_map={"x:0": values, "^y": gate},
        return_elements=["z:0", "done"],
    )  # fmt: skip
    np.testing.assert_array_equal(mg.Session(scope).run(z), [30, 10])
    assert [c.name for c in done.control_inputs] == ["gate"]
    # As in TF, the replaced node is still imported; nothing reads it.
    assert "import/x" in scope.graph and not scope.graph.get_output("import/x:0").consumers()
    # "x" means "x:0".
    (z2,) = mg.import_graph_def(
        scope, small_graph_def(), input_map={"x": values}, return_elements=["z:0"]
    )
    np.testing.assert_array_equal(mg.Session(scope).run(z2), [30, 10])


def test_return_elements_give_operations_and_outputs_in_order():
    scope = mg.Scope.new_root_scope()
    results = mg.import_graph_def(scope, small_graph_def(), return_elements=["y:0", "x", "done"])
    assert [type(r).__name__ for r in results] == ["Output", "Operation", "Operation"]
    assert [r.name for r in results] == ["import/y:0", "import/x", "import/done"]


def test_scope_device_control_dependencies_and_label_apply_where_the_file_says_nothing():
    scope = mg.Scope.new_root_scope()
    first = mg.NoOp(scope.with_op_name("first"))
    target = (
        scope.with_device("/device:CPU:0").with_control_dependencies([first]).with_kernel_label("l")
    )
    root = mg.Scope.new_root_scope()
    mg.Placeholder(root.with_op_name("x").with_device("/job:localhost/device:CPU:1"), mg.int32)
    mg.Identity(root.with_op_name("y"), root.graph.get_output("x:0"))
    mg.import_graph_def(target, root.graph.as_graph_def(), name="")
    x, y = scope.graph.get_operation("x"), scope.graph.get_operation("y")
    assert x.device == "/job:localhost/device:CPU:1"  # the file's request wins
    assert y.device == "/device:CPU:0"
    assert [c.name for c in x.control_inputs] == ["first"]  # nodes without inputs
    assert y.control_inputs == ()
    assert x.kernel_label == "l"


def test_missing_attrs_take_the_defaults():
    # TF's GatherNd writes no batch_dims and its GatherV2 no bad_indices_policy.
    text = """
    node { name: "p" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 3 } }
                  int_val: 4 int_val: 5 int_val: 6 } } } }
    node { name: "i" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 }
                  dim { size: 1 } } int_val: 2 } } } }
    node { name: "g" op: "GatherNd" input: "p" input: "i"
           attr { key: "Tparams" value { type: DT_INT32 } }
           attr { key: "Tindices" value { type: DT_INT32 } } }
    """
    scope = mg.Scope.new_root_scope()
    (g,) = mg.import_graph_def(
        scope, gd_module.parse_graph_def(text), return_elements=["g"], name=""
    )
    assert g.get_attr("batch_dims") == 0 and g.get_attr("bad_indices_policy") == ""
    np.testing.assert_array_equal(mg.Session(scope).run(g.outputs[0]), [6])


def test_unknown_underscore_attrs_are_ignored_and_output_shapes_checked():
    graph_def = small_graph_def()
    y = node(graph_def, "y")
    y.attr["_has_manual_control_dependencies"].b = True
    y.attr["_output_shapes"].list.shape.add().dim.add(size=-1)  # compatible with [2]
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    assert "_has_manual_control_dependencies" not in scope.graph.get_operation("y").attrs


def test_nodes_out_of_order_are_sorted_stably():
    graph_def = small_graph_def()
    nodes = list(graph_def.node)[::-1]
    del graph_def.node[:]
    graph_def.node.extend(nodes)
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    names = [op.name for op in scope.graph.operations]
    # Dependency order; among ready nodes, the file's order (reversed here).
    assert names == ["Const_1", "Const", "x", "y", "done", "z"]
    for op in scope.graph.operations:
        for tensor in op.inputs:
            assert names.index(tensor.op.name) < names.index(op.name)


def test_graph_def_from_another_class_with_tf_schema_is_accepted():
    class GraphDef:  # stands for tf.compat.v1.GraphDef: same wire format
        def __init__(self, data):
            self.data = data

        def SerializeToString(self):  # noqa: N802 - protobuf's name
            return self.data

    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, GraphDef(small_graph_def().SerializeToString()))
    assert "import/z" in scope.graph


def test_import_reports_the_file_as_the_source():
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, small_graph_def(), source="model.pb")
    assert scope.graph.get_operation("import/y").source == "model.pb"
    mg.import_graph_def(scope, small_graph_def())
    assert scope.graph.get_operation("import_1/y").source.startswith(__file__)


# -- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix, text", [(".pb", False), (".pbtxt", True), (".txt", True)])
def test_write_and_read_graph_files(tmp_path, suffix, text):
    root = sample_graph()
    path = tmp_path / f"graph{suffix}"
    assert mg.write_graph(root.graph, path) == str(path)
    data = path.read_bytes()
    assert gd_module.looks_like_text(data) is text
    if text:
        assert data.startswith(b'node {\n  name: "x"')
        assert b"type: DT_FLOAT" in data
    assert mg.read_graph(path) == root.graph.as_graph_def()
    assert sorted(os.listdir(tmp_path)) == [path.name]  # no temporary file left behind


def test_write_graph_as_text_overrides_the_suffix(tmp_path):
    graph_def = small_graph_def()
    mg.write_graph(graph_def, tmp_path / "a.pb", as_text=True)
    mg.write_graph(graph_def.SerializeToString(), tmp_path / "b.pbtxt", as_text=False)
    mg.write_graph(sample_graph(), tmp_path / "c.pb")  # a Scope
    assert gd_module.looks_like_text((tmp_path / "a.pb").read_bytes())
    assert not gd_module.looks_like_text((tmp_path / "b.pbtxt").read_bytes())
    assert mg.read_graph(tmp_path / "a.pb") == mg.read_graph(tmp_path / "b.pbtxt") == graph_def


def test_binary_files_are_byte_stable(tmp_path):
    mg.write_graph(sample_graph(), tmp_path / "a.pb")
    mg.write_graph(sample_graph(), tmp_path / "b.pb")
    assert (tmp_path / "a.pb").read_bytes() == (tmp_path / "b.pb").read_bytes()


def test_format_detection_copes_with_binary_that_starts_like_text():
    # A binary GraphDef starts with 0x0a (a newline) and the node's length, which may be a
    # letter: "\nB..." must still be read as binary.
    root = mg.Scope.new_root_scope()
    mg.Const(root.with_op_name("c" * 40), 1.0)
    data = root.graph.as_graph_def().SerializeToString()
    assert data[:1] == b"\n" and data[1:2].isalpha()
    assert not gd_module.looks_like_text(data)
    assert gd_module.parse_graph_def(data) == root.graph.as_graph_def()
    assert gd_module.looks_like_text(b"# a comment\nnode {}") and gd_module.looks_like_text(b"")


def test_graph_def_messages_are_not_tensorflows():
    assert GraphDef.DESCRIPTOR.full_name == "minigraph.graph.GraphDef"
    from google.protobuf import descriptor_pool

    with pytest.raises(KeyError):
        descriptor_pool.Default().FindMessageTypeByName("minigraph.graph.GraphDef")


# -- the README's snippet -------------------------------------------------------------------------


def test_readme_graph_files_snippet_runs_as_documented(capsys):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.index("### Graph files: TensorFlow's GraphDef")
    start = readme.index("```python\n", section) + len("```python\n")
    code = readme[start : readme.index("```\n", start)]
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    assert capsys.readouterr().out.splitlines() == [
        "GatherV2 ['x', 'Const', 'Const_1']",
        "[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]",
        "import/rows:0 [[7.0, 8.0, 9.0], [1.0, 2.0, 3.0]]",
        "1073741824",
        "[\"node 'nd' (GatherNd): attr batch_dims=1, which TensorFlow's GatherNd does not have\"]",
        "Op type not registered: 'Frob' (first used by node 'y')",
    ]


# -- Graph.transaction, the hook import uses ---------------------------------------------------


def test_graph_transaction_commits_or_removes_everything():
    scope = mg.Scope.new_root_scope()
    graph = scope.graph
    mg.Const(scope.with_op_name("a"), 1)
    with graph.transaction():
        mg.Const(scope.with_op_name("b"), 2)
        inner = scope.new_sub_scope("inner")
        with pytest.raises(ValueError), graph.transaction():
            mg.Const(inner.with_op_name("c"), 3)
            raise ValueError("undo the inner block only")
        mg.Const(inner.with_op_name("d"), 4)
    assert [op.name for op in graph.operations] == ["a", "b", "inner/d"]
    with pytest.raises(KeyboardInterrupt), graph.transaction():
        mg.Const(scope.with_op_name("e"), 5)
        scope.new_sub_scope("scoped")
        raise KeyboardInterrupt
    assert [op.name for op in graph.operations] == ["a", "b", "inner/d"]
    # The names reserved in the undone blocks are free again.
    assert mg.Const(scope.with_op_name("e"), 5).operation.name == "e"
    assert scope.new_sub_scope("scoped").name_scope == "scoped"
    assert mg.Const(inner.with_op_name("c"), 3).operation.name == "inner/c"
