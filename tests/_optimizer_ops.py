"""Test ops of the optimizer tests (tests/test_optimizer_*.py), registered once at import
through the public API. Names start with "OptTest". Kernels with effects write to module-level
state that `reset()` clears.

- OptTestAdd (trusted, elementwise, same shapes): x + y into `ctx.forward_input_or_empty`, the
  buffer of input 0 when forwardable, else of input 1; OptTestNeg (trusted): -x likewise.
  Both record (node, forwarded input or None, id of the output buffer) in CALLS.
- OptTestUntrustedAdd: the same kernel as OptTestAdd, not trusted.
- OptTestCount (stateful, trusted, no inputs): 0, 1, 2, ... one more per call.
- OptTestNoisy (stateful, trusted): x + the number of calls so far.
- OptTestCheckPositive (trusted): 2 * x, or InvalidArgumentError naming the first negative.
- OptTestScale (trusted, float attr `factor`): x * factor.
- OptTestPass (trusted): returns its input itself (trust allows it, as Identity's kernel).
- OptTestTwo (trusted, two outputs): (x + 1, x * 2).
- OptTestBig (trusted): an array of `n` float64 filled with x's first value.
- OptTestNoKernel: no kernel anywhere.
- OptTestScaleList (trusted, a list input, float attr `factor`): xs[0] * factor.
- OptTestUntrustedPass: returns its input itself, not trusted.
"""

from __future__ import annotations

import threading

import numpy as np

import minigraph as mg
from minigraph import OpDef

CALLS: list[tuple[str, int | None, int]] = []
_COUNT = [0]
_lock = threading.Lock()


def reset() -> None:
    CALLS.clear()
    _COUNT[0] = 0


def _same(ctx):
    return ctx.input_shapes[0]


def _unary(name: str, attrs=(), *, stateful: bool = False):
    return mg.register_op(
        OpDef(
            name,
            inputs=["x: T"],
            outputs=["y: T"],
            attrs=["T: {float32, float64, int32, int64}", *attrs],
            shape_fn=_same,
            is_stateful=stateful,
        )
    )


def _forwarded_out(ctx, *inputs):
    """The output buffer: a forwardable input's own array when there is one."""
    x = inputs[0]
    for i, value in enumerate(inputs):
        if i in ctx.forwardable_inputs:
            out = ctx.forward_input_or_empty(i, value, x.shape, x.dtype)
            if out is value:
                return out, i
    return ctx.empty(x.shape, x.dtype), None


def _add(ctx, x, y, *, T):
    out, used = _forwarded_out(ctx, x, y)
    with _lock:
        CALLS.append((ctx.node_name, used, id(out)))
    return np.add(x, y, out=out)


def _neg(ctx, x, *, T):
    out, used = _forwarded_out(ctx, x)
    with _lock:
        CALLS.append((ctx.node_name, used, id(out)))
    return np.negative(x, out=out)


def _binary(name: str):
    return mg.register_op(
        OpDef(
            name,
            inputs=["x: T", "y: T"],
            outputs=["z: T"],
            attrs=["T: {float32, float64, int32, int64}"],
            shape_fn=lambda ctx: ctx.input_shapes[0].merge_with(ctx.input_shapes[1]),
        )
    )


Add = _binary("OptTestAdd")
mg.register_kernel("OptTestAdd", "CPU", _add, trusted=True)
UntrustedAdd = _binary("OptTestUntrustedAdd")
mg.register_kernel("OptTestUntrustedAdd", "CPU", _add)
Neg = _unary("OptTestNeg")
mg.register_kernel("OptTestNeg", "CPU", _neg, trusted=True)

Count = mg.register_op(
    OpDef("OptTestCount", outputs=["y: int64"], shape_fn=lambda ctx: [[]], is_stateful=True)
)


def _count(ctx):
    with _lock:
        value = _COUNT[0]
        _COUNT[0] += 1
    return np.array(value, np.int64)


mg.register_kernel("OptTestCount", "CPU", _count, trusted=True)

Noisy = _unary("OptTestNoisy", stateful=True)


def _noisy(ctx, x, *, T):
    with _lock:
        value = _COUNT[0]
        _COUNT[0] += 1
    return x + x.dtype.type(value)


mg.register_kernel("OptTestNoisy", "CPU", _noisy, trusted=True)

CheckPositive = _unary("OptTestCheckPositive")


def _check_positive(ctx, x, *, T):
    bad = np.flatnonzero(x.reshape(-1) < 0)
    if bad.size:
        raise ctx.invalid_argument(f"x[{int(bad[0])}] = {x.reshape(-1)[bad[0]]} is negative")
    return x * x.dtype.type(2)


mg.register_kernel("OptTestCheckPositive", "CPU", _check_positive, trusted=True)

Scale = _unary("OptTestScale", attrs=["factor: float"])
mg.register_kernel(
    "OptTestScale", "CPU", lambda ctx, x, T, factor: x * x.dtype.type(factor), trusted=True
)

Pass = _unary("OptTestPass")
mg.register_kernel("OptTestPass", "CPU", lambda ctx, x, T: x, trusted=True)

Two = mg.register_op(
    OpDef(
        "OptTestTwo",
        inputs=["x: T"],
        outputs=["a: T", "b: T"],
        attrs=["T: {float32, float64, int32, int64}"],
        shape_fn=lambda ctx: [ctx.input_shapes[0], ctx.input_shapes[0]],
    )
)
mg.register_kernel(
    "OptTestTwo", "CPU", lambda ctx, x, T: (x + x.dtype.type(1), x * x.dtype.type(2)),
    trusted=True,
)  # fmt: skip

Big = mg.register_op(
    OpDef(
        "OptTestBig",
        inputs=["x: float64"],
        outputs=["y: float64"],
        attrs=["n: int"],
        shape_fn=lambda ctx: [ctx.attr("n")],
    )
)


def _big(ctx, x, *, n):
    out = np.empty(n, np.float64)
    out.fill(float(x.reshape(-1)[0]))
    return out


mg.register_kernel("OptTestBig", "CPU", _big, trusted=True)

#: No kernel on any device (what a rewrite may not build).
NoKernel = _unary("OptTestNoKernel")

#: xs[0] * factor, with a list input: its nodes skip the construction memo (which keys float
#: attrs by ==, 0.0 == -0.0), so attrs differing in the sign of zero stay as given.
ScaleList = mg.register_op(
    OpDef(
        "OptTestScaleList",
        inputs=["xs: N * T"],
        outputs=["y: T"],
        attrs=["N: int >= 1", "T: {float32, float64}", "factor: float"],
        shape_fn=_same,
    )
)
mg.register_kernel(
    "OptTestScaleList", "CPU", lambda ctx, xs, N, T, factor: xs[0] * xs[0].dtype.type(factor),
    trusted=True,
)  # fmt: skip

#: Returns its input itself, untrusted (so its output may be a view of it as far as the plan
#: knows).
UntrustedPass = _unary("OptTestUntrustedPass")
mg.register_kernel("OptTestUntrustedPass", "CPU", lambda ctx, x, T: x)
