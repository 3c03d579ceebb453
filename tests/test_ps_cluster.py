"""Parameter servers on a Dask cluster: variables on `/job:ps/task:K` (and `/job:worker/task:K`)
live in their worker's memory across runs, one store per worker per session (a LocalCluster of
three worker processes, started once for the module: ps tasks 0 and 1, worker task 0)."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

import minigraph as mg
import ops
from ops import resource_variables as rv

distributed = pytest.importorskip("distributed")

from minigraph.distributed import worker as mg_worker  # noqa: E402 - needs distributed

pytestmark = pytest.mark.usefixtures("cpu_only")

PS = {"ps": 2, "worker": 1}
PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
W0 = "/job:worker/replica:0/task:0/device:CPU:0"


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=3,
        processes=True,
        threads_per_worker=2,
        dashboard_address=None,
        silence_logs=logging.CRITICAL,
    )
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def by_name(client):
    """{worker name: address}."""
    return {int(w["name"]): a for a, w in client.scheduler_info()["workers"].items()}


def config(**kwargs):
    return mg.SessionConfig(cluster=PS, **kwargs)


def stores(client):
    """{worker name: {session id: resources held}}."""
    names = {a: int(w["name"]) for a, w in client.scheduler_info()["workers"].items()}
    return {names[a]: s for a, s in client.run(mg_worker.live_sessions).items()}


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- a sparse model: a two-shard embedding table on the ps tasks, a dense layer on the worker --

R, D, B, K, C = 40, 4, 6, 3, 5


class Model:
    """embedding (mod-sharded over ps 0 and 1) -> mean over K ids -> dense -> softmax loss;
    Adagrad, sparse for the shards (ResourceSparseApplyAdagrad) and dense for the weights."""

    def __init__(self, rows=R, ps=("/job:ps/task:0", "/job:ps/task:1"), dense="/job:worker/task:0"):
        rng = np.random.default_rng(0)
        self.table = rng.standard_normal((rows, D)).astype(np.float32)
        self.weights = rng.standard_normal((D, C)).astype(np.float32)
        s = self.scope = mg.Scope.new_root_scope()
        self.shards = [
            mg.Variable(s.with_device(dev), self.table[k :: len(ps)], name=f"emb{k}")
            for k, dev in enumerate(ps)
        ]
        w = s.with_device(dense) if dense else s
        self.w = mg.Variable(w, self.weights, name="w")
        variables = [*self.shards, self.w]
        self.accums = [
            mg.Variable(
                s.colocate_with(v.op), np.full(v.shape.as_list(), 0.1, np.float32),
                name=f"{v.op.name}_Adagrad",
            )
            for v in variables
        ]  # fmt: skip
        self.ids = ops.Placeholder(s.with_op_name("ids"), mg.int32, shape=[B, K])
        self.labels = ops.Placeholder(s.with_op_name("labels"), mg.int32, shape=[B])
        e = ops.embedding_lookup(w, self.shards, ops.Reshape(w, self.ids, [-1]))
        mean = ops.Mean(w, ops.Reshape(w, e, [B, K, D]), [1])
        logits = ops.MatMul(w, mean, self.w)
        xent = ops.SparseSoftmaxCrossEntropyWithLogits(w, logits, self.labels)
        self.loss = ops.Mean(w.with_op_name("loss"), xent.loss, [0]).output
        grads = mg.gradients(self.loss, variables)
        lr = np.float32(0.1)
        applies = []
        for v, a, g in zip(variables, self.accums, grads):
            if isinstance(g, mg.IndexedSlices):
                applies.append(rv.ResourceSparseApplyAdagrad(s, v, a, lr, g.values, g.indices))
            else:
                applies.append(rv.ResourceApplyAdagrad(s, v, a, lr, g))
        after = s.with_control_dependencies([op.operation for op in applies])
        self.train = ops.NoOp(after.with_op_name("train")).operation
        self.init = mg.global_variables_initializer(s)
        self.variables = variables + self.accums

    def batch(self, step, rows=R):
        rng = np.random.default_rng(100 + step)
        return {
            self.ids: rng.integers(0, rows, (B, K)).astype(np.int32),
            self.labels: rng.integers(0, C, B).astype(np.int32),
        }

    def train_steps(self, session, steps, start=0):
        losses = []
        for i in range(start, start + steps):
            losses.append(session.run([self.loss, self.train], self.batch(i))[0])
        return losses


def local_reference(steps):
    """The model's variables after `steps` steps in a local session."""
    model = Model(ps=("", ""), dense="")
    with mg.Session(model.scope) as session:
        session.run(model.init)
        losses = model.train_steps(session, steps)
        return session.run(model.variables), losses


# -- placement, values and state across runs -------------------------------------------------


def test_a_sparse_model_trains_on_two_ps_tasks_as_in_a_local_session(client):
    model = Model()
    with mg.Session(model.scope, config(), target=client) as session:
        metadata = mg.RunMetadata()
        session.run(model.init, run_metadata=metadata)
        losses = model.train_steps(session, 5)
        got = session.run(model.variables)
        placement = dict(metadata.placement)
        train_meta = mg.RunMetadata()
        session.run(model.train, model.batch(5), run_metadata=train_meta)
        placement.update(train_meta.placement)
    expected, expected_losses = local_reference(5)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    assert placement["emb0"] == PS0 and placement["emb1"] == PS1
    assert placement["emb0_Adagrad"] == PS0 and placement["emb1_Adagrad"] == PS1
    assert placement["w"] == W0
    # Every op using a shard runs on its ps task: the gathers and the sparse applies.
    types = {op.name: op.type for op in model.scope.graph.operations}
    users = [n for n in placement if types[n] in ("ResourceGather", "ResourceSparseApplyAdagrad")]
    assert len(users) == 4, users
    assert {placement[n] for n in users} == {PS0, PS1}
    assert placement[next(n for n in placement if types[n] == "ResourceApplyAdagrad")] == W0


def test_a_ps_step_is_one_dask_task_per_ps_partition_and_no_pick(client, monkeypatch):
    # The dense layer on the client: the client splits the ids, each ps gathers its rows
    # (returned alone: the gradient's index bookkeeping runs with the update, and each
    # partition makes its own handles), the client computes the loss and the gradients,
    # each ps applies its update. Four Dask tasks a step: no `pick` of a partition's outputs.
    from minigraph.distributed import runtime

    model = Model(dense="")
    submitted = []
    real = runtime._Run._pinned

    def counting(self, fn, *args, address, name=""):
        submitted.append(fn.__name__)
        return real(self, fn, *args, address=address, name=name)

    with mg.Session(model.scope, config(), target=client) as session:
        session.run(model.init)
        losses = model.train_steps(session, 1)
        monkeypatch.setattr(runtime._Run, "_pinned", counting)
        losses += model.train_steps(session, 3, start=1)
        monkeypatch.undo()
        got = session.run(model.variables)
    assert submitted == ["run_partition"] * 12, submitted
    expected, expected_losses = local_reference(4)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)


def test_a_handle_cut_between_partitions_still_names_its_variable_in_the_receiver(client):
    # A VarHandleOp waiting on a control edge is not copied: the update's partition receives
    # the handle, and the runtime still knows that partition needs the variable (what a run
    # after losing the worker checks).
    from ops import AddV2, NoOp

    scope = mg.Scope.new_root_scope()
    ps0 = scope.with_device("/job:ps/task:0")
    ready = NoOp(ps0.with_op_name("ready")).operation
    handle = rv.VarHandleOp(
        ps0.with_control_dependencies([ready]).with_op_name("v"), dtype=mg.float32, shape=[3]
    ).output
    init = rv.AssignVariableOp(ps0, handle, np.ones(3, np.float32)).operation
    read = rv.ReadVariableOp(ps0, handle, dtype=mg.float32).output
    bumped = AddV2(scope.with_op_name("bumped"), read, 1.0)
    update = rv.AssignAddVariableOp(ps0, handle, bumped).operation
    with mg.Session(scope, config(), target=client) as session:
        session.run(init)
        session.run(update)
        assert session.run(read).tolist() == [3.0, 3.0, 3.0]
        (plan,) = [p for p in session._plans.values() if update in p.steps[-1].part.ops]
    last = plan.steps[-1]
    assert not last.is_client and handle in last.part.inputs
    assert last.needs == frozenset({"v"})


def test_values_persist_across_signatures_and_live_on_their_workers(client, by_name):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:ps/task:1"), np.arange(6.0).reshape(3, 2), name="v")
    ids = ops.Placeholder(scope, mg.int32, shape=[None])
    rows = rv.ResourceGather(scope, v, ids, dtype=mg.float64)
    add = rv.ResourceScatterAdd(scope, v, ids, np.ones((1, 2)))
    with mg.Session(scope, config(), target=client) as session:
        session.run(v.initializer)
        session.run(add, {ids: [2]})
        session.run(v.assign_add(np.full((3, 2), 10.0)))
        assert session.run(rows, {ids: [2, 0]}).tolist() == [[15.0, 16.0], [10.0, 11.0]]
        held = stores(client)
        assert [len(held[k]) for k in (0, 1, 2)] == [0, 1, 0]  # ps task 1 = worker "1"
        assert list(held[1].values()) == [1]


def test_variables_on_worker_tasks_and_on_the_client(client):
    scope = mg.Scope.new_root_scope()
    on_worker = mg.Variable(scope.with_device("/job:worker/task:0"), [1.0, 2.0], name="vw")
    on_client = mg.Variable(scope, [3.0, 4.0], name="vc")
    total = ops.AddV2(scope.with_device("/job:worker/task:0"), on_worker, on_client)
    with mg.Session(scope, config(), target=client) as session:
        session.run(mg.global_variables_initializer(scope))
        session.run([on_worker.assign_add([1.0, 1.0]), on_client.assign_sub([1.0, 1.0])])
        assert session.run(total).tolist() == [4.0, 6.0]
        assert session.run([on_worker, on_client])[1].tolist() == [2.0, 3.0]


def test_the_default_cluster_has_worker_tasks_only(client):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:worker/task:2"), [5.0], name="v")
    with mg.Session(scope, target=client) as session:  # no cluster: worker K = the one named K
        session.run(v.initializer)
        assert session.run(v).tolist() == [5.0]


def test_an_update_that_fails_on_a_ps_task_raises_though_nothing_is_fetched(client):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:ps/task:1"), np.zeros((4, 3)), name="v")
    ids = ops.Placeholder(scope, mg.int32, shape=[None])
    add = rv.ResourceScatterAdd(scope.with_op_name("bad_add"), v, ids, np.ones((1, 3)))
    with mg.Session(scope, config(), target=client) as session:
        session.run(v.initializer)
        with pytest.raises(
            mg.InvalidArgumentError, match=r"updates.shape(.|\n)*node bad_add .*on " + PS1
        ):
            session.run(add, {ids: [0, 1]})
        with pytest.raises(mg.InvalidArgumentError, match="updates.shape"):
            session.run(add.operation, {ids: [0, 1]})
        assert session.run(v).tolist() == [[0.0] * 3] * 4


def test_an_uninitialized_ps_variable_is_a_failed_precondition_naming_it_and_its_device(client):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:ps/task:0"), [1.0], name="never_set")
    with mg.Session(scope, config(), target=client) as session:
        with pytest.raises(mg.FailedPreconditionError, match=r"never_set.*\n.*" + PS0):
            session.run(v)
        session.run(v.initializer)
        assert session.run(v).tolist() == [1.0]


def test_a_fetched_ps_value_is_a_copy_and_feeding_a_variable_feeds_its_read(client):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:ps/task:0"), np.zeros(3), name="v")
    doubled = ops.Mul(scope.with_device("/job:worker/task:0"), v.value(), 2.0)
    with mg.Session(scope, config(), target=client) as session:
        session.run(v.initializer)
        before = session.run(v)
        session.run(v.assign_add(np.ones(3)))
        assert before.tolist() == [0.0, 0.0, 0.0]  # the update did not reach the fetched value
        assert not before.flags.writeable  # as a local session's read
        assert session.run(v).tolist() == [1.0, 1.0, 1.0]
        assert session.run(doubled, {v: np.array([1.0, 2.0, 3.0])}).tolist() == [2.0, 4.0, 6.0]
        assert session.run(v).tolist() == [1.0, 1.0, 1.0]  # the feed did not assign it


def test_the_saver_saves_and_restores_ps_variables(client, tmp_path):
    model = Model()
    saver = mg.train.Saver(model.variables)
    with mg.Session(model.scope, config(), target=client) as session:
        session.run(model.init)
        model.train_steps(session, 3)
        saved = session.run(model.variables)
        path = saver.save(session, str(tmp_path / "ckpt"))
        model.train_steps(session, 2, start=3)
    with mg.Session(model.scope, config(), target=client) as other:
        saver.restore(other, path)
        for got, want in zip(other.run(model.variables), saved):
            np.testing.assert_array_equal(got, want)


# -- sessions: isolation, close, threads -------------------------------------------------------


def test_two_sessions_on_one_cluster_are_isolated(client):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:ps/task:0"), [0.0], name="shared_name")
    add = v.assign_add([1.0])
    with (
        mg.Session(scope, config(), target=client) as a,
        mg.Session(scope, config(), target=client) as b,
    ):
        a.run(v.initializer)
        b.run(v.initializer)
        for _ in range(3):
            a.run(add)
        b.run(add)
        assert a.run(v).tolist() == [3.0] and b.run(v).tolist() == [1.0]
        assert len(stores(client)[0]) == 2  # one store per session on ps task 0's worker
    with mg.Session(scope, config(), target=client) as c:  # a new session starts uninitialized
        with pytest.raises(mg.FailedPreconditionError, match="shared_name"):
            c.run(v)


def test_close_frees_the_sessions_values_on_every_worker(client):
    model = Model()
    session = mg.Session(model.scope, config(), target=client)
    session.run(model.init)
    model.train_steps(session, 1)
    held = stores(client)
    assert sorted(sum(held[k].values()) for k in held) == [2, 2, 2]  # a variable, its accum
    session.close()
    assert wait_until(lambda: not any(stores(client).values()), 5.0), stores(client)


def test_concurrent_updates_of_a_ps_variable_from_threads_are_all_applied(client):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:ps/task:1"), np.zeros((4, 3)), name="counter")
    ids = ops.Placeholder(scope, mg.int32, shape=[None])
    add = rv.ResourceScatterAdd(scope, v, ids, np.ones((2, 3)))
    errors = []
    with mg.Session(scope, config(), target=client) as session:
        session.run(v.initializer)

        def work(k):
            try:
                for _ in range(10):
                    session.run(add, {ids: [k % 4, (k + 1) % 4]})
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert session.run(v).tolist() == [[20.0] * 3] * 4


def test_closing_a_session_while_another_thread_trains(client):
    model = Model()
    session = mg.Session(model.scope, config(), target=client)
    session.run(model.init)
    outcome = []

    def train():
        try:
            model.train_steps(session, 10_000)
        except Exception as e:  # noqa: BLE001 - checked below
            outcome.append(e)

    thread = threading.Thread(target=train)
    thread.start()
    time.sleep(0.5)
    session.close()
    thread.join(15)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], mg.FailedPreconditionError), outcome
    assert wait_until(lambda: not any(stores(client).values()), 5.0), stores(client)


# -- bytes on the wire -----------------------------------------------------------------------


def _sparse_step_bytes(client, rows):
    import _dist_ops

    model = Model(rows=rows)
    with mg.Session(model.scope, config(), target=client) as session:
        session.run(model.init)
        model.train_steps(session, 1)  # registers the partitions (the tables travel once)
        client.run(_dist_ops.arrivals)
        model.train_steps(session, 1, start=1)
        log = [e for entries in client.run(_dist_ops.arrivals).values() for e in entries]
    return sum(n for _, how, n in log if how in ("released", "flight"))


def test_a_sparse_steps_bytes_do_not_grow_with_the_table(client):
    import _dist_ops

    client.register_plugin(_dist_ops.Arrivals())
    small = _sparse_step_bytes(client, 100)
    large = _sparse_step_bytes(client, 200_000)  # a 1.6 MB shard per ps task
    # The ids and the rows they name, their gradients and the loss: a few kB either way.
    assert small == large, (small, large)
    # The gathered rows (B * K of D float32s) and their gradients, a few hundred bytes either
    # way; the ids ride inside the task messages. A table shard is 800 B, then 1.6 MB.
    assert small < 4 * (2 * B * K * D * 4), small


# -- hostile input: devices and cluster specs ---------------------------------------------------


def test_a_ps_task_the_cluster_lacks_is_an_invalid_argument_naming_it(client):
    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope.with_device("/job:ps/task:5"), [1.0], name="far")
    strict = config(allow_soft_placement=False)
    with mg.Session(scope, strict, target=client) as session:
        with pytest.raises(mg.InvalidArgumentError, match=r"/job:ps/task:5") as info:
            session.run(v.initializer)
        assert PS1 in str(info.value)  # the devices the cluster has are listed
    no_ps = mg.SessionConfig(allow_soft_placement=False)  # no ps job at all without a spec
    with mg.Session(scope, no_ps, target=client) as session:
        with pytest.raises(mg.InvalidArgumentError, match=r"/job:ps/task:5"):
            session.run(v.initializer)
    # Soft placement (the default, as TF's) puts it on a device the cluster has.
    with mg.Session(scope, config(), target=client) as session:
        metadata = mg.RunMetadata()
        session.run(v.initializer, run_metadata=metadata)
        assert session.run(v).tolist() == [1.0]
        assert "/task:5" not in metadata.placement["far"]


def test_malformed_device_strings_are_refused_naming_them():
    scope = mg.Scope.new_root_scope()
    with pytest.raises(mg.InvalidArgumentError, match=r"'/job:ps/task:x'"):
        scope.with_device("/job:ps/task:x")
    with pytest.raises(mg.InvalidArgumentError, match=r"/job:ps/tsk:0"):
        scope.with_device("/job:ps/tsk:0")


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"ps": -1}, r"cluster\['ps'\]: a count of tasks must be >= 0; got -1"),
        ({"ps": True}, r"cluster\['ps'\] must be a count of tasks or a list.*True"),
        ({"ps": 2.5}, r"cluster\['ps'\] must be a count of tasks or a list.*2.5"),
        ({"ps": "0"}, r"cluster\['ps'\] must be a count of tasks or a list.*'0'"),
        ({"p/s": 1}, r"invalid job name 'p/s'"),
    ],
)
def test_bad_cluster_specs_are_invalid_arguments_naming_the_entry(client, spec, match):
    with pytest.raises(mg.InvalidArgumentError, match=match):
        mg.Session(mg.Scope.new_root_scope(), mg.SessionConfig(cluster=spec), target=client)


def test_counts_and_names_map_the_same_tasks(client, by_name):
    counted = [d for d in mg.list_devices(target=client) if "/job:" in d]
    assert any("/job:worker/replica:0/task:2/" in d for d in counted)
    for spec in (PS, {"ps": ["0", "1"], "worker": ["2"]}, {"ps": [by_name[0], "1"], "worker": 1}):
        scope = mg.Scope.new_root_scope()
        mg.Variable(scope.with_device("/job:ps/task:1"), [1.0], name="v")
        v = mg.Variable(scope.with_device("/job:worker/task:0"), [2.0], name="u")
        with mg.Session(scope, mg.SessionConfig(cluster=spec), target=client) as session:
            session.run(mg.global_variables_initializer(scope))
            session.run(v)
            held = stores(client)
        expected_worker = 2 if spec != {"ps": [by_name[0], "1"], "worker": 1} else 0
        assert len(held[1]) == 1 and len(held[expected_worker]) == 1, (spec, held)


# -- the worker side, in this process -----------------------------------------------------------


def _actor(session, data, names, key):
    feeds, fetches, targets = names
    return mg_worker.PartitionActor(key, data, feeds, fetches, targets, (), "/job:ps/task:0",
                                    {}, session)  # fmt: skip


def test_partitions_of_a_session_share_its_store_until_released_or_all_gone():
    import gc

    from minigraph.distributed import wire

    scope = mg.Scope.new_root_scope()
    v = mg.Variable(scope, [1.0, 2.0], name="v")
    read = v.value()
    data = wire.encode(scope.graph)
    init = _actor("s-test", data, ([], [], [v.initializer.name]), "k-init")
    reader = _actor("s-test", data, ([], [read.name], []), "k-read")
    other = _actor("s-other", data, ([], [read.name], []), "k-other")
    init.run([], False)
    assert reader.run([], False).tolist() == [1.0, 2.0]  # one store for both partitions
    with pytest.raises(mg.FailedPreconditionError, match="Could not find variable v"):
        other.run([], False)  # another session: another store
    assert mg_worker.live_sessions() == {"s-test": 1, "s-other": 0}
    assert mg_worker.release_session("s-test") == 1  # what close runs on the workers
    assert "s-test" not in mg_worker.live_sessions()
    with pytest.raises(mg.FailedPreconditionError, match="Could not find variable v"):
        reader.run([], False)  # its values are gone, though the partition lives on
    assert mg_worker.release_session("s-test") == 0
    # Without a release (the client died), the last partition of a session drops its store.
    lone = _actor("s-lone", data, ([], [], [v.initializer.name]), "k-lone")
    lone.run([], False)
    store = lone.session.resources
    assert len(store) == 1 and mg_worker.live_sessions()["s-lone"] == 1
    del init, reader, other, lone
    gc.collect()
    assert not {"s-lone", "s-other"} & mg_worker.live_sessions().keys()
    assert len(store) == 0
