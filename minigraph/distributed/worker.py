"""What runs inside Dask workers: registered partitions, their runs, the op libraries.

A partition is registered once as a Dask actor (`PartitionActor`) pinned to its worker: the
actor builds the partition's graph from its bytes with the worker's own op registry and keeps a
local `Session` over it. Dask owns the actor's life: when the client releases the actor's
future (the session closes, or its client goes away), the worker drops the actor and with it
the graph, its constants and its compiled plans.

Each run is one ordinary Dask task per partition (`run_partition`), pinned to the same worker.
It looks the actor up in this process's table of live partitions (a weak mapping, so the table
never keeps a released partition alive) and runs it on the values Dask hands it: fed values,
and the outputs of other partitions, which Dask moved here from their workers.

Variables: every partition of one distributed session on one worker keeps its variables in one
`ResourceStore`, part of that Dask worker's state (`session_resources`: a table keyed by the
`distributed.Worker` object, so that two workers of one process never share one), for as long
as the session lives: the partitions of its initializer, its training step and its reads all
see the same values. The store goes when the session closes (`release_session`, run on the
workers by `client.run`) or, should that message never come (the client died), when the last
of the session's partitions on the worker is dropped by Dask.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from distributed import WorkerPlugin, get_worker

from minigraph.devices import get_devices
from minigraph.distributed import wire
from minigraph.errors import NotFoundError, OpError, UnavailableError
from minigraph.libraries import load_entry_points
from minigraph.resources import ResourceStore
from minigraph.session import RunMetadata, RunOptions, Session, SessionConfig

__all__ = [
    "PartitionActor",
    "PartitionLostError",
    "OpLibraries",
    "run_partition",
    "pick",
    "token",
    "describe_devices",
    "load_op_libraries",
    "live_partitions",
    "session_resources",
    "release_session",
    "live_sessions",
]

_log = logging.getLogger("minigraph.distributed")
_partitions: weakref.WeakValueDictionary[str, PartitionActor] = weakref.WeakValueDictionary()
_libraries_lock = threading.Lock()
_entry_points_loaded = False
# Per Dask worker (weakly: a worker that goes takes its stores along), per session id: the
# session's store and how many of its partitions hold it.
_stores: weakref.WeakKeyDictionary[Any, dict[str, _Held]] = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


class _NoWorker:
    """Where the stores of partitions built outside any Dask worker (tests, diagnostics) live."""


_NO_WORKER = _NoWorker()


class _Held:
    __slots__ = ("store", "holders")

    def __init__(self) -> None:
        self.store = ResourceStore()
        self.holders = 0


def _this_worker() -> Any:
    try:
        return get_worker()
    except ValueError:  # not inside a Dask worker
        return _NO_WORKER


def session_resources(session: str) -> ResourceStore:
    """The store of distributed session `session` on this worker, made on first use; one more
    holder counted (`_let_go` counts it off)."""
    worker = _this_worker()
    with _stores_lock:
        held = _stores.setdefault(worker, {}).get(session)
        if held is None:
            held = _stores[worker][session] = _Held()
        held.holders += 1
        return held.store


def _let_go(worker_ref: Any, session: str, store: ResourceStore) -> None:
    """A partition of `session` holding `store` is gone: the last one drops the store."""
    worker = worker_ref()
    with _stores_lock:
        sessions = _stores.get(worker) if worker is not None else None
        held = sessions.get(session) if sessions is not None else None
        if held is None or held.store is not store:
            return  # released already (and perhaps made again since)
        held.holders -= 1
        if held.holders > 0:
            return
        del sessions[session]
    store.clear()


def release_session(session: str, dask_worker: Any = None) -> int:
    """Drops the variables of distributed session `session` on this worker (its close runs
    this on every worker); how many there were."""
    worker = dask_worker if dask_worker is not None else _this_worker()
    with _stores_lock:
        sessions = _stores.get(worker)
        held = sessions.pop(session, None) if sessions is not None else None
    if held is None:
        return 0
    count = len(held.store)
    held.store.clear()
    return count


def live_sessions(dask_worker: Any = None) -> dict[str, int]:
    """Session id -> how many resources this worker holds for it (tests, diagnostics)."""
    worker = dask_worker if dask_worker is not None else _this_worker()
    with _stores_lock:
        return {k: len(h.store) for k, h in _stores.get(worker, {}).items()}


def _where(worker: Any = None) -> str:
    if worker is None:
        try:
            worker = get_worker()
        except ValueError:
            return "this process"
    return f"worker {worker.address} (name {worker.name!r})"


def load_op_libraries(modules: Sequence[str] = (), worker: Any = None) -> None:
    """Imports the op libraries of the `minigraph.op_libraries` entry points (once per process)
    and `modules`.

    Raises:
        NotFoundError: one of `modules` cannot be imported here.
    """
    global _entry_points_loaded
    with _libraries_lock:
        if not _entry_points_loaded:
            load_entry_points(_log.warning)  # a broken library must not take the others down
            _entry_points_loaded = True
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as e:
            raise NotFoundError(
                f"op module {module!r} cannot be imported on {_where(worker)}: "
                f"{type(e).__name__}: {e}"
            ) from e


class OpLibraries(WorkerPlugin):
    """Imports op libraries on every worker, including workers that join later."""

    idempotent = True

    def __init__(self, modules: Sequence[str]):
        self.modules = tuple(modules)

    def setup(self, worker: Any) -> None:
        load_op_libraries(self.modules, worker)


class PartitionLostError(UnavailableError):
    """A run found its partition missing on its worker (the worker restarted in place, or the
    session released the partition meanwhile)."""

    def __init__(self, message: str, key: str = ""):
        super().__init__(message)
        self.key = key

    def __reduce__(self):
        return (type(self), (self.message, self.key))


class PartitionActor:
    """A partition registered on a worker: its graph and a local session over it."""

    def __init__(
        self,
        key: str,
        data: bytes,
        feeds: Sequence[str],
        fetches: Sequence[str],
        targets: Sequence[str],
        op_modules: Sequence[str],
        task: str,
        config: dict[str, Any],
        session: str = "",
    ):
        load_op_libraries(op_modules)
        try:
            graph = wire.decode(data, source=f"<a partition of {task}>")
        except OpError as e:
            raise type(e)(
                f"{_where()}, serving {task}, cannot build its partition: {e.message}",
                e.node_name,
                e.op_type,
            ) from None
        self.key = key
        self.task = task
        store = None
        if session:
            store = session_resources(session)
            worker = _this_worker()
            weakref.finalize(self, _let_go, weakref.ref(worker), session, store)
        self.session = Session(
            graph, SessionConfig(allow_soft_placement=False, **config), resources=store
        )
        self.feeds = [graph.get_output(name) for name in feeds]
        self.fetches = [graph.get_output(name) for name in fetches]
        self.fetches += [graph.get_operation(name) for name in targets]
        self.n_outputs = len(fetches)
        self.nodes = len(graph)
        weakref.finalize(self, self.session.close)
        _partitions[key] = self

    def run(self, args: Sequence[Any], trace: bool) -> Any:
        feeds = dict(zip(self.feeds, args))
        if not trace:
            values = self.session.run(self.fetches, feeds)[: self.n_outputs]
            return values[0] if len(values) == 1 else tuple(values)
        metadata = RunMetadata()
        # Timestamps leave the worker as wall-clock microseconds: perf_counter's origin is
        # private to each process.
        offset_us = (time.time_ns() - time.perf_counter_ns()) / 1000
        values = self.session.run(
            self.fetches, feeds, options=RunOptions(trace=True), run_metadata=metadata
        )[: self.n_outputs]
        stats = [
            (s.node, s.op_type, s.device, s.start_us + offset_us, s.duration_us,
             s.output_shapes, s.thread)
            for s in metadata.step_stats
        ]  # fmt: skip
        return (*values, stats)

    def info(self) -> dict[str, Any]:
        """What the partition holds (for tests and diagnostics)."""
        return {"key": self.key, "task": self.task, "nodes": self.nodes}


def run_partition(key: str, trace: bool, n_args: int, *args: Any) -> Any:
    """Runs the registered partition `key` on `args` (the rest are ordering tokens)."""
    actor = _partitions.get(key)
    if actor is None:
        raise PartitionLostError(
            f"partition {key} is not registered on {_where()}: the worker restarted or the "
            "session released it",
            key,
        )
    return actor.run(args[:n_args], trace)


def pick(values: tuple[Any, ...], i: int) -> Any:
    """Output `i` of a partition's run (runs on that worker: only the picked value travels)."""
    return values[i]


def token(values: Any) -> None:
    """Nothing, once a partition has run: what a control edge between partitions carries."""
    return None


def describe_devices() -> list[tuple[str, int, str]]:
    """This worker's devices: (type, index, description)."""
    return [(d.device_type, d.index, d.description) for d in get_devices()]


def live_partitions() -> list[dict[str, Any]]:
    """The partitions registered in this process (for tests and diagnostics)."""
    return [actor.info() for actor in list(_partitions.values())]
