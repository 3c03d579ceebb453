"""Tiny differentiable test ops, with their own gradient rules, for the gradient machinery's
tests (tests/test_gradients_*.py): the algorithm is tested on these, independently of the op
library's ops and rules.

Every op is registered once, at import, through the public API (`register_op`,
`register_kernel`, `register_gradient`, `no_gradient`); names start with "GradTest". Kernels
are one numpy/cupy body over `ctx.xp`, registered for CPU and GPU (float types cupy holds), so
the simulated-GPU variant of the suite runs the gradient graphs on GPUs too.

The rules use only these ops (and Identity), so gradients of gradients work:
- GradTestSquare(x) = x*x:           d/dx = grad * (2x)            (GradTestMul, GradTestScale)
- GradTestMul(x, y) = x*y (no broadcasting): grad*y, grad*x
- GradTestAdd(x, y) = x+y:           grad, grad
- GradTestScale(x, alpha) = alpha*x: alpha*grad
- GradTestExp(x) = exp(x):           grad * y                      (uses the op's output)
- GradTestSum(x) = sum(x) (a scalar): grad broadcast back          (GradTestFillLike)
- GradTestFillLike(x, value) = a tensor like x filled with the scalar `value`: d/dvalue = sum
- GradTestGather(params, indices) = params[indices] (1-D int indices): a sparse gradient,
  IndexedSlices(grad, indices, dense shape: a Const, or GradTestShape(params))
- GradTestSplit(x) = (2x, 3x):       2*g0 + 3*g1                   (multi-output)
- GradTestCount(x) = (3x, size(x) as int32): an int output that gets no gradient
- GradTestToInt(x) -> int32, GradTestToFloat(n) -> float32: integer paths carry no gradient
  (GradTestToFloat's rule raises: it must never be called)
- GradTestNoRule(x) (no rule: an error when a gradient must flow through it),
  GradTestNotDiff(x) (no_gradient), GradTestShape(x) -> int32 (no_gradient)
- GradTestBad(x, mode): a rule that misbehaves as `mode` says (wrong count, dtype, shape, a
  non-tensor, a raise, a multi-output builder)
"""

from __future__ import annotations

from typing import Any

import numpy as np

import minigraph as mg
from minigraph import IndexedSlices, TensorShape, current_scope, dtypes
from minigraph.op_def import OpDef

FLOATS = ["float16", "bfloat16", "float32", "float64"]
GPU_FLOATS = ["float16", "float32", "float64"]  # cupy holds no bfloat16


def _elementwise(ctx):
    shapes = ctx.input_shapes
    shape = shapes[0]
    for other in shapes[1:]:
        if not shape.is_compatible_with(other):
            raise mg.InvalidArgumentError(f"shapes {shape} and {other} differ")
        shape = shape.merge_with(other)
    return shape


def _op(name, inputs, outputs, attrs, shape_fn, kernel, types=FLOATS, gpu=True):
    builder = mg.register_op(
        OpDef(name, inputs=inputs, outputs=outputs, attrs=attrs, shape_fn=shape_fn)
    )
    constraints = {"T": types} if any(a.startswith("T:") for a in attrs) else None
    mg.register_kernel(name, "CPU", kernel, type_constraints=constraints)
    if gpu:
        gpu_types = {"T": [t for t in types if t in GPU_FLOATS]} if constraints else None
        mg.register_kernel(name, "GPU", kernel, type_constraints=gpu_types)
    return builder


def _square(ctx, x, **_):
    return x * x


def _mul(ctx, x, y, **_):
    return x * y


def _add(ctx, x, y, **_):
    return x + y


def _scale(ctx, x, *, alpha, T):
    return (x * ctx.xp.asarray(alpha, dtype=x.dtype)).astype(x.dtype)


def _exp(ctx, x, **_):
    return ctx.xp.exp(x)


def _sum(ctx, x, **_):
    return ctx.xp.asarray(x.sum(dtype=x.dtype)).reshape(())


def _fill_like(ctx, x, value, **_):
    return ctx.xp.full(x.shape, value, dtype=x.dtype)


def _gather(ctx, params, indices, **_):
    idx = indices.astype(np.int64)
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= params.shape[0]):
        raise ctx.invalid_argument("GradTestGather: index out of range")
    return params[idx]


def _split(ctx, x, **_):
    two = ctx.xp.asarray(2, dtype=x.dtype)
    three = ctx.xp.asarray(3, dtype=x.dtype)
    return (x * two).astype(x.dtype), (x * three).astype(x.dtype)


def _count(ctx, x, **_):
    three = ctx.xp.asarray(3, dtype=x.dtype)
    return (x * three).astype(x.dtype), ctx.xp.asarray(np.int32(x.size)).reshape(())


def _to_int(ctx, x, **_):
    return x.astype(np.int32)


def _to_float(ctx, n, **_):
    return n.astype(np.float32)


def _identity(ctx, x, **_):
    return x + 0  # a new array: kernels do not return their inputs' views unless trusted


def _shape(ctx, x, **_):
    return np.array(x.shape, dtype=np.int32)


SQUARE = ["x: T"], ["y: T"], ["T: type"]
Square = _op("GradTestSquare", *SQUARE, _elementwise, _square)
Mul = _op("GradTestMul", ["x: T", "y: T"], ["z: T"], ["T: type"], _elementwise, _mul)
Add = _op("GradTestAdd", ["x: T", "y: T"], ["z: T"], ["T: type"], _elementwise, _add)
Scale = _op("GradTestScale", ["x: T"], ["y: T"], ["T: type", "alpha: float"], _elementwise, _scale)
Exp = _op("GradTestExp", ["x: T"], ["y: T"], ["T: type"], _elementwise, _exp)
Sum = _op("GradTestSum", ["x: T"], ["y: T"], ["T: type"], lambda ctx: TensorShape([]), _sum)
FillLike = _op(
    "GradTestFillLike", ["x: T", "value: T"], ["y: T"], ["T: type"],
    lambda ctx: ctx.input_shapes[0], _fill_like,
)  # fmt: skip
Gather = _op(
    "GradTestGather",
    ["params: T", "indices: Tindices"],
    ["output: T"],
    ["T: type", "Tindices: {int32, int64}"],
    lambda ctx: TensorShape(ctx.input_shapes[1][:1]).concatenate(ctx.input_shapes[0][1:]),
    _gather,
)
Split = _op(
    "GradTestSplit", ["x: T"], ["a: T", "b: T"], ["T: type"],
    lambda ctx: [ctx.input_shapes[0], ctx.input_shapes[0]], _split,
)  # fmt: skip
Count = _op(
    "GradTestCount", ["x: T"], ["y: T", "n: int32"], ["T: type"],
    lambda ctx: [ctx.input_shapes[0], TensorShape([])], _count,
)  # fmt: skip
ToInt = _op("GradTestToInt", ["x: T"], ["y: int32"], ["T: type"], _elementwise, _to_int)
ToFloat = _op(
    "GradTestToFloat", ["n: int32"], ["y: float32"], [], _elementwise, _to_float, gpu=False
)
NoRule = _op("GradTestNoRule", *SQUARE, _elementwise, _identity)
NotDiff = _op("GradTestNotDiff", *SQUARE, _elementwise, _identity)
Shape = _op(
    "GradTestShape", ["x: T"], ["y: int32"], ["T: type"],
    lambda ctx: TensorShape([ctx.input_shapes[0].rank]), _shape, gpu=False,
)  # fmt: skip
Bad = _op("GradTestBad", ["x: T"], ["y: T"], ["T: type", "mode: string"], _elementwise, _identity)
Bad2 = _op("GradTestBad2", ["x: T", "y: T"], ["z: T"], ["T: type"], _elementwise, _add)


# -- rules -------------------------------------------------------------------------------------


def _s(op):
    return current_scope(op.graph)


@mg.register_gradient("GradTestSquare")
def _square_grad(op, grad):
    s = _s(op)
    return Mul(s, grad, Scale(s, op.inputs[0], alpha=2.0))


@mg.register_gradient("GradTestMul")
def _mul_grad(op, grad):
    s = _s(op)
    x, y = op.inputs
    return [Mul(s, grad, y), Mul(s, grad, x)]


@mg.register_gradient("GradTestAdd")
def _add_grad(op, grad):
    return grad, grad


@mg.register_gradient("GradTestScale")
def _scale_grad(op, grad):
    return Scale(_s(op), grad, alpha=op.get_attr("alpha"))


@mg.register_gradient("GradTestExp")
def _exp_grad(op, grad):
    return Mul(_s(op), grad, op.outputs[0])


@mg.register_gradient("GradTestSum")
def _sum_grad(op, grad):
    return FillLike(_s(op), op.inputs[0], grad)


@mg.register_gradient("GradTestFillLike")
def _fill_like_grad(op, grad):
    return None, Sum(_s(op), grad)


@mg.register_gradient("GradTestGather")
def _gather_grad(op, grad):
    params, indices = op.inputs
    s = _s(op)
    # As TF's array_ops.shape: a Const when the static shape is known.
    if params.shape.is_fully_defined():
        shape = mg.Const(s, np.array(params.shape.dims, np.int32))
    else:
        shape = Shape(s, params)
    return IndexedSlices(grad, indices, shape), None


@mg.register_gradient("GradTestSplit")
def _split_grad(op, ga, gb):
    s = _s(op)
    return Add(s, Scale(s, ga, alpha=2.0), Scale(s, gb, alpha=3.0))


@mg.register_gradient("GradTestCount")
def _count_grad(op, gy, gn):
    if gn is not None:
        raise AssertionError("the int output of GradTestCount got a gradient")
    return Scale(_s(op), gy, alpha=3.0)


@mg.register_gradient("GradTestToFloat")
def _to_float_grad(op, grad):
    # Never called: its input is an integer tensor, so no path of float tensors from an x
    # reaches the op (TF's _MarkReachedOps) and no gradient flows through it.
    raise AssertionError("GradTestToFloat's rule was called: integer tensors carry no gradient")


mg.no_gradient("GradTestNotDiff")
mg.no_gradient("GradTestShape")
mg.no_gradient("GradTestToInt")


@mg.register_gradient("GradTestBad")
def _bad_grad(op, grad):
    mode = op.get_attr("mode")
    s = _s(op)
    if mode == "count":
        return [grad, grad]
    if mode == "dtype":
        return Const64(s, op)
    if mode == "shape":
        return Sum(s, grad)
    if mode == "literal":
        return np.ones(3)
    if mode == "raise":
        raise ValueError("this rule is broken")
    if mode == "builder":
        return Split(s, grad)
    if mode == "graph":
        other = mg.Scope.new_root_scope()
        return mg.Const(other, np.ones((), np.float32))
    return grad


def Const64(s, op) -> Any:  # noqa: N802 - a builder-like helper
    x = op.inputs[0]
    return mg.Const(s, np.zeros(x.shape.dims or (), np.float64))


@mg.register_gradient("GradTestBad2")
def _bad2_grad(op, grad):
    return (grad,)  # one gradient for two inputs


def values_dtype(name: str):
    return dtypes.as_dtype(name)
