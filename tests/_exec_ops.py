"""Small test ops for the execution tests (placer, session, devices, tracing).

Every op is registered once, at import, through the public API (`register_op`,
`register_kernel`); names start with "ExecTest" so they cannot clash with real op libraries or
with other test modules. Kernels that have side effects write to module-level state that the
fixtures in conftest.py (section "execution tests") reset between tests.
"""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np

import minigraph
from minigraph import dtypes
from minigraph.op_def import OpDef

NUMERIC = [d for d in dtypes.ALL_DTYPES if d.is_numeric]
FLOATS = [d for d in dtypes.ALL_DTYPES if d.is_floating]


def _same_shape(ctx):
    return ctx.input_shapes[0]


def _unary(name: str, attrs=()):
    return minigraph.register_op(
        OpDef(
            name,
            inputs=["x: T"],
            outputs=["y: T"],
            attrs=["T: type", *attrs],
            shape_fn=_same_shape,
        )
    )


# -- state shared with the tests -----------------------------------------------------------------

#: Names of nodes whose kernels ran, in the order they ran (ExecTestRecord, ExecTestEffect).
EVENTS: list[str] = []
_events_lock = threading.Lock()

#: What ExecTestHostAxis's kernels received: (device name, x, axis) per call.
HOST_AXIS_CALLS: list[tuple[str, np.ndarray, np.ndarray]] = []


class Live:
    """Counts arrays made by ExecTestTracked that are still alive, and the most seen at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.live = 0
            self.peak = 0
            self.made = 0

    def _freed(self) -> None:
        with self.lock:
            self.live -= 1

    def track(self, array: np.ndarray) -> np.ndarray:
        with self.lock:
            self.live += 1
            self.made += 1
            self.peak = max(self.peak, self.live)
        weakref.finalize(array, self._freed)
        return array


LIVE = Live()

#: ExecTestBarrier's kernels wait on this (set by the test) before returning.
BARRIER: list[threading.Barrier] = []


def reset_state() -> None:
    CALLS.clear()
    EVENTS.clear()
    HOST_AXIS_CALLS.clear()
    LIVE.reset()
    BARRIER.clear()


# -- arithmetic ----------------------------------------------------------------------------------

AddOne = _unary("ExecTestAddOne")


def _add_one(ctx, x, *, T):
    return x + x.dtype.type(1)


minigraph.register_kernel("ExecTestAddOne", "CPU", _add_one, type_constraints={"T": NUMERIC})
minigraph.register_kernel("ExecTestAddOne", "GPU", _add_one, type_constraints={"T": NUMERIC})

Add = minigraph.register_op(
    OpDef(
        "ExecTestAdd",
        inputs=["x: T", "y: T"],
        outputs=["z: T"],
        attrs=["T: type"],
        shape_fn=_same_shape,
    )
)


def _add(ctx, x, y, *, T):
    return ctx.xp.add(x, y)


minigraph.register_kernel("ExecTestAdd", "CPU", _add, type_constraints={"T": NUMERIC})
minigraph.register_kernel("ExecTestAdd", "GPU", _add, type_constraints={"T": NUMERIC})

# -- device coverage -----------------------------------------------------------------------------

#: Kernels on CPU for every dtype, on GPU for numeric dtypes only (strings stay on the CPU).
NumericGpu = _unary("ExecTestNumericGpu")


def _copy(ctx, x, **attrs):
    return ctx.xp.array(x, copy=True)


minigraph.register_kernel("ExecTestNumericGpu", "CPU", _copy)
minigraph.register_kernel(
    "ExecTestNumericGpu", "GPU", _copy, type_constraints={"T": NUMERIC}
)  # fmt: skip

#: A CPU kernel only.
CpuOnly = _unary("ExecTestCpuOnly")
minigraph.register_kernel("ExecTestCpuOnly", "CPU", lambda ctx, x, T: x * 2)

#: A GPU kernel only, for numeric dtypes.
GpuOnly = _unary("ExecTestGpuOnly")
minigraph.register_kernel(
    "ExecTestGpuOnly", "GPU", lambda ctx, x, T: x * 3, type_constraints={"T": NUMERIC}
)

#: A GPU kernel only, for every dtype (even strings, which cannot be copied onto a GPU).
AnyGpu = _unary("ExecTestAnyGpu")
minigraph.register_kernel("ExecTestAnyGpu", "GPU", lambda ctx, x, T: x)

#: No kernel anywhere.
NoKernel = _unary("ExecTestNoKernel")

# -- labels and priority -------------------------------------------------------------------------

Labeled = _unary("ExecTestLabeled")
minigraph.register_kernel("ExecTestLabeled", "CPU", lambda ctx, x, T: x + 1)
minigraph.register_kernel("ExecTestLabeled", "CPU", lambda ctx, x, T: x + 10, label="ten")
minigraph.register_kernel("ExecTestLabeled", "CPU", lambda ctx, x, T: x + 100, label="hundred")

Priority = _unary("ExecTestPriority")
minigraph.register_kernel("ExecTestPriority", "CPU", lambda ctx, x, T: x * 0 + 1, priority=0)
minigraph.register_kernel("ExecTestPriority", "CPU", lambda ctx, x, T: x * 0 + 5, priority=5)
minigraph.register_kernel("ExecTestPriority", "CPU", lambda ctx, x, T: x * 0 + 2, priority=2)
# On GPU the high-priority kernel only takes float32; other dtypes get the generic one.
minigraph.register_kernel("ExecTestPriority", "GPU", lambda ctx, x, T: x * 0 + 3, priority=0)
minigraph.register_kernel(
    "ExecTestPriority", "GPU", lambda ctx, x, T: x * 0 + 7, priority=9,
    type_constraints={"T": [dtypes.float32]},
)  # fmt: skip

# -- host memory ---------------------------------------------------------------------------------

HostAxis = minigraph.register_op(
    OpDef(
        "ExecTestHostAxis",
        inputs=["x: T", "axis: int32"],
        outputs=["y: T"],
        attrs=["T: type"],
        shape_fn=_same_shape,
    )
)


def _host_axis(ctx, x, axis, *, T):
    HOST_AXIS_CALLS.append((ctx.device.name, x, axis))
    if not isinstance(axis, np.ndarray):
        raise TypeError(f"axis should be a host numpy array, got {type(axis).__name__}")
    return x + x.dtype.type(int(axis))


minigraph.register_kernel("ExecTestHostAxis", "CPU", _host_axis)
minigraph.register_kernel(
    "ExecTestHostAxis", "GPU", _host_axis, host_memory=("axis",), type_constraints={"T": NUMERIC}
)

# -- side effects --------------------------------------------------------------------------------

#: Appends its node name to EVENTS (after sleeping `delay` seconds) and returns its input.
Record = _unary("ExecTestRecord", attrs=["delay: float = 0.0"])


def _record(ctx, x, *, T, delay):
    if delay:
        time.sleep(delay)
    with _events_lock:
        EVENTS.append(ctx.node_name)
    return x


minigraph.register_kernel("ExecTestRecord", "CPU", _record)
minigraph.register_kernel("ExecTestRecord", "GPU", _record, type_constraints={"T": NUMERIC})

#: No inputs, no outputs: appends its node name to EVENTS (after sleeping `delay` seconds).
#: Its kernel returns None, as a kernel of an op without outputs naturally does.
Effect = minigraph.register_op(OpDef("ExecTestEffect", attrs=["delay: float = 0.0"]))


def _effect(ctx, *, delay):
    if delay:
        time.sleep(delay)
    with _events_lock:
        EVENTS.append(ctx.node_name)


minigraph.register_kernel("ExecTestEffect", "CPU", _effect)

#: Waits on BARRIER[0] (proves that two nodes run at the same time) and returns its input.
Barrier = _unary("ExecTestBarrier")


def _barrier(ctx, x, *, T):
    BARRIER[0].wait()
    return x


minigraph.register_kernel("ExecTestBarrier", "CPU", _barrier)

#: x + 1, each output counted in LIVE while it is alive.
Tracked = _unary("ExecTestTracked")
minigraph.register_kernel(
    "ExecTestTracked", "CPU", lambda ctx, x, T: LIVE.track(x + x.dtype.type(1))
)

#: A new float64 array of `n` elements filled with x's first value (x + 1 for later links).
Big = minigraph.register_op(
    OpDef(
        "ExecTestBig",
        inputs=["x: float64"],
        outputs=["y: float64"],
        attrs=["n: int"],
        shape_fn=lambda ctx: [ctx.attr("n")],
    )
)


def _big(ctx, x, *, n):
    out = np.empty(n, np.float64)
    out.fill(float(x.reshape(-1)[0]) + 1.0)
    return out


minigraph.register_kernel("ExecTestBig", "CPU", _big)

# -- failures ------------------------------------------------------------------------------------

#: Raises according to `kind`; returns its input when kind is "none".
Fail = _unary("ExecTestFail", attrs=['kind: {"value", "memory", "invalid", "runtime", '
                                     '"notimpl", "type", "keyboard", "systemexit", '
                                     '"generatorexit", "badstr", "none"}'])  # fmt: skip


class UnprintableError(Exception):
    """An exception whose __str__ itself raises."""

    def __str__(self):
        raise RuntimeError("no text for you")


def _fail(ctx, x, *, T, kind):
    if kind == "value":
        raise ValueError("bad value from the kernel")
    if kind == "memory":
        raise MemoryError("out of memory in the kernel")
    if kind == "invalid":
        raise ctx.invalid_argument("indices[3] = 7 is not in [0, 5)")
    if kind == "runtime":
        raise RuntimeError("something broke in the kernel")
    if kind == "notimpl":
        raise NotImplementedError("not done yet")
    if kind == "type":
        raise TypeError("wrong type in the kernel")
    if kind == "keyboard":
        raise KeyboardInterrupt("interrupted inside the kernel")
    if kind == "systemexit":
        raise SystemExit("exit inside the kernel")
    if kind == "generatorexit":
        raise GeneratorExit("generator exit inside the kernel")
    if kind == "badstr":
        raise UnprintableError()
    return x


minigraph.register_kernel("ExecTestFail", "CPU", _fail)
minigraph.register_kernel("ExecTestFail", "GPU", _fail, type_constraints={"T": NUMERIC})

#: A kernel that breaks its contract according to `mode`: "dtype" returns float64,
#: "shape" returns one more element, "ok" returns its input.
BadOutput = _unary("ExecTestBadOutput", attrs=['mode: {"dtype", "shape", "ok"}'])


def _bad_output(ctx, x, *, T, mode):
    if mode == "dtype":
        return x.astype(np.float64)
    if mode == "shape":
        return np.concatenate([x, x[:1]])
    return x


minigraph.register_kernel("ExecTestBadOutput", "CPU", _bad_output)

#: Two outputs (x, x + 1); mode "one" makes the kernel return a single array instead.
TwoOut = minigraph.register_op(
    OpDef(
        "ExecTestTwoOut",
        inputs=["x: T"],
        outputs=["a: T", "b: T"],
        attrs=["T: type", 'mode: {"ok", "one"} = "ok"'],
        shape_fn=lambda ctx: [ctx.input_shapes[0], ctx.input_shapes[0]],
    )
)


def _two_out(ctx, x, *, T, mode):
    if mode == "one":
        return (x,)
    return x, x + x.dtype.type(1)


minigraph.register_kernel("ExecTestTwoOut", "CPU", _two_out)
minigraph.register_kernel("ExecTestTwoOut", "GPU", _two_out, type_constraints={"T": NUMERIC})
# Under the label "wrong-second", the second output has the wrong dtype (int64).
minigraph.register_kernel(
    "ExecTestTwoOut", "CPU", lambda ctx, x, T, mode: (x, x.astype(np.int64)), label="wrong-second"
)

#: x + sum(x), the sum computed once per plan and kept in ctx.cache (logged to EVENTS).
Cached = _unary("ExecTestCached")


def _cached(ctx, x, *, T):
    if "sum" not in ctx.cache:
        with _events_lock:
            EVENTS.append(ctx.node_name)
        ctx.cache["sum"] = x.dtype.type(x.sum())  # x.sum() of int32 is int64
    return x + ctx.cache["sum"]


minigraph.register_kernel("ExecTestCached", "CPU", _cached)

# -- trust: what user kernels may do to their inputs and return ---------------------------------

#: Calls CALLS[0](ctx, x) (set by the test) and returns its result, or x when it returns None
#: or CALLS is empty.
Call = _unary("ExecTestCall")
CALLS: list = []


def _call(ctx, x, *, T):
    result = CALLS[0](ctx, x) if CALLS else None
    return x if result is None else result


minigraph.register_kernel("ExecTestCall", "CPU", _call)
minigraph.register_kernel("ExecTestCall", "GPU", _call, type_constraints={"T": NUMERIC})

#: A user kernel that writes into its input (`x += 1`) and returns it.
Mutate = _unary("ExecTestMutate")


def _mutate(ctx, x, *, T):
    x += x.dtype.type(1)
    return x


minigraph.register_kernel("ExecTestMutate", "CPU", _mutate)
minigraph.register_kernel("ExecTestMutate", "GPU", _mutate, type_constraints={"T": NUMERIC})

#: A user kernel returning a view of its input: "reverse" x[::-1], "same" x itself.
View = _unary("ExecTestView", attrs=['mode: {"reverse", "same"} = "reverse"'])


def _view(ctx, x, *, T, mode):
    return x[::-1] if mode == "reverse" else x


minigraph.register_kernel("ExecTestView", "CPU", _view)
minigraph.register_kernel("ExecTestView", "GPU", _view, type_constraints={"T": NUMERIC})
# The same kernel, trusted (label "trusted"): no protection, no checks.
minigraph.register_kernel("ExecTestView", "CPU", _view, label="trusted", trusted=True)

#: A user kernel returning what `mode` says instead of an array of its input's dtype and shape.
Returns = _unary(
    "ExecTestReturns",
    attrs=[
        'mode: {"none", "list", "tuple", "scalar", "subclass", "float64", "short", "rank", "ok"}'
    ],
)


def _returns(ctx, x, *, T, mode):
    if mode == "none":
        return None
    if mode == "list":
        return x.tolist()
    if mode == "tuple":
        return (x,)
    if mode == "scalar":
        return x.dtype.type(x.reshape(-1)[0])  # a numpy scalar: fine for a 0-d output
    if mode == "subclass":
        return np.ma.masked_array(x)
    if mode == "float64":
        return x.astype(np.float64)
    if mode == "short":
        return x[:-1].copy()  # one element too few
    if mode == "rank":
        return x.reshape((1,) + x.shape)  # the right elements, one dim too many
    return x.copy()


minigraph.register_kernel("ExecTestReturns", "CPU", _returns)
# The same kernel, trusted (label "trusted"): its outputs go unchecked by default.
minigraph.register_kernel("ExecTestReturns", "CPU", _returns, label="trusted", trusted=True)
