"""Constants own private, immutable storage (issue 10, section 2): nothing a user does through
public API to an array they passed in or got back (the value they built a Const from, a
fetched value, `get_attr("value")`, a shape function's constant input) changes what any graph
computes later, including other graphs whose equal constants the construction memo shares.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import Scope
from minigraph.dtypes import frozen_copy
from ops import GatherV2, gather


def session(scope):
    return mg.Session(scope, mg.SessionConfig(devices=[mg.get_devices()[0]]))


def tamper(array) -> None:
    """Tries every public way to write into `array` and the arrays it is a view of: make it
    writeable (numpy may refuse: fine), then overwrite it."""
    chain = []
    node = array
    while isinstance(node, np.ndarray):
        chain.append(node)
        node = node.base
    for a in chain:
        try:
            a.flags.writeable = True
        except ValueError:
            continue
        junk = b"junk" if a.dtype.hasobject else 99
        a[...] = junk


def test_a_read_only_view_of_user_memory_is_copied():
    # The review's reproduction: an unrelated graph's equal constant changed.
    base = np.array([11, 22, 33], np.int32)
    view = base[:]
    view.flags.writeable = False
    first = Scope.new_root_scope()
    c1 = mg.Const(first, view)
    base[:] = -1
    second = Scope.new_root_scope()
    c2 = mg.Const(second, np.array([11, 22, 33], np.int32))
    assert session(second).run(c2).tolist() == [11, 22, 33]
    assert session(first).run(c1).tolist() == [11, 22, 33]


def test_a_broadcast_view_is_copied():
    row = np.array([1, 2, 3], np.int64)
    s = Scope.new_root_scope()
    c = mg.Const(s, np.broadcast_to(row, (2, 3)))
    row[1] = 42
    assert session(s).run(c).tolist() == [[1, 2, 3], [1, 2, 3]]
    assert c.operation.get_attr("value").strides == (24, 8)  # private and contiguous


def test_an_axis_from_a_broadcast_view_keeps_static_and_run_time_shapes_equal():
    axis_base = np.array(1, np.int32)
    s = Scope.new_root_scope()
    params = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = GatherV2(s, params, [0, 0, 0, 0], np.broadcast_to(axis_base, ()))
    assert g.shape == [2, 4]
    axis_base[()] = 0  # would make the kernel gather along axis 0: shape [4, 3]
    assert session(s).run(g).shape == (2, 4)


@pytest.mark.parametrize(
    "value",
    [
        np.array([11, 22, 33], np.int32),
        np.array(7.5, np.float32),
        np.arange(40, dtype=np.float64).reshape(5, 8),  # above the memo's small-value size
        np.array([1, 2], dtype=mg.bfloat16.np_dtype),
        np.array([True, False]),
        np.array([b"ab", b"cd"], dtype=object),
        np.array(b"x", dtype=object),
    ],
    ids=["int32", "scalar", "large", "bfloat16", "bool", "strings", "string scalar"],
)
def test_no_public_route_writes_a_constant(value):
    expected = value.copy()
    graphs = [Scope.new_root_scope() for _ in range(3)]
    consts = [mg.Const(s, value.copy()) for s in graphs]
    mine = value.copy()
    owned = mg.Const(graphs[0], mine)
    tamper(mine)
    for s, c in zip(graphs, consts):
        fetched = session(s).run(c)
        tamper(fetched)
        tamper(c.operation.get_attr("value"))
        tamper(c.operation.attrs["value"])
        tamper(session(s).run(mg.Identity(s, c)))
    for s, c in zip(graphs, consts):
        for _ in range(2):  # the plan compiled above, then a new one
            np.testing.assert_array_equal(session(s).run(c), expected)
        np.testing.assert_array_equal(c.operation.get_attr("value"), expected)
    np.testing.assert_array_equal(session(graphs[0]).run(owned), expected)


def test_a_fetched_constant_cannot_be_made_writeable():
    s = Scope.new_root_scope()
    for value in ([1, 2, 3], ["a", "b"]):
        fetched = session(s).run(mg.Const(s, value))
        with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
            fetched.flags.writeable = True
        with pytest.raises(ValueError, match="read-only"):
            fetched[0] = fetched[1]


def test_shape_functions_see_immutable_constant_values():
    seen = []

    def shape_fn(ctx):
        value = ctx.constant_value(0)
        seen.append(value)
        tamper(value)
        return ctx.input_shapes[0]

    op = mg.register_op(
        mg.OpDef(
            "ConstImmutableTestPeek",
            inputs=["x: int32"],
            outputs=["y: int32"],
            shape_fn=shape_fn,
        )
    )
    mg.register_kernel("ConstImmutableTestPeek", "CPU", lambda ctx, x: x + 0)
    s = Scope.new_root_scope()
    node = op(s, [5, 6])
    assert seen[0].tolist() == [5, 6]
    assert session(s).run(node).tolist() == [5, 6]
    other = Scope.new_root_scope()
    assert session(other).run(mg.Const(other, [5, 6])).tolist() == [5, 6]


def test_literal_inputs_are_copied_too():
    indices = np.array([2, 0], np.int32)
    s = Scope.new_root_scope()
    g = gather(s, [10, 20, 30], indices)
    indices[:] = 1
    assert session(s).run(g).tolist() == [30, 10]


def test_frozen_copy():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    frozen = frozen_copy(a)
    assert frozen is not a and not np.shares_memory(frozen, a)
    assert frozen_copy(frozen) is frozen  # already private: shared, not copied again
    assert frozen_copy(frozen[:, ::-1]) is not frozen  # a strided view is copied
    assert frozen.flags.c_contiguous and not frozen.flags.writeable
    strings = frozen_copy(np.array([b"a"], dtype=object))
    assert frozen_copy(strings) is strings
    with pytest.raises(ValueError):
        strings.flags.writeable = True
    # A user's read-only array over bytes is immutable already, but a bytearray's is not.
    assert frozen_copy(np.frombuffer(bytearray(4), np.int32)) is not None
    mutable = bytearray(4)
    over = np.frombuffer(memoryview(mutable).toreadonly(), np.int32)
    copied = frozen_copy(over)
    mutable[0] = 1
    assert copied.tolist() == [0]
