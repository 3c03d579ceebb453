"""The array family's gradient rules (ops/array.py, issue 21): Reshape, ExpandDims, Squeeze,
Transpose, StridedSlice (and the `x[...]` operator), Slice, ConcatV2, Pack, Unpack, Tile,
BroadcastTo, Fill, SelectV2, Select, Identity; no gradient for Shape, Size, Rank, ZerosLike,
OnesLike, OneHot, StopGradient, InvertPermutation, nor for integer tensors.

Each rule is checked against central differences (float64 tightly, float32, float16, bfloat16
and complex64 with the checker's looser tolerances) and against an independent reference
(tests/_gradients_array_helpers.adjoint: the numpy op run on element numbers says which input
element each output element copies; the gradient sums dy over those), with static shapes, with
dims or ranks known only at run time, with perms, multiples, begins, sizes, axes and shapes
known only at run time, and with one gradient graph over placeholders of unknown shape run for
several shapes. Second derivatives are checked numerically. The gradient graphs are made of
constants where the shapes are static, and of run-time shape ops only where they are not.
Random shapes, keys and axes: tests/test_gradients_array_properties.py; TF itself:
tests/test_gradients_array_tf.py; StridedSliceGrad and InvertPermutation:
tests/test_gradients_array_ops.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from _gradients_array_helpers import (
    adjoint,
    forget,
    hessian_norm,
    hidden,
    hidden64,
    run_gradients,
)

import minigraph as mg
from minigraph.testing import assert_gradients_close, compute_gradient
from ops import array as A
from ops.math import Cast, Mul, Square, Tanh
from ops.reduction import Sum

RNG = np.random.default_rng(21)


def v(*shape):
    return RNG.standard_normal(shape)


COND = np.array([[True], [False], [True]])

# name -> (build(scope, *xs), numpy forward(*xs), values). The forward is the op in numpy; it is
# run on element numbers by `adjoint`, so it must only move, repeat or drop elements (-1 marks
# an output element that copies none).
CASES = {
    "Reshape": (lambda s, x: A.Reshape(s, x, [4, -1]), lambda x: x.reshape(4, -1), [v(2, 3, 4)]),
    "Reshape to a scalar": (lambda s, x: A.Reshape(s, x, np.zeros(0, np.int32)),
                            lambda x: x.reshape(()), [v(1, 1)]),
    "Reshape empty": (lambda s, x: A.Reshape(s, x, [3, 0]), lambda x: x.reshape(3, 0),
                      [v(0, 3)]),
    "ExpandDims": (lambda s, x: A.ExpandDims(s, x, -1), lambda x: x[..., None], [v(2, 3)]),
    "ExpandDims of a scalar": (lambda s, x: A.ExpandDims(s, x, 0), lambda x: x[None],
                               [np.array(1.5)]),
    "Squeeze": (lambda s, x: A.Squeeze(s, x), lambda x: x.reshape(3), [v(1, 3, 1)]),
    "Squeeze named dims": (lambda s, x: A.Squeeze(s, x, squeeze_dims=[-3]), lambda x: x[0],
                           [v(1, 3, 1)]),
    "Transpose": (lambda s, x: A.Transpose(s, x, [2, 0, 1]), lambda x: x.transpose(2, 0, 1),
                  [v(2, 3, 4)]),
    "Transpose negative perm": (lambda s, x: A.Transpose(s, x, [-1, 0, -2]),
                                lambda x: x.transpose(2, 0, 1), [v(2, 3, 4)]),
    "Transpose int64 perm": (lambda s, x: A.Transpose(s, x, np.array([1, 0], np.int64)),
                             lambda x: x.T, [v(2, 3)]),
    "Transpose of a scalar": (lambda s, x: A.Transpose(s, x, np.zeros(0, np.int32)),
                              lambda x: x, [np.array(2.0)]),
    "StridedSlice": (lambda s, x: x[1:, ::-2, None, 2], lambda x: x[1:, ::-2, None, 2],
                     [v(3, 4, 5)]),
    "StridedSlice ellipsis": (lambda s, x: x[..., 1:4:2], lambda x: x[..., 1:4:2], [v(2, 3, 5)]),
    "StridedSlice index to a scalar": (lambda s, x: x[1, -1], lambda x: x[1, -1], [v(3, 4)]),
    "StridedSlice new axes": (lambda s, x: x[None, :, None], lambda x: x[None, :, None],
                              [v(3, 2)]),
    "StridedSlice clamped bounds": (lambda s, x: x[-10:10, 7:-9:-3], lambda x: x[-10:10, 7:-9:-3],
                                    [v(3, 5)]),
    "StridedSlice empty": (lambda s, x: x[3:1], lambda x: x[3:1], [v(4, 2)]),
    "StridedSlice int16 bounds": (
        lambda s, x: A.StridedSlice(s, x, np.array([1], np.int16), np.array([3], np.int16),
                                    np.array([1], np.int16)),
        lambda x: x[1:3], [v(4, 2)]),
    "StridedSlice int64 bounds": (
        lambda s, x: A.StridedSlice(s, x, np.array([0, 1], np.int64), np.array([0, 3], np.int64),
                                    np.array([1, 2], np.int64), begin_mask=1, end_mask=1),
        lambda x: x[:, 1:3:2], [v(2, 4)]),
    "Slice": (lambda s, x: A.Slice(s, x, [1, 0, 2], [2, -1, 2]), lambda x: x[1:3, 0:, 2:4],
              [v(3, 4, 5)]),
    "Slice int64": (lambda s, x: A.Slice(s, x, np.array([1, 1], np.int64),
                                         np.array([-1, 1], np.int64)),
                    lambda x: x[1:, 1:2], [v(3, 4)]),
    "Slice empty": (lambda s, x: A.Slice(s, x, [2, 0], [0, 3]), lambda x: x[2:2, 0:3], [v(3, 4)]),
    "Slice of a scalar": (lambda s, x: A.Slice(s, x, np.zeros(0, np.int32),
                                               np.zeros(0, np.int32)),
                          lambda x: x, [np.array(3.0)]),
    "ConcatV2": (lambda s, x, y: A.ConcatV2(s, [x, y, x], 1),
                 lambda x, y: np.concatenate([x, y, x], 1), [v(2, 3), v(2, 1)]),
    "ConcatV2 negative axis": (lambda s, x, y: A.ConcatV2(s, [y, x], -3),
                               lambda x, y: np.concatenate([y, x], -3), [v(2, 3, 1), v(1, 3, 1)]),
    "ConcatV2 int64 axis": (lambda s, x, y: A.ConcatV2(s, [x, y], np.int64(0)),
                            lambda x, y: np.concatenate([x, y], 0), [v(2, 3), v(1, 3)]),
    "ConcatV2 empty input": (lambda s, x, y: A.ConcatV2(s, [x, y], 1),
                             lambda x, y: np.concatenate([x, y], 1), [v(2, 0), v(2, 3)]),
    "Pack": (lambda s, x, y: A.Pack(s, [x, y, x], axis=1),
             lambda x, y: np.stack([x, y, x], 1), [v(2, 3), v(2, 3)]),
    "Pack negative axis": (lambda s, x: A.Pack(s, [x], axis=-1), lambda x: x[..., None],
                           [v(2, 3)]),
    "Pack of scalars": (lambda s, x, y: A.Pack(s, [x, y]), lambda x, y: np.stack([x, y]),
                        [np.array(1.0), np.array(2.0)]),
    "Unpack": (lambda s, x: A.ConcatV2(s, A.Unpack(s, x, 3, axis=1).outputs[::-1], 0),
               lambda x: np.concatenate([x[:, 2], x[:, 1], x[:, 0]], 0), [v(2, 3, 2)]),
    "Unpack, one output used": (lambda s, x: A.Unpack(s, x, 3, axis=-1).outputs[1],
                                lambda x: x[..., 1], [v(2, 3)]),
    "Tile": (lambda s, x: A.Tile(s, x, [2, 1, 3]), lambda x: np.tile(x, (2, 1, 3)), [v(2, 3, 2)]),
    "Tile by zero": (lambda s, x: A.Tile(s, x, [0, 2]), lambda x: np.tile(x, (0, 2)), [v(2, 3)]),
    "Tile int64 multiples": (lambda s, x: A.Tile(s, x, np.array([3], np.int64)),
                             lambda x: np.tile(x, 3), [v(2)]),
    "Tile of a scalar": (lambda s, x: A.Tile(s, x, np.zeros(0, np.int32)), lambda x: x,
                         [np.array(2.0)]),
    "BroadcastTo": (lambda s, x: A.BroadcastTo(s, x, [4, 2, 3]),
                    lambda x: np.broadcast_to(x, (4, 2, 3)), [v(2, 1)]),
    "BroadcastTo from a scalar": (lambda s, x: A.BroadcastTo(s, x, [2, 2]),
                                  lambda x: np.broadcast_to(x, (2, 2)), [np.array(0.5)]),
    "BroadcastTo the same shape": (lambda s, x: A.BroadcastTo(s, x, [2, 3]), lambda x: x,
                                   [v(2, 3)]),
    "Fill": (lambda s, x: A.Fill(s, [2, 3], x), lambda x: np.broadcast_to(x, (2, 3)),
             [np.array(1.5)]),
    "Fill empty": (lambda s, x: A.Fill(s, [0, 3], x), lambda x: np.broadcast_to(x, (0, 3)),
                   [np.array(1.5)]),
    "Fill a scalar": (lambda s, x: A.Fill(s, np.zeros(0, np.int32), x), lambda x: x,
                      [np.array(1.5)]),
    "SelectV2": (lambda s, t, e: A.SelectV2(s, COND, t, e), lambda t, e: np.where(COND, t, e),
                 [v(1, 4), v(4)]),
    "SelectV2 scalar condition": (lambda s, t, e: A.SelectV2(s, False, t, e),
                                  lambda t, e: np.where(False, t, e), [v(2, 3), v(2, 3)]),
    "SelectV2 scalar branch": (lambda s, t: A.SelectV2(s, COND, t, np.float64(0)),
                               lambda t: np.where(COND, t, -1), [v(3, 2)]),
    "Select rows": (lambda s, t, e: A.Select(s, [True, False, True], t, e),
                    lambda t, e: np.where(np.array([True, False, True])[:, None], t, e),
                    [v(3, 2), v(3, 2)]),
    "Select elementwise": (lambda s, t, e: A.Select(s, [[True, False]], t, e),
                           lambda t, e: np.where([[True, False]], t, e), [v(1, 2), v(1, 2)]),
    "Select scalar condition": (lambda s, t, e: A.Select(s, True, t, e),
                                lambda t, e: t, [v(3), v(3)]),
    "Identity": (lambda s, x: mg.Identity(s, x), lambda x: x, [v(2, 3)]),
}  # fmt: skip

NAMES = sorted(CASES)


def _build(name):
    return CASES[name][0]


def _cast(values, dtype):
    return [np.asarray(x).astype(dtype) for x in values]


# -- against central differences and the copy reference -----------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_rules_match_central_differences_in_float64(name):
    build, _, values = CASES[name]
    assert_gradients_close(build, values)


@pytest.mark.parametrize("name", NAMES)
def test_rules_are_the_adjoint_of_the_copy(name):
    build, forward, values = CASES[name]
    y_shape = np.shape(forward(*values))
    dy = RNG.standard_normal(y_shape)
    got, y = run_gradients(build, values, dy=dy)
    if name != "SelectV2 scalar branch":  # its forward marks the constant branch -1
        np.testing.assert_array_equal(y, forward(*values))
    for g, want in zip(got, adjoint(forward, values, dy)):
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-13)


OTHER_TYPES = [np.float32, np.float16, mg.bfloat16.np_dtype, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", OTHER_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", NAMES)
def test_rules_in_other_float_and_complex_types(name, dtype):
    build, forward, values = CASES[name]
    values = _cast(values, dtype)
    if np.dtype(dtype).kind == "c":
        values = [x + 1j * np.asarray(x)[::-1].astype(dtype) if x.ndim else x * (1 - 2j)
                  for x in values]  # fmt: skip
    if name.startswith("SelectV2 scalar branch"):
        build = lambda s, t: A.SelectV2(s, COND, t, np.zeros((), dtype))  # noqa: E731
    assert_gradients_close(build, values)


# -- shapes, perms, multiples, bounds and axes known only at run time ---------------------------


@pytest.mark.parametrize("how", ["dims", "rank"])
@pytest.mark.parametrize("name", NAMES)
def test_rules_with_shapes_known_only_at_run_time(name, how):
    build, forward, values = CASES[name]

    def f(s, *xs):
        return build(s, *[forget(s, x, how) for x in xs])

    assert_gradients_close(f, values)
    dy = RNG.standard_normal(np.shape(forward(*values)))
    got, _ = run_gradients(f, values, dy=dy)
    for g, want in zip(got, adjoint(forward, values, dy)):
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-13)


RUN_TIME = {
    "Reshape shape": (lambda s, x: A.Reshape(s, x, hidden(s, [3, -1])),
                      lambda x: x.reshape(3, -1), [v(2, 3, 2)]),
    "ExpandDims dim": (lambda s, x: A.ExpandDims(s, x, hidden(s, -2)),
                       lambda x: x[:, None], [v(2, 3)]),
    "Transpose perm": (lambda s, x: A.Transpose(s, x, hidden(s, [1, 2, 0])),
                       lambda x: x.transpose(1, 2, 0), [v(2, 3, 4)]),
    "Transpose negative perm": (lambda s, x: A.Transpose(s, x, hidden(s, [-1, 0, 1])),
                                lambda x: x.transpose(2, 0, 1), [v(2, 3, 4)]),
    "Transpose int64 perm": (lambda s, x: A.Transpose(s, x, hidden64(s, [-1, 0])),
                             lambda x: x.T, [v(2, 3)]),
    "Transpose empty perm": (lambda s, x: A.Transpose(s, x, hidden(s, np.zeros(0))),
                             lambda x: x, [np.array(2.0)]),
    "StridedSlice tensor bounds": (lambda s, x: x[hidden(s, 1):hidden(s, -1), hidden(s, 2)],
                                   lambda x: x[1:-1, 2], [v(4, 3)]),
    "StridedSlice int64 tensor bounds": (lambda s, x: x[::hidden64(s, -2)],
                                         lambda x: x[::-2], [v(5, 2)]),
    "Slice begin and size": (lambda s, x: A.Slice(s, x, hidden(s, [1, 0]), hidden(s, [-1, 2])),
                             lambda x: x[1:, 0:2], [v(3, 4)]),
    "Slice int64 begin": (lambda s, x: A.Slice(s, x, hidden64(s, [0, 2]), np.array([2, 1])),
                          lambda x: x[0:2, 2:3], [v(3, 4)]),
    "ConcatV2 axis": (lambda s, x, y: A.ConcatV2(s, [x, y, x], hidden(s, 1)),
                      lambda x, y: np.concatenate([x, y, x], 1), [v(2, 3), v(2, 1)]),
    "ConcatV2 negative axis": (lambda s, x, y: A.ConcatV2(s, [x, y], hidden(s, -2)),
                               lambda x, y: np.concatenate([x, y], 0), [v(2, 3), v(1, 3)]),
    "ConcatV2 int64 axis": (lambda s, x, y: A.ConcatV2(s, [x, y], hidden64(s, -1)),
                            lambda x, y: np.concatenate([x, y], -1), [v(2, 3), v(2, 2)]),
    "Tile multiples": (lambda s, x: A.Tile(s, x, hidden(s, [2, 3])),
                       lambda x: np.tile(x, (2, 3)), [v(2, 1)]),
    "Tile int64 multiples": (lambda s, x: A.Tile(s, x, hidden64(s, [1, 0, 2])),
                             lambda x: np.tile(x, (1, 0, 2)), [v(2, 1, 2)]),
    "BroadcastTo shape": (lambda s, x: A.BroadcastTo(s, x, hidden(s, [3, 2, 4])),
                          lambda x: np.broadcast_to(x, (3, 2, 4)), [v(2, 1)]),
    "Fill dims": (lambda s, x: A.Fill(s, hidden(s, [2, 2]), x),
                  lambda x: np.broadcast_to(x, (2, 2)), [np.array(1.5)]),
}  # fmt: skip


@pytest.mark.parametrize("how", ["static", "dims", "rank"])
@pytest.mark.parametrize("name", sorted(RUN_TIME))
def test_rules_with_inputs_known_only_at_run_time(name, how):
    build, forward, values = RUN_TIME[name]

    def f(s, *xs):
        return build(s, *[forget(s, x, how) for x in xs])

    assert_gradients_close(f, values)
    dy = RNG.standard_normal(np.shape(forward(*values)))
    got, _ = run_gradients(f, values, dy=dy)
    for g, want in zip(got, adjoint(forward, values, dy)):
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-13)


def _one_graph_many_shapes(build, extra, cases):
    """One gradient graph over placeholders of unknown shape (x, and `extra` int32 ones), run
    for each (x value, extra values, numpy forward) of `cases` against the copy reference."""
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float64).output
    more = [mg.Placeholder(root.with_op_name(n), mg.int32).output for n in extra]
    with root.as_default():
        y = build(root, x, *more)
    y = y.output if isinstance(y, mg.OpBuilder) else y
    dy = mg.Placeholder(root.with_op_name("dy"), mg.float64).output
    (dx,) = mg.gradients(y, x, grad_ys=dy)
    with mg.Session(root) as session:
        for value, extra_values, forward in cases:
            seed = RNG.standard_normal(np.shape(forward(value)))
            feeds = {x: value, dy: seed, **dict(zip(more, [np.asarray(e, np.int32)
                                                           for e in extra_values]))}  # fmt: skip
            got = session.run(dx, feeds)
            (want,) = adjoint(forward, [value], seed)
            assert got.shape == value.shape
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_one_gradient_graph_runs_for_many_shapes_and_perms():
    _one_graph_many_shapes(
        lambda s, x, p: A.Transpose(s, x, p), ["perm"],
        [(v(2, 3), [[1, 0]], lambda x: x.T),
         (v(2, 3, 4), [[2, 0, 1]], lambda x: x.transpose(2, 0, 1)),
         (v(2, 3, 4), [[-1, -3, 1]], lambda x: x.transpose(2, 0, 1)),
         (np.array(1.0), [[]], lambda x: x), (v(5), [[0]], lambda x: x)])  # fmt: skip


def test_one_gradient_graph_runs_for_many_shapes_and_multiples():
    _one_graph_many_shapes(
        lambda s, x, m: A.Tile(s, x, m), ["multiples"],
        [(v(2, 3), [[2, 1]], lambda x: np.tile(x, (2, 1))), (v(2), [[3]], lambda x: np.tile(x, 3)),
         (v(1, 2, 1), [[2, 0, 3]], lambda x: np.tile(x, (2, 0, 3))),
         (np.array(4.0), [[]], lambda x: x)])  # fmt: skip


def test_one_gradient_graph_runs_for_many_shapes_and_axes():
    def build(s, x, axis):
        return A.ConcatV2(s, [x, Mul(s, x, np.float64(2)).output, x], axis)

    def concat(axis):
        return lambda x: np.concatenate([x, x, x], axis)

    # The same element feeds three places: the reference counts it once per copy, so compare
    # to 1 + 2 + 1 times... instead, differentiate the copies apart: x, 2x, x.
    root_cases = []
    for shape, axis in [((2, 3), 1), ((2, 3), -2), ((4,), 0), ((2, 1, 3), 2), ((0, 2), 0)]:
        root_cases.append((v(*shape), [axis], concat(axis)))
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float64).output
    axis_ph = mg.Placeholder(root.with_op_name("axis"), mg.int32).output
    y = build(root, x, axis_ph).output
    dy = mg.Placeholder(root.with_op_name("dy"), mg.float64).output
    (dx,) = mg.gradients(y, x, grad_ys=dy)
    with mg.Session(root) as session:
        for value, (axis,), forward in root_cases:
            seed = RNG.standard_normal(np.shape(forward(value)))
            got = session.run(dx, {x: value, axis_ph: np.int32(axis), dy: seed})
            parts = np.split(seed, 3, axis=axis)
            np.testing.assert_allclose(got, parts[0] + 2 * parts[1] + parts[2], rtol=1e-13)


def test_one_gradient_graph_runs_for_many_shapes_and_bounds():
    _one_graph_many_shapes(
        lambda s, x, b, e: x[b:e, ..., 1], ["b", "e"],
        [(v(4, 3), [1, 3], lambda x: x[1:3, ..., 1]),
         (v(5, 2, 2), [-2, 5], lambda x: x[-2:5, ..., 1]),
         (v(3, 2), [2, 1], lambda x: x[2:1, ..., 1])])  # fmt: skip
    _one_graph_many_shapes(
        lambda s, x, b, z: A.Slice(s, x, b, z), ["begin", "size"],
        [(v(4, 3), [[1, 0], [2, -1]], lambda x: x[1:3, 0:]), (v(2, 2, 2), [[0, 1, 0], [-1, 1, 1]],
                                                               lambda x: x[0:, 1:2, 0:1]),
         (v(3), [[3], [0]], lambda x: x[3:3])])  # fmt: skip


def test_one_gradient_graph_runs_for_many_shapes_reshapes_and_broadcasts():
    _one_graph_many_shapes(
        lambda s, x, shape: A.Reshape(s, x, shape), ["shape"],
        [(v(2, 3), [[3, 2]], lambda x: x.reshape(3, 2)),
         (v(6), [[-1, 1, 2]], lambda x: x.reshape(3, 1, 2)),
         (v(0, 2), [[2, 0]], lambda x: x.reshape(2, 0))])  # fmt: skip
    _one_graph_many_shapes(
        lambda s, x, shape: A.BroadcastTo(s, x, shape), ["shape"],
        [(v(2, 1), [[3, 2, 4]], lambda x: np.broadcast_to(x, (3, 2, 4))),
         (v(3), [[2, 3]], lambda x: np.broadcast_to(x, (2, 3))),
         (np.array(2.0), [[0]], lambda x: np.broadcast_to(x, (0,)))])  # fmt: skip
    _one_graph_many_shapes(
        lambda s, x: A.SelectV2(s, COND, x, np.float64(0)), [],
        [(v(3, 4), [], lambda x: np.where(COND, x, -1)),
         (v(1), [], lambda x: np.where(COND, x, -1)),
         (v(2, 3, 1), [], lambda x: np.where(COND, x, -1))])  # fmt: skip


# -- second derivatives -------------------------------------------------------------------------

SECOND_ORDER = {
    "Reshape": lambda s, x: A.Reshape(s, x, [4, -1]),
    "ExpandDims and Squeeze": lambda s, x: A.Squeeze(s, A.ExpandDims(s, x, 1)),
    "Transpose": lambda s, x: A.Transpose(s, x, [2, 0, 1]),
    "StridedSlice": lambda s, x: x[1:, ::-2, None, 2],
    "StridedSlice shrink": lambda s, x: x[0, 1],
    "Slice": lambda s, x: A.Slice(s, x, [1, 0, 1], [1, -1, 2]),
    "ConcatV2": lambda s, x: A.ConcatV2(s, [x, Square(s, x).output, x[:, :1]], 1),
    "Pack": lambda s, x: A.Pack(s, [x, Square(s, x).output], axis=-1),
    "Unpack": lambda s, x: A.Unpack(s, x, 3, axis=1).outputs[1],
    "Tile": lambda s, x: A.Tile(s, x, [2, 1, 3]),
    "BroadcastTo": lambda s, x: A.BroadcastTo(s, x[:, :1], [3, 2, 3, 4]),
    "SelectV2": lambda s, x: A.SelectV2(s, [True, False, True, False], x, Square(s, x[0])),
    "Select": lambda s, x: A.Select(s, [True, False], x, Square(s, x).output),
    "Fill": lambda s, x: A.Fill(s, [2, 3], x[0, 0, 0]),
}


def _curved(op):
    """sum(tanh(op(x))^2): curved, so that its second derivatives pass through op's rule and
    the rules its rule built."""

    def f(s, x):
        y = op(s, x)
        y = Tanh(s, y.output if isinstance(y, mg.OpBuilder) else y).output
        flat = A.Reshape(s, Square(s, y), np.array([-1], np.int32)).output
        return Sum(s, flat, np.int32(0)).output

    return f


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_derivatives_match_central_differences(name):
    f = _curved(SECOND_ORDER[name])
    x = v(2, 3, 4)
    assert_gradients_close(lambda s, v: hessian_norm(s, f(s, v), [v]), [x])


def _run_time_hessian_norm(scope, y, x, seed=3):
    """sum(w * dy/dx) for fixed w, for a gradient of unknown static shape."""
    (g,) = mg.gradients(y, x)
    w = np.random.default_rng(seed).standard_normal(x.shape.dims)
    flat = A.Reshape(scope, Mul(scope, g, w), np.array([-1], np.int32)).output
    return Sum(scope, flat, np.int32(0)).output


RUN_TIME_SECOND_ORDER = ["StridedSlice", "Slice", "ConcatV2", "Tile", "Transpose", "Reshape",
                         "Pack", "Unpack", "BroadcastTo", "SelectV2"]  # fmt: skip


@pytest.mark.parametrize("name", RUN_TIME_SECOND_ORDER)
@pytest.mark.parametrize("how", ["dims", "rank"])
def test_second_derivatives_with_shapes_known_only_at_run_time(name, how):
    op = SECOND_ORDER[name]
    x = v(2, 3, 4)

    def f(s, value):
        y = _curved(lambda s, t: op(s, forget(s, t, how)))(s, value)
        return _run_time_hessian_norm(s, y, value)

    assert_gradients_close(f, [x])


def test_third_derivatives_of_a_strided_slice():
    # StridedSlice -> StridedSliceGrad -> StridedSlice -> ...: every order is differentiable.
    def f(s, x):
        y = Sum(s, Square(s, Square(s, x[1::2, 1:]).output), [0, 1]).output
        for _ in range(2):
            (g,) = mg.gradients(y, x)
            y = Sum(s, Mul(s, g, g), [0, 1]).output
        return y

    assert_gradients_close(f, [v(4, 3)])


# -- no gradient --------------------------------------------------------------------------------

RULES = ["Reshape", "ExpandDims", "Squeeze", "Transpose", "StridedSlice", "StridedSliceGrad",
         "Slice", "ConcatV2", "Pack", "Unpack", "Tile", "BroadcastTo", "Fill", "SelectV2",
         "Select", "Identity"]  # fmt: skip
NOT_DIFFERENTIABLE = ["Shape", "Size", "Rank", "ZerosLike", "OnesLike", "OneHot", "StopGradient",
                      "InvertPermutation"]  # fmt: skip


def test_every_array_op_has_a_rule_or_is_declared_not_differentiable_as_in_tf():
    for op_type in RULES:
        assert mg.registry.gradient_rule(op_type).fn is not None, op_type
    for op_type in NOT_DIFFERENTIABLE:
        assert mg.registry.gradient_rule(op_type).fn is None, op_type
    assert set(A.__all__) - {"slice_helper"} == set(RULES + NOT_DIFFERENTIABLE) - {"Identity"}


NO_GRADIENT = {
    "ZerosLike": lambda s, x: A.ZerosLike(s, x),
    "OnesLike": lambda s, x: A.OnesLike(s, x),
    "StopGradient": lambda s, x: A.StopGradient(s, x),
    "OneHot on and off values": lambda s, x: A.OneHot(s, [0, 2], 3, x[0], x[1]),
    "Shape": lambda s, x: Cast(s, A.Shape(s, x), mg.float64),
    "Size": lambda s, x: Cast(s, A.Size(s, x), mg.float64),
    "Rank": lambda s, x: Cast(s, A.Rank(s, x), mg.float64),
    "Fill dims from x": lambda s, x: A.Fill(s, A.Shape(s, x), np.float64(1)),
}


@pytest.mark.parametrize("name", sorted(NO_GRADIENT))
def test_not_differentiable_ops_give_none(name):
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float64, [2]).output
    with root.as_default():
        y = NO_GRADIENT[name](root, x)
    y = y.output if isinstance(y, mg.OpBuilder) else y
    assert mg.gradients(y, x) == [None]
    (zeros,) = mg.gradients(y, x, unconnected_gradients="zero")
    with mg.Session(root) as session:
        np.testing.assert_array_equal(session.run(zeros, {x: [1.0, 2.0]}), [0.0, 0.0])


def test_stop_gradient_holds_its_part_constant():
    # d/dx (x * stop(x)) = stop(x): only the direct path.
    got, _ = run_gradients(lambda s, x: Mul(s, x, A.StopGradient(s, x)), [np.array([2.0, -3.0])])
    np.testing.assert_array_equal(got[0], [2.0, -3.0])


def test_integer_inputs_and_index_inputs_carry_no_gradient():
    root = mg.Scope.new_root_scope()
    ints = mg.Placeholder(root.with_op_name("ints"), mg.int32, [2, 3]).output
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, [2, 3]).output
    cond = mg.Placeholder(root.with_op_name("cond"), mg.bool_, [2, 3]).output
    shape = mg.Placeholder(root.with_op_name("shape"), mg.int32, [2]).output
    perm = mg.Placeholder(root.with_op_name("perm"), mg.int32, [2]).output
    multiples = mg.Placeholder(root.with_op_name("multiples"), mg.int32, [2]).output
    begin = mg.Placeholder(root.with_op_name("begin"), mg.int32, [2]).output
    axis = mg.Placeholder(root.with_op_name("axis"), mg.int32, []).output
    parts = [
        Cast(root, A.Reshape(root, ints, [3, 2]), mg.float32).output,
        A.Reshape(root, x, shape).output,
        A.Transpose(root, x, perm).output,
        A.Tile(root, x, multiples).output,
        A.Slice(root, x, begin, [1, 1]).output,
        A.ConcatV2(root, [x, x], axis).output,
        A.SelectV2(root, cond, x, np.float32(0)).output,
        x[begin[0]],
    ]
    total = [Sum(root, A.Reshape(root, p, [-1]), np.int32(0)).output for p in parts]
    grads = mg.gradients(total, [ints, cond, shape, perm, multiples, begin, axis, x])
    assert grads[:-1] == [None] * 7
    assert grads[-1] is not None and grads[-1].dtype is mg.float32


def test_unused_unpack_outputs_get_zero_gradients():
    got, _ = run_gradients(lambda s, x: A.Unpack(s, x, 3).outputs[2], [v(3, 2)])
    np.testing.assert_array_equal(got[0], [[0, 0], [0, 0], [1, 1]])


# -- the graphs built: constants where static, run-time shapes where not --------------------------


def _gradient_op_types(build, shapes, values=None):
    root = mg.Scope.new_root_scope()
    xs = [mg.Placeholder(root.with_op_name(f"x{i}"), mg.float32, s).output
          for i, s in enumerate(shapes)]  # fmt: skip
    with root.as_default():
        y = build(root, *xs)
    y = y.output if isinstance(y, mg.OpBuilder) else y
    mg.gradients(y, xs)
    # The rules' nodes (not the seed's: a y of unknown shape is seeded with Fill(Shape(y))).
    return sorted(op.type for op in root.graph.operations if "_grad/" in op.name)


@pytest.mark.parametrize(
    "build, shapes, static, run_time",
    [
        (lambda s, x: A.Reshape(s, x, [-1]), [[2, 3]], ["Reshape"], ["Shape"]),
        (lambda s, x: A.Reshape(s, x, [-1]), [[None, 3]], ["Reshape"], ["Shape"]),
        (lambda s, x: A.Squeeze(s, x), [[1, None]], ["Reshape"], ["Shape"]),
        (lambda s, x: A.Transpose(s, x, [1, 0]), [[None, None]], ["Transpose"],
         ["InvertPermutation", "Shape"]),
        (lambda s, x: x[1:], [[3, 2]], ["StridedSliceGrad"], ["Shape", "Cast"]),
        (lambda s, x: A.Slice(s, x, [1], [1]), [[3]], ["StridedSliceGrad"], ["Shape", "AddV2"]),
        (lambda s, x, y: A.ConcatV2(s, [x, y], 1), [[None, 2], [None, 3]], ["Slice"],
         ["Shape", "AddV2", "OneHot"]),
        (lambda s, x: A.Tile(s, x, [2, 3]), [[2, 1]], ["Reshape", "Sum"],
         ["Shape", "Pack", "Range"]),
        (lambda s, x: A.BroadcastTo(s, x, [2, 3]), [[3]], ["Sum"], ["Shape"]),
    ],
)  # fmt: skip
def test_static_shapes_give_constants_and_no_run_time_shape_ops(build, shapes, static, run_time):
    types = _gradient_op_types(build, shapes)
    for op_type in static:
        assert op_type in types, types
    for op_type in run_time:
        assert op_type not in types, types


@pytest.mark.parametrize(
    "build, shapes, needed",
    [
        (lambda s, x: A.Reshape(s, x, [-1]), [[None, None]], ["Shape"]),
        (lambda s, x: A.Transpose(s, x, hidden(s, [1, 0])), [[2, 3]], ["InvertPermutation"]),
        (lambda s, x: x[1:], [[None, 2]], ["Shape", "StridedSliceGrad"]),
        (lambda s, x: A.Slice(s, x, [1], [-1]), [[None]], ["Shape", "AddV2"]),
        (lambda s, x, y: A.ConcatV2(s, [x, y], 0), [[None, 2], [None, 2]], ["Shape", "AddV2"]),
        (lambda s, x, y: A.ConcatV2(s, [x, y], hidden(s, 0)), [[1, 2], [1, 2]], ["OneHot"]),
        (lambda s, x: A.Tile(s, x, hidden(s, [2, 3])), [[2, 1]], ["Pack", "Transpose"]),
        (lambda s, x: A.Tile(s, x, hidden(s, [2, 3])), [None], ["Range", "Size"]),
        (lambda s, x: A.BroadcastTo(s, x, hidden(s, [2, 3])), [[None]],
         ["BroadcastGradientArgs"]),
        (lambda s, x: A.Fill(s, forget(s, hidden(s, [2, 3]), "rank"), x), [[]],
         ["Range", "Rank"]),
    ],
)  # fmt: skip
def test_run_time_shapes_build_tfs_shape_ops(build, shapes, needed):
    types = _gradient_op_types(build, shapes)
    for op_type in needed:
        assert op_type in types, types


def test_rule_nodes_are_named_after_their_forward_op():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, [4, 2]).output
    y = A.Tile(root.with_op_name("tiled"), x[1:], [2, 1]).output
    (dx,) = mg.gradients(y, x)
    assert dx.op.type == "StridedSliceGrad"
    assert dx.op.name.startswith("gradients/strided_slice_grad/")
    sums = [op for op in root.graph.operations if op.type == "Sum"]
    assert [op.name.split("/")[1] for op in sums] == ["tiled_grad"]


def test_static_gradient_shapes_are_the_inputs():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root, mg.float32, [4, 2, 3]).output
    ys = [A.Tile(root, x, [2, 1, 1]), A.Transpose(root, x, [2, 0, 1]), x[::2, None, 1],
          A.Slice(root, x, [1, 0, 0], [2, 1, -1]), A.ConcatV2(root, [x, x], 2),
          A.BroadcastTo(root, x, [3, 4, 2, 3]), A.Reshape(root, x, [-1])]  # fmt: skip
    for y in ys:
        (dx,) = mg.gradients(y, x)
        assert dx.shape == mg.TensorShape([4, 2, 3]), y


# -- devices ------------------------------------------------------------------------------------


def test_gradients_run_on_a_simulated_gpu(sim_gpus):
    root = mg.Scope.new_root_scope()
    gpu = root.with_device("/gpu:0")
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, [None, 3]).output
    perm = mg.Placeholder(root.with_op_name("perm"), mg.int32, [2]).output
    parts = [A.Transpose(gpu, x, perm), x[1:, ::-1], A.Slice(gpu, x, [0, 1], [-1, 2]),
             A.Tile(gpu, x, [1, 2]), A.ConcatV2(gpu, [x, x], hidden(gpu, 1)),
             A.SelectV2(gpu, [True, False, True], x, np.float32(0))]  # fmt: skip
    y = Sum(gpu, A.ConcatV2(gpu, [A.Reshape(gpu, p, [-1]) for p in parts], 0), 0).output
    (dx,) = mg.gradients(y, x)
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    metadata = mg.RunMetadata()
    with mg.Session(root) as session:
        got = session.run(dx, {x: data, perm: np.array([1, 0], np.int32)},
                          run_metadata=metadata)  # fmt: skip
    placed = {name: device for name, device in metadata.placement.items()
              if name.startswith("gradients/")}  # fmt: skip
    on_gpu = [name for name, device in placed.items() if device.endswith("GPU:0")]
    kinds = {root.graph.get_operation(name).type for name in on_gpu}
    assert {"StridedSliceGrad", "Sum", "Slice", "Transpose", "SelectV2"} <= kinds, kinds
    # Transpose 1, x[1:, ::-1] row 1, the Slice columns 1 and 2, Tile 2, ConcatV2 2, SelectV2
    # columns 0 and 2.
    want = 1 + np.array([[0, 0, 0], [1, 1, 1]]) + np.array([[0, 1, 1], [0, 1, 1]]) + 2 + 2
    want = want + np.array([[1, 0, 1], [1, 0, 1]])
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_gradients_through_float32_graph_match_float64():
    for name in ["ConcatV2", "Tile", "StridedSlice", "SelectV2", "Slice"]:
        build, forward, values = CASES[name]
        dy = RNG.standard_normal(np.shape(forward(*values)))
        got32, _ = run_gradients(build, _cast(values, np.float32), dy=dy.astype(np.float32))
        got64, _ = run_gradients(build, values, dy=dy)
        for a, b in zip(got32, got64):
            assert a.dtype == np.float32
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_compute_gradient_of_an_empty_slice_is_zeros():
    theoretical, numerical = compute_gradient(lambda s, x: x[2:2], [v(3, 2)])
    assert theoretical[0].shape == (0, 6) and numerical[0].shape == (0, 6)
