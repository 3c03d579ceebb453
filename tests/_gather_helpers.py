"""Shared helpers of the gather test suite: sample data, runners and numpy reference gathers.

The references are written from the documents' formulas, element by element, with explicit
loops (`np.ndindex`) over the output: nothing here reuses the kernels' flatten-and-take
strategy, so an agreement between the two means something.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

import minigraph
from minigraph import Scope, Session, SessionConfig, dtypes

ALL_DTYPES = dtypes.ALL_DTYPES
NON_STRING_DTYPES = tuple(d for d in ALL_DTYPES if not d.is_string)
# The GPU kernels' dtypes: cupy holds neither strings nor ml_dtypes' bfloat16.
GPU_DTYPES = tuple(d for d in NON_STRING_DTYPES if d.name != "bfloat16")
INDEX_DTYPES = (minigraph.int16, minigraph.int32, minigraph.int64)
AXIS_DTYPES = (minigraph.int32, minigraph.int64)
POLICIES = ("", "DEFAULT", "ERROR", "IGNORE")
INT64_MIN = int(np.iinfo(np.int64).min)
INT64_MAX = int(np.iinfo(np.int64).max)


def ids(value: Any) -> str | None:
    """pytest `ids=` callable: dtypes by name, the policy '' as `empty`."""
    if isinstance(value, minigraph.DType):
        return value.name
    if value == "":
        return "empty"
    return None


# -- data ------------------------------------------------------------------------------------


def sample(dtype: minigraph.DType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A C-contiguous array of `dtype` with distinct-ish, exactly representable values.

    Strings are bytes such as b's17'; bool alternates pseudo-randomly; numbers are small ints
    (plus an imaginary part for complex types), so every dtype can hold them exactly.
    """
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape, dtype=np.int64))
    if dtype.is_string:
        flat = np.empty(size, dtype=object)
        flat[:] = [f"s{v}".encode() for v in rng.integers(0, 1000, size)]
        return flat.reshape(shape)
    if dtype.is_bool:
        return rng.integers(0, 2, size).astype(bool).reshape(shape)
    values = rng.integers(1, 100, size)  # never 0: a zero in the result then means "zeroed"
    if dtype.is_complex:
        return (values + 1j * rng.integers(1, 100, size)).astype(dtype.np_dtype).reshape(shape)
    return values.astype(dtype.np_dtype).reshape(shape)


def zero_of(dtype: Any) -> Any:
    """What IGNORE (and DEFAULT on a GPU) writes for an out-of-range index."""
    dtype = np.dtype(getattr(dtype, "np_dtype", dtype))
    return b"" if dtype.kind == "O" else np.zeros((), dtype)[()]


def as_bytes(nested: Any) -> np.ndarray:
    """The documents' string literals (`[['a', 'b']]`) as TF returns them: object arrays of
    bytes."""
    array = np.array(nested, dtype=object)
    flat = array.reshape(-1)
    for i, v in enumerate(flat.tolist()):
        flat[i] = v.encode() if isinstance(v, str) else v
    return flat.reshape(array.shape)


def non_contiguous(array: np.ndarray) -> np.ndarray:
    """The same values in a non-contiguous view (every other element of a bigger array)."""
    shape = array.shape
    if array.ndim == 0:
        return array
    big = np.empty(shape[:-1] + (shape[-1] * 2,), dtype=array.dtype)
    if array.dtype == object:
        big[...] = b"junk"
    view = big[..., ::2]
    view[...] = array
    assert not view.flags.c_contiguous or view.size <= 1
    return view


# -- running ---------------------------------------------------------------------------------


def run(
    scope: Scope, fetch: Any, feed_dict: Mapping[Any, Any] | None = None, check: bool = True
) -> Any:
    """One run of `fetch` in a fresh Session over the scope's graph.

    With `check`, the session checks every kernel output's dtype and shape against the
    statically inferred ones (SessionConfig.check_kernel_outputs).
    """
    config = SessionConfig(check_kernel_outputs=check)
    with Session(scope, config) as sess:
        return sess.run(fetch, feed_dict)


def assert_array_same(actual: Any, expected: Any) -> None:
    """Same dtype, same shape, same values (bytes compared as bytes)."""
    expected = np.asarray(expected)
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype == object:
        assert actual.tolist() == expected.tolist()
        assert all(isinstance(v, bytes) for v in actual.reshape(-1).tolist())
    else:
        np.testing.assert_array_equal(actual, expected, strict=True)


def msg(text: str) -> str:
    """A `match=` pattern for a literal message."""
    return re.escape(text)


# -- references ------------------------------------------------------------------------------


def ref_gather(
    params: np.ndarray,
    indices: np.ndarray,
    axis: int = 0,
    batch_dims: int = 0,
    ignore_bad: bool = False,
) -> np.ndarray:
    """GatherV2 from the raw-op document's formula, one output element at a time:

        output[a_0..a_n, i_0..i_k, b_0..b_m] = params[a_0..a_n, indices[a_0..a_bd-1, i_0..i_k],
                                                      b_0..b_m]

    where the a's are params.shape[:axis] (their first batch_dims shared with indices).
    Out-of-range indices raise IndexError, or give zeros with `ignore_bad`.
    """
    params = np.asarray(params)
    indices = np.asarray(indices)
    if axis < 0:
        axis += params.ndim
    if batch_dims < 0:
        batch_dims += indices.ndim
    assert 0 <= batch_dims <= axis < params.ndim
    assert params.shape[:batch_dims] == indices.shape[:batch_dims]
    n = params.shape[axis]
    out_shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1 :]
    out = np.empty(out_shape, dtype=params.dtype)
    k = indices.ndim - batch_dims
    for pos in np.ndindex(*out_shape):
        outer = pos[:axis]
        index_pos = outer[:batch_dims] + pos[axis : axis + k]
        inner = pos[axis + k :]
        value = int(indices[index_pos])
        if 0 <= value < n:
            out[pos] = params[outer + (value,) + inner]
        elif ignore_bad:
            out[pos] = zero_of(params.dtype)
        else:
            raise IndexError(f"indices{list(index_pos)} = {value} not in [0, {n})")
    return out


def ref_gather_batched(
    params: np.ndarray, indices: np.ndarray, axis: int, batch_dims: int
) -> np.ndarray:
    """The tf.gather document's `manually_batched_gather`, generalised: nested loops over the
    batch dims, and numpy advanced indexing inside (valid indices only)."""
    params = np.asarray(params)
    indices = np.asarray(indices)
    if axis < 0:
        axis += params.ndim
    if batch_dims < 0:
        batch_dims += indices.ndim
    if batch_dims == 0:
        # (a 0-d result comes back as a bare scalar: keep the array and its dtype)
        return np.asarray(params[(slice(None),) * axis + (indices,)], dtype=params.dtype)
    out_shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1 :]
    parts = [
        ref_gather_batched(p, i, axis - 1, batch_dims - 1)
        for p, i in zip(params, indices)  # the outer loop over the first batch dim
    ]
    if not parts:
        return np.empty(out_shape, dtype=params.dtype)
    return np.stack(parts)


def ref_gather_nd(
    params: np.ndarray, indices: np.ndarray, batch_dims: int = 0, ignore_bad: bool = False
) -> np.ndarray:
    """GatherNd from its document's formula, one output element at a time:

        output[b..., i_0..i_{K-2}, s...] = params[b..., *indices[b..., i_0..i_{K-2}], s...]

    with `b` the batch dims (shared by params and indices) and `s` the slice dims.
    """
    params = np.asarray(params)
    indices = np.asarray(indices)
    bd = batch_dims
    depth = indices.shape[-1]
    assert params.shape[:bd] == indices.shape[:bd]
    assert depth <= params.ndim - bd
    middle = indices.shape[bd:-1]
    slice_shape = params.shape[bd + depth :]
    out_shape = params.shape[:bd] + middle + slice_shape
    out = np.empty(out_shape, dtype=params.dtype)
    for pos in np.ndindex(*out_shape):
        batch = pos[:bd]
        index_pos = batch + pos[bd : bd + len(middle)]
        rest = pos[bd + len(middle) :]
        vector = [int(v) for v in indices[index_pos]]
        dims = params.shape[bd : bd + depth]
        if all(0 <= v < d for v, d in zip(vector, dims)):
            out[pos] = params[batch + tuple(vector) + rest]
        elif ignore_bad:
            out[pos] = zero_of(params.dtype)
        else:
            raise IndexError(f"indices{list(index_pos)} = {vector} out of {params.shape}")
    return out


def first_bad_v2(indices: np.ndarray, n: int) -> tuple[tuple[int, ...], int] | None:
    """(position, value) of the first index outside [0, n) in C order, or None."""
    indices = np.asarray(indices)
    for pos in np.ndindex(*indices.shape):
        value = int(indices[pos])
        if not 0 <= value < n:
            return pos, value
    return None


def first_bad_nd(
    indices: np.ndarray, dims: tuple[int, ...]
) -> tuple[tuple[int, ...], list[int]] | None:
    """(position in indices.shape[:-1], vector) of the first index vector outside `dims`."""
    indices = np.asarray(indices)
    for pos in np.ndindex(*indices.shape[:-1]):
        vector = [int(v) for v in indices[pos]]
        if not all(0 <= v < d for v, d in zip(vector, dims)):
            return pos, vector
    return None


def position_text(pos: tuple[int, ...]) -> str:
    """TF's SliceDebugString of a position: '' for a scalar, `[0,1]` otherwise."""
    return "" if not pos else "[" + ",".join(str(p) for p in pos) + "]"
