"""The math ops embedding_lookup is built from: Range, Cast, and the broadcasting binary ops
Sub, Maximum, FloorDiv, FloorMod. Op definitions, shape functions, CPU and GPU kernels.

Semantics are TensorFlow 2.21's (tf.raw_ops.Range, Cast, Sub, Maximum, FloorDiv, FloorMod):
binary ops broadcast as numpy does; integer FloorDiv/FloorMod round towards negative infinity
and raise "Integer division by zero" on every device (TF's GPU kernels do not check); float
FloorDiv is floor(x / y) and float FloorMod has the sign of the divisor, as TF computes them;
Range accumulates its floating-point values one addition at a time, as TF's kernel does.
Integer arithmetic wraps around on overflow. Cast takes a complex value's real part when
casting to a real type, and `Truncate=True` is refused (UnimplementedError).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minigraph import (
    InvalidArgumentError,
    KernelContext,
    OpDef,
    TensorShape,
    UnimplementedError,
    dtypes,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext

__all__ = ["Range", "Cast", "Sub", "Maximum", "FloorDiv", "FloorMod"]

# cupy holds neither strings nor ml_dtypes' bfloat16: those stay on the CPU.
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]


def _gpu(names: list[str]) -> list[str]:
    return [n for n in names if n != "bfloat16"]


# -- Range -------------------------------------------------------------------------------------

_RANGE_TYPES = [
    "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint16",
    "uint32",
]  # fmt: skip

RANGE = OpDef(
    "Range",
    inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"],
    outputs=["output: Tidx"],
    attrs=["Tidx: {" + ", ".join(_RANGE_TYPES) + "} = int32"],
    shape_fn=lambda ctx: _range_shape(ctx),
    doc="""A sequence of numbers: start, start + delta, ... up to but not including limit.

Inputs are scalars (host memory on every device); delta must not be 0 and must point from
start towards limit.""",
)


def _range_size(start: Any, limit: Any, delta: Any) -> int:
    """TF's element count of Range, with TF's messages for bad arguments."""
    if not all(math.isfinite(v) for v in (start, limit, delta)):
        # TF's kernel computes a size from them; NaN and infinities give none.
        raise InvalidArgumentError(
            f"Requires start, limit and delta to be finite: {start}, {limit}, {delta}"
        )
    if delta == 0:
        raise InvalidArgumentError(f"Requires delta != 0: {delta}")
    if delta > 0 and start > limit:
        raise InvalidArgumentError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise InvalidArgumentError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if isinstance(start, (int, np.integer)):
        start, limit, delta = int(start), int(limit), int(delta)
        return (abs(limit - start) + abs(delta) - 1) // abs(delta)
    quotient = abs((float(limit) - float(start)) / float(delta))
    if not math.isfinite(quotient):  # finite arguments whose difference overflows
        raise InvalidArgumentError(f"Requires a finite size: start {start}, limit {limit}")
    return math.ceil(quotient)


def _range_shape(ctx: InferenceContext) -> TensorShape:
    for i, name in enumerate(("start", "limit", "delta")):
        if ctx.input_shapes[i].rank not in (None, 0):
            raise InvalidArgumentError(f"{name} must be a scalar, not shape {ctx.input_shapes[i]}")
    values = [ctx.constant_value(i) for i in range(3)]
    if any(v is None for v in values):
        return TensorShape([None])
    return TensorShape([_range_size(*(v[()] for v in values))])


def _range_kernel(ctx: KernelContext, start: Any, limit: Any, delta: Any, *, Tidx: Any) -> Any:
    for value, name in ((start, "start"), (limit, "limit"), (delta, "delta")):
        if value.ndim != 0:
            raise ctx.invalid_argument(f"{name} must be a scalar, not shape {list(value.shape)}")
    s, lim, d = start[()], limit[()], delta[()]
    try:
        size = _range_size(s, lim, d)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    xp = ctx.xp
    dtype = Tidx.np_dtype
    if Tidx.is_integer:
        if xp is np:
            return _int_range_into(ctx.empty((size,), dtype), int(s), int(d))
        # Every value lies in [start, limit), so it fits Tidx; the stop past limit may not.
        return (xp.arange(size, dtype=np.int64) * int(d) + int(s)).astype(dtype)
    # TF adds delta once per element, rounding each time: a running sum reproduces that.
    # On the host the sum runs in place, in pooled memory.
    steps = ctx.empty((size,), dtype) if xp is np else np.empty(size, dtype)
    steps.fill(d)
    if size:
        steps[0] = s
    values = np.cumsum(steps, dtype=dtype, out=steps)
    return values if xp is np else xp.asarray(values)


# The first values of an integer Range, computed in int64; the rest is doubled from them.
_RANGE_BLOCK = 1024


def _wrapped(value: int, dtype: np.dtype) -> Any:
    """`value` modulo 2**bits as a scalar of the integer `dtype` (two's complement)."""
    bits = 8 * dtype.itemsize
    value &= (1 << bits) - 1
    if dtype.kind == "i" and value >> (bits - 1):
        value -= 1 << bits
    return dtype.type(value)


def _int_range_into(out: np.ndarray, start: int, delta: int) -> np.ndarray:
    """Fills `out` with start, start + delta, ... in its own integer dtype; returns it.

    np.arange has no `out=`, and `out` comes from the buffer pool (no page faults): the first
    block is computed in int64, then each step copies the filled prefix shifted by its
    length, `out[k:2k] = out[:k] + k * delta`. Every value fits the dtype, but `k * delta`
    may not (int16 from -30000 to 30000): added modulo 2**bits, the sum still wraps to the
    exact value.
    """
    size = out.shape[0]
    first = min(size, _RANGE_BLOCK)
    np.copyto(out[:first], np.arange(first, dtype=np.int64) * delta + start, casting="unsafe")
    k = first
    while k < size:
        m = min(k, size - k)
        np.add(out[:m], _wrapped(k * delta, out.dtype), out=out[k : k + m])
        k += m
    return out


# -- Cast --------------------------------------------------------------------------------------

CAST = OpDef(
    "Cast",
    inputs=["x: SrcT"],
    outputs=["y: DstT"],
    attrs=["SrcT: type", "DstT: type", "Truncate: bool = false"],
    shape_fn=lambda ctx: _cast_shape(ctx),
    doc="Casts x to DstT (complex to real keeps the real part; non-zero is true).",
)


def _cast_shape(ctx: InferenceContext) -> TensorShape:
    if ctx.attr("Truncate"):
        raise UnimplementedError("Cast with Truncate=true is not implemented")
    for attr in ("SrcT", "DstT"):
        if ctx.attr(attr).is_string:
            raise UnimplementedError(f"Cast of string tensors is not supported ({attr}=string)")
    return ctx.input_shapes[0]


def _cast_kernel(ctx: KernelContext, x: Any, *, SrcT: Any, DstT: Any) -> Any:
    if SrcT is DstT:
        return x
    if SrcT.is_complex and not DstT.is_complex:
        x = x.real
    with np.errstate(invalid="ignore", over="ignore"):
        if ctx.xp is np:
            # The cast loops astype runs, written into pooled memory (no page faults).
            out = ctx.empty(x.shape, DstT.np_dtype)
            np.copyto(out, x, casting="unsafe")
            return out
        return x.astype(DstT.np_dtype)


# -- binary ops --------------------------------------------------------------------------------


def _binary_op_def(name: str, types: list[str], doc: str) -> OpDef:
    return OpDef(
        name,
        inputs=["x: T", "y: T"],
        outputs=["z: T"],
        attrs=["T: {" + ", ".join(types) + "}"],
        shape_fn=lambda ctx: broadcast_shape(ctx.input_shapes[0], ctx.input_shapes[1]),
        doc=doc + " Broadcasts as numpy does.",
    )


def broadcast_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    """The broadcast of two partial shapes (TF's BroadcastBinaryOpShapeFn)."""
    if a.rank is None or b.rank is None:
        return TensorShape(None)
    rank = max(a.rank, b.rank)
    x = (1,) * (rank - a.rank) + a.dims
    y = (1,) * (rank - b.rank) + b.dims
    dims: list[int | None] = []
    for p, q in zip(x, y):
        if p == 1:
            dims.append(q)
        elif q == 1:
            dims.append(p)
        elif p is None or q is None:
            dims.append(p if q is None else q)
        elif p != q:
            raise InvalidArgumentError(f"Dimensions must be equal, but are {p} and {q}")
        else:
            dims.append(p)
    return TensorShape(dims)


_REAL = [
    "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
    "uint16", "uint32", "uint64",
]  # fmt: skip
_COMPLEX = ["complex64", "complex128"]

SUB = _binary_op_def("Sub", _REAL + _COMPLEX, "z = x - y.")
MAXIMUM = _binary_op_def("Maximum", _REAL, "z = max(x, y) (NaN wins).")
FLOOR_DIV = _binary_op_def(
    "FloorDiv", _REAL + _COMPLEX, "z = floor(x / y); integers raise on a zero divisor."
)
FLOOR_MOD = _binary_op_def(
    "FloorMod", _REAL, "z = x - floor(x / y) * y (the divisor's sign); integers raise on 0."
)


def _broadcast_out(ctx: KernelContext, x: Any, y: Any) -> Any:
    """An uninitialised output of x's dtype and the broadcast shape of x and y (pooled memory
    on the host: the ufuncs write into it rather than into fresh pages)."""
    try:
        shape = broadcast_shape(TensorShape(x.shape), TensorShape(y.shape))
    except InvalidArgumentError:
        raise ctx.invalid_argument(
            f"Incompatible shapes: {list(x.shape)} vs. {list(y.shape)}"
        ) from None
    return ctx.empty(shape.dims, x.dtype)


def _sub_kernel(ctx: KernelContext, x: Any, y: Any) -> Any:
    return ctx.xp.subtract(x, y, out=_broadcast_out(ctx, x, y))


def _maximum_kernel(ctx: KernelContext, x: Any, y: Any) -> Any:
    return ctx.xp.maximum(x, y, out=_broadcast_out(ctx, x, y))


def _check_divisor(ctx: KernelContext, y: Any) -> None:
    if y.dtype.kind in "iu" and y.size and not bool(ctx.xp.all(y != 0)):
        raise ctx.invalid_argument("Integer division by zero")


def _host_power_of_two(ctx: KernelContext, y: Any) -> int | None:
    """log2 of a single positive power-of-two integer divisor on the host, else None."""
    if ctx.xp is not np or y.size != 1:
        return None
    d = int(y.reshape(-1)[0])
    return d.bit_length() - 1 if d > 0 and d & (d - 1) == 0 else None


def _floor_div_kernel(ctx: KernelContext, x: Any, y: Any) -> Any:
    out = _broadcast_out(ctx, x, y)
    xp = ctx.xp
    if x.dtype.kind in "iu":
        _check_divisor(ctx, y)
        shift = _host_power_of_two(ctx, y)
        if shift is not None:
            # Floor division by 2**k is an arithmetic shift (two's complement), 3x faster.
            return np.right_shift(x, x.dtype.type(shift), out=out)
        with np.errstate(over="ignore"):  # INT_MIN // -1 wraps, as two's complement does
            return xp.floor_divide(x, y, out=out)
    with np.errstate(divide="ignore", invalid="ignore"):
        # TF computes floor(x / y); numpy's floor_divide rounds differently (1 // 0.1 == 9).
        xp.true_divide(x, y, out=out)
        return xp.floor(out, out=out)


def _floor_mod_kernel(ctx: KernelContext, x: Any, y: Any) -> Any:
    out = _broadcast_out(ctx, x, y)
    xp = ctx.xp
    if x.dtype.kind in "iu":
        _check_divisor(ctx, y)
        if xp is not np:
            return xp.remainder(x, y, out=out)
        shift = _host_power_of_two(ctx, y)
        if shift is not None:
            # Floor-mod by 2**k is the low k bits (two's complement), 9x faster than remainder.
            return np.bitwise_and(x, x.dtype.type((1 << shift) - 1), out=out)
        if y.size != 1:
            return np.remainder(x, y, out=out)
        # numpy's remainder is slow (2 ns per int64); its floor_divide by one divisor is
        # fast (0.6 ns). x - (x // y) * y, 1.8x faster, wraps where it overflows (INT_MIN // -1)
        # and is still exact: modulo 2**bits it is the floor-mod, which fits.
        with np.errstate(over="ignore"):
            np.floor_divide(x, y, out=out)
        np.multiply(out, y, out=out)
        return np.subtract(x, out, out=out)
    with np.errstate(divide="ignore", invalid="ignore"):
        # TF: fmod, then moved to the divisor's sign (keeps fmod's sign of zero).
        mod = xp.fmod(x, y, out=out)
        fix = (mod != 0) & ((y < 0) != (mod < 0))
        xp.copyto(mod, mod + y, where=fix)
        return mod


# -- registration ------------------------------------------------------------------------------

Range = register_op(RANGE)
Cast = register_op(CAST)
Sub = register_op(SUB)
Maximum = register_op(MAXIMUM)
FloorDiv = register_op(FLOOR_DIV)
FloorMod = register_op(FLOOR_MOD)

# Trusted (no per-run output checks, fed arrays passed as they are): Range and Cast build new
# arrays of the inferred dtype and shape (Cast to the same dtype returns its input itself); the
# binary ops write into a new array of the broadcast shape and x's dtype (`_broadcast_out`),
# which the ufuncs return as it is, 0-d included (tests/test_builtin_trust.py checks every
# dtype on both devices).
_HOST_RANGE = ["start", "limit", "delta"]
register_kernel("Range", "CPU", _range_kernel, host_memory=_HOST_RANGE, trusted=True)
register_kernel(
    "Range", "GPU", _range_kernel,
    type_constraints={"Tidx": _gpu(_RANGE_TYPES)}, host_memory=_HOST_RANGE, trusted=True,
)  # fmt: skip
register_kernel("Cast", "CPU", _cast_kernel, trusted=True)
register_kernel(
    "Cast", "GPU", _cast_kernel,
    type_constraints={"SrcT": _GPU_TYPES, "DstT": _GPU_TYPES}, trusted=True,
)  # fmt: skip
register_kernel("Sub", "CPU", _sub_kernel, trusted=True)
register_kernel(
    "Sub", "GPU", _sub_kernel, type_constraints={"T": _gpu(_REAL + _COMPLEX)}, trusted=True
)
register_kernel("Maximum", "CPU", _maximum_kernel, trusted=True)
register_kernel(
    "Maximum", "GPU", _maximum_kernel, type_constraints={"T": _gpu(_REAL)}, trusted=True
)
# No kernel takes complex FloorDiv, as in TF: the op allows it, no device runs it.
register_kernel("FloorDiv", "CPU", _floor_div_kernel, type_constraints={"T": _REAL}, trusted=True)
register_kernel(
    "FloorDiv", "GPU", _floor_div_kernel, type_constraints={"T": _gpu(_REAL)}, trusted=True
)
register_kernel("FloorMod", "CPU", _floor_mod_kernel, trusted=True)
register_kernel(
    "FloorMod", "GPU", _floor_mod_kernel, type_constraints={"T": _gpu(_REAL)}, trusted=True
)
