"""The simulated GPUs' array module (minigraph.testing): it refuses what cupy refuses and keeps
cupy's semantics where they differ from numpy's, so host/device mistakes fail without a GPU.

Each test states the cupy behaviour it reproduces (cupy's documentation and source:
cupy.ndarray.__array__, _kernel._preprocess_args, _routines_indexing._take / _scatter_op).
"""

from __future__ import annotations

import operator
import threading

import ml_dtypes
import numpy as np
import pytest

import minigraph
from minigraph import InvalidArgumentError, OpDef, RunMetadata, Scope, Session, SessionConfig
from minigraph.devices import CpuDevice
from minigraph.testing import (
    SimulatedArray,
    SimulatedGpuDevice,
    simulated_cupy,
    simulated_gpus,
)
from ops import Const, GatherV2, Placeholder

xp = simulated_cupy
INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


def dev(values, dtype=None):
    return xp.asarray(np.asarray(values, dtype))


# -- not a numpy array: no implicit conversion to the host ----------------------------------------


def test_device_arrays_are_not_numpy_arrays():
    a = dev([1, 2, 3], np.int32)
    assert isinstance(a, xp.ndarray) and isinstance(a, SimulatedArray)
    assert not isinstance(a, np.ndarray)
    assert (a.shape, a.ndim, a.size, a.dtype, a.nbytes) == ((3,), 1, 3, np.int32, 12)


@pytest.mark.parametrize(
    "convert",
    [
        np.asarray,
        np.array,
        np.ascontiguousarray,
        lambda a: a.__array__(),
        lambda a: np.asarray([a, a]),  # a list of device arrays
        lambda a: np.zeros(3, np.int32) + np.asarray(a),
    ],
)
def test_implicit_conversion_to_a_host_array_is_refused(convert):
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        convert(dev([1, 2, 3], np.int32))


def test_no_index_protocol_as_cupy():
    n = dev(3, np.int64)
    for use in (operator.index, range, lambda v: [0, 1, 2, 3][v], lambda v: (4, 5, 6)[:v]):
        with pytest.raises(TypeError):
            use(n)


def test_the_synchronising_conversions_cupy_allows():
    a = dev([[1.5, 2.5]], np.float32)
    assert float(a[0, 1]) == 2.5 and int(a[0, 0]) == 1 and complex(a[0, 0]) == 1.5
    assert bool(a[0, 0]) and a[0, 1].item() == 2.5 and a.tolist() == [[1.5, 2.5]]
    host = a.get()
    assert type(host) is np.ndarray and host.tolist() == [[1.5, 2.5]]
    host[0, 0] = 9  # a copy
    assert a.tolist() == [[1.5, 2.5]]
    assert xp.asnumpy(a).tolist() == [[1.5, 2.5]]
    with pytest.raises(TypeError):
        float(a)  # two elements
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)


def test_host_data_is_copied_onto_the_device():
    host = np.arange(4)
    a = xp.asarray(host)
    host[0] = 99
    assert a.tolist() == [0, 1, 2, 3]


# -- host arrays are not operands ------------------------------------------------------------------


@pytest.mark.parametrize(
    "compute",
    [
        lambda a, h: a + h,
        lambda a, h: h + a,
        lambda a, h: a < h,
        lambda a, h: xp.add(a, h),
        lambda a, h: np.add(a, h),
        lambda a, h: xp.where(a > 0, h, a),
        lambda a, h: xp.copyto(a, h),
        lambda a, h: xp.take(a, h),
        lambda a, h: a[h],
        lambda a, h: a.__setitem__(slice(None), h),
        lambda a, h: xp.concatenate([a, h]),
        lambda a, h: xp.add(a, [1, 2, 3]),
    ],
)
def test_host_arrays_are_refused_as_operands(compute):
    a = dev([1, 2, 3], np.int64)
    with pytest.raises(TypeError):
        compute(a, np.array([0, 1, 2]))


def test_scalars_are_operands():
    a = dev([1, 2, 3], np.int64)
    assert (a + 1).tolist() == [2, 3, 4]
    assert (np.int64(2) * a).tolist() == [2, 4, 6]
    assert xp.where(a > 1, 0, a).tolist() == [1, 0, 0]


# -- dtypes cupy lacks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, object, "U3", "S3", np.longdouble, "datetime64[s]"], ids=str
)
def test_dtypes_cupy_lacks_are_refused_wherever_an_array_is_made(dtype):
    host = np.zeros(2, dtype)
    for make in (
        lambda: xp.asarray(host),
        lambda: xp.zeros(2, dtype),
        lambda: xp.empty(2, dtype),
        lambda: dev([0, 0], np.float64).astype(dtype),
    ):
        with pytest.raises(ValueError, match="Unsupported dtype"):
            make()


def test_views_to_unsupported_dtypes_are_refused():
    with pytest.raises(ValueError, match="Unsupported dtype"):
        dev([1, 2], np.int16).view(ml_dtypes.bfloat16)


# -- devices --------------------------------------------------------------------------------------


def test_arrays_live_on_the_current_device():
    with xp.cuda.Device(1):
        a = xp.zeros(3)
        assert a.device.id == 1 and xp.cuda.get_device_id() == 1
        assert (a + 1).device.id == 1
    assert xp.cuda.get_device_id() == 0


def test_another_devices_array_is_refused_until_copied():
    with xp.cuda.Device(1):
        a = xp.ones(3)
    b = xp.ones(3)
    for mix in (lambda: a + b, lambda: a + 1, lambda: b[a > 0], lambda: xp.take(b, a)):
        with pytest.raises(ValueError, match=r"resides \(1\) is different from the current device"):
            mix()
    copied = xp.asarray(a)  # under device 0: a peer copy
    assert copied.device.id == 0 and (copied + b).tolist() == [2.0, 2.0, 2.0]


def test_the_current_device_is_per_thread():
    seen = []
    entered, release = threading.Event(), threading.Event()

    def other():
        with xp.cuda.Device(1):
            entered.set()
            release.wait(5)
            seen.append(xp.zeros(1).device.id)

    t = threading.Thread(target=other)
    t.start()
    entered.wait(5)
    seen.append(xp.zeros(1).device.id)  # this thread's device is still 0
    release.set()
    t.join()
    assert seen == [0, 1]


# -- cupy's semantics where they differ from numpy's ----------------------------------------------


def test_reductions_and_element_access_give_device_arrays():
    a = dev([[3, 1], [2, 5]], np.int32)
    for value in (a.max(), a.sum(), xp.argmax(a), a.any(), a[1, 1], xp.sum(a)):
        assert isinstance(value, SimulatedArray) and value.ndim == 0


def test_take_and_integer_indexing_wrap_out_of_range_indices():
    a = dev([10, 20, 30], np.int64)
    positions = [0, 3, -1, 7, INT64_MAX, INT64_MIN]
    idx = dev(positions, np.int64)
    expected = [[10, 20, 30][i % 3] for i in positions]  # Python's % wraps as cupy does
    assert xp.take(a, idx).tolist() == expected
    assert a[idx].tolist() == expected
    assert a.take(dev([4], np.int32)).tolist() == [20]
    table = dev([[1, 2], [3, 4]], np.int32)
    assert xp.take(table, dev([2, -3], np.int16), axis=0).tolist() == [[1, 2], [3, 4]]
    assert table[:, dev([5], np.uint32)].tolist() == [[2], [4]]


def test_take_from_an_empty_axis():
    with pytest.raises(IndexError, match="cannot do a non-empty take from an empty axes"):
        xp.take(xp.zeros((0, 2)), dev([0], np.int64), axis=0)
    assert xp.take(xp.zeros((2, 0)), dev([1, 0], np.int64), axis=0).shape == (2, 0)


def test_add_at_adds_every_duplicate_and_refuses_what_cuda_atomics_lack():
    out = xp.zeros(3, np.float32)
    xp.add.at(out, dev([0, 0, 2, 5], np.int64), dev([1, 2, 3, 4], np.float32))
    assert out.tolist() == [3.0, 0.0, 7.0]  # 5 wraps to 2
    for dtype in (np.int64, np.int8, np.int16, np.bool_, np.complex64):
        with pytest.raises(TypeError, match="scatter_add only supports"):
            xp.add.at(xp.zeros(3, dtype), dev([0], np.int64), xp.ones(1, dtype))
    wide = xp.zeros(2, np.int64)  # the known way round: the same bits as uint64
    xp.add.at(wide.view(np.uint64), dev([1, 1], np.int64), dev([-5, 2], np.int64).view(np.uint64))
    assert wide.tolist() == [0, -3]
    with pytest.raises(NotImplementedError, match="subtract.at"):
        xp.subtract.at(xp.zeros(3), dev([0], np.int64), 1.0)


def test_duplicate_assignments_do_not_keep_numpy_s_last_value():
    # cupy leaves which value wins unspecified; code relying on numpy's last-wins must fail.
    host = np.zeros(2)
    host[[0, 0]] = [1.0, 2.0]
    a = xp.zeros(2)
    a[dev([0, 0], np.int64)] = dev([1.0, 2.0])
    assert host[0] == 2.0 and a[0].item() != 2.0


def test_sorts_are_stable_and_take_no_other_kind():
    keys = dev([1, 0, 1, 0, 1, 0] * 50, np.int8)
    order = xp.argsort(keys).tolist()
    assert order == sorted(range(300), key=lambda i: (i % 2 == 0, i))
    assert keys.argsort().tolist() == order
    with pytest.raises(ValueError, match="stable"):
        xp.sort(keys, kind="quicksort")


def test_empty_is_not_zeros():
    assert not bool((xp.empty(16, np.int32) == 0).all())


def test_numpy_functions_dispatch_to_the_namespace_or_refuse():
    a = dev([3, 1, 2], np.int64)
    assert isinstance(np.take(a, dev([0], np.int64)), SimulatedArray)
    assert isinstance(np.add(a, 1), SimulatedArray)
    assert int(np.argmax(a)) == 0
    with pytest.raises(TypeError, match="no implementation found"):
        np.shares_memory(a, a)


# -- the devices and the runtime ------------------------------------------------------------------


def test_simulated_gpu_device_is_the_cupy_device_over_the_double():
    gpu0, gpu1 = SimulatedGpuDevice(0), SimulatedGpuDevice(1)
    assert gpu0.xp is simulated_cupy and gpu0.simulated
    with pytest.raises(TypeError, match="string tensors cannot live on a GPU"):
        gpu0.from_host(np.array([b"a"], dtype=object))
    with pytest.raises(ValueError, match="Unsupported dtype bfloat16"):
        gpu0.from_host(np.zeros(2, ml_dtypes.bfloat16))
    on0 = gpu0.from_host(np.arange(3.0))
    assert on0.device.id == 0 and gpu0.accepts(on0) and not gpu1.accepts(on0)
    assert not gpu0.accepts(np.arange(3.0))
    on1 = gpu1.copy_from(on0, gpu0)
    assert on1.device.id == 1 and gpu1.accepts(on1)
    assert (gpu0.copies_out, gpu1.copies_in, gpu1.bytes_in) == (1, 1, 24)


def test_a_device_array_is_fed_without_a_copy():
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[3])
    g = GatherV2(root.with_op_name("g"), x, [2, 0], 0)
    with simulated_gpus(2) as (_, gpu0, gpu1):
        on0 = gpu0.from_host(np.array([1, 2, 3], np.float32))
        with gpu1.activate():
            on1 = xp.asarray(np.array([4, 5, 6], np.float32))
        gpu0.reset_counters()
        metadata = RunMetadata()
        with Session(root) as sess:
            out = sess.run(g, {x: on0}, run_metadata=metadata)
            assert metadata.placement["g"].endswith("GPU:0")
            assert type(out) is np.ndarray and out.tolist() == [3.0, 1.0]
            assert gpu0.copies_in == 1  # the constant indices; x was already there
            out = sess.run(g, {x: on1})  # another GPU's array is copied over
            assert out.tolist() == [6.0, 4.0] and gpu0.copies_in == 2
        with pytest.raises(InvalidArgumentError, match="Cannot feed a device array of dtype"):
            Session(root).run(g, {x: xp.zeros(3, np.float64)})


# A GPU kernel making a host/device mistake must fail on a simulated GPU, with the node named.
PROBE = minigraph.register_op(
    OpDef(
        "SimulatedCupyTestProbe",
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=["T: type", 'mistake: {"none", "asarray", "host_operand", "index", "bfloat16"}'],
        shape_fn=lambda ctx: ctx.input_shapes[0],
    )
)


def _probe(ctx, x, *, T, mistake):
    if mistake == "asarray":
        return ctx.xp.asarray(np.asarray(x) * 2)
    if mistake == "host_operand":
        return x * np.full(x.shape, 2, x.dtype)
    if mistake == "index":
        return x * len(range(x.max()))
    if mistake == "bfloat16":
        return x.astype(ml_dtypes.bfloat16).astype(x.dtype) * 2
    return x * 2


minigraph.register_kernel("SimulatedCupyTestProbe", "CPU", _probe)
minigraph.register_kernel("SimulatedCupyTestProbe", "GPU", _probe)


@pytest.mark.parametrize("mistake", ["asarray", "host_operand", "index", "bfloat16"])
def test_host_device_mistakes_in_a_gpu_kernel_fail_on_a_simulated_gpu(mistake):
    root = Scope.new_root_scope()
    y = PROBE(root.with_op_name("probe"), Const(root, np.array([1, 2], np.int32)), mistake=mistake)
    on_cpu = SessionConfig(devices=[CpuDevice(0)])
    assert Session(root, on_cpu).run(y).tolist() == [2, 4]  # fine with numpy
    with simulated_gpus(1):
        with pytest.raises(minigraph.OpError) as info:
            Session(root).run(y)
    assert info.value.node_name == "probe"
    assert "[[node probe (SimulatedCupyTestProbe) on " in str(info.value)
    assert "device:GPU:0" in str(info.value)
    fine = PROBE(root, Const(root, np.array([1, 2], np.int32)), mistake="none")
    with simulated_gpus(1):
        assert Session(root).run(fine).tolist() == [2, 4]
