"""Session lifecycle under stress: closing while runs are in flight (every execution mode, from
another thread or from inside a kernel), thread pools shut down by close, and interrupts
(BaseExceptions that are not Exceptions) propagating unchanged from any thread."""

import _thread
import gc
import threading
import time

import _exec_ops as xops
import numpy as np
import pytest

import minigraph
from minigraph import (
    FailedPreconditionError,
    Placeholder,
    RunOptions,
    Scope,
    Session,
    SessionConfig,
)

#: How a plan may be executed: (session config, run options).
MODES = {
    "generated": (SessionConfig(intra_op_threads=1), None),
    "traced": (SessionConfig(intra_op_threads=1), RunOptions(trace=True)),
    "parallel": (SessionConfig(inter_op_threads=4, intra_op_threads=1), None),
    "checked": (SessionConfig(check_kernel_outputs=True, intra_op_threads=1), None),
    "intra": (SessionConfig(intra_op_threads=4), None),
}

#: A hang fails the test after this many seconds instead of blocking the suite.
HANG = 20


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


def pool_threads():
    return {t for t in threading.enumerate() if t.name.startswith("minigraph-")}


def fan_out(scope, width=6, depth=3, delay=0.001):
    """`depth` stages, each fanning out to `width` sleeping Record nodes and summing them
    (so that a parallel run hands work to its pool all along). Value: p * width**depth."""
    p = Placeholder(scope.with_op_name("p"), minigraph.float64, shape=[2])
    node = p
    for d in range(depth):
        branches = [
            xops.Record(scope.with_op_name(f"s{d}_b{b}"), node, delay=delay) for b in range(width)
        ]
        node = branches[0]
        for b in branches[1:]:
            node = xops.Add(scope, node, b)
    return p, node


def in_thread(fn):
    """Starts fn() on a daemon thread; returns (thread, outcome list: value or exception)."""
    outcome = []

    def body():
        try:
            outcome.append(fn())
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            outcome.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, outcome


# -- closing while runs are in flight --------------------------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
def test_close_during_runs_completes_or_fails_promptly(scope, mode):
    """The review's hang: close while another thread runs the session. Each run in flight
    either completes with the right value or raises FailedPreconditionError; nothing hangs,
    nothing else is raised, and no pool thread is left."""
    config, options = MODES[mode]
    p, total = fan_out(scope)
    value = np.array([1.0, 2.0])
    before = pool_threads()
    outcomes = []
    for trial in range(12):
        sess = Session(scope, config)
        sess.run(total, {p: value}, options=options)  # compiled before the race

        def keep_running(sess=sess):
            results = []
            while True:
                try:
                    results.append(sess.run(total, {p: value}, options=options))
                except FailedPreconditionError as e:
                    results.append(e)
                    return results

        runner, outcome = in_thread(keep_running)
        time.sleep(0.001 * (trial % 4))
        closer, _ = in_thread(sess.close)
        closer.join(HANG)
        runner.join(HANG)
        assert not closer.is_alive() and not runner.is_alive(), "close or run hangs"
        (results,) = outcome
        assert not isinstance(results, BaseException), repr(results)
        assert isinstance(results[-1], FailedPreconditionError)
        for r in results[:-1]:
            np.testing.assert_array_equal(r, 6**3 * value)
        outcomes.append(len(results))
    assert pool_threads() <= before  # every session's pools were shut down by close


def test_close_waits_for_a_run_in_flight(scope, exec_ops):
    """A generated-code run cannot be interrupted between steps: close waits for it."""
    entered, release, order = threading.Event(), threading.Event(), []

    def blocking(ctx, x):
        entered.set()
        release.wait(HANG)
        order.append("kernel returned")

    p = Placeholder(scope, minigraph.int32)
    y = xops.AddOne(scope, xops.Call(scope, p))
    sess = Session(scope, SessionConfig(intra_op_threads=2))
    sess.run(y, {p: 1})
    exec_ops.CALLS.append(blocking)
    runner, outcome = in_thread(lambda: sess.run(y, {p: 1}))
    assert entered.wait(HANG)
    closer, _ = in_thread(lambda: (sess.close(), order.append("close returned")))
    time.sleep(0.05)
    assert order == [] and closer.is_alive()  # close is waiting for the run
    release.set()
    closer.join(HANG)
    runner.join(HANG)
    assert order == ["kernel returned", "close returned"]
    assert outcome == [2]


@pytest.mark.parametrize("mode", ["traced", "parallel"])
def test_close_stops_an_interpreted_run_at_its_next_step(scope, mode, events):
    config, options = MODES[mode]
    node = Placeholder(scope, minigraph.int32)
    p = node
    for i in range(20):
        node = xops.Record(scope.with_op_name(f"n{i}"), node, delay=0.02)
    sess = Session(scope, config)
    runner, outcome = in_thread(lambda: sess.run(node, {p: 1}, options=options))
    deadline = time.monotonic() + HANG
    while not events and time.monotonic() < deadline:
        time.sleep(0.001)
    sess.close()
    runner.join(HANG)
    assert not runner.is_alive()
    (error,) = outcome
    assert type(error) is FailedPreconditionError
    assert "closed while this run was in progress" in str(error)
    assert len(events) < 20  # it stopped, rather than running to the end


def test_close_while_kernels_use_the_intra_op_pool(scope, exec_ops):
    """Kernels splitting work over the intra-op pool while the session closes still finish
    with the right result: the pool is shut down only after the run."""
    started = threading.Event()

    def split(ctx, x):
        out = np.zeros(8, np.int64)

        def chunk(i):
            time.sleep(0.002)
            out[i] = i

        for _ in range(10):
            started.set()
            ctx.parallel_for(chunk, 8)
        return x + out.sum()

    exec_ops.CALLS.append(split)
    p = Placeholder(scope, minigraph.int64)
    y = xops.Call(scope, p)
    sess = Session(scope, SessionConfig(intra_op_threads=4))
    before = pool_threads()
    runner, outcome = in_thread(lambda: sess.run(y, {p: 1}))
    assert started.wait(HANG)
    sess.close()
    runner.join(HANG)
    assert outcome == [1 + sum(range(8))]
    assert not (pool_threads() - before)


@pytest.mark.parametrize("mode", ["generated", "parallel", "intra"])
def test_close_from_inside_a_kernel(scope, exec_ops, mode):
    """A kernel may close its own session: no deadlock; the pools go down after the run."""
    config, options = MODES[mode]
    holder = []
    exec_ops.CALLS.append(lambda ctx, x: holder[0].close())
    p, total = fan_out(scope, width=3, depth=1, delay=0.0)
    closer = xops.Call(scope, p)
    before = pool_threads()
    sess = Session(scope, config)
    holder.append(sess)
    runner, outcome = in_thread(lambda: sess.run([total, closer], {p: [1.0, 1.0]}))
    runner.join(HANG)
    assert not runner.is_alive(), "closing from a kernel deadlocks"
    (result,) = outcome
    assert isinstance(result, (list, FailedPreconditionError)), repr(result)
    with pytest.raises(FailedPreconditionError, match="closed Session"):
        sess.run(total, {p: [1.0, 1.0]})
    deadline = time.monotonic() + HANG
    while pool_threads() - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not (pool_threads() - before)


def test_close_shuts_the_pools_down_and_joins_their_threads(scope, exec_ops):
    exec_ops.CALLS.append(lambda ctx, x: ctx.parallel_for(lambda i: time.sleep(0.001), 4))
    p, total = fan_out(scope, delay=0.0)
    y = xops.Call(scope, total)
    before = pool_threads()
    sess = Session(scope, SessionConfig(inter_op_threads=4, intra_op_threads=4))
    sess.run(y, {p: [1.0, 2.0]})
    assert pool_threads() - before  # both pools have threads now
    sess.close()
    # Immediately: close joined them (a shutdown without waiting fails this).
    assert not (pool_threads() - before)


def test_a_session_dropped_without_close_lets_its_threads_go(scope):
    p, total = fan_out(scope, delay=0.0)
    before = pool_threads()
    sess = Session(scope, SessionConfig(inter_op_threads=4))
    sess.run(total, {p: [1.0, 2.0]})
    assert pool_threads() - before
    del sess
    gc.collect()
    deadline = time.monotonic() + HANG
    while pool_threads() - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not (pool_threads() - before)


def test_close_is_idempotent_and_safe_from_several_threads(scope):
    p, total = fan_out(scope, delay=0.0)
    sess = Session(scope, SessionConfig(inter_op_threads=3, intra_op_threads=3))
    sess.run(total, {p: [1.0, 2.0]})
    closers = [in_thread(sess.close)[0] for _ in range(6)]
    for c in closers:
        c.join(HANG)
        assert not c.is_alive()
    sess.close()
    with pytest.raises(FailedPreconditionError):
        sess.run(total, {p: [1.0, 2.0]})


# -- interrupts ------------------------------------------------------------------------------------

INTERRUPTS = {
    "keyboard": (KeyboardInterrupt, "interrupted inside the kernel"),
    "systemexit": (SystemExit, "exit inside the kernel"),
    "generatorexit": (GeneratorExit, "generator exit inside the kernel"),
}


@pytest.mark.parametrize("kind", list(INTERRUPTS))
@pytest.mark.parametrize("mode", list(MODES))
def test_interrupts_propagate_unchanged_in_every_mode(scope, events, mode, kind):
    config, options = MODES[mode]
    error, text = INTERRUPTS[kind]
    p = Placeholder(scope.with_op_name("p"), minigraph.float32)
    # In parallel mode the calling thread takes the slow branch, so the failing kernel runs
    # on a pool thread.
    slow = xops.Record(scope.with_op_name("slow"), p, delay=0.05)
    bad = xops.Fail(scope.with_op_name("bad"), p, kind=kind)
    total = xops.Add(scope, slow, bad)
    good = xops.AddOne(scope, p)
    with Session(scope, config) as sess:
        for _ in range(2):
            with pytest.raises(error) as info:
                sess.run(total, {p: 1.0}, options=options)
            assert type(info.value) is error and info.value.args == (text,)
            assert sess.run(good, {p: 1.0}, options=options) == 2.0  # still usable


@pytest.mark.parametrize("mode", ["generated", "parallel"])
def test_an_asynchronous_keyboard_interrupt_during_a_run(scope, exec_ops, mode):
    """Ctrl-C (delivered to the main thread) while the run waits for pool threads or runs a
    kernel: KeyboardInterrupt comes out, and the session keeps working."""
    assert threading.current_thread() is threading.main_thread()
    config, options = MODES[mode]

    def interrupt(ctx, x):
        _thread.interrupt_main()
        time.sleep(0.3)  # in parallel mode, the main thread is waiting for this one

    p = Placeholder(scope, minigraph.float64, shape=[2])
    quick = xops.AddOne(scope, p)
    called = xops.Call(scope, xops.AddOne(scope, p))
    total = xops.Add(scope, quick, called)
    with Session(scope, config) as sess:
        exec_ops.CALLS.append(interrupt)
        with pytest.raises(KeyboardInterrupt):
            sess.run(total, {p: [1.0, 2.0]}, options=options)
        exec_ops.CALLS[0] = lambda ctx, x: None
        for _ in range(3):
            assert sess.run(total, {p: [1.0, 2.0]}).tolist() == [4.0, 6.0]


def test_work_that_a_shut_down_pool_refuses_runs_on_the_calling_thread(scope, exec_ops):
    """At interpreter exit pools refuse new work; runs and kernels then finish inline (each
    layer is tested alone here: close also waits for runs before shutting pools down)."""
    exec_ops.CALLS.append(
        lambda ctx, x: ctx.parallel_for(lambda i: exec_ops.EVENTS.append(f"chunk{i}"), 4)
    )
    p, total = fan_out(scope, width=4, depth=2, delay=0.0)
    y = xops.Call(scope.with_op_name("y"), total)
    sess = Session(scope, SessionConfig(inter_op_threads=4, intra_op_threads=4))
    sess._inter_pool.shutdown()
    sess._intra_pool.shutdown()
    assert sess.run(y, {p: [1.0, 2.0]}).tolist() == [16.0, 32.0]
    assert sorted(e for e in exec_ops.EVENTS if e.startswith("chunk")) == [
        "chunk0",
        "chunk1",
        "chunk2",
        "chunk3",
    ]
    sess.close()


@pytest.mark.parametrize("kind", list(INTERRUPTS))
def test_interrupts_in_intra_op_chunks_propagate_unchanged(scope, exec_ops, kind):
    error, text = INTERRUPTS[kind]

    def split(ctx, x):
        def chunk(i):
            if i == 2:
                raise error(text)

        ctx.parallel_for(chunk, 4)

    exec_ops.CALLS.append(split)
    p = Placeholder(scope, minigraph.int32)
    y = xops.Call(scope, p)
    with Session(scope, SessionConfig(intra_op_threads=4)) as sess:
        with pytest.raises(error) as info:
            sess.run(y, {p: 1})
        assert type(info.value) is error and info.value.args == (text,)
        exec_ops.CALLS.clear()
        assert sess.run(y, {p: 1}) == 1
