"""Broadcast literals and Consts too large to hold: a ResourceExhaustedError naming the literal
(issue 24, section 3, "Broadcast feeds"), never numpy's MemoryError."""

import numpy as np
import pytest

import minigraph as mg
from ops import gather

HUGE = (10**6, 10**6)


@pytest.mark.parametrize(
    "value, dtype",
    [
        (np.broadcast_to(np.float64(1.5), HUGE), None),
        (np.broadcast_to(np.float64(1.5), HUGE), mg.float32),
        (np.broadcast_to(np.array("ab", object), HUGE), None),
        (np.broadcast_to(np.array(b"ab"), HUGE), None),
    ],
)
def test_a_broadcast_const_too_large_to_hold_is_resource_exhausted(value, dtype):
    with pytest.raises(mg.ResourceExhaustedError, match="Const: cannot hold its value"):
        mg.Const(mg.Scope.new_root_scope(), value, dtype)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_a_broadcast_literal_input_names_the_input(index_dtype):
    scope = mg.Scope.new_root_scope()
    with pytest.raises(mg.ResourceExhaustedError, match="GatherV2: cannot convert input 'indices'"):
        gather(scope, [1.0, 2.0], np.broadcast_to(index_dtype(0), HUGE))


def test_a_small_broadcast_literal_still_converts():
    scope = mg.Scope.new_root_scope()
    c = mg.Const(scope, np.broadcast_to(np.array([1, 2], np.int64), (3, 2)), mg.int32)
    words = mg.Const(scope, np.broadcast_to(np.array(["x", "é"]), (2, 2)))
    with mg.Session(scope) as session:
        assert session.run(c).tolist() == [[1, 2]] * 3
        assert session.run(words).tolist() == [[b"x", "é".encode()]] * 2
