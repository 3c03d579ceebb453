"""`embedding_lookup`: TF's tf.compat.v1.nn.embedding_lookup, composed from graph ops.

With one shard it is a plain GatherV2, colocated with the table. With several it is TF's
composition: each id gets a shard (`p_assignments`) and a row inside it (`new_ids`) by the
"mod" or "div" strategy (in int32 whenever the table's row count fits it: the ids are
checked first); DynamicPartition splits the ids' positions by shard, a GatherV2 per
shard picks that shard's new ids at those positions (TF partitions the new ids as well: the
same values, one pass more); one GatherV2 per shard, colocated with that shard, reads its rows
where the shard lives; DynamicStitch puts the rows back in the ids' order (the partitioned
positions are ascending, its fast windowed case), and a Reshape gives `ids.shape + row
shape`. Nothing in it reads the ids' values at construction.

Stricter than TF:
- `partition_strategy` must be "mod" or "div", even with one shard; `params=[]` is an error;
  `max_norm` other than None raises UnimplementedError.
- Every id must be in [0, total rows), for both strategies: a GatherV2 over a zero-width
  [total rows, 0] constant checks them first and names the first bad id with its position
  (`indices[1,0] = 17 is not in [0, 13)`); TF's "mod" path can return another id's row.
- The shards must have the row counts the strategy gives their total (TF checks only "div"),
  known at construction, and one row shape and dtype (construction errors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minigraph import (
    Const,
    InvalidArgumentError,
    Output,
    Scope,
    TensorShape,
    UnimplementedError,
    dtypes,
)
from minigraph.scope import as_output
from ops.array import ConcatV2, Reshape, Shape, Size
from ops.gather_ops import GatherV2
from ops.math import Cast, FloorDiv, FloorMod, Maximum, Range, Sub
from ops.partition import DynamicPartition, DynamicStitch

__all__ = ["embedding_lookup", "shard_sizes"]

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

    Raises:
        InvalidArgumentError: an unknown strategy, no shards, bad ids dtype, shards with
            different row shapes or dtypes, or row counts that do not fit the strategy (all at
            construction); at run time, an id outside [0, total rows).
        UnimplementedError: `max_norm` is not None.
    """
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
    sub = scope.new_sub_scope(name or "embedding_lookup")
    shards = [_as_tensor(sub, p, f"params[{k}]") for k, p in enumerate(shards_in)]
    ids_t = _as_tensor(sub, ids, "ids")
    if ids_t.dtype not in _ID_TYPES:
        raise InvalidArgumentError(
            f"embedding_lookup: ids must be int16, int32 or int64; got {ids_t.dtype.name}"
        )
    row_shape = _row_shape(shards)
    if len(shards) == 1:
        # One shard is a plain gather, read where the table lives; bad ids raise everywhere.
        where = sub.with_device("").colocate_with(shards[0])
        return GatherV2(where, shards[0], ids_t, 0, bad_indices_policy="ERROR").output
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


def _sharded_lookup(
    scope: Scope, shards: list[Output], ids: Output, strategy: str, row_shape: TensorShape
) -> Output:
    n = len(shards)
    sizes = []
    for k, shard in enumerate(shards):
        dim = shard.shape.dims[0] if shard.shape.rank else None
        if dim is None:
            raise InvalidArgumentError(
                f"embedding_lookup: with {n} shards every shard's row count must be known when "
                f"the graph is built, to check the partition; params[{k}] has shape "
                f"{shard.shape}"
            )
        sizes.append(dim)
    total = sum(sizes)
    expected = shard_sizes(total, n)
    if sizes != expected:
        raise InvalidArgumentError(
            f"embedding_lookup: the {strategy!r} strategy splits {total} rows over {n} shards "
            f"as {expected}; got shard sizes {sizes}"
        )
    # Every id is checked against the whole table first (the check names the id itself), so
    # the shard arithmetic below only ever sees valid ids.
    checker = Const(scope.with_op_name("valid_ids"), np.zeros((total, 0), np.bool_))
    check = GatherV2(scope.with_op_name("check_ids"), checker, ids, 0, bad_indices_policy="ERROR")
    checked = scope.with_control_dependencies(check)
    flat = ids if ids.shape.rank == 1 else Reshape(scope, ids, [-1]).output
    # The arithmetic runs in the ids' dtype, widened to int64 when that cannot hold the table's
    # row count, then narrowed to int32 whenever int32 holds it. The checked ids are below the
    # row count, so narrowing int64 ids loses nothing; it halves the bytes every later pass
    # over them moves (the shard_ids gathers most), and the shard assignments then come out
    # in DynamicPartition's int32 without a second Cast.
    work = flat.dtype
    if max(total, n) > np.iinfo(work.np_dtype).max:
        work = dtypes.int64
    if work is dtypes.int64 and max(total, n) <= np.iinfo(np.int32).max:
        work = dtypes.int32
    if work is not flat.dtype:
        flat = Cast(checked, flat, DstT=work).output

    def const(value: Any) -> np.ndarray:
        return np.array(value, dtype=work.np_dtype)

    if strategy == "mod":
        assignments = FloorMod(checked, flat, const(n)).output
        new_ids = FloorDiv(checked, flat, const(n)).output
    else:
        # TF's formula: the first `extras` shards hold `per + 1` rows, the others `per`.
        per, extras = divmod(total, n)
        assignments = Maximum(
            checked,
            FloorDiv(checked, flat, const(per + 1)),
            FloorDiv(checked, Sub(checked, flat, const(extras)), const(max(per, 1))),
        ).output
        starts = const([p * per + min(p, extras) for p in range(n)])
        new_ids = Sub(checked, flat, GatherV2(checked, starts, assignments, 0)).output
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
        where = scope.with_device("").colocate_with(shard)
        rows.append(GatherV2(where, shard, wanted, 0).output)
    merged = DynamicStitch(scope, list(shard_positions), rows).output
    if ids.shape.rank == 1:
        return merged
    return Reshape(scope, merged, _result_shape(scope, ids, merged, row_shape)).output


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
