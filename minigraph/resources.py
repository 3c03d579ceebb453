"""Resources: the state a Session keeps for stateful ops across runs (TF's ResourceMgr).

A *resource* (a variable's value, for now) lives in one session, on one device: each session
has a `ResourceStore`, one `ResourceMgr` per device, each mapping (container, shared name) to a
resource, as TensorFlow's `ResourceMgr` does. A new session starts with none; `Session.close()`
drops them all. Kernels reach the manager of their node's device as `ctx.resources`
(`minigraph.KernelContext`), None when a kernel runs outside a session.

A *resource handle* is the small host object that names one: its device, container, shared
name, and the dtype and shape of what it refers to (`ResourceHandle`). Tensors of dtype
`resource` hold one as a 0-d object array (`handle_value`), in host memory on every device
(TF's `HostMemory("resource")`); ops that use the resource look it up in their device's manager.

Variables (`Var`): the value is an array on the resource's device (numpy on the host, cupy on a
GPU). Each variable has a shared/exclusive lock (TF's variable mutex): readers and updates that
do not ask for exclusivity share it, assigns and updates with `use_locking=True` take it alone.
Values are copy-on-write, as TF's: a dense read hands out the current array itself (a
read-only view on the host), marked `shared`, and the next in-place update first copies it, so
a value once read never changes (except under concurrent updates that share the lock).
Sparse updates set `copy_on_read`: from then on dense reads get copies, so that updating a few
rows never copies a whole table.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np

from minigraph.dtypes import DType, frozen_copy
from minigraph.errors import InvalidArgumentError
from minigraph.tensor_shape import TensorShape

__all__ = [
    "DEFAULT_CONTAINER",
    "ResourceHandle",
    "ResourceMgr",
    "ResourceStore",
    "RWLock",
    "Var",
    "handle_of",
    "handle_value",
    "lock_all",
]

#: The container of handles whose op names none (TF's default container).
DEFAULT_CONTAINER = "localhost"

R = TypeVar("R")


class ResourceHandle:
    """Names one resource: `device` (its full device name), `container`, `name` (the shared
    name), and the `dtype` and `shape` of the value it refers to. Immutable, compared by
    value, picklable."""

    __slots__ = ("device", "container", "name", "dtype", "shape")

    def __init__(self, device: str, container: str, name: str, dtype: DType, shape: TensorShape):
        set_ = object.__setattr__
        set_(self, "device", device)
        set_(self, "container", container or DEFAULT_CONTAINER)
        set_(self, "name", name)
        set_(self, "dtype", dtype)
        set_(self, "shape", shape)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("ResourceHandle is immutable")

    @property
    def key(self) -> tuple[str, str]:
        """(container, name): the resource's key in its device's ResourceMgr."""
        return (self.container, self.name)

    def _fields(self) -> tuple[Any, ...]:
        return (self.device, self.container, self.name, self.dtype, self.shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourceHandle) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((self.device, self.container, self.name))

    def __reduce__(self) -> Any:
        return (ResourceHandle, self._fields())

    def __repr__(self) -> str:
        return (
            f"ResourceHandle(name={self.name!r}, container={self.container!r}, "
            f"device={self.device!r}, dtype={self.dtype.name}, shape={self.shape})"
        )


def handle_value(handle: ResourceHandle) -> np.ndarray:
    """The value of a resource tensor holding `handle`: a read-only 0-d object array."""
    value = np.empty((), dtype=object)
    value[()] = handle
    value.setflags(write=False)
    return value


def handle_of(value: Any, what: str = "resource") -> ResourceHandle:
    """The ResourceHandle a resource tensor's value holds.

    Raises:
        InvalidArgumentError: `value` is not a 0-d array holding a ResourceHandle (a fed
            value of dtype resource may be anything).
    """
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype == object:
        handle = value[()]
        if isinstance(handle, ResourceHandle):
            return handle
        got = f"a 0-d array holding {type(handle).__name__}"
    elif isinstance(value, np.ndarray):
        got = f"an array of shape {list(value.shape)} and dtype {value.dtype}"
    else:
        got = type(value).__name__
    raise InvalidArgumentError(
        f"{what} must be a scalar resource handle (what VarHandleOp makes); got {got}"
    )


class RWLock:
    """A shared/exclusive lock (TF's variable mutex, with `tf_shared_lock`). Writers are
    preferred: once one waits, new readers wait behind it, so updates are never starved."""

    __slots__ = ("_cond", "_readers", "_writer", "_waiting")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._waiting = 0

    def acquire_shared(self) -> None:
        with self._cond:
            while self._writer or self._waiting:
                self._cond.wait()
            self._readers += 1

    def release_shared(self) -> None:
        with self._cond:
            self._readers -= 1
            if not self._readers:
                self._cond.notify_all()

    def acquire_exclusive(self) -> None:
        with self._cond:
            self._waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._writer = True

    def release_exclusive(self) -> None:
        with self._cond:
            self._writer = False
            self._cond.notify_all()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        self.acquire_exclusive()
        try:
            yield
        finally:
            self.release_exclusive()


class Var:
    """A variable's state (TF's `Var` resource).

    Attributes:
        dtype, shape: what its handle declares (the shape may be partial).
        name: the shared name, for messages.
        value: the current array on the variable's device, or None before the first assign.
        shared: `value` may be held by a reader: update a copy, not `value` itself.
        copy_on_read: a sparse update has run: dense reads copy instead of sharing.
        lock: the variable's shared/exclusive lock (`RWLock`).
    """

    __slots__ = ("dtype", "shape", "name", "value", "shared", "copy_on_read", "lock", "_cow",
                 "__weakref__")  # fmt: skip

    def __init__(self, dtype: DType, shape: TensorShape, name: str):
        self.dtype = dtype
        self.shape = shape
        self.name = name
        self.value: Any = None
        self.shared = False
        self.copy_on_read = False
        self.lock = RWLock()
        self._cow = threading.Lock()

    @property
    def initialized(self) -> bool:
        return self.value is not None

    def share(self) -> Any:
        """The value for a dense reader: the array itself, marked shared so that updates
        copy it first (on the host as a read-only view: no kernel writes into it), or a
        copy once the variable is in copy-on-read mode. The caller holds the lock (shared
        or exclusive)."""
        value = self.value
        if self.copy_on_read:
            return value.copy()
        if not self.shared:
            with self._cow:
                self.shared = True
        if isinstance(value, np.ndarray) and value.flags.writeable:
            # A view, not the array made read-only: an update holding the lock shared (Hogwild)
            # may be writing the array itself.
            value = value.view()
            value.flags.writeable = False
        return value

    def writable(self) -> Any:
        """The value, for an in-place update: a private copy first when a reader may hold it
        (copy-on-write). The caller holds the lock; with a shared lock (use_locking=False),
        concurrent updaters agree on one copy."""
        if self.shared:
            with self._cow:
                if self.shared:
                    self.value = self.value.copy()
                    self.shared = False
        return self.value

    def set(self, value: Any, owned: bool) -> None:
        """Replaces the value (an assign). `owned`: nothing else can see `value` (a dying
        intermediate of the run), so it becomes the variable's own array. Otherwise the
        variable keeps a frozen array as it is (a constant: copied on the first update), and
        a private copy of anything else (a fed array, a value another variable shares). The
        caller holds the lock exclusively."""
        if owned:
            self.value, self.shared = value, False
        elif isinstance(value, np.ndarray) and not value.flags.writeable:
            self.value, self.shared = frozen_copy(value), True
        else:
            self.value, self.shared = value.copy(), False

    def _after_fork(self) -> None:
        self.lock = RWLock()
        self._cow = threading.Lock()

    def __repr__(self) -> str:
        state = "uninitialized" if self.value is None else f"value shape {list(self.value.shape)}"
        return f"<Var {self.name!r} {self.dtype.name} {self.shape}: {state}>"


@contextlib.contextmanager
def lock_all(variables: Iterable[Var], exclusive: bool) -> Iterator[None]:
    """Holds the locks of `variables` (each once, in one global order, so that ops locking
    several variables never deadlock), shared or exclusive, as TF's
    MaybeLockVariableInputMutexesInOrder does."""
    unique = sorted({id(v): v for v in variables}.values(), key=id)
    taken: list[Var] = []
    try:
        for v in unique:
            if exclusive:
                v.lock.acquire_exclusive()
            else:
                v.lock.acquire_shared()
            taken.append(v)
        yield
    finally:
        for v in reversed(taken):
            if exclusive:
                v.lock.release_exclusive()
            else:
                v.lock.release_shared()


class ResourceMgr:
    """The resources of one device in one session: (container, name) -> resource. Thread-safe."""

    __slots__ = ("device", "_resources", "_lock", "__weakref__")

    def __init__(self, device: str):
        self.device = device
        self._resources: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def lookup(self, container: str, name: str) -> Any:
        """The resource under (container, name), or None."""
        return self._resources.get((container, name))

    def lookup_or_create(self, container: str, name: str, create: Callable[[], R]) -> R | Any:
        """The resource under (container, name), made by `create()` first if there is none."""
        key = (container, name)
        found = self._resources.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._resources.get(key)
            if found is None:
                found = self._resources[key] = create()
            return found

    def delete(self, container: str, name: str) -> bool:
        """Drops the resource under (container, name); whether there was one."""
        with self._lock:
            return self._resources.pop((container, name), None) is not None

    def clear(self) -> None:
        with self._lock:
            self._resources.clear()

    def items(self) -> list[tuple[tuple[str, str], Any]]:
        """((container, name), resource) pairs, a snapshot."""
        with self._lock:
            return list(self._resources.items())

    def __len__(self) -> int:
        return len(self._resources)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        for _, resource in self._resources.items():
            reinit = getattr(resource, "_after_fork", None)
            if reinit is not None:
                reinit()

    def __repr__(self) -> str:
        return f"<ResourceMgr {self.device}: {len(self)} resources>"


class ResourceStore:
    """A session's resources: one ResourceMgr per device name, made on first use."""

    __slots__ = ("_managers", "_lock", "__weakref__")

    def __init__(self) -> None:
        self._managers: dict[str, ResourceMgr] = {}
        self._lock = threading.Lock()
        _live_stores.add(self)

    def manager(self, device: str) -> ResourceMgr:
        """The ResourceMgr of device `device` (a full device name)."""
        found = self._managers.get(device)
        if found is None:
            with self._lock:
                found = self._managers.get(device)
                if found is None:
                    found = self._managers[device] = ResourceMgr(device)
        return found

    def managers(self) -> dict[str, ResourceMgr]:
        """Device name -> ResourceMgr, a snapshot."""
        with self._lock:
            return dict(self._managers)

    def clear(self) -> None:
        """Drops every resource (Session.close)."""
        for mgr in self.managers().values():
            mgr.clear()

    def __len__(self) -> int:
        """How many resources the store holds, on every device."""
        return sum(len(m) for m in self.managers().values())

    def __repr__(self) -> str:
        return f"<ResourceStore: {len(self)} resources on {len(self._managers)} devices>"


_live_stores: weakref.WeakSet[ResourceStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: locks other threads held then would
    never be released there. Every live store gets new locks (its values are kept)."""
    for store in list(_live_stores):
        store._lock = threading.Lock()
        for mgr in store._managers.values():
            mgr._after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
