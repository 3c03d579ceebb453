"""Shared helpers of the UnsortedSegmentSum / ScatterNd tests: element-by-element references and
kernel runners.

The references follow the documents' formulas one position at a time, with Python loops over
`np.ndindex` and dicts of rows: nothing here reuses the kernels' first-writer rounds, void-row
`put`s or index flattening, so an agreement between the two means something. Sums are taken
in C order of the positions, one addition at a time, starting from a zero row, in the data's
own dtype (numpy's elementwise add of two rows rounds each element once): exactly what TF's
CPU kernels compute, float16 and bfloat16 rounding included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import minigraph
from minigraph import KernelContext
from minigraph.devices import CpuDevice
from minigraph.testing import SimulatedGpuDevice

# What TF 2.21's CPU kernels register (/work/notes/tf_kernels.txt), as minigraph dtypes.
SEGMENT_SUM_DTYPES = tuple(
    minigraph.as_dtype(n)
    for n in (
        "bfloat16", "complex128", "complex64", "float16", "float32", "float64", "int16",
        "int32", "int64", "int8", "uint16", "uint32", "uint64", "uint8",
    )
)  # fmt: skip
SCATTER_ND_DTYPES = tuple(minigraph.dtypes.ALL_DTYPES)  # bool and string included
INDEX_DTYPES = (minigraph.int16, minigraph.int32, minigraph.int64)


def zero_row(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "O":
        return np.full(shape, b"", dtype=object)
    return np.zeros(shape, dtype)


def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How TF's kernels fold two updates of one position: + (bool: or; bytes: concatenated)."""
    if a.dtype == np.bool_:
        return a | b
    if a.dtype.kind == "O":
        out = np.empty(a.shape, dtype=object)
        out.reshape(-1)[:] = [x + y for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())]
        return out
    return (a + b).astype(a.dtype)


def ref_segment_sum(data: Any, segment_ids: Any, num_segments: int) -> np.ndarray:
    """output[j] = data[i0] + data[i1] + ... over the positions with segment_ids[i] == j, in C
    order, from zero; negative ids dropped; an id >= num_segments raises IndexError."""
    data = np.asarray(data)
    ids = np.asarray(segment_ids)
    row_shape = data.shape[ids.ndim :]
    sums: dict[int, np.ndarray] = {}
    for pos in np.ndindex(*ids.shape):
        j = int(ids[pos])
        if j < 0:
            continue
        if j >= num_segments:
            raise IndexError(f"segment_ids{list(pos)} = {j}")
        sums[j] = combine(sums.get(j, zero_row(row_shape, data.dtype)), np.asarray(data[pos]))
    out = np.empty((num_segments,) + row_shape, dtype=data.dtype)
    for j in range(num_segments):
        out[j] = sums.get(j, zero_row(row_shape, data.dtype))
    return out


def ref_scatter_nd(
    indices: Any, updates: Any, shape: tuple[int, ...], ignore: bool = False
) -> np.ndarray:
    """zeros(shape); then for each index vector v (C order): out[v] = combine(out[v], update).
    An out-of-range vector raises IndexError, or is skipped with `ignore`."""
    indices = np.asarray(indices)
    updates = np.asarray(updates)
    depth = indices.shape[-1]
    outer = indices.shape[:-1]
    slice_shape = tuple(shape[depth:])
    slots: dict[tuple[int, ...], np.ndarray] = {}
    for pos in np.ndindex(*outer):
        vector = tuple(int(v) for v in indices[pos].tolist())
        if any(not 0 <= v < d for v, d in zip(vector, shape)):
            if ignore:
                continue
            raise IndexError(f"indices{list(pos)} = {list(vector)}")
        old = slots.get(vector, zero_row(slice_shape, updates.dtype))
        slots[vector] = combine(old, np.asarray(updates[pos]))
    out = zero_row(tuple(shape), updates.dtype)
    for vector, value in slots.items():
        out[vector] = value
    return out


def cpu_ctx(op_type: str = "Test") -> KernelContext:
    return KernelContext(CpuDevice(0), "node", op_type)


def gpu_ctx(op_type: str = "Test") -> KernelContext:
    """A kernel context on a simulated GPU (inputs must be that device's arrays)."""
    return KernelContext(SimulatedGpuDevice(0), "node", op_type)


CTXS = {"cpu": cpu_ctx, "gpu": gpu_ctx}


def on_device(ctx: KernelContext, value: Any, dtype: Any = None) -> Any:
    array = np.asarray(value, dtype)
    return array if ctx.device.is_host else ctx.device.from_host(array)


def on_host(ctx: KernelContext, value: Any) -> np.ndarray:
    return value if ctx.device.is_host else ctx.device.to_host(value)


def assert_same(got: Any, expected: Any) -> None:
    """Same dtype, shape and values, bit for bit (NaN-free data; -0.0 and +0.0 told apart)."""
    assert isinstance(got, np.ndarray), type(got)
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if got.dtype.kind == "O":
        assert got.tolist() == expected.tolist()
        return
    assert got.tobytes() == expected.tobytes(), (got, expected)
