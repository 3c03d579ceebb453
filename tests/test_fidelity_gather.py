"""gather where it differed from tf.gather (issue 24): `batch_dims=None` means 0, and a
negative batch_dims past rank(indices) with no axis is reported as what it is."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import msg

import minigraph as mg
from ops import Placeholder, gather, gather_nd


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_batch_dims_none_is_zero(axis):
    s = mg.Scope.new_root_scope()
    params = np.arange(6).reshape(2, 3)
    a = gather(s, params, [1, 0], axis=axis, batch_dims=None)
    b = gather(s, params, [1, 0], axis=axis)
    assert a.operation.get_attr("batch_dims") == 0
    assert a.shape == b.shape
    got, want = mg.Session(s).run([a, b])
    np.testing.assert_array_equal(got, want)


def test_gather_nd_batch_dims_none_is_zero_too():
    s = mg.Scope.new_root_scope()
    out = gather_nd(s, [[1, 2], [3, 4]], [[1, 0]], batch_dims=None)
    assert mg.Session(s).run(out).tolist() == [3]


@pytest.mark.parametrize(
    "batch_dims, indices, text",
    [
        (-(2**31), [0], "gather: Expected batch_dims in the range [-1, 1], but got -2147483648"),
        (-2, [0], "gather: Expected batch_dims in the range [-1, 1], but got -2"),
        (-3, [[0]], "gather: Expected batch_dims in the range [-2, 2], but got -3"),
        (-(2**63), 0, "gather: Expected batch_dims in the range [0, 0], but got "),
    ],
)
def test_a_negative_batch_dims_past_the_indices_rank_names_batch_dims(batch_dims, indices, text):
    # TF: a check failure that kills the process in graph mode, "Shape must be at least rank
    # 2147483648" in eager mode; before: an axis range error (the axis derived from it).
    s = mg.Scope.new_root_scope()
    with pytest.raises(mg.InvalidArgumentError, match=msg(text)) as error:
        gather(s, [[0.5]], indices, batch_dims=batch_dims)
    assert "axis" not in error.value.message
    assert len(s.graph) == 0


def test_in_range_negative_batch_dims_still_work():
    s = mg.Scope.new_root_scope()
    params = np.arange(24).reshape(2, 3, 4)
    indices = Placeholder(s, mg.int32, shape=[2, 2])
    out = gather(s, params, indices, batch_dims=-1)  # batch_dims 1, axis 1
    got = mg.Session(s).run(out, {indices: [[2, 0], [1, 1]]})
    np.testing.assert_array_equal(got, np.stack([params[0][[2, 0]], params[1][[1, 1]]]))


def test_bool_and_float_batch_dims_are_still_refused():
    s = mg.Scope.new_root_scope()
    for bad in (True, 1.0, "0"):
        with pytest.raises(mg.InvalidArgumentError, match="batch_dims must be an int"):
            gather(s, [1, 2], [0], batch_dims=bad)
