"""Session: lifecycle, fetches and their structures, control dependencies, plan caching."""

import collections

import _exec_ops as xops
import numpy as np
import pytest

import minigraph
import minigraph.plan
from minigraph import (
    Const,
    FailedPreconditionError,
    Identity,
    InvalidArgumentError,
    NoOp,
    NotFoundError,
    Placeholder,
    Scope,
    Session,
    SessionConfig,
)


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


# -- lifecycle -----------------------------------------------------------------------------------


def test_context_manager_closes_the_session(scope):
    x = Const(scope, [1, 2])
    with Session(scope) as sess:
        assert sess.run(x).tolist() == [1, 2]
    with pytest.raises(FailedPreconditionError, match="Attempted to use a closed Session"):
        sess.run(x)


def test_close_then_run_raises_and_close_is_idempotent(scope):
    x = Const(scope, 1.0)
    sess = Session(scope, SessionConfig(inter_op_threads=2, intra_op_threads=2))
    assert sess.run(x) == 1.0
    sess.close()
    sess.close()
    assert sess._plans == {}
    with pytest.raises(FailedPreconditionError, match="closed Session"):
        sess.run(x)


def test_session_accepts_scope_graph_or_nothing(scope):
    x = Const(scope.with_op_name("x"), 3)
    assert Session(scope.graph).run(x) == 3
    sess = Session()
    assert sess.graph is None
    assert sess.run(x) == 3  # takes the graph of the first fetch
    assert sess.graph is scope.graph
    assert sess.run("x:0") == 3


def test_session_rejects_other_arguments():
    with pytest.raises(InvalidArgumentError, match="Session takes a Scope or a Graph; got str"):
        Session("graph")
    with pytest.raises(InvalidArgumentError, match="must be >= 1"):
        Session(config=SessionConfig(inter_op_threads=0))
    with pytest.raises(InvalidArgumentError, match="must be >= 1"):
        Session(config=SessionConfig(intra_op_threads=0))


def test_names_need_a_graph():
    with pytest.raises(InvalidArgumentError, match="this Session has no graph yet"):
        Session().run("x:0")


def test_fetch_from_another_graph_is_rejected(scope):
    other = Scope.new_root_scope()
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match="belongs to another graph"):
            sess.run(Const(other.with_op_name("y"), 1))


# -- fetches -------------------------------------------------------------------------------------


def test_fetch_kinds(scope, events):
    x = Const(scope.with_op_name("x"), [1.0, 2.0])
    g = xops.Record(scope.with_op_name("g"), x)
    with Session(scope) as sess:
        assert sess.run(g.output).tolist() == [1.0, 2.0]  # Output
        assert sess.run(g).tolist() == [1.0, 2.0]  # builder
        assert sess.run("g:0").tolist() == [1.0, 2.0]  # tensor name
        assert events == ["g", "g", "g"]
        assert sess.run(g.operation) is None  # Operation: run for effect
        assert events == ["g"] * 4
        assert sess.run("g") is None  # operation name, TF semantics
        assert events == ["g"] * 5


def test_fetched_values_are_numpy_arrays(scope):
    x = Const(scope, 2.5)
    y = Const(scope, [[1, 2]], dtype=minigraph.int64)
    with Session(scope) as sess:
        a, b = sess.run([x, y])
    assert type(a) is np.ndarray and a.shape == () and a.dtype == np.float32
    assert type(b) is np.ndarray and b.shape == (1, 2) and b.dtype == np.int64


def test_fetch_unknown_names(scope):
    Const(scope.with_op_name("x"), 1)
    with Session(scope) as sess:
        with pytest.raises(NotFoundError, match="The graph has no node named 'y'"):
            sess.run("y")
        with pytest.raises(NotFoundError, match="has 1 outputs; 'x:3' does not exist"):
            sess.run("x:3")


def test_fetch_invalid_objects(scope):
    x = Const(scope, 1)
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match="cannot fetch int 3"):
            sess.run([x, 3])
        with pytest.raises(InvalidArgumentError, match="cannot fetch set"):
            sess.run({x})


Pair = collections.namedtuple("Pair", ["first", "second"])


def test_nested_fetch_structures_are_rebuilt(scope, events):
    a = Const(scope.with_op_name("a"), 1)
    b = Const(scope.with_op_name("b"), 2.0)
    effect = xops.Effect(scope.with_op_name("effect"))
    fetches = {
        "list": [a, b, "a:0"],
        "tuple": (b,),
        "pair": Pair(a, [b, {"deep": a}]),
        "op": effect.operation,
        "nested": [[[]], ()],
    }
    with Session(scope) as sess:
        out = sess.run(fetches)
    assert list(out) == ["list", "tuple", "pair", "op", "nested"]
    assert type(out["list"]) is list and [v.item() for v in out["list"]] == [1, 2.0, 1]
    assert type(out["tuple"]) is tuple and out["tuple"][0] == 2.0
    assert type(out["pair"]) is Pair
    assert out["pair"].first == 1 and out["pair"].second[0] == 2.0
    assert out["pair"].second[1]["deep"] == 1
    assert out["op"] is None and events == ["effect"]
    assert out["nested"] == [[[]], ()]


def test_dict_subclasses_are_kept(scope):
    a = Const(scope, 1)
    with Session(scope) as sess:
        out = sess.run(collections.OrderedDict([("z", a), ("a", a)]))
        assert type(out) is collections.OrderedDict and list(out) == ["z", "a"]
        assert out["z"] == out["a"] == 1


def test_multi_output_ops(scope):
    two = xops.TwoOut(scope.with_op_name("two"), [1, 2])
    with Session(scope) as sess:
        a, b = sess.run(two.outputs)
        assert a.tolist() == [1, 2] and b.tolist() == [2, 3]
        assert sess.run(two.b).tolist() == [2, 3]
        assert sess.run("two:1").tolist() == [2, 3]
        assert sess.run(two.operation) is None  # an Operation is run for its effect


def test_duplicate_fetches(scope):
    a = Const(scope.with_op_name("a"), [1.0])
    b = Const(scope.with_op_name("b"), [2.0])
    with Session(scope) as sess:
        values = sess.run([a, a, b, "a:0", b])
        assert [v.tolist() for v in values] == [[1.0], [1.0], [2.0], [1.0], [2.0]]
        values = sess.run([b, a.operation, b, a])
        assert values[1] is None
        assert [values[0].tolist(), values[2].tolist(), values[3].tolist()] == [[2.0], [2.0], [1.0]]


def test_empty_fetches(scope, events):
    xops.Effect(scope)
    with Session(scope) as sess:
        assert sess.run([]) == []
        assert sess.run({}) == {}
    assert events == []


# -- control dependencies ------------------------------------------------------------------------


def test_control_dependencies_run_before_dependents(scope, events):
    first = xops.Effect(scope.with_op_name("first"), delay=0.02)
    second = xops.Effect(scope.with_op_name("second"))
    x = Const(scope.with_op_name("x"), 1)
    after = xops.Record(scope.with_op_name("after").with_control_dependencies([first, second]), x)
    with Session(scope) as sess:
        assert sess.run(after) == 1
    assert set(events[:2]) == {"first", "second"} and events[2] == "after"


def test_control_dependencies_are_pruned_in(scope, events):
    dep = xops.Effect(scope.with_op_name("dep"))
    xops.Effect(scope.with_op_name("unrelated"))
    y = Identity(scope.with_op_name("y").with_control_dependencies(dep), Const(scope, 1))
    with Session(scope) as sess:
        sess.run(y)
    assert events == ["dep"]


def test_noop_groups_control_dependencies(scope, events):
    effects = [xops.Effect(scope.with_op_name(f"e{i}")) for i in range(3)]
    group = NoOp(scope.with_op_name("group").with_control_dependencies(effects))
    with Session(scope) as sess:
        assert sess.run(group) is None
        assert sorted(events) == ["e0", "e1", "e2"]
        assert sess.run("group") is None
        assert len(events) == 6


def test_control_dependency_chain_order(scope, events):
    previous = None
    for i in range(6):
        s = scope.with_op_name(f"n{i}")
        if previous is not None:
            s = s.with_control_dependencies(previous)
        previous = xops.Effect(s, delay=0.005 if i % 2 else 0.0)
    with Session(scope) as sess:
        sess.run(previous)
    assert events == [f"n{i}" for i in range(6)]


# -- plan caching --------------------------------------------------------------------------------


def _count_place_calls(monkeypatch):
    calls = []
    real = minigraph.plan.place

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(minigraph.plan, "place", counting)
    return calls


def test_plans_are_compiled_once_per_signature(scope, monkeypatch):
    calls = _count_place_calls(monkeypatch)
    x = Placeholder(scope.with_op_name("x"), minigraph.float32)
    a = xops.AddOne(scope.with_op_name("a"), x)
    b = xops.AddOne(scope.with_op_name("b"), a)
    with Session(scope) as sess:
        for i in range(3):
            assert sess.run(b, {x: np.float32(i)}) == i + 2
        assert len(sess._plans) == 1 and len(calls) == 1
        # The order of fetches and feeds does not matter, nor the structure around them.
        sess.run([a, b], {x: 1.0})
        sess.run([b, a], {"x:0": 1.0})
        sess.run({"b": b, "a": (a,)}, {x: 2.0})
        assert len(sess._plans) == 2 and len(calls) == 2
        # Another feed set is another signature.
        sess.run(b, {a: np.float32(1.0)})
        assert len(sess._plans) == 3 and len(calls) == 3
        sess.run(b, {a: np.float32(5.0)})
        assert len(calls) == 3
    assert [op.name for op in calls[2]] == ["b"]  # only the pruned graph is placed


def test_feed_order_does_not_change_the_plan(scope, monkeypatch):
    calls = _count_place_calls(monkeypatch)
    x = Placeholder(scope.with_op_name("x"), minigraph.int32)
    y = Placeholder(scope.with_op_name("y"), minigraph.int32)
    z = xops.Add(scope, x, y)
    with Session(scope) as sess:
        assert sess.run(z, {x: 1, y: 10}) == 11
        assert sess.run(z, {y: 20, x: 2}) == 22
        assert sess.run(z, {"y": 30, "x:0": 3}) == 33
    assert len(calls) == 1


def test_plan_cache_is_bounded(scope, monkeypatch):
    monkeypatch.setattr(Session, "_MAX_PLANS", 2)
    consts = [Const(scope, i) for i in range(4)]
    with Session(scope) as sess:
        for c in consts:
            sess.run(c)
        assert len(sess._plans) == 2
        assert [sess.run(c) for c in consts] == [0, 1, 2, 3]


def test_later_runs_do_no_placement(scope, monkeypatch):
    x = Const(scope, [1.0])
    y = xops.AddOne(scope, x)
    with Session(scope) as sess:
        sess.run(y)

        def fail(*args, **kwargs):
            raise AssertionError("placed again")

        monkeypatch.setattr(minigraph.plan, "place", fail)
        assert sess.run(y).tolist() == [2.0]
        with pytest.raises(AssertionError, match="placed again"):
            sess.run([x, y])  # a new signature does place


def test_kernel_cache_lives_with_the_plan(scope, exec_ops):
    cached = xops.Cached(scope.with_op_name("c"), Const(scope, [1, 2]))
    with Session(scope) as sess:
        assert sess.run(cached).tolist() == [4, 5]
        assert sess.run(cached).tolist() == [4, 5]
        assert exec_ops.EVENTS == ["c"]  # computed once
    with Session(scope) as sess:
        assert sess.run(cached).tolist() == [4, 5]
    assert exec_ops.EVENTS == ["c", "c"]  # a new plan, a new cache
