"""Mutations of the reductions (ops/reduction.py) and the nn ops (ops/nn.py): each breaks one
key behaviour on purpose; the tests named must go red (`python -m tests.hostile.mutations`
once the lead wires this table in; alone:
`python -c "from hostile.mutations import run; from hostile.mutations_reduction_nn import
MUTATIONS; run(MUTATIONS, 600)"` from tests/)."""

# ruff: noqa: E501 - source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

RED = "ops/reduction.py"
NN = "ops/nn.py"
RED_TESTS = ("tests/test_reduction_ops.py",)
RED_PROPERTY_TESTS = ("tests/test_reduction_ops.py", "tests/test_reduction_properties.py")
TRUST_TESTS = ("tests/test_reduction_nn_trust.py",)
NN_TESTS = ("tests/test_nn_ops.py",)
NN_PROPERTY_TESTS = ("tests/test_nn_ops.py", "tests/test_nn_properties.py")

MUTATIONS = [
    # -- reductions --------------------------------------------------------------------------
    Mutation("RN1", "Mean of integers truncates towards zero (C division), not floor",
             RED, "            total = total - xp.fmod(total, n)\n", "            pass\n", RED_TESTS),
    Mutation("RN2", "Mean of narrow integers sums in 64 bits",
             RED, "(np.int8, np.int64), (np.int16, np.int64)", "(np.int8, np.int8), (np.int16, np.int64)",
             RED_TESTS),
    Mutation("RN3", "bfloat16 Sum accumulates in float32",
             RED, '        if x.dtype.name == "bfloat16":\n            total = _reduce_into(ctx, how',
             "        if False:\n            total = _reduce_into(ctx, how", RED_TESTS),
    Mutation("RN4", "empty Max/Min give TF's identities",
             RED, "            out.fill(identity(x.dtype))", "            out.fill(0)", RED_TESTS),
    Mutation("RN5", "empty float Mean is NaN",
             RED, 'out.fill(np.nan if dtype.kind == "f" or dtype.name == "bfloat16" else 0)', "out.fill(0)",
             RED_TESTS),
    Mutation("RN6", "ArgMax/ArgMin: NaN never wins (numpy picks the first NaN)",
             RED, "            if not bool(beyond.all()):", "            if False:", RED_PROPERTY_TESTS),
    Mutation("RN7", "ArgMax/ArgMin: TF's initial value (index 0, the lowest finite) is not displaced by an equal one",
             RED, "beyond = picked > limit if is_max else picked < limit",
             "beyond = picked >= limit if is_max else picked <= limit", RED_PROPERTY_TESTS),
    Mutation("RN8", "an axis given twice is refused",
             RED, "        if axis in axes:\n", "        if False:\n", RED_TESTS),
    Mutation("RN9", "run-time axis errors use TF's kernel message",
             RED, 'f"Invalid reduction dimension ({value} for input with {rank} dimension(s)"',
             'f"Invalid reduction dimension {value} for input with {rank} dimensions."', RED_TESTS),
    Mutation("RN10", "unknown axis with keep_dims keeps the rank (TF's ReductionShapeFn)",
             RED, "        if keep_dims and rank is not None:\n", "        if False:\n", RED_TESTS),
    Mutation("RN11", "complex Mean divides each component by the count",
             RED, '    if dtype.kind == "c":\n        # TF divides each component', '    if False:\n        # TF divides each component',
             RED_PROPERTY_TESTS),
    Mutation("RN12", "the constant-axis specialisation reduces the same axes as the kernel",
             RED, "            return reduce(ctx, x, axes, keep, _out_shape(x.shape, axes, keep))",
             "            return reduce(ctx, x, axes[:1], keep, _out_shape(x.shape, axes[:1], keep))",
             RED_TESTS),
    Mutation("RN13", "ArgMax over an empty dim is TF's error, at construction when the dim is known",
             RED, "    if shape[axis] == 0:\n", "    if False:\n", RED_TESTS),
    Mutation("RN14", "float16 Mean divides by the count as a float16 (inf beyond 65504, as TF)",
             RED, "    return xp.true_divide(out, dtype.type(count), out=out)",
             "    return xp.true_divide(out, np.float64(count), out=out, casting='unsafe')", RED_TESTS),
    Mutation("RN15", "an empty axis literal [] is an int32 vector (TF's preferred type attr default)",
             RED, "        if len(args) > 1 and _empty_literal(args[1]):", "        if False:", RED_TESTS),
    Mutation("RN16", "ArgMax returns a new array of output_type (trusted), never numpy's intp scalar",
             RED, "        return _cast_into(ctx, index, input.shape[:axis] + input.shape[axis + 1 :], out_dtype)",
             "        return index", TRUST_TESTS),
    Mutation("RN17", "GPU reductions call cupy's max/min/all/any without a dtype argument",
             RED, '    if how in ("sum", "prod"):', "    if True:", TRUST_TESTS),
    Mutation("RN18", "a constant axis out of range fails at construction with TF's shape-function message",
             RED, 'f"Invalid reduction dimension {value} for input with {rank} dimensions."',
             'f"Invalid reduction dimension ({value} for input with {rank} dimension(s)"', RED_TESTS),
    Mutation("RN36", "ArgMax's NaN check reads numpy's picks at the right flat positions",
             RED, "    return x.reshape(-1).take(index.reshape(-1) * inner + offsets)",
             "    return x.reshape(-1).take(index.reshape(-1) + offsets)", RED_PROPERTY_TESTS),
    # -- nn ----------------------------------------------------------------------------------
    Mutation("RN20", "MatMul honours transpose_a",
             NN, "    x = a.T if transpose_a else a\n", "    x = a\n", NN_TESTS),
    Mutation("RN21", "BatchMatMulV2's adjoint conjugates complex values",
             NN, '    if x.dtype.kind == "c":\n        x = xp.conj(x)', '    if False:\n        x = xp.conj(x)',
             NN_TESTS),
    Mutation("RN23", "labels out of range raise (upper bound)",
             NN, "        if low < 0 or high >= classes:", "        if low < 0:", NN_TESTS),
    Mutation("RN24", "constant labels out of range fail at construction",
             NN, "    if values is not None and classes is not None:", "    if False:", NN_TESTS),
    Mutation("RN25", "BiasAdd NCHW adds along dim 1",
             NN, '    channel = 1 if data_format == "NCHW" else value.ndim - 1',
             "    channel = value.ndim - 1", NN_TESTS),
    Mutation("RN26", "BiasAdd writes into its input when the plan lets it (BiasAdd+Relu chains)",
             NN, "    out = ctx.forward_input_or_empty(0, value, value.shape, value.dtype)",
             "    out = ctx.empty(value.shape, value.dtype)", TRUST_TESTS),
    Mutation("RN27", "SoftmaxCrossEntropyWithLogits broadcasts features and labels",
             NN, "        shape = _host_shapes_broadcast(features.shape, labels.shape)",
             "        shape = features.shape", NN_TESTS),
    Mutation("RN28", "L2Loss squares in T (a float16 300**2 overflows, as in TF)",
             NN, "        half = xp.multiply(xp.multiply(t, t), dtype.type(0.5))",
             "        half = xp.multiply(xp.multiply(t.astype(_F32), t), 0.5)", NN_TESTS),
    Mutation("RN29", "BatchMatMulV2 checks the batch dims with TF's message",
             NN, "    if batch is None:\n", "    if False:\n", NN_TESTS),
    Mutation("RN30", "the cross-entropy shape function wants a rank-2 broadcast",
             NN, "    if shape.rank != 2:\n", "    if False:\n", NN_TESTS),
    Mutation("RN31", "softmax sums of half types accumulate in float32",
             NN, "    half = x.dtype.name in _HALF_TYPES\n", "    half = False\n", NN_TESTS),
    Mutation("RN32", "Softmax subtracts the row maximum (large logits do not overflow)",
             NN, "    xp.subtract(logits, _max_last(xp, logits), out=out)\n    xp.exp(out, out=out)",
             "    xp.copyto(out, logits)\n    xp.exp(out, out=out)", NN_TESTS),
    Mutation("RN33", "MatMul's inner dims are checked at construction",
             NN, '    merge_dim(a[0] if ta else a[1], b[1] if tb else b[0], "Dimensions")',
             "    pass", NN_TESTS),
    Mutation("RN35", "the inlined np.matmul of a known small product multiplies a by b",
             NN, "        return InlineCall(np.matmul, general, Input(0), Input(1))",
             "        return InlineCall(np.matmul, general, Input(1), Input(0))", NN_TESTS),
    Mutation("RN34", "the sparse cross-entropy backprop subtracts the one-hot label",
             NN, "    backprop[rows, labels] -= 1\n", "    pass\n", NN_PROPERTY_TESTS),
]  # fmt: skip
