"""What a kernel receives besides its inputs and attrs: the `KernelContext`; and what a
kernel's specialiser sees when a plan is compiled: the `KernelSpec`.

One context exists per node of a compiled plan. Kernels read `ctx.xp` (the device's array
module: numpy or cupy; one kernel body can serve both) and may keep values derived from their
constant inputs or attrs in `ctx.cache` (a per-node dict that lives as long as the plan, as the
state of a TF OpKernel object does). Kernels must not modify their inputs.

Specialisation: a kernel registered with `specialize=fn` (see `register_kernel`) is offered,
once per node when a plan is compiled, a `KernelSpec`: the node's context and attrs, its
inputs' static dtypes and shapes, and the values of its constant inputs. `fn(spec)` returns a
callable that the plan calls instead of the kernel for that node, or None to keep the kernel.
What is knowable then (validating constant indices, choosing a code path) is decided once per
plan rather than on every run. A specialiser may also return an `InlineCall`: a C function
(a numpy method) and its arguments, which the plan's generated code calls directly, without a
Python frame, falling back to a callable whenever it raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from minigraph.errors import InvalidArgumentError

if TYPE_CHECKING:
    from minigraph.devices import Device
    from minigraph.memory import BufferPool
    from minigraph.resources import ResourceMgr

__all__ = ["KernelContext", "KernelSpec", "InlineCall", "Input"]


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
        forwardable_inputs: the input positions whose buffers this node may write its output
            into (TF's `forward_input_or_allocate_output`): the plan sets it for inputs whose
            last use is this node and whose array nothing else can see (an intermediate made by
            a trusted kernel: not a constant, a feed, a fetched value or a view of another
            value). Read it through `forward_input_or_empty`.
        resources: the `minigraph.resources.ResourceMgr` of this node's device in the session
            running the plan: the state stateful kernels keep across runs (variables), by
            (container, shared name). None when the kernel runs outside a session.
    """

    __slots__ = (
        "xp", "device", "node_name", "op_type", "constant_inputs", "cache", "intra_op_threads",
        "forwardable_inputs", "resources", "_pool", "_buffers",
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
        resources: ResourceMgr | None = None,
    ):
        self.xp = device.xp
        self.device = device
        self.node_name = node_name
        self.op_type = op_type
        self.constant_inputs = constant_inputs
        self.cache: dict[Any, Any] = {}
        self.intra_op_threads = intra_op_threads
        self.forwardable_inputs: frozenset[int] = frozenset()
        self.resources = resources
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

    def forward_input_or_empty(
        self, index: int, value: Any, shape: tuple[int, ...], dtype: Any
    ) -> Any:
        """Memory for an output of `shape` and `dtype`: input `index`'s own array (`value`)
        when the plan lets this node overwrite it (`forwardable_inputs`) and it has exactly
        that shape and dtype and is C-contiguous and writeable (a variable's value, shared with
        its readers, is read-only), else `empty(shape, dtype)`.

        An elementwise kernel then writes in place (`np.add(x, y, out=out)` with `out is x` is
        safe for ufuncs), so a chain of them reuses one buffer instead of allocating an output
        per node."""
        if (
            index in self.forwardable_inputs
            and value.shape == tuple(shape)
            and value.dtype == dtype
            and value.flags.c_contiguous
            and value.flags.writeable
        ):
            return value
        return self.empty(shape, dtype)

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
        from concurrent.futures import wait  # noqa: PLC0415 - loaded with the pool already

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


class KernelSpec:
    """What a kernel's specialiser knows about one node when a plan is compiled.

    Attributes:
        ctx: the node's `KernelContext` (device, `xp`, `empty`, intra-op threads, cache).
        attrs: the attrs the kernel receives (those its signature declares), canonical.
        input_dtypes, input_shapes: per flat input, the static `DType` and (possibly partial)
            `TensorShape` the graph inferred. They hold for every input the node sees: fed
            values are checked against them, and so are the outputs of kernels that are not
            registered trusted (unless the session turns `check_kernel_outputs` off).
        constants: per flat input, its value on the kernel's device when it is the same on
            every run (a folded constant), else None.
        general: `general(*inputs)` runs the kernel itself, as `fn(ctx, *inputs, **attrs)`.
        shared: a dict shared by the specialisers of every node of the plan being compiled,
            for work that many nodes would repeat (nodes often share one constant). Key it by
            something of your own (e.g. your function and the constant's `id`, keeping the
            constant in the value so that the id stays valid); it is dropped after compiling.

    The callable a specialiser returns takes the kernel's inputs (the same positional
    arguments as `general`, constant ones included) and must return what the kernel would
    and raise what it would, for every input: the usual way is to handle the cases it was made
    for and to call `general(*inputs)` for anything else, including errors. It may be called
    from several threads at once.
    """

    __slots__ = (
        "ctx", "attrs", "input_dtypes", "input_shapes", "constants", "general", "shared",
    )  # fmt: skip

    def __init__(
        self,
        ctx: KernelContext,
        attrs: Mapping[str, Any],
        input_dtypes: tuple[Any, ...],
        input_shapes: tuple[Any, ...],
        constants: tuple[Any, ...],
        general: Callable[..., Any],
        shared: dict[Any, Any] | None = None,
    ):
        self.ctx = ctx
        self.attrs = attrs
        self.input_dtypes = input_dtypes
        self.input_shapes = input_shapes
        self.constants = constants
        self.general = general
        self.shared = {} if shared is None else shared

    def __repr__(self) -> str:
        known = [i for i, c in enumerate(self.constants) if c is not None]
        return (
            f"<KernelSpec {self.ctx.node_name!r} ({self.ctx.op_type}) on "
            f"{self.ctx.device.name}, constant inputs {known}>"
        )


class Input:
    """In an `InlineCall`'s arguments: the node's input `index` (flat, as `Operation.inputs`)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"Input({self.index})"


class InlineCall:
    """What a specialiser may return to have its node run as one direct call.

    `InlineCall(fn, fallback, *args)`: the plan calls `fn(*args)`, each `Input(i)` among
    `args` standing for the node's input i and anything else passed as it is (constants the
    specialiser prepared), from its generated code without a Python frame of its own (for C
    functions such as `numpy.ndarray.take`, that is most of the node's cost). Whenever that
    call raises an `Exception`, `fallback(*inputs)` (called with all inputs, as a kernel's
    general path is) runs instead and gives the node's result or error. So `fn(*args)` must
    return exactly what the kernel would for every input on which it does not raise.
    Interpreted runs call the object itself, which does the same.
    """

    __slots__ = ("fn", "fallback", "args", "_picks")

    def __init__(self, fn: Callable[..., Any], fallback: Callable[..., Any], *args: Any):
        if not callable(fn) or not callable(fallback):
            raise TypeError("InlineCall needs a callable fn and a callable fallback")
        self.fn = fn
        self.fallback = fallback
        self.args = args
        self._picks = tuple(a.index if isinstance(a, Input) else None for a in args)

    def __call__(self, *inputs: Any) -> Any:
        args = [a if i is None else inputs[i] for a, i in zip(self.args, self._picks)]
        try:
            return self.fn(*args)
        except Exception:
            pass  # outside the handler: the fallback's errors carry no context of this one
        return self.fallback(*inputs)

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"InlineCall({name}, {', '.join(map(repr, self.args))})"
