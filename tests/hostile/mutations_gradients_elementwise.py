"""Mutations of the elementwise family's gradients (issue 21, ops/math.py): the broadcast
reductions (sum_to, broadcast_gradients), the rules and their conventions at kinks and ties,
TF's conjugations for complex numbers, the gradient ops (ReluGrad, ..., ReciprocalGrad) and
their own rules (second order). Each breaks one key behaviour; a test of
tests/test_gradients_elementwise*.py must go red.

    python -m tests.hostile.mutations --only EG  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

RULES = ("tests/test_gradients_elementwise.py",)
BCAST = ("tests/test_gradients_elementwise_broadcast.py",)
SECOND = ("tests/test_gradients_elementwise_second_order.py",)
GOPS = ("tests/test_gradients_elementwise_ops.py",)
M = "ops/math.py"

MUTATIONS = [
    # -- reducing a broadcast ------------------------------------------------------------------
    Mutation("EG1", "sum_to: dims of 1 that were broadcast are summed", M,
             "        if dim == 1:\n            axes.append(axis)\n",
             "        if dim == 1:\n            pass\n", RULES),
    Mutation("EG2", "broadcast_gradients: the other operand's 1 decides statically", M,
             "        if g == 1 or o == 1:\n", "        if g == 1:\n", BCAST),
    Mutation("EG3", "sum_to: an unknown dim that may be 1 is left to run time", M,
             "        elif dim is None:\n            return None\n",
             "        elif dim is None:\n            continue\n", BCAST),
    Mutation("EG4", "sum_to: missing dims and dims of 1 both summed: reshaped to the target", M,
             "    if lead and axes[-1] >= lead:\n", "    if False:\n", BCAST),
    Mutation("EG5", "broadcast_gradients: each operand takes its own BroadcastGradientArgs output", M,
             "result.append(_summed_at_run_time(scope, g, at_run_time[2][i], at_run_time[i]))",
             "result.append(_summed_at_run_time(scope, g, at_run_time[2][0], at_run_time[i]))", BCAST),
    Mutation("EG6", "sum_to: run-time axes are those of the target (r0)", M,
             "axes = BroadcastGradientArgs(scope, target_shape, Shape(scope, grad)).r0",
             "axes = BroadcastGradientArgs(scope, target_shape, Shape(scope, grad)).r1", BCAST),
    # -- binary rules -------------------------------------------------------------------------
    Mutation("EG7", "Sub: y's gradient is negated", M,
             "    return gx, Neg(_s(op), gy).output  # negated after the reduction: fewer elements",
             "    return gx, gy", RULES),
    Mutation("EG8", "Mul: TF's conjugation for complex operands", M,
             "    gx = Mul(s, grad, _conj(s, y)).output\n", "    gx = Mul(s, grad, y).output\n", RULES),
    Mutation("EG9", "RealDiv/Div: dz/dy = -x / y**2", M,
             "gy = Mul(s, grad, RealDiv(s, RealDiv(s, Neg(s, cx), cy), cy)).output",
             "gy = Mul(s, grad, RealDiv(s, Neg(s, cx), cy)).output", RULES),
    Mutation("EG10", "FloorMod: dz/dy = -floor(x / y)", M,
             "gy = Mul(s, grad, Neg(s, FloorDiv(s, x, y))).output",
             "gy = Mul(s, grad, FloorDiv(s, x, y)).output", RULES),
    Mutation("EG11", "Maximum: a tie's gradient goes to x", M,
             "return _select_grads(op, grad, GreaterEqual(_s(op), x, y).output)",
             "return _select_grads(op, grad, Greater(_s(op), x, y).output)", RULES),
    Mutation("EG12", "Minimum: a tie's gradient goes to x", M,
             "return _select_grads(op, grad, LessEqual(_s(op), x, y).output)",
             "return _select_grads(op, grad, Less(_s(op), x, y).output)", RULES),
    Mutation("EG13", "Pow: the exponent's gradient is 0 where the base is <= 0", M,
             "        has_log = Greater(s, cx, 0).output\n",
             "        has_log = NotEqual(s, cx, 0).output\n", RULES),
    Mutation("EG14", "Pow: the base's gradient conjugates for complex numbers", M,
             "gx = Mul(s, Mul(s, grad, cy), Pow(s, cx, Sub(s, cy, 1))).output",
             "gx = Mul(s, Mul(s, grad, y), Pow(s, x, Sub(s, y, 1))).output", RULES),
    Mutation("EG15", "SquaredDifference: only the real part of a complex gradient counts", M,
             "        twice = AddV2(s, grad, Conj(s, grad)).output\n",
             "        twice = Mul(s, grad, 2).output\n", RULES),
    # -- unary rules and kinks ----------------------------------------------------------------
    Mutation("EG16", "Abs: gradient 0 at 0 (sign(0) = 0)", M,
             "return Mul(s, grad, Sign(s, op.inputs[0])).output",
             "return Mul(s, grad, Sign(s, AddV2(s, op.inputs[0], 1e-30))).output", RULES),
    Mutation("EG17", "ReluGrad: 0 at the kink (features > 0, not >=)", M,
             "return xp.multiply(gradients, xp.greater(features, features.dtype.type(0)), out=out)",
             "return xp.multiply(gradients, xp.greater_equal(features, features.dtype.type(0)), out=out)",
             RULES),
    Mutation("EG18", "Relu6Grad: 0 at the kink at 6", M,
             "inside = xp.logical_and(xp.greater(features, t(0)), xp.less(features, t(6)))",
             "inside = xp.logical_and(xp.greater(features, t(0)), xp.less_equal(features, t(6)))",
             RULES),
    Mutation("EG19", "Elu: its rule reads the output (EluGrad takes outputs)", M,
             "return EluGrad(_s(op), grad, op.outputs[0]).output",
             "return EluGrad(_s(op), grad, op.inputs[0]).output", RULES),
    Mutation("EG20", "Sigmoid: TF's conjugation of y for complex numbers", M,
             "return SigmoidGrad(s, _conj(s, op.outputs[0]), grad).output",
             "return SigmoidGrad(s, op.outputs[0], grad).output", RULES),
    Mutation("EG21", "Softplus: grad * sigmoid(x)", M,
             "return Mul(s, grad, Sigmoid(s, op.inputs[0])).output",
             "return Mul(s, grad, Sigmoid(s, op.outputs[0])).output", RULES),
    Mutation("EG22", "SqrtGrad: 0 where dy is 0 (TF's mul_no_nan)", M,
             "    xp.multiply(slope, dy, out=out)\n    xp.copyto(out, 0, where=zero)\n    return out\n\n\ndef _rsqrt_grad",
             "    xp.multiply(slope, dy, out=out)\n    return out\n\n\ndef _rsqrt_grad", RULES),
    Mutation("EG23", "RsqrtGrad: -0.5 dy conj(y)**3", M,
             "xp.multiply(y.dtype.type(-0.5), slope, out=slope)",
             "xp.multiply(y.dtype.type(0.5), slope, out=slope)", RULES),
    # -- Cast, AddN ---------------------------------------------------------------------------
    Mutation("EG24", "Cast: no gradient to or from integers", M,
             "    if not (_trainable(op.inputs[0]) and _trainable(op.outputs[0])):\n",
             "    if False:\n", RULES),
    Mutation("EG25", "Cast: sparse gradients stay sparse", M,
             "    if isinstance(grad, IndexedSlices):  # stays sparse: the values cast\n",
             "    if False:\n", RULES),
    Mutation("EG26", "AddN: the gradient reaches every input", M,
             "    return [grad] * len(op.inputs)  # one shape: no broadcasting",
             "    return [grad] + [None] * (len(op.inputs) - 1)", RULES),
    # -- the gradient ops -----------------------------------------------------------------------
    Mutation("EG27", "SigmoidGrad and co: element counts known to differ fail at construction", M,
             "    if m is not None and n is not None and m != n:\n", "    if False:\n", GOPS),
    Mutation("EG28", "ReluGrad and co: shapes must be equal at run time (TF's message)", M,
             "            if x.shape != y.shape:\n                raise ctx.invalid_argument(",
             "            if False:\n                raise ctx.invalid_argument(", GOPS),
    Mutation("EG29", "AddN: silent on (simulated) GPUs too", M,
             '    if out.dtype.kind not in "iu":\n        # Overflow to inf',
             '    if xp is np and out.dtype.kind not in "iu":\n        # Overflow to inf', GOPS),
    # -- second order -------------------------------------------------------------------------
    Mutation("EG30", "TanhGrad's rule: dz/dy = -2 dy y", M,
             "d_y = Mul(s, Mul(s, Mul(s, grad, -2), b), a).output",
             "d_y = Mul(s, Mul(s, Mul(s, grad, 2), b), a).output", SECOND),
    Mutation("EG31", "RsqrtGrad's rule: the conjugated gradient reaches y (antiholomorphic)", M,
             "    ca, cg = _conj(s, a), _conj(s, grad)\n    d_y = Mul(s, Mul(s, Mul(s, cg, -1.5), b), Square(s, ca)).output",
             "    ca, cg = _conj(s, a), grad\n    d_y = Mul(s, Mul(s, Mul(s, cg, -1.5), b), Square(s, ca)).output",
             SECOND),
    Mutation("EG32", "SoftplusGrad's rule: d/dx = gradients / (exp(-x) + 2 + exp(x))", M,
             "spread = AddV2(s, AddV2(s, Exp(s, Neg(s, features)), 2), Exp(s, features))",
             "spread = AddV2(s, AddV2(s, Exp(s, Neg(s, features)), 1), Exp(s, features))", SECOND),
    Mutation("EG33", "EluGrad's rule: the outputs' gradient where outputs < 0", M,
             "        s, Less(s, outputs, 0), Mul(s, grad, gradients), ZerosLike(s, outputs)\n",
             "        s, Less(s, outputs, 0), Mul(s, grad, outputs), ZerosLike(s, outputs)\n", SECOND),
]  # fmt: skip
