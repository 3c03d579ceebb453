"""Sessions in forked children (issue 24, section 3: "Fork").

A forked child has only the thread that forked. Before the fix, a session that had used its
thread pool handed a child's work to the parent's vanished threads (the child's next large run
never returned: `multiprocessing.Pool` forks on Linux), and a lock another thread held at the
fork (the codegen lock, a buffer pool's, a session's) was held for good in the child. Every
test forks for real; the parent never waits on a child without a timeout, and kills it then.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback

import numpy as np
import pytest

import minigraph as mg
from minigraph import plan as plan_module
from minigraph.op_def import OpDef
from ops import gather

pytestmark = [
    pytest.mark.usefixtures("cpu_only"),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)"),
    # Python 3.12 warns that forking a process with threads may deadlock: that is the point.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

CHILD_TIMEOUT_S = 30.0


def run_in_child(fn, timeout: float = CHILD_TIMEOUT_S) -> int:
    """Forks; the child runs fn() and exits with its return value (70 when it raises); the
    parent returns that exit code, or fails the test (killing the child) after `timeout`."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 70
        try:
            status = int(fn())
        except BaseException:  # noqa: BLE001 - reported through the exit status
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not finish within {timeout:g} s: it hangs")


def large_gather(config: mg.SessionConfig | None = None):
    """(session, fetch, feed, expected): a gather with an 8 MiB output, which splits its work
    over the session's intra-op pool."""
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, shape=[None, 256])
    indices = np.arange(8192) % 100
    g = gather(scope.with_op_name("g"), x, indices)
    table = np.arange(100 * 256, dtype=np.float32).reshape(100, 256)
    session = mg.Session(scope, config or mg.SessionConfig(intra_op_threads=4))
    return session, g, {x: table}, table[indices]


# -- the thread pools ------------------------------------------------------------------------------


def test_a_child_runs_a_large_graph_after_the_parent_used_its_pool():
    session, g, feed, expected = large_gather()
    with session:
        for _ in range(2):  # interpreted, then generated code: both split the gather
            np.testing.assert_array_equal(session.run(g, feed), expected)

        def child() -> int:
            for _ in range(3):
                if not np.array_equal(session.run(g, feed), expected):
                    return 1
            return 0

        assert run_in_child(child) == 0
        np.testing.assert_array_equal(session.run(g, feed), expected)  # the parent's pool


def test_the_default_config_too():
    # The default config has one intra-op thread per CPU: a pool on any machine with two.
    session, g, feed, expected = large_gather(mg.SessionConfig(intra_op_threads=2))
    with session:
        session.run(g, feed)
        assert run_in_child(lambda: int(not np.array_equal(session.run(g, feed), expected))) == 0


def test_an_inter_op_pool_is_remade_in_the_child():
    session, g, feed, expected = large_gather(
        mg.SessionConfig(inter_op_threads=3, intra_op_threads=3)
    )
    scope_outputs = [g, g]
    with session:
        session.run(scope_outputs, feed)

        def child() -> int:
            a, b = session.run(scope_outputs, feed)
            return int(not (np.array_equal(a, expected) and np.array_equal(b, expected)))

        assert run_in_child(child) == 0


def test_a_pool_shut_down_before_the_fork_stays_shut_down_in_the_child():
    session, g, feed, expected = large_gather()
    session.run(g, feed)
    pool = session._intra_pool
    session.close()

    def child() -> int:
        try:
            pool.submit(print, "ran")
        except RuntimeError:
            return 0
        return 1

    assert run_in_child(child) == 0


_POOL_SESSION: list = []


def _pool_task(i: int) -> float:
    session, g, feed, _ = _POOL_SESSION[0]
    return float(session.run(g, feed)[i].sum())


def test_multiprocessing_pool_workers_use_the_parents_session():
    case = large_gather()
    session, g, feed, expected = case
    _POOL_SESSION[:] = [case]
    try:
        session.run(g, feed)
        fork = multiprocessing.get_context("fork")
        with fork.Pool(2) as pool:
            results = pool.map_async(_pool_task, range(6)).get(timeout=CHILD_TIMEOUT_S)
        assert results == [float(expected[i].sum()) for i in range(6)]
    finally:
        _POOL_SESSION.clear()
        session.close()


# -- locks another thread held ---------------------------------------------------------------------


def test_a_fork_while_another_thread_generates_plan_code(monkeypatch):
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, shape=[3])
    y = x
    for _ in range(20):
        y = mg.Identity(scope, y)
    feed = {x: np.array([1.0, 2.0, 3.0], np.float32)}
    session = mg.Session(scope)
    session.run(y, feed)  # the first run interprets; the next one generates code
    (plan,) = session._plans.values()
    parent = os.getpid()
    inside, release = threading.Event(), threading.Event()
    real = plan_module._codegen

    def slow_codegen(p):
        if os.getpid() == parent:
            inside.set()  # this thread holds the codegen lock, collections paused
            release.wait(CHILD_TIMEOUT_S)
        real(p)

    monkeypatch.setattr(plan_module, "_codegen", slow_codegen)
    other = threading.Thread(target=session.run, args=(y, feed), daemon=True)
    other.start()
    try:
        assert inside.wait(30)
        assert not gc.isenabled()

        def child() -> int:
            value = session.run(y, feed)  # generates the plan's code here
            ok = np.array_equal(value, feed[x]) and plan.code is not None
            return 0 if ok and gc.isenabled() else 1

        assert run_in_child(child) == 0
    finally:
        release.set()
        other.join(30)
    assert gc.isenabled()
    session.close()


def test_a_fork_while_another_thread_holds_a_buffer_pool_lock():
    session, g, feed, expected = large_gather()
    with session:
        session.run(g, feed)
        lock = session._buffers._lock
        held, release = threading.Event(), threading.Event()

        def hold():
            with lock:
                held.set()
                release.wait(CHILD_TIMEOUT_S)

        other = threading.Thread(target=hold, daemon=True)
        other.start()
        try:
            assert held.wait(30)
            # The 8 MiB output comes from the pool, whose lock the child must not inherit held.
            same = lambda: int(not np.array_equal(session.run(g, feed), expected))  # noqa: E731
            assert run_in_child(same) == 0
        finally:
            release.set()
            other.join(30)


_BLOCK = {"entered": threading.Event(), "release": threading.Event()}


def _block_kernel(ctx, x, *, T):
    _BLOCK["entered"].set()
    _BLOCK["release"].wait(CHILD_TIMEOUT_S)
    return x


Block = mg.register_op(
    OpDef(
        "Hostile3Block",
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=["T: type"],
        shape_fn=lambda ctx: ctx.input_shapes[0],
    )
)
mg.register_kernel("Hostile3Block", "CPU", _block_kernel)


def test_a_child_can_close_a_session_another_thread_was_running():
    scope = mg.Scope.new_root_scope()
    blocked = Block(scope, mg.Const(scope, [1.0, 2.0]))
    session = mg.Session(scope)
    _BLOCK["entered"].clear()
    _BLOCK["release"].clear()
    other = threading.Thread(target=session.run, args=(blocked,), daemon=True)
    other.start()
    try:
        assert _BLOCK["entered"].wait(30)

        def child() -> int:
            # The parent's run in flight is not in flight here: close must not wait for it.
            session.close()
            try:
                session.run(blocked)
            except mg.FailedPreconditionError:
                return 0
            return 1

        assert run_in_child(child) == 0
    finally:
        _BLOCK["release"].set()
        other.join(30)
    session.close()
