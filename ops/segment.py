"""UnsortedSegmentSum and ScatterNd: op definitions, shape functions, CPU and GPU kernels.

Semantics are TensorFlow 2.21's CPU kernels (tf.math.unsorted_segment_sum, tf.scatter_nd):

- UnsortedSegmentSum: output[j, ...] = sum of data[i..., ...] over the positions i... with
  segment_ids[i...] == j; output.shape = [num_segments] + data.shape[rank(segment_ids):].
  Negative segment ids are dropped (TF 2.21's CPU kernel skips them); an id >= num_segments is
  an error naming the first one in C order. `num_segments` is a scalar (host memory on GPUs).
- ScatterNd: zeros(shape), then output[indices[i..., :]] += updates[i..., ...] for every index
  vector, in C order; a repeated index vector adds up (bool updates are or-ed, strings are
  concatenated in order, as TF's kernels combine them). `bad_indices_policy` "", "DEFAULT" and
  "ERROR" make an out-of-range (or negative) index vector an error naming the first one;
  "IGNORE" skips such vectors. `shape` lives in host memory on GPUs.

Floating-point sums are taken one addition at a time, in C order of the positions, starting
from +0.0, as TF's CPU kernel does: the results are bit-identical to TF's (float16 and
bfloat16 included, whose rounding at every step is visible). Integers wrap around.

Deliberate differences from TF:

- Every device gives the CPU kernel's behaviour: out-of-range ids and index vectors are errors
  on GPUs too (TF's GPU kernels drop them), and sums of floats on GPUs have the CPU's values up
  to the order of the additions (atomics).
- What is knowable when the node is built fails there: a negative constant `num_segments` or
  `shape`, constant segment ids or indices out of range of a constant `num_segments` or
  `shape`, index depth above rank(shape), updates whose static shape cannot fit (TF's shape
  functions check only some of these; its kernels the rest).
- ScatterNd's 1-D `indices` are one index vector, as TF's shape function and GatherNd read
  them (TF's kernel reads them as a column of scalars and then refuses every shape its shape
  function accepts); index vectors of length 0 address the whole output (each update is added
  to all of it), and slices of zero elements are fine: TF's kernel refuses both ("Indices and
  updates specified for empty output"), which GatherNd's gradient needs.
- int16 index tensors run everywhere (TF's OpDef allows them for ScatterNd but no kernel).

CPU kernels write into pooled memory (`ctx.empty`), zeroed with one memset, then move rows with
`put`s of fixed-size void rows: a first put gives every row one of its values (the +0.0 taken on
the way, in cache-sized chunks), and only the rows of repeated ids are then rebuilt in order,
one vectorised round per occurrence (the k-th occurrence of every repeated id in round k, found
with a first-writer table over the ids), until fewer than `_FEW_GROUPS` ids repeat further;
those are summed sequentially with one `accumulate` each. Zeroing, the +0.0 and the first put
split over the intra-op threads when large. Densifying 1e5 rows of 64 float32 into a
[1e6, 64] table (an embedding gradient) measured 1.08x the same algorithm written in plain
numpy over a reused buffer without the +0.0 (one intra-op thread; np.add.at: 10-25x;
a stable sort with np.add.reduceat: 7x). GPU kernels use cupy's `add.at`
(`cupyx.scatter_add`, CUDA atomics), which has no int64, int8, int16, uint8, uint16, bool or
complex: int64 adds as uint64 (the same bits), complex as pairs of floats, narrow integers in
32-bit accumulators (wrapping alike), bool with `maximum.at`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minigraph import (
    InvalidArgumentError,
    KernelContext,
    OpDef,
    ResourceExhaustedError,
    TensorShape,
    current_scope,
    dtypes,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext
from minigraph.tensor_shape import MAX_DIM, check_rank
from ops.array import ExpandDims

__all__ = ["UnsortedSegmentSum", "ScatterNd", "gather_drop_negatives"]

# TF 2.21's allowed types, in its order, less the quantized ones minigraph does not have.
_SEGMENT_TYPES = [
    "float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "int64", "bfloat16",
    "uint16", "complex128", "float16", "uint32", "uint64",
]  # fmt: skip
_INDEX_TYPES = ["int16", "int32", "int64"]
_POLICY_ATTR = 'bad_indices_policy: {"", "DEFAULT", "ERROR", "IGNORE"} = ""'

# When this few ids are still repeated after a round, the rest of their occurrences are summed
# one id at a time (one `accumulate` each) instead of one round per occurrence.
_FEW_GROUPS = 128
# The first-writer table has one entry per output row; above this many bytes (and the output's
# size), the ids are first numbered densely (a sort) so that the table has one per distinct id.
_OWNER_TABLE_BYTES = 64 << 20
# From this many bytes, zeroing, the +0.0 pass and the first put are split over the intra-op
# threads (fill, add and put release the GIL; below this, handing work over costs more).
_PARALLEL_BYTES = 4 << 20
# The chunk of values that takes the +0.0 on its way to the first put (stays in L2).
_CHUNK_BYTES = 256 << 10


# -- messages ----------------------------------------------------------------------------------


def _shape_text(shape: Any) -> str:
    """A shape as TF's TensorShape::DebugString writes it: `[5,2]`, `[?,3]`, `<unknown>`."""
    if isinstance(shape, TensorShape):
        if shape.rank is None:
            return "<unknown>"
        shape = shape.dims
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _position(shape: tuple[int, ...], flat: int) -> str:
    """TF's SliceDebugString: `[1,2]` for flat position `flat` of `shape`, '' for a scalar."""
    if not shape:
        return ""
    return "[" + ",".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def _to_host(xp: Any, array: Any) -> np.ndarray:
    return array if xp is np else xp.asnumpy(array)


def _allocate(ctx: KernelContext, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """`ctx.empty(shape, dtype)`, or TF's out-of-memory error for a tensor that cannot be."""
    try:
        return ctx.empty(shape, dtype)
    except (MemoryError, ValueError):
        name = dtypes.as_dtype(dtype).name
        raise ResourceExhaustedError(
            f"OOM when allocating tensor with shape{_shape_text(shape)} and type {name} on "
            f"{ctx.device.name}",
            ctx.node_name,
            ctx.op_type,
        ) from None


def _zeros(ctx: KernelContext, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """A zero-filled output: pooled memory on the host, zeroed bytewise (a memset, 2.5x
    faster than `fill(0)` for float32; large ones split over the intra-op threads, as `fill`
    releases the GIL), b"" for strings."""
    if dtype.kind == "O":
        return np.full(shape, b"", dtype=object)
    out = _allocate(ctx, shape, dtype)
    if ctx.xp is not np:
        out.fill(0)
        return out
    raw = out.reshape(-1).view(np.uint8)
    bounds = _blocks(ctx, raw.size, raw.size)

    def zero(k: int) -> None:
        raw[bounds[k] : bounds[k + 1]].fill(0)

    ctx.parallel_for(zero, len(bounds) - 1)
    return out


def _blocks(ctx: KernelContext, count: int, nbytes: int) -> list[int]:
    """Bounds of contiguous blocks of `count` items for the intra-op threads: one block per
    thread when the work moves at least `_PARALLEL_BYTES`, else a single block."""
    threads = ctx.intra_op_threads if nbytes >= _PARALLEL_BYTES else 1
    threads = max(1, min(threads, count))
    return [count * k // threads for k in range(threads + 1)]


# -- UnsortedSegmentSum: op definition and shape function ------------------------------------

UNSORTED_SEGMENT_SUM = OpDef(
    "UnsortedSegmentSum",
    inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
    outputs=["output: T"],
    attrs=[
        "T: {" + ", ".join(_SEGMENT_TYPES) + "}",
        "Tindices: {int16, int32, int64}",
        "Tnumsegments: {int32, int64} = int32",
    ],
    shape_fn=lambda ctx: _unsorted_segment_sum_shape(ctx),
    doc="""Computes the sum along segments of a tensor.

output[j, ...] = sum(data[i..., ...] for every position i... with segment_ids[i...] == j);
segment_ids.shape must be a prefix of data.shape, and
output.shape = [num_segments] + data.shape[rank(segment_ids):]. Segments no id names are 0.
Negative ids are dropped; an id >= num_segments is an error. num_segments is a scalar (host
memory on every device). Sums are taken in C order of the positions, as TF's CPU kernel.""",
)


def _num_segments_value(value: np.ndarray | None) -> int | None:
    if value is None or value.ndim != 0:
        return None
    n = int(value)
    if n < 0:
        raise InvalidArgumentError(f"Input num_segments == {n} must not be negative.")
    return n


def _first_out_of_range(xp: Any, flat: Any, limit: int) -> int | None:
    """Position of the first id >= limit in the 1-D `flat` (negative ids are allowed)."""
    if flat.size == 0 or int(flat.max()) < limit:
        return None
    return int(xp.argmax(flat >= limit))


def _unsorted_segment_sum_shape(ctx: InferenceContext) -> TensorShape:
    data, ids, num = ctx.input_shapes
    num.with_rank(0)
    n = _num_segments_value(ctx.constant_value(2))
    if ids.rank is None:
        return TensorShape(None)
    if data.rank is not None and (
        data.rank < ids.rank or not TensorShape(data.dims[: ids.rank]).is_compatible_with(ids)
    ):
        raise InvalidArgumentError(
            f"data.shape = {_shape_text(data)} does not start with segment_ids.shape = "
            f"{_shape_text(ids)}"
        )
    constant_ids = ctx.constant_value(1)
    if constant_ids is not None and n is not None:
        flat = constant_ids.reshape(-1)
        bad = _first_out_of_range(np, flat, n)
        if bad is not None:
            raise InvalidArgumentError(
                f"segment_ids{_position(constant_ids.shape, bad)} = {int(flat[bad])} is out of "
                f"range [0, {n})"
            )
    if data.rank is None:
        return TensorShape(None)
    out = TensorShape([n]).concatenate(TensorShape(data.dims[ids.rank :]))
    _check_elements(out)
    return out


def _check_elements(shape: TensorShape) -> None:
    known = [d for d in shape.dims if d is not None]
    if 0 not in known and math.prod(known) > MAX_DIM:
        raise InvalidArgumentError(
            f"the output shape {_shape_text(shape)} has more than 2**63 - 1 elements"
        )


# -- UnsortedSegmentSum: kernel ----------------------------------------------------------------


def _unsorted_segment_sum_kernel(
    ctx: KernelContext, data: Any, segment_ids: Any, num_segments: Any, **_: Any
) -> Any:
    """output[segment_ids[i...]] += data[i...] over every position, negative ids dropped."""
    xp = ctx.xp
    if num_segments.ndim != 0:
        raise ctx.invalid_argument(
            f"num_segments should be a scalar, not shape {_shape_text(num_segments.shape)}"
        )
    try:
        n = _num_segments_value(num_segments)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    ids_shape = segment_ids.shape
    if data.shape[: len(ids_shape)] != ids_shape:
        raise ctx.invalid_argument(
            f"data.shape = {_shape_text(data.shape)} does not start with segment_ids.shape = "
            f"{_shape_text(ids_shape)}"
        )
    inner = data.shape[len(ids_shape) :]
    try:
        check_rank(1 + len(inner), "the output")
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    flat = segment_ids.reshape(-1)
    bad = _first_out_of_range(xp, flat, n)
    if bad is not None:
        value = int(_to_host(xp, flat[bad : bad + 1])[0])
        raise ctx.invalid_argument(
            f"segment_ids{_position(ids_shape, bad)} = {value} is out of range [0, {n})"
        )
    width = math.prod(inner)
    values = data.reshape(flat.size, width)
    if flat.size and int(flat.min()) < 0:
        keep = xp.flatnonzero(flat >= 0)  # TF's kernel skips negative ids
        flat, values = flat[keep], values[keep]
    dtype = np.dtype(data.dtype)
    out = _zeros(ctx, (n,) + inner, dtype)
    if out.size and flat.size:
        with np.errstate(all="ignore"):  # inf - inf is NaN, as in TF: no warnings
            if xp is np:
                _scatter_rows(ctx, out.reshape(n, width), flat, values, np.add)
            else:
                _scatter_rows_gpu(xp, out.reshape(n, width), flat, values)
    return out


# -- the CPU scatter ---------------------------------------------------------------------------


def _row_view(array: np.ndarray) -> np.ndarray:
    """A C-contiguous [k, width] array (width > 0, not object) as k fixed-size void items, so
    that `put` and `take` move each row with one copy; 1-D when width is 1."""
    k, width = array.shape
    if width == 1:
        return array.reshape(k)
    return array.view(np.dtype((np.void, width * array.itemsize))).reshape(k)


def _scatter_rows(
    ctx: KernelContext, out: np.ndarray, rows: np.ndarray, values: np.ndarray, combine: np.ufunc
) -> None:
    """out[rows[i]] = combine(out[rows[i]], values[i]) for i in order, into the zero-filled
    C-contiguous [R, width] `out` (rows in [0, R), values [len(rows), width], width > 0).

    Each row ends as its values combined one at a time, in order, exactly as a loop over i
    would: one `put` gives every row one of its values (split over the intra-op threads when
    large); rows with repeated ids are then rebuilt,
    round k writing (k = 0) or combining the k-th occurrence of each such id; when fewer than
    `_FEW_GROUPS` ids repeat further, each finishes with one sequential `accumulate`.
    A float sum starts from +0.0 (as TF's): adding 0 to each row's first value turns -0.0
    into +0.0, which is all 0 + x changes.
    """
    objects = out.dtype.kind == "O"
    values = np.ascontiguousarray(values)
    k, width = values.shape
    # Blocks of positions for the intra-op threads (the passes over all of `values`).
    bounds = [0, k] if objects else _blocks(ctx, k, values.nbytes)
    plus_zero = combine is np.add and (out.dtype.kind in "fc" or out.dtype.name == "bfloat16")
    zero = values.dtype.type(0)
    # The +0.0 goes into a cache-sized scratch on the way to the put: the values are read from
    # memory once, where a separate pass would write and re-read all of them (1.15x the time).
    chunk = max(1, _CHUNK_BYTES // max(1, values.itemsize * width))
    keys = rows
    owner_type = np.int32 if k <= np.iinfo(np.int32).max else np.int64
    table = out.shape[0]
    if table * np.dtype(owner_type).itemsize > max(_OWNER_TABLE_BYTES, out.nbytes):
        # Few ids over a huge output of narrow rows: number the distinct ids densely.
        _, keys = np.unique(rows, return_inverse=True)
        table = int(keys.max()) + 1
    owner = ctx.empty((table,), owner_type)
    positions = np.arange(k, dtype=owner_type)
    target = out if objects else _row_view(out)
    source = values if objects else _row_view(values)

    def write(at: np.ndarray, rows_: np.ndarray) -> None:
        """The first value of each of the (distinct) rows `rows_`: values[at]."""
        if objects:
            out[rows_] = values[at]
        elif plus_zero:
            first_values = values.take(at, axis=0)
            np.add(first_values, zero, out=first_values)
            target.put(rows_, _row_view(first_values))
        else:
            target.put(rows_, source.take(at))

    def put_block(b: int) -> None:
        lo, hi = bounds[b], bounds[b + 1]
        if objects:
            out[rows[lo:hi]] = values[lo:hi]
        elif not plus_zero:
            target.put(rows[lo:hi], source[lo:hi])
        else:
            scratch = np.empty((min(chunk, hi - lo), width), values.dtype)
            scratch_rows = _row_view(scratch)
            for a in range(lo, hi, chunk):  # a loop over cache-sized chunks of rows
                m = min(chunk, hi - a)
                np.add(values[a : a + m], zero, out=scratch[:m])
                target.put(rows[a : a + m], scratch_rows[:m])

    owner.put(keys, positions)  # numpy writes in order: each id's last position stays
    last = owner.take(keys) == positions
    # Blocks on several threads may write a repeated id in any order: such rows are rebuilt
    # below anyway; every other row is written once, here.
    ctx.parallel_for(put_block, len(bounds) - 1)
    if bool(last.all()):
        return
    # Every occurrence of a repeated id: the non-last ones and the last ones they lead to.
    repeated = ~last
    repeated[owner.take(keys[repeated])] = True
    rest = np.flatnonzero(repeated)
    first = True
    while rest.size:
        rest_keys = keys.take(rest)
        here = positions[: rest.size]
        owner.put(rest_keys[::-1], here[::-1])  # now each id's first position stays
        leads = owner.take(rest_keys) == here
        at = rest[leads]
        at_rows = rows.take(at)
        if first:
            write(at, at_rows)
        else:
            current = out.take(at_rows, axis=0)
            combine(current, values.take(at, axis=0), out=current)
            if objects:
                out[at_rows] = current
            else:
                target.put(at_rows, _row_view(current))
        rest = rest[~leads]
        first = False
        if rest.size and at.size < _FEW_GROUPS:
            _combine_per_row(out, rows.take(rest), rest, values, combine)
            return


def _combine_per_row(
    out: np.ndarray, rest_rows: np.ndarray, rest: np.ndarray, values: np.ndarray, combine: Any
) -> None:
    """For the few (< _FEW_GROUPS) rows still to be combined with many values each: per row,
    its current value and its remaining values (positions `rest`, ascending) combined in order
    with one `accumulate` (sequential, where `reduce` would sum pairwise)."""
    order = np.argsort(rest_rows, kind="stable")
    grouped = rest_rows[order]
    starts = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1]))).tolist()
    ends = starts[1:] + [grouped.size]
    for a, b in zip(starts, ends):  # a loop over fewer than _FEW_GROUPS rows
        row = int(grouped[a])
        chain = np.concatenate([out[row : row + 1], values.take(rest[order[a:b]], axis=0)])
        if out.dtype.kind == "O":
            out[row] = combine.reduce(chain, axis=0)  # objects: reduce is sequential
        else:
            out[row] = combine.accumulate(chain, axis=0, dtype=out.dtype)[-1]


# -- the GPU scatter ---------------------------------------------------------------------------

# The accumulator dtypes cupy's add.at (cupyx.scatter_add: CUDA atomics) lacks a kernel for, as
# the dtype to add in: narrow integers add in 32 bits and wrap alike when cast back.
_WIDENED = {
    np.dtype(np.int8): np.int32,
    np.dtype(np.int16): np.int32,
    np.dtype(np.uint8): np.uint32,
    np.dtype(np.uint16): np.uint32,
}
_COMPLEX_PARTS = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}


def _scatter_rows_gpu(xp: Any, out: Any, rows: Any, values: Any) -> None:
    """out[rows[i]] += values[i] for every i on a GPU (out zero-filled [R, width], rows in
    range), with cupy's `add.at`; bool is or-ed (as `maximum.at` over int32)."""
    dtype = np.dtype(out.dtype)
    values = xp.ascontiguousarray(values)
    if rows.dtype == np.int16:
        rows = rows.astype(np.int32)
    if dtype == np.int64:
        # CUDA has no atomic add for signed 64-bit integers; two's complement adds the same
        # bits as uint64, which it has.
        xp.add.at(out.view(np.uint64), rows, values.view(np.uint64))
    elif dtype in _COMPLEX_PARTS:
        # No complex atomics: the real and imaginary parts are floats that add independently.
        part = _COMPLEX_PARTS[dtype]
        xp.add.at(out.view(part), rows, values.view(part))
    elif dtype in _WIDENED:
        wide = xp.zeros(out.shape, dtype=_WIDENED[dtype])
        xp.add.at(wide, rows, values.astype(_WIDENED[dtype]))
        out[...] = wide.astype(dtype)
    elif dtype == np.bool_:
        wide = xp.zeros(out.shape, dtype=np.int32)
        xp.maximum.at(wide, rows, values.astype(np.int32))
        out[...] = wide != 0
    else:
        xp.add.at(out, rows, values)


# -- ScatterNd: op definition and shape function -----------------------------------------------

SCATTER_ND = OpDef(
    "ScatterNd",
    inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
    outputs=["output: T"],
    attrs=["T: type", "Tindices: {int16, int32, int64}", _POLICY_ATTR],
    shape_fn=lambda ctx: _scatter_nd_shape(ctx),
    doc="""Scatters `updates` into a new zero tensor of shape `shape` at `indices`.

indices [..., K] holds index vectors into the first K dims of the output; updates has shape
indices.shape[:-1] + shape[K:]. Updates at the same index vector add up (bool: or; strings:
concatenated in order), in C order. Out-of-range (or negative) index vectors are an error on
every device, or skipped with bad_indices_policy="IGNORE". `shape` is in host memory.""",
)


def _shape_from_constant(value: np.ndarray | None, shape_shape: TensorShape) -> TensorShape:
    """The output shape ScatterNd's `shape` input gives: its value when constant, else its
    length (when the vector's size is static) of unknown dims."""
    if value is None:
        if shape_shape.rank is None or shape_shape.dims[0] is None:
            return TensorShape(None)
        return TensorShape([None] * shape_shape.dims[0])
    dims = [int(d) for d in value.reshape(-1).tolist()]
    for d in dims:
        if d < 0:
            raise InvalidArgumentError(f"Dimension {d} must be >= 0")
    return TensorShape(dims)


def _scatter_nd_shape(ctx: InferenceContext) -> TensorShape:
    indices, updates, shape_shape = ctx.input_shapes
    indices.with_rank_at_least(1)
    updates.with_rank_at_least(1)
    shape_shape.with_rank(1)
    output = _shape_from_constant(ctx.constant_value(2), shape_shape)
    if output.rank is not None:
        _check_elements(output)
    if indices.rank is None:
        return output
    outer = indices.rank - 1
    depth = indices.dims[-1]
    if output.rank is not None and depth is not None and depth > output.rank:
        raise InvalidArgumentError(
            f"indices.shape[-1] must be <= rank(shape), but saw indices shape: "
            f"{_shape_text(indices)} and shape: {_shape_text(output)}"
        )
    if updates.rank is not None:
        lead = TensorShape(updates.dims[:outer]) if updates.rank >= outer else None
        if lead is None or not lead.is_compatible_with(indices.dims[:-1]):
            raise InvalidArgumentError(
                f"Dimensions [0,{outer}) of indices[shape={_shape_text(indices)}] = "
                f"{_shape_text(indices.dims[:-1])} must match dimensions [0,{outer}) of "
                f"updates[shape={_shape_text(updates)}] = "
                f"{_shape_text(updates.dims[:outer]) if lead is not None else '<too short>'}"
            )
        if output.rank is not None and depth is not None:
            suffix = TensorShape(output.dims[depth:])
            if not suffix.is_compatible_with(updates.dims[outer:]):
                raise InvalidArgumentError(
                    f"Dimensions [{depth},{output.rank}) of input[shape={_shape_text(output)}] "
                    f"= {_shape_text(suffix)} must match dimensions [{outer},{updates.rank}) of "
                    f"updates[shape={_shape_text(updates)}] = "
                    f"{_shape_text(updates.dims[outer:])}"
                )
    checked = ctx.attr("bad_indices_policy") != "IGNORE"
    if checked and output.is_fully_defined() and depth is not None:
        _check_constant_indices(ctx.constant_value(0), indices, output, depth)
    return output


def _check_constant_indices(
    value: np.ndarray | None, indices: TensorShape, output: TensorShape, depth: int
) -> None:
    """Out-of-range index vectors that are known at construction (constant `indices`, or any
    index vector at all into dims holding no element) are errors there."""
    dims = output.dims
    vectors = TensorShape(indices.dims[:-1]).num_elements()
    if value is None:
        if vectors and math.prod(dims[:depth]) == 0:
            raise InvalidArgumentError(
                f"Indices and updates specified for empty output: indices[shape="
                f"{_shape_text(indices)}] index into dims {_shape_text(dims[:depth])} of shape "
                f"{_shape_text(dims)}, which hold no element"
            )
        return
    rows = value.reshape(math.prod(value.shape[:-1]), depth)
    bad = _first_bad_vector(np, rows, dims[:depth])
    if bad is not None:
        raise InvalidArgumentError(_bad_vector_message(value.shape[:-1], bad, rows, dims, bad))


# -- ScatterNd: kernel -------------------------------------------------------------------------


def _first_bad_vector(xp: Any, rows: Any, dims: tuple[int, ...]) -> int | None:
    """The first row of the [n, depth] index vectors `rows` outside `dims`, or None."""
    mask = _bad_vectors(xp, rows, dims)
    if mask is None or not bool(mask.any()):
        return None
    return int(xp.argmax(mask))


def _bad_vectors(xp: Any, rows: Any, dims: tuple[int, ...]) -> Any:
    """Mask of the index vectors (rows of `rows`) outside `dims`; None when there are none."""
    if rows.shape[0] == 0 or not dims:
        return None
    unsigned = rows.astype(np.int64, copy=False).view(np.uint64)  # negatives become huge
    mask = None
    for k, size in enumerate(dims):  # a loop over the index depth, not over elements
        bad = unsigned[:, k] >= size
        mask = bad if mask is None else mask | bad
    return mask


def _bad_vector_message(
    outer: tuple[int, ...], bad: int, rows: np.ndarray, dims: tuple[int, ...], row: int
) -> str:
    """TF's message for the index vector at flat position `bad` of `outer` (rows[row])."""
    vector = ", ".join(str(v) for v in rows[row].tolist())
    return (
        f"indices{_position(outer, bad)} = [{vector}] does not index into shape {_shape_text(dims)}"
    )


def _scatter_nd_kernel(
    ctx: KernelContext, indices: Any, updates: Any, shape: Any, *, bad_indices_policy: str,
    **_: Any,
) -> Any:  # fmt: skip
    """zeros(shape), then output[indices[i...]] += updates[i...] for every index vector."""
    xp = ctx.xp
    if shape.ndim != 1:
        raise ctx.invalid_argument("Shape must be a vector")
    dims = tuple(int(d) for d in shape.tolist())  # host memory on every device
    for d in dims:
        if d < 0:
            raise ctx.invalid_argument(f"Dimension {d} must be >= 0")
    if indices.ndim < 1:
        raise ctx.invalid_argument(
            f"Indices shape must have rank at least one. Found:{_shape_text(indices.shape)}"
        )
    if updates.ndim < 1:
        raise ctx.invalid_argument(
            f"Updates shape must have rank at least one. Found:{_shape_text(updates.shape)}"
        )
    try:
        check_rank(len(dims), "the output")
        _check_elements(TensorShape(dims))
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    depth = indices.shape[-1]
    outer = indices.shape[:-1]
    if depth > len(dims):
        raise ctx.invalid_argument(
            f"indices.shape[-1] must be <= rank(shape), but saw indices shape: "
            f"{_shape_text(indices.shape)} and shape: {_shape_text(dims)}"
        )
    if updates.shape[: len(outer)] != outer:
        raise ctx.invalid_argument(
            f"Dimensions [0,{len(outer)}) of indices[shape={_shape_text(indices.shape)}] must "
            f"match dimensions [0,{len(outer)}) of updates[shape={_shape_text(updates.shape)}]"
        )
    if updates.shape[len(outer) :] != dims[depth:]:
        raise ctx.invalid_argument(
            f"Dimensions [{depth},{len(dims)}) of input[shape={_shape_text(dims)}] must match "
            f"dimensions [{len(outer)},{updates.ndim}) of updates[shape="
            f"{_shape_text(updates.shape)}]"
        )
    n = math.prod(outer)
    rows_count = math.prod(dims[:depth])
    width = math.prod(dims[depth:])
    vectors = indices.reshape(n, depth)
    if vectors.dtype == np.int16 and xp is not np:
        vectors = vectors.astype(np.int32)
    values = updates.reshape(n, width)
    flat, keep = _flat_rows(ctx, vectors, dims[:depth], bad_indices_policy == "IGNORE")
    if flat is None:
        bad = _first_bad_vector(xp, vectors, dims[:depth])
        raise ctx.invalid_argument(
            _bad_vector_message(outer, bad, _to_host(xp, vectors[bad : bad + 1]), dims, 0)
        )
    if keep is not None:
        values = values[keep]
    dtype = np.dtype(updates.dtype)
    out = _zeros(ctx, dims, dtype)
    if out.size and flat.size:
        target = out.reshape(rows_count, width)
        combine = np.logical_or if dtype == np.bool_ else np.add
        with np.errstate(all="ignore"):
            if xp is np:
                _scatter_rows(ctx, target, flat, values, combine)
            else:
                _scatter_rows_gpu(xp, target, flat, values)
    return out


def _flat_rows(
    ctx: KernelContext, vectors: Any, dims: tuple[int, ...], ignore: bool
) -> tuple[Any, Any]:
    """(row numbers of the index vectors into a [*dims] table, the positions kept or None for
    all); (None, None) when one is out of range and not ignored."""
    xp = ctx.xp
    n, depth = vectors.shape
    if depth == 0:
        return xp.zeros(n, dtype=np.int64), None
    if xp is np and not ignore:
        try:  # checks (negatives included) and flattens in one C pass
            return np.ravel_multi_index(tuple(vectors.T), dims), None
        except ValueError:
            return None, None
    mask = _bad_vectors(xp, vectors, dims)
    keep = None
    if mask is not None and bool(mask.any()):
        if not ignore:
            return None, None
        keep = xp.flatnonzero(~mask)
        vectors = vectors[keep]
    flat = xp.zeros(vectors.shape[0], dtype=np.int64)
    for k, size in enumerate(dims):  # a loop over the index depth, not over elements
        flat = flat * size + vectors[:, k].astype(np.int64)
    return flat, keep


# -- registration ------------------------------------------------------------------------------

UnsortedSegmentSum = register_op(UNSORTED_SEGMENT_SUM)
ScatterNd = register_op(SCATTER_ND)

# cupy holds neither strings nor ml_dtypes' bfloat16: those stay on the CPU.
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]
_GPU_SEGMENT_TYPES = [t for t in _SEGMENT_TYPES if t != "bfloat16"]

# Trusted: both kernels return new arrays of exactly the inferred dtype and shape (never a view
# of an input), and the suite checks that (tests/test_segment_*.py runs them under
# SessionConfig(check_kernel_outputs=True) too).
register_kernel(
    "UnsortedSegmentSum", "CPU", _unsorted_segment_sum_kernel,
    type_constraints={"T": _SEGMENT_TYPES, "Tindices": _INDEX_TYPES}, trusted=True,
)  # fmt: skip
register_kernel(
    "UnsortedSegmentSum", "GPU", _unsorted_segment_sum_kernel,
    type_constraints={"T": _GPU_SEGMENT_TYPES, "Tindices": _INDEX_TYPES},
    host_memory=["num_segments"], trusted=True,
)  # fmt: skip
# int16 indices too, which TF's OpDef allows and its kernels lack (a deliberate difference:
# GatherNd takes int16 indices, and its gradient is a ScatterNd of them).
register_kernel(
    "ScatterNd", "CPU", _scatter_nd_kernel, type_constraints={"Tindices": _INDEX_TYPES},
    trusted=True,
)  # fmt: skip
register_kernel(
    "ScatterNd", "GPU", _scatter_nd_kernel,
    type_constraints={"T": _GPU_TYPES, "Tindices": _INDEX_TYPES}, host_memory=["shape"],
    trusted=True,
)  # fmt: skip


# -- gradients ---------------------------------------------------------------------------------
# TF's rules (math_grad.py's _UnsortedSegmentSumGrad, array_grad.py's _ScatterNdGrad), as graphs
# of TF's ops. The gathers they build come from ops.gather_ops, whose own gradient rules build
# this module's ops: it is imported where a rule runs, not at the top.


def gather_drop_negatives(scope: Any, params: Any, ids: Any) -> Any:
    """The rows of `params` at `ids` (along axis 0), with zeros where an id is negative: the
    gradient of UnsortedSegmentSum, which drops the data of negative ids (TF's
    `_GatherDropNegatives`). One GatherNd with bad_indices_policy IGNORE (zeros for ids outside
    the rows, on every device; TF's GatherNd has the policy too) where TF gathers at
    max(ids, 0) and then selects zeros: no pass over the gathered rows to mask them, exact
    zeros (not 0 * an infinite gradient), and `params` may have no rows (num_segments 0, every
    id dropped), where TF's gather fails. Constant ids that are all non-negative gather with
    GatherV2, as in TF."""
    from ops.gather_ops import GatherNd, GatherV2

    constant = ids.op.get_attr("value") if ids.op.type == "Const" else None
    if constant is not None and not (constant.size and int(constant.min()) < 0):
        return GatherV2(scope, params, ids, 0).output
    vectors = ExpandDims(scope, ids, np.int32(-1)).output
    return GatherNd(scope, params, vectors, bad_indices_policy="IGNORE").output


def _unsorted_segment_sum_grad(op: Any, grad: Any) -> list[Any]:
    """The gradient of data is the output's gradient gathered at each segment id, zeros for
    negative ids (dropped by the sum); none for segment_ids and num_segments."""
    scope = current_scope(op.graph)
    return [gather_drop_negatives(scope, grad, op.inputs[1]), None, None]


def _scatter_nd_grad(op: Any, grad: Any) -> list[Any]:
    """The gradient of updates is the output's gradient gathered at each index vector
    (GatherNd); under bad_indices_policy IGNORE the skipped vectors get zeros (GatherNd's
    IGNORE). None for indices and shape."""
    from ops.gather_ops import GatherNd

    scope = current_scope(op.graph)
    ignore = op.get_attr("bad_indices_policy") == "IGNORE"
    picked = GatherNd(scope, grad, op.inputs[0], bad_indices_policy="IGNORE" if ignore else "")
    return [None, picked.output, None]


register_gradient("UnsortedSegmentSum")(_unsorted_segment_sum_grad)
register_gradient("ScatterNd")(_scatter_nd_grad)
