"""The placer: assigns each node of a pruned graph a device and a kernel.

Rules, in order:
1. Nodes in one colocation group (`Scope.colocate_with`, joined with union-find) share a device;
   a node using a resource (a variable: a resource-typed input) joins the group of the node
   that makes its handle, as TF's placer colocates resource edges.
2. A node goes only where a kernel exists for its op, dtypes, attrs and kernel label.
3. A requested device (`Scope.with_device`, full or partial) restricts the candidates. When no
   candidate satisfies it: with soft placement the request is relaxed as TF relaxes it (its
   job, replica and task are kept, its device type and index dropped) and, if that still
   matches nothing, dropped (TF 2's default); without, placement fails with the reason each
   device was rejected.
4. Among the remaining candidates the first in priority order wins: the devices of the default
   task first (the session's own process), then the other tasks in job, replica and task order;
   within a task GPUs, then the CPU.
5. Generator nodes (no data inputs, no request, no colocation: Consts) go where their consumers
   are when those agree, so that a constant is not copied across devices on every run.

Devices may span several tasks (a distributed session: `/job:worker/replica:0/task:1/...`).
A request that names no job, replica or task (`/device:GPU:0`, `gpu`) means the default task's
device, so a node moves to another process only when its request (or its colocation group's)
names that process.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from minigraph import dtypes
from minigraph.device_spec import LOCAL_JOB, DeviceSpec
from minigraph.devices import Device, gpu_unavailable_reason
from minigraph.errors import InvalidArgumentError, NotFoundError
from minigraph.graph import Operation
from minigraph.registry import KernelDef, find_kernel

__all__ = ["Placement", "place", "same_task", "LOCAL_TASK"]


class Placement:
    """The result: per node, its device and kernel."""

    __slots__ = ("device", "kernel")

    def __init__(self) -> None:
        self.device: dict[Operation, Device] = {}
        self.kernel: dict[Operation, KernelDef] = {}


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


#: The task of a session's own process.
LOCAL_TASK = DeviceSpec(LOCAL_JOB, 0, 0)


def same_task(a: DeviceSpec, b: DeviceSpec) -> bool:
    """Whether two device names agree on job, replica and task (unset fields match anything)."""
    return all(
        x is None or y is None or x == y
        for x, y in ((a.job, b.job), (a.replica, b.replica), (a.task, b.task))
    )


def _priority(devices: Sequence[Device], default_task: DeviceSpec) -> list[Device]:
    def key(d: Device) -> tuple[Any, ...]:
        spec = d.spec
        return (
            not same_task(spec, default_task), spec.job or "", spec.replica or 0, spec.task or 0,
            d.device_type != "GPU", d.device_type, d.index,
        )  # fmt: skip

    return sorted(devices, key=key)


def _complete(request: DeviceSpec, default_task: DeviceSpec) -> DeviceSpec:
    """A request naming no job, replica or task means the default task's device."""
    if request.job is None and request.replica is None and request.task is None:
        return DeviceSpec(
            default_task.job, default_task.replica, default_task.task,
            request.device_type, request.device_index,
        )  # fmt: skip
    return request


class _Context:
    """What every group's placement needs: the ordered devices and how to name them."""

    __slots__ = ("ordered", "soft", "default_task", "full_names", "kernels", "hosts")

    def __init__(self, ordered: list[Device], soft: bool, default_task: DeviceSpec):
        self.ordered = ordered
        self.soft = soft
        self.default_task = default_task
        # With devices in several tasks "CPU:0" is ambiguous: messages use full names.
        self.full_names = any(not same_task(d.spec, default_task) for d in ordered)
        # (op type, device type, attrs, kernel label) -> kernel or why none: the look-up of
        # one place() call, while its ops keep their attrs mappings alive. Nodes with equal
        # signatures share one canonical attrs mapping (graph.py's node memo), so graphs of
        # repeated nodes look each kernel up once.
        self.kernels: dict[tuple[Any, ...], KernelDef | str] = {}
        self.hosts: dict[Device, Device] = {}

    def kernel_or_reason(self, op: Operation, device: Device) -> KernelDef | str:
        key = (op.type, device.device_type, id(op.attrs), op.kernel_label)
        found = self.kernels.get(key)
        if found is None:
            found = self.kernels[key] = _kernel_or_reason(op, device)
        return found

    def label(self, device: Device) -> str:
        return device.name if self.full_names else device.short_name

    def host_of(self, device: Device) -> Device:
        """The host (CPU) device of `device`'s task."""
        hosts = self.hosts
        host = hosts.get(device)
        if host is None:
            host = hosts[device] = next(
                (d for d in self.ordered if d.is_host and same_task(d.spec, device.spec)), device
            )
        return host


def _kernel_or_reason(op: Operation, device: Device) -> KernelDef | str:
    try:
        return find_kernel(op.type, device.device_type, op.attrs, op.kernel_label, op.name)
    except NotFoundError as e:
        return e.message


def place(
    ops: Sequence[Operation],
    devices: Sequence[Device],
    *,
    allow_soft_placement: bool = True,
    default_task: DeviceSpec = LOCAL_TASK,
    log_device_placement: bool = False,
) -> Placement:
    """Places `ops` (a pruned graph in topological order) on `devices`.

    `default_task` (job, replica and task) is where nodes without a task request go: the
    process running the session. `log_device_placement` prints each node's device to stderr,
    as TF does (`SessionConfig.log_device_placement`).

    Raises:
        InvalidArgumentError: a request or colocation cannot be met and soft placement is off;
            the message explains why each candidate device was rejected.
        NotFoundError: a node has no kernel on any device.
    """
    ordered = _priority(devices, default_task)
    ctx = _Context(ordered, allow_soft_placement, default_task)
    result = Placement()
    uf = _UnionFind()
    # Per-node slot reads: the public properties cost +4.1% of a 3000-node first run (callgrind).
    for op in ops:
        if op._colocation_group != op._name:  # a node alone is its own group
            uf.union(op._colocation_group, op._name)
        resources = _resource_inputs(op._op_def)
        if resources:
            # TF's rule: an op using a resource (a variable) runs where the resource lives,
            # with the op that makes its handle.
            inputs = op._inputs
            for j in resources:
                uf.union(inputs[j]._op._name, op._name)
        elif op._type == "Identity" and op._inputs[0]._dtype is dtypes.resource:
            uf.union(op._inputs[0]._op._name, op._name)  # a handle passed on
    parent = uf.parent
    groups: dict[str, list[Operation]] = {}
    for op in ops:
        name = op._name
        groups.setdefault(uf.find(name) if name in parent else name, []).append(op)
    # A node colocated with one this run does not need (`colocate_with(a.op)`, a not fetched)
    # still honours that node's device request: a variable and its slots must land on the
    # same device in every run, whichever nodes each run prunes away (TF places the whole
    # graph once; we place per plan).
    present = {op._name for op in ops}
    anchors: dict[str, list[Operation]] = {}
    for op in ops:
        group = op._colocation_group
        if group != op._name and group not in present:
            try:
                anchor = op.graph.get_operation(group)
            except NotFoundError:  # the group's namesake was never built: nothing to honour
                continue
            if anchor.requested_device is not None:
                anchors.setdefault(uf.find(op._name), []).append(anchor)

    deferred: list[Operation] = []
    for key, members in groups.items():
        op0 = members[0]
        if len(members) == 1 and op0._requested_device is None and key not in anchors:
            if not op0._inputs:
                deferred.append(op0)
            else:
                _place_single(op0, ctx, result)
            continue
        _place_group(members, ctx, result, anchors.get(key, ()))

    # Generators, consumers first (reverse topological order), so chains of them follow along.
    consumers: dict[Operation, list[tuple[Operation, int]]] = {op: [] for op in deferred}
    for op in ops:
        for j, inp in enumerate(op._inputs):
            users = consumers.get(inp._op)
            if users is not None:
                users.append((op, j))
    placed_on, kernel_of = result.device, result.kernel
    for op in sorted(deferred, key=attrgetter("creation_index"), reverse=True):
        wanted = set()
        for consumer, j in consumers[op]:
            device = placed_on.get(consumer)
            if device is None:
                continue
            # A host-memory input is read from the host whatever the consumer's device.
            if j in kernel_of[consumer].flat_host_inputs(consumer._attrs):
                device = ctx.host_of(device)
            wanted.add(device)
        if len(wanted) == 1:
            device = wanted.pop()
            kernel = ctx.kernel_or_reason(op, device)
            if isinstance(kernel, KernelDef):
                result.device[op] = device
                result.kernel[op] = kernel
                continue
        _place_group([op], ctx, result)
    if log_device_placement:
        for op in ops:
            print(f"{op.name}: ({op.type}): {result.device[op].name}", file=sys.stderr)
    return result


_resource_positions: dict[Any, tuple[int, ...]] = {}


def _resource_inputs(op_def: Any) -> tuple[int, ...]:
    """The flat positions of an op's resource inputs (ops with list inputs have none), per
    OpDef once."""
    found = _resource_positions.get(op_def)
    if found is None:
        found = ()
        if not op_def.has_list_inputs:
            found = tuple(i for i, a in enumerate(op_def.inputs) if a.dtype is dtypes.resource)
        _resource_positions[op_def] = found
    return found


def _place_single(op: Operation, ctx: _Context, result: Placement) -> None:
    """A node without colocation or request: the first device, in priority order, with a
    kernel for it (what `_place_group` chooses for it, without its bookkeeping)."""
    for device in ctx.ordered:
        kernel = ctx.kernel_or_reason(op, device)
        if type(kernel) is not str:
            result.device[op] = device
            result.kernel[op] = kernel
            return
    _place_group([op], ctx, result)  # no kernel anywhere: its error


def _place_group(
    members: list[Operation],
    ctx: _Context,
    result: Placement,
    anchors: Sequence[Operation] = (),
) -> None:
    """Places colocated `members` on one device meeting all their requests and those of
    `anchors` (nodes of their colocation group that this plan does not run)."""
    ordered, soft = ctx.ordered, ctx.soft
    requests = [
        (op, _complete(op.requested_device, ctx.default_task))
        for op in (*members, *anchors)
        if op.requested_device is not None
    ]
    rejected: list[str] = []
    with_kernels: list[tuple[Device, list[KernelDef]]] = []
    for device in ordered:
        kernels = []
        for op in members:
            kernel = ctx.kernel_or_reason(op, device)
            if isinstance(kernel, str):
                rejected.append(f"{ctx.label(device)}: {kernel}")
                break
            kernels.append(kernel)
        else:
            with_kernels.append((device, kernels))
    chosen = None
    for device, kernels in with_kernels:
        clash = next((op for op, req in requests if not req.is_compatible_with(device.spec)), None)
        if clash is None:
            chosen = (device, kernels)
            break
        rejected.append(
            f"{ctx.label(device)}: does not match the request "
            f"{clash.requested_device.to_string()!r} of {clash.name!r}"
        )
    if chosen is None and requests:
        _explain_missing_requests(requests, ctx, rejected)
        if soft and with_kernels:
            # TF's relaxation: stay in the requested task if it has a device with the kernels.
            chosen = next(
                (
                    (device, kernels)
                    for device, kernels in with_kernels
                    if all(same_task(req, device.spec) for _, req in requests)
                ),
                with_kernels[0],
            )
    if chosen is None:
        if soft and len(members) > 1:
            # Soft placement may split a colocation group that no single device can hold.
            for op in members:
                _place_group([op], ctx, result)
            return
        names = ", ".join(f"'{op.name}' ({op.type})" for op in members)
        what = "operation" if len(members) == 1 else "colocated operations"
        # No kernel on any device is a NotFoundError whether or not a device was requested.
        error = NotFoundError if len(members) == 1 and not with_kernels else InvalidArgumentError
        raise error(
            f"Cannot assign a device for {what} {names}"
            + (
                f" (requested {', '.join(repr(op.device) for op, _ in requests)})"
                if requests
                else ""
            )  # fmt: skip
            + ". Candidates were rejected: "
            + "; ".join(rejected)
            + (
                ". Set allow_soft_placement=True to fall back."
                if requests and with_kernels and not soft
                else "."
            )
            + _defined_at(members),
            members[0].name,
            members[0].type,
        )
    device, kernels = chosen
    for op, kernel in zip(members, kernels):
        result.device[op] = device
        result.kernel[op] = kernel


def _defined_at(members: list[Operation], limit: int = 5) -> str:
    """Where the user built the nodes, in the format of kernel errors' node context."""
    lines = [
        f"\n\t [[node {op.name} ({op.type}), defined at {op.source}]]" for op in members[:limit]
    ]
    if len(members) > limit:
        lines.append(f"\n\t [[and {len(members) - limit} more colocated nodes]]")
    return "".join(lines)


def _explain_missing_requests(
    requests: list[tuple[Operation, Any]], ctx: _Context, rejected: list[str]
) -> None:
    ordered = ctx.ordered
    for op, req in requests:
        if not any(req.is_compatible_with(d.spec) for d in ordered):
            shown = op.requested_device.to_string()
            why = f"no device matches {shown!r} (have {[ctx.label(d) for d in ordered]})"
            if req.device_type == "GPU" and same_task(req, ctx.default_task):  # this process
                reason = gpu_unavailable_reason()
                if reason:
                    why += f"; no GPU: {reason}"
            rejected.append(why)
