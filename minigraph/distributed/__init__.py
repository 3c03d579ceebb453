"""Running graphs on a Dask cluster, with TensorFlow's `/job:.../task:...` devices.

`Session(scope, target=client_or_address)` and `list_devices(target=...)` use this package;
everything that needs Dask's `distributed` (the `distributed` extra) is imported only then, so
`import minigraph` never imports Dask. The modules:

- `partition`: splitting a placed graph into per-task partitions that form a DAG (no Dask);
- `devices`: `RemoteDevice`, a device of another task (no Dask);
- `cluster`: a Dask cluster as jobs and tasks, their workers' devices, workers leaving;
- `worker`: what runs inside workers (registered partitions, their runs, op libraries, the
  per-session stores of the variables a worker holds);
- `runtime`: the distributed plans and their runs, and which variables each task holds (and
  lost with a worker that left);
- `wire`: the bytes a partition travels as.
"""

from __future__ import annotations

from typing import Any

__all__ = ["runtime_for", "list_cluster_devices"]

_INSTALL = "pip install 'minigraph[distributed]'"


def _require_distributed() -> None:
    try:
        import distributed  # noqa: F401, PLC0415
    except ImportError as e:
        from minigraph.errors import UnimplementedError  # noqa: PLC0415

        raise UnimplementedError(
            f"running on a cluster needs Dask's `distributed` package: {_INSTALL}"
        ) from e


def runtime_for(target: Any, config: Any, devices: Any) -> Any:
    """The distributed runtime of a `Session(..., target=...)`."""
    _require_distributed()
    from minigraph.distributed.runtime import DistributedRuntime  # noqa: PLC0415

    return DistributedRuntime(target, config, devices)


def list_cluster_devices(target: Any, verbose: bool, local: list[str]) -> list[str]:
    """The client's devices (`local`, already listed) and every task's devices."""
    _require_distributed()
    from minigraph.distributed.cluster import Cluster  # noqa: PLC0415

    cluster = Cluster(target)
    try:
        devices = cluster.devices()
    finally:
        cluster.close()
    if not verbose:
        return local + [d.name for d in devices]
    return local + [f"{d.name}: {d.description}" for d in devices]
