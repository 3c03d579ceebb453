"""Sessions on a Dask cluster: a LocalCluster of 2 worker processes, 1 thread each.

What is measured (medians over interleaved repeats, ratios per repeat, all in one process):
- fixed cost of a run spanning two workers: a fed [4] int32 ids -> a gather on worker 0 -> a
  gather on worker 1 -> fetched, against the same graph in a local session (where the
  `/job:worker` requests fall back to the client's CPU). Also one worker, and a distributed
  session whose graph stays on the client (no Dask call per run). A bare Dask round trip
  (`client.submit(f, x, workers=[w0]).result()`) shows the engine's own floor.
- a sharded lookup: `embedding_lookup` of 1e6 int64 ids in a [1e6, 16] float32 table split
  "mod"-wise over the two workers (a Const shard per task), against the same graph run by a
  local session. Bytes moved per run come from Dask's own records on the workers: what entered
  each worker's memory (a worker plugin's transition hook: scattered by the client, fetched
  from another worker, computed there) and what each worker sent (`transfer_outgoing_log`).
  They must be the ids and the gathered rows and nothing else.
- sessions opened and closed (1000 in full mode): what stays on the workers (registered
  partitions, actors, values) and on the scheduler (tasks) afterwards.
- a training step with parameter servers (the two workers as `/job:ps/task:0` and `:1`,
  `SessionConfig(cluster={"ps": 2})`): a [1e5, 32] float32 embedding table split "mod"-wise
  into one Variable per ps task, batch 256 x 8 int32 ids, mean over the ids, a dense layer to
  10 classes on the client, mean sparse softmax cross-entropy, `AdagradOptimizer(0.1)`: each
  ps gathers its rows and applies its sparse update (ResourceSparseApplyAdagrad) where the
  shard lives. Against bare Dask moving the same bytes in the same pattern: a `np.take` of
  the same ids pinned to each ps worker (its shard a scattered array), the rows gathered to
  the client, then an `np.add.at` of same-sized gradient rows pinned to each worker, waited
  for. Bytes per step from the same worker records as the lookup's, and the same step with a
  table 10x smaller (bytes must not change). Smoke mode uses a [1000, 32] table.
Quick mode divides the lookup sizes by 10 and opens fewer sessions.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import numpy as np

import minigraph
from benchmarks._config import Bench
from benchmarks._report import cell, num, ratio_cell
from benchmarks._timing import Stats, interleaved, paired
from minigraph import Scope, Session
from ops import Const, Placeholder, embedding_lookup, gather

__all__ = ["run", "Arrivals"]

SECTION = "distributed"
HEADING = "Distributed sessions on a 2-worker LocalCluster"

try:
    from distributed import WorkerPlugin
except ImportError:  # the section says so and returns
    WorkerPlugin = object  # type: ignore[assignment,misc]


class Arrivals(WorkerPlugin):  # type: ignore[misc,valid-type]
    """Dask's record of what enters a worker's memory: (key, from state, nbytes) per value.

    'released' -> memory: scattered by the client; 'flight': fetched from another worker;
    'executing': computed there.
    """

    name = "minigraph-bench-arrivals"

    def setup(self, worker: Any) -> None:
        self.worker = worker
        self.log: list[tuple[str, str, int]] = []

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish == "memory":
            ts = self.worker.state.tasks.get(key)
            self.log.append((str(key), start, -1 if ts is None else ts.nbytes))


def _drain(dask_worker: Any) -> dict[str, Any]:
    plugin = dask_worker.plugins[Arrivals.name]
    log, plugin.log = plugin.log, []
    sent = [(e["who"], e["total"]) for e in dask_worker.transfer_outgoing_log]
    dask_worker.transfer_outgoing_log.clear()
    return {"in": log, "sent": sent}


def _state(dask_worker: Any) -> tuple[int, int, int]:
    from minigraph.distributed import worker  # noqa: PLC0415

    gc.collect()
    return (len(worker.live_partitions()), len(dask_worker.state.actors), len(dask_worker.data))


def _chain(two_workers: bool) -> tuple[Scope, Any, Any]:
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.int32, shape=[4])
    table = Const(root.with_device("/job:worker/task:0"), np.arange(16, dtype=np.float32))
    y = gather(root.with_device("/job:worker/task:0"), table, x)
    if two_workers:
        y = gather(root.with_device("/job:worker/task:1"), y, [3, 2, 1, 0])
    return root, x, y


def _fixed_costs(bench: Bench, client: Any, addresses: list[str]) -> list[list[str]]:
    report, mode = bench.report, bench.mode
    repeats = max(3, mode.exec_samples)
    feed = np.array([3, 1, 2, 0], np.int32)
    sessions: list[Session] = []
    fns = {}
    for name, two in (("two workers", True), ("one worker", False)):
        root, x, y = _chain(two)
        remote, local = Session(root, target=client), Session(root)
        sessions += [remote, local]
        expected = local.run(y, {x: feed})
        if not np.array_equal(remote.run(y, {x: feed}), expected):
            raise AssertionError(f"{name}: the distributed result differs from the local one")
        fns[name] = lambda s=remote, y=y, x=x: s.run(y, {x: feed})
        fns[f"{name} local"] = lambda s=local, y=y, x=x: s.run(y, {x: feed})
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.int32, shape=[4])
    y = gather(root, np.arange(16, dtype=np.float32), x)
    client_only = Session(root, target=client)
    sessions.append(client_only)
    fns["client only"] = lambda: client_only.run(y, {x: feed})

    def bare(chained: bool) -> Any:
        pin = {"allow_other_workers": False, "pure": False}
        future = client.submit(np.negative, feed, workers=[addresses[0]], **pin)
        if chained:
            future = client.submit(np.negative, future, workers=[addresses[1]], **pin)
        return future.result()

    fns["bare Dask, one task"] = lambda: bare(False)
    fns["bare Dask, two chained"] = lambda: bare(True)
    try:
        samples = interleaved(fns, repeats, warmup=2)
    finally:
        for s in sessions:
            s.close()
    rows = []
    for name in ("two workers", "one worker"):
        mine = Stats.of(samples[name]).scaled(1e3)
        base = Stats.of(samples[f"{name} local"]).scaled(1e3)
        ratio = paired(lambda a, b: a / b, samples[name], samples[f"{name} local"])
        rows.append([f"run spanning {name}", cell(mine), "local " + cell(base), ratio_cell(ratio)])
        report.add(SECTION, f"fixed cost, {name}", "time distributed", mine, "ms")
        report.add(SECTION, f"fixed cost, {name}", "time local", base, "ms")
        report.add(SECTION, f"fixed cost, {name}", "ratio distributed/local", ratio, "x",
                   baseline="local session")  # fmt: skip
    for name, ours in (("one task", "one worker"), ("two chained", "two workers")):
        bare_stats = Stats.of(samples[f"bare Dask, {name}"]).scaled(1e3)
        ratio = paired(lambda a, b: a / b, samples[ours], samples[f"bare Dask, {name}"])
        rows.append([f"  bare Dask, {name} (submit pinned, result)", cell(bare_stats),
                     f"minigraph/Dask {num(ratio.median)}", ""])  # fmt: skip
        report.add(SECTION, f"bare Dask, {name}", "time", bare_stats, "ms")
        report.add(SECTION, f"fixed cost, {ours}", "ratio minigraph/bare Dask", ratio, "x",
                   baseline=f"bare Dask, {name}")  # fmt: skip
    only = Stats.of(samples["client only"]).scaled(1e3)
    rows.append(["distributed session, graph on the client", cell(only), "", ""])
    report.add(SECTION, "graph on the client", "time distributed", only, "ms")
    return rows


def _lookup(bench: Bench, client: Any, addresses: list[str]) -> tuple[list[list[str]], list[str]]:
    report, mode = bench.report, bench.mode
    n = max(1000, 1_000_000 // mode.kernel_divisor)
    rows, width = n, 16
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, width)).astype(np.float32)
    root = Scope.new_root_scope()
    shards = [Const(root.with_device(f"/job:worker/task:{k}"), table[k::2]) for k in range(2)]
    ids = Placeholder(root, minigraph.int64, shape=[None])
    out = embedding_lookup(root, shards, ids)
    feed = {ids: rng.integers(0, rows, n, dtype=np.int64)}
    expected = table[feed[ids]]
    remote, local = Session(root, target=client), Session(root)
    try:
        start = time.perf_counter()
        first = remote.run(out, feed)
        first_s = time.perf_counter() - start
        problems = [] if np.array_equal(first, expected) else ["distributed lookup is wrong"]
        client.run(_drain)
        remote.run(out, feed)  # one run, recorded alone
        moved = client.run(_drain)
        samples = interleaved(
            {"distributed": lambda: remote.run(out, feed), "local": lambda: local.run(out, feed)},
            mode.kernel_repeats,
            warmup=1,
        )
    finally:
        remote.close()
        local.close()
    scattered = sum(n for w in moved.values() for _, how, n in w["in"] if how == "released")
    between = sum(n for w in moved.values() for _, how, n in w["in"] if how == "flight")
    to_client = sum(t for w, rec in moved.items() for who, t in rec["sent"] if who not in moved)
    from minigraph.distributed.runtime import EMBED_BYTES  # noqa: PLC0415 - needs Dask

    # embedding_lookup narrows the ids to int32 when the table's rows fit before sharding them.
    shipped = np.int32 if rows <= np.iinfo(np.int32).max else np.int64
    ids_bytes, rows_bytes = feed[ids].astype(shipped).nbytes, expected.nbytes
    embedded = ids_bytes / 2 <= EMBED_BYTES  # then the ids travel inside the task messages
    extra = scattered + between + to_client - rows_bytes - (0 if embedded else ids_bytes)
    case = f"{n} ids, table [{rows},{width}] f32 in 2 shards"
    mine = Stats.of(samples["distributed"]).scaled(1e3)
    base = Stats.of(samples["local"]).scaled(1e3)
    ratio = paired(lambda a, b: a / b, samples["distributed"], samples["local"])
    table_rows = [[f"embedding_lookup, {case}", cell(mine), "local " + cell(base),
                   ratio_cell(ratio)]]  # fmt: skip
    report.add(SECTION, case, "time distributed", mine, "ms")
    report.add(SECTION, case, "time local", base, "ms")
    report.add(SECTION, case, "ratio distributed/local", ratio, "x", baseline="local session")
    report.add(SECTION, case, "first run (registers and ships the shards)", first_s * 1e3, "ms")
    for metric, value in (
        ("bytes client->workers", scattered), ("bytes worker->worker", between),
        ("bytes workers->client", to_client), ("ids bytes", ids_bytes),
        ("rows bytes", rows_bytes), ("bytes besides ids and rows", extra),
    ):  # fmt: skip
        report.add(SECTION, case, metric, float(value), "B")
    notes = [
        f"{case}, bytes per run from Dask's records on the workers: client->workers "
        f"{scattered:,} (the ids, as {np.dtype(shipped).name}: {ids_bytes:,}"
        + (", sent inside the task messages: under 64 KiB per shard" if embedded else "")
        + f"), worker->worker {between:,}, workers->client {to_client:,} (the rows: "
        f"{rows_bytes:,}); besides ids and rows: {extra:,}.",
        f"first run (registers the partitions, ships the shards once): {num(first_s * 1e3)} ms",
        *problems,
    ]
    return table_rows, notes


PS_DIM, PS_BATCH, PS_IDS, PS_CLASSES = 32, 256, 8, 10


def _ps_model(rows: int) -> tuple[Scope, Any, Any, Any, Any, list[Any]]:
    """(scope, ids, labels, loss, train op, variables): the embedding classifier of the
    parameter-server case, its table on /job:ps/task:0 and :1 and the rest on the client."""
    from minigraph import Variable, global_variables_initializer  # noqa: PLC0415
    from minigraph.train import AdagradOptimizer  # noqa: PLC0415
    from ops import MatMul, Mean, Reshape, SparseSoftmaxCrossEntropyWithLogits  # noqa: PLC0415

    rng = np.random.default_rng(0)
    table = (rng.standard_normal((rows, PS_DIM)) * 0.1).astype(np.float32)
    root = Scope.new_root_scope()
    shards = [
        Variable(root.with_device(f"/job:ps/task:{k}"), table[k::2], name=f"emb{k}")
        for k in range(2)
    ]
    dense = Variable(root, (rng.standard_normal((PS_DIM, PS_CLASSES)) * 0.1).astype(np.float32),
                     name="dense")  # fmt: skip
    ids = Placeholder(root, minigraph.int32, shape=[PS_BATCH, PS_IDS])
    labels = Placeholder(root, minigraph.int32, shape=[PS_BATCH])
    rows_of = embedding_lookup(root, shards, Reshape(root, ids, [-1]))
    mean = Mean(root, Reshape(root, rows_of, [PS_BATCH, PS_IDS, PS_DIM]), [1])
    xent = SparseSoftmaxCrossEntropyWithLogits(root, MatMul(root, mean, dense), labels)
    loss = Mean(root, xent.loss, [0]).output
    train = AdagradOptimizer(0.1).minimize(loss)
    init = global_variables_initializer(root)
    return root, ids, labels, loss, (train, init), shards


def _take(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return np.take(table, ids, axis=0)


def _add_at(table: np.ndarray, ids: np.ndarray, rows: np.ndarray) -> None:
    np.add.at(table, ids, rows)  # in place, in the worker's memory, as the shard's update


def _ps_step(bench: Bench, client: Any, addresses: list[str]) -> tuple[list[list[str]], list[str]]:
    """One training step with the table on two ps tasks, against bare Dask (see the module
    docstring); bytes per step for two table sizes."""
    report, mode = bench.report, bench.mode
    rows = 100_000 if mode.name != "smoke" else 1000
    config = minigraph.SessionConfig(cluster={"ps": 2})
    rng = np.random.default_rng(1)
    batches = [
        (rng.integers(0, rows, (PS_BATCH, PS_IDS)).astype(np.int32),
         rng.integers(0, PS_CLASSES, PS_BATCH).astype(np.int32))
        for _ in range(8)
    ]  # fmt: skip
    moved: dict[int, int] = {}
    sessions = []
    try:
        for size in (rows // 10, rows):
            root, ids, labels, loss, (train, init), _ = _ps_model(size)
            session = Session(root, config, target=client)
            sessions.append(session)
            session.run(init)
            feed = {ids: batches[0][0] % size, labels: batches[0][1]}
            session.run(train, feed)  # registers the partitions
            client.run(_drain)
            session.run(train, feed)
            moved[size] = _bytes_in(client.run(_drain))
            if size == rows:
                step_session, step_names = session, (ids, labels, loss, train)
        ids, labels, loss, train = step_names
        counter = iter(range(1 << 30))

        def ours() -> Any:
            b = batches[next(counter) % len(batches)]
            return step_session.run([loss, train], {ids: b[0], labels: b[1]})

        shards = [
            client.scatter(np.zeros((rows // 2, PS_DIM), np.float32), workers=[a], hash=False)
            for a in addresses
        ]
        pin: dict[str, Any] = {"allow_other_workers": False, "pure": False}
        shard_ids = [
            [np.unique(b[0].ravel())[np.unique(b[0].ravel()) % 2 == k] // 2 for k in (0, 1)]
            for b in batches
        ]

        def bare() -> Any:
            per_shard = shard_ids[next(counter) % len(batches)]
            gathered = [
                client.submit(_take, shards[k], per_shard[k], workers=[a], **pin)
                for k, a in enumerate(addresses)
            ]
            got = client.gather(gathered)
            updates = [
                client.submit(_add_at, shards[k], per_shard[k], got[k], workers=[a], **pin)
                for k, a in enumerate(addresses)
            ]
            return client.gather(updates)

        samples = interleaved({"ps step": ours, "bare Dask": bare}, mode.kernel_repeats, warmup=2)
    finally:
        for session in sessions:
            session.close()
    case = (f"training step, table [{rows},{PS_DIM}] f32 on 2 ps tasks, batch "
            f"{PS_BATCH}x{PS_IDS}, Adagrad")  # fmt: skip
    mine = Stats.of(samples["ps step"]).scaled(1e3)
    base = Stats.of(samples["bare Dask"]).scaled(1e3)
    ratio = paired(lambda a, b: a / b, samples["ps step"], samples["bare Dask"])
    report.add(SECTION, case, "time distributed", mine, "ms")
    report.add(SECTION, case, "time bare Dask", base, "ms")
    report.add(SECTION, case, "ratio minigraph/bare Dask", ratio, "x", baseline="bare Dask")
    for size, value in moved.items():
        report.add(SECTION, case, f"bytes per step, table [{size},{PS_DIM}]", float(value), "B")
    grew = moved[rows] - moved[rows // 10]
    report.add(SECTION, case, "bytes growth with a 10x table", float(grew), "B")
    table_rows = [[case, cell(mine), "bare Dask " + cell(base), ratio_cell(ratio)]]
    ids_bytes = PS_BATCH * PS_IDS * 4
    notes = [
        f"{case}: bytes per step between client and workers {moved[rows // 10]:,} with the "
        f"table [{rows // 10},{PS_DIM}], {moved[rows]:,} with [{rows},{PS_DIM}] (growth "
        f"{grew:+,}); the ids are {ids_bytes:,} B and the rows they name about "
        f"{ids_bytes * PS_DIM:,} B each way. Bare Dask: the same ids (unique per shard) "
        "gathered from and added into a scattered shard on each worker, pinned, in two round "
        "trips (the rows to the client and back).",
    ]
    return table_rows, notes


def _bytes_in(moved: dict[str, Any]) -> int:
    """Bytes that entered the workers' memory from the client or another worker, plus those
    the workers sent to the client."""
    scattered = sum(n for w in moved.values() for _, how, n in w["in"] if how == "released")
    between = sum(n for w in moved.values() for _, how, n in w["in"] if how == "flight")
    to_client = sum(t for w, rec in moved.items() for who, t in rec["sent"] if who not in moved)
    return scattered + between + to_client


def _sessions(bench: Bench, client: Any) -> list[str]:
    count = {"full": 1000, "quick": 100}.get(bench.mode.name, 5)
    root, x, y = _chain(True)
    feed = {x: np.array([0, 1, 2, 3], np.int32)}
    before, tasks_before = _quiet(client, lambda state, _: not any(s[0] for s in state.values()))
    start = time.perf_counter()
    for _ in range(count):
        with Session(root, target=client) as session:
            session.run(y, feed)
    per_session = (time.perf_counter() - start) / count
    after, tasks_after = _quiet(
        client, lambda state, tasks: (state, tasks) == (before, tasks_before)
    )
    grew = after != before or tasks_after != tasks_before
    bench.report.add(SECTION, f"{count} sessions opened and closed", "per session",
                     per_session * 1e3, "ms")  # fmt: skip
    bench.report.add(SECTION, f"{count} sessions opened and closed", "worker state grew", grew,
                     "")  # fmt: skip
    shown = {a: b for a, b in zip(("partitions", "actors", "values"), zip(*after.values()))}
    return [
        f"{count} sessions opened, run once and closed ({num(per_session * 1e3)} ms each): "
        f"workers before {sorted(before.values())}, after {sorted(after.values())} "
        f"(partitions, actors, values per worker: {shown}); scheduler tasks {tasks_before} -> "
        f"{tasks_after}: {'GREW' if grew else 'no growth'}"
    ]


def _quiet(client: Any, done: Any, timeout: float = 30.0) -> tuple[dict[str, Any], int]:
    """Worker states and the scheduler's task count once `done(states, tasks)` (releases are
    asynchronous), or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        state = client.run(_state)
        tasks = client.run_on_scheduler(_scheduler_tasks)
        if done(state, tasks) or time.monotonic() > deadline:
            return state, tasks
        time.sleep(0.1)


def _scheduler_tasks(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def run(bench: Bench) -> None:
    """Starts a LocalCluster, prints one table and notes, stops the cluster."""
    report = bench.report
    report.heading(HEADING)
    try:
        import distributed  # noqa: PLC0415
    except ImportError:
        report.note(
            "skipped: Dask's distributed is not installed (pip install -e '.[distributed]')"
        )
        return
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
        silence_logs=logging.ERROR,
    )  # fmt: skip
    client = distributed.Client(cluster, set_as_default=False)
    try:
        client.register_plugin(Arrivals())
        workers = client.scheduler_info()["workers"]
        addresses = [a for _, a in sorted((int(w["name"]), a) for a, w in workers.items())]
        rows = _fixed_costs(bench, client, addresses)
        lookup_rows, notes = _lookup(bench, client, addresses)
        rows += lookup_rows
        notes += _sessions(bench, client)
        ps_rows, ps_notes = _ps_step(bench, client, addresses)
        rows += ps_rows
        notes += ps_notes
    finally:
        client.close()
        cluster.close()
    notes = [
        "ms: median (min-max) over interleaved repeats; ratios: median of per-repeat ratios.",
        "A distributed run costs Dask's round trips (client -> scheduler -> worker -> "
        "scheduler -> client, each through batched streams): compare with the bare round trip.",
        *notes,
    ]
    report.table("", ["case", "distributed ms", "baseline ms", "ratio"], rows, notes)
