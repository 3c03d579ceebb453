"""How a partition travels to its worker: its graph as a serialized TensorFlow GraphDef.

The client exports the partition's graph (`Graph.as_graph_def`); the worker builds it with its
own op registry (`import_graph_def`), as TF's workers build the graphs their master registers
with them. Constants travel inside it (`tensor_content`), so a partition's constants are
shipped with its registration, once. Limits are the format's: a constant of at most
`minigraph.graph_def.MAX_CONST_BYTES` (1 GiB), a partition of less than 2 GiB (protobuf's
message size limit).
"""

from __future__ import annotations

from minigraph.graph import Graph
from minigraph.graph_def import import_graph_def
from minigraph.scope import Scope

__all__ = ["encode", "decode"]


def encode(graph: Graph) -> bytes:
    """The graph as a serialized GraphDef."""
    return graph.as_graph_def().SerializeToString()


def decode(data: bytes, source: str = "<partition>") -> Graph:
    """The graph `encode` wrote, built with this process's op registry; `source` is where its
    nodes' errors say they were defined.

    Raises:
        NotFoundError: op types this process does not have (all of them, each with the first
            node that uses it).
    """
    scope = Scope.new_root_scope()
    import_graph_def(scope, data, name="", source=source)
    return scope.graph
