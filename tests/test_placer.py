"""Placement: requests, soft/strict placement, colocation, kernels per device, generators,
host memory, pruning, and the transfers a plan makes between (simulated) devices."""

import re

import _exec_ops as xops
import numpy as np
import pytest

import minigraph
from minigraph import (
    Const,
    Identity,
    InvalidArgumentError,
    NotFoundError,
    Placeholder,
    RunMetadata,
    Scope,
    Session,
    SessionConfig,
)
from minigraph.placer import _UnionFind, place

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"

STRICT = SessionConfig(allow_soft_placement=False)


def placed(fetches, scope, feeds=None, config=None):
    """Runs `fetches` and returns (values, node name -> device name). The graph optimizer is
    off unless `config` says otherwise: the nodes it makes (folded constants and their copies)
    would join the placement these tests compare exactly."""
    if config is None:
        config = minigraph.SessionConfig(optimizer=False)
    metadata = RunMetadata()
    with Session(scope, config) as sess:
        values = sess.run(fetches, feeds, run_metadata=metadata)
    return values, metadata.placement


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


# -- default placement ---------------------------------------------------------------------------


def test_default_placement_is_the_first_gpu(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0, 2.0])
    y = Identity(scope.with_op_name("y"), x)
    values, placement = placed(y, scope)
    assert placement == {"x": GPU0, "y": GPU0}
    assert type(values) is np.ndarray and values.tolist() == [1.0, 2.0]


def test_default_placement_without_gpu_is_the_cpu(scope, no_gpu):
    y = Identity(scope.with_op_name("y"), Const(scope.with_op_name("x"), 1.0))
    assert placed(y, scope)[1] == {"x": CPU0, "y": CPU0}


def test_placement_covers_every_node_of_the_plan_with_full_names(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), 1.0)
    a = Identity(scope.with_op_name("a").with_device("/cpu:0"), x)
    b = Identity(scope.with_op_name("b").with_device("/gpu:1"), a)
    _, placement = placed(b, scope)
    assert placement == {"x": CPU0, "a": CPU0, "b": GPU1}


# -- requests ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_, expected",
    [
        ("/device:GPU:1", GPU1),
        ("/job:localhost/replica:0/task:0/device:GPU:1", GPU1),
        ("/gpu:1", GPU1),
        ("GPU:0", GPU0),
        ("gpu", GPU0),
        ("/device:GPU:*", GPU0),
        ("/device:CPU:*", CPU0),
        ("cpu:0", CPU0),
        ("/job:localhost", GPU0),
    ],
)
def test_explicit_and_partial_requests(scope, sim_gpus, request_, expected):
    x = Placeholder(scope.with_op_name("x"), minigraph.float32)
    y = xops.AddOne(scope.with_op_name("y").with_device(request_), x)
    values, placement = placed(y, scope, {x: np.float32(1.0)})
    assert placement["y"] == expected
    assert values == 2.0
    # A request on one node does not leak to the next one.
    z = Identity(scope.with_op_name("z"), y)
    assert placed(z, scope, {x: np.float32(1.0)})[1]["z"] == GPU0


@pytest.mark.parametrize("request_", ["/device:GPU:5", "/job:worker/gpu:0", "/device:PLACERTEST:0"])
def test_soft_placement_falls_back_gpu_first(scope, sim_gpus, request_):
    # A known device type with no device in the session (unknown types are refused by scopes).
    minigraph.registry.register_device_type("PLACERTEST")
    y = Identity(scope.with_op_name("y").with_device(request_), Const(scope, [1.0]))
    values, placement = placed(y, scope)
    assert placement["y"] == GPU0
    assert values.tolist() == [1.0]


def test_soft_placement_of_a_gpu_request_without_gpu_uses_the_cpu(scope, no_gpu):
    y = Identity(scope.with_op_name("y").with_device("/device:GPU:0"), Const(scope, [1.0]))
    assert placed(y, scope)[1]["y"] == CPU0


def test_soft_placement_when_the_requested_device_has_no_kernel(scope, exec_ops, sim_gpus):
    y = exec_ops.CpuOnly(scope.with_op_name("y").with_device("/gpu:1"), Const(scope, [1.0]))
    values, placement = placed(y, scope)
    assert placement["y"] == CPU0
    assert values.tolist() == [2.0]


def test_strict_placement_explains_each_rejected_device(scope, sim_gpus):
    y = Identity(scope.with_op_name("y").with_device("/device:GPU:5"), Const(scope, [1.0]))
    with pytest.raises(InvalidArgumentError, match="Cannot assign a device") as info:
        placed(y, scope, config=STRICT)
    message = str(info.value)
    assert "Cannot assign a device for operation 'y' (Identity) (requested '/device:GPU:5')" in (
        message
    )
    assert "GPU:0: does not match the request '/device:GPU:5' of 'y'" in message
    assert "GPU:1: does not match the request '/device:GPU:5' of 'y'" in message
    assert "CPU:0: does not match the request '/device:GPU:5' of 'y'" in message
    assert "no device matches '/device:GPU:5' (have ['GPU:0', 'GPU:1', 'CPU:0'])" in message
    assert "Set allow_soft_placement=True to fall back." in message
    assert info.value.node_name == "y" and info.value.op_type == "Identity"


def test_strict_gpu_request_without_gpu_says_why_there_is_no_gpu(scope, no_gpu):
    y = Identity(scope.with_op_name("y").with_device("gpu"), Const(scope, [1.0]))
    with pytest.raises(InvalidArgumentError, match=r"requested '/device:GPU:\*'") as info:
        placed(y, scope, config=STRICT)
    message = str(info.value)
    assert "CPU:0: does not match the request '/device:GPU:*' of 'y'" in message
    assert f"no device matches '/device:GPU:*' (have ['CPU:0']); no GPU: {no_gpu}" in message


def test_strict_request_for_a_device_without_kernel(scope, exec_ops, sim_gpus):
    y = exec_ops.CpuOnly(scope.with_op_name("y").with_device("/gpu:0"), Const(scope, [1.0]))
    with pytest.raises(InvalidArgumentError, match="requested '/device:GPU:0'") as info:
        placed(y, scope, config=STRICT)
    message = str(info.value)
    assert "GPU:0: No registered kernel for op ExecTestCpuOnly on device type GPU" in message
    assert "CPU:0: does not match the request '/device:GPU:0' of 'y'" in message


def test_strict_placement_accepts_satisfiable_requests(scope, sim_gpus):
    y = Identity(scope.with_op_name("y").with_device("/gpu:1"), Const(scope, [1.0]))
    assert placed(y, scope, config=STRICT)[1]["y"] == GPU1


# -- kernels per device --------------------------------------------------------------------------


def test_gpu_kernel_constrained_to_numeric_keeps_strings_on_cpu(scope, exec_ops, sim_gpus):
    s = exec_ops.NumericGpu(scope.with_op_name("s"), Const(scope.with_op_name("sc"), ["a", "b"]))
    f = exec_ops.NumericGpu(scope.with_op_name("f"), Const(scope.with_op_name("fc"), [1.0]))
    values, placement = placed([s, f], scope)
    assert placement["s"] == CPU0 and placement["sc"] == CPU0
    assert placement["f"] == GPU0 and placement["fc"] == GPU0
    assert values[0].tolist() == [b"a", b"b"]


def test_string_request_on_gpu_strict_names_the_dtype_constraint(scope, exec_ops, sim_gpus):
    s = exec_ops.NumericGpu(scope.with_op_name("s").with_device("/gpu:0"), Const(scope, ["a"]))
    with pytest.raises(InvalidArgumentError, match=r"GPU:0: No registered kernel .*T=string"):
        placed(s, scope, config=STRICT)


def test_missing_kernel_raises_not_found_naming_op_dtypes_device_and_kernels(
    scope, exec_ops, sim_gpus
):
    y = exec_ops.GpuOnly(scope.with_op_name("y"), Const(scope, ["a"]))
    with pytest.raises(NotFoundError, match="Cannot assign a device for operation 'y'") as info:
        placed(y, scope)
    message = str(info.value)
    assert (
        "CPU:0: No registered kernel for op ExecTestGpuOnly on device type CPU with [T=string]"
        in message
    )
    assert re.search(r"GPU:0: No registered kernel .* \(T=string not in \{.*float32", message)
    assert "Registered kernels: GPU (T in {" in message
    assert info.value.op_type == "ExecTestGpuOnly"


def test_op_without_any_kernel(scope, exec_ops, no_gpu):
    y = exec_ops.NoKernel(scope.with_op_name("y"), Const(scope, [1]))
    with pytest.raises(
        NotFoundError, match=r"ExecTestNoKernel on device type CPU with \[T=int32\]"
    ):
        placed(y, scope)
    with pytest.raises(NotFoundError, match=r"Registered kernels: none"):
        placed(y, scope)


@pytest.mark.parametrize("soft", [True, False])
def test_op_without_any_kernel_under_a_request_is_not_found(scope, exec_ops, no_gpu, soft):
    y = exec_ops.NoKernel(scope.with_op_name("y").with_device("/cpu:0"), Const(scope, [1]))
    config = SessionConfig(allow_soft_placement=soft)
    with pytest.raises(NotFoundError, match="Registered kernels: none") as info:
        placed(y, scope, config=config)
    # Soft placement cannot help when no device has a kernel: no advice to turn it on.
    assert "allow_soft_placement" not in str(info.value)


@pytest.mark.parametrize("label, expected", [("", 2.0), ("ten", 11.0), ("hundred", 101.0)])
def test_kernel_labels_select_labelled_kernels(scope, exec_ops, label, expected):
    y = exec_ops.Labeled(scope.with_kernel_label(label), Const(scope, [1.0]))
    assert placed(y, scope)[0].tolist() == [expected]


def test_unknown_kernel_label_is_not_found(scope, exec_ops, no_gpu):
    y = exec_ops.Labeled(scope.with_op_name("y").with_kernel_label("nope"), Const(scope, [1.0]))
    with pytest.raises(NotFoundError, match="node asks for 'nope'"):
        placed(y, scope)


def test_kernel_label_applies_to_every_node_of_the_scope_but_literals(scope, exec_ops, no_gpu):
    labelled = scope.with_kernel_label("ten")
    # The literal becomes a Const without the label (Const has no "ten" kernel).
    y = exec_ops.Labeled(labelled.with_op_name("y"), [1.0])
    assert placed(y, scope)[0].tolist() == [11.0]
    z = Identity(labelled.with_op_name("z"), y)
    with pytest.raises(NotFoundError, match="kernel has no label, node asks for 'ten'"):
        placed(z, scope)


def test_priority_picks_the_highest_matching_kernel(scope, exec_ops, no_gpu):
    y = exec_ops.Priority(scope, Const(scope, [1.0, 2.0]))
    assert placed(y, scope)[0].tolist() == [5.0, 5.0]


@pytest.mark.parametrize("dtype, expected", [(minigraph.float32, 7), (minigraph.int32, 3)])
def test_priority_only_among_kernels_that_match(scope, exec_ops, sim_gpus, dtype, expected):
    y = exec_ops.Priority(scope.with_op_name("y"), Const(scope, [1, 2], dtype=dtype))
    values, placement = placed(y, scope)
    assert placement["y"] == GPU0
    assert values.tolist() == [expected, expected]


# -- colocation ----------------------------------------------------------------------------------


def test_colocate_with_follows_the_target_device(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    a = Identity(scope.with_op_name("a").with_device("/gpu:1"), x)
    b = Identity(scope.with_op_name("b").colocate_with(a), x)
    c = Identity(scope.with_op_name("c").colocate_with(b), b)  # chains: union-find
    _, placement = placed([a, c], scope)
    assert placement["a"] == placement["b"] == placement["c"] == GPU1


def test_colocation_group_goes_where_every_member_has_a_kernel(scope, exec_ops, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    a = Identity(scope.with_op_name("a"), x)
    b = exec_ops.CpuOnly(scope.with_op_name("b").colocate_with(a), x)
    _, placement = placed([a, b], scope)
    assert placement["a"] == placement["b"] == CPU0


def test_colocation_without_target_in_the_plan(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    a = Identity(scope.with_op_name("a").with_device("/gpu:1"), x)
    b = Identity(scope.with_op_name("b").colocate_with(a), x)
    c = Identity(scope.with_op_name("c").colocate_with(a), x)
    # a is pruned away; b and c still share a device.
    _, placement = placed([b, c], scope)
    assert "a" not in placement
    assert placement["b"] == placement["c"]


def test_conflicting_colocation_strict_and_soft(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    a = Identity(scope.with_op_name("a").with_device("/gpu:0"), x)
    b = Identity(scope.with_op_name("b").colocate_with(a).with_device("/gpu:1"), x)
    with pytest.raises(
        InvalidArgumentError, match="Cannot assign a device for colocated operations 'a'"
    ) as info:
        placed([a, b], scope, config=STRICT)
    assert "'b' (Identity)" in str(info.value)
    # Soft placement keeps the group together on the first candidate.
    _, placement = placed([a, b], scope)
    assert placement["a"] == placement["b"]


def test_soft_placement_splits_a_group_no_device_can_hold(scope, exec_ops, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    a = exec_ops.GpuOnly(scope.with_op_name("a"), x)
    b = exec_ops.CpuOnly(scope.with_op_name("b").colocate_with(a), x)
    values, placement = placed([a, b], scope)
    assert placement["a"] == GPU0 and placement["b"] == CPU0
    assert [v.tolist() for v in values] == [[3.0], [2.0]]
    with pytest.raises(InvalidArgumentError, match="colocated operations"):
        placed([a, b], scope, config=STRICT)


def test_union_find():
    uf = _UnionFind()
    uf.union("a", "b")
    uf.union("c", "d")
    assert uf.find("a") == uf.find("b") != uf.find("c")
    uf.union("b", "d")
    assert len({uf.find(x) for x in "abcd"}) == 1
    assert uf.find("e") == "e"
    # Path compression: every node points at the root afterwards.
    uf2 = _UnionFind()
    for a, b in [("n3", "n4"), ("n2", "n3"), ("n1", "n2"), ("n0", "n1")]:
        uf2.union(a, b)
    root = uf2.find("n4")
    assert all(uf2.parent[f"n{i}"] == root for i in range(5))


# -- generators (Const) --------------------------------------------------------------------------


def test_const_goes_to_its_cpu_only_consumer(scope, exec_ops, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    y = exec_ops.CpuOnly(scope.with_op_name("y"), x)
    assert placed(y, scope)[1] == {"x": CPU0, "y": CPU0}


def test_const_goes_to_its_consumers_requested_device(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    y = Identity(scope.with_op_name("y").with_device("/gpu:1"), x)
    z = Identity(scope.with_op_name("z").with_device("/gpu:1"), x)
    assert placed([y, z], scope)[1] == {"x": GPU1, "y": GPU1, "z": GPU1}


def test_const_with_disagreeing_consumers_uses_the_default(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    y = Identity(scope.with_op_name("y").with_device("/cpu:0"), x)
    z = Identity(scope.with_op_name("z").with_device("/gpu:1"), x)
    assert placed([y, z], scope)[1]["x"] == GPU0


def test_string_const_stays_on_cpu(scope, sim_gpus):
    x = Const(scope.with_op_name("x"), ["a"])
    y = Identity(scope.with_op_name("y"), x)
    assert placed(y, scope)[1] == {"x": CPU0, "y": CPU0}


def test_requested_const_keeps_its_request(scope, sim_gpus):
    x = Const(scope.with_op_name("x").with_device("/gpu:1"), [1.0])
    y = Identity(scope.with_op_name("y").with_device("/cpu:0"), x)
    assert placed(y, scope)[1] == {"x": GPU1, "y": CPU0}


def test_const_feeding_a_host_memory_input_stays_on_host(scope, exec_ops, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    x = Placeholder(scope.with_op_name("x"), minigraph.float32, shape=[2])
    axis = Const(scope.with_op_name("axis"), 3)
    y = exec_ops.HostAxis(scope.with_op_name("y"), x, axis)
    values, placement = placed(y, scope, {x: np.array([1, 2], np.float32)})
    assert placement == {"axis": CPU0, "y": GPU0}
    assert values.tolist() == [4.0, 5.0]
    assert gpu0.copies_in == 1  # x only; the axis is read from the host
    device, _, seen_axis = exec_ops.HOST_AXIS_CALLS[-1]
    assert device == GPU0 and type(seen_axis) is np.ndarray and seen_axis == 3


# -- pruning -------------------------------------------------------------------------------------


def test_only_the_pruned_subgraph_is_placed(scope, exec_ops, sim_gpus):
    x = Const(scope.with_op_name("x"), [1.0])
    good = Identity(scope.with_op_name("good"), x)
    bad = exec_ops.NoKernel(scope.with_op_name("bad"), x)
    strict_bad = Identity(scope.with_op_name("strict_bad").with_device("/device:GPU:7"), x)
    values, placement = placed(good, scope, config=STRICT)
    assert values.tolist() == [1.0]
    assert set(placement) == {"x", "good"}
    with pytest.raises(NotFoundError, match="'bad'"):
        placed(bad, scope)
    with pytest.raises(InvalidArgumentError, match="'strict_bad'"):
        placed(strict_bad, scope, config=STRICT)


# -- the placer on its own -----------------------------------------------------------------------


def test_place_returns_devices_and_kernels(scope, exec_ops, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    x = Const(scope, [1.0])
    a = exec_ops.Labeled(scope.with_kernel_label("ten"), x)
    b = Identity(scope.with_device("/gpu:1"), x)
    ops = scope.graph.operations
    result = place(ops, sim_gpus)
    assert result.device[a.operation] is cpu
    assert result.device[b.operation] is gpu1
    assert result.kernel[a.operation].label == "ten"
    assert result.kernel[b.operation].device_type == "GPU"
    assert set(result.device) == set(ops)


# -- log_device_placement ------------------------------------------------------------------------


def test_log_device_placement_prints_tf_style_lines(scope, no_gpu, capsys):
    x = Const(scope.with_op_name("x"), [1.0])
    g = Identity(scope.with_op_name("g"), x)
    config = SessionConfig(log_device_placement=True)
    with Session(scope, config) as sess:
        sess.run(g)
        captured = capsys.readouterr()
        assert captured.err.splitlines() == [
            f"x: (Const): {CPU0}",
            f"g: (Identity): {CPU0}",
        ]
        assert captured.out == ""
        sess.run(g)  # the plan is cached: nothing printed again
        assert capsys.readouterr().err == ""


def test_log_device_placement_is_off_by_default(scope, capsys):
    g = Identity(scope.with_op_name("g"), Const(scope, [1.0]))
    with Session(scope) as sess:
        sess.run(g)
    assert capsys.readouterr().err == ""


# -- transfers -----------------------------------------------------------------------------------


def test_one_copy_per_tensor_and_destination_not_per_consumer(scope, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    x = Placeholder(scope.with_op_name("x"), minigraph.float32, shape=[4])
    on_cpu = Identity(scope.with_op_name("on_cpu").with_device("/cpu:0"), x)
    consumers = [Identity(scope.with_op_name(f"c{i}"), on_cpu) for i in range(3)]
    value = np.arange(4, dtype=np.float32)
    values, placement = placed(consumers, scope, {x: value})
    assert [placement[f"c{i}"] for i in range(3)] == [GPU0] * 3
    assert gpu0.copies_in == 1 and gpu0.bytes_in == 16
    assert gpu0.copies_out == 3  # each fetched GPU value comes back
    assert all(type(v) is np.ndarray and v.tolist() == [0, 1, 2, 3] for v in values)


def test_one_copy_per_destination_device(scope, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    c = Const(scope.with_op_name("c"), np.full(8, 0.5, np.float32))
    x = xops.CpuOnly(scope.with_op_name("x").with_device("/cpu:0"), c)
    ys = [xops.AddOne(scope.with_device(d), x) for d in ["/gpu:0", "/gpu:0", "/gpu:1", "/gpu:1"]]
    with Session(scope) as sess:
        values = sess.run(ys)
        assert [v.tolist() for v in values] == [[2.0] * 8] * 4
        assert (gpu0.copies_in, gpu1.copies_in) == (1, 1)
        assert (gpu0.bytes_in, gpu1.bytes_in) == (32, 32)
        # Every run copies again (values do not outlive a run), still once per destination.
        sess.run(ys)
        assert (gpu0.copies_in, gpu1.copies_in) == (2, 2)


def test_constants_are_folded_and_copied_once_per_plan(scope, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    x = Const(scope.with_op_name("x").with_device("/cpu:0"), np.ones(8, np.float32))
    ys = [xops.AddOne(scope.with_device(d), x) for d in ["/gpu:0", "/gpu:0", "/gpu:1", "/gpu:1"]]
    with Session(scope) as sess:
        for _ in range(3):
            values = sess.run(ys)
            assert [v.tolist() for v in values] == [[2.0] * 8] * 4
        # The Const's value is computed and copied to each GPU when the plan is compiled.
        assert (gpu0.copies_in, gpu1.copies_in) == (1, 1)
        assert (gpu0.bytes_in, gpu1.bytes_in) == (32, 32)


def test_gpu_to_gpu_copy(scope, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    x = Placeholder(scope, minigraph.float32, shape=[2])
    a = xops.AddOne(scope.with_device("/gpu:0"), x)
    b = xops.AddOne(scope.with_device("/gpu:1"), a)
    values = placed(b, scope, {x: np.zeros(2, np.float32)})[0]
    assert values.tolist() == [2.0, 2.0]
    assert (gpu0.copies_in, gpu0.copies_out) == (1, 1)  # fed in; sent to GPU:1
    assert (gpu1.copies_in, gpu1.copies_out) == (1, 1)  # received; fetched back


def test_const_on_gpu_is_copied_once_per_plan(scope, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    x = Const(scope, np.ones(3, np.float32))
    y = xops.AddOne(scope, x)
    with Session(scope) as sess:
        for _ in range(3):
            assert sess.run(y).tolist() == [2.0, 2.0, 2.0]
    assert gpu0.copies_in == 1


def test_host_memory_input_is_fed_from_the_host_copy(scope, exec_ops, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    x = Placeholder(scope, minigraph.float32, shape=[3])
    axis = Placeholder(scope, minigraph.int32, shape=[])
    y = exec_ops.HostAxis(scope.with_op_name("y"), x, axis)
    x_value = np.arange(3, dtype=np.float32)
    axis_value = np.array(2, np.int32)
    values, placement = placed(y, scope, {x: x_value, axis: axis_value})
    assert placement["y"] == GPU0
    assert values.tolist() == [2.0, 3.0, 4.0]
    device, seen_x, seen_axis = exec_ops.HOST_AXIS_CALLS[-1]
    assert device == GPU0
    # The host array itself, not a device copy: read-only, as user kernels see fed arrays.
    assert seen_axis.base is axis_value and not seen_axis.flags.writeable
    assert seen_x is not x_value  # x was copied onto the GPU
    assert gpu0.copies_in == 1 and gpu0.bytes_in == x_value.nbytes


def test_host_memory_input_computed_on_gpu_is_copied_to_host(scope, exec_ops, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    x = Placeholder(scope, minigraph.float32, shape=[3])
    axis = xops.AddOne(scope.with_device("/gpu:0"), Placeholder(scope, minigraph.int32))
    y = exec_ops.HostAxis(scope.with_op_name("y"), x, axis)
    values = placed(y, scope, {x: np.zeros(3, np.float32), "Placeholder_1": 1})[0]
    assert values.tolist() == [2.0, 2.0, 2.0]
    # axis: computed on GPU:0, copied out to the host for the host-memory input.
    assert gpu0.copies_out == 2  # the axis, and y's fetched value
    assert type(exec_ops.HOST_AXIS_CALLS[-1][2]) is np.ndarray


def test_fed_value_is_copied_where_its_consumers_are(scope, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    x = Placeholder(scope, minigraph.float32, shape=[2])
    a = Identity(scope.with_device("/gpu:1"), x)
    b = Identity(scope.with_device("/gpu:1"), x)
    c = Identity(scope.with_device("/cpu:0"), x)
    with Session(scope) as sess:
        sess.run([a, b], {x: np.zeros(2, np.float32)})
        assert (gpu0.copies_in, gpu1.copies_in) == (0, 1)
        sess.run([a, c], {x: np.zeros(2, np.float32)})
        assert (gpu0.copies_in, gpu1.copies_in) == (0, 2)


def test_fetching_a_gpu_value_twice_copies_it_once(scope, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    y = xops.AddOne(scope, Const(scope, [1.0]))
    a, b = placed([y, y], scope)[0]
    assert a.tolist() == b.tolist() == [2.0]
    assert gpu0.copies_out == 1


def test_a_colocated_variable_keeps_its_device_when_its_anchor_is_not_run(sim_gpus):
    # TF places the whole graph once; minigraph places each plan. A variable colocated with a
    # node that asks for GPU:1 must live on GPU:1 in every run, also in a run that prunes that
    # node away (found by the optimizer slots: they colocate with their variable).
    import ops  # noqa: F401 - the variable ops

    root = minigraph.Scope.new_root_scope()
    a = minigraph.Variable(root.with_device("/gpu:1"), np.ones(3, np.float32), name="a")
    b = minigraph.Variable(root.colocate_with(a.handle.op), np.zeros(3, np.float32), name="b")
    init = minigraph.global_variables_initializer(root)
    metadata = minigraph.RunMetadata()
    with minigraph.Session(root) as sess:
        sess.run(init)
        np.testing.assert_array_equal(sess.run(b.read_value(), run_metadata=metadata), [0, 0, 0])
        placed = {name: device for name, device in metadata.placement.items()}
    assert any("GPU:1" in str(d) for n, d in placed.items() if n.startswith("b")), placed
