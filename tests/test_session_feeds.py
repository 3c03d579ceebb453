"""Session feeds: keys, values, dtype and shape checks, cutting the graph, unfed placeholders."""

import inspect

import _exec_ops as xops
import numpy as np
import pytest

import minigraph
from minigraph import (
    Const,
    Identity,
    InvalidArgumentError,
    NotFoundError,
    Placeholder,
    Scope,
    Session,
)


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


# -- keys and values -----------------------------------------------------------------------------


def test_feed_keys_output_builder_and_names(scope):
    p = Placeholder(scope.with_op_name("p"), minigraph.int32, shape=[2])
    y = xops.AddOne(scope, p)
    value = np.array([1, 2], np.int32)
    with Session(scope) as sess:
        for key in (p, p.output, p.operation, "p:0", "p"):
            assert sess.run(y, {key: value}).tolist() == [2, 3]


@pytest.mark.parametrize(
    "value, dtype, expected",
    [
        (np.array([1.5, 2.5], np.float32), minigraph.float32, [2.5, 3.5]),
        ([1.5, 2.5], minigraph.float32, [2.5, 3.5]),
        ([1, 2], minigraph.float32, [2.0, 3.0]),  # Python ints widen to floats
        ([1, 2], minigraph.int64, [2, 3]),
        (np.array([1, 2], np.int8), minigraph.int32, [2, 3]),  # safe numpy cast
        (np.array([1, 2], np.int16), minigraph.float32, [2.0, 3.0]),
        ([True, False], minigraph.bool_, None),
    ],
)
def test_feed_values_arrays_and_python_literals(scope, value, dtype, expected):
    p = Placeholder(scope, dtype, shape=[2])
    y = Identity(scope, p) if expected is None else xops.AddOne(scope, p)
    with Session(scope) as sess:
        out = sess.run(y, {p: value})
    assert out.dtype == dtype.np_dtype
    assert out.tolist() == (list(value) if expected is None else expected)


def test_feed_python_scalars(scope):
    p = Placeholder(scope, minigraph.float64, shape=[])
    q = Placeholder(scope, minigraph.int32)
    with Session(scope) as sess:
        a, b = sess.run([xops.AddOne(scope, p), xops.AddOne(scope, q)], {p: 2, q: 7})
    assert a == 3.0 and a.dtype == np.float64 and a.shape == ()
    assert b == 8 and b.dtype == np.int32


def test_feed_strings(scope):
    p = Placeholder(scope, minigraph.string, shape=[2])
    with Session(scope) as sess:
        assert sess.run(Identity(scope, p), {p: ["a", "bc"]}).tolist() == [b"a", b"bc"]
        assert sess.run(Identity(scope, p), {p: np.array(["x", "y"])}).tolist() == [b"x", b"y"]


@pytest.mark.parametrize(
    "value, dtype, message",
    [
        (
            np.array([2**31, 1], np.int64),
            minigraph.int32,
            r"dtype int64 for Tensor 'p:0' of dtype int32: the value 2147483648 at \[0\] is out "
            r"of its range \[-2147483648, 2147483647\]",
        ),
        (np.array([1, 2], np.int32), minigraph.float32, r"dtype int32 .* of dtype float32"),
        (np.array([1.0, 2.0], np.float32), minigraph.int32, r"dtype float32 .* of dtype int32"),
        (np.array([-1, 2], np.int32), minigraph.uint32, r"dtype int32 .* of dtype uint32"),
        ([1.5, 2.0], minigraph.int32, r"'p:0' of dtype int32: cannot convert"),
        ([2**40, 1], minigraph.int32, r"'p:0' of dtype int32: cannot convert"),
        (["a", "b"], minigraph.float32, r"'p:0' of dtype float32: cannot convert a string"),
        ([1, 2], minigraph.bool_, r"'p:0' of dtype bool: cannot convert"),
        ([[1], [1, 2]], minigraph.int32, r"'p:0' of dtype int32: cannot convert a ragged"),
    ],
)
def test_unsafe_feeds_are_rejected_before_anything_runs(scope, events, value, dtype, message):
    p = Placeholder(scope.with_op_name("p"), dtype, shape=[2])
    effect = xops.Effect(scope.with_op_name("effect"))
    y = Identity(scope.with_control_dependencies(effect), p)
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match="Cannot feed value") as info:
            sess.run(y, {p: value})
        assert len(sess._plans) == 0
    assert events == []
    assert info.match(message)


def test_feed_shape_must_agree_with_the_static_shape(scope, events):
    p = Placeholder(scope.with_op_name("p"), minigraph.float32, shape=[2])
    q = Placeholder(scope.with_op_name("q"), minigraph.float32, shape=[None, 2])
    r = Placeholder(scope.with_op_name("r"), minigraph.float32)
    y = xops.Record(scope, Identity(scope, p))
    z = xops.Record(scope, Identity(scope, q))
    with Session(scope) as sess:
        with pytest.raises(
            InvalidArgumentError,
            match=r"Cannot feed value of shape \[3\] for Tensor 'p:0', which has shape \[2\]",
        ):
            sess.run(y, {p: [1.0, 2.0, 3.0]})
        with pytest.raises(InvalidArgumentError, match=r"shape \[\] for Tensor 'p:0'"):
            sess.run(y, {p: 1.0})
        with pytest.raises(
            InvalidArgumentError, match=r"shape \[5, 3\] for Tensor 'q:0', which has shape \[\?,2\]"
        ):
            sess.run(z, {q: np.zeros((5, 3), np.float32)})
        with pytest.raises(InvalidArgumentError, match=r"shape \[2\] for Tensor 'q:0'"):
            sess.run(z, {q: np.zeros(2, np.float32)})
        assert events == []
        assert sess.run(z, {q: np.zeros((5, 2), np.float32)}).shape == (5, 2)
        assert sess.run(Identity(scope, r), {r: np.zeros((1, 2, 3), np.float32)}).shape == (1, 2, 3)
        assert sess.run(Identity(scope, r), {r: 1.0}).shape == ()


def test_bad_feed_keys(scope):
    p = Placeholder(scope.with_op_name("p"), minigraph.float32)
    two = xops.TwoOut(scope.with_op_name("two"), [1.0])
    other = Placeholder(Scope.new_root_scope().with_op_name("o"), minigraph.float32)
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match="feed keys must be Outputs, op builders"):
            sess.run(p, {3: 1.0})
        with pytest.raises(InvalidArgumentError, match="cannot feed operation 'two'"):
            sess.run(two.a, {two: 1.0})
        with pytest.raises(InvalidArgumentError, match="feed 'o:0' belongs to another graph"):
            sess.run(p, {other: 1.0, p: 1.0})
        with pytest.raises(NotFoundError, match="no node named 'nope'"):
            sess.run(p, {"nope:0": 1.0})


# -- feeding cuts the graph ----------------------------------------------------------------------


def test_any_tensor_may_be_fed_and_cuts_the_graph_above_it(scope, events):
    p = Placeholder(scope.with_op_name("p"), minigraph.float32)
    above = xops.Record(scope.with_op_name("above"), p)
    bad = xops.Fail(scope.with_op_name("bad"), above, kind="value")
    mid = Identity(scope.with_op_name("mid"), bad)
    out = xops.AddOne(scope.with_op_name("out"), mid)
    metadata = minigraph.RunMetadata()
    with Session(scope) as sess:
        # Neither the unfed placeholder nor the failing kernel above `mid` matters.
        assert sess.run(out, {mid: 41.0}, run_metadata=metadata) == 42.0
        assert set(metadata.placement) == {"out"}
        assert sess.run(out, {"bad:0": 1.0}) == 2.0
        assert events == []
        with pytest.raises(InvalidArgumentError, match="bad value from the kernel"):
            sess.run(out, {p: 1.0})
        assert events == ["above"]


def test_fed_value_of_a_const_replaces_it(scope):
    c = Const(scope.with_op_name("c"), [1, 2])
    y = xops.AddOne(scope, c)
    with Session(scope) as sess:
        assert sess.run(y, {c: [10, 20]}).tolist() == [11, 21]
        assert sess.run(y).tolist() == [2, 3]


def test_fetching_a_fed_tensor_returns_the_fed_value(scope):
    p = Placeholder(scope.with_op_name("p"), minigraph.float32, shape=[2])
    mid = xops.AddOne(scope.with_op_name("mid"), p)
    value = np.array([1, 2], np.float32)
    with Session(scope) as sess:
        assert sess.run(p, {p: value}).tolist() == [1.0, 2.0]
        a, b = sess.run([mid, xops.AddOne(scope, mid)], {mid: value})
        assert a.tolist() == [1.0, 2.0] and b.tolist() == [2.0, 3.0]


def test_feeding_one_output_of_a_multi_output_op(scope):
    two = xops.TwoOut(scope.with_op_name("two"), Const(scope, [1, 2]))
    total = xops.Add(scope, two.a, two.b)
    with Session(scope) as sess:
        assert sess.run(total).tolist() == [3, 5]
        assert sess.run(total, {two.b: [10, 10]}).tolist() == [11, 12]


def test_feeds_are_per_run(scope):
    p = Placeholder(scope, minigraph.int32)
    y = xops.AddOne(scope, p)
    with Session(scope) as sess:
        assert [sess.run(y, {p: i}).item() for i in range(5)] == [1, 2, 3, 4, 5]


# -- unfed placeholders --------------------------------------------------------------------------


def test_unfed_placeholder_is_named_with_dtype_and_shape(scope, events):
    line = inspect.currentframe().f_lineno + 1
    p = Placeholder(scope.with_op_name("p"), minigraph.float32, shape=[2, 3])
    y = xops.Record(scope.with_op_name("y"), p)
    with Session(scope) as sess:
        with pytest.raises(
            InvalidArgumentError,
            match=r"You must feed a value for placeholder tensor 'p' with dtype float32 and "
            r"shape \[2,3\]",
        ) as info:
            sess.run(y)
    assert f"(defined at {__file__}:{line})" in str(info.value)
    assert info.value.node_name == "p" and info.value.op_type == "Placeholder"
    assert events == []


def test_unfed_placeholder_of_unknown_shape(scope):
    p = Placeholder(scope.with_op_name("q"), minigraph.int64)
    with Session(scope) as sess:
        with pytest.raises(
            InvalidArgumentError,
            match=r"^You must feed a value for placeholder tensor 'q' with dtype int64 \(defined",
        ):
            sess.run(xops.AddOne(scope, p))


def test_only_needed_placeholders_must_be_fed(scope):
    p = Placeholder(scope.with_op_name("p"), minigraph.float32)
    Placeholder(scope.with_op_name("unused"), minigraph.float32)
    with Session(scope) as sess:
        assert sess.run(xops.AddOne(scope, p), {p: 1.0}) == 2.0
