"""Shared helpers of the elementwise-family tests (ops/math.py): running one op on fed values,
comparing with TF's tolerance for transcendental functions, and the dtypes each op's kernels
take."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import minigraph as mg
from ops import math as M

#: Rows of the family by op type.
ROWS = {row.name: row for row in M.ELEMENTWISE_OPS}

#: Ops computed with one rounding per basic operation: a correctly rounded reference applies.
EXACT_OPS = {
    "AddV2", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "FloorMod", "Maximum", "Minimum",
    "SquaredDifference", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
    "LogicalAnd", "LogicalOr", "LogicalNot", "Neg", "Abs", "Sign", "Square", "Sqrt", "Floor",
    "Ceil", "Round", "Relu", "Relu6", "Reciprocal",
}  # fmt: skip


def cpu_types(op_type: str) -> list[str]:
    """The dtypes the op's CPU kernel takes (bool for the logical ops)."""
    row = ROWS[op_type]
    if row.types is None:
        return ["bool"]
    return list(row.cpu if row.cpu is not None else row.types)


def builder(op_type: str) -> Any:
    return getattr(M, op_type)


def run_op(op_type: str, *values: Any, device: str | None = None, **attrs: Any) -> np.ndarray:
    """`op_type` applied to `values` fed through placeholders (so no constant folding), in a
    session that checks the kernel's outputs against the graph."""
    scope = mg.Scope.new_root_scope()
    if device is not None:
        scope = scope.with_device(device)
    feeds = {}
    inputs = []
    for value in values:
        if isinstance(value, list):  # a list input (AddN): one placeholder per tensor
            arrays = [np.asarray(v) for v in value]
            holders = [mg.Placeholder(scope, mg.as_dtype(a.dtype)) for a in arrays]
            feeds.update(zip(holders, arrays))
            inputs.append(holders)
        else:
            array = np.asarray(value)
            holder = mg.Placeholder(scope, mg.as_dtype(array.dtype))
            feeds[holder] = array
            inputs.append(holder)
    node = builder(op_type)(scope, *inputs, **attrs)
    config = mg.SessionConfig(check_kernel_outputs=True)
    with mg.Session(scope, config) as sess:
        return sess.run(node, feeds)


def np_dtype(name: str) -> np.dtype:
    return mg.as_dtype(name).np_dtype


def wrap(values: list[int], dtype: Any) -> np.ndarray:
    """Python integers taken modulo 2**bits into the integer `dtype` (two's complement)."""
    info = np.iinfo(dtype)
    span = 1 << info.bits
    return np.array([(v - info.min) % span + info.min for v in values], dtype)


def ieee_div(a: float, b: float) -> float:
    """a / b with IEEE semantics for a zero divisor (Python raises)."""
    if b != 0 or math.isnan(b):
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    negative = (a < 0) != (math.copysign(1.0, b) < 0)
    return -math.inf if negative else math.inf


def assert_close(got: np.ndarray, want: Any, *, rtol: float, atol: float = 0.0) -> None:
    """Same dtype and shape; values within tolerance (NaN matches NaN; infinities exactly)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    kind = got.dtype.kind
    if kind in "biuO":
        assert got.tolist() == want.tolist()
        return
    wide = np.complex128 if kind == "c" else np.float64
    np.testing.assert_allclose(
        got.astype(wide), want.astype(wide), rtol=rtol, atol=atol, equal_nan=True
    )


def tolerance(dtype: np.dtype) -> float:
    """A relative tolerance for TF's transcendental functions in `dtype` (a few ulps)."""
    if dtype.itemsize == 2 or dtype == np_dtype("bfloat16"):
        return 2e-2 if dtype == np_dtype("bfloat16") else 2e-3
    return 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
