"""ops.checks: TF's Assert and EnsureShape, the ops embedding_lookup's checks are made of.
Messages are TF 2.21's, written out here from TF's own runs (tests/test_fidelity_tf.py compares
them with a live TensorFlow)."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import msg

import minigraph as mg
from minigraph import InvalidArgumentError, Scope, Session
from minigraph.testing import simulated_gpus
from ops import Placeholder
from ops.checks import Assert, EnsureShape, summarize_value


def fails(scope, assert_op):
    done = mg.NoOp(scope.with_op_name("done").with_control_dependencies(assert_op))
    with pytest.raises(InvalidArgumentError) as error:
        Session(scope).run(done)
    return error.value.message.splitlines()[0]


# TF 2.21's messages for these data (Tensor::SummarizeValue through its Assert kernel).
TF_MESSAGES = [
    (["msg", np.int64(13), np.array([1, 0], np.int64)], 3, "[msg] [13] [1 0]"),
    ([np.array([1, 2, 3, 4, 5]), np.array([[1, 2], [3, 4]]), np.array([[[1]]])], 3,
     "[1 2 3...] [[1 2][3...]...] [[[1]]]"),
    ([np.array([1, 2, 3, 4, 5]), np.array([[1, 2], [3, 4]]), np.array([[[1]]])], 20,
     "[1 2 3 4 5] [[1 2][3 4]] [[[1]]]"),
    ([np.float32(1.5), np.array([0.1, 2.0], np.float32), np.array([True, False]),
      np.array([b"a", b"b"])], 3, "[1.5] [0.1 2] [1 0] [a b]"),
    ([np.zeros((0,)), np.zeros((2, 0)), np.array(b"x"), np.arange(7).reshape(7, 1)], 3,
     "[] [] [x] [[0][1][2]...]"),
    ([np.array([1.0, np.nan, np.inf]), np.float16(0.1), np.array([1 + 2j], np.complex64),
      np.uint8(7), np.int8(-3)], 3, "[1 nan inf] [0.0999755859] [?] [7] [-3]"),
    ([np.arange(12).reshape(3, 4)], 3, "[[0 1 2...]...]"),
    ([np.arange(12).reshape(3, 4)], 20, "[[0 1 2 3][4 5 6 7][8 9 10 11]]"),
]  # fmt: skip


@pytest.mark.parametrize("data, summarize, text", TF_MESSAGES)
def test_assert_messages_are_tensorflows(data, summarize, text):
    root = Scope.new_root_scope()
    check = Assert(root, False, [mg.Const(root, d) for d in data], summarize=summarize)
    assert fails(root, check) == "assertion failed: " + text


def test_summarize_value_formats_floats_as_tensorflow():
    assert summarize_value(np.float32(0.1)) == "0.1"
    assert summarize_value(np.float64(0.1)) == "0.1"
    assert summarize_value(np.float64(1 / 3)) == "0.33333333333333331"  # TF 2.21 prints so
    assert summarize_value(np.float32(1 / 3)) == "0.333333343"
    assert summarize_value(np.float64(-np.nan)) == "-nan"
    assert summarize_value(np.arange(5), -1) == "0 1 2 3 4"


@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_a_true_condition_passes_and_a_fed_false_one_raises(device):
    root = Scope.new_root_scope().with_device(device)
    flag = Placeholder(root, mg.bool_, shape=[])
    x = Placeholder(root, mg.float32, shape=[None])
    check = Assert(root, flag, ["x is", x])
    out = mg.Identity(root.with_control_dependencies(check), x)
    with simulated_gpus(1):
        with Session(root) as sess:
            assert sess.run(out, {flag: True, x: [1, 2]}).tolist() == [1.0, 2.0]
            with pytest.raises(InvalidArgumentError, match=msg("assertion failed: [x is] [1 2]")):
                sess.run(out, {flag: False, x: [1, 2]})


def test_assert_is_stateful_and_has_no_outputs():
    root = Scope.new_root_scope()
    check = Assert(root, True, [1])
    assert check.operation.outputs == () and mg.registry.get_op_def("Assert").is_stateful
    assert check.operation.get_attr("summarize") == 3


def test_a_condition_that_is_not_one_element_fails():
    root = Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match=msg("In[0] should be a scalar: [2]")):
        Assert(root, [True, False], [1])
    flag = Placeholder(root, mg.bool_)
    check = Assert(root, flag, [1])  # unknown shape: checked when it runs
    with pytest.raises(InvalidArgumentError, match=msg("In[0] should be a scalar: [2]")):
        Session(root).run(check, {flag: [True, False]})
    assert Session(root).run(check, {flag: [[True]]}) is None  # one element, as TF's check


def test_ensure_shape_refines_the_static_shape_and_checks_at_run_time():
    root = Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[None, None])
    e = EnsureShape(root, x, mg.TensorShape([None, 2]))
    assert e.shape == [None, 2]
    value = np.ones((3, 2), np.float32)
    with Session(root) as sess:
        assert sess.run(e, {x: value}).shape == (3, 2)
        with pytest.raises(InvalidArgumentError, match=msg("[3,4] is not compatible with")):
            sess.run(e, {x: np.ones((3, 4), np.float32)})
    with pytest.raises(InvalidArgumentError, match=msg("[?,3] is not compatible")):
        EnsureShape(root, Placeholder(root, mg.float32, shape=[None, 3]), mg.TensorShape([2, 2]))


@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_the_trusted_kernels_keep_the_promise(device):
    # EnsureShape returns its input itself (trusted: unchecked outputs, fed arrays as they are).
    root = Scope.new_root_scope().with_device(device)
    x = Placeholder(root, mg.float32, shape=[None])
    e = EnsureShape(root, x, mg.TensorShape([3]))
    value = np.arange(3, dtype=np.float32)
    with simulated_gpus(1):
        for check in (None, True):
            config = mg.SessionConfig(check_kernel_outputs=check)
            got = Session(root, config).run(e, {x: value})
            assert got.tolist() == [0.0, 1.0, 2.0] and value.tolist() == [0.0, 1.0, 2.0]
    for op_type in ("Assert", "EnsureShape"):
        kernels = mg.registry.kernels_for(op_type)
        assert {k.device_type for k in kernels} == {"CPU", "GPU"}
        assert all(k.trusted for k in kernels)
