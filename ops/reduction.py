"""Reductions over an axis input (Sum, Mean, Max, Min, Prod, All, Any), ArgMax, ArgMin, and the
scans Cumsum, Cumprod: op definitions, the one reduction shape function they share, CPU and GPU
kernels, builders, gradient rules.

Semantics are TensorFlow 2.21's CPU kernels (tf.raw_ops.Sum, Mean, ..., ArgMax, ArgMin):

- The axis input keeps TF's OpDef name (`reduction_indices`; `dimension` for ArgMax/ArgMin), so
  graph files match, and the builders also take it as `axis=`, as TF's C++ wrappers call it:
  `Sum(scope, x, axis=[0, -1], keep_dims=True)`. It is an int32/int64 scalar or vector (counted
  from the end when negative; an empty one reduces nothing) and lives in host memory on every
  device. As TF's kernel does, a run-time axis of any rank is read flattened.
- keep_dims keeps each reduced dim as 1. With an unknown axis the shape is TF's
  ReductionShapeFn's: the input's rank with unknown dims under keep_dims, else unknown.
- Integer Sum and Prod wrap around in T. Integer Mean sums in 64 bits (int64 for int8..int32,
  uint64 for uint8..uint32; int64 and uint64 sum in themselves, wrapping) and divides with C's
  truncation towards zero (the mean of [-7, 0] is -3), as TF's casting specialisation does.
- Empty reductions give TF's identities: Sum 0, Prod 1, Max the lowest value (-inf, INT_MIN, 0
  for unsigned types), Min the highest, All true, Any false; Mean NaN for floating types and 0
  for integer and complex types.
- Max and Min propagate NaN. float16 sums follow numpy: along the innermost axis in float32
  (pairwise) rounded once, along outer axes in float16 one row at a time, so 4096 float16 ones
  sum to 2048 along axis 0, as in TF (TF's Eigen kernels round partial sums in float16 in an
  order of their own: float16 sums can differ from TF's in the last bits). float16 Mean
  divides by the count as a float16, so a count over 65504 (inf) gives 0, as in TF. bfloat16
  Sum and Mean accumulate in float32, as TF's casting specialisation does; bfloat16 Prod does
  too (TF multiplies in bfloat16 in Eigen's packet order, which cannot be reproduced: products
  can differ from TF's in the last bits).
- ArgMax/ArgMin give the first index of the extreme value. NaN never wins, as in TF's Eigen
  reducer, which starts from index 0 holding the lowest (highest) finite value: a row whose
  best value is NaN, infinite or that lowest (highest) value gives 0. output_type int16/uint16
  (ArgMax only, as in TF) wraps around as TF's cast does. An empty reduced dimension is TF's
  error ("Reduction axis 1 is empty in shape [2,0]").

Deliberate differences from TF, all for inputs TF's kernels always refuse or misread:
- A constant axis given twice fails at construction (TF's shape function accepts duplicates and
  its kernel refuses them); so do ArgMax/ArgMin of a scalar, a constant dimension out of range
  for a vector, and a constant dimension naming a dim known to be 0.
- ArgMax's int16 `dimension` is read as int16 and an int64 one beyond int32 is refused (TF's
  kernel reads an int16 as the bytes of an int32 and truncates an int64 to 32 bits).

Cumsum and Cumprod (TF's ops, which Prod's gradient builds): along a scalar `axis` (host
memory), `exclusive` leaving the current element out, `reverse` scanning from the end; every
type accumulates in itself, element after element, as TF's Eigen scan; integers wrap. A
constant axis that is not a scalar or is out of range for a known rank fails at construction
(TF's shape function lets it through to its kernel, which always refuses it).

Gradient rules (TF's, math_grad.py; registered next to each op): Sum's spreads the output's
gradient back over the reduced dims (a Reshape to the kept shape unless the reduced dims lead,
then BroadcastTo), Mean's divides that by the count, Max's and Min's split it evenly among the
tied extreme elements (NaN for a group whose result is NaN), Prod's multiplies it by the product
of the other elements from two exclusive Cumprods over the reduced dims moved first (no
division: exact with zeros; conjugated for complex). Static shapes and constant axes build
constants only; unknown dims, unknown ranks and axes known only at run time use TF's
run-time construction (reduced_shape: Shape, Size, FloorMod, Range, Fill, DynamicStitch; for
Prod DynamicPartition stands in for TF's ListDiff and DynamicStitch for InvertPermutation).
Int64 run-time axes work (TF 2.21's reduced_shape passes them to DynamicStitch, which refuses
them). All, Any, ArgMax, ArgMin: no gradient (`no_gradient`). Cumsum's and Cumprod's rules are
TF's (Cumprod's divides: 0 where x is 0, as TF's div_no_nan), Cumprod's conjugated for complex
inputs (TF's is not).

Kernels call one numpy (cupy) reduction with `out=` into `ctx.empty`; a constant axis is
checked and converted once per plan (the kernels' specialiser). float16/bfloat16 reductions
run under `np.errstate` (silent, as TF); float32/64 ones skip its cost, so numpy may warn when
finite values overflow to inf (the values are TF's).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any as _Any

import numpy as np

from minigraph import (
    InvalidArgumentError,
    KernelContext,
    KernelSpec,
    OpBuilder,
    OpDef,
    TensorShape,
    as_dtype,
    current_scope,
    no_gradient,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext, register_constant_evaluator

__all__ = [
    "Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin", "Cumsum", "Cumprod",
    "reduction_shape", "reduction_axes",
]  # fmt: skip

_F16 = np.dtype(np.float16)

# TF's OpDef type lists (its quantized types left out: minigraph has none), in TF's order.
_SUM_TYPES = [
    "float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "int64", "bfloat16",
    "uint16", "complex128", "float16", "uint32", "uint64",
]  # fmt: skip
_MINMAX_TYPES = [
    "float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16", "uint16",
    "float16", "uint32", "uint64",
]  # fmt: skip
_ARG_TYPES = _MINMAX_TYPES + ["bool"]


def _gpu(names: list[str]) -> list[str]:
    return [n for n in names if n != "bfloat16"]  # cupy has no bfloat16


def _shape_text(shape: _Any) -> str:
    """A shape as TF's TensorShape::DebugString writes it: `[2,0]`, `[]`."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


# -- the shared shape function -------------------------------------------------------------------


def reduction_axes(values: _Any, rank: int, *, at_run_time: bool = False) -> tuple[int, ...]:
    """The dims an axis value names, made non-negative, in the order given (TF's
    ReductionHelper): each in [-rank, rank) and none twice, else InvalidArgumentError with TF's
    message (its shape function's, or its kernel's when `at_run_time`)."""
    axes: list[int] = []
    for value in np.asarray(values).reshape(-1).tolist():
        if not -rank <= value < rank:
            if at_run_time:
                raise InvalidArgumentError(
                    f"Invalid reduction dimension ({value} for input with {rank} dimension(s)"
                )
            raise InvalidArgumentError(
                f"Invalid reduction dimension {value} for input with {rank} dimensions."
            )
        axis = value + rank if value < 0 else value
        if axis in axes:
            raise InvalidArgumentError(
                f"Invalid reduction arguments: Axes contains duplicate dimension: {axis}"
            )
        axes.append(axis)
    return tuple(axes)


def reduction_shape(
    input_shape: TensorShape, axis_shape: TensorShape, axis: _Any, keep_dims: bool
) -> TensorShape:
    """The output shape of a reduction of `input_shape` over `axis` (its value when known,
    else None), TF's ReductionShapeFn over partial shapes; raises InvalidArgumentError for an
    axis that cannot be valid."""
    axis_shape.with_rank_at_most(1)
    rank = input_shape.rank
    if axis is None or rank is None:
        if keep_dims and rank is not None:
            return TensorShape([None] * rank)
        return TensorShape(None)
    axes = reduction_axes(axis, rank)
    dims = input_shape.dims
    if keep_dims:
        return TensorShape([1 if i in axes else d for i, d in enumerate(dims)])
    return TensorShape([d for i, d in enumerate(dims) if i not in axes])


def _reduction_shape_fn(ctx: InferenceContext) -> TensorShape:
    input_shape, axis_shape = ctx.input_shapes
    return reduction_shape(input_shape, axis_shape, ctx.constant_value(1), ctx.attr("keep_dims"))


def _out_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


# -- the reductions, as data ---------------------------------------------------------------------

# reduce(ctx, x, axes, keep_dims, out_shape) -> a new array of out_shape and x's dtype.
_Reducer = Callable[[KernelContext, _Any, tuple, bool, tuple], _Any]


def _cast_into(ctx: KernelContext, value: _Any, shape: tuple, dtype: np.dtype) -> _Any:
    """`value` rounded into a new `ctx.empty` array of `dtype` (numpy scalars included)."""
    out = ctx.empty(shape, dtype)
    ctx.xp.copyto(out, value, casting="unsafe")
    return out


# On the host, the ufuncs' own reduce methods (C methods: no Python wrapper to pay); on a GPU,
# the cupy functions of the same meaning.
_HOST_REDUCE = {
    "sum": np.add.reduce, "prod": np.multiply.reduce, "max": np.maximum.reduce,
    "min": np.minimum.reduce, "all": np.logical_and.reduce, "any": np.logical_or.reduce,
}  # fmt: skip


def _reduce_into(
    ctx: KernelContext, how: str, x: _Any, axes: tuple, dtype: _Any, out: _Any, keep: bool
) -> _Any:
    """`how` ("sum", "max", ...) of x over `axes`, accumulated in `dtype`, written to `out` (a
    new array: None makes one) and returned."""
    if ctx.xp is np:
        return _HOST_REDUCE[how](x, axes, dtype, out, keep)
    fn = getattr(ctx.xp, how)
    if how in ("sum", "prod"):
        return fn(x, axis=axes, dtype=dtype, out=out, keepdims=keep)
    return fn(x, axis=axes, out=out, keepdims=keep)


def _quiet(reduce: _Reducer) -> _Reducer:
    """`reduce` without numpy's floating-point warnings for float16 and bfloat16, whose sums
    and products overflow to inf routinely (TF computes silently). The other types skip the
    errstate (1-2 us a call, a few percent of a 1e6-element sum): integers never warn, and
    numpy warns for float32/64 and complex only when finite values overflow to inf (the result
    is TF's all the same)."""

    def quietly(ctx: KernelContext, x: _Any, axes: tuple, keep: bool, shape: tuple) -> _Any:
        if x.dtype != _F16 and x.dtype.name != "bfloat16":
            return reduce(ctx, x, axes, keep, shape)
        with np.errstate(all="ignore"):
            return reduce(ctx, x, axes, keep, shape)

    quietly.__name__ = reduce.__name__
    return quietly


def _accumulated(how: str) -> _Reducer:
    """Sum or Prod ("sum", "prod"): in x's dtype, but bfloat16 in float32 (as TF; numpy would
    in bfloat16)."""

    def reduce(ctx: KernelContext, x: _Any, axes: tuple, keep: bool, shape: tuple) -> _Any:
        if x.dtype.name == "bfloat16":
            total = _reduce_into(ctx, how, x, axes, np.float32, None, keep)
            return _cast_into(ctx, total, shape, x.dtype)
        return _reduce_into(ctx, how, x, axes, x.dtype, ctx.empty(shape, x.dtype), keep)

    reduce.__name__ = f"_{how}"  # the kernel names (`__sum_kernel`) stay those of the defs
    return reduce


_sum = _accumulated("sum")
_prod = _accumulated("prod")


# Integer Mean sums in this type (TF's CASTING_SPECIALIZATION for MeanReducer).
_MEAN_ACCUMULATOR = {
    np.dtype(t): np.dtype(w)
    for t, w in [
        (np.int8, np.int64), (np.int16, np.int64), (np.int32, np.int64), (np.int64, np.int64),
        (np.uint8, np.uint64), (np.uint16, np.uint64), (np.uint32, np.uint64),
        (np.uint64, np.uint64),
    ]
}  # fmt: skip


def _mean(ctx: KernelContext, x: _Any, axes: tuple, keep: bool, shape: tuple) -> _Any:
    xp = ctx.xp
    dtype = x.dtype
    count = math.prod([x.shape[a] for a in axes])
    if count == 0 or math.prod(shape) == 0:
        # TF fills an output over an empty input with MeanReducer's identity.
        out = ctx.empty(shape, dtype)
        out.fill(np.nan if dtype.kind == "f" or dtype.name == "bfloat16" else 0)
        return out
    wide = _MEAN_ACCUMULATOR.get(dtype)
    if wide is not None:
        total = _reduce_into(ctx, "sum", x, axes, wide, None, keep)
        n = wide.type(count)
        if wide.kind == "i":
            # C division truncates towards zero; numpy's floors. s - fmod(s, n) is a multiple
            # of n between 0 and s, so the floor division of it is exact (and cannot overflow).
            total = total - xp.fmod(total, n)
        return _cast_into(ctx, xp.floor_divide(total, n), shape, dtype)
    if dtype.name == "bfloat16":
        total = _reduce_into(ctx, "sum", x, axes, np.float32, None, keep)
        return _cast_into(ctx, total / np.float32(count), shape, dtype)
    out = _reduce_into(ctx, "sum", x, axes, dtype, ctx.empty(shape, dtype), keep)
    if dtype.kind == "c":
        # TF divides each component by the count; numpy's complex division by a real does not
        # (its last bits differ): divide the components, seen as a real array.
        parts = out.reshape(-1).view(np.float32 if dtype.itemsize == 8 else np.float64)
        xp.true_divide(parts, parts.dtype.type(count), out=parts)
        return out
    # A float16 count over 65504 is inf (the mean is then 0), as in TF.
    return xp.true_divide(out, dtype.type(count), out=out)


def _finfo(dtype: np.dtype) -> _Any:
    if dtype.name == "bfloat16":
        import ml_dtypes  # noqa: PLC0415 - slow to import: loaded when bfloat16 is met

        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def _lowest(dtype: np.dtype) -> _Any:
    """Max's identity: -inf for floats, the minimum for integers (0 unsigned), False."""
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return False if dtype.kind == "b" else -np.inf


def _highest(dtype: np.dtype) -> _Any:
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return True if dtype.kind == "b" else np.inf


def _extreme(how: str, identity: Callable[[np.dtype], _Any]) -> _Reducer:
    def reduce(ctx: KernelContext, x: _Any, axes: tuple, keep: bool, shape: tuple) -> _Any:
        out = ctx.empty(shape, x.dtype)
        if x.size == 0:  # numpy and cupy refuse empty max/min reductions; TF fills identities
            out.fill(identity(x.dtype))
            return out
        return _reduce_into(ctx, how, x, axes, None, out, keep)

    reduce.__name__ = how
    return reduce


def _logical(how: str) -> _Reducer:
    def reduce(ctx: KernelContext, x: _Any, axes: tuple, keep: bool, shape: tuple) -> _Any:
        return _reduce_into(ctx, how, x, axes, None, ctx.empty(shape, x.dtype), keep)

    reduce.__name__ = how
    return reduce


# name: (allowed T, or None for a bool input, reduce, doc)
_REDUCTIONS: dict[str, tuple[list[str] | None, _Reducer, str]] = {
    "Sum": (_SUM_TYPES, _quiet(_sum), "The sum of elements across the dims `reduction_indices`."),
    "Mean": (
        _SUM_TYPES,
        _quiet(_mean),
        "The mean of elements across the dims `reduction_indices`.",
    ),
    "Prod": (
        _SUM_TYPES,
        _quiet(_prod),
        "The product of elements across the dims `reduction_indices`.",
    ),
    "Max": (_MINMAX_TYPES, _extreme("max", _lowest), "The maximum across the dims (NaN wins)."),
    "Min": (_MINMAX_TYPES, _extreme("min", _highest), "The minimum across the dims (NaN wins)."),
    "All": (None, _logical("all"), "The logical and of elements across the dims."),
    "Any": (None, _logical("any"), "The logical or of elements across the dims."),
}


def _reduction_op_def(name: str, types: list[str] | None, doc: str) -> OpDef:
    attrs = ["keep_dims: bool = false"]
    if types is not None:
        attrs.append("T: {" + ", ".join(types) + "}")
    attrs.append("Tidx: {int32, int64} = int32")
    element = "bool" if types is None else "T"
    return OpDef(
        name,
        inputs=[f"input: {element}", "reduction_indices: Tidx"],
        outputs=[f"output: {element}"],
        attrs=attrs,
        shape_fn=_reduction_shape_fn,
        doc=doc
        + """

`reduction_indices` (the builders also take it as `axis`): a scalar or vector of dims, negative
counting from the end, each at most once; empty reduces nothing. keep_dims keeps reduced dims
as 1. The axis lives in host memory on every device.""",
    )


def _reduction_kernel(reduce: _Reducer) -> Callable[..., _Any]:
    def kernel(ctx: KernelContext, input: _Any, reduction_indices: _Any, *, keep_dims: bool, **_):  # noqa: A002
        try:
            axes = reduction_axes(reduction_indices, input.ndim, at_run_time=True)
        except InvalidArgumentError as e:
            raise ctx.invalid_argument(e.message) from None
        return reduce(ctx, input, axes, keep_dims, _out_shape(input.shape, axes, keep_dims))

    kernel.__name__ = kernel.__qualname__ = f"_{reduce.__name__}_kernel"
    return kernel


def _reduction_specializer(reduce: _Reducer) -> Callable[[KernelSpec], _Any]:
    """A constant axis over an input of known rank: checked and converted once per plan."""

    def specialize(spec: KernelSpec) -> _Any:
        axis, rank = spec.constants[1], spec.input_shapes[0].rank
        if axis is None or rank is None:
            return None
        if not isinstance(axis, np.ndarray):  # host memory: always numpy
            return None
        try:
            axes = reduction_axes(axis, rank)
        except InvalidArgumentError:
            return None  # the kernel raises it, with its own message
        ctx, keep, general = spec.ctx, spec.attrs["keep_dims"], spec.general
        static = spec.input_shapes[0]
        if static.is_fully_defined():
            shape = tuple(static.dims)
            out_shape = _out_shape(shape, axes, keep)

            def reduce_over_constant_shape(x: _Any, axis_value: _Any) -> _Any:
                if x.shape != shape:  # the graph's shapes hold; this guards the promise
                    return general(x, axis_value)
                return reduce(ctx, x, axes, keep, out_shape)

            return reduce_over_constant_shape

        def reduce_over_constant_axes(x: _Any, axis_value: _Any) -> _Any:
            if x.ndim != rank:
                return general(x, axis_value)
            return reduce(ctx, x, axes, keep, _out_shape(x.shape, axes, keep))

        return reduce_over_constant_axes

    return specialize


# -- ArgMax, ArgMin ------------------------------------------------------------------------------


def _arg_op_def(name: str, tidx: list[str], output_types: list[str]) -> OpDef:
    which = "largest" if name == "ArgMax" else "smallest"
    return OpDef(
        name,
        inputs=["input: T", "dimension: Tidx"],
        outputs=["output: output_type"],
        attrs=[
            "T: {" + ", ".join(_ARG_TYPES) + "}",
            "Tidx: {" + ", ".join(tidx) + "} = int32",
            "output_type: {" + ", ".join(output_types) + "} = int64",
        ],
        shape_fn=_arg_shape,
        doc=f"""The index of the {which} value along dim `dimension` (the first on ties; NaN never
wins).

`dimension` (the builder also takes it as `axis`) is a scalar, negative counting from the end;
the reduced dim must not be empty. It lives in host memory on every device.""",
    )


def _arg_dimension(dim: int, rank: int, shape: _Any) -> int:
    """The non-negative dim `dim` names, with TF's kernel messages when it cannot be used."""
    if not -rank <= dim < rank:
        raise InvalidArgumentError(
            f"Expected dimension in the range [{-rank}, {rank}), but got {dim}"
        )
    axis = dim + rank if dim < 0 else dim
    if shape[axis] == 0:
        raise InvalidArgumentError(f"Reduction axis {dim} is empty in shape {_shape_text(shape)}")
    return axis


def _arg_shape(ctx: InferenceContext) -> TensorShape:
    """TF's ArgOpShape, which also refuses here what its kernel always refuses (a scalar, a
    constant dimension out of range or naming a dim known to be 0)."""
    input_shape, dim_shape = ctx.input_shapes
    dim_shape.with_rank(0)
    rank = input_shape.rank
    if rank is None:
        return TensorShape(None)
    value = ctx.constant_value(1)
    if value is None:
        if rank == 0:
            raise InvalidArgumentError(
                "Expected dimension in the range [0, 0): the input is a scalar"
            )
        return TensorShape([None] * (rank - 1))
    dim = int(value)
    if not -rank <= dim < rank:
        raise InvalidArgumentError(
            f"Dimension ({dim}) must be in the range [{-rank}, {rank}), where {rank} is the "
            "number of dimensions in the input."
        )
    axis = _arg_dimension(dim, rank, input_shape.dims)
    return TensorShape([d for i, d in enumerate(input_shape.dims) if i != axis])


# (dtype, "min" or "max") -> the dtype's lowest or highest finite value, as a scalar of it.
_ARG_BOUNDS: dict[tuple[np.dtype, str], _Any] = {}


def _picked(xp: _Any, x: _Any, index: _Any, axis: int) -> _Any:
    """x's values at `index` along `axis`, flat (take_along_axis; on the host, for a C-contiguous
    array, one `take` at the flat positions, twice as fast as fancy indexing)."""
    if x.ndim == 1:
        return x[index]
    if x.size == 0:
        return x.reshape(-1)
    if xp is not np or not x.flags.c_contiguous:
        return xp.take_along_axis(x, xp.expand_dims(index, axis), axis)
    n, inner = x.shape[axis], math.prod(x.shape[axis + 1 :])
    if inner == 1:
        offsets = np.arange(0, x.size, n)
    else:
        outer = np.arange(0, x.size, n * inner).reshape(-1, 1)
        offsets = (outer + np.arange(inner)).reshape(-1)
    return x.reshape(-1).take(index.reshape(-1) * inner + offsets)


def _arg_kernel(find: str, clamp: str, bound: str) -> Callable[..., _Any]:
    """ArgMax (find="argmax", clamp="fmax", bound="min") or ArgMin ("argmin", "fmin", "max")."""
    is_max = find == "argmax"

    def kernel(ctx: KernelContext, input: _Any, dimension: _Any, *, output_type: _Any, **_):  # noqa: A002
        if dimension.ndim != 0:
            shape = _shape_text(dimension.shape)
            raise ctx.invalid_argument(
                f"dim must be a scalar, but received tensor of shape: {shape}"
            )
        try:
            axis = _arg_dimension(int(dimension), input.ndim, input.shape)
        except InvalidArgumentError as e:
            raise ctx.invalid_argument(e.message) from None
        index = getattr(input, find)(axis)
        dtype = input.dtype
        if dtype.kind == "f" or dtype.name == "bfloat16":
            # numpy picks the first NaN; TF's reducer never takes one, nor a value equal to its
            # initial one (index 0, the lowest finite value for ArgMax). Only if one of numpy's
            # picks is not beyond that bound is the search redone, over the values clamped to
            # it (fmax/fmin also turn NaN into the bound).
            limit = _ARG_BOUNDS.get((dtype, bound))
            if limit is None:
                limit = _ARG_BOUNDS[dtype, bound] = dtype.type(getattr(_finfo(dtype), bound))
            picked = _picked(ctx.xp, input, index, axis)
            beyond = picked > limit if is_max else picked < limit
            if not bool(beyond.all()):
                index = getattr(getattr(ctx.xp, clamp)(input, limit), find)(axis)
        out_dtype = output_type.np_dtype
        if index.dtype == out_dtype and index.ndim:
            return index  # argmax's own new array (never a view of the input)
        return _cast_into(ctx, index, input.shape[:axis] + input.shape[axis + 1 :], out_dtype)

    kernel.__name__ = kernel.__qualname__ = f"_{find}_kernel"
    return kernel


# -- builders ------------------------------------------------------------------------------------


class _AxisBuilder(OpBuilder):
    """A builder whose axis input (TF's OpDef name `reduction_indices` or `dimension`) may also
    be given as `axis=`, the name TF's C++ wrappers use."""

    _axis_input = "reduction_indices"

    def __init__(self, scope: _Any, *args: _Any, **kwargs: _Any):
        if "axis" in kwargs:
            name = self._axis_input
            if name in kwargs or len(args) > 1:
                raise InvalidArgumentError(
                    f"{self.op_def.name}: the axis given twice (as 'axis' and as "
                    f"{'positional input 1' if len(args) > 1 else repr(name)})"
                )
            kwargs[name] = kwargs.pop("axis")
        if len(args) > 1 and _empty_literal(args[1]):
            args = (args[0], _empty_axis(kwargs), *args[2:])
        elif _empty_literal(kwargs.get(self._axis_input)):
            kwargs[self._axis_input] = _empty_axis(kwargs)
        super().__init__(scope, *args, **kwargs)


def _empty_literal(value: _Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 0


def _empty_axis(attrs: dict[str, _Any]) -> np.ndarray:
    """An empty axis literal (`[]`: reduce nothing) as an int32 vector, or of the Tidx given:
    TF converts a literal input preferring its type attr's default (numpy's [] is float)."""
    tidx = attrs.get("Tidx", "int32")
    try:
        return np.zeros(0, as_dtype(tidx).np_dtype)
    except (InvalidArgumentError, TypeError):
        return np.zeros(0, np.int32)  # the node refuses the bad Tidx itself


def _builder(op_def: OpDef, axis_input: str) -> type[OpBuilder]:
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter(p, positional) for p in ("scope", "input", "axis")]
    for attr in op_def.attrs:
        if attr.name not in op_def.inferred_attrs:
            params.append(inspect.Parameter(attr.name, keyword, default=attr.default))
    cls = type(
        op_def.name,
        (_AxisBuilder,),
        {
            "_axis_input": axis_input,
            "__doc__": f"{op_def.signature()}\n\n{op_def.doc.strip()}",
            "__module__": __name__,
        },
    )
    cls.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return register_op(op_def, builder=cls)


# -- Cumsum, Cumprod (scans) ---------------------------------------------------------------------
# Prod's gradient is TF's, built from two exclusive Cumprods (the product of the other elements,
# without dividing: zeros are exact); Cumsum serves Cumprod's own gradient.

_SCAN_TYPES = _SUM_TYPES  # TF's OpDef lists the same types in the same order


def _scan_op_def(name: str, doc: str) -> OpDef:
    return OpDef(
        name,
        inputs=["x: T", "axis: Tidx"],
        outputs=["out: T"],
        attrs=[
            "exclusive: bool = false",
            "reverse: bool = false",
            "T: {" + ", ".join(_SCAN_TYPES) + "}",
            "Tidx: {int32, int64} = int32",
        ],
        shape_fn=_scan_shape,
        doc=doc
        + """

Along dim `axis` (a scalar, negative counting from the end, in host memory). `exclusive` leaves
the current element out (the first result is the identity); `reverse` scans from the end.
Integers wrap around; every type accumulates in itself, one element after the other.""",
    )


def _scan_shape(ctx: InferenceContext) -> TensorShape:
    """TF's UnchangedShape; a constant axis that TF's kernel always refuses (not a scalar, out
    of range for a known rank) fails here already."""
    x, axis_shape = ctx.input_shapes
    value = ctx.constant_value(1)
    if value is not None:
        if np.ndim(value) != 0:
            raise InvalidArgumentError(
                f"ScanOp: axis must be a scalar, not {_shape_text(np.shape(value))}"
            )
        _scan_axis(int(value), x.rank)
    elif axis_shape.rank is not None and axis_shape.rank != 0:
        raise InvalidArgumentError(f"ScanOp: axis must be a scalar, not {_shape_text(axis_shape)}")
    return x


def _scan_axis(value: int, rank: int | None) -> int:
    """The non-negative axis `value` names (TF's message shows a negative one plus the rank)."""
    axis = value + rank if value < 0 and rank is not None else value
    if rank is not None and not 0 <= axis < rank:
        raise InvalidArgumentError(
            f"ScanOp: Expected scan axis in the range [{-rank}, {rank}), but got {axis}"
        )
    return axis


def _scan_kernel(how: str, identity: int) -> Callable[..., _Any]:
    def kernel(ctx: KernelContext, x: _Any, axis: _Any, *, exclusive: bool, reverse: bool, **_):
        if axis.ndim != 0:
            raise ctx.invalid_argument(
                f"ScanOp: axis must be a scalar, not {_shape_text(axis.shape)}"
            )
        try:
            a = _scan_axis(int(axis), x.ndim)
        except InvalidArgumentError as e:
            raise ctx.invalid_argument(e.message) from None
        out = ctx.empty(x.shape, x.dtype)
        if x.size == 0:
            return out
        scan = getattr(ctx.xp, how)
        lead = (slice(None),) * a
        if reverse:  # scan the reversed views: the result lands in `out` reversed back
            x = x[lead + (slice(None, None, -1),)]
            target = out[lead + (slice(None, None, -1),)]
        else:
            target = out
        with np.errstate(all="ignore"):  # overflow to inf, silently, as TF
            if exclusive:
                target[lead + (slice(0, 1),)] = identity
                if x.shape[a] > 1:
                    scan(x[lead + (slice(0, -1),)], axis=a, dtype=x.dtype,
                         out=target[lead + (slice(1, None),)])  # fmt: skip
            else:
                scan(x, axis=a, dtype=x.dtype, out=target)
        return out

    kernel.__name__ = kernel.__qualname__ = f"_{how}_kernel"
    return kernel


# -- gradient rules ------------------------------------------------------------------------------
# TF's rules (tensorflow/python/ops/math_grad.py): Sum's gradient is the output's broadcast back
# over the reduced dims, Mean's that divided by the count, Max's and Min's it split evenly among
# the elements equal to the result, Prod's it times the product of the other elements (two
# exclusive Cumprods: no division, so zeros are exact). Each builds from static shapes and axes
# where they are known (Consts, no Shape nodes) and otherwise from TF's run-time machinery
# (`reduced_shape`: Shape, DynamicStitch, ...), so fed axes and unknown dims work. The ops the
# rules build come from ops.array, ops.math and ops.partition, imported where used: those
# modules import this one.


def _constant(t: _Any) -> _Any:
    """t's value when it is a Const, else None."""
    op = t.op
    return op.get_attr("value") if op.type == "Const" else None


def _static_axes(op: _Any) -> tuple[int, ...] | None:
    """The dims reduction `op` reduces (non-negative, in the order given), when its axis is a
    constant and its input's rank known (the shape function has checked them); else None."""
    rank = op.inputs[0].shape.rank
    value = _constant(op.inputs[1])
    if value is None or rank is None:
        return None
    return reduction_axes(value, rank)


def _leading(axes: tuple[int, ...] | None) -> bool:
    """Whether `axes` are the first dims (in any order): the output then broadcasts against
    the input as it is, numpy aligning the dims that were kept."""
    return axes is not None and sorted(axes) == list(range(len(axes)))


def _kept_shape(scope: _Any, op: _Any, axes: tuple[int, ...] | None) -> _Any:
    """The shape of reduction `op`'s output with the reduced dims kept as 1: a list when it is
    static, else an int32 tensor (TF's math_ops.reduced_shape)."""
    from ops.array import Fill, Shape, Size
    from ops.math import Range
    from ops.partition import DynamicStitch

    x = op.inputs[0]
    if axes is not None:
        dims = x.shape.dims
        kept = [1 if i in axes else d for i, d in enumerate(dims)]
        if None not in kept:
            return kept
        shape = Shape(scope, x).output
        if not axes:
            return shape
        ones = np.ones(len(axes), np.int32)
        every = np.arange(len(dims), dtype=np.int32)
        return DynamicStitch(scope, [every, np.array(axes, np.int32)], [shape, ones]).output
    shape = Shape(scope, x).output
    rank = Size(scope, shape).output
    axis = _nonnegative_axes(scope, op.inputs[1], rank)
    ones = Fill(scope, Shape(scope, axis), np.int32(1)).output
    every = Range(scope, np.int32(0), rank, np.int32(1)).output
    return DynamicStitch(scope, [every, axis], [shape, ones]).output


def _nonnegative_axes(scope: _Any, axis: _Any, rank: _Any) -> _Any:
    """A run-time axis as int32 dims in [0, rank): TF's (axis + rank) % rank, by max(rank, 1)
    (a scalar's only axes are empty, and 0 would be an integer division by zero)."""
    from ops.math import AddV2, Cast, FloorMod, Maximum

    if axis.dtype.name != "int32":
        axis = Cast(scope, axis, "int32").output
    divisor = Maximum(scope, rank, np.int32(1)).output
    return FloorMod(scope, AddV2(scope, axis, rank), divisor).output


def _input_shape(scope: _Any, x: _Any) -> _Any:
    """x's shape: a list when static, else Shape(x)."""
    from ops.array import Shape

    if x.shape.is_fully_defined():
        return list(x.shape.dims)
    return Shape(scope, x).output


def _broadcast_back(op: _Any, grad: _Any) -> _Any:
    """The gradient of reduction `op`'s output spread back over its input's shape (Sum's
    gradient): `grad` reshaped to the kept shape (unless the reduced dims lead), broadcast."""
    from ops.array import BroadcastTo, Reshape

    scope = current_scope(op.graph)
    x = op.inputs[0]
    axes = _static_axes(op)
    if axes == ():
        return grad  # nothing reduced: the output is the input
    if x.shape.is_fully_defined() and grad.shape == x.shape:
        return grad  # every reduced dim is 1 (kept): the same elements
    if not op.get_attr("keep_dims") and not _leading(axes):
        grad = Reshape(scope, grad, _kept_shape(scope, op, axes)).output
    return BroadcastTo(scope, grad, _input_shape(scope, x)).output


def _sum_grad(op: _Any, grad: _Any) -> list[_Any]:
    return [_broadcast_back(op, grad), None]


def _mean_grad(op: _Any, grad: _Any) -> list[_Any]:
    from ops.array import Size
    from ops.math import Cast, FloorDiv, Maximum, RealDiv

    scope = current_scope(op.graph)
    x, y = op.inputs[0], op.outputs[0]
    spread = _broadcast_back(op, grad)
    axes = _static_axes(op)
    reduced = None if axes is None else [x.shape.dims[a] for a in axes]
    if reduced is not None and None not in reduced:
        count: _Any = np.array(math.prod(reduced), dtype=grad.dtype.np_dtype)
    else:
        # Known only at run time: size(x) / size(y) (0 where x is empty, as TF's count).
        total = Size(scope, x, out_type="int64").output
        kept = Maximum(scope, Size(scope, y, out_type="int64"), np.int64(1)).output
        count = Cast(scope, FloorDiv(scope, total, kept), grad.dtype).output
    return [RealDiv(scope, spread, count).output, None]


def _min_or_max_grad(op: _Any, grad: _Any) -> list[_Any]:
    """TF's _MinOrMaxGrad: the gradient split evenly among the elements equal to the result
    (a NaN result matches nothing: NaN gradients, as in TF)."""
    from ops.array import Reshape
    from ops.math import Cast, Equal, Mul, RealDiv

    scope = current_scope(op.graph)
    x, y = op.inputs[0], op.outputs[0]
    axes = _static_axes(op)
    keep = op.get_attr("keep_dims")
    if not keep and not _leading(axes):
        kept = _kept_shape(scope, op, axes)
        y = Reshape(scope, y, kept).output
        grad = Reshape(scope, grad, kept).output
        keep = True
    indicators = Cast(scope, Equal(scope, y, x), grad.dtype).output
    selected = Sum(scope, indicators, op.inputs[1], keep_dims=keep).output
    return [Mul(scope, RealDiv(scope, indicators, selected), grad).output, None]


def _prod_grad(op: _Any, grad: _Any) -> list[_Any]:
    """TF's _ProdGrad: the reduced dims moved to the front and flattened into one, each
    element's gradient the product of the elements before and after it there (exclusive
    Cumprods forwards and backwards: no division, so zeros are exact), moved back; conjugated
    for complex inputs."""
    from ops.array import Reshape, Transpose
    from ops.math import Conj, Mul

    scope = current_scope(op.graph)
    x = op.inputs[0]
    spread = _broadcast_back(op, grad)
    perm, inverse, flat = _prod_layout(scope, op)
    permuted = x if perm is None else Transpose(scope, x, perm).output
    matrix = Reshape(scope, permuted, flat).output
    left = Cumprod(scope, matrix, np.int32(0), exclusive=True).output
    right = Cumprod(scope, matrix, np.int32(0), exclusive=True, reverse=True).output
    if x.dtype.is_complex:
        left, right = Conj(scope, left).output, Conj(scope, right).output
    others = Reshape(scope, Mul(scope, left, right), _input_shape(scope, permuted)).output
    if perm is not None:
        others = Transpose(scope, others, inverse).output
    return [Mul(scope, spread, others).output, None]


def _prod_layout(scope: _Any, op: _Any) -> tuple[_Any, _Any, _Any]:
    """For Prod's gradient: (perm, its inverse, [reduced size, other size]): the permutation
    moving the reduced dims first (None when it is the identity), and the shape of the
    [reduced, kept] matrix; lists where static, else tensors."""
    from ops.array import ConcatV2, OnesLike, Pack, Reshape, Shape, Size, ZerosLike
    from ops.gather_ops import GatherV2
    from ops.math import Range
    from ops.partition import DynamicPartition, DynamicStitch

    x = op.inputs[0]
    axes = _static_axes(op)
    if axes is not None:
        rank = x.shape.rank
        reduced = list(axes)
        other = [i for i in range(rank) if i not in axes]
        perm = reduced + other
        inverse = np.argsort(perm).astype(np.int32).tolist()
        dims = x.shape.dims
        sizes = [None if None in (d := [dims[i] for i in part]) else math.prod(d)
                 for part in (reduced, other)]  # fmt: skip
        if perm == list(range(rank)):
            perm = inverse = None
        if None not in sizes:
            return perm, inverse, sizes
        if sizes.count(None) == 1 and sizes[0] != 0 and sizes[1] != 0:
            return perm, inverse, [-1 if s is None else s for s in sizes]  # Reshape infers it
        shape = Shape(scope, x).output
        parts: list[_Any] = [np.array(reduced, np.int32), np.array(other, np.int32)]
    else:
        # TF's layout at run time (its ListDiff, which minigraph lacks, is a DynamicPartition
        # by a mask, and InvertPermutation a DynamicStitch).
        shape = Shape(scope, x).output
        rank = Size(scope, shape).output
        axis = Reshape(scope, op.inputs[1], [-1]).output
        reduced_t = _nonnegative_axes(scope, axis, rank)
        every = Range(scope, np.int32(0), rank, np.int32(1)).output
        mask = DynamicStitch(scope, [every, reduced_t], [ZerosLike(scope, every),
                                                         OnesLike(scope, reduced_t)])  # fmt: skip
        other_t = DynamicPartition(scope, every, mask, num_partitions=2).outputs[0]
        perm = ConcatV2(scope, [reduced_t, other_t], np.int32(0)).output
        inverse = DynamicStitch(scope, [perm], [every]).output
        parts = [reduced_t, other_t]
        sizes = [None, None]
    flat = [
        s if s is not None else Prod(scope, GatherV2(scope, shape, part, np.int32(0)), 0).output
        for s, part in zip(sizes, parts)
    ]
    return perm, inverse, Pack(scope, flat).output


def _cumsum_grad(op: _Any, grad: _Any) -> list[_Any]:
    """TF's _CumsumGrad: the gradient scanned the other way."""
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    scope = current_scope(op.graph)
    return [Cumsum(scope, grad, op.inputs[1], exclusive=exclusive, reverse=not reverse).output,
            None]  # fmt: skip


def _cumprod_grad(op: _Any, grad: _Any) -> list[_Any]:
    """TF's _CumprodGrad: cumsum(cumprod(x) * grad) scanned the other way, divided by x, 0
    where x is 0 (TF's div_no_nan; that is not the derivative there, as in TF)."""
    from ops.array import SelectV2, ZerosLike
    from ops.math import Conj, Equal, Mul, RealDiv

    x, axis = op.inputs
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    scope = current_scope(op.graph)
    prod = Cumprod(scope, x, axis, exclusive=exclusive, reverse=reverse).output
    if x.dtype.is_complex:
        prod = Conj(scope, prod).output
    out = Cumsum(scope, Mul(scope, prod, grad), axis, exclusive=exclusive,
                 reverse=not reverse).output  # fmt: skip
    divisor = Conj(scope, x).output if x.dtype.is_complex else x
    zero = Equal(scope, divisor, np.zeros((), x.dtype.np_dtype)).output
    quotient = RealDiv(scope, out, divisor).output
    return [SelectV2(scope, zero, ZerosLike(scope, quotient), quotient).output, None]


# -- registration --------------------------------------------------------------------------------


def _reduction(name: str) -> type[OpBuilder]:
    types, _, doc = _REDUCTIONS[name]
    return _builder(_reduction_op_def(name, types, doc), "reduction_indices")


# Each op, then its gradient rule (TF's; All, Any, ArgMax and ArgMin have none, as in TF).
Sum = _reduction("Sum")
register_gradient("Sum")(_sum_grad)
Mean = _reduction("Mean")
register_gradient("Mean")(_mean_grad)
Max = _reduction("Max")
register_gradient("Max")(_min_or_max_grad)
Min = _reduction("Min")
register_gradient("Min")(_min_or_max_grad)
Prod = _reduction("Prod")
register_gradient("Prod")(_prod_grad)
All = _reduction("All")
no_gradient("All")
Any = _reduction("Any")
no_gradient("Any")
ArgMax = _builder(
    _arg_op_def("ArgMax", ["int16", "int32", "int64"], ["int16", "uint16", "int32", "int64"]),
    "dimension",
)
no_gradient("ArgMax")
ArgMin = _builder(_arg_op_def("ArgMin", ["int32", "int64"], ["int32", "int64"]), "dimension")
no_gradient("ArgMin")

# Trusted (no per-run output checks, fed arrays passed as they are): every kernel returns a new
# array of the inferred dtype and shape (an `out=` array from ctx.empty, 0-d included), never
# a view of its input (tests/test_reduction_nn_trust.py checks every dtype on both devices).
for _name, (_types, _reduce, _doc) in _REDUCTIONS.items():
    _kernel = _reduction_kernel(_reduce)
    _special = _reduction_specializer(_reduce)
    _host = ["reduction_indices"]
    register_kernel(_name, "CPU", _kernel, host_memory=_host, trusted=True, specialize=_special)
    _gpu_types = {} if _types is None else {"T": _gpu(_types)}
    register_kernel(
        _name, "GPU", _kernel,
        type_constraints=_gpu_types, host_memory=_host, trusted=True, specialize=_special,
    )  # fmt: skip

_ARGMAX = _arg_kernel("argmax", "fmax", "min")
_ARGMIN = _arg_kernel("argmin", "fmin", "max")
for _name, _kernel in (("ArgMax", _ARGMAX), ("ArgMin", _ARGMIN)):
    register_kernel(_name, "CPU", _kernel, host_memory=["dimension"], trusted=True)
    register_kernel(
        _name, "GPU", _kernel,
        type_constraints={"T": _gpu(_ARG_TYPES)}, host_memory=["dimension"], trusted=True,
    )  # fmt: skip
del _name, _types, _reduce, _doc, _kernel, _special, _host, _gpu_types


# Integer reductions of values known at construction (minigraph.shape_inference's
# constant_value), as TF's shape refiner evaluates them: Prod(Shape(x)[1:]) as a Reshape's dim.
_EVALUATED = {"Sum": np.sum, "Prod": np.prod, "Max": np.max, "Min": np.min}


def _reduction_value(t: _Any, value_of: _Any) -> _Any:
    x, axis = (value_of(i) for i in t.op.inputs)
    if x is None or axis is None or x.dtype.kind not in "iu":
        return None
    axes = [int(a) for a in axis.reshape(-1).tolist()]
    if any(not -x.ndim <= a < x.ndim for a in axes):
        return None  # the shape function has said why
    if x.size == 0 and t.op.type in ("Max", "Min"):
        return None
    reduce = _EVALUATED[t.op.type]
    axes = tuple({a % x.ndim for a in axes})
    keep = t.op.get_attr("keep_dims")
    with np.errstate(over="ignore"):  # in x's dtype (numpy's sum would widen), wrapping around
        return np.asarray(reduce(x, axis=axes, keepdims=keep), dtype=x.dtype)


for _name in _EVALUATED:
    register_constant_evaluator(_name, _reduction_value)
del _name


# Cumsum and Cumprod, with their gradient rules.
Cumsum = register_op(
    _scan_op_def("Cumsum", "The cumulative sum along `axis`: [a, b, c] -> [a, a + b, a + b + c].")
)
register_gradient("Cumsum")(_cumsum_grad)
Cumprod = register_op(
    _scan_op_def("Cumprod", "The cumulative product along `axis`: [a, b, c] -> [a, ab, abc].")
)
register_gradient("Cumprod")(_cumprod_grad)
# Trusted: a new ctx.empty array of x's dtype and shape, never a view of x.
for _name, _how, _identity in (("Cumsum", "cumsum", 0), ("Cumprod", "cumprod", 1)):
    _kernel = _scan_kernel(_how, _identity)
    register_kernel(_name, "CPU", _kernel, host_memory=["axis"], trusted=True)
    register_kernel(
        _name, "GPU", _kernel,
        type_constraints={"T": _gpu(_SCAN_TYPES)}, host_memory=["axis"], trusted=True,
    )  # fmt: skip
del _name, _how, _identity, _kernel
