"""Mutations of the reductions' and nn ops' gradient rules (ops/reduction.py, ops/nn.py) and of
the ops those rules add (Cumsum, Cumprod, BiasAddGrad): each breaks one key behaviour on
purpose; the tests named must go red (`python -m tests.hostile.mutations` once the lead wires
this table in; alone, from tests/:
`python -c "from hostile.mutations import run; from hostile.mutations_gradients_reduction_nn
import MUTATIONS; run(MUTATIONS, 900)"`)."""

# ruff: noqa: E501 - source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

RED = "ops/reduction.py"
NN = "ops/nn.py"
GR = "tests/test_gradients_reduction.py"
GN = "tests/test_gradients_nn.py"
GR_PROPS = "tests/test_gradients_reduction_properties.py"
GN_PROPS = "tests/test_gradients_nn_properties.py"

MUTATIONS = [
    # -- reductions ----------------------------------------------------------------------------
    Mutation("GRN1", "Max/Min split a tie's gradient evenly among the tied elements",
             RED, "    return [Mul(scope, RealDiv(scope, indicators, selected), grad).output, None]",
             "    return [Mul(scope, indicators, grad).output, None]",
             (f"{GR}::test_ties_split_the_gradient_evenly",)),
    Mutation("GRN2", "reduced dims that lead need no Reshape; others do (the kept shape)",
             RED, "    return axes is not None and sorted(axes) == list(range(len(axes)))",
             "    return axes is not None", (f"{GR}::test_rules_match_central_differences",)),
    Mutation("GRN3", "Mean divides by the count of the reduced dims",
             RED, "np.array(math.prod(reduced), dtype=grad.dtype.np_dtype)",
             "np.array(math.prod(reduced) + 1, dtype=grad.dtype.np_dtype)",
             (f"{GR}::test_rules_match_central_differences",)),
    Mutation("GRN4", "Mean's count known only at run time: size(x) / size(y)",
             RED, "        count = Cast(scope, FloorDiv(scope, total, kept), grad.dtype).output",
             "        count = Cast(scope, total, grad.dtype).output",
             (f"{GR}::test_rules_with_shapes_or_axes_known_only_at_run_time",)),
    Mutation("GRN5", "run-time axes are made non-negative (negative axes at run time)",
             RED, "    return FloorMod(scope, AddV2(scope, axis, rank), divisor).output",
             "    return axis", (f"{GR}::test_rules_with_shapes_or_axes_known_only_at_run_time",)),
    Mutation("GRN6", "a scalar's run-time axes do not divide by a rank of 0",
             RED, "    divisor = Maximum(scope, rank, np.int32(1)).output", "    divisor = rank",
             (f"{GR}::test_run_time_axes_without_a_static_shape_give_the_same_values",)),
    Mutation("GRN7", "Prod: the product of the other elements (exclusive Cumprod), exact with zeros",
             RED, "    left = Cumprod(scope, matrix, np.int32(0), exclusive=True).output",
             "    left = Cumprod(scope, matrix, np.int32(0), exclusive=False).output",
             (f"{GR}::test_prod_with_zeros_is_exact",)),
    Mutation("GRN8", "Prod of complex numbers: the conjugate of the other elements' product",
             RED, "        left, right = Conj(scope, left).output, Conj(scope, right).output",
             "        pass", (f"{GR}::test_complex_inputs",)),
    Mutation("GRN9", "Prod moves the reduced dims back (the inverse permutation)",
             RED, "        inverse = np.argsort(perm).astype(np.int32).tolist()",
             "        inverse = list(perm)", (f"{GR}::test_rules_match_central_differences",)),
    Mutation("GRN10", "Cumsum's gradient scans the other way",
             RED, "    return [Cumsum(scope, grad, op.inputs[1], exclusive=exclusive, reverse=not reverse).output,",
             "    return [Cumsum(scope, grad, op.inputs[1], exclusive=exclusive, reverse=reverse).output,",
             (f"{GR}::test_scan_gradients",)),
    Mutation("GRN11", "Cumprod's gradient of complex inputs is conjugated (TF's is not)",
             RED, "        prod = Conj(scope, prod).output", "        pass", (f"{GR}::test_scan_gradients",)),
    Mutation("GRN12", "exclusive scans start from the identity",
             RED, "                target[lead + (slice(0, 1),)] = identity",
             "                target[lead + (slice(0, 1),)] = 7",
             (f"{GR}::test_scans_against_an_element_by_element_reference",)),
    Mutation("GRN13", "reverse scans run from the end",
             RED, "            x = x[lead + (slice(None, None, -1),)]", "            pass",
             (f"{GR}::test_scans_against_an_element_by_element_reference",)),
    Mutation("GRN14", "a scan's negative axis counts from the end",
             RED, "            a = _scan_axis(int(axis), x.ndim)", "            a = abs(int(axis)) % max(x.ndim, 1)",
             (f"{GR}::test_scans_against_an_element_by_element_reference",)),
    # -- nn --------------------------------------------------------------------------------------
    Mutation("GRN15", "MatMul's gradient in the transpose_b case",
             NN, "        (False, True): ((grad, b, False, False), (grad, a, True, False)),",
             "        (False, True): ((grad, b, True, False), (grad, a, True, False)),",
             (f"{GN}::test_matmul",)),
    Mutation("GRN16", "complex MatMul conjugates its inputs",
             NN, "    return Conj(scope, t).output if t.dtype.is_complex else t", "    return t",
             (f"{GN}::test_matmul",)),
    Mutation("GRN17", "BatchMatMulV2 sums its gradients over the broadcast batch dims",
             NN, "    return sum_to(grad_x, x), sum_to(grad_y, y)", "    return grad_x, grad_y",
             (f"{GN}::test_batch_matmul",)),
    Mutation("GRN18", "Softmax's gradient subtracts the projection on the softmax",
             NN, "    return Mul(scope, Sub(scope, grad, channels), softmax).output",
             "    return Mul(scope, grad, softmax).output", (f"{GN}::test_softmax_family",)),
    Mutation("GRN19", "LogSoftmax's gradient uses exp(log_softmax), the softmax",
             NN, "    softmax = Exp(scope, op.outputs[0])", "    softmax = op.outputs[0]",
             (f"{GN}::test_softmax_family",)),
    Mutation("GRN20", "the cross-entropies' second-order term (the backprop output's gradient)",
             NN, '    return source.type == "ZerosLike" and source.inputs[0] is output',
             "    return True", (f"{GN}::test_sparse_cross_entropy",)),
    Mutation("GRN21", "the second-order term is skipped for the machinery's zeros (no Softmax in a training step)",
             NN, '    return source.type == "ZerosLike" and source.inputs[0] is output',
             "    return False",
             (f"{GN}::test_first_derivatives_of_the_losses_build_no_second_order_terms",)),
    Mutation("GRN22", "dense labels get -grad_grad from the backprop output",
             NN, "        grad_labels = Sub(scope, grad_labels, grad_grad).output", "        pass",
             (f"{GN}::test_dense_cross_entropy_with_broadcasting",)),
    Mutation("GRN23", "broadcast features and labels get gradients of their own shapes",
             NN, "    return sum_to(grad, features), sum_to(grad_labels, labels)",
             "    return grad, grad_labels",
             (f"{GN}::test_dense_cross_entropy_with_broadcasting",)),
    Mutation("GRN24", "features broadcast along the classes: the softmax of the broadcast logits",
             NN, "    if features.shape.is_fully_defined() and features.shape == backprop.shape:",
             "    if True:", (f"{GN}::test_dense_cross_entropy_with_broadcasting",)),
    Mutation("GRN25", "L2Loss's gradient is t * grad",
             NN, "    return Mul(_s(op), op.inputs[0], grad).output", "    return op.inputs[0]",
             (f"{GN}::test_l2_loss",)),
    Mutation("GRN26", "BiasAddGrad sums half types in float32",
             NN, "    if dtype.name in _HALF_TYPES:  # TF accumulates half types in float32",
             "    if False:", (f"{GN}::test_bias_add_grad_types",)),
    Mutation("GRN27", "BiasAddGrad's channel dim is 1 for NCHW",
             NN, '    channel = 1 if data_format == "NCHW" else x.ndim - 1',
             "    channel = x.ndim - 1", (f"{GN}::test_bias_add_grad_values",)),
    Mutation("GRN28", "BiasAddGrad's gradient spreads NCHW biases along dim 1",
             NN, "            grad = Reshape(scope, grad, np.array([-1] + [1] * (rank - 2), np.int32)).output",
             "            pass", (f"{GN}::test_bias_add_grad_gradient",)),
]  # fmt: skip
