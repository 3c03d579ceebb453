"""`embedding_lookup`: TF's tf.compat.v1.nn.embedding_lookup, composed from graph ops.

With one shard it is a plain GatherV2, colocated with the table. With several it is TF's
composition: each id gets a shard (`p_assignments`) and a row inside it (`new_ids`) by the
"mod" or "div" strategy (in int32 whenever the table's row count fits it: the ids are
checked first); DynamicPartition splits the ids' positions by shard, a GatherV2 per
shard picks that shard's new ids at those positions (TF partitions the new ids as well: the
same values, one pass more); one GatherV2 per shard, colocated with that shard, reads its rows
where the shard lives; DynamicStitch puts the rows back in the ids' order (the partitioned
positions are ascending, its fast windowed case), and a Reshape gives `ids.shape + row
shape`. The result's static shape is `ids.shape + row shape` for every shard count (TF's
`set_shape`; here an EnsureShape where the composition alone would lose dims). Nothing in it
reads the ids' values at construction. The composition's name scope is `name`, else the
scope's op name (`scope.with_op_name("emb")`, as TF's `name=`), else "embedding_lookup".

Shards whose row counts are unknown at construction are fine, with either strategy: the row
counts are read at run time (a Shape colocated with each such shard, so that only its shape
leaves its device), the partition is computed from them, and they are checked against the
strategy there, with the construction-time message's content in TF's Assert format.

Every node is an op TensorFlow has, so graphs using embedding_lookup import into TensorFlow and
run there with the same results and checks (tests/test_fidelity_tf.py).

When a plan runs the composition (this one, or TF's own from a frozen graph) with every node
on one CPU device, the graph optimizer's remapping pass fuses it (`fused_sharded_lookup`, at
the bottom): one plan-private FusedShardedLookup node gathers each row straight into the
output, and raises what the composition would, naming the same nodes. The graph keeps the
composition.

Shards that are Variables are read with ResourceGather (only the rows the ids name, where the
variable lives), their unknown row counts with VariableShape; the gradient reaches each as
IndexedSlices of its rows.

Stricter than TF:
- `partition_strategy` must be "mod" or "div", even with one shard; `params=[]` is an error;
  `max_norm` other than None raises UnimplementedError.
- Every id must be in [0, total rows), for both strategies and on every device: the ids' Min
  and Max, compared with the row count, feed an Assert that everything else runs after
  (`assertion failed: [embedding_lookup: every id must be in [0, rows) for a table of] [13]
  [rows; got ids from] [0] [to] [17]`); TF's "mod" path can return another id's row, and its
  one-shard gather returns zeros on a GPU.
- The shards must have the row counts the strategy gives their total (TF checks only "div"):
  at construction when they are known (also when only some are, as far as those decide), else
  at run time; and one row shape and dtype (construction errors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from minigraph import (
    Const,
    InvalidArgumentError,
    OpDef,
    Operation,
    OpError,
    Output,
    RewriteContext,
    Scope,
    TensorShape,
    UnimplementedError,
    Variable,
    dtypes,
    register_rewrite,
)
from minigraph.kernel import KernelContext
from minigraph.registry import KernelDef, find_kernel, kernel_attrs
from minigraph.scope import as_output
from ops.array import ConcatV2, Pack, Rank, Reshape, Shape, Size
from ops.checks import Assert, EnsureShape
from ops.gather_ops import GatherV2, gather
from ops.math import (
    AddV2,
    Cast,
    Equal,
    FloorDiv,
    FloorMod,
    GreaterEqual,
    Less,
    LogicalAnd,
    Maximum,
    Minimum,
    Mul,
    Range,
    Sub,
)
from ops.partition import DynamicPartition, DynamicStitch
from ops.reduction import All, Max, Min, Sum
from ops.resource_variables import VariableShape

__all__ = ["embedding_lookup", "shard_sizes", "fused_sharded_lookup"]

_STRATEGIES = ("mod", "div")
_ID_TYPES = (dtypes.int16, dtypes.int32, dtypes.int64)


def shard_sizes(total_rows: int, num_shards: int) -> list[int]:
    """The row count of each shard of a `total_rows` table split `num_shards` ways, which is
    the same for "mod" and "div": the first `total_rows % num_shards` shards get one more."""
    q, r = divmod(total_rows, num_shards)
    return [q + 1 if p < r else q for p in range(num_shards)]


def embedding_lookup(
    scope: Scope,
    params: Any,
    ids: Any,
    partition_strategy: str = "mod",
    name: str | None = None,
    max_norm: Any = None,
) -> Output:
    """The rows of `params` named by `ids`: shape `ids.shape + params.shape[1:]`.

    `params` is one table (an Output, builder or array) or a list of shards (a Python list or
    tuple) that together hold the table's rows: under "mod", row `id` is row `id // P` of
    shard `id % P`; under "div", the rows are split in contiguous blocks, the first
    `total % P` shards one row longer. `ids` are int16, int32 or int64 of any shape.

    The nodes go in the name scope `name`, else the scope's op name, else "embedding_lookup".

    Raises:
        InvalidArgumentError: an unknown strategy, no shards, bad ids dtype, shards with
            different row shapes or dtypes, or known row counts that do not fit the strategy
            (all at construction); at run time, an id outside [0, total rows), or row counts
            unknown at construction that do not fit the strategy.
        UnimplementedError: `max_norm` is not None.
    """
    if not isinstance(scope, Scope):
        raise InvalidArgumentError(
            "embedding_lookup: the first argument must be a Scope (e.g. "
            f"Scope.new_root_scope()); got {type(scope).__name__}"
        )
    if max_norm is not None:
        raise UnimplementedError(
            f"embedding_lookup: max_norm={max_norm!r} is not implemented; pass max_norm=None"
        )
    if not isinstance(partition_strategy, str) or partition_strategy not in _STRATEGIES:
        raise InvalidArgumentError(
            f"Unrecognized partition strategy: {partition_strategy!r} (expected 'mod' or 'div')"
        )
    shards_in = list(params) if isinstance(params, (list, tuple)) else [params]
    if not shards_in:
        raise InvalidArgumentError("embedding_lookup: Need at least one param")
    with scope.graph.transaction():  # an error leaves the graph as it was
        return _lookup(scope, shards_in, ids, partition_strategy, name)


def _lookup(scope: Scope, shards_in: list, ids: Any, partition_strategy: str, name: Any) -> Output:
    sub = scope.new_sub_scope(name or scope.op_name or "embedding_lookup")
    # Variables stay Variables: their rows are read with ResourceGather, where they live.
    shards = [
        p if isinstance(p, Variable) else _as_tensor(sub, p, f"params[{k}]")
        for k, p in enumerate(shards_in)
    ]
    ids_t = _as_tensor(sub, ids, "ids")
    if ids_t.dtype not in _ID_TYPES:
        raise InvalidArgumentError(
            f"embedding_lookup: ids must be int16, int32 or int64; got {ids_t.dtype.name}"
        )
    row_shape = _row_shape(shards)
    if len(shards) == 1:
        # One shard is a plain gather, read where the table lives, after the id check (so bad
        # ids raise on every device: a GPU's gather would write zeros).
        (rows,) = _static_rows(shards)
        total = rows if rows is not None else _run_time_rows(sub, shards, [None])[0]
        rank = ids_t.shape.rank
        axes = np.arange(rank, dtype=np.int32) if rank is not None else None
        check = _check_ids(sub, ids_t, axes, total)
        where = sub.with_control_dependencies(check).with_device("").colocate_with(_home(shards[0]))
        return gather(where, shards[0], ids_t, 0).output
    return _sharded_lookup(sub, shards, ids_t, partition_strategy, row_shape)


def _as_tensor(scope: Scope, value: Any, what: str) -> Output:
    out = as_output(value)
    if out is not None:
        return out
    try:
        return Const(scope.with_op_name(what.replace("[", "_").replace("]", "")), value).output
    except InvalidArgumentError as e:
        raise InvalidArgumentError(
            f"embedding_lookup: cannot convert {what} to a tensor: {e.message}"
        ) from None


def _home(shard: Any) -> Any:
    """What a shard's nodes are colocated with: its VarHandleOp for a Variable."""
    return shard.op if isinstance(shard, Variable) else shard


def _row_shape(shards: Sequence[Output]) -> TensorShape:
    """The shards' common row shape (`shape[1:]`), checked: one dtype, rank >= 1, one rows."""
    rows = TensorShape(None)
    for k, shard in enumerate(shards):
        if shard.dtype is not shards[0].dtype:
            raise InvalidArgumentError(
                f"embedding_lookup: every shard must have one dtype; params[0] is "
                f"{shards[0].dtype.name} and params[{k}] is {shard.dtype.name}"
            )
        shape = shard.shape
        if shape.rank == 0:
            raise InvalidArgumentError(
                f"embedding_lookup: params[{k}] must be at least 1-D; got a scalar"
            )
        if shape.rank is None:
            continue
        here = TensorShape(shape.dims[1:])
        if not rows.is_compatible_with(here):
            raise InvalidArgumentError(
                f"embedding_lookup: every shard must have the same row shape; params[{k}] has "
                f"shape {shape}, rows {here}, where the shards before it have rows {rows}"
            )
        rows = rows.merge_with(here)
    return rows


def _static_rows(shards: Sequence[Output]) -> list[int | None]:
    """Each shard's row count where its static shape knows it, else None."""
    return [shard.shape.dims[0] if shard.shape.rank else None for shard in shards]


def _run_time_rows(
    scope: Scope, shards: Sequence[Output], sizes: Sequence[int | None]
) -> tuple[Output, Output]:
    """(total rows, rows per shard) as int64 tensors: the known counts as constants, the
    others from a Shape colocated with the shard (only the shape leaves the shard's device)."""
    parts: list[Any] = []
    for shard, size in zip(shards, sizes):
        if size is not None:
            parts.append(np.int64(size))
            continue
        at = scope.with_device("").colocate_with(_home(shard))
        if isinstance(shard, Variable):
            shape = VariableShape(at, shard, out_type=dtypes.int64).output
        else:
            shape = Shape(at, shard, out_type=dtypes.int64).output
        parts.append(GatherV2(at, shape, 0, 0).output)
    per_shard = Pack(scope, parts).output
    return Sum(scope, per_shard, 0).output, per_shard


def _check_ids(scope: Scope, ids: Output, axes: Any, total: int | Output) -> Assert:
    """An Assert that every id is in [0, total): the ids' Min and Max against the row count
    (two passes over the ids; the data the message shows are those scalars)."""
    check = scope.new_sub_scope("check_ids")
    if axes is None:  # ids of unknown rank: every dim
        axes = Range(check, 0, Rank(check, ids), 1)
    low = Min(check, ids, axes).output
    high = Max(check, ids, axes).output
    ok = GreaterEqual(check, low, np.array(0, ids.dtype.np_dtype)).output
    if isinstance(total, int):
        if total <= np.iinfo(ids.dtype.np_dtype).max:  # else every id of this dtype is below
            ok = LogicalAnd(check, ok, Less(check, high, np.array(total, ids.dtype.np_dtype)))
    else:
        below = Less(check, Cast(check, high, DstT=dtypes.int64), total)
        ok = LogicalAnd(check, ok, below)
    message = [
        "embedding_lookup: every id must be in [0, rows) for a table of",
        np.int64(total) if isinstance(total, int) else total,
        "rows; got ids from",
        low,
        "to",
        high,
    ]
    return Assert(check, ok, message)


def _check_known_sizes(sizes: Sequence[int | None], strategy: str) -> None:
    """Refuses row counts that no total fits, as far as the known ones decide: both strategies
    give the first `total % n` shards one row more than the others."""
    known = [(k, s) for k, s in enumerate(sizes) if s is not None]
    for i, (k, a) in enumerate(known):
        for j, b in known[i + 1 :]:
            if not 0 <= a - b <= 1:
                shown = ", ".join("?" if s is None else str(s) for s in sizes)
                raise InvalidArgumentError(
                    f"embedding_lookup: the {strategy!r} strategy gives every shard the same "
                    f"row count, the first ones one more; got shard sizes [{shown}] (params[{k}] "
                    f"has {a} rows and params[{j}] {b})"
                )


def _check_run_time_sizes(
    scope: Scope, strategy: str, total: Output, per_shard: Output, n: int
) -> tuple[Assert, Output, Output]:
    """An Assert that the run-time row counts are what the strategy gives their total (the
    construction-time check's message, in Assert's format); also (rows per shard, extras)."""
    check = scope.new_sub_scope("check_shards")
    per = FloorDiv(check, total, np.int64(n)).output
    extras = FloorMod(check, total, np.int64(n)).output
    shard = Range(check, np.int64(0), np.int64(n), np.int64(1)).output
    one_more = Cast(check, Less(check, shard, extras), DstT=dtypes.int64)
    expected = AddV2(check, per, one_more).output
    ok = All(check, Equal(check, per_shard, expected), 0)
    message = [
        f"embedding_lookup: the {strategy} strategy splits",  # no quotes: TF escapes them
        total,
        f"rows over {n} shards as",
        expected,
        "; got shard sizes",
        per_shard,
    ]
    return Assert(check, ok, message, summarize=max(n, 3)), per, extras


def _sharded_lookup(
    scope: Scope, shards: list[Output], ids: Output, strategy: str, row_shape: TensorShape
) -> Output:
    n = len(shards)
    sizes = _static_rows(shards)
    flat = ids if ids.shape.rank == 1 else Reshape(scope, ids, [-1]).output
    if None not in sizes:
        total = sum(sizes)
        expected = shard_sizes(total, n)
        if sizes != expected:
            raise InvalidArgumentError(
                f"embedding_lookup: the {strategy!r} strategy splits {total} rows over {n} "
                f"shards as {expected}; got shard sizes {sizes}"
            )
        # Every id is checked against the whole table first (the message names the smallest
        # and largest id), so the shard arithmetic below only ever sees valid ids.
        checks = [_check_ids(scope, flat, [0], total)]
        return _assemble(scope, shards, ids, flat, strategy, row_shape, checks, total, None)
    _check_known_sizes(sizes, strategy)
    total_t, per_shard = _run_time_rows(scope, shards, sizes)
    sized, per, extras = _check_run_time_sizes(scope, strategy, total_t, per_shard, n)
    checks = [_check_ids(scope, flat, [0], total_t), sized]
    return _assemble(scope, shards, ids, flat, strategy, row_shape, checks, None, (per, extras))


def _assemble(
    scope: Scope,
    shards: list[Output],
    ids: Output,
    flat: Output,
    strategy: str,
    row_shape: TensorShape,
    checks: list[Assert],
    total: int | None,
    run_time: tuple[Output, Output] | None,
) -> Output:
    """The composition after the checks: `total` is the static row count, or `run_time` the
    (rows per shard, extras) tensors when the row counts are known only at run time."""
    n = len(shards)
    checked = scope.with_control_dependencies(checks)
    # The arithmetic runs in the ids' dtype, widened to int64 when that cannot hold the table's
    # row count, then narrowed to int32 whenever int32 holds it. The checked ids are below the
    # row count, so narrowing int64 ids loses nothing; it halves the bytes every later pass
    # over them moves (the shard_ids gathers most), and the shard assignments then come out
    # in DynamicPartition's int32 without a second Cast. Row counts known only at run time:
    # "mod" keeps the ids' dtype (the ids are checked, so id // n fits it), "div" runs in int64.
    work = flat.dtype
    if total is not None:
        if max(total, n) > np.iinfo(work.np_dtype).max:
            work = dtypes.int64
        if work is dtypes.int64 and max(total, n) <= np.iinfo(np.int32).max:
            work = dtypes.int32
    elif strategy == "div" or n > np.iinfo(work.np_dtype).max:
        work = dtypes.int64
    if work is not flat.dtype:
        flat = Cast(checked, flat, DstT=work).output

    def const(value: Any) -> np.ndarray:
        return np.array(value, dtype=work.np_dtype)

    if strategy == "mod":
        assignments = FloorMod(checked, flat, const(n)).output
        new_ids = FloorDiv(checked, flat, const(n)).output
    elif total is not None:
        # TF's formula: the first `extras` shards hold `per + 1` rows, the others `per`.
        per, extras = divmod(total, n)
        assignments = Maximum(
            checked,
            FloorDiv(checked, flat, const(per + 1)),
            FloorDiv(checked, Sub(checked, flat, const(extras)), const(max(per, 1))),
        ).output
        starts = const([p * per + min(p, extras) for p in range(n)])
        new_ids = Sub(checked, flat, GatherV2(checked, starts, assignments, 0)).output
    else:
        # The same formula over the run-time row counts (int64 scalars).
        per_t, extras_t = run_time  # type: ignore[misc]
        assignments = Maximum(
            checked,
            FloorDiv(checked, flat, AddV2(checked, per_t, np.int64(1))),
            FloorDiv(checked, Sub(checked, flat, extras_t), Maximum(checked, per_t, np.int64(1))),
        ).output
        shard = Range(checked, np.int64(0), np.int64(n), np.int64(1)).output
        starts_t = AddV2(checked, Mul(checked, shard, per_t), Minimum(checked, shard, extras_t))
        new_ids = Sub(checked, flat, GatherV2(checked, starts_t, assignments, 0)).output
    if assignments.dtype is not dtypes.int32:
        assignments = Cast(checked, assignments, DstT=dtypes.int32).output
    positions = Range(scope, 0, Size(scope, flat), 1).output
    # TF partitions both the new ids and the positions; partitioning the positions only and
    # gathering each shard's new ids at its (ascending) positions gives the same values with
    # one pass less over all the ids (measured 3-8% of the whole lookup).
    shard_positions = DynamicPartition(scope, positions, assignments, num_partitions=n).outputs
    rows = []
    for shard, at in zip(shards, shard_positions):
        wanted = GatherV2(scope.with_op_name("shard_ids"), new_ids, at, 0).output
        # Read each shard where it lives (a GPU, another task), whatever the scope's device.
        where = scope.with_device("").colocate_with(_home(shard))
        rows.append(gather(where, shard, wanted, 0).output)
    merged = DynamicStitch(scope, list(shard_positions), rows).output
    result = merged
    if ids.shape.rank != 1:
        result = Reshape(scope, merged, _result_shape(scope, ids, merged, row_shape)).output
    # TF's set_shape: ids.shape + row shape, which the stitch (and a Reshape to a computed
    # shape) cannot infer; EnsureShape states it (and checks it, which costs nothing).
    if ids.shape.rank is not None:
        target = ids.shape.concatenate(row_shape)
        if result.shape.merge_with(target) != result.shape:
            result = EnsureShape(scope, result, target.merge_with(result.shape)).output
    return result


def _result_shape(scope: Scope, ids: Output, merged: Output, row_shape: TensorShape) -> Any:
    """The Reshape target `ids.shape + row shape`: a constant (with at most one -1) when the
    static shapes allow, else computed from Shape(ids) at run time."""
    id_dims = ids.shape.dims
    if id_dims is not None and row_shape.is_fully_defined():
        if sum(d is None for d in id_dims) <= 1:
            return np.array([-1 if d is None else d for d in id_dims] + list(row_shape.dims),
                            dtype=np.int32)  # fmt: skip
    if row_shape.is_fully_defined():
        rows: Any = np.array(row_shape.dims, dtype=np.int32)
    else:
        # The row dims of the stitched result [n, *rows]: its shape without the first entry.
        rank = merged.shape.rank
        rows = GatherV2(scope, Shape(scope, merged), np.arange(1, rank, dtype=np.int32), 0)
    return ConcatV2(scope, [Shape(scope, ids), rows], 0)


# -- the fused lookup (graph optimizer, remapping) ----------------------------------------------
#
# When every node of the composition above (or TF's own: tf.nn.embedding_lookup partitions the
# new ids as well and stitches with ParallelDynamicStitch) runs on one CPU device, the optimizer
# replaces the stitch by one FusedShardedLookup node that gathers every row straight into the
# output: one move per row where the composition makes two. The op is private to plans (never
# in a Graph, a GraphDef or the op registry): graphs keep TF's composition.

_FUSED_DOC = """output[i] = params[partitions[i]][ids[i]] for i < size: a sharded lookup.

It stands for Range(0, size, 1) -> DynamicPartition(positions, partitions, N) -> each shard's
ids (a GatherV2 of `ids` at the shard's positions, or a DynamicPartition of `ids`) -> a GatherV2
per shard -> DynamicStitch or ParallelDynamicStitch (`node_roles`, `node_names`, `node_types`,
`node_sources` list those nodes in the plan's order), and raises what they would: anything but
the plain case runs their own kernels, in that order, and their errors name them."""


def _fused_lookup_shape(ctx: Any) -> TensorShape:
    """[size] + the shards' common row shape (the stitch's own inference, merged)."""
    rows = TensorShape(None)
    for shape in ctx.input_shapes[3:]:
        if shape.rank is None or shape.rank < 1:
            continue
        here = TensorShape(shape.dims[1:])
        if not rows.is_compatible_with(here):
            return TensorShape(None)  # the stitch raises at run time
        rows = rows.merge_with(here)
    size = ctx.constant_value(2)
    first = TensorShape([None if size is None else int(size)])
    return first.concatenate(rows) if rows.rank is not None else TensorShape(None)


_FUSED_LOOKUP = OpDef(
    "FusedShardedLookup",
    inputs=["ids: Tidx", "partitions: int32", "size: int32", "params: N * T"],
    outputs=["output: T"],
    attrs=[
        "N: int >= 1",
        "T: type",
        "Tidx: {int16, int32, int64}",
        'bad_indices_policy: {"", "DEFAULT", "ERROR", "IGNORE"} = ""',
        "node_roles: list(string)",
        "node_names: list(string)",
        "node_types: list(string)",
        "node_sources: list(string)",
    ],
    shape_fn=_fused_lookup_shape,
    doc=_FUSED_DOC,
)

_UNSIGNED = {
    np.dtype(np.int16): np.uint16,
    np.dtype(np.int32): np.uint32,
    np.dtype(np.int64): np.uint64,
}
# Ids per block of the fused gather: its int64 offsets (512 KiB) stay in a core's cache.
_BLOCK = 1 << 16
# Bytes of rows per block where the shards are gathered through a scratch: it stays in cache.
_SCRATCH_BYTES = 256 << 10
# Outputs at least this large are gathered on two threads (as GatherV2's: memory latency bound).
_PARALLEL_BYTES = 4 << 20


def _fused_lookup_kernel(
    ctx: Any,
    ids: np.ndarray,
    partitions: np.ndarray,
    size: np.ndarray,
    params: list[np.ndarray],
    *,
    bad_indices_policy: str,
    node_roles: tuple[str, ...],
    node_names: tuple[str, ...],
    node_types: tuple[str, ...],
    node_sources: tuple[str, ...],
) -> np.ndarray:
    """The fast path when everything is plain (shapes as the composition makes them, every
    partition and id in range, C-contiguous shards of fixed-size dtypes); else the
    composition's own kernels, which raise (or, under IGNORE, fill) what the nodes would."""
    n = int(size)
    out = _fast_lookup(ctx, ids, partitions, n, params)
    if out is not None:
        return out
    return _composed_lookup(
        ctx, ids, partitions, n, params, bad_indices_policy,
        list(zip(node_roles, node_names, node_types, node_sources)),
    )  # fmt: skip


def _fast_lookup(
    ctx: Any, ids: np.ndarray, partitions: np.ndarray, n: int, params: list[np.ndarray]
) -> np.ndarray | None:
    """The rows gathered into the output, or None when the case is not plain.

    The shards are C-contiguous arrays of one dtype and row shape: row j of shard k is the
    `row_bytes` bytes at address(k) + j * row_bytes. Where every shard's address is a whole
    number of rows from the lowest one's (large arrays usually are: their memory is mapped in
    whole pages), one contiguous view of rows from the lowest address covers every shard, and
    row j of shard k is its row (address(k) - base) / row_bytes + j: one `take` moves each row
    once, straight into the output. Otherwise each block of ids is gathered shard by shard
    into a cache-sized scratch, and from there into place. Only rows inside the shards are
    ever read: each block's partitions and ids are checked before its rows move."""
    if n == 0 or ids.shape != (n,) or partitions.shape != (n,):
        return None
    first = params[0]
    if first.ndim < 1 or first.dtype.hasobject:
        return None
    row_shape = first.shape[1:]
    addresses, counts = [], []
    for shard in params:
        # Every shard's rank, not only the first's: a 0-d shard has no rows (its gather
        # raises), though its shape[1:] matches a 1-D first shard's.
        if shard.ndim < 1 or shard.shape[1:] != row_shape or shard.dtype != first.dtype:
            return None
        if not shard.flags.c_contiguous:
            return None
        addresses.append(shard.ctypes.data)
        counts.append(shard.shape[0])
    row_bytes = first.itemsize * math.prod(row_shape)
    if row_bytes == 0 or not any(counts):
        return None  # nothing to move, or every id is out of range: the composition's work
    elems = math.prod(row_shape)
    live = [k for k, c in enumerate(counts) if c]
    base_k = min(live, key=lambda k: addresses[k])
    base = addresses[base_k]
    table = None
    if all((addresses[k] - base) % row_bytes == 0 for k in live):
        end = max(addresses[k] + counts[k] * row_bytes for k in live)
        # Rows of the shards' dtype, as numpy's own take of a 2-D table reads them.
        table = as_strided(params[base_k].reshape(-1), shape=((end - base) // row_bytes, elems),
                           strides=(row_bytes, first.itemsize), writeable=False)  # fmt: skip
        if not table.flags.c_contiguous:  # np.take would copy the whole span
            table = None
    # Shards without rows get offset 0 and limit 0: no id may name them.
    offsets = np.array([(addresses[k] - base) // row_bytes if counts[k] and table is not None
                        else 0 for k in range(len(params))], dtype=np.int64)  # fmt: skip
    limits = np.array(counts, dtype=np.int64)
    smallest = min(counts)
    out = ctx.empty((n,) + row_shape, first.dtype)
    flat_out = out.reshape(n, elems)
    shard_rows = [p.reshape(p.shape[0], elems) for p in params]
    unsigned_ids = ids.view(_UNSIGNED[ids.dtype])
    unsigned_parts = partitions.view(np.uint32)
    shards = len(params)
    threads = ctx.intra_op_threads if n * row_bytes >= _PARALLEL_BYTES else 1
    threads = max(1, min(threads, 2))
    bounds = [n * t // threads for t in range(threads + 1)]
    clean = [True] * threads
    block = _BLOCK if table is not None else max(256, _SCRATCH_BYTES // row_bytes)

    def part(t: int) -> None:
        size = min(block, bounds[t + 1] - bounds[t])
        where = np.empty(size, np.int64)
        base_of = np.empty(size, np.int64)
        if table is None:
            scratch = np.empty((size, elems), first.dtype)
            order = np.arange(size, dtype=np.int64)
            mask = np.empty(size, np.bool_)
        for lo in range(bounds[t], bounds[t + 1], block):
            hi = min(bounds[t + 1], lo + block)
            m = hi - lo
            p, i = unsigned_parts[lo:hi], unsigned_ids[lo:hi]
            g, b = where[:m], base_of[:m]
            if int(p.max()) >= shards:
                clean[t] = False
                return
            if int(i.max()) >= smallest:
                limits.take(p, 0, b, "clip")
                if bool((i >= b).any()):
                    clean[t] = False
                    return
            if table is not None:
                offsets.take(p, 0, b, "clip")
                np.add(ids[lo:hi], b, out=g)
                table.take(g, 0, flat_out[lo:hi], "clip")
                continue
            filled = 0
            for k in range(shards):
                np.equal(p, k, out=mask[:m])
                at = np.flatnonzero(mask[:m])
                c = at.size
                if c:
                    shard_rows[k].take(ids[lo:hi].take(at), 0, scratch[filled : filled + c], "clip")
                    g[at] = order[filled : filled + c]
                    filled += c
            scratch.take(g, 0, flat_out[lo:hi], "clip")

    ctx.parallel_for(part, threads)
    return out if all(clean) else None


def _composed_lookup(
    ctx: Any,
    ids: Any,
    partitions: Any,
    n: int,
    params: list[Any],
    policy: str,
    nodes: list[tuple[str, str, str, str]],
) -> Any:
    """The composition, node by node, with the nodes' own kernels (in the plan's order), each
    with a KernelContext of its node's name: errors are theirs, word for word."""
    xp = ctx.xp
    axis = xp.asarray(np.int32(0))
    shard_count = len(params)
    position_parts: list[Any] = []
    shard_ids: list[Any] = [None] * shard_count
    rows: list[Any] = [None] * shard_count
    result = None
    for role, name, op_type, source in nodes:
        try:
            if role == "positions":
                position_parts = _kernel_call(
                    ctx, name, "DynamicPartition", {"num_partitions": shard_count,
                    "T": dtypes.int32}, xp.arange(n, dtype=np.int32), partitions,
                )  # fmt: skip
            elif role == "ids":
                shard_ids = _kernel_call(
                    ctx, name, "DynamicPartition", {"num_partitions": shard_count,
                    "T": dtypes.as_dtype(ids.dtype)}, ids, partitions,
                )  # fmt: skip
            elif role.startswith("ids:"):
                k = int(role[4:])
                shard_ids[k] = _kernel_call(
                    ctx, name, "GatherV2", _gather_attrs(ids, position_parts[k], policy),
                    ids, position_parts[k], axis,
                )  # fmt: skip
            elif role.startswith("rows:"):
                k = int(role[5:])
                rows[k] = _kernel_call(
                    ctx, name, "GatherV2", _gather_attrs(params[k], shard_ids[k], policy),
                    params[k], shard_ids[k], axis,
                )  # fmt: skip
            else:
                result = _kernel_call(
                    ctx, name, op_type, {"N": shard_count,
                    "T": dtypes.as_dtype(params[0].dtype)}, list(position_parts), rows,
                )  # fmt: skip
        except OpError as e:
            # The error of the node this one stands for: the plan names it (and its source).
            e.fused_origin = (name, op_type, source)
            raise
    return result


def _gather_attrs(params: Any, indices: Any, policy: str) -> dict[str, Any]:
    return {
        "batch_dims": 0,
        "bad_indices_policy": policy,
        "Tparams": dtypes.as_dtype(params.dtype),
        "Tindices": dtypes.as_dtype(indices.dtype),
        "Taxis": dtypes.int32,
    }


def _kernel_call(ctx: Any, name: str, op_type: str, attrs: dict[str, Any], *inputs: Any) -> Any:
    """The registered kernel of `op_type` on ctx's device, run as node `name` would run it."""
    kernel = find_kernel(op_type, ctx.device.device_type, attrs, "", name)
    sub = KernelContext(ctx.device, name, op_type, (False,) * len(inputs))
    return kernel.fn(sub, *inputs, **kernel_attrs(kernel.fn, attrs))


_FUSED_KERNELS = (
    KernelDef(_FUSED_LOOKUP, "CPU", _fused_lookup_kernel, {}, {}, frozenset(["size"]), "", 0,
              trusted=True),
)  # fmt: skip


def _constant_is(rw: RewriteContext, t: Output, value: int) -> bool:
    found = rw.constant(t)
    return found is not None and found.ndim == 0 and int(found) == value


def _plain_gather(rw: RewriteContext, t: Output) -> tuple[Operation, Output, Output] | None:
    """(node, params, indices) when `t` is output 0 of a GatherV2 on axis 0 (a constant),
    batch_dims 0, no kernel label, on the rewritten node's device; else None."""
    op = t.op
    if rw.is_fed(t) or op.type != "GatherV2" or op.kernel_label or op.get_attr("batch_dims"):
        return None
    params, indices, axis = rw.inputs_of(op)
    if not _constant_is(rw, axis, 0) or rw.device_of(op) is not rw.device:
        return None
    return op, params, indices


def fused_sharded_lookup(rw: RewriteContext) -> list[Output] | None:
    """DynamicStitch (or ParallelDynamicStitch) of a sharded lookup's composition, every node
    on one device (see `_FUSED_DOC`), becomes one FusedShardedLookup node."""
    stitch = rw.op
    n = stitch.get_attr("N")
    indices, data = rw.inputs[:n], rw.inputs[n:]
    split = indices[0].op
    if split.type != "DynamicPartition" or split.get_attr("num_partitions") != n:
        return None
    if any(t.op is not split or t.value_index != k or rw.is_fed(t) for k, t in enumerate(indices)):
        return None
    positions, partitions = rw.inputs_of(split)
    counter = positions.op
    if rw.is_fed(positions) or counter.type != "Range" or positions.dtype is not dtypes.int32:
        return None
    start, size, delta = rw.inputs_of(counter)
    if not (_constant_is(rw, start, 0) and _constant_is(rw, delta, 1)):
        return None
    if rw.is_fed(size) or size.op.type != "Size":
        return None  # a Size is never negative: the Range cannot fail
    nodes: list[tuple[str, Operation]] = [("positions", split)]
    shards: list[Output] = []
    source: Output | None = None
    policies = set()
    for k, t in enumerate(data):
        found = _plain_gather(rw, t)
        if found is None:
            return None
        gather_op, shard, wanted = found
        if rw.is_fed(wanted):
            return None
        inner = wanted.op
        if inner.type == "GatherV2":  # minigraph's: the shard's ids at its positions
            found = _plain_gather(rw, wanted)
            if found is None or found[2] is not indices[k]:
                return None
            policies.add(inner.get_attr("bad_indices_policy"))
            nodes.append((f"ids:{k}", inner))
            ids = found[1]
        elif inner.type == "DynamicPartition":  # TF's: the new ids partitioned the same way
            ids, by = rw.inputs_of(inner)
            if by is not partitions or wanted.value_index != k:
                return None
            if inner.get_attr("num_partitions") != n or rw.device_of(inner) is not rw.device:
                return None
            if k == 0:
                nodes.append(("ids", inner))
        else:
            return None
        if source is None:
            source = ids
        elif ids is not source:
            return None
        policies.add(gather_op.get_attr("bad_indices_policy"))
        nodes.append((f"rows:{k}", gather_op))
        shards.append(shard)
    if source is None or source.dtype.name not in ("int16", "int32", "int64") or len(policies) != 1:
        return None
    if rw.device_of(split) is not rw.device:
        return None
    absorbed = [op for _, op in nodes]
    if not all(rw.can_absorb(op) for op in absorbed):
        return None
    nodes.sort(key=lambda item: rw.position(item[1]))
    nodes.append(("stitch", stitch))
    fused = rw.node(
        _FUSED_LOOKUP,
        [source, partitions, size, shards],
        {
            "bad_indices_policy": policies.pop(),
            "node_roles": [role for role, _ in nodes],
            "node_names": [op.name for _, op in nodes],
            "node_types": [op.type for _, op in nodes],
            "node_sources": [op.source for _, op in nodes],
        },
        name=stitch.name,
        kernels=_FUSED_KERNELS,
    )
    rw.absorb(*absorbed)
    if rw.can_absorb(counter):
        rw.absorb(counter)
    return [fused.outputs[0]]


register_rewrite("DynamicStitch", fused_sharded_lookup, pass_name="remapping")
register_rewrite("ParallelDynamicStitch", fused_sharded_lookup, pass_name="remapping")

# The library's other rewrites (ops/rewrites.py), registered with the families they rewrite
# (every one of them is loaded by now): importing the op library turns them on.
import ops.rewrites  # noqa: E402, F401
