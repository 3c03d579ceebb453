"""The ops the array gradient rules add (ops/array.py): StridedSliceGrad (zeros of `shape` with
dy written into the slice StridedSlice takes) and InvertPermutation.

StridedSliceGrad against numpy (`out = zeros(shape); out[key] = dy`) over random keys (the key
strategy of tests/test_strided_slice.py, encoded into bounds and masks there, independently of
ops/array.py) for every dtype, CPU and simulated GPU; its static shape (TF's: the constant
shape, -1 an unknown dim; and what the constants show the kernel would refuse, refused at
construction); TF's run-time errors; its gradient (TF's _StridedSliceGradGrad, a StridedSlice
of the gradient) numerically. InvertPermutation against argsort, with TF's errors for the first
bad entry, at construction for constants. Both keep the trusted-kernel promise: new arrays of
the inferred dtype and shape, every element written, inputs untouched. TF's own values and
messages: tests/test_gradients_array_tf.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _gather_helpers import sample
from _gradients_reduction_nn_helpers import hidden
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_strided_slice import encode, keys

import minigraph as mg
from minigraph import KernelContext
from minigraph.devices import CpuDevice
from minigraph.memory import BufferPool
from minigraph.testing import SimulatedArray, SimulatedGpuDevice, assert_gradients_close
from ops import array as A

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(shape, key, dy):
    """StridedSliceGrad's meaning: zeros of `shape` with the slice `key` set to dy."""
    dtype = np.asarray(dy).dtype
    out = np.full(shape, b"", dtype=object) if dtype.kind == "O" else np.zeros(shape, dtype)
    out[key] = dy
    return out


def grad_op(scope, shape, key, dy, index=np.int32, fed=False):
    begin, end, strides, masks = encode(key)
    specs = [np.array(s, index).reshape(len(s)) for s in (shape, begin, end, strides)]
    if fed:
        specs = [hidden(scope, s, s.dtype) for s in specs]  # values known only at run time
    return A.StridedSliceGrad(scope, *specs, dy, **masks)


def run(out, feeds=None, config=None):
    with mg.Session(out.graph if hasattr(out, "graph") else out.operation.graph, config) as sess:
        return sess.run(out, feeds)


# -- values ----------------------------------------------------------------------------------------


@SETTINGS
@given(keys(), st.sampled_from([np.int32, np.int64]), st.booleans())
def test_strided_slice_grad_writes_dy_into_the_slice(case, index, fed):
    shape, key = case
    data = np.zeros(shape)
    slice_shape = data[key].shape
    dy = np.arange(1, 1 + int(np.prod(slice_shape)), dtype=np.float32).reshape(slice_shape)
    scope = mg.Scope.new_root_scope()
    out = grad_op(scope, shape, key, dy, index, fed)
    if not fed:
        assert out.output.shape == mg.TensorShape(shape)
    got = mg.Session(scope).run(out)
    assert type(got) is np.ndarray and got.dtype == np.float32
    np.testing.assert_array_equal(got, reference(shape, key, dy))


@pytest.mark.parametrize("dtype", mg.dtypes.ALL_DTYPES, ids=lambda d: d.name)
def test_strided_slice_grad_takes_every_dtype(dtype):
    key = (slice(None, None, -2), None, 1)
    dy = sample(dtype, (2, 1), 3)
    scope = mg.Scope.new_root_scope()
    out = grad_op(scope, (4, 3), key, dy)
    got = mg.Session(scope).run(out)
    assert got.dtype == dtype.np_dtype
    np.testing.assert_array_equal(got, reference((4, 3), key, dy))


@pytest.mark.parametrize(
    "shape, key",
    [((), ()), ((), (None,)), ((3,), (1,)), ((2, 3), (Ellipsis, -1)), ((0, 2), (slice(None),)),
     ((4,), (slice(10, -10, -1),)), ((2, 2), (slice(1, 1),))],
    ids=str,
)  # fmt: skip
def test_strided_slice_grad_corner_shapes(shape, key):
    dy = np.asarray(np.ones(np.zeros(shape)[key].shape) * 7.0)
    scope = mg.Scope.new_root_scope()
    got = mg.Session(scope).run(grad_op(scope, shape, key, dy))
    np.testing.assert_array_equal(got, reference(shape, key, dy))


def test_strided_slice_grad_of_strided_slice_is_the_round_trip():
    # StridedSliceGrad(StridedSlice(x)) keeps the sliced elements and zeroes the rest.
    scope = mg.Scope.new_root_scope()
    x = np.arange(24.0).reshape(2, 3, 4)
    key = (Ellipsis, slice(None, None, 2), None, slice(3, 0, -2))
    sliced = mg.Const(scope, x)[key]
    back = grad_op(scope, x.shape, key, sliced)
    np.testing.assert_array_equal(mg.Session(scope).run(back), reference(x.shape, key, x[key]))


# -- the static shape ------------------------------------------------------------------------------


def test_static_shape_is_the_shape_input():
    scope = mg.Scope.new_root_scope()
    dy = mg.Placeholder(scope, mg.float32).output
    assert grad_op(scope, (2, 3), (slice(1, None),), dy).output.shape == mg.TensorShape([2, 3])
    partial = A.StridedSliceGrad(scope, np.array([-1, 3], np.int32), [0], [1], [1], dy)
    assert partial.output.shape == mg.TensorShape([None, 3])  # TF: -1 is an unknown dim
    fed = mg.Placeholder(scope, mg.int32, [4]).output
    assert A.StridedSliceGrad(scope, fed, [0], [1], [1], dy).output.shape == mg.TensorShape(
        [None] * 4
    )
    unknown = mg.Placeholder(scope, mg.int32).output
    assert A.StridedSliceGrad(scope, unknown, [0], [1], [1], dy).output.shape.rank is None


@pytest.mark.parametrize(
    "shape, begin, end, strides, dy_shape, masks, message",
    [
        ([-2, 3], [0], [1], [1], (1, 1), {}, "Invalid value in tensor used for shape: -2"),
        ([[2, 3]], [0], [1], [1], (1, 1), {}, "Shape must be rank 1 but is rank 2"),
        ([2, 3], [[0]], [1], [1], (1, 1), {}, "Shape must be rank 1 but is rank 2"),
        ([2, 3], [0, 1], [2, 3], [1, 1], (2, 3), {},
         r"shape of dy was \[2,3\] instead of \[2,2\]"),
        ([2, 3], [0], [1], [0], (1, 3), {}, r"strides\[0\] must be non-zero"),
        ([2, 3], [5], [6], [1], (3,), {"shrink_axis_mask": 1},
         "slice index 5 of dimension 0 out of bounds"),
        ([2, 3], [0, 1], [2], [1, 1], (2, 2), {}, "Dimension 0 in both shapes must be equal"),
        ([2, 3], [0], [1], [1], (3,), {"ellipsis_mask": 3},
         "Multiple ellipses in slice spec not allowed"),
        ([2**40, 2**40], [0], [1], [1], (1, 2**40), {}, "more than 2\\*\\*63 - 1 elements"),
    ],
)  # fmt: skip
def test_what_the_constants_show_is_refused_at_construction(
    shape, begin, end, strides, dy_shape, masks, message
):
    scope = mg.Scope.new_root_scope()
    index = np.int64 if np.max(np.abs(shape)) > 2**31 else np.int32
    specs = [np.array(s, index) for s in (shape, begin, end, strides)]
    value = mg.Placeholder(scope, mg.float64, dy_shape).output
    before = len(scope.graph.operations)
    with pytest.raises(mg.InvalidArgumentError, match=message):
        A.StridedSliceGrad(scope, *specs, value, **masks)
    assert len(scope.graph.operations) == before


def test_dy_of_a_compatible_partial_shape_is_accepted():
    scope = mg.Scope.new_root_scope()
    dy = mg.Placeholder(scope, mg.float32, [None, 2]).output
    out = A.StridedSliceGrad(scope, np.array([4, 2], np.int32), [1], [3], [1], dy)
    assert out.output.shape == mg.TensorShape([4, 2])
    with pytest.raises(
        mg.InvalidArgumentError, match=r"shape of dy was \[\?,3\] instead of \[2,2\]"
    ):
        A.StridedSliceGrad(scope, np.array([4, 2], np.int32), [1], [3], [1],
                           mg.Placeholder(scope, mg.float32, [None, 3]))  # fmt: skip


# -- run-time errors (TF's messages) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, begin, end, strides, dy, masks, message",
    [
        (np.array([[2, 3]]), [0], [1], [1], np.ones((1, 3)), {},
         r"shape must be 1-D, got shape.shape = \[1,2\]"),
        ([-2, 3], [0], [1], [1], np.ones((1, 3)), {}, "Dimension -2 must be >= 0"),
        ([-1, 3], [0], [1], [1], np.ones((1, 3)), {}, "Dimension -1 must be >= 0"),
        ([2, 3], [0, 1], [2, 3], [1, 1], np.ones((2, 3)), {},
         r"shape of dy was \[2,3\] instead of \[2,2\]"),
        ([2, 3], [0, 1], [2, 3], [1, 0], np.ones((2, 2)), {}, r"strides\[1\] must be non-zero"),
        ([2, 3], [5], [6], [1], np.ones(3), {"shrink_axis_mask": 1},
         "slice index 5 of dimension 0 out of bounds."),
        ([2, 3], [0, 1], [2], [1, 1], np.ones((2, 2)), {},
         r"Expected begin, end, and strides to be 1D equal size tensors, but got shapes \[2\], "
         r"\[1\], and \[2\] instead."),
        ([2], [0, 0, 0], [1, 1, 1], [1, 1, 1], np.ones(1), {},
         "Index out of range using input dim 1; input has only 1 dims"),
    ],
)  # fmt: skip
def test_run_time_errors_are_tfs(shape, begin, end, strides, dy, masks, message, cpu_only):
    scope = mg.Scope.new_root_scope()
    specs = [mg.Placeholder(scope, mg.int32).output for _ in range(4)]
    value = mg.Placeholder(scope, mg.float64).output
    out = A.StridedSliceGrad(scope, *specs, value, **masks)
    feeds = dict(zip(specs, [np.array(s, np.int32) for s in (shape, begin, end, strides)]))
    feeds[value] = dy
    with pytest.raises(mg.InvalidArgumentError, match=message):
        mg.Session(scope).run(out, feeds)


def test_kernel_caches_the_slice_per_shape_for_constant_bounds(cpu_only):
    # Constant bounds, a fed shape: the slice is recomputed for each new shape.
    scope = mg.Scope.new_root_scope()
    shape = mg.Placeholder(scope, mg.int32, [1]).output
    dy = mg.Placeholder(scope, mg.float64).output
    out = A.StridedSliceGrad(scope, shape, [-2], [0], [1], dy, end_mask=1)
    with mg.Session(scope) as session:
        for n in (5, 3, 5, 2):
            got = session.run(out, {shape: [n], dy: np.ones(2)})
            np.testing.assert_array_equal(got, reference((n,), (slice(-2, None),), np.ones(2)))


# -- its gradient ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", [(slice(1, None),), (slice(None, None, -2), None, 1), (Ellipsis, 0), (1, 2)], ids=str
)
def test_the_gradient_of_strided_slice_grad_is_a_strided_slice(key):
    shape = (4, 3)
    dy = np.random.default_rng(1).standard_normal(np.zeros(shape)[key].shape)
    assert_gradients_close(lambda s, d: grad_op(s, shape, key, d), [dy])
    scope = mg.Scope.new_root_scope()
    d = mg.Placeholder(scope, mg.float64, dy.shape).output
    (g,) = mg.gradients(grad_op(scope, shape, key, d), d)
    assert g.op.type == "StridedSlice"
    # Shape, begin, end and strides (integers) get none.
    op = g.op.inputs[0].op
    assert op.type in ("Const", "Fill")


def test_the_bounds_of_strided_slice_grad_have_no_gradient():
    scope = mg.Scope.new_root_scope()
    dy = mg.Placeholder(scope, mg.float32, [2]).output
    out = A.StridedSliceGrad(scope, np.array([4], np.int32), [1], [3], [1], dy)
    rule = mg.registry.gradient_rule("StridedSliceGrad").fn
    grads = rule(out.operation, dy)
    assert grads[:4] == [None] * 4 and grads[4].op.type == "StridedSlice"


# -- InvertPermutation -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12).flatmap(lambda n: st.permutations(list(range(n)))),
       st.sampled_from([np.int32, np.int64]))  # fmt: skip
def test_invert_permutation_is_argsort(perm, dtype):
    x = np.array(perm, dtype).reshape(len(perm))
    scope = mg.Scope.new_root_scope()
    fed = mg.Placeholder(scope, mg.as_dtype(dtype), [None]).output
    out = A.InvertPermutation(scope, fed)
    got = mg.Session(scope).run(out, {fed: x})
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.argsort(x))
    np.testing.assert_array_equal(got[x], np.arange(len(perm)))
    const = A.InvertPermutation(scope, x).output
    assert const.shape == mg.TensorShape([len(perm)])
    np.testing.assert_array_equal(mg.Session(scope).run(const), np.argsort(x))


@pytest.mark.parametrize(
    "x, message",
    [([0, 0, 1], "0 is duplicated in the input."), ([0, 3, 1], "3 is not between 0 and 3"),
     ([0, -1, 1], "-1 is not between 0 and 3"), ([3, 0, 0], "3 is not between 0 and 3"),
     ([1, 1, 7], "1 is duplicated in the input."), ([2, 5, 2, 9], "5 is not between 0 and 4"),
     ([2**40, 0], "1099511627776 is not between 0 and 2")],
)  # fmt: skip
def test_invert_permutation_reports_the_first_bad_entry(x, message, cpu_only):
    dtype = np.int64 if max(x) > 2**31 else np.int32
    scope = mg.Scope.new_root_scope()
    fed = mg.Placeholder(scope, mg.as_dtype(dtype)).output
    out = A.InvertPermutation(scope, fed)
    with pytest.raises(mg.InvalidArgumentError, match=f"^{message}"):
        mg.Session(scope).run(out, {fed: np.array(x, dtype)})
    before = len(scope.graph.operations)
    const = mg.Const(scope, np.array(x, dtype))
    with pytest.raises(mg.InvalidArgumentError, match=message):
        A.InvertPermutation(scope, const)  # a constant shows it at construction
    assert len(scope.graph.operations) == before + 1


def test_invert_permutation_needs_a_vector(cpu_only):
    scope = mg.Scope.new_root_scope()
    with pytest.raises(mg.InvalidArgumentError, match="Shape must be rank 1 but is rank 2"):
        A.InvertPermutation(scope, np.array([[0, 1]], np.int32))
    fed = mg.Placeholder(scope, mg.int32).output
    out = A.InvertPermutation(scope, fed)
    with pytest.raises(mg.InvalidArgumentError, match="invert_permutation expects a 1D vector."):
        mg.Session(scope).run(out, {fed: np.array([[0, 1]], np.int32)})
    with pytest.raises((mg.InvalidArgumentError, TypeError)):
        A.InvertPermutation(scope, np.array([0.0, 1.0], np.float32))


def test_invert_permutation_runs_in_host_memory_beside_a_gpu(sim_gpus):
    scope = mg.Scope.new_root_scope().with_device("/gpu:0")
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, [2, 3, 4]).output
    perm = mg.Placeholder(scope.with_op_name("perm"), mg.int32, [3]).output
    inverse = A.InvertPermutation(scope.with_op_name("inverse"), perm).output
    back = A.Transpose(scope.with_op_name("back"), A.Transpose(scope, x, perm), inverse).output
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    metadata = mg.RunMetadata()
    with mg.Session(scope) as session:
        got = session.run([back, inverse], {x: data, perm: np.array([2, 0, 1], np.int32)},
                          run_metadata=metadata)  # fmt: skip
    assert metadata.placement["inverse"].endswith("GPU:0")
    np.testing.assert_array_equal(got[0], data)
    assert type(got[1]) is np.ndarray and got[1].tolist() == [1, 2, 0]


# -- the trusted-kernel promise --------------------------------------------------------------------


def _junk_ctx() -> KernelContext:
    pool = BufferPool(min_bytes=1)
    for k in range(40):
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = 0xA5
    return KernelContext(CpuDevice(0), "node", "StridedSliceGrad", buffers=pool)


def _kernel(op_type, device):
    (k,) = [k for k in mg.registry.kernels_for(op_type) if k.device_type == device and not k.label]
    return k


def test_both_kernels_are_trusted_with_host_memory():
    for device in ("CPU", "GPU"):
        assert _kernel("StridedSliceGrad", device).trusted
        assert _kernel("InvertPermutation", device).trusted
    host = _kernel("StridedSliceGrad", "GPU").flat_host_inputs({})
    assert set(host) == {0, 1, 2, 3}
    gpu_types = _kernel("StridedSliceGrad", "GPU").type_constraints["T"]
    assert mg.bfloat16 not in gpu_types and mg.string not in gpu_types


@pytest.mark.parametrize("device", ["CPU", "GPU"])
@pytest.mark.parametrize("dtype", mg.dtypes.ALL_DTYPES, ids=lambda d: d.name)
def test_strided_slice_grad_keeps_the_trusted_promise(dtype, device):
    if device == "GPU" and (dtype.is_string or dtype is mg.bfloat16):
        pytest.skip("cupy holds neither strings nor bfloat16: those nodes stay on the CPU")
    gpu = device == "GPU"
    ctx = KernelContext(SimulatedGpuDevice(0), "node", "StridedSliceGrad") if gpu else _junk_ctx()
    key = (slice(None, None, 2), None, slice(2, 0, -1))
    begin, end, strides, masks = encode(key)
    dy_host = sample(dtype, (2, 1, 2), 5)
    dy = ctx.device.from_host(dy_host) if gpu else dy_host
    specs = [np.array(s, np.int32) for s in ((3, 4), begin, end, strides)]
    ctx.constant_inputs = (True,) * 5
    before = dy_host.copy()
    got = _kernel("StridedSliceGrad", device).fn(ctx, *specs, dy, **masks, T=dtype)
    assert type(got) is (SimulatedArray if gpu else np.ndarray)
    host = ctx.device.to_host(got) if gpu else got
    assert host.dtype == dtype.np_dtype and host.shape == (3, 4)
    np.testing.assert_array_equal(host, reference((3, 4), key, dy_host))  # zeros written too
    np.testing.assert_array_equal(ctx.device.to_host(dy) if gpu else dy, before)
    if not gpu:
        assert not np.shares_memory(got, dy)


def test_strided_slice_grad_on_a_simulated_gpu(sim_gpus):
    scope = mg.Scope.new_root_scope().with_device("/gpu:0")
    dy = mg.Placeholder(scope.with_op_name("dy"), mg.float32, [2]).output
    shape = mg.Placeholder(scope.with_op_name("shape"), mg.int32, [1]).output
    out = A.StridedSliceGrad(scope.with_op_name("ssg"), shape, [1], [5], [2], dy).output
    metadata = mg.RunMetadata()
    with mg.Session(scope) as session:
        got = session.run(out, {dy: np.array([3.0, 4.0], np.float32), shape: [6]},
                          run_metadata=metadata)  # fmt: skip
    assert metadata.placement["ssg"].endswith("GPU:0")
    assert got.tolist() == [0, 3, 0, 4, 0, 0]
