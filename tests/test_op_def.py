"""OpDef, ArgDef and AttrDef: TF-style specs, canonical attr values (minigraph/op_def.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigraph as mg
from minigraph import registry
from minigraph.errors import InvalidArgumentError
from minigraph.op_def import ATTR_TYPES, ArgDef, AttrDef, OpDef
from minigraph.tensor_shape import TensorShape

_counter = itertools.count()


def unique_op_name(stem: str = "Op") -> str:
    """A CamelCase op type name not used by any other test (the registry is process-global)."""
    return f"OpDefTest{stem}{next(_counter)}"


GATHER_V2_SPECS = dict(
    inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
    outputs=["output: Tparams"],
    attrs=[
        "batch_dims: int = 0",
        "Tparams: type",
        "Tindices: {int16, int32, int64}",
        "Taxis: {int32, int64}",
    ],
)
GATHER_V2_SIGNATURE_TAIL = (
    "(params: Tparams, indices: Tindices, axis: Taxis) -> output: Tparams; batch_dims: int = 0"
)


# -- AttrDef.parse -------------------------------------------------------------------------------

_MISSING = object()


@pytest.mark.parametrize(
    "spec, name, attr_type, allowed, minimum, default",
    [
        ("batch_dims: int = 0", "batch_dims", "int", None, None, 0),
        (
            "Tindices: {int16, int32, int64}",
            "Tindices", "type", (mg.int16, mg.int32, mg.int64), None, _MISSING,
        ),
        ('mode: {"", "ERROR"} = ""', "mode", "string", ("", "ERROR"), None, ""),
        ("mode: {'a', 'b'}", "mode", "string", ("a", "b"), None, _MISSING),
        ("n: int >= 2", "n", "int", None, 2, _MISSING),
        ("n: int >= 2 = 3", "n", "int", None, 2, 3),
        ("n: int >= -1 = -1", "n", "int", None, -1, -1),
        ("sizes: list(int)", "sizes", "list(int)", None, None, _MISSING),
        ("sizes: list(int) >= 1 = [1, 2]", "sizes", "list(int)", None, 1, (1, 2)),
        ("s: shape", "s", "shape", None, None, _MISSING),
        ("s: shape = None", "s", "shape", None, None, TensorShape(None)),
        ("s: shape = [2, -1]", "s", "shape", None, None, TensorShape([2, None])),
        ("value: tensor", "value", "tensor", None, None, _MISSING),
        ("alpha: float", "alpha", "float", None, None, _MISSING),
        ("alpha: float = 1e-3", "alpha", "float", None, None, 0.001),
        ("alpha: float = 2", "alpha", "float", None, None, 2.0),
        ("flag: bool = true", "flag", "bool", None, None, True),
        ("flag: bool = false", "flag", "bool", None, None, False),
        ("T: type", "T", "type", None, None, _MISSING),
        ("T: {int32, int64} = int64", "T", "type", (mg.int32, mg.int64), None, mg.int64),
        ("T: {float, double}", "T", "type", (mg.float32, mg.float64), None, _MISSING),
        ("label: string = 'a = b'", "label", "string", None, None, "a = b"),
        ('names: list(string) = ["a", b"b"]', "names", "list(string)", None, None, ("a", "b")),
        ('types: list(type) = ["int32"]', "types", "list(type)", None, None, (mg.int32,)),
        ("  spaced :  int  =  4 ", "spaced", "int", None, None, 4),
    ],
)  # fmt: skip
def test_attr_def_parse(spec, name, attr_type, allowed, minimum, default):
    attr = AttrDef.parse(spec)
    assert attr.name == name
    assert attr.type == attr_type
    assert attr.allowed == allowed
    assert attr.minimum == minimum
    if default is _MISSING:
        assert not attr.has_default
    else:
        assert attr.has_default
        assert attr.default == default
        assert type(attr.default) is type(default)


@pytest.mark.parametrize(
    "spec, text",
    [
        ("batch_dims: int = 0", "batch_dims: int = 0"),
        ("Tindices: {int16, int32, int64}", "Tindices: {int16, int32, int64}"),
        ("n: int >= 2", "n: int >= 2"),
        ("flag: bool = true", "flag: bool = true"),
        ("sizes: list(int) >= 1 = [1, 2]", "sizes: list(int) >= 1 = [1, 2]"),
        ("T: {float, double} = float", "T: {float32, float64} = float32"),
        ("s: shape = [2, -1]", "s: shape = [2,?]"),
        ("alpha: float = 1e-3", "alpha: float = 0.001"),
    ],
)
def test_attr_def_spec_text(spec, text):
    attr = AttrDef.parse(spec)
    assert attr.spec() == text
    assert repr(attr) == f"AttrDef({text})"


def test_string_allowed_set_spec_round_trips():
    attr = AttrDef.parse('mode: {"", "ERROR"} = ""')
    assert attr.spec().startswith('mode: {"", "ERROR"} = ')
    again = AttrDef.parse(attr.spec())
    assert (again.name, again.type, again.allowed, again.default) == (
        "mode", "string", ("", "ERROR"), "",
    )  # fmt: skip


def test_tensor_default_is_a_frozen_array():
    attr = AttrDef.parse("t: tensor = [1, 2]")
    assert attr.default.dtype == np.int32
    np.testing.assert_array_equal(attr.default, [1, 2])
    assert not attr.default.flags.writeable
    assert attr.spec() == "t: tensor = array(shape=[2], dtype=int32)"


def test_attr_def_objects_pass_through_parse():
    attr = AttrDef("x", "int", default=1)
    assert AttrDef.parse(attr) is attr


@pytest.mark.parametrize(
    "spec, message",
    [
        ("x int", r"cannot parse attr spec 'x int': expected 'name: type'"),
        ("x: integer", r"attr 'x': unknown attr type 'integer'"),
        ("x: list(integer)", r"attr 'x': unknown attr type 'list\(integer\)'"),
        ("x: {int32, int64", r"cannot parse attr spec .*unclosed '\{'"),
        ("x: int = abc", r"cannot parse the default of attr spec 'x: int = abc'"),
        ("1x: int", r"invalid attr name '1x'"),
        ("x: {int32, nope}", r"expected a dtype, got 'nope'"),
        ("T: {int32} = float32", r"attr 'T' must be one of \{int32\}; got float32"),
        ("n: int >= 2 = 1", r"attr 'n' must be >= 2; got 1"),
        ("b: bool = 1", r"attr 'b' \(bool\): expected a bool, got 1"),
        ("n: int = 1.5", r"attr 'n' \(int\): expected an int, got 1.5"),
    ],
)
def test_attr_def_parse_errors(spec, message):
    with pytest.raises(InvalidArgumentError, match=message):
        AttrDef.parse(spec)


def test_attr_types():
    assert set(ATTR_TYPES) == {
        "int", "float", "bool", "string", "type", "shape", "tensor",
        "list(int)", "list(float)", "list(bool)", "list(string)", "list(type)",
        "list(shape)", "list(tensor)",
    }  # fmt: skip


def test_attr_def_is_immutable():
    attr = AttrDef.parse("n: int = 0")
    with pytest.raises(AttributeError, match="AttrDef is immutable"):
        attr.default = 5
    with pytest.raises(AttributeError, match="AttrDef is immutable"):
        attr.name = "m"
    assert attr.default == 0


# -- AttrDef.canonicalize ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attr_type, value, expected",
    [
        ("int", 3, 3),
        ("int", np.int64(3), 3),
        ("int", -7, -7),
        ("float", 2, 2.0),
        ("float", np.float32(0.5), 0.5),
        ("float", np.int32(4), 4.0),
        ("bool", True, True),
        ("bool", np.bool_(False), False),
        ("string", "abc", "abc"),
        ("string", b"abc", "abc"),
        ("string", "é".encode(), "é"),
        ("type", "int32", mg.int32),
        ("type", "float", mg.float32),
        ("type", np.float64, mg.float64),
        ("type", mg.string, mg.string),
        ("shape", [2, None], TensorShape([2, None])),
        ("shape", (2, -1), TensorShape([2, None])),
        ("shape", None, TensorShape(None)),
        ("list(int)", [1, 2], (1, 2)),
        ("list(int)", (np.int8(1),), (1,)),
        ("list(float)", [1, 2.5], (1.0, 2.5)),
        ("list(type)", ["int32", np.float32], (mg.int32, mg.float32)),
        ("list(string)", [b"a", "b"], ("a", "b")),
        ("list(shape)", [[1], None], (TensorShape([1]), TensorShape(None))),
        ("list(bool)", [], ()),
    ],
)
def test_canonicalize(attr_type, value, expected):
    canonical = AttrDef("a", attr_type).canonicalize(value)
    assert canonical == expected
    assert type(canonical) is type(expected)
    if isinstance(canonical, tuple):
        assert [type(v) for v in canonical] == [type(v) for v in expected]


def test_canonical_int_is_a_python_int():
    assert type(AttrDef("a", "int").canonicalize(np.int64(3))) is int
    assert type(AttrDef("a", "float").canonicalize(3)) is float
    assert type(AttrDef("a", "bool").canonicalize(np.bool_(True))) is bool


def test_canonical_tensor_is_a_frozen_copy():
    source = np.array([1.0, 2.0], np.float32)
    value = AttrDef("a", "tensor").canonicalize(source)
    assert value.dtype == np.float32
    assert not value.flags.writeable
    source[0] = 99
    assert value[0] == 1.0


@pytest.mark.parametrize(
    "attr_type, value, message",
    [
        ("int", True, r"attr 'a' \(int\): expected an int, got true"),
        ("int", np.bool_(True), r"attr 'a' \(int\): expected an int, got True"),
        ("int", 1.0, r"attr 'a' \(int\): expected an int, got 1.0"),
        ("int", "1", r"attr 'a' \(int\): expected an int, got '1'"),
        ("float", True, r"attr 'a' \(float\): expected a float, got true"),
        ("float", "1.0", r"attr 'a' \(float\): expected a float, got '1.0'"),
        ("bool", 1, r"attr 'a' \(bool\): expected a bool, got 1"),
        ("bool", "true", r"attr 'a' \(bool\): expected a bool, got 'true'"),
        ("string", 3, r"attr 'a' \(string\): expected a string, got 3"),
        ("type", "int33", r"attr 'a' \(type\): expected a dtype, got 'int33'"),
        ("type", None, r"attr 'a' \(type\): expected a dtype, got None"),
        ("shape", [1, -5], r"attr 'a' \(shape\): expected a shape, got \[1, -5\]"),
        ("shape", 3, r"attr 'a' \(shape\): expected a shape, got 3"),
        ("tensor", [[1], [2, 3]], r"ragged"),
        ("list(int)", 3, r"attr 'a' \(list\(int\)\): expected a list, got 3"),
        ("list(int)", "12", r"attr 'a' \(list\(int\)\): expected a list, got '12'"),
        ("list(int)", [1, True], r"attr 'a' \(list\(int\)\): expected an int, got true"),
        ("list(type)", ["int32", "x"], r"attr 'a' \(list\(type\)\): expected a dtype, got 'x'"),
    ],
)
def test_canonicalize_errors_name_attr_and_value(attr_type, value, message):
    with pytest.raises(InvalidArgumentError, match=message):
        AttrDef("a", attr_type).canonicalize(value)


def test_allowed_type_set_error_lists_allowed_values_and_bad_value():
    attr = AttrDef.parse("Tindices: {int16, int32, int64}")
    assert attr.canonicalize("int16") is mg.int16
    with pytest.raises(
        InvalidArgumentError,
        match=r"^attr 'Tindices' must be one of \{int16, int32, int64\}; got float32$",
    ):
        attr.canonicalize(np.float32)


def test_allowed_string_set_error_lists_allowed_values_and_bad_value():
    attr = AttrDef.parse('mode: {"", "ERROR"} = ""')
    assert attr.canonicalize(b"ERROR") == "ERROR"
    with pytest.raises(
        InvalidArgumentError, match=r"^attr 'mode' must be one of \{\"\", \"ERROR\"\}; got 'WARN'$"
    ):
        attr.canonicalize("WARN")


def test_int_minimum():
    attr = AttrDef.parse("n: int >= 2")
    assert attr.canonicalize(2) == 2
    with pytest.raises(InvalidArgumentError, match=r"^attr 'n' must be >= 2; got 1$"):
        attr.canonicalize(1)


def test_list_minimum_bounds_the_length():
    attr = AttrDef.parse("sizes: list(int) >= 2")
    assert attr.canonicalize([5, 6]) == (5, 6)
    with pytest.raises(
        InvalidArgumentError, match=r"^attr 'sizes' must have at least 2 elements; got 1$"
    ):
        attr.canonicalize([100])


def test_allowed_applies_to_every_list_element():
    attr = AttrDef("Ts", "list(type)", allowed=["int32", "int64"])
    assert attr.canonicalize(["int64", "int32"]) == (mg.int64, mg.int32)
    with pytest.raises(InvalidArgumentError, match=r"attr 'Ts' must be one of .*; got float32"):
        attr.canonicalize(["int32", "float32"])


@given(st.integers(-(2**63), 2**63 - 1))
def test_int_attrs_accept_any_int64(value):
    assert AttrDef("a", "int").canonicalize(value) == value


@given(st.integers(2**63, 2**70) | st.integers(-(2**70), -(2**63) - 1))
def test_int_attrs_beyond_int64_are_refused(value):
    # TF's int attrs are int64 (AttrValue.i): no GraphDef holds another value.
    with pytest.raises(InvalidArgumentError, match="int64"):
        AttrDef("a", "int").canonicalize(value)


@given(st.floats(allow_nan=False, width=32) | st.integers(-(2**60), 2**60))
def test_float_attrs_accept_ints_and_floats(value):
    assert AttrDef("a", "float").canonicalize(value) == float(value)


@given(st.floats(min_value=3.5e38, allow_infinity=False) | st.integers(2**129, 2**2000))
def test_float_attrs_a_32_bit_float_cannot_hold_are_refused(value):
    # TF's float attrs are 32-bit (AttrValue.f): a GraphDef would hold an infinity.
    with pytest.raises(InvalidArgumentError, match="too large"):
        AttrDef("a", "float").canonicalize(value)


@given(st.lists(st.integers(0, 100), max_size=5))
def test_list_int_canonical_form_is_a_tuple(values):
    assert AttrDef("a", "list(int)").canonicalize(values) == tuple(values)


# -- ArgDef --------------------------------------------------------------------------------------


def test_arg_def_parse():
    bound = ArgDef.parse("params: Tparams", {"Tparams": "type"})
    assert (bound.name, bound.type_attr, bound.dtype) == ("params", "Tparams", None)
    assert bound.type_text == "Tparams"
    fixed = ArgDef.parse("axis: int32", {})
    assert (fixed.name, fixed.type_attr, fixed.dtype) == ("axis", None, mg.int32)
    assert fixed.type_text == "int32"
    assert ArgDef.parse("x: float", {}).dtype is mg.float32
    untyped = ArgDef.parse("y", {})
    assert (untyped.type_attr, untyped.dtype, untyped.type_text) == (None, None, "?")
    assert repr(fixed) == "ArgDef(axis: int32)"


def test_arg_def_errors():
    with pytest.raises(InvalidArgumentError, match="give type_attr or dtype, not both"):
        ArgDef("x", type_attr="T", dtype="int32")
    with pytest.raises(InvalidArgumentError, match="invalid argument name '2x'"):
        ArgDef("2x")
    with pytest.raises(InvalidArgumentError, match=r"argument spec 'x: list\(T\)'"):
        ArgDef.parse("x: list(T)", {"T": "type"})
    with pytest.raises(InvalidArgumentError, match=r"invalid argument name 'x\\n'"):
        ArgDef("x\n")


def test_arg_def_is_immutable():
    arg = ArgDef("x", dtype="int32")
    with pytest.raises(AttributeError, match="ArgDef is immutable"):
        arg.dtype = mg.int64


# -- OpDef ---------------------------------------------------------------------------------------


def test_gather_v2_signature_through_the_registry():
    name = unique_op_name("GatherV2")
    mg.register_op(OpDef(name, **GATHER_V2_SPECS))
    expected = name + GATHER_V2_SIGNATURE_TAIL
    assert registry.signature(name) == expected
    assert registry.get_op_def(name).signature() == expected


def test_gather_v2_signature_text_is_exactly_tfs():
    op_def = OpDef("GatherV2", **GATHER_V2_SPECS)
    assert op_def.signature() == (
        "GatherV2(params: Tparams, indices: Tindices, axis: Taxis) -> output: Tparams; "
        "batch_dims: int = 0"
    )
    assert repr(op_def) == f"OpDef({op_def.signature()})"


def test_op_def_attrs_and_inferred_attrs():
    op_def = OpDef("GatherV2", **GATHER_V2_SPECS)
    assert [a.name for a in op_def.attrs] == ["batch_dims", "Tparams", "Tindices", "Taxis"]
    assert op_def.inferred_attrs == frozenset({"Tparams", "Tindices", "Taxis"})
    assert op_def.attr("Taxis").allowed == (mg.int32, mg.int64)
    assert [a.name for a in op_def.inputs] == ["params", "indices", "axis"]
    assert [a.name for a in op_def.outputs] == ["output"]


def test_op_def_unknown_attr_lists_the_attrs():
    op_def = OpDef("GatherV2", **GATHER_V2_SPECS)
    with pytest.raises(
        InvalidArgumentError,
        match=r"op GatherV2 has no attr 'axis'; it has \['Taxis', 'Tindices', 'Tparams', "
        r"'batch_dims'\]",
    ):
        op_def.attr("axis")


def test_type_attrs_must_be_declared_as_in_tf():
    op_def = OpDef("AddLike", inputs=["x: T", "y: T"], outputs=["z: T"], attrs=["T: type"])
    assert [a.spec() for a in op_def.attrs] == ["T: type"]
    assert op_def.inferred_attrs == {"T"}
    assert op_def.signature() == "AddLike(x: T, y: T) -> z: T"
    with pytest.raises(
        InvalidArgumentError,
        match=r"op AddLike: argument spec 'x: T': 'T' is neither a dtype nor a declared type attr",
    ):
        OpDef("AddLike", inputs=["x: T"])


@pytest.mark.parametrize(
    "spec, suggestion",
    [("x: flaot32", "float32"), ("x: int23", "int32"), ("x: Tparam", "Tparams")],
)
def test_a_misspelt_dtype_or_attr_is_an_error_with_a_suggestion(spec, suggestion):
    with pytest.raises(InvalidArgumentError, match=f"did you mean {suggestion}"):
        OpDef("Typo", inputs=[spec], attrs=["Tparams: type"])


def test_output_only_type_attr_is_not_inferred_and_shows_in_signature():
    op_def = OpDef("Const", outputs=["output: dtype"], attrs=["value: tensor", "dtype: type"])
    assert op_def.inferred_attrs == frozenset()
    assert op_def.signature() == "Const() -> output: dtype; value: tensor, dtype: type"


def test_fixed_dtypes_and_untyped_outputs_in_signature():
    op_def = OpDef(
        "Mixed",
        inputs=["x: T", "axis: int64", "flag: bool"],
        outputs=["y", "n: int32"],
        attrs=["T: {float, double}", "keep: bool = false", "k: int >= 1"],
    )
    assert op_def.signature() == (
        "Mixed(x: T, axis: int64, flag: bool) -> y: ?, n: int32; keep: bool = false, k: int >= 1"
    )


def test_describe():
    op_def = OpDef("GatherV2", doc="  Gathers slices.  ", **GATHER_V2_SPECS)
    text = op_def.describe()
    lines = text.splitlines()
    assert lines[0] == op_def.signature()
    assert "Gathers slices." in lines
    assert "  axis: Taxis" in lines
    assert "  output: Tparams" in lines
    assert "  Tindices: {int16, int32, int64} (inferred from inputs)" in lines
    assert "  batch_dims: int = 0" in lines


def test_op_def_accepts_arg_and_attr_def_objects():
    op_def = OpDef(
        "Objects",
        inputs=[ArgDef("x", type_attr="T")],
        outputs=[ArgDef("y", dtype=mg.int64)],
        attrs=[AttrDef("T", "type", allowed=[mg.float32]), AttrDef("k", "int", default=2)],
    )
    assert op_def.signature() == "Objects(x: T) -> y: int64; k: int = 2"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(name="lowercase"), r"op type name 'lowercase' must start with a capital letter"),
        (dict(name="Bad-Name"), r"op type name 'Bad-Name' must start with a capital letter"),
        (dict(attrs=["a: int", "a: float"]), r"op Good: an attr is declared twice"),
        (
            dict(inputs=["x: T"], outputs=["x: T"], attrs=["T: type"]),
            r"op Good: an input or output name is used twice",
        ),
        (
            dict(inputs=["x: n"], attrs=["n: int"]),
            r"op Good: argument spec 'x: n': 'n' is an attr of type int \(expected type",
        ),
        (
            dict(inputs=[ArgDef("x", type_attr="n")], attrs=["n: int"]),
            r"op Good: argument 'x' refers to attr 'n', which is of type int",
        ),
        (
            dict(inputs=[ArgDef("x", type_attr="U")]),
            r"op Good: argument 'x' refers to attr 'U', which is not declared",
        ),
        (dict(name="Good\n"), r"op type name 'Good\\n' must start with a capital letter"),
        (dict(inputs=["x"]), r"op Good: input 'x' needs a type"),
    ],
)
def test_op_def_errors(kwargs, message):
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "Good")
    with pytest.raises(InvalidArgumentError, match=message):
        OpDef(name, **kwargs)


def test_op_def_is_immutable():
    op_def = OpDef("GatherV2", **GATHER_V2_SPECS)
    with pytest.raises(AttributeError, match="OpDef is immutable"):
        op_def.name = "Other"
    with pytest.raises(AttributeError, match="OpDef is immutable"):
        op_def.shape_fn = None
    assert op_def.name == "GatherV2"


def test_framework_op_signatures():
    assert registry.signature("Identity") == "Identity(input: T) -> output: T"
    assert registry.signature("NoOp") == "NoOp()"
    assert registry.signature("Placeholder").startswith(
        "Placeholder() -> output: dtype; dtype: type, shape: shape = "
    )
