"""Mutations of the segment and scatter ops (issue 20): ops/segment.py (UnsortedSegmentSum,
ScatterNd), ParallelDynamicStitch in ops/partition.py and the IndexAdd op of
examples/custom_op.py. Each breaks one key behaviour; a test must go red.

    python -m tests.hostile.mutations --only EX --only PDS --only SEG --only SN  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

SUM = ("tests/test_segment_sum.py",)
SCATTER = ("tests/test_segment_scatter_nd.py",)
STITCH = ("tests/test_parallel_dynamic_stitch.py",)
EXAMPLE = ("tests/test_examples.py",)
S = "ops/segment.py"

MUTATIONS = [
    # -- UnsortedSegmentSum ------------------------------------------------------------------
    Mutation("SEG1", "UnsortedSegmentSum: negative ids are dropped (TF 2.21)", S,
             "keep = xp.flatnonzero(flat >= 0)", "keep = xp.flatnonzero(flat >= -(1 << 62))", SUM),
    Mutation("SEG2", "UnsortedSegmentSum: an id >= num_segments is an error", S,
             "    if flat.size == 0 or int(flat.max()) < limit:\n        return None",
             "    if True:\n        return None", SUM),
    Mutation("SEG3", "scatter: a repeated id's values are combined in C order (TF's rounding)", S,
             "owner.put(rest_keys[::-1], here[::-1])", "owner.put(rest_keys, here)", SUM),
    Mutation("SEG4", "scatter: float sums start from +0.0 (-0.0 alone gives +0.0, as TF)", S,
             "np.add(values[a : a + m], zero, out=scratch[:m])",
             "np.copyto(scratch[:m], values[a : a + m])", SUM),
    Mutation("SEG4b", "scatter: a repeated id's first value starts from +0.0 too", S,
             "            np.add(first_values, zero, out=first_values)\n", "", SUM),
    Mutation("SEG5", "outputs in pooled memory are zeroed on every run", S,
             "        raw[bounds[k] : bounds[k + 1]].fill(0)\n", "        pass\n", SUM),
    Mutation("SEG6", "scatter: heavily repeated ids are summed sequentially (not pairwise)", S,
             "out[row] = combine.accumulate(chain, axis=0, dtype=out.dtype)[-1]",
             "out[row] = combine.reduce(chain, axis=0, dtype=out.dtype)", SUM),
    Mutation("SEG7", "GPU scatter: int64 adds as uint64 (CUDA has no int64 atomics)", S,
             "xp.add.at(out.view(np.uint64), rows, values.view(np.uint64))",
             "xp.add.at(out, rows, values)", SUM),
    Mutation("SEG8", "GPU scatter: narrow integers add in 32-bit accumulators", S,
             "xp.add.at(wide, rows, values.astype(_WIDENED[dtype]))", "xp.add.at(out, rows, values)", SUM),
    Mutation("SEG9", "UnsortedSegmentSum: constant ids out of range fail at construction", S,
             "    if constant_ids is not None and n is not None:",
             "    if constant_ids is not None and n is None:", SUM),
    Mutation("SEG10", "scatter: a repeated id's row is rebuilt from its first value", S,
             "        if first:\n            write(at, at_rows)", "        if False:\n            write(at, at_rows)", SUM),
    # -- ScatterNd -----------------------------------------------------------------------------
    Mutation("SN1", "ScatterNd: IGNORE skips out-of-range index vectors", S,
             'flat, keep = _flat_rows(ctx, vectors, dims[:depth], bad_indices_policy == "IGNORE")',
             "flat, keep = _flat_rows(ctx, vectors, dims[:depth], False)", SCATTER),
    Mutation("SN2", "ScatterNd: negative index vectors are out of range (IGNORE and GPU paths)", S,
             "unsigned = rows.astype(np.int64, copy=False).view(np.uint64)",
             "unsigned = rows.astype(np.int64, copy=False)", SCATTER),
    Mutation("SN3", "ScatterNd: index depth above rank(shape) fails at construction", S,
             "    if output.rank is not None and depth is not None and depth > output.rank:",
             "    if False:", SCATTER),
    Mutation("SN4", "ScatterNd: constant out-of-range indices fail at construction", S,
             "        _check_constant_indices(ctx.constant_value(0), indices, output, depth)",
             "        pass", SCATTER),
    Mutation("SN5", "ScatterNd: repeated strings concatenate in order", S,
             "combine(current, values.take(at, axis=0), out=current)",
             "combine(values.take(at, axis=0), current, out=current)", SCATTER),
    Mutation("SN6", "ScatterNd: updates whose shape cannot fit fail at run time", S,
             "    if updates.shape[len(outer) :] != dims[depth:]:", "    if False:", SCATTER),
    Mutation("SN7", "GPU scatter: bool is or-ed with maximum.at over int32", S,
             "xp.maximum.at(wide, rows, values.astype(np.int32))", "xp.add.at(out, rows, values)", SCATTER),
    # -- ParallelDynamicStitch -----------------------------------------------------------------
    Mutation("PDS1", "ParallelDynamicStitch: constant indices give the output's first dim",
             "ops/partition.py",
             '    shape_fn=_dynamic_stitch_shape,\n    doc="""DynamicStitch as TF\'s embedding_lookup',
             '    shape_fn=None,\n    doc="""DynamicStitch as TF\'s embedding_lookup', STITCH),
    # -- the custom op example -----------------------------------------------------------------
    Mutation("EX1", "examples/custom_op.py: int64 adds as uint64 on GPUs", "examples/custom_op.py",
             "        view, values = view.view(np.uint64), xp.ascontiguousarray(values).view(np.uint64)\n",
             "        pass\n", EXAMPLE),
]  # fmt: skip
