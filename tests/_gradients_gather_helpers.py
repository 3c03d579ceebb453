"""Shared helpers of the gather-family gradient tests (tests/test_gradients_gather*.py,
test_gradients_partition.py, test_gradients_segment.py): runners, densified sparse values and
numpy references of the gradients.

The references are written from the ops' formulas, element by element, with explicit loops
(`np.ndindex`) over the forward output: each output element's gradient is added to the input
element it was read from. Nothing here reuses the rules' reshape-transpose-segment-sum
strategy, so an agreement between the two means something.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import minigraph as mg


def run(scope: mg.Scope, fetches: Any, feeds: dict | None = None) -> Any:
    with mg.Session(scope) as session:
        return session.run(fetches, feeds or {})


def dense(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A fetched gradient as a dense array: an IndexedSlicesValue's slices added up at their
    indices (checked in range), else the array itself."""
    if not isinstance(value, mg.IndexedSlicesValue):
        return np.asarray(value)
    indices = np.asarray(value.indices).reshape(-1)
    assert indices.size == 0 or (indices.min() >= 0 and indices.max() < shape[0]), indices
    if value.dense_shape is not None:
        assert tuple(np.asarray(value.dense_shape).tolist()) == tuple(shape)
    values = np.asarray(value.values)
    out = np.zeros(shape, dtype=values.dtype)
    for k, i in enumerate(indices.tolist()):
        out[i] += values[k]
    return out


def gather_grad_reference(
    params_shape: tuple[int, ...], indices: np.ndarray, axis: int, batch_dims: int, dy: np.ndarray
) -> np.ndarray:
    """d params of GatherV2(params, indices, axis, batch_dims) for the output gradient `dy`;
    out-of-range indices (the IGNORE policy's zeros) get nothing."""
    rank = len(params_shape)
    a = axis % rank
    b = batch_dims % indices.ndim if batch_dims < 0 else batch_dims
    out = np.zeros(params_shape, dtype=np.result_type(dy.dtype, np.float64))
    free = indices.ndim - b
    for o in np.ndindex(*dy.shape):
        batch, outer = o[:b], o[b:a]
        at = o[a : a + free]
        rest = o[a + free :]
        i = int(indices[batch + at])
        if 0 <= i < params_shape[a]:
            out[batch + outer + (i,) + rest] += dy[o]
    return out


def gather_nd_grad_reference(
    params_shape: tuple[int, ...], indices: np.ndarray, batch_dims: int, dy: np.ndarray
) -> np.ndarray:
    """d params of GatherNd(params, indices, batch_dims) for `dy`; index vectors out of range
    (IGNORE) get nothing."""
    b = batch_dims
    depth = indices.shape[-1]
    free = indices.ndim - 1 - b
    out = np.zeros(params_shape, dtype=np.result_type(dy.dtype, np.float64))
    for o in np.ndindex(*dy.shape):
        batch, at, rest = o[:b], o[b : b + free], o[b + free :]
        vector = tuple(int(v) for v in indices[batch + at])
        dims = params_shape[b : b + depth]
        if all(0 <= v < d for v, d in zip(vector, dims)):
            out[batch + vector + rest] += dy[o]
    return out


def op_types(graph: mg.Graph, prefix: str = "gradients") -> list[str]:
    """The op types of the nodes under the name scope `prefix`."""
    return [op.type for op in graph.operations if op.name.startswith(prefix + "/")]


def total(scope: mg.Scope, x: Any) -> Any:
    """The sum of every element of `x` (of known rank): a scalar loss."""
    import ops

    rank = x.shape.rank
    return ops.Sum(scope, x, np.arange(rank, dtype=np.int32)).output
