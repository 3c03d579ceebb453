"""The GatherV2 chain several sections build: one definition, so their figures stay comparable."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import minigraph
from minigraph import Output, Scope
from ops import Const, GatherV2, Placeholder

__all__ = ["gather_chain"]

_REVERSE_4 = np.array([3, 2, 1, 0], dtype=np.int64)


def gather_chain(
    n: int,
    *,
    shape: Sequence[int | None] = (None, 4),
    indices: np.ndarray = _REVERSE_4,
    literal_axis: bool = False,
) -> tuple[Scope, Output, Output]:
    """`(root, x, y)`: n GatherV2 nodes chained over a float32 Placeholder `x` of `shape`, each
    gathering `indices` (one Const) on axis 0. The axis is one Const shared by every node, or
    with `literal_axis` the Python literal 0, which adds a Const per node."""
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=list(shape))
    idx = Const(root, indices)
    axis = 0 if literal_axis else Const(root, 0)
    y = x
    for _ in range(n):
        y = GatherV2(root, y, idx, axis)
    return root, x, y
