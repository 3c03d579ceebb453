"""Placement over several tasks and partitioning by task, without a cluster: the client's CPU
and two worker tasks' devices (`RemoteDevice`s), and partitions run one after another in this
process, each in a Session over its own graph, as the cluster runs them."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from _dist_graphs import build, recipes, reference
from hypothesis import HealthCheck, given, settings

import minigraph as mg
from minigraph.devices import CpuDevice
from minigraph.distributed.devices import RemoteDevice
from minigraph.distributed.partition import partition, prune
from minigraph.placer import LOCAL_TASK, place
from ops import GatherV2, gather

CLIENT = "/job:localhost/replica:0/task:0/device:CPU:0"
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"
W1_GPU = "/job:worker/replica:0/task:1/device:GPU:0"


def cluster_devices(worker1_gpu: bool = False) -> list[mg.Device]:
    devices = [
        CpuDevice(0),
        RemoteDevice("worker", 0, "CPU", 0),
        RemoteDevice("worker", 1, "CPU", 0),
    ]
    if worker1_gpu:
        devices.append(RemoteDevice("worker", 1, "GPU", 0))
    return devices


def local_spec(device: mg.Device) -> mg.DeviceSpec:
    return device.local_spec if isinstance(device, RemoteDevice) else device.spec


def placement_of(fetches, feeds=None, soft=True, devices=None):
    fetches = [f.output if isinstance(f, mg.OpBuilder) else f for f in fetches]
    ops = prune(set(feeds or ()), fetches)
    placed = place(ops, devices or cluster_devices(), allow_soft_placement=soft)
    return {op.name: placed.device[op].name for op in ops}, ops, placed


def partitions_of(fetches, feeds=None, devices=None):
    fetches = [f.output if isinstance(f, mg.OpBuilder) else f for f in fetches]
    _, ops, placed = placement_of(fetches, feeds, devices=devices)
    return partition(ops, placed.device, set(feeds or ()), fetches, LOCAL_TASK, local_spec)


def run_partitions(parts, fetches, feeds):
    """Runs the partitions in order in this process; returns the fetched values."""
    values = dict(feeds)
    for part in parts:
        with mg.Session(part.graph, mg.SessionConfig(allow_soft_placement=False)) as session:
            got = session.run(
                part.graph_outputs + part.graph_targets,
                {g: values[t] for t, g in zip(part.inputs, part.graph_inputs)},
            )
        values.update(zip(part.outputs, got))
    return [values[f] for f in fetches]


# -- placement over tasks --------------------------------------------------------------------------


def test_nodes_without_a_task_request_go_to_the_client():
    scope = mg.Scope.new_root_scope()
    g = gather(scope.with_op_name("g"), [1.0, 2.0], [1])
    gpu = gather(scope.with_device("/device:GPU:0").with_op_name("gpu"), g, [0])
    placement, _, _ = placement_of([gpu], devices=cluster_devices(worker1_gpu=True))
    # '/device:GPU:0' means the client's GPU (soft placement: its CPU), not worker 1's GPU.
    assert set(placement.values()) == {CLIENT}


def test_explicit_partial_and_task_only_requests():
    scope = mg.Scope.new_root_scope()
    a = gather(scope.with_device("/job:worker/task:1").with_op_name("a"), [1.0, 2.0], [1])
    b = gather(
        scope.with_device("/job:worker/replica:0/task:0/device:CPU:0").with_op_name("b"), a, [0]
    )
    c = gather(scope.with_device("/task:1/device:CPU:0").with_op_name("c"), b, [0])
    d = gather(scope.with_device("/job:worker").with_op_name("d"), c, [0])
    placement, _, _ = placement_of([d])
    assert (placement["a"], placement["b"], placement["c"], placement["d"]) == (W1, W0, W1, W0)


def test_soft_placement_keeps_the_requested_task_when_its_device_is_missing():
    scope = mg.Scope.new_root_scope()
    g = gather(scope.with_device("/job:worker/task:0/device:GPU:0").with_op_name("g"), [1.0], [0])
    assert placement_of([g])[0]["g"] == W0  # TF's relaxation: task kept, device type dropped


def test_soft_placement_of_a_task_the_cluster_lacks_falls_back_to_the_client():
    scope = mg.Scope.new_root_scope()
    g = gather(scope.with_device("/job:worker/task:5").with_op_name("g"), [1.0], [0])
    assert placement_of([g])[0]["g"] == CLIENT


def test_strict_placement_of_a_missing_task_lists_the_cluster_devices():
    scope = mg.Scope.new_root_scope()
    g = gather(scope.with_device("/job:worker/task:5").with_op_name("g"), [1.0], [0])
    with pytest.raises(mg.InvalidArgumentError) as info:
        placement_of([g], soft=False)
    message = str(info.value)
    assert (
        "Cannot assign a device for operation 'g' (GatherV2) (requested '/job:worker/task:5')"
        in message
    )
    assert f"no device matches '/job:worker/task:5' (have ['{CLIENT}', '{W0}', '{W1}'])" in message


def test_colocation_follows_a_worker_node():
    scope = mg.Scope.new_root_scope()
    a = gather(scope.with_device("/job:worker/task:1").with_op_name("a"), [1.0, 2.0], [1])
    b = gather(scope.colocate_with(a).with_op_name("b"), a, [0])
    assert placement_of([b])[0]["b"] == W1


def test_constants_go_to_their_worker_consumer_and_host_memory_inputs_to_its_host():
    scope = mg.Scope.new_root_scope()
    table = mg.Const(scope.with_op_name("table"), np.ones((4, 2), np.float32))
    g = GatherV2(scope.with_device(W1_GPU).with_op_name("g"), table, [1, 0], 0)
    placement, _, _ = placement_of([g], devices=cluster_devices(worker1_gpu=True))
    assert placement["g"] == W1_GPU
    assert placement["table"] == W1_GPU
    # GatherV2 reads `axis` from host memory: the axis Const goes to worker 1's CPU, not the
    # client's (which would ship it on every run).
    axis = next(
        op
        for op in g.operation.inputs
        if op.op.name not in ("table",) and op.dtype == mg.int32 and op.shape.rank == 0
    )
    assert placement[axis.op.name] == W1


# -- partitions ----------------------------------------------------------------------------------


def test_a_graph_on_the_client_is_one_partition():
    scope = mg.Scope.new_root_scope()
    g = gather(scope, gather(scope, [1.0, 2.0], [1, 0]), [1])
    (part,) = partitions_of([g])
    assert part.is_client and part.inputs == [] and part.outputs == [g.output]


def test_client_worker_client_splits_the_client_in_two():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[None])
    ids = gather(scope.with_op_name("ids"), x, [1, 0])
    rows = gather(scope.with_device("/job:worker/task:0").with_op_name("rows"), [[1.0], [2.0]], ids)
    out = gather(scope.with_op_name("out"), rows, [0])
    parts = partitions_of([out], {x.output: None})
    assert [
        (p.task.to_string(), [op.name for op in p.ops if op.type != "Const"]) for p in parts
    ] == [
        ("/job:localhost/replica:0/task:0", ["ids"]),
        ("/job:worker/replica:0/task:0", ["rows"]),
        ("/job:localhost/replica:0/task:0", ["out"]),
    ]
    assert parts[0].inputs == [x.output] and parts[0].outputs == [ids.output]
    assert parts[1].inputs == [ids.output] and parts[1].outputs == [rows.output]
    assert parts[2].inputs == [rows.output] and parts[2].outputs == [out.output]
    got = run_partitions(parts, [out.output], {x.output: np.array([1, 0], np.int32)})
    assert got[0].tolist() == [[1.0]]


def test_groups_of_a_task_merge_when_that_makes_no_cycle():
    # Worker 0: `a` feeds the client's `c`; the client's `d` feeds worker 0's `b`. No path from
    # `a` to `b`, so one worker partition holds both.
    scope = mg.Scope.new_root_scope()
    w0 = scope.with_device("/job:worker/task:0")
    a = gather(w0.with_op_name("a"), [1.0, 2.0], [1])
    c = gather(scope.with_op_name("c"), a, [0])
    d = gather(scope.with_op_name("d"), [3.0, 4.0], [0])
    b = gather(w0.with_op_name("b"), d, [0])
    parts = partitions_of([c, b])
    tasks = [p.task.to_string() for p in parts]
    assert tasks.count("/job:worker/replica:0/task:0") == 1
    assert run_partitions(parts, [c.output, b.output], {})[1].tolist() == [3.0]


def test_a_path_through_another_task_keeps_groups_apart():
    # a (w0) -> c (client) -> b (w0): one partition for a and b would wait for itself.
    scope = mg.Scope.new_root_scope()
    w0 = scope.with_device("/job:worker/task:0")
    a = gather(w0.with_op_name("a"), [1.0, 2.0], [1])
    c = gather(scope.with_op_name("c"), a, [0])
    b = gather(w0.with_op_name("b"), c, [0])
    parts = partitions_of([b])
    assert [p.task.task for p in parts] == [0, 0, 0] and [p.is_client for p in parts] == [
        False,
        True,
        False,
    ]
    assert run_partitions(parts, [b.output], {})[0].tolist() == [2.0]


def test_shared_constants_are_copied_into_each_partition_not_cut():
    scope = mg.Scope.new_root_scope()
    table = mg.Const(scope.with_op_name("table"), np.arange(6, dtype=np.float32).reshape(3, 2))
    a = gather(scope.with_device("/job:worker/task:0").with_op_name("a"), table, [2])
    b = gather(scope.with_device("/job:worker/task:1").with_op_name("b"), table, [0])
    parts = partitions_of([a, b])
    assert all(p.inputs == [] for p in parts)
    assert all("table" in p.graph for p in parts)
    got = run_partitions(parts, [a.output, b.output], {})
    assert got[0].tolist() == [[4.0, 5.0]] and got[1].tolist() == [[0.0, 1.0]]


def test_requested_constants_are_cut_like_any_node():
    scope = mg.Scope.new_root_scope()
    table = mg.Const(scope.with_device("/job:worker/task:0").with_op_name("table"), [1.0, 2.0])
    g = gather(scope.with_device("/job:worker/task:1").with_op_name("g"), table, [1])
    parts = partitions_of([g])
    assert [p.outputs for p in parts][0] == [table.output]
    assert parts[1].inputs == [table.output]


def test_control_edges_between_partitions_order_them():
    scope = mg.Scope.new_root_scope()
    a = gather(scope.with_device("/job:worker/task:0").with_op_name("a"), [1.0, 2.0], [1])
    b = gather(scope.with_control_dependencies(a).with_op_name("b"), [3.0], [0])
    parts = partitions_of([b])
    assert [p.is_client for p in parts] == [False, True]
    assert parts[0].targets == [a.operation] and parts[0].outputs == []
    assert parts[1].after == [0]


def test_recv_placeholders_never_clash_with_user_names():
    scope = mg.Scope.new_root_scope()
    a = gather(scope.with_device("/job:worker/task:0").with_op_name("mg.recv.0"), [1.0, 2.0], [1])
    b = gather(scope.with_op_name("b"), a, [0])
    parts = partitions_of([b])
    assert parts[1].graph_inputs[0].op.name == "mg.recv.1"
    assert run_partitions(parts, [b.output], {})[0].tolist() == [2.0]


def test_partition_graphs_keep_names_attrs_sources_and_local_devices():
    scope = mg.Scope.new_root_scope()
    g = GatherV2(scope.with_device(W1).with_op_name("g"), [[1.0, 2.0]], [[0]], 1, batch_dims=1)
    (part,) = partitions_of([g])
    copy = part.graph.get_operation("g")
    assert copy.attrs == g.operation.attrs and copy.source == g.operation.source
    assert copy.device == "/device:CPU:0"  # the name the worker's own session uses


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recipes())
def test_random_gather_graphs_partition_into_a_dag_that_computes_the_same(recipe):
    scope, fetches, feeds = build(recipe)
    parts = partitions_of(fetches, feeds)
    produced = {t: p.index for p in parts for t in p.outputs}
    for part in parts:
        assert all(produced[t] < part.index for t in part.inputs if t not in feeds)
        assert all(a < part.index for a in part.after)
        assert len({op.task for op in [part]}) == 1
    members = [op for p in parts for op in p.ops]
    assert len(members) == len(set(members))
    got = run_partitions(parts, fetches, feeds)
    for value, expected in zip(got, reference(recipe)):
        np.testing.assert_array_equal(value, expected)


# -- fewer outputs per worker partition: handles copied, nodes moved to their only user -----------


def _late_user_graph(stateful=False, from_w1=False, client_reads_s=False):
    """Worker 0 computes `a` (read by the client's `c`) and `s`, read by worker 0's `d`, which
    also reads `c`: `d` is in a later worker-0 partition than `a` and `s`."""
    scope = mg.Scope.new_root_scope()
    w0 = scope.with_device("/job:worker/task:0")
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[2])
    src = x
    if from_w1:
        src = gather(scope.with_device("/job:worker/task:1").with_op_name("x1"), x, [0, 1])
    a = gather(w0.with_op_name("a"), [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], src)
    if stateful:
        s = mg.Variable(w0, np.array([1, 0], np.int32), name="v").read_value()
    else:
        s = gather(w0.with_op_name("s"), src, [1, 0]).output
    c = gather(scope.with_op_name("c"), a, s if client_reads_s else [0, 1])
    d = gather(w0.with_op_name("d"), c, s)
    return x, a, s, d


def _names_of(part):
    return [op.name for op in part.ops if op.type != "Const"]


def test_a_stateless_node_moves_to_its_only_user_a_later_partition_of_its_task():
    x, a, s, d = _late_user_graph()
    parts = partitions_of([d], {x.output: None})
    assert [(p.is_client, _names_of(p)) for p in parts] == [
        (False, ["a"]),
        (True, ["c"]),
        (False, ["s", "d"]),
    ]
    assert parts[0].outputs == [a.output]  # one output: no `pick` task per run
    assert parts[2].inputs == [x.output, parts[1].outputs[0]]  # the fed ids, not `s`
    got = run_partitions(parts, [d.output], {x.output: np.array([1, 0], np.int32)})
    assert got[0].tolist() == [[3.0, 4.0], [1.0, 2.0]]


def test_a_node_stays_when_moving_it_would_ship_another_workers_tensor_again():
    # `s` reads worker 1's `x1`, which `a` reads too: moved, worker 0 would receive it twice.
    x, a, s, d = _late_user_graph(from_w1=True)
    parts = partitions_of([d], {x.output: None})
    first = next(p for p in parts if a.operation in p.ops)
    last = next(p for p in parts if d.operation in p.ops)
    assert _names_of(first) == ["a", "s"] and s in first.outputs
    assert _names_of(last) == ["d"]
    got = run_partitions(parts, [d.output], {x.output: np.array([1, 0], np.int32)})
    assert got[0].tolist() == [[3.0, 4.0], [1.0, 2.0]]


def test_stateful_nodes_and_nodes_with_users_in_two_partitions_stay():
    x, a, s, d = _late_user_graph(stateful=True)
    parts = partitions_of([d], {x.output: None})
    first = next(p for p in parts if a.operation in p.ops)
    assert s.op in first.ops and s in first.outputs  # a read runs where the graph puts it
    x, a, s, d = _late_user_graph(client_reads_s=True)  # `s` read by the client and `d`
    parts = partitions_of([d], {x.output: None})
    assert [(p.is_client, _names_of(p)) for p in parts] == [
        (False, ["a", "s"]),
        (True, ["c"]),
        (False, ["d"]),
    ]
    got = run_partitions(parts, [d.output], {x.output: np.array([1, 0], np.int32)})
    assert got[0].tolist() == [[3.0, 4.0], [1.0, 2.0]]


def _ps_step_partitions():
    """The partitions of one step of an embedding classifier: a table in two Variables on
    /job:ps/task:0 and :1, the rest on the client, Adagrad (the benchmark's ps model)."""
    from minigraph.train import AdagradOptimizer
    from ops import MatMul, Mean, Reshape, SparseSoftmaxCrossEntropyWithLogits, embedding_lookup

    root = mg.Scope.new_root_scope()
    shards = [
        mg.Variable(root.with_device(f"/job:ps/task:{k}"), np.ones((5, 4), np.float32),
                    name=f"emb{k}")
        for k in range(2)
    ]  # fmt: skip
    dense = mg.Variable(root, np.ones((4, 3), np.float32), name="dense")
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int32, shape=[6, 2])
    labels = mg.Placeholder(root.with_op_name("labels"), mg.int32, shape=[6])
    rows = embedding_lookup(root, shards, Reshape(root, ids, [-1]))
    mean = Mean(root, Reshape(root, rows, [6, 2, 4]), [1])
    xent = SparseSoftmaxCrossEntropyWithLogits(root, MatMul(root, mean, dense), labels)
    loss = Mean(root, xent.loss, [0]).output
    train = AdagradOptimizer(0.1).minimize(loss)
    devices = [CpuDevice(0), RemoteDevice("ps", 0, "CPU", 0), RemoteDevice("ps", 1, "CPU", 0)]
    feeds = {ids.output: None, labels.output: None}
    return partitions_of([loss, train], feeds, devices=devices), shards


def test_a_ps_step_gathers_with_one_output_per_ps_and_cuts_no_handle():
    parts, shards = _ps_step_partitions()
    workers = [p for p in parts if not p.is_client]
    # Per ps task: the gather (its rows, one output) and the update (no output).
    assert [(p.task.task, len(p.outputs)) for p in workers] == [(0, 1), (1, 1), (0, 0), (1, 0)]
    for p in workers[:2]:
        assert [t.op.type for t in p.outputs] == ["ResourceGather"]
    # Handles never cross a partition boundary: each partition makes its own, on the device
    # the variable lives on (the worker's own name for it).
    assert not [t for p in parts for t in p.inputs if t.dtype == mg.resource]
    for p, shard in zip(workers[2:], shards):
        handle = p.graph.get_operation(shard.handle.op.name)
        assert handle.type == "VarHandleOp" and handle.device == "/device:CPU:0"
        assert "ResourceSparseApplyAdagrad" in [op.type for op in p.ops]
    assert not [op for p in parts for op in p.ops if op.type == "VarHandleOp"]


def test_strict_request_for_a_worker_gpu_does_not_blame_the_client_gpu(no_gpu):
    scope = mg.Scope.new_root_scope()
    g = gather(scope.with_device("/job:worker/task:0/device:GPU:0").with_op_name("g"), [1.0], [0])
    with pytest.raises(mg.InvalidArgumentError) as info:
        placement_of([g], soft=False)
    message = str(info.value)
    assert "no device matches '/job:worker/task:0/device:GPU:0'" in message
    assert no_gpu not in message  # why the client has no GPU says nothing about worker 0
    local = gather(scope.with_device("/device:GPU:0").with_op_name("local"), [1.0], [0])
    with pytest.raises(mg.InvalidArgumentError, match="no GPU: cupy cannot be imported"):
        placement_of([local], soft=False)


def test_a_target_without_the_distributed_extra_is_unimplemented(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    with pytest.raises(mg.UnimplementedError, match=r"pip install 'minigraph\[distributed\]'"):
        mg.Session(mg.Scope.new_root_scope(), target="tcp://127.0.0.1:1")
    with pytest.raises(mg.UnimplementedError, match="needs Dask's `distributed` package"):
        mg.list_devices(target="tcp://127.0.0.1:1")
