"""Races the runtime's locks guard, provoked on purpose: many threads adding nodes to one graph,
many threads compiling distinct plans into one session's bounded plan cache, and inter-op
parallel runs whose steps finish at the same moment. Each test fails when the lock it is
about is removed.

CPython switches threads only at some instructions (calls, loop back-edges), so a
read-modify-write spread over two lines of plain operations is rarely interrupted in
practice, though nothing guarantees it (and free-threaded builds interleave anywhere). The
`racy` fixture forces a thread switch between any two lines of the functions that hold these
locks (a line tracer that yields the GIL), so that every interleaving a lock rules out is
tried many times.
"""

import os
import sys
import threading
import time

import _exec_ops as xops
import numpy as np
import pytest
from _thread_helpers import run_threads

import minigraph
from minigraph import Identity, Placeholder, Scope, Session, SessionConfig

_RUNTIME = os.path.dirname(minigraph.__file__) + os.sep
#: The functions whose critical sections the tests are about: Graph._add, Session._compile
#: (the plan-cache insert) and the parallel interpreter's run_from.
_CRITICAL = {"_add", "_compile", "run_from"}


def _line_tracer(frame, event, arg):
    if event == "line":
        time.sleep(0)  # let another thread run here
    return _line_tracer


def _tracer(frame, event, arg):
    code = frame.f_code
    if code.co_name in _CRITICAL and code.co_filename.startswith(_RUNTIME):
        return _line_tracer
    return None


@pytest.fixture
def racy():
    """Threads switch between any two lines of the critical functions, for the whole test."""
    previous = sys.getswitchinterval()
    tracers = sys.gettrace(), threading.gettrace()  # a coverage tool's, say: put back after
    sys.setswitchinterval(1e-6)
    threading.settrace(_tracer)
    sys.settrace(_tracer)
    try:
        yield
    finally:
        sys.settrace(tracers[0])
        threading.settrace(tracers[1])
        sys.setswitchinterval(previous)


def test_many_threads_building_on_one_graph(racy):
    """Graph._add's lock: names are uniquified and nodes appended atomically."""
    scope = Scope.new_root_scope()
    x = Placeholder(scope.with_op_name("x"), minigraph.float32)
    per_thread = 50

    def build(i):
        named = scope.with_op_name("n")  # every thread asks for the same name
        return [Identity(named, x.output).operation for _ in range(per_thread)]

    built = run_threads(8, build)
    graph = scope.graph
    ops = graph.operations
    assert len(ops) == 1 + 8 * per_thread
    assert len({op.name for op in ops}) == len(ops)  # unique names
    assert all(op._index == i for i, op in enumerate(ops))  # positions agree with indices
    assert all(graph.get_operation(op.name) is op for op in ops)
    assert sorted(op.name for b in built for op in b) == sorted(op.name for op in ops[1:])


def test_many_threads_compiling_distinct_plans_at_once(scope_ops, racy, monkeypatch):
    """The plan cache's lock: concurrent inserts into the bounded cache (with evictions) lose
    nothing and never raise."""
    monkeypatch.setattr(Session, "_MAX_PLANS", 4)
    scope = Scope.new_root_scope()
    p = Placeholder(scope.with_op_name("p"), minigraph.int64, shape=[2])
    heads = [xops.AddOne(scope.with_op_name(f"h{i}"), p) for i in range(64)]
    value = np.array([1, 2], np.int64)
    with Session(scope, SessionConfig(intra_op_threads=1)) as sess:

        def compile_many(i):
            out = []
            for k in range(40):
                j = (i * 7 + k) % len(heads)
                out.append((j, sess.run([heads[j], heads[(j + 1) % 64]], {p: value})))
            return out

        for out in run_threads(8, compile_many):
            for _, (a, b) in out:
                assert a.tolist() == [2, 3] and b.tolist() == [2, 3]
        assert len(sess._plans) <= 4


@pytest.mark.parametrize("seed", range(2))
def test_inter_op_parallel_fan_in_races(scope_ops, racy, seed):
    """The parallel interpreter's lock: steps finishing together decrement shared counters;
    a lost update leaves a step never run (a hang) or runs it twice."""
    rng = np.random.default_rng(seed)
    scope = Scope.new_root_scope()
    p = Placeholder(scope.with_op_name("p"), minigraph.int64, shape=[4])
    value = np.arange(4, dtype=np.int64)
    nodes, refs = [p], [value]
    for i in range(60):
        if i < 16 or rng.random() < 0.3:
            j = int(rng.integers(len(nodes)))
            nodes.append(xops.AddOne(scope, nodes[j]))
            refs.append(refs[j] + 1)
        else:
            j, k = (int(v) for v in rng.integers(len(nodes), size=2))
            nodes.append(xops.Add(scope, nodes[j], nodes[k]))
            refs.append(refs[j] + refs[k])
    fetches = nodes[-20:]
    with Session(scope, SessionConfig(inter_op_threads=8, intra_op_threads=1)) as sess:

        def run_many(i):
            return [sess.run(fetches, {p: value}) for _ in range(4)]

        for runs in run_threads(4, run_many):
            for got in runs:
                for e, g in zip(refs[-20:], got):
                    np.testing.assert_array_equal(e, g)


@pytest.fixture
def scope_ops(exec_ops):
    return exec_ops
