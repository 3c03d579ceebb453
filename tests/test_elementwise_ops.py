"""The elementwise family (ops/math.py) on TensorFlow's documented examples, and its builders.

DOC_EXAMPLES are the examples of the tf.math / tf.nn docs (tf.math.add, subtract, ..., add_n),
as the raw ops they build, with the values TensorFlow 2.21 computes for them (run once through
tf.raw_ops and pasted here; tests/test_elementwise_tf.py runs TF itself where it is installed).
Values are fed through placeholders, so the kernels run (on a simulated GPU in the CI's GPU
variant, for the dtypes it holds) rather than being folded as constants.
"""

# ruff: noqa: E501 - the table of TF's examples reads best one example a line

from __future__ import annotations

import numpy as np
import pytest
from _elementwise_helpers import ROWS, assert_close, builder, np_dtype, run_op

import minigraph as mg
from ops import math as M

nan, inf = float("nan"), float("inf")

# (op, [(value, dtype), ...], attrs, TF's result, TF's result dtype)
DOC_EXAMPLES = [
    ('AddV2', [([1, 2, 3, 4, 5], 'int32'), (1, 'int32')], {}, [2, 3, 4, 5, 6], 'int32'),
    ('AddV2', [([1, 2], 'int8'), ([-127, -126], 'int8')], {}, [-126, -124], 'int8'),
    ('AddV2', [([1, 2, 3, 4, 5], 'int32'), ([1, 2, 3, 4, 5], 'int32')], {}, [2, 4, 6, 8, 10], 'int32'),
    ('Sub', [([1, 2, 3, 4, 5], 'int32'), (1, 'int32')], {}, [0, 1, 2, 3, 4], 'int32'),
    ('Sub', [(1, 'int32'), ([1, 2, 3, 4, 5], 'int32')], {}, [0, -1, -2, -3, -4], 'int32'),
    ('Sub', [([5, 4, 3, 2, 1], 'int32'), ([1, 2, 3, 4, 5], 'int32')], {}, [4, 2, 0, -2, -4], 'int32'),
    ('Sub', [([1, 2], 'int8'), ([1, 2], 'int8')], {}, [0, 0], 'int8'),
    ('Mul', [([1, 2, 3, 4], 'int32'), ([1, 2, 3, 4], 'int32')], {}, [1, 4, 9, 16], 'int32'),
    ('Mul', [(7, 'int32'), (6, 'int32')], {}, 42, 'int32'),
    ('Mul', [([[1.0, 1.0]], 'float32'), ([[1.0], [1.0]], 'float32')], {}, [[1.0, 1.0], [1.0, 1.0]], 'float32'),
    ('RealDiv', [([10.0, 20.0, 30.0], 'float64'), ([2.0, 4.0, 5.0], 'float64')], {}, [5.0, 5.0, 6.0], 'float64'),
    ('RealDiv', [([[10.0, 20.0], [30.0, 40.0]], 'float64'), ([2.0, 5.0], 'float64')], {}, [[5.0, 4.0], [15.0, 8.0]], 'float64'),
    ('RealDiv', [(5.0, 'float32'), (0.0, 'float32')], {}, inf, 'float32'),
    ('RealDiv', [([16.0, 12.0, 11.0], 'float64'), ([4.0, 6.0, 2.0], 'float64')], {}, [4.0, 2.0, 5.5], 'float64'),
    ('Div', [([16, 12, 11], 'int32'), ([4, 6, 2], 'int32')], {}, [4, 2, 5], 'int32'),
    ('FloorDiv', [([8.4, -8.4], 'float32'), ([4.0, 4.0], 'float32')], {}, [2.0, -3.0], 'float32'),
    ('FloorMod', [([7, -7, 7, -7], 'int32'), ([3, 3, -3, -3], 'int32')], {}, [1, 2, -2, -1], 'int32'),
    ('Maximum', [([0.0, 0.0, 0.0, 0.0], 'float32'), ([-2.0, 0.0, 2.0, 5.0], 'float32')], {}, [0.0, 0.0, 2.0, 5.0], 'float32'),
    ('Maximum', [([-5.0, 0.0, 0.0, 0.0], 'float32'), ([-3.0], 'float32')], {}, [-3.0, 0.0, 0.0, 0.0], 'float32'),
    ('Minimum', [([0.0, 0.0, 0.0, 0.0], 'float32'), ([-5.0, -2.0, 0.0, 3.0], 'float32')], {}, [-5.0, -2.0, 0.0, 0.0], 'float32'),
    ('Minimum', [([-5.0, 0.0, 0.0, 0.0], 'float32'), ([-3.0], 'float32')], {}, [-5.0, -3.0, -3.0, -3.0], 'float32'),
    ('Pow', [([[2, 2], [3, 3]], 'int32'), ([[8, 16], [2, 3]], 'int32')], {}, [[256, 65536], [9, 27]], 'int32'),
    ('SquaredDifference', [([1.0, 4.0, -2.0], 'float32'), ([3.0, 4.0, 2.0], 'float32')], {}, [4.0, 0.0, 16.0], 'float32'),
    ('Less', [([5, 4, 6], 'int32'), ([5], 'int32')], {}, [False, True, False], 'bool'),
    ('Less', [([5, 4, 6], 'int32'), ([5, 6, 7], 'int32')], {}, [False, True, True], 'bool'),
    ('LessEqual', [([5, 4, 6], 'int32'), ([5], 'int32')], {}, [True, True, False], 'bool'),
    ('LessEqual', [([5, 4, 6], 'int32'), ([5, 6, 6], 'int32')], {}, [True, True, True], 'bool'),
    ('Greater', [([5, 4, 6], 'int32'), ([5, 2, 5], 'int32')], {}, [False, True, True], 'bool'),
    ('Greater', [([5, 4, 6], 'int32'), ([5], 'int32')], {}, [False, False, True], 'bool'),
    ('GreaterEqual', [([5, 4, 6, 7], 'int32'), ([5, 2, 5, 10], 'int32')], {}, [True, True, True, False], 'bool'),
    ('GreaterEqual', [([5, 4, 6, 7], 'int32'), ([5], 'int32')], {}, [True, False, True, True], 'bool'),
    ('Equal', [([2, 4], 'int32'), (2, 'int32')], {}, [True, False], 'bool'),
    ('Equal', [([2, 4], 'int32'), ([2, 4], 'int32')], {}, [True, True], 'bool'),
    ('NotEqual', [([2, 4], 'int32'), (2, 'int32')], {}, [False, True], 'bool'),
    ('NotEqual', [([2, 4], 'int32'), ([2, 4], 'int32')], {}, [False, False], 'bool'),
    ('LogicalAnd', [([True], 'bool'), ([False], 'bool')], {}, [False], 'bool'),
    ('LogicalAnd', [([True], 'bool'), ([False, True, True, False], 'bool')], {}, [False, True, True, False], 'bool'),
    ('LogicalAnd', [([False, False, True, True], 'bool'), ([False, True, False, True], 'bool')], {}, [False, False, False, True], 'bool'),
    ('LogicalAnd', [([[True, False]], 'bool'), ([[True], [False]], 'bool')], {}, [[True, False], [False, False]], 'bool'),
    ('LogicalOr', [([True], 'bool'), ([False], 'bool')], {}, [True], 'bool'),
    ('LogicalOr', [([False], 'bool'), ([False, True, True, False], 'bool')], {}, [False, True, True, False], 'bool'),
    ('LogicalOr', [([False, False, True, True], 'bool'), ([False, True, False, True], 'bool')], {}, [False, True, True, True], 'bool'),
    ('LogicalOr', [([[True, False]], 'bool'), ([[True], [False]], 'bool')], {}, [[True, True], [True, False]], 'bool'),
    ('LogicalNot', [([True, False], 'bool')], {}, [False, True], 'bool'),
    ('Neg', [([-2.0, 0.0, 3.0], 'float32')], {}, [2.0, -0.0, -3.0], 'float32'),
    ('Abs', [([-2.25, 3.25], 'float32')], {}, [2.25, 3.25], 'float32'),
    ('Sign', [([0.0, 2.0, -3.0], 'float32')], {}, [0.0, 1.0, -1.0], 'float32'),
    ('Sign', [([(1+1j), 0j], 'complex128')], {}, [(0.7071067811865475+0.7071067811865475j), 0j], 'complex128'),
    ('Square', [([-2.0, 0.0, 3.0], 'float32')], {}, [4.0, 0.0, 9.0], 'float32'),
    ('Sqrt', [([[4.0], [16.0]], 'float32')], {}, [[2.0], [4.0]], 'float32'),
    ('Sqrt', [([[-4.0], [16.0]], 'float32')], {}, [[nan], [4.0]], 'float32'),
    ('Sqrt', [([[-1.0], [16.0]], 'complex128')], {}, [[1j], [(4+0j)]], 'complex128'),
    ('Rsqrt', [([2.0, 0.0, -2.0], 'float32')], {}, [0.7071067690849304, inf, nan], 'float32'),
    ('Reciprocal', [([2.0, -0.5, 0.0], 'float32')], {}, [0.5, -2.0, inf], 'float32'),
    ('Exp', [(2.0, 'float32')], {}, 7.389056205749512, 'float32'),
    ('Exp', [([2.0, 8.0], 'float32')], {}, [7.389056205749512, 2980.9580078125], 'float32'),
    ('Exp', [((1+1j), 'complex128')], {}, (1.4686939399158851+2.2873552871788423j), 'complex128'),
    ('Log', [([0.0, 0.5, 1.0, 5.0], 'float32')], {}, [-inf, -0.6931471824645996, 0.0, 1.6094379425048828], 'float32'),
    ('Log1p', [([0.0, 0.5, 1.0, 5.0], 'float32')], {}, [0.0, 0.40546509623527527, 0.6931471824645996, 1.7917594909667969], 'float32'),
    ('Tanh', [([-inf, -5.0, -0.5, 1.0, 1.2, 2.0, 3.0, inf], 'float32')], {}, [-1.0, -0.9999091625213623, -0.46211713552474976, 0.7615941762924194, 0.8336547017097473, 0.9640275835990906, 0.9950547218322754, 1.0], 'float32'),
    ('Sigmoid', [([0.0, 1.0, 50.0, 100.0], 'float32')], {}, [0.5, 0.7310585975646973, 1.0, 1.0], 'float32'),
    ('Sigmoid', [([-100.0, -50.0, -1.0, 0.0], 'float32')], {}, [0.0, 1.9287498933537385e-22, 0.2689414322376251, 0.5], 'float32'),
    ('Sigmoid', [([-128.0, 0.0, 128.0], 'float32')], {}, [0.0, 0.5, 1.0], 'float32'),
    ('Relu', [([-2.0, 0.0, 3.0], 'float32')], {}, [0.0, 0.0, 3.0], 'float32'),
    ('Relu6', [([-3.0, -1.0, 0.0, 6.0, 10.0], 'float32')], {}, [0.0, 0.0, 0.0, 6.0, 6.0], 'float32'),
    ('Elu', [(1.0, 'float32')], {}, 1.0, 'float32'),
    ('Elu', [(0.0, 'float32')], {}, 0.0, 'float32'),
    ('Elu', [(-1000.0, 'float32')], {}, -1.0, 'float32'),
    ('Softplus', [([0.0, 1.0], 'float32')], {}, [0.6931471824645996, 1.31326162815094], 'float32'),
    ('Floor', [([1.3324, -1.5, 5.555, -2.532, 0.99, inf], 'float32')], {}, [1.0, -2.0, 5.0, -3.0, 0.0, inf], 'float32'),
    ('Ceil', [([-1.7, -1.5, -0.2, 0.2, 1.5, 1.7, 2.0], 'float32')], {}, [-1.0, -1.0, -0.0, 1.0, 2.0, 2.0, 2.0], 'float32'),
    ('Round', [([0.9, 2.5, 2.3, 1.5, -4.5], 'float32')], {}, [1.0, 2.0, 2.0, 2.0, -4.0], 'float32'),
    ('AddN', [([[3, 5], [4, 8]], 'int32'), ([[1, 6], [2, 9]], 'int32'), ([[3, 5], [4, 8]], 'int32')], {}, [[7, 16], [10, 25]], 'int32'),
]  # fmt: skip


@pytest.mark.parametrize(
    "op, inputs, attrs, want, want_dtype",
    DOC_EXAMPLES,
    ids=[f"{e[0]}-{i}" for i, e in enumerate(DOC_EXAMPLES)],
)
def test_tf_doc_examples(op, inputs, attrs, want, want_dtype):
    values = [np.array(v, dtype=np_dtype(d)) for v, d in inputs]
    got = run_op(op, values, **attrs) if op == "AddN" else run_op(op, *values, **attrs)
    # float32 within TF's approximations (Tanh, Sigmoid, ...); TF flushes denormals to 0.
    assert_close(got, np.array(want, dtype=want_dtype), rtol=1e-6, atol=1e-37)


def test_every_op_of_the_family_has_a_doc_example_or_a_reference_test():
    # The ops without a doc example in TF's docs (BroadcastGradientArgs, Cast) have their own
    # files; every row of the table is exercised here.
    assert {e[0] for e in DOC_EXAMPLES} >= set(ROWS)


# -- the priority ops: AddN, AddV2, Mul, Neg, RealDiv ------------------------------------------


def test_the_gradient_building_blocks_compose():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, shape=[None, 3])
    y = M.RealDiv(scope, M.Neg(scope, M.Mul(scope, M.AddV2(scope, x, 1), x)), 2)
    total = M.AddN(scope, [x, y, y])
    assert total.shape.as_list() == [None, 3] and total.dtype == mg.float32
    assert total.operation.attrs["N"] == 3
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    with mg.Session(scope) as sess:
        got = sess.run(total, {x: value})
    want = value + 2 * (-((value + 1) * value) / 2)
    assert_close(got, want.astype(np.float32), rtol=0)


def test_builders_by_op_type_name_through_the_registry():
    # The gradient machinery builds nodes by type name (registry + Scope.create_op).
    scope = mg.Scope.new_root_scope()
    x = mg.Const(scope, np.array([1.0, 2.0], np.float32)).output
    outputs = {}
    for op_type, inputs in [
        ("AddN", [[x, x, x]]), ("AddV2", [x, x]), ("Mul", [x, x]), ("Neg", [x]),
        ("RealDiv", [x, x]),
    ]:  # fmt: skip
        op_def = mg.registry.get_op_def(op_type)
        outputs[op_type] = scope.create_op(op_def, inputs, {}).outputs[0]
    with mg.Session(scope) as sess:
        got = sess.run(outputs)
    assert got["AddN"].tolist() == [3.0, 6.0] and got["AddV2"].tolist() == [2.0, 4.0]
    assert got["Mul"].tolist() == [1.0, 4.0] and got["Neg"].tolist() == [-1.0, -2.0]
    assert got["RealDiv"].tolist() == [1.0, 1.0]


def test_add_n_of_one_input_and_many_inputs():
    x = np.array([[1.5, -2.0]], np.float32)
    assert_close(run_op("AddN", [x]), x, rtol=0)
    many = [np.full((2, 2), i, np.int64) for i in range(20)]
    assert run_op("AddN", many).tolist() == [[190, 190], [190, 190]]


def test_add_n_adds_left_to_right_in_the_dtype():
    # float16: ((1e-4 + 1) + 1e4) rounds at each step, as TF's kernel (TF gives [3e-04 3 3e4]
    # for [x, x, x, -x, x]).
    x = np.array([1e-4, 1, 1e4], np.float16)
    got = run_op("AddN", [x, x, x, -x, x])
    want = x + x
    for term in (x, -x, x):
        want = (want + term).astype(np.float16)
    assert_close(got, want, rtol=0)
    assert run_op("AddN", [np.int32([2**31 - 1]), np.int32([1])]).tolist() == [-(2**31)]
    # (2048 + 1) + 1 rounds to 2048 twice in float16; 2048 + (1 + 1) would be 2050.
    ones = np.float16([1.0])
    assert run_op("AddN", [np.float16([2048.0]), ones, ones]).tolist() == [2048.0]
    assert run_op("AddN", [ones, ones, np.float16([2048.0])]).tolist() == [2050.0]


# -- literals ----------------------------------------------------------------------------------


def test_literals_take_the_dtype_of_the_other_input():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.float32, shape=[2])
    n = mg.Placeholder(scope, mg.int8, shape=[2])
    cases = [
        (M.AddV2(scope, x, 1), mg.float32),
        (M.Sub(scope, 1, x), mg.float32),
        (M.Pow(scope, x, 2), mg.float32),
        (M.Maximum(scope, n, 3), mg.int8),
        (M.Less(scope, x, 0.5), mg.bool_),
        (M.AddN(scope, [x, [1.5, 2.5], x]), mg.float32),
        (M.Equal(scope, n, 7), mg.bool_),
    ]
    for node, dtype in cases:
        assert node.dtype == dtype, node.operation.type
    consts = [i for node, _ in cases for i in node.operation.inputs if i.op.type == "Const"]
    assert {c.dtype for c in consts} == {mg.float32, mg.int8}
    with mg.Session(scope) as sess:
        got = sess.run([c[0] for c in cases], {x: [1.0, 2.0], n: [1, 5]})
    assert got[0].tolist() == [2.0, 3.0] and got[1].tolist() == [0.0, -1.0]
    assert got[2].tolist() == [1.0, 4.0] and got[3].tolist() == [3, 5]
    assert got[4].tolist() == [False, False] and got[5].tolist() == [3.5, 6.5]
    assert got[6].tolist() == [False, False]


def test_a_literal_that_does_not_fit_the_dtype_is_refused():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.int32, shape=[2])
    with pytest.raises(mg.InvalidArgumentError, match="1.5 to int32"):
        M.AddV2(scope, x, 1.5)
    with pytest.raises(mg.InvalidArgumentError, match="128 to int8"):
        M.AddV2(scope, mg.Placeholder(scope, mg.int8), 128)


def test_builders_by_keyword_and_output_names():
    scope = mg.Scope.new_root_scope()
    f = mg.Placeholder(scope, mg.float32)
    assert M.Relu(scope, features=f).activations is not None
    assert M.Sub(scope, x=f, y=f).z.dtype == mg.float32
    assert M.Neg(scope, x=f).y.dtype == mg.float32
    r = M.BroadcastGradientArgs(scope, [2, 1, 3], [3])
    assert [o.name for o in r.outputs] == [r.r0.name, r.r1.name]
    eq = M.Equal(scope, f, f, incompatible_shape_error=False)
    assert eq.operation.attrs["incompatible_shape_error"] is False


# -- what each row registers -------------------------------------------------------------------


@pytest.mark.parametrize("op_type", sorted(ROWS))
def test_each_row_registers_an_op_and_cpu_and_gpu_kernels(op_type):
    row = ROWS[op_type]
    op_def = mg.registry.get_op_def(op_type)
    assert [a.name for a in op_def.inputs] == list(row.inputs)
    assert [a.name for a in op_def.outputs] == [row.output]
    kernels = mg.registry.kernels_for(op_type)
    assert sorted(k.device_type for k in kernels) == ["CPU", "GPU"]
    assert all(k.trusted for k in kernels)
    gpu = next(k for k in kernels if k.device_type == "GPU")
    allowed = gpu.type_constraints.get("T")
    if allowed is not None:
        assert mg.bfloat16 not in allowed and mg.string not in allowed
    assert builder(op_type).op_def is op_def


def test_the_table_is_data_a_new_row_makes_a_new_op():
    row = M.ElementwiseOp(
        "TestCube", lambda ctx, out, x: ctx.xp.multiply(x, x * x, out=out), ("float32",),
        ("float32",), "y = x ** 3.", inputs=("x",), output="y",
    )  # fmt: skip
    cube = mg.register_op(row.op_def())
    mg.register_kernel("TestCube", "CPU", M._kernel_of(row), trusted=True)
    scope = mg.Scope.new_root_scope().with_device("/cpu:0")
    got = mg.Session(scope).run(cube(scope, np.array([2.0, -1.0], np.float32)))
    assert got.tolist() == [8.0, -1.0]
