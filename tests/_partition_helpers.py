"""Shared helpers of the DynamicPartition / DynamicStitch / embedding_lookup tests: numpy
references and kernel runners.

The references follow the documents' formulas one element at a time, with explicit Python
loops (`np.ndindex`) and dicts: nothing here reuses the kernels' compress / scatter /
last-writer strategies, so an agreement between the two means something.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from _gather_helpers import zero_of

from minigraph import KernelContext
from minigraph.devices import CpuDevice
from minigraph.testing import SimulatedGpuDevice


def ref_partition(data: np.ndarray, partitions: np.ndarray, n: int) -> list[np.ndarray]:
    """outputs[i] = pack([data[js, ...] for js if partitions[js] == i]), js in C order."""
    data = np.asarray(data)
    partitions = np.asarray(partitions)
    suffix = data.shape[partitions.ndim :]
    buckets: list[list[Any]] = [[] for _ in range(n)]
    for js in np.ndindex(*partitions.shape):
        p = int(partitions[js])
        if not 0 <= p < n:
            raise IndexError(f"partitions{list(js)} = {p}")
        buckets[p].append(data[js])
    out = []
    for rows in buckets:
        array = np.empty((len(rows),) + suffix, dtype=data.dtype)
        for k, row in enumerate(rows):
            array[k] = row
        out.append(array)
    return out


def ref_stitch(indices: list[np.ndarray], data: list[np.ndarray]) -> np.ndarray:
    """merged[indices[m][js], ...] = data[m][js, ...], later (m, js) winning; unnamed rows
    are zeros."""
    indices = [np.asarray(i) for i in indices]
    data = [np.asarray(d) for d in data]
    extra = data[0].shape[indices[0].ndim :]
    written: dict[int, Any] = {}
    for idx, values in zip(indices, data):
        for js in np.ndindex(*idx.shape):
            written[int(idx[js])] = values[js]
    rows = max(written) + 1 if written else 0
    out = np.empty((rows,) + extra, dtype=data[0].dtype)
    for r in range(rows):
        out[r] = written.get(r, zero_of(out.dtype))
    return out


def cpu_ctx(op_type: str = "Test") -> KernelContext:
    return KernelContext(CpuDevice(0), "node", op_type)


def gpu_ctx(op_type: str = "Test") -> KernelContext:
    """A kernel context on a simulated GPU: the GPU code paths, over the cupy-like test double
    (its inputs must be that device's arrays: `ctx.device.from_host`)."""
    return KernelContext(SimulatedGpuDevice(0), "node", op_type)


def assert_same(got: Any, expected: Any) -> None:
    """Equal values, dtype and shape (NaN-free data)."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert np.array_equal(got, expected), (got, expected)
