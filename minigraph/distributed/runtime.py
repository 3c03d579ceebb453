"""The distributed session: plans compiled per (feeds, fetches), run on a Dask cluster.

Compiling a signature prunes the graph, places it on the client's devices and every task's
(`minigraph.placer`), and partitions it by task (`minigraph.distributed.partition`). Each
worker partition is registered once on the worker serving its task (a Dask actor holding its
graph and a local session: `minigraph.distributed.worker`); identical partitions of several
signatures share one registration. Client partitions run in a local session in this process.

A run walks the partitions in order. A worker partition becomes one Dask task pinned to its
worker (`workers=[address], allow_other_workers=False, pure=False`) whose arguments are the
values it receives: fed values (inside the task message when small, scattered to the worker
when large) and futures of other partitions' outputs, which Dask moves from worker to worker
without passing through the client. A client partition gathers what it receives, runs, and
hands its outputs on. Only fetched values come back. Worker partitions are submitted as early
as their inputs allow, so they run while the client waits.

Faults are mapped to minigraph's errors at this boundary: a kernel's error keeps its type and
names the node, its remote device and the user's source line; a worker that leaves during a run
is an UnavailableError naming the task and the worker, raised as soon as the scheduler
announces the removal (a slow run also asks the scheduler, once a second, which workers it
has); the next run registers that task's partitions on whichever worker serves it then.

Variables (parameter servers): the placer puts every op using a variable on the task of its
VarHandleOp, so reads, gathers, scatters and apply ops run where the variable lives and only
ids and rows cross the wire. Their values live in the worker's memory, in one resource store
per worker per session (`minigraph.distributed.worker.session_resources`), shared by every
partition of the session there and dropped by `close`. Variables on the client's devices live
in one store of the runtime, shared by its client partitions. The runtime remembers which
variables each task holds and on which worker (address and generation): when that worker
leaves, they are lost, and a run that reads one of them raises UnavailableError naming the
task and the variables, until a run assigns them again (Saver.restore, their initializers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import itertools
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from distributed import Future
from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from minigraph import dtypes
from minigraph.device_spec import DeviceSpec
from minigraph.devices import Device
from minigraph.distributed import wire
from minigraph.distributed import worker as _worker
from minigraph.distributed.cluster import Cluster
from minigraph.distributed.devices import RemoteDevice
from minigraph.distributed.partition import Partition, partition
from minigraph.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    UnavailableError,
)
from minigraph.executor import NodeStats
from minigraph.graph import Operation, Output
from minigraph.placer import LOCAL_TASK, place
from minigraph.plan import prune
from minigraph.resources import ResourceStore

__all__ = ["DistributedRuntime", "DistributedPlan", "EMBED_BYTES"]

#: Fed values up to this size travel inside the task message; larger ones are scattered
#: straight to the worker that consumes them.
EMBED_BYTES = 64 * 1024
#: How often a run that is still waiting asks the scheduler which workers it has.
_POLL_S = 1.0
#: How long close waits for the workers to drop the session's variables.
_RELEASE_WAIT_S = 1.0


class _WorkerLost(Exception):
    def __init__(self, address: str, tasks: list[str]):
        super().__init__(address)
        self.address = address
        self.tasks = tasks


class _HeldVariables:
    """The variables a session holds on a task: the worker holding them and their names."""

    __slots__ = ("address", "generation", "names")

    def __init__(self, address: str, generation: int):
        self.address = address
        self.generation = generation
        self.names: set[str] = set()


#: Ops using a variable that do not need its value (they make it, or ask whether it exists).
_NO_VALUE_NEEDED = frozenset({"AssignVariableOp", "VarIsInitializedOp", "DestroyResourceOp"})


def _variables_of(ops: Sequence[Operation]) -> tuple[frozenset[str], frozenset[str]]:
    """(variables whose value the nodes `ops` need, variables they assign), by shared name:
    the nodes' resource inputs, traced through Identity nodes to their VarHandleOps in the
    user's graph (a partition may receive a handle from another partition of its task)."""
    needs: set[str] = set()
    assigns: set[str] = set()
    for op in ops:
        if op.type in ("VarHandleOp", "Identity"):
            continue
        for t in op.inputs:
            if t.dtype is not dtypes.resource:
                continue
            source = t.op
            while source.type == "Identity" and source.inputs:
                source = source.inputs[0].op
            if source.type != "VarHandleOp":
                continue  # a fed handle: nothing this session can say it holds
            name = source.get_attr("shared_name") or source.name
            if op.type == "AssignVariableOp":
                assigns.add(name)
            elif op.type not in _NO_VALUE_NEEDED:
                needs.add(name)
    return frozenset(needs - assigns), frozenset(assigns)


def _names(names: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


class _Closed(Exception):
    """The session was closed while a run or a registration waited on the cluster."""


def _closed_during_run() -> FailedPreconditionError:
    return FailedPreconditionError("The Session was closed while this run was in progress.")


class _Registration:
    """A partition registered on a worker: its actor's future, key and worker."""

    __slots__ = ("key", "future", "address", "generation")

    def __init__(self, key: str, future: Any, address: str, generation: int):
        self.key = key
        self.future = future
        self.address = address
        self.generation = generation


class _Step:
    """A partition of a plan, with what running it needs."""

    def __init__(self, part: Partition, plan: DistributedPlan):
        self.part = part
        self.index = part.index
        self.task = part.task
        self.is_client = part.is_client
        self.n_outputs = len(part.outputs)
        # Where each input comes from: ("feed", tensor) or ("out", partition, output index).
        self.sources: list[tuple[Any, ...]] = []
        for t in part.inputs:
            if t in plan.fed:
                self.sources.append(("feed", t))
            else:
                p, j = plan.produced[t]
                self.sources.append(("out", p, j))
        self.depends = sorted({s[1] for s in self.sources if s[0] == "out"} | set(part.after))
        self.session: Any = None
        self.fetches: list[Any] = []
        self.digest = ""
        self.names: tuple[list[str], list[str], list[str]] = ([], [], [])
        # Variables (shared names) the partition reads or updates, and those it assigns.
        self.needs: frozenset[str] = frozenset()
        self.assigns: frozenset[str] = frozenset()
        self._data: bytes | None = None

    def data(self) -> bytes:
        """The partition's graph as bytes (kept only until it is registered)."""
        return self._data if self._data is not None else wire.encode(self.part.graph)


class DistributedPlan:
    """A compiled (feeds, fetches) signature of a distributed session."""

    simple = False  # never Session.run's local fast path

    def __init__(self, parts: list[Partition], fed: set[Output], targets: list[Any]):
        self.fed = fed
        self.produced: dict[Output, tuple[int, int]] = {}
        for part in parts:
            for j, t in enumerate(part.outputs):
                self.produced[t] = (part.index, j)
        self.steps = [_Step(part, self) for part in parts]
        self.placement: dict[str, str] = {}
        # Nodes running on workers: name -> (device name, source), for their errors.
        self.remote_nodes: dict[str, tuple[str, str]] = {}
        self.fetch_index: dict[Any, int | None] = {}
        self.fetch_sources: list[tuple[Any, ...]] = []
        result_of: dict[tuple[Any, ...], int] = {}  # not list scans: linear in the fetches
        for t in targets:
            if t in self.fetch_index:
                continue
            if isinstance(t, Operation):
                self.fetch_index[t] = None
                continue
            source = ("feed", t) if t in fed else ("out", *self.produced[t])
            index = result_of.get(source)
            if index is None:
                index = result_of[source] = len(self.fetch_sources)
                self.fetch_sources.append(source)
            self.fetch_index[t] = index
        # Results computed from a feed may be the fed array itself when a worker runs in this
        # process (Dask passes in-process objects as they are); the session copies those.
        self.pass_through = (
            tuple(i for i, source in enumerate(self.fetch_sources) if source[0] == "out")
            if fed
            else ()
        )


def _local_spec(device: Device) -> DeviceSpec:
    return device.local_spec if isinstance(device, RemoteDevice) else device.spec


class DistributedRuntime:
    """The part of a `Session` that runs its graph on a Dask cluster."""

    def __init__(self, target: Any, config: Any, devices: Sequence[Device]):
        op_modules = config.op_modules
        if isinstance(op_modules, str) or not all(isinstance(m, str) for m in op_modules):
            raise InvalidArgumentError(
                f"SessionConfig.op_modules must be a list of module names; got {op_modules!r}"
            )
        timeout = config.connect_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidArgumentError(
                f"SessionConfig.connect_timeout must be a number of seconds > 0; got {timeout!r}"
            )
        self.config = config
        self.local_devices = list(devices)
        self.op_modules = tuple(op_modules)
        self.cluster = Cluster(target, config.cluster, float(timeout))
        self.client = self.cluster.client
        direct = getattr(self.client, "direct_to_workers", None)
        self.direct = True if direct is None else bool(direct)
        self._id = uuid.uuid4().hex[:12]
        self._lock = threading.RLock()
        self._registrations: dict[tuple[DeviceSpec, str], _Registration] = {}
        self._keys = itertools.count()
        # Client partitions' local sessions, closed with this one (evicted plans drop theirs).
        self._client_sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        # The values of variables on the client's devices, shared by the client partitions.
        self.client_resources = ResourceStore()
        # Variables this session holds per task (and where), and those lost with a worker
        # that left: task -> {name: the address of that worker}.
        self._held: dict[DeviceSpec, _HeldVariables] = {}
        self._lost: dict[DeviceSpec, dict[str, str]] = {}
        self._used_addresses: set[str] = set()  # workers that may hold this session's state
        self._closed = False
        # Set by close, before anything else: runs and registrations waiting on the cluster
        # stop waiting (a worker that stopped answering must not hold close up).
        self._stop = threading.Event()
        self._worker_config = {
            "inter_op_threads": config.inter_op_threads,
            "check_kernel_outputs": config.check_kernel_outputs,
        }
        if self.op_modules:
            try:
                self._register_op_modules()
            except BaseException:
                self.cluster.close()
                raise

    def _register_op_modules(self) -> None:
        name = (
            "minigraph-op-libraries-"
            + hashlib.blake2b("\0".join(self.op_modules).encode(), digest_size=8).hexdigest()
        )
        try:
            self.client.register_plugin(_worker.OpLibraries(self.op_modules), name=name)
        except OpError:
            raise
        except Exception as e:
            raise UnavailableError(
                f"cannot load the op modules {list(self.op_modules)} on the workers: "
                f"{type(e).__name__}: {e}"
            ) from e

    # -- compile ---------------------------------------------------------------------------------

    def compile_plan(
        self,
        feeds: Mapping[Output, Any],
        targets: list[Any],
        devices: Sequence[Device],
        host: Device,
        config: Any,
        intra_pool: Any,
    ) -> DistributedPlan:
        """Prunes, places (client and cluster devices) and partitions the graph by task.

        Raises:
            InvalidArgumentError: an unfed placeholder, or a placement that cannot be met
                (the message lists the cluster's devices).
            NotFoundError: a node with no kernel on any device.
            UnavailableError: the scheduler does not answer.
        """
        fed = set(feeds)
        ops = prune(fed, targets)
        if ops:
            self._check_requested_tasks(ops)
        cluster_devices = self.cluster.devices() if ops else []
        placement = place(
            ops,
            list(devices) + cluster_devices,
            allow_soft_placement=config.allow_soft_placement,
            log_device_placement=config.log_device_placement,
        )
        parts = partition(ops, placement.device, fed, targets, LOCAL_TASK, _local_spec)
        plan = DistributedPlan(parts, fed, targets)
        for op in ops:
            device = placement.device[op]
            plan.placement[op.name] = device.name
            if isinstance(device, RemoteDevice):
                plan.remote_nodes[op.name] = (device.name, op.source)
        local = dataclasses.replace(
            config, allow_soft_placement=False, log_device_placement=False, devices=devices,
            cluster=None, op_modules=(),
        )  # fmt: skip
        from minigraph.session import Session  # noqa: PLC0415 - session.py imports us lazily

        for step in plan.steps:
            part = step.part
            if step.is_client:
                step.session = Session(part.graph, local, resources=self.client_resources)
                step.fetches = part.graph_outputs + part.graph_targets
                self._client_sessions.add(step.session)
                continue
            step.names = (
                [t.name for t in part.graph_inputs],
                [t.name for t in part.graph_outputs],
                [op.name for op in part.graph_targets],
            )
            step.needs, step.assigns = _variables_of(part.ops)
            step._data = wire.encode(part.graph)
            digest = hashlib.blake2b(step._data, digest_size=16)
            digest.update(repr(step.names).encode())
            step.digest = digest.hexdigest()
        return plan

    def _check_requested_tasks(self, ops: Sequence[Operation]) -> None:
        """Raises UnavailableError for a node requesting a task of the cluster that no worker
        serves now (its worker left and was not replaced yet): soft placement must not move
        it, and the state of its variables, to another task for good (the plan is cached)."""
        missing = self.cluster.missing_tasks()
        if not missing:
            return
        seen: set[str] = set()
        for op in ops:
            device = op.device
            if not device or device in seen:
                continue
            seen.add(device)
            spec = DeviceSpec.from_string(device)
            if spec.job is None or spec.task is None:
                continue
            task = DeviceSpec(spec.job, 0, spec.task)
            if task in missing:
                with self._lock:
                    self._address(task)  # refreshes; raises naming the variables lost there

    # -- registration ----------------------------------------------------------------------------

    def _ensure_registered(self, plan: DistributedPlan) -> dict[int, _Registration]:
        """The registration of every worker partition of the plan, registering what is missing
        (first run, or its worker left) on the worker now serving its task."""
        found: dict[int, _Registration] = {}
        wanted: list[tuple[_Step, str]] = []
        with self._lock:
            addresses = {}
            for step in plan.steps:
                if not step.is_client and step.task not in addresses:
                    addresses[step.task] = self._address(step.task)
            self._check_variables(plan, addresses)
            for step in plan.steps:
                if step.is_client:
                    continue
                address = addresses[step.task]
                reg = self._registrations.get((step.task, step.digest))
                if reg is not None and (
                    reg.address != address or reg.generation != self.cluster.generation(address)
                ):
                    self._forget(reg)
                    reg = None
                if reg is None:
                    wanted.append((step, address))
                else:
                    found[step.index] = reg
            if wanted:
                found.update(self._register(wanted))
        return found

    def _address(self, task: DeviceSpec) -> str:
        """The worker serving `task`; UnavailableError naming the variables held there when
        none does any more."""
        try:
            return self.cluster.address(task)
        except UnavailableError as e:
            held = self._held.get(task)
            if held is None or not held.names:
                raise
            raise UnavailableError(
                f"{e.message}. The variables this session held on {task.to_string()} (worker "
                f"{held.address}) are lost: {_names(sorted(held.names))}"
            ) from None

    def _check_variables(self, plan: DistributedPlan, addresses: dict[DeviceSpec, str]) -> None:
        """Counts the variables of a task lost when the worker holding them is not the one
        serving the task now (`addresses`: its address, of its generation now); raises
        UnavailableError naming the task and the lost variables the plan reads (those it
        assigns first are not missing). The caller holds the lock."""
        for task, address in addresses.items():
            held = self._held.get(task)
            if held is not None and (held.address, held.generation) != (
                address,
                self.cluster.generation(address),
            ):
                self._lose(task, held.address)
        needs: dict[DeviceSpec, set[str]] = {}
        for step in plan.steps:
            if not step.is_client and step.needs:
                needs.setdefault(step.task, set()).update(step.needs)
        for step in plan.steps:
            if step.assigns and step.task in needs:
                needs[step.task] -= step.assigns
        problems = []
        for task, names in sorted(needs.items(), key=lambda item: item[0].to_string()):
            lost = self._lost.get(task)
            missing = sorted(names & lost.keys()) if lost else []
            if missing:
                left = ", ".join(sorted({lost[n] for n in missing}))
                problems.append(
                    f"{task.to_string()} lost variables {_names(missing)}: the worker that held "
                    f"them ({left}) left the cluster, and the worker serving the task now "
                    f"({addresses[task]}) holds none of this session's values"
                )
        if problems:
            raise UnavailableError(
                "; ".join(problems) + ". Restore them (Saver.restore) or run their "
                "initializers: runs that assign them work, and then so do the runs that read them"
            )

    def _lose(self, task: DeviceSpec, address: str) -> list[str]:
        """Counts the variables held on `task` as lost with the worker at `address` (if they
        were held there); returns their names. The caller holds the lock."""
        held = self._held.get(task)
        if held is None or held.address != address:
            return []
        del self._held[task]
        lost = self._lost.setdefault(task, {})
        for name in held.names:
            lost[name] = address
        return sorted(held.names)

    def _ran(self, plan: DistributedPlan, registrations: dict[int, _Registration]) -> None:
        """After a run that succeeded: the variables its partitions touched are held by their
        workers, and those it assigned are no longer lost."""
        with self._lock:
            for step in plan.steps:
                if step.is_client or not (step.needs or step.assigns):
                    continue
                reg = registrations[step.index]
                held = self._held.get(step.task)
                if held is None or (held.address, held.generation) != (
                    reg.address,
                    reg.generation,
                ):
                    if held is not None:
                        self._lose(step.task, held.address)
                    held = self._held[step.task] = _HeldVariables(reg.address, reg.generation)
                held.names.update(step.needs, step.assigns)
                lost = self._lost.get(step.task)
                if lost:
                    for name in step.assigns:
                        lost.pop(name, None)

    def _register(self, wanted: list[tuple[_Step, str]]) -> dict[int, _Registration]:
        submitted = []
        shipped: list[Any] = []
        try:
            for step, address in wanted:
                data = step.data()
                payload: Any = data
                if len(data) > EMBED_BYTES:
                    payload = self.scatter(data, address)
                    shipped.append(payload)
                key = f"minigraph-partition-{self._id}-{next(self._keys)}"
                feeds, fetches, targets = step.names
                future = self.client.submit(
                    _worker.PartitionActor, key, payload, feeds, fetches, targets,
                    self.op_modules, step.task.to_string(), self._worker_config, self._id,
                    key=key, actor=True, workers=[address], allow_other_workers=False,
                    pure=False,
                )  # fmt: skip
                generation = self.cluster.generation(address)
                self._used_addresses.add(address)
                submitted.append((step, _Registration(key, future, address, generation)))
            futures = [reg.future for _, reg in submitted]
            self._wait(futures, {reg.address for _, reg in submitted})
            self.gather(futures)  # raises what an actor's constructor raised
        except BaseException as e:
            for _, reg in submitted:
                reg.future.release()
            raise self._translate(e, None) from _cause(e)
        finally:
            for payload in shipped:
                if isinstance(payload, Future):
                    payload.release()
        result = {}
        for step, reg in submitted:
            self._registrations[(step.task, step.digest)] = reg
            step._data = None  # re-encoded from the graph if the worker must be replaced
            result[step.index] = reg
        return result

    def _forget(self, reg: _Registration) -> None:
        for key, value in list(self._registrations.items()):
            if value is reg:
                del self._registrations[key]
        reg.future.release()

    def _forget_address(self, address: str) -> None:
        with self._lock:
            for reg in [r for r in self._registrations.values() if r.address == address]:
                self._forget(reg)

    # -- run -------------------------------------------------------------------------------------

    def execute(
        self,
        plan: DistributedPlan,
        feeds: Mapping[Output, Any],
        options: Any,
        run_metadata: Any,
    ) -> list[Any]:
        """Runs the plan; returns the fetched values in `plan.fetch_sources` order."""
        if self._closed:
            raise FailedPreconditionError("Attempted to use a closed Session.")
        trace = options is not None and options.trace
        if run_metadata is not None:
            run_metadata.placement.update(plan.placement)
        try:
            registrations = self._ensure_registered(plan)
        except BaseException:
            if self._stop.is_set():
                raise _closed_during_run() from None
            raise
        run = _Run(self, plan, feeds, registrations, trace)
        try:
            results = run.execute()
        except BaseException as e:
            run.cancel()  # and drop its futures: the error must not keep worker memory alive
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            if self._stop.is_set():  # what closing the session did to the run, whatever it was
                raise _closed_during_run() from None
            raise self._translate(e, plan) from _cause(e)
        self._ran(plan, registrations)
        if trace and run_metadata is not None:
            run_metadata.step_stats.extend(run.stats)
        return results

    # -- waiting and errors ----------------------------------------------------------------------

    def on_loop(self, coroutine: Any) -> Any:
        """Runs one of the Dask client's coroutines (what its blocking calls run) on the
        client's event loop and waits for its result as the blocking call would, except that
        closing the session ends the wait (_Closed) and cancels it: a worker that stopped
        answering (SIGSTOP) would otherwise hold a gather or a scatter, and close, until it
        resumed."""
        done = asyncio.run_coroutine_threadsafe(coroutine, self.client.loop.asyncio_loop)
        while not done.done():
            if self._stop.is_set():
                done.cancel()
                raise _Closed()
            concurrent.futures.wait([done], timeout=_POLL_S / 4)
        return done.result()

    def gather(self, futures: list[Any]) -> list[Any]:
        """`client.gather(futures)`, ended by close (see `on_loop`)."""
        return self.on_loop(self.client.gather(futures, direct=self.direct, asynchronous=True))

    def _scatter_to(self, value: Any, address: str) -> Any:
        """The coroutine of `client.scatter(value, workers=[address])` (one future)."""
        return self.client.scatter(
            value, workers=[address], hash=False, direct=self.direct, asynchronous=True
        )

    def scatter(self, value: Any, address: str) -> Any:
        """`client.scatter(value, workers=[address])` (one future), ended by close."""
        return self.on_loop(self._scatter_to(value, address))

    def scatter_many(self, items: Sequence[tuple[Any, str]]) -> list[Any]:
        """`client.scatter(value, workers=[address])` for each (value, address), concurrently
        (one future each), ended by close."""

        async def scatter_all() -> list[Any]:
            return list(await asyncio.gather(*(self._scatter_to(v, a) for v, a in items)))

        return self.on_loop(scatter_all())

    def _wait(self, futures: Sequence[Any], addresses: set[str]) -> None:
        """Waits for `futures`; raises _WorkerLost as soon as a worker they need leaves, and
        _Closed as soon as the session closes."""
        if self._stop.is_set():
            raise _Closed()
        pending = {f.key: f for f in futures if not f.done()}
        if not pending:
            return
        # Completion callbacks and worker removals set `wake`; nothing here raises and catches
        # exceptions (a caught exception's traceback would keep these futures alive).
        wake = threading.Event()
        count = [len(pending)]
        lock = threading.Lock()

        def on_done(_: Any) -> None:
            with lock:
                count[0] -= 1
                if count[0] == 0:
                    wake.set()

        generations = {a: self.cluster.generation(a) for a in addresses}
        self.cluster.watch.listen(wake)
        try:
            for future in pending.values():
                future.add_done_callback(on_done)
            poll_at = time.monotonic() + _POLL_S
            while True:
                wake.wait(_POLL_S / 4)
                with lock:
                    if count[0] == 0:
                        return
                    wake.clear()  # a removal woke us; the callbacks set it again when done
                if self._stop.is_set():
                    raise _Closed()
                self._check_generations(generations)
                if time.monotonic() >= poll_at:
                    self.cluster.check_alive(sorted(addresses))
                    poll_at = time.monotonic() + _POLL_S
        finally:
            self.cluster.watch.unlisten(wake)

    def _check_generations(self, generations: dict[str, int]) -> None:
        for address, generation in generations.items():
            if self.cluster.generation(address) != generation:
                raise _WorkerLost(address, self._tasks_of(address))

    def _tasks_of(self, address: str) -> list[str]:
        return [t.to_string() for t in self.cluster.tasks_at(address)]

    def _translate(self, e: BaseException, plan: DistributedPlan | None) -> BaseException:
        """The minigraph error for what a run or registration raised."""
        if isinstance(e, _Closed) or self._stop.is_set():
            return _closed_during_run()
        if isinstance(e, _WorkerLost):
            self._forget_address(e.address)
            tasks = ", ".join(e.tasks) or "a task"
            return UnavailableError(
                f"{tasks} is unavailable: its worker {e.address} left the cluster during the "
                "run. The next run registers its partitions on whichever worker serves the "
                "task then." + self._lost_with(e.address)
            )
        if isinstance(e, OpError):
            if isinstance(e, _worker.PartitionLostError):
                # The worker restarted at the same address: register again next time.
                lost = ""
                with self._lock:
                    for (task, _), reg in list(self._registrations.items()):
                        if reg.key == e.key:
                            self._forget(reg)
                            names = self._lose(task, reg.address)
                            if names:
                                lost = (
                                    f". Variables lost with it on {task.to_string()}: "
                                    f"{_names(names)} (restore them: Saver.restore, or run "
                                    "their initializers)"
                                )
                return UnavailableError(e.message + "; the next run registers it again" + lost)
            node = plan.remote_nodes.get(e.node_name) if plan is not None and e.node_name else None
            if node is None:
                return e
            device, source = node
            message = e.message.split("\n\t [[node ", 1)[0]
            return type(e)(
                f"{message}\n\t [[node {e.node_name} ({e.op_type}) on {device}, "
                f"defined at {source}]]",
                e.node_name,
                e.op_type,
            )
        if isinstance(e, KilledWorker):
            return UnavailableError(f"a worker died running a partition: {e}")
        if isinstance(e, FutureCancelledError):
            return UnavailableError(f"the run's tasks were cancelled by the cluster: {e}")
        if isinstance(e, (OSError, TimeoutError)):
            return UnavailableError(f"the cluster is unreachable: {type(e).__name__}: {e}")
        if isinstance(e, MemoryError):
            return ResourceExhaustedError(f"out of memory: {e}")
        return InternalError(f"distributed run failed: {type(e).__name__}: {e}")

    def _lost_with(self, address: str) -> str:
        """What a message about the worker at `address` leaving adds: the variables lost."""
        parts = []
        with self._lock:
            for task in [t for t, h in self._held.items() if h.address == address]:
                names = self._lose(task, address)
                if names:
                    parts.append(f"{task.to_string()}: {_names(names)}")
        if not parts:
            return ""
        return (
            " Variables lost with it: " + "; ".join(parts) + " (restore them: Saver.restore, "
            "or run their initializers)."
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Ends the runs and registrations waiting on the cluster (they raise
        FailedPreconditionError within a fraction of a second, whatever the workers do), then
        releases every worker-side partition (Dask drops their actors) and the client
        sessions; closes the Dask client when the session made it."""
        self._stop.set()  # first: a registration waiting holds the lock taken next
        with self._lock:
            if self._closed:
                return
            self._closed = True
            registrations = list(self._registrations.values())
            self._registrations.clear()
            sessions = list(self._client_sessions)
            self._client_sessions.clear()
            # Only workers still serving: a removed one took the values along.
            addresses = sorted(self._used_addresses & self.cluster.served_addresses())
            self._held.clear()
            self._lost.clear()
        for session in sessions:
            session.close()
        self.client_resources.clear()
        try:
            for reg in registrations:
                reg.future.release()
            if addresses:
                self._release_stores(addresses)
        finally:
            self.cluster.close()

    def _release_stores(self, addresses: list[str]) -> None:
        """Drops this session's variables on the workers at `addresses` now (Dask's
        `client.run`), waiting at most `_RELEASE_WAIT_S`: a worker that does not answer drops
        them once Dask has dropped the session's partitions there."""
        try:
            self.client.run(
                _worker.release_session, self._id, workers=addresses, on_error="ignore",
                callback_timeout=_RELEASE_WAIT_S,
            )  # fmt: skip
        except Exception:  # noqa: BLE001 - a client closed, a worker gone: as above
            pass


class _Run:
    """One run of a plan: values and futures by (partition, output)."""

    def __init__(
        self,
        runtime: DistributedRuntime,
        plan: DistributedPlan,
        feeds: Mapping[Output, Any],
        registrations: dict[int, _Registration],
        trace: bool,
    ):
        self.runtime = runtime
        self.client = runtime.client
        self.plan = plan
        self.feeds = feeds
        self.registrations = registrations
        self.trace = trace
        self.values: dict[tuple[int, int], Any] = {}
        self.runs: dict[int, Any] = {}  # partition -> its run's future
        self.futures: list[Any] = []  # everything submitted, cancelled on failure
        self.shipped: dict[tuple[Any, str], Any] = {}
        self.stats: list[NodeStats] = []
        self.stats_futures: list[tuple[_Step, Any]] = []
        self.run_id = f"{runtime._id}-{next(runtime._keys)}"

    def execute(self) -> list[Any]:
        pending = list(self.plan.steps)
        done: set[int] = set()
        while pending:
            # Scatter the large values worker partitions receive, all at once ...
            self._ship_all([s for s in pending if not s.is_client])
            # ... submit every worker partition whose inputs exist (values or futures) ...
            for step in [s for s in pending if not s.is_client]:
                if all(d in done for d in step.depends):
                    self._submit(step)
                    done.add(step.index)
                    pending.remove(step)
            # ... then run the first client partition (in topological order, its inputs exist).
            step = next((s for s in pending if s.is_client), None)
            if step is None:
                if pending:
                    raise InternalError("distributed plan: partitions wait on each other")
                break
            self._run_client(step)
            done.add(step.index)
            pending.remove(step)
        fetched = [
            self.feeds[s[1]] if s[0] == "feed" else self.values[(s[1], s[2])]
            for s in self.plan.fetch_sources
        ]
        remote = [v for v in fetched if _is_future(v)]
        # Every partition must have finished: no partial result, errors anywhere surface
        # (also those of partitions whose outputs nobody gathers: targets, updates).
        runs = list(self.runs.values())
        self._wait(runs + remote)
        _raise_failed(runs)
        values = iter(self._gather(remote))
        results = [next(values) if _is_future(v) else v for v in fetched]
        if self.trace:
            self._collect_stats()
        return results

    def _wait(self, futures: list[Any]) -> None:
        # Any worker of the run leaving stops the wait: its partitions' outputs are lost.
        self.runtime._wait(futures, {reg.address for reg in self.registrations.values()})

    def _gather(self, futures: list[Any]) -> list[Any]:
        if not futures:
            return []
        self._wait(futures)
        return self.runtime.gather(futures)

    def _input(self, source: tuple[Any, ...]) -> Any:
        if source[0] == "feed":
            return self.feeds[source[1]]
        return self.values[(source[1], source[2])]

    def _run_client(self, step: _Step) -> None:
        inputs = [self._input(s) for s in step.sources]
        remote = [v for v in inputs if _is_future(v)]
        after = [self.runs[a] for a in step.part.after if a in self.runs]
        if after:
            self._wait(after)
            _raise_failed(after)
        if remote:
            values = iter(self._gather(remote))
            inputs = [next(values) if _is_future(v) else v for v in inputs]
        feeds = dict(zip(step.part.graph_inputs, inputs))
        if self.trace:
            from minigraph.session import RunMetadata, RunOptions  # noqa: PLC0415

            metadata = RunMetadata()
            offset_us = (time.time_ns() - time.perf_counter_ns()) / 1000
            out = step.session.run(
                step.fetches, feeds, options=RunOptions(trace=True), run_metadata=metadata
            )
            for s in metadata.step_stats:
                s.start_us += offset_us
                self.stats.append(s)
        else:
            out = step.session.run(step.fetches, feeds)
        for j in range(step.n_outputs):
            self.values[(step.index, j)] = out[j]

    def _ship_all(self, steps: list[_Step]) -> None:
        """Scatters the large values (fed, or computed by client partitions) that `steps`
        receive and that exist already, each straight to its worker, concurrently: one round
        trip for all of them, not one each (`_ship` then finds them shipped)."""
        wanted: dict[tuple[Any, str], np.ndarray] = {}
        for step in steps:
            address = self.registrations[step.index].address
            for source in step.sources:
                if source[0] == "out" and (source[1], source[2]) not in self.values:
                    continue  # a client partition's output, not computed yet
                value = self._input(source)
                if _is_future(value) or (source, address) in self.shipped:
                    continue
                value = _host(value)
                if value.nbytes > EMBED_BYTES:
                    wanted[(source, address)] = value
        if len(wanted) < 2:
            return  # one value: `_ship` scatters it
        keys = list(wanted)
        futures = self.runtime.scatter_many([(wanted[k], k[1]) for k in keys])
        for key, future in zip(keys, futures):
            self.shipped[key] = future
            self.futures.append(future)

    def _ship(self, source: tuple[Any, ...], value: Any, address: str) -> Any:
        """A value for a task on `address`: futures as they are, small arrays inside the task
        message, large ones scattered straight to that worker (once per run)."""
        if _is_future(value):
            return value
        value = _host(value)
        if value.nbytes <= EMBED_BYTES:
            return value
        key = (source, address)
        future = self.shipped.get(key)
        if future is None:
            future = self.runtime.scatter(value, address)
            self.shipped[key] = future
            self.futures.append(future)
        return future

    def _submit(self, step: _Step) -> None:
        reg = self.registrations[step.index]
        address = reg.address
        args = [self._ship(s, self._input(s), address) for s in step.sources]
        tokens = []
        for a in step.part.after:
            run = self.runs.get(a)
            if run is not None:  # a worker partition (client partitions ran already)
                tokens.append(self._pinned(_worker.token, run, address=self._address_of(a)))
        run = self._pinned(
            _worker.run_partition, reg.key, self.trace, len(args), *args, *tokens,
            address=address, name=f"run-{step.index}",
        )  # fmt: skip
        self.runs[step.index] = run
        if step.n_outputs == 1 and not self.trace:
            self.values[(step.index, 0)] = run
        else:
            for j in range(step.n_outputs):
                self.values[(step.index, j)] = self._pinned(_worker.pick, run, j, address=address)
            if self.trace:
                picked = self._pinned(_worker.pick, run, step.n_outputs, address=address)
                self.stats_futures.append((step, picked))

    def _address_of(self, index: int) -> str:
        return self.registrations[index].address

    def _pinned(self, fn: Any, *args: Any, address: str, name: str = "") -> Any:
        key = f"minigraph-{name or fn.__name__}-{self.run_id}-{len(self.futures)}"
        future = self.client.submit(
            fn, *args, key=key, workers=[address], allow_other_workers=False, pure=False
        )
        self.futures.append(future)
        return future

    def _collect_stats(self) -> None:
        if not self.stats_futures:
            return
        gathered = self._gather([f for _, f in self.stats_futures])
        for (step, _), stats in zip(self.stats_futures, gathered):
            task = step.task
            for node, op_type, device, start, duration, shapes, thread in stats:
                local = DeviceSpec.from_string(device)
                remote = DeviceSpec(task.job, task.replica, task.task, local.device_type,
                                    local.device_index).to_string()  # fmt: skip
                self.stats.append(NodeStats(node, op_type, remote, start, duration, shapes, thread))

    def cancel(self) -> None:
        if self.futures:
            try:
                self.client.cancel(self.futures)
            except Exception:  # the cluster may be gone: nothing left to cancel then
                pass
        self.futures = []
        self.values.clear()
        self.runs.clear()
        self.shipped.clear()
        self.stats_futures.clear()


def _host(value: Any) -> np.ndarray:
    """A value to send to a worker as a numpy array (a fed cupy array is copied to the host)."""
    if isinstance(value, np.ndarray):
        return value
    get = getattr(value, "get", None)  # a cupy array fed by the user
    return get() if callable(get) else np.asarray(value)


def _raise_failed(futures: Sequence[Any]) -> None:
    """Raises what the first of `futures` (finished) that failed raised."""
    for future in futures:
        if future.status in ("error", "cancelled"):
            future.result()  # raises its exception (the remote one, deserialized)


def _is_future(value: Any) -> bool:
    return isinstance(value, Future)


def _cause(e: BaseException) -> BaseException | None:
    return None if isinstance(e, _WorkerLost) else e
