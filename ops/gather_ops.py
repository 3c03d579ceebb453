"""GatherV2 and GatherNd: op definitions, shape functions, CPU and GPU kernels, builders.

Semantics are TensorFlow 2.21's (tf.gather, tf.raw_ops.GatherV2, tf.raw_ops.GatherNd), with
these deliberate differences where TF is inconsistent:

- Everything knowable from shapes, attrs and a constant `axis` is checked at construction
  (TF checks batch_dims against axis, ranks and batch shapes only in the kernel).
- `bad_indices_policy` ("", DEFAULT, ERROR, IGNORE) is validated at construction. DEFAULT keeps
  TF's per-device behaviour (CPU raises, GPU writes zeros); ERROR raises on every device and
  IGNORE writes zeros (empty bytes for strings) on every device.
- Out-of-range errors name the first bad index in C order (TF names whichever thread saw one),
  indices are validated even when a dimension has size zero, and GatherNd on zero-size params
  with valid indices returns an empty result (TF raises "Requested more than 0 entries").
- GatherNd has a native `batch_dims` attr; any index depth up to rank(params) works (TF: 7).
- With a non-constant axis the output rank uses the normalised batch_dims (TF miscounts it for
  negative batch_dims).

Kernels flatten to `[batch, outer, N, inner]` (GatherV2) or `[batch, M, depth]` index rows over
`[rows, slice]` params (GatherNd) and gather with one `take`. One body serves CPU (numpy) and
GPU (cupy, or numpy on the simulated test GPUs); only the out-of-range policy differs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minigraph import (
    IndexedSlices,
    InlineCall,
    Input,
    InvalidArgumentError,
    KernelContext,
    KernelSpec,
    OpDef,
    Output,
    Scope,
    TensorShape,
    Variable,
    convert_to_tensor,
    current_scope,
    dtypes,
    op_builder,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.shape_inference import InferenceContext, merge_dim
from minigraph.tensor_shape import check_rank
from minigraph.tf_compat import register_tf_attrs
from ops.array import (
    BroadcastTo,
    ConcatV2,
    ExpandDims,
    Pack,
    Rank,
    Reshape,
    SelectV2,
    Shape,
    Size,
    Slice,
    Squeeze,
    Transpose,
)
from ops.math import AddV2, Cast, FloorMod, GreaterEqual, Less, LogicalAnd, Mul, Range, Sub
from ops.reduction import Prod
from ops.resource_variables import gather_variable
from ops.segment import ScatterNd, UnsortedSegmentSum

__all__ = ["GatherV2", "Gather", "GatherNd", "gather", "gather_nd"]

_POLICIES = ("", "DEFAULT", "ERROR", "IGNORE")
_POLICY_ATTR = 'bad_indices_policy: {"", "DEFAULT", "ERROR", "IGNORE"} = ""'
# Below this many indices, Python's min/max over a list beat numpy's reductions (~2 us each).
_SMALL = 32
# Up to this many constant indices, GatherV2 is specialised per plan to one take in numpy's
# default (checking) mode; above it the checking mode's buffered copy would cost more.
_FAST_MAX = 1024

# -- GatherV2: op definition -------------------------------------------------------------------

GATHER_V2 = OpDef(
    "GatherV2",
    inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
    outputs=["output: Tparams"],
    attrs=[
        "batch_dims: int = 0",
        "Tparams: type",
        "Tindices: {int16, int32, int64}",
        "Taxis: {int32, int64}",
        _POLICY_ATTR,
    ],
    shape_fn=lambda ctx: _gather_v2_shape(ctx),
    doc="""Gather slices from `params` axis `axis` according to `indices`.

Output shape: params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:].
Indices must be in [0, params.shape[axis]); out-of-range indices follow bad_indices_policy
(DEFAULT: error on CPU, zeros on GPU; ERROR: error everywhere; IGNORE: zeros everywhere).
`axis` and `batch_dims` may be negative. `axis` lives in host memory on every device.""",
)


def _normalize_v2(
    params_rank: int, indices_rank: int | None, axis: int | None, batch_dims: int
) -> tuple[int | None, int | None]:
    """Canonical (axis, batch_dims), checked as TF's kernel checks them; None when unknown."""
    if axis is not None:
        if not -params_rank <= axis < params_rank:
            raise InvalidArgumentError(
                f"Expected axis in the range [{-params_rank}, {params_rank}), but got {axis}"
            )
        if axis < 0:
            axis += params_rank
    if indices_rank is not None:
        if not -indices_rank <= batch_dims <= indices_rank:
            raise InvalidArgumentError(
                f"Expected batch_dims in the range [{-indices_rank}, {indices_rank}], "
                f"but got {batch_dims}"
            )
        if batch_dims < 0:
            batch_dims += indices_rank
    elif batch_dims < 0:
        return axis, None
    if batch_dims >= params_rank:
        raise InvalidArgumentError(
            f"batch_dims ({batch_dims}) must be less than rank(params) ({params_rank})."
        )
    if axis is not None and batch_dims > axis:
        raise InvalidArgumentError(
            f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis})."
        )
    return axis, batch_dims


def _merge_batch_dims(params: tuple, indices: tuple, batch_dims: int) -> list[int | None]:
    merged = []
    for i in range(batch_dims):
        p, q = params[i], indices[i]
        if p is not None and q is not None and p != q:
            raise InvalidArgumentError(
                f"params.shape[{i}]: {p} should be equal to indices.shape[{i}]: {q}"
            )
        merged.append(merge_dim(p, q))
    return merged


def _scalar_constant(ctx: InferenceContext, i: int, what: str) -> int | None:
    value = ctx.constant_value(i)
    if value is None:
        return None
    if value.ndim != 0:
        raise InvalidArgumentError(f"Shape must be rank 0 but is rank {value.ndim} for {what}")
    return int(value)


def _gather_v2_shape(ctx: InferenceContext) -> TensorShape:
    """params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]."""
    params, indices, axis_shape = ctx.input_shapes
    params.with_rank_at_least(1)
    axis_shape.with_rank(0)
    batch_dims = ctx.attr("batch_dims")
    axis = _scalar_constant(ctx, 2, "axis")
    if params.rank is None:
        if indices.rank is not None and abs(batch_dims) > indices.rank:
            _normalize_v2(abs(batch_dims) + 1, indices.rank, None, batch_dims)
        if axis is not None and axis >= 0:
            # batch_dims <= axis is knowable without rank(params) when axis is not negative.
            bd = batch_dims
            if bd < 0 and indices.rank is not None:
                bd += indices.rank
            if bd > axis:
                raise InvalidArgumentError(
                    f"batch_dims ({bd}) must be less than or equal to axis ({axis})."
                )
        return TensorShape(None)
    p_dims, i_dims = params.dims, indices.dims
    axis, batch_dims = _normalize_v2(len(p_dims), indices.rank, axis, batch_dims)
    if i_dims is None or batch_dims is None:
        return TensorShape(None)
    batch = _merge_batch_dims(p_dims, i_dims, batch_dims)
    if axis is None:
        # Unknown axis: the rank is still known, and so are the leading batch dims.
        rank = len(p_dims) + len(i_dims) - 1 - batch_dims
        return TensorShape(batch + [None] * (rank - batch_dims))
    outer = batch + list(p_dims[batch_dims:axis])
    return TensorShape(outer + list(i_dims[batch_dims:]) + list(p_dims[axis + 1 :]))


# -- shared kernel pieces ----------------------------------------------------------------------

_UNSIGNED = {
    np.dtype(np.int16): np.uint16,
    np.dtype(np.int32): np.uint32,
    np.dtype(np.int64): np.uint64,
}


def _first_bad(xp: Any, indices: Any, limit: int) -> int | None:
    """Flat C-order position of the first index outside [0, limit), or None."""
    if indices.size == 0:
        return None
    # One pass: viewed as unsigned, negative indices become huge, so `>= limit` finds both.
    unsigned = indices.view(_UNSIGNED[np.dtype(indices.dtype)])
    if indices.size <= _SMALL and xp is np:
        if max(unsigned.ravel().tolist()) < limit:
            return None
        return int(np.argmax(unsigned.ravel() >= limit))
    if int(unsigned.max()) < limit:
        return None
    return int(xp.argmax(unsigned.ravel() >= limit))


def _host(xp: Any, array: Any) -> np.ndarray:
    return array if xp is np else array.get()


def _position(shape: tuple[int, ...], flat: int) -> str:
    """TF's SliceDebugString: `[0,1]` for a position in `shape`, '' for a scalar."""
    if not shape:
        return ""
    return "[" + ",".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def _zero(dtype: Any) -> Any:
    # A zero of `dtype` itself: copyto refuses to cast the int 0 into a bool array.
    return b"" if dtype.kind == "O" else dtype.type(0)


# Outputs at least this large are gathered by several threads when the session allows it:
# np.take releases the GIL, and large gathers are bound by memory latency, not by one core.
_PARALLEL_BYTES = 4 << 20


# Outputs at least this large are written into `ctx.empty` arrays (the session's buffer pool:
# memory already mapped, so no page faults); smaller ones come from numpy's allocator.
_POOLED_BYTES = 1 << 20


def _take_rows(ctx: KernelContext, table: Any, rows: Any) -> Any:
    """table[rows] along axis 0 of a 2-D table; rows are valid or get masked afterwards."""
    xp = ctx.xp
    if xp is not np:
        return xp.take(table, rows, axis=0)  # cupy wraps out-of-range rows; zeroed later
    nbytes = rows.size * table.shape[1] * table.itemsize
    if nbytes < _POOLED_BYTES:
        return table.take(rows, axis=0, mode="clip")
    out = ctx.empty((rows.size, table.shape[1]), table.dtype)
    threads = ctx.intra_op_threads
    if threads > 1 and nbytes >= _PARALLEL_BYTES:
        _parallel_take(ctx, table, rows.reshape(-1), out, 0, threads)
    else:
        table.take(rows.reshape(-1), 0, out, "clip")
    return out


def _parallel_gather(
    ctx: KernelContext, params: Any, indices: Any, axis: int, out_shape: tuple, threads: int
) -> np.ndarray:
    """GatherV2 (batch_dims 0) on several threads: axis 0 splits the indices; other axes
    split the leading dim, which params and the output share."""
    out = ctx.empty(out_shape, params.dtype)
    if axis == 0:
        rows = indices.reshape(-1)
        flat_out = out.reshape(rows.shape + params.shape[1:])  # a view: `out` is contiguous
        _parallel_take(ctx, params, rows, flat_out, 0, threads)
        return out
    n = params.shape[0]
    bounds = [n * k // threads for k in range(threads + 1)]

    def chunk(k: int) -> None:
        lo, hi = bounds[k], bounds[k + 1]
        np.take(params[lo:hi], indices, axis=axis, mode="clip", out=out[lo:hi])

    ctx.parallel_for(chunk, threads)
    return out


def _parallel_take(
    ctx: KernelContext, table: Any, rows: Any, out: Any, axis: int, threads: int
) -> None:
    """np.take(table, rows, axis) into `out`, the rows split in contiguous chunks over the
    session's intra-op threads (each thread also faults in its own part of the fresh output)."""
    n = rows.size
    bounds = [n * k // threads for k in range(threads + 1)]
    index = (slice(None),) * axis

    def chunk(k: int) -> None:
        lo, hi = bounds[k], bounds[k + 1]
        np.take(table, rows[lo:hi], axis=axis, mode="clip", out=out[index + (slice(lo, hi),)])

    ctx.parallel_for(chunk, threads)


def _raises(ctx: KernelContext, policy: str) -> bool:
    """Whether out-of-range indices raise on this device under `policy`."""
    if policy == "ERROR":
        return True
    if policy == "IGNORE":
        return False
    return ctx.device.device_type == "CPU"  # TF's DEFAULT: CPU raises, GPU writes zeros


# -- GatherV2: kernels -------------------------------------------------------------------------


def _gather_v2_kernel(
    ctx: KernelContext, params: Any, indices: Any, axis: Any, *, batch_dims: int,
    bad_indices_policy: str,
) -> Any:  # fmt: skip
    """GatherV2 on any device: numpy on CPU, cupy (or numpy, simulated) on GPU."""
    xp = ctx.xp
    if indices.dtype == np.int16 and xp is not np:
        indices = indices.astype(np.int32)  # GPU kernels take int32/int64 indices
    if params.ndim < 1:
        raise ctx.invalid_argument("params must be at least 1 dimensional")
    if axis.ndim != 0:
        raise ctx.invalid_argument("axis must be scalar")
    try:
        a, bd = _normalize_v2(params.ndim, indices.ndim, int(axis), batch_dims)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    _check_output_rank(ctx, params.ndim + indices.ndim - 1 - bd)
    shape = params.shape
    if bd:
        _merge_batch_dims_runtime(ctx, shape, indices.shape, bd)
    n = shape[a]
    if ctx.constant_inputs[1]:
        # Constant indices: find the bad position once per limit, then it is a dict look-up.
        key = ("bad", n)
        bad = ctx.cache.get(key, key)
        if bad is key:
            bad = ctx.cache[key] = _first_bad(xp, indices, n)
    else:
        bad = _first_bad(xp, indices, n)
    if bad is not None and _raises(ctx, bad_indices_policy):
        value = int(_host(xp, indices.ravel()[bad]))
        raise ctx.invalid_argument(
            f"indices{_position(indices.shape, bad)} = {value} is not in [0, {n})"
        )
    out_shape = shape[:a] + indices.shape[bd:] + shape[a + 1 :]
    if bad is not None and n == 0:
        return xp.full(out_shape, _zero(params.dtype), dtype=params.dtype)
    if 0 in out_shape:
        # Nothing to copy (a zero-width table checking ids, as embedding_lookup's): numpy's
        # take would still walk (and, read-only, copy) every index.
        return xp.empty(out_shape, dtype=params.dtype)
    if bd == 0:
        if xp is np:
            if not out_shape:
                # numpy's take gives a bare scalar for a 0-d result: take a 1-element vector.
                out = params.take(indices.reshape(1), axis=a, mode="clip")
                if bad is not None:
                    out[0] = _zero(params.dtype)  # the only index is the bad one
                return out.reshape(())
            threads = ctx.intra_op_threads
            nbytes = _prod(out_shape) * params.itemsize
            if threads > 1 and nbytes >= _PARALLEL_BYTES:
                out = _parallel_gather(ctx, params, indices, a, out_shape, threads)
            elif nbytes >= _POOLED_BYTES:
                out = params.take(indices, a, ctx.empty(out_shape, params.dtype), "clip")
            else:
                out = params.take(indices, axis=a, mode="clip")
        else:
            out = xp.take(params, indices, axis=a)
        if bad is not None:
            _zero_bad(xp, out, indices, n, a)
        return out
    # Batched: row offsets (b * outer + o) * n + index into params viewed as [rows, inner].
    batch = _prod(shape[:bd])
    outer = _prod(shape[bd:a])
    inner = _prod(shape[a + 1 :])
    m = _prod(indices.shape[bd:])
    idx = indices.reshape(batch, 1, m)
    if bad is not None:
        idx = xp.where((idx < 0) | (idx >= n), 0, idx)
    base = (xp.arange(batch * outer, dtype=np.int64) * n).reshape(batch, outer, 1)
    # One pass: the int64 row numbers directly (no int64 copy of the indices first).
    rows = xp.empty((batch, outer, m), np.int64)
    xp.add(base, idx, out=rows)
    rows = rows.reshape(-1)
    out = _take_rows(ctx, params.reshape(batch * outer * n, inner), rows)
    out = out.reshape(batch, outer, m, inner)
    if bad is not None:
        mask = ((indices < 0) | (indices >= n)).reshape(batch, 1, m, 1)
        xp.copyto(out, _zero(params.dtype), where=mask)
    return out.reshape(out_shape)


def _gather_v2_specialize(spec: KernelSpec) -> Any:
    """GatherV2 with constant indices on numpy, decided once per plan.

    Constant values are frozen (read-only) arrays, and numpy's take copies read-only indices
    on every call, so each specialisation holds a private writable copy of them.

    Small outputs with a constant axis become one `ndarray.take`. The indices are known not to
    be negative, so numpy's default (raising) mode checks them against params of any shape
    whenever the output is not empty, which the static shape guarantees (every dim of params
    but `axis` known and non-zero). Whatever take rejects (indices out of range, an axis out of
    range, params of rank 0) goes to the general kernel, which raises TF's error or applies
    the bad-indices policy. Other cases run the general kernel on the writable copy, which keeps
    pooled memory and intra-op threads for large outputs.
    """
    _, frozen, axis = spec.constants
    if frozen is None or spec.ctx.xp is not np:
        return None
    # Nodes of a plan often share their indices (one Const feeding many gathers): the copy and
    # its checks are made once per plan and constant.
    key = (_gather_v2_specialize, id(frozen))
    known = spec.shared.get(key)
    if known is None:
        indices = np.array(frozen)  # private and writable: never written, never handed out
        small = indices.ndim > 0 and indices.size <= _FAST_MAX
        non_negative = small and not (indices.size and int(indices.min()) < 0)
        known = spec.shared[key] = (frozen, indices, non_negative)
    _, indices, non_negative = known
    general = spec.general
    fast = None
    if non_negative:
        axis_key = (
            _small_take_axis, id(frozen), id(axis), spec.input_shapes[0],
            spec.input_dtypes[0], spec.attrs["batch_dims"],
        )  # fmt: skip
        fast = spec.shared.get(axis_key, axis_key)
        if fast is axis_key:  # (the frozen arrays are kept alive by `known` and the plan)
            fast = spec.shared[axis_key] = _small_take_axis(spec, indices)
    if fast is None:

        def gather_v2_constant_indices_general(params: Any, indices_: Any, axis_: Any) -> Any:
            return general(params, indices, axis_)

        return gather_v2_constant_indices_general

    def gather_v2_constant_indices(params: Any, indices_: Any, axis_: Any) -> Any:
        # What `take` rejects (bad indices for this params, no ndarray) goes TF's way.
        return general(params, indices, axis_)

    # Generated plans call `params.take(indices, axis)` directly, without a Python frame.
    return InlineCall(np.ndarray.take, gather_v2_constant_indices, Input(0), indices, fast)


def _small_take_axis(spec: KernelSpec, indices: np.ndarray) -> int | None:
    """The axis to take along when one checked `ndarray.take` is exact and the output small;
    None when the general kernel is needed. The caller has checked that `indices` has at
    least one dim (a 0-d result would come back from take as a numpy scalar), at most
    `_FAST_MAX` elements and none negative (numpy would wrap those; the general kernel rejects
    them)."""
    axis = spec.constants[2]
    if axis is None or axis.ndim != 0 or spec.attrs["batch_dims"]:
        return None
    dims = spec.input_shapes[0].dims
    a = int(axis)
    if dims is None or not -len(dims) <= a < len(dims):
        return None
    others = [d for k, d in enumerate(dims) if k != a % len(dims)]
    if None in others or 0 in others:
        return None  # numpy skips the index check when it copies nothing
    itemsize = spec.input_dtypes[0].np_dtype.itemsize
    if _prod(others) * indices.size * itemsize >= _POOLED_BYTES:
        return None  # a large output: pooled memory, intra-op threads
    return a


def _zero_bad(xp: Any, out: Any, indices: Any, n: int, axis: int) -> None:
    """Writes zeros where `indices` (placed at `axis` of `out`) is out of range."""
    mask = (indices < 0) | (indices >= n)
    shape = (1,) * axis + mask.shape + (1,) * (out.ndim - axis - mask.ndim)
    xp.copyto(out, _zero(out.dtype), where=mask.reshape(shape))


def _merge_batch_dims_runtime(ctx: KernelContext, params: tuple, indices: tuple, bd: int) -> None:
    if params[:bd] != indices[:bd]:
        try:
            _merge_batch_dims(params, indices, bd)
        except InvalidArgumentError as e:
            raise ctx.invalid_argument(e.message) from None


def _check_output_rank(ctx: KernelContext, rank: int) -> None:
    # Known statically, this was refused when the node was built; with inputs of unknown rank
    # it must be refused here, before numpy (whose take may crash above its limit) sees it.
    try:
        check_rank(rank, "the output")
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None


def _prod(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


# -- GatherNd: op definition -------------------------------------------------------------------

GATHER_ND = OpDef(
    "GatherNd",
    inputs=["params: Tparams", "indices: Tindices"],
    outputs=["output: Tparams"],
    attrs=[
        "Tparams: type",
        "Tindices: {int16, int32, int64}",
        _POLICY_ATTR,
        "batch_dims: int >= 0 = 0",
    ],
    shape_fn=lambda ctx: _gather_nd_shape(ctx),
    doc="""Gather slices from `params` into a tensor with shape specified by `indices`.

`indices` is a K-dimensional integer tensor, best thought of as a (K-1)-dimensional tensor of
index vectors into `params`; with batch_dims = b the first b dims of params and indices are
batch dims gathered in lockstep. Output shape:
params.shape[:b] + indices.shape[b:-1] + params.shape[b + indices.shape[-1]:].
Out-of-range index vectors follow bad_indices_policy, as in GatherV2.""",
)


def _gather_nd_shape(ctx: InferenceContext) -> TensorShape:
    """indices.shape[:-1] + params.shape[indices.shape[-1]:] (batch dims in front)."""
    params, indices = ctx.input_shapes
    bd = ctx.attr("batch_dims")
    if params.rank is not None and params.rank < 1:
        raise InvalidArgumentError("params must be at least a vector")
    indices.with_rank_at_least(1)
    if indices.rank is not None and bd >= indices.rank:
        raise InvalidArgumentError(
            f"batch_dims ({bd}) must be less than rank(indices) ({indices.rank})."
        )
    if params.rank is not None and bd >= params.rank:
        raise InvalidArgumentError(
            f"batch_dims ({bd}) must be less than rank(params) ({params.rank})."
        )
    if params.rank is None or indices.rank is None:
        return TensorShape(None)
    p_dims, i_dims = params.dims, indices.dims
    batch = _merge_batch_dims(p_dims, i_dims, bd)
    depth = i_dims[-1]
    if depth is None:
        return TensorShape(None)
    if depth > len(p_dims) - bd:
        raise InvalidArgumentError(
            f"indices.shape[-1] must be <= params.rank, but saw indices shape: {indices} and "
            f"params shape: {params}" + (f" (with batch_dims={bd})" if bd else "")
        )
    return TensorShape(batch + list(i_dims[bd:-1]) + list(p_dims[bd + depth :]))


# -- GatherNd: kernels -------------------------------------------------------------------------


def _gather_nd_kernel(
    ctx: KernelContext, params: Any, indices: Any, *, batch_dims: int,
    bad_indices_policy: str,
) -> Any:  # fmt: skip
    """GatherNd on any device: rows of index vectors become flat row numbers, then one take."""
    xp = ctx.xp
    bd = batch_dims
    p_shape, i_shape = params.shape, indices.shape
    if params.ndim < 1:
        raise ctx.invalid_argument("params must be at least a vector")
    if indices.ndim < 1:
        raise ctx.invalid_argument("indices must be at least a vector")
    if bd >= indices.ndim or bd >= params.ndim:
        raise ctx.invalid_argument(
            f"GatherNd needs rank(params) > batch_dims and rank(indices) > batch_dims; got "
            f"params shape {list(p_shape)}, indices shape {list(i_shape)}, batch_dims {bd}"
        )
    if bd:
        _merge_batch_dims_runtime(ctx, p_shape, i_shape, bd)
    depth = i_shape[-1]
    if depth > params.ndim - bd:
        raise ctx.invalid_argument(
            f"index innermost dimension length must be <= params rank; saw: {depth} vs. "
            f"{params.ndim - bd}"
        )
    _check_output_rank(ctx, indices.ndim - 1 + params.ndim - bd - depth)
    batch = _prod(p_shape[:bd])
    dims = p_shape[bd : bd + depth]
    slice_shape = p_shape[bd + depth :]
    m = _prod(i_shape[bd:-1])
    out_shape = p_shape[:bd] + i_shape[bd:-1] + slice_shape
    per_batch = _prod(dims)
    idx = indices.reshape(batch * m, depth)
    raises = _raises(ctx, bad_indices_policy)
    if indices.dtype == np.int16 and xp is not np:
        idx = idx.astype(np.int32)
    flat, bad, mask = _flatten_index_rows(ctx, idx, dims, raises, writable=bd > 0)
    if bad is not None and raises:
        # Rows of `idx` run over indices.shape[:-1] in C order, batch dims included.
        vector = ", ".join(str(v) for v in _host(xp, idx[bad]).tolist())
        shape_text = "[" + ",".join(str(d) for d in p_shape) + "]"
        raise ctx.invalid_argument(
            f"indices{_position(i_shape[:-1], bad)} = [{vector}] does not index into "
            f"param shape {shape_text}, node name: {ctx.node_name}"
        )
    if bd:
        # `flat` is this call's own array: the batch offsets go in place.
        rows_by_batch = flat.reshape(batch, m)
        rows_by_batch += (xp.arange(batch, dtype=np.int64) * per_batch)[:, None]
    table_rows = batch * per_batch
    inner = _prod(slice_shape)
    if table_rows == 0:
        # Every index is out of range of an empty table (IGNORE/GPU) or there are none.
        return xp.full(out_shape, _zero(params.dtype), dtype=params.dtype)
    out = _take_rows(ctx, params.reshape(table_rows, inner), flat)
    if bad is not None:
        xp.copyto(out, _zero(params.dtype), where=mask.reshape(-1, 1))
    return out.reshape(out_shape)


def _flatten_index_rows(
    ctx: KernelContext, idx: Any, dims: tuple[int, ...], raises: bool, writable: bool = True
) -> tuple[Any, int | None, Any]:
    """Row numbers of the index vectors `idx` [N, depth] into a [*dims] table, the first bad
    row (None when all are in range) and the mask of bad rows (None when there are none).
    Bad rows get row 0, to be masked or raised about by the caller. Unless `writable`, the
    row numbers may be a view of `idx` (the caller only reads them)."""
    xp = ctx.xp
    n, depth = idx.shape
    if depth == 0:
        return xp.zeros(n, dtype=np.int64), None, None
    if xp is np and raises:
        # The common case, all in range, in one pass; on failure, the vectorised scan below
        # finds the first bad row.
        if depth == 1 and not writable:
            # One coordinate: the index column is the row numbers, once checked (one max over
            # it viewed as unsigned, so negatives count as huge): no copy of the indices.
            column = idx.reshape(n)
            if not n or int(column.view(_UNSIGNED[np.dtype(column.dtype)]).max()) < dims[0]:
                return column, None, None
        else:
            flat = _checked_rows(ctx, idx, dims)
            if flat is not None:
                return flat, None, None
    mask = _bad_rows(xp, idx, dims)
    bad = None
    if n and bool(mask.any()):
        bad = int(xp.argmax(mask))
    flat = xp.zeros(n, dtype=np.int64)
    for k, size in enumerate(dims):  # a loop over the index depth, not over elements
        column = idx[:, k].astype(np.int64)
        if bad is not None:
            column = xp.where(mask, 0, column)
        flat = flat * size + column
    return flat, bad, mask


# Index rows from which GatherNd splits their linearisation over the intra-op threads.
_PARALLEL_ROWS = 1 << 17


def _checked_rows(ctx: KernelContext, idx: np.ndarray, dims: tuple[int, ...]) -> Any:
    """Row numbers of the index vectors `idx` [N, depth] into a [*dims] table, or None when
    some index is out of range (negative ones included).

    One thread: `np.ravel_multi_index`, which checks and flattens in one C pass. Several:
    contiguous blocks of rows, one per thread, each checked column by column (the maximum of
    the column viewed as unsigned, so negative indices count as huge) and then flattened with
    in-place multiply-adds into a pooled array. Every step is one large numpy call that
    releases the GIL, so the threads rarely wait for it (ravel_multi_index re-takes it every
    few thousand rows, which serialises threads).
    """
    n, depth = idx.shape
    threads = ctx.intra_op_threads
    # The blocks' column passes beat ravel_multi_index's single pass for index vectors of one
    # or two coordinates (measured on 1e6 rows: 0.76x and 0.99x the one-thread time); with
    # three or more the extra passes cost more than the second thread saves (1.13x).
    if threads == 1 or n < _PARALLEL_ROWS or depth > 2:
        try:
            return np.ravel_multi_index(tuple(idx.T), dims)
        except ValueError:
            return None
    flat = ctx.empty((n,), np.int64)
    unsigned = idx.view(_UNSIGNED[np.dtype(idx.dtype)])
    bounds = [n * k // threads for k in range(threads + 1)]
    in_range = [True] * threads

    def block(k: int) -> None:
        lo, hi = bounds[k], bounds[k + 1]
        if lo == hi:
            return
        for j, size in enumerate(dims):
            if int(unsigned[lo:hi, j].max()) >= size:
                in_range[k] = False
                return
        rows, out = idx[lo:hi], flat[lo:hi]
        np.copyto(out, rows[:, 0])
        for j in range(1, len(dims)):
            np.multiply(out, dims[j], out=out)
            np.add(out, rows[:, j], out=out)

    ctx.parallel_for(block, threads)
    return flat if all(in_range) else None


def _bad_rows(xp: Any, idx: Any, dims: tuple[int, ...]) -> Any:
    unsigned = idx.view(_UNSIGNED[np.dtype(idx.dtype)])
    mask = xp.zeros(idx.shape[0], dtype=bool)
    for k, size in enumerate(dims):
        mask |= unsigned[:, k] >= size
    return mask


# -- builders ----------------------------------------------------------------------------------

GatherV2 = register_op(GATHER_V2)
GatherNd = register_op(GATHER_ND)
# The Java API's name for GatherV2; its nodes are called "Gather" by default.
Gather = op_builder("GatherV2", "Gather", default_name="Gather")


def _check_batch_dims(batch_dims: Any) -> int:
    if batch_dims is None:
        return 0  # as tf.gather's generated wrapper reads None
    if isinstance(batch_dims, (bool, np.bool_)) or not isinstance(batch_dims, (int, np.integer)):
        raise InvalidArgumentError(
            f"batch_dims must be an int; got {type(batch_dims).__name__} {batch_dims!r}"
        )
    return int(batch_dims)


def gather(
    scope: Scope,
    params: Any,
    indices: Any,
    axis: Any = None,
    batch_dims: int | None = 0,
    name: str | None = None,
) -> GatherV2:
    """tf.gather: slices of `params` along `axis` (default: the first non-batch axis).

    `batch_dims=None` means 0, as in tf.gather (whose wrapper, given no axis either, fails).
    Unlike TF's wrapper: `axis=0` never silently drops `batch_dims` (TF then runs the old
    Gather op, which ignores it); a negative `batch_dims` with no axis means the normalised
    batch_dims, checked against rank(indices) first; bool and float `batch_dims` are rejected.
    A Variable gathered along axis `batch_dims` becomes a ResourceGather (the rows named are
    read where it lives), any other axis a GatherV2 of a read of it.
    """
    _check_scope("gather", scope)
    batch_dims = _check_batch_dims(batch_dims)
    if name is not None:
        scope = scope.with_op_name(name)
    if isinstance(params, Variable):  # only the rows named are read (TF's sparse_read)
        gathered = gather_variable(scope, params, indices, axis, batch_dims)
        if gathered is not None:
            return gathered
    if axis is None:
        axis = batch_dims
        if batch_dims < 0:
            rank = _static_rank(scope, indices)
            if rank is None:
                raise InvalidArgumentError(
                    "gather: a negative batch_dims with no axis needs indices of known rank"
                )
            if batch_dims < -rank:
                # Said here, about batch_dims: the axis derived from it would be out of range.
                raise InvalidArgumentError(
                    f"gather: Expected batch_dims in the range [{-rank}, {rank}], but got "
                    f"{batch_dims}"
                )
            axis = batch_dims + rank
    if batch_dims == 0:  # the attr's default: the builder's shorter path
        return GatherV2(scope, params, indices, axis)
    return GatherV2(scope, params, indices, axis, batch_dims=batch_dims)


def gather_nd(
    scope: Scope, params: Any, indices: Any, batch_dims: int = 0, name: str | None = None
) -> GatherNd:
    """tf.gather_nd: slices of `params` addressed by the index vectors in `indices`."""
    _check_scope("gather_nd", scope)
    batch_dims = _check_batch_dims(batch_dims)
    if name is not None:
        scope = scope.with_op_name(name)
    return GatherNd(scope, params, indices, batch_dims=batch_dims)


def _check_scope(what: str, scope: Any) -> None:
    if not isinstance(scope, Scope):
        raise InvalidArgumentError(
            f"{what}: the first argument must be a Scope (e.g. Scope.new_root_scope()); got "
            f"{type(scope).__name__}"
        )


def _static_rank(scope: Scope, value: Any) -> int | None:
    shape = getattr(value, "shape", None)
    if isinstance(shape, TensorShape):
        return shape.rank
    if shape is not None:
        return len(shape)
    try:
        return dtypes.convert_to_array(value).ndim
    except InvalidArgumentError:
        return None


# -- registration ------------------------------------------------------------------------------

_INDICES = ["int16", "int32", "int64"]
# cupy holds neither strings nor ml_dtypes' bfloat16: those gathers stay on the CPU.
_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]

# Trusted: the suite checks these kernels' outputs against references and the shape functions
# (tests/test_gather_*.py), so sessions skip the per-run output checks for them.
register_kernel(
    "GatherV2", "CPU", _gather_v2_kernel,
    type_constraints={"Tindices": _INDICES}, host_memory=["axis"], trusted=True,
    specialize=_gather_v2_specialize,
)  # fmt: skip
register_kernel(
    "GatherV2", "GPU", _gather_v2_kernel,
    type_constraints={"Tparams": _GPU_TYPES, "Tindices": _INDICES}, host_memory=["axis"],
    trusted=True,
)  # fmt: skip
register_kernel(
    "GatherNd", "CPU", _gather_nd_kernel, type_constraints={"Tindices": _INDICES}, trusted=True
)
register_kernel(
    "GatherNd", "GPU", _gather_nd_kernel,
    type_constraints={"Tparams": _GPU_TYPES, "Tindices": _INDICES}, trusted=True,
)  # fmt: skip

# What TensorFlow 2.21's ops of these names have: its GatherV2 has no bad_indices_policy and its
# GatherNd no batch_dims. Graph files leave those attrs out at their defaults, and mark graphs
# that set them otherwise so that TensorFlow refuses them rather than ignore them.
register_tf_attrs("GatherV2", ["batch_dims", "Tparams", "Tindices", "Taxis"])
register_tf_attrs("GatherNd", ["Tparams", "Tindices", "bad_indices_policy"])


# -- gradients ---------------------------------------------------------------------------------
# TF's rules (array_grad.py: _GatherV2Grad, _GatherNdGrad), as graphs of TF's ops, so that
# gradient graphs export to TensorFlow and run there.
#
# GatherV2 at a constant axis 0 gives its params a sparse gradient: IndexedSlices(grad reshaped
# to [number of ids, *params.shape[1:]], the flattened ids, Shape(params)), a repeated id adding
# up when densified. Every other axis (negative ones too, as TF), an axis known only at run time
# and batch_dims > 0 are dense: the gradient viewed as [batch, outer, ids, inner] (batch = the
# batch dims, outer = the dims between them and the axis, inner = those after it), the ids
# moved in front of outer with one 4-D Transpose (skipped when outer is statically 1), one
# UnsortedSegmentSum into batch * params.shape[axis] rows (each id offset by its batch row's
# first row), and the inverse Transpose and a Reshape back to params' shape: one rule for
# every axis and batch_dims, with the same graph for known and unknown shapes (the sizes are
# constants where the static shapes know them, else computed from Shape nodes).
#
# Shape(params) is colocated with params, as TF does: it reads only the shape, and placed
# elsewhere it would have the executor move the whole table to it.
#
# bad_indices_policy="IGNORE" (not TF's: its GatherV2 has no policy) gathers zeros for
# out-of-range ids, which therefore get no gradient: the sparse gradient leaves them out
# (DynamicPartition on a validity mask), the dense one sends them to segment -1, which
# UnsortedSegmentSum drops. Under the other policies such ids are errors when gathered, and
# the gradient keeps them as TF's does (densifying then refuses an id past the end).


def _constant(t: Output) -> np.ndarray | None:
    """The value of `t` when it is a Const's output, else None."""
    return t.op.get_attr("value") if t.op.type == "Const" else None


def _index_dtype(*dims: Any) -> Any:
    """int32 for shape vectors whose static dims fit it (TF's default), else int64."""
    big = any(d is not None and d > np.iinfo(np.int32).max for dim in dims for d in dim or ())
    return dtypes.int64 if big else dtypes.int32


class _Dims:
    """The dims of a tensor for building gradient shapes: Python ints where its static shape
    knows them, else elements of one Shape node of `dtype` (made on first use; colocated with
    the tensor when `near`, since it reads only the tensor's shape)."""

    def __init__(self, scope: Scope, t: Output, dtype: Any, near: bool = False):
        self.scope = scope
        self.t = t
        self.dtype = dtype
        self.near = near
        self.static = t.shape.dims
        self._vector: Output | None = None

    @property
    def rank(self) -> int | None:
        return None if self.static is None else len(self.static)

    def vector(self) -> Output:
        """Shape(t), built once."""
        if self._vector is None:
            where = self.scope.with_device("").colocate_with(self.t) if self.near else self.scope
            self._vector = Shape(where, self.t, out_type=self.dtype).output
        return self._vector

    def shape(self) -> Any:
        """The whole shape: a constant when the static shape is fully known, else Shape(t)."""
        if self.static is not None and None not in self.static:
            return np.array(self.static, dtype=self.dtype.np_dtype)
        return self.vector()

    def dim(self, k: Any) -> Any:
        """Dim `k` (an int, or a scalar Output for a position known only at run time)."""
        if isinstance(k, int) and self.static is not None and self.static[k] is not None:
            return self.static[k]
        return GatherV2(self.scope, self.vector(), _scalar(self.scope, k, dtypes.int32), 0).output

    def prod(self, lo: Any, hi: Any = None) -> Any:
        """The product of dims [lo, hi) (hi None: to the end); lo and hi ints or scalar
        Outputs. An int when the static shape knows every dim in the range."""
        scope = self.scope
        if isinstance(lo, int) and (hi is None or isinstance(hi, int)) and self.rank is not None:
            dims = self.static[lo:hi]
            known = math.prod(d for d in dims if d is not None)
            unknown = [lo + i for i, d in enumerate(dims) if d is None]
            if not unknown:
                return known
            if len(unknown) == 1:
                part = self.dim(unknown[0])
            else:
                picked = GatherV2(scope, self.vector(), np.array(unknown, np.int32), 0)
                part = Prod(scope, picked, 0).output
            return _mul(scope, part, known)
        begin = _vector1(scope, lo, self.dtype)
        size = _vector1(scope, -1 if hi is None else _sub(scope, hi, lo, self.dtype), self.dtype)
        return Prod(scope, Slice(scope, self.vector(), begin, size), 0).output


def _vector1(scope: Scope, value: Any, dtype: Any) -> Any:
    """`value` (an int or a scalar Output) as a 1-element vector of `dtype`."""
    if isinstance(value, int):
        return np.array([value], dtype=dtype.np_dtype)
    return Reshape(scope, _scalar(scope, value, dtype), np.array([1], np.int32)).output


def _scalar(scope: Scope, value: Any, dtype: Any) -> Any:
    """`value` (an int or a scalar Output) as an Output or constant of `dtype`."""
    if isinstance(value, int):
        return np.array(value, dtype=dtype.np_dtype)
    return value if value.dtype is dtype else Cast(scope, value, DstT=dtype).output


def _mul(scope: Scope, a: Any, b: Any) -> Any:
    """a * b for ints or scalar Outputs (of one dtype), folded where both are ints."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, int):
        a, b = b, a
    if isinstance(b, int) and b == 1:
        return a
    return Mul(scope, a, b).output


def _sub(scope: Scope, a: Any, b: Any, dtype: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return Sub(scope, _scalar(scope, a, dtype), _scalar(scope, b, dtype)).output


def _pack(scope: Scope, parts: list[Any], dtype: Any) -> Any:
    """A shape vector from ints and scalar Outputs: a constant when all are ints."""
    if all(isinstance(p, int) for p in parts):
        return np.array(parts, dtype=dtype.np_dtype)
    return Pack(scope, [_scalar(scope, p, dtype) for p in parts]).output


def _valid_ids(scope: Scope, ids: Output, limit: Any) -> Output:
    """ids >= 0 and ids < limit, elementwise (ids int64, limit an int or an int64 Output)."""
    low = GreaterEqual(scope, ids, np.int64(0))
    return LogicalAnd(scope, low, Less(scope, ids, _scalar(scope, limit, dtypes.int64))).output


def _gather_v2_grad(op: Any, grad: Any) -> list[Any]:
    """GatherV2's gradient: IndexedSlices for params at a constant axis 0, dense otherwise;
    none for indices and axis."""
    scope = current_scope(op.graph)
    params, indices, axis = op.inputs
    policy = op.get_attr("bad_indices_policy")
    axis_value = _constant(axis)
    sparse = axis_value is not None and axis_value.ndim == 0 and int(axis_value) == 0
    if isinstance(grad, IndexedSlices):
        # Slices of an axis-0 gather's output are slices of rows of params, unless the
        # output has no row dim (a scalar index): that gradient is densified (as TF does).
        if sparse and indices.shape.rank not in (None, 0):
            return [_gather_of_slices(scope, params, indices, grad, policy), None, None]
        grad = convert_to_tensor(grad, scope=scope)
    if sparse:
        return [_sparse_params_grad(scope, params, indices, grad, policy), None, None]
    batch_dims = op.get_attr("batch_dims")
    return [_dense_params_grad(scope, params, indices, axis, batch_dims, grad, policy), None, None]


def _flat_ids(scope: Scope, indices: Output) -> Output:
    """The ids as a vector of int32 or int64 (an IndexedSlices' indices), made by a node of the
    rule (as TF's Reshape): it is placed with the gather, as the values are."""
    if indices.dtype is dtypes.int16:
        indices = Cast(scope, indices, DstT=dtypes.int32).output
        if indices.shape.rank == 1:
            return indices
    return Reshape(scope, indices, np.array([-1], np.int32)).output


def _filtered(
    scope: Scope, values: Output, ids: Output, rows: Any, policy: str
) -> tuple[Output, Output]:
    """(values, ids) without the ids outside [0, rows) under bad_indices_policy IGNORE (whose
    gather gave those zeros), else as they are."""
    if policy != "IGNORE":
        return values, ids
    # ops.partition's gradient rules gather (they import this module): imported here.
    from ops.partition import DynamicPartition

    wide = ids if ids.dtype is dtypes.int64 else Cast(scope, ids, DstT=dtypes.int64).output
    keep = Cast(scope, _valid_ids(scope, wide, rows), DstT=dtypes.int32).output
    values = DynamicPartition(scope, values, keep, num_partitions=2).outputs[1]
    ids = DynamicPartition(scope, ids, keep, num_partitions=2).outputs[1]
    return values, ids


def _sparse_params_grad(
    scope: Scope, params: Output, indices: Output, grad: Output, policy: str
) -> IndexedSlices:
    """IndexedSlices(grad as [ids, *params.shape[1:]], flattened ids, Shape(params))."""
    dtype = _index_dtype(params.shape.dims, indices.shape.dims)
    shape = _Dims(scope, params, dtype, near=True)
    ids = _flat_ids(scope, indices)
    if shape.rank is not None:
        count = indices.shape.num_elements()
        if count is None:
            rest = shape.prod(1)
            # -1 reads the count off the gradient, unless the slices hold no element.
            count = -1 if isinstance(rest, int) and rest else Size(scope, indices, out_type=dtype)
        rows_shape = _pack(scope, [count] + [shape.dim(k) for k in range(1, shape.rank)], dtype)
    else:
        count_vector = Reshape(scope, Size(scope, indices, out_type=dtype), [1]).output
        rest_vector = Slice(scope, shape.vector(), np.array([1], dtype.np_dtype),
                            np.array([-1], dtype.np_dtype)).output  # fmt: skip
        rows_shape = ConcatV2(scope, [count_vector, rest_vector], 0).output
    values = Reshape(scope, grad, rows_shape).output
    values, ids = _filtered(scope, values, ids, shape.dim(0), policy)
    return IndexedSlices(values, ids, shape.vector())


def _gather_of_slices(
    scope: Scope, params: Output, indices: Output, grad: IndexedSlices, policy: str
) -> IndexedSlices:
    """The sparse gradient of an axis-0 gather whose output's gradient is itself sparse (a
    gather of a gather): slice i of `grad` is the gradient of output row grad.indices[i],
    which row indices[grad.indices[i]] of params produced. The result stays sparse (TF
    densifies `grad` first; the values are the same)."""
    dtype = _index_dtype(params.shape.dims, indices.shape.dims)
    shape = _Dims(scope, params, dtype, near=True)
    picked = GatherV2(scope, indices, grad.indices, 0).output
    ids = _flat_ids(scope, picked)
    if indices.shape.rank == 1:
        values = grad.values
    else:
        count = Size(scope, picked, out_type=dtype).output
        if shape.rank is not None:
            rows_shape = _pack(scope, [count] + [shape.dim(k) for k in range(1, shape.rank)],
                               dtype)  # fmt: skip
        else:
            rest = Slice(scope, shape.vector(), np.array([1], dtype.np_dtype),
                         np.array([-1], dtype.np_dtype)).output  # fmt: skip
            rows_shape = ConcatV2(scope, [Reshape(scope, count, [1]), rest], 0).output
        values = Reshape(scope, grad.values, rows_shape).output
    values, ids = _filtered(scope, values, ids, shape.dim(0), policy)
    return IndexedSlices(values, ids, shape.vector())


def _dense_params_grad(
    scope: Scope, params: Output, indices: Output, axis: Output, batch_dims: int, grad: Output,
    policy: str,
) -> Output:  # fmt: skip
    """The dense gradient of GatherV2 for params: [batch, outer, ids, inner] summed into
    [batch, outer, params.shape[axis], inner] by id (see the section's comment)."""
    i64 = dtypes.int64
    p = _Dims(scope, params, i64, near=True)
    ids_dims = _Dims(scope, indices, i64)
    p_rank: Any = p.rank
    if p_rank is None:
        p_rank = Rank(scope, params).output
    value = _constant(axis)
    if value is not None and value.ndim == 0 and isinstance(p_rank, int):
        a: Any = int(value) % p_rank  # checked to be in range when the gather was built
    else:
        a = FloorMod(scope, _scalar(scope, axis, i64), _scalar(scope, p_rank, i64)).output
    b: Any = batch_dims
    if b < 0:
        i_rank = ids_dims.rank
        b = b + i_rank if i_rank is not None else AddV2(
            scope, np.int64(b), Cast(scope, Rank(scope, indices), DstT=i64)
        ).output  # fmt: skip
    batch = p.prod(0, b)
    outer = p.prod(b, a)
    rows = p.dim(a)
    inner = p.prod(_add1(scope, a), None)
    count = ids_dims.prod(b, None)
    values = Reshape(scope, grad, _pack(scope, [batch, outer, count, inner], i64)).output
    swap = np.array([0, 2, 1, 3], np.int32)
    moved = not (isinstance(outer, int) and outer == 1)
    if moved:
        values = Transpose(scope, values, swap).output
    values = Reshape(scope, values, _pack(scope, [_mul(scope, batch, count), outer, inner], i64))
    ids = indices
    if policy == "IGNORE" or not (isinstance(batch, int) and batch == 1):
        ids = Cast(scope, ids, DstT=i64).output if ids.dtype is not i64 else ids
        ids = Reshape(scope, ids, _pack(scope, [batch, count], i64)).output
        offsets = Mul(scope, Range(scope, np.int64(0), _scalar(scope, batch, i64), np.int64(1)),
                      _scalar(scope, rows, i64))  # fmt: skip
        shifted = AddV2(scope, ids, Reshape(scope, offsets, _pack(scope, [batch, 1], i64)))
        if policy == "IGNORE":
            shifted = SelectV2(scope, _valid_ids(scope, ids, rows), shifted, np.int64(-1))
        ids = shifted.output
    ids = Reshape(scope, ids, np.array([-1], np.int32)).output
    summed = UnsortedSegmentSum(scope, values, ids, _scalar(scope, _mul(scope, batch, rows), i64))
    out = Reshape(scope, summed, _pack(scope, [batch, rows, outer, inner], i64)).output
    if moved:
        out = Transpose(scope, out, swap).output
    return Reshape(scope, out, p.shape()).output


def _add1(scope: Scope, a: Any) -> Any:
    return a + 1 if isinstance(a, int) else AddV2(scope, a, np.int64(1)).output


def _gather_nd_grad(op: Any, grad: Output) -> list[Any]:
    """GatherNd's gradient: ScatterNd of the gradient into zeros of params' shape at the
    index vectors (a repeated one adds up), with the forward's bad_indices_policy (IGNORE
    skips what the gather read as zeros); none for indices. As TF, index vectors of depth 1
    in a matrix of them ([N, 1], no batch dims) give an IndexedSlices instead. With
    batch_dims b > 0, the b batch dims are flattened to one, whose coordinate is prepended
    to every index vector, and the ScatterNd's result is reshaped back."""
    scope = current_scope(op.graph)
    params, indices = op.inputs
    policy = op.get_attr("bad_indices_policy")
    bd = op.get_attr("batch_dims")
    if indices.dtype is dtypes.int16:
        indices = Cast(scope, indices, DstT=dtypes.int32).output
    dtype = indices.dtype
    p = _Dims(scope, params, dtype, near=True)
    i_dims = indices.shape.dims
    if (
        bd == 0
        and policy != "IGNORE"
        and i_dims is not None
        and len(i_dims) == 2
        and (i_dims[1] == 1)
    ):
        ids = Squeeze(scope, indices, squeeze_dims=[-1]).output
        return [IndexedSlices(grad, ids, p.vector()), None]
    if bd == 0:
        if indices.shape.rank in (None, 1):
            # One index vector gives a slice, which ScatterNd cannot take as its updates (it
            # needs a rank >= 1 of them): one more leading dim for both (TF fails there).
            indices = ExpandDims(scope, indices, np.int32(0)).output
            grad = ExpandDims(scope, grad, np.int32(0)).output
        return [ScatterNd(scope, indices, grad, p.shape(), bad_indices_policy=policy).output, None]
    q = _Dims(scope, indices, dtype)
    if q.rank is not None:
        last: Any = q.rank - 1
    else:
        last = Sub(scope, Rank(scope, indices), np.int32(1)).output
    depth = q.dim(last)
    batch = p.prod(0, bd)
    count = q.prod(bd, last)
    vectors = Reshape(scope, indices, _pack(scope, [batch, count, depth], dtype)).output
    # Each index vector's batch row, as a first coordinate: [batch, count, 1].
    rows = Range(scope, _scalar(scope, 0, dtype), _scalar(scope, batch, dtype),
                 _scalar(scope, 1, dtype))  # fmt: skip
    coordinate = Reshape(scope, rows, _pack(scope, [batch, 1, 1], dtype)).output
    coordinate = BroadcastTo(scope, coordinate, _pack(scope, [batch, count, 1], dtype)).output
    full = ConcatV2(scope, [coordinate, vectors], 2).output
    if p.rank is not None:
        rest = [p.dim(k) for k in range(bd, p.rank)]
        flat_shape = _pack(scope, [batch] + rest, dtype)
    else:
        tail = Slice(scope, p.vector(), np.array([bd], dtype.np_dtype),
                     np.array([-1], dtype.np_dtype)).output  # fmt: skip
        flat_shape = ConcatV2(scope, [_vector1(scope, batch, dtype), tail], 0)
    slice_start = _add_int(scope, depth, bd, dtype)
    if p.rank is not None and isinstance(slice_start, int):
        slices = [p.dim(k) for k in range(slice_start, p.rank)]
        updates_shape = _pack(scope, [batch, count] + slices, dtype)
    else:
        begin = _vector1(scope, slice_start, dtype)
        tail = Slice(scope, p.vector(), begin, np.array([-1], dtype.np_dtype)).output
        updates_shape = ConcatV2(scope, [_pack(scope, [batch, count], dtype), tail], 0).output
    updates = Reshape(scope, grad, updates_shape).output
    scattered = ScatterNd(scope, full, updates, flat_shape, bad_indices_policy=policy).output
    return [Reshape(scope, scattered, p.shape()).output, None]


def _add_int(scope: Scope, a: Any, b: int, dtype: Any) -> Any:
    return a + b if isinstance(a, int) else AddV2(scope, _scalar(scope, a, dtype), b).output


register_gradient("GatherV2", accepts_indexed_slices=True)(_gather_v2_grad)
register_gradient("GatherNd")(_gather_nd_grad)
