"""The array ops embedding_lookup is built from: Shape, Size, Reshape and ConcatV2. Op
definitions, shape functions, CPU and GPU kernels.

Semantics are TensorFlow 2.21's (tf.raw_ops.Shape, Size, Reshape, ConcatV2). Shape and Size
read only an input's shape, so their input stays where it is and their output lives in host
memory on every device (TF's HostMemory("output")); Reshape's and ConcatV2's small shape-like
inputs (`shape`, `axis`) are host memory too. Reshape returns a view: kernels never write into
their inputs, so sharing the buffer is safe.
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
    dtypes,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext
from minigraph.tensor_shape import MAX_DIM

__all__ = ["Shape", "Size", "Reshape", "ConcatV2"]

_INT32_MAX = int(np.iinfo(np.int32).max)
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]

# -- Shape and Size ----------------------------------------------------------------------------

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
        if shape.rank == 1 and shape.dims[0] is not None:
            return TensorShape([None] * shape.dims[0])
        if shape.rank == 0:
            return TensorShape([None])
        return TensorShape(None)
    return reshaped(tensor.num_elements(), [int(d) for d in value.reshape(-1)])


def _reshape_kernel(ctx: KernelContext, tensor: Any, shape: Any) -> Any:
    if shape.ndim > 1:
        raise ctx.invalid_argument(f"sizes input must be 1-D, not {list(shape.shape)}")
    try:
        target = reshaped(tensor.size, [int(d) for d in shape.reshape(-1).tolist()])
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    return tensor.reshape(target.dims)


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


# -- registration ------------------------------------------------------------------------------

Shape = register_op(SHAPE)
Size = register_op(SIZE)
Reshape = register_op(RESHAPE)
ConcatV2 = register_op(CONCAT_V2)

# Trusted (no per-run output checks, fed arrays passed as they are): Shape, Size and ConcatV2
# build new arrays of the inferred dtype and shape. Reshape is not: it returns a view of its
# input, which the session must not hand back as a view of a fed array.
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
register_kernel("Reshape", "CPU", _reshape_kernel, host_memory=["shape"])
register_kernel(
    "Reshape", "GPU", _reshape_kernel, type_constraints={"T": _GPU_TYPES}, host_memory=["shape"]
)
register_kernel("ConcatV2", "CPU", _concat_kernel, host_memory=["axis"], trusted=True)
register_kernel(
    "ConcatV2", "GPU", _concat_kernel,
    type_constraints={"T": _GPU_TYPES}, host_memory=["axis"], trusted=True,
)  # fmt: skip
