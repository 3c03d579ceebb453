"""Helpers shared by the gradient tests of the reductions and nn ops
(tests/test_gradients_reduction*.py, tests/test_gradients_nn*.py).

- `Forget(scope, x, known_rank=True)`: x itself, with its static shape forgotten (every dim
  unknown, or the rank too): the rules then take their run-time paths (Shape, DynamicStitch,
  BroadcastGradientArgs). Its gradient passes through, so the numeric checker sees through it.
- `hidden(scope, value)`: an int32 constant the rules cannot read at construction (Identity
  of a Const): an axis known only at run time.
- `gradient_norm(scope, y, xs)`: sum over the gradients of y with respect to xs of
  sum(w * g) for fixed pseudo-random weights w: a scalar whose numeric Jacobian checks the
  second derivatives.
- numpy references of each gradient, written independently of the rules (loops over the
  reduced groups, explicit products of the other elements).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

import minigraph as mg
import ops  # noqa: F401 - the op library and its rules
from minigraph.op_def import OpDef
from ops.math import AddV2, Mul
from ops.reduction import Sum


def _forget_shape(ctx: Any) -> mg.TensorShape:
    shape = ctx.input_shapes[0]
    if ctx.attr("known_rank") and shape.rank is not None:
        return mg.TensorShape([None] * shape.rank)
    return mg.TensorShape(None)


def _copy(ctx: Any, x: Any, **_: Any) -> Any:
    return x.copy()


Forget = mg.register_op(
    OpDef(
        "GradRNForgetShape",
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=["T: type", "known_rank: bool = true"],
        shape_fn=_forget_shape,
        doc="x, with its static shape forgotten (test op).",
    )
)
mg.register_kernel("GradRNForgetShape", "CPU", _copy)
mg.register_kernel(
    "GradRNForgetShape", "GPU", _copy,
    type_constraints={"T": [d for d in mg.dtypes.ALL_DTYPES
                            if not d.is_string and d is not mg.bfloat16]},
)  # fmt: skip
mg.register_gradient("GradRNForgetShape")(lambda op, grad: grad)


# An Identity of a Const no longer hides its value: shape functions and rules see through
# Identity (and the op libraries' constant evaluators), as TF's shape refiner does. This test op
# has no constant evaluator, so its value is known only at run time; its static shape is kept.
HideValue = mg.register_op(
    OpDef(
        "GradRNHideValue",
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=["T: type"],
        shape_fn=lambda ctx: ctx.input_shapes[0],
        doc="x, with its value unknown until run time (test op).",
    )
)
mg.register_kernel("GradRNHideValue", "CPU", _copy)
mg.no_gradient("GradRNHideValue")


def hidden(scope: mg.Scope, value: Any, dtype: Any = np.int32) -> mg.Output:
    """`value` as an int32 (or `dtype`) tensor whose value the rules cannot see at
    construction."""
    return HideValue(scope, mg.Const(scope, np.asarray(value, dtype))).output


def forget(scope: mg.Scope, x: Any, how: str) -> Any:
    """x as it is ("static"), with unknown dims ("dims") or with an unknown rank ("rank")."""
    if how == "static":
        return x
    return Forget(scope, x, known_rank=how == "dims").output


def gradient_norm(scope: mg.Scope, y: Any, xs: list[Any], seed: int = 7) -> mg.Output:
    """sum_i sum(w_i * dy/dx_i), fixed weights w_i: a scalar of the first derivatives whose
    own gradient is a Hessian-vector product (the second derivatives, checked numerically)."""
    rng = np.random.default_rng(seed)
    total = None
    for x, g in zip(xs, mg.gradients(y, xs)):
        if g is None:
            continue
        g = mg.convert_to_tensor(g, scope=scope) if isinstance(g, mg.IndexedSlices) else g
        # A gradient has its x's shape (its static shape may be less known: run-time paths).
        if not x.shape.is_fully_defined():
            raise AssertionError("gradient_norm needs xs of static shapes")
        shape = tuple(x.shape.dims)
        w = rng.standard_normal(shape).astype(g.dtype.np_dtype)
        term = Sum(scope, Mul(scope, g, w), list(range(len(shape)))).output
        total = term if total is None else AddV2(scope, total, term).output
    if total is None:
        raise AssertionError("no gradient")
    return total


def run_gradients(build: Any, values: list[np.ndarray], grad_y: Any = None) -> list[Any]:
    """Builds y = build(scope, *placeholders) over placeholders of `values`, runs the gradient
    of y (weighted by `grad_y`, default ones) with respect to each, and returns the values."""
    root = mg.Scope.new_root_scope()
    holders = [
        mg.Placeholder(root.with_op_name(f"x{i}"), mg.as_dtype(v.dtype), v.shape).output
        for i, v in enumerate(values)
    ]
    with root.as_default():
        y = build(root, *holders)
    grads = mg.gradients(y, holders, grad_ys=grad_y)
    with mg.Session(root) as session:
        return session.run(grads, dict(zip(holders, values)))


# -- numpy references ----------------------------------------------------------------------------


def normalized_axes(axis: Any, rank: int) -> list[int]:
    return sorted({int(a) % rank for a in np.asarray(axis).reshape(-1)}) if rank else []


def kept_grad(grad: np.ndarray, shape: tuple, axes: list[int], keep_dims: bool) -> np.ndarray:
    """The output gradient with the reduced dims as 1 (as keep_dims gives it)."""
    if keep_dims or grad.ndim == 0:
        return grad  # a scalar broadcasts as it is
    kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
    return np.asarray(grad).reshape(kept)


def _groups(shape: tuple, axes: list[int]) -> Any:
    """For each position of the kept dims, the index tuple of every element of its group."""
    kept_ranges = [range(1) if i in axes else range(d) for i, d in enumerate(shape)]
    for kept in itertools.product(*kept_ranges):
        members = itertools.product(
            *[range(shape[i]) if i in axes else [kept[i]] for i in range(len(shape))]
        )
        yield kept, list(members)


def reference_grad(op: str, x: np.ndarray, axis: Any, keep_dims: bool, grad: Any) -> np.ndarray:
    """The gradient of reduction `op` (Sum, Mean, Max, Min, Prod) at x for output gradient
    `grad`, element by element: Max/Min split a group's gradient evenly among its tied
    extreme elements (NaN in the whole group when its result is NaN), Prod gives each element
    the product of the other elements of its group (complex: conjugated)."""
    axes = normalized_axes(axis, x.ndim)
    g = kept_grad(np.asarray(grad), x.shape, axes, keep_dims)
    out = np.zeros(x.shape, dtype=np.result_type(x.dtype, g.dtype))
    for kept, members in _groups(x.shape, axes):
        gk = g[kept] if g.ndim else g[()]
        values = [x[m] for m in members]
        for j, m in enumerate(members):
            if op == "Sum":
                out[m] = gk
            elif op == "Mean":
                out[m] = gk / len(members)
            elif op in ("Max", "Min"):
                best = (max if op == "Max" else min)(values) if values else 0
                if any(np.isnan(v) for v in values):
                    out[m] = np.nan
                    continue
                ties = sum(1 for v in values if v == best)
                out[m] = gk / ties if values[j] == best else 0
            elif op == "Prod":
                others = math.prod([v for k, v in enumerate(values) if k != j])
                out[m] = gk * np.conj(others)
            else:
                raise AssertionError(op)
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
