"""Neural-network ops: MatMul, BatchMatMulV2, Softmax, LogSoftmax, the two softmax
cross-entropies, L2Loss, BiasAdd and BiasAddGrad (BiasAdd's gradient op). Op definitions, shape
functions, CPU and GPU kernels, gradient rules.

Semantics are TensorFlow 2.21's CPU kernels (tf.raw_ops.MatMul, ...):

- MatMul multiplies matrices, transposing either first (transpose_a/transpose_b: a plain
  transpose, complex values are not conjugated); BatchMatMulV2 multiplies the last two dims,
  adj_x/adj_y taking the conjugate transpose, and broadcasts the batch dims as numpy does.
  grad_a/grad_b (grad_x/grad_y) are TF's hints for its gradient graphs: accepted and unused.
  Integers wrap around. float16 and bfloat16 products accumulate in float32 and are rounded
  once, as TF's CPU kernels accumulate them (TF's bfloat16 GEMM rounds partial sums in an
  order of its own, so long bfloat16 dot products can differ from TF's in the last bits).
  Shapes that cannot multiply fail at construction with TF's shape-function messages
  ("Dimensions must be equal, but are 3 and 4"), else at run time with its kernels' ("Matrix
  size-incompatible: In[0]: [2,3], In[1]: [4,5]").
- Softmax and LogSoftmax work along the last dim, from the logits minus their maximum, as TF
  (softmax = exp(x - max) * (1 / sum), log-softmax = (x - max) - log(sum)): large logits do
  not overflow; a row holding +inf or NaN gives NaN, as in TF. float16 and bfloat16 compute
  each step in the type itself, as TF does, but sum in float32 (rounded once; TF rounds its
  partial sums in an order of its own): results can differ from TF's in the last bit. The
  cross-entropies and L2Loss do the same.
- SparseSoftmaxCrossEntropyWithLogits: features [batch, classes], labels [batch]; loss =
  log(sum(exp(x - max))) - (x - max)[label], backprop = softmax - one_hot(label). A label
  outside [0, classes) is TF's CPU error on every device ("Received a label value of 5 which
  is outside the valid range of [0, 3).  Label values: 0 5 1"; TF's GPU kernel gives NaN),
  already at construction when the labels are a constant. At least one class is required.
- SoftmaxCrossEntropyWithLogits: features and labels broadcast (as TF 2.21 allows) to a
  [batch, classes] shape; loss = sum(labels * (log(sum) - (x - max))), backprop = softmax -
  labels.
- L2Loss: sum(t * t * 0.5) as a scalar, the squares rounded in T (a float16 300**2 is inf, as
  in TF).
- BiasAdd adds a vector along the last dim (NHWC) or dim 1 (NCHW; at construction TF wants
  rank >= 3 for NCHW, its kernel takes rank 2 as well). When the plan lets it overwrite its
  input (`KernelContext.forward_input_or_empty`) it writes there, so BiasAdd+Relu chains reuse
  one buffer.

- BiasAddGrad (TF's op, which BiasAdd's gradient rule builds): out_backprop summed over every
  dim but the channel dim (the last for NHWC, dim 1 for NCHW; rank >= 3 for NCHW at
  construction, rank 2 accepted by the kernel, as TF's), half types summed in float32.

Gradient rules (TF's, nn_grad.py and math_grad.py; registered next to each op):
- MatMul: one MatMul per input with the transposes of TF's four cases and grad_a/grad_b set,
  the inputs conjugated (Conj) for complex types. BatchMatMulV2: one BatchMatMulV2 per input
  with the adjoints of the four cases, then summed over the batch dims broadcasting added
  (`ops.math.sum_to`: constant axes where the static shapes decide, else Shape,
  BroadcastGradientArgs, Sum and Reshape at run time).
- Softmax (grad - sum(grad * softmax)) * softmax; LogSoftmax grad - sum(grad) * exp(output).
- The cross-entropies: grad_loss[:, None] * backprop for the features, none for sparse labels,
  grad_loss[:, None] * -log_softmax for dense ones; when the backprop output itself receives a
  gradient (a second derivative, which TF 2.21 supports the same way: no PreventGradient), its
  softmax term. Differences from TF's rule, where it is wrong: features broadcast along the
  classes take the softmax of the broadcast logits, dense labels also get -grad_grad (TF leaves
  out that term of backprop = softmax - labels), and broadcast features and labels get their
  gradients summed back to their shapes (TF returns the broadcast shape and then refuses it).
  The features' gradient is the loss's derivative when each labels row sums to 1, as TF's.
- L2Loss t * grad; BiasAdd (grad, BiasAddGrad(grad)); BiasAddGrad's gradient spreads the
  vector back over the channel dim (BroadcastTo; TF's Reshape + Tile when the rank is unknown).

Kernels write into `ctx.empty` (pooled memory on the host): MatMul is one `np.matmul(...,
out=)` call, as numpy's `@` is (the same BLAS), inlined into the plan for small products of
known shape. The softmax family, the cross-entropies and half-type casts run under
`np.errstate` (silent, as TF); MatMul, BatchMatMulV2, BiasAdd and float32/64 L2Loss skip its
cost, so numpy may warn when finite values overflow to inf (the values are TF's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minigraph import (
    InlineCall,
    Input,
    InvalidArgumentError,
    KernelContext,
    KernelSpec,
    OpDef,
    TensorShape,
    current_scope,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext, merge_dim
from ops.array import (
    BroadcastTo,
    ConcatV2,
    ExpandDims,
    OnesLike,
    Reshape,
    Shape,
    Slice,
    Tile,
)
from ops.math import AddV2, Conj, Exp, Mul, Neg, Sub, broadcast_shape, sum_to
from ops.reduction import Sum

__all__ = [
    "MatMul", "BatchMatMulV2", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
    "SoftmaxCrossEntropyWithLogits", "L2Loss", "BiasAdd", "BiasAddGrad",
]  # fmt: skip

_F32 = np.dtype(np.float32)
# Types computed in float32 and rounded once, by numpy dtype name (bfloat16's numpy dtype
# would load ml_dtypes, slow to import, at `import ops`).
_HALF_TYPES = frozenset(("float16", "bfloat16"))


def _gpu(names: list[str]) -> list[str]:
    return [n for n in names if n != "bfloat16"]  # cupy has no bfloat16


def _shape_text(shape: Any) -> str:
    """A shape as TF's TensorShape::DebugString writes it: `[2,3]`, `[]`, `[?,3]`."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _host_shapes_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's broadcast of two concrete shapes, or None when they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


def _rounded_into(ctx: KernelContext, value: Any, dtype: np.dtype) -> Any:
    """`value` (computed in float32 for a half type) as a new array of `dtype`."""
    if value.dtype == dtype:
        return value
    out = ctx.empty(value.shape, dtype)
    with np.errstate(all="ignore"):  # overflow to inf when rounding: silent, as in TF
        ctx.xp.copyto(out, value, casting="unsafe")
    return out


def _quietly(kernel: Any) -> Any:
    """`kernel` without numpy's floating-point warnings (inf - inf in a fully masked softmax
    row): TF computes silently. MatMul, BatchMatMulV2, BiasAdd and float32/64 L2Loss skip the
    errstate (1-2 us a call, a few percent of a small MatMul): numpy warns there only when
    finite values overflow to inf, and the result is TF's all the same."""

    def quiet(ctx: KernelContext, *args: Any, **attrs: Any) -> Any:
        with np.errstate(all="ignore"):
            return kernel(ctx, *args, **attrs)

    quiet.__name__ = quiet.__qualname__ = kernel.__name__
    quiet.__doc__ = kernel.__doc__
    return quiet


# -- MatMul ----------------------------------------------------------------------------------------

_MATMUL_TYPES = [
    "bfloat16", "float16", "float32", "float64", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "complex64", "complex128",
]  # fmt: skip
# TF's CPU MatMul kernels (the OpDef also allows unsigned types, which no kernel takes).
_MATMUL_KERNEL_TYPES = [
    "bfloat16", "float16", "float32", "float64", "int32", "int64", "complex64", "complex128",
]  # fmt: skip

MATMUL = OpDef(
    "MatMul",
    inputs=["a: T", "b: T"],
    outputs=["product: T"],
    attrs=[
        "transpose_a: bool = false",
        "transpose_b: bool = false",
        "T: {" + ", ".join(_MATMUL_TYPES) + "}",
        "grad_a: bool = false",
        "grad_b: bool = false",
    ],
    shape_fn=lambda ctx: _matmul_shape(ctx),
    doc="""The matrix product a @ b of two rank-2 tensors, transposing a and/or b first.

transpose_a/transpose_b transpose without conjugating. grad_a/grad_b are hints TF's gradient
graphs set; they change nothing. float16/bfloat16 accumulate in float32; integers wrap.""",
)


def _matmul_shape(ctx: InferenceContext) -> TensorShape:
    a = ctx.input_shapes[0].with_rank(2)
    b = ctx.input_shapes[1].with_rank(2)
    ta, tb = ctx.attr("transpose_a"), ctx.attr("transpose_b")
    merge_dim(a[0] if ta else a[1], b[1] if tb else b[0], "Dimensions")
    return TensorShape([a[1] if ta else a[0], b[0] if tb else b[1]])


def _product_into(ctx: KernelContext, x: Any, y: Any, shape: tuple, dtype: np.dtype) -> Any:
    """x @ y (numpy's batch broadcasting) as a new array of `shape` and `dtype`: one matmul
    into `ctx.empty` memory. Half types multiply in float32 and are rounded once, as TF's CPU
    kernels accumulate them: numpy's own float16 matmul gives the same values but runs no BLAS
    (15x slower at 256x256), and cupy's may accumulate in float16."""
    xp = ctx.xp
    if dtype.name in _HALF_TYPES:
        return _rounded_into(ctx, xp.matmul(x.astype(_F32), y.astype(_F32)), dtype)
    return xp.matmul(x, y, out=ctx.empty(shape, dtype))


def _matmul_kernel(
    ctx: KernelContext, a: Any, b: Any, *, transpose_a: bool, transpose_b: bool, **_
):
    if a.ndim != b.ndim:
        raise ctx.invalid_argument(
            f"In[0] and In[1] has different ndims: {_shape_text(a.shape)} vs. "
            f"{_shape_text(b.shape)}"
        )
    if a.ndim != 2:
        raise ctx.invalid_argument(f"In[0] and In[1] ndims must be == 2: {a.ndim}")
    x = a.T if transpose_a else a
    y = b.T if transpose_b else b
    if x.shape[1] != y.shape[0]:
        raise ctx.invalid_argument(
            f"Matrix size-incompatible: In[0]: {_shape_text(a.shape)}, In[1]: "
            f"{_shape_text(b.shape)}"
        )
    return _product_into(ctx, x, y, (x.shape[0], y.shape[1]), a.dtype)


# Outputs at least this large are written into `ctx.empty` (pooled memory, no page faults: 0.1
# ms per MiB, 4% of a 512x512x512 product); smaller ones come from numpy, as the pool's do.
_POOLED_BYTES = 1 << 20


def _matmul_specialize(spec: KernelSpec) -> Any:
    """Host nodes whose operands are known to be matrices: a small product of known shape runs
    as one inlined `np.matmul` call (no Python frame: what numpy's `@` costs), a larger or
    transposed one as one matmul into pooled memory; half types keep the kernel."""
    a, b = spec.input_shapes
    dtype = spec.input_dtypes[0].np_dtype
    if spec.ctx.xp is not np or a.rank != 2 or b.rank != 2 or dtype.name in _HALF_TYPES:
        return None
    ta, tb = spec.attrs["transpose_a"], spec.attrs["transpose_b"]
    general, ctx = spec.general, spec.ctx
    rows, cols = (a[1] if ta else a[0]), (b[0] if tb else b[1])
    small = rows is not None and cols is not None and rows * cols * dtype.itemsize < _POOLED_BYTES
    if not ta and not tb and small:
        # Shapes that do not multiply make np.matmul raise: the kernel then gives TF's error.
        return InlineCall(np.matmul, general, Input(0), Input(1))

    def matmul_2d(x: Any, y: Any) -> Any:
        p = x.T if ta else x
        q = y.T if tb else y
        if p.shape[1] != q.shape[0]:
            return general(x, y)
        return np.matmul(p, q, out=ctx.empty((p.shape[0], q.shape[1]), dtype))

    return matmul_2d


# -- BatchMatMulV2 ---------------------------------------------------------------------------------

_BATCH_MATMUL_TYPES = [
    "bfloat16", "float16", "float32", "float64", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "complex64", "complex128",
]  # fmt: skip
_BATCH_MATMUL_KERNEL_TYPES = [
    "bfloat16", "float16", "float32", "float64", "int16", "int32", "int64", "complex64",
    "complex128",
]  # fmt: skip

BATCH_MATMUL_V2 = OpDef(
    "BatchMatMulV2",
    inputs=["x: T", "y: T"],
    outputs=["output: T"],
    attrs=[
        "T: {" + ", ".join(_BATCH_MATMUL_TYPES) + "}",
        "adj_x: bool = false",
        "adj_y: bool = false",
        "grad_x: bool = false",
        "grad_y: bool = false",
    ],
    shape_fn=lambda ctx: _batch_matmul_shape(ctx),
    doc="""Matrix products over the last two dims of x and y (rank >= 2 each), their batch dims
broadcast as numpy does: output[..., i, j] = sum_k x[..., i, k] * y[..., k, j].

adj_x/adj_y take the conjugate transpose of the last two dims first. grad_x/grad_y are hints TF's
gradient graphs set; they change nothing. float16/bfloat16 accumulate in float32.""",
)


def _batch_matmul_shape(ctx: InferenceContext) -> TensorShape:
    """TF's BatchMatMulV2Shape."""
    a = ctx.input_shapes[0].with_rank_at_least(2)
    b = ctx.input_shapes[1].with_rank_at_least(2)
    adj_x, adj_y = ctx.attr("adj_x"), ctx.attr("adj_y")
    merge_dim(a[-2] if adj_x else a[-1], b[-1] if adj_y else b[-2], "Dimensions")
    batch = broadcast_shape(a[:-2], b[:-2])
    if batch.rank is None:
        return TensorShape(None)
    rows, cols = (a[-1] if adj_x else a[-2]), (b[-2] if adj_y else b[-1])
    return TensorShape(list(batch.dims) + [rows, cols])


def _adjoint(xp: Any, x: Any) -> Any:
    """The conjugate transpose of the last two dims (a view for real types)."""
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    if x.dtype.kind == "c":
        x = xp.conj(x)
    return x.transpose(perm)


def _batch_matmul_kernel(ctx: KernelContext, x: Any, y: Any, *, adj_x: bool, adj_y: bool, **_):
    for i, v in enumerate((x, y)):
        if v.ndim < 2:
            raise ctx.invalid_argument(f"In[{i}] ndims must be >= 2: {v.ndim}")
    batch = _host_shapes_broadcast(x.shape[:-2], y.shape[:-2])
    if batch is None:
        raise ctx.invalid_argument(
            f"In[0] and In[1] must have compatible batch dimensions: {_shape_text(x.shape)} vs. "
            f"{_shape_text(y.shape)}"
        )
    a = _adjoint(ctx.xp, x) if adj_x else x
    b = _adjoint(ctx.xp, y) if adj_y else y
    if a.shape[-1] != b.shape[-2]:
        raise ctx.invalid_argument(
            f"Matrix size-incompatible: In[0]: {_shape_text(x.shape)}, In[1]: "
            f"{_shape_text(y.shape)}"
        )
    return _product_into(ctx, a, b, batch + (a.shape[-2], b.shape[-1]), x.dtype)


# -- Softmax, LogSoftmax ---------------------------------------------------------------------------

_SOFTMAX_TYPES = ["float16", "bfloat16", "float32", "float64"]


def _softmax_op_def(name: str, output: str, doc: str) -> OpDef:
    return OpDef(
        name,
        inputs=["logits: T"],
        outputs=[f"{output}: T"],
        attrs=["T: {" + ", ".join(_SOFTMAX_TYPES) + "}"],
        shape_fn=lambda ctx: ctx.input_shapes[0].with_rank_at_least(1),
        doc=doc
        + "\n\nAlong the last dim of logits (rank >= 1), from logits - max(logits): stable for "
        "large values.",
    )


SOFTMAX = _softmax_op_def("Softmax", "softmax", "exp(logits) / sum(exp(logits)).")
LOG_SOFTMAX = _softmax_op_def("LogSoftmax", "logsoftmax", "logits - log(sum(exp(logits))).")


def _max_last(xp: Any, x: Any) -> Any:
    """The maximum along the last dim (kept, as 1): numpy's C reduce method on the host (no
    Python wrapper), cupy's max on a GPU."""
    if xp is np:
        return np.maximum.reduce(x, -1, None, None, True)
    return xp.max(x, axis=-1, keepdims=True)


def _sum_last(xp: Any, x: Any) -> Any:
    """The sum along the last dim (kept, as 1), accumulated in float32 for float16/bfloat16
    and rounded once."""
    half = x.dtype.name in _HALF_TYPES
    accumulate = _F32 if half else None
    if xp is np:
        total = np.add.reduce(x, -1, accumulate, None, True)
    else:
        total = xp.sum(x, axis=-1, dtype=accumulate, keepdims=True)
    return total.astype(x.dtype) if half else total


def _shifted_exp(ctx: KernelContext, x: Any) -> tuple[Any, Any, Any]:
    """(x - max, exp(x - max), the sum of the exponentials) along the last dim (kept), each
    rounded in x's dtype as TF's kernels compute; the first two in new arrays."""
    xp = ctx.xp
    shifted = ctx.empty(x.shape, x.dtype)
    xp.subtract(x, _max_last(xp, x), out=shifted)
    e = xp.exp(shifted)
    return shifted, e, _sum_last(xp, e)


def _check_logits(ctx: KernelContext, logits: Any) -> None:
    if logits.ndim < 1:
        raise ctx.invalid_argument(
            f"logits must have >= 1 dimension, got {_shape_text(logits.shape)}"
        )


def _softmax_kernel(ctx: KernelContext, logits: Any, **_: Any) -> Any:
    _check_logits(ctx, logits)
    xp = ctx.xp
    out = ctx.empty(logits.shape, logits.dtype)
    if logits.size == 0:
        return out
    xp.subtract(logits, _max_last(xp, logits), out=out)
    xp.exp(out, out=out)
    # TF multiplies by the reciprocal of the sum (not a division): the same last bits.
    total = _sum_last(xp, out)
    return xp.multiply(out, xp.true_divide(1, total, out=total), out=out)


def _log_softmax_kernel(ctx: KernelContext, logits: Any, **_: Any) -> Any:
    _check_logits(ctx, logits)
    xp = ctx.xp
    out = ctx.empty(logits.shape, logits.dtype)
    if logits.size == 0:
        return out
    xp.subtract(logits, _max_last(xp, logits), out=out)
    total = _sum_last(xp, xp.exp(out))
    return xp.subtract(out, xp.log(total, out=total), out=out)


# -- SparseSoftmaxCrossEntropyWithLogits -----------------------------------------------------------

SPARSE_XENT = OpDef(
    "SparseSoftmaxCrossEntropyWithLogits",
    inputs=["features: T", "labels: Tlabels"],
    outputs=["loss: T", "backprop: T"],
    attrs=["T: {" + ", ".join(_SOFTMAX_TYPES) + "}", "Tlabels: {int32, int64} = int64"],
    shape_fn=lambda ctx: _sparse_xent_shape(ctx),
    doc="""Softmax cross-entropy of logits `features` [batch, classes] against class indices
`labels` [batch]: loss [batch] and its gradient `backprop` (softmax - one_hot) [batch, classes].

Every label must lie in [0, classes) (an error on every device); classes must be at least 1.""",
)


def _label_error(labels: np.ndarray, classes: int) -> str | None:
    """TF's CheckInvalidLabelIndex message for labels (host values) outside [0, classes)."""
    if labels.size == 0:
        return None
    low, high = int(labels.min()), int(labels.max())
    if low >= 0 and high < classes:
        return None
    bad = low if low < 0 else high
    values = " ".join(str(v) for v in labels.reshape(-1).tolist())
    return (
        f"Received a label value of {bad} which is outside the valid range of [0, {classes}).  "
        f"Label values: {values}"
    )


def _no_class_error(shape: Any) -> str:
    return f"Must have at least one class, but got logits shape {_shape_text(shape)}"


def _sparse_xent_shape(ctx: InferenceContext) -> list[TensorShape]:
    features = ctx.input_shapes[0].with_rank(2)
    labels = ctx.input_shapes[1].with_rank(1)
    batch = merge_dim(features[0], labels[0], "Dimensions")
    classes = features[1]
    if classes == 0:
        raise InvalidArgumentError(_no_class_error(features))
    values = ctx.constant_value(1)
    if values is not None and classes is not None:
        message = _label_error(values, classes)
        if message is not None:
            raise InvalidArgumentError(message)
    return [TensorShape([batch]), TensorShape([batch, classes])]


def _sparse_xent_kernel(ctx: KernelContext, features: Any, labels: Any, **_: Any) -> Any:
    xp = ctx.xp
    if features.ndim != 2:
        raise ctx.invalid_argument(
            f"logits must be 2-D, but got shape {_shape_text(features.shape)}"
        )
    if labels.ndim != 1:
        raise ctx.invalid_argument(f"labels must be 1-D, but got shape {_shape_text(labels.shape)}")
    if features.shape[0] != labels.shape[0]:
        raise ctx.invalid_argument(
            "logits and labels must have the same first dimension, got logits shape "
            f"{_shape_text(features.shape)} and labels shape {_shape_text(labels.shape)}"
        )
    batch, classes = features.shape
    if classes == 0:
        raise ctx.invalid_argument(_no_class_error(features.shape))
    if labels.size:
        # TF's GPU kernel gives NaN for such labels; every device here raises as its CPU one.
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= classes:
            host = labels if xp is np else labels.get()
            raise ctx.invalid_argument(_label_error(host, classes))
    shifted, e, total = _shifted_exp(ctx, features)
    rows = xp.arange(batch)
    # TF: loss = log(sum) - (x - max)[label]; backprop = exp(x - max) / sum - one_hot.
    loss = xp.log(total).reshape(batch) - shifted[rows, labels]
    backprop = xp.divide(e, total, out=e)
    backprop[rows, labels] -= 1
    return loss, backprop


# -- SoftmaxCrossEntropyWithLogits -----------------------------------------------------------------

XENT = OpDef(
    "SoftmaxCrossEntropyWithLogits",
    inputs=["features: T", "labels: T"],
    outputs=["loss: T", "backprop: T"],
    attrs=["T: {" + ", ".join(_SOFTMAX_TYPES) + "}"],
    shape_fn=lambda ctx: _xent_shape(ctx),
    doc="""Softmax cross-entropy of logits `features` against probability rows `labels`: loss
[batch] and its gradient `backprop` (softmax - labels) [batch, classes].

features and labels broadcast to one [batch, classes] shape.""",
)


def _xent_shape(ctx: InferenceContext) -> list[TensorShape]:
    """TF 2.21's SoftmaxCrossEntropyWithLogits shape function."""
    features, labels = ctx.input_shapes
    if features.rank in (None, 2) and (
        labels.rank is None or labels.is_compatible_with(features.with_rank(2))
    ):
        merged = features.with_rank(2).merge_with(labels)
        return [TensorShape([merged[0]]), merged]
    shape = broadcast_shape(features, labels)
    if shape.rank is None:
        raise InvalidArgumentError("Shape must be broadcasted with rank 2, but is rank is unknown.")
    if shape.rank != 2:
        raise InvalidArgumentError(
            f"Shape must be broadcasted with rank 2, but is rank {shape.rank}"
        )
    return [TensorShape([shape[0]]), shape]


def _xent_kernel(ctx: KernelContext, features: Any, labels: Any, **_: Any) -> Any:
    xp = ctx.xp
    shape = features.shape
    if features.shape != labels.shape:
        shape = _host_shapes_broadcast(features.shape, labels.shape)
        if shape is None:
            raise ctx.invalid_argument(
                f"logits and labels must be broadcastable: logits_size="
                f"{_shape_text(features.shape)} labels_size={_shape_text(labels.shape)}"
            )
    if len(shape) != 2:
        raise ctx.invalid_argument(
            "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional"
        )
    dtype = features.dtype
    if shape[1] == 0:  # no classes: nothing to normalise (TF gives zero losses)
        loss = ctx.empty((shape[0],), dtype)
        loss.fill(0)
        return loss, ctx.empty(shape, dtype)
    shifted, e, total = _shifted_exp(ctx, xp.broadcast_to(features, shape))
    # TF: loss = sum(labels * (log(sum) - (x - max))); backprop = exp(x - max) / sum - labels.
    loss = _sum_last(xp, labels * (xp.log(total) - shifted)).reshape(shape[0])
    backprop = xp.divide(e, total, out=e)
    return loss, xp.subtract(backprop, labels, out=backprop)


# -- L2Loss ----------------------------------------------------------------------------------------

L2_LOSS = OpDef(
    "L2Loss",
    inputs=["t: T"],
    outputs=["output: T"],
    attrs=["T: {" + ", ".join(_SOFTMAX_TYPES) + "}"],
    shape_fn=lambda ctx: TensorShape([]),
    doc="sum(t ** 2) / 2 over every element of t, as a scalar (half the squared L2 norm).",
)


def _l2_loss_kernel(ctx: KernelContext, t: Any, **_: Any) -> Any:
    xp = ctx.xp
    dtype = t.dtype
    out = ctx.empty((), dtype)
    if dtype.name in _HALF_TYPES:
        # TF squares and halves in the type itself (a float16 300**2 overflows to inf, silently).
        with np.errstate(all="ignore"):
            half = xp.multiply(xp.multiply(t, t), dtype.type(0.5))
            xp.copyto(out, xp.sum(half, dtype=_F32), casting="unsafe")  # summed in float32
        return out
    flat = t.reshape(-1)
    # One BLAS dot product (matmul of two vectors): the sum of squares, halved exactly.
    xp.multiply(xp.matmul(flat, flat), dtype.type(0.5), out=out)
    return out


# -- BiasAdd ---------------------------------------------------------------------------------------

_BIAS_ADD_TYPES = [
    "float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "int64", "bfloat16",
    "uint16", "complex128", "float16", "uint32", "uint64",
]  # fmt: skip

BIAS_ADD = OpDef(
    "BiasAdd",
    inputs=["value: T", "bias: T"],
    outputs=["output: T"],
    attrs=["T: {" + ", ".join(_BIAS_ADD_TYPES) + "}", 'data_format: {"NHWC", "NCHW"} = "NHWC"'],
    shape_fn=lambda ctx: _bias_add_shape(ctx),
    doc="""value + bias, the 1-D bias added along the channel dim of value: its last dim
(data_format NHWC) or dim 1 (NCHW). Integers wrap around.""",
)


def _bias_add_shape(ctx: InferenceContext) -> TensorShape:
    """TF's BiasAddShape."""
    nchw = ctx.attr("data_format") == "NCHW"
    value = ctx.input_shapes[0].with_rank_at_least(3 if nchw else 2)
    bias = ctx.input_shapes[1].with_rank(1)
    if value.rank is None:
        return TensorShape(None)
    dims = list(value.dims)
    channel = 1 if nchw else -1
    dims[channel] = merge_dim(dims[channel], bias[0], "Dimensions")
    return TensorShape(dims)


def _bias_add_kernel(ctx: KernelContext, value: Any, bias: Any, *, data_format: str, **_):
    if value.ndim < 2:
        raise ctx.invalid_argument(f"Input tensor must be at least 2D: {_shape_text(value.shape)}")
    if bias.ndim != 1:
        raise ctx.invalid_argument(f"Biases must be 1D: {_shape_text(bias.shape)}")
    channel = 1 if data_format == "NCHW" else value.ndim - 1
    if bias.shape[0] != value.shape[channel]:
        raise ctx.invalid_argument(
            "Must provide as many biases as the last dimension of the input tensor: "
            f"{_shape_text(bias.shape)} vs. {_shape_text(value.shape)}"
        )
    if channel != value.ndim - 1:
        bias = bias.reshape((bias.shape[0],) + (1,) * (value.ndim - 2))
    out = ctx.forward_input_or_empty(0, value, value.shape, value.dtype)
    return ctx.xp.add(value, bias, out=out)


# -- BiasAddGrad -----------------------------------------------------------------------------------

BIAS_ADD_GRAD = OpDef(
    "BiasAddGrad",
    inputs=["out_backprop: T"],
    outputs=["output: T"],
    attrs=["T: {" + ", ".join(_BIAS_ADD_TYPES) + "}", 'data_format: {"NHWC", "NCHW"} = "NHWC"'],
    shape_fn=lambda ctx: _bias_add_grad_shape(ctx),
    doc="""BiasAdd's gradient with respect to its bias: `out_backprop` summed over every dim but
the channel dim (the last for data_format NHWC, dim 1 for NCHW), a vector. float16/bfloat16 sum
in float32 and are rounded once, as TF; integers wrap around.""",
)


def _bias_add_grad_shape(ctx: InferenceContext) -> TensorShape:
    """TF's BiasAddGradShape."""
    nchw = ctx.attr("data_format") == "NCHW"
    value = ctx.input_shapes[0].with_rank_at_least(3 if nchw else 2)
    if value.rank is None:
        return TensorShape([None])
    return TensorShape([value[1] if nchw else value[-1]])


def _bias_add_grad_kernel(ctx: KernelContext, out_backprop: Any, *, data_format: str, **_):
    x = out_backprop
    if x.ndim < 2:
        raise ctx.invalid_argument(f"Input tensor must be at least 2D: {_shape_text(x.shape)}")
    channel = 1 if data_format == "NCHW" else x.ndim - 1
    axes = tuple(i for i in range(x.ndim) if i != channel)
    dtype = x.dtype
    out = ctx.empty((x.shape[channel],), dtype)
    xp = ctx.xp
    if dtype.name in _HALF_TYPES:  # TF accumulates half types in float32
        with np.errstate(all="ignore"):
            xp.copyto(out, xp.sum(x, axis=axes, dtype=_F32), casting="unsafe")
        return out
    if xp is np:
        return np.add.reduce(x, axes, dtype, out)
    return xp.sum(x, axis=axes, dtype=dtype, out=out)


# -- gradient rules --------------------------------------------------------------------------------
# TF's rules (tensorflow/python/ops/math_grad.py, nn_grad.py), built under the scope the
# gradient machinery makes current. A rule's gradient for a complex input is conjugated as TF's
# are (grad = dL/d(re y) + i dL/d(im y), and the same for the inputs).


def _s(op: Any) -> Any:
    return current_scope(op.graph)


def _conj(scope: Any, t: Any) -> Any:
    """TF's math_ops.conj: the complex conjugate; the tensor itself for real dtypes."""
    return Conj(scope, t).output if t.dtype.is_complex else t


def _product_grads(
    product: Any, scope: Any, grad: Any, a: Any, b: Any, case: tuple[bool, bool], attrs: tuple
) -> tuple[Any, Any]:
    """The two products of TF's _MatMulGrad and _BatchMatMulV2 for the forward op's case
    (transpose or adjoint of a, of b): `attrs` names the op's (a-flag, b-flag, grad-a mark,
    grad-b mark) attrs, so one table serves MatMul and BatchMatMulV2."""
    flag_a, flag_b, mark_a, mark_b = attrs
    # (left, right, flag of left, flag of right) of the product giving each input's gradient.
    ga, gb = {
        (False, False): ((grad, b, False, True), (a, grad, True, False)),
        (False, True): ((grad, b, False, False), (grad, a, True, False)),
        (True, False): ((b, grad, False, True), (a, grad, False, False)),
        (True, True): ((b, grad, True, True), (grad, a, True, True)),
    }[case]
    grad_a = product(scope, ga[0], ga[1], **{flag_a: ga[2], flag_b: ga[3], mark_a: True})
    grad_b = product(scope, gb[0], gb[1], **{flag_a: gb[2], flag_b: gb[3], mark_b: True})
    return grad_a, grad_b


def _matmul_grad(op: Any, grad: Any) -> tuple[Any, Any]:
    """TF's _MatMulGrad: a MatMul per input, with the transposes of the forward op's case (the
    inputs conjugated for complex types; grad_a/grad_b set, as TF)."""
    scope = _s(op)
    a, b = _conj(scope, op.inputs[0]), _conj(scope, op.inputs[1])
    case = (op.get_attr("transpose_a"), op.get_attr("transpose_b"))
    attrs = ("transpose_a", "transpose_b", "grad_a", "grad_b")
    grad_a, grad_b = _product_grads(MatMul, scope, grad, a, b, case, attrs)
    return grad_a.output, grad_b.output


def _batch_matmul_v2_grad(op: Any, grad: Any) -> tuple[Any, Any]:
    """TF's _BatchMatMulV2: a BatchMatMulV2 per input with the adjoints of the forward op's
    case, then each summed over the batch dims it was broadcast along (from the static shapes
    where they decide it, else Shape + BroadcastGradientArgs + Sum + Reshape at run time)."""
    scope = _s(op)
    x, y = op.inputs
    case = (op.get_attr("adj_x"), op.get_attr("adj_y"))
    attrs = ("adj_x", "adj_y", "grad_x", "grad_y")
    grad_x, grad_y = _product_grads(BatchMatMulV2, scope, grad, x, y, case, attrs)
    return sum_to(grad_x, x), sum_to(grad_y, y)


def _softmax_grad(op: Any, grad: Any) -> Any:
    """TF's _SoftmaxGrad: (grad - sum(grad * softmax)) * softmax, along the last dim."""
    scope = _s(op)
    softmax = op.outputs[0]
    channels = Sum(scope, Mul(scope, grad, softmax), np.int32(-1), keep_dims=True)
    return Mul(scope, Sub(scope, grad, channels), softmax).output


def _log_softmax_grad(op: Any, grad: Any) -> Any:
    """TF's _LogSoftmaxGrad: grad - sum(grad) * softmax, along the last dim."""
    scope = _s(op)
    softmax = Exp(scope, op.outputs[0])
    total = Sum(scope, grad, np.int32(-1), keep_dims=True)
    return Sub(scope, grad, Mul(scope, total, softmax)).output


def _is_unused(grad: Any, output: Any) -> bool:
    """Whether `grad` is the zeros the gradient machinery gives an output nothing used (TF's
    `_is_zeros_tensor`): the rules then skip the second-order term."""
    source = grad.op
    return source.type == "ZerosLike" and source.inputs[0] is output


def _broadcast_features(scope: Any, op: Any) -> Any:
    """The cross-entropy's features as the kernel saw them: broadcast to the backprop's
    [batch, classes] shape (a BroadcastTo where the static shapes do not show them equal)."""
    features, backprop = op.inputs[0], op.outputs[1]
    if features.shape.is_fully_defined() and features.shape == backprop.shape:
        return features
    if backprop.shape.is_fully_defined():
        shape: Any = np.array(backprop.shape.dims, np.int32)
    else:
        shape = Shape(scope, backprop).output
    return BroadcastTo(scope, features, shape).output


def _xent_logits_grad(op: Any, grad_loss: Any, grad_grad: Any, features: Any) -> Any:
    """The cross-entropies' gradient with respect to the (broadcast) logits, TF's:
    grad_loss[:, None] * backprop, plus, when the backprop output itself received a gradient
    (a second derivative), that gradient through the softmax: (gg - sum(gg * p)) * p (TF
    takes the sum as a batched matmul)."""
    scope = _s(op)
    grad = Mul(scope, ExpandDims(scope, grad_loss, np.int32(-1)), op.outputs[1]).output
    if grad_grad is not None and not _is_unused(grad_grad, op.outputs[1]):
        softmax = Softmax(scope, features).output
        dot = Sum(scope, Mul(scope, grad_grad, softmax), np.int32(-1), keep_dims=True)
        grad = AddV2(scope, grad, Mul(scope, Sub(scope, grad_grad, dot), softmax)).output
    return grad


def _sparse_xent_grad(op: Any, grad_loss: Any, grad_grad: Any) -> tuple[Any, None]:
    """TF's _SparseSoftmaxCrossEntropyWithLogitsGrad; the labels have none."""
    return _xent_logits_grad(op, grad_loss, grad_grad, op.inputs[0]), None


def _xent_grad(op: Any, grad_loss: Any, grad_grad: Any) -> tuple[Any, Any]:
    """TF's _SoftmaxCrossEntropyWithLogitsGrad (labels: grad_loss[:, None] * -log_softmax),
    with corrections where TF's rule is wrong: the softmax terms are of the features broadcast
    as the kernel broadcast them, the labels also get -grad_grad when the backprop output
    (softmax - labels) received a gradient, and each gradient is summed back to its input's
    shape where features and labels were broadcast (TF's rule returns the broadcast shape,
    which its machinery then refuses).

    The features' gradient is TF's, grad_loss[:, None] * backprop: the loss's derivative when
    each row of labels sums to 1."""
    scope = _s(op)
    features, labels = op.inputs
    logits = _broadcast_features(scope, op)
    grad = _xent_logits_grad(op, grad_loss, grad_grad, logits)
    minus_log = Neg(scope, LogSoftmax(scope, logits))
    grad_labels = Mul(scope, ExpandDims(scope, grad_loss, np.int32(-1)), minus_log).output
    if grad_grad is not None and not _is_unused(grad_grad, op.outputs[1]):
        grad_labels = Sub(scope, grad_labels, grad_grad).output
    return sum_to(grad, features), sum_to(grad_labels, labels)


def _l2_loss_grad(op: Any, grad: Any) -> Any:
    """TF's _L2LossGrad: t * grad."""
    return Mul(_s(op), op.inputs[0], grad).output


def _bias_add_grad(op: Any, grad: Any) -> tuple[Any, Any]:
    """TF's _BiasAddGrad: grad itself for the value, BiasAddGrad(grad) for the bias."""
    data_format = op.get_attr("data_format")
    return grad, BiasAddGrad(_s(op), grad, data_format=data_format).output


def _bias_add_grad_grad(op: Any, grad: Any) -> Any:
    """TF's _BiasAddGradGrad: the bias gradient's gradient spread back over the channel dim
    of out_backprop. NHWC (and NCHW of rank 2): the channel dim is the last, so numpy-style
    broadcasting of the vector is the spread; NCHW: reshaped to [C, 1, ..., 1] first (by TF's
    construction from Shape(x) when the rank is unknown)."""
    scope = _s(op)
    x = op.inputs[0]
    rank = x.shape.rank
    if x.shape.is_fully_defined():
        shape: Any = np.array(x.shape.dims, np.int32)
    else:
        shape = Shape(scope, x).output
    if op.get_attr("data_format") == "NCHW":
        if rank is None:
            # TF's: Tile(Reshape(grad, [1, C, 1, ...]), [N, 1, H, ...]).
            head = Slice(scope, shape, [0], [1]).output
            tail = Slice(scope, shape, [2], [-1]).output
            expanded = ConcatV2(
                scope, [OnesLike(scope, head), Shape(scope, grad), OnesLike(scope, tail)], 0
            )
            multiples = ConcatV2(scope, [head, np.array([1], np.int32), tail], 0)
            return Tile(scope, Reshape(scope, grad, expanded), multiples).output
        if rank > 2:
            grad = Reshape(scope, grad, np.array([-1] + [1] * (rank - 2), np.int32)).output
    return BroadcastTo(scope, grad, shape).output


# -- registration ----------------------------------------------------------------------------------

# Each op, then its gradient rule (TF's).
MatMul = register_op(MATMUL)
register_gradient("MatMul")(_matmul_grad)
BatchMatMulV2 = register_op(BATCH_MATMUL_V2)
register_gradient("BatchMatMulV2")(_batch_matmul_v2_grad)
Softmax = register_op(SOFTMAX)
register_gradient("Softmax")(_softmax_grad)
LogSoftmax = register_op(LOG_SOFTMAX)
register_gradient("LogSoftmax")(_log_softmax_grad)
SparseSoftmaxCrossEntropyWithLogits = register_op(SPARSE_XENT)
register_gradient("SparseSoftmaxCrossEntropyWithLogits")(_sparse_xent_grad)
SoftmaxCrossEntropyWithLogits = register_op(XENT)
register_gradient("SoftmaxCrossEntropyWithLogits")(_xent_grad)
L2Loss = register_op(L2_LOSS)
register_gradient("L2Loss")(_l2_loss_grad)
BiasAdd = register_op(BIAS_ADD)
register_gradient("BiasAdd")(_bias_add_grad)
BiasAddGrad = register_op(BIAS_ADD_GRAD)
register_gradient("BiasAddGrad")(_bias_add_grad_grad)

# Trusted (no per-run output checks, fed arrays passed as they are): every kernel returns new
# arrays (ctx.empty or fresh numpy results) of the inferred dtype and shape, never a view of an
# input; BiasAdd returns its input itself only when the plan lets it overwrite it
# (tests/test_reduction_nn_trust.py checks every dtype on both devices).
_KERNELS = [
    ("MatMul", _matmul_kernel, _MATMUL_KERNEL_TYPES),
    ("BatchMatMulV2", _batch_matmul_kernel, _BATCH_MATMUL_KERNEL_TYPES),
    ("Softmax", _quietly(_softmax_kernel), _SOFTMAX_TYPES),
    ("LogSoftmax", _quietly(_log_softmax_kernel), _SOFTMAX_TYPES),
    ("SparseSoftmaxCrossEntropyWithLogits", _quietly(_sparse_xent_kernel), _SOFTMAX_TYPES),
    ("SoftmaxCrossEntropyWithLogits", _quietly(_xent_kernel), _SOFTMAX_TYPES),
    ("L2Loss", _l2_loss_kernel, _SOFTMAX_TYPES),
    ("BiasAdd", _bias_add_kernel, _BIAS_ADD_TYPES),
    ("BiasAddGrad", _bias_add_grad_kernel, _BIAS_ADD_TYPES),
]
for _op, _fn, _types in _KERNELS:
    _special = _matmul_specialize if _op == "MatMul" else None
    register_kernel(
        _op, "CPU", _fn, type_constraints={"T": _types}, trusted=True, specialize=_special
    )
    register_kernel(_op, "GPU", _fn, type_constraints={"T": _gpu(_types)}, trusted=True)
del _op, _fn, _types, _special
