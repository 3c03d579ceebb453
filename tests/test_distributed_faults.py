"""Faults on a Dask cluster: worker processes killed during and between runs (a LocalCluster
of two worker processes whose nannies restart them, started once for the module)."""

from __future__ import annotations

import _thread
import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

import minigraph as mg
from ops import gather

distributed = pytest.importorskip("distributed")

from minigraph.distributed import worker as mg_worker  # noqa: E402 - needs distributed

OPS = mg.SessionConfig(op_modules=["_dist_ops"])


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        dashboard_address=None,
        silence_logs=logging.CRITICAL,
    )
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


def workers_by_name(client):
    """{task number: address} of the workers now in the cluster."""
    info = client.scheduler_info()["workers"]
    return {int(w["name"]): a for a, w in info.items()}


def kill(client, address):
    """Kills the worker process at `address` (its nanny starts a new one, at a new address)."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)


def wait_for_replacement(client, task, old_address, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        address = workers_by_name(client).get(task)
        if address is not None and address != old_address:
            return address
        time.sleep(0.1)
    raise AssertionError(f"task {task}'s worker was not restarted within {timeout} s")


def sleepy_graph():
    """ids -> rows on worker 0 -> a kernel sleeping `secs` on worker 1 -> the client."""
    import _dist_ops

    scope = mg.Scope.new_root_scope()
    ids = mg.Placeholder(scope.with_op_name("ids"), mg.int32, shape=[None])
    secs = mg.Placeholder(scope.with_op_name("secs"), mg.float32, shape=[])
    w0, w1 = scope.with_device("/job:worker/task:0"), scope.with_device("/job:worker/task:1")
    rows = gather(w0.with_op_name("rows"), np.arange(10.0), ids)
    slow = _dist_ops.DistTestSleep(w1.with_op_name("slow"), rows, secs)
    out = gather(scope.with_op_name("out"), slow, [0])
    return scope, ids, secs, out


def test_a_worker_killed_mid_run_is_unavailable_promptly_then_the_next_run_recovers(client):
    scope, ids, secs, out = sleepy_graph()
    before = workers_by_name(client)
    with mg.Session(scope, OPS, target=client) as session:
        assert session.run(out, {ids: [3], secs: 0.0}).tolist() == [3.0]
        killer = threading.Timer(1.0, kill, (client, before[1]))
        killer.start()
        start = time.monotonic()
        with pytest.raises(mg.UnavailableError) as info:
            session.run(out, {ids: [4], secs: 60.0})
        elapsed = time.monotonic() - start
        killer.join()
        assert elapsed < 15, elapsed  # the kernel would have slept 60 s
        message = str(info.value)
        assert "/job:worker/replica:0/task:1" in message and before[1] in message
        assert "left the cluster during the run" in message
        new = wait_for_replacement(client, 1, before[1])
        # The next run registers task 1's partition on the new worker.
        assert session.run(out, {ids: [5], secs: 0.0}).tolist() == [5.0]
        live = client.run(mg_worker.live_partitions, workers=[new])[new]
        assert [p["task"] for p in live] == ["/job:worker/replica:0/task:1"]


def test_a_worker_replaced_between_runs_is_used_by_the_next_run(client):
    scope, ids, secs, out = sleepy_graph()
    before = workers_by_name(client)
    with mg.Session(scope, OPS, target=client) as session:
        assert session.run(out, {ids: [1], secs: 0.0}).tolist() == [1.0]
        kill(client, before[0])
        new = wait_for_replacement(client, 0, before[0])
        time.sleep(0.5)  # the scheduler's announcement of the removal reaches the client
        assert session.run(out, {ids: [2], secs: 0.0}).tolist() == [2.0]
        live = client.run(mg_worker.live_partitions, workers=[new])[new]
        assert [p["task"] for p in live] == ["/job:worker/replica:0/task:0"]


def test_a_task_that_no_worker_serves_any_more_is_unavailable(client):
    scope, ids, secs, out = sleepy_graph()
    before = workers_by_name(client)
    config = mg.SessionConfig(
        op_modules=["_dist_ops"], cluster={"worker": [before[0], before[1]]}
    )  # addresses: a restarted worker has a new one
    with mg.Session(scope, config, target=client) as session:
        assert session.run(out, {ids: [1], secs: 0.0}).tolist() == [1.0]
        kill(client, before[1])
        wait_for_replacement(client, 1, before[1])
        time.sleep(0.5)
        with pytest.raises(
            mg.UnavailableError, match=r"no worker serves /job:worker/replica:0/task:1"
        ):
            session.run(out, {ids: [2], secs: 0.0})
        # Task 0 still works, and the session is not broken.
        rows = scope.graph.get_operation("rows").outputs[0]
        assert session.run(rows, {ids: [7]}).tolist() == [7.0]


def test_an_interrupt_during_a_run_cancels_it_and_the_session_goes_on(client):
    scope, ids, secs, out = sleepy_graph()
    with mg.Session(scope, OPS, target=client) as session:
        assert session.run(out, {ids: [1], secs: 0.0}).tolist() == [1.0]
        timer = threading.Timer(0.5, _thread.interrupt_main)
        timer.start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            session.run(out, {ids: [2], secs: 2.0})
        assert time.monotonic() - start < 1.5  # not the kernel's 2 s
        timer.join()
        # The next run waits for worker 1 to finish the interrupted kernel, then runs.
        assert session.run(out, {ids: [3], secs: 0.0}).tolist() == [3.0]


def test_closing_a_session_during_a_run_ends_the_run_with_a_typed_error(client):
    scope, ids, secs, out = sleepy_graph()
    session = mg.Session(scope, OPS, target=client)
    assert session.run(out, {ids: [1], secs: 0.0}).tolist() == [1.0]
    closer = threading.Timer(0.5, session.close)
    closer.start()
    start = time.monotonic()
    with pytest.raises((mg.FailedPreconditionError, mg.UnavailableError)):
        session.run(out, {ids: [2], secs: 1.5})
    assert time.monotonic() - start < 10
    closer.join()
    with pytest.raises(mg.FailedPreconditionError):
        session.run(out, {ids: [2], secs: 0.0})
