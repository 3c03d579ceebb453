"""A sharded embedding lookup on a Dask cluster: one table shard per worker task.

    python examples/distributed_embedding.py                     # a LocalCluster of 2 workers
    python examples/distributed_embedding.py tcp://host:8786     # an existing cluster

For an existing cluster, start a scheduler and name the workers by task number:

    dask scheduler                                   # prints its address, tcp://host:8786
    dask worker tcp://host:8786 --name 0 --nthreads 1
    dask worker tcp://host:8786 --name 1 --nthreads 1

Each worker named K serves `/job:worker/task:K`. The table is split "mod"-wise into one shard
per task; each shard is a constant placed on its task, so it is shipped to its worker once,
when the session first runs the graph. Every run then sends each worker only its share of the
ids and brings back only the rows: `embedding_lookup` splits the ids on the client
(DynamicPartition), gathers on each worker next to its shard, and stitches the rows back on
the client (DynamicStitch). Needs the `distributed` extra: pip install -e '.[distributed]'.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

import minigraph as mg
from ops import embedding_lookup

ROWS, DIM, IDS = 100_000, 16, 200_000


def worker_tasks(client: Any) -> list[int]:
    """The task numbers of job `worker` the cluster has."""
    names = mg.list_devices(target=client)
    return sorted({int(n.split("/task:")[1].split("/")[0]) for n in names if "/job:worker/" in n})


def main(address: str | None) -> int:
    # Imported here, not at the top: `--help` works without the `distributed` extra.
    from distributed import Client, LocalCluster

    cluster = None
    if address is None:
        cluster = LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        )
        address = cluster.scheduler_address
    client = Client(address, set_as_default=False)
    try:
        tasks = worker_tasks(client)
        if not tasks:
            print("no workers named 0, 1, ...: start them with `dask worker ... --name K`")
            return 1
        print(f"cluster {address}: tasks {[f'/job:worker/task:{k}' for k in tasks]}")
        for line in mg.list_devices(verbose=True, target=client):
            print("  ", line)

        table = np.random.default_rng(0).standard_normal((ROWS, DIM)).astype(np.float32)
        scope = mg.Scope.new_root_scope()
        shards = [
            mg.Const(scope.with_device(f"/job:worker/task:{k}").with_op_name(f"shard{k}"),
                     table[i :: len(tasks)])  # "mod": row r lives in shard r % n
            for i, k in enumerate(tasks)
        ]  # fmt: skip
        ids = mg.Placeholder(scope.with_op_name("ids"), mg.int64, shape=[None])
        rows = embedding_lookup(scope, shards, ids)

        wanted = np.random.default_rng(1).integers(0, ROWS, IDS)
        metadata = mg.RunMetadata()
        with mg.Session(scope, target=client) as session:
            start = time.perf_counter()
            got = session.run(rows, {ids: wanted}, run_metadata=metadata)
            first = time.perf_counter() - start
            start = time.perf_counter()
            got = session.run(rows, {ids: wanted})
            second = time.perf_counter() - start
        print(f"looked up {IDS} ids in a [{ROWS}, {DIM}] table over {len(tasks)} shards")
        print(
            f"  first run {first * 1e3:.0f} ms (ships the shards), next run {second * 1e3:.0f} ms"
        )
        print("  rows of ids", wanted[:3].tolist(), "->")
        print(np.array2string(got[:3], precision=3, max_line_width=100))
        print("placement (nodes off the client):")
        for node, device in sorted(metadata.placement.items()):
            if "/job:localhost/" not in device:
                print(f"  {node}: {device}")
        ok = np.array_equal(got, table[wanted])
        print("✓ equal to numpy's table[ids]" if ok else "✗ differs from numpy's table[ids]")
        return 0 if ok else 1
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Needs the `distributed` extra: pip install -e '.[distributed]'.",
    )
    parser.add_argument(
        "address",
        nargs="?",
        help="a Dask scheduler's address (tcp://host:8786); default: start a LocalCluster of 2 "
        "workers",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":  # LocalCluster starts worker processes that import this file
    sys.exit(main(parse_args(sys.argv[1:]).address))
