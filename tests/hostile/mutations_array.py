"""Mutations of the array family (issue 20): ops/array.py (StridedSlice and the `x[...]`
operator, Slice, Transpose, Tile, Squeeze, ExpandDims, Pack/Unpack, Fill, ZerosLike,
BroadcastTo, SelectV2, OneHot; trust flags, host memory, GPU dtypes). Each breaks one key
behaviour; a test must go red.

    python -m tests.hostile.mutations --only AR  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

SS = ("tests/test_strided_slice.py",)
GETITEM = ("tests/test_operators_getitem.py",)
OPS = ("tests/test_array_ops.py",)
ERRORS = ("tests/test_array_errors.py",)
PROPS = ("tests/test_array_properties.py",)
TRUST = ("tests/test_array_trust.py",)
GPU = ("tests/test_array_gpu.py",)
A = "ops/array.py"
CONST = ("tests/test_array_constant_inputs.py",)
OPERATORS = ("tests/test_operators_tf.py",)

MUTATIONS = [
    # -- StridedSlice ---------------------------------------------------------------------------
    Mutation("AR1", "StridedSlice: a negative stride's bounds lie in [-1, dim - 1]", A,
             "lo, hi = (0, dim) if s > 0 else (-1, dim - 1)",
             "lo, hi = (0, dim) if s > 0 else (0, dim - 1)", SS),
    Mutation("AR2", "StridedSlice: a masked bound with a negative stride starts at the end", A,
             "return (lo if first else hi) if stride > 0 else (hi if first else lo)",
             "return lo if first else hi", SS),
    Mutation("AR3", "StridedSlice: `...` leaves room for the new axes after it", A,
             "stop = min(rank - (n - i) + 1 + added_after_ellipsis, rank)",
             "stop = min(rank - (n - i) + 1, rank)", SS),
    Mutation("AR4", "StridedSlice kernel: a stop below 0 runs to the start", A,
             "key.append(slice(start, stop if stop >= 0 else None, stride))",
             "key.append(slice(start, stop, stride))", SS),
    Mutation("AR5", "StridedSlice: an index equal to the dim is out of bounds", A,
             "if b < 0 or b >= dim:", "if b < 0 or b > dim:", SS),
    Mutation("AR6", "StridedSlice shape function: a fully masked range keeps its size with unknown bounds", A,
             "interval = -dim if s < 0 else dim", "interval = None", SS),
    Mutation("AR7", "StridedSlice shape function: the strides' errors first, as TF", A,
             "    _check_slice_spec_shapes(None, None, strides, (), (), strides.shape)\n    final, _ = strided_slice_plan(x.dims, None, None, stride_values, masks)\n",
             "    final = [None] * len(x.dims)\n", ERRORS),
    Mutation("AR8", "StridedSlice kernel: the cached key is the one for this input's shape", A,
             "key = cache.get(input.shape) if constant else None",
             'key = next((v for k, v in cache.items() if k != "constant"), None) if constant else None',
             SS),
    # -- x[...] ---------------------------------------------------------------------------------
    Mutation("AR9", "x[...]: omitted bounds of a slice with tensors take the tensors' dtype", A,
             "target.append(_filled(0, dtype))", "target.append(_filled(0, None))", GETITEM),
    Mutation("AR10", "x[...]: any int64 makes the Index int64 (the others cast)", A,
             "        if dtypes.int64 in kinds:\n", "        if False:\n", GETITEM),
    Mutation("AR11", "x[...]: a list key is a tuple, as in TF", A,
             "parts = key if isinstance(key, (tuple, list)) else (key,)",
             "parts = key if isinstance(key, tuple) else (key,)", GETITEM),
    Mutation("AR12", "x[...]: boolean masks are refused", A,
             "        isinstance(key, (bool, np.bool_))\n        or", "        False\n        or",
             GETITEM),
    Mutation("AR13", "x[...]: the operator is registered", A,
             'registry.register_operator("getitem", slice_helper)', "pass", GETITEM),
    # -- Transpose, Tile, Squeeze, ExpandDims ---------------------------------------------------
    Mutation("AR14", "Transpose: a constant perm that is no permutation fails at construction", A,
             "    wrapped = _permutation(values, rank)\n",
             "    wrapped = [d % rank for d in values]\n", ERRORS),
    Mutation("AR15", "Transpose: negative perm entries count from the end", A,
             "wrapped = [d + rank if d < 0 else d for d in perm]", "wrapped = list(perm)", PROPS),
    Mutation("AR16", "Tile shape: a multiple of 0 makes an unknown dim 0", A,
             "    if d == 0 or m == 0:\n        return 0", "    if d == 0:\n        return 0", OPS),
    Mutation("AR17", "Tile kernel: the output seen as [m0, d0, m1, d1, ...]", A,
             "blocks = out.reshape([v for pair in zip(reps, input.shape) for v in pair])",
             "blocks = out.reshape([v for pair in zip(input.shape, reps) for v in pair])", PROPS),
    Mutation("AR18", "Squeeze shape: unnamed unknown dims hide the rank", A,
             "            if not wanted:\n                return TensorShape(None)",
             "            if False:\n                return TensorShape(None)", OPS),
    Mutation("AR19", "Squeeze: naming a dim that is not 1 fails at construction", A,
             "        elif explicit:\n            raise InvalidArgumentError(",
             "        elif False:\n            raise InvalidArgumentError(", ERRORS),
    Mutation("AR20", "ExpandDims kernel: dim in [-rank - 1, rank]", A,
             "if not -1 - rank <= d <= rank:", "if not -1 - rank <= d <= rank + 1:", ERRORS),
    # -- Slice ------------------------------------------------------------------------------------
    Mutation("AR21", "Slice: a size of -1 runs to the end of the dim", A,
             "    if s == -1:\n        s = dim - b", "    if s == -1:\n        s = dim", PROPS),
    Mutation("AR22", "Slice: a block past the end is an error", A,
             "if not (0 <= s and b + s <= dim):", "if not (0 <= s):", ERRORS),
    # -- Pack, Unpack ---------------------------------------------------------------------------
    Mutation("AR23", "Pack kernel: every input has the first one's shape", A,
             "        if v.shape != first:", "        if False:", ERRORS),
    Mutation("AR24", "Unpack kernel: the dim must equal num", A,
             "if value.shape[a] != num:", "if value.shape[a] < num:", ERRORS),
    # -- Fill, ZerosLike, BroadcastTo, SelectV2, OneHot -------------------------------------------
    Mutation("AR25", "Fill kernel: negative dims are TF's error", A,
             '        if d < 0:\n            raise ctx.invalid_argument(f"Dimension {d} must be >= 0")',
             '        if d < -1:\n            raise ctx.invalid_argument(f"Dimension {d} must be >= 0")',
             ERRORS),
    Mutation("AR26", "more than 2**63 - 1 elements is refused", A,
             "if 0 not in dims and math.prod(dims) > MAX_DIM:", "if False:", ERRORS),
    Mutation("AR27", "ZerosLike of strings: empty strings", A,
             'return np.full(x.shape, b"", dtype=object)', "return np.full(x.shape, None, dtype=object)",
             OPS),
    Mutation("AR28", "BroadcastTo shape: only input dims above 1 must match the target", A,
             "if d is None or d <= 1:  # as TF", "if d is None or d == 1:  # as TF", ERRORS),
    Mutation("AR29", "BroadcastTo kernel: broadcastable to a larger shape is TF's error", A,
             "        if d != 1 and d != target[offset + i]:  # broadcastable, but to a larger shape",
             "        if False:  # broadcastable, but to a larger shape", ERRORS),
    Mutation("AR30", "SelectV2 kernel: TF's message when the three do not broadcast", A,
             "        np.broadcast_shapes(condition.shape, t.shape, e.shape)  # for TF's message if not",
             "        pass", ERRORS),
    Mutation("AR31", "OneHot: indices outside [0, depth) give off_value", A,
             "valid = (flat >= 0) & (flat < d)", "valid = flat >= 0", PROPS),
    Mutation("AR32", "OneHot: positions along an inner axis", A,
             "where = (p // inner) * (d * inner) + flat * inner + p % inner", "where = p * d + flat",
             PROPS),
    Mutation("AR33", "OneHot: an axis past the new rank fails at construction", A,
             "    if axis >= rank:\n", "    if axis > rank:\n", ERRORS),
    Mutation("AR37", "Select: a vector condition picks rows, not columns", A,
             "return ctx.xp.where(condition.reshape((-1,) + (1,) * (t.ndim - 1)), t, e)",
             "return ctx.xp.where(condition, t, e)", OPS),
    # -- registration: trust, host memory, GPU dtypes --------------------------------------------
    Mutation("AR34", "Transpose returns views: untrusted", A,
             '_gpu("Transpose", _transpose_kernel, ("perm",))',
             '_gpu("Transpose", _transpose_kernel, ("perm",), trusted=True)', TRUST),
    Mutation("AR35", "Tile's multiples live in host memory", A,
             '_gpu("Tile", _tile_kernel, ("multiples",), trusted=True)',
             '_gpu("Tile", _tile_kernel, (), trusted=True)', GPU),
    Mutation("AR36", "GPU kernels take no bfloat16 (cupy lacks it)", A,
             "_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string and d is not dtypes.bfloat16]",
             "_GPU_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_string]", GPU),
    # -- shape functions see through constant subgraphs (helper C) ------------------------------
    Mutation("AR38", "Pack of known scalars has a known value (Reshape(x, Pack([3, -1])))", A,
             "    return np.stack(values, axis=_pack_axis(t.op.get_attr(\"axis\"), values[0].ndim + 1))",
             "    return None", CONST),
    Mutation("AR39", "Shape of a partially known tensor is a partial shape (Fill(Shape(x)))", A,
             "    shape = t.op.inputs[0].shape\n    return shape if shape.rank is not None else None",
             "    return None", CONST),
    Mutation("AR40", "Reshape with one unknown dim of a partial shape infers it from the size", A,
             "        if partial.rank is None or partial.dims.count(None) > 1:\n            return partial",
             "        if True:\n            return partial", CONST),
    Mutation("AR41", "the construction memo tells known int values apart", "minigraph/graph.py",
             "            if op._type in SEEN_THROUGH and inp._dtype in SHAPE_DTYPES:\n                return None",
             "            if False:\n                return None", CONST),
    Mutation("AR42", "constant evaluation is bounded (a budget of producers per look)",
             "minigraph/shape_inference.py", "        if self.budget > 0 and tensor.dtype in SHAPE_DTYPES:\n            self.budget -= 1\n            if kind",
             "        if tensor.dtype in SHAPE_DTYPES:\n            self.budget -= 1\n            if kind", CONST),
    Mutation("AR43", "a Pack's negative known scalar is an unknown dim, as TF", A,
             "        dims.append(None if v is None or int(v) < 0 else int(v))",
             "        dims.append(None if v is None else int(v))", CONST),
    Mutation("AR44", "integer FloorDiv by a known zero stays unknown (the kernel raises at run time)", "ops/math.py",
             "    if kind in (\"FloorDiv\", \"FloorMod\") and not np.all(y):\n        return None",
             "    if False:\n        return None", CONST),
    Mutation("AR45", "the operators name their nodes as TF (`&` is `and`, `@` is `matmul`)", "ops/operators.py",
             '    "and": _logical("LogicalAnd", "and"),', '    "and": _logical("LogicalAnd", "LogicalAnd"),',
             OPERATORS),
]  # fmt: skip
