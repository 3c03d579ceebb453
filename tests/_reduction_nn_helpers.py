"""Helpers shared by the reduction and nn tests (tests/test_reduction_*.py, tests/test_nn_*.py,
tests/test_reduction_nn_*.py): running one op on fed or constant inputs, the dtypes each
kernel registers, junk-filled kernel contexts, and the case tables' format.

A case is `Case(id, op, inputs, attrs, expected)`: `expected` is an array (or a tuple of arrays
for several outputs) compared exactly, `Close(array, rtol)` compared within a tolerance, or
`Raises(regex)`. tests/test_reduction_nn_tf.py runs every table against TensorFlow itself, so
the expected values here are TF's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

import minigraph as mg
from minigraph import KernelContext, Scope, Session
from minigraph.devices import CpuDevice
from minigraph.memory import BufferPool
from ops import nn, reduction  # registers the ops (ops/__init__.py may not import them)

BF16 = np.dtype(ml_dtypes.bfloat16)
JUNK = 0xA5

# The input names of each op's TF Python raw op (tf.raw_ops), which renames a few (`axis`).
TF_INPUTS = {
    **{op: ("input", "axis") for op in ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any")},
    "ArgMax": ("input", "dimension"),
    "ArgMin": ("input", "dimension"),
    "MatMul": ("a", "b"),
    "BatchMatMulV2": ("x", "y"),
    "Softmax": ("logits",),
    "LogSoftmax": ("logits",),
    "SparseSoftmaxCrossEntropyWithLogits": ("features", "labels"),
    "SoftmaxCrossEntropyWithLogits": ("features", "labels"),
    "L2Loss": ("t",),
    "BiasAdd": ("value", "bias"),
}


@dataclass(frozen=True)
class Raises:
    """An expected InvalidArgumentError whose message's first line matches `pattern`
    (re.search)."""

    pattern: str


@dataclass(frozen=True)
class Close:
    """An expected value compared with a relative tolerance (float results whose last bits
    depend on the exp/summation implementation)."""

    value: Any
    rtol: float = 1e-6


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    inputs: tuple
    attrs: dict = field(default_factory=dict)
    expected: Any = None


def a(values: Any, dtype: Any) -> np.ndarray:
    """An array of `dtype` (numpy, ml_dtypes or minigraph DType)."""
    return np.array(values, dtype=np.dtype(getattr(dtype, "np_dtype", dtype)))


def builder(op: str) -> type:
    return getattr(reduction, op, None) or getattr(nn, op)


def build(scope: Scope, op: str, inputs: Any, attrs: dict, fed: bool) -> tuple[Any, dict]:
    """The op over its inputs, as Consts (`fed=False`) or as placeholders of unknown shape fed
    at run time (the kernels' general path). Returns (fetch, feeds)."""
    feeds = {}
    args = []
    for i, value in enumerate(inputs):
        if fed:
            holder = mg.Placeholder(scope.with_op_name(f"in{i}"), mg.as_dtype(value.dtype)).output
            feeds[holder] = value
            args.append(holder)
        else:
            args.append(mg.Const(scope.with_op_name(f"in{i}"), value).output)
    node = builder(op)(scope.with_op_name("node"), *args, **attrs)
    outputs = node.outputs
    return (outputs[0] if len(outputs) == 1 else list(outputs)), feeds


def run_case(case: Case, fed: bool, config: Any = None) -> Any:
    scope = Scope.new_root_scope()
    fetch, feeds = build(scope, case.op, case.inputs, case.attrs, fed)
    with Session(scope, config) as sess:
        result = sess.run(fetch, feeds)
    return tuple(result) if isinstance(result, list) else result


def assert_same(got: Any, want: Any) -> None:
    """Equal dtype, shape and values (NaN equal to NaN; -0.0 equal to 0.0)."""
    if isinstance(want, Close):
        assert_close(got, want.value, want.rtol)
        return
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    assert type(got) is np.ndarray, type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc" or want.dtype == BF16:
        np.testing.assert_array_equal(got.astype(np.complex128), want.astype(np.complex128))
    else:
        np.testing.assert_array_equal(got, want)


def assert_close(got: Any, want: Any, rtol: float) -> None:
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert_close(g, w, rtol)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    np.testing.assert_allclose(
        got.astype(np.complex128), want.astype(np.complex128), rtol=rtol, atol=rtol * 1e-3
    )


def check_case(case: Case, fed: bool) -> None:
    """Runs `case` and checks its expectation (an error must be an InvalidArgumentError with a
    matching message, at construction or at run time)."""
    if isinstance(case.expected, Raises):
        scope = Scope.new_root_scope()
        try:
            fetch, feeds = build(scope, case.op, case.inputs, case.attrs, fed)
            Session(scope).run(fetch, feeds)
        except mg.InvalidArgumentError as e:
            # The first line: run-time errors add the node and its device on the next one.
            assert re.search(case.expected.pattern, e.message.split("\n")[0]), e.message
            return
        raise AssertionError(f"{case.id}: no error")
    assert_same(run_case(case, fed), case.expected)


def kernel_dtypes(op_type: str, device: str = "CPU", attr: str = "T") -> list[mg.DType]:
    """The dtypes of type attr `attr` that the op's kernel on `device` registers."""
    op_def = mg.registry.get_op_def(op_type)
    (spec,) = [d for d in op_def.attrs if d.name == attr]
    kernels = [k for k in mg.registry.kernels_for(op_type) if k.device_type == device]
    return [d for d in spec.allowed if any(k.mismatch({attr: d}, "") is None for k in kernels)]


def dirty_ctx(op_type: str = "Test") -> KernelContext:
    """A CPU context whose `ctx.empty` returns pooled memory full of junk bytes, so an output
    element a kernel forgets to write shows up."""
    pool = BufferPool(min_bytes=1)
    for k in range(72):  # one junk-filled buffer in every bucket up to 256 KiB
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = JUNK
    return KernelContext(CpuDevice(0), "node", op_type, buffers=pool)


def values_for(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Small exactly representable values of `dtype` (ints 0..6 for products not to overflow
    much; bool, complex with an imaginary part)."""
    size = math.prod(shape)
    if dtype.kind == "b":
        return (rng.integers(0, 2, size) == 1).reshape(shape)
    ints = rng.integers(-3 if dtype.kind in "ifc" or dtype == BF16 else 0, 4, size)
    if dtype.kind == "c":
        return (ints + 1j * rng.integers(-3, 4, size)).astype(dtype).reshape(shape)
    return ints.astype(dtype).reshape(shape)
