"""The construction fast path for Python scalar literals (Scope._create_with_scalar_literals,
Graph.add_after_consts): the same nodes, names, dtypes and errors as the general path, and
the graph left exactly as before when the node fails."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import scope as scope_module
from minigraph.graph import Graph
from ops import AddV2, Cast, Const, GatherV2, Placeholder, Range, Reshape


@pytest.fixture
def fast_calls(monkeypatch):
    """How many nodes took the fast path (each call of Graph.add_after_consts)."""
    calls = []
    original = Graph.add_after_consts

    def spy(self, *args, **kwargs):
        calls.append(args[2].name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Graph, "add_after_consts", spy)
    return calls


def _idx(scope):
    """An index tensor (the literal inputs under test are the Python scalars)."""
    return Const(scope, np.array([0], np.int32))


def _describe(graph):
    """Every node as (name, type, input names and dtypes, attrs), in creation order."""
    rows = []
    for op in graph.operations:
        attrs = {}
        for key, value in sorted(op.attrs.items()):
            if isinstance(value, np.ndarray):
                value = (value.dtype.str, value.shape, value.tobytes())
            attrs[key] = value
        inputs = [(i.name, i.dtype) for i in op.inputs]
        rows.append((op.name, op.type, inputs, attrs, op.output_specs))
    return rows


# Each builds nodes with Python scalar literal inputs, over a float32 x [2, 3].
_CASES = {
    "literal axis": lambda s, x: GatherV2(s, x, _idx(s), 1),
    "literal after a tensor of its type attr": lambda s, x: AddV2(s, x, 2.5),
    "literal before a tensor of its type attr": lambda s, x: AddV2(s, 2.5, x),
    "int literal takes the tensor's float dtype": lambda s, x: AddV2(s, x, 3),
    "bool literal": lambda s, x: Cast(s, True, mg.float32),
    "explicit type attr": lambda s, x: GatherV2(s, x, _idx(s), 1, Taxis=mg.int64),
    "three literals sharing a type attr": lambda s, x: Range(s, 0, 7, 2),
    "literals of two type attrs": lambda s, x: Range(s, 1.5, 4, 1, Tidx=mg.float64),
    "fixed-dtype input": lambda s, x: Reshape(s, x, Cast(s, 6, mg.int32)),
    "name scope": lambda s, x: GatherV2(s.new_sub_scope("inner"), x, _idx(s), -1),
    "op name": lambda s, x: GatherV2(s.with_op_name("g"), x, _idx(s), 0),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_fast_path_builds_what_the_general_path_builds(case, fast_calls, monkeypatch):
    build = _CASES[case]
    graphs = []
    for memo in ({}, None):  # first an empty memo (general path), then the one it filled
        if memo is not None:
            monkeypatch.setattr(scope_module, "_literal_consts", memo)
        root = mg.Scope.new_root_scope()
        x = Placeholder(root, mg.float32, shape=[2, 3])
        build(root, x)
        graphs.append(root.graph)
    # The general path ran first (its literals were not memoised), then the fast path.
    assert fast_calls, "the second build did not take the fast path"
    assert _describe(graphs[0]) == _describe(graphs[1])


def test_a_literal_not_memoised_takes_the_general_path(fast_calls, monkeypatch):
    monkeypatch.setattr(scope_module, "_literal_consts", {})
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[2, 3])
    i = _idx(root)
    GatherV2(root, x, i, 1)
    assert fast_calls == []
    GatherV2(root, x, i, 1)
    assert fast_calls == ["GatherV2"]
    # -0.0 is never memoised (its sign matters): always the general path.
    AddV2(root, x, -0.0)
    AddV2(root, x, -0.0)
    assert fast_calls == ["GatherV2"]
    consts = [op for op in root.graph.operations if op.type == "Const" and op.attrs["dtype"]]
    assert np.signbit(consts[-1].attrs["value"])


def _names(graph):
    return [op.name for op in graph.operations]


def test_a_failing_node_leaves_the_graph_unchanged(fast_calls):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[2, 3])
    i = _idx(root)
    wide = Placeholder(root, mg.float32, shape=[1, 1, 1, 1, 1, 2])
    GatherV2(root, wide, i, 5)  # memoises the literal 5
    GatherV2(root, x, i, 1)
    before = _names(root.graph)
    calls = len(fast_calls)
    with pytest.raises(mg.InvalidArgumentError, match=r"Expected axis in the range \[-2, 2\)"):
        GatherV2(root, x, i, 5)
    assert len(fast_calls) == calls + 1  # the failure came from the fast path
    assert _names(root.graph) == before
    # The names the failed node took are free again: the next nodes get them.
    GatherV2(root, x, i, 1)
    reference = mg.Scope.new_root_scope()
    rx = Placeholder(reference, mg.float32, shape=[2, 3])
    ri = _idx(reference)
    rwide = Placeholder(reference, mg.float32, shape=[1, 1, 1, 1, 1, 2])
    GatherV2(reference, rwide, ri, 5)
    GatherV2(reference, rx, ri, 1)
    GatherV2(reference, rx, ri, 1)
    assert _names(root.graph) == _names(reference.graph)


def test_a_failing_first_node_of_a_name_scope_frees_its_names(fast_calls):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[2, 3])
    i = _idx(root)
    wide = Placeholder(root, mg.float32, shape=[1, 1, 1, 1, 1, 2])
    GatherV2(root, wide, i, 5)
    fresh = root.new_sub_scope("fresh")
    before = _names(root.graph)
    with pytest.raises(mg.InvalidArgumentError):
        GatherV2(fresh, x, 7, 5)  # scalar literals only: the fast path
    assert fast_calls[-1] == "GatherV2"
    assert _names(root.graph) == before
    GatherV2(fresh, x, 1, 0)
    assert _names(root.graph)[-3:] == ["fresh/Const", "fresh/Const_1", "fresh/GatherV2"]


def test_a_failure_inside_a_transaction_is_undone_by_its_journal(fast_calls):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[2, 3])
    i = _idx(root)
    wide = Placeholder(root, mg.float32, shape=[1, 1, 1, 1, 1, 2])
    GatherV2(root, wide, i, 5)
    before = _names(root.graph)
    graph = root.graph
    with pytest.raises(RuntimeError, match="outer"):
        with graph.transaction():
            GatherV2(root, x, i, 1)
            with pytest.raises(mg.InvalidArgumentError):
                GatherV2(root, x, i, 5)
            GatherV2(root, x, i, 1)
            raise RuntimeError("outer")
    assert _names(graph) == before
    GatherV2(root, x, i, 1)
    # The same names as a graph that never saw the transaction.
    reference = mg.Scope.new_root_scope()
    rx = Placeholder(reference, mg.float32, shape=[2, 3])
    ri = _idx(reference)
    rwide = Placeholder(reference, mg.float32, shape=[1, 1, 1, 1, 1, 2])
    GatherV2(reference, rwide, ri, 5)
    GatherV2(reference, rx, ri, 1)
    assert _names(graph) == _names(reference.graph)


def test_inside_a_transaction_the_fast_path_commits_with_it(fast_calls):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[2, 3])
    i = _idx(root)
    GatherV2(root, x, i, 1)
    calls = len(fast_calls)
    with root.graph.transaction():
        GatherV2(root, x, i, 1)
    assert len(fast_calls) == calls + 1
    assert _names(root.graph)[-2:] == ["Const_2", "GatherV2_1"]


def test_a_finalized_graph_refuses_the_literal_node_the_same_way():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[2, 3])
    i = _idx(root)
    GatherV2(root, x, i, 1)
    root.graph.finalize()
    before = _names(root.graph)
    with pytest.raises(mg.FailedPreconditionError, match="cannot add a node of type Const"):
        GatherV2(root, x, i, 1)
    with pytest.raises(mg.FailedPreconditionError, match="cannot add a node of type Const"):
        GatherV2(root, x, x, 1)  # one tensor less: still a Const first
    assert _names(root.graph) == before


def test_a_variable_with_a_literal_takes_the_general_path(fast_calls):
    root = mg.Scope.new_root_scope()
    v = mg.Variable(root, np.ones((2, 3), np.float32))
    x = Placeholder(root, mg.float32, shape=[2, 3])
    AddV2(root, x, 1.0)  # memoises the literal
    calls = len(fast_calls)
    y = AddV2(root, v, 1.0)
    assert len(fast_calls) == calls  # the Variable's read is built by the general path
    assert y.output.dtype == mg.float32
