"""Math ops: the elementwise family (a table, one row per op), AddN, BroadcastGradientArgs,
Range and Cast. Op definitions, shape functions, CPU and GPU kernels.

Semantics are TensorFlow 2.21's CPU kernels' (tf.raw_ops.<Name>), on every device:

- Binary ops broadcast as numpy does (`broadcast_shape` at construction, over partial shapes;
  "Incompatible shapes: [2,3] vs. [4]" at run time). Integer arithmetic wraps around on
  overflow (Abs and Neg of INT_MIN give INT_MIN). Integer Div, FloorDiv and FloorMod raise
  "Integer division by zero" on every device (TF's GPU kernels do not check); Div of integers
  rounds towards zero, FloorDiv/FloorMod towards negative infinity; float FloorDiv is
  floor(x / y) and float FloorMod has the divisor's sign, as TF computes them. Pow of
  integers raises "Integers to negative integer powers are not allowed" for any negative
  exponent (even of 1); complex Pow is exp(y * log(x)), so 0 ** 0 is NaN there (1 for reals).
- Floats compute silently (IEEE infinities and NaNs, no numpy warnings). Maximum and Minimum
  propagate NaN (either operand); Sign of NaN is NaN and of -0.0 is 0.0. Round rounds half
  to even. Relu and Relu6 keep NaN; Elu is exp(x) - 1 for x < 0 (not expm1, as TF);
  Softplus uses TF's thresholds (x above -t, exp(x) below t, t = log(eps) + 2 with Eigen's
  eps, 2**-13 for half); Sigmoid is TF's e / (1 + e), e = exp(x), 1 where e overflows, so
  large |x| neither overflows nor loses its small values. float16/bfloat16 results are TF's
  bit for bit (computed in their own arithmetic, as TF; half Rsqrt in float32, rounded once).
- Complex numbers where TF allows them: Sign is z / |z| part by part (0 for 0); Pow is
  exp(y * log(x)); Sigmoid is 1 / (1 + exp(-x)), 0 where that denominator is infinite;
  Rsqrt takes a zero imaginary part as +0; SquaredDifference is (x - y) * conj(x - y). Abs
  takes no complex numbers (TF has ComplexAbs for that).
- Equal and NotEqual take every dtype (strings and bools too) and, with
  `incompatible_shape_error=False`, give a scalar False (Equal) / True (NotEqual) for shapes
  that do not broadcast, as TF. LogicalAnd/Or/Not take bools only. Comparisons give bool.
- Ops whose OpDef allows a dtype that TF's CPU kernel lacks build, then fail to find a kernel
  (NotFoundError), as in TF: RealDiv and Reciprocal of integers, complex FloorDiv, Round of
  int8/int16/complex, Range of int8/int16/uint16/uint32/uint64.
- AddN adds its N same-shaped inputs left to right (one rounding per addition, as TF).
  BroadcastGradientArgs gives the axes each operand of a broadcast was expanded along (TF's
  BCast reduction indices); its inputs and outputs live in host memory on every device.
- Range accumulates its floating-point values one addition at a time, as TF's kernel does.
  Cast takes a complex value's real part when casting to a real type; `Truncate=True` zeroes
  the low mantissa bits the destination cannot hold before casting (rounding then truncates),
  for exactly TF's pairs (`_TRUNCATED_BITS`); other pairs cast as with `Truncate=False`.

Deliberate differences from TF: Round of int32/int64 is the identity (TF 2.21's CPU kernel
returns 0 for every element, a bug: tf.round never runs it on integers); denormal floats are
kept (TF's CPU threads flush them to zero); the sign of a zero that Maximum, Minimum, Relu
and Relu6 give between -0.0 and 0.0 is numpy's (TF's depends on its vectorisation).

The elementwise family is data: `ELEMENTWISE_OPS` holds one `ElementwiseOp` row per op (its
name, the numpy/cupy function, the dtypes TF's OpDef allows, the dtypes TF's CPU kernel
registers, its quirks), from which the OpDef, the shape function (`broadcast_shape` for binary
ops, the input's shape for unary ones) and one kernel body serving CPU (numpy) and GPU (cupy)
are made. GPU kernels take the CPU dtypes but bfloat16 and strings (cupy holds neither).
Adding an op is adding a row, and a registration line at the bottom. Gradient rules
(`register_gradient(op_type)`) belong next to their op's registration line there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minigraph import (
    IndexedSlices,
    InvalidArgumentError,
    KernelContext,
    OpDef,
    Output,
    TensorShape,
    UnimplementedError,
    current_scope,
    dtypes,
    no_gradient,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.builder import as_output
from minigraph.shape_inference import (
    MAX_CONSTANT_ELEMENTS,
    InferenceContext,
    register_constant_evaluator,
)
from ops import reduction

__all__ = [
    "ElementwiseOp", "ELEMENTWISE_OPS", "GRADIENT_OPS", "broadcast_shape", "merge_shapes",
    "Range", "Cast",
    "AddN", "BroadcastGradientArgs", "broadcast_gradient_args",
    # gradients of broadcast operands
    "sum_to", "broadcast_gradients",
    # binary
    "AddV2", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "FloorMod", "Maximum", "Minimum",
    "Pow", "SquaredDifference", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal",
    "NotEqual", "LogicalAnd", "LogicalOr",
    # unary
    "Neg", "Abs", "Sign", "Square", "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log", "Log1p",
    "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Softplus", "LogicalNot", "Floor", "Ceil",
    "Round",
    # TF's gradient ops and Conj (GRADIENT_OPS)
    "Conj", "ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad", "SigmoidGrad", "TanhGrad",
    "RsqrtGrad", "SqrtGrad", "ReciprocalGrad",
]  # fmt: skip

# cupy holds neither strings nor ml_dtypes' bfloat16: those stay on the CPU.
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]


class _WithLazyBfloat16(dict):
    """A numpy-dtype-keyed table whose bfloat16 entry is made on its first lookup: making it
    needs ml_dtypes, which `import ops` must not load (it is slow to import)."""

    def __init__(self, entries: dict[Any, Any], bfloat16: Callable[[], Any]):
        super().__init__(entries)
        self._bfloat16 = bfloat16

    def __missing__(self, key: Any) -> Any:
        if getattr(key, "name", None) != "bfloat16":
            raise KeyError(key)
        value = self[key] = self._bfloat16()
        return value


def _gpu(names: list[str] | tuple[str, ...]) -> list[str]:
    return [n for n in names if n not in ("bfloat16", "string")]


# -- dtype sets (TF's CPU kernel registrations, /work/notes/tf_kernels.txt) ---------------------

_FLOAT = ("bfloat16", "float16", "float32", "float64")
_COMPLEX = ("complex64", "complex128")
_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_INEXACT = _FLOAT + _COMPLEX
_REAL = _FLOAT + _SIGNED + _UNSIGNED
_NUMERIC = _REAL + _COMPLEX
_SIGNED_NUMERIC = _FLOAT + _SIGNED + _COMPLEX
_EVERY = tuple(d.name for d in dtypes.ALL_DTYPES)

# -- Range -------------------------------------------------------------------------------------

_RANGE_TYPES = [
    "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint16",
    "uint32",
]  # fmt: skip
# TF's CPU kernel takes fewer: Range of int8, int16, uint16, uint32 (and uint64) builds, then
# fails to find a kernel (NotFoundError), as in TF.
_RANGE_KERNEL_TYPES = ["bfloat16", "float16", "float32", "float64", "int32", "int64"]

RANGE = OpDef(
    "Range",
    inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"],
    outputs=["output: Tidx"],
    # TF's OpDef also allows uint64 (no kernel takes it, as in TF: _RANGE_KERNEL_TYPES).
    attrs=["Tidx: {" + ", ".join(_RANGE_TYPES + ["uint64"]) + "} = int32"],
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
    doc="""Casts x to DstT (complex to real keeps the real part; non-zero is true).

Truncate=true truncates rather than rounds where TF does: float32 to bfloat16 or float16,
float64 to float16 or float32, complex64 to float16, complex128 to float16, float32 or
complex64, and float64 to complex64.""",
)

# TF's Cast with Truncate=true (cast_op.h, SPECIALIZE_CAST and LSBZeroSetter): for these
# (source, destination) pairs the source's n lowest bits (of each part of a complex value)
# are zeroed, NaNs left as they are, before the cast rounds: n = the difference of the two
# mantissa widths (numeric_limits digits). TF's float64 -> complex64 takes complex64's digits
# as 0 (numeric_limits has no complex specialisation), so it zeroes 53 bits, which also
# clears the exponent's lowest bit: values become signed powers of two with odd exponents
# (1257302.2 gives 524288, 1.0000001 gives 0.5; checked against TF).
_TRUNCATED_BITS = {
    (dtypes.float32, dtypes.bfloat16): 16,
    (dtypes.float32, dtypes.float16): 13,
    (dtypes.float64, dtypes.float16): 42,
    (dtypes.float64, dtypes.float32): 29,
    (dtypes.float64, dtypes.complex64): 53,
    (dtypes.complex64, dtypes.float16): 13,
    (dtypes.complex128, dtypes.float16): 42,
    (dtypes.complex128, dtypes.float32): 29,
    (dtypes.complex128, dtypes.complex64): 29,
}


def _cast_shape(ctx: InferenceContext) -> TensorShape:
    for attr in ("SrcT", "DstT"):
        if ctx.attr(attr).is_string:
            raise UnimplementedError(f"Cast of string tensors is not supported ({attr}=string)")
    return ctx.input_shapes[0]


def _zero_low_bits(xp: Any, x: Any, bits: int) -> Any:
    """A copy of the float or complex array `x` with the `bits` lowest bits of each float
    cleared, NaNs kept as they are (TF's LSBZeroSetterHelper)."""
    parts = xp.ascontiguousarray(x).reshape(-1)  # 1-D: a complex 0-d array has no float view
    if parts.dtype.kind == "c":
        parts = parts.view(np.float32 if parts.dtype == np.complex64 else np.float64)
    word = np.uint32 if parts.dtype.itemsize == 4 else np.uint64
    mask = word(((1 << (8 * parts.dtype.itemsize)) - 1) ^ ((1 << bits) - 1))
    words = parts.view(word)
    cleared = xp.bitwise_and(words, mask)
    xp.copyto(cleared, words, where=xp.isnan(parts))
    return cleared.view(parts.dtype).view(x.dtype).reshape(x.shape)


def _cast_kernel(ctx: KernelContext, x: Any, *, SrcT: Any, DstT: Any, Truncate: bool) -> Any:
    if SrcT is DstT:
        return x
    if Truncate:
        bits = _TRUNCATED_BITS.get((SrcT, DstT))
        if bits is not None:
            x = _zero_low_bits(ctx.xp, x, bits)
    if SrcT.is_complex and not DstT.is_complex:
        x = x.real
    with np.errstate(invalid="ignore", over="ignore"):
        if ctx.xp is np:
            # The cast loops astype runs, written into pooled memory (no page faults).
            out = ctx.empty(x.shape, DstT.np_dtype)
            np.copyto(out, x, casting="unsafe")
            return out
        return x.astype(DstT.np_dtype)


# -- broadcasting ------------------------------------------------------------------------------


def broadcast_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    """The broadcast of two partial shapes (TF's BroadcastBinaryOpShapeFn).

    An unknown rank gives an unknown shape; an unknown dim against 1 stays unknown, against
    a known dim d it is d (it must be 1 or d). Known dims other than 1 must be equal.

    Raises:
        InvalidArgumentError: two known dims differ and neither is 1 (TF's message,
            "Dimensions must be equal, but are 3 and 4").
    """
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


def _lenient_broadcast_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    """TF's broadcast shape with incompatible_shape_error=false (Equal, NotEqual): shapes
    that cannot broadcast give a scalar (the op's result then is one bool), and where that
    cannot be known yet the shape is unknown: an unknown dim against anything but 1 (TF says
    [?] for two unknown dims, though its kernel may then return a scalar)."""
    if a.rank is None or b.rank is None:
        return TensorShape(None)
    rank = max(a.rank, b.rank)
    x = (1,) * (rank - a.rank) + a.dims
    y = (1,) * (rank - b.rank) + b.dims
    dims: list[int | None] = []
    for p, q in zip(x, y):
        if p is None or q is None:
            if (p if q is None else q) != 1:
                return TensorShape(None)
            dims.append(None)
        elif p == 1 or q == 1 or p == q:
            dims.append(q if p == 1 else p)
        else:
            return TensorShape([])
    return TensorShape(dims)


def _shape_text(shape: tuple[int, ...]) -> str:
    """A run-time shape as TF writes it: [2,3]."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def _broadcast_dims(xs: tuple[int, ...], ys: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast of two run-time shapes, None when they do not broadcast."""
    if xs == ys or not ys:
        return xs
    if not xs:
        return ys
    nx, ny = len(xs), len(ys)
    if nx < ny:
        xs = (1,) * (ny - nx) + xs
    elif ny < nx:
        ys = (1,) * (nx - ny) + ys
    dims = []
    for p, q in zip(xs, ys):
        if p == q or q == 1:
            dims.append(p)
        elif p == 1:
            dims.append(q)
        else:
            return None
    return tuple(dims)


def _incompatible(ctx: KernelContext, x: Any, y: Any) -> InvalidArgumentError:
    return ctx.invalid_argument(
        f"Incompatible shapes: {_shape_text(x.shape)} vs. {_shape_text(y.shape)}"
    )


def _output(ctx: KernelContext, inputs: tuple[Any, ...], shape: tuple[int, ...], dtype: Any) -> Any:
    """Memory for a result: the buffer of an input that dies at this node when it has the
    result's shape and dtype (the plan says which may be overwritten), else a new array."""
    forwardable = ctx.forwardable_inputs
    if forwardable:
        for i, value in enumerate(inputs):
            if i in forwardable and value.shape == shape and value.dtype == dtype:
                return ctx.forward_input_or_empty(i, value, shape, dtype)
    return ctx.empty(shape, dtype)


# -- the elementwise table ---------------------------------------------------------------------


@dataclass(frozen=True)
class ElementwiseOp:
    """One row of the elementwise family: everything that makes one op.

    Attributes:
        name: the op type (TF's).
        compute: a ufunc name that numpy and cupy share (`"add"`), called once as
            `xp.<name>(*inputs, out=out)`; or `fn(ctx, out, *inputs) -> out`, which writes the
            result into `out` (an array of the result's shape and dtype) and returns it.
        types: the dtypes TF's OpDef allows for T, in TF's order; None for ops on bools only
            (LogicalAnd, LogicalOr, LogicalNot, whose args are `bool`).
        cpu: the dtypes TF's CPU kernel registers (None: every dtype `types` allows); the GPU
            kernel takes the same but bfloat16 and strings.
        doc: the op's doc string (its semantics, TF's quirks).
        inputs, output: argument names (TF's: `x`, `y` -> `z`; `x` -> `y`; `features` ->
            `activations`).
        boolean: the result is bool (comparisons, logical ops), else T.
        attrs: further attr specs (Equal's `incompatible_shape_error`).
        quiet: numpy emits no floating-point warning for it (no `np.errstate` needed: saves
            about 2 us per call); TF computes silently, so the others run under one.
        forward: the kernel reads its inputs only before writing its result, so the result may
            be written into a dying input's buffer (`ctx.forward_input_or_empty`).
        operands: how a binary op's operands combine: "broadcast" (numpy's broadcasting, the
            family's rule); "same_shape" (TF's gradient ops of activations, ReluGrad and
            the like: the shapes must be equal, merged at construction); "same_size" (TF's
            SigmoidGrad and the like: equal element counts, the result of input 0's shape).
        type_default: the default of the T attr (TF's OpDef: Conj's is complex64), or None.
    """

    name: str
    compute: str | Callable[..., Any]
    types: tuple[str, ...] | None
    cpu: tuple[str, ...] | None
    doc: str
    inputs: tuple[str, ...] = ("x", "y")
    output: str = "z"
    boolean: bool = False
    attrs: tuple[str, ...] = ()
    quiet: bool = False
    forward: bool = True
    operands: str = "broadcast"
    type_default: str | None = None

    @property
    def gpu(self) -> tuple[str, ...] | None:
        """The GPU kernel's dtypes: the CPU kernel's but those cupy cannot hold (None for the
        ops on bools, which every device holds)."""
        if self.types is None:
            return None
        return tuple(_gpu(self.cpu if self.cpu is not None else self.types))

    def op_def(self) -> OpDef:
        arg_type = "bool" if self.types is None else "T"
        attrs = [] if self.types is None else ["T: {" + ", ".join(self.types) + "}"]
        if self.types == _EVERY:
            attrs = ["T: type"]
        if self.type_default is not None:
            attrs = [f"{attrs[0]} = {self.type_default}"]
        if len(self.inputs) == 1:
            shape_fn = _unary_shape
        else:
            shape_fn = _BINARY_SHAPE_FNS[self.operands]
        if any(a.startswith("incompatible_shape_error") for a in self.attrs):
            shape_fn = _equality_shape
        return OpDef(
            self.name,
            inputs=[f"{arg}: {arg_type}" for arg in self.inputs],
            outputs=[f"{self.output}: {'bool' if self.boolean else arg_type}"],
            attrs=attrs + list(self.attrs),
            shape_fn=shape_fn,
            doc=self.doc,
        )


def _unary_shape(ctx: InferenceContext) -> TensorShape:
    return ctx.input_shapes[0]


def _binary_shape(ctx: InferenceContext) -> TensorShape:
    return broadcast_shape(ctx.input_shapes[0], ctx.input_shapes[1])


def _equality_shape(ctx: InferenceContext) -> TensorShape:
    a, b = ctx.input_shapes
    if ctx.attr("incompatible_shape_error"):
        return broadcast_shape(a, b)
    return _lenient_broadcast_shape(a, b)


def _same_shape_shape(ctx: InferenceContext) -> TensorShape:
    # TF's MergeBothInputsShapeFn (ReluGrad and the like).
    return merge_shapes(ctx.input_shapes[0], ctx.input_shapes[1])


def _same_size_shape(ctx: InferenceContext) -> TensorShape:
    # TF's UnchangedShape (SigmoidGrad and the like): input 0's shape; its kernel only needs
    # equal element counts, so counts known to differ cannot run (TF finds out at run time).
    a, b = ctx.input_shapes
    m, n = a.num_elements(), b.num_elements()
    if m is not None and n is not None and m != n:
        raise InvalidArgumentError(_size_mismatch(m, n))
    return a


def _size_mismatch(m: int, n: int) -> str:
    return f"The two arguments to a cwise op must have same number of elements, got {m} and {n}"


_BINARY_SHAPE_FNS = {
    "broadcast": _binary_shape,
    "same_shape": _same_shape_shape,
    "same_size": _same_size_shape,
}


# -- computations with TF's quirks: fn(ctx, out, *inputs) -> out ------------------------------


def _check_divisor(ctx: KernelContext, y: Any) -> None:
    if y.dtype.kind in "iu" and y.size and not bool(ctx.xp.all(y != 0)):
        raise ctx.invalid_argument("Integer division by zero")


def _host_power_of_two(ctx: KernelContext, y: Any) -> int | None:
    """log2 of a single positive power-of-two integer divisor on the host, else None."""
    if ctx.xp is not np or y.size != 1:
        return None
    d = int(y.reshape(-1)[0])
    return d.bit_length() - 1 if d > 0 and d & (d - 1) == 0 else None


def _div(ctx: KernelContext, out: Any, x: Any, y: Any) -> Any:
    xp = ctx.xp
    if x.dtype.kind == "u":
        _check_divisor(ctx, y)
        return xp.floor_divide(x, y, out=out)  # unsigned: floor is truncation
    if x.dtype.kind == "i":
        _check_divisor(ctx, y)
        # C's truncating division: x - fmod(x, y) is an exact multiple of y (INT_MIN / -1
        # wraps to INT_MIN, as TF's kernel gives).
        xp.fmod(x, y, out=out)
        xp.subtract(x, out, out=out)
        with np.errstate(over="ignore"):
            return xp.floor_divide(out, y, out=out)
    return xp.true_divide(x, y, out=out)


def _floor_div(ctx: KernelContext, out: Any, x: Any, y: Any) -> Any:
    xp = ctx.xp
    if x.dtype.kind in "iu":
        _check_divisor(ctx, y)
        shift = _host_power_of_two(ctx, y)
        if shift is not None:
            # Floor division by 2**k is an arithmetic shift (two's complement), 3x faster.
            return np.right_shift(x, x.dtype.type(shift), out=out)
        with np.errstate(over="ignore"):  # INT_MIN // -1 wraps, as two's complement does
            return xp.floor_divide(x, y, out=out)
    # TF computes floor(x / y); numpy's floor_divide rounds differently (1 // 0.1 == 9).
    xp.true_divide(x, y, out=out)
    return xp.floor(out, out=out)


def _floor_mod(ctx: KernelContext, out: Any, x: Any, y: Any) -> Any:
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
    # TF: fmod, then moved to the divisor's sign (keeps fmod's sign of zero).
    mod = xp.fmod(x, y, out=out)
    fix = (mod != 0) & ((y < 0) != (mod < 0))
    xp.copyto(mod, mod + y, where=fix)
    return mod


def _pow(ctx: KernelContext, out: Any, x: Any, y: Any) -> Any:
    xp = ctx.xp
    kind = x.dtype.kind
    if kind == "i" and y.size and bool(xp.any(y < 0)):
        raise ctx.invalid_argument("Integers to negative integer powers are not allowed")
    if kind == "c":
        # TF's complex pow is exp(y * log(x)) (numpy's power special-cases integer
        # exponents and 0 ** 0): 1j ** 2 is -1-8.7e-08j in complex64, 0 ** 0 is NaN. The
        # logarithm goes to a temporary: `out` may be y's buffer (forwarding).
        xp.multiply(xp.log(x), y, out=out)
        return xp.exp(out, out=out)
    return xp.power(x, y, out=out)


def _squared_difference(ctx: KernelContext, out: Any, x: Any, y: Any) -> Any:
    xp = ctx.xp
    xp.subtract(x, y, out=out)
    if out.dtype.kind == "c":  # TF: (x - y) * conj(x - y), a complex with 0 imaginary part
        return xp.multiply(out, xp.conjugate(out), out=out)
    return xp.multiply(out, out, out=out)


def _sign(ctx: KernelContext, out: Any, x: Any) -> Any:
    xp = ctx.xp
    if x.dtype.kind != "c":
        xp.sign(x, out=out)  # NaN stays NaN, -0.0 gives 0.0, as TF
        if x.dtype.name == "bfloat16":
            xp.add(out, out.dtype.type(0), out=out)  # ml_dtypes' sign keeps -0.0: -0.0 + 0 is 0
        return out
    # TF (Eigen's scalar_sign_op): z * (1 / |z|) part by part, 0 for 0; so inf + 1j gives
    # nan + 0j where numpy's sign gives 1 + 0j (and a complex product nan + nan j).
    magnitude = xp.absolute(x)
    scale = xp.true_divide(1, magnitude)
    zero = magnitude == 0
    xp.multiply(x.real, scale, out=out.real)
    xp.multiply(x.imag, scale, out=out.imag)
    xp.copyto(out, 0, where=zero)
    return out


def _rsqrt(ctx: KernelContext, out: Any, x: Any) -> Any:
    xp = ctx.xp
    if x.dtype.kind == "c":
        # TF's complex rsqrt takes a zero imaginary part as +0 (1 / sqrt(-4 - 0j) is -0.5j,
        # numpy's branch cut gives +0.5j): adding 0 turns -0.0 into 0.0.
        xp.add(x, out.dtype.type(0), out=out)
        xp.sqrt(out, out=out)
        return xp.reciprocal(out, out=out)
    if x.dtype.itemsize == 2:
        # Half types: in float32, rounded once (TF's approximate float32 rsqrt can give the
        # neighbouring half value: within 1 ulp of TF's).
        wide = x.astype(np.float32)  # an array, 0-d too (a ufunc would give a scalar)
        xp.sqrt(wide, out=wide)
        xp.reciprocal(wide, out=wide)
        xp.copyto(out, wide, casting="unsafe")
        return out
    xp.sqrt(x, out=out)
    return xp.reciprocal(out, out=out)


def _relu(ctx: KernelContext, out: Any, x: Any) -> Any:
    # NaN propagates, as in TF. Whether -0.0 gives -0.0 or 0.0 is unspecified: TF's depends on
    # its vectorisation (the array's length and dtype), numpy's too.
    return ctx.xp.maximum(x.dtype.type(0), x, out=out)


def _relu6(ctx: KernelContext, out: Any, x: Any) -> Any:
    # One pass (maximum then minimum takes 3x longer); NaN propagates, as in TF.
    t = x.dtype.type
    ctx.xp.clip(x, t(0), t(6), out=out)
    return out


def _elu(ctx: KernelContext, out: Any, x: Any) -> Any:
    xp = ctx.xp
    # TF: x < 0 ? exp(x) - 1 : x, with exp(x) - 1 (not expm1) rounded in T.
    negative = xp.less(x, 0)
    xp.exp(x, out=out)
    xp.subtract(out, out.dtype.type(1), out=out)
    xp.copyto(out, x, where=~negative)
    return out


def _softplus(ctx: KernelContext, out: Any, x: Any) -> Any:
    xp = ctx.xp
    # TF's thresholds, computed in T: log(eps) + 2, with Eigen's epsilon. Above -threshold
    # softplus(x) is x, below threshold it is exp(x), in between log1p(exp(x)), exp rounded
    # to T first.
    threshold = _SOFTPLUS_THRESHOLD[x.dtype]
    xp.exp(x, out=out)
    between = (x >= threshold) & (x <= -threshold)
    _masked(xp, "log1p", out, out, between)
    xp.copyto(out, x, where=x > -threshold)
    return out


def _softplus_threshold(dtype: Any, eps: float) -> Any:
    t = np.dtype(dtype).type
    return t(t(np.log(t(eps))) + t(2))


# Eigen's NumTraits<T>::epsilon(): machine epsilon, but 2**-13 for half (Eigen's constant).
_SOFTPLUS_THRESHOLD = _WithLazyBfloat16(
    {
        np.dtype(np.float16): _softplus_threshold(np.float16, 2.0**-13),
        np.dtype(np.float32): _softplus_threshold(np.float32, np.finfo(np.float32).eps),
        np.dtype(np.float64): _softplus_threshold(np.float64, np.finfo(np.float64).eps),
    },
    lambda: _softplus_threshold(dtypes.bfloat16.np_dtype, 2.0**-7),
)


def _masked(xp: Any, ufunc: str, x: Any, out: Any, mask: Any) -> None:
    """out[mask] = ufunc(x)[mask]: numpy computes only there (`where=`); cupy's ufuncs have no
    `where`, so it computes everywhere and copies."""
    if xp is np:
        getattr(np, ufunc)(x, out=out, where=mask)
    else:
        xp.copyto(out, getattr(xp, ufunc)(x), where=mask)


def _sigmoid(ctx: KernelContext, out: Any, x: Any) -> Any:
    xp = ctx.xp
    if x.dtype.kind == "c":
        # TF's complex logistic: 1 / (1 + exp(-x)), 0 where the denominator is infinite
        # (numpy's complex division gives NaN there).
        xp.negative(x, out=out)
        xp.exp(out, out=out)
        xp.add(out, out.dtype.type(1), out=out)
        infinite = xp.isinf(out)
        xp.reciprocal(out, out=out)
        xp.copyto(out, 0, where=infinite)
        return out
    # TF's for reals (Eigen's generic logistic, in T's arithmetic): e / (1 + e) with
    # e = exp(x), and 1 where e is infinite. Large negative x gives e itself, without
    # overflow. Bit for bit TF's for half types; float32 and float64 within a few ulps (TF's
    # exp approximates).
    # Where exp overflows, inf / inf is NaN: TF gives 1. (Checked first: `out` may be x's
    # buffer; NaN inputs take that path too, max() being NaN.)
    overflows = x.size and not float(x.max()) <= _SIGMOID_FINITE[x.dtype]
    xp.exp(x, out=out)
    one = out.dtype.type(1)
    denominator = ctx.empty(out.shape, out.dtype)
    xp.add(out, one, out=denominator)
    xp.true_divide(out, denominator, out=out)
    if overflows:
        xp.copyto(out, one, where=xp.isinf(denominator))
    return out


# Above these exp(x) overflows.
_SIGMOID_FINITE = _WithLazyBfloat16(
    {np.dtype(np.float16): 11.0, np.dtype(np.float32): 88.0, np.dtype(np.float64): 709.0},
    lambda: 88.0,
)


def _round(ctx: KernelContext, out: Any, x: Any) -> Any:
    xp = ctx.xp
    if x.dtype.kind in "iu":
        # An integer is its own rounding (TF 2.21's CPU kernel gives 0s: see the docstring).
        xp.copyto(out, x)
        return out
    return xp.rint(x, out=out)  # half to even, as TF


def _sqrt(ctx: KernelContext, out: Any, x: Any) -> Any:
    return ctx.xp.sqrt(x, out=out)


# fmt: off
ELEMENTWISE_OPS: tuple[ElementwiseOp, ...] = (
    # -- binary arithmetic ------------------------------------------------------------------
    ElementwiseOp(
        "AddV2", "add",
        ("bfloat16", "float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64",
         "int8", "int16", "int32", "int64", "complex64", "complex128"),
        _NUMERIC, "z = x + y (integers wrap around)."),
    ElementwiseOp(
        "Sub", "subtract",
        ("bfloat16", "float16", "float32", "float64", "uint8", "int8", "uint16", "int16",
         "int32", "int64", "complex64", "complex128", "uint32", "uint64"),
        _NUMERIC, "z = x - y (integers wrap around)."),
    ElementwiseOp(
        "Mul", "multiply",
        ("bfloat16", "float16", "float32", "float64", "uint8", "int8", "uint16", "int16",
         "int32", "uint32", "uint64", "int64", "complex64", "complex128"),
        _NUMERIC, "z = x * y (integers wrap around)."),
    ElementwiseOp(
        "RealDiv", "true_divide",
        ("bfloat16", "float16", "float32", "float64", "uint8", "int8", "uint16", "int16",
         "int32", "uint32", "uint64", "int64", "complex64", "complex128"),
        _INEXACT, "z = x / y for floats and complex (no kernel takes integers, as in TF)."),
    ElementwiseOp(
        "Div", _div,
        ("bfloat16", "float16", "float32", "float64", "uint8", "int8", "uint16", "int16",
         "int32", "uint32", "uint64", "int64", "complex64", "complex128"),
        _NUMERIC,
        "z = x / y; integers round towards zero and raise on a zero divisor.",
        forward=False),
    ElementwiseOp(
        "FloorDiv", _floor_div,
        ("bfloat16", "float16", "float32", "float64", "uint8", "int8", "uint16", "int16",
         "int32", "uint32", "uint64", "int64", "complex64", "complex128"),
        _REAL,  # no kernel takes complex FloorDiv, as in TF: the op allows it, no device runs it
        "z = floor(x / y); integers raise on a zero divisor."),
    ElementwiseOp(
        "FloorMod", _floor_mod,
        ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16",
         "float16", "float32", "float64"),
        _REAL,
        "z = x - floor(x / y) * y (the divisor's sign); integers raise on a zero divisor.",
        forward=False),
    ElementwiseOp(
        "Maximum", "maximum",
        ("bfloat16", "float16", "float32", "float64", "int8", "uint8", "int16", "uint16",
         "int32", "uint32", "int64", "uint64"),
        _REAL, "z = max(x, y) (NaN wins).", quiet=True),
    ElementwiseOp(
        "Minimum", "minimum",
        ("bfloat16", "float16", "float32", "float64", "int8", "uint8", "int16", "uint16",
         "int32", "uint32", "int64", "uint64"),
        _REAL, "z = min(x, y) (NaN wins).", quiet=True),
    ElementwiseOp(
        "Pow", _pow,
        ("bfloat16", "float32", "float16", "float64", "int8", "int16", "int32", "int64",
         "complex64", "complex128"),
        _SIGNED_NUMERIC,
        "z = x ** y; integers raise on a negative exponent; complex: exp(y * log(x))."),
    ElementwiseOp(
        "SquaredDifference", _squared_difference,
        ("bfloat16", "float16", "float32", "float64", "int32", "int64", "complex64",
         "complex128"),
        None, "z = (x - y) * conj(x - y)."),
    # -- comparisons ------------------------------------------------------------------------
    ElementwiseOp(
        "Less", "less",
        ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
         "uint16", "float16", "uint32", "uint64"),
        _REAL, "z = x < y (false where either is NaN).", boolean=True, quiet=True),
    ElementwiseOp(
        "LessEqual", "less_equal",
        ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
         "uint16", "float16", "uint32", "uint64"),
        _REAL, "z = x <= y (false where either is NaN).", boolean=True, quiet=True),
    ElementwiseOp(
        "Greater", "greater",
        ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
         "uint16", "float16", "uint32", "uint64"),
        _REAL, "z = x > y (false where either is NaN).", boolean=True, quiet=True),
    ElementwiseOp(
        "GreaterEqual", "greater_equal",
        ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
         "uint16", "float16", "uint32", "uint64"),
        _REAL, "z = x >= y (false where either is NaN).", boolean=True, quiet=True),
    ElementwiseOp(
        "Equal", "equal", _EVERY, None,
        """z = x == y, for every dtype (NaN equals nothing). With incompatible_shape_error=false,
shapes that do not broadcast give a scalar false.""",
        boolean=True, attrs=("incompatible_shape_error: bool = true",), quiet=True),
    ElementwiseOp(
        "NotEqual", "not_equal", _EVERY, None,
        """z = x != y, for every dtype (NaN differs from everything). With
incompatible_shape_error=false, shapes that do not broadcast give a scalar true.""",
        boolean=True, attrs=("incompatible_shape_error: bool = true",), quiet=True),
    # -- logical ----------------------------------------------------------------------------
    ElementwiseOp("LogicalAnd", "logical_and", None, None, "z = x and y.", boolean=True,
                  quiet=True),
    ElementwiseOp("LogicalOr", "logical_or", None, None, "z = x or y.", boolean=True,
                  quiet=True),
    ElementwiseOp("LogicalNot", "logical_not", None, None, "y = not x.", inputs=("x",),
                  output="y", boolean=True, quiet=True),
    # -- unary arithmetic -------------------------------------------------------------------
    ElementwiseOp(
        "Neg", "negative", _SIGNED_NUMERIC, _SIGNED_NUMERIC,
        "y = -x (INT_MIN stays INT_MIN).", inputs=("x",), output="y", quiet=True),
    ElementwiseOp(
        "Abs", "absolute", _FLOAT + _SIGNED, _FLOAT + _SIGNED,
        "y = |x| (INT_MIN stays INT_MIN; complex numbers take ComplexAbs, as in TF).",
        inputs=("x",), output="y", quiet=True),
    ElementwiseOp(
        "Sign", _sign, _SIGNED_NUMERIC, _SIGNED_NUMERIC,
        "y = -1, 0 or 1 (NaN for NaN, 0 for -0.0); complex: x / |x|, 0 for 0.",
        inputs=("x",), output="y"),
    ElementwiseOp(
        "Square", "square",
        ("bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
         "uint8", "uint16", "uint32", "uint64", "complex64", "complex128"),
        _NUMERIC, "y = x * x (integers wrap around).", inputs=("x",), output="y"),
    ElementwiseOp(
        "Sqrt", _sqrt, _INEXACT, _INEXACT, "y = sqrt(x) (NaN below 0; the principal root).",
        inputs=("x",), output="y"),
    ElementwiseOp(
        "Rsqrt", _rsqrt, _INEXACT, _INEXACT, "y = 1 / sqrt(x) (inf at 0, NaN below 0).",
        inputs=("x",), output="y"),
    ElementwiseOp(
        "Reciprocal", "reciprocal", _SIGNED_NUMERIC, _INEXACT,
        "y = 1 / x (no kernel takes integers, as in TF).", inputs=("x",), output="y"),
    ElementwiseOp("Exp", "exp", _INEXACT, _INEXACT, "y = e ** x.", inputs=("x",), output="y"),
    ElementwiseOp("Log", "log", _INEXACT, _INEXACT, "y = ln(x) (-inf at 0, NaN below 0).",
                  inputs=("x",), output="y"),
    ElementwiseOp("Log1p", "log1p", _INEXACT, _INEXACT, "y = ln(1 + x).", inputs=("x",),
                  output="y"),
    ElementwiseOp("Tanh", "tanh", _INEXACT, _INEXACT, "y = tanh(x).", inputs=("x",),
                  output="y"),
    ElementwiseOp(
        "Sigmoid", _sigmoid, _INEXACT, _INEXACT,
        "y = 1 / (1 + exp(-x)), without overflow for large |x|.", inputs=("x",), output="y"),
    # -- activations ------------------------------------------------------------------------
    ElementwiseOp(
        "Relu", _relu,
        ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
         "uint16", "float16", "uint32", "uint64"),
        _REAL, "activations = max(features, 0) (NaN stays NaN).", inputs=("features",),
        output="activations", quiet=True),
    ElementwiseOp(
        "Relu6", _relu6,
        ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
         "uint16", "float16", "uint32", "uint64"),
        _REAL, "activations = min(max(features, 0), 6) (NaN stays NaN).",
        inputs=("features",), output="activations", quiet=True),
    ElementwiseOp(
        "Elu", _elu, ("float16", "bfloat16", "float32", "float64"), _FLOAT,
        "activations = exp(features) - 1 where features < 0, else features.",
        inputs=("features",), output="activations", forward=False),
    ElementwiseOp(
        "Softplus", _softplus, ("float16", "bfloat16", "float32", "float64"), _FLOAT,
        "activations = log(exp(features) + 1), with TF's cut-offs for large |features|.",
        inputs=("features",), output="activations", forward=False),
    # -- rounding ---------------------------------------------------------------------------
    ElementwiseOp("Floor", "floor", _FLOAT, _FLOAT, "y = the largest integer <= x.",
                  inputs=("x",), output="y", quiet=True),
    ElementwiseOp("Ceil", "ceil", _FLOAT, _FLOAT, "y = the smallest integer >= x.",
                  inputs=("x",), output="y", quiet=True),
    ElementwiseOp(
        "Round", _round,
        ("bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
         "complex64", "complex128"),
        _FLOAT + ("int32", "int64"),
        "y = x rounded to the nearest integer, half to even.", inputs=("x",), output="y",
        quiet=True),
)
# fmt: on


# -- TF's gradient helper ops and Conj: fn(ctx, out, *inputs) -> out ---------------------------
# Each computes what TF's kernel computes (tensorflow/core/kernels/cwise_ops_gradients.h,
# relu_op_functor.h), in T's own arithmetic, its temporaries before writing `out` (which may be
# an input's buffer: the rows forward).


def _conjugate(xp: Any, x: Any) -> Any:
    return xp.conjugate(x) if x.dtype.kind == "c" else x


def _relu_grad(ctx: KernelContext, out: Any, gradients: Any, features: Any) -> Any:
    # TF: gradients * (features > 0), so 0 at the kink and NaN where a NaN or infinite gradient
    # meets features <= 0 (0 * inf).
    xp = ctx.xp
    return xp.multiply(gradients, xp.greater(features, features.dtype.type(0)), out=out)


def _relu6_grad(ctx: KernelContext, out: Any, gradients: Any, features: Any) -> Any:
    # TF: gradients * ((features > 0) * (features < 6)): 0 at both kinks.
    xp = ctx.xp
    t = features.dtype.type
    inside = xp.logical_and(xp.greater(features, t(0)), xp.less(features, t(6)))
    return xp.multiply(gradients, inside, out=out)


def _elu_grad(ctx: KernelContext, out: Any, gradients: Any, outputs: Any) -> Any:
    # TF: outputs < 0 ? (outputs + 1) * gradients : gradients (so 1 at 0).
    xp = ctx.xp
    t = outputs.dtype.type
    negative = xp.less(outputs, t(0))
    scaled = xp.add(outputs, t(1), out=ctx.empty(out.shape, out.dtype))
    xp.multiply(scaled, gradients, out=scaled)
    if out is not gradients:
        xp.copyto(out, gradients)
    xp.copyto(out, scaled, where=negative)
    return out


def _softplus_grad(ctx: KernelContext, out: Any, gradients: Any, features: Any) -> Any:
    # TF: gradients / (exp(-features) + 1).
    xp = ctx.xp
    denominator = xp.negative(features, out=ctx.empty(out.shape, out.dtype))
    xp.exp(denominator, out=denominator)
    xp.add(denominator, features.dtype.type(1), out=denominator)
    return xp.true_divide(gradients, denominator, out=out)


def _sigmoid_grad(ctx: KernelContext, out: Any, y: Any, dy: Any) -> Any:
    # TF: dy * (y * (1 - y)).
    xp = ctx.xp
    slope = xp.subtract(y.dtype.type(1), y, out=ctx.empty(out.shape, out.dtype))
    xp.multiply(y, slope, out=slope)
    return xp.multiply(dy, slope, out=out)


def _tanh_grad(ctx: KernelContext, out: Any, y: Any, dy: Any) -> Any:
    # TF: dy * (1 - y * y).
    xp = ctx.xp
    slope = xp.multiply(y, y, out=ctx.empty(out.shape, out.dtype))
    xp.subtract(y.dtype.type(1), slope, out=slope)
    return xp.multiply(dy, slope, out=out)


def _sqrt_grad(ctx: KernelContext, out: Any, y: Any, dy: Any) -> Any:
    # TF: mul_no_nan(0.5 / conj(y), dy): 0 where dy is 0, even where y is 0 or NaN.
    xp = ctx.xp
    zero = xp.equal(dy, 0)
    slope = xp.true_divide(
        y.dtype.type(0.5), _conjugate(xp, y), out=ctx.empty(out.shape, out.dtype)
    )
    xp.multiply(slope, dy, out=out)
    xp.copyto(out, 0, where=zero)
    return out


def _rsqrt_grad(ctx: KernelContext, out: Any, y: Any, dy: Any) -> Any:
    # TF: mul_no_nan(-0.5 * (c * c), mul_no_nan(c, dy)) with c = conj(y): 0 where dy is 0.
    xp = ctx.xp
    c = _conjugate(xp, y)
    scaled = xp.multiply(c, dy, out=ctx.empty(out.shape, out.dtype))
    xp.copyto(scaled, 0, where=xp.equal(dy, 0))
    slope = xp.multiply(c, c, out=ctx.empty(out.shape, out.dtype))
    xp.multiply(y.dtype.type(-0.5), slope, out=slope)
    xp.multiply(slope, scaled, out=out)
    xp.copyto(out, 0, where=xp.equal(scaled, 0))
    return out


def _reciprocal_grad(ctx: KernelContext, out: Any, y: Any, dy: Any) -> Any:
    # TF: mul_no_nan(-(c * c), dy) with c = conj(y): 0 where dy is 0.
    xp = ctx.xp
    zero = xp.equal(dy, 0)
    c = _conjugate(xp, y)
    slope = xp.multiply(c, c, out=ctx.empty(out.shape, out.dtype))
    xp.negative(slope, out=slope)
    xp.multiply(slope, dy, out=out)
    xp.copyto(out, 0, where=zero)
    return out


_RELU_GRAD_TYPES = (
    "float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16", "uint16",
    "float16", "uint32", "uint64",
)  # fmt: skip
_HALF_FIRST = ("float16", "bfloat16", "float32", "float64")
_Y_DY = {"inputs": ("y", "dy"), "output": "z", "operands": "same_size"}
_GRADIENTS_FEATURES = {
    "inputs": ("gradients", "features"), "output": "backprops", "operands": "same_shape",
}  # fmt: skip

# fmt: off
#: Ops the gradient rules build that are not in ELEMENTWISE_OPS: Conj, and TF's gradient ops of
#: the activations and unary functions, as TF's gradient graphs contain them (their own
#: gradients give second order). Their two operands never broadcast: ReluGrad, Relu6Grad,
#: EluGrad and SoftplusGrad need equal shapes, the others equal element counts (the result
#: has y's shape), as TF's kernels.
GRADIENT_OPS: tuple[ElementwiseOp, ...] = (
    ElementwiseOp(
        "Conj", "conjugate", ("complex64", "complex128"), None,
        "output = the complex conjugate of input (TF's variant type left out).",
        inputs=("input",), output="output", quiet=True, type_default="complex64"),
    ElementwiseOp(
        "ReluGrad", _relu_grad, _RELU_GRAD_TYPES, _REAL,
        "backprops = gradients * (features > 0): Relu's gradient (features: its input or its "
        "output).", **_GRADIENTS_FEATURES),
    ElementwiseOp(
        "Relu6Grad", _relu6_grad, _RELU_GRAD_TYPES, _REAL,
        "backprops = gradients * (0 < features < 6): Relu6's gradient.", **_GRADIENTS_FEATURES),
    ElementwiseOp(
        "EluGrad", _elu_grad, _HALF_FIRST, _FLOAT,
        "backprops = gradients * (outputs + 1) where outputs < 0, else gradients: Elu's "
        "gradient from its outputs.",
        inputs=("gradients", "outputs"), output="backprops", operands="same_shape"),
    ElementwiseOp(
        "SoftplusGrad", _softplus_grad, _HALF_FIRST, _FLOAT,
        "backprops = gradients / (exp(-features) + 1): Softplus's gradient.",
        **_GRADIENTS_FEATURES),
    ElementwiseOp(
        "SigmoidGrad", _sigmoid_grad, _INEXACT, _INEXACT,
        "z = dy * y * (1 - y): the gradient of y = sigmoid(x).", **_Y_DY),
    ElementwiseOp(
        "TanhGrad", _tanh_grad, _INEXACT, _INEXACT,
        "z = dy * (1 - y * y): the gradient of y = tanh(x).", **_Y_DY),
    ElementwiseOp(
        "RsqrtGrad", _rsqrt_grad, _INEXACT, _INEXACT,
        "z = -0.5 * dy * conj(y) ** 3 (0 where dy is 0): the gradient of y = rsqrt(x).",
        **_Y_DY),
    ElementwiseOp(
        "SqrtGrad", _sqrt_grad, _INEXACT, _INEXACT,
        "z = 0.5 * dy / conj(y) (0 where dy is 0): the gradient of y = sqrt(x).", **_Y_DY),
    ElementwiseOp(
        "ReciprocalGrad", _reciprocal_grad, _INEXACT, _INEXACT,
        "z = -dy * conj(y) ** 2 (0 where dy is 0): the gradient of y = 1 / x.", **_Y_DY),
)
# fmt: on

_ROWS = {row.name: row for row in ELEMENTWISE_OPS + GRADIENT_OPS}


# -- kernels made from a row -------------------------------------------------------------------


def _kernel_of(row: ElementwiseOp) -> Callable[..., Any]:
    """The one kernel body (numpy on the CPU, cupy on a GPU) of a row."""
    compute = row.compute
    name = compute if isinstance(compute, str) else None
    host_ufunc = getattr(np, name) if name else None
    result_dtype = np.dtype(np.bool_) if row.boolean else None
    quiet, forward = row.quiet, row.forward

    def run(ctx: KernelContext, out: Any, inputs: tuple[Any, ...]) -> Any:
        xp = ctx.xp
        ufunc = host_ufunc if xp is np else getattr(xp, name) if name else None
        if quiet or inputs[0].dtype.kind in "biuO":
            if ufunc is not None:
                return ufunc(*inputs, out=out)
            return compute(ctx, out, *inputs)
        # cupy warns about nothing; the errstate also quiets simulated GPUs (numpy inside).
        with np.errstate(all="ignore"):
            if ufunc is not None:
                return ufunc(*inputs, out=out)
            return compute(ctx, out, *inputs)

    if len(row.inputs) == 1:

        def unary_kernel(ctx: KernelContext, x: Any) -> Any:
            dtype = x.dtype if result_dtype is None else result_dtype
            if forward:
                out = _output(ctx, (x,), x.shape, dtype)
            else:
                out = ctx.empty(x.shape, dtype)
            return run(ctx, out, (x,))

        kernel = unary_kernel
    elif row.attrs:
        not_equal = row.name == "NotEqual"

        def equality_kernel(ctx: KernelContext, x: Any, y: Any, *, incompatible_shape_error):
            shape = _broadcast_dims(x.shape, y.shape)
            if shape is None:
                if incompatible_shape_error:
                    raise _incompatible(ctx, x, y)
                out = ctx.empty((), np.bool_)
                out.fill(not_equal)  # TF: a scalar, false for Equal, true for NotEqual
                return out
            return run(ctx, _output(ctx, (x, y), shape, result_dtype), (x, y))

        kernel = equality_kernel
    elif row.operands == "same_shape":
        op_type = row.name

        def same_shape_kernel(ctx: KernelContext, x: Any, y: Any) -> Any:
            if x.shape != y.shape:
                raise ctx.invalid_argument(
                    f"Inputs to operation {ctx.node_name} of type {op_type} must have the same "
                    f"size and shape.  Input 0: {_shape_text(x.shape)} != input 1: "
                    f"{_shape_text(y.shape)}"
                )
            if forward:
                out = _output(ctx, (x, y), x.shape, x.dtype)
            else:
                out = ctx.empty(x.shape, x.dtype)
            return run(ctx, out, (x, y))

        kernel = same_shape_kernel
    elif row.operands == "same_size":

        def same_size_kernel(ctx: KernelContext, x: Any, y: Any) -> Any:
            if x.size != y.size:
                raise ctx.invalid_argument(_size_mismatch(x.size, y.size))
            # Only an input of the result's own shape may lend its buffer (y is read through a
            # reshaped view when its shape differs).
            if forward:
                out = _output(ctx, (x, y), x.shape, x.dtype)
            else:
                out = ctx.empty(x.shape, x.dtype)
            return run(ctx, out, (x, y if y.shape == x.shape else y.reshape(x.shape)))

        kernel = same_size_kernel
    else:

        def binary_kernel(ctx: KernelContext, x: Any, y: Any) -> Any:
            shape = _broadcast_dims(x.shape, y.shape)
            if shape is None:
                raise _incompatible(ctx, x, y)
            dtype = x.dtype if result_dtype is None else result_dtype
            if forward:
                out = _output(ctx, (x, y), shape, dtype)
            else:
                out = ctx.empty(shape, dtype)
            return run(ctx, out, (x, y))

        kernel = binary_kernel
    kernel.__name__ = kernel.__qualname__ = f"{row.name}_kernel"
    return kernel


def _register(op_type: str) -> type:
    """Registers a row's op and its CPU and GPU kernels; returns the builder.

    The kernels are trusted (no per-run output checks, fed arrays passed as they are): each
    writes into a new array (or the buffer of an input the plan lets it overwrite) of the
    broadcast shape and the result dtype, which it returns, 0-d included
    (tests/test_builtin_trust.py checks every op and dtype on both devices).
    """
    row = _ROWS[op_type]
    builder = register_op(row.op_def())
    kernel = _kernel_of(row)
    cpu = None if row.cpu is None else {"T": list(row.cpu)}
    gpu = None if row.gpu is None else {"T": list(row.gpu)}
    register_kernel(op_type, "CPU", kernel, type_constraints=cpu, trusted=True)
    register_kernel(op_type, "GPU", kernel, type_constraints=gpu, trusted=True)
    return builder


# -- AddN --------------------------------------------------------------------------------------

_ADD_N_TYPES = (
    "float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "int64", "bfloat16",
    "uint16", "complex128", "float16", "uint32", "uint64",
)  # fmt: skip

ADD_N = OpDef(
    "AddN",
    inputs=["inputs: N * T"],
    outputs=["sum: T"],
    attrs=["N: int >= 1", "T: {" + ", ".join(_ADD_N_TYPES) + "}"],
    shape_fn=lambda ctx: _add_n_shape(ctx),
    doc="""The sum of N tensors of one shape, added left to right (no broadcasting).""",
)


def merge_shapes(a: TensorShape, b: TensorShape, context: str = "") -> TensorShape:
    """TF's InferenceContext::Merge of two partial shapes, with its messages (and `context`
    after them, as TF_RETURN_WITH_CONTEXT_IF_ERROR adds it)."""
    suffix = f"\n\t{context}" if context else ""
    if a.rank is None:
        return b
    if b.rank is None:
        return a
    if a.rank != b.rank:
        raise InvalidArgumentError(
            f"Shapes must be equal rank, but are {a.rank} and {b.rank}{suffix}"
        )
    dims: list[int | None] = []
    for i, (p, q) in enumerate(zip(a.dims, b.dims)):
        if p is not None and q is not None and p != q:
            raise InvalidArgumentError(
                f"Dimension {i} in both shapes must be equal, but are {p} and {q}. Shapes are "
                f"{a} and {b}.{suffix}"
            )
        dims.append(q if p is None else p)
    return TensorShape(dims)


def _add_n_shape(ctx: InferenceContext) -> TensorShape:
    # TF merges from the last input backwards, naming the input that does not fit.
    shapes = ctx.input_shapes
    merged = shapes[-1]
    for i in range(len(shapes) - 2, -1, -1):
        try:
            merged = merge_shapes(shapes[i], merged)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(
                f"{e.message.rstrip('.')}. From merging shape {i} with other shapes."
            ) from None
    return merged


def _add_n_kernel(ctx: KernelContext, inputs: list[Any]) -> Any:
    first = inputs[0]
    shape = first.shape
    for i, value in enumerate(inputs):
        if value.shape != shape:
            raise ctx.invalid_argument(
                f"Inputs to operation {ctx.node_name} of type AddN must have the same size and "
                f"shape.  Input 0: {_shape_text(shape)} != input {i}: {_shape_text(value.shape)}"
            )
    if len(inputs) == 1:
        return first  # TF forwards its input
    xp = ctx.xp
    # Only the first two may be overwritten: the others are read after the first addition.
    out = _output(ctx, (inputs[0], inputs[1]), shape, first.dtype)
    if any(value is out for value in inputs[2:]):
        out = ctx.empty(shape, first.dtype)
    if out.dtype.kind not in "iu":
        # Overflow to inf, inf - inf: silent, as in TF (cupy warns about nothing; the errstate
        # also quiets simulated GPUs, numpy inside).
        with np.errstate(all="ignore"):
            return _add_all(xp, inputs, out)
    return _add_all(xp, inputs, out)


def _add_all(xp: Any, inputs: list[Any], out: Any) -> Any:
    xp.add(inputs[0], inputs[1], out=out)
    for value in inputs[2:]:
        xp.add(out, value, out=out)
    return out


# -- BroadcastGradientArgs ---------------------------------------------------------------------

BROADCAST_GRADIENT_ARGS = OpDef(
    "BroadcastGradientArgs",
    inputs=["s0: T", "s1: T"],
    outputs=["r0: T", "r1: T"],
    attrs=["T: {int32, int64} = int32"],
    shape_fn=lambda ctx: _bcast_args_shape(ctx),
    doc="""The axes along which a broadcast of shapes s0 and s1 expands each of them (the
reduction indices of their gradients), as TF's BCast computes them: an axis where an operand
has 1 (or no dim) and the other does not, and axes where both have 1, unless the two shapes
are equal (then none). Inputs and outputs live in host memory on every device.""",
)


def broadcast_gradient_args(s0: list[int], s1: list[int]) -> tuple[list[int], list[int]] | None:
    """TF's BCast reduction indices for shapes `s0` and `s1` (lists of ints), or None when
    they do not broadcast."""
    if s0 == s1:
        return [], []  # TF's fast path: identical shapes reduce nothing, 1s included
    rank = max(len(s0), len(s1))
    x = [1] * (rank - len(s0)) + list(s0)
    y = [1] * (rank - len(s1)) + list(s1)
    r0: list[int] = []
    r1: list[int] = []
    for axis, (p, q) in enumerate(zip(x, y)):
        if p == 1 and q == 1:
            r0.append(axis)
            r1.append(axis)
        elif p == 1:
            r0.append(axis)
        elif q == 1:
            r1.append(axis)
        elif p != q:
            return None
    return r0, r1


def _bcast_args_shape(ctx: InferenceContext) -> list[TensorShape]:
    for i in range(2):
        ctx.input_shapes[i].with_rank(1)
    s0, s1 = ctx.constant_value(0), ctx.constant_value(1)
    if s0 is None or s1 is None:
        return [TensorShape([None]), TensorShape([None])]
    a, b = s0.tolist(), s1.tolist()
    reduced = broadcast_gradient_args(a, b)
    if reduced is None:
        raise InvalidArgumentError(f"Incompatible shapes: {_shape_text(a)} vs. {_shape_text(b)}")
    return [TensorShape([len(reduced[0])]), TensorShape([len(reduced[1])])]


def _bcast_args_kernel(ctx: KernelContext, s0: Any, s1: Any) -> tuple[Any, Any]:
    for i, value in enumerate((s0, s1)):
        if value.ndim != 1:
            raise ctx.invalid_argument(f"In[{i}] must be a vector.{_shape_text(value.shape)}")
    a, b = s0.tolist(), s1.tolist()
    reduced = broadcast_gradient_args(a, b)
    if reduced is None:
        raise ctx.invalid_argument(f"Incompatible shapes: {_shape_text(a)} vs. {_shape_text(b)}")
    return np.array(reduced[0], s0.dtype), np.array(reduced[1], s0.dtype)


# -- gradients: reducing a broadcast -------------------------------------------------------------
# The gradient of an operand that a binary op broadcast is the output's gradient summed over the
# broadcast axes (TF's _ReduceGradientArgs): over constant axes when the static shapes decide
# them, else over the axes BroadcastGradientArgs computes from the run-time shapes, so that the
# gradient graph stays made of TF's ops. ops.array's builders (Shape, Reshape, SelectV2,
# ZerosLike, OnesLike) are imported where used: ops.array imports this module
# (broadcast_shape), so a module-level import would be a cycle.


def _broadcast_axes(
    own: TensorShape, other: TensorShape | None, grad: TensorShape
) -> tuple[list[int], int] | None:
    """(axes, rank): the axes of a gradient of shape `grad` (the broadcast of `own` and
    `other`, rank `rank`) to sum for the operand of shape `own`, when the static shapes decide
    them; None when only the run-time shapes can.

    `other` is the other operand's shape (None when unknown, as for `sum_to`). An axis is
    summed where `own` lacks it, and where `own` has 1 and the broadcast may not (summing a
    dim of 1 changes nothing, so an unknown broadcast dim is summed). An unknown dim of `own`
    is its broadcast dim where the gradient or the other operand has 1 there; otherwise it may
    be 1 or the broadcast dim: run time decides.

    Raises:
        InvalidArgumentError: `own` has more dims than the gradient.
    """
    if own.rank is None:
        return None
    rank = grad.rank
    if rank is None:
        if other is None or other.rank is None:
            return None
        rank = max(own.rank, other.rank)
    if own.rank > rank:
        raise InvalidArgumentError(
            f"Cannot reduce a gradient of shape {grad} to the shape {own} of a tensor with more "
            "dims: it was not broadcast from it"
        )
    lead = rank - own.rank
    others = None
    if other is not None and other.rank is not None and other.rank <= rank:
        others = (1,) * (rank - other.rank) + other.dims
    axes = list(range(lead))
    for i, dim in enumerate(own.dims):
        axis = lead + i
        g = grad.dims[axis] if grad.rank is not None else None
        o = others[axis] if others is not None else None
        if g == 1 or o == 1:
            continue  # the broadcast dim is own's: nothing was expanded here
        if dim == 1:
            axes.append(axis)
        elif dim is None:
            return None
    return axes, rank


def _shape_vector(scope: Any, t: Output) -> Any:
    """t's shape as a 1-D tensor: a constant when fully known, else Shape(t)."""
    if t.shape.is_fully_defined():
        dims = t.shape.dims
        return np.array(dims, np.int64 if dims and max(dims) > 2**31 - 1 else np.int32)
    from ops.array import Shape

    return Shape(scope, t).output


def _summed(scope: Any, grad: Output, target: Output, axes: list[int], rank: int) -> Output:
    """`grad` summed over the constant `axes` to `target`'s shape."""
    if not axes:
        return grad  # nothing was broadcast: the shapes agree
    lead = rank - target.shape.rank
    if lead and axes[-1] >= lead:
        # Missing dims and dims of 1 both expanded: sum them away, then restore the 1s.
        from ops.array import Reshape

        total = reduction.Sum(scope, grad, axes).output
        return Reshape(scope, total, _shape_vector(scope, target)).output
    # Only missing dims (dropped), or only dims of 1 (kept): the sum has target's shape.
    return reduction.Sum(scope, grad, axes, keep_dims=not lead).output


def _summed_at_run_time(scope: Any, grad: Output, axes: Output, shape: Output) -> Output:
    from ops.array import Reshape

    total = reduction.Sum(scope, grad, axes, keep_dims=True).output
    return Reshape(scope, total, shape).output


def _tensor(value: Any, what: str) -> Output:
    out = as_output(value)
    if out is None:
        raise InvalidArgumentError(
            f"{what} must be an Output or a single-output op builder; got {type(value).__name__}"
        )
    return out


def sum_to(grad: Any, target: Any) -> Output:
    """`grad` summed down to the shape of `target`: the gradient of a tensor that was
    broadcast to `grad`'s shape (numpy's rules: missing leading dims and dims of 1 expanded).

    Built under `minigraph.current_scope(grad.graph)` (a gradient rule's scope): nothing when
    the shapes already agree, a Sum over constant axes (and a Reshape when both missing dims
    and dims of 1 were expanded) when the static shapes decide the axes, else Shape,
    BroadcastGradientArgs, Sum and Reshape, which find them at run time.

    Args:
        grad: an Output (or single-output builder) of the broadcast shape.
        target: the Output whose shape the result has (the broadcast operand).

    Returns:
        An Output of grad's dtype and target's shape.

    Raises:
        InvalidArgumentError: arguments that are not tensors, or a target of higher rank than
            grad.
    """
    grad = _tensor(grad, "sum_to: grad")
    target = _tensor(target, "sum_to: target")
    scope = current_scope(grad.graph)
    static = _broadcast_axes(target.shape, None, grad.shape)
    if static is not None:
        return _summed(scope, grad, target, *static)
    from ops.array import Shape

    target_shape = Shape(scope, target).output
    axes = BroadcastGradientArgs(scope, target_shape, Shape(scope, grad)).r0
    return _summed_at_run_time(scope, grad, axes, target_shape)


def broadcast_gradients(grad: Any, x: Any, y: Any) -> tuple[Output | None, Output | None]:
    """The gradients of the operands x and y of a broadcasting binary op (TF's
    _ReduceGradientArgs): each summed down to its operand's shape, as `sum_to`.

    `grad` is the gradient both receive before the reduction (AddV2's), or a pair `(gx, gy)`
    of the two (Mul's `grad * conj(y)` and `conj(x) * grad`), where None stays None. The
    reduction axes come from both operands' static shapes where they decide them (an unknown
    dim of x is not broadcast where y has 1); otherwise one BroadcastGradientArgs of Shape(x)
    and Shape(y) serves both. Built under `minigraph.current_scope(graph)`.

    Returns:
        (gx, gy): Outputs of x's and y's shapes, or None where the pair had None.

    Raises:
        InvalidArgumentError: arguments that are not tensors.
    """
    gx, gy = grad if isinstance(grad, (tuple, list)) else (grad, grad)
    x = _tensor(x, "broadcast_gradients: x")
    y = _tensor(y, "broadcast_gradients: y")
    pairs = [
        None if g is None else (_tensor(g, "broadcast_gradients: grad"), t, other)
        for g, t, other in ((gx, x, y), (gy, y, x))
    ]
    scope = current_scope(x.graph)
    at_run_time = None  # (Shape(x), Shape(y), BroadcastGradientArgs), built once
    result: list[Output | None] = []
    for i, pair in enumerate(pairs):
        if pair is None:
            result.append(None)
            continue
        g, t, other = pair
        static = _broadcast_axes(t.shape, other.shape, g.shape)
        if static is not None:
            result.append(_summed(scope, g, t, *static))
            continue
        if at_run_time is None:
            from ops.array import Shape

            shapes = (Shape(scope, x).output, Shape(scope, y).output)
            at_run_time = (*shapes, BroadcastGradientArgs(scope, *shapes).outputs)
        result.append(_summed_at_run_time(scope, g, at_run_time[2][i], at_run_time[i]))
    return result[0], result[1]


def _conj(scope: Any, t: Output) -> Output:
    """TF's math_ops.conj: the complex conjugate, the tensor itself for real dtypes."""
    return Conj(scope, t).output if t.dtype.is_complex else t


def _trainable(*tensors: Output) -> bool:
    return all(t.dtype.is_floating or t.dtype.is_complex for t in tensors)


# -- registration ------------------------------------------------------------------------------

Range = register_op(RANGE)
Cast = register_op(CAST)
AddN = register_op(ADD_N)
BroadcastGradientArgs = register_op(BROADCAST_GRADIENT_ARGS)

# Trusted (no per-run output checks, fed arrays passed as they are): Range and Cast build new
# arrays of the inferred dtype and shape (Cast to the same dtype returns its input itself);
# AddN writes a new array (N = 1: its input itself); BroadcastGradientArgs builds new vectors
# (tests/test_builtin_trust.py checks them on both devices).
_HOST_RANGE = ["start", "limit", "delta"]
register_kernel(
    "Range", "CPU", _range_kernel,
    type_constraints={"Tidx": _RANGE_KERNEL_TYPES}, host_memory=_HOST_RANGE, trusted=True,
)  # fmt: skip
register_kernel(
    "Range", "GPU", _range_kernel,
    type_constraints={"Tidx": _gpu(_RANGE_KERNEL_TYPES)}, host_memory=_HOST_RANGE, trusted=True,
)  # fmt: skip
register_kernel("Cast", "CPU", _cast_kernel, trusted=True)
register_kernel(
    "Cast", "GPU", _cast_kernel,
    type_constraints={"SrcT": _GPU_TYPES, "DstT": _GPU_TYPES}, trusted=True,
)  # fmt: skip
register_kernel("AddN", "CPU", _add_n_kernel, trusted=True)
register_kernel(
    "AddN", "GPU", _add_n_kernel, type_constraints={"T": _gpu(_ADD_N_TYPES)}, trusted=True
)
_HOST_BCAST = ["s0", "s1", "r0", "r1"]
register_kernel(
    "BroadcastGradientArgs", "CPU", _bcast_args_kernel, host_memory=_HOST_BCAST, trusted=True
)
register_kernel(
    "BroadcastGradientArgs", "GPU", _bcast_args_kernel, host_memory=_HOST_BCAST, trusted=True
)

# Values known at construction (minigraph.shape_inference.constant_value), as TF's shape
# refiner evaluates small constant subgraphs: integer shape arithmetic (Shape(x)[0] * 2,
# Range(0, Rank(x)), Cast of a constant shape). Only int32/int64 results are evaluated; an
# evaluator gives None where the kernel would raise (integer division by zero) or Range would
# be large, leaving the error or the work to run time.
_EVALUATED_BINARY = {
    "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "Maximum": np.maximum,
    "Minimum": np.minimum, "FloorDiv": np.floor_divide, "FloorMod": np.remainder,
}  # fmt: skip


def _binary_value(t: Output, value_of: Callable[[Any], Any]) -> np.ndarray | None:
    x, y = (value_of(i) for i in t.op.inputs)
    if x is None or y is None:
        return None
    kind = t.op.type
    if kind in ("FloorDiv", "FloorMod") and not np.all(y):
        return None  # "Integer division by zero" at run time
    with np.errstate(over="ignore"):  # wraps around, as the kernels do
        return np.asarray(_EVALUATED_BINARY[kind](x, y), dtype=x.dtype)


def _neg_value(t: Output, value_of: Callable[[Any], Any]) -> np.ndarray | None:
    x = value_of(t.op.inputs[0])
    return None if x is None else np.negative(x)


def _cast_value(t: Output, value_of: Callable[[Any], Any]) -> np.ndarray | None:
    x = value_of(t.op.inputs[0])
    if x is None or x.dtype.kind not in "iubf" or x.dtype.name == "bfloat16":
        return None
    target = t.dtype.np_dtype
    if x.dtype.kind == "f":
        info = np.iinfo(target)
        if not (np.all(np.isfinite(x)) and np.all((x > info.min - 1) & (x < info.max + 1))):
            return None  # no exact integer: the kernel's conversion decides
    return x.astype(target)


def _range_value(t: Output, value_of: Callable[[Any], Any]) -> np.ndarray | None:
    values = [value_of(i) for i in t.op.inputs]
    if any(v is None or v.ndim for v in values):
        return None
    start, limit, delta = (int(v) for v in values)
    try:
        size = _range_size(start, limit, delta)
    except InvalidArgumentError:
        return None
    if size > MAX_CONSTANT_ELEMENTS:
        return None
    return (np.arange(size, dtype=np.int64) * delta + start).astype(t.dtype.np_dtype)


for _op_type in _EVALUATED_BINARY:
    register_constant_evaluator(_op_type, _binary_value)
register_constant_evaluator("Neg", _neg_value)
register_constant_evaluator("Cast", _cast_value)
register_constant_evaluator("Range", _range_value)

# The elementwise family, one line per row of ELEMENTWISE_OPS (OpDef, CPU and GPU kernels),
# each followed by its gradient rule: TF's (math_grad.py, nn_grad.py), with its conjugations
# for complex numbers (a rule gets grad = dL/d(re y) + i dL/d(im y) and returns the same for
# its inputs). Rules only run for float and complex tensors: integer and bool ones carry no
# gradient (minigraph.gradients never reaches them).


def _s(op: Any) -> Any:
    """The scope a rule builds in (the gradient machinery makes it current)."""
    return current_scope(op.graph)


# Binary arithmetic
AddV2 = _register("AddV2")


@register_gradient("AddV2")
def _add_v2_grad(op: Any, grad: Output) -> tuple[Output | None, Output | None]:
    x, y = op.inputs
    return broadcast_gradients(grad, x, y)


Sub = _register("Sub")


@register_gradient("Sub")
def _sub_grad(op: Any, grad: Output) -> tuple[Output | None, Output | None]:
    x, y = op.inputs
    gx, gy = broadcast_gradients(grad, x, y)
    return gx, Neg(_s(op), gy).output  # negated after the reduction: fewer elements


Mul = _register("Mul")


@register_gradient("Mul")
def _mul_grad(op: Any, grad: Output) -> tuple[Output | None, Output | None]:
    s = _s(op)
    x, y = op.inputs
    gx = Mul(s, grad, _conj(s, y)).output
    gy = Mul(s, _conj(s, x), grad).output
    return broadcast_gradients((gx, gy), x, y)


RealDiv = _register("RealDiv")


def _quotient_grad(op: Any, grad: Output) -> tuple[Output | None, Output | None]:
    # z = x / y: dz/dx = 1 / y, dz/dy = -x / y**2 (divided twice, as TF: y**2 may overflow).
    s = _s(op)
    x, y = op.inputs
    cx, cy = _conj(s, x), _conj(s, y)
    gx = RealDiv(s, grad, cy).output
    gy = Mul(s, grad, RealDiv(s, RealDiv(s, Neg(s, cx), cy), cy)).output
    return broadcast_gradients((gx, gy), x, y)


register_gradient("RealDiv")(_quotient_grad)
Div = _register("Div")
# Float and complex Div is RealDiv (TF's rule builds RealDiv nodes too); integer Div has no
# gradient (integer tensors never carry one: the rule is never called for them).
register_gradient("Div")(_quotient_grad)


FloorDiv = _register("FloorDiv")


@register_gradient("FloorDiv")
def _floor_div_grad(op: Any, grad: Output) -> tuple[None, None]:
    return None, None  # TF: piecewise constant, no gradient


FloorMod = _register("FloorMod")


@register_gradient("FloorMod")
def _floor_mod_grad(op: Any, grad: Output) -> tuple[Output | None, Output | None]:
    # z = x - floor(x / y) * y: dz/dx = 1, dz/dy = -floor(x / y) (TF's).
    s = _s(op)
    x, y = op.inputs
    gy = Mul(s, grad, Neg(s, FloorDiv(s, x, y))).output
    return broadcast_gradients((grad, gy), x, y)


Maximum = _register("Maximum")


def _select_grads(op: Any, grad: Output, x_wins: Output) -> tuple[Output | None, ...]:
    """grad to x where `x_wins`, to y elsewhere, then each reduced to its operand's shape."""
    from ops.array import SelectV2, ZerosLike

    s = _s(op)
    x, y = op.inputs
    zeros = ZerosLike(s, grad).output
    gx = SelectV2(s, x_wins, grad, zeros).output
    gy = SelectV2(s, x_wins, zeros, grad).output
    return broadcast_gradients((gx, gy), x, y)


@register_gradient("Maximum")
def _maximum_grad(op: Any, grad: Output) -> tuple[Output | None, ...]:
    x, y = op.inputs
    return _select_grads(op, grad, GreaterEqual(_s(op), x, y).output)  # a tie goes to x


Minimum = _register("Minimum")


@register_gradient("Minimum")
def _minimum_grad(op: Any, grad: Output) -> tuple[Output | None, ...]:
    x, y = op.inputs
    return _select_grads(op, grad, LessEqual(_s(op), x, y).output)  # a tie goes to x


Pow = _register("Pow")


@register_gradient("Pow")
def _pow_grad(op: Any, grad: Output) -> tuple[Output | None, Output | None]:
    # z = x ** y: dz/dx = y * x ** (y - 1); dz/dy = z * log(x), taken as 0 where x <= 0 for
    # real x (no real logarithm there) and where x == 0 for complex x (TF's).
    from ops.array import OnesLike, SelectV2, ZerosLike

    s = _s(op)
    x, y = op.inputs
    cx, cy = _conj(s, x), _conj(s, y)
    gx = Mul(s, Mul(s, grad, cy), Pow(s, cx, Sub(s, cy, 1))).output
    if x.dtype.is_complex:
        has_log = NotEqual(s, cx, 0).output
    else:
        has_log = Greater(s, cx, 0).output
    safe_x = SelectV2(s, has_log, cx, OnesLike(s, x)).output
    log_x = SelectV2(s, has_log, Log(s, safe_x), ZerosLike(s, x)).output
    gy = Mul(s, Mul(s, grad, _conj(s, op.outputs[0])), log_x).output
    return broadcast_gradients((gx, gy), x, y)


SquaredDifference = _register("SquaredDifference")


@register_gradient("SquaredDifference")
def _squared_difference_grad(op: Any, grad: Output) -> tuple[Output | None, Output | None]:
    # z = |x - y|**2: dz/dx = 2 (x - y). TF multiplies the whole (complex) grad by 2 (x - y);
    # z is real-valued, so only grad's real part can reach x and y: 2 re(grad) = grad +
    # conj(grad) (the same for real dtypes).
    s = _s(op)
    x, y = op.inputs
    if grad.dtype.is_complex:
        twice = AddV2(s, grad, Conj(s, grad)).output
    else:
        twice = Mul(s, grad, 2).output
    gx = Mul(s, twice, Sub(s, x, y)).output
    gx, gy = broadcast_gradients(gx, x, y)
    return gx, Neg(s, gy).output


# Comparisons and logical ops (not differentiable, as in TF)
Less = _register("Less")
no_gradient("Less")
LessEqual = _register("LessEqual")
no_gradient("LessEqual")
Greater = _register("Greater")
no_gradient("Greater")
GreaterEqual = _register("GreaterEqual")
no_gradient("GreaterEqual")
Equal = _register("Equal")
no_gradient("Equal")
NotEqual = _register("NotEqual")
no_gradient("NotEqual")
LogicalAnd = _register("LogicalAnd")
no_gradient("LogicalAnd")
LogicalOr = _register("LogicalOr")
no_gradient("LogicalOr")
LogicalNot = _register("LogicalNot")
no_gradient("LogicalNot")
# Unary math
Neg = _register("Neg")


@register_gradient("Neg", accepts_indexed_slices=True)
def _neg_grad(op: Any, grad: Any) -> Any:
    s = _s(op)
    if isinstance(grad, IndexedSlices):  # stays sparse: the values negated
        return IndexedSlices(Neg(s, grad.values).output, grad.indices, grad.dense_shape)
    return Neg(s, grad).output


Abs = _register("Abs")


@register_gradient("Abs")
def _abs_grad(op: Any, grad: Output) -> Output:
    s = _s(op)
    return Mul(s, grad, Sign(s, op.inputs[0])).output  # sign(0) = 0: gradient 0 at the kink


Sign = _register("Sign")


@register_gradient("Sign")
def _sign_grad(op: Any, grad: Output) -> Output:
    # TF: zeros (also for complex x, where x / |x| is not constant).
    from ops.array import ZerosLike

    return ZerosLike(_s(op), op.inputs[0]).output


Square = _register("Square")


@register_gradient("Square")
def _square_grad(op: Any, grad: Output) -> Output:
    s = _s(op)
    return Mul(s, grad, Mul(s, _conj(s, op.inputs[0]), 2)).output


Sqrt = _register("Sqrt")


@register_gradient("Sqrt")
def _sqrt_grad_rule(op: Any, grad: Output) -> Output:
    return SqrtGrad(_s(op), op.outputs[0], grad).output


Rsqrt = _register("Rsqrt")


@register_gradient("Rsqrt")
def _rsqrt_grad_rule(op: Any, grad: Output) -> Output:
    return RsqrtGrad(_s(op), op.outputs[0], grad).output


Reciprocal = _register("Reciprocal")


@register_gradient("Reciprocal")
def _reciprocal_grad_rule(op: Any, grad: Output) -> Output:
    return ReciprocalGrad(_s(op), op.outputs[0], grad).output


Exp = _register("Exp")


@register_gradient("Exp")
def _exp_grad(op: Any, grad: Output) -> Output:
    s = _s(op)
    return Mul(s, grad, _conj(s, op.outputs[0])).output


Log = _register("Log")


@register_gradient("Log")
def _log_grad(op: Any, grad: Output) -> Output:
    s = _s(op)
    return Mul(s, grad, Reciprocal(s, _conj(s, op.inputs[0]))).output


Log1p = _register("Log1p")


@register_gradient("Log1p")
def _log1p_grad(op: Any, grad: Output) -> Output:
    s = _s(op)
    return Mul(s, grad, Reciprocal(s, AddV2(s, 1, _conj(s, op.inputs[0])))).output


Tanh = _register("Tanh")


@register_gradient("Tanh")
def _tanh_grad_rule(op: Any, grad: Output) -> Output:
    s = _s(op)
    return TanhGrad(s, _conj(s, op.outputs[0]), grad).output


Sigmoid = _register("Sigmoid")


@register_gradient("Sigmoid")
def _sigmoid_grad_rule(op: Any, grad: Output) -> Output:
    s = _s(op)
    return SigmoidGrad(s, _conj(s, op.outputs[0]), grad).output


# Activations (their rules read the output: y > 0 exactly where x > 0, so Relu's and Relu6's
# gradients are 0 at the kinks, and Elu's 1 at 0)
Relu = _register("Relu")


@register_gradient("Relu")
def _relu_grad_rule(op: Any, grad: Output) -> Output:
    return ReluGrad(_s(op), grad, op.outputs[0]).output


Relu6 = _register("Relu6")


@register_gradient("Relu6")
def _relu6_grad_rule(op: Any, grad: Output) -> Output:
    return Relu6Grad(_s(op), grad, op.outputs[0]).output


Elu = _register("Elu")


@register_gradient("Elu")
def _elu_grad_rule(op: Any, grad: Output) -> Output:
    return EluGrad(_s(op), grad, op.outputs[0]).output


Softplus = _register("Softplus")


@register_gradient("Softplus")
def _softplus_grad_rule(op: Any, grad: Output) -> Output:
    # TF's rule: grad * sigmoid(x) (SoftplusGrad appears only in SoftplusGrad's own gradient).
    s = _s(op)
    return Mul(s, grad, Sigmoid(s, op.inputs[0])).output


# Rounding: piecewise constant, no gradient (TF's rules return None)
Floor = _register("Floor")
Ceil = _register("Ceil")
Round = _register("Round")


def _no_input_gradient(op: Any, grad: Output) -> None:
    return None


register_gradient("Floor")(_no_input_gradient)
register_gradient("Ceil")(_no_input_gradient)
register_gradient("Round")(_no_input_gradient)

# TF's gradient helper ops and Conj, one line per row of GRADIENT_OPS, with their own rules
# (TF's), which make second-order gradients.
Conj = _register("Conj")


@register_gradient("Conj", accepts_indexed_slices=True)
def _conj_grad(op: Any, grad: Any) -> Any:
    s = _s(op)
    if isinstance(grad, IndexedSlices):
        return IndexedSlices(Conj(s, grad.values).output, grad.indices, grad.dense_shape)
    return Conj(s, grad).output


ReluGrad = _register("ReluGrad")
Relu6Grad = _register("Relu6Grad")
_MASKS = {"ReluGrad": ReluGrad, "Relu6Grad": Relu6Grad}


def _masked_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    """ReluGrad's and Relu6Grad's gradient: the same mask applied to `grad` (linear in the
    gradients input), none for the features (piecewise constant in them)."""
    from ops.array import ZerosLike

    s = _s(op)
    features = op.inputs[1]
    return _MASKS[op.type](s, grad, features).output, ZerosLike(s, features).output


register_gradient("ReluGrad")(_masked_grad_grad)
register_gradient("Relu6Grad")(_masked_grad_grad)


EluGrad = _register("EluGrad")


@register_gradient("EluGrad")
def _elu_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    # backprops = gradients * (outputs + 1) where outputs < 0, else gradients.
    from ops.array import SelectV2, ZerosLike

    s = _s(op)
    gradients, outputs = op.inputs
    d_outputs = SelectV2(
        s, Less(s, outputs, 0), Mul(s, grad, gradients), ZerosLike(s, outputs)
    ).output
    return EluGrad(s, grad, outputs).output, d_outputs


SoftplusGrad = _register("SoftplusGrad")


@register_gradient("SoftplusGrad")
def _softplus_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    # backprops = gradients / (exp(-x) + 1): d/dx = gradients / (exp(-x) + 2 + exp(x)).
    s = _s(op)
    gradients, features = op.inputs
    spread = AddV2(s, AddV2(s, Exp(s, Neg(s, features)), 2), Exp(s, features))
    d_features = RealDiv(s, Mul(s, grad, gradients), spread).output
    return SoftplusGrad(s, grad, features).output, d_features


SigmoidGrad = _register("SigmoidGrad")


@register_gradient("SigmoidGrad")
def _sigmoid_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    # z = dy * y * (1 - y): dz/dy' = y (1 - y), dz/dy = dy (1 - 2 y).
    s = _s(op)
    a, b = (_conj(s, t) for t in op.inputs)
    gb = Mul(s, grad, b).output
    d_y = Sub(s, gb, Mul(s, Mul(s, gb, 2), a)).output
    return d_y, SigmoidGrad(s, a, grad).output


TanhGrad = _register("TanhGrad")


@register_gradient("TanhGrad")
def _tanh_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    # z = dy * (1 - y * y): dz/dy = -2 dy y.
    s = _s(op)
    a, b = (_conj(s, t) for t in op.inputs)
    d_y = Mul(s, Mul(s, Mul(s, grad, -2), b), a).output
    return d_y, TanhGrad(s, a, grad).output


RsqrtGrad = _register("RsqrtGrad")


@register_gradient("RsqrtGrad")
def _rsqrt_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    # z = -0.5 dy conj(y)**3 (antiholomorphic in y: the conjugated grad reaches it).
    s = _s(op)
    a, b = op.inputs
    ca, cg = _conj(s, a), _conj(s, grad)
    d_y = Mul(s, Mul(s, Mul(s, cg, -1.5), b), Square(s, ca)).output
    return d_y, RsqrtGrad(s, ca, grad).output


SqrtGrad = _register("SqrtGrad")


@register_gradient("SqrtGrad")
def _sqrt_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    # z = 0.5 dy / conj(y): dz/dy = -z / conj(y), dz/d(dy) = 0.5 / conj(y).
    s = _s(op)
    y = op.inputs[0]
    ga = RealDiv(s, grad, y).output
    d_y = Mul(s, Neg(s, _conj(s, ga)), op.outputs[0]).output
    return d_y, Mul(s, ga, 0.5).output


ReciprocalGrad = _register("ReciprocalGrad")


@register_gradient("ReciprocalGrad")
def _reciprocal_grad_grad(op: Any, grad: Output) -> tuple[Output, Output]:
    # z = -dy conj(y)**2 (antiholomorphic in y).
    s = _s(op)
    a, b = op.inputs
    ca, cg = _conj(s, a), _conj(s, grad)
    d_y = Mul(s, Mul(s, Mul(s, cg, -2), b), ca).output
    return d_y, ReciprocalGrad(s, ca, grad).output


# Range and BroadcastGradientArgs are not differentiable (TF); AddN sends its gradient to every
# input; Cast's gradient is cast back between float and complex types only.
no_gradient("Range")
no_gradient("BroadcastGradientArgs")


@register_gradient("AddN", accepts_indexed_slices=True)
def _add_n_grad(op: Any, grad: Any) -> list[Any]:
    return [grad] * len(op.inputs)  # one shape: no broadcasting


@register_gradient("Cast", accepts_indexed_slices=True)
def _cast_grad(op: Any, grad: Any) -> Any:
    source = op.inputs[0].dtype
    if not (_trainable(op.inputs[0]) and _trainable(op.outputs[0])):
        return None  # integer or bool on either side: TF's rule gives none
    s = _s(op)
    if isinstance(grad, IndexedSlices):  # stays sparse: the values cast
        values = Cast(s, grad.values, source).output
        return IndexedSlices(values, grad.indices, grad.dense_shape)
    return Cast(s, grad, source).output
