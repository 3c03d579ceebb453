"""GPU kernels: registration, placement, host-memory axis and bad_indices_policy semantics on
simulated GPUs (minigraph.testing), and the same checks on a real GPU when cupy and one are
present (skipped otherwise)."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import (
    GPU_DTYPES,
    INDEX_DTYPES,
    INT64_MAX,
    INT64_MIN,
    assert_array_same,
    ids,
    msg,
    ref_gather,
    ref_gather_nd,
    run,
    sample,
    zero_of,
)

import minigraph
from minigraph import InvalidArgumentError, RunMetadata, Scope, Session, registry
from minigraph.testing import simulated_gpus
from ops import Const, GatherNd, GatherV2, Placeholder, gather

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def placement(scope, fetch, feed=None):
    """(value, {node: device}) of one run."""
    md = RunMetadata()
    with Session(scope) as sess:
        value = sess.run(fetch, feed, run_metadata=md)
    return value, md.placement


# -- registration ------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["GatherV2", "GatherNd"])
def test_gpu_kernels_cover_numeric_and_bool_but_not_string(op_type):
    kernels = {k.device_type: k for k in registry.kernels_for(op_type)}
    assert set(kernels) == {"CPU", "GPU"}
    gpu = kernels["GPU"]
    assert gpu.type_constraints["Tparams"] == frozenset(GPU_DTYPES)
    assert minigraph.string not in gpu.type_constraints["Tparams"]
    assert gpu.type_constraints["Tindices"] == frozenset(INDEX_DTYPES)
    cpu = kernels["CPU"]
    assert "Tparams" not in cpu.type_constraints  # every dtype, strings included


@pytest.mark.parametrize("dtype", [minigraph.bfloat16, minigraph.string], ids=ids)
def test_dtypes_cupy_cannot_hold_stay_on_the_cpu(dtype):
    params = sample(dtype, (3, 4))
    root = Scope.new_root_scope().with_device("/device:GPU:0")
    g = GatherV2(root.with_op_name("g"), params, [2, 0], 0)
    nd = GatherNd(root.with_op_name("nd"), params, [[2, 1]])
    with simulated_gpus(1):
        (out, out_nd), where = placement(root, [g, nd])
    assert where["g"] == CPU0 and where["nd"] == CPU0
    assert_array_same(out, ref_gather(params, np.array([2, 0]), 0))
    assert_array_same(out_nd, ref_gather_nd(params, np.array([[2, 1]])))


def test_axis_is_a_host_memory_input_on_every_device():
    for kernel in registry.kernels_for("GatherV2"):
        assert kernel.host_memory == frozenset({"axis"})
        assert kernel.host_inputs == frozenset({2})


# -- placement ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=ids)
def test_numeric_and_bool_gathers_run_on_the_gpu(dtype):
    params = sample(dtype, (3, 4))
    root = Scope.new_root_scope()
    g = GatherV2(root.with_op_name("g"), params, [[2, 0]], 1)
    nd = GatherNd(root.with_op_name("nd"), params, [[2, 1], [0, 3]])
    with simulated_gpus(1):
        (out, out_nd), where = placement(root, [g, nd])
    assert where["g"] == GPU0 and where["nd"] == GPU0
    assert_array_same(out, ref_gather(params, np.array([[2, 0]]), 1))
    assert_array_same(out_nd, ref_gather_nd(params, np.array([[2, 1], [0, 3]])))


def test_string_gathers_stay_on_the_cpu():
    params = np.array([[b"a", b"b"], [b"c", b"d"]], dtype=object)
    root = Scope.new_root_scope()
    g = GatherV2(root.with_op_name("g"), params, [1, 0], 0)
    nd = GatherNd(root.with_op_name("nd"), params, [[1, 1]])
    num = GatherV2(root.with_op_name("num"), [1.0, 2.0], [1], 0)
    with simulated_gpus(1):
        (out, out_nd, out_num), where = placement(root, [g, nd, num])
    assert where["g"] == CPU0 and where["nd"] == CPU0
    assert where["num"] == GPU0  # the GPU is there: only the strings stay behind
    assert_array_same(out, np.array([[b"c", b"d"], [b"a", b"b"]], dtype=object))
    assert_array_same(out_nd, np.array([b"d"], dtype=object))
    assert_array_same(out_num, np.array([2.0], np.float32))


def test_string_gather_requested_on_the_gpu_falls_back_to_the_cpu():
    root = Scope.new_root_scope().with_device("/device:GPU:0")
    params = Placeholder(root, minigraph.string, shape=[3])
    g = gather(root, params, [2, 0], name="g")
    with simulated_gpus(1):
        out, where = placement(root, g, {params: ["x", "y", "z"]})
    assert where["g"] == CPU0
    assert_array_same(out, np.array([b"z", b"x"], dtype=object))


def test_fed_axis_is_not_copied_to_the_gpu():
    params = sample(minigraph.float64, (3, 5))
    indices = np.array([4, 0], np.int64)
    root = Scope.new_root_scope()
    p = Placeholder(root, minigraph.float64, shape=[3, 5])
    i = Placeholder(root, minigraph.int64, shape=[2])
    a = Placeholder(root, minigraph.int64, shape=[])
    g = GatherV2(root.with_op_name("g"), p, i, a)
    with simulated_gpus(1) as (_, gpu):
        md = RunMetadata()
        with Session(root) as sess:
            out = sess.run(g, {p: params, i: indices, a: 1}, run_metadata=md)
            assert md.placement["g"] == GPU0
            assert gpu.copies_in == 2  # params and indices; the axis stays in host memory
            assert gpu.bytes_in == params.nbytes + indices.nbytes
            gpu.reset_counters()
            sess.run(g, {p: params, i: indices, a: 0})
            assert gpu.copies_in == 2
    assert_array_same(out, params[:, [4, 0]])


def test_constant_axis_stays_on_the_host():
    root = Scope.new_root_scope()
    axis = Const(root.with_op_name("axis"), np.int32(1))
    g = GatherV2(root.with_op_name("g"), sample(minigraph.float32, (2, 3)), [2], axis)
    with simulated_gpus(1):
        _, where = placement(root, g)
    assert where["g"] == GPU0
    assert where["axis"] == CPU0


# -- bad_indices_policy on the GPU ---------------------------------------------------------------


@pytest.mark.parametrize("policy", ["", "DEFAULT", "IGNORE"], ids=ids)
@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=ids)
def test_default_and_ignore_write_zeros_on_the_gpu(dtype, policy):
    params = sample(dtype, (3, 4))
    indices = np.array([[0, 4], [-1, 3], [INT64_MAX, INT64_MIN]], np.int64)
    vectors = np.array([[0, 3], [3, 0], [-1, 0], [2, INT64_MAX], [INT64_MIN, 1]], np.int64)
    root = Scope.new_root_scope()
    g = GatherV2(root, params, indices, 1, bad_indices_policy=policy)
    gb = GatherV2(root, params, indices, 1, batch_dims=1, bad_indices_policy=policy)
    nd = GatherNd(root, params, vectors, bad_indices_policy=policy)
    nd_slices = GatherNd(root, params, [[2], [3], [-1]], bad_indices_policy=policy)
    with simulated_gpus(1):
        (out, out_b, out_nd, out_slices), where = placement(root, [g, gb, nd, nd_slices])
    assert set(where[n] for n in ("GatherV2", "GatherV2_1", "GatherNd", "GatherNd_1")) == {GPU0}
    assert_array_same(out, ref_gather(params, indices, 1, ignore_bad=True))
    assert out[0, 0, 1] == zero_of(dtype)
    assert_array_same(out_b, ref_gather(params, indices, 1, 1, ignore_bad=True))
    assert_array_same(out_nd, ref_gather_nd(params, vectors, ignore_bad=True))
    zeros = np.full(4, zero_of(dtype), params.dtype)
    assert_array_same(out_slices, np.stack([params[2], zeros, zeros]))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=ids)
def test_default_on_the_gpu_for_every_index_dtype(index_dtype):
    info = np.iinfo(index_dtype.np_dtype)
    params = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    indices = np.array([2, info.max, info.min, 0], index_dtype.np_dtype)
    root = Scope.new_root_scope()
    g = GatherV2(root, params, indices, 1)
    nd = GatherNd(root, params, np.array([[1, 2], [info.min, 0], [0, info.max]], indices.dtype))
    with simulated_gpus(1):
        out, out_nd = run(root, [g, nd])
    assert_array_same(out, np.array([[3, 0, 0, 1], [6, 0, 0, 4]], np.int32))
    assert_array_same(out_nd, np.array([6, 0, 0], np.int32))


def test_gpu_zero_size_gather_dimension_writes_zeros():
    root = Scope.new_root_scope()
    params = np.zeros((2, 0, 3), np.float32)
    g = GatherV2(root, params, [0, 1], 1)
    gb = GatherV2(root, params, [[0], [5]], 1, batch_dims=1)
    nd = GatherNd(root, params, [[0, 0], [1, 0]])
    with simulated_gpus(1):
        out, out_b, out_nd = run(root, [g, gb, nd])
    assert_array_same(out, np.zeros((2, 2, 3), np.float32))
    assert_array_same(out_b, np.zeros((2, 1, 3), np.float32))
    assert_array_same(out_nd, np.zeros((2, 3), np.float32))


def test_gpu_valid_indices_into_zero_size_params():
    root = Scope.new_root_scope()
    nd = GatherNd(root, np.zeros((2, 0), np.float32), [[1], [0]], bad_indices_policy="ERROR")
    g = GatherV2(root, np.zeros((0, 4), np.int8), [3, 1], 1, bad_indices_policy="ERROR")
    with simulated_gpus(1):
        out_nd, out = run(root, [nd, g])
    assert out_nd.shape == (2, 0) and out_nd.dtype == np.float32
    assert out.shape == (0, 2) and out.dtype == np.int8


ERROR_CASES = [
    (
        lambda s, p: GatherV2(s, p, [[0, 1], [3, -1]], 1, bad_indices_policy="ERROR"),
        "indices[1,0] = 3 is not in [0, 3)",
    ),
    (
        lambda s, p: GatherV2(s, p, [[0, 1], [-1, 9]], 1, batch_dims=1, bad_indices_policy="ERROR"),
        "indices[1,0] = -1 is not in [0, 3)",
    ),
    (
        lambda s, p: GatherV2(s, p, np.int64(INT64_MIN), 0, bad_indices_policy="ERROR"),
        f"indices = {INT64_MIN} is not in [0, 2)",
    ),
    (
        lambda s, p: GatherNd(s, p, [[1, 2], [2, 0], [0, 7]], bad_indices_policy="ERROR"),
        "indices[1] = [2, 0] does not index into param shape [2,3], node name: g",
    ),
    (
        lambda s, p: GatherNd(
            s, p, np.array([[[1]], [[INT64_MAX]]]), batch_dims=1, bad_indices_policy="ERROR"
        ),
        f"indices[1,0] = [{INT64_MAX}] does not index into param shape [2,3], node name: g",
    ),
    (
        lambda s, p: GatherV2(s, p, np.array([2, 3], np.int16), 1, bad_indices_policy="ERROR"),
        "indices[1] = 3 is not in [0, 3)",
    ),
]


@pytest.mark.usefixtures("cpu_only")  # the first run is the CPU's
@pytest.mark.parametrize("build, message", ERROR_CASES)
def test_error_policy_raises_on_the_gpu_with_the_cpu_message(build, message):
    params = sample(minigraph.float32, (2, 3))
    root = Scope.new_root_scope()
    g = build(root.with_op_name("g"), params)
    with pytest.raises(InvalidArgumentError, match=msg(message)) as on_cpu:
        run(root, g)
    with simulated_gpus(1):
        with pytest.raises(InvalidArgumentError, match=msg(message)) as on_gpu:
            run(root, g)
    assert f"[[node g ({g.operation.type}) on {GPU0}" in str(on_gpu.value)
    assert on_gpu.value.message.split("\n")[0] == on_cpu.value.message.split("\n")[0]
    assert on_gpu.value.node_name == "g"


@pytest.mark.usefixtures("cpu_only")  # first the machine without a GPU
def test_default_policy_differs_between_devices():
    params = np.array([1.5, 2.5], np.float32)
    root = Scope.new_root_scope()
    g = GatherV2(root.with_op_name("g"), params, [1, 2], 0, bad_indices_policy="DEFAULT")
    with pytest.raises(InvalidArgumentError, match=msg("indices[1] = 2 is not in [0, 2)")):
        run(root, g)
    with simulated_gpus(1):
        assert_array_same(run(root, g), np.array([2.5, 0.0], np.float32))
    # A CPU request keeps TF's CPU behaviour even with a GPU present.
    cpu = Scope.new_root_scope().with_device("/device:CPU:0")
    h = GatherV2(cpu.with_op_name("h"), params, [1, 2], 0)
    with simulated_gpus(1):
        with pytest.raises(InvalidArgumentError, match=msg("indices[1] = 2 is not in [0, 2)")):
            run(cpu, h)


def test_ignore_zeros_strings_on_the_cpu_under_simulated_gpus():
    params = np.array([b"a", b"b"], dtype=object)
    root = Scope.new_root_scope()
    g = GatherV2(root.with_op_name("g"), params, [1, -1, 5], 0, bad_indices_policy="IGNORE")
    with simulated_gpus(1):
        out, where = placement(root, g)
    assert where["g"] == CPU0
    assert_array_same(out, np.array([b"b", b"", b""], dtype=object))


@pytest.mark.usefixtures("cpu_only")  # the first run is the CPU's
def test_gpu_results_match_cpu_results_for_valid_indices():
    """Two code paths: numpy on the CPU, the cupy-like namespace on the simulated GPU."""
    rng = np.random.default_rng(11)
    for dtype in GPU_DTYPES:
        params = sample(dtype, (3, 4, 5), seed=3)
        indices = rng.integers(0, 4, size=(3, 2)).astype(np.int32)
        vectors = np.stack([rng.integers(0, 3, 6), rng.integers(0, 4, 6)], axis=-1)
        root = Scope.new_root_scope()
        fetches = [
            GatherV2(root, params, indices, 1),
            GatherV2(root, params, indices, -2, batch_dims=1),
            GatherNd(root, params, vectors),
            GatherNd(root, params, vectors[:3, 1:], batch_dims=1),
        ]
        on_cpu = run(root, fetches)
        with simulated_gpus(1):
            on_gpu = run(root, fetches)
        for a, b in zip(on_gpu, on_cpu):
            assert_array_same(a, b)


# -- a real GPU (cupy) ---------------------------------------------------------------------------


def _real_gpu_devices():
    """CPU:0 and a real (cupy) GPU, or skip."""
    pytest.importorskip("cupy", reason="cupy is not installed")
    found = minigraph.get_devices()  # outside simulated_gpus: the discovered devices
    gpus = [d for d in found if d.device_type == "GPU" and not d.simulated]
    if not gpus:
        pytest.skip(f"no real GPU: {minigraph.gpu_unavailable_reason()}")
    return [d for d in found if d.is_host] + gpus[:1]


REAL_GPU_DTYPES = list(GPU_DTYPES)


@pytest.mark.parametrize("dtype", REAL_GPU_DTYPES, ids=ids)
def test_real_gpu_matches_the_reference(dtype):
    devs = _real_gpu_devices()
    params = sample(dtype, (3, 4))
    indices = np.array([[0, 3], [-1, 9]], np.int64)
    batched = np.array([[1], [3], [0]], np.int32)
    vectors = np.array([[0, 3], [5, 0], [2, 1]], np.int32)
    root = Scope.new_root_scope()
    fetches = [
        GatherV2(root, params, indices, 1),
        GatherV2(root, params, batched, 1, batch_dims=1),
        GatherNd(root, params, vectors),
        GatherV2(root, params, np.array([1, 5], np.int16), 0, bad_indices_policy="IGNORE"),
    ]
    md = RunMetadata()
    with Session(root, minigraph.SessionConfig(devices=devs)) as sess:
        outs = sess.run(fetches, run_metadata=md)
    assert all(md.placement[f.operation.name] == GPU0 for f in fetches)
    assert_array_same(outs[0], ref_gather(params, indices, 1, ignore_bad=True))
    assert_array_same(outs[1], ref_gather(params, batched, 1, 1))
    assert_array_same(outs[2], ref_gather_nd(params, vectors, ignore_bad=True))
    assert_array_same(outs[3], ref_gather(params, np.array([1, 5]), 0, ignore_bad=True))


def test_real_gpu_error_policy():
    devs = _real_gpu_devices()
    root = Scope.new_root_scope()
    g = GatherV2(
        root.with_op_name("g"), [1.0, 2.0, 3.0], [[0, 3], [-1, 0]], 0, bad_indices_policy="ERROR"
    )
    nd = GatherNd(
        root.with_op_name("nd"), [[1, 2], [3, 4]], [[0, 0], [2, 0]], bad_indices_policy="ERROR"
    )
    with Session(root, minigraph.SessionConfig(devices=devs)) as sess:
        with pytest.raises(InvalidArgumentError, match=msg("indices[0,1] = 3 is not in [0, 3)")):
            sess.run(g)
        with pytest.raises(
            InvalidArgumentError,
            match=msg("indices[1] = [2, 0] does not index into param shape [2,2], node name: nd"),
        ):
            sess.run(nd)
