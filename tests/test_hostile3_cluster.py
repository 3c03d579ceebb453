"""Cluster targets that never answer, and closing while a worker is stopped (issue 24, section 3:
"Cluster targets that never answer", "Closing with a stopped worker").

- Dask's Client waits for the scheduler's handshake without a timeout: a port that accepts and
  stays silent blocked `Session(target=...)` for good. The session asks for the handshake
  itself, within `connect_timeout`.
- A Client that failed to start was left half open and closed by the garbage collector
  whenever it ran: inside another Client's start, which holds Dask's class-wide
  `LoopRunner._lock`, that close waited on the same lock, and every later Client (every
  `Session(target=...)`) waited behind it. No half-open Client is left now.
- `close()` ends runs waiting on the cluster (they raise FailedPreconditionError), whatever the
  workers do: with a worker stopped (SIGSTOP), with the user's own Client as with an address.

Every wait here is bounded: what must not hang runs on a thread joined with a timeout.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import threading
import time

import numpy as np
import pytest

import minigraph as mg
from ops import gather

distributed = pytest.importorskip("distributed")

from distributed.utils import LoopRunner  # noqa: E402 - needs distributed

from minigraph.distributed import cluster as cluster_module  # noqa: E402

pytestmark = pytest.mark.usefixtures("cpu_only")

OPS = mg.SessionConfig(op_modules=["_dist_ops"])


def bounded(fn, timeout: float = 30.0):
    """(seconds taken, what fn returned or raised) of fn run on a thread; fails the test when
    fn has not returned within `timeout` (it hangs)."""
    outcome: list = []

    def body():
        try:
            outcome.append(("value", fn()))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome.append(("error", e))

    began = time.monotonic()
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} did not return within {timeout:g} s: it hangs")
    return time.monotonic() - began, outcome[0]


class Server:
    """A TCP server on 127.0.0.1 that accepts every connection and then stays silent, or
    answers each with `reply` bytes."""

    def __init__(self, reply: bytes | None = None):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.address = f"tcp://127.0.0.1:{self.socket.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections.append(connection)
            if self.reply is not None:
                try:
                    connection.sendall(self.reply)
                except OSError:
                    pass

    def close(self):
        self.socket.close()
        for c in self.connections:
            c.close()


@pytest.fixture
def silent():
    server = Server()
    yield server.address
    server.close()


@pytest.fixture
def garbage():
    server = Server(reply=b"\xff" * 64)  # read by Dask as an absurd frame length
    yield server.address
    server.close()


def connecting_threads() -> int:
    return sum(t.name.startswith(("minigraph-connect", "IO loop")) for t in threading.enumerate())


def half_open_clients() -> list:
    return [
        o for o in gc.get_objects() if isinstance(o, distributed.Client) and o.status != "closed"
    ]


# -- targets that never answer ---------------------------------------------------------------


def test_a_target_that_accepts_and_stays_silent_is_unavailable_within_the_timeout(silent):
    before = connecting_threads()
    config = mg.SessionConfig(connect_timeout=1.0)
    seconds, (kind, value) = bounded(lambda: mg.Session(target=silent, config=config))
    assert kind == "error" and isinstance(value, mg.UnavailableError), value
    assert f"cannot reach the Dask scheduler at {silent!r} within 1 s" in value.message
    assert "no Dask handshake came back" in value.message
    assert seconds < 1.0 + cluster_module._GRACE_S + 3  # imports, and a loaded machine
    deadline = time.monotonic() + 5
    while connecting_threads() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connecting_threads() == before  # nothing left behind, waiting on the server


def test_list_devices_of_a_silent_target_is_unavailable_too(silent):
    def devices():
        cluster = cluster_module.Cluster(silent, timeout=1.0)
        cluster.close()

    _, (kind, value) = bounded(devices)
    assert kind == "error" and isinstance(value, mg.UnavailableError), value


def test_a_target_that_answers_garbage_leaves_no_half_open_client(garbage):
    collecting = gc.isenabled()
    gc.disable()  # what a failed Client leaves must be seen before any collection
    try:
        _, (kind, value) = bounded(
            lambda: mg.Session(target=garbage, config=mg.SessionConfig(connect_timeout=2.0))
        )
        assert kind == "error" and isinstance(value, mg.UnavailableError), value
        assert "what answers there is not one" in value.message
        assert half_open_clients() == []
    finally:
        if collecting:
            gc.enable()


def test_collecting_inside_a_client_start_does_not_deadlock(garbage):
    # The mechanism that made one failure block every later session: a collection that runs
    # while a thread holds LoopRunner._lock (as every Client start and stop does) finalises a
    # half-open Client, whose close takes that lock again on the same thread.
    collecting = gc.isenabled()
    gc.disable()
    try:
        bounded(lambda: mg.Session(target=garbage, config=mg.SessionConfig(connect_timeout=2.0)))

        def collect_holding_the_lock():
            with LoopRunner._lock:
                gc.collect()

        bounded(collect_holding_the_lock, timeout=30)
    finally:
        if collecting:
            gc.enable()


def failed_client(address: str):
    """The exception a distributed.Client raised failing to start against `address`."""
    try:
        distributed.Client(address, timeout=1.0, set_as_default=False)
    except Exception as e:  # noqa: BLE001 - what is tested
        return e
    pytest.fail(f"a Client of {address} started")


def test_a_client_that_failed_to_start_is_closed_where_it_failed(garbage):
    # The fallback for a scheduler that answers the handshake, then fails the Client.
    collecting = gc.isenabled()
    gc.disable()
    try:
        before = connecting_threads()
        unreachable = socket.socket()
        unreachable.bind(("127.0.0.1", 0))
        refused = f"tcp://127.0.0.1:{unreachable.getsockname()[1]}"
        unreachable.close()
        for address in (refused, garbage):
            error = failed_client(address)
            assert half_open_clients() or connecting_threads() > before  # what Dask leaves
            bounded(lambda error=error: cluster_module._close_failed(error))
            assert half_open_clients() == []
            deadline = time.monotonic() + 10
            while connecting_threads() > before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert connecting_threads() == before  # its event loop thread ended
            del error
    finally:
        if collecting:
            gc.enable()


def test_a_client_failing_after_the_handshake_is_closed_on_its_own_thread(monkeypatch, garbage):
    # A scheduler that answers the handshake and then fails the Client (here: the check is
    # skipped, so the Client meets the garbage itself) leaves nothing half open either.
    monkeypatch.setattr(cluster_module, "_probe", lambda target, timeout: None)
    collecting = gc.isenabled()
    gc.disable()
    try:
        before = connecting_threads()
        _, (kind, value) = bounded(
            lambda: mg.Session(target=garbage, config=mg.SessionConfig(connect_timeout=2.0))
        )
        assert kind == "error" and isinstance(value, mg.UnavailableError), value
        deadline = time.monotonic() + 10
        while (half_open_clients() or connecting_threads() > before) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert half_open_clients() == [] and connecting_threads() == before
    finally:
        if collecting:
            gc.enable()


# -- a real cluster ---------------------------------------------------------------------------


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


def worker_pid(client, task: int) -> int:
    workers = client.scheduler_info()["workers"]
    address = next(a for a, w in workers.items() if str(w["name"]) == str(task))
    return client.run(os.getpid, workers=[address])[address]


def task1_graph():
    scope = mg.Scope.new_root_scope()
    ids = mg.Placeholder(scope.with_op_name("ids"), mg.int32, shape=[None])
    rows = gather(scope.with_device("/job:worker/task:1").with_op_name("rows"), np.arange(5.0), ids)
    return scope, ids, rows


def test_failed_targets_do_not_block_later_sessions(client, silent, garbage):
    config = mg.SessionConfig(connect_timeout=1.0)
    failing = [
        threading.Thread(target=lambda a=a: bounded(lambda: mg.Session(target=a, config=config)))
        for a in (silent, garbage, silent, garbage)
    ]
    for t in failing:
        t.start()
    scope, ids, rows = task1_graph()

    def good_session():
        with mg.Session(scope, target=client.scheduler.address) as session:
            return session.run(rows, {ids: [4, 1]}).tolist()

    _, outcome = bounded(good_session, timeout=60)
    assert outcome == ("value", [4.0, 1.0])
    for t in failing:
        t.join(30)


@pytest.mark.parametrize("form", ["own client", "address"])
def test_close_returns_at_once_with_a_stopped_worker(client, form):
    scope, ids, rows = task1_graph()
    target = client if form == "own client" else client.scheduler.address
    pid = worker_pid(client, 1)
    session = mg.Session(scope, target=target)
    assert session.run(rows, {ids: [2]}).tolist() == [2.0]
    os.kill(pid, signal.SIGSTOP)
    try:
        run = threading.Thread(
            target=lambda: outcomes.append(bounded(lambda: session.run(rows, {ids: [3]}), 30)),
            daemon=True,
        )
        outcomes: list = []
        run.start()
        time.sleep(1.0)  # the run now waits on the stopped worker
        seconds, (kind, _) = bounded(session.close, timeout=20)
        assert kind == "value" and seconds < 5
        run.join(20)
        assert not run.is_alive()
        _, (kind, value) = outcomes[0]
        assert kind == "error" and isinstance(value, mg.FailedPreconditionError), value
        assert "closed while this run was in progress" in value.message
    finally:
        os.kill(pid, signal.SIGCONT)
    if form == "own client":
        assert client.status == "running"  # the user's client stays theirs


def test_close_with_a_stopped_worker_and_no_run_in_flight(client):
    scope, ids, rows = task1_graph()
    session = mg.Session(scope, target=client)
    session.run(rows, {ids: [0]})
    pid = worker_pid(client, 1)
    os.kill(pid, signal.SIGSTOP)
    try:
        seconds, (kind, _) = bounded(session.close, timeout=20)
        assert kind == "value" and seconds < 5
    finally:
        os.kill(pid, signal.SIGCONT)


def test_close_ends_a_slow_run_instead_of_waiting_for_it(client):
    import _dist_ops

    scope = mg.Scope.new_root_scope()
    w1 = scope.with_device("/job:worker/task:1")
    secs = mg.Placeholder(scope.with_op_name("secs"), mg.float32, shape=[])
    slow = _dist_ops.DistTestSleep(w1.with_op_name("slow"), np.arange(3.0), secs)
    session = mg.Session(scope, OPS, target=client)
    session.run(slow, {secs: 0.0})
    outcomes: list = []
    run = threading.Thread(
        target=lambda: outcomes.append(bounded(lambda: session.run(slow, {secs: 4.0}), 30)),
        daemon=True,
    )
    run.start()
    time.sleep(1.0)
    seconds, (kind, _) = bounded(session.close, timeout=20)
    assert kind == "value" and seconds < 2.5  # not the 3 s the kernel still sleeps
    run.join(20)
    _, (kind, value) = outcomes[0]
    assert kind == "error" and isinstance(value, mg.FailedPreconditionError), value
    time.sleep(3.5)  # the worker's thread finishes sleeping before the next test uses it
