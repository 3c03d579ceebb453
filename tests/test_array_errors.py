"""The array ops' errors, as a hostile user meets them: every construction error of the table
(tests/_array_helpers.py; tests/test_array_tf.py checks the same table against TensorFlow)
with TF's message, leaving the graph exactly as it was; every run-time error with TF's
message and the node's context; wrong dtypes, out-of-range attrs, absurd sizes and list
lengths as typed errors, never a crash or a hang.
"""

from __future__ import annotations

import numpy as np
import pytest
from _array_helpers import BUILD_ERRORS, RUN_ERRORS, prepare_mg, run_mg

import minigraph as mg
import ops  # noqa: F401
from minigraph import Placeholder, Scope, Session
from ops import array as A


@pytest.mark.parametrize("case", BUILD_ERRORS, ids=[c[0] for c in BUILD_ERRORS])
def test_construction_errors_leave_the_graph_unchanged(case):
    _, call, _, message = case
    scope = Scope.new_root_scope()
    args, _ = prepare_mg(scope, call)
    before = [op.name for op in scope.graph.operations]
    with pytest.raises(mg.InvalidArgumentError) as info:
        getattr(A, call.op)(scope, *args, **call.attrs)
    assert info.value.message.startswith(message + " for '"), info.value.message
    assert [op.name for op in scope.graph.operations] == before
    # No name was taken either: the next node gets the name the failed one would have had.
    assert A.ZerosLike(scope.with_op_name(call.op), 1.0).operation.name == call.op


@pytest.mark.parametrize("case", RUN_ERRORS, ids=[c[0] for c in RUN_ERRORS])
def test_run_time_errors_name_the_node(case):
    _, call, message = case
    outcome = run_mg(call)
    assert (outcome.phase, outcome.message) == ("run", message)
    assert outcome.error is mg.InvalidArgumentError


def test_run_time_errors_carry_the_node_and_where_it_was_built(cpu_only):
    scope = Scope.new_root_scope()
    perm = Placeholder(scope.with_op_name("perm"), mg.int32).output
    t = A.Transpose(scope.with_op_name("flip"), np.zeros([2, 3], np.float32), perm)
    with pytest.raises(mg.InvalidArgumentError) as info:
        Session(scope).run(t, {perm: [1, 1]})
    assert info.value.node_name == "flip" and info.value.op_type == "Transpose"
    assert "0 is missing from {1,1}." in str(info.value)
    assert "test_array_errors.py" in str(info.value)


# -- wrong dtypes and attrs -------------------------------------------------------------------

F = np.zeros([2, 3], np.float32)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda s: A.OneHot(s, [0.5], 2, 1.0, 0.0), "TI"),
        (lambda s: A.OneHot(s, np.array([1], np.int16), 2, 1.0, 0.0), "TI"),
        (lambda s: A.OneHot(s, [1], 2, 1.0, "off"), "off_value"),
        (lambda s: A.OneHot(s, [1], 2.5, 1.0, 0.0), "depth"),
        (lambda s: A.Transpose(s, F, np.array([1, 0], np.int16)), "Tperm"),
        (lambda s: A.StridedSlice(s, F, [0.0], [1.0], [1.0]), "Index"),
        (lambda s: A.Slice(s, F, np.array([0, 0], np.int16), np.array([1, 1], np.int16)), "Index"),
        (lambda s: A.Tile(s, F, [1.0, 2.0]), "Tmultiples"),
        (lambda s: A.Fill(s, [2.0], 1.0), "index_type"),
        (lambda s: A.SelectV2(s, [1, 0], [1, 2], [3, 4]), "condition"),
        (lambda s: A.SelectV2(s, [True], [1, 2], [3.0, 4.0]), "e"),
        (lambda s: A.OnesLike(s, ["a"]), "string"),
        (lambda s: A.Pack(s, []), "N"),
        (lambda s: A.Unpack(s, F, -1), "num"),
        (lambda s: A.Unpack(s, np.zeros([2**21, 0]), 2**21), "2\\*\\*20|1048576|list output"),
        (lambda s: A.StridedSlice(s, F, [0], [1], [1], begin_mask=2**32),
         "Attr begin_mask has value 4294967296 out of range for an int32"),
        (lambda s: A.StridedSlice(s, F, [0], [1], [1], shrink_axis_mask=-(2**31) - 1),
         "Attr shrink_axis_mask has value"),
        (lambda s: A.Squeeze(s, F, squeeze_dims=[0.5]), "squeeze_dims"),
        (lambda s: A.ExpandDims(s, np.zeros([1] * 64), 0), "above the limit of 64"),
        (lambda s: A.Pack(s, [np.zeros([1] * 64)] * 2), "above the limit of 64"),
        (lambda s: A.OneHot(s, np.zeros([1] * 64, np.int32), 2, 1.0, 0.0), "above the limit of 64"),
        (lambda s: A.Fill(s, np.array([2**62, 2**62]), 1.0), "more than 2\\*\\*63 - 1 elements"),
        (lambda s: A.BroadcastTo(s, 1.0, np.array([2**62, 4])), "more than 2\\*\\*63 - 1 elements"),
    ],
)  # fmt: skip
def test_wrong_dtypes_attrs_and_sizes_are_refused_when_built(build, match):
    scope = Scope.new_root_scope()
    with pytest.raises(mg.InvalidArgumentError, match=match):
        build(scope)
    assert len(scope.graph.operations) == 0


def test_inputs_bound_to_one_type_attr_must_agree():
    scope = Scope.new_root_scope()
    begin = Placeholder(scope, mg.int16, shape=[1]).output
    end = Placeholder(scope, mg.int64, shape=[1]).output
    ints = Placeholder(scope, mg.int32, shape=[2, 3]).output
    before = len(scope.graph.operations)
    with pytest.raises(mg.InvalidArgumentError, match="end"):
        A.StridedSlice(scope, F, begin, end, [1])
    with pytest.raises(mg.InvalidArgumentError, match="values"):
        A.Pack(scope, [F, ints])
    assert len(scope.graph.operations) == before


@pytest.mark.parametrize(
    "build, feed",
    [
        # Valid, but more memory than exists: a typed error, not a crash.
        (lambda s, h: A.Fill(s, h, np.float32(1)), np.array([2**25, 2**25], np.int64)),
        (lambda s, h: A.Tile(s, [1.0], A.Reshape(s, h, [1])), np.array([2**50], np.int64)),
        (lambda s, h: A.BroadcastTo(s, np.float32(1), h), np.array([2**26, 2**26], np.int64)),
    ],
)  # fmt: skip
def test_absurd_but_valid_sizes_are_resource_errors(build, feed, cpu_only):
    scope = Scope.new_root_scope()
    holder = Placeholder(scope, mg.int64).output
    out = build(scope, holder)
    with pytest.raises(mg.ResourceExhaustedError):
        Session(scope).run(out, {holder: feed})


def test_fed_shapes_beyond_numpys_rank_limit_are_invalid_arguments(cpu_only):
    scope = Scope.new_root_scope()
    x = Placeholder(scope, mg.float32).output
    dim = Placeholder(scope, mg.int32).output
    expanded = A.ExpandDims(scope, x, dim)
    with pytest.raises(mg.InvalidArgumentError, match="above the limit of 64"):
        Session(scope).run(expanded, {x: np.zeros([1] * 64, np.float32), dim: 0})
