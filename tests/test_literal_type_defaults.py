"""An empty literal input has no dtype of its own: as TF's op_def_library does, it takes the
default of the input's type attr (Sum's `Tidx = int32` for `Sum(s, x, [])`), and tf.constant's
float32 only where the attr has no default."""

import numpy as np

import minigraph as mg
import ops


def test_an_empty_axis_literal_takes_the_type_attrs_default():
    scope = mg.Scope.new_root_scope()
    x = mg.Const(scope, np.arange(4.0, dtype=np.float32).reshape(2, 2))
    total = ops.Sum(scope, x, [])
    assert total.operation.inputs[1].dtype is mg.int32
    with mg.Session(scope) as session:
        np.testing.assert_array_equal(session.run(total), session.run(x))


def test_an_empty_literal_without_a_default_is_tf_constants_float32():
    scope = mg.Scope.new_root_scope()
    empty = mg.Identity(scope, [])
    assert empty.dtype is mg.float32 and empty.shape.as_list() == [0]


def test_a_non_empty_literal_is_converted_as_before():
    scope = mg.Scope.new_root_scope()
    x = mg.Const(scope, np.ones((2, 3), np.float32))
    assert ops.Sum(scope, x, [1]).operation.inputs[1].dtype is mg.int32
    assert ops.Sum(scope, x, np.array([1], np.int64)).operation.inputs[1].dtype is mg.int64
