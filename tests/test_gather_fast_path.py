"""GatherV2 with constant indices and axis, run again and again in one session (CPU).

After a first, checked run, such a gather may skip work on later runs (ops/gather_ops.py keeps what
it derived from the constants). These tests are behavioural, so they hold whatever the shortcut
looks like: the values of every run against a reference and against the general path (the same
gather with fed indices) on the same inputs, and, for gathers large enough to be split over the
session's intra-op threads, that every run keeps splitting them.
"""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pytest
from _gather_helpers import assert_array_same, ids, ref_gather, sample

import minigraph
from minigraph import Scope, Session, SessionConfig
from ops import Const, GatherV2, Placeholder

pytestmark = pytest.mark.usefixtures("cpu_only")  # the shortcut and the thread split are CPU's

RUNS = 5

# (params shape, constant indices, axis)
CASES = [
    ((6,), [4, 0, 5, 4], 0),
    ((5, 3), [[2, 0], [4, 4]], 0),
    ((3, 7), [6, 0, 3], 1),
    ((3, 7), [6, 0, 3], -1),
    ((2, 4, 3), [[3], [1]], 1),
    ((2, 4, 3), 2, 2),  # a scalar index
    ((4, 2), np.arange(1024) % 4, 0),  # as many indices as the shortcut takes
]


@pytest.mark.parametrize("dtype", [minigraph.float32, minigraph.int64, minigraph.bool_], ids=ids)
@pytest.mark.parametrize("shape, indices, axis", CASES)
def test_constant_indices_give_the_right_values_on_every_run(shape, indices, axis, dtype):
    indices = np.asarray(indices, np.int32)
    root = Scope.new_root_scope()
    params = Placeholder(root.with_op_name("params"), dtype, shape=shape)
    fed_indices = Placeholder(root.with_op_name("fed_indices"), minigraph.int32)
    constant = GatherV2(root.with_op_name("constant"), params, Const(root, indices), axis)
    general = GatherV2(root.with_op_name("general"), params, fed_indices, axis)
    with Session(root) as sess:
        for run in range(RUNS):
            value = sample(dtype, shape, seed=run)  # new params every run
            fast, slow = sess.run([constant, general], {params: value, fed_indices: indices})
            expected = ref_gather(value, indices, axis)
            assert_array_same(fast, expected)
            assert_array_same(slow, expected)


def test_constant_indices_with_params_of_a_new_shape():
    # The plan accepts params of any shape with a partial placeholder: what was checked for one
    # shape must not be trusted for another.
    root = Scope.new_root_scope()
    params = Placeholder(root, minigraph.float64, shape=[None, 3])
    g = GatherV2(root, params, [2, 0], 0, bad_indices_policy="ERROR")
    with Session(root) as sess:
        for rows in (3, 5, 3, 4):
            value = sample(minigraph.float64, (rows, 3), seed=rows)
            assert_array_same(sess.run(g, {params: value}), value[[2, 0]])
        with pytest.raises(minigraph.InvalidArgumentError, match=r"indices\[0\] = 2 is not in"):
            sess.run(g, {params: np.zeros((2, 3))})
        assert_array_same(sess.run(g, {params: np.ones((3, 3))}), np.ones((2, 3)))


def test_constant_params_and_indices_every_run():
    params = sample(minigraph.int32, (4, 5))
    root = Scope.new_root_scope()
    g = GatherV2(root, params, [[3, 1], [0, 3]], 1)
    with Session(root) as sess:
        results = [sess.run(g) for _ in range(RUNS)]
    for out in results:
        assert_array_same(out, ref_gather(params, np.array([[3, 1], [0, 3]]), 1))


class _ThreadSpy:
    """Records, per run, the names of the threads that ran work handed to a thread pool."""

    def __init__(self, monkeypatch):
        self.threads: list[str] = []
        self._lock = threading.Lock()
        submit = concurrent.futures.ThreadPoolExecutor.submit
        spy = self

        def recording_submit(pool, fn, /, *args, **kwargs):
            def work(*a, **k):
                with spy._lock:
                    spy.threads.append(threading.current_thread().name)
                return fn(*a, **k)

            return submit(pool, work, *args, **kwargs)

        monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", recording_submit)

    def take(self) -> list[str]:
        with self._lock:
            names, self.threads = self.threads, []
        return names


@pytest.mark.parametrize("axis", [0, 1])
def test_large_constant_index_gathers_stay_split_over_threads_on_every_run(monkeypatch, axis):
    # 1024 constant indices (the most the shortcut takes) into rows or columns of 1024 floats:
    # a 4 MiB output, which sessions with intra-op threads split.
    rng = np.random.default_rng(3)
    indices = rng.integers(0, 1024, size=1024).astype(np.int32)
    root = Scope.new_root_scope()
    params = Placeholder(root, minigraph.float32, shape=[1024, 1024])
    g = GatherV2(root, params, indices, axis)
    spy = _ThreadSpy(monkeypatch)
    with Session(root, SessionConfig(intra_op_threads=2)) as sess:
        for run in range(RUNS):
            value = rng.standard_normal((1024, 1024)).astype(np.float32)
            out = sess.run(g, {params: value})
            np.testing.assert_array_equal(out, np.take(value, indices, axis=axis))
            helpers = [name for name in spy.take() if name.startswith("minigraph-intra")]
            assert helpers, f"run {run}: the gather did not use the intra-op threads"


def test_small_constant_index_gathers_are_not_split(monkeypatch):
    # The spy itself: below the size threshold nothing is handed to the pool.
    root = Scope.new_root_scope()
    params = Placeholder(root, minigraph.float32, shape=[64, 64])
    g = GatherV2(root, params, np.arange(64, dtype=np.int32), 0)
    spy = _ThreadSpy(monkeypatch)
    with Session(root, SessionConfig(intra_op_threads=2)) as sess:
        for _ in range(3):
            sess.run(g, {params: np.ones((64, 64), np.float32)})
    assert spy.take() == []


@pytest.mark.parametrize("policy", ["DEFAULT", "ERROR", "IGNORE"])
@pytest.mark.parametrize("params_shape", [(5, 0), (0, 5), (5, 2, 0)])
def test_empty_outputs_skip_the_copy_but_not_the_index_check(params_shape, policy):
    # Nothing to copy (embedding_lookup checks its ids with a zero-width table): the kernel
    # returns an empty result of the right shape and dtype without numpy's take, after the
    # same index check as any gather.
    root = Scope.new_root_scope()
    ids = Placeholder(root, minigraph.int64, shape=[None])
    axis = 0 if params_shape[0] else 1
    out = GatherV2(root, np.zeros(params_shape, np.float32), ids, axis, bad_indices_policy=policy)
    good = np.array([4, 0, 3, 4])
    good.setflags(write=False)  # as a protected feed: take would copy it
    with Session(root, SessionConfig(check_kernel_outputs=True)) as sess:
        value = sess.run(out, {ids: good})
        want = np.zeros(params_shape, np.float32).take(good, axis)
        assert value.shape == want.shape and value.dtype == np.float32
        if policy == "IGNORE":
            assert sess.run(out, {ids: np.array([1, 7])}).size == 0
        else:
            with pytest.raises(minigraph.InvalidArgumentError, match=r"indices\[1\] = 7 is not"):
                sess.run(out, {ids: np.array([1, 7])})
