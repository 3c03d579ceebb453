"""SimulatedArray's Python operators: each is cupy's ufunc with the operands in the written order
(reflected ones swapped), in-place ones write into the left operand, results stay on the device."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from minigraph.testing import SimulatedArray, simulated_cupy

BINARY = [
    (operator.add, np.add),
    (operator.sub, np.subtract),
    (operator.mul, np.multiply),
    (operator.truediv, np.true_divide),
    (operator.floordiv, np.floor_divide),
    (operator.mod, np.remainder),
    (operator.pow, np.power),
    (operator.and_, np.bitwise_and),
    (operator.or_, np.bitwise_or),
    (operator.xor, np.bitwise_xor),
    (operator.lshift, np.left_shift),
    (operator.rshift, np.right_shift),
    (operator.lt, np.less),
    (operator.le, np.less_equal),
    (operator.eq, np.equal),
    (operator.ne, np.not_equal),
    (operator.gt, np.greater),
    (operator.ge, np.greater_equal),
]
REFLECTED = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv}
REFLECTED |= {operator.mod, operator.pow, operator.and_, operator.or_, operator.xor}
IN_PLACE = [
    (operator.iadd, np.add),
    (operator.isub, np.subtract),
    (operator.imul, np.multiply),
    (operator.iand, np.bitwise_and),
    (operator.ior, np.bitwise_or),
]


@pytest.mark.parametrize("op, ufunc", BINARY, ids=lambda v: getattr(v, "__name__", ""))
def test_binary_operator_order(op, ufunc):
    left, right = np.array([7, 2, 9], np.int64), np.array([2, 5, 3], np.int64)
    got = op(simulated_cupy.asarray(left), simulated_cupy.asarray(right))
    assert isinstance(got, SimulatedArray)
    np.testing.assert_array_equal(got.get(), ufunc(left, right))
    if op in REFLECTED:  # a Python scalar on the left: __rop__, operands swapped back
        got = op(3, simulated_cupy.asarray(right))
        np.testing.assert_array_equal(got.get(), ufunc(3, right))


@pytest.mark.parametrize("op, ufunc", IN_PLACE, ids=lambda v: getattr(v, "__name__", ""))
def test_in_place_operator_writes_into_left(op, ufunc):
    left, right = np.array([7, 2, 9], np.int64), np.array([2, 5, 3], np.int64)
    target = simulated_cupy.asarray(left)
    got = op(target, simulated_cupy.asarray(right))
    assert got is target
    np.testing.assert_array_equal(target.get(), ufunc(left, right))
