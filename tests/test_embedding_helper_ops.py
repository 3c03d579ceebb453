"""The helper ops embedding_lookup is built from (ops/array.py, ops/math.py): TF's semantics,
static shapes, error tables, and the simulated-GPU paths (host-memory outputs and inputs)."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import assert_array_same, msg

import minigraph as mg
from minigraph import InvalidArgumentError, RunMetadata, Scope, Session
from minigraph.testing import simulated_gpus
from ops import (
    Cast,
    ConcatV2,
    FloorDiv,
    FloorMod,
    Maximum,
    Placeholder,
    Range,
    Reshape,
    Shape,
    Size,
    Sub,
)


def run(scope, fetch, feed=None):
    with Session(scope, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        return sess.run(fetch, feed)


@pytest.fixture(params=["CPU", "GPU"])
def root(request):
    with simulated_gpus(1):
        yield Scope.new_root_scope().with_device(request.param)


# -- arithmetic --------------------------------------------------------------------------------


def test_floor_div_and_mod_round_towards_negative_infinity(root):
    x = np.array([7, -7, 7, -7, 0, -1], np.int64)
    y = np.array([2, 2, -2, -2, 3, 4], np.int64)
    div, mod = run(root, [FloorDiv(root, x, y), FloorMod(root, x, y)])
    # Python's // and % are floor division and modulo, as TF's FloorDiv and FloorMod.
    assert div.tolist() == [a // b for a, b in zip(x.tolist(), y.tolist())]
    assert mod.tolist() == [a % b for a, b in zip(x.tolist(), y.tolist())]


def test_float_floor_div_is_floor_of_the_quotient(root):
    # TF computes floor(x / y): 1 / 0.1 rounds to 10.0 (numpy's // gives 9.0).
    out = run(root, FloorDiv(root, np.float64(1.0), np.float64(0.1)))
    assert out == 10.0
    mod = run(root, FloorMod(root, np.array([5.5, -5.5, 5.5]), np.array([2.0, 2.0, -2.0])))
    assert mod.tolist() == [1.5, 0.5, -0.5]


@pytest.mark.parametrize("op", [FloorDiv, FloorMod])
def test_integer_division_by_zero_raises_on_every_device(root, op):
    y = Placeholder(root, mg.int32, shape=[2])
    with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
        run(root, op(root, np.array([1, 2], np.int32), y), {y: [1, 0]})


def test_sub_maximum_broadcast(root):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    sub, mx = run(root, [Sub(root, x, np.float32(2)), Maximum(root, x, [[1], [4]])])
    assert_array_same(sub, x - 2)
    assert_array_same(mx, np.maximum(x, np.array([[1], [4]], np.float32)))
    assert Sub(root, Placeholder(root, mg.float32, shape=[None, 1]), x).shape == [2, 3]


def test_binary_shape_errors():
    root = Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match="Dimensions must be equal, but are 3 and 4"):
        Sub(root, np.zeros((2, 3)), np.zeros(4))
    a = Placeholder(root, mg.float64, shape=[None])
    out = Sub(root, a, np.zeros(3))
    with pytest.raises(InvalidArgumentError, match=msg("Incompatible shapes: [4] vs. [3]")):
        run(root, out, {a: np.zeros(4)})


def test_complex_floor_div_has_no_kernel():
    root = Scope.new_root_scope()
    z = FloorDiv(root, np.complex64(1), np.complex64(1))  # the op allows it, as TF's
    with pytest.raises(mg.NotFoundError):
        run(root, z)


# -- Cast and Range ----------------------------------------------------------------------------


def test_cast(root):
    x = np.array([1.7, -1.7, 0.0], np.float32)
    to_int, to_bool = run(root, [Cast(root, x, DstT=mg.int32), Cast(root, x, DstT=mg.bool_)])
    assert to_int.tolist() == [1, -1, 0] and to_bool.tolist() == [True, True, False]
    real = run(root, Cast(root, np.array([1 + 2j], np.complex64), DstT=mg.float64))
    assert_array_same(real, np.array([1.0]))
    got = run(root, Cast(root, np.float32(65535.9), DstT=mg.float16, Truncate=True))
    assert got.tolist() == 65504.0  # truncates where rounding gives inf (TF's Truncate)


def test_range(root):
    assert_array_same(run(root, Range(root, 3, 12, 4)), np.array([3, 7, 11], np.int32))
    assert_array_same(run(root, Range(root, 5, -1, -2)), np.array([5, 3, 1], np.int32))
    assert Range(root, 3, 12, 4).shape == [3]
    # Floats accumulate one addition at a time, as TF's kernel.
    f = run(root, Range(root, np.float32(0), np.float32(10), np.float32(0.1)))
    acc = [np.float32(0)]
    while len(acc) < 100:
        acc.append(np.float32(acc[-1] + np.float32(0.1)))
    assert_array_same(f, np.array(acc, np.float32))
    assert not np.array_equal(f, np.arange(100, dtype=np.float32) * np.float32(0.1))
    n = Placeholder(root, mg.int64, shape=[])
    assert Range(root, np.int64(0), n, np.int64(1)).shape == [None]


@pytest.mark.parametrize(
    "args, text",
    [
        ((0, 5, 0), "Requires delta != 0: 0"),
        ((5, 0, 1), "Requires start <= limit when delta > 0: 5/0"),
        ((0, 5, -1), "Requires start >= limit when delta < 0: 0/5"),
    ],
)
def test_range_errors_at_construction_and_run_time(args, text):
    root = Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        Range(root, *args)
    fed = [Placeholder(root, mg.int32, shape=[]) for _ in range(3)]
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        run(root, Range(root, *fed), dict(zip(fed, args)))


# -- Shape, Size, Reshape, ConcatV2 ------------------------------------------------------------


def test_shape_and_size_read_only_the_shape(root):
    x = Placeholder(root, mg.float32, shape=[None, 3])
    shape, size = Shape(root, x), Size(root, x, out_type=mg.int64)
    assert shape.shape == [2] and size.shape == []
    got = run(root, [shape, size], {x: np.zeros((4, 3), np.float32)})
    assert_array_same(got[0], np.array([4, 3], np.int32))
    assert_array_same(got[1], np.array(12, np.int64))


def test_shape_output_is_host_memory_on_gpu():
    for op in ("Shape", "Size"):
        gpu = next(k for k in mg.registry.kernels_for(op) if k.device_type == "GPU")
        assert gpu.host_outputs == frozenset({0})
    root = Scope.new_root_scope().with_device("gpu")
    x = Placeholder(root, mg.float32, shape=[None])
    r = Reshape(root.with_op_name("r"), x, Shape(root.with_op_name("s"), x))
    md = RunMetadata()
    with simulated_gpus(1) as (_, gpu0):
        with Session(root) as sess:
            sess.run(r, {x: np.zeros(5, np.float32)}, run_metadata=md)
    assert md.placement["s"].endswith("GPU:0") and md.placement["r"].endswith("GPU:0")


def test_reshape(root):
    x = np.arange(12)
    assert Reshape(root, x, [3, -1]).shape == [3, 4]
    assert_array_same(run(root, Reshape(root, x, [-1, 2, 3])), x.reshape(2, 2, 3))
    p = Placeholder(root, mg.int64, shape=[None, 4])
    assert Reshape(root, p, [-1]).shape == [None]
    assert Reshape(root, p, Shape(root, p)).shape == [None, 4]  # TF sees through Shape


@pytest.mark.parametrize(
    "shape, text",
    [
        ([5, -1], "requires a multiple of 5"),
        ([2, 2], "Input to reshape is a tensor with 12 values, but the requested shape has 4"),
        ([-1, -1], "Only one input size may be -1, not both 0 and 1"),
        ([-2, 6], "Size 0 must be non-negative, not -2"),
        ([0, -1], "Input to reshape is a tensor with 12 values"),
    ],
)
def test_reshape_errors(shape, text):
    root = Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        Reshape(root, np.arange(12), shape)
    fed = Placeholder(root, mg.int32, shape=[2])
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        run(root, Reshape(root, np.arange(12), fed), {fed: shape})


def test_concat_v2(root):
    a = Placeholder(root, mg.int32, shape=[None, 2])
    c = ConcatV2(root, [a, [[5, 6]]], 0)
    assert c.shape == [None, 2] and c.operation.attrs["N"] == 2
    got = run(root, c, {a: [[1, 2], [3, 4]]})
    assert_array_same(got, np.array([[1, 2], [3, 4], [5, 6]], np.int32))
    assert ConcatV2(root, [[[1]], [[2, 3]]], -1).shape == [1, 3]


@pytest.mark.parametrize(
    "values, axis, text",
    [
        ([[1], [[2]]], 0, "Ranks of all input tensors should match"),
        ([[[1, 2]], [[3]]], 0, "Dimension 1 in both shapes must be equal"),
        ([[1], [2]], 1, "Expected concatenating dimensions in the range [-1, 1), but got 1"),
        ([1, 2], 0, "Can't concatenate scalars"),
    ],
)
def test_concat_v2_errors(values, axis, text):
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        ConcatV2(Scope.new_root_scope(), values, axis)
