"""The session's cache of the last flat fetch list (minigraph/session.py `_last_fetches`): a
run fetching the same objects skips resolving them; anything else resolves afresh."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from ops import GatherV2, Placeholder

pytestmark = pytest.mark.usefixtures("cpu_only")


@pytest.fixture
def graph():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root.with_op_name("x"), mg.int32, shape=[3])
    a = GatherV2(root.with_op_name("a"), x, [0], 0)
    b = GatherV2(root.with_op_name("b"), x, [1], 0)
    c = GatherV2(root.with_op_name("c"), x, [2], 0)
    return root, x, a, b, c


def _values(result):
    return [None if v is None else v.tolist() for v in result]


def test_a_list_changed_in_place_is_resolved_again(graph):
    root, x, a, b, c = graph
    feed = {x: np.array([10, 20, 30], np.int32)}
    fetches = [a, b]
    with mg.Session(root) as sess:
        assert _values(sess.run(fetches, feed)) == [[10], [20]]
        assert _values(sess.run(fetches, feed)) == [[10], [20]]  # from the cache
        fetches[0] = c
        assert _values(sess.run(fetches, feed)) == [[30], [20]]
        fetches.append(a)
        assert _values(sess.run(fetches, feed)) == [[30], [20], [10]]
        assert _values(sess.run(tuple(fetches), feed)) == [[30], [20], [10]]
        assert type(sess.run(tuple(fetches), feed)) is tuple


def test_nested_lists_are_never_cached(graph):
    root, x, a, b, c = graph
    feed = {x: np.array([10, 20, 30], np.int32)}
    inner = [a]
    fetches = [inner, b]
    with mg.Session(root) as sess:
        first = sess.run(fetches, feed)
        assert [_values(first[0]), first[1].tolist()] == [[[10]], [20]]
        inner.append(c)  # the outer list holds the same objects, the inner one changed
        second = sess.run(fetches, feed)
        assert [_values(second[0]), second[1].tolist()] == [[[10], [30]], [20]]


def test_orders_duplicates_names_and_operations(graph):
    root, x, a, b, c = graph
    feed = {x: np.array([10, 20, 30], np.int32)}
    with mg.Session(root) as sess:
        for _ in range(3):
            assert _values(sess.run([b, a], feed)) == [[20], [10]]
            assert _values(sess.run([a, b], feed)) == [[10], [20]]  # same plan, other order
            assert _values(sess.run([a, a, "b:0", c.operation], feed)) == [[10], [10], [20], None]


def test_bad_items_are_refused_even_after_a_cached_run(graph):
    root, x, a, b, c = graph
    feed = {x: np.array([10, 20, 30], np.int32)}
    with mg.Session(root) as sess:
        sess.run([a, b], feed)
        with pytest.raises(mg.InvalidArgumentError, match="cannot fetch"):
            sess.run([np.array([1, 2]), b], feed)  # compared by identity: no array __eq__ runs
        assert _values(sess.run([a, b], feed)) == [[10], [20]]
