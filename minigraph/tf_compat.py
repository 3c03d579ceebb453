"""What TensorFlow's own ops can express: which attrs TF's op of each name has.

minigraph's ops follow TensorFlow 2.21's, sometimes with more: GatherNd's `batch_dims`, a
`bad_indices_policy` on GatherV2. TensorFlow's `import_graph_def` ignores attrs its op lacks, so
a graph file must not hand TF a node whose meaning depends on one. Op libraries declare TF's
attrs with `register_tf_attrs`; graph export (minigraph.graph_def) leaves the others out at
their defaults and marks graphs that set them otherwise so that TensorFlow refuses them, and
`tf_incompatibilities` lists such nodes. Kept apart from graph_def so that op libraries can
declare without loading the GraphDef machinery.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from minigraph.errors import InvalidArgumentError
from minigraph.graph import Graph

__all__ = ["register_tf_attrs", "tf_attrs", "tf_incompatibilities", "same_attr_value"]

# Op type -> the attrs TensorFlow's op of that name has.
_tf_attrs: dict[str, frozenset[str]] = {}


def register_tf_attrs(op_type: str, attrs: Iterable[str]) -> None:
    """Declares which attrs TensorFlow's own `op_type` has.

    On export, the node's other attrs are left out when they hold their default value (so the
    file is a plain TensorFlow graph), and a graph where one holds another value gets
    `versions.min_consumer = MINIGRAPH_MIN_CONSUMER`, which TensorFlow refuses: it would
    otherwise ignore the attr and compute something else. Ops never declared are written with
    all their attrs (TensorFlow refuses op types it does not know by itself).
    """
    if (
        not isinstance(op_type, str)
        or isinstance(attrs, (str, bytes))
        or not isinstance(attrs, Iterable)
    ):
        raise InvalidArgumentError("register_tf_attrs(op_type: str, attrs: list of str)")
    attrs = list(attrs)
    if not all(isinstance(a, str) for a in attrs):
        raise InvalidArgumentError(
            f"register_tf_attrs({op_type!r}, attrs): attrs are attr names (str); got {attrs!r}"
        )
    _tf_attrs[op_type] = frozenset(attrs)


def tf_attrs(op_type: str) -> frozenset[str] | None:
    """The attrs TensorFlow's `op_type` has, or None when no library declared them."""
    return _tf_attrs.get(op_type)


def same_attr_value(value: Any, default: Any) -> bool:
    """Whether a canonical attr value is its default (type-strict; arrays by content)."""
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return (
            isinstance(value, np.ndarray)
            and isinstance(default, np.ndarray)
            and value.dtype == default.dtype
            and np.array_equal(value, default)
        )
    return type(value) is type(default) and value == default


def tf_incompatibilities(graph: Graph) -> list[str]:
    """Why TensorFlow would refuse `graph` once exported: one line per node and attr that
    holds a value TensorFlow's op cannot express (empty when TensorFlow can run it, as far as
    the `register_tf_attrs` declarations tell)."""
    graph = getattr(graph, "graph", graph)  # a Scope works too
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(
            f"tf_incompatibilities needs a Graph or Scope; got {type(graph).__name__}"
        )
    problems = []
    for op in graph.operations:
        known = _tf_attrs.get(op.type)
        if known is None:
            continue
        for attr_def in op.op_def.attrs:
            if attr_def.name in known:
                continue
            value = op.attrs[attr_def.name]
            if attr_def.has_default and same_attr_value(value, attr_def.default):
                continue
            problems.append(
                f"node {op.name!r} ({op.type}): attr {attr_def.name}={_show(value)}, which "
                f"TensorFlow's {op.type} does not have"
            )
    return problems


def _show(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array(shape={list(value.shape)}, dtype={value.dtype})"
    return repr(value) if isinstance(value, str) else str(value)
