"""Mutations of the elementwise math family (issue 20): ops/math.py (the table of elementwise
ops, broadcasting, AddN, BroadcastGradientArgs, Cast's Truncate). Each breaks one key
behaviour; a test must go red.

    python -m tests.hostile.mutations --only EW  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

KERNELS = ("tests/test_math_kernels.py",)
PROPS = ("tests/test_elementwise_properties.py",)
ERRORS = ("tests/test_elementwise_errors.py",)
DOCS = ("tests/test_elementwise_ops.py",)
TRUST = ("tests/test_builtin_trust.py",)
M = "ops/math.py"

MUTATIONS = [
    # -- broadcasting ------------------------------------------------------------------------
    Mutation("EW1", "broadcast_shape: known dims that differ fail at construction", M,
             '        elif p != q:\n            raise InvalidArgumentError(f"Dimensions must be equal, but are {p} and {q}")',
             '        elif False:\n            raise InvalidArgumentError(f"Dimensions must be equal, but are {p} and {q}")',
             ERRORS + PROPS),
    Mutation("EW2", "run time: shapes that do not broadcast are an error", M,
             "        elif p == 1:\n            dims.append(q)\n        else:\n            return None",
             "        elif p == 1:\n            dims.append(q)\n        else:\n            dims.append(max(p, q))",
             ERRORS),
    Mutation("EW3", "run time: TF's shape text [2,3] in Incompatible shapes", M,
             'return "[" + ",".join(str(d) for d in shape) + "]"',
             'return "[" + ", ".join(str(d) for d in shape) + "]"', ERRORS),
    Mutation("EW4", "Equal(incompatible_shape_error=false): a scalar for unbroadcastable shapes", M,
             "out.fill(not_equal)", "out.fill(False)", ERRORS),
    Mutation("EW5", "Equal(incompatible_shape_error=false): a scalar shape at construction", M,
             "            return TensorShape([])\n    return TensorShape(dims)",
             "            return TensorShape(None)\n    return TensorShape(dims)", ERRORS),
    Mutation("EW6", "Equal(incompatible_shape_error=true) raises at run time", M,
             "                if incompatible_shape_error:\n                    raise _incompatible(ctx, x, y)",
             "                if False:\n                    raise _incompatible(ctx, x, y)", ERRORS),
    # -- integer semantics ---------------------------------------------------------------------
    Mutation("EW7", "integer division by zero raises on every device", M,
             'if y.dtype.kind in "iu" and y.size and not bool(ctx.xp.all(y != 0)):', "if False:",
             ERRORS),
    Mutation("EW8", "Div of integers rounds towards zero", M,
             "        xp.fmod(x, y, out=out)\n        xp.subtract(x, out, out=out)\n",
             "        xp.multiply(x, 0, out=out)\n        xp.subtract(x, out, out=out)\n", PROPS),
    Mutation("EW9", "Pow: integers to negative integer powers are an error", M,
             'if kind == "i" and y.size and bool(xp.any(y < 0)):', "if False:", ERRORS),
    Mutation("EW10", "Round of integers is the identity", M,
             "        xp.copyto(out, x)\n        return out\n    return xp.rint(x, out=out)",
             "        xp.copyto(out, 0)\n        return out\n    return xp.rint(x, out=out)", PROPS),
    # -- floating-point semantics --------------------------------------------------------------
    Mutation("EW11", "Maximum propagates NaN", M,
             '"Maximum", "maximum",', '"Maximum", "fmax",', KERNELS + PROPS),
    Mutation("EW12", "Relu6 clamps at 6", M,
             "ctx.xp.clip(x, t(0), t(6), out=out)",
             "ctx.xp.clip(x, t(0), t(7), out=out)", DOCS),
    Mutation("EW13", "Sign of bfloat16 -0.0 is 0.0", M,
             "        if x.dtype.name == \"bfloat16\":\n            xp.add(",
             "        if False:\n            xp.add(", PROPS),
    Mutation("EW14", "Round rounds half to even", M,
             "return xp.rint(x, out=out)  # half to even, as TF",
             "return xp.floor(xp.add(x, x.dtype.type(0.5)), out=out)", DOCS),
    Mutation("EW15", "FloorDiv of floats is floor(x / y)", M,
             "    xp.true_divide(x, y, out=out)\n    return xp.floor(out, out=out)",
             "    return xp.floor_divide(x, y, out=out)", KERNELS),
    Mutation("EW16", "Sigmoid is 1 where exp overflows", M,
             "    if overflows:\n        xp.copyto(out, one, where=xp.isinf(denominator))",
             "    if False:\n        xp.copyto(out, one, where=xp.isinf(denominator))", DOCS),
    Mutation("EW17", "Softplus: Eigen's half epsilon (2**-13) in TF's threshold", M,
             "_softplus_threshold(np.float16, 2.0**-13)", "_softplus_threshold(np.float16, 2.0**-10)",
             KERNELS),
    Mutation("EW18", "Elu is exp(x) - 1 (not expm1), rounded in T", M,
             "    xp.exp(x, out=out)\n    xp.subtract(out, out.dtype.type(1), out=out)\n    xp.copyto(out, x, where=~negative)",
             "    xp.expm1(x, out=out)\n    xp.copyto(out, x, where=~negative)", KERNELS),
    Mutation("EW19", "half Rsqrt is computed in float32 and rounded once", M,
             "    if x.dtype.itemsize == 2:\n        # Half types", "    if False:\n        # Half types",
             KERNELS),
    Mutation("EW20", "floating-point warnings are silenced, as TF computes silently", M,
             '_NUMERIC, "z = x + y (integers wrap around)."),',
             '_NUMERIC, "z = x + y (integers wrap around).", quiet=True),', KERNELS),
    # -- complex numbers -------------------------------------------------------------------------
    Mutation("EW21", "complex Pow is exp(y * log(x))", M,
             "        xp.multiply(xp.log(x), y, out=out)\n        return xp.exp(out, out=out)",
             "        return xp.power(x, y, out=out)", KERNELS),
    Mutation("EW22", "complex Sigmoid is 0 where its denominator is infinite", M,
             "        infinite = xp.isinf(out)\n        xp.reciprocal(out, out=out)\n        xp.copyto(out, 0, where=infinite)",
             "        infinite = xp.isinf(out)\n        xp.reciprocal(out, out=out)", KERNELS),
    Mutation("EW23", "complex Rsqrt takes a zero imaginary part as +0", M,
             "        xp.add(x, out.dtype.type(0), out=out)\n        xp.sqrt(out, out=out)",
             "        xp.sqrt(x, out=out)", KERNELS),
    Mutation("EW24", "complex Sign multiplies part by part", M,
             "    xp.multiply(x.real, scale, out=out.real)\n    xp.multiply(x.imag, scale, out=out.imag)",
             "    xp.multiply(x, scale, out=out)", KERNELS),
    # -- forwarding (writing into a dying input) ------------------------------------------------
    Mutation("EW25", "complex Pow reads y before writing a result that may be y's buffer", M,
             "        xp.multiply(xp.log(x), y, out=out)\n        return xp.exp(out, out=out)",
             "        xp.log(x, out=out)\n        xp.multiply(out, y, out=out)\n        return xp.exp(out, out=out)",
             KERNELS),
    Mutation("EW26", "Sigmoid: e / (1 + e) in T's arithmetic (bit for bit TF's for half types)", M,
             "    xp.true_divide(out, denominator, out=out)\n    if overflows:",
             "    xp.reciprocal(xp.add(xp.reciprocal(out), one), out=out)\n    if overflows:", KERNELS),
    Mutation("EW27", "Elu never forwards (it reads x after writing)", M,
             'inputs=("features",), output="activations", forward=False),\n    ElementwiseOp(\n        "Softplus"',
             'inputs=("features",), output="activations", forward=True),\n    ElementwiseOp(\n        "Softplus"',
             KERNELS),
    Mutation("EW28", "only inputs the plan offers are overwritten (fed arrays never)", M,
             "    if forwardable:\n        for i, value in enumerate(inputs):\n            if i in forwardable and value.shape == shape and value.dtype == dtype:\n                return ctx.forward_input_or_empty(i, value, shape, dtype)",
             "    if True:\n        for i, value in enumerate(inputs):\n            if value.shape == shape and value.dtype == dtype:\n                return value",
             TRUST),
    Mutation("EW29", "AddN overwrites only its first two inputs", M,
             "    if any(value is out for value in inputs[2:]):", "    if False:", KERNELS),
    # -- AddN ---------------------------------------------------------------------------------------
    Mutation("EW30", "AddN adds left to right (TF's rounding)", M,
             "    xp.add(inputs[0], inputs[1], out=out)\n    for value in inputs[2:]:\n        xp.add(out, value, out=out)",
             "    xp.add(inputs[-1], inputs[-2], out=out)\n    for value in inputs[-3::-1]:\n        xp.add(out, value, out=out)",
             DOCS),
    Mutation("EW31", "AddN merges its inputs' shapes at construction", M,
             "            merged = merge_shapes(shapes[i], merged)", "            merged = shapes[i]",
             ERRORS),
    # -- BroadcastGradientArgs --------------------------------------------------------------------
    Mutation("EW32", "BroadcastGradientArgs: equal shapes reduce nothing (TF's fast path)", M,
             "        return [], []  # TF's fast path: identical shapes reduce nothing, 1s included",
             "        pass", KERNELS),
    Mutation("EW33", "BroadcastGradientArgs: axes where both are 1 reduce both", M,
             "        if p == 1 and q == 1:\n            r0.append(axis)\n            r1.append(axis)",
             "        if p == 1 and q == 1:\n            pass", KERNELS),
    # -- Cast with Truncate ----------------------------------------------------------------------
    Mutation("EW34", "Cast: Truncate=True truncates TF's pairs", M,
             "        bits = _TRUNCATED_BITS.get((SrcT, DstT))", "        bits = None", KERNELS),
    Mutation("EW35", "Cast: truncation keeps NaNs", M,
             "    xp.copyto(cleared, words, where=xp.isnan(parts))", "    pass", KERNELS),
    Mutation("EW36", "Cast: float64 -> complex64 zeroes 53 bits, as TF", M,
             "(dtypes.float64, dtypes.complex64): 53,", "(dtypes.float64, dtypes.complex64): 29,",
             KERNELS),
    # -- GPU kernels ---------------------------------------------------------------------------------
    Mutation("EW37", "GPU kernels take no bfloat16 (cupy lacks it)", M,
             '    return [n for n in names if n not in ("bfloat16", "string")]',
             '    return [n for n in names if n not in ("string",)]', DOCS),
    # -- kernel dtypes are TF's CPU kernels' (helper C) -----------------------------------------
    Mutation("EW38", "Range's kernels take only TF's CPU dtypes (int8 Range finds no kernel)", M,
             '    type_constraints={"Tidx": _RANGE_KERNEL_TYPES}, host_memory=_HOST_RANGE, trusted=True,',
             '    type_constraints={"Tidx": _RANGE_TYPES}, host_memory=_HOST_RANGE, trusted=True,',
             ("tests/test_op_def_conformance.py",)),
    Mutation("EW39", "Range of known ints is a known value (Sum(x, Range(0, Rank(x))))", M,
             '    return (np.arange(size, dtype=np.int64) * delta + start).astype(t.dtype.np_dtype)',
             '    return None', ("tests/test_array_constant_inputs.py",)),
]  # fmt: skip
