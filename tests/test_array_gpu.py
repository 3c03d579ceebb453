"""The array ops' GPU kernels on simulated GPUs (minigraph.testing): every op runs on the GPU for
every dtype cupy holds and gives the CPU's values; strings and bfloat16 stay on the CPU; the
small shape-like inputs (perm, multiples, dims, begin/end/strides, dim, shape, depth) are host
memory, never copied to the device; Shape, Size and Rank answer in host memory. (The whole
suite also runs with MINIGRAPH_TEST_SIMULATED_GPUS=2, where every test that does not pin a
device runs these kernels against its references.)
"""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import GPU_DTYPES, sample

import minigraph as mg
import ops  # noqa: F401
from minigraph import Placeholder, RunMetadata, Scope, Session, registry
from minigraph.devices import CpuDevice
from minigraph.testing import simulated_gpus
from ops import array as A

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
NEW_OPS = ["StridedSlice", "Slice", "Pack", "Unpack", "Transpose", "ExpandDims", "Squeeze",
           "Fill", "ZerosLike", "OnesLike", "Tile", "SelectV2", "BroadcastTo", "OneHot", "Rank",
           "StopGradient", "Select"]  # fmt: skip
HOST = {
    "StridedSlice": {"begin", "end", "strides"}, "Slice": {"begin", "size"},
    "Transpose": {"perm"}, "ExpandDims": {"dim"}, "Fill": {"dims"}, "Tile": {"multiples"},
    "BroadcastTo": {"shape"}, "OneHot": {"depth"}, "Rank": {"output"},
}  # fmt: skip


@pytest.mark.parametrize("op_type", NEW_OPS)
def test_kernels_on_both_devices_with_tfs_host_memory(op_type):
    kernels = {k.device_type: k for k in registry.kernels_for(op_type) if not k.label}
    assert set(kernels) == {"CPU", "GPU"}
    assert kernels["GPU"].type_constraints["T"] <= frozenset(GPU_DTYPES)
    assert not kernels["CPU"].type_constraints  # every dtype the OpDef allows
    for kernel in kernels.values():
        assert kernel.host_memory == frozenset(HOST.get(op_type, ()))


def _graph(scope, x, dtype):
    """Every array op over x ([2, 3] of `dtype`)."""
    pair = sample(dtype, (2,), 3)
    return [
        A.StridedSlice(scope, x, [1, 2], [0, 0], [-1, -2], end_mask=3), x[None, -1, ::2],
        A.Slice(scope, x, [0, 1], [-1, 2]), A.Pack(scope, [x, x], axis=1),
        A.Unpack(scope, x, 3, axis=1)[1], A.Transpose(scope, x, [1, 0]),
        A.ExpandDims(scope, x, -1), A.Squeeze(scope, A.ExpandDims(scope, x, 0), squeeze_dims=[0]),
        A.Fill(scope, [2, 2], pair[0]), A.ZerosLike(scope, x),
        A.OnesLike(scope, x) if not dtype.is_string else A.ZerosLike(scope, x),
        A.Tile(scope, x, [2, 2]), A.SelectV2(scope, [True, False, True], x, pair[1]),
        A.BroadcastTo(scope, x, [3, 2, 3]), A.OneHot(scope, [[2, 0], [1, 5]], 3, pair[0], pair[1]),
        A.Rank(scope, x), A.StopGradient(scope, x), A.Select(scope, [False, True], x, x[::-1]),
    ]  # fmt: skip


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=lambda d: d.name)
def test_every_op_runs_on_the_gpu_with_the_cpus_values(dtype):
    data = sample(dtype, (2, 3), 1)
    scope = Scope.new_root_scope()
    x = Placeholder(scope.with_op_name("x"), dtype, shape=[2, 3]).output
    fetches = _graph(scope, x, dtype)
    cpu = Session(scope, mg.SessionConfig(devices=[CpuDevice(0)])).run(fetches, {x: data})
    with simulated_gpus(1):
        metadata = RunMetadata()
        with Session(scope, mg.SessionConfig(check_kernel_outputs=True)) as sess:
            gpu = sess.run(fetches, {x: data}, run_metadata=metadata)
    for fetch, a, b in zip(fetches, cpu, gpu):
        op = fetch.op if isinstance(fetch, mg.Output) else fetch.operation
        assert metadata.placement[op.name] == GPU0, op.name
        assert a.dtype == b.dtype and a.shape == b.shape, op.name
        np.testing.assert_array_equal(a, b, err_msg=op.name)


@pytest.mark.parametrize("dtype", [mg.string, mg.bfloat16], ids=lambda d: d.name)
def test_strings_and_bfloat16_stay_on_the_cpu(dtype):
    data = sample(dtype, (2, 3), 1)
    scope = Scope.new_root_scope().with_device("/device:GPU:0")
    x = Placeholder(scope.with_op_name("x"), dtype, shape=[2, 3]).output
    fetches = _graph(scope, x, dtype)
    with simulated_gpus(1):
        metadata = RunMetadata()
        got = Session(scope).run(fetches, {x: data}, run_metadata=metadata)
    for fetch in fetches:
        op = fetch.op if isinstance(fetch, mg.Output) else fetch.operation
        assert metadata.placement[op.name] == CPU0, op.name
    assert got[0].dtype == data.dtype


def test_shape_like_inputs_are_not_copied_to_the_gpu():
    scope = Scope.new_root_scope()
    x = Placeholder(scope, mg.float32, shape=None).output
    perm = Placeholder(scope, mg.int32, shape=[2]).output
    multiples = Placeholder(scope, mg.int64, shape=[2]).output
    begin = Placeholder(scope, mg.int32, shape=[1]).output
    depth = Placeholder(scope, mg.int32, shape=[]).output
    dims = Placeholder(scope, mg.int32, shape=[1]).output
    gpu_scope = scope.with_device("/device:GPU:0")
    fetches = [
        A.Transpose(gpu_scope, x, perm), A.Tile(gpu_scope, x, multiples),
        A.StridedSlice(gpu_scope, x, begin, begin, np.array([1], np.int32), end_mask=1),
        A.OneHot(gpu_scope, [0, 1], depth, np.float32(1), np.float32(0)),
        A.Fill(gpu_scope, dims, np.float32(2)),
    ]  # fmt: skip
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    feeds = {x: data, perm: [1, 0], multiples: np.array([1, 2]), begin: [1], depth: 3, dims: [2]}
    with simulated_gpus(1) as (_, gpu):
        with Session(scope) as sess:
            sess.run(fetches, feeds)  # the first run also copies the GPU nodes' constants
            gpu.reset_counters()
            got = sess.run(fetches, feeds)
            assert gpu.copies_in == 1 and gpu.bytes_in == data.nbytes  # x only
    np.testing.assert_array_equal(got[0], data.T)
    np.testing.assert_array_equal(got[1], np.tile(data, (1, 2)))
    np.testing.assert_array_equal(got[2], data[1:])
    assert got[3].tolist() == [[1, 0, 0], [0, 1, 0]] and got[4].tolist() == [2, 2]


def test_rank_of_a_gpu_tensor_answers_in_host_memory():
    scope = Scope.new_root_scope()
    x = Placeholder(scope, mg.float32, shape=None).output
    with simulated_gpus(1) as (_, gpu):
        metadata = RunMetadata()
        with Session(scope) as sess:
            y = A.Rank(scope.with_device("/device:GPU:0"), A.ZerosLike(scope, x))
            got = sess.run(y, {x: np.zeros((1, 2, 3), np.float32)}, run_metadata=metadata)
            assert gpu.copies_out == 0
    assert got.tolist() == 3 and metadata.placement[y.operation.name] == GPU0
