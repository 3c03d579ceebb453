"""The placer: assigns each node of a pruned graph a device and a kernel.

Rules, in order:
1. Nodes in one colocation group (`Scope.colocate_with`, joined with union-find) share a device.
2. A node goes only where a kernel exists for its op, dtypes, attrs and kernel label.
3. A requested device (`Scope.with_device`, full or partial) restricts the candidates. When no
   candidate satisfies it: with soft placement the request is dropped (TF 2's default); without,
   placement fails with the reason each device was rejected.
4. Among the remaining candidates the first in priority order wins: GPUs, then the CPU.
5. Generator nodes (no data inputs, no request, no colocation: Consts) go where their consumers
   are when those agree, so that a constant is not copied across devices on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minigraph.devices import Device, gpu_unavailable_reason
from minigraph.errors import InvalidArgumentError, NotFoundError
from minigraph.graph import Operation
from minigraph.registry import KernelDef, find_kernel

__all__ = ["Placement", "place"]


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


def _priority(devices: Sequence[Device]) -> list[Device]:
    return sorted(devices, key=lambda d: (d.device_type != "GPU", d.device_type, d.index))


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
) -> Placement:
    """Places `ops` (a pruned graph in topological order) on `devices`.

    Raises:
        InvalidArgumentError: a request or colocation cannot be met and soft placement is off;
            the message explains why each candidate device was rejected.
        NotFoundError: a node has no kernel on any device.
    """
    ordered = _priority(devices)
    result = Placement()
    uf = _UnionFind()
    for op in ops:
        uf.union(op.colocation_group, op.name)
    groups: dict[str, list[Operation]] = {}
    for op in ops:
        groups.setdefault(uf.find(op.name), []).append(op)

    deferred: list[Operation] = []
    for members in groups.values():
        op0 = members[0]
        if len(members) == 1 and not op0.inputs and op0.requested_device is None:
            deferred.append(op0)
            continue
        _place_group(members, ordered, allow_soft_placement, result)

    # Generators, consumers first (reverse topological order), so chains of them follow along.
    consumers: dict[Operation, list[tuple[Operation, int]]] = {}
    placed = set(ops)
    for op in ops:
        for j, inp in enumerate(op.inputs):
            if inp.op in placed:
                consumers.setdefault(inp.op, []).append((op, j))
    for op in sorted(deferred, key=lambda o: -o._index):
        wanted = set()
        for consumer, j in consumers.get(op, ()):
            device = result.device.get(consumer)
            if device is None:
                continue
            # A host-memory input is read from the host whatever the consumer's device.
            if j in result.kernel[consumer].flat_host_inputs(consumer.attrs):
                device = next(d for d in ordered if d.is_host)
            wanted.add(device)
        if len(wanted) == 1:
            device = wanted.pop()
            kernel = _kernel_or_reason(op, device)
            if isinstance(kernel, KernelDef):
                result.device[op] = device
                result.kernel[op] = kernel
                continue
        _place_group([op], ordered, allow_soft_placement, result)
    return result


def _place_group(
    members: list[Operation], ordered: list[Device], soft: bool, result: Placement
) -> None:
    requests = [(op, op.requested_device) for op in members if op.requested_device is not None]
    rejected: list[str] = []
    with_kernels: list[tuple[Device, list[KernelDef]]] = []
    for device in ordered:
        kernels = []
        for op in members:
            kernel = _kernel_or_reason(op, device)
            if isinstance(kernel, str):
                rejected.append(f"{device.short_name}: {kernel}")
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
            f"{device.short_name}: does not match the request "
            f"{clash.requested_device.to_string()!r} of {clash.name!r}"
        )
    if chosen is None and requests:
        _explain_missing_requests(requests, ordered, rejected)
        if soft and with_kernels:
            chosen = with_kernels[0]
    if chosen is None:
        if soft and len(members) > 1:
            # Soft placement may split a colocation group that no single device can hold.
            for op in members:
                _place_group([op], ordered, soft, result)
            return
        names = ", ".join(f"'{op.name}' ({op.type})" for op in members)
        what = "operation" if len(members) == 1 else "colocated operations"
        # No kernel on any device is a NotFoundError whether or not a device was requested.
        error = NotFoundError if len(members) == 1 and not with_kernels else InvalidArgumentError
        raise error(
            f"Cannot assign a device for {what} {names}"
            + (
                f" (requested {', '.join(repr(r.to_string()) for _, r in requests)})"
                if requests
                else ""
            )  # fmt: skip
            + ". Candidates were rejected: "
            + "; ".join(rejected)
            + (
                ". Set allow_soft_placement=True to fall back."
                if requests and with_kernels and not soft
                else "."
            ),
            members[0].name,
            members[0].type,
        )
    device, kernels = chosen
    for op, kernel in zip(members, kernels):
        result.device[op] = device
        result.kernel[op] = kernel


def _explain_missing_requests(
    requests: list[tuple[Operation, Any]], ordered: list[Device], rejected: list[str]
) -> None:
    for _, req in requests:
        if not any(req.is_compatible_with(d.spec) for d in ordered):
            why = f"no device matches {req.to_string()!r} (have {[d.short_name for d in ordered]})"
            if req.device_type == "GPU":
                reason = gpu_unavailable_reason()
                if reason:
                    why += f"; no GPU: {reason}"
            rejected.append(why)
