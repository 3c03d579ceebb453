"""DynamicPartition and DynamicStitch as graph ops: builders, static shapes, construction-time
and run-time error tables, TF's documented examples through Session.run, and simulated GPUs."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import assert_array_same, msg, sample
from _partition_helpers import ref_partition, ref_stitch

import minigraph as mg
from minigraph import InvalidArgumentError, RunMetadata, Scope, Session, registry
from minigraph.testing import simulated_gpus
from ops import Const, DynamicPartition, DynamicStitch, Placeholder, Sub

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def run(scope, fetch, feed=None):
    config = mg.SessionConfig(check_kernel_outputs=True)
    with Session(scope, config) as sess:
        return sess.run(fetch, feed)


# -- TF's documented examples ------------------------------------------------------------------


def test_partition_doc_examples():
    root = Scope.new_root_scope()
    scalar = DynamicPartition(root, [10, 20], 1, num_partitions=2)
    vector = DynamicPartition(root, [10, 20, 30, 40, 50], [0, 0, 1, 1, 0], num_partitions=2)
    (s0, s1), (v0, v1) = run(root, [scalar.outputs, vector.outputs])
    assert_array_same(s0, np.zeros((0, 2), np.int32))  # "Empty with shape [0, 2]"
    assert_array_same(s1, np.array([[10, 20]], np.int32))
    assert_array_same(v0, np.array([10, 20, 50], np.int32))
    assert_array_same(v1, np.array([30, 40], np.int32))
    # Constant partitions: exact static shapes.
    assert [o.shape for o in scalar.outputs] == [[0, 2], [1, 2]]
    assert [o.shape for o in vector.outputs] == [[3], [2]]


def test_stitch_doc_example():
    root = Scope.new_root_scope()
    indices = [6, [4, 1], [[5, 2], [0, 3]]]
    data = [[61, 62], [[41, 42], [11, 12]], [[[51, 52], [21, 22]], [[1, 2], [31, 32]]]]
    merged = DynamicStitch(root, indices, data)
    assert merged.shape == [7, 2] and merged.operation.attrs["N"] == 3
    expected = [[1, 2], [11, 12], [21, 22], [31, 32], [41, 42], [51, 52], [61, 62]]
    assert_array_same(run(root, merged), np.array(expected, np.int32))


def test_doc_example_merging_partitions_back():
    # dynamic_stitch's document: increment the elements that are not -1, keep the others.
    root = Scope.new_root_scope()
    x = Const(root, [0.1, -1.0, 5.2, 4.3, -1.0, 7.4])
    mask = Placeholder(root, mg.int32, shape=[6])
    parts = DynamicPartition(root, x, mask, num_partitions=2)
    where = DynamicPartition(root, np.arange(6, dtype=np.int32), mask, num_partitions=2)
    bumped = Sub(root, parts[1], np.float32(-1))
    out = DynamicStitch(root, [where[0], where[1]], [parts[0], bumped])
    got = run(root, out, {mask: [1, 0, 1, 1, 0, 1]})
    np.testing.assert_allclose(got, [1.1, -1.0, 6.2, 5.3, -1.0, 8.4], rtol=1e-6)


# -- builders and static shapes ----------------------------------------------------------------


def test_partition_builder_outputs():
    root = Scope.new_root_scope()
    data = Placeholder(root, mg.float32, shape=[None, 3, 4])
    parts = Placeholder(root, mg.int32, shape=[None, 3])
    d = DynamicPartition(root, data, parts, num_partitions=3)
    assert len(d.outputs) == 3 and d[2] is d.outputs[2]
    assert all(o.shape == [None, 4] and o.dtype == mg.float32 for o in d.outputs)
    assert d.operation.attrs["num_partitions"] == 3 and d.operation.attrs["T"] == mg.float32
    assert [o.name for o in d.outputs] == ["DynamicPartition:0", "DynamicPartition:1",
                                           "DynamicPartition:2"]  # fmt: skip
    unknown = DynamicPartition(root, data, Placeholder(root, mg.int32), num_partitions=2)
    assert [o.shape for o in unknown.outputs] == [mg.TensorShape(None)] * 2


def test_stitch_static_shapes():
    root = Scope.new_root_scope()
    i0 = Placeholder(root, mg.int32, shape=[None])
    d0 = Placeholder(root, mg.float32, shape=[None, None])
    st = DynamicStitch(root, [i0, [[1, 2]]], [d0, np.zeros((1, 2, 5), np.float32)])
    assert st.shape == [None, 5]
    consts = DynamicStitch(root, [[0, 9], [3]], [np.zeros((2, 5)), np.zeros((1, 5))])
    assert consts.shape == [10, 5]
    assert consts.dtype == mg.float64


@pytest.mark.parametrize(
    "build, text",
    [
        (
            lambda r: DynamicPartition(r, np.zeros((5, 2)), [0, 1, 0], num_partitions=2),
            "data.shape must start with partitions.shape, got data.shape = [5,2], "
            "partitions.shape = [3]",
        ),
        (
            lambda r: DynamicPartition(
                r, np.zeros((2, 3)), [[0, 1, 2], [0, 17, 99]], num_partitions=7
            ),
            "partitions[1,1] = 17 is not in [0, 7)",
        ),
        (lambda r: DynamicPartition(r, [1, 2], 17, num_partitions=7), "partitions = 17 is not in"),
        (
            lambda r: DynamicPartition(r, [1, 2], [0, 1], num_partitions=0),
            "attr 'num_partitions' must be >= 1; got 0",
        ),
        (
            lambda r: DynamicPartition(r, [1, 2], np.array([0, 2**40], np.int64), num_partitions=2),
            "the value 1099511627776 at [1] is out of int32's range",
        ),
        (
            lambda r: DynamicStitch(r, [[0, 1]], [[1, 2, 3]]),
            "data[0].shape = [3] does not start with indices[0].shape = [2]",
        ),
        (
            lambda r: DynamicStitch(r, [[0], [1]], [[[1, 2]], [[1, 2, 3]]]),
            "Need data[0].shape[1:] = data[1].shape[1:]",
        ),
        (
            lambda r: DynamicStitch(r, [[0, 1], [5, -2]], [[1, 2], [3, 4]]),
            "indices[1] is out of range (indices list element 1 holds -2)",
        ),
        (
            lambda r: DynamicStitch(r, [[2**31 - 1]], [[1]]),
            "the output would have 2147483648 rows",
        ),
        (lambda r: DynamicStitch(r, [], []), "'indices'"),
        (lambda r: DynamicStitch(r, [[0]], [[1], [2]]), "'data'"),
        (
            lambda r: DynamicStitch(r, [np.array([2**40], np.int64)], [[1]]),
            "out of int32's range",
        ),
        (lambda r: DynamicStitch(r, [[0], [1]], [[1], [2.5]]), "'data'"),
    ],
)
def test_construction_errors_leave_the_graph_unchanged(build, text):
    root = Scope.new_root_scope()
    before = len(root.graph)
    with pytest.raises(InvalidArgumentError, match=msg(text)):
        build(root)
    assert len(root.graph) == before


# -- run-time errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_partition_runtime_error_on_every_device(device):
    root = Scope.new_root_scope().with_device(device)
    parts = Placeholder(root.with_op_name("parts"), mg.int32, shape=[2, 3])
    d = DynamicPartition(root.with_op_name("dp"), np.zeros((2, 3), np.float32), parts,
                         num_partitions=7)  # fmt: skip
    with simulated_gpus(1):
        with pytest.raises(InvalidArgumentError) as info:
            run(root, d.outputs, {parts: [[0, 1, 2], [3, 4, 17]]})
    assert info.value.message.startswith("partitions[1,2] = 17 is not in [0, 7)")
    assert info.value.node_name == "dp" and info.value.op_type == "DynamicPartition"
    assert f"device:{device}:0" in info.value.message


@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_stitch_runtime_errors_on_every_device(device):
    root = Scope.new_root_scope().with_device(device)
    i1 = Placeholder(root, mg.int32, shape=[None])
    feed_data = Placeholder(root, mg.float32, shape=[None])
    st = DynamicStitch(root.with_op_name("st"), [[0, 1], i1], [[1.0, 2.0], feed_data])
    with simulated_gpus(1):
        with pytest.raises(InvalidArgumentError, match=msg("indices[2] is out of range")):
            run(root, st, {i1: [4, 3, -1], feed_data: [1, 2, 3]})
        with pytest.raises(InvalidArgumentError, match=msg("does not start with indices[1]")):
            run(root, st, {i1: [4, 3], feed_data: [1, 2, 3]})


# -- dtypes and devices ------------------------------------------------------------------------


def test_kernel_registrations():
    for op in ("DynamicPartition", "DynamicStitch"):
        kernels = {k.device_type: k for k in registry.kernels_for(op)}
        assert set(kernels) == {"CPU", "GPU"}
        gpu_types = kernels["GPU"].type_constraints["T"]
        assert mg.string not in gpu_types and mg.bfloat16 not in gpu_types
        assert mg.complex64 in gpu_types and mg.bool_ in gpu_types
        assert "T" not in kernels["CPU"].type_constraints


@pytest.mark.parametrize("dtype", mg.dtypes.ALL_DTYPES, ids=lambda d: d.name)
def test_round_trip_every_dtype_on_simulated_gpu(dtype):
    data = sample(dtype, (7, 2))
    parts = np.array([2, 0, 1, 2, 2, 0, 1], np.int32)
    root = Scope.new_root_scope().with_device("gpu")
    d = DynamicPartition(root.with_op_name("dp"), data, parts, num_partitions=3)
    where = DynamicPartition(root.with_op_name("where"), np.arange(7, dtype=np.int32), parts,
                             num_partitions=3)  # fmt: skip
    st = DynamicStitch(root.with_op_name("st"), list(where.outputs), list(d.outputs))
    md = RunMetadata()
    with simulated_gpus(1):
        with Session(root, mg.SessionConfig(check_kernel_outputs=True)) as sess:
            pieces, merged = sess.run([d.outputs, st], run_metadata=md)
    for got, want in zip(pieces, ref_partition(data, parts, 3)):
        assert_array_same(got, want)
    assert_array_same(merged, data)
    on_gpu = not (dtype.is_string or dtype is mg.bfloat16)
    assert md.placement["st"] == (GPU0 if on_gpu else CPU0)
    assert md.placement["dp"] == (GPU0 if on_gpu else CPU0)


def test_stitch_zero_fill_and_last_writer_on_gpu():
    root = Scope.new_root_scope().with_device("gpu")
    i0 = Placeholder(root, mg.int32, shape=[None])
    d0 = Placeholder(root, mg.bool_, shape=[None, 2])
    st = DynamicStitch(root, [i0, [4]], [d0, [[False, True]]])
    feed = {i0: [1, 1, 4, 3], d0: [[True, True], [True, False], [True, True], [False, True]]}
    with simulated_gpus(1):
        got = run(root, st, feed)
    want = ref_stitch([np.array([1, 1, 4, 3]), np.array([4])],
                      [np.array(feed[d0]), np.array([[False, True]])])  # fmt: skip
    assert_array_same(got, want)
    assert not got[0].any() and not got[2].any()
