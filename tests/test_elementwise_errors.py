"""Error tables of the elementwise family (ops/math.py): what fails when a node is built (the
graph is then left as it was) and what fails when it runs, with TensorFlow's messages (checked
against TF 2.21's: "Dimensions must be equal, but are 3 and 4", "Incompatible shapes: [2,3] vs.
[4]", "Integer division by zero", "Integers to negative integer powers are not allowed")."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _elementwise_helpers import cpu_types, np_dtype, run_op

import minigraph as mg
from minigraph import InvalidArgumentError, NotFoundError, UnimplementedError
from ops import math as M


def f32(*shape):
    return np.ones(shape, np.float32)


# -- construction ------------------------------------------------------------------------------

# (build(scope), error type, message pattern)
CONSTRUCTION_ERRORS = [
    (lambda s: M.AddV2(s, f32(3), f32(4)), InvalidArgumentError,
     r"Dimensions must be equal, but are 3 and 4 for 'AddV2' \(AddV2\) with input shapes: "
     r"\[3\], \[4\]"),
    (lambda s: M.Mul(s, f32(2, 3), f32(3, 2)), InvalidArgumentError,
     "Dimensions must be equal, but are 2 and 3"),
    (lambda s: M.Less(s, mg.Placeholder(s, mg.float32, shape=[None, 5]), f32(1, 4)),
     InvalidArgumentError, "Dimensions must be equal, but are 5 and 4"),
    (lambda s: M.Equal(s, f32(2), f32(3)), InvalidArgumentError,
     "Dimensions must be equal, but are 2 and 3"),
    (lambda s: M.AddV2(s, np.array([True]), np.array([False])), InvalidArgumentError,
     "input 'x' has dtype bool, but attr 'T' allows only"),
    (lambda s: M.Less(s, np.array([1j], np.complex64), np.array([1j], np.complex64)),
     InvalidArgumentError, "has dtype complex64, but attr 'T' allows only"),
    (lambda s: M.Abs(s, np.array([1j], np.complex64)), InvalidArgumentError,
     "has dtype complex64, but attr 'T' allows only"),  # TF: complex takes ComplexAbs
    (lambda s: M.Neg(s, np.array([1], np.uint8)), InvalidArgumentError,
     "has dtype uint8, but attr 'T' allows only"),
    (lambda s: M.Sqrt(s, np.array([4], np.int32)), InvalidArgumentError,
     "has dtype int32, but attr 'T' allows only"),
    (lambda s: M.Elu(s, np.array([1j], np.complex64)), InvalidArgumentError,
     "has dtype complex64, but attr 'T' allows only"),
    (lambda s: M.LogicalAnd(s, f32(2), f32(2)), InvalidArgumentError,
     "cannot convert a float32 array to bool"),
    (lambda s: M.LogicalNot(s, mg.Placeholder(s, mg.int32)), InvalidArgumentError, "bool"),
    (lambda s: M.AddV2(s, mg.Placeholder(s, mg.float32), mg.Placeholder(s, mg.float64)),
     InvalidArgumentError, "float64"),
    (lambda s: M.AddN(s, [f32(2), f32(3)]), InvalidArgumentError,
     re.escape("Dimension 0 in both shapes must be equal, but are 2 and 3. Shapes are [2] and "
               "[3]. From merging shape 0 with other shapes.")),
    (lambda s: M.AddN(s, [f32(2), f32(2, 1)]), InvalidArgumentError,
     "Shapes must be equal rank, but are 1 and 2. From merging shape 0 with other shapes."),
    (lambda s: M.AddN(s, [f32(2), f32(2), f32(3)]), InvalidArgumentError,
     "From merging shape 1 with other shapes"),
    (lambda s: M.AddN(s, []), InvalidArgumentError, "needs at least 1 tensor"),
    (lambda s: M.AddN(s, [np.array([True])]), InvalidArgumentError, "attr 'T' allows only"),
    (lambda s: M.BroadcastGradientArgs(s, [2, 3], [4]), InvalidArgumentError,
     re.escape("Incompatible shapes: [2,3] vs. [4]")),
    (lambda s: M.BroadcastGradientArgs(s, [[2]], [4]), InvalidArgumentError,
     "Shape must be rank 1 but is rank 2"),
    (lambda s: M.BroadcastGradientArgs(s, np.array([2.0]), np.array([4.0])),
     InvalidArgumentError, "attr 'T' allows only"),
    (lambda s: M.Cast(s, np.array([b"1"], object), mg.int32), UnimplementedError,
     "Cast of string tensors is not supported"),
    (lambda s: M.Sub(s, f32(2)), InvalidArgumentError, "missing input 'y'"),
    (lambda s: M.Neg(s, f32(2), f32(2)), InvalidArgumentError, "takes 1 inputs"),
]  # fmt: skip


@pytest.mark.parametrize("build, error, pattern", CONSTRUCTION_ERRORS)
def test_construction_errors_leave_the_graph_unchanged(build, error, pattern):
    scope = mg.Scope.new_root_scope()
    mg.Placeholder(scope.with_op_name("anchor"), mg.float32)
    # Build once to see the placeholders a builder makes itself, then count from there.
    before = [op.name for op in scope.graph.get_operations()]
    with pytest.raises(error, match=pattern):
        build(scope)
    after = [op.name for op in scope.graph.get_operations()]
    added = [n for n in after if n not in before]
    # Only the Placeholders the lambda itself built may remain: no node of the failed op, and
    # no literal Const made for it.
    assert all(scope.graph.get_operation(n).type == "Placeholder" for n in added), added


# -- what construction accepts (never refuse what TF accepts) ---------------------------------


def test_unknown_dims_and_ranks_build_and_fail_at_run_time():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.float32, shape=[None, 3])
    y = mg.Placeholder(scope, mg.float32)
    z = M.AddV2(scope, x, y)
    assert z.shape.rank is None
    with mg.Session(scope) as sess:
        assert sess.run(z, {x: f32(2, 3), y: f32(3)}).shape == (2, 3)
        with pytest.raises(
            InvalidArgumentError, match=re.escape("Incompatible shapes: [2,3] vs. [4]")
        ):
            sess.run(z, {x: f32(2, 3), y: f32(4)})


def test_equal_without_incompatible_shape_error_builds_a_scalar_for_known_mismatches():
    scope = mg.Scope.new_root_scope()
    eq = M.Equal(scope, f32(2), f32(3), incompatible_shape_error=False)
    ne = M.NotEqual(scope, f32(2), f32(3), incompatible_shape_error=False)
    assert eq.shape.as_list() == [] and ne.shape.as_list() == []
    x = mg.Placeholder(scope, mg.float32, shape=[None])
    # An unknown dim against 3 cannot be known to broadcast: TF gives an unknown shape.
    assert M.Equal(scope, x, f32(3), incompatible_shape_error=False).shape.rank is None
    assert M.Equal(scope, x, f32(1), incompatible_shape_error=False).shape.as_list() == [None]
    # Two unknown dims may not broadcast (then the result is a scalar): unknown, not [?].
    assert M.Equal(scope, x, x, incompatible_shape_error=False).shape.rank is None
    assert M.Equal(scope, f32(2, 1), f32(3), incompatible_shape_error=False).shape == [2, 3]
    y = mg.Placeholder(scope, mg.float32, shape=[None])
    lenient = M.NotEqual(scope, x, y, incompatible_shape_error=False)
    with mg.Session(scope, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        got = sess.run([eq, ne])
        # A run-time mismatch gives the scalar, which the static shape allows.
        assert sess.run(lenient, {x: f32(2), y: f32(3)}).tolist() is True
        assert sess.run(lenient, {x: f32(2), y: f32(2)}).tolist() == [False, False]
    assert got[0].tolist() is False and got[1].tolist() is True


@pytest.mark.parametrize("op", ["Equal", "NotEqual"])
def test_equality_with_incompatible_shapes_at_run_time(op):
    x, y = np.array([1, 2], np.int32), np.array([1, 2, 3], np.int32)
    got = run_op(op, x, y, incompatible_shape_error=False)
    assert got.shape == () and got.tolist() == (op == "NotEqual")
    with pytest.raises(InvalidArgumentError, match=re.escape("Incompatible shapes: [2] vs. [3]")):
        run_op(op, x, y)
    # Shapes that do broadcast are compared as usual.
    got = run_op(op, np.array([[1, 2]]), np.array([[1], [2]]), incompatible_shape_error=False)
    assert got.tolist() == ([[True, False], [False, True]] if op == "Equal" else
                            [[False, True], [True, False]])  # fmt: skip


# -- run time ---------------------------------------------------------------------------------

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("op", ["Div", "FloorDiv", "FloorMod"])
@pytest.mark.parametrize("dtype", INT_TYPES)
def test_integer_division_by_zero_on_every_device(op, dtype):
    t = np_dtype(dtype)
    for device in ("/cpu:0", None):  # None: wherever the session places it (a GPU if any)
        for x, y in (
            (np.array([4, 5, 6], t), np.array([1, 0, 2], t)),
            (np.array([4, 5], t), np.array(0, t)),
            (np.zeros((0, 2), t), np.zeros((1, 2), t)),  # nothing to divide: TF raises still
        ):
            with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
                run_op(op, x, y, device=device)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integers_to_negative_integer_powers(dtype):
    t = np_dtype(dtype)
    for x, y in ((np.array([2, 3], t), np.array([1, -1], t)), (np.array(1, t), np.array(-1, t))):
        with pytest.raises(InvalidArgumentError) as raised:
            run_op("Pow", x, y)
        # TF's message, from the kernel's own check (not numpy's ValueError, nor cupy's zeros).
        assert raised.value.message.startswith(
            "Integers to negative integer powers are not allowed\n"
        ), raised.value.message
    assert run_op("Pow", np.array([0, 0, 2], t), np.array([0, 3, 2], t)).tolist() == [1, 0, 4]


@pytest.mark.parametrize(
    "op, x, y, text",
    [
        ("AddV2", f32(2, 3), f32(4), "Incompatible shapes: [2,3] vs. [4]"),
        ("Sub", f32(2, 3), f32(3, 2), "Incompatible shapes: [2,3] vs. [3,2]"),
        ("Maximum", f32(0), f32(2), "Incompatible shapes: [0] vs. [2]"),
        ("LogicalAnd", np.ones(2, bool), np.ones(3, bool), "Incompatible shapes: [2] vs. [3]"),
        ("FloorDiv", np.ones(2, np.int32), np.ones(3, np.int32), "Incompatible shapes"),
        ("Div", np.ones(2, np.int32), np.ones(3, np.int32), "Incompatible shapes"),
        ("Pow", f32(2), f32(3), "Incompatible shapes: [2] vs. [3]"),
        ("Greater", f32(5, 1, 2), f32(3, 3), "Incompatible shapes: [5,1,2] vs. [3,3]"),
    ],
)
def test_run_time_shape_mismatch(op, x, y, text):
    with pytest.raises(InvalidArgumentError, match=re.escape(text)):
        run_op(op, x, y)


def test_add_n_run_time_shape_mismatch():
    scope = mg.Scope.new_root_scope()
    a, b = mg.Placeholder(scope, mg.float32), mg.Placeholder(scope, mg.float32)
    total = M.AddN(scope.with_op_name("sum"), [a, b])
    with mg.Session(scope) as sess:
        for x, y, text in (
            (f32(2), f32(3), "Input 0: [2] != input 1: [3]"),
            (f32(2, 1), f32(2), "Input 0: [2,1] != input 1: [2]"),
            (f32(), f32(1), "Input 0: [] != input 1: [1]"),
        ):
            with pytest.raises(InvalidArgumentError, match=re.escape(
                "Inputs to operation sum of type AddN must have the same size and shape.  " + text
            )):  # fmt: skip
                sess.run(total, {a: x, b: y})


def test_broadcast_gradient_args_run_time_errors():
    scope = mg.Scope.new_root_scope()
    s0, s1 = mg.Placeholder(scope, mg.int32), mg.Placeholder(scope, mg.int32)
    r = M.BroadcastGradientArgs(scope, s0, s1)
    with mg.Session(scope) as sess:
        with pytest.raises(
            InvalidArgumentError, match=re.escape("Incompatible shapes: [2,3] vs. [4]")
        ):
            sess.run(r.outputs, {s0: [2, 3], s1: [4]})
        with pytest.raises(InvalidArgumentError, match=re.escape("In[1] must be a vector.[1,1]")):
            sess.run(r.outputs, {s0: [2], s1: [[1]]})


# -- ops the OpDef allows but no kernel runs (as in TF) ---------------------------------------

NO_KERNEL = [
    ("RealDiv", "int32"), ("RealDiv", "uint8"), ("Reciprocal", "int64"), ("FloorDiv", "complex64"),
    ("Round", "int8"), ("Round", "complex128"), ("Abs", "uint8"),
]  # fmt: skip


@pytest.mark.parametrize("op, dtype", NO_KERNEL)
def test_dtypes_the_op_allows_but_no_kernel_takes(op, dtype):
    row = M.ELEMENTWISE_OPS[[r.name for r in M.ELEMENTWISE_OPS].index(op)]
    if dtype not in row.types:
        # Not even the OpDef allows it (Abs of unsigned): refused when built.
        with pytest.raises(InvalidArgumentError, match="allows only"):
            run_op(op, np.ones(2, np_dtype(dtype)))
        return
    assert dtype not in cpu_types(op)
    values = [np.ones(2, np_dtype(dtype))] * len(row.inputs)
    with pytest.raises(NotFoundError, match=f"No registered kernel for op {op}"):
        run_op(op, *values)
