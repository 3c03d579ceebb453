"""Helpers shared by the gradient tests of the array family (tests/test_gradients_array*.py).

- `Forget` and `hidden` (from tests/_gradients_reduction_nn_helpers.py): a tensor with its
  static shape forgotten, and an int32 constant the rules cannot read while building: the
  rules then take their run-time paths.
- `hidden64(scope, value)`: the same for an int64 value.
- `adjoint(forward, xs, dy)`: the reference gradient of an array op, written independently of
  the rules. Every array op with a gradient moves (or repeats, or drops) its inputs' elements
  without arithmetic, so its gradient with respect to an input element is the sum of dy over
  the output elements that are a copy of it. `forward` is the numpy version of the op; it is
  run on index arrays (the element numbers of the inputs, laid end to end), so its output says
  which input element each output element copies (-1: none, e.g. a constant), and the
  gradient is a bincount of dy over those numbers.
- `run_gradients(build, values, shapes, dy)`: minigraph's gradients of build(scope, *xs) with
  respect to each x, over placeholders of the given static shapes (None: unknown), seeded with
  dy.
- `hessian_norm(scope, y, xs)`: a scalar of the first derivatives whose numeric Jacobian
  checks the second derivatives (tests/_gradients_reduction_nn_helpers.gradient_norm).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _gradients_reduction_nn_helpers import Forget, forget, gradient_norm, hidden

import minigraph as mg
import ops  # noqa: F401 - the op library and its rules

__all__ = ["Forget", "forget", "hidden", "hidden64", "adjoint", "run_gradients", "hessian_norm",
           "gradient_norm", "knowledge_shape"]  # fmt: skip

hessian_norm = gradient_norm


def hidden64(scope: mg.Scope, value: Any) -> mg.Output:
    """`value` as an int64 tensor whose value the rules cannot see at construction."""
    return hidden(scope, value, np.int64)


def knowledge_shape(shape: tuple[int, ...], knowledge: str) -> Any:
    """The static shape a placeholder gets: all of it ("static"), every other dim unknown
    ("partial"), every dim unknown ("dims") or not even the rank ("rank")."""
    if knowledge == "static":
        return list(shape)
    if knowledge == "partial":
        return [None if i % 2 == 0 else d for i, d in enumerate(shape)]
    if knowledge == "dims":
        return [None] * len(shape)
    return None


def adjoint(
    forward: Callable[..., np.ndarray], xs: list[np.ndarray], dy: np.ndarray
) -> list[np.ndarray]:
    """The gradients of the linear, copying map `forward(*xs)` at cotangent `dy`: per input,
    the sum of dy over the output elements that copy each of its elements."""
    sizes = [int(np.prod(x.shape, dtype=np.int64)) for x in xs]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    numbers = [np.arange(s, dtype=np.int64).reshape(x.shape) + o
               for x, s, o in zip(xs, sizes, starts)]  # fmt: skip
    copied = np.asarray(forward(*numbers))
    if copied.shape != np.shape(dy):
        raise AssertionError(f"forward gives {copied.shape}, dy is {np.shape(dy)}")
    flat, weights = copied.reshape(-1), np.asarray(dy).reshape(-1)
    used = flat >= 0
    total = int(starts[-1])

    def count(w: np.ndarray) -> np.ndarray:
        return np.bincount(flat[used], weights=w[used].astype(np.float64), minlength=total)

    if np.iscomplexobj(weights):
        summed: np.ndarray = count(weights.real) + 1j * count(weights.imag)
    else:
        summed = count(weights)
    return [summed[o : o + s].reshape(x.shape).astype(x.dtype)
            for x, s, o in zip(xs, sizes, starts)]  # fmt: skip


def run_gradients(
    build: Callable[..., Any],
    values: list[np.ndarray],
    shapes: list[Any] | None = None,
    dy: np.ndarray | None = None,
    config: mg.SessionConfig | None = None,
) -> tuple[list[Any], Any]:
    """(gradient values, y value) of build(scope, *xs) over placeholders of `shapes` (default
    the values' own), fed `values`, seeded with `dy` (ones by default)."""
    root = mg.Scope.new_root_scope()
    shapes = [v.shape for v in values] if shapes is None else shapes
    holders = [
        mg.Placeholder(root.with_op_name(f"x{i}"), mg.as_dtype(v.dtype), s).output
        for i, (v, s) in enumerate(zip(values, shapes))
    ]
    with root.as_default():
        y = build(root, *holders)
    y = y.output if isinstance(y, mg.OpBuilder) else y
    feeds = dict(zip(holders, values))
    seed = None
    if dy is not None:
        seed = mg.Placeholder(root.with_op_name("dy"), y.dtype).output
        feeds[seed] = dy
    grads = mg.gradients(y, holders, grad_ys=seed)
    fetched = [g for g in grads if g is not None]
    with mg.Session(root, config) as session:
        got = session.run([*fetched, y], feeds)
    out = iter(got[:-1])
    return [None if g is None else next(out) for g in grads], got[-1]
