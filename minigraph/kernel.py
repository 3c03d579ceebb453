"""What a kernel receives besides its inputs and attrs: the `KernelContext`.

One context exists per node of a compiled plan. Kernels read `ctx.xp` (the device's array
module: numpy or cupy; one kernel body can serve both) and may keep values derived from their
constant inputs or attrs in `ctx.cache` (a per-node dict that lives as long as the plan, as the
state of a TF OpKernel object does). Kernels must not modify their inputs.
"""

from __future__ import annotations

from concurrent.futures import wait
from typing import TYPE_CHECKING, Any

import numpy as np

from minigraph.errors import InvalidArgumentError

if TYPE_CHECKING:
    from minigraph.devices import Device
    from minigraph.memory import BufferPool

__all__ = ["KernelContext"]


class KernelContext:
    """Per-node run-time context handed to kernels as their first argument.

    Attributes:
        xp: the array module of the device (numpy, or cupy on a GPU).
        device: the `Device` the node runs on.
        node_name, op_type: the node, for error messages.
        constant_inputs: for each input, whether its value is the same on every run (it comes
            from a Const); kernels may cache work derived from such inputs in `cache`.
        cache: a dict private to this node, kept across runs of the plan.
        intra_op_threads: how many threads a kernel may use to split its own work.
    """

    __slots__ = (
        "xp", "device", "node_name", "op_type", "constant_inputs", "cache", "intra_op_threads",
        "_pool", "_buffers",
    )  # fmt: skip

    def __init__(
        self,
        device: Device,
        node_name: str,
        op_type: str,
        constant_inputs: tuple[bool, ...] = (),
        intra_op_threads: int = 1,
        pool: Any = None,
        buffers: BufferPool | None = None,
    ):
        self.xp = device.xp
        self.device = device
        self.node_name = node_name
        self.op_type = op_type
        self.constant_inputs = constant_inputs
        self.cache: dict[Any, Any] = {}
        self.intra_op_threads = intra_op_threads
        self._pool = pool
        # The session's host buffer pool, for devices whose arrays are numpy arrays.
        self._buffers = buffers if self.xp is np else None

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised C-contiguous array on this node's device, as `xp.empty`.

        Kernels write their outputs (and large temporaries) into it. On the host, large
        arrays come from the session's buffer pool (`minigraph.memory`): memory that nothing
        references any more (the user's earlier outputs and every view of them included),
        already mapped, so writing it costs no page faults. On a GPU, cupy's memory pool does
        the same.
        """
        buffers = self._buffers
        if buffers is None:
            return self.xp.empty(shape, dtype)
        return buffers.empty(shape, dtype)

    def parallel_for(self, fn: Any, chunks: int) -> None:
        """Runs `fn(i)` for i in range(chunks), on the intra-op pool when there is one.

        Meant for work that releases the GIL (numpy's take, copyto); the calling thread runs
        chunk 0 itself and waits for the others. It returns, or raises, only when no chunk is
        running any more: a failing chunk never leaves others writing behind it. The first
        error, in chunk order, is raised unchanged. Chunks that cannot be handed to the pool
        (it is shut down) run on the calling thread.
        """
        pool = self._pool
        if chunks <= 1 or pool is None:
            for i in range(chunks):
                fn(i)
            return
        futures = []
        inline = [0]
        try:
            for i in range(1, chunks):
                try:
                    futures.append(pool.submit(fn, i))
                except RuntimeError:  # shut down (interpreter exit): the rest runs here
                    inline.extend(range(i, chunks))
                    break
            for i in inline:
                fn(i)
        finally:
            wait(futures)
        for f in futures:
            f.result()

    def invalid_argument(self, message: str) -> InvalidArgumentError:
        """An InvalidArgumentError carrying this node's name and op type."""
        return InvalidArgumentError(message, self.node_name, self.op_type)

    def __repr__(self) -> str:
        return f"<KernelContext {self.node_name!r} ({self.op_type}) on {self.device.name}>"
