"""The memo of Python scalar literals (minigraph/scope.py `_literal_consts`): a builder call
with a literal scalar input makes its Const from memoised canonical attrs, which must give
exactly the Const the general conversion gives, in every context, every time."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import scope as scope_module
from ops import Cast, GatherV2, Placeholder, Sub

# CPU behaviour (numpy kernels, host memory, TF's CPU errors): pinned to CPU:0.
pytestmark = pytest.mark.usefixtures("cpu_only")


@pytest.fixture(autouse=True)
def fresh_memo():
    scope_module._literal_consts.clear()
    yield
    scope_module._literal_consts.clear()


def _const_value(output: mg.Output) -> np.ndarray:
    assert output.op.type == "Const"
    return output.op.get_attr("value")


def _axis_const(g) -> mg.Output:
    return g.operation.inputs[2]


def _general(value, dtype=None) -> np.ndarray:
    return mg.dtypes.convert_to_array(value, dtype)


@pytest.mark.parametrize("literal", [0, 1, -1, 2**31 - 1, -(2**31)])
def test_memoised_axis_consts_equal_the_general_conversion(literal):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[3] * 1)
    if literal not in (0, -1):
        with pytest.raises(mg.InvalidArgumentError):  # axis out of range: nothing is added
            GatherV2(root, x, [0], literal)
        assert len(root.graph.get_operations()) == 1
        return
    made = [GatherV2(root, x, [0], literal) for _ in range(3)]
    consts = [_axis_const(g) for g in made]
    assert len({c.op.name for c in consts}) == 3  # one node per call, uniquely named
    for c in consts:
        value = _const_value(c)
        expected = _general(literal)
        assert value.dtype == expected.dtype == np.int32 and value.shape == ()
        assert value == expected and c.dtype is mg.int32
    # The second and third Consts came from the memo and share the first one's canonical value.
    assert _const_value(consts[1]) is _const_value(consts[0])


def test_the_dtype_hint_is_part_of_the_key():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[3])
    axis64 = GatherV2(root, x, [0], np.int64(0))  # an explicit int64 axis
    lit32 = GatherV2(root, x, [0], 0)
    lit64 = GatherV2(root, x, [0], 0, Taxis=mg.int64)  # the hint makes the literal int64
    lit32_again = GatherV2(root, x, [0], 0)
    assert _axis_const(axis64).dtype is mg.int64
    assert _axis_const(lit32).dtype is mg.int32
    assert _axis_const(lit64).dtype is mg.int64
    assert _axis_const(lit32_again).dtype is mg.int32


def _cast_input(root, literal) -> np.ndarray:
    """The Const a scalar literal becomes as Cast's input (its dtype is inferred: no hint)."""
    return _const_value(Cast(root, literal, DstT=mg.float64).operation.inputs[0])


def _same_const(value: np.ndarray, literal) -> None:
    expected = _general(literal)
    assert value.dtype == expected.dtype and value.shape == ()
    if np.isnan(expected):
        assert np.isnan(value)
    else:
        assert value == expected
    assert np.signbit(value) == np.signbit(expected)


@pytest.mark.parametrize(
    "first, second",
    [(0.0, -0.0), (-0.0, 0.0), (1, True), (True, 1), (1.0, 1), (1, 1.0), (False, 0), (0, False)],
)
def test_equal_keys_of_different_values_never_share_a_const(first, second):
    root = mg.Scope.new_root_scope()
    for literal in (first, second, first, second):
        _same_const(_cast_input(root, literal), literal)


@pytest.mark.parametrize(
    "literal", [0, 7, 2**40, -(2**40), 0.5, -0.0, 0.0, float("nan"), 1e300, True, False]
)
def test_scalar_literals_of_each_kind_match_the_general_conversion(literal):
    root = mg.Scope.new_root_scope()
    for _ in range(3):  # from the memo after the first time, where it applies
        try:
            _general(literal)
        except mg.InvalidArgumentError:  # 1e300 does not fit float32, TF's float literal type
            with pytest.raises(mg.InvalidArgumentError, match="without changing its value"):
                _cast_input(root, literal)
            continue
        _same_const(_cast_input(root, literal), literal)
    x = Placeholder(root, mg.float32, shape=[])
    for _ in range(2):  # with a dtype hint: float32, from the other input
        try:
            z = Sub(root, x, literal)
        except mg.InvalidArgumentError:
            with pytest.raises(mg.InvalidArgumentError):
                _general(literal, mg.float32)
            continue
        value = _const_value(z.operation.inputs[1])
        expected = _general(literal, mg.float32)
        assert value.dtype == expected.dtype == np.float32
        assert np.signbit(value) == np.signbit(expected)


def test_a_failing_node_after_a_memoised_literal_leaves_the_graph_unchanged():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[3, 4])
    GatherV2(root, x, [0], 1)  # memoises the literal 1
    names = [op.name for op in root.graph.get_operations()]
    with pytest.raises(mg.InvalidArgumentError):
        GatherV2(root, x, [0], 1, batch_dims=5)  # invalid: after the literal's Const is made
    assert [op.name for op in root.graph.get_operations()] == names
    again = GatherV2(root, x, [0], 1)
    assert _axis_const(again).op.name == "Const_3"  # the failed call's names were released


def test_memoised_literal_consts_run():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[None, 3])
    y = x
    for _ in range(4):
        y = GatherV2(root, y, [2, 1, 0], 1)
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    with mg.Session(root) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: value}), value)
