"""Mutations of the gather family's gradient rules (issue 21): GatherV2 and GatherNd
(ops/gather_ops.py), DynamicPartition and DynamicStitch (ops/partition.py), UnsortedSegmentSum
and ScatterNd (ops/segment.py), EnsureShape (ops/checks.py). Each breaks one key behaviour; a
test of tests/test_gradients_gather*.py, test_gradients_partition.py or
test_gradients_segment.py must go red.

    python -m tests.hostile.mutations --only GG  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

GATHER = ("tests/test_gradients_gather.py",)
GATHER_ALL = ("tests/test_gradients_gather.py", "tests/test_gradients_gather_properties.py")
PARTITION = ("tests/test_gradients_partition.py",)
SEGMENT = ("tests/test_gradients_segment.py",)
G, P, S, C = "ops/gather_ops.py", "ops/partition.py", "ops/segment.py", "ops/checks.py"

MUTATIONS = [
    # -- GatherV2 --------------------------------------------------------------------------------
    Mutation("GG1", "GatherV2 gradient: sparse (IndexedSlices) exactly at the literal axis 0", G,
             "sparse = axis_value is not None and axis_value.ndim == 0 and int(axis_value) == 0",
             "sparse = axis_value is not None and axis_value.ndim == 0 and int(axis_value) % 3 == 0",
             GATHER),
    Mutation("GG2", "GatherV2 gradient: batch_dims offsets each id by its batch row's first row", G,
             "                      _scalar(scope, rows, i64))  # fmt: skip",
             "                      _scalar(scope, 0, i64))  # fmt: skip", GATHER),
    Mutation("GG3", "GatherV2 gradient: the ids are moved in front of the outer dims", G,
             "moved = not (isinstance(outer, int) and outer == 1)", "moved = False", GATHER),
    Mutation("GG4", "GatherV2 gradient: IGNORE leaves out-of-range ids out of the sparse gradient", G,
             '    if policy != "IGNORE":\n        return values, ids',
             "    if True:\n        return values, ids", GATHER),
    Mutation("GG5", "GatherV2 gradient: IGNORE drops out-of-range ids from the dense gradient", G,
             "shifted = SelectV2(scope, _valid_ids(scope, ids, rows), shifted, np.int64(-1))",
             "shifted = shifted", GATHER),
    Mutation("GG6", "GatherV2 gradient: a gather of a gather maps the slices through the ids", G,
             "picked = GatherV2(scope, indices, grad.indices, 0).output",
             "picked = Cast(scope, grad.indices, DstT=indices.dtype).output", GATHER),
    Mutation("GG7", "GatherV2 gradient: Shape(params) is colocated with params", G,
             'where = self.scope.with_device("").colocate_with(self.t) if self.near else self.scope',
             "where = self.scope", GATHER + PARTITION),
    Mutation("GG8", "GatherV2 gradient: slices of no element keep their count", G,
             "count = -1 if isinstance(rest, int) and rest else Size(scope, indices, out_type=dtype)",
             "count = -1", GATHER),
    Mutation("GG9", "gradient shapes: the static dims multiply", G,
             "known = math.prod(d for d in dims if d is not None)",
             "known = max([1] + [d for d in dims if d is not None])", GATHER_ALL),
    # -- GatherNd --------------------------------------------------------------------------------
    Mutation("GG10", "GatherNd gradient: [N, 1] index vectors give IndexedSlices, as TF", G,
             "        and (i_dims[1] == 1)", "        and (i_dims[1] == -1)", GATHER),
    Mutation("GG11", "GatherNd gradient: one index vector (1-D indices) scatters one slice", G,
             "        if indices.shape.rank in (None, 1):", "        if False:", GATHER),
    Mutation("GG12", "GatherNd gradient: IGNORE skips what the gather read as zeros", G,
             "return [ScatterNd(scope, indices, grad, p.shape(), bad_indices_policy=policy).output, None]",
             'return [ScatterNd(scope, indices, grad, p.shape(), bad_indices_policy="").output, None]',
             GATHER),
    Mutation("GG13", "GatherNd gradient: batch_dims prepends each vector's batch row", G,
             "full = ConcatV2(scope, [coordinate, vectors], 2).output",
             "full = ConcatV2(scope, [coordinate * 0, vectors], 2).output", GATHER_ALL),
    # -- DynamicPartition, DynamicStitch -----------------------------------------------------------
    Mutation("GG14", "DynamicPartition gradient: each partition's gradient back at its rows", P,
             "stitched = ParallelDynamicStitch(scope, list(parts), list(grads)).output",
             "stitched = ParallelDynamicStitch(scope, list(parts), list(reversed(grads))).output",
             PARTITION),
    Mutation("GG15", "DynamicStitch gradient: only the winner of a repeated index (TF 2.21's bug)", P,
             "ids = SelectV2(scope, won, idx, np.int32(-1)).output", "ids = idx", PARTITION),
    Mutation("GG16", "DynamicStitch gradient: positions count across the index tensors", P,
             "        offset = end", "        offset = 0", PARTITION),
    Mutation("GG17", "DynamicStitch gradient: a partition output used twice can repeat", P,
             "    if len({t.index for t in indices}) != len(indices):", "    if False:",
             PARTITION),
    Mutation("GG18", "DynamicStitch gradient: only partitioned Ranges are known distinct", P,
             '    if source.op.type != "Range":\n        return False',
             '    if source.op.type != "Range":\n        return True', PARTITION),
    # -- UnsortedSegmentSum, ScatterNd, EnsureShape -------------------------------------------------
    Mutation("GG19", "UnsortedSegmentSum gradient: negative ids get zeros", S,
             'return GatherNd(scope, params, vectors, bad_indices_policy="IGNORE").output',
             'return GatherNd(scope, params, vectors, bad_indices_policy="").output', SEGMENT),
    Mutation("GG20", "UnsortedSegmentSum gradient: only constant non-negative ids skip the mask", S,
             "if constant is not None and not (constant.size and int(constant.min()) < 0):",
             "if constant is not None:", SEGMENT),
    Mutation("GG21", "ScatterNd gradient: IGNORE gives skipped vectors zeros", S,
             'ignore = op.get_attr("bad_indices_policy") == "IGNORE"', "ignore = False", SEGMENT),
    Mutation("GG22", "EnsureShape gradient: passed through unchanged", C,
             "def _ensure_shape_grad(op: Any, grad: Any) -> Any:\n    return grad",
             "def _ensure_shape_grad(op: Any, grad: Any) -> Any:\n    return -grad", SEGMENT),
]  # fmt: skip
