"""Sessions on a Dask cluster: a LocalCluster of two worker processes (tasks 0 and 1 of job
`worker`), started once for the module. Results must equal the local session's and numpy's;
errors keep their types with the remote device and the user's line; only the needed bytes
move; closing a session frees everything it put on the workers."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import uuid

import numpy as np
import pytest
from _dist_graphs import build, recipes, reference
from hypothesis import HealthCheck, given, settings

import minigraph as mg
from ops import GatherNd, GatherV2, embedding_lookup, gather

distributed = pytest.importorskip("distributed")

from minigraph.distributed import worker as mg_worker  # noqa: E402 - needs distributed

# The client process is a CPU-only machine here (CLIENT), whatever the machine running the tests
# has; workers get simulated GPUs only through _dist_ops.SimulatedGpus.
pytestmark = pytest.mark.usefixtures("cpu_only")

CLIENT = "/job:localhost/replica:0/task:0/device:CPU:0"
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"
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


@pytest.fixture(scope="module")
def addresses(client):
    """Worker addresses by task: [task 0's, task 1's]."""
    workers = client.scheduler_info()["workers"]
    return [a for _, a in sorted((int(w["name"]), a) for a, w in workers.items())]


@pytest.fixture
def scope():
    return mg.Scope.new_root_scope()


@pytest.fixture(scope="module")
def arrivals(client):
    """A function returning what entered each worker's memory since its last call, as
    (key, how, nbytes): how is 'released' (scattered), 'flight' (from a worker), 'executing'."""
    import _dist_ops

    client.register_plugin(_dist_ops.Arrivals())

    def new():
        return [entry for log in client.run(_dist_ops.arrivals).values() for entry in log]

    new()
    return new


def worker_state(client):
    """Per worker: (live partitions, actors, values in memory)."""

    def state(dask_worker):
        import gc

        gc.collect()
        return (
            len(mg_worker.live_partitions()),
            len(dask_worker.state.actors),
            len(dask_worker.data),
        )

    return client.run(state)


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- devices -------------------------------------------------------------------------------------


def test_list_devices_names_every_task(client, addresses):
    assert mg.list_devices(target=client) == [CLIENT, W0, W1]
    verbose = mg.list_devices(verbose=True, target=client)
    assert verbose[0].startswith(CLIENT + ": ")
    assert f"{W1}: host memory, numpy kernels; worker {addresses[1]}" in verbose


# -- results -------------------------------------------------------------------------------------


def test_a_chain_across_both_workers_and_back(client, scope):
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[None])
    w0, w1 = scope.with_device("/job:worker/task:0"), scope.with_device("/job:worker/task:1")
    table = mg.Const(w0.with_op_name("table"), np.arange(10, dtype=np.float32) * 10)
    a = gather(w0.with_op_name("a"), table, x)
    b = gather(w1.with_op_name("b"), a, [1, 0])
    c = gather(scope.with_op_name("c"), b, [0])
    feed = {x: np.array([3, 4], np.int32)}
    with mg.Session(scope) as local:
        expected = local.run([c, a, b], feed)
    metadata = mg.RunMetadata()
    with mg.Session(scope, target=client) as session:
        got = session.run([c, a, b], feed, run_metadata=metadata)
        assert session.run({"c": c}, feed)["c"].tolist() == [40.0]
    for value, want in zip(got, expected):
        np.testing.assert_array_equal(value, want)
    assert [metadata.placement[n] for n in ("table", "a", "b", "c")] == [W0, W0, W1, CLIENT]


def test_a_fetched_fed_tensor_and_a_fetched_operation(client, scope):
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, shape=[2])
    g = gather(scope.with_device("/job:worker/task:1").with_op_name("g"), x, [1])
    with mg.Session(scope, target=client) as session:
        value, op_value, fed = session.run([g, g.operation, x], {x: [5.0, 6.0]})
    assert value.tolist() == [6.0] and op_value is None and fed.tolist() == [5.0, 6.0]


def test_large_feeds_are_scattered_and_small_ones_travel_in_the_task(client, scope):
    x = mg.Placeholder(scope.with_op_name("x"), mg.int64, shape=[None])
    table = mg.Const(scope.with_device("/job:worker/task:0").with_op_name("t"), np.arange(50.0))
    g = gather(scope.with_device("/job:worker/task:0").with_op_name("g"), table, x)
    with mg.Session(scope, target=client) as session:
        for n in (3, 100_000):  # 24 bytes, 800 kB
            ids = np.arange(n, dtype=np.int64) % 50
            np.testing.assert_array_equal(session.run(g, {x: ids}), ids.astype(np.float64))


def test_strings_and_other_dtypes_cross_tasks(client, scope):
    words = mg.Const(scope.with_device("/job:worker/task:0"), np.array([b"a", b"bc", b"d"], object))
    picked = gather(scope.with_device("/job:worker/task:1"), words, [2, 0])
    halves = mg.Const(scope.with_device("/job:worker/task:1"), np.arange(4, dtype=np.float16))
    back = gather(scope, halves, [3])
    # An attr TensorFlow's GatherNd lacks: the partition's GraphDef says so; workers read it.
    nd = GatherNd(
        scope.with_device("/job:worker/task:0"), [[1, 2], [3, 4]], [[1], [0]], batch_dims=1
    )
    with mg.Session(scope, target=client) as session:
        got_words, got_halves, got_nd = session.run([picked, back, nd])
    assert got_words.tolist() == [b"d", b"a"]
    assert got_halves.dtype == np.float16 and got_halves.tolist() == [3.0]
    assert got_nd.tolist() == [2, 3]


def test_control_dependencies_across_tasks(client, scope):
    a = gather(scope.with_device("/job:worker/task:0").with_op_name("a"), [1.0, 2.0], [1])
    b = gather(scope.with_device("/job:worker/task:1").with_control_dependencies(a), [3.0], [0])
    c = gather(scope.with_control_dependencies(b).with_op_name("c"), [4.0], [0])
    with mg.Session(scope, target=client) as session:
        assert session.run(c).tolist() == [4.0]
        assert session.run([b, a.operation])[0].tolist() == [3.0]


def test_runs_from_several_threads(client, scope):
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[None])
    a = gather(scope.with_device("/job:worker/task:0"), np.arange(100.0), x)
    b = gather(scope.with_device("/job:worker/task:1"), a, [0])
    errors = []
    with mg.Session(scope, target=client) as session:

        def work(k):
            try:
                for i in range(5):
                    assert session.run(b, {x: [k * 10 + i]}).tolist() == [k * 10.0 + i]
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recipe=recipes())
def test_random_gather_graphs_on_the_cluster_equal_the_local_session(client, recipe):
    scope, fetches, feeds = build(recipe)
    with mg.Session(scope, target=client) as session:
        got = session.run(fetches, feeds)
    with mg.Session(scope) as local:  # the same graph, every request falling back locally
        expected_local = local.run(fetches, feeds)
    for value, local_value, expected in zip(got, expected_local, reference(recipe)):
        np.testing.assert_array_equal(value, expected)
        np.testing.assert_array_equal(value, local_value)
        assert value.dtype == local_value.dtype and value.shape == local_value.shape


# -- placement, logs and traces ------------------------------------------------------------------


def test_log_device_placement_and_the_trace_show_remote_devices(client, scope, capsys):
    a = gather(scope.with_device("/job:worker/task:0").with_op_name("a"), [1.0, 2.0], [1])
    b = gather(scope.with_device("/job:worker/task:1").with_op_name("b"), a, [0])
    c = gather(scope.with_op_name("c"), b, [0])
    metadata = mg.RunMetadata()
    config = mg.SessionConfig(log_device_placement=True)
    before = time.time() * 1e6
    with mg.Session(scope, config, target=client) as session:
        session.run(c, options=mg.RunOptions(trace=True), run_metadata=metadata)
    after = time.time() * 1e6
    err = capsys.readouterr().err
    assert f"a: (GatherV2): {W0}" in err and f"b: (GatherV2): {W1}" in err
    assert f"c: (GatherV2): {CLIENT}" in err
    by_node = {s.node: s for s in metadata.step_stats}
    assert (by_node["a"].device, by_node["b"].device, by_node["c"].device) == (W0, W1, CLIENT)
    # Timings measured on the workers, in wall-clock time, in run order.
    assert before <= by_node["a"].start_us <= by_node["b"].start_us <= by_node["c"].start_us
    assert by_node["c"].start_us <= after
    trace = metadata.chrome_trace()
    rows = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert rows == {W0, W1, CLIENT}


def test_worker_gpus_are_task_devices(client, scope):
    import _dist_ops

    client.register_plugin(_dist_ops.SimulatedGpus())
    try:
        gpu1 = "/job:worker/replica:0/task:1/device:GPU:0"
        assert mg.list_devices(target=client) == [
            CLIENT, W0, "/job:worker/replica:0/task:0/device:GPU:0", W1, gpu1,
        ]  # fmt: skip
        table = mg.Const(scope.with_device(W1).with_op_name("table"), np.arange(6.0))
        g = gather(scope.with_device(gpu1).with_op_name("g"), table, [4, 1])
        cpu = gather(scope.with_device("/job:worker/task:0/device:GPU:5").with_op_name("c"), g, [0])
        metadata = mg.RunMetadata()
        with mg.Session(scope, target=client) as session:
            got = session.run(cpu, options=mg.RunOptions(trace=True), run_metadata=metadata)
        assert got.tolist() == [4.0]
        # Soft placement keeps task 0 for the missing GPU:5: its GPU:0 (GPUs come first).
        assert (metadata.placement["g"], metadata.placement["c"]) == (
            gpu1,
            "/job:worker/replica:0/task:0/device:GPU:0",
        )
        devices = {s.node: s.device for s in metadata.step_stats}
        assert (devices["g"], devices["c"]) == (gpu1, metadata.placement["c"])
    finally:
        client.unregister_worker_plugin(_dist_ops.SimulatedGpus.name)
    assert mg.list_devices(target=client) == [CLIENT, W0, W1]


def test_strict_placement_of_a_task_the_cluster_lacks(client, scope):
    g = gather(scope.with_device("/job:worker/task:7").with_op_name("g"), [1.0], [0])
    strict = mg.SessionConfig(allow_soft_placement=False)
    with mg.Session(scope, strict, target=client) as session:
        with pytest.raises(
            mg.InvalidArgumentError, match="no device matches '/job:worker/task:7'"
        ) as info:
            session.run(g)
    assert f"(have ['{CLIENT}', '{W0}', '{W1}'])" in str(info.value)
    metadata = mg.RunMetadata()
    with mg.Session(scope, target=client) as session:  # soft: the client
        assert session.run(g, run_metadata=metadata).tolist() == [1.0]
    assert metadata.placement["g"] == CLIENT


def test_cluster_config_maps_jobs_and_tasks_to_workers(client, addresses):
    import _dist_ops

    pids = client.run(os.getpid)
    scope = mg.Scope.new_root_scope()
    ps = _dist_ops.DistTestPid(scope.with_device("/job:ps/task:0").with_op_name("ps"))
    worker = _dist_ops.DistTestPid(scope.with_device("/job:worker/task:0").with_op_name("w"))
    config = mg.SessionConfig(
        cluster={"ps": [addresses[1]], "worker": ["0"]},  # an address and a worker name
        op_modules=["_dist_ops"],
    )
    metadata = mg.RunMetadata()
    with mg.Session(scope, config, target=client) as session:
        got = session.run([ps, worker], run_metadata=metadata)
    assert [int(v) for v in got] == [pids[addresses[1]], pids[addresses[0]]]
    assert metadata.placement["ps"] == "/job:ps/replica:0/task:0/device:CPU:0"
    assert mg.list_devices(target=client)[1:] == [W0, W1]  # unchanged by a session's config


# -- errors --------------------------------------------------------------------------------------


def test_a_kernel_error_on_a_worker_keeps_its_type_node_device_and_line(client, scope):
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[None])
    bad = gather(scope.with_device("/job:worker/task:1").with_op_name("bad"), [1.0, 2.0], x)
    line = sys._getframe().f_lineno - 1
    out = gather(scope.with_op_name("out"), bad, [0])
    with mg.Session(scope, target=client) as session:
        with pytest.raises(mg.InvalidArgumentError) as info:
            session.run(out, {x: [0, 5]})
        assert session.run(out, {x: [1]}).tolist() == [2.0]  # the session still works
    e = info.value
    assert (e.node_name, e.op_type) == ("bad", "GatherV2")
    assert str(e).startswith("indices[1] = 5 is not in [0, 2)")
    assert f"[[node bad (GatherV2) on {W1}, defined at {__file__}:{line}]]" in str(e)


def test_an_op_type_the_worker_lacks_is_not_found_naming_worker_and_op(client, scope, addresses):
    name = f"DistTestClientOnly{uuid.uuid4().hex[:8]}"
    builder = mg.register_op(
        mg.OpDef(
            name,
            inputs=["x: T"],
            outputs=["y: T"],
            attrs=["T: type"],
            shape_fn=lambda ctx: ctx.input_shapes[0],
        )
    )
    mg.register_kernel(name, "CPU", lambda ctx, x, **_: x)
    y = builder(scope.with_device("/job:worker/task:0").with_op_name("y"), [1.0])
    with mg.Session(scope, target=client) as session:
        with pytest.raises(mg.NotFoundError) as info:
            session.run(y)
    message = str(info.value)
    assert f"worker {addresses[0]}" in message and "/job:worker/replica:0/task:0" in message
    assert f"{name!r} (first used by node 'y')" in message


def test_op_modules_are_imported_on_every_worker(client, scope):
    import _dist_ops

    a = _dist_ops.DistTestSleep(scope.with_device("/job:worker/task:0"), [1.0], 0.0)
    b = _dist_ops.DistTestSleep(scope.with_device("/job:worker/task:1"), a, 0.0)
    with mg.Session(scope, OPS, target=client) as session:
        assert session.run(b).tolist() == [1.0]
    imported = client.run(lambda: "_dist_ops" in sys.modules)
    assert set(imported.values()) == {True}


def test_an_op_module_a_worker_cannot_import(client, scope):
    config = mg.SessionConfig(op_modules=["no_such_module_anywhere"])
    with pytest.raises(
        mg.NotFoundError,
        match="op module 'no_such_module_anywhere' cannot be imported on worker tcp://",
    ):
        mg.Session(scope, config, target=client)


def test_bad_targets_and_configs():
    scope = mg.Scope.new_root_scope()
    with pytest.raises(
        mg.InvalidArgumentError,
        match="a session target is a distributed.Client or a scheduler address",
    ):
        mg.Session(scope, target=42)
    with pytest.raises(mg.InvalidArgumentError, match="apply to distributed sessions only"):
        mg.Session(scope, mg.SessionConfig(cluster={"worker": ["tcp://x:1"]}))
    with pytest.raises(
        mg.InvalidArgumentError, match="connect_timeout must be a number of seconds > 0"
    ):
        mg.Session(scope, mg.SessionConfig(connect_timeout=0), target="tcp://127.0.0.1:1")
    with pytest.raises(mg.InvalidArgumentError, match="SessionConfig.cluster maps job names"):
        mg.Session(scope, mg.SessionConfig(cluster=["tcp://x:1"]), target="tcp://127.0.0.1:1")


def test_a_closed_client_is_unavailable(client):
    other = distributed.Client(client.scheduler.address, set_as_default=False)
    other.close()
    with pytest.raises(mg.UnavailableError, match="is closed"):
        mg.Session(mg.Scope.new_root_scope(), target=other)


def test_a_scheduler_that_does_not_answer_is_unavailable_within_the_timeout():
    scope = mg.Scope.new_root_scope()
    config = mg.SessionConfig(connect_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(
        mg.UnavailableError,
        match=r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:1' within 0.5 s",
    ):
        mg.Session(scope, config, target="tcp://127.0.0.1:1")
    assert time.monotonic() - start < 5


def test_a_closed_session_refuses_to_run(client, scope):
    g = gather(scope.with_device("/job:worker/task:0"), [1.0], [0])
    session = mg.Session(scope, target=client)
    session.close()
    with pytest.raises(mg.FailedPreconditionError):
        session.run(g)


def test_a_session_made_from_an_address_owns_its_client(client, scope):
    g = gather(scope.with_device("/job:worker/task:1"), [1.0, 2.0], [1])
    session = mg.Session(scope, target=client.scheduler.address)
    assert session.run(g).tolist() == [2.0]
    own = session._remote.client
    session.close()
    assert own.status == "closed" and client.status == "running"


# -- data movement and state -------------------------------------------------------------------


def transfer_logs(client):
    """Per worker: (incoming worker-to-worker transfers, outgoing transfers), as Dask logs them."""
    return client.run(
        lambda dask_worker: (
            list(dask_worker.transfer_incoming_log),
            list(dask_worker.transfer_outgoing_log),
        )
    )


def test_cut_edges_move_worker_to_worker_and_only_fetches_reach_the_client(
    client, scope, addresses, arrivals
):
    rows = np.arange(20_000 * 8, dtype=np.float32).reshape(20_000, 8)
    table = mg.Const(scope.with_device("/job:worker/task:0").with_op_name("table"), rows)
    x = mg.Placeholder(scope.with_op_name("x"), mg.int64, shape=[None])
    picked = gather(scope.with_device("/job:worker/task:0").with_op_name("picked"), table, x)
    out = gather(scope.with_device("/job:worker/task:1").with_op_name("out"), picked, [0, 1])
    ids = np.arange(0, 20_000, 2, dtype=np.int64)  # 80 kB: scattered to worker 0
    with mg.Session(scope, target=client) as session:
        session.run(out, {x: ids})  # registers the partitions
        before = transfer_logs(client)
        arrivals()
        got = session.run(out, {x: ids})
        after = transfer_logs(client)
        arrived = arrivals()
    np.testing.assert_array_equal(got, rows[ids][:2])
    # Into the workers: the ids (scattered), the picked rows (from worker 0), two results.
    by_how = {how: sorted(n for _, h, n in arrived if h == how) for _, how, _ in arrived}
    assert set(by_how) == {"released", "flight", "executing"}
    assert by_how["released"] == pytest.approx([ids.nbytes], abs=200)
    assert by_how["flight"] == pytest.approx([rows[ids].nbytes], abs=200)
    assert by_how["executing"] == pytest.approx(sorted([got.nbytes, rows[ids].nbytes]), abs=200)

    def new(address, which):
        return after[address][which][len(before[address][which]) :]

    # Worker 1 fetched worker 0's picked rows itself: one transfer, the cut edge's bytes.
    incoming = new(addresses[1], 0)
    assert len(incoming) == 1 and incoming[0]["who"] == addresses[0]
    assert incoming[0]["total"] == pytest.approx(rows[ids].nbytes, rel=0.01)
    assert new(addresses[0], 0) == []
    # The client received only the fetched value, from worker 1; worker 0 sent only the cut edge.
    sent1 = new(addresses[1], 1)
    assert [e["total"] for e in sent1] == [pytest.approx(got.nbytes, abs=200)]
    sent0 = new(addresses[0], 1)
    assert [e["who"] for e in sent0] == [addresses[1]]


def test_a_sharded_lookup_moves_the_ids_and_the_rows_and_nothing_else(
    client, scope, addresses, arrivals
):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((50_000, 8)).astype(np.float32)
    shards = [
        mg.Const(scope.with_device(f"/job:worker/task:{k}").with_op_name(f"shard{k}"), table[k::2])
        for k in range(2)
    ]
    ids = mg.Placeholder(scope.with_op_name("ids"), mg.int64, shape=[None])
    rows = embedding_lookup(scope, shards, ids)
    wanted = rng.integers(0, 50_000, 40_000)  # 160 kB of int32 ids, about half per shard
    with mg.Session(scope, target=client) as session:
        session.run(rows, {ids: wanted})  # registers the partitions (ships the shards)
        before = transfer_logs(client)
        arrivals()
        got = session.run(rows, {ids: wanted})
        arrived = arrivals()
        after = transfer_logs(client)
    np.testing.assert_array_equal(got, table[wanted])
    # Into the workers: each shard's ids, scattered by the client; each shard's rows, computed.
    scattered = [n for _, how, n in arrived if how == "released"]
    computed = [n for _, how, n in arrived if how == "executing"]
    # The lookup narrows the ids to int32 (the table's 50000 rows fit) before partitioning them.
    assert len(scattered) == 2 and sum(scattered) == wanted.astype(np.int32).nbytes
    assert len(computed) == 2 and sum(computed) == got.nbytes
    assert not [a for a in arrived if a[1] not in ("released", "executing")]  # nothing between
    # Out of the workers: only the rows, to the client.
    sent = [
        e["total"] for address in addresses for e in after[address][1][len(before[address][1]) :]
    ]
    assert sorted(sent) == sorted(computed)


def test_closing_sessions_frees_every_partition_and_value(client, scope):
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[None])
    table = mg.Const(scope.with_device("/job:worker/task:0"), np.arange(1000.0))
    a = gather(scope.with_device("/job:worker/task:0"), table, x)
    b = gather(scope.with_device("/job:worker/task:1"), a, [0, 1])
    # Earlier tests' sessions are released asynchronously: start from a quiet cluster.
    assert wait_until(lambda: all(s[:2] == (0, 0) for s in worker_state(client).values()))
    baseline = worker_state(client)
    tasks = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
    for i in range(20):
        with mg.Session(scope, target=client) as session:
            assert session.run(b, {x: [i, i + 1]}).tolist() == [float(i), i + 1.0]
            assert all(n == 1 for n, _, _ in worker_state(client).values())
    assert wait_until(lambda: worker_state(client) == baseline), (worker_state(client), baseline)
    assert wait_until(
        lambda: client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == tasks
    )


def test_identical_partitions_of_two_signatures_are_registered_once(client, scope):
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[None])
    a = gather(scope.with_device("/job:worker/task:0").with_op_name("a"), np.arange(9.0), x)
    b = gather(scope.with_op_name("b"), a, [0])
    c = gather(scope.with_op_name("c"), a, [-1 + 1])
    with mg.Session(scope, target=client) as session:
        session.run(b, {x: [1]})
        session.run(c, {x: [2]})
        session.run([b, c], {x: [3]})
        counts = [n for n, _, _ in worker_state(client).values()]
    assert sorted(counts) == [0, 1]


def test_a_large_constant_is_shipped_once_not_per_run(client, scope, arrivals):
    big = np.random.default_rng(0).random((256, 1024), np.float32)  # 1 MiB, not a splat
    table = mg.Const(scope.with_device("/job:worker/task:1").with_op_name("big"), big)
    g = GatherV2(scope.with_device("/job:worker/task:1"), table, [0], 0)
    with mg.Session(scope, target=client) as session:
        session.run(g)
        registration = arrivals()
        for _ in range(3):
            session.run(g)
        runs = arrivals()
    # Registration scattered the partition (the constant inside) to worker 1, once.
    assert [n for _, how, n in registration if how == "released"] == [
        pytest.approx(big.nbytes, rel=0.01)
    ]
    # Each run: one computed row (4 KiB) on worker 1, nothing scattered or fetched.
    assert [how for _, how, _ in runs] == ["executing"] * 3
    assert all(n < 5000 for _, _, n in runs)
