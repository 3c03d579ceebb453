"""Construction-time input that must end in a typed minigraph error, never a Python crash
(issue 10, section 5): names, scope arguments, literal conversion, attr values, attr specs.

Each case was an untyped error (AttributeError, TypeError, UnicodeDecodeError, ValueError,
SyntaxError) or a silent acceptance before; each must raise InvalidArgumentError and leave the
graph unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import AttrDef, OpDef, Scope
from minigraph.errors import InvalidArgumentError
from ops import GatherNd, GatherV2, gather, gather_nd


@pytest.fixture
def s():
    return Scope.new_root_scope()


# -- names: full matches, so a trailing newline is refused everywhere ----------------------------


@pytest.mark.parametrize("name", ["g\n", "g\r\n", "\ng", "g\nh", "g ", "", "g\x00"])
def test_op_and_sub_scope_names_with_newlines_or_blanks_are_refused(s, name):
    if name:  # new_sub_scope("") is TF's "the same name scope"
        with pytest.raises(InvalidArgumentError, match="invalid sub-scope name"):
            s.new_sub_scope(name)
    with pytest.raises(InvalidArgumentError, match="invalid op name"):
        s.with_op_name(name)
    assert len(s.graph) == 0


def test_gather_name_argument_is_checked_like_with_op_name(s):
    with pytest.raises(InvalidArgumentError, match="invalid op name 'g\\\\n'"):
        gather(s, [1, 2], [0], name="g\n")
    assert len(s.graph) == 0


def test_op_builder_default_name_is_validated():
    with pytest.raises(InvalidArgumentError, match="invalid default node name 'G\\\\n'"):
        mg.op_builder("GatherV2", "GatherNewline", default_name="G\n")
    with pytest.raises(InvalidArgumentError, match="invalid default node name 'a/b'"):
        mg.op_builder("GatherV2", "GatherSlash", default_name="a/b")
    with pytest.raises(InvalidArgumentError, match="class_name must be a Python identifier"):
        mg.op_builder("GatherV2", "not an identifier")
    assert mg.registry.alias_of("GatherNewline") is None  # nothing recorded


@pytest.mark.parametrize(
    "make",
    [
        lambda: OpDef("MyOp\n"),
        lambda: OpDef("NlArg", inputs=[mg.ArgDef("x\n", dtype="int32")]),
        lambda: OpDef("NlAttr", attrs=[AttrDef("k\n", "int")]),
        lambda: OpDef("NlType", inputs=["x: T\n2"], attrs=["T: type"]),
    ],
    ids=["op type", "arg name", "attr name", "type attr"],
)
def test_op_definition_names_with_a_newline_are_refused(make):
    with pytest.raises(InvalidArgumentError):
        make()


@pytest.mark.parametrize("label", ["loud\n", "a\tb", 5])
def test_kernel_labels_are_printable_strings(s, label):
    with pytest.raises(InvalidArgumentError, match="a kernel label is a printable string"):
        s.with_kernel_label(label)


@pytest.mark.parametrize(
    "device", ["/device:GPU\n:0", "/job:wo rker", "/job:worker\n/device:CPU:0", "/job:1w"]
)
def test_device_names_are_full_matches(s, device):
    with pytest.raises(InvalidArgumentError, match="invalid device name"):
        s.with_device(device)


# -- the scope argument of builders and wrappers -------------------------------------------------


@pytest.mark.parametrize("scope", [None, "root", 5])
def test_builders_and_wrappers_refuse_a_non_scope(scope):
    expected = f"the first argument must be a Scope .*; got {type(scope).__name__}"
    for call in (
        lambda: GatherNd(scope, [1, 2], [[0]]),
        lambda: GatherV2(scope, [1, 2], [0], 0),
        lambda: mg.Const(scope, 1),
        lambda: mg.Placeholder(scope, mg.int32),
        lambda: mg.NoOp(scope),
        lambda: gather(scope, [1, 2], [0]),
        lambda: gather(scope, [1, 2], [0], name="g"),
        lambda: gather_nd(scope, [1, 2], [[0]]),
    ):
        with pytest.raises(InvalidArgumentError, match=expected):
            call()


def test_forgetting_the_scope_is_a_typed_error(s):
    params = mg.Const(s, [1, 2])
    with pytest.raises(InvalidArgumentError, match="must be a Scope .*; got Const"):
        GatherNd(params, [[0]], [[1]])


@pytest.mark.parametrize("deps", [5, "x", b"x", 2.5, None])
def test_with_control_dependencies_refuses_non_ops(s, deps):
    with pytest.raises(InvalidArgumentError, match="with_control_dependencies takes"):
        s.with_control_dependencies(deps)


def test_with_control_dependencies_refuses_non_ops_inside_a_list(s):
    with pytest.raises(InvalidArgumentError, match="control dependency must be an Operation"):
        s.with_control_dependencies([5])


# -- attr values ---------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [b"\xff", b"\xc3\x28", b"ERR\xffOR"])
def test_string_attrs_of_bytes_that_are_not_utf8(s, policy):
    with pytest.raises(InvalidArgumentError, match="bytes that are not UTF-8") as info:
        GatherV2(s, [1, 2], [0], 0, bad_indices_policy=policy)
    assert "bad_indices_policy" in str(info.value)
    assert len(s.graph) == 0


def test_string_attrs_of_utf8_bytes_are_decoded(s):
    node = GatherV2(s, [1, 2], [0], 0, bad_indices_policy=b"ERROR")
    assert node.operation.get_attr("bad_indices_policy") == "ERROR"


# -- literals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "literal",
    [
        [0, True],
        [True, 0],
        [True, 1.5],
        [[1, 2], [3, False]],
        [np.True_, 2],
        [np.array([1, 2]), np.array([True, False])],
        (1, False),
    ],
)
def test_literals_mixing_bools_and_numbers_are_refused(s, literal):
    with pytest.raises(InvalidArgumentError, match="mixes bools with numbers"):
        mg.Const(s, literal)
    with pytest.raises(InvalidArgumentError, match="mixes bools with numbers"):
        mg.Const(s, literal, dtype=mg.int64)
    with pytest.raises(InvalidArgumentError, match="input 'indices'.*mixes bools"):
        GatherV2(s, [1, 2, 3], literal, 0)
    assert len(s.graph) == 0


@pytest.mark.parametrize(
    "literal, dtype",
    [([True, False], mg.bool_), ([[True], [False]], mg.bool_), ([0, 1], mg.int32),
     ([1.0, 2], mg.float32), (True, mg.bool_), (np.array([0, 1]), mg.int64)],
)  # fmt: skip
def test_literals_of_one_kind_still_convert(s, literal, dtype):
    assert mg.Const(s, literal).dtype is dtype


def test_string_literal_that_is_not_encodable(s):
    with pytest.raises(InvalidArgumentError, match="cannot encode a string element as UTF-8"):
        mg.Const(s, "\ud800")
    with pytest.raises(InvalidArgumentError, match="cannot encode"):
        mg.Const(s, ["ok", "bad \udfff"])
    assert len(s.graph) == 0


# -- attr specs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, message",
    [
        ('x: {"a", b}', "holds only quoted strings"),
        ('x: {"a", 1}', "holds only quoted strings"),
        ('x: {"a", "b}', "holds only quoted strings"),
        ("x: {'a', f(1)}", "holds only quoted strings"),
        ('x: {"a"', "unclosed"),
        ("x: int = " + "(" * 300, "cannot parse the default"),
        ("x: int = [", "cannot parse the default"),
        ("x: type >= 1", "a minimum is an int, for int and list attrs"),
        ("x: {int32, flaot32}", "an allowed value is not a type"),
    ],
)
def test_bad_attr_specs_are_typed_errors(spec, message):
    with pytest.raises(InvalidArgumentError, match=message):
        AttrDef.parse(spec)
    with pytest.raises(InvalidArgumentError, match=f"^op BadSpec: .*{message}"):
        OpDef("BadSpec", attrs=[spec])


def test_allowed_strings_may_hold_commas_and_quotes():
    attr = AttrDef.parse("""mode: {"a,b", 'c"d', ""} = "a,b\"""")
    assert attr.allowed == ("a,b", 'c"d', "")
    assert attr.default == "a,b"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"minimum": "3"}, "a minimum is an int"),
        ({"minimum": True}, "a minimum is an int"),
        ({"allowed": 5}, "the allowed values are a list"),
        ({"allowed": "abc"}, "the allowed values are a list"),
        ({"allowed": [1.5]}, "an allowed value is not a int"),
    ],
)
def test_attr_def_arguments_are_checked(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        AttrDef("x", "int", **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"attrs": [5]}, "an attr spec is a string or AttrDef; got 5"),
        ({"inputs": "x: int32"}, "inputs is a list of specs"),
        ({"attrs": "k: int"}, "attrs is a list of specs"),
        ({"outputs": 3}, "outputs is a list of specs"),
        ({"shape_fn": "f"}, "shape_fn must be callable"),
        ({"doc": 5}, "doc must be a string"),
        ({"attrs": [AttrDef("x", "int")], "inputs": [5]}, "an argument spec is a string"),
    ],
)
def test_op_def_arguments_are_checked(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        OpDef("BadArgs", **kwargs)


# -- look-ups and dtype names --------------------------------------------------------------------


@pytest.mark.parametrize("name", [5, None, b"c", ("c",)])
def test_graph_look_ups_take_strings(s, name):
    mg.Const(s.with_op_name("c"), 1)
    for look_up in (
        s.graph.get_operation,
        s.graph.get_output,
        s.graph.as_graph_element,
        s.graph.get_tensor_by_name,
        s.graph.get_operation_by_name,
        mg.registry.get_op_def,
    ):
        with pytest.raises((InvalidArgumentError, mg.NotFoundError)):
            look_up(name)


@pytest.mark.parametrize(
    "typo, suggestion", [("flaot32", "float32"), ("Int32", "int32"), ("unit8", "uint8")]
)
def test_dtype_typos_suggest_the_dtype(s, typo, suggestion):
    with pytest.raises(InvalidArgumentError, match=f"Did you mean {suggestion}"):
        mg.as_dtype(typo)
    with pytest.raises(InvalidArgumentError, match=f"Did you mean {suggestion}"):
        mg.Placeholder(s, typo)
    with pytest.raises(InvalidArgumentError, match=f"Did you mean {suggestion}"):
        mg.Const(s, [1], dtype=typo)
    with pytest.raises(InvalidArgumentError, match=f"Did you mean {suggestion}"):
        mg.register_kernel("Identity", "CPU", lambda ctx, x, **_: x, type_constraints={"T": [typo]})
    assert len(s.graph) == 0
