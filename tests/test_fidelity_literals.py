"""Literal conversion where it differed from tf.constant (issue 24): a numpy array converted to
another dtype is accepted when no value changes (`Const(s, np.array([0, 1, 1], np.int64),
int32)`, as tf.constant accepts it) and refused, naming the first value that does not fit,
when one would (tf.constant casts those silently: int64 2**40 becomes int32 0)."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minigraph as mg
from minigraph.dtypes import convert_to_array
from ops import Sub

INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def test_the_issues_constant():
    s = mg.Scope.new_root_scope()
    c = mg.Const(s, np.array([0, 1, 1], np.int64), mg.int32)
    assert c.dtype is mg.int32 and mg.Session(s).run(c).tolist() == [0, 1, 1]


@pytest.mark.parametrize(
    "value, dtype, want",
    [
        (np.array([0, 1, 1], np.int64), mg.int32, [0, 1, 1]),
        (np.array([255, 0], np.int64), mg.uint8, [255, 0]),
        (np.array([2**63 - 1], np.uint64), mg.int64, [2**63 - 1]),
        (np.array([-(2**31)], np.int64), mg.int32, [-(2**31)]),
        (np.array([2**24], np.int64), mg.float32, [2.0**24]),
        (np.array([2**53], np.int64), mg.float64, [2.0**53]),
        (np.array([3, -7], np.int16), mg.float16, [3.0, -7.0]),
        (np.array([2048], np.int32), mg.bfloat16, [2048.0]),
        (np.array([1.5, 0.1], np.float64), mg.float32, [1.5, np.float32(0.1)]),
        (np.array([np.nan, -np.inf]), mg.float16, [np.nan, -np.inf]),
        (np.array([1 + 2j], np.complex128), mg.complex64, [1 + 2j]),
        (np.array([1.5]), mg.complex64, [1.5 + 0j]),
        (np.array([7], np.int64), mg.complex128, [7 + 0j]),
        (np.zeros(0, np.int64), mg.int8, []),
    ],
)
def test_lossless_conversions_are_accepted(value, dtype, want):
    got = convert_to_array(value, dtype)
    assert got.dtype == dtype.np_dtype
    np.testing.assert_array_equal(got.astype(np.complex128), np.array(want, np.complex128))


@pytest.mark.parametrize(
    "value, dtype, text",
    [
        (np.array([0, 2**40], np.int64), mg.int32,
         "cannot convert a int64 array to int32 without changing its value: the value "
         "1099511627776 at [1] is out of int32's range [-2147483648, 2147483647]"),
        (np.array([[3, -1], [-5, 9]], np.int32), mg.uint16,
         "the value -5 at [1, 0] is out of uint16's range [0, 65535]"),
        (np.array([2**63], np.uint64), mg.int64, "the value 9223372036854775808 at [0] is out of"),
        (np.array(300, np.int16), mg.int8, "the value 300 is out of int8's range [-128, 127]"),
        (np.array([1, 2**53 + 1], np.int64), mg.float64,
         "the value 9007199254740993 at [1] would become float64 9007199254740992.0"),
        (np.array([2**24 + 1], np.int32), mg.float32, "would become float32 16777216.0"),
        (np.array([70000], np.int64), mg.float16, "the value 70000 at [0] would become float16"),
        (np.array([-(2**63)], np.int64), mg.float16, "the value -9223372036854775808 at [0]"),
        (np.array([2**63 - 1], np.int64), mg.float64, "would become float64 9.223372036854776e+18"),
        (np.array([1.0, 1e300]), mg.float32, "the value 1e+300 at [1] overflows float32"),
        (np.array([1e5], np.float32), mg.float16, "the value 100000.0 at [0] overflows float16"),
        (np.array([1 + 1e300j]), mg.complex64, "the value (1+1e+300j) at [0] overflows complex64"),
        (np.array([1.0], np.float32), mg.int32,
         "cannot convert a float32 array to int32: float to int conversions may change values; "
         "cast it explicitly"),
        (np.array([1 + 0j]), mg.float64, "complex to float conversions may change values"),
        (np.array([True]), mg.int32, "cannot convert a bool array to int32: bool converts only"),
        (np.array([1], np.uint8), mg.bool_, "bool converts only to bool"),
    ],
)  # fmt: skip
def test_lossy_conversions_name_the_first_value_that_does_not_fit(value, dtype, text):
    s = mg.Scope.new_root_scope()
    with pytest.raises(mg.InvalidArgumentError, match=re.escape(text)):
        mg.Const(s, value, dtype)
    assert len(s.graph) == 0


def test_literal_inputs_take_the_same_rule():
    # A numpy literal converted to the dtype of another input bound to the same type attr.
    s = mg.Scope.new_root_scope()
    x = mg.Placeholder(s, mg.int32, shape=[2])
    d = Sub(s, x, np.array([1, 2], np.int64))
    assert d.dtype is mg.int32
    assert mg.Session(s).run(d, {x: [5, 5]}).tolist() == [4, 3]
    with pytest.raises(mg.InvalidArgumentError, match=re.escape("the value 4294967296 at [1]")):
        Sub(s, x, np.array([1, 2**32], np.int64))


@settings(max_examples=200, deadline=None)
@given(
    source=st.sampled_from(INTEGERS),
    target=st.sampled_from(INTEGERS),
    data=st.data(),
)
def test_integer_conversions_keep_every_value_or_name_one_that_changes(source, target, data):
    value = data.draw(hnp.arrays(source, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4)))
    flat = [int(v) for v in value.reshape(-1).tolist()]
    info = np.iinfo(target)
    outside = [i for i, v in enumerate(flat) if not info.min <= v <= info.max]
    if not outside:
        got = convert_to_array(value, mg.as_dtype(target))
        assert got.dtype == target and [int(v) for v in got.reshape(-1).tolist()] == flat
        return
    with pytest.raises(mg.InvalidArgumentError) as error:
        convert_to_array(value, mg.as_dtype(target))
    # The first value in C order that does not fit, by value (the min or the max is reported
    # first: either is a value that does not fit).
    named = int(re.search(r"the value (-?\d+)", error.value.message).group(1))
    assert named in [flat[i] for i in outside]


@settings(max_examples=200, deadline=None)
@given(
    value=hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=1, max_side=6)),
    target=st.sampled_from([np.float16, np.float32, np.float64, ml_dtypes.bfloat16]),
)
def test_integer_to_float_conversions_are_exact_or_refused(value, target):
    dtype = mg.as_dtype(np.dtype(target))
    with np.errstate(over="ignore"):
        converted = value.astype(target).astype(np.float64)
    # Exact: finite, and equal as Python numbers (ints and floats compare exactly).
    exact = [bool(np.isfinite(c)) and int(v) == float(c) for v, c in zip(value.tolist(), converted)]
    if all(exact):
        np.testing.assert_array_equal(convert_to_array(value, dtype).astype(np.float64), value)
    else:
        with pytest.raises(mg.InvalidArgumentError, match="without changing its value") as e:
            convert_to_array(value, dtype)
        first = exact.index(False)
        assert f"the value {value[first]} at [{first}]" in e.value.message


def test_feed_casts_are_unchanged():
    # Feeds keep session.py's rules (a float64 array into a float32 placeholder is cast; a
    # float into an int placeholder is refused as a kind change).
    s = mg.Scope.new_root_scope()
    x = mg.Placeholder(s, mg.float32, shape=[1])
    k = mg.Placeholder(s, mg.int32, shape=[1])
    with mg.Session(s) as sess:
        assert sess.run(x, {x: np.array([0.5])}).dtype == np.float32
        with pytest.raises(mg.InvalidArgumentError, match="float to integer casts"):
            sess.run(k, {k: np.array([1.0])})
