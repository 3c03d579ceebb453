"""Concurrent runs that update one variable (TF's `use_locking` semantics): assigns, scatters and
locking apply ops hold the variable alone (no update is lost, no row is ever seen half
written); apply ops with use_locking=False share the lock (Hogwild: updates may interleave and
lose each other, but memory is never corrupted and nothing crashes); ops locking two variables
never deadlock. Every test finishes in bounded time (threads are joined with a timeout)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import minigraph as mg
import ops.resource_variables as rv
from minigraph import Scope, Session, Variable

THREADS = 6
RUNS = 40
TIMEOUT = 120.0


def _hammer(work, threads=THREADS):
    """Runs `work(k)` on `threads` threads; re-raises the first error; fails on a hang."""
    errors = []

    def run(k):
        try:
            work(k)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pool = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in pool), "a thread hung"
    if errors:
        raise errors[0]


@pytest.fixture
def root():
    return Scope.new_root_scope()


def test_concurrent_assign_adds_lose_nothing(root):
    v = Variable(root, np.zeros(50_000, np.float64), name="v")
    add = v.assign_add(np.ones(50_000), read_value=False)
    with Session(root) as sess:
        sess.run(v.initializer)
        _hammer(lambda k: [sess.run(add) for _ in range(RUNS)])
        assert (sess.run(v) == THREADS * RUNS).all()


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_locking_apply_ops_lose_nothing(root, sparse):
    rows = 2_000
    v = Variable(root, np.zeros((rows, 8), np.float64), name="v")
    if sparse:
        a = Variable(root.colocate_with(v.op), np.ones((rows, 8)), name="a")
        ids = np.arange(0, rows, 3, dtype=np.int32)
        # Momentum 0 with lr -1: each run adds the gradient (1) to the rows named.
        step = rv.ResourceSparseApplyMomentum(
            root, v, a, -1.0, np.ones((ids.size, 8)), ids, 0.0, use_locking=True
        )
        init = [v.initializer, a.initializer]
    else:
        step = rv.ResourceApplyGradientDescent(root, v, -1.0, np.ones((rows, 8)), use_locking=True)
        init = [v.initializer]
    with Session(root) as sess:
        sess.run(init)
        _hammer(lambda k: [sess.run(step) for _ in range(RUNS)])
        got = sess.run(v)
    if sparse:
        assert (got[ids] == THREADS * RUNS).all() and (np.delete(got, ids, 0) == 0).all()
    else:
        assert (got == THREADS * RUNS).all()


def test_hogwild_updates_interleave_but_never_corrupt(root):
    v = Variable(root, np.zeros(200_000, np.float64), name="v")
    step = rv.ResourceApplyGradientDescent(root, v, -1.0, np.ones(200_000), use_locking=False)
    with Session(root) as sess:
        sess.run(v.initializer)
        _hammer(lambda k: [sess.run(step) for _ in range(RUNS)])
        got = sess.run(v)
    # Updates may be lost to each other, never invented, and every value is one a sequence
    # of whole additions gives.
    assert np.isfinite(got).all()
    assert (got >= RUNS).all() and (got <= THREADS * RUNS).all()
    assert (got == np.round(got)).all()


def test_no_row_is_ever_seen_half_written(root):
    rows, width = 64, 4096
    v = Variable(root, np.zeros((rows, width), np.float32), name="v")
    ids = mg.Placeholder(root, mg.int32, [None])
    values = mg.Placeholder(root, mg.float32, [None, width])
    write = rv.ResourceScatterUpdate(root, v, ids, values)
    gather = rv.ResourceGather(root, v, np.arange(rows, dtype=np.int32))
    read = v.value()
    stop = threading.Event()
    torn = []

    def work(k):
        rng = np.random.default_rng(k)
        if k % 2:  # a writer: whole rows of one value each
            for _ in range(RUNS):
                chosen = rng.choice(rows, 16, replace=False).astype(np.int32)
                fill = np.repeat(rng.integers(1, 1000, 16).astype(np.float32)[:, None], width, 1)
                sess.run(write, {ids: chosen, values: fill})
            return
        while not stop.is_set():  # a reader: every row uniform
            for got in sess.run([gather, read]):
                bad = (got != got[:, :1]).any(axis=1)
                if bad.any():
                    torn.append(int(np.argmax(bad)))
            if len(torn) > 3:
                return

    with Session(root) as sess:
        sess.run(v.initializer)
        threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads[1::2]:
            t.join(TIMEOUT)
        stop.set()
        for t in threads[0::2]:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a thread hung"
    assert torn == []


def test_ops_locking_two_variables_never_deadlock(root):
    a = Variable(root, np.ones((500, 8)), name="a")
    b = Variable(root.colocate_with(a.op), np.ones((500, 8)), name="b")
    grad = np.full((500, 8), 1e-3)
    # One op locks (a, b), the other (b, a): the locks are taken in one order anyway.
    ab = rv.ResourceApplyAdagrad(root, a, b, 0.1, grad, use_locking=True)
    ba = rv.ResourceApplyAdagrad(root, b, a, 0.1, grad, use_locking=True)
    with Session(root) as sess:
        sess.run([a.initializer, b.initializer])
        _hammer(lambda k: [sess.run(ab if k % 2 else ba) for _ in range(RUNS)])
        assert np.isfinite(sess.run([a, b])).all()


def test_reads_during_hogwild_updates_stay_readable(root):
    v = Variable(root, np.zeros(100_000, np.float32), name="v")
    step = rv.ResourceApplyGradientDescent(root, v, -1.0, np.ones(100_000, np.float32))
    with Session(root) as sess:
        sess.run(v.initializer)

        def work(k):
            for _ in range(RUNS):
                if k % 2:
                    sess.run(step)
                else:
                    got = sess.run(v)
                    assert np.isfinite(got).all() and got.shape == (100_000,)

        _hammer(work)
