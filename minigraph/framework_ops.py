"""The framework ops the runtime itself needs: Const, Placeholder, Identity, NoOp.

They are registered through the same public API as any op library (`register_op`,
`register_kernel`), one visible call each, at the bottom of this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.builder import OpBuilder, register_op
from minigraph.errors import InvalidArgumentError, ResourceExhaustedError
from minigraph.kernel import KernelContext
from minigraph.op_def import OpDef
from minigraph.registry import no_gradient, register_gradient, register_kernel
from minigraph.scope import Scope
from minigraph.shape_inference import InferenceContext
from minigraph.tensor_shape import TensorShape

__all__ = ["Const", "Placeholder", "Identity", "NoOp"]

# -- Const ---------------------------------------------------------------------------------------

CONST = OpDef(
    "Const",
    outputs=["output: dtype"],
    attrs=["value: tensor", "dtype: type"],
    shape_fn=lambda ctx: _const_shape(ctx),
    doc="A constant tensor. Its value is known at construction, so shape functions of its "
    "consumers can read it (InferenceContext.constant_value).",
)


def _const_shape(ctx: InferenceContext) -> TensorShape:
    value, dtype = ctx.attr("value"), ctx.attr("dtype")
    # The builder derives `dtype` from the value; a NodeDef (or add_operation) may not agree.
    held = dtypes.as_dtype(value.dtype)
    if held is not dtype:
        raise InvalidArgumentError(f"attr 'dtype' is {dtype.name}; attr 'value' holds {held.name}")
    return TensorShape(value.shape)


def _const_cpu(ctx: KernelContext, *, value: np.ndarray, dtype: Any) -> np.ndarray:
    return value  # read-only: the attr value is frozen


def _const_device(ctx: KernelContext, *, value: np.ndarray, dtype: Any) -> Any:
    # Copied to the device once per plan, then reused: constants never change.
    cached = ctx.cache.get("value")
    if cached is None:
        cached = ctx.cache["value"] = ctx.device.from_host(value)
    return cached


class Const(OpBuilder):
    """`Const(scope, value, dtype=None)`: a constant from a numpy array or Python literal.

    Python literals follow tf.constant (ints int32, floats float32, str/bytes strings); with
    `dtype` the value is converted, and a lossy conversion is an error.
    """

    def __init__(self, scope: Scope, value: Any, dtype: Any = None):
        target = None if dtype is None else dtypes.as_dtype(dtype)
        try:
            array = dtypes.frozen_copy(dtypes.convert_to_array(value, target))
        except ResourceExhaustedError as e:  # a broadcast value too large to hold
            raise ResourceExhaustedError(f"Const: cannot hold its value: {e.message}") from None
        self._build(scope, [], {"value": array, "dtype": dtypes.as_dtype(array.dtype)})


# -- Placeholder ---------------------------------------------------------------------------------

PLACEHOLDER = OpDef(
    "Placeholder",
    outputs=["output: dtype"],
    attrs=["dtype: type", "shape: shape = None"],
    shape_fn=lambda ctx: ctx.attr("shape"),
    doc="A value fed at run time (Session.run feed_dict). `shape` may be partial or unknown.",
)


def _placeholder_kernel(ctx: KernelContext, *, dtype: Any, shape: Any) -> Any:
    # Plans reject unfed placeholders before running; this guards direct kernel calls.
    raise ctx.invalid_argument(
        f"You must feed a value for placeholder tensor '{ctx.node_name}' with dtype "
        f"{dtype.name} and shape {shape}"
    )


class Placeholder(OpBuilder):
    """`Placeholder(scope, dtype, shape=None)`: a tensor that must be fed at run time."""

    def __init__(self, scope: Scope, dtype: Any, shape: Any = None):
        self._build(scope, [], {"dtype": dtype, "shape": shape})


# -- Identity ------------------------------------------------------------------------------------

IDENTITY = OpDef(
    "Identity",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type"],
    shape_fn=lambda ctx: ctx.input_shapes[0],
    doc="Returns its input. Useful to name a value, or to copy it to another device.",
)


def _identity_kernel(ctx: KernelContext, x: Any, *, T: Any) -> Any:
    return x


# -- NoOp ----------------------------------------------------------------------------------------

NO_OP = OpDef("NoOp", doc="Does nothing; use it to group control dependencies.")


def _no_op_kernel(ctx: KernelContext) -> tuple[()]:
    return ()


# -- gradients -----------------------------------------------------------------------------------


def _identity_grad(op: Any, grad: Any) -> Any:
    """Identity passes its gradient through, dense or sparse (IndexedSlices)."""
    return grad


# -- registration --------------------------------------------------------------------------------

Const = register_op(CONST, builder=Const)
Placeholder = register_op(PLACEHOLDER, builder=Placeholder)
Identity = register_op(IDENTITY)
NoOp = register_op(NO_OP)

# cupy holds neither strings nor ml_dtypes' bfloat16: such values stay on the host.
_DEVICE_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]

# The framework's kernels are trusted: their outputs are checked by the test suite, not per run.
register_kernel("Const", "CPU", _const_cpu, trusted=True)
register_kernel("Const", "GPU", _const_device, type_constraints={
    "dtype": _DEVICE_TYPES}, trusted=True)  # fmt: skip
register_kernel("Placeholder", "CPU", _placeholder_kernel, trusted=True)
register_kernel("Identity", "CPU", _identity_kernel, trusted=True)
register_kernel("Identity", "GPU", _identity_kernel, type_constraints={
    "T": _DEVICE_TYPES}, trusted=True)  # fmt: skip
register_kernel("NoOp", "CPU", _no_op_kernel, trusted=True)
register_kernel("NoOp", "GPU", _no_op_kernel, trusted=True)

# Gradients (minigraph.gradients): Identity passes them through; the others have no inputs.
register_gradient("Identity", accepts_indexed_slices=True)(_identity_grad)
no_gradient("Const")
no_gradient("Placeholder")
no_gradient("NoOp")
