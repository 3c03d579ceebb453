"""The distributed runtime on a LocalCluster (2 worker processes, started once per battery
worker): bad targets and cluster configs, unknown tasks, op modules, values against numpy,
remote kernel errors, large feeds, closing and interrupting mid-run, a worker killed mid-run,
sessions opened and closed. Bounded in time: every case has its own limit."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import numpy as np

from tests.hostile._common import cases_from, must, same, scope
from tests.hostile._common import minigraph_module as _mg
from tests.hostile._common import ops_module as _ops
from tests.hostile.battery import Case, Hung, Wrong

OPS_MODULE = "tests.hostile._cluster_ops"
_CLUSTER: list[Any] = []


def _client() -> Any:
    if not _CLUSTER:
        from distributed import Client, LocalCluster  # noqa: PLC0415

        cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                               dashboard_address=None)  # fmt: skip
        _CLUSTER.extend([cluster, Client(cluster)])
    return _CLUSTER[1]


def _workers(client: Any) -> dict[int, str]:
    info = client.scheduler_info()["workers"]
    return {int(w["name"]): a for a, w in info.items()}


def _wait_workers(client: Any, n: int = 2, timeout: float = 60) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _workers(client)
        if len(found) >= n:
            return found
        time.sleep(0.2)
    raise Hung(f"the cluster did not get {n} workers back in {timeout} s")


def _config(**kw: Any) -> Any:
    mg = _mg()
    kw.setdefault("op_modules", [OPS_MODULE])
    kw.setdefault("connect_timeout", 10)
    return mg.SessionConfig(**kw)


def cases() -> list[Case]:
    out: list[Case] = []
    A = "cluster"

    def target(which):
        mg = _mg()
        s = scope()
        c = mg.Identity(s, [1.0])
        if which == "closed_client":
            from distributed import Client  # noqa: PLC0415

            _client()
            other = Client(_CLUSTER[0])
            other.close()
            value = other
        else:
            value = {"int": 5, "bytes": b"tcp://127.0.0.1:1", "garbage": "garbage",
                     "nobody": "tcp://127.0.0.1:1", "list": ["tcp://x"],
                     "unroutable": "tcp://10.255.255.1:8786", "empty": "",
                     "no_port": "tcp://", "word_port": "tcp://host:notaport",
                     "big_port": "tcp://127.0.0.1:99999", "zero_port": "tls://127.0.0.1:0",
                     "inproc": "inproc://10.0.0.1/1/1"}[which]  # fmt: skip
        began = time.monotonic()
        try:
            with mg.Session(s, mg.SessionConfig(connect_timeout=2), target=value) as session:
                same(session.run(c), np.array([1.0], np.float32), "value")
        finally:
            must(time.monotonic() - began < 30, f"{which}: took {time.monotonic() - began:.0f} s")

    targets = ["int", "bytes", "garbage", "nobody", "list", "unroutable", "empty", "closed_client",
               "no_port", "word_port", "big_port", "zero_port", "inproc"]  # fmt: skip
    out += cases_from(
        A, "target", targets, target, expect=lambda v: "ok" if v == "empty" else "error", timeout=60
    )

    def list_devices(which):
        mg = _mg()
        value = {"int": 5, "nobody": "tcp://127.0.0.1:1", "client": None}[which]
        if which == "client":
            value = _client()
        names = mg.list_devices(target=value)
        must(any("task:1" in n for n in names), f"devices: {names}")

    out += cases_from(
        A,
        "list_devices",
        ["int", "nobody", "client"],
        list_devices,
        expect=lambda v: "ok" if v == "client" else "error",
        timeout=60,
    )

    def configs(which):
        mg, ops = _mg(), _ops()
        client = _client()
        s = scope()
        w0 = s.with_device("/job:worker/task:0")
        g = ops.gather(w0, np.arange(5.0), [3])
        cfg = {
            "job_not_list": dict(cluster={"worker": "abc"}),
            "job_empty_name": dict(cluster={"": ["x"]}),
            "job_slash": dict(cluster={"a/b": []}),
            "job_int": dict(cluster={5: []}),
            "unknown_worker_soft": dict(cluster={"worker": ["nope"]}),
            "unknown_worker_strict": dict(cluster={"worker": ["nope"]},
                                          allow_soft_placement=False),
            "names_as_ints": dict(cluster={"worker": [0, 1]}),
            "ps_job": dict(cluster={"ps": ["0"], "worker": ["1"]}),
            "op_module_missing": dict(op_modules=["no_such_module_xyz"]),
            "op_module_empty": dict(op_modules=[""]),
            "op_module_raising": dict(op_modules=["tests.hostile._no_such_file"]),
            "timeout_tiny": dict(connect_timeout=1e-9),
        }[which]  # fmt: skip
        with mg.Session(s, _config(**cfg), target=client) as session:
            same(session.run(g), np.array([3.0]), "gathered on the cluster")

    cfgs = [
        "job_not_list",
        "job_empty_name",
        "job_slash",
        "job_int",
        "unknown_worker_soft",
        "unknown_worker_strict",
        "names_as_ints",
        "ps_job",
        "op_module_missing",
        "op_module_empty",
        "op_module_raising",
        "timeout_tiny",
    ]
    out += cases_from(A, "config", cfgs, configs,
                      expect=lambda v: "ok" if v in ("unknown_worker_soft", "names_as_ints",
                                                     "ps_job") else (
                          "any" if v == "timeout_tiny" else "error"), timeout=60)  # fmt: skip

    def tasks(which):
        mg, ops = _mg(), _ops()
        client = _client()
        s = scope()
        device = {"task7_soft": "/job:worker/task:7", "task7_strict": "/job:worker/task:7",
                  "ps_soft": "/job:ps/task:0", "gpu_on_worker": "/job:worker/task:0/device:GPU:0",
                  "replica1": "/job:worker/replica:1/task:0",
                  "task1": "/job:worker/task:1"}[which]  # fmt: skip
        g = ops.gather(s.with_device(device), np.arange(5.0), [4])
        cfg = _config(allow_soft_placement=which != "task7_strict")
        md = mg.RunMetadata()
        with mg.Session(s, cfg, target=client) as session:
            same(session.run(g, run_metadata=md), np.array([4.0]), "value")

    out += cases_from(
        A,
        "task",
        ["task7_soft", "task7_strict", "ps_soft", "gpu_on_worker", "replica1", "task1"],
        tasks,
        expect=lambda v: "error" if v == "task7_strict" else "ok",
        timeout=60,
    )

    def values(seed):
        mg, ops = _mg(), _ops()
        client = _client()
        rng = np.random.default_rng(seed)
        strategy = ["mod", "div"][seed % 2]
        total = int(rng.integers(4, 50))
        table = rng.standard_normal((total, 3)).astype(np.float32)
        if strategy == "mod":
            parts = [table[0::2], table[1::2]]
        else:
            half = (total + 1) // 2
            parts = [table[:half], table[half:]]
        s = scope()
        shards = [mg.Const(s.with_device(f"/job:worker/task:{k}"), p) for k, p in enumerate(parts)]
        ids = mg.Placeholder(s.with_op_name("ids"), mg.int64, shape=None)
        rows = ops.embedding_lookup(s, shards, ids, partition_strategy=strategy)
        after = ops.gather(s.with_device("/job:worker/task:1"), rows, [0])
        with mg.Session(s, _config(), target=client) as session:
            for _ in range(3):
                want_ids = rng.integers(0, total, (int(rng.integers(1, 6)), 2))
                got, first, fed = session.run([rows, after, ids], {ids: want_ids})
                same(got, table[want_ids], "lookup on the cluster")
                same(first, table[want_ids][[0]], "gather after it on task 1")
                same(fed, want_ids, "the fed ids fetched back")

    out += cases_from(A, "values", list(range(6)), values, expect="ok", timeout=90)

    def remote_error(which):
        mg, ops = _mg(), _ops()
        client = _client()
        s = scope()
        ids = mg.Placeholder(s, mg.int64, shape=[None])
        g = ops.gather(s.with_device("/job:worker/task:1").with_op_name("remote"),
                       np.arange(5.0), ids)  # fmt: skip
        with mg.Session(s, _config(), target=client) as session:
            try:
                session.run(g, {ids: {"bad_id": [9], "bad_dtype": [0.5],
                                      "bad_shape": [[1]]}[which]})  # fmt: skip
            except mg.InvalidArgumentError as e:
                if which == "bad_id":
                    must("task:1" in str(e) and "remote" in str(e), f"message: {e}")
                raise
            finally:
                # The session goes on after the error.
                same(session.run(g, {ids: [1]}), np.array([1.0]), "run after the error")

    out += cases_from(
        A,
        "remote error",
        ["bad_id", "bad_dtype", "bad_shape"],
        remote_error,
        expect="error",
        timeout=60,
    )

    def large_feed(mb):
        mg, ops = _mg(), _ops()
        client = _client()
        s = scope()
        x = mg.Placeholder(s, mg.float32, shape=[None])
        g = ops.gather(s.with_device("/job:worker/task:0"), x, [0, -1 if False else 1])
        y = ops.Size(s.with_device("/job:worker/task:1"), x)
        value = np.arange(mb * 2**18, dtype=np.float32)
        with mg.Session(s, _config(), target=client) as session:
            got, size = session.run([g, y], {x: value})
        same(got, value[[0, 1]], "large feed")
        same(size, np.int32(value.size), "size on the other worker")

    out += cases_from(A, "large feed", [1, 20, 64], large_feed, expect="ok", timeout=120)

    def sleepy(s):
        mg, ops = _mg(), _ops()
        from tests.hostile import _cluster_ops  # noqa: PLC0415

        ids = mg.Placeholder(s.with_op_name("ids"), mg.int32, shape=[None])
        secs = mg.Placeholder(s.with_op_name("secs"), mg.float32, shape=[])
        rows = ops.gather(s.with_device("/job:worker/task:0"), np.arange(10.0), ids)
        slow = _cluster_ops.HostileClusterSleep(s.with_device("/job:worker/task:1"), rows, secs)
        return ids, secs, ops.gather(s, slow, [0])

    def close_mid_run(_):
        mg = _mg()
        client = _client()
        s = scope()
        ids, secs, out_ = sleepy(s)
        session = mg.Session(s, _config(), target=client)
        same(session.run(out_, {ids: [3], secs: 0.0}), np.array([3.0]), "first run")
        outcome: list[Any] = []

        def runner():
            try:
                outcome.append(session.run(out_, {ids: [4], secs: 5.0}))
            except BaseException as e:  # noqa: BLE001
                outcome.append(e)

        t = threading.Thread(target=runner)
        t.start()
        time.sleep(1.0)
        session.close()
        t.join(30)
        if t.is_alive():
            raise Hung("a distributed run did not end after close")
        result = outcome[0]
        if isinstance(result, BaseException) and not isinstance(result, mg.OpError):
            raise Wrong(f"the run ended with {type(result).__name__}: {result}")
        if isinstance(result, np.ndarray):
            same(result, np.array([4.0]), "completed run")

    out += cases_from(A, "close mid-run", [0], close_mid_run, expect="ok", timeout=90)

    def interrupt(_):
        mg = _mg()
        client = _client()
        s = scope()
        ids, secs, out_ = sleepy(s)

        def alarm(signum, frame):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, alarm)
        try:
            with mg.Session(s, _config(), target=client) as session:
                session.run(out_, {ids: [1], secs: 0.0})
                signal.setitimer(signal.ITIMER_REAL, 0.5)
                try:
                    session.run(out_, {ids: [2], secs: 3.0})
                except KeyboardInterrupt:
                    pass
                else:
                    raise Wrong("no KeyboardInterrupt")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                same(session.run(out_, {ids: [5], secs: 0.0}), np.array([5.0]), "run after")
        finally:
            signal.signal(signal.SIGALRM, old)

    out += cases_from(A, "interrupt", [0], interrupt, expect="ok", timeout=90)

    def kill_mid_run(_):
        mg = _mg()
        client = _client()
        before = _wait_workers(client)
        s = scope()
        ids, secs, out_ = sleepy(s)
        with mg.Session(s, _config(), target=client) as session:
            same(session.run(out_, {ids: [3], secs: 0.0}), np.array([3.0]), "first run")
            pid = client.run(os.getpid, workers=[before[1]])[before[1]]
            killer = threading.Timer(1.0, os.kill, (pid, signal.SIGKILL))
            killer.start()
            began = time.monotonic()
            try:
                session.run(out_, {ids: [4], secs: 30.0})
            except mg.UnavailableError:
                pass
            else:
                raise Wrong("a run whose worker was killed returned")
            finally:
                killer.join()
            must(time.monotonic() - began < 20, "the lost worker was noticed late")
            deadline = time.monotonic() + 60
            while _workers(client).get(1) in (None, before[1]):
                if time.monotonic() > deadline:
                    raise Hung("task 1 was not restarted")
                time.sleep(0.2)
            same(session.run(out_, {ids: [5], secs: 0.0}), np.array([5.0]), "run after")

    out += cases_from(A, "worker killed", [0], kill_mid_run, expect="ok", timeout=150)

    def many_sessions(_):
        mg, ops = _mg(), _ops()
        from minigraph.distributed import worker as mg_worker  # noqa: PLC0415

        client = _client()
        _wait_workers(client)
        s = scope()
        g = ops.gather(s.with_device("/job:worker/task:0"), np.arange(5.0), [2])
        for _ in range(15):
            with mg.Session(s, _config(), target=client) as session:
                same(session.run(g), np.array([2.0]), "value")
        deadline = time.monotonic() + 10
        while True:
            live = client.run(mg_worker.live_partitions)
            if not any(live.values()):
                break
            if time.monotonic() > deadline:
                raise Wrong(f"partitions left on the workers: {live}")
            time.sleep(0.2)

    out += cases_from(A, "sessions opened and closed", [0], many_sessions, expect="ok", timeout=120)

    def after_close(which):
        mg, ops = _mg(), _ops()
        client = _client()
        s = scope()
        g = ops.gather(s.with_device("/job:worker/task:0"), np.arange(5.0), [2])
        session = mg.Session(s, _config(), target=client)
        session.run(g)
        session.close()
        if which == "run":
            session.run(g)
        else:
            session.close()

    out += cases_from(
        A,
        "after close",
        ["run", "close"],
        after_close,
        expect=lambda v: "error" if v == "run" else "ok",
        timeout=60,
    )
    return out


def simgpu_cases() -> list[Case]:
    return []
