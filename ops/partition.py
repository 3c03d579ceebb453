"""DynamicPartition, DynamicStitch and ParallelDynamicStitch: op definitions, shape functions,
CPU and GPU kernels.

Semantics are TensorFlow 2.21's (tf.raw_ops.DynamicPartition, tf.raw_ops.DynamicStitch), with
these deliberate differences:

- DynamicPartition checks every partition value on every device (TF's GPU kernel silently
  drops rows whose partition is out of range) and, when `partitions` is a constant, already
  when the node is built; the error names the first bad value in C order, as TF's CPU kernel.
  A constant `partitions` also gives every output its exact first dimension.
- DynamicStitch guarantees zeros (0, False, b"") in rows that no index names, on every device
  (TF documents them as undefined; its CPU kernel zero-fills). Constant indices give the output
  its first dimension at construction, where negative indices and an output too large for
  int32 row counts are errors already; data/indices shape mismatches that the static shapes
  show are construction errors too. A repeated index takes the value of its last occurrence
  (list order, then C order within a tensor) on every device, GPU included.
- ParallelDynamicStitch (what TF's own embedding_lookup writes into its graphs) is
  DynamicStitch: the same inputs and attrs, shape function and kernels. TF leaves the winner among
  repeated indices undefined for it; here it is DynamicStitch's last occurrence, everywhere.

Kernels are vectorised over numpy (CPU) or cupy (GPU). DynamicPartition on the CPU finds each
partition's positions for a few partitions (a stable counting partition, no sort) and takes
their rows into slices of one pooled array (`ctx.empty`), large partitions on the session's
intra-op threads, and for many takes the rows, in the order of a stable radix argsort, into
pooled memory too.
DynamicStitch on the CPU scatters each data tensor in list order into pooled memory
(`ctx.empty`), zero-filling rows as it goes; when every index tensor is ascending (as the
partitioned positions of embedding_lookup are) and the stitch outgrows the cache, it fills and
scatters the output window by window so that each window stays in cache (0.35-0.45x the time of
one scatter per tensor over the whole output, for 64- and 256-byte rows), the windows split
over the intra-op threads. On a GPU, where
a scatter with repeated indices has no defined winner, it finds each row's last writer with
`maximum.at` over positions and gathers the rows once; the tests run that path on the
simulated GPU (`minigraph.testing.simulated_cupy`, a strict cupy-like double).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minigraph import (
    InvalidArgumentError,
    KernelContext,
    OpDef,
    TensorShape,
    current_scope,
    dtypes,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext
from ops.array import Reshape, SelectV2, Shape, Size
from ops.gather_ops import GatherV2
from ops.math import AddV2, Equal, Range
from ops.reduction import Prod
from ops.segment import gather_drop_negatives

__all__ = ["DynamicPartition", "DynamicStitch", "ParallelDynamicStitch"]

_INT32_MAX = int(np.iinfo(np.int32).max)
# Up to this many partitions the CPU kernel finds each partition's positions in one pass per
# partition (each pass costs about 0.8 ms per million rows); above it a stable radix argsort of
# the partitions wins.
_COMPRESS_MAX = 16
# From this many partition values the counting partition deals its parts out to the intra-op
# threads (below it, handing work to a thread costs more than the pass it saves).
_PARALLEL_PARTITION_ROWS = 1 << 18


def _shape_text(shape: Any) -> str:
    """A shape as TF's TensorShape::DebugString writes it: `[5,2]`, `[]`."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _position(shape: tuple[int, ...], flat: int) -> str:
    """TF's SliceDebugString: `[1,2]` for flat position `flat` of `shape`, '' for a scalar."""
    if not shape:
        return ""
    return "[" + ",".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def _to_host(xp: Any, array: Any) -> np.ndarray:
    """A device array's value on the host (explicitly: cupy refuses implicit conversion)."""
    return array if xp is np else xp.asnumpy(array)


def _zeros(xp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """A zero-filled array: 0, False, or b"" for strings (np.zeros would give int 0 there)."""
    if np.dtype(dtype).kind == "O":
        return np.full(shape, b"", dtype=object)
    return xp.zeros(shape, dtype=dtype)


# -- DynamicPartition: shape function ----------------------------------------------------------


def _check_prefix(data: TensorShape, prefix: TensorShape, what: str) -> None:
    """Raises unless `prefix` can be a prefix of `data` (`what` says which input is which)."""
    if data.rank is None or prefix.rank is None:
        return
    if data.rank < prefix.rank or not TensorShape(data.dims[: prefix.rank]).is_compatible_with(
        prefix
    ):
        raise InvalidArgumentError(what)


def _partition_values(
    partitions: np.ndarray, num_partitions: int
) -> tuple[np.ndarray | None, str | None]:
    """(rows per partition, None) for valid partition values, else (None, TF's error text)."""
    flat = partitions.reshape(-1)
    bad = _first_out_of_range(np, flat, num_partitions)
    if bad is not None:
        value = int(flat[bad])
        return None, (
            f"partitions{_position(partitions.shape, bad)} = {value} is not in "
            f"[0, {num_partitions})"
        )
    return np.bincount(flat, minlength=num_partitions), None


def partition_shapes(
    data: TensorShape,
    partitions: TensorShape,
    num_partitions: int,
    constant: np.ndarray | None = None,
) -> list[TensorShape]:
    """Output shapes of DynamicPartition: `[rows] + data.shape[rank(partitions):]` each.

    `rows` is unknown unless the partitions are a known `constant`, whose values are then
    checked (the first one outside [0, num_partitions) in C order is an error).
    """
    message = (
        f"data.shape must start with partitions.shape, got data.shape = {_shape_text_of(data)}, "
        f"partitions.shape = {_shape_text_of(partitions)}"
    )
    _check_prefix(data, partitions, message)
    firsts: list[int | None] = [None] * num_partitions
    if constant is not None:
        counts, error = _partition_values(constant, num_partitions)
        if error is not None:
            raise InvalidArgumentError(error)
        firsts = [int(c) for c in counts]
    if partitions.rank is None or data.rank is None:
        return [TensorShape(None)] * num_partitions
    suffix = list(data.dims[partitions.rank :])
    return [TensorShape([f] + suffix) for f in firsts]


def _shape_text_of(shape: TensorShape) -> str:
    return "<unknown>" if shape.rank is None else _shape_text(shape.dims)


def _dynamic_partition_shape(ctx: InferenceContext) -> list[TensorShape]:
    data, partitions = ctx.input_shapes
    return partition_shapes(data, partitions, ctx.attr("num_partitions"), ctx.constant_value(1))


# -- DynamicPartition: kernel ------------------------------------------------------------------

_UNSIGNED = {np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64}


def _first_out_of_range(xp: Any, flat: Any, limit: int) -> int | None:
    """Position of the first value of the 1-D int array `flat` outside [0, limit), or None."""
    if flat.size == 0:
        return None
    # Viewed as unsigned, negative values become huge: one `max` finds both kinds.
    unsigned = flat.view(_UNSIGNED[np.dtype(flat.dtype)])
    if int(unsigned.max()) < limit:
        return None
    return int(xp.argmax(unsigned >= limit))


def _dynamic_partition_kernel(
    ctx: KernelContext, data: Any, partitions: Any, *, num_partitions: int
) -> list[Any]:
    """outputs[i] = the rows data[js, ...] with partitions[js] == i, in C order of js."""
    xp = ctx.xp
    n = num_partitions
    p_shape = partitions.shape
    if data.shape[: len(p_shape)] != p_shape:
        raise ctx.invalid_argument(
            f"data.shape must start with partitions.shape, got data.shape = "
            f"{_shape_text(data.shape)}, partitions.shape = {_shape_text(p_shape)}"
        )
    flat = partitions.reshape(-1)
    bad = _first_out_of_range(xp, flat, n)
    if bad is not None:
        value = int(_to_host(xp, flat[bad : bad + 1])[0])
        raise ctx.invalid_argument(
            f"partitions{_position(p_shape, bad)} = {value} is not in [0, {n})"
        )
    rows = data.reshape((flat.size,) + data.shape[len(p_shape) :])
    cpu = ctx.device.device_type == "CPU"
    if n == 1:
        # The input itself when the shapes agree; never a view of it (the kernel is trusted).
        if rows.shape == data.shape:
            return [data]
        if cpu and np.dtype(data.dtype).kind != "O":
            out = ctx.empty(rows.shape, rows.dtype)
            np.copyto(out, rows)
            return [out]
        return [rows.copy()]
    if cpu and n <= _COMPRESS_MAX:
        if np.dtype(data.dtype).kind == "O":
            # A stable counting partition: one compress per partition keeps the C order.
            return [rows.compress(flat == i, axis=0) for i in range(n)]
        return _partition_pooled(ctx, rows, flat, n)
    return _partition_by_sort(ctx, rows, flat, n)


def _partition_pooled(ctx: KernelContext, rows: np.ndarray, flat: np.ndarray, n: int) -> list[Any]:
    """A stable counting partition on the CPU whose outputs are consecutive slices of one
    `ctx.empty` array of all the rows, in partition order.

    Fresh memory costs a page fault per page on first write: compressing into new arrays
    measured 1.4-1.6x this kernel's time for 256-byte rows, and up to 1.8x for 4- and 8-byte
    rows once malloc maps large blocks fresh. One pooled array serves the small parts too (a
    part under the pool's minimum would come from malloc). The positions of every part are
    found first (`flatnonzero`, 8 bytes per row in all), which gives each slice's bounds; a
    `take` per part then fills its slice in C order (mode="clip" writes straight into `out`,
    where "raise" would go through a temporary copy; the positions are in range anyway).
    Large partitions deal the parts out to the session's intra-op threads, both passes
    (`equal`, `flatnonzero` and `take` release the GIL; measured on 1e6 rows, two threads
    take 0.60x the time of one for 4 parts of int32 and 0.72x for 8 parts of int64).
    """
    threads = 1
    if flat.size >= _PARALLEL_PARTITION_ROWS:
        threads = min(ctx.intra_op_threads, n)
    masks = [ctx.empty(flat.shape, np.bool_) for _ in range(threads)]
    positions: list[Any] = [None] * n

    def find(k: int) -> None:
        for i in range(k, n, threads):
            np.equal(flat, i, out=masks[k])
            positions[i] = np.flatnonzero(masks[k])

    ctx.parallel_for(find, threads)
    out, source, target = _pooled_rows(ctx, rows, flat.size)
    bounds = np.cumsum([0] + [p.size for p in positions]).tolist()
    if out.size:

        def fill(k: int) -> None:
            for i in range(k, n, threads):
                at = positions[i]
                np.take(source, at, axis=0, out=target[bounds[i] : bounds[i + 1]], mode="clip")

        ctx.parallel_for(fill, threads)
    return [out[bounds[i] : bounds[i + 1]] for i in range(n)]


def _pooled_rows(ctx: KernelContext, rows: np.ndarray, n: int) -> tuple[Any, Any, Any]:
    """(out, source, target): a `ctx.empty` array shaped as `rows`, and the row views
    (`_row_view`) of `rows` and of it that `take` moves rows between; the views are None when
    there is nothing to move."""
    out = ctx.empty(rows.shape, rows.dtype)
    if not out.size:
        return out, None, None
    extra = rows.shape[1:]
    return out, _row_view(np.ascontiguousarray(rows), n, extra), _row_view(out, n, extra)


def _partition_by_sort(ctx: KernelContext, rows: Any, flat: Any, n: int) -> list[Any]:
    """The rows in the order of a stable argsort of their partitions, split by counts; on
    the CPU into one `ctx.empty` array (pooled memory, as the counting partition)."""
    xp = ctx.xp
    if xp is np:
        # numpy's stable sort of 16-bit keys is a radix sort.
        keys = flat.astype(np.uint16) if n <= 1 << 16 else flat
        order = np.argsort(keys, kind="stable")
    else:
        order = xp.argsort(flat)  # cupy's argsort is always stable (and takes no `kind`)
    counts = _to_host(xp, xp.bincount(flat, minlength=n)).tolist()
    if xp is np and np.dtype(rows.dtype).kind != "O" and rows.size:
        grouped, source, target = _pooled_rows(ctx, rows, flat.size)
        np.take(source, order, axis=0, out=target, mode="clip")
    else:
        grouped = rows.take(order, axis=0)
    bounds = np.cumsum([0] + counts).tolist()
    return [grouped[bounds[i] : bounds[i + 1]] for i in range(n)]


# -- DynamicStitch: shape function -------------------------------------------------------------


def _negative_index_message(list_index: int, flat_position: int, value: int) -> str:
    # TF names the position inside the offending tensor only; we add which tensor and value.
    return (
        f"indices[{flat_position}] is out of range (indices list element {list_index} "
        f"holds {value})"
    )


def stitch_shape(
    indices: list[TensorShape], data: list[TensorShape], constants: list[np.ndarray | None]
) -> TensorShape:
    """The output shape of DynamicStitch: `[max(indices) + 1] + constant`, where
    data[i].shape = indices[i].shape + constant for every i.

    The first dim is known when every index tensor is a known constant; those are checked
    (no negative index, a row count that fits in int32).
    """
    extra = TensorShape(None)
    extra_from = None
    for m, (i_shape, d_shape) in enumerate(zip(indices, data)):
        if i_shape.rank is None:
            continue
        message = (
            f"data[{m}].shape = {_shape_text_of(d_shape)} does not start with indices[{m}].shape "
            f"= {_shape_text_of(i_shape)}"
        )
        _check_prefix(d_shape, i_shape, message)
        if d_shape.rank is None:
            continue
        rest = TensorShape(d_shape.dims[i_shape.rank :])
        if not extra.is_compatible_with(rest):
            raise InvalidArgumentError(
                f"Need data[{extra_from[0]}].shape[{extra_from[1]}:] = data[{m}].shape"
                f"[{i_shape.rank}:], got data[{extra_from[0]}].shape = {extra_from[2]}, "
                f"data[{m}].shape = {_shape_text_of(d_shape)}"
            )
        if extra_from is None:
            extra_from = (m, i_shape.rank, _shape_text_of(d_shape))
        extra = extra.merge_with(rest)
    first: int | None = None
    if all(c is not None for c in constants):
        max_index = -1
        for m, value in enumerate(constants):
            flat = value.reshape(-1)
            if flat.size == 0:
                continue
            low = int(flat.min())
            if low < 0:
                at = int(np.argmax(flat < 0))
                raise InvalidArgumentError(_negative_index_message(m, at, int(flat[at])))
            max_index = max(max_index, int(flat.max()))
        first = _checked_rows(max_index)
    if extra.rank is None:
        return TensorShape(None)
    return TensorShape([first]).concatenate(extra)


def _checked_rows(max_index: int) -> int:
    rows = max_index + 1
    if rows > _INT32_MAX:
        raise InvalidArgumentError(
            f"DynamicStitch: the output would have {rows} rows (max index {max_index}), more "
            f"than an int32 row count holds ({_INT32_MAX})"
        )
    return rows


def _dynamic_stitch_shape(ctx: InferenceContext) -> TensorShape:
    n = ctx.attr("N")
    shapes = ctx.input_shapes
    constants = [ctx.constant_value(i) for i in range(n)]
    return stitch_shape(list(shapes[:n]), list(shapes[n:]), constants)


# -- DynamicStitch: kernel ---------------------------------------------------------------------


def _dynamic_stitch_kernel(ctx: KernelContext, indices: list[Any], data: list[Any]) -> Any:
    """merged[indices[m][i, ..., j], ...] = data[m][i, ..., j, ...]; the last writer wins."""
    xp = ctx.xp
    if len(indices) != len(data):
        raise ctx.invalid_argument(
            f"DynamicStitch needs as many data tensors as index tensors; got {len(indices)} "
            f"and {len(data)}"
        )
    d0, i0 = data[0], indices[0]
    extra = d0.shape[i0.ndim :]
    for m, (idx, values) in enumerate(zip(indices, data)):
        if values.shape[: idx.ndim] != idx.shape:
            raise ctx.invalid_argument(
                f"data[{m}].shape = {_shape_text(values.shape)} does not start with "
                f"indices[{m}].shape = {_shape_text(idx.shape)}"
            )
        if values.shape[idx.ndim :] != extra:
            raise ctx.invalid_argument(
                f"Need data[0].shape[{i0.ndim}:] = data[{m}].shape[{idx.ndim}:], got "
                f"data[0].shape = {_shape_text(d0.shape)}, data[{m}].shape = "
                f"{_shape_text(values.shape)}, indices[0].shape = {_shape_text(i0.shape)}, "
                f"indices[{m}].shape = {_shape_text(idx.shape)}"
            )
    flats = [idx.reshape(-1) for idx in indices]
    cpu = ctx.device.device_type == "CPU"
    # The windowed scatter needs every index tensor in ascending order (as partitions of
    # positions are); a sorted tensor's bounds are its ends, so checking the order replaces
    # the min/max passes until one tensor turns out unsorted. Stitches that move less than
    # a cache's worth gain nothing from windows and skip the check.
    moved = sum(int(v.nbytes) for v in data)
    ordered = cpu and np.dtype(d0.dtype).kind != "O" and moved >= _STITCH_WINDOWED_BYTES
    max_index = -1
    for m, flat in enumerate(flats):
        if flat.size == 0:
            continue
        if ordered and flat.size > 1 and not bool((flat[1:] >= flat[:-1]).all()):
            ordered = False
        if ordered:
            low, high = int(flat[0]), int(flat[-1])
        else:
            low, high = (int(v) for v in _to_host(xp, xp.stack([flat.min(), flat.max()])))
        if low < 0:
            at = int(xp.argmax(flat < 0))
            value = int(_to_host(xp, flat[at : at + 1])[0])
            raise ctx.invalid_argument(_negative_index_message(m, at, value))
        max_index = max(max_index, high)
    try:
        rows = _checked_rows(max_index)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    if not cpu:
        # Simulated GPUs run this path too, over the strict cupy-like test double.
        return _stitch_by_last_writer(xp, rows, extra, flats, data, d0.dtype)
    if np.dtype(d0.dtype).kind == "O":
        return _stitch_objects(rows, extra, flats, data, d0.dtype)
    return _stitch_scatter(ctx, rows, extra, flats, data, d0.dtype, ordered)


def _row_view(array: np.ndarray, n: int, extra: tuple[int, ...]) -> np.ndarray:
    """`array` (C-contiguous, not object, n > 0 rows of non-zero size) as a 1-D array of n
    rows: fixed-size void items when rows have dims (numpy moves each with one copy)."""
    rows = array.reshape((n,) + extra)
    if not extra:
        return rows
    row_bytes = rows.itemsize * (rows.size // n)
    return rows.reshape(n, -1).view(np.dtype((np.void, row_bytes))).reshape(n)


def _stitch_objects(
    rows: int, extra: tuple[int, ...], flats: list[np.ndarray], data: list[np.ndarray], dtype: Any
) -> np.ndarray:
    # numpy assigns a 1-D integer index in order, so the last occurrence of a repeated index
    # wins within a tensor; tensors are written in list order.
    out = _zeros(np, (rows,) + extra, dtype)
    for flat, values in zip(flats, data):
        if flat.size:
            out[flat] = values.reshape((flat.size,) + extra)
    return out


# Output rows are written window by window: zero-fill a window (a sequential write that brings
# its lines into cache), then `put` every tensor's rows that land in it. About 1 MiB keeps a
# window in L2; a whole-output scatter instead misses the cache once per row and tensor.
_STITCH_WINDOW_BYTES = 1 << 20
# Below this many bytes of data, a stitch stays in the last-level cache anyway.
_STITCH_WINDOWED_BYTES = 16 << 20


def _stitch_scatter(
    ctx: KernelContext,
    rows: int,
    extra: tuple[int, ...],
    flats: list[np.ndarray],
    data: list[np.ndarray],
    dtype: Any,
    ordered: bool,
) -> np.ndarray:
    """DynamicStitch on the CPU into `ctx.empty` memory; rows no index names become zeros.

    `put` writes in index order, so the last occurrence of a repeated index wins within a
    tensor; tensors are written in list order. With every index tensor ascending
    (`ordered`), the windows keep both: a repeated index lands in one window, whose tensors
    are written in list order too. Windows never share an output row, so the session's
    intra-op threads take contiguous runs of them (`put` on void rows releases the GIL;
    measured on 1e6 rows over 4 tensors, two threads take 0.71x the time of one for 64-byte
    rows and 0.76x for 256-byte rows).
    """
    out = ctx.empty((rows,) + extra, dtype)
    if out.size == 0:
        return out
    target = _row_view(out, rows, extra)
    sources = [
        _row_view(np.ascontiguousarray(values), flat.size, extra) if flat.size else None
        for flat, values in zip(flats, data)
    ]
    # `put` moves a void item with one copy; numpy's 1-D fancy assignment is faster for
    # scalars. Both write in index order.
    write = target.put if extra else target.__setitem__
    row_bytes = out.nbytes // rows
    window = max(1, _STITCH_WINDOW_BYTES // row_bytes)
    if not ordered or rows <= window:
        out.fill(0)
        for flat, source in zip(flats, sources):
            if flat.size:
                write(flat, source)
        return out
    bounds = list(range(0, rows, window)) + [rows]
    edges = np.array(bounds, dtype=np.int64)
    # cuts[m][w]: where window w starts in the (ascending) index tensor m.
    cuts = [np.searchsorted(flat, edges).tolist() for flat in flats]
    windows = len(bounds) - 1
    threads = min(ctx.intra_op_threads, windows)

    def run(k: int) -> None:
        for w in range(windows * k // threads, windows * (k + 1) // threads):
            lo, hi = bounds[w], bounds[w + 1]
            out[lo:hi] = 0
            for flat, source, cut in zip(flats, sources, cuts):
                a, b = cut[w], cut[w + 1]
                if a < b:
                    write(flat[a:b], source[a:b])

    ctx.parallel_for(run, threads)
    return out


def _stitch_by_last_writer(
    xp: Any, rows: int, extra: tuple[int, ...], flats: list[Any], data: list[Any], dtype: Any
) -> Any:
    """Deterministic stitch for devices whose scatter has no defined winner (cupy): each row
    takes the value of its last writer (the largest position in list-then-C order)."""
    total = sum(int(f.size) for f in flats)
    # Rows of no elements (an extra dim of 0) need no writer table: its row-sized scratch
    # could be far larger than the (empty) output.
    if total == 0 or rows == 0 or 0 in extra:
        return _zeros(xp, (rows,) + extra, dtype)
    if total > _INT32_MAX:
        raise InvalidArgumentError(
            f"DynamicStitch: {total} indices in all, more than int32 positions can number"
        )
    # The output first: when it cannot be allocated, fail before filling row-sized scratch.
    out = xp.empty((rows,) + extra, dtype=dtype)
    positions = xp.concatenate(flats)
    writer = xp.full(rows, -1, dtype=np.int32)
    xp.maximum.at(writer, positions, xp.arange(total, dtype=np.int32))
    values = xp.concatenate([d.reshape((int(f.size),) + extra) for f, d in zip(flats, data)])
    xp.take(values, xp.maximum(writer, 0), axis=0, out=out)
    unnamed = writer < 0
    if bool(unnamed.any()):
        out[unnamed] = 0
    return out


# -- op definitions and registration -----------------------------------------------------------

DYNAMIC_PARTITION = OpDef(
    "DynamicPartition",
    inputs=["data: T", "partitions: int32"],
    outputs=["outputs: num_partitions * T"],
    attrs=["num_partitions: int >= 1", "T: type"],
    shape_fn=_dynamic_partition_shape,
    doc="""Partitions `data` into `num_partitions` tensors using indices from `partitions`.

For each index tuple js of size partitions.ndim, the slice data[js, ...] becomes part of
outputs[partitions[js]], in lexicographic order of js:
outputs[i].shape = [sum(partitions == i)] + data.shape[partitions.ndim:].
data.shape must start with partitions.shape; every partition value must be in
[0, num_partitions) (checked on every device, and at construction for a constant).""",
)

DYNAMIC_STITCH = OpDef(
    "DynamicStitch",
    inputs=["indices: N * int32", "data: N * T"],
    outputs=["merged: T"],
    attrs=["N: int >= 1", "T: type"],
    shape_fn=_dynamic_stitch_shape,
    doc="""Interleaves the values of the `data` tensors into one tensor:
merged[indices[m][i, ..., j], ...] = data[m][i, ..., j, ...].

data[m].shape must be indices[m].shape + a constant row shape; merged.shape is
[max(indices) + 1] + that row shape. A repeated index takes its last value (list order, then
C order); rows no index names are zeros. Indices must not be negative.""",
)

PARALLEL_DYNAMIC_STITCH = OpDef(
    "ParallelDynamicStitch",
    inputs=["indices: N * int32", "data: N * T"],
    outputs=["merged: T"],
    attrs=["N: int >= 1", "T: type"],
    shape_fn=_dynamic_stitch_shape,
    doc="""DynamicStitch as TF's embedding_lookup writes it (TF's kernel splits the work over
threads): merged[indices[m][i, ..., j], ...] = data[m][i, ..., j, ...].

The same shapes, zeros and checks as DynamicStitch. TF leaves the value of a repeated index
undefined; here it is its last occurrence (list order, then C order), as in DynamicStitch.""",
)

DynamicPartition = register_op(DYNAMIC_PARTITION)
DynamicStitch = register_op(DYNAMIC_STITCH)
ParallelDynamicStitch = register_op(PARALLEL_DYNAMIC_STITCH)

# cupy holds neither strings nor ml_dtypes' bfloat16: those stay on the CPU.
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]

# Trusted: these kernels never write into their inputs nor return views of them, and the
# suite checks their outputs against the shape functions (tests run them under
# SessionConfig(check_kernel_outputs=True)), so sessions skip the per-run output checks.
register_kernel("DynamicPartition", "CPU", _dynamic_partition_kernel, trusted=True)
register_kernel(
    "DynamicPartition", "GPU", _dynamic_partition_kernel, type_constraints={"T": _GPU_TYPES},
    trusted=True,
)  # fmt: skip
register_kernel("DynamicStitch", "CPU", _dynamic_stitch_kernel, trusted=True)
register_kernel(
    "DynamicStitch", "GPU", _dynamic_stitch_kernel, type_constraints={"T": _GPU_TYPES},
    trusted=True,
)  # fmt: skip
# ParallelDynamicStitch runs DynamicStitch's kernels (already multithreaded on large stitches).
register_kernel("ParallelDynamicStitch", "CPU", _dynamic_stitch_kernel, trusted=True)
register_kernel(
    "ParallelDynamicStitch", "GPU", _dynamic_stitch_kernel, type_constraints={"T": _GPU_TYPES},
    trusted=True,
)  # fmt: skip


# -- gradients ---------------------------------------------------------------------------------


def _dynamic_partition_grad(op: Any, *grads: Any) -> list[Any]:
    """TF's _DynamicPartitionGrads: the partitions' gradients stitched back where their rows
    came from. The positions of data's rows (a Range shaped as `partitions`) are partitioned
    as the data was, and ParallelDynamicStitch puts each partition's gradient at them; every
    position occurs once, so nothing is overwritten. None for partitions."""
    scope = current_scope(op.graph)
    data, partitions = op.inputs
    p_shape = partitions.shape
    count: Any = p_shape.num_elements()
    target: Any = None
    if count is None:
        shape = Shape(scope, partitions).output
        count = Prod(scope, shape, 0).output
        target = shape
    elif p_shape.rank != 1:
        target = np.array(p_shape.dims, dtype=np.int32)
    positions = Range(scope, np.int32(0), count, np.int32(1)).output
    if target is not None:
        positions = Reshape(scope, positions, target).output
    parts = DynamicPartition(scope, positions, partitions, num_partitions=len(grads)).outputs
    stitched = ParallelDynamicStitch(scope, list(parts), list(grads)).output
    d_shape = data.shape
    full = np.array(d_shape.dims, np.int32) if d_shape.is_fully_defined() else Shape(scope, data)
    return [Reshape(scope, stitched, full).output, None]


def _distinct_indices(indices: list[Any]) -> bool:
    """Whether no index can repeat across the stitch's `indices`: they are distinct outputs of
    one DynamicPartition of a Range with a non-zero step (possibly reshaped), as the positions
    of embedding_lookup and of DynamicPartition's gradient are."""
    first = indices[0].op
    if first.type != "DynamicPartition" or any(t.op is not first for t in indices):
        return False
    if len({t.index for t in indices}) != len(indices):
        return False
    source = first.inputs[0]
    while source.op.type in ("Reshape", "Identity"):
        source = source.op.inputs[0]
    if source.op.type != "Range":
        return False
    delta = source.op.inputs[2]
    return delta.op.type == "Const" and bool(np.all(delta.op.get_attr("value") != 0))


def _dynamic_stitch_grad(op: Any, grad: Any) -> list[Any]:
    """The gradient of data[m] is the output's gradient gathered at indices[m], but only
    where that position won its index (a repeated index takes its last occurrence, so the
    occurrences it overwrote get zeros; TF 2.21 gives them the winner's gradient as well).
    Winners: the positions 0, 1, ... of all indices (list order, then C order), stitched as
    the data was; a position wins when its index's stitched position is itself. Indices that
    cannot repeat (`_distinct_indices`) skip that and gather directly, as TF does. None for
    the indices."""
    scope = current_scope(op.graph)
    n = op.get_attr("N")
    indices = list(op.inputs[:n])
    if _distinct_indices(indices):
        return [None] * n + [GatherV2(scope, grad, idx, 0).output for idx in indices]
    positions = []
    offset: Any = 0
    for idx in indices:
        size: Any = idx.shape.num_elements()
        if size is None:
            size = Size(scope, idx).output
        end = offset + size if isinstance(offset, int) and isinstance(size, int) else (
            AddV2(scope, _int32(offset), _int32(size)).output
        )  # fmt: skip
        flat = Range(scope, _int32(offset), _int32(end), np.int32(1)).output
        shape = idx.shape
        if shape.rank != 1:
            known = shape.is_fully_defined()
            target = np.array(shape.dims, np.int32) if known else Shape(scope, idx)
            flat = Reshape(scope, flat, target).output
        positions.append(flat)
        offset = end
    winner = DynamicStitch(scope, indices, positions).output
    values = []
    for idx, at in zip(indices, positions):
        won = Equal(scope, GatherV2(scope, winner, idx, 0), at).output
        ids = SelectV2(scope, won, idx, np.int32(-1)).output
        values.append(gather_drop_negatives(scope, grad, ids))
    return [None] * n + values


def _int32(value: Any) -> Any:
    return np.int32(value) if isinstance(value, int) else value


register_gradient("DynamicPartition")(_dynamic_partition_grad)
register_gradient("DynamicStitch")(_dynamic_stitch_grad)
register_gradient("ParallelDynamicStitch")(_dynamic_stitch_grad)
