"""Concurrency: Session.run from many threads, inter-op parallelism, and early release of
intermediate values."""

import random
import threading
import time
import tracemalloc

import _exec_ops as xops
import numpy as np
import pytest
from _thread_helpers import run_threads

import minigraph
from minigraph import (
    Const,
    InternalError,
    InvalidArgumentError,
    NoOp,
    Placeholder,
    RunOptions,
    Scope,
    Session,
    SessionConfig,
)


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


# -- Session.run from several threads ------------------------------------------------------------


@pytest.mark.parametrize("inter_op_threads", [1, 4])
def test_run_from_8_threads_at_once(scope, inter_op_threads):
    p = Placeholder(scope, minigraph.int64, shape=[100])
    a = xops.AddOne(scope, p)
    b = xops.Add(scope, a, p)
    c = xops.Add(scope, b, xops.AddOne(scope, b))
    config = SessionConfig(inter_op_threads=inter_op_threads)
    with Session(scope, config) as sess:

        def work(i):
            out = []
            for j in range(30):
                value = np.full(100, i * 1000 + j, np.int64)
                out.append((value, sess.run(c, {p: value})))
            return out

        results = run_threads(8, work)
        assert len(sess._plans) == 1  # compiled concurrently, kept once
    for out in results:
        for value, got in out:
            a_ = value + 1
            b_ = a_ + value
            np.testing.assert_array_equal(got, b_ + b_ + 1)


def test_threads_on_different_signatures(scope, sim_gpus):
    p = Placeholder(scope, minigraph.float32, shape=[3])
    ys = [xops.AddOne(scope.with_device(d), p) for d in ["/cpu:0", "/gpu:0", "/gpu:1", ""]]
    with Session(scope) as sess:

        def work(i):
            y = ys[i % 4]
            return [sess.run(y, {p: np.full(3, k, np.float32)}).tolist() for k in range(20)]

        results = run_threads(8, work)
        assert len(sess._plans) == 4
    for out in results:
        assert out == [[k + 1.0] * 3 for k in range(20)]


# -- inter-op parallelism ------------------------------------------------------------------------


def random_dag(scope, n, seed, value):
    """A random graph of Add/AddOne nodes over one placeholder, and each node's value in numpy
    when the placeholder is `value`."""
    rng = random.Random(seed)
    p = Placeholder(scope.with_op_name("p"), minigraph.int64, shape=[4])
    nodes, refs = [p], [value]
    for i in range(n):
        s = scope.with_op_name(f"n{i}")
        if rng.random() < 0.5:
            j = rng.randrange(len(nodes))
            nodes.append(xops.AddOne(s, nodes[j]))
            refs.append(refs[j] + 1)
        else:
            j, k = rng.randrange(len(nodes)), rng.randrange(len(nodes))
            nodes.append(xops.Add(s, nodes[j], nodes[k]))
            refs.append(refs[j] + refs[k])
    return p, nodes, refs


@pytest.mark.parametrize("seed", range(5))
def test_inter_op_parallel_results_equal_sequential(scope, seed):
    value = np.arange(4, dtype=np.int64)
    p, nodes, refs = random_dag(scope, 60, seed, value)
    fetches = nodes[-10:]
    with Session(scope) as sess:
        sequential = sess.run(fetches, {p: value})
    for e, g in zip(refs[-10:], sequential):
        np.testing.assert_array_equal(e, g)
    with Session(scope, SessionConfig(inter_op_threads=4)) as sess:
        for _ in range(5):
            parallel = sess.run(fetches, {p: value})
            for e, g in zip(sequential, parallel):
                np.testing.assert_array_equal(e, g)


def test_inter_op_parallel_diamond(scope):
    x = Const(scope, np.arange(5, dtype=np.int32))
    left = xops.AddOne(scope, x)
    right = xops.AddOne(scope, xops.AddOne(scope, x))
    bottom = xops.Add(scope, left, right)
    with Session(scope, SessionConfig(inter_op_threads=4)) as sess:
        assert sess.run(bottom).tolist() == (2 * np.arange(5) + 3).tolist()
        assert sess.run([left, bottom, right])[1].tolist() == (2 * np.arange(5) + 3).tolist()


def test_inter_op_parallel_runs_branches_at_the_same_time(scope, exec_ops):
    x = Const(scope, [1.0])
    a = xops.Barrier(scope.with_op_name("a"), x)
    b = xops.Barrier(scope.with_op_name("b"), x)
    total = xops.Add(scope, a, b)
    # Both branch kernels wait for each other: only concurrent execution gets past the barrier.
    exec_ops.BARRIER.append(threading.Barrier(2, timeout=10))
    with Session(scope, SessionConfig(inter_op_threads=4)) as sess:
        assert sess.run(total).tolist() == [2.0]
    # Sequentially, the first kernel waits alone and the barrier breaks.
    exec_ops.BARRIER[0] = threading.Barrier(2, timeout=0.2)
    with Session(scope) as sess:
        with pytest.raises(InternalError, match=r"BrokenBarrierError: \n\t \[\[node a \(ExecTest"):
            sess.run(total)


def test_inter_op_parallel_respects_control_dependencies(scope, events):
    x = Const(scope.with_op_name("x"), 1)
    slow = xops.Effect(scope.with_op_name("slow"), delay=0.05)
    fast = xops.Effect(scope.with_op_name("fast"))
    after = xops.Record(scope.with_op_name("after").with_control_dependencies([slow, fast]), x)
    last = xops.Record(scope.with_op_name("last").with_control_dependencies(after), x)
    side = xops.Record(scope.with_op_name("side"), x)
    group = NoOp(scope.with_op_name("group").with_control_dependencies([last, side]))
    with Session(scope, SessionConfig(inter_op_threads=4)) as sess:
        for _ in range(5):
            events.clear()
            assert sess.run([group, last])[1] == 1
            order = {name: i for i, name in enumerate(events)}
            assert set(order) == {"slow", "fast", "after", "last", "side"}
            assert order["slow"] < order["after"] and order["fast"] < order["after"]
            assert order["after"] < order["last"]


def test_inter_op_parallel_control_dependency_chain(scope, events):
    previous = None
    for i in range(8):
        s = scope.with_op_name(f"n{i}")
        if previous is not None:
            s = s.with_control_dependencies(previous)
        previous = xops.Effect(s, delay=0.01 if i % 3 == 0 else 0.0)
    with Session(scope, SessionConfig(inter_op_threads=4)) as sess:
        sess.run(previous)
    assert events == [f"n{i}" for i in range(8)]


def test_inter_op_parallel_errors_propagate_with_node_context(scope, events):
    p = Placeholder(scope.with_op_name("p"), minigraph.float32)
    branches = [xops.Record(scope.with_op_name(f"ok{i}"), p) for i in range(4)]
    bad = xops.Fail(scope.with_op_name("bad"), p, kind="value")
    total = xops.Add(scope, branches[0], bad)
    with Session(scope, SessionConfig(inter_op_threads=4)) as sess:
        with pytest.raises(
            InvalidArgumentError,
            match=r"ValueError: bad value from the kernel\n\t \[\[node bad \(ExecTestFail\)",
        ) as info:
            sess.run([total, *branches], {p: 1.0})
        assert isinstance(info.value.__cause__, ValueError)
        assert info.value.node_name == "bad"
        # The session is still usable, and nothing depending on the failure ran.
        assert sess.run(branches, {p: 2.0})[3] == 2.0
        assert sess.run(xops.AddOne(scope, branches[1]), {p: 2.0}) == 3.0


def test_inter_op_parallel_with_empty_and_fed_only_plans(scope):
    p = Placeholder(scope, minigraph.float32)
    with Session(scope, SessionConfig(inter_op_threads=2)) as sess:
        assert sess.run([]) == []
        assert sess.run(p, {p: 3.0}) == 3.0


# -- early release -------------------------------------------------------------------------------

#: How a plan may be executed: (session config, run options).
EXECUTIONS = {
    "generated": (SessionConfig(), None),
    "traced": (SessionConfig(), RunOptions(trace=True)),
    "parallel": (SessionConfig(inter_op_threads=4), None),
    "checked": (SessionConfig(check_kernel_outputs=True), None),
}


@pytest.mark.parametrize("execution", list(EXECUTIONS))
def test_intermediates_are_released_after_their_last_use(scope, exec_ops, execution):
    config, options = EXECUTIONS[execution]
    node = Const(scope, np.zeros(1000, np.float64))
    chain = []
    for _ in range(20):
        node = xops.Tracked(scope, node)
        chain.append(node)
    with Session(scope, config) as sess:
        out = sess.run(node, options=options)
        assert out[0] == 20.0
        assert exec_ops.LIVE.made == 20
        # At most the input and the output of the running kernel are alive at once.
        assert exec_ops.LIVE.peak <= 2
        # Once the caller drops the result nothing of the run is left (a pool thread may drop
        # its last reference just after run returns: allow it a moment, not a GC cycle).
        del out
        deadline = time.monotonic() + 2
        while exec_ops.LIVE.live and time.monotonic() < deadline:
            time.sleep(0.001)
        assert exec_ops.LIVE.live == 0
        exec_ops.LIVE.reset()
        # The counter does see values that are kept: fetch all of them.
        outs = sess.run(chain, options=options)
        assert exec_ops.LIVE.peak == 20
        assert [o[0] for o in outs] == [float(i) for i in range(1, 21)]


def test_a_value_used_twice_lives_until_its_last_use(scope, exec_ops):
    x = Const(scope, np.zeros(10, np.float64))
    first = xops.Tracked(scope, x)
    node = first
    for _ in range(5):
        node = xops.Tracked(scope, node)
    late = xops.Add(scope, node, first)  # `first` is read again at the end
    with Session(scope) as sess:
        assert sess.run(late)[0] == 7.0
    assert exec_ops.LIVE.peak == 3  # first, plus the running kernel's input and output


@pytest.mark.parametrize("execution", ["generated", "parallel"])
def test_peak_memory_of_a_long_chain_stays_small(scope, execution):
    config, options = EXECUTIONS[execution]
    mib8 = 8 * 2**20
    node = Const(scope, np.zeros(1, np.float64))
    for _ in range(20):
        node = xops.Big(scope, node, n=mib8 // 8)
    with Session(scope, config) as sess:
        sess.run(node)  # compile outside the measurement
        tracemalloc.start()
        try:
            start, _ = tracemalloc.get_traced_memory()
            out = sess.run(node, options=options)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert out[0] == 20.0 and out.nbytes == mib8
    # Without release the chain would hold 20 x 8 MiB; input + output of one kernel is 2.
    assert peak - start < 4 * mib8
