"""The GatherV2 chain several sections build: one definition, so their figures stay comparable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import minigraph
from minigraph import Output, Scope
from ops import Const, GatherV2, Placeholder

__all__ = ["gather_chain", "gather_fanout"]

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


def gather_fanout(chain: int, wide: int) -> dict[str, Any]:
    """The executor sections' graph over one float32 Placeholder "x" [4, 4], with "idx" and
    "axis" Consts: "single" GatherV2 node, a "chain" of `chain` nodes and a "wide" list of
    `wide` nodes each reading x; "root" is the scope."""
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[4, 4])
    idx = Const(root, _REVERSE_4)
    axis = Const(root, 0)
    single = GatherV2(root, x, idx, axis)
    y = x
    for _ in range(chain):
        y = GatherV2(root, y, idx, axis)
    many = [GatherV2(root, x, idx, axis) for _ in range(wide)]
    return {
        "root": root, "x": x, "idx": idx, "axis": axis,
        "single": single, "chain": y, "wide": many,
    }  # fmt: skip
