"""Parameter servers that die: a LocalCluster of three worker processes whose nannies restart a
killed one under its name (ps tasks 0 and 1, worker task 0), started once for the module.
Killing a worker holding variables loses them: the run in flight and every later run that
needs them raise UnavailableError naming the task and the variables, until a checkpoint is
restored; training then goes on, to the values of an uninterrupted run."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

import minigraph as mg
import ops

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402 - installed with distributed

pytestmark = pytest.mark.usefixtures("cpu_only")

PS = {"ps": 2, "worker": 1}
PS1_TASK = "/job:ps/replica:0/task:1"


@pytest.fixture(scope="module")
def client():
    # A LocalCluster closes the nanny of a worker whose name is absent from the scheduler
    # `lost-worker-timeout` (15 s) after any of its removals: a second kill of one worker
    # within that window would take it away for good, not restart it.
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"}):
        cluster = distributed.LocalCluster(
            n_workers=3,
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
    info = client.scheduler_info()["workers"]
    return {int(w["name"]): a for a, w in info.items()}


def kill(client, address):
    """Kills the worker process at `address` by its process id (its nanny starts another)."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)


def wait_for_replacement(client, name, old_address, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        address = workers_by_name(client).get(name)
        if address is not None and address != old_address:
            return address
        time.sleep(0.1)
    raise AssertionError(f"worker {name} was not restarted within {timeout} s")


R, D, B, K, C = 30, 3, 4, 2, 3


class Model:
    """A two-shard embedding on ps 0 and 1, a dense layer on worker 0, gradient descent on the
    dense weights and sparse Adagrad on the shards."""

    def __init__(self, local=False):
        rng = np.random.default_rng(0)
        table = rng.standard_normal((R, D)).astype(np.float32)
        s = self.scope = mg.Scope.new_root_scope()
        place = (lambda d: s) if local else s.with_device
        self.shards = [
            mg.Variable(place(f"/job:ps/task:{k}"), table[k::2], name=f"emb{k}") for k in (0, 1)
        ]
        self.accums = [
            mg.Variable(s.colocate_with(v.op), np.full(v.shape.as_list(), 0.1, np.float32),
                        name=f"emb{k}_accum")
            for k, v in enumerate(self.shards)
        ]  # fmt: skip
        w = place("/job:worker/task:0")
        self.w = mg.Variable(w, rng.standard_normal((D, C)).astype(np.float32), name="w")
        self.ids = ops.Placeholder(s.with_op_name("ids"), mg.int32, shape=[B, K])
        self.labels = ops.Placeholder(s.with_op_name("labels"), mg.int32, shape=[B])
        e = ops.embedding_lookup(w, self.shards, ops.Reshape(w, self.ids, [-1]))
        logits = ops.MatMul(w, ops.Mean(w, ops.Reshape(w, e, [B, K, D]), [1]), self.w)
        xent = ops.SparseSoftmaxCrossEntropyWithLogits(w, logits, self.labels)
        self.loss = ops.Mean(w, xent.loss, [0]).output
        g0, g1, gw = mg.gradients(self.loss, [*self.shards, self.w])
        rv = ops.resource_variables
        applies = [
            rv.ResourceSparseApplyAdagrad(s, v, a, np.float32(0.1), g.values, g.indices)
            for v, a, g in zip(self.shards, self.accums, (g0, g1))
        ]
        applies.append(rv.ResourceApplyGradientDescent(s, self.w, np.float32(0.1), gw))
        after = s.with_control_dependencies([a.operation for a in applies])
        self.train = ops.NoOp(after.with_op_name("train")).operation
        self.init = mg.global_variables_initializer(s)
        self.variables = [*self.shards, *self.accums, self.w]
        self.saver = mg.train.Saver(self.variables)

    def feed(self, step):
        rng = np.random.default_rng(1000 + step)
        return {
            self.ids: rng.integers(0, R, (B, K)).astype(np.int32),
            self.labels: rng.integers(0, C, B).astype(np.int32),
        }


def reference(steps):
    model = Model(local=True)
    with mg.Session(model.scope) as session:
        session.run(model.init)
        for i in range(steps):
            session.run(model.train, model.feed(i))
        return session.run(model.variables)


def assert_values(got, expected):
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_a_ps_killed_between_runs_loses_its_variables_then_a_restore_trains_on(client, tmp_path):
    model = Model()
    before = workers_by_name(client)
    with mg.Session(model.scope, mg.SessionConfig(cluster=PS), target=client) as session:
        session.run(model.init)
        for i in range(3):
            session.run(model.train, model.feed(i))
        path = model.saver.save(session, str(tmp_path / "ckpt"), global_step=3)
        session.run(model.train, model.feed(3))
        kill(client, before[1])  # ps task 1: emb1 and emb1_accum
        wait_for_replacement(client, 1, before[1])
        time.sleep(0.5)  # the scheduler's announcement of the removal reaches the client
        for _ in range(2):  # every run that needs them says so, not only the first
            with pytest.raises(mg.UnavailableError) as info:
                session.run(model.train, model.feed(4))
            message = str(info.value)
            assert PS1_TASK in message and "emb1, emb1_accum" in message, message
            assert before[1] in message and "Saver.restore" in message
        # What does not need them still runs: ps task 0 kept its values.
        assert session.run(model.shards[0]).shape == (R // 2, D)
        with pytest.raises(mg.UnavailableError, match="lost variables emb1"):
            session.run(model.shards[1])
        model.saver.restore(session, path)
        for i in range(3, 6):
            session.run(model.train, model.feed(i))
        assert_values(session.run(model.variables), reference(6))


def test_a_ps_killed_mid_run_fails_the_run_naming_the_variables_lost(client):
    import _dist_ops

    scope = mg.Scope.new_root_scope()
    ps1 = scope.with_device("/job:ps/task:1")
    v = mg.Variable(ps1, np.arange(4.0), name="slow_var")
    secs = ops.Placeholder(scope, mg.float32, shape=[])
    slow = _dist_ops.DistTestSleep(ps1, v.value(), secs)
    out = ops.Mul(scope, slow, 2.0)
    before = workers_by_name(client)
    config = mg.SessionConfig(cluster=PS, op_modules=["_dist_ops"])
    with mg.Session(scope, config, target=client) as session:
        session.run(v.initializer)
        assert session.run(out, {secs: 0.0}).tolist() == [0.0, 2.0, 4.0, 6.0]
        killer = threading.Timer(1.0, kill, (client, before[1]))
        killer.start()
        start = time.monotonic()
        with pytest.raises(mg.UnavailableError) as info:
            session.run(out, {secs: 60.0})
        assert time.monotonic() - start < 20  # not the kernel's 60 s
        killer.join()
        message = str(info.value)
        assert PS1_TASK in message and "Variables lost with it" in message, message
        assert "slow_var" in message
        wait_for_replacement(client, 1, before[1])
        with pytest.raises(mg.UnavailableError, match=r"task:1 lost variables slow_var"):
            session.run(out, {secs: 0.0})
        session.run(v.initializer)  # a run that assigns it: the variable is back
        assert session.run(out, {secs: 0.0}).tolist() == [0.0, 2.0, 4.0, 6.0]


def test_training_through_a_ps_restart_with_checkpoints_reaches_the_uninterrupted_values(
    client, tmp_path
):
    model = Model()
    steps, every = 40, 4
    failures = []
    with mg.Session(model.scope, mg.SessionConfig(cluster=PS), target=client) as session:
        session.run(model.init)
        saved_step, path = 0, model.saver.save(session, str(tmp_path / "ckpt"), global_step=0)
        victim = workers_by_name(client)[0]
        # Strikes while step 10 or one soon after runs (a timer thread: mid-run, not between).
        killer = threading.Timer(0.01, kill, (client, victim))
        step, deadline = 0, time.monotonic() + 120
        while step < steps:
            if time.monotonic() > deadline:
                raise AssertionError(f"training did not finish: {failures}")
            if step == 10 and not killer.is_alive() and not failures:
                killer.start()
            try:
                session.run(model.train, model.feed(step))
                step += 1
                if step % every == 0:
                    path = model.saver.save(session, str(tmp_path / "ckpt"), global_step=step)
                    saved_step = step
            except mg.UnavailableError as e:
                failures.append(str(e))
                while True:  # until a worker serves the task again
                    try:
                        model.saver.restore(session, path)
                        break
                    except mg.UnavailableError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.2)
                step = saved_step
        killer.join()
        assert failures, "the worker was not killed during training"
        assert any("/job:ps/replica:0/task:0" in f for f in failures), failures
        assert_values(session.run(model.variables), reference(steps))
