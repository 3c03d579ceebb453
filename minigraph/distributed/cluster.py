"""A Dask cluster seen as TensorFlow's jobs and tasks.

Task K of job `worker` is, by default, the worker whose Dask name is K (LocalCluster names its
workers 0, 1, ...; `dask worker --name 3 ...` serves task 3). `SessionConfig(cluster={"worker":
[a0, a1], "ps": [a2]})` maps jobs and tasks explicitly, each entry a worker address or name.

Workers come and go. The scheduler announces a worker's removal on a topic named after its
address; a `Cluster` subscribes to the topics of the workers it uses and counts removals per
address (its generation). Whatever was registered on a worker is valid as long as the worker's
generation has not changed; a run that waits on a removed worker stops waiting at once.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from minigraph.device_spec import DeviceSpec
from minigraph.distributed import worker as _worker
from minigraph.distributed.devices import RemoteDevice
from minigraph.errors import InvalidArgumentError, UnavailableError

__all__ = ["Cluster", "connect", "DEFAULT_JOB"]

#: The job of workers named by an integer.
DEFAULT_JOB = "worker"


def connect(target: Any, timeout: float) -> tuple[Any, bool]:
    """(client, whether the caller owns it) for a `distributed.Client` or a scheduler address.

    Raises:
        UnavailableError: the scheduler does not answer within `timeout` seconds.
        InvalidArgumentError: `target` is neither.
    """
    import distributed  # noqa: PLC0415 - the extra is imported only by distributed sessions

    if isinstance(target, distributed.Client):
        if target.asynchronous:
            raise InvalidArgumentError(
                "a session needs a synchronous distributed.Client (Session.run blocks); got an "
                "asynchronous one"
            )
        if target.status not in ("running", "connecting", "newly-created"):
            raise UnavailableError(f"the Dask client {target!r} is {target.status}")
        return target, False
    if not isinstance(target, str):
        raise InvalidArgumentError(
            "a session target is a distributed.Client or a scheduler address such as "
            f"'tcp://host:8786'; got {type(target).__name__}"
        )
    _check_address(target)
    try:
        client = distributed.Client(target, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise UnavailableError(
            f"cannot reach the Dask scheduler at {target!r} within {timeout:g} s "
            f"(SessionConfig.connect_timeout): {e}"
        ) from e
    except ValueError as e:  # Dask's parse of the address: "missing port number", ...
        raise InvalidArgumentError(
            f"{target!r} is not a Dask scheduler address such as 'tcp://host:8786': {e}"
        ) from e
    except Exception as e:
        # Whatever answers there is not a Dask scheduler: Dask reads its bytes as a frame
        # (a MemoryError for an absurd length, a deserialization error, ...).
        raise UnavailableError(
            f"cannot connect to a Dask scheduler at {target!r}: {type(e).__name__}: {e}"
        ) from e
    return client, True


def _check_address(target: str) -> None:
    """Refuses a TCP or TLS address Dask cannot parse before a Client is made for it: a Client
    that fails to start still closes itself when collected, which takes seconds (measured up
    to 4 s) at whatever point the garbage collector reaches it."""
    from distributed.comm import parse_address  # noqa: PLC0415 - the distributed extra
    from distributed.comm.addressing import parse_host_port  # noqa: PLC0415

    try:
        scheme, location = parse_address(target)
        if scheme not in ("tcp", "tls"):
            return  # inproc://, ucx://, ...: Dask's connectors judge those
        _, port = parse_host_port(location)
    except ValueError as e:  # "missing port number", a port that is not an integer, ...
        raise InvalidArgumentError(
            f"{target!r} is not a Dask scheduler address such as 'tcp://host:8786': {e}"
        ) from None
    if not 0 < port < 1 << 16:
        raise InvalidArgumentError(
            f"{target!r} is not a Dask scheduler address such as 'tcp://host:8786': port "
            f"{port} is not in [1, 65535]"
        )


class _Watch:
    """Removals of workers, per address, as the scheduler announces them (one per client)."""

    def __init__(self, client: Any):
        self._client = weakref.ref(client)
        self._lock = threading.Lock()
        self._subscribed: set[str] = set()
        self.generation: dict[str, int] = {}
        self._listeners: set[threading.Event] = set()

    def subscribe(self, address: str) -> None:
        with self._lock:
            if address in self._subscribed:
                return
            self._subscribed.add(address)
            self.generation.setdefault(address, 0)
        client = self._client()
        if client is not None:
            client.subscribe_topic(address, lambda event: self._event(address, event))

    def _event(self, address: str, event: Any) -> None:
        # Called on the client's event loop: only bookkeeping here.
        msg = event[1] if isinstance(event, tuple) and len(event) == 2 else event
        if isinstance(msg, Mapping) and msg.get("action") in ("remove-worker", "close-worker"):
            self.removed(address)

    def removed(self, address: str) -> None:
        with self._lock:
            self.generation[address] = self.generation.get(address, 0) + 1
            listeners = list(self._listeners)
        for event in listeners:
            event.set()

    def listen(self, event: threading.Event) -> None:
        """Sets `event` whenever a worker is removed (until `unlisten`)."""
        with self._lock:
            self._listeners.add(event)

    def unlisten(self, event: threading.Event) -> None:
        with self._lock:
            self._listeners.discard(event)


_watches: weakref.WeakKeyDictionary[Any, _Watch] = weakref.WeakKeyDictionary()
_watches_lock = threading.Lock()


def _watch_of(client: Any) -> _Watch:
    with _watches_lock:
        watch = _watches.get(client)
        if watch is None:
            watch = _watches[client] = _Watch(client)
        return watch


class Cluster:
    """The tasks of a Dask cluster, their workers' addresses and devices."""

    def __init__(
        self,
        target: Any,
        spec: Mapping[str, Sequence[str]] | None = None,
        timeout: float = 10.0,
    ):
        self.timeout = timeout
        self.spec = _check_spec(spec)
        self.client, self._owns_client = connect(target, timeout)
        self.watch = _watch_of(self.client)
        self._lock = threading.Lock()
        self._tasks: dict[DeviceSpec, str] | None = None
        self._generations: dict[str, int] = {}
        self._devices: dict[tuple[str, int], list[RemoteDevice]] = {}

    # -- tasks -----------------------------------------------------------------------------------

    def tasks(self) -> dict[DeviceSpec, str]:
        """Task (`/job:worker/replica:0/task:1`) -> address of the worker serving it now.

        Looked up again when a worker it named has left since the last look-up.
        """
        with self._lock:
            tasks = self._tasks
            if tasks is not None and all(
                self.watch.generation.get(a, 0) == g for a, g in self._generations.items()
            ):
                return tasks
            workers = self._identity()
            tasks = self._tasks = self._map_tasks(workers)
            for address in tasks.values():
                self.watch.subscribe(address)
            self._generations = {a: self.watch.generation.get(a, 0) for a in tasks.values()}
            return tasks

    def address(self, task: DeviceSpec) -> str:
        """The address of the worker serving `task`.

        Raises:
            UnavailableError: no worker serves it (any more).
        """
        address = self.tasks().get(task)
        if address is None:
            raise UnavailableError(
                f"no worker serves {task.to_string()}; the cluster's tasks are "
                f"{self.describe_tasks()}"
            )
        return address

    def tasks_at(self, address: str) -> list[DeviceSpec]:
        """The tasks the worker at `address` served at the last look-up."""
        return [t for t, a in (self._tasks or {}).items() if a == address]

    def generation(self, address: str) -> int:
        """How many times the worker at `address` has left the cluster (as seen so far)."""
        return self.watch.generation.get(address, 0)

    def describe_tasks(self) -> str:
        tasks = self._tasks or {}
        if not tasks:
            return "none"
        return ", ".join(f"{t.to_string()} = {a}" for t, a in sorted(tasks.items(), key=_order))

    def _identity(self) -> dict[str, Any]:
        try:
            info = self.client.sync(
                self.client.scheduler.identity, n_workers=-1, callback_timeout=self.timeout
            )
        except Exception as e:
            raise UnavailableError(
                f"the Dask scheduler {self.client.scheduler.address} did not answer within "
                f"{self.timeout:g} s (SessionConfig.connect_timeout): {type(e).__name__}: {e}"
            ) from e
        return info["workers"]

    def _map_tasks(self, workers: Mapping[str, Any]) -> dict[DeviceSpec, str]:
        tasks: dict[DeviceSpec, str] = {}
        if self.spec is None:
            for address, info in workers.items():
                name = info.get("name")
                text = str(name)
                if isinstance(name, bool) or not (text.isascii() and text.isdigit()):
                    continue  # not a task: only workers named by an integer are
                tasks[DeviceSpec(DEFAULT_JOB, 0, int(text))] = address
            return tasks
        by_name = {str(info.get("name")): address for address, info in workers.items()}
        for job, entries in self.spec.items():
            for k, entry in enumerate(entries):
                address = entry if entry in workers else by_name.get(entry)
                if address is not None:
                    tasks[DeviceSpec(job, 0, k)] = address
        return tasks

    # -- devices ---------------------------------------------------------------------------------

    def devices(self) -> list[RemoteDevice]:
        """Every task's devices, in task order."""
        tasks = self.tasks()
        wanted = {
            a: (a, self.generation(a))
            for a in tasks.values()
            if (a, self.generation(a)) not in self._devices
        }
        if wanted:
            try:
                found = self.client.run(
                    _worker.describe_devices, workers=list(wanted), callback_timeout=self.timeout
                )
            except Exception as e:
                raise UnavailableError(
                    f"cannot list the devices of workers {sorted(wanted)}: {type(e).__name__}: {e}"
                ) from e
            for address, key in wanted.items():
                if address in found:
                    self._devices[key] = found[address]
        result = []
        for task, address in sorted(tasks.items(), key=_order):
            for device_type, index, description in self._devices.get(
                (address, self.generation(address)), ()
            ):
                result.append(
                    RemoteDevice(
                        task.job, task.task, device_type, index,
                        f"{description}; worker {address}",
                    )
                )  # fmt: skip
        return result

    # -- liveness --------------------------------------------------------------------------------

    def check_alive(self, addresses: Sequence[str]) -> None:
        """Asks the scheduler which workers it has; counts those it lacks as removed (for a
        removal whose announcement was missed)."""
        try:
            alive = self.client.nthreads(callback_timeout=self.timeout)
        except Exception as e:
            raise UnavailableError(
                f"the Dask scheduler did not answer within {self.timeout:g} s: "
                f"{type(e).__name__}: {e}"
            ) from e
        for address in addresses:
            if address not in alive:
                self.watch.removed(address)

    def close(self) -> None:
        if self._owns_client:
            self._owns_client = False
            self.client.close()


def _order(item: tuple[DeviceSpec, str]) -> tuple[str, int]:
    return (item[0].job or "", item[0].task or 0)


def _check_spec(spec: Any) -> dict[str, list[str]] | None:
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise InvalidArgumentError(
            "SessionConfig.cluster maps job names to lists of worker addresses or names, e.g. "
            f"{{'worker': ['tcp://10.0.0.1:4000']}}; got {type(spec).__name__}"
        )
    result: dict[str, list[str]] = {}
    for job, entries in spec.items():
        if not isinstance(job, str) or not job or "/" in job or ":" in job:
            raise InvalidArgumentError(f"SessionConfig.cluster: invalid job name {job!r}")
        if isinstance(entries, str) or not isinstance(entries, Sequence):
            raise InvalidArgumentError(
                f"SessionConfig.cluster[{job!r}] must be a list of worker addresses or names; "
                f"got {entries!r}"
            )
        result[job] = [str(e) for e in entries]
    return result
