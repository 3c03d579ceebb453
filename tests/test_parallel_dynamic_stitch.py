"""ParallelDynamicStitch (what TF's embedding_lookup writes into its graphs): TF's documented
example and TF 2.21's values, TF's OpDef, every dtype TF's CPU kernel registers, the same
shapes, errors and results as DynamicStitch (properties against the element-by-element
reference of _partition_helpers), graph files, and simulated GPUs."""

from __future__ import annotations

import numpy as np
import pytest
from _partition_helpers import ref_stitch
from _segment_helpers import assert_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import InvalidArgumentError, SessionConfig
from minigraph.testing import simulated_gpus
from ops.partition import DynamicStitch, ParallelDynamicStitch

CHECKED = SessionConfig(check_kernel_outputs=True)


def run(scope, fetch, feeds=None, config=CHECKED):
    with mg.Session(scope, config) as sess:
        return sess.run(fetch, feeds)


def stitch(indices, data):
    scope = mg.Scope.new_root_scope()
    return run(scope, ParallelDynamicStitch(scope, indices, data))


def test_tf_doc_example():
    # tf.raw_ops.ParallelDynamicStitch / tf.dynamic_stitch's documented example.
    indices = [6, [4, 1], [[5, 2], [0, 3]]]
    data = [[61, 62], [[41, 42], [11, 12]], [[[51, 52], [21, 22]], [[1, 2], [31, 32]]]]
    scope = mg.Scope.new_root_scope()
    merged = ParallelDynamicStitch(scope, indices, data)
    assert merged.shape.as_list() == [7, 2]
    expected = [[1, 2], [11, 12], [21, 22], [31, 32], [41, 42], [51, 52], [61, 62]]
    assert_same(run(scope, merged), np.array(expected, np.int32))


def test_tf_2_21_values():
    # Gaps are zeros; a repeated index takes its last value (TF: undefined, it gave 7.0 here).
    assert_same(stitch([[0, 5]], [[1.0, 2]]), np.array([1, 0, 0, 0, 0, 2], np.float32))
    assert_same(stitch([[0, 5], [5]], [[1.0, 2], [7.0]]), np.array([1, 0, 0, 0, 0, 7], np.float32))
    got = stitch([[0, 1]], [np.array([b"a", b"b"], dtype=object)])
    assert got.tolist() == [b"a", b"b"]
    empty = np.zeros((0, 3), np.float32)
    assert_same(stitch([np.zeros(0, np.int32)], [empty]), empty)
    got = stitch([np.zeros(0, np.int32), [1]], [empty, [[1, 1, 1.0]]])
    assert_same(got, np.array([[0, 0, 0], [1, 1, 1]], np.float32))


def test_op_def_is_tf_2_21s():
    op_def = mg.registry.get_op_def("ParallelDynamicStitch")
    assert [(a.name, a.number_attr) for a in op_def.inputs] == [("indices", "N"), ("data", "N")]
    assert op_def.inputs[0].dtype is mg.int32
    assert [a.name for a in op_def.attrs] == ["N", "T"]
    assert [a.name for a in op_def.outputs] == ["merged"]
    kernels = {k.device_type: k for k in mg.registry.kernels_for("ParallelDynamicStitch")}
    assert set(kernels) == {"CPU", "GPU"} and all(k.trusted for k in kernels.values())


@pytest.mark.parametrize("dtype", mg.dtypes.ALL_DTYPES, ids=lambda d: d.name)
def test_every_dtype_on_every_device(dtype):
    # TF 2.21's CPU kernel registers every minigraph dtype (bool and string included).
    rng = np.random.default_rng(4)
    if dtype.is_string:
        values = np.empty((5, 2), dtype=object)
        values.reshape(-1)[:] = [f"v{k}".encode() for k in range(10)]
    else:
        values = rng.integers(0, 2 if dtype.is_bool else 50, size=(5, 2)).astype(dtype.np_dtype)
    indices = [np.array([4, 0], np.int32), np.array([[2, 6], [0, 9]], np.int32)]
    data = [values[:2], values[1:5].reshape(2, 2, 2)]
    with simulated_gpus(1):
        scope = mg.Scope.new_root_scope()
        holders = [mg.Placeholder(scope, dtype) for _ in data]
        merged = ParallelDynamicStitch(scope.with_op_name("m"), indices, holders)
        metadata = mg.RunMetadata()
        with mg.Session(scope, CHECKED) as sess:
            got = sess.run(merged, dict(zip(holders, data)), run_metadata=metadata)
        stays = dtype.is_string or dtype is mg.bfloat16
        assert metadata.placement["m"].endswith("CPU:0" if stays else "GPU:0")
    expected = ref_stitch(indices, data)
    if dtype.is_string:
        assert got.tolist() == expected.tolist()
    else:
        assert_same(got, expected)


@st.composite
def stitch_cases(draw):
    count = draw(st.integers(1, 3))
    row = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    indices, data = [], []
    for _ in range(count):
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
        size = int(np.prod(shape, dtype=np.int64))
        values = draw(st.lists(st.integers(0, 8), min_size=size, max_size=size))
        indices.append(np.array(values, np.int32).reshape(shape))
        data.append(np.arange(size * int(np.prod(row)), dtype=np.int64).reshape(shape + row) + 1)
    return indices, data


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=stitch_cases())
def test_same_as_dynamic_stitch_and_the_reference(case):
    indices, data = case
    scope = mg.Scope.new_root_scope()
    parallel = ParallelDynamicStitch(scope, indices, data)
    plain = DynamicStitch(scope, indices, data)
    assert parallel.shape == plain.shape
    got, again = run(scope, [parallel, plain])
    assert_same(got, again)
    assert_same(got, ref_stitch(indices, data))


ERRORS = [
    # (indices, data, TF 2.21's message, as DynamicStitch words it here)
    ([[0, -1]], [[1.0, 2]], "indices[1] is out of range"),
    ([[0, 1]], [[1.0, 2, 3]], "data[0].shape = [3] does not start with indices[0].shape = [2]"),
    ([[0, 1], [2]], [[[1.0, 2], [3, 4]], [[5.0, 6, 7]]],
     "Need data[0].shape[1:] = data[1].shape[1:], got data[0].shape = [2,2], data[1].shape = "
     "[1,3], indices[0].shape = [2], indices[1].shape = [1]"),
]  # fmt: skip


@pytest.mark.parametrize("indices, data, message", ERRORS)
def test_run_time_errors(indices, data, message):
    scope = mg.Scope.new_root_scope()
    i = [mg.Placeholder(scope, mg.int32) for _ in indices]
    d = [mg.Placeholder(scope, mg.float32) for _ in data]
    merged = ParallelDynamicStitch(scope.with_op_name("m"), i, d)
    feeds = dict(zip(i + d, [np.array(v, np.int32) for v in indices] + list(data)))
    with pytest.raises(InvalidArgumentError) as info:
        run(scope, merged, feeds)
    assert message in str(info.value) and "node m (ParallelDynamicStitch)" in str(info.value)


CONSTRUCTION_ERRORS = [
    ([[0, -1]], [[1.0, 2]], "indices[1] is out of range (indices list element 0 holds -1)"),
    ([[0, 1]], [[1.0, 2, 3]], "data[0].shape = [3] does not start with indices[0].shape = [2]"),
    ([[0, 1], [2]], [[[1.0, 2], [3, 4]], [[5.0, 6, 7]]],
     "Need data[0].shape[1:] = data[1].shape[1:], got data[0].shape = [2,2], data[1].shape = "
     "[1,3]"),
]  # fmt: skip


@pytest.mark.parametrize("indices, data, message", CONSTRUCTION_ERRORS)
def test_construction_errors_with_constant_inputs(indices, data, message):
    scope = mg.Scope.new_root_scope()
    before = len(scope.graph)
    with pytest.raises(InvalidArgumentError) as info:
        ParallelDynamicStitch(scope.with_op_name("m"), indices, data)
    assert message in str(info.value) and "'m' (ParallelDynamicStitch)" in str(info.value)
    assert "m" not in scope.graph and len(scope.graph) <= before + 2 * len(indices)


def test_graph_files_keep_the_op_type():
    scope = mg.Scope.new_root_scope()
    ids = mg.Placeholder(scope.with_op_name("ids"), mg.int32, shape=[None])
    ParallelDynamicStitch(scope.with_op_name("merged"), [ids, [7]], [[[1.0], [2]], [[3.0]]])
    graph_def = scope.graph.as_graph_def()
    node = next(n for n in graph_def.node if n.name == "merged")
    assert node.op == "ParallelDynamicStitch" and node.attr["N"].i == 2
    loaded = mg.Scope.new_root_scope()
    mg.import_graph_def(loaded, graph_def, name="")
    got = mg.Session(loaded).run("merged:0", {"ids:0": [2, 0]})
    assert_same(got, np.array([[2], [0], [1], [0], [0], [0], [0], [3]], np.float32))
