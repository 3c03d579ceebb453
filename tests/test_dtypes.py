"""DType objects, as_dtype and convert_to_array (minigraph/dtypes.py)."""

from __future__ import annotations

import pickle
import re
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minigraph as mg
from minigraph import dtypes
from minigraph.dtypes import as_dtype, convert_to_array
from minigraph.errors import InvalidArgumentError

# name, module constant, numpy scalar type, kind flags
# (is_bool, is_integer, is_unsigned, is_floating, is_complex, is_string)
DTYPE_TABLE = [
    ("bool", mg.bool_, np.bool_, (True, False, False, False, False, False)),
    ("int8", mg.int8, np.int8, (False, True, False, False, False, False)),
    ("int16", mg.int16, np.int16, (False, True, False, False, False, False)),
    ("int32", mg.int32, np.int32, (False, True, False, False, False, False)),
    ("int64", mg.int64, np.int64, (False, True, False, False, False, False)),
    ("uint8", mg.uint8, np.uint8, (False, True, True, False, False, False)),
    ("uint16", mg.uint16, np.uint16, (False, True, True, False, False, False)),
    ("uint32", mg.uint32, np.uint32, (False, True, True, False, False, False)),
    ("uint64", mg.uint64, np.uint64, (False, True, True, False, False, False)),
    ("float16", mg.float16, np.float16, (False, False, False, True, False, False)),
    ("bfloat16", mg.bfloat16, ml_dtypes.bfloat16, (False, False, False, True, False, False)),
    ("float32", mg.float32, np.float32, (False, False, False, True, False, False)),
    ("float64", mg.float64, np.float64, (False, False, False, True, False, False)),
    ("complex64", mg.complex64, np.complex64, (False, False, False, False, True, False)),
    ("complex128", mg.complex128, np.complex128, (False, False, False, False, True, False)),
    ("string", mg.string, np.object_, (False, False, False, False, False, True)),
]
NUMPY_TABLE = [row for row in DTYPE_TABLE if row[0] != "string"]


def test_the_table_covers_every_dtype():
    assert [row[1] for row in DTYPE_TABLE] == list(dtypes.ALL_DTYPES)
    assert len(dtypes.ALL_DTYPES) == 16


@pytest.mark.parametrize(
    "name, dtype, np_type, flags", DTYPE_TABLE, ids=[r[0] for r in DTYPE_TABLE]
)
def test_dtype_properties(name, dtype, np_type, flags):
    is_bool, is_integer, is_unsigned, is_floating, is_complex, is_string = flags
    assert dtype.name == name
    assert str(dtype) == name
    assert repr(dtype) == f"minigraph.{name}"
    assert dtype.as_numpy_dtype is np_type
    assert dtype.np_dtype == np.dtype(np_type)
    assert dtype.itemsize == np.dtype(np_type).itemsize
    assert (
        dtype.is_bool,
        dtype.is_integer,
        dtype.is_unsigned,
        dtype.is_floating,
        dtype.is_complex,
        dtype.is_string,
    ) == flags
    assert dtype.is_numeric == (is_integer or is_floating or is_complex)


@pytest.mark.parametrize(
    "name, dtype, np_type, flags", DTYPE_TABLE, ids=[r[0] for r in DTYPE_TABLE]
)
def test_as_dtype_from_name_numpy_dtype_type_and_dtype(name, dtype, np_type, flags):
    assert as_dtype(name) is dtype
    assert as_dtype(dtype) is dtype
    assert as_dtype(np_type) is dtype
    assert as_dtype(np.dtype(np_type)) is dtype
    assert getattr(mg, "bool_" if name == "bool" else name) is dtype


@pytest.mark.parametrize(
    "name, dtype, np_type, flags", DTYPE_TABLE, ids=[r[0] for r in DTYPE_TABLE]
)
def test_dtype_pickles_to_the_same_object(name, dtype, np_type, flags):
    assert pickle.loads(pickle.dumps(dtype)) is dtype


def test_bfloat16_comes_from_ml_dtypes():
    assert mg.bfloat16.as_numpy_dtype is ml_dtypes.bfloat16
    assert mg.bfloat16.itemsize == 2
    assert as_dtype(np.dtype(ml_dtypes.bfloat16)) is mg.bfloat16
    array = convert_to_array(np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16))
    assert array.dtype == ml_dtypes.bfloat16


@pytest.mark.parametrize(
    "alias, expected",
    [
        ("float", mg.float32),
        ("double", mg.float64),
        ("half", mg.float16),
        ("bool_", mg.bool_),
        ("str", mg.string),
        ("bytes", mg.string),
        ("object", mg.string),
    ],
)
def test_as_dtype_tf_aliases(alias, expected):
    assert as_dtype(alias) is expected


@pytest.mark.parametrize(
    "py_type, expected",
    [
        (bool, mg.bool_),
        (int, mg.int64),
        (float, mg.float64),
        (complex, mg.complex128),
        (str, mg.string),
        (bytes, mg.string),
        (object, mg.string),
    ],
)
def test_as_dtype_from_python_types(py_type, expected):
    assert as_dtype(py_type) is expected


@pytest.mark.parametrize("value", [np.str_, np.bytes_, np.dtype("U5"), np.dtype("S3")])
def test_numpy_string_dtypes_map_to_string(value):
    assert as_dtype(value) is mg.string


@pytest.mark.parametrize("name", ["int33", "Float32", "DT_FLOAT", "", "float32 "])
def test_as_dtype_unknown_name_raises(name):
    with pytest.raises(InvalidArgumentError, match=f"unknown dtype name {name!r}.*'float32'"):
        as_dtype(name)


def test_unknown_dtype_errors_are_value_errors():
    with pytest.raises(ValueError, match="unknown dtype name 'nope'"):
        as_dtype("nope")


@pytest.mark.parametrize("value", [None, 3, 2.5, [1, 2], list, dict, mg.Scope])
def test_as_dtype_rejects_values_that_name_no_type(value):
    # np.dtype(None) is float64 and np.dtype(list) is object: neither may leak through.
    with pytest.raises(InvalidArgumentError, match="cannot interpret .* as a dtype"):
        as_dtype(value)


def test_as_dtype_rejects_numpy_dtypes_without_equivalent():
    with pytest.raises(InvalidArgumentError, match="datetime64.*has no minigraph equivalent"):
        as_dtype(np.dtype("datetime64[s]"))


def test_dtype_equality_with_anything_as_dtype_understands():
    assert mg.float32 == np.float32
    assert np.float32 == mg.float32
    assert mg.float32 == np.dtype("float32")
    assert mg.float32 == "float32"
    assert mg.float32 == "float"
    assert mg.float64 == "double"
    assert mg.int64 == int  # noqa: E721 - DType equality with a Python type, as in TF
    assert mg.string == str  # noqa: E721
    assert mg.float32 != np.float64
    assert mg.float32 != mg.float64
    assert mg.int32 != "int64"


@pytest.mark.parametrize("other", [None, "not-a-type", 3, [1], object(), list])
def test_dtype_is_not_equal_to_non_types(other):
    for dtype in dtypes.ALL_DTYPES:
        assert dtype != other
        assert not (dtype == other)


def test_float64_is_not_equal_to_none():
    # np.dtype(None) is float64; `x.dtype == None` must still be False.
    assert (mg.float64 == None) is False  # noqa: E711


def test_dtypes_are_hashable_and_distinct():
    table = {d: i for i, d in enumerate(dtypes.ALL_DTYPES)}
    assert len(table) == 16
    assert table[as_dtype("int32")] == dtypes.ALL_DTYPES.index(mg.int32)
    assert hash(mg.float32) == hash(as_dtype(np.float32))


def test_dtype_attributes_cannot_be_set():
    with pytest.raises(AttributeError, match="has no setter|can't set attribute"):
        mg.float32.name = "float33"
    with pytest.raises(AttributeError, match="has no attribute 'extra'"):
        mg.float32.extra = 1
    assert mg.float32.name == "float32"


def test_dtype_groups():
    assert set(dtypes.INTEGER_DTYPES) == {
        mg.int8, mg.int16, mg.int32, mg.int64, mg.uint8, mg.uint16, mg.uint32, mg.uint64
    }  # fmt: skip
    assert mg.bool_ not in dtypes.NUMERIC_DTYPES
    assert mg.string not in dtypes.NUMERIC_DTYPES
    assert mg.bfloat16 in dtypes.NUMERIC_DTYPES
    assert len(dtypes.NUMERIC_DTYPES) == 14  # 8 integer, 4 float, 2 complex


# -- convert_to_array: Python literals -----------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected_dtype",
    [
        (0, np.int32),
        (-(2**31), np.int32),
        (2**31 - 1, np.int32),
        (2**31, np.int64),
        (-(2**31) - 1, np.int64),
        ([1, 2**40], np.int64),
        ([[1, 2], [3, 4]], np.int32),
        (1.5, np.float32),
        ([1, 2.5], np.float32),
        (1 + 2j, np.complex128),
        (True, np.bool_),
        ([True, False], np.bool_),
    ],
)
def test_python_literal_dtypes(value, expected_dtype):
    array = convert_to_array(value)
    assert array.dtype == expected_dtype
    np.testing.assert_array_equal(array, np.asarray(value).astype(expected_dtype))


def test_python_float_rounds_to_float32():
    array = convert_to_array(0.1)
    assert array.dtype == np.float32
    assert array == np.float32(0.1)
    nested = convert_to_array([[0.1, 0.2], [1e-8, 3.3]])
    assert nested.dtype == np.float32
    np.testing.assert_array_equal(nested, np.array([[0.1, 0.2], [1e-8, 3.3]], np.float32))


def test_python_nan_and_inf_convert():
    array = convert_to_array([float("nan"), float("inf"), -float("inf")])
    assert array.dtype == np.float32
    assert np.isnan(array[0]) and array[1] == np.inf and array[2] == -np.inf


def test_python_float_overflowing_float32_is_an_error():
    with pytest.raises(InvalidArgumentError, match="cannot convert 1e\\+40 to float32"):
        convert_to_array(1e40)


def test_empty_list_is_float32_and_takes_any_dtype():
    assert convert_to_array([]).dtype == np.float32
    assert convert_to_array([]).shape == (0,)
    for dtype in (mg.int32, mg.bool_, mg.uint8, mg.string):
        array = convert_to_array([], dtype)
        assert array.shape == (0,)
        assert as_dtype(array.dtype) is dtype
    assert convert_to_array([[], []], mg.int64).shape == (2, 0)


def test_str_becomes_object_array_of_utf8_bytes():
    array = convert_to_array("héllo")
    assert array.dtype == object
    assert array.shape == ()
    assert array.item() == "héllo".encode()
    nested = convert_to_array([["a", "bc"], ["", "ü"]])
    assert nested.dtype == object
    assert nested.shape == (2, 2)
    assert nested.tolist() == [[b"a", b"bc"], [b"", "ü".encode()]]


def test_bytes_are_kept_exactly():
    # numpy's fixed-width bytes drop trailing NULs; string tensors must not.
    values = [b"ab\x00", b"\x00", b"\xff\xfe", b""]
    array = convert_to_array(values)
    assert array.dtype == object
    assert array.tolist() == values
    assert convert_to_array(b"x\x00\x00").item() == b"x\x00\x00"
    assert convert_to_array("a\x00").item() == b"a\x00"


def test_mixed_str_and_bytes_are_both_strings():
    assert convert_to_array(["a", b"b"]).tolist() == [b"a", b"b"]


@pytest.mark.parametrize("value", [["a", 1], [1, "a"], [True, "x"], [b"a", 2.5]])
def test_strings_mixed_with_numbers_are_refused(value):
    # numpy would silently turn the number into text.
    with pytest.raises(InvalidArgumentError, match="mixed or unsupported element types"):
        convert_to_array(value)


@pytest.mark.parametrize("value", [None, [1, None], {"a": 1}, [object()]])
def test_unsupported_element_types(value):
    with pytest.raises(InvalidArgumentError, match="mixed or unsupported element types"):
        convert_to_array(value)


@pytest.mark.parametrize("value", [[[1, 2], [3]], [1, [2]], [["a"], ["b", "c"]], [[1.0], []]])
def test_ragged_nesting_is_a_clear_error(value):
    with pytest.raises(InvalidArgumentError, match="ragged nested sequence"):
        convert_to_array(value)


# -- convert_to_array: with a target dtype -------------------------------------------------------


@pytest.mark.parametrize(
    "value, dtype",
    [
        (1, mg.int64),
        (1, mg.int8),
        (255, mg.uint8),
        (1, mg.float32),
        (2**24, mg.float32),
        (2**53, mg.float64),
        (1, mg.complex64),
        (0.1, mg.float16),
        (0.1, mg.bfloat16),
        (1.5, mg.complex64),
        ([1, 2, 3], mg.float64),
        ([True], mg.bool_),
    ],
)
def test_python_literal_converts_when_value_is_kept(value, dtype):
    array = convert_to_array(value, dtype)
    assert as_dtype(array.dtype) is dtype
    expected = np.asarray(value).astype(dtype.np_dtype)
    np.testing.assert_array_equal(array, expected)


@pytest.mark.parametrize(
    "value, dtype, shown",
    [
        (300, mg.uint8, "300"),
        (-1, mg.uint32, "-1"),
        (2**31, mg.int32, "2147483648"),
        (128, mg.int8, "128"),
        (1.5, mg.int32, "1.5"),
        (1.0, mg.int32, "1.0"),
        (2**30 + 1, mg.float32, "1073741825"),
        (1 + 1j, mg.float64, "\\(1\\+1j\\)"),
        (1e20, mg.int64, "1e\\+20"),
    ],
)
def test_python_literal_conversion_that_changes_the_value_raises(value, dtype, shown):
    with pytest.raises(
        InvalidArgumentError, match=f"cannot convert {shown} to {dtype.name} without changing"
    ):
        convert_to_array(value, dtype)


@pytest.mark.parametrize("dtype", [mg.int32, mg.uint8, mg.float32, mg.int64])
def test_bool_to_number_is_refused(dtype):
    with pytest.raises(InvalidArgumentError, match=f"cannot convert True to {dtype.name}"):
        convert_to_array(True, dtype)
    with pytest.raises(InvalidArgumentError, match=f"to {dtype.name} without changing"):
        convert_to_array([True, False], dtype)


def test_number_to_bool_is_refused():
    with pytest.raises(InvalidArgumentError, match="cannot convert 1 to bool"):
        convert_to_array(1, mg.bool_)


def test_string_and_number_do_not_convert_into_each_other():
    with pytest.raises(InvalidArgumentError, match="cannot convert a string value to a int32"):
        convert_to_array("1", mg.int32)
    with pytest.raises(InvalidArgumentError, match="cannot convert a int64 value to a string"):
        convert_to_array(1, mg.string)


def test_refused_conversions_do_not_warn():
    # The lossy cast is reported as an error, never as a numpy RuntimeWarning first.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidArgumentError, match="cannot convert 1e\\+20 to int32"):
            convert_to_array(1e20, mg.int32)
        with pytest.raises(InvalidArgumentError, match="cannot convert 1e\\+40 to float32"):
            convert_to_array(1e40, mg.float32)


# -- convert_to_array: numpy values --------------------------------------------------------------


@pytest.mark.parametrize(
    "name, dtype, np_type, flags", NUMPY_TABLE, ids=[r[0] for r in NUMPY_TABLE]
)
def test_numpy_arrays_keep_their_dtype(name, dtype, np_type, flags):
    source = np.arange(6).reshape(2, 3).astype(np_type)
    array = convert_to_array(source)
    assert array.dtype == np.dtype(np_type)
    np.testing.assert_array_equal(array, source)
    scalar = convert_to_array(np_type(1))
    assert scalar.dtype == np.dtype(np_type)
    assert scalar.shape == ()


def test_numpy_int64_scalar_is_not_narrowed_like_a_python_int():
    assert convert_to_array(np.int64(3)).dtype == np.int64
    assert convert_to_array(np.array([1, 2], np.int64)).dtype == np.int64


def test_numpy_safe_casts_are_allowed():
    array = convert_to_array(np.array([1, 2], np.int32), mg.int64)
    assert array.dtype == np.int64
    array = convert_to_array(np.array([1.5], np.float32), mg.float64)
    assert array.dtype == np.float64


@pytest.mark.parametrize(
    "source, dtype, text",
    [
        (np.array([1.5], np.float32), mg.int32, "float to int conversions may change values"),
        (np.array([-1], np.int8), mg.uint8, "the value -1 at [0] is out of uint8's range [0, 255]"),
    ],
)
def test_numpy_lossy_casts_raise(source, dtype, text):
    # Lossless narrowings are accepted (tests/test_fidelity_literals.py); these are not.
    with pytest.raises(InvalidArgumentError, match=re.escape(text)):
        convert_to_array(source, dtype)


def test_numpy_string_arrays_become_bytes():
    array = convert_to_array(np.array(["a", "bé"]))
    assert array.dtype == object
    assert array.tolist() == [b"a", "bé".encode()]
    array = convert_to_array(np.array([b"x", b"yz"]))
    assert array.tolist() == [b"x", b"yz"]


def test_numpy_object_array_of_non_strings_is_refused():
    with pytest.raises(InvalidArgumentError, match=r"elements: \['int'\]"):
        convert_to_array(np.array([1, 2], dtype=object))


# -- property tests ------------------------------------------------------------------------------

_int32 = st.integers(-(2**31), 2**31 - 1)
_nested_shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


@given(st.lists(_int32, max_size=20))
def test_python_int32_lists_round_trip(values):
    array = convert_to_array(values)
    assert array.dtype == (np.int32 if values else np.float32)
    assert array.tolist() == values


@given(st.lists(_int32, min_size=1, max_size=10), st.integers(2**31, 2**63 - 1))
def test_python_ints_widen_to_int64_when_one_does_not_fit(values, big):
    array = convert_to_array(values + [big])
    assert array.dtype == np.int64
    assert array.tolist() == values + [big]


@given(st.lists(st.floats(width=32, allow_nan=False), max_size=20))
def test_python_floats_representable_in_float32_round_trip(values):
    array = convert_to_array(values)
    assert array.dtype == np.float32
    assert array.tolist() == values


@given(st.lists(st.floats(allow_nan=False, max_value=3e38, min_value=-3e38), min_size=1))
def test_python_floats_round_to_nearest_float32(values):
    array = convert_to_array(values)
    np.testing.assert_array_equal(array, np.array(values, dtype=np.float32))


@given(st.lists(st.integers(-(2**53), 2**53), max_size=10))
def test_python_ints_convert_exactly_to_float64(values):
    array = convert_to_array(values, mg.float64)
    assert array.dtype == np.float64
    assert [int(v) for v in array.tolist()] == values


@given(
    hnp.arrays(
        st.sampled_from([np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16,
                         np.float32, np.float64, np.complex64, np.complex128]),
        _nested_shapes,
    )
)  # fmt: skip
def test_numpy_arrays_round_trip(source):
    array = convert_to_array(source)
    assert array.dtype == source.dtype
    assert array.shape == source.shape
    np.testing.assert_array_equal(array, source)
    again = convert_to_array(source, as_dtype(source.dtype))
    np.testing.assert_array_equal(again, source)


@given(st.lists(st.text(), max_size=8))
def test_text_round_trips_through_utf8(values):
    array = convert_to_array(values, mg.string if not values else None)
    assert array.dtype == object
    assert [v.decode("utf-8") for v in array.tolist()] == values


@settings(max_examples=200)
@given(st.lists(st.binary(), min_size=1, max_size=8))
def test_bytes_round_trip_exactly(values):
    array = convert_to_array(values)
    assert array.dtype == object
    assert array.tolist() == values
