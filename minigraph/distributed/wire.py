"""How a partition travels to its worker: its graph as bytes, and back to a graph there.

INTERIM: until GraphDef export/import lands (issue 9), partitions travel as a plain node list
(names, op types, input names, attrs as values). `encode` then becomes
`graph.as_graph_def().SerializeToString()` and `decode` `import_graph_def(scope, data, name="")`;
nothing else in minigraph.distributed depends on the format.
"""

from __future__ import annotations

import pickle
from typing import Any

from minigraph.device_spec import DeviceSpec
from minigraph.errors import InvalidArgumentError, NotFoundError
from minigraph.graph import Graph
from minigraph.registry import get_op_def, list_ops

__all__ = ["encode", "decode"]


def encode(graph: Graph) -> bytes:
    """The graph as bytes (its nodes' names, types, inputs, attrs, devices and labels)."""
    nodes = [
        (
            op.name, op.type, [i.name for i in op.inputs], [c.name for c in op.control_inputs],
            dict(op.attrs), op.device, op.kernel_label,
        )
        for op in graph.operations
    ]  # fmt: skip
    return pickle.dumps(nodes, protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> Graph:
    """The graph `encode` wrote, built with this process's op registry.

    Raises:
        NotFoundError: op types this process does not have (all of them, each with the first
            node that uses it).
    """
    nodes: list[Any] = pickle.loads(data)  # noqa: S301 - interim format, see the module doc
    known = set(list_ops())
    missing: dict[str, str] = {}
    for name, op_type, *_ in nodes:
        if op_type not in known:
            missing.setdefault(op_type, name)
    if missing:
        listed = ", ".join(f"{t!r} (first used by node {n!r})" for t, n in missing.items())
        raise NotFoundError(f"Op type not registered: {listed}")
    graph = Graph()
    for name, op_type, inputs, control, attrs, device, label in nodes:
        op_def = get_op_def(op_type)
        flat = [graph.get_output(i) for i in inputs]
        op = graph.add_operation(
            op_def, op_def.split_inputs(flat, attrs), attrs, base_name=name,
            requested_device=DeviceSpec.from_string(device) if device else None,
            control_inputs=[graph.get_operation(c) for c in control], kernel_label=label,
            source=f"<partition node {name}>",
        )  # fmt: skip
        if op.name != name:
            raise InvalidArgumentError(f"duplicate node name {name!r} in a partition")
    return graph
