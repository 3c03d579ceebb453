"""The array ops: shapes (Shape, Size, Rank), reshaping (Reshape, ExpandDims, Squeeze,
Transpose), slicing (StridedSlice and the `x[...]` operator, Slice), joining and splitting
(ConcatV2, Pack, Unpack), filling (Fill, ZerosLike, OnesLike, Tile, BroadcastTo, OneHot),
selecting (SelectV2, and TF 1's Select, which TF's own graphs still contain) and
StopGradient; and two ops of their gradients, StridedSliceGrad and InvertPermutation. Op
definitions, shape functions, CPU and GPU kernels, gradient rules.

Semantics are TensorFlow 2.21's (tf.raw_ops.<Name>), run-time errors included, with TF's
messages. Shape functions use the values of constant inputs as TF's do (Reshape's `shape`,
Fill's `dims`, Slice's `begin`/`size`, Transpose's `perm`, Tile's `multiples`, ExpandDims'
`dim`, BroadcastTo's `shape`, OneHot's `depth`, StridedSlice's `begin`/`end`/`strides`), and
refuse at construction what TF's kernel would refuse at run time when the shapes and constant
values already show it (a duplicate in a constant perm, a Slice past the end, an out-of-range
OneHot axis, a constant Fill shape of more than 2**63 - 1 elements). With unknown shapes or
values, the same checks run in the kernels.

Small shape-like inputs (`shape`, `dims`, `perm`, `multiples`, `dim`, `axis`, `begin`, `end`,
`strides`, `size`, `depth`) live in host memory on every device, as TF's kernels declare them;
Shape, Size and Rank read only their input's shape and give a host-memory output.

Views: ExpandDims, Squeeze, Transpose, Slice, StridedSlice, Unpack and Reshape return views of
their input (kernels never write into their inputs, so sharing the buffer is safe; TF copies
where a view is not possible) and are registered untrusted: the session checks their outputs
and never hands a caller a view of a fed array. The kernels that build new arrays of the
inferred dtype and shape (Fill, ZerosLike, OnesLike, Tile, BroadcastTo, SelectV2, OneHot,
Pack, ConcatV2, Shape, Size, Rank, StridedSliceGrad, InvertPermutation), StopGradient (its
input itself) and Select (a new array, or with a scalar condition the chosen input itself, as
TF forwards it) are trusted.

TF quirks kept: negative `perm` entries count from the end; StridedSlice ignores `end` on a
shrunk axis and clamps out-of-range bounds of a range; OneHot gives `off_value` for indices
outside [0, depth); ZerosLike of strings gives empty strings; Squeeze without squeeze_dims of
a shape with an unknown dim has an unknown shape. Deliberate differences: Tile takes uint16
(TF's CPU kernel registers it and then refuses it at run time), StridedSlice takes any rank
(TF's kernel stops at 8 dims), Transpose's int64 perm entries are not truncated to 32 bits.

Gradient rules (issue 21) are TF's (array_grad.py, math_grad.py), each defined beside its op
and registered at the bottom; every one builds TF's ops only, so gradient graphs export to TF.
Static shapes and constant inputs give constant shapes, begins and sizes; unknown dims and
run-time perms, multiples, begins and axes are computed at run time (Shape, Range, Pack, ...).
Reshape, ExpandDims and Squeeze reshape the gradient back; Transpose transposes it by the
inverse permutation (InvertPermutation when the perm is known only at run time); StridedSlice's
gradient is StridedSliceGrad (zeros with the gradient written into the slice), whose own
gradient is a StridedSlice of its gradient (TF's _StridedSliceGradGrad), so second order works;
Slice's is a StridedSliceGrad too (TF's uses Pad, which minigraph does not have: the same
values); ConcatV2's slices the gradient at each input's offset (TF's Slice path; its run-time
offsets are accumulated Shapes under a one-hot mask, as TF's sparse path builds them, rather than
TF's ConcatOffset, which minigraph does not have); Pack and Unpack swap; Tile reshapes the
gradient to [m0, d0, m1, d1, ...] and sums the multiples' axes; BroadcastTo sums back to the
input's shape; SelectV2 and Select send the gradient to the chosen branch (zeros elsewhere),
reduced to each branch's shape; Fill's value gets the sum of the gradient. Shape, Size, Rank,
ZerosLike, OnesLike, OneHot, StopGradient and InvertPermutation are not differentiable.

`slice_helper(tensor, key)` is TF's `Tensor.__getitem__` (tensor_getitem_override's
`_slice_helper`): `x[1:, ::-1, None, ..., i]` builds a StridedSlice named `strided_slice`; this
module registers it as the `x[...]` operator of `Output` and single-output builders.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from minigraph import (
    InvalidArgumentError,
    KernelContext,
    OpDef,
    Output,
    TensorShape,
    current_scope,
    dtypes,
    no_gradient,
    register_gradient,
    register_kernel,
    register_op,
    registry,
)
from minigraph.builder import as_output
from minigraph.shape_inference import InferenceContext, register_constant_evaluator
from minigraph.tensor_shape import MAX_DIM, check_rank
from ops.math import (
    AddV2,
    Cast,
    FloorMod,
    Maximum,
    Mul,
    Range,
    broadcast_shape,
    merge_shapes,
    sum_to,
)
from ops.reduction import Sum

__all__ = [
    "Shape", "Size", "Rank", "Reshape", "ExpandDims", "Squeeze", "Transpose",
    "StridedSlice", "Slice", "ConcatV2", "Pack", "Unpack",
    "Fill", "ZerosLike", "OnesLike", "Tile", "BroadcastTo", "OneHot", "SelectV2", "Select",
    "StopGradient", "StridedSliceGrad", "InvertPermutation", "slice_helper",
]  # fmt: skip

_INT32_MIN = int(np.iinfo(np.int32).min)
_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MIN = int(np.iinfo(np.int64).min)
_INT64_MAX = int(np.iinfo(np.int64).max)
# cupy holds neither strings nor ml_dtypes' bfloat16: those nodes stay on the CPU.
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]


def _shape_text(dims: Any) -> str:
    """A shape as TF's messages write it: `[2,3]`."""
    return str(TensorShape(tuple(dims)))


def _host_ints(value: Any) -> list[int]:
    """The elements of a small host-memory integer array, as Python ints, in C order."""
    return [int(v) for v in value.reshape(-1).tolist()]


def _checked_output_dims(dims: list[int]) -> tuple[int, ...]:
    """`dims` (all >= 0) as an output shape: TF's message when they hold more than 2**63 - 1
    elements, ours when there are more than numpy's 64 dims."""
    if 0 not in dims and math.prod(dims) > MAX_DIM:
        raise InvalidArgumentError(
            f"Shape {_shape_text(dims)} would have more than 2**63 - 1 elements"
        )
    check_rank(len(dims), "the output")
    return tuple(dims)


def _shape_tensor_values(value: Any) -> list[int]:
    """The values of a constant shape-like input (Fill's dims, Tile's multiples, Slice's size,
    BroadcastTo's shape), as TF's MakeShapeFromShapeTensor reads them: -1 stands for an
    unknown dim there, anything below it is refused."""
    values = _host_ints(value)
    for v in values:
        if v < -1:
            raise InvalidArgumentError(f"Invalid value in tensor used for shape: {v}")
    return values


def _vector_length(shape: TensorShape) -> int | None:
    """The length of a 1-D shape-like input (checked to have rank 1), or None if unknown."""
    return shape.with_rank(1)[0]


# -- gradient helpers --------------------------------------------------------------------------


def _grad_scope(op: Any) -> Any:
    """The scope a gradient rule builds in (the machinery makes `gradients/<node>_grad`
    current)."""
    return current_scope(op.graph)


def _constant(t: Output) -> np.ndarray | None:
    """The value of `t` when it is a Const (what a rule can use while building), else None."""
    op = t.op
    return op.get_attr("value") if op.type == "Const" else None


def _index_vector(values: list[int], dtype: Any = None) -> np.ndarray:
    """Ints as a 1-D index vector of `dtype`, or int32 unless a value needs int64."""
    if dtype is None:
        fits = all(_INT32_MIN <= v <= _INT32_MAX for v in values)
        dtype = dtypes.int32 if fits else dtypes.int64
    return np.array(values, dtype=dtype.np_dtype).reshape(len(values))


def _shape_of(scope: Any, t: Output, dtype: Any = None) -> Any:
    """t's shape as a 1-D index vector (of `dtype`, default int32 unless a dim needs int64): a
    constant when static, else Shape(t)."""
    if t.shape.is_fully_defined():
        return _index_vector(list(t.shape.dims), dtype)
    return Shape(scope, t, out_type=dtype or dtypes.int32).output


def _reshaped_like(scope: Any, grad: Output, x: Output) -> Output:
    """`grad` reshaped to x's shape (TF's _ReshapeGrad and _ReshapeToInput): to a constant
    shape when x's is static, or when one dim is unknown (-1 stands for it; not with a dim of 0,
    where -1 cannot be inferred), else to Shape(x) at run time."""
    dims = x.shape.dims if x.shape.rank is not None else None
    if dims is not None and dims.count(None) == 1 and 0 not in dims:
        return Reshape(scope, grad, _index_vector([-1 if d is None else d for d in dims])).output
    return Reshape(scope, grad, _shape_of(scope, x)).output


# -- Shape, Size, Rank -------------------------------------------------------------------------

SHAPE = OpDef(
    "Shape",
    inputs=["input: T"],
    outputs=["output: out_type"],
    attrs=["T: type", "out_type: {int32, int64} = int32"],
    shape_fn=lambda ctx: TensorShape([ctx.input_shapes[0].rank]),
    doc="The shape of `input` as a 1-D tensor (host memory on every device).",
)

SIZE = OpDef(
    "Size",
    inputs=["input: T"],
    outputs=["output: out_type"],
    attrs=["T: type", "out_type: {int32, int64} = int32"],
    shape_fn=lambda ctx: TensorShape([]),
    doc="The number of elements of `input` as a scalar (host memory on every device).",
)

RANK = OpDef(
    "Rank",
    inputs=["input: T"],
    outputs=["output: int32"],
    attrs=["T: type"],
    shape_fn=lambda ctx: TensorShape([]),
    doc="The number of dimensions of `input` as an int32 scalar (host memory on every device).",
)


def _shape_kernel(ctx: KernelContext, input: Any, *, out_type: Any) -> np.ndarray:  # noqa: A002
    if out_type is dtypes.int32:
        for i, d in enumerate(input.shape):
            if d > _INT32_MAX:
                raise ctx.invalid_argument(f"Shape output type is 32-bit but dim {i} is {d}")
    return np.array(input.shape, dtype=out_type.np_dtype)


def _size_kernel(ctx: KernelContext, input: Any, *, out_type: Any) -> np.ndarray:  # noqa: A002
    size = math.prod(input.shape)
    if out_type is dtypes.int32 and size > _INT32_MAX:
        raise ctx.invalid_argument(
            "Number of elements was larger than representable by 32-bit output type"
        )
    return np.array(size, dtype=out_type.np_dtype)


def _rank_kernel(ctx: KernelContext, input: Any) -> np.ndarray:  # noqa: A002
    return np.array(input.ndim, dtype=np.int32)


# -- Reshape -----------------------------------------------------------------------------------

RESHAPE = OpDef(
    "Reshape",
    inputs=["tensor: T", "shape: Tshape"],
    outputs=["output: T"],
    attrs=["T: type", "Tshape: {int32, int64} = int32"],
    shape_fn=lambda ctx: _reshape_shape(ctx),
    doc="""`tensor` with the same elements in C order and shape `shape` (one dim may be -1:
it is inferred). `shape` lives in host memory on every device.""",
)


def reshaped(size: int | None, dims: list[int]) -> TensorShape:
    """The shape `dims` (at most one -1) gives a tensor of `size` elements (None: unknown),
    with TF's messages when it cannot hold them."""
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise InvalidArgumentError(
            f"Only one input size may be -1, not both {unknown[0]} and {unknown[1]}"
        )
    for i, d in enumerate(dims):
        if d < -1:
            raise InvalidArgumentError(f"Size {i} must be non-negative, not {d}")
    known = 1
    for d in dims:
        if d != -1:
            if known * d > MAX_DIM:  # TF's InferenceContext::Multiply refuses it the same way
                raise InvalidArgumentError(
                    f"Negative dimension size caused by overflow when multiplying {known} and "
                    f"{d}: the requested shape {dims} has more than 2**63 - 1 elements"
                )
            known *= d
    if not unknown:
        if size is not None and size != known:
            raise InvalidArgumentError(
                f"Input to reshape is a tensor with {size} values, but the requested shape "
                f"has {known}"
            )
        return TensorShape(dims)
    out: list[int | None] = list(dims)
    if size is None:
        out[unknown[0]] = None
        return TensorShape(out)
    if known == 0:
        if size != 0:
            raise InvalidArgumentError(
                f"Input to reshape is a tensor with {size} values, but the requested shape has 0"
            )
        raise InvalidArgumentError(
            "Reshape cannot infer the missing input size for an empty tensor unless all "
            "specified input sizes are non-zero"
        )
    if size % known:
        raise InvalidArgumentError(
            f"Input to reshape is a tensor with {size} values, but the requested shape "
            f"requires a multiple of {known}"
        )
    out[unknown[0]] = size // known
    return TensorShape(out)


def _reshape_shape(ctx: InferenceContext) -> TensorShape:
    tensor, shape = ctx.input_shapes
    shape.with_rank_at_most(1)
    value = ctx.constant_value(1)
    if value is None:
        if shape.rank == 0:
            return TensorShape([None])
        # What is known of the shape (Pack([batch, 3]), Shape(y)): TF's partial shape; with one
        # dim unknown, the input's size gives it.
        partial = ctx.partial_shape_value(1)
        if partial.rank is None or partial.dims.count(None) > 1:
            return partial
        return reshaped(tensor.num_elements(), [-1 if d is None else d for d in partial.dims])
    return reshaped(tensor.num_elements(), [int(d) for d in value.reshape(-1)])


def _reshape_kernel(ctx: KernelContext, tensor: Any, shape: Any) -> Any:
    if shape.ndim > 1:
        raise ctx.invalid_argument(f"sizes input must be 1-D, not {list(shape.shape)}")
    try:
        target = reshaped(tensor.size, [int(d) for d in shape.reshape(-1).tolist()])
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    return tensor.reshape(target.dims)


def _reshape_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _ReshapeGrad: the gradient reshaped back to the input's shape."""
    return [_reshaped_like(_grad_scope(op), grad, op.inputs[0]), None]


# -- ExpandDims --------------------------------------------------------------------------------

EXPAND_DIMS = OpDef(
    "ExpandDims",
    inputs=["input: T", "dim: Tdim"],
    outputs=["output: T"],
    attrs=["T: type", "Tdim: {int32, int64} = int32"],
    shape_fn=lambda ctx: _expand_dims_shape(ctx),
    doc="""`input` with a dimension of size 1 inserted at index `dim` (in [-rank - 1, rank];
negative counts from the end). `dim` holds one value (any shape) and lives in host memory.""",
)


def _expand_dims_shape(ctx: InferenceContext) -> TensorShape:
    x, dim_shape = ctx.input_shapes
    value = ctx.constant_value(1)
    count = value.size if value is not None else dim_shape.num_elements()
    if count is not None and count != 1:
        raise InvalidArgumentError("'dim' input must be a tensor with a single value")
    if x.rank is None:
        return TensorShape(None)
    check_rank(x.rank + 1, "the output")
    if value is None:
        return TensorShape([None] * (x.rank + 1))  # TF gives no rank; it is known
    dim = int(value.reshape(-1)[0])
    if not -x.rank - 1 <= dim <= x.rank:
        raise InvalidArgumentError(f"dim {dim} not in the interval [{-x.rank - 1}, {x.rank}].")
    if dim < 0:
        dim += x.rank + 1
    return TensorShape(x.dims[:dim] + (1,) + x.dims[dim:])


def _expand_dims_kernel(ctx: KernelContext, input: Any, dim: Any) -> Any:  # noqa: A002
    if dim.size != 1:
        raise ctx.invalid_argument("'dim' must be a tensor with a single value")
    d = int(dim.reshape(-1)[0])
    rank = input.ndim
    if not -1 - rank <= d <= rank:
        raise ctx.invalid_argument(
            f"Tried to expand dim index {d} for tensor with {rank} dimensions."
        )
    if d < 0:
        d += rank + 1
    check_rank(rank + 1, "the output")
    # A view, contiguous or not: None inserts the axis.
    return input[(slice(None),) * d + (None, Ellipsis)]


def _expand_dims_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _ExpandDimsGrad: the gradient reshaped back to the input's shape."""
    return [_reshaped_like(_grad_scope(op), grad, op.inputs[0]), None]


# -- Squeeze -----------------------------------------------------------------------------------

SQUEEZE = OpDef(
    "Squeeze",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type", "squeeze_dims: list(int) >= 0 = []"],
    shape_fn=lambda ctx: _squeeze_shape(ctx),
    doc="""`input` without its dimensions of size 1: those listed in `squeeze_dims` (in
[-rank, rank), each must be 1), or every dimension of size 1 when the list is empty.""",
)


def _squeeze_dims(squeeze_dims: tuple[int, ...], rank: int) -> set[int]:
    wrapped = set()
    for i, d in enumerate(squeeze_dims):
        if not -rank <= d < rank:
            raise InvalidArgumentError(f"squeeze_dims[{i}] not in [{-rank},{rank}).")
        wrapped.add(d + rank if d < 0 else d)
    return wrapped


def _squeeze_shape(ctx: InferenceContext) -> TensorShape:
    x = ctx.input_shapes[0]
    if x.rank is None:
        return TensorShape(None)
    wanted = _squeeze_dims(ctx.attr("squeeze_dims"), x.rank)
    dims: list[int | None] = []
    for i, d in enumerate(x.dims):
        explicit = i in wanted
        if d is None:
            if explicit:
                continue  # assumed to be 1 (checked at run time)
            if not wanted:
                return TensorShape(None)  # as TF: any number of dims may go
        elif d == 1:
            if explicit or not wanted:
                continue
        elif explicit:
            raise InvalidArgumentError(
                f"Can not squeeze dim[{i}], expected a dimension of 1, got {d}"
            )
        dims.append(d)
    return TensorShape(dims)


def _squeeze_kernel(ctx: KernelContext, input: Any, *, squeeze_dims: tuple[int, ...]) -> Any:  # noqa: A002
    rank = input.ndim
    wanted = set()
    # The first out of range, in the attr's order (TF's kernel reports the first in the order
    # of a hash set of them, which is not the attr's order).
    for d in squeeze_dims:
        if not -rank <= d < rank:
            raise ctx.invalid_argument(
                f"Tried to squeeze dim index {d} for tensor with {rank} dimensions."
            )
        wanted.add(d + rank if d < 0 else d)
    key: list[Any] = []
    for i, size in enumerate(input.shape):
        if i in wanted:
            if size != 1:
                raise ctx.invalid_argument(
                    f"Can not squeeze dim[{i}], expected a dimension of 1, got {size}"
                )
            key.append(0)
        elif not wanted and size == 1:
            key.append(0)
        else:
            key.append(slice(None))
    key.append(Ellipsis)  # a 0-d result stays an array
    return input[tuple(key)]


def _squeeze_grad(op: Any, grad: Output) -> Output:
    """TF's _SqueezeGrad: the gradient reshaped back to the input's shape."""
    return _reshaped_like(_grad_scope(op), grad, op.inputs[0])


# -- Transpose ---------------------------------------------------------------------------------

TRANSPOSE = OpDef(
    "Transpose",
    inputs=["x: T", "perm: Tperm"],
    outputs=["y: T"],
    attrs=["T: type", "Tperm: {int32, int64} = int32"],
    shape_fn=lambda ctx: _transpose_shape(ctx),
    doc="""`x` with its dimensions permuted: y.shape[i] = x.shape[perm[i]]. `perm` is a
permutation of [0, rank) (negative entries count from the end) in host memory.""",
)


def _permutation(perm: list[int], rank: int) -> list[int]:
    """`perm` checked to be a permutation of [0, rank) (negative entries wrapped), with the
    messages of TF's TransposeOp."""
    if len(perm) != rank:
        raise InvalidArgumentError(
            f"transpose expects a vector of size {rank}. But input(1) is a vector of size "
            f"{len(perm)}"
        )
    wrapped = [d + rank if d < 0 else d for d in perm]
    for d in wrapped:
        if not 0 <= d < rank:
            raise InvalidArgumentError(f"{d} is out of range [0 .. {rank})")
    seen = set(wrapped)
    for i in range(rank):
        if i not in seen:
            listed = ",".join(str(d) for d in wrapped)
            raise InvalidArgumentError(f"{i} is missing from {{{listed}}}.")
    return wrapped


def _transpose_shape(ctx: InferenceContext) -> TensorShape:
    x, perm_shape = ctx.input_shapes
    perm = ctx.constant_value(1)
    length = perm_shape.num_elements() if perm_shape.rank is not None else None
    if x.rank is None and length is None and perm is None:
        return TensorShape(None)
    if x.rank is not None:
        rank = x.rank
    elif length is not None:
        rank = length
    else:
        rank = perm.size
    if x.rank is None and rank < 2:
        return x  # one perm entry: a scalar or a vector, unchanged either way
    x = x.with_rank(rank)
    n = _vector_length(perm_shape)
    if n is not None and n != rank:
        raise InvalidArgumentError(f"Dimension must be {rank} but is {n}")
    if perm is None:
        return TensorShape([None] * rank)
    values = _host_ints(perm)
    for d in values:
        if not -rank <= d < rank:
            raise InvalidArgumentError(f"perm dim {d} is out of range of input rank {rank}")
    # TF checks duplicates only at run time; a constant perm shows them now.
    wrapped = _permutation(values, rank)
    return TensorShape([x.dims[d] for d in wrapped])


def _transpose_kernel(ctx: KernelContext, x: Any, perm: Any) -> Any:
    if perm.ndim != 1:
        raise ctx.invalid_argument(f"perm must be rank 1, got shape {_shape_text(perm.shape)}")
    try:
        order = _permutation(_host_ints(perm), x.ndim)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    return x.transpose(order)


def _transpose_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _TransposeGrad: the gradient transposed by the inverse permutation, a constant when
    the perm is one, else InvertPermutation of the perm (its negative entries, which Transpose
    counts from the end, first wrapped: TF's InvertPermutation refuses them)."""
    scope = _grad_scope(op)
    x, perm = op.inputs
    value = _constant(perm)
    if value is not None:
        order = _permutation(_host_ints(value), value.size)  # checked by the shape function
        inverse: Any = np.argsort(order).astype(perm.dtype.np_dtype)
    else:
        np_index = perm.dtype.np_dtype
        if x.shape.rank is not None:
            rank: Any = np.array(max(x.shape.rank, 1), np_index)
        else:  # max(rank, 1): a scalar's empty perm would divide by zero
            size = Size(scope, perm, out_type=perm.dtype).output
            rank = Maximum(scope, size, np.array(1, np_index)).output
        inverse = InvertPermutation(scope, FloorMod(scope, perm, rank)).output
    return [Transpose(scope, grad, inverse).output, None]


# -- InvertPermutation -------------------------------------------------------------------------

INVERT_PERMUTATION = OpDef(
    "InvertPermutation",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=["T: {int32, int64} = int32"],
    shape_fn=lambda ctx: _invert_permutation_shape(ctx),
    doc="""The inverse of the permutation `x` (a vector holding each of 0 .. n - 1 once):
y[x[i]] = i. Host memory on every device, as TF's kernels declare it.""",
)


def _inverse_permutation(x: np.ndarray) -> np.ndarray:
    """y with y[x[i]] = i, or TF's error for the first entry (in order) that is out of
    [0, n) or repeats an earlier one."""
    n = x.size
    values = x.astype(np.int64, copy=False)
    positions = np.arange(n, dtype=np.int64)
    outside = (values < 0) | (values >= n)
    first_outside = int(positions[outside][0]) if outside.any() else n
    # Among entries in range, a repeat is any after the first of its value (a stable sort
    # keeps equal values in position order).
    inside = positions[~outside]
    order = inside[np.argsort(values[inside], kind="stable")]
    repeats = order[1:][values[order[1:]] == values[order[:-1]]]
    first_repeat = int(repeats.min()) if repeats.size else n
    if first_outside < first_repeat:
        raise InvalidArgumentError(f"{int(values[first_outside])} is not between 0 and {n}")
    if first_repeat < n:
        raise InvalidArgumentError(f"{int(values[first_repeat])} is duplicated in the input.")
    y = np.empty(n, dtype=x.dtype)
    y[values] = positions
    return y


def _invert_permutation_shape(ctx: InferenceContext) -> TensorShape:
    x = ctx.input_shapes[0].with_rank(1)
    value = ctx.constant_value(0)
    if value is not None:
        _inverse_permutation(value.reshape(-1))  # TF checks at run time; a constant shows it now
    return x


def _invert_permutation_kernel(ctx: KernelContext, x: Any) -> np.ndarray:
    if x.ndim != 1:
        raise ctx.invalid_argument("invert_permutation expects a 1D vector.")
    try:
        return _inverse_permutation(x)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None


# -- StridedSlice ------------------------------------------------------------------------------

STRIDED_SLICE = OpDef(
    "StridedSlice",
    inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
    outputs=["output: T"],
    attrs=[
        "T: type",
        "Index: {int16, int32, int64}",
        "begin_mask: int = 0",
        "end_mask: int = 0",
        "ellipsis_mask: int = 0",
        "new_axis_mask: int = 0",
        "shrink_axis_mask: int = 0",
    ],
    shape_fn=lambda ctx: _strided_slice_shape(ctx),
    doc="""Python/numpy basic slicing, as TF's StridedSlice: entry i of `begin`, `end`,
`strides` (1-D, one length, under 32) is `begin[i]:end[i]:strides[i]` on the next dimension,
unless bit i of a mask says otherwise: `begin_mask`/`end_mask` (that bound is omitted),
`ellipsis_mask` (`...`: as many full dimensions as needed; at most one), `new_axis_mask`
(`None`: a new dimension of size 1) and `shrink_axis_mask` (an index, `begin[i]`, removing the
dimension; it must be in range). Out-of-range bounds of a range are clamped. `begin`, `end` and
`strides` live in host memory on every device.""",
)

_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
_NEW_AXIS = -1
_SHRUNK = -2
# Sparse specs of 32 entries or more do not fit TF's 32-bit masks.
_MAX_SPARSE = 32


def _int32_masks(attrs: dict[str, Any]) -> tuple[int, ...]:
    """The five masks as 32-bit patterns (TF reads the int attrs into int32)."""
    masks = []
    for name in _MASKS:
        value = attrs[name]
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise InvalidArgumentError(f"Attr {name} has value {value} out of range for an int32")
        masks.append(value & 0xFFFFFFFF)
    return tuple(masks)


def _check_slice_spec_shapes(
    begin: Any, end: Any, strides: Any, begin_shape: tuple, end_shape: tuple, strides_shape: tuple
) -> None:
    """TF's check that begin, end and strides are vectors of one length, under 32 (begin and
    end are None when unknown)."""
    n = math.prod(strides_shape)
    begin_wrong = begin is not None and not (
        len(begin_shape) == 1 and begin_shape[0] == n and begin_shape[0] < _MAX_SPARSE
    )
    end_wrong = end is not None and not (len(end_shape) == 1 and end_shape[0] == n)
    if begin_wrong or end_wrong or len(strides_shape) != 1:
        if begin is not None and end is not None:
            raise InvalidArgumentError(
                "Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
                f"{_shape_text(begin_shape)}, {_shape_text(end_shape)}, and "
                f"{_shape_text(strides_shape)} instead."
            )
        raise InvalidArgumentError(
            "Expected begin, end, and strides to be 1D equal size tensors, but got shape "
            f"{_shape_text(strides_shape)} for strides."
        )


def strided_slice_plan(
    dims: tuple[int | None, ...],
    begin: list[int] | None,
    end: list[int] | None,
    strides: list[int],
    masks: tuple[int, ...],
) -> tuple[list[int | None], list[Any]]:
    """TF's ValidateStridedSliceOp over a partial input shape: the output's dims and, per
    output position in order, what produces it (a dense input dim's `(begin, stride, size)`,
    `_NEW_AXIS`, or `(_SHRUNK, index)`), which is the equivalent numpy key when everything is
    known. `begin`/`end` None: unknown values; `masks` are 32-bit patterns (`_int32_masks`).

    Raises InvalidArgumentError with TF's messages.
    """
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask = masks
    if ellipsis_mask & (ellipsis_mask - 1):
        raise InvalidArgumentError("Multiple ellipses in slice spec not allowed")
    n = len(strides)
    # Step 1: the new axes after the ellipsis; an ellipsis at the end when there is none.
    seen = False
    added_after_ellipsis = 0
    for i in range(n):
        if seen and (new_axis_mask >> i) & 1:
            added_after_ellipsis += 1
        if (ellipsis_mask >> i) & 1:
            seen = True
    if not seen:
        ellipsis_mask |= 1 << n
        n += 1
    # Step 2: the sparse spec made dense, one entry per input dimension.
    rank = len(dims)
    dense_begin = [0] * rank
    dense_end = [0] * rank
    dense_strides = [0] * rank
    dense_begin_mask = dense_end_mask = dense_shrink = 0
    gather: list[int] = []  # per output position: a dense index, _NEW_AXIS or _SHRUNK
    gather_dense: list[int] = []  # the dense index behind each gather entry (-1 for a new axis)
    full = 0
    for i in range(n):
        if (ellipsis_mask >> i) & 1:
            stop = min(rank - (n - i) + 1 + added_after_ellipsis, rank)
            while full < stop:
                dense_strides[full] = 1
                dense_begin_mask |= 1 << full
                dense_end_mask |= 1 << full
                gather.append(full)
                gather_dense.append(full)
                full += 1
        elif (new_axis_mask >> i) & 1:
            gather.append(_NEW_AXIS)
            gather_dense.append(-1)
        else:
            if full == rank:
                if rank == 0:
                    raise InvalidArgumentError("Attempting to slice scalar input.")
                raise InvalidArgumentError(
                    f"Index out of range using input dim {full}; input has only {rank} dims"
                )
            if begin is not None:
                dense_begin[full] = begin[i]
            if end is not None:
                dense_end[full] = end[i]
            dense_strides[full] = strides[i]
            if (begin_mask >> i) & 1:
                dense_begin_mask |= 1 << full
            if (end_mask >> i) & 1:
                dense_end_mask |= 1 << full
            if (shrink_axis_mask >> i) & 1:
                gather.append(_SHRUNK)
                dense_shrink |= 1 << full
            else:
                gather.append(full)
            gather_dense.append(full)
            full += 1
    # Step 3: bounds made explicit and checked; the size of each dense dimension.
    known = begin is not None and end is not None
    sizes: list[int | None] = []
    starts: list[int] = []
    for i in range(rank):
        b, e, s, dim = dense_begin[i], dense_end[i], dense_strides[i], dims[i]
        if s == 0:
            raise InvalidArgumentError(f"strides[{i}] must be non-zero")
        shrink = (dense_shrink >> i) & 1
        if dim is None:
            sizes.append(1 if shrink else None)
            starts.append(0)
            continue
        masked_begin = (dense_begin_mask >> i) & 1
        masked_end = (dense_end_mask >> i) & 1
        if shrink and s <= 0:
            raise InvalidArgumentError("only stride 1 allowed on non-range indexing.")
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        if known:
            if shrink:
                b = b + dim if b < 0 else b
                if b < 0 or b >= dim:
                    raise InvalidArgumentError(f"slice index {b} of dimension {i} out of bounds.")
                e = b + 1  # TF ignores `end` on a shrunk axis
            else:
                b = _canonical_bound(b, masked_begin, s, dim, lo, hi, first=True)
                e = _canonical_bound(e, masked_end, s, dim, lo, hi, first=False)
            interval: int | None = e - b
        elif shrink:
            interval = 1
        elif masked_begin and masked_end:
            interval = -dim if s < 0 else dim
            b = 0 if s > 0 else dim - 1
        else:
            interval = None
        starts.append(b)
        if interval is None:
            sizes.append(None)
        elif interval == 0 or (interval < 0) != (s < 0):
            sizes.append(0)
        else:
            sizes.append((abs(interval) + abs(s) - 1) // abs(s))
    # Step 4: the final shape (new axes add a 1, shrunk axes go).
    final: list[int | None] = []
    plan: list[Any] = []
    for g, d in zip(gather, gather_dense):
        if g == _NEW_AXIS:
            final.append(1)
            plan.append(_NEW_AXIS)
        elif g == _SHRUNK:
            plan.append((_SHRUNK, starts[d]))
        else:
            final.append(sizes[d])
            plan.append((starts[d], dense_strides[d], sizes[d]))
    return final, plan


def _canonical_bound(
    x: int, masked: int, stride: int, dim: int, lo: int, hi: int, first: bool
) -> int:
    """TF's `canonical`: a masked bound is the full range's end in the stride's direction;
    another is made non-negative and clamped to [lo, hi]."""
    if masked:
        return (lo if first else hi) if stride > 0 else (hi if first else lo)
    x = x + dim if x < 0 else x
    return lo if x < lo else hi if x > hi else x


def _numpy_key(plan: list[Any]) -> tuple[Any, ...]:
    """The numpy basic-indexing key of a fully known plan (`strided_slice_plan`)."""
    key: list[Any] = []
    for step in plan:
        if step == _NEW_AXIS:
            key.append(None)
        elif step[0] == _SHRUNK:
            key.append(step[1])
        else:
            start, stride, size = step
            if size == 0:
                key.append(slice(0, 0))
            else:
                stop = start + size * stride
                key.append(slice(start, stop if stop >= 0 else None, stride))
    key.append(Ellipsis)  # the dims no entry names; keeps a 0-d result an array
    return tuple(key)


def _strided_slice_shape(ctx: InferenceContext) -> TensorShape:
    x, begin_shape, end_shape, strides_shape = ctx.input_shapes
    masks = _int32_masks(ctx.attrs)
    spec = begin_shape.with_rank(1)
    spec = merge_shapes(spec, end_shape.with_rank(1))
    spec = merge_shapes(spec, strides_shape.with_rank(1))
    strides = ctx.constant_value(3)
    if x.rank is None or spec[0] is None or strides is None:
        return TensorShape(None)
    stride_values = _host_ints(strides)
    # TF's shape inference runs twice: with the strides alone first (so what they show is
    # reported first, whatever begin and end hold), then with begin and end too.
    _check_slice_spec_shapes(None, None, strides, (), (), strides.shape)
    final, _ = strided_slice_plan(x.dims, None, None, stride_values, masks)
    begin, end = ctx.constant_value(1), ctx.constant_value(2)
    if begin is not None or end is not None:
        _check_slice_spec_shapes(
            begin, end, strides,
            begin.shape if begin is not None else (), end.shape if end is not None else (),
            strides.shape,
        )  # fmt: skip
        final, _ = strided_slice_plan(
            x.dims,
            None if begin is None else _host_ints(begin),
            None if end is None else _host_ints(end),
            stride_values,
            masks,
        )
    return TensorShape(final)


def _strided_slice_kernel(
    ctx: KernelContext, input: Any, begin: Any, end: Any, strides: Any,  # noqa: A002
    *, begin_mask: int, end_mask: int, ellipsis_mask: int, new_axis_mask: int,
    shrink_axis_mask: int,
) -> Any:  # fmt: skip
    cache = ctx.cache
    constant = cache.get("constant")
    if constant is None:
        constant = cache["constant"] = all(ctx.constant_inputs[1:4])
    # Constant bounds (the usual case): the key depends only on the input's shape.
    key = cache.get(input.shape) if constant else None
    if key is None:
        try:
            _check_slice_spec_shapes(begin, end, strides, begin.shape, end.shape, strides.shape)
            masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
            final, plan = strided_slice_plan(
                input.shape, _host_ints(begin), _host_ints(end), _host_ints(strides),
                tuple(m & 0xFFFFFFFF for m in masks),
            )  # fmt: skip
            check_rank(len(final), "the output")
        except InvalidArgumentError as e:
            raise ctx.invalid_argument(e.message) from None
        key = _numpy_key(plan)
        if constant and len(cache) < 64:
            cache[input.shape] = key
    return input[key]


def _masks_of(op: Any) -> dict[str, int]:
    return {name: op.get_attr(name) for name in _MASKS}


def _strided_slice_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _StridedSliceGrad: StridedSliceGrad of the input's shape (a constant when static)
    with the same begin, end, strides and masks. StridedSliceGrad takes int32 and int64 bounds
    only: int16 ones are converted to int32 (TF's rule fails on them), and to int64 when a
    static dim needs it."""
    scope = _grad_scope(op)
    x, begin, end, strides = op.inputs
    specs = [begin, end, strides]
    index = begin.dtype
    wide = x.shape.is_fully_defined() and any(d > _INT32_MAX for d in x.shape.dims)
    target = dtypes.int64 if wide else index if index is not dtypes.int16 else dtypes.int32
    if target is not index:
        specs = [
            np.asarray(value, target.np_dtype)
            if (value := _constant(t)) is not None
            else Cast(scope, t, target).output
            for t in specs
        ]
    shape = _shape_of(scope, x, target)
    return [StridedSliceGrad(scope, shape, *specs, grad, **_masks_of(op)).output, None, None, None]


# -- StridedSliceGrad --------------------------------------------------------------------------

STRIDED_SLICE_GRAD = OpDef(
    "StridedSliceGrad",
    inputs=["shape: Index", "begin: Index", "end: Index", "strides: Index", "dy: T"],
    outputs=["output: T"],
    attrs=[
        "T: type",
        "Index: {int32, int64}",
        "begin_mask: int = 0",
        "end_mask: int = 0",
        "ellipsis_mask: int = 0",
        "new_axis_mask: int = 0",
        "shrink_axis_mask: int = 0",
    ],
    shape_fn=lambda ctx: _strided_slice_grad_shape(ctx),
    doc="""The gradient of StridedSlice: a tensor of shape `shape` (1-D, non-negative), zeros
(False, empty strings) except for the slice that StridedSlice of an input of that shape with
these `begin`, `end`, `strides` and masks takes, which holds `dy` (of that slice's shape).
`shape`, `begin`, `end` and `strides` live in host memory on every device.""",
)


def _strided_slice_grad_shape(ctx: InferenceContext) -> TensorShape:
    shape_shape, begin_shape, end_shape, strides_shape, dy_shape = ctx.input_shapes
    n = _vector_length(shape_shape)
    value = ctx.constant_value(0)
    if value is None:
        out = TensorShape(None) if n is None else TensorShape([None] * n)
    else:
        # TF's MakeShapeFromShapeTensor: -1 is an unknown dim, anything below is refused.
        dims = _shape_tensor_values(value)
        if -1 not in dims:
            _checked_output_dims(dims)
        out = TensorShape([None if d == -1 else d for d in dims])
    # Beyond TF's shape function (which stops there): what the kernel refuses, where the
    # shapes and constants show it: malformed bounds, and dy not of the slice's shape.
    spec = merge_shapes(begin_shape.with_rank(1), end_shape.with_rank(1))
    spec = merge_shapes(spec, strides_shape.with_rank(1))
    steps = ctx.constant_value(3)
    if out.rank is None or spec[0] is None or steps is None:
        return out
    first, last = ctx.constant_value(1), ctx.constant_value(2)
    _check_slice_spec_shapes(
        first, last, steps,
        first.shape if first is not None else (), last.shape if last is not None else (),
        steps.shape,
    )  # fmt: skip
    sliced, _ = strided_slice_plan(
        out.dims,
        None if first is None else _host_ints(first),
        None if last is None else _host_ints(last),
        _host_ints(steps),
        _int32_masks(ctx.attrs),
    )
    if not dy_shape.is_compatible_with(TensorShape(sliced)):
        raise InvalidArgumentError(f"shape of dy was {dy_shape} instead of {TensorShape(sliced)}")
    return out


def _strided_slice_grad_kernel(
    ctx: KernelContext, shape: Any, begin: Any, end: Any, strides: Any, dy: Any,
    *, begin_mask: int, end_mask: int, ellipsis_mask: int, new_axis_mask: int,
    shrink_axis_mask: int, T: Any,
) -> Any:  # fmt: skip
    if shape.ndim != 1:
        raise ctx.invalid_argument(
            f"shape must be 1-D, got shape.shape = {_shape_text(shape.shape)}"
        )
    dims = _output_dims(ctx, shape, "shape")
    cache = ctx.cache
    fixed = cache.get("constant")
    if fixed is None:
        fixed = cache["constant"] = all(ctx.constant_inputs[1:4])
    # Constant bounds (a gradient's usual case): the slice depends only on the output shape.
    found = cache.get(dims) if fixed else None
    if found is None:
        try:
            _check_slice_spec_shapes(begin, end, strides, begin.shape, end.shape, strides.shape)
            masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
            sliced, plan = strided_slice_plan(
                dims, _host_ints(begin), _host_ints(end), _host_ints(strides),
                tuple(m & 0xFFFFFFFF for m in masks),
            )  # fmt: skip
        except InvalidArgumentError as e:
            raise ctx.invalid_argument(e.message) from None
        found = (tuple(sliced), _numpy_key(plan))
        if fixed and len(cache) < 64:
            cache[dims] = found
    sliced_shape, key = found
    if dy.shape != sliced_shape:
        raise ctx.invalid_argument(
            f"shape of dy was {_shape_text(dy.shape)} instead of {_shape_text(sliced_shape)}"
        )
    if T.is_string:
        out = np.full(dims, b"", dtype=object)
    else:
        out = ctx.empty(dims, dy.dtype)
        out.fill(0)
    # The key's new axes (None) and shrunk axes (ints) make the slice of out dy's shape.
    out[key] = dy
    return out


def _strided_slice_grad_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _StridedSliceGradGrad: the gradient of dy is the same slice of the gradient; the
    shape and bounds have none."""
    _, begin, end, strides, _ = op.inputs
    sliced = StridedSlice(_grad_scope(op), grad, begin, end, strides, **_masks_of(op)).output
    return [None, None, None, None, sliced]


# -- Slice -------------------------------------------------------------------------------------

SLICE = OpDef(
    "Slice",
    inputs=["input: T", "begin: Index", "size: Index"],
    outputs=["output: T"],
    attrs=["T: type", "Index: {int32, int64}"],
    shape_fn=lambda ctx: _slice_shape(ctx),
    doc="""The block of `input` starting at `begin` with shape `size` (size[i] = -1: up to
the end of dimension i). `begin` and `size` are 1-D with one entry per dimension, in host
memory; the block must lie inside `input`.""",
)


def _slice_size(i: int, dim: int, b: int, s: int) -> int:
    """The size of the block along dimension i (s = -1: to the end), checked with the messages
    of TF's Slice kernel."""
    if s == -1:
        s = dim - b
    if dim == 0:
        if b != 0 or s != 0:
            raise InvalidArgumentError(
                f"Expected begin[{i}] == 0 (got {b}) and size[{i}] == 0 (got {s}) when "
                f"input.dim_size({i}) == 0"
            )
    else:
        if not 0 <= b <= dim:
            raise InvalidArgumentError(f"Expected begin[{i}] in [0, {dim}], but got {b}")
        if not (0 <= s and b + s <= dim):
            raise InvalidArgumentError(f"Expected size[{i}] in [0, {dim - b}], but got {s}")
    return s


def _slice_shape(ctx: InferenceContext) -> TensorShape:
    x, begin_shape, size_shape = ctx.input_shapes
    spec = merge_shapes(begin_shape.with_rank(1), size_shape.with_rank(1))
    n = spec[0]
    if n is not None:
        x = x.with_rank(n)
    begin, size = ctx.constant_value(1), ctx.constant_value(2)
    # TF reads both as shapes first: values below -1 are refused whatever the dims are.
    begin_values = None if begin is None else _shape_tensor_values(begin)
    size_values = None if size is None else _shape_tensor_values(size)
    if size_values is None:
        if n is not None:
            return TensorShape([None] * n)
        return TensorShape(None) if x.rank is None else TensorShape([None] * x.rank)
    x = x.with_rank(len(size_values))
    # TF's shape function: a size of -1 is the dim minus begin (-1 in begin: unknown).
    dims: list[int | None] = []
    for i, s in enumerate(size_values):
        dim = x.dims[i]
        b = None if begin_values is None or begin_values[i] == -1 else begin_values[i]
        if s != -1:
            dims.append(s)
        elif b is None or dim is None:
            dims.append(None)
        elif dim < b:
            raise InvalidArgumentError(
                f"Negative dimension size caused by subtracting {b} from {dim}"
            )
        else:
            dims.append(dim - b)
    # What TF's kernel refuses at run time, where the shapes and constants already show it.
    if begin_values is not None:
        for i, (dim, b, s) in enumerate(zip(x.dims, begin_values, size_values)):
            if dim is not None:
                _slice_size(i, dim, b, s)
            elif b < 0:
                raise InvalidArgumentError(f"Expected begin[{i}] in [0, ?], but got {b}")
    return TensorShape(dims)


def _slice_kernel(ctx: KernelContext, input: Any, begin: Any, size: Any) -> Any:  # noqa: A002
    rank = input.ndim
    if not (begin.ndim == 1 and size.ndim == 1 and begin.size == rank and size.size == rank):
        raise ctx.invalid_argument(
            f"Expected begin and size arguments to be 1-D tensors of size {rank}, but got shapes "
            f"{_shape_text(begin.shape)} and {_shape_text(size.shape)} instead."
        )
    b = _host_ints(begin)
    try:
        sizes = [
            _slice_size(i, *args) for i, args in enumerate(zip(input.shape, b, _host_ints(size)))
        ]
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    key = tuple(slice(start, start + s) for start, s in zip(b, sizes))
    return input[key + (Ellipsis,)]


def _slice_grad(op: Any, grad: Output) -> list[Any]:
    """Slice's gradient: zeros of the input's shape with the gradient in the block, as
    StridedSliceGrad with end = begin + the output's shape and unit strides (TF's _SliceGrad
    pads the gradient with Pad, an op minigraph lacks; the values are the same). Constants where
    begin and the shapes are static, else Shape and AddV2 at run time."""
    scope = _grad_scope(op)
    x, begin, _ = op.inputs
    y = op.outputs[0]
    index = begin.dtype
    start = _constant(begin)
    if start is not None and y.shape.is_fully_defined():
        stop: Any = _index_vector([b + d for b, d in zip(_host_ints(start), y.shape.dims)], index)
    else:
        stop = AddV2(scope, begin, _shape_of(scope, y, index)).output
    n = begin.shape[0] if begin.shape.rank == 1 else None
    n = x.shape.rank if n is None else n
    step: Any = np.ones(n, index.np_dtype) if n is not None else OnesLike(scope, begin).output
    shape = _shape_of(scope, x, index)
    return [StridedSliceGrad(scope, shape, begin, stop, step, grad).output, None, None]


# -- ConcatV2 ----------------------------------------------------------------------------------

CONCAT_V2 = OpDef(
    "ConcatV2",
    inputs=["values: N * T", "axis: Tidx"],
    outputs=["output: T"],
    attrs=["N: int >= 2", "T: type", "Tidx: {int32, int64} = int32"],
    shape_fn=lambda ctx: _concat_shape(ctx),
    doc="""Concatenates the N tensors `values` along dimension `axis` (negative counts from the
end). They must have one rank and agree on every other dimension. `axis` lives in host
memory on every device.""",
)


def concat_shape(shapes: list[TensorShape], axis: int | None) -> TensorShape:
    """The shape of ConcatV2 of tensors of these (partial) shapes along `axis` (None:
    unknown), with TF's messages."""
    known = [s for s in shapes if s.rank is not None]
    if not known:
        return TensorShape(None)
    rank = known[0].rank
    for i, s in enumerate(shapes):
        if s.rank is not None and s.rank != rank:
            raise InvalidArgumentError(
                "ConcatOp : Ranks of all input tensors should match: shape[0] = "
                f"{known[0]} vs. shape[{i}] = {s}"
            )
    if rank == 0:
        raise InvalidArgumentError("ConcatOp : Can't concatenate scalars (use tf.stack instead)")
    if axis is None:
        return TensorShape([None] * rank)
    if not -rank <= axis < rank:
        raise InvalidArgumentError(
            f"ConcatOp : Expected concatenating dimensions in the range [{-rank}, {rank}), "
            f"but got {axis}"
        )
    axis %= rank
    dims: list[int | None] = list(known[0].dims)
    total: int | None = 0
    for i, s in enumerate(shapes):
        if s.rank is None:
            total = None
            continue
        for k, d in enumerate(s.dims):
            if k == axis:
                continue
            if d is not None and dims[k] is not None and d != dims[k]:
                raise InvalidArgumentError(
                    f"ConcatOp : Dimension {k} in both shapes must be equal: shape[0] = "
                    f"{known[0]} vs. shape[{i}] = {s}"
                )
            if dims[k] is None:
                dims[k] = d
        total = None if total is None or s.dims[axis] is None else total + s.dims[axis]
    dims[axis] = total
    return TensorShape(dims)


def _concat_shape(ctx: InferenceContext) -> TensorShape:
    n = ctx.attr("N")
    ctx.input_shapes[n].with_rank(0)
    axis = ctx.constant_value(n)
    return concat_shape(list(ctx.input_shapes[:n]), None if axis is None else int(axis))


def _concat_kernel(ctx: KernelContext, values: list[Any], axis: Any) -> Any:
    if axis.ndim != 0:
        raise ctx.invalid_argument(f"axis must be a scalar, not shape {list(axis.shape)}")
    try:
        shape = concat_shape([TensorShape(v.shape) for v in values], int(axis))
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    a = int(axis) % len(shape.dims)
    return ctx.xp.concatenate(values, axis=a)


def _concat_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _ConcatGradV2: each input's gradient is the slice of the gradient at its offset
    along the axis. With a constant axis and every input's size along it static, the begins
    and sizes are constants (-1 for the other unknown dims); otherwise they are computed at run
    time from the inputs' shapes: begin_0 = 0, begin_{i+1} = begin_i + shape_i * mask, the mask
    one-hot at the (non-negative) axis, as TF's sparse path builds them."""
    scope = _grad_scope(op)
    values, axis_input = list(op.inputs[:-1]), op.inputs[-1]
    ranks = {v.shape.rank for v in values} - {None}
    rank = ranks.pop() if ranks else None
    value = _constant(axis_input)
    axis = None if value is None or rank is None else int(value) % rank
    known = [d for v in values if v.shape.rank is not None for d in v.shape.dims]
    index = dtypes.int64 if any(d is not None and d > _INT32_MAX for d in known) else dtypes.int32
    grads: list[Any] = []
    if axis is not None and all(v.shape.rank is not None and v.shape.dims[axis] is not None
                                for v in values):  # fmt: skip
        offset = 0
        for v in values:
            begin = [offset if i == axis else 0 for i in range(rank)]
            size = [-1 if d is None else d for d in v.shape.dims]
            grads.append(
                Slice(scope, grad, _index_vector(begin, index), _index_vector(size, index)).output
            )
            offset += v.shape.dims[axis]
        return grads + [None]
    shapes = [_shape_of(scope, v, index) for v in values]
    if axis is not None:
        mask: Any = _index_vector([int(i == axis) for i in range(rank)], index)
        begin_at: Any = np.zeros(rank, index.np_dtype)
    else:
        if rank is not None:
            r: Any = np.int32(rank)
        else:
            r = Rank(scope, values[0]).output
        at = axis_input
        if at.dtype is not dtypes.int32:
            at = Cast(scope, at, dtypes.int32).output
        at = FloorMod(scope, at, r).output  # the axis, made non-negative
        on, off = np.ones((), index.np_dtype), np.zeros((), index.np_dtype)
        mask = OneHot(scope, at, r, on, off).output
        begin_at = (
            np.zeros(rank, index.np_dtype)
            if rank is not None
            else ZerosLike(scope, shapes[0]).output
        )
    for i, shape in enumerate(shapes):
        grads.append(Slice(scope, grad, begin_at, shape).output)
        if i + 1 == len(values):
            break
        if all(isinstance(t, np.ndarray) for t in (begin_at, shape, mask)):
            begin_at = begin_at + shape * mask
        else:
            begin_at = AddV2(scope, begin_at, Mul(scope, shape, mask)).output
    return grads + [None]


# -- Pack and Unpack ---------------------------------------------------------------------------

PACK = OpDef(
    "Pack",
    inputs=["values: N * T"],
    outputs=["output: T"],
    attrs=["N: int >= 1", "T: type", "axis: int = 0"],
    shape_fn=lambda ctx: _pack_shape(ctx),
    doc="""Stacks the N tensors `values` (all of one shape) along a new dimension `axis`, in
[-(rank + 1), rank + 1): output.shape = shape[:axis] + [N] + shape[axis:].""",
)

UNPACK = OpDef(
    "Unpack",
    inputs=["value: T"],
    outputs=["output: num * T"],
    attrs=["num: int >= 0", "T: type", "axis: int = 0"],
    shape_fn=lambda ctx: _unpack_shape(ctx),
    doc="""Splits `value` along dimension `axis` (in [-rank, rank); its size must be `num`)
into `num` tensors with that dimension removed.""",
)


def _pack_axis(axis: int, rank: int) -> int:
    """TF's GetAxisForPackAndUnpack: `axis` in [-rank, rank), made non-negative."""
    if not -rank <= axis < rank:
        raise InvalidArgumentError(f"Invalid axis: {axis}; must be in [{-rank},{rank})")
    return axis + rank if axis < 0 else axis


def _pack_shape(ctx: InferenceContext) -> TensorShape:
    shapes = ctx.input_shapes
    merged = shapes[-1]
    for i in range(len(shapes) - 2, -1, -1):
        merged = merge_shapes(shapes[i], merged, f"From merging shape {i} with other shapes.")
    if merged.rank is None:
        return TensorShape(None)
    axis = _pack_axis(ctx.attr("axis"), merged.rank + 1)
    return TensorShape(merged.dims[:axis] + (len(shapes),) + merged.dims[axis:])


def _unpack_shape(ctx: InferenceContext) -> list[TensorShape]:
    x = ctx.input_shapes[0]
    num = ctx.attr("num")
    if x.rank is None:
        return [TensorShape(None)] * num
    axis = _pack_axis(ctx.attr("axis"), x.rank)
    if x.dims[axis] is not None and x.dims[axis] != num:
        raise InvalidArgumentError(f"Dimension must be {num} but is {x.dims[axis]}")
    return [TensorShape(x.dims[:axis] + x.dims[axis + 1 :])] * num


def _pack_kernel(ctx: KernelContext, values: list[Any], *, axis: int) -> Any:
    first = values[0].shape
    rank = len(first) + 1
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ctx.invalid_argument(f"axis = {axis} not in [{-rank}, {rank})")
    for i, v in enumerate(values):
        if v.shape != first:
            raise ctx.invalid_argument(
                f"Shapes of all inputs must match: values[0].shape = {_shape_text(first)} != "
                f"values[{i}].shape = {_shape_text(v.shape)}"
            )
    check_rank(rank, "the output")
    out = ctx.empty(first[:a] + (len(values),) + first[a:], values[0].dtype)
    return ctx.xp.stack(values, axis=a, out=out)


def _unpack_kernel(ctx: KernelContext, value: Any, *, num: int, axis: int) -> list[Any]:
    rank = value.ndim
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ctx.invalid_argument(f"axis = {axis} not in [{-rank}, {rank})")
    if value.shape[a] != num:
        raise ctx.invalid_argument(
            f"Input shape axis {a} must equal {num}, got shape {_shape_text(value.shape)}"
        )
    lead = (slice(None),) * a
    # One view per output (TF copies unless axis is 0); a 0-d output stays an array.
    return [value[lead + (i, Ellipsis)] for i in range(num)]


def _pack_grad(op: Any, grad: Output) -> list[Output]:
    """TF's _PackGrad: the gradient unstacked along the axis."""
    num, axis = op.get_attr("N"), op.get_attr("axis")
    return Unpack(_grad_scope(op), grad, num, axis=axis).outputs


def _unpack_grad(op: Any, *grads: Output) -> Output:
    """TF's _UnpackGrad: the outputs' gradients stacked along the axis (the machinery gives
    zeros to outputs nothing used)."""
    return Pack(_grad_scope(op), list(grads), axis=op.get_attr("axis")).output


# -- Fill, ZerosLike, OnesLike -----------------------------------------------------------------

FILL = OpDef(
    "Fill",
    inputs=["dims: index_type", "value: T"],
    outputs=["output: T"],
    attrs=["T: type", "index_type: {int32, int64} = int32"],
    shape_fn=lambda ctx: _fill_shape(ctx),
    doc="""A tensor of shape `dims` (1-D, non-negative, in host memory) with every element
`value` (a scalar).""",
)

ZEROS_LIKE = OpDef(
    "ZerosLike",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=["T: type"],
    shape_fn=lambda ctx: ctx.input_shapes[0],
    doc="Zeros of the shape and dtype of `x` (False for bool, empty strings for string).",
)

_ONES_TYPES = [d.name for d in dtypes.ALL_DTYPES if not d.is_string]

ONES_LIKE = OpDef(
    "OnesLike",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=["T: {" + ", ".join(_ONES_TYPES) + "}"],
    shape_fn=lambda ctx: ctx.input_shapes[0],
    doc="Ones of the shape and dtype of `x` (True for bool).",
)


def _fill_shape(ctx: InferenceContext) -> TensorShape:
    dims_shape, value_shape = ctx.input_shapes
    n = _vector_length(dims_shape)
    value_shape.with_rank(0)
    dims = ctx.constant_value(0)
    if dims is None:
        partial = ctx.partial_shape_value(0)  # Fill(Shape(x), v): x's partial shape
        if partial.rank is not None and n is not None and partial.rank != n:
            return TensorShape([None] * n)
        return partial
    values = _shape_tensor_values(dims)
    if any(d < 0 for d in values):
        raise InvalidArgumentError("Fill dimensions must be >= 0")
    return TensorShape(_checked_output_dims(values))


def _output_dims(ctx: KernelContext, value: Any, what: str) -> tuple[int, ...]:
    """A 1-D host shape tensor's values as an output shape, with TF's run-time messages."""
    if value.ndim != 1:
        raise ctx.invalid_argument(
            f"{what} must represent a vector, got shape {_shape_text(value.shape)}"
        )
    dims = _host_ints(value)
    for d in dims:
        if d < 0:
            raise ctx.invalid_argument(f"Dimension {d} must be >= 0")
    try:
        return _checked_output_dims(dims)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None


def _fill_kernel(ctx: KernelContext, dims: Any, value: Any, *, T: Any) -> Any:
    shape = _output_dims(ctx, dims, "dims")
    if value.ndim != 0:
        raise ctx.invalid_argument(
            f"value must represent a scalar, got shape {_shape_text(value.shape)}"
        )
    out = ctx.empty(shape, T.np_dtype)
    ctx.xp.copyto(out, value)
    return out


def _all_axes(scope: Any, t: Output) -> Any:
    """Every axis of t: a constant when its rank is static, else Range(0, Rank(t))."""
    if t.shape.rank is not None:
        return _index_vector(list(range(t.shape.rank)), dtypes.int32)
    return Range(scope, np.int32(0), Rank(scope, t), np.int32(1)).output


def _fill_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _FillGrad: the value's gradient is the sum of the gradient; dims have none."""
    scope = _grad_scope(op)
    return [None, Sum(scope, grad, _all_axes(scope, grad)).output]


def _zeros_like_kernel(ctx: KernelContext, x: Any, *, T: Any) -> Any:
    if T.is_string:
        return np.full(x.shape, b"", dtype=object)
    out = ctx.empty(x.shape, x.dtype)
    out.fill(0)
    return out


def _ones_like_kernel(ctx: KernelContext, x: Any) -> Any:
    out = ctx.empty(x.shape, x.dtype)
    out.fill(1)
    return out


# -- Tile --------------------------------------------------------------------------------------

TILE = OpDef(
    "Tile",
    inputs=["input: T", "multiples: Tmultiples"],
    outputs=["output: T"],
    attrs=["T: type", "Tmultiples: {int32, int64} = int32"],
    shape_fn=lambda ctx: _tile_shape(ctx),
    doc="""`input` repeated `multiples[i]` times along dimension i: output.shape[i] =
input.shape[i] * multiples[i]. `multiples` is 1-D, non-negative, one entry per dimension, in
host memory.""",
)


def _tiled_dim(d: int | None, m: int | None) -> int | None:
    """TF's InferenceContext::Multiply: 0 and 1 win over unknown; overflow is an error."""
    if d == 0 or m == 0:
        return 0
    if d == 1:
        return m
    if m == 1:
        return d
    if d is None or m is None:
        return None
    if d * m > MAX_DIM:
        raise InvalidArgumentError(
            f"Negative dimension size caused by overflow when multiplying {d} and {m}"
        )
    return d * m


def _tile_shape(ctx: InferenceContext) -> TensorShape:
    x, multiples_shape = ctx.input_shapes
    n = _vector_length(multiples_shape)
    value = ctx.constant_value(1)
    if value is not None:
        n = value.size
    if x.rank is not None and n is not None and n != x.rank:
        raise InvalidArgumentError(f"Shape must be rank {x.rank} but is rank {n}")
    multiples: list[int | None] | None = None if n is None else [None] * n
    if value is not None:
        multiples = _shape_tensor_values(value)
        for i, m in enumerate(multiples):
            if m < 0:  # -1: TF's kernel refuses it at run time
                raise InvalidArgumentError(f"Expected multiples[{i}] >= 0, but got {m}")
    if value is None and n is not None:
        partial = ctx.partial_shape_value(1)  # Tile(x, Pack([a, 4])): the known multiples
        if partial.rank == n:
            multiples = list(partial.dims)
    if multiples is None and x.rank is not None:
        multiples = [None] * x.rank
    if multiples is None:
        return TensorShape(None)
    x = x.with_rank(len(multiples))
    return TensorShape([_tiled_dim(d, m) for d, m in zip(x.dims, multiples)])


def _tile_kernel(ctx: KernelContext, input: Any, multiples: Any) -> Any:  # noqa: A002
    if multiples.ndim != 1:
        raise ctx.invalid_argument(
            f"Expected multiples to be 1-D, but got shape {_shape_text(multiples.shape)}"
        )
    reps = _host_ints(multiples)
    if len(reps) != input.ndim:
        raise ctx.invalid_argument(
            f"Expected multiples argument to be a vector of length {input.ndim} but got "
            f"length {len(reps)}"
        )
    for i, m in enumerate(reps):
        if m < 0:
            raise ctx.invalid_argument(f"Expected multiples[{i}] >= 0, but got {m}")
    try:
        shape = _checked_output_dims([d * m for d, m in zip(input.shape, reps)])
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    check_rank(2 * input.ndim, "Tile's working view")
    out = ctx.empty(shape, input.dtype)
    # The output seen as [m0, d0, m1, d1, ...]: the input, broadcast along every m axis.
    blocks = out.reshape([v for pair in zip(reps, input.shape) for v in pair])
    source = input.reshape([v for d in input.shape for v in (1, d)])
    ctx.xp.copyto(blocks, source)
    return out


def _tile_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _TileGrad: the gradient reshaped to [m0, d0, m1, d1, ...] (multiples interleaved
    with the input's dims) and summed over the multiples' axes 0, 2, 4, ... A constant shape
    where the input's shape and the multiples are static, else Reshape(Transpose(Pack(
    [multiples, Shape(input)]))) at run time; constant axes where the rank is static, else
    Range(0, size, 2)."""
    scope = _grad_scope(op)
    x, multiples = op.inputs
    reps = _constant(multiples)
    rank = x.shape.rank if x.shape.rank is not None else None if reps is None else reps.size
    if reps is not None and x.shape.is_fully_defined():
        interleaved = [v for m, d in zip(_host_ints(reps), x.shape.dims) for v in (m, d)]
        split: Any = _index_vector(interleaved)
    else:
        pairs = Pack(scope, [multiples, _shape_of(scope, x, multiples.dtype)]).output
        flat_pairs = Transpose(scope, pairs, np.array([1, 0], np.int32)).output
        split = Reshape(scope, flat_pairs, np.array([-1], np.int32)).output
    if rank is not None:
        axes: Any = _index_vector(list(range(0, 2 * rank, 2)), dtypes.int32)
    else:
        axes = Range(scope, np.int32(0), Size(scope, split), np.int32(2)).output
    return [Sum(scope, Reshape(scope, grad, split), axes).output, None]


# -- BroadcastTo -------------------------------------------------------------------------------

BROADCAST_TO = OpDef(
    "BroadcastTo",
    inputs=["input: T", "shape: Tidx"],
    outputs=["output: T"],
    attrs=["T: type", "Tidx: {int32, int64} = int32"],
    shape_fn=lambda ctx: _broadcast_to_shape(ctx),
    doc="""`input` broadcast to `shape` as numpy broadcasts (aligned at the last dimension;
each input dimension is 1 or the target's). `shape` is 1-D, in host memory.""",
)


def _broadcast_to_shape(ctx: InferenceContext) -> TensorShape:
    x, shape_shape = ctx.input_shapes
    n = _vector_length(shape_shape)
    value = ctx.constant_value(1)
    if value is None:
        partial = ctx.partial_shape_value(1)  # BroadcastTo(x, Shape(y)): y's partial shape
        if partial.rank is None:
            return TensorShape(None)
        out: list[int | None] = list(partial.dims)
        if n is not None and len(out) != n:
            out = [None] * n
    else:
        out = _shape_tensor_values(value)
        for d in out:
            if d < 0:  # -1: TF's kernel refuses it at run time
                raise InvalidArgumentError(f"Dimension {d} must be >= 0")
        _checked_output_dims(out)
    if x.rank is None:
        return TensorShape(out)
    x.with_rank_at_most(len(out))
    offset = len(out) - x.rank
    for i in reversed(range(x.rank)):  # from the last dim, as TF (the first mismatch it names)
        d, target = x.dims[i], out[offset + i]
        if d is None or d <= 1:  # as TF: only dims above 1 must match the target
            continue
        if target is None:
            out[offset + i] = d
        elif target != d:
            raise InvalidArgumentError(f"Dimensions must be equal, but are {d} and {target}")
    if value is not None and x.is_fully_defined():
        _check_broadcast_to(x.dims, out)  # a 0 broadcast to a 3: TF refuses it at run time
    return TensorShape(out)


def _check_broadcast_to(dims: tuple[int, ...], target: list[int]) -> None:
    """TF's run-time check that `dims` broadcast to `target`."""
    if len(dims) > len(target):
        raise InvalidArgumentError(
            f"Rank of input ({len(dims)}) must be no greater than rank of output shape "
            f"({len(target)})."
        )
    offset = len(target) - len(dims)
    for i, d in enumerate(dims):
        t = target[offset + i]
        if d != 1 and d != t:
            if t != 1:  # not even broadcastable with each other
                raise InvalidArgumentError(
                    f"Incompatible shapes: {_shape_text(dims)} vs. {_shape_text(target)}"
                )
    for i, d in enumerate(dims):
        if d != 1 and d != target[offset + i]:  # broadcastable, but to a larger shape
            raise InvalidArgumentError(
                f"Unable to broadcast tensor of shape {_shape_text(dims)} to tensor of shape "
                f"{_shape_text(target)}"
            )


def _broadcast_to_kernel(ctx: KernelContext, input: Any, shape: Any) -> Any:  # noqa: A002
    if shape.ndim != 1:
        raise ctx.invalid_argument(
            f"shape must be a vector of {{int32,int64}}, got shape {_shape_text(shape.shape)}"
        )
    target = _output_dims(ctx, shape, "shape")
    try:
        _check_broadcast_to(input.shape, list(target))
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    out = ctx.empty(target, input.dtype)
    ctx.xp.copyto(out, input)
    return out


def _broadcast_to_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _BroadcastToGrad: the gradient summed back to the input's shape (over constant
    axes where the static shapes decide them, else BroadcastGradientArgs at run time)."""
    return [sum_to(grad, op.inputs[0]), None]


# -- OneHot ------------------------------------------------------------------------------------

ONE_HOT = OpDef(
    "OneHot",
    inputs=["indices: TI", "depth: int32", "on_value: T", "off_value: T"],
    outputs=["output: T"],
    attrs=["axis: int = -1", "T: type", "TI: {uint8, int8, int32, int64} = int64"],
    shape_fn=lambda ctx: _one_hot_shape(ctx),
    doc="""One-hot vectors along a new dimension `axis` (-1: last) of size `depth` (a
non-negative scalar in host memory): on_value where indices[...] == j, off_value elsewhere
(indices outside [0, depth) give off_value everywhere). on_value and off_value are scalars.""",
)


def _one_hot_shape(ctx: InferenceContext) -> TensorShape:
    indices, depth_shape, on_shape, off_shape = ctx.input_shapes
    axis = ctx.attr("axis")
    if axis < -1:
        raise InvalidArgumentError("axis must be >= -1")
    depth_shape.with_rank(0)
    depth = ctx.constant_value(1)
    if depth is not None and int(depth) < 0:
        raise InvalidArgumentError(
            f"Dimension size, given by scalar input 1, must be non-negative but is {int(depth)}"
        )
    for name, shape in (("on_value", on_shape), ("off_value", off_shape)):
        if shape.rank is not None and shape.rank != 0:
            raise InvalidArgumentError(f"{name} must be a scalar, but got: {shape}")
    if indices.rank is None:
        return TensorShape(None)
    rank = indices.rank + 1
    if axis >= rank:
        raise InvalidArgumentError(
            f"Expected axis to be -1 or between [0, {rank}).  But received: {axis}"
        )
    check_rank(rank, "the output")
    at = rank - 1 if axis == -1 else axis
    d = None if depth is None else int(depth)
    return TensorShape(indices.dims[:at] + (d,) + indices.dims[at:])


def _one_hot_kernel(
    ctx: KernelContext, indices: Any, depth: Any, on_value: Any, off_value: Any, *, axis: int,
    T: Any,
) -> Any:  # fmt: skip
    if depth.ndim != 0:
        raise ctx.invalid_argument(f"depth must be a scalar, but got: {_shape_text(depth.shape)}")
    for name, value in (("on_value", on_value), ("off_value", off_value)):
        if value.ndim != 0:
            raise ctx.invalid_argument(
                f"{name} must be a scalar, but got: {_shape_text(value.shape)}"
            )
    rank = indices.ndim + 1
    if not (axis == -1 or 0 <= axis < rank):
        raise ctx.invalid_argument(
            f"Expected axis to be -1 or between [0, {rank}).  But received: {axis}"
        )
    d = int(depth)
    if d < 0:
        raise ctx.invalid_argument(f"depth must be non-negative, got: {d}")
    check_rank(rank, "the output")
    at = rank - 1 if axis == -1 else axis
    xp = ctx.xp
    lead, tail = indices.shape[:at], indices.shape[at:]
    try:
        shape = _checked_output_dims(list(lead) + [d] + list(tail))
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    out = ctx.empty(shape, T.np_dtype)
    xp.copyto(out, off_value)
    if out.size == 0:
        return out
    # Then on_value at each index's own position (indices outside [0, depth) have none): in
    # the flat output, element p = (l, t) of `indices` (t over the `tail` dims) with value j
    # is at l * depth * T + j * T + t, T the tail's size. A fill and a scatter of one value
    # per index: 10x faster than comparing every output element with its position.
    flat = indices.reshape(-1).astype(np.int64)
    valid = (flat >= 0) & (flat < d)
    p = xp.arange(flat.size, dtype=np.int64)
    inner = math.prod(tail)
    if inner == 1:
        where = p * d + flat
    else:
        where = (p // inner) * (d * inner) + flat * inner + p % inner
    out.reshape(-1)[where[valid]] = on_value
    return out


# -- SelectV2 ----------------------------------------------------------------------------------

SELECT_V2 = OpDef(
    "SelectV2",
    inputs=["condition: bool", "t: T", "e: T"],
    outputs=["output: T"],
    attrs=["T: type"],
    shape_fn=lambda ctx: broadcast_shape(
        ctx.input_shapes[0], broadcast_shape(ctx.input_shapes[1], ctx.input_shapes[2])
    ),
    doc="""`t` where `condition` is true, else `e`; the three broadcast together as numpy
broadcasts.""",
)


def _select_v2_kernel(ctx: KernelContext, condition: Any, t: Any, e: Any) -> Any:
    try:
        np.broadcast_shapes(condition.shape, t.shape, e.shape)  # for TF's message if not
    except ValueError:
        raise ctx.invalid_argument(
            f"condition {_shape_text(condition.shape)}, then {_shape_text(t.shape)}, and else "
            f"{_shape_text(e.shape)} must be broadcastable"
        ) from None
    # A new array of t's dtype (both branches have it), 0-d included: np.where has no `out=`,
    # and two copies into pooled memory (the second masked) cost 1.4x its one pass.
    return ctx.xp.where(condition, t, e)


def _select_v2_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _SelectGradV2: the gradient where the condition chose each branch, zeros elsewhere,
    summed back to each branch's shape (they may have been broadcast)."""
    scope = _grad_scope(op)
    condition, t, e = op.inputs
    zero = np.zeros((), grad.dtype.np_dtype)
    to_t = SelectV2(scope, condition, grad, zero).output
    to_e = SelectV2(scope, condition, zero, grad).output
    return [None, sum_to(to_t, t), sum_to(to_e, e)]


SELECT = OpDef(
    "Select",
    inputs=["condition: bool", "t: T", "e: T"],
    outputs=["output: T"],
    attrs=["T: type"],
    shape_fn=lambda ctx: _select_shape(ctx),
    doc="""TF 1's select: `t` where `condition` is true, else `e`. `t` and `e` have one shape;
`condition` is a scalar (choosing a whole tensor), a vector choosing along `t`'s first
dimension, or of `t`'s shape (elementwise). No other broadcasting (see SelectV2).""",
)


def _select_shape(ctx: InferenceContext) -> TensorShape:
    cond, t, e = ctx.input_shapes
    data = merge_shapes(t, e)
    if cond.rank is None or data.rank is None or cond.rank == 0:
        return data
    if cond.rank != 1 or data.rank == 0:
        return merge_shapes(data, cond)
    merge_shapes(cond, TensorShape([data[0]]))  # one condition per row
    return data


def _select_kernel(ctx: KernelContext, condition: Any, t: Any, e: Any) -> Any:
    if condition.ndim == 0:
        if t.shape != e.shape:
            raise ctx.invalid_argument(
                "'then' and 'else' must have the same size.  but received: "
                f"{_shape_text(t.shape)} vs. {_shape_text(e.shape)}"
            )
        return t if bool(condition) else e  # TF forwards the chosen input itself
    if condition.ndim == 1 and t.ndim != 1:
        if t.ndim == 0:
            raise ctx.invalid_argument(
                f"'then' must be at least a vector, but saw shape: {_shape_text(t.shape)}"
            )
        if t.shape[0] != condition.size:
            raise ctx.invalid_argument(
                "Number of batches of 'then' must match size of 'cond', but saw: "
                f"{t.shape[0]} vs. {condition.size}"
            )
        if t.shape != e.shape:
            raise ctx.invalid_argument(
                "'then' and 'else' must have the same size.  but received: "
                f"{_shape_text(t.shape)} vs. {_shape_text(e.shape)}"
            )
        return ctx.xp.where(condition.reshape((-1,) + (1,) * (t.ndim - 1)), t, e)
    for i, other in ((1, t), (2, e)):
        if other.shape != condition.shape:
            raise ctx.invalid_argument(
                "Inputs to operation Select of type Select must have the same size and shape.  "
                f"Input 0: {_shape_text(condition.shape)} != input {i}: "
                f"{_shape_text(other.shape)}"
            )
    return ctx.xp.where(condition, t, e)


def _select_grad(op: Any, grad: Output) -> list[Any]:
    """TF's _SelectGrad: the gradient where the condition chose each branch, zeros elsewhere
    (Select again: t and e have the output's shape)."""
    scope = _grad_scope(op)
    condition, t, _ = op.inputs
    zeros = ZerosLike(scope, t).output
    return [
        None,
        Select(scope, condition, grad, zeros).output,
        Select(scope, condition, zeros, grad).output,
    ]


# -- StopGradient ------------------------------------------------------------------------------

STOP_GRADIENT = OpDef(
    "StopGradient",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type"],
    shape_fn=lambda ctx: ctx.input_shapes[0],
    doc="`input` itself at run time; gradients do not flow through it.",
)


def _stop_gradient_kernel(ctx: KernelContext, input: Any) -> Any:  # noqa: A002
    return input


# -- x[...]: TF's _slice_helper ----------------------------------------------------------------

_INDEX_TYPES = (dtypes.int16, dtypes.int32, dtypes.int64)
_SLICE_TYPE_ERROR = (
    "Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
    "tf.int32/tf.int64 tensors are valid indices"
)


class _Typed:
    """A bound TF fills in as a tensor of the slice's dtype (`x[i:]`'s end 0 when `i` is a
    tensor), rather than as a Python int."""

    __slots__ = ("value", "dtype")

    def __init__(self, value: int, dtype: Any):
        self.value = value
        self.dtype = dtype


def _index(value: Any) -> int | Output:
    """An index or bound of a key: an int, or a scalar integer tensor; TF's TypeError for
    anything else."""
    if isinstance(value, numbers.Integral):  # bool included, as in TF (x[True, 0] is x[1, 0])
        number = int(value)
        if not _INT64_MIN <= number <= _INT64_MAX:
            raise TypeError(f"{_SLICE_TYPE_ERROR}, got {value!r} (outside the int64 range)")
        return number
    if (
        isinstance(value, np.ndarray)
        and value.ndim == 0
        and value.dtype in (np.int16, np.int32, np.int64)
    ):
        return int(value)
    out = as_output(value)
    if out is not None and out.dtype in _INDEX_TYPES and out.shape.rank in (None, 0):
        return out
    raise TypeError(f"{_SLICE_TYPE_ERROR}, got {value!r}")


def _slice_dtype(parts: tuple[Any, ...]) -> Any:
    """TF's choice of dtype for a slice's filled-in bounds: int64 over int32 over int16."""
    found = None
    for part in parts:
        out = as_output(part)
        if out is None:
            continue
        if out.dtype is dtypes.int64:
            found = dtypes.int64
        elif out.dtype is dtypes.int32 and found is not dtypes.int64:
            found = dtypes.int32
        elif out.dtype is dtypes.int16 and found is None:
            found = dtypes.int16
    return found


def _filled(value: int, dtype: Any) -> int | _Typed:
    return value if dtype is None else _Typed(value, dtype)


def _parse_key(key: Any) -> tuple[list[Any], list[Any], list[Any], list[int]]:
    """begin, end and strides entries (ints, Outputs, _Typed) and the five masks of a key."""
    if (
        isinstance(key, (bool, np.bool_))
        or (isinstance(key, np.ndarray) and key.dtype == np.bool_)
        or (as_output(key) is not None and as_output(key).dtype is dtypes.bool_)
    ):
        raise TypeError(
            "indexing with a boolean mask (TF's tf.boolean_mask) is not supported by x[...]: "
            "index with integers, slices, `...` and None"
        )
    parts = key if isinstance(key, (tuple, list)) else (key,)  # a list is a tuple, as in TF
    begin: list[Any] = []
    end: list[Any] = []
    strides: list[Any] = []
    masks = [0, 0, 0, 0, 0]  # begin, end, ellipsis, new_axis, shrink_axis
    for i, part in enumerate(parts):
        bit = 1 << i
        if isinstance(part, slice):
            dtype = _slice_dtype((part.start, part.stop, part.step))
            for bound, target, mask in ((part.start, begin, 0), (part.stop, end, 1)):
                if bound is None:
                    target.append(_filled(0, dtype))
                    masks[mask] |= bit
                else:
                    target.append(_index(bound))
            strides.append(_filled(1, dtype) if part.step is None else _index(part.step))
        elif part is Ellipsis or part is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks[2 if part is Ellipsis else 3] |= bit
        else:
            index = _index(part)
            begin.append(index)
            if isinstance(index, Output):
                # TF writes index + 1; the kernel and the shape function ignore `end` on a
                # shrunk axis, so the index itself serves and needs no AddV2 node.
                end.append(index)
                strides.append(_Typed(1, index.dtype) if index.dtype is not dtypes.int32 else 1)
            else:
                end.append(index + 1)
                strides.append(1)
            masks[4] |= bit
    return begin, end, strides, masks


def _list_dtype(entries: list[Any]) -> Any:
    """The dtype TF's stack gives a list of bounds: that of its tensors (which must agree),
    else int32, or int64 when a value needs it."""
    found = {e.dtype if isinstance(e, (Output, _Typed)) else None for e in entries} - {None}
    if len(found) > 1:
        names = ", ".join(sorted(d.name for d in found))
        raise TypeError(
            f"Tensors in list passed to 'values' of 'Pack' Op have types [{names}] that don't "
            "all match."
        )
    if found:
        return found.pop()
    values = [e for e in entries if isinstance(e, int)]
    fits = all(_INT32_MIN <= v <= _INT32_MAX for v in values)
    return dtypes.int32 if fits else dtypes.int64


def _packed(scope: Any, entries: list[Any], dtype: Any, target: Any, name: str) -> Output:
    """One of begin, end, strides as a 1-D tensor of `target`: a Const when every entry is
    known, else TF's Pack (cast when its dtype is not the target's)."""
    if not any(isinstance(e, Output) for e in entries):
        values = [e.value if isinstance(e, _Typed) else e for e in entries]
        array = np.array(values, dtype=target.np_dtype).reshape(len(values))
        const = registry.get_op_def("Const")
        attrs = {"value": array, "dtype": target}
        return scope.with_op_name(name).create_op(const, [], attrs).outputs[0]
    # Python ints stay literals: the builder converts them to the tensors' dtype, refusing a
    # value that does not fit.
    elements = [
        np.array(e.value, e.dtype.np_dtype) if isinstance(e, _Typed) else e for e in entries
    ]
    packed = Pack(scope.with_op_name(name), elements).output
    if dtype is target:
        return packed
    cast = registry.get_op_def("Cast")
    return scope.create_op(cast, [packed], {"DstT": target}, "Cast").outputs[0]


def slice_helper(tensor: Any, key: Any) -> Output:
    """`tensor[key]` as TF's Python builds it (`Tensor.__getitem__`): a StridedSlice named
    `strided_slice`, built under `minigraph.current_scope(tensor.graph)`.

    `key` is an int (negative counts from the end; the dimension goes), a slice with optional
    start, stop and step (negative steps included), `...`, None (a new dimension of size 1),
    a scalar int16/int32/int64 tensor in place of any int, or a tuple (or list, as in TF) of
    these. begin, end and strides are Consts when every entry is known, else Packs of the
    entries (int64 when any is: the others are cast).

    Raises:
        TypeError: an unsupported key (floats, strings, non-scalar tensors, boolean masks),
            with TF's message.
        InvalidArgumentError: a key the StridedSlice shape function refuses (an index out of
            range, two ellipses, more entries than dims); the graph is left unchanged.
    """
    x = as_output(tensor)
    if x is None:
        raise TypeError(f"slice_helper slices a tensor (an Output); got {type(tensor).__name__}")
    begin, end, strides, masks = _parse_key(key)
    scope = current_scope(x.graph)
    op_def = registry.get_op_def("StridedSlice")
    attrs = dict(zip(_MASKS, masks))
    with x.graph.transaction():
        if not begin:
            empty = np.zeros(0, np.int32)
            const = registry.get_op_def("Const")
            spec = (
                scope.with_op_name("Const")
                .create_op(const, [], {"value": empty, "dtype": dtypes.int32})
                .outputs[0]
            )
            return scope.create_op(op_def, [x, spec, spec, spec], attrs, "strided_slice").outputs[0]
        kinds = [_list_dtype(entries) for entries in (begin, end, strides)]
        if dtypes.int64 in kinds:
            target = dtypes.int64
        elif kinds[0] is kinds[1] is kinds[2]:
            target = kinds[0]
        else:  # int16 beside int32: TF's StridedSlice refuses the mix
            name, kind = next(
                (n, k) for n, k in zip(("end", "strides"), kinds[1:]) if k is not kinds[0]
            )
            raise TypeError(
                f"Input '{name}' of 'StridedSlice' Op has type {kind.name} that does not match "
                f"type {kinds[0].name} of argument 'begin'."
            )
        names = ("stack", "stack", "stack")  # uniquified: stack, stack_1, stack_2, ...
        tensors = [
            _packed(scope, entries, kind, target, name)
            for entries, kind, name in zip((begin, end, strides), kinds, names)
        ]
        return scope.create_op(op_def, [x, *tensors], attrs, "strided_slice").outputs[0]


# -- registration ------------------------------------------------------------------------------

Shape = register_op(SHAPE)
Size = register_op(SIZE)
Rank = register_op(RANK)
Reshape = register_op(RESHAPE)
ExpandDims = register_op(EXPAND_DIMS)
Squeeze = register_op(SQUEEZE)
Transpose = register_op(TRANSPOSE)
StridedSlice = register_op(STRIDED_SLICE)
Slice = register_op(SLICE)
ConcatV2 = register_op(CONCAT_V2)
Pack = register_op(PACK)
Unpack = register_op(UNPACK)
Fill = register_op(FILL)
ZerosLike = register_op(ZEROS_LIKE)
OnesLike = register_op(ONES_LIKE)
Tile = register_op(TILE)
BroadcastTo = register_op(BROADCAST_TO)
OneHot = register_op(ONE_HOT)
SelectV2 = register_op(SELECT_V2)
Select = register_op(SELECT)
StopGradient = register_op(STOP_GRADIENT)
StridedSliceGrad = register_op(STRIDED_SLICE_GRAD)
InvertPermutation = register_op(INVERT_PERMUTATION)


def _gpu(op_type: str, fn: Any, host_memory: tuple[str, ...] = (), trusted: bool = False,
         types: list[Any] | None = None) -> None:  # fmt: skip
    """The CPU kernel (every dtype the OpDef allows, as TF's CPU kernels register) and the GPU
    one (what cupy holds: no strings, no bfloat16) of `op_type`."""
    register_kernel(op_type, "CPU", fn, host_memory=list(host_memory), trusted=trusted)
    register_kernel(
        op_type, "GPU", fn,
        type_constraints={"T": types or _GPU_TYPES}, host_memory=list(host_memory),
        trusted=trusted,
    )  # fmt: skip


# Trusted (no per-run output checks, fed arrays passed as they are): kernels that build new
# arrays of the inferred dtype and shape (tests/test_builtin_trust.py and
# tests/test_array_trust.py check them), and StopGradient, which returns its input itself.
# The others return views of their input, which the session must not hand back as views of a
# fed array: they stay checked.
register_kernel("Shape", "CPU", _shape_kernel, trusted=True)
register_kernel(
    "Shape", "GPU", _shape_kernel,
    type_constraints={"T": _GPU_TYPES}, host_memory=["output"], trusted=True,
)  # fmt: skip
register_kernel("Size", "CPU", _size_kernel, trusted=True)
register_kernel(
    "Size", "GPU", _size_kernel,
    type_constraints={"T": _GPU_TYPES}, host_memory=["output"], trusted=True,
)  # fmt: skip
register_kernel("Rank", "CPU", _rank_kernel, host_memory=["output"], trusted=True)
register_kernel(
    "Rank", "GPU", _rank_kernel,
    type_constraints={"T": _GPU_TYPES}, host_memory=["output"], trusted=True,
)  # fmt: skip
register_kernel("Reshape", "CPU", _reshape_kernel, host_memory=["shape"])
register_kernel(
    "Reshape", "GPU", _reshape_kernel, type_constraints={"T": _GPU_TYPES}, host_memory=["shape"]
)
register_kernel("ConcatV2", "CPU", _concat_kernel, host_memory=["axis"], trusted=True)
register_kernel(
    "ConcatV2", "GPU", _concat_kernel,
    type_constraints={"T": _GPU_TYPES}, host_memory=["axis"], trusted=True,
)  # fmt: skip
_gpu("ExpandDims", _expand_dims_kernel, ("dim",))
_gpu("Squeeze", _squeeze_kernel)
_gpu("Transpose", _transpose_kernel, ("perm",))
_gpu("StridedSlice", _strided_slice_kernel, ("begin", "end", "strides"))
_gpu("Slice", _slice_kernel, ("begin", "size"))
_gpu("Pack", _pack_kernel, trusted=True)
_gpu("Unpack", _unpack_kernel)
_gpu("Fill", _fill_kernel, ("dims",), trusted=True)
_gpu("ZerosLike", _zeros_like_kernel, trusted=True)
_gpu("OnesLike", _ones_like_kernel, trusted=True)
_gpu("Tile", _tile_kernel, ("multiples",), trusted=True)
_gpu("BroadcastTo", _broadcast_to_kernel, ("shape",), trusted=True)
_gpu("OneHot", _one_hot_kernel, ("depth",), trusted=True)
_gpu("SelectV2", _select_v2_kernel, trusted=True)
_gpu("Select", _select_kernel, trusted=True)
_gpu("StopGradient", _stop_gradient_kernel, trusted=True)
# StridedSliceGrad writes dy into new zeros of the given shape; InvertPermutation builds a new
# vector, in host memory on every device (TF's GPU kernel declares both sides host memory).
_gpu(
    "StridedSliceGrad", _strided_slice_grad_kernel, ("shape", "begin", "end", "strides"),
    trusted=True,
)  # fmt: skip
register_kernel("InvertPermutation", "CPU", _invert_permutation_kernel, trusted=True)
register_kernel(
    "InvertPermutation", "GPU", _invert_permutation_kernel, host_memory=["x", "y"], trusted=True
)

# -- values known at construction -------------------------------------------------------------
# What shape functions see through (minigraph.shape_inference.constant_value and
# partial_shape_value), as TF's shape refiner evaluates small constant subgraphs: Reshape of
# Pack([batch, -1]), Fill of Shape(x), Range(0, Rank(x)) as a reduction's axes. Each evaluator
# computes from known inputs only, in numpy, and gives None where the kernel would raise (the
# kernel then reports it at run time, or the consumer's own shape function).


def _dims_as(dims: Any, dtype: Any) -> np.ndarray | None:
    """Shape dims (ints) as a vector or scalar of `dtype`, None if one does not fit it."""
    values = np.asarray(dims, dtype=np.int64)
    if (
        dtype is dtypes.int32
        and values.size
        and (values.max() > _INT32_MAX or values.min() < _INT32_MIN)
    ):
        return None
    return values.astype(dtype.np_dtype)


def _shape_value(t: Output, value_of: Any) -> np.ndarray | None:
    op = t.op
    shape = op.inputs[0].shape
    if not shape.is_fully_defined():
        return None
    return _dims_as(shape.dims, op.get_attr("out_type"))


def _size_value(t: Output, value_of: Any) -> np.ndarray | None:
    n = t.op.inputs[0].shape.num_elements()
    return None if n is None else _dims_as(n, t.op.get_attr("out_type"))


def _rank_value(t: Output, value_of: Any) -> np.ndarray | None:
    rank = t.op.inputs[0].shape.rank
    return None if rank is None else np.array(rank, np.int32)


def _passed_value(t: Output, value_of: Any) -> np.ndarray | None:
    return value_of(t.op.inputs[0])


def _known_values(op: Any, value_of: Any) -> list[np.ndarray] | None:
    values = []
    for x in op.inputs:
        v = value_of(x)
        if v is None:
            return None
        values.append(v)
    return values


def _pack_value(t: Output, value_of: Any) -> np.ndarray | None:
    values = _known_values(t.op, value_of)
    if values is None:
        return None
    return np.stack(values, axis=_pack_axis(t.op.get_attr("axis"), values[0].ndim + 1))


def _concat_value(t: Output, value_of: Any) -> np.ndarray | None:
    values = _known_values(t.op, value_of)
    if values is None or values[0].ndim == 0:
        return None
    axis = int(values[-1])
    rank = values[0].ndim
    if not -rank <= axis < rank:
        return None
    return np.concatenate(values[:-1], axis=axis % rank)


def _reshape_value(t: Output, value_of: Any) -> np.ndarray | None:
    values = _known_values(t.op, value_of)
    if values is None or not t.shape.is_fully_defined():
        return None
    return _reshaped_value(values[0], t.shape.dims)


def _reshaped_value(value: np.ndarray, dims: tuple[int, ...]) -> np.ndarray | None:
    if value.size != math.prod(dims):  # the shape function has checked it: never, in effect
        return None
    return value.reshape(dims)


def _expand_dims_value(t: Output, value_of: Any) -> np.ndarray | None:
    value = value_of(t.op.inputs[0])
    if value is None or not t.shape.is_fully_defined():
        return None
    return _reshaped_value(value, t.shape.dims)


def _strided_slice_value(t: Output, value_of: Any) -> np.ndarray | None:
    values = _known_values(t.op, value_of)
    if values is None:
        return None
    x, begin, end, strides = values
    masks = _int32_masks(_masks_of(t.op))
    try:
        _check_slice_spec_shapes(begin, end, strides, begin.shape, end.shape, strides.shape)
        _, plan = strided_slice_plan(
            x.shape, _host_ints(begin), _host_ints(end), _host_ints(strides), masks
        )
    except InvalidArgumentError:
        return None
    return x[_numpy_key(plan)]


def _shape_partial(t: Output, shape_of: Any, value_of: Any) -> TensorShape | None:
    shape = t.op.inputs[0].shape
    return shape if shape.rank is not None else None


def _pack_partial(t: Output, shape_of: Any, value_of: Any) -> TensorShape | None:
    """Pack of scalars: each known non-negative one a dim, the others unknown dims (as TF:
    a negative one too, which the consumer's kernel then refuses at run time)."""
    op = t.op
    if t.shape.rank != 1:
        return None
    dims: list[int | None] = []
    for x in op.inputs:
        v = value_of(x)
        dims.append(None if v is None or int(v) < 0 else int(v))
    return TensorShape(dims)


def _concat_partial(t: Output, shape_of: Any, value_of: Any) -> TensorShape | None:
    """ConcatV2 of shape vectors: their partial shapes one after the other."""
    op = t.op
    if t.shape.rank != 1:
        return None
    dims: list[int | None] = []
    for x in op.inputs[:-1]:
        part = shape_of(x)
        if part is None or part.rank is None:
            return None
        dims.extend(part.dims)
    return TensorShape(dims)


def _strided_slice_partial(t: Output, shape_of: Any, value_of: Any) -> TensorShape | None:
    """A 1-D slice of a shape vector (Shape(x)[1:], as TF's PartialStridedSliceShape): the
    slice of its partial shape, for one constant begin/end/stride and no ellipsis, new axis
    or shrunk axis."""
    op = t.op
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = _int32_masks(_masks_of(op))
    if ellipsis_mask or new_axis_mask or shrink_mask:
        return None
    source = shape_of(op.inputs[0])
    bounds = [value_of(x) for x in op.inputs[1:]]
    if source is None or source.rank is None or any(b is None or b.shape != (1,) for b in bounds):
        return None
    begin, end, stride = (int(b[0]) for b in bounds)
    if stride == 0:
        return None
    key = slice(None if begin_mask & 1 else begin, None if end_mask & 1 else end, stride)
    return TensorShape(list(source.dims)[key])


register_constant_evaluator("Shape", _shape_value, _shape_partial)
register_constant_evaluator("Size", _size_value)
register_constant_evaluator("Rank", _rank_value)
register_constant_evaluator("StopGradient", _passed_value)
register_constant_evaluator("Pack", _pack_value, _pack_partial)
register_constant_evaluator("ConcatV2", _concat_value, _concat_partial)
register_constant_evaluator("Reshape", _reshape_value)
register_constant_evaluator("ExpandDims", _expand_dims_value)
register_constant_evaluator("Squeeze", _expand_dims_value)
register_constant_evaluator("StridedSlice", _strided_slice_value, _strided_slice_partial)

# Gradient rules (TF's array_grad.py and math_grad.py), each defined beside its op. Rules take
# dense gradients (the machinery densifies sparse ones, as TF's rules for these ops do, but for
# ConcatV2 and Tile, which TF keeps sparse).
register_gradient("Reshape")(_reshape_grad)
register_gradient("ExpandDims")(_expand_dims_grad)
register_gradient("Squeeze")(_squeeze_grad)
register_gradient("Transpose")(_transpose_grad)
register_gradient("StridedSlice")(_strided_slice_grad)
register_gradient("StridedSliceGrad")(_strided_slice_grad_grad)
register_gradient("Slice")(_slice_grad)
register_gradient("ConcatV2")(_concat_grad)
register_gradient("Pack")(_pack_grad)
register_gradient("Unpack")(_unpack_grad)
register_gradient("Fill")(_fill_grad)
register_gradient("Tile")(_tile_grad)
register_gradient("BroadcastTo")(_broadcast_to_grad)
register_gradient("SelectV2")(_select_v2_grad)
register_gradient("Select")(_select_grad)
# Not differentiable, as TF marks them: shapes and sizes are integers, ZerosLike and OnesLike
# do not depend on their input's values, OneHot's indices are integers and TF gives on_value
# and off_value no gradient either.
no_gradient("Shape")
no_gradient("Size")
no_gradient("Rank")
no_gradient("ZerosLike")
no_gradient("OnesLike")
no_gradient("OneHot")
no_gradient("StopGradient")
no_gradient("InvertPermutation")

registry.register_operator("getitem", slice_helper)
