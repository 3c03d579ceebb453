"""Partitioning a placed graph by task, as TF's `graph_partition.cc` does.

Every node of the pruned graph has a device, and so a task (`/job:worker/replica:0/task:1`, or
the client's `/job:localhost/replica:0/task:0`). A `Partition` is a set of nodes of one task
that runs as one unit: a Dask task on a worker, or a local session run in the client. Edges
between partitions are cut: the producer's partition returns the tensor, the consumer's receives
it as a placeholder (TF's Send/Recv pair); a control edge between partitions orders the two
partitions.

A task's nodes are not always one partition: `client -> worker -> client` (ids split on the
client, rows gathered on a worker, stitched on the client) would make the client partition wait
for itself. Nodes are first grouped by (task, stage), where a node's stage is the largest
number of task changes on any path into it, so every cut edge goes to a later stage and the
partitions form a DAG; then groups of one task are merged wherever that keeps the DAG acyclic.

Constants without a device request or colocation are copied into every partition that reads
them rather than cut: a constant is shipped to its worker once, at registration, never per run.
So is a VarHandleOp whose users are all on its task: it only names its variable, so each
partition of the task that uses the variable makes the same handle itself.

Each output of a worker partition consumed elsewhere costs a Dask task per run (a `pick` of the
partition's result on its worker), and the consumer waits for the scheduler to schedule it.
So stateless nodes of a worker partition whose only users are one later partition of the same
task move into that partition when everything they read is at hand there (a copied node, a
fed or client-computed value, a tensor that partition receives anyway, another node moving
with them): nothing new crosses the wire, and the earlier partition has fewer outputs. In a
parameter-server step the gradient's index bookkeeping (Unique, shapes of the ids) then runs
with the update, and each gather partition returns its rows alone.

Each partition is also built as a graph of its own (`Partition.graph`): its nodes with their
names, attrs, kernel labels, sources and local devices, plus one Placeholder per received
tensor. That graph is what the task runs: the client runs it in a local Session, a worker
receives it as a GraphDef.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from minigraph.device_spec import DeviceSpec
from minigraph.devices import Device
from minigraph.errors import InternalError
from minigraph.graph import Graph, Operation, Output
from minigraph.placer import same_task
from minigraph.plan import prune
from minigraph.registry import get_op_def

# `prune` is the local plan's pass (minigraph.plan.prune), named here too: a distributed
# signature is pruned by the same rule before it is partitioned.
__all__ = ["Partition", "partition", "prune"]


class Partition:
    """Nodes of one task that run as one unit, and the graph that runs them there.

    Attributes:
        index: position in `partition()`'s result, a topological order of the partitions.
        task: job, replica and task (a partial DeviceSpec).
        is_client: whether the task is the client's (the session's own process).
        ops: its nodes (of the user's graph), in topological order.
        inputs: tensors of the user's graph it receives (fed, or from other partitions).
        outputs: tensors it produces for other partitions or for the fetches.
        targets: nodes it runs for their effect (fetched operations, sources of control edges
            to other partitions).
        after: indices of partitions that must finish before it starts (control edges).
        graph: the partition as a graph of its own.
        graph_inputs / graph_outputs / graph_targets: `inputs`, `outputs` and `targets` in
            `graph` (the inputs are its Placeholders).
    """

    def __init__(self, index: int, task: DeviceSpec, is_client: bool, ops: list[Operation]):
        self.index = index
        self.task = task
        self.is_client = is_client
        self.ops = ops
        self.inputs: list[Output] = []
        self.outputs: list[Output] = []
        self.targets: list[Operation] = []
        self.after: list[int] = []
        self.graph = Graph()
        self.graph_inputs: list[Output] = []
        self.graph_outputs: list[Output] = []
        self.graph_targets: list[Operation] = []

    def __repr__(self) -> str:
        return (
            f"<Partition {self.index} on {self.task.to_string()}: {len(self.ops)} nodes, "
            f"{len(self.inputs)} in, {len(self.outputs)} out>"
        )


def _task(device: Device) -> DeviceSpec:
    spec = device.spec
    return DeviceSpec(spec.job, spec.replica, spec.task)


def partition(
    ops: Sequence[Operation],
    devices: Mapping[Operation, Device],
    fed: Collection[Output],
    targets: Iterable[Output | Operation],
    client_task: DeviceSpec,
    local_spec: Any,
) -> list[Partition]:
    """Splits placed nodes into partitions, in an order in which they can run.

    Args:
        ops: the pruned graph, in topological order.
        devices: each node's device.
        fed: the fed tensors (they come from the client; their producers are cut off).
        targets: the fetched tensors and operations.
        client_task: the task of the client process.
        local_spec: `device -> DeviceSpec`, the name the device's own process uses for it;
            the partition graph's nodes request it.
    """
    targets = list(targets)
    fetched_ops = {t if isinstance(t, Operation) else t.op for t in targets}
    group_size: dict[str, int] = {}
    for op in ops:
        group_size[op.colocation_group] = group_size.get(op.colocation_group, 0) + 1
    copied = {
        op
        for op in ops
        if op.type == "Const"
        and op.requested_device is None
        and not op.control_inputs
        and group_size[op.colocation_group] == 1
        and op not in fetched_ops
    }
    task = {op: _task(devices[op]) for op in ops}
    copied |= _own_handles(ops, task, fetched_ops)
    members = [op for op in ops if op not in copied]

    def dependencies(op: Operation) -> Iterable[Operation]:
        for inp in op.inputs:
            if inp not in fed and inp.op not in copied:
                yield inp.op
        for dep in op.control_inputs:
            if dep in task and dep not in copied:  # not a fed placeholder, not a Const
                yield dep

    # Stages: a cut edge always goes to a later stage, so (task, stage) groups form a DAG.
    stage: dict[Operation, int] = {}
    for op in members:
        stage[op] = max((stage[u] + (task[u] != task[op]) for u in dependencies(op)), default=0)
    group_of = {op: (task[op], stage[op]) for op in members}
    merged = _merge_groups(members, group_of, dependencies, client_task)

    # Partitions in a topological order of the merged groups.
    by_group: dict[Any, list[Operation]] = {}
    for op in members:
        by_group.setdefault(merged[group_of[op]], []).append(op)
    order = _topological_groups(by_group, members, merged, group_of, dependencies)
    groups = [(key[0], same_task(key[0], client_task), by_group[key]) for key in order]
    groups = _sink_to_users(groups, ops, fed, copied, targets)
    parts: list[Partition] = []
    part_of: dict[Operation, Partition] = {}
    for spec, is_client, group_ops in groups:
        part = Partition(len(parts), spec, is_client, group_ops)
        parts.append(part)
        for op in part.ops:
            part_of[op] = part

    _wire(parts, part_of, fed, copied, targets)
    names = _NameSource(ops[0].graph if ops else None)
    for part in parts:
        _build_graph(part, part_of, fed, devices, local_spec, names)
    return parts


def _own_handles(
    ops: Sequence[Operation], task: Mapping[Operation, DeviceSpec], fetched: set[Operation]
) -> set[Operation]:
    """The VarHandleOps copied into each partition that uses them: those without inputs,
    control edges or users on another task, not fetched. (Their kernel makes the handle from
    the device, container and shared name, or the node's name: every copy makes the same.)"""
    users: dict[Operation, list[Operation]] = {}
    controls: set[Operation] = set()
    for op in ops:
        for inp in op.inputs:
            users.setdefault(inp.op, []).append(op)
        controls.update(op.control_inputs)
    return {
        op
        for op in ops
        if op.type == "VarHandleOp"
        and not op.inputs
        and not op.control_inputs
        and op not in controls
        and op not in fetched
        and all(task[u] == task[op] for u in users.get(op, ()))
    }


def _sink_to_users(
    groups: list[tuple[DeviceSpec, bool, list[Operation]]],
    ops: Sequence[Operation],
    fed: Collection[Output],
    copied: set[Operation],
    targets: list[Output | Operation],
) -> list[tuple[DeviceSpec, bool, list[Operation]]]:
    """Moves stateless nodes of a worker group whose users are all in one later group of the
    same task into that group, where all they read is at hand (see the module docstring);
    drops the groups left empty. `groups`: (task, is_client, nodes), in topological order."""
    position = {op: i for i, op in enumerate(ops)}
    group_of: dict[Operation, int] = {}
    for g, (_, _, group_ops) in enumerate(groups):
        for op in group_ops:
            group_of[op] = g
    users: dict[Operation, set[Operation]] = {}
    controls: set[Operation] = set()
    for op in ops:
        for inp in op.inputs:
            if inp not in fed:
                users.setdefault(inp.op, set()).add(op)
        controls.update(op.control_inputs)
    pinned = controls | {t if isinstance(t, Operation) else t.op for t in targets}
    members = [list(group_ops) for _, _, group_ops in groups]

    def receives(g: int) -> set[Output]:
        """What group `g`'s nodes read from outside it (fed, or from other groups)."""
        return {
            inp
            for op in members[g]
            for inp in op.inputs
            if inp in fed or (inp.op not in copied and group_of[inp.op] != g)
        }

    received = [receives(g) for g in range(len(groups))]

    def movable(op: Operation, g: int, moving: Mapping[Operation, int]) -> int | None:
        """The group `op` (of worker group `g`) moves to, if its users (where they go)
        allow it."""
        if op.op_def.is_stateful or op in pinned or op.control_inputs:
            return None
        if any(out in fed for out in op.outputs):
            return None
        dest = {moving.get(u, group_of[u]) for u in users.get(op, ())}
        if len(dest) != 1:
            return None
        (h,) = dest
        if h <= g or groups[h][0] != groups[g][0]:
            return None
        return h

    # Later groups first, their nodes last first: a node's users have settled before it.
    for g in range(len(groups) - 1, -1, -1):
        spec, is_client, group_ops = groups[g]
        if is_client:
            continue
        moving: dict[Operation, int] = {}
        for op in sorted(group_ops, key=position.__getitem__, reverse=True):
            h = movable(op, g, moving)
            if h is not None:
                moving[op] = h
        # Keep only the nodes whose inputs are at hand in their new group; dropping one keeps
        # its producers here too (they then have a user here).
        changed = True
        while changed:
            changed = False
            for op, h in list(moving.items()):
                ok = all(
                    inp in fed
                    or inp.op in copied
                    or moving.get(inp.op) == h
                    or (group_of[inp.op] != g and groups[group_of[inp.op]][1])
                    or inp in received[h]
                    for inp in op.inputs
                ) and all(moving.get(u) == h for u in users.get(op, ()) if group_of[u] == g)
                if not ok:
                    del moving[op]
                    changed = True
        if not moving:
            continue
        for op, h in moving.items():
            group_of[op] = h
            members[h].append(op)
        members[g] = [op for op in members[g] if op not in moving]
        for h in {g, *moving.values()}:  # what `g` and its nodes' new groups receive now
            received[h] = receives(h)
    result: list[list[Operation]] = [[] for _ in groups]
    for op in ops:
        if op in group_of:
            result[group_of[op]].append(op)
    return [(spec, is_client, result[g]) for g, (spec, is_client, _) in enumerate(groups)
            if result[g]]  # fmt: skip


def _merge_groups(members, group_of, dependencies, client_task) -> dict[Any, Any]:
    """Merges groups of one task while the quotient graph stays acyclic; group -> its group.

    Workers' groups merge first: each worker partition costs a Dask task per run, a client
    partition only a local call.
    """
    import networkx as nx  # noqa: PLC0415 - imported on use: it is slow to import

    quotient = nx.DiGraph()
    quotient.add_nodes_from(set(group_of.values()))
    for op in members:
        for u in dependencies(op):
            if group_of[u] != group_of[op]:
                quotient.add_edge(group_of[u], group_of[op])
    merged = {g: g for g in quotient.nodes}
    by_task: dict[DeviceSpec, list[Any]] = {}
    for g in sorted(quotient.nodes, key=lambda g: g[1]):
        by_task.setdefault(g[0], []).append(g)
    tasks = sorted(by_task, key=lambda t: same_task(t, client_task))
    for groups in (by_task[t] for t in tasks):
        keep = groups[0]
        for g in groups[1:]:
            if _reaches_indirectly(quotient, keep, g) or _reaches_indirectly(quotient, g, keep):
                keep = g  # merging would put a path through another task inside one group
                continue
            nx.contracted_nodes(quotient, keep, g, self_loops=False, copy=False)
            for k, v in merged.items():
                if v == g:
                    merged[k] = keep
    return merged


def _reaches_indirectly(graph: Any, a: Any, b: Any) -> bool:
    """Whether a path leads from `a` to `b` through some other node."""
    import networkx as nx  # noqa: PLC0415

    return any(s != b and nx.has_path(graph, s, b) for s in graph.successors(a))


def _topological_groups(by_group, members, merged, group_of, dependencies) -> list[Any]:
    import networkx as nx  # noqa: PLC0415

    dag = nx.DiGraph()
    dag.add_nodes_from(by_group)
    for op in members:
        for u in dependencies(op):
            a, b = merged[group_of[u]], merged[group_of[op]]
            if a != b:
                dag.add_edge(a, b)
    first = {g: min(op.creation_index for op in ops) for g, ops in by_group.items()}
    # Deterministic: among ready groups, the one whose first node was built first.
    return list(nx.lexicographical_topological_sort(dag, key=lambda g: first[g]))


def _wire(
    parts: list[Partition],
    part_of: dict[Operation, Partition],
    fed: Collection[Output],
    copied: set[Operation],
    targets: list[Output | Operation],
) -> None:
    """Fills each partition's inputs, outputs, targets and control predecessors."""
    outputs: dict[Partition, dict[Output, None]] = {p: {} for p in parts}
    run_for_effect: dict[Partition, dict[Operation, None]] = {p: {} for p in parts}
    for part in parts:
        inputs: dict[Output, None] = {}
        after: dict[int, None] = {}
        for op in part.ops:
            for inp in op.inputs:
                if inp in fed:
                    inputs[inp] = None
                elif inp.op in copied or part_of[inp.op] is part:
                    continue
                else:
                    inputs[inp] = None
                    outputs[part_of[inp.op]][inp] = None
            for dep in op.control_inputs:
                source = part_of.get(dep)
                if source is not None and source is not part:
                    after[source.index] = None
                    run_for_effect[source][dep] = None
        part.inputs = list(inputs)
        part.after = sorted(after)
    for t in targets:
        if isinstance(t, Operation):
            run_for_effect[part_of[t]][t] = None
        elif t not in fed:
            outputs[part_of[t.op]][t] = None
    for part in parts:
        part.outputs = list(outputs[part])
        part.targets = list(run_for_effect[part])


class _NameSource:
    """Names for the receiving placeholders that no node of the user's graph has."""

    def __init__(self, graph: Graph | None):
        self.graph = graph

    def names(self) -> Iterable[str]:
        k = 0
        while True:
            name = f"mg.recv.{k}"
            if self.graph is None or name not in self.graph:
                yield name
            k += 1


def _build_graph(
    part: Partition,
    part_of: dict[Operation, Partition],
    fed: Collection[Output],
    devices: Mapping[Operation, Device],
    local_spec: Any,
    names: _NameSource,
) -> None:
    """Builds the partition's own graph: its nodes, Placeholders for what it receives."""
    graph = part.graph
    placeholder = get_op_def("Placeholder")
    fresh = iter(names.names())
    copy: dict[Output, Output] = {}
    copy_op: dict[Operation, Operation] = {}

    def add(op_def, inputs, attrs, name, device, control=(), label="", source="<unknown>"):
        new = graph.add_operation(
            op_def, inputs, attrs, base_name=name, requested_device=device,
            control_inputs=control, kernel_label=label, source=source,
        )  # fmt: skip
        if new.name != name:
            raise InternalError(f"partition graph renamed {name!r} to {new.name!r}")
        return new

    for inp in part.inputs:
        recv = add(placeholder, [], {"dtype": inp.dtype, "shape": inp.shape}, next(fresh), None)
        copy[inp] = recv.outputs[0]
        part.graph_inputs.append(recv.outputs[0])
    for op in part.ops:
        flat = []
        for inp in op.inputs:
            if inp not in copy:  # a constant or a variable's handle copied into this partition
                const = inp.op
                # A handle names its device: the copy must make the handle the original makes.
                device = local_spec(devices[const]) if const.type == "VarHandleOp" else None
                new = add(
                    const.op_def, [], dict(const.attrs), const.name, device,
                    label=const.kernel_label, source=const.source,
                )  # fmt: skip
                copy_op[const] = new
                copy.update(zip(const.outputs, new.outputs))
            flat.append(copy[inp])
        control = [copy_op[d] for d in op.control_inputs if d in copy_op and part_of.get(d) is part]
        new = add(
            op.op_def, op.op_def.split_inputs(flat, op.attrs), dict(op.attrs), op.name,
            local_spec(devices[op]), control, op.kernel_label, op.source,
        )  # fmt: skip
        copy_op[op] = new
        for out, new_out in zip(op.outputs, new.outputs):
            if out not in fed:
                copy[out] = new_out
    part.graph_outputs = [copy[t] for t in part.outputs]
    part.graph_targets = [copy_op[op] for op in part.targets]
