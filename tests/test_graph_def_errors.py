"""Bad graph files: every defect is a typed error naming the node, and the target graph is left
exactly as it was. Ends with hypothesis fuzzing of the reader."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import graph_def as gd_module
from minigraph.errors import InvalidArgumentError, NotFoundError, UnimplementedError
from ops import GatherNd, gather

X = 'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'


def identity(name: str, *inputs: str, t: str = "type: DT_FLOAT", extra: str = "") -> str:
    ins = " ".join(f'input: "{i}"' for i in inputs)
    attr = f'attr {{ key: "T" value {{ {t} }} }}'
    return f'node {{ name: "{name}" op: "Identity" {ins} {attr} {extra} }}'


def const(name: str, tensor: str, dtype: str = "DT_FLOAT") -> str:
    return (
        f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: {dtype} }} }} '
        f'attr {{ key: "value" value {{ tensor {{ {tensor} }} }} }} }}'
    )


def parse(text: str):
    return gd_module.parse_graph_def(text, text=True)


def target_scope() -> mg.Scope:
    scope = mg.Scope.new_root_scope()
    mg.Const(scope.with_op_name("existing"), 1.0)
    mg.Const(scope.with_op_name("x"), 2.0)  # clashes with imports under name=""
    return scope


def refused(graph_def, error, match, scope=None, **kwargs):
    """Imports into a non-empty graph, expects `error`, and checks nothing changed."""
    scope = scope or target_scope()
    graph = scope.graph
    before = [op.name for op in graph.operations]
    with pytest.raises(error, match=match) as info:
        mg.import_graph_def(scope, graph_def, **kwargs)
    assert [op.name for op in graph.operations] == before
    # Names reserved during the failed import were released too.
    assert scope.new_sub_scope("import").name_scope == "import"
    assert mg.Identity(scope.with_op_name("y"), graph.get_output("x:0")).operation.name == "y"
    return info.value


# -- undecodable input --------------------------------------------------------------------------


def test_truncated_bytes():
    data = parse(X + identity("y", "x")).SerializeToString()
    refused(data[:12], InvalidArgumentError, "cannot parse .* bytes as a binary GraphDef")


@pytest.mark.parametrize("data", [b"\xff\xff\xff\xff", b"\x0a\xff\xff\xff\xff\x0f", b"\x08"])
def test_garbage_bytes(data):
    refused(data, InvalidArgumentError, "cannot parse")


def test_text_that_does_not_parse_names_the_line():
    with pytest.raises(InvalidArgumentError, match=r"cannot parse text GraphDef: 1:\d+"):
        gd_module.parse_graph_def("node { nme: 'x' }")
    with pytest.raises(InvalidArgumentError, match="cannot parse"):
        gd_module.parse_graph_def("node { name: 'x' ")


def test_not_a_graph_def():
    refused("node {}", InvalidArgumentError, "got a str: pass the GraphDef message")
    refused(12, InvalidArgumentError, "expected a GraphDef message or its serialized bytes")
    with pytest.raises(InvalidArgumentError, match="needs a Scope first"):
        mg.import_graph_def(mg.Graph(), parse(X))


def test_read_graph_errors(tmp_path):
    with pytest.raises(NotFoundError, match="no such graph file"):
        mg.read_graph(tmp_path / "missing.pb")
    with pytest.raises(InvalidArgumentError, match="is a directory"):
        mg.read_graph(tmp_path)
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xfe\xfd")
    with pytest.raises(InvalidArgumentError, match="bad.pb: cannot parse"):
        mg.read_graph(bad)


# -- malformed graphs ---------------------------------------------------------------------------

MALFORMED = [
    # (description, GraphDef text, error, match, node)
    ("duplicate name", X + X, InvalidArgumentError, "node name 'x' is not unique", "x"),
    ("space in name", X.replace('"x"', '"a b"'), InvalidArgumentError, "illegal node name", "a b"),
    ("leading underscore", X.replace('"x"', '"_x"'), InvalidArgumentError, "illegal node", "_x"),
    ("empty part", X.replace('"x"', '"a//b"'), InvalidArgumentError, "illegal node name", "a//b"),
    ("trailing slash", X.replace('"x"', '"a/"'), InvalidArgumentError, "illegal node name", "a/"),
    ("empty name", X.replace('name: "x"', ""), InvalidArgumentError, "illegal node name", ""),
    ("colon in name", X.replace('"x"', '"x:0"'), InvalidArgumentError, "illegal node", "x:0"),
    ("newline in name", X.replace('"x"', '"x\\n"'), InvalidArgumentError, "illegal node", "x\n"),
    ("newline in index", X + identity("y", "x:0\\n"), InvalidArgumentError,
     "malformed input", "y"),
    ("missing input", X + identity("y", "nope"), InvalidArgumentError,
     "node 'y' \\(Identity\\): input 'nope' names no node of the GraphDef", "y"),
    ("missing control input", X + identity("y", "x", "^nope"), InvalidArgumentError,
     "input 'nope' names no node", "y"),
    ("missing output", X + identity("y", "x:3"), InvalidArgumentError,
     "node 'y' \\(Identity\\): input 'x:3' refers to output 3 of 'x' \\(Placeholder\\), which "
     "has 1 output", "y"),
    ("no outputs", 'node { name: "n" op: "NoOp" }' + identity("y", "n"), InvalidArgumentError,
     "refers to output 0 of 'n' \\(NoOp\\), which has 0 outputs", "y"),
    ("control before data", X + identity("y", "^x", "x"), InvalidArgumentError,
     "data input 'x' comes after a control input", "y"),
    ("malformed index", X + identity("y", "x:abc"), InvalidArgumentError,
     "malformed input 'x:abc'", "y"),
    ("negative index", X + identity("y", "x:-1"), InvalidArgumentError, "malformed input", "y"),
    ("no node before colon", X + identity("y", ":0"), InvalidArgumentError, "malformed", "y"),
    ("cycle", identity("a", "b") + identity("b", "a"), InvalidArgumentError,
     "the GraphDef has a cycle: a -> b -> a", "a"),
    ("self loop", identity("a", "a"), InvalidArgumentError, "cycle: a -> a", "a"),
    ("control cycle", X + identity("a", "x", "^b") + identity("b", "a"), InvalidArgumentError,
     "cycle: a -> b -> a", "a"),
    ("no op type", 'node { name: "n" }', NotFoundError, "Op type not registered: ''", "n"),
    ("wrong attr type", X + identity("y", "x", t="i: 1"), InvalidArgumentError,
     "node 'y' \\(Identity\\): attr 'T' must be type, but the AttrValue holds i", "y"),
    ("empty attr", X + identity("y", "x", t=""), InvalidArgumentError,
     "attr 'T' must be type, but the AttrValue holds nothing", "y"),
    ("attr type disagrees with input", X + identity("y", "x", t="type: DT_INT32"),
     InvalidArgumentError, "attr 'T' was given as int32 but input 'input' has dtype float32",
     "y"),
    ("unknown attr", X + identity("y", "x", extra='attr { key: "foo" value { i: 1 } }'),
     InvalidArgumentError, "unknown attr 'foo': Identity has \\['T'\\]", "y"),
    ("function attr", X + identity("y", "x", t='func { name: "f" }'), UnimplementedError,
     "attr 'T' holds a func; minigraph has no graph functions", "y"),
    ("unsupported dtype", X.replace("DT_FLOAT", "DT_VARIANT"), UnimplementedError,
     "dtype DT_VARIANT is not supported", "x"),
    ("reference dtype", X.replace("DT_FLOAT", "DT_FLOAT_REF"), UnimplementedError,
     "DT_FLOAT_REF is not supported", "x"),
    ("unknown dtype number", X.replace("DT_FLOAT", "77"), UnimplementedError,
     "dtype DataType 77 is not supported", "x"),
    ("required attr missing", 'node { name: "x" op: "Placeholder" }', InvalidArgumentError,
     "attr 'dtype' \\(type\\) is required", "x"),
    ("type outside the allowed set",
     X + 'node { name: "g" op: "GatherV2" input: "x" input: "x" input: "x" '
     'attr { key: "Tindices" value { type: DT_FLOAT } } }', InvalidArgumentError,
     "GatherV2 'import/g': attr 'Tindices' must be one of \\{int16, int32, int64\\}; got "
     "float32", "g"),
    ("bad device", X.replace('op: "Placeholder"', 'op: "Placeholder" device: "/gpu:x"'),
     InvalidArgumentError, "node 'x' \\(Placeholder\\): invalid device name '/gpu:x'", "x"),
    ("kernel label not UTF-8", X + identity("y", "x", extra='attr { key: "_kernel" value '
     '{ s: "\\377" } }'), InvalidArgumentError, "attr '_kernel': string .* is not UTF-8", "y"),
    ("kernel label not printable", X + identity("y", "x", extra='attr { key: "_kernel" value '
     '{ s: "a\\nb" } }'), InvalidArgumentError, "a kernel label is a printable string", "y"),
    ("colocation with nobody", X + identity("y", "x", extra='attr { key: "_class" value { '
     'list { s: "loc:@nope" } } }'), InvalidArgumentError,
     "colocation target 'nope' names no node of the GraphDef", "y"),
    ("colocation not strings", X + identity("y", "x", extra='attr { key: "_class" value { '
     "list { i: 1 } } }"), InvalidArgumentError, "attr '_class' must be a list of strings", "y"),
    ("colocation with two groups", X + 'node { name: "z" op: "Placeholder" attr { key: "dtype" '
     'value { type: DT_FLOAT } } }' + identity("y", "x", extra='attr { key: "_class" value { '
     'list { s: "loc:@x" s: "loc:@z" } } }'), UnimplementedError,
     "colocated with nodes of two groups \\('import/x' and 'import/z'\\)", "y"),
    ("output shapes count", X + identity("y", "x", extra='attr { key: "_output_shapes" value '
     "{ list { shape {} shape {} } } }"), InvalidArgumentError,
     "'_output_shapes' lists 2 shapes for 1 outputs", "y"),
    ("output shapes disagree",
     X.replace("} } }", '} } attr { key: "shape" value { shape { dim { size: 3 } } } } }')
     + identity("y", "x", extra='attr { key: "_output_shapes" value { list { shape { '
     "dim { size: 4 } } } } }"), InvalidArgumentError,
     "'_output_shapes' says output 0 has shape \\[4\\], but its inputs give \\[3\\]", "y"),
    ("output shapes of another type", X + identity("y", "x", extra='attr { key: '
     '"_output_shapes" value { list { i: 1 } } }'), InvalidArgumentError,
     "attr '_output_shapes': the list holds i values, not shape", "y"),
    ("shape dim below -1", X.replace("} } }", '} } attr { key: "shape" value { shape { '
     "dim { size: -2 } } } } }"), InvalidArgumentError, "shape dims must be >= -1", "x"),
    ("unknown rank with dims", X.replace("} } }", '} } attr { key: "shape" value { shape { '
     "unknown_rank: true dim { size: 2 } } } } }"), InvalidArgumentError,
     "a shape with unknown_rank must have no dims", "x"),
    ("shape function error",
     const("p", "dtype: DT_FLOAT tensor_shape { dim { size: 3 } }")
     + const("i", "dtype: DT_INT32 tensor_shape {} int_val: 0", "DT_INT32")
     + const("a", "dtype: DT_INT32 tensor_shape {} int_val: 5", "DT_INT32")
     + 'node { name: "g" op: "GatherV2" input: "p" input: "i" input: "a" }',
     InvalidArgumentError, "Expected axis in the range \\[-1, 1\\), but got 5", "g"),
]  # fmt: skip


@pytest.mark.parametrize(
    "text, error, match, node", [case[1:] for case in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_malformed_graphs_are_refused_naming_the_node(text, error, match, node):
    e = refused(parse(text), error, match)
    # The file's name, or the imported one for checks that add_operation makes.
    assert e.node_name in (node, f"import/{node}")


def test_names_tf_accepts_are_accepted():
    # TF's grammar also allows '>' and a leading '.'.
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, parse(X.replace('"x"', '"a/.b>c"')), name="")
    assert scope.graph.get_operation("a/.b>c").type == "Placeholder"


@pytest.mark.parametrize("name", ["import", ""])
def test_refusal_does_not_depend_on_the_prefix(name):
    refused(parse(X + identity("y", "nope")), InvalidArgumentError, "names no node", name=name)


def test_late_failures_undo_every_node_already_added():
    # Many good nodes first; the bad one is last (in file order and in dependency order).
    text = X + "".join(identity(f"n{i}", "x") for i in range(50)) + identity("bad", "x:1")
    e = refused(parse(text), InvalidArgumentError, "refers to output 1")
    assert e.node_name == "bad"
    # The same with a sorted (out-of-order) file.
    text = "".join(identity(f"n{i}", "x") for i in range(50)) + identity("bad", "x:1") + X
    refused(parse(text), InvalidArgumentError, "refers to output 1")


def test_missing_op_types_are_listed_in_one_error():
    text = (
        X
        + 'node { name: "a" op: "Frobnicate" input: "x" }'
        + 'node { name: "b" op: "Transmogrify" input: "a" }'
        + 'node { name: "c" op: "Frobnicate" input: "b" }'
        + identity("d", "c")
    )
    e = refused(parse(text), NotFoundError, "Op types not registered: ")
    assert "'Frobnicate' (first used by node 'a'), 'Transmogrify' (first used by node 'b')" in str(
        e
    )
    assert "'c'" not in str(e)  # each type once, with its first node
    assert (e.node_name, e.op_type) == ("a", "Frobnicate")


# -- Const values -------------------------------------------------------------------------------

SHAPE2 = "tensor_shape { dim { size: 2 } }"

BAD_TENSORS = [
    ("content too short", f'dtype: DT_FLOAT {SHAPE2} tensor_content: "\\000\\000\\000\\000"',
     "DT_FLOAT", "tensor_content has 4 bytes, but a float32 tensor of shape \\[2\\] needs 8"),
    ("content too long", f'dtype: DT_INT8 {SHAPE2} tensor_content: "abc"', "DT_INT8",
     "tensor_content has 3 bytes"),
    ("too many values", f"dtype: DT_INT32 {SHAPE2} int_val: 1 int_val: 2 int_val: 3",
     "DT_INT32", "int_val holds 3 values, but shape \\[2\\] has 2 elements"),
    ("value too wide", f"dtype: DT_INT8 {SHAPE2} int_val: 300", "DT_INT8",
     "value 300 does not fit a int8 tensor"),
    ("half bits too wide", f"dtype: DT_HALF {SHAPE2} half_val: 70000", "DT_HALF",
     "value 70000 does not fit a float16 tensor"),
    ("wrong typed field", f"dtype: DT_INT32 {SHAPE2} float_val: 1", "DT_INT32",
     "a int32 tensor holds values in float_val; expected tensor_content or int_val"),
    ("content and values", f'dtype: DT_INT8 {SHAPE2} tensor_content: "ab" int_val: 1',
     "DT_INT8", "holds both tensor_content and int_val"),
    ("string content", f'dtype: DT_STRING {SHAPE2} tensor_content: "ab"', "DT_STRING",
     "a string tensor cannot use tensor_content"),
    ("complex halves", f"dtype: DT_COMPLEX64 {SHAPE2} scomplex_val: 1", "DT_COMPLEX64",
     "scomplex_val holds 1 numbers: not \\(real, imaginary\\) pairs"),
    ("unknown rank", "dtype: DT_FLOAT tensor_shape { unknown_rank: true }", "DT_FLOAT",
     "a tensor's shape must be fully defined; got <unknown>"),
    ("unknown dim", "dtype: DT_FLOAT tensor_shape { dim { size: -1 } }", "DT_FLOAT",
     "must be fully defined; got \\[\\?\\]"),
    ("absurd size", "dtype: DT_DOUBLE tensor_shape { dim { size: 1099511627776 } } "
     "double_val: 1", "DT_DOUBLE", "is over the 1073741824-byte limit for constants"),
    ("absurd string count", "dtype: DT_STRING tensor_shape { dim { size: 4611686018427387904 } "
     "dim { size: 4 } }", "DT_STRING", "over the 1073741824-byte limit"),
    ("dtype disagrees with value", f"dtype: DT_INT32 {SHAPE2}", "DT_FLOAT",
     "attr 'dtype' is float32; attr 'value' holds int32"),
]  # fmt: skip


@pytest.mark.parametrize(
    "tensor, dtype, match", [c[1:] for c in BAD_TENSORS], ids=[c[0] for c in BAD_TENSORS]
)
def test_bad_const_values_are_refused(tensor, dtype, match):
    e = refused(parse(const("c", tensor, dtype)), InvalidArgumentError, match)
    assert e.node_name in ("c", "import/c")


def test_the_size_bound_is_checked_before_allocating(monkeypatch):
    monkeypatch.setattr(gd_module, "MAX_CONST_BYTES", 64)
    text = const("c", "dtype: DT_FLOAT tensor_shape { dim { size: 17 } } float_val: 1")
    refused(parse(text), InvalidArgumentError, "over the 64-byte limit")
    ok = const("c", "dtype: DT_FLOAT tensor_shape { dim { size: 16 } } float_val: 1")
    mg.import_graph_def(mg.Scope.new_root_scope(), parse(ok))


# -- versions, library, arguments ----------------------------------------------------------------


def test_graphs_for_a_newer_reader_are_refused():
    text = X + f"versions {{ producer: 9 min_consumer: {gd_module.MINIGRAPH_MIN_CONSUMER + 1} }}"
    refused(parse(text), UnimplementedError, "min consumer version 1073741825 is above")
    text = X + f"versions {{ bad_consumers: {gd_module.MINIGRAPH_MIN_CONSUMER} }}"
    refused(parse(text), UnimplementedError, "lists minigraph's version as a bad consumer")
    # minigraph's own marker is fine.
    text = X + f"versions {{ min_consumer: {gd_module.MINIGRAPH_MIN_CONSUMER} }}"
    mg.import_graph_def(mg.Scope.new_root_scope(), parse(text))


def test_function_libraries_are_refused():
    data = parse(X).SerializeToString() + b"\x12\x02\x0a\x00"  # library { function {} }
    refused(data, UnimplementedError, "has a function library")
    mg.import_graph_def(mg.Scope.new_root_scope(), parse(X + "library {}"))  # empty: fine


def other_graph_output() -> mg.Output:
    return mg.Const(mg.Scope.new_root_scope(), 1.0).output


BAD_ARGUMENTS = [
    ({"input_map": {"nope:0": "OUT"}}, "input_map names tensors that are not in the GraphDef: "
     "\\['nope:0'\\]"),
    ({"input_map": {"^nope": "OUT"}}, "not in the GraphDef: \\['\\^nope'\\]"),
    ({"input_map": {"x:5": "OUT"}}, "input_map key 'x:5' refers to output 5 of 'x'"),
    ({"input_map": {"x:a": "OUT"}}, "malformed input_map key 'x:a'"),
    ({"input_map": {0: "OUT"}}, "input_map keys are tensor names"),
    ({"input_map": {"x:0": np.zeros(3)}}, "input_map\\['x:0'\\] must be an Output"),
    ({"input_map": {"^x": 3}}, "input_map\\['\\^x'\\] must be an Operation or Output"),
    ({"input_map": {"x:0": "OTHER"}}, "input_map\\['x:0'\\] belongs to another graph"),
    ({"input_map": ["x:0"]}, "input_map must be a dict"),
    ({"return_elements": ["nope"]}, "return element 'nope': the GraphDef has no node 'nope'"),
    ({"return_elements": ["y:7"]}, "return element 'y:7' refers to output 7 of 'y'"),
    ({"return_elements": ["y:q"]}, "malformed return element 'y:q'"),
    ({"return_elements": "y"}, "return_elements is a list of names"),
    ({"return_elements": [1]}, "return_elements are names"),
    ({"name": "bad name"}, "invalid sub-scope name 'bad name'"),
]  # fmt: skip


@pytest.mark.parametrize("kwargs, match", BAD_ARGUMENTS, ids=lambda v: str(v)[:40])
def test_bad_arguments_are_refused(kwargs, match):
    scope = target_scope()
    replace = {"OUT": scope.graph.get_output("existing:0"), "OTHER": other_graph_output()}
    if "input_map" in kwargs and isinstance(kwargs["input_map"], dict):
        kwargs = {
            "input_map": {k: replace.get(v, v) if isinstance(v, str) else v
                          for k, v in kwargs["input_map"].items()}
        }  # fmt: skip
    refused(parse(X + identity("y", "x")), InvalidArgumentError, match, scope, **kwargs)


def test_input_map_dtype_mismatch_is_a_construction_error():
    scope = target_scope()
    ints = mg.Const(scope.with_op_name("ints"), [1, 2])
    before = len(scope.graph)
    with pytest.raises(InvalidArgumentError, match="attr 'T' was given as float32"):
        mg.import_graph_def(scope, parse(X + identity("y", "x")), input_map={"x:0": ints})
    assert len(scope.graph) == before


# -- interrupts ----------------------------------------------------------------------------------


def _interrupting_shape(ctx):
    raise KeyboardInterrupt


def interrupt_op():
    try:
        return mg.registry.get_op_def("GraphDefTestInterrupt")
    except NotFoundError:
        mg.register_op(
            mg.OpDef("GraphDefTestInterrupt", outputs=["y: float32"], shape_fn=_interrupting_shape)
        )
        return mg.registry.get_op_def("GraphDefTestInterrupt")


def test_an_interrupt_mid_import_leaves_the_graph_unchanged():
    interrupt_op()
    text = X + "".join(identity(f"n{i}", "x") for i in range(20))
    text += 'node { name: "stop" op: "GraphDefTestInterrupt" }'
    scope = target_scope()
    before = [op.name for op in scope.graph.operations]
    with pytest.raises(KeyboardInterrupt):
        mg.import_graph_def(scope, parse(text))
    assert [op.name for op in scope.graph.operations] == before
    assert scope.new_sub_scope("import").name_scope == "import"


# -- fuzzing ---------------------------------------------------------------------------------------

EXPECTED = (InvalidArgumentError, NotFoundError, UnimplementedError)


def valid_bytes() -> bytes:
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3])
    table = mg.Const(root.with_op_name("t"), np.arange(6, dtype=np.int64).reshape(2, 3))
    rows = gather(root.with_op_name("rows").with_device("/device:CPU:0"), x, [1, 0])
    nd = GatherNd(root.with_op_name("nd"), table, [[1, 2]])
    mg.Identity(root.colocate_with(nd).with_op_name("c").with_control_dependencies([rows]), nd)
    mg.Const(root.with_op_name("s"), np.array([b"ab", b"c"], dtype=object))
    return root.graph.as_graph_def(add_shapes=True).SerializeToString()


VALID = valid_bytes()


def check_reader(data: bytes) -> None:
    scope = target_scope()
    before = [op.name for op in scope.graph.operations]
    try:
        graph_def = gd_module.parse_graph_def(data)
    except InvalidArgumentError:
        return
    try:
        mg.import_graph_def(scope, graph_def)
    except EXPECTED:
        assert [op.name for op in scope.graph.operations] == before
        assert scope.new_sub_scope("import").name_scope == "import"


FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(monkeypatch, data):
    monkeypatch.setattr(gd_module, "MAX_CONST_BYTES", 1 << 16)
    check_reader(data)


@FUZZ
@given(st.data())
def test_fuzz_mutated_graphs(monkeypatch, data):
    monkeypatch.setattr(gd_module, "MAX_CONST_BYTES", 1 << 16)
    buffer = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        at = data.draw(st.integers(0, max(0, len(buffer) - 1)))
        if kind == "flip" and buffer:
            buffer[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "set" and buffer:
            buffer[at] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del buffer[at:]
        elif kind == "insert":
            buffer[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del buffer[at : at + data.draw(st.integers(1, 8))]
    check_reader(bytes(buffer))


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_text(monkeypatch, text):
    monkeypatch.setattr(gd_module, "MAX_CONST_BYTES", 1 << 16)
    check_reader(text.encode("utf-8"))


# -- threads ---------------------------------------------------------------------------------------


def test_a_failing_import_never_removes_nodes_other_threads_add():
    import threading

    # A long import that fails at its last node, while another thread keeps adding nodes: the
    # import holds the graph's lock, so the other thread's nodes land before or after it and
    # none is lost in the rollback.
    text = X + "".join(identity(f"n{i}", "x") for i in range(1500)) + identity("bad", "x:1")
    graph_def = parse(text)
    scope = target_scope()
    started = threading.Event()
    stop = threading.Event()
    added: list[str] = []

    def add_nodes() -> None:
        started.set()
        while not stop.is_set():
            added.append(mg.Const(scope.with_op_name("side"), 1.0).operation.name)

    worker = threading.Thread(target=add_nodes)
    worker.start()
    started.wait()
    try:
        for _ in range(3):
            with pytest.raises(InvalidArgumentError, match="refers to output 1"):
                mg.import_graph_def(scope, graph_def)
    finally:
        stop.set()
        worker.join()
    names = [op.name for op in scope.graph.operations]
    assert names[:2] == ["existing", "x"]
    assert names[2:] == added and len(added) > 0
