"""A Dask cluster seen as TensorFlow's jobs and tasks.

Task K of job `worker` is, by default, the worker whose Dask name is K (LocalCluster names its
workers 0, 1, ...; `dask worker --name 3 ...` serves task 3). `SessionConfig(cluster={"worker":
[a0, a1], "ps": [a2]})` maps jobs and tasks explicitly, each entry a worker address or name.
A count instead of a list takes that many integer-named workers, in order, job after job:
`{"ps": 2, "worker": 1}` is `{"ps": ["0", "1"], "worker": ["2"]}` (parameter servers on the
workers named 0 and 1, the worker task on the one named 2).

Workers come and go. The scheduler announces a worker's removal on a topic named after its
address; a `Cluster` subscribes to the topics of the workers it uses and counts removals per
address (its generation). Whatever was registered on a worker is valid as long as the worker's
generation has not changed; a run that waits on a removed worker stops waiting at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
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
    deadline = time.monotonic() + timeout
    # Dask's Client waits for the scheduler's handshake without a timeout (a port that
    # accepts and stays silent, such as Dask's own dashboard, blocks it for good), and a Client
    # that fails to start is closed whenever the garbage collector reaches it, which can be
    # inside another Client's start, on a lock that start holds: every later Client would then
    # wait on it (LoopRunner._lock). So the scheduler is asked for its handshake first, on a
    # private event loop, within the timeout; and the Client is made on a thread of its own,
    # which closes it there if it fails, or if it comes up after the caller stopped waiting.
    _probe(target, timeout)
    return _start_client(target, timeout, deadline), True


#: Seconds past connect_timeout that a connecting thread is waited for before giving up on it.
_GRACE_S = 2.0


def _unreachable(target: str, timeout: float, why: str) -> UnavailableError:
    return UnavailableError(
        f"cannot reach the Dask scheduler at {target!r} within {timeout:g} s "
        f"(SessionConfig.connect_timeout): {why}"
    )


def _probe(target: str, timeout: float) -> None:
    """Opens a Dask connection to `target` and waits, at most `timeout` seconds, for the
    scheduler's handshake, on an event loop of a thread of its own (the caller's thread may
    run a loop of its own); raises what connecting to it would raise.

    Raises:
        UnavailableError: nothing answers there within `timeout`, or what answers is not a
            Dask scheduler.
        InvalidArgumentError: Dask cannot parse the address.
    """
    from distributed.comm import connect as dask_connect  # noqa: PLC0415 - the extra
    from distributed.security import Security  # noqa: PLC0415

    outcome: list[BaseException | None] = []

    async def handshake() -> None:
        args = Security().get_connection_args("client")  # the Client's own (dask config)
        comm = await dask_connect(target, timeout=timeout, **args)
        await comm.close()

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(handshake(), timeout))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome.append(e)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, name="minigraph-connect", daemon=True)
    thread.start()
    thread.join(timeout + _GRACE_S)
    if not outcome:  # its event loop is stuck (a host name whose look-up never ends)
        raise _unreachable(target, timeout, "the connection attempt did not end")
    error = outcome[0]
    if error is None:
        return
    if isinstance(error, TimeoutError):
        raise _unreachable(
            target, timeout, "no Dask handshake came back (whatever listens there accepted the "
            "connection and stayed silent, or nothing answered)"
        ) from error  # fmt: skip
    raise _connect_error(target, timeout, error) from error


def _connect_error(target: str, timeout: float, error: BaseException) -> Exception:
    """The minigraph error for what connecting to `target` raised."""
    if isinstance(error, OSError):  # refused, timed out, unreachable
        return _unreachable(target, timeout, str(error))
    text = str(error)
    if isinstance(error, ValueError) and ("address" in text.lower() or "port" in text.lower()):
        # Dask's parse of the address ("missing port number", an unknown scheme, ...).
        return InvalidArgumentError(
            f"{target!r} is not a Dask scheduler address such as 'tcp://host:8786': {text}"
        )
    # Whatever answers there is not a Dask scheduler: Dask reads its bytes as a frame (a
    # ValueError or MemoryError for an absurd length, a deserialization error, ...).
    return UnavailableError(
        f"cannot connect to a Dask scheduler at {target!r}: what answers there is not one "
        f"({type(error).__name__}: {text})"
    )


def _start_client(target: str, timeout: float, deadline: float) -> Any:
    """A `distributed.Client` of the scheduler at `target` (which answered `_probe`), made on
    a thread of its own and waited for until `deadline` (plus a grace): a Client that fails
    to start is closed on that thread (see `_close_failed`), and one that starts after the
    caller gave up is closed there too, so neither is ever left to the garbage collector."""
    import distributed  # noqa: PLC0415 - the extra is imported only by distributed sessions

    lock = threading.Lock()
    state: dict[str, Any] = {}
    done = threading.Event()

    def start() -> None:
        try:
            client = distributed.Client(
                target, timeout=max(deadline - time.monotonic(), 0.1), set_as_default=False
            )
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            _close_failed(e)
            outcome: tuple[str, Any] = ("error", e)
        else:
            outcome = ("client", client)
        with lock:
            late = state.get("abandoned", False)
            if not late:
                state["outcome"] = outcome
        done.set()
        if late and outcome[0] == "client":
            outcome[1].close()

    threading.Thread(target=start, name="minigraph-connect-client", daemon=True).start()
    done.wait(max(deadline - time.monotonic(), 0) + _GRACE_S)
    with lock:
        outcome = state.get("outcome")
        if outcome is None:
            state["abandoned"] = True
    if outcome is None:
        raise _unreachable(target, timeout, "the scheduler answered, but its client did not start")
    kind, value = outcome
    if kind == "client":
        return value
    raise _connect_error(target, timeout, value) from value


def _close_failed(error: BaseException) -> None:
    """Closes the Client whose construction raised `error` (found in the traceback's frames),
    on this thread: Dask leaves a Client that failed to start half-open (status "connecting",
    or "closed" with its event loop thread still running) and closes it only from `__del__`."""
    import distributed  # noqa: PLC0415

    client = None
    for frame, _ in traceback.walk_tb(error.__traceback__):
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, distributed.Client):
            client = candidate
            break
    if client is None:
        return
    try:
        client.close(timeout=_GRACE_S)
    except Exception:  # noqa: BLE001 - a client that never started may not close cleanly
        pass
    runner = getattr(client, "_loop_runner", None)  # Dask's own; stop() is idempotent
    if runner is not None:
        try:
            runner.stop()
        except Exception:  # noqa: BLE001
            pass


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
        # Every task the spec names, or (without one) every task a worker has served so far.
        self._known: set[DeviceSpec] = set()
        self._generations: dict[str, int] = {}
        self._devices: dict[tuple[str, int], list[RemoteDevice]] = {}

    # -- tasks -----------------------------------------------------------------------------------

    def tasks(self, refresh: bool = False) -> dict[DeviceSpec, str]:
        """Task (`/job:worker/replica:0/task:1`) -> address of the worker serving it now.

        Looked up again when a worker it named has left since the last look-up, or when
        `refresh`.
        """
        with self._lock:
            tasks = self._tasks
            if (
                not refresh
                and tasks is not None
                and all(self.watch.generation.get(a, 0) == g for a, g in self._generations.items())
            ):
                return tasks
            workers = self._identity()
            tasks = self._tasks = self._map_tasks(workers)
            self._known.update(tasks)
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
            # A worker may have joined since the last look-up (a restarted one, under the name
            # of the worker that left): look again before giving up.
            address = self.tasks(refresh=True).get(task)
        if address is None:
            raise UnavailableError(
                f"no worker serves {task.to_string()}; the cluster's tasks are "
                f"{self.describe_tasks()}"
            )
        return address

    def missing_tasks(self) -> set[DeviceSpec]:
        """Tasks of the cluster that no worker serves now: named by the spec, or served by a
        worker earlier (one that left, not yet replaced)."""
        tasks = self.tasks()
        if self.spec is not None:
            self._known.update(
                DeviceSpec(job, 0, k)
                for job, entries in self.spec.items()
                for k in range(len(entries))
            )
        return self._known - tasks.keys()

    def served_addresses(self) -> set[str]:
        """The addresses of the workers serving tasks at the last look-up (none asked now)."""
        return set((self._tasks or {}).values())

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
    counted = 0  # integer-named workers taken by the counts so far
    for job, entries in spec.items():
        if not isinstance(job, str) or not job or "/" in job or ":" in job:
            raise InvalidArgumentError(f"SessionConfig.cluster: invalid job name {job!r}")
        if isinstance(entries, int) and not isinstance(entries, bool):
            if entries < 0:
                raise InvalidArgumentError(
                    f"SessionConfig.cluster[{job!r}]: a count of tasks must be >= 0; got {entries}"
                )
            result[job] = [str(counted + k) for k in range(entries)]
            counted += entries
            continue
        if isinstance(entries, str) or not isinstance(entries, Sequence):
            raise InvalidArgumentError(
                f"SessionConfig.cluster[{job!r}] must be a count of tasks or a list of worker "
                f"addresses or names; got {entries!r}"
            )
        result[job] = [str(e) for e in entries]
    return result
