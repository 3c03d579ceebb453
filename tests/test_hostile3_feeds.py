"""Feeds that change values or memory (issue 24, section 3: "Broadcast feeds", "Feed casts
that change values", and the integer range check's boundaries).

- A broadcast feed (`np.broadcast_to`: zero strides, a few bytes standing for 10**12
  elements) is checked on its distinct values, and a cast or copy that would not fit in memory
  is a ResourceExhaustedError naming the feed, never numpy's MemoryError.
- numpy calls int64 and uint64 to float64 and complex128 "safe", but 2**53 + 1 becomes 2**53:
  such feeds are accepted only when every value is exact.
- Integer feeds are range-checked: both ends of each target's range pass, one past fails.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import session as session_module

pytestmark = pytest.mark.usefixtures("cpu_only")

HUGE = (10**6, 10**6)  # 10**12 elements: TiBs once materialised


def feed_one(dtype, value, shape=None, fetch_identity=False):
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), dtype, shape=shape)
    fetch = mg.Identity(scope.with_op_name("y"), x) if fetch_identity else x
    with mg.Session(scope) as session:
        return session.run(fetch, {x: value})


# -- broadcast feeds -------------------------------------------------------------------------------

BROADCAST_CASES = [
    ("float64 into float32", mg.float32, np.broadcast_to(np.float64(1.5), HUGE), False),
    ("int64 into int32", mg.int32, np.broadcast_to(np.int64(3), HUGE), False),
    ("int16 into float32 (a safe cast)", mg.float32, np.broadcast_to(np.int16(3), HUGE), False),
    ("float32 into float16", mg.float16, np.broadcast_to(np.float32(0.5), HUGE), False),
    ("Identity of a feed of the right dtype", mg.float64,
     np.broadcast_to(np.float64(1.5), HUGE), True),
    ("bytes into a string tensor", mg.string, np.broadcast_to(np.array(b"ab"), HUGE), False),
    ("str into a string tensor", mg.string, np.broadcast_to(np.array("ab"), HUGE), False),
]  # fmt: skip


@pytest.mark.parametrize(
    "dtype, value, identity", [c[1:] for c in BROADCAST_CASES], ids=[c[0] for c in BROADCAST_CASES]
)
def test_a_broadcast_feed_too_large_to_copy_is_resource_exhausted(dtype, value, identity):
    with pytest.raises(mg.ResourceExhaustedError) as info:
        feed_one(dtype, value, fetch_identity=identity)
    message = info.value.message
    assert "Tensor 'x:0'" in message and "a broadcast array of 1000000000000 elements" in message
    assert info.value.node_name == "x"


def test_a_broadcast_feed_of_the_right_dtype_is_fed_as_it_is():
    value = np.broadcast_to(np.float32(1.5), HUGE)
    got = feed_one(mg.float32, value)
    assert got is value  # no copy: a fetch of the fed tensor is the caller's array


def test_the_values_of_a_broadcast_feed_are_checked_without_expanding_it():
    with pytest.raises(mg.InvalidArgumentError, match=r"the value 4294967296 at \[0, 0\] is out"):
        feed_one(mg.int32, np.broadcast_to(np.int64(2**32), HUGE))
    with pytest.raises(mg.InvalidArgumentError, match=r"the value 1e\+300 at \[0, 0\] overflows"):
        feed_one(mg.float32, np.broadcast_to(np.float64(1e300), HUGE))
    with pytest.raises(mg.InvalidArgumentError, match="has no exact float64 value"):
        feed_one(mg.float64, np.broadcast_to(np.int64(2**53 + 1), HUGE))
    with pytest.raises(mg.InvalidArgumentError, match="bool is not cast"):
        feed_one(mg.int32, np.broadcast_to(np.True_, HUGE))


def test_a_partly_broadcast_feed_is_checked_at_a_position_that_holds_the_value():
    rows = np.array([[1], [2**40], [3]], np.int64)
    value = np.broadcast_to(rows, (3, 10**9))  # only the columns repeat
    with pytest.raises(mg.InvalidArgumentError, match=r"the value 1099511627776 at \[1, 0\]"):
        feed_one(mg.int32, value)


def test_a_broadcast_feed_that_fits_is_cast_into_a_plain_array():
    value = np.broadcast_to(np.array([1, -2, 3], np.int64), (4, 3))
    got = feed_one(mg.int8, value, fetch_identity=True)
    assert got.dtype == np.int8 and got.flags.c_contiguous and got.flags.writeable
    np.testing.assert_array_equal(got, np.array([[1, -2, 3]] * 4))
    words = feed_one(mg.string, np.broadcast_to(np.array(["é", "b"]), (2, 2)))
    assert words.tolist() == [["é".encode(), b"b"]] * 2
    assert words[0, 0] is words[1, 0]  # one encoded bytes object per distinct value


def test_a_copy_larger_than_the_memory_available_is_refused_before_it_is_made(monkeypatch):
    monkeypatch.setattr(session_module, "available_bytes", lambda: 100 << 20)
    value = np.zeros((40 << 20) // 8, np.int64)  # 40 MiB; as int32, 20 MiB: fits
    assert feed_one(mg.int32, value).shape == value.shape
    big = np.broadcast_to(np.int64(1), (200 << 20) // 4)  # 200 MiB once an int32 array
    with pytest.raises(mg.ResourceExhaustedError, match=r"200.00 MiB \(100.00 MiB are available"):
        feed_one(mg.int32, big)
    with pytest.raises(mg.ResourceExhaustedError, match="a fetch passes the fed array through"):
        feed_one(mg.float32, np.broadcast_to(np.float32(1), (200 << 20) // 4), fetch_identity=True)


def test_a_memory_error_while_copying_a_feed_is_resource_exhausted(monkeypatch):
    value = np.broadcast_to(np.int64(1), (1000,))

    class Failing(np.ndarray):
        def astype(self, *args, **kwargs):
            raise MemoryError("no memory")

    with pytest.raises(mg.ResourceExhaustedError, match="it failed"):
        session_module._materialise(feed_node(), value, value.view(Failing), np.dtype(np.int32))


def feed_node():
    scope = mg.Scope.new_root_scope()
    return mg.Placeholder(scope.with_op_name("x"), mg.int32).output


# -- casts that would change values ----------------------------------------------------------------

INEXACT = [
    (mg.float64, np.int64, 2**53 + 1, 9007199254740992.0),
    (mg.float64, np.int64, 2**63 - 1, 9.223372036854776e18),
    (mg.float64, np.int64, -(2**63) + 1, -9.223372036854776e18),
    (mg.float64, np.uint64, 2**64 - 1, 1.8446744073709552e19),
    (mg.float64, np.uint64, 2**53 + 1, 9007199254740992.0),
    (mg.complex128, np.int64, 2**53 + 1, 9007199254740992.0),
    (mg.complex128, np.uint64, 2**64 - 1, 1.8446744073709552e19),
]


@pytest.mark.parametrize("target, source, value, became", INEXACT)
def test_integers_that_float_or_complex_targets_round_are_refused(target, source, value, became):
    array = np.array([0, value], source)
    with pytest.raises(
        mg.InvalidArgumentError,
        match=rf"the value {value} at \[1\] has no exact {target.name} value",
    ):
        feed_one(target, array)


EXACT = [
    (mg.float64, np.int64, [2**53, -(2**53), 2**62, -(2**63), 0]),
    (mg.float64, np.uint64, [2**53, 2**63, 2**64 - 2**11]),
    (mg.complex128, np.int64, [-(2**63), 2**53, 7]),
    (mg.float32, np.int16, [-(2**15), 2**15 - 1]),
    (mg.float32, np.uint16, [0, 2**16 - 1]),
    (mg.float64, np.int32, [-(2**31), 2**31 - 1]),
    (mg.float64, np.uint32, [0, 2**32 - 1]),
    (mg.float16, np.int8, [-128, 127]),
    (mg.float16, np.uint8, [0, 255]),
    (mg.bfloat16, np.int8, [-128, 127]),
    (mg.bfloat16, np.uint8, [0, 255]),
    (mg.complex64, np.float32, [1.5, -3.25]),
]


@pytest.mark.parametrize("target, source, values", EXACT)
def test_exact_widenings_are_accepted_with_their_values(target, source, values):
    got = feed_one(target, np.array(values, source))
    assert got.dtype == target.np_dtype
    if np.issubdtype(source, np.integer):  # exact: the integers come back unchanged
        assert [int(complex(v).real) for v in got.astype(np.complex128).tolist()] == values
    else:
        assert got.tolist() == values


def test_bfloat16_from_uint8_is_exact():
    got = feed_one(mg.bfloat16, np.arange(256, dtype=np.uint8))
    assert got.dtype == ml_dtypes.bfloat16
    assert got.astype(np.int64).tolist() == list(range(256))


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_an_int64_feeds_a_float64_exactly_when_python_says_it_is_exact(value):
    exact = int(float(value)) == value  # Python's own int -> float rounding, exact arithmetic
    array = np.array([value], np.int64)
    if exact:
        assert int(feed_one(mg.float64, array)[0]) == value
    else:
        with pytest.raises(mg.InvalidArgumentError, match="has no exact float64 value"):
            feed_one(mg.float64, array)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_a_uint64_feeds_a_complex128_exactly_when_python_says_it_is_exact(value):
    exact = float(value) < 2**64 and int(float(value)) == value
    array = np.array([value], np.uint64)
    if exact:
        assert int(feed_one(mg.complex128, array)[0].real) == value
    else:
        with pytest.raises(mg.InvalidArgumentError, match="has no exact complex128 value"):
            feed_one(mg.complex128, array)


def test_the_readme_rules_for_other_casts_hold():
    with pytest.raises(mg.InvalidArgumentError, match="integer to float casts may change"):
        feed_one(mg.float32, np.array([1], np.int64))
    with pytest.raises(mg.InvalidArgumentError, match="float to integer casts may change"):
        feed_one(mg.int64, np.array([1.0]))
    assert feed_one(mg.float32, np.array([0.1])).dtype == np.float32  # rounding is the cast


# -- integer range boundaries ----------------------------------------------------------------------

RANGES = [
    (mg.int8, np.int64), (mg.int16, np.int64), (mg.int32, np.int64), (mg.uint8, np.int64),
    (mg.uint16, np.int64), (mg.uint32, np.int64), (mg.int32, np.uint64), (mg.uint32, np.uint64),
    (mg.int64, np.uint64), (mg.uint64, np.int64), (mg.int8, np.uint8), (mg.uint8, np.int8),
]  # fmt: skip


@pytest.mark.parametrize("target, source", RANGES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_both_ends_of_an_integer_range_pass_and_one_past_either_end_fails(target, source):
    info, held = np.iinfo(target.np_dtype), np.iinfo(source)
    low, high = max(info.min, held.min), min(info.max, held.max)
    got = feed_one(target, np.array([low, high, 0], source))
    assert got.dtype == target.np_dtype and got.tolist() == [low, high, 0]
    for past in (low - 1, high + 1):
        if held.min <= past <= held.max:
            with pytest.raises(mg.InvalidArgumentError, match=rf"the value {past} at \[1\] is out"):
                feed_one(target, np.array([0, past], source))


def test_int32_min_itself_is_accepted_alone_and_at_any_position():
    for values in ([-(2**31)], [5, -(2**31)], [-(2**31), 2**31 - 1]):
        assert feed_one(mg.int32, np.array(values, np.int64)).tolist() == values
    with pytest.raises(mg.InvalidArgumentError, match=r"the value -2147483649 at \[0\] is out"):
        feed_one(mg.int32, np.array([-(2**31) - 1], np.int64))
