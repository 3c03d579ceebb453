"""Run-time checks with TensorFlow's ops: Assert and EnsureShape.

`Assert(scope, condition, data, summarize=3)` is TF's Assert (tf.debugging.Assert's op): a
stateful op without outputs that raises InvalidArgumentError, `assertion failed: [d0] [d1]
...`, when the scalar `condition` is false, each `data` tensor summarised as TF's
`Tensor::SummarizeValue` writes it (at most `summarize` elements, then `...`; nested brackets
for rank >= 2; bools as 1/0, floats in the shortest of 6 and 9 significant digits (15 and 17
for float64), strings as they are, complex as `?`). Other nodes run after it through control
dependencies (`scope.with_control_dependencies(assert_op)`), as in TF.

`EnsureShape(scope, input, shape)` is TF's EnsureShape: `input` itself, whose static shape
becomes the most specific shape compatible with both; a value whose shape is not compatible
with `shape` raises at run time.

Stricter than TF: a `condition` whose static shape is known to hold other than one element is
refused when the node is built (TF's shape function accepts it and its kernel raises "In[0]
should be a scalar"); so is an EnsureShape whose input's static shape contradicts `shape`.
Both are as TF's otherwise, so graphs using them import into TensorFlow and run there.
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
    no_gradient,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext

__all__ = ["Assert", "EnsureShape", "summarize_value"]

ASSERT = OpDef(
    "Assert",
    inputs=["condition: bool", "data: T"],
    attrs=["T: list(type) >= 1", "summarize: int = 3"],
    shape_fn=lambda ctx: _assert_shape(ctx),
    is_stateful=True,
    doc="""Asserts that `condition` (one bool) is true; if false, raises InvalidArgumentError
`assertion failed: [data[0]] [data[1]] ...`, each data tensor showing at most `summarize`
elements.""",
)

ENSURE_SHAPE = OpDef(
    "EnsureShape",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["shape: shape", "T: type"],
    shape_fn=lambda ctx: _ensure_shape_shape(ctx),
    doc="""`input`, checked at run time to have a shape compatible with `shape`; its static
shape is the most specific shape compatible with both.""",
)


def _assert_shape(ctx: InferenceContext) -> list[Any]:
    condition = ctx.input_shapes[0]
    if condition.is_fully_defined() and condition.num_elements() != 1:
        raise InvalidArgumentError(f"In[0] should be a scalar: {condition}")
    return []


def _ensure_shape_shape(ctx: InferenceContext) -> TensorShape:
    expected = ctx.attr("shape")
    given = ctx.input_shapes[0]
    if not given.is_compatible_with(expected):
        raise InvalidArgumentError(
            f"Shape of tensor {given} is not compatible with expected shape {expected}."
        )
    return given.merge_with(expected)


# -- TF's Tensor::SummarizeValue -----------------------------------------------------------------


def _float_text(value: float, digits: int, exact: int, narrow: Any) -> str:
    """TF's FloatToBuffer / DoubleToBuffer: %g with `digits` significant digits when that reads
    back to the same value, else with `exact`."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    text = f"{value:.{digits}g}"
    if narrow(float(text)) != narrow(value):
        text = f"{value:.{exact}g}"
    return text


def _element_texts(flat: np.ndarray) -> list[str]:
    kind = flat.dtype.kind
    if kind == "b":
        return ["1" if v else "0" for v in flat.tolist()]
    if kind in "iu":
        return [str(v) for v in flat.tolist()]
    if kind == "f" or flat.dtype.name == "bfloat16":
        if flat.dtype == np.float64:
            return [_float_text(v, 15, 17, float) for v in flat.tolist()]
        # float32, and float16 / bfloat16 printed as the float32 they convert to (as TF does).
        return [_float_text(v, 6, 9, np.float32) for v in flat.astype(np.float32).tolist()]
    if kind == "O":
        return [
            v.decode("utf-8", errors="backslashreplace") if isinstance(v, bytes) else str(v)
            for v in flat.tolist()
        ]
    return ["?"] * flat.size  # complex: TF prints no value


def summarize_value(value: Any, max_entries: int = 3) -> str:
    """`value` as TF's `Tensor::SummarizeValue(max_entries)` writes it (what Assert shows):
    at most `max_entries` elements (all when negative), C order, `...` when some are left out;
    a scalar or vector as its elements separated by spaces, higher ranks in nested brackets
    (`[[1 2][3 4]]`)."""
    array = np.asarray(value)
    count = array.size
    if max_entries < 0:
        max_entries = count
    limit = min(max_entries, count)
    # Per-element formatting, at most `limit` elements of a small message: TF's own loop.
    texts = _element_texts(array.reshape(-1)[:limit])
    if array.dtype.kind == "c":
        return " ".join(texts) + ("..." if max_entries < count else "")
    if array.ndim == 0:
        return " ".join(texts) + ("..." if count > limit else "")
    out: list[str] = []
    position = [0]

    def one_dim(dim: int) -> None:
        if position[0] >= limit:
            return
        size = array.shape[dim]
        if dim == array.ndim - 1:
            for i in range(size):
                if position[0] >= limit:
                    if dim != 0:
                        out.append("...")
                    return
                if i > 0:
                    out.append(" ")
                out.append(texts[position[0]])
                position[0] += 1
            return
        for _ in range(size):
            opened = position[0] < limit
            if opened:
                out.append("[")
            one_dim(dim + 1)
            if position[0] < limit or opened:
                out.append("]")

    one_dim(0)
    return "".join(out) + ("..." if count > limit else "")


# -- kernels ---------------------------------------------------------------------------------------


def _assert_kernel(
    ctx: KernelContext, condition: Any, data: list, *, T: Any, summarize: int
) -> tuple[()]:
    # `condition` and `data` are in host memory on every device (TF's HostMemory for both).
    if condition.size != 1:
        raise ctx.invalid_argument(f"In[0] should be a scalar: {TensorShape(condition.shape)}")
    if bool(condition.reshape(-1)[0]):
        return ()
    parts = [f"[{summarize_value(d, summarize)}]" for d in data]
    raise ctx.invalid_argument("assertion failed: " + " ".join(parts))


def _ensure_shape_kernel(ctx: KernelContext, x: Any, *, shape: TensorShape, T: Any) -> Any:
    dims = shape.dims
    if dims is not None and (
        len(dims) != x.ndim or any(d is not None and d != s for d, s in zip(dims, x.shape))
    ):
        raise ctx.invalid_argument(
            f"Shape of tensor {TensorShape(x.shape)} is not compatible with expected shape {shape}."
        )
    return x


# -- registration ----------------------------------------------------------------------------------

Assert = register_op(ASSERT)
EnsureShape = register_op(ENSURE_SHAPE)

# Trusted: Assert has no outputs, EnsureShape returns its input itself (never a view of it),
# and neither writes to its inputs (tests/test_fidelity_checks.py checks both).
for _device in ("CPU", "GPU"):
    register_kernel(
        "Assert", _device, _assert_kernel, host_memory=["condition", "data"], trusted=True
    )
# cupy holds neither strings nor bfloat16: EnsureShape of those stays on the CPU.
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]
register_kernel("EnsureShape", "CPU", _ensure_shape_kernel, trusted=True)
register_kernel(
    "EnsureShape", "GPU", _ensure_shape_kernel, type_constraints={"T": _GPU_TYPES}, trusted=True
)


# Gradients (TF's): EnsureShape passes its gradient through, sparse ones as they are (the
# check is on the forward value); Assert has no outputs and is not differentiable.
def _ensure_shape_grad(op: Any, grad: Any) -> Any:
    return grad


register_gradient("EnsureShape", accepts_indexed_slices=True)(_ensure_shape_grad)
no_gradient("Assert")
