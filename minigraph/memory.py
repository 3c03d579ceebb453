"""A pool of large host buffers, recycled once nothing references them (kernels' `ctx.empty`).

Why: writing into freshly allocated memory costs a page fault per page. A 100 MB gather
output spends most of its time faulting its pages in, and on virtual machines whose hypervisor
takes freed memory back (free page reporting), each fault can cost a host fault as well, which
makes fresh outputs several times slower at random. Memory that stays mapped costs neither,
so ONNX Runtime and TF keep arenas; this pool is minigraph's.

How recycling stays safe: every buffer is a 1-D uint8 numpy array owned by the pool, and the
arrays handed out are views of it. numpy points every view, and every view of a view, at the
owner (`view.base is owner`); memoryviews, DLPack capsules, `ctypes` objects and arrays made
from buffers hold a reference to an array of that chain. So the owner's reference count is the
pool's own references exactly when nothing that can reach its memory exists any more: not the
user's output, not a slice of it kept somewhere, not an intermediate still alive in a running
plan. Only then is the buffer handed out again. What the pool cannot see is raw addresses
(`arr.ctypes.data`, `__array_interface__["data"]`) kept after the array is gone: those dangle
with numpy's own allocator too.

Free-threaded CPython builds (no GIL) get no pooling: there, reference counts are not exact
at any instant.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import weakref
from typing import Any

import numpy as np

from minigraph.errors import InvalidArgumentError

__all__ = ["BufferPool", "available_bytes"]

# Smaller arrays come from malloc's heap, which reuses memory without faults; a pool look-up
# would cost more than it saves.
MIN_BYTES = 1 << 20
# Buffer sizes are rounded up to 2**(k/4) bytes (at most 19% unused), so that requests of
# similar sizes share buffers.
_STEPS_PER_DOUBLING = 4


def _refs(items: list[Any], i: int) -> int:
    return sys.getrefcount(items[i])


# What `_refs` returns for an object referenced only by the list: measured rather than assumed,
# since interpreters differ in the temporary references a call holds.
_UNREFERENCED = _refs([object()], 0)
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


def _bucket(nbytes: int) -> int:
    """The buffer size serving requests of `nbytes`: the next 2**(k/4) at or above it."""
    k = math.ceil(math.log2(nbytes) * _STEPS_PER_DOUBLING - 1e-9)
    size = math.ceil(2 ** (k / _STEPS_PER_DOUBLING))
    while size < nbytes:  # guard against float rounding
        k += 1
        size = math.ceil(2 ** (k / _STEPS_PER_DOUBLING))
    return size


class BufferPool:
    """Recycles large host buffers between kernel calls and runs.

    `empty(shape, dtype)` returns an uninitialised C-contiguous array, as `np.empty` does; for
    at least `min_bytes` its memory comes from a pooled buffer that nothing references any
    more (see the module docstring), or from a new buffer that joins the pool.

    The pool holds at most `max_bytes` (in use and free together); past that, requests get
    plain `np.empty` arrays after free buffers have been dropped. Free buffers that have not
    been handed out for `max_idle` requests are dropped whenever a new buffer is allocated, so
    the pool follows the working set of the plans that use it. Thread-safe.
    """

    def __init__(
        self,
        max_bytes: int = 4 << 30,
        *,
        min_bytes: int = MIN_BYTES,
        max_idle: int = 256,
    ):
        for name, value, least in (
            ("max_bytes", max_bytes, 0), ("min_bytes", min_bytes, 1), ("max_idle", max_idle, 1),
        ):  # fmt: skip
            if (
                isinstance(value, (bool, np.bool_))
                or not isinstance(value, (int, np.integer))
                or value < least
            ):
                raise InvalidArgumentError(
                    f"BufferPool: {name} must be an int >= {least}; got "
                    f"{type(value).__name__} {value!r}"
                )
        max_bytes, min_bytes, max_idle = int(max_bytes), int(min_bytes), int(max_idle)
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.max_idle = max_idle
        self.enabled = _GIL and max_bytes > 0
        self._lock = threading.Lock()
        _pools.add(self)  # its lock is made anew in a forked child (see _after_fork_in_child)
        # bucket size -> owner buffers, and per buffer the tick it was last handed out.
        self._buffers: dict[int, list[np.ndarray]] = {}
        self._last_used: dict[int, list[int]] = {}
        self._tick = 0
        self._held = 0  # bytes of all pooled buffers
        self.hits = 0
        self.misses = 0

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialised C-contiguous array of `shape` and `dtype`."""
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes < self.min_bytes or not self.enabled or dtype.hasobject:
            return np.empty(shape, dtype)
        size = _bucket(nbytes)
        with self._lock:
            self._tick += 1
            buffers = self._buffers.get(size)
            if buffers is not None:
                for i in range(len(buffers)):
                    if _refs(buffers, i) == _UNREFERENCED:
                        self._last_used[size][i] = self._tick
                        self.hits += 1
                        return np.ndarray(shape, dtype, buffer=buffers[i])
            self.misses += 1
            self._trim(size)
            if self._held + size > self.max_bytes:
                return np.empty(shape, dtype)  # over the cap: not pooled
            owner = np.empty(size, np.uint8)
            self._buffers.setdefault(size, []).append(owner)
            self._last_used.setdefault(size, []).append(self._tick)
            self._held += size
            return np.ndarray(shape, dtype, buffer=owner)

    def _trim(self, wanted: int) -> None:
        """Drops free buffers idle for `max_idle` requests, then (oldest first) as many free
        buffers as keep a new buffer of `wanted` bytes under the cap. Holds the lock."""
        oldest = self._tick - self.max_idle
        free: list[tuple[int, int, int]] = []  # (last used, size, index)
        for size, buffers in self._buffers.items():
            used = self._last_used[size]
            for i in range(len(buffers)):
                if _refs(buffers, i) == _UNREFERENCED:
                    free.append((used[i], size, i))
        free.sort()
        drop: set[tuple[int, int]] = set()
        for last, size, i in free:
            if last < oldest or self._held + wanted > self.max_bytes:
                drop.add((size, i))
                self._held -= size
        if not drop:
            return
        for size in {s for s, _ in drop}:
            keep = [i for i in range(len(self._buffers[size])) if (size, i) not in drop]
            self._buffers[size] = [self._buffers[size][i] for i in keep]
            self._last_used[size] = [self._last_used[size][i] for i in keep]
            if not keep:
                del self._buffers[size], self._last_used[size]

    def clear(self) -> None:
        """Forgets every buffer (arrays still in use stay valid: they keep their memory)."""
        with self._lock:
            self._buffers.clear()
            self._last_used.clear()
            self._held = 0

    @property
    def held_bytes(self) -> int:
        """Bytes of all pooled buffers, in use or free."""
        return self._held

    def free_bytes(self) -> int:
        """Bytes of pooled buffers that nothing references (ready to be handed out)."""
        with self._lock:
            return sum(
                size
                for size, buffers in self._buffers.items()
                for i in range(len(buffers))
                if _refs(buffers, i) == _UNREFERENCED
            )

    def __repr__(self) -> str:
        n = sum(len(b) for b in self._buffers.values())
        return (
            f"<BufferPool {n} buffers, {self._held / 2**20:.1f} MiB held, "
            f"{self.hits} hits, {self.misses} misses>"
        )


def available_bytes() -> int | None:
    """About how many bytes this process can allocate now, or None when the system does not
    say: Linux's MemAvailable (free memory plus what caches can give back), less for a
    cgroup memory limit (containers) or an address-space limit (`ulimit -v`) closer to being
    reached; elsewhere the physical memory. Meant for refusing a copy that cannot succeed
    before numpy tries it (a request past the limit fails late, or ends the process)."""
    found: list[int] = []
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", "rb") as f:
            limit = f.read().strip()
        if limit != b"max":
            with open("/sys/fs/cgroup/memory.current", "rb") as f:
                found.append(max(0, int(limit) - int(f.read().strip())))
    except (OSError, ValueError):
        pass
    try:
        import resource  # noqa: PLC0415 - POSIX only, and only needed here

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm", "rb") as f:
                mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            found.append(max(0, soft - mapped))
    except (ImportError, OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (AttributeError, OSError, ValueError):
            return None
    return min(found)


_pools: weakref.WeakSet[BufferPool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: a pool lock another thread held then
    would never be released, so every pool gets a new one. (Buffers the parent's other threads
    were using may stay referenced by what those threads held; they are then never handed out,
    which is safe.)"""
    for pool in list(_pools):
        pool._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
