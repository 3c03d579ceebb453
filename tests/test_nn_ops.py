"""The nn ops (ops/nn.py): TF's documented examples, TF's semantics on the edge cases
(transposes and adjoints, integer wrap-around, float16/bfloat16 accumulation, infinities in
softmax rows, labels out of range, broadcast cross-entropy), shape functions over partial
shapes and error tables for construction and run time. Every value case runs on constant
inputs and on placeholders of unknown shape fed at run time; tests/test_reduction_nn_tf.py
checks these tables against TensorFlow itself.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from _reduction_nn_helpers import BF16, Case, Close, Raises, a, check_case, run_case

import minigraph as mg
from minigraph import Scope, Session, TensorShape
from ops import nn as N

nan, inf = float("nan"), float("inf")
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64 = np.int32, np.int64

# -- TF's documented examples (tf.linalg.matmul, tf.nn.softmax, the cross-entropies) ----------

_A = np.array([1, 2, 3, 4, 5, 6], I32).reshape(2, 3)
_B = np.array([7, 8, 9, 10, 11, 12], I32).reshape(3, 2)
_A3 = np.arange(1, 13, dtype=I32).reshape(2, 2, 3)
_B3 = np.arange(13, 25, dtype=I32).reshape(2, 3, 2)
_XENT_LOGITS = a([[4.0, 2.0, 1.0], [0.0, 5.0, 1.0]], F32)
_XENT_LABELS = a([[1.0, 0.0, 0.0], [0.0, 0.8, 0.2]], F32)
_SPARSE_LOGITS = a([[2.0, -5.0, 0.5, -0.1], [0.0, 0.0, 1.9, 1.4], [-100.0, 100.0, -100.0, -100.0]],
                   F32)  # fmt: skip

DOC_CASES = [
    Case("matmul", "MatMul", (_A, _B), {}, a([[58, 64], [139, 154]], I32)),
    Case("batch matmul", "BatchMatMulV2", (_A3, _B3), {},
         a([[[94, 100], [229, 244]], [[508, 532], [697, 730]]], I32)),
    Case("softmax", "Softmax", (a([-1, 0.0, 1.0], F32),), {},
         Close(a([0.09003057, 0.24472848, 0.66524094], F32))),
    Case("softmax cross-entropy", "SoftmaxCrossEntropyWithLogits", (_XENT_LOGITS, _XENT_LABELS),
         {}, Close((a([0.16984604, 0.82474494], F32),
                    a([[-0.1562053, 0.1141952, 0.042010065],
                       [0.006573263, 0.17555869, -0.18213202]], F32)))),
    Case("sparse softmax cross-entropy", "SparseSoftmaxCrossEntropyWithLogits",
         (_SPARSE_LOGITS, a([0, 3, 1], I32)), {},
         Close((a([0.29750752, 1.1448325, 0.0], F32),
                a([[-0.2573329, 0.0006772247, 0.16571143, 0.090944365],
                   [0.07848619, 0.07848619, 0.5247504, -0.68172276], [0, 0, 0, 0]], F32)))),
]  # fmt: skip

_C = a([[1 + 2j, 3 - 1j]], np.complex64)
_ROWS = a([[inf, 1.0], [-inf, -inf], [inf, inf], [nan, 1.0], [-inf, 1.0]], F32)
_X3 = a([[1.0, 2, 3], [1, 1, 1]], F32)

SEMANTIC_CASES = [
    # MatMul: plain transposes (complex values are not conjugated), integers wrap.
    Case("matmul transpose_a", "MatMul", (a([[1, 2], [3, 4], [5, 6]], I32),
         a([[1, 0, 2], [0, 1, 3], [1, 1, 1]], I32)), {"transpose_a": True},
         a([[6, 8, 16], [8, 10, 22]], I32)),
    Case("matmul transpose_b", "MatMul", (a([[1, 2, 3]], I64), a([[1, 0, 2], [0, 1, 3]], I64)),
         {"transpose_b": True}, a([[7, 11]], I64)),
    Case("matmul both", "MatMul", (a([[1, 2], [3, 4]], F64), a([[5, 6], [7, 8]], F64)),
         {"transpose_a": True, "transpose_b": True}, a([[23, 31], [34, 46]], F64)),
    Case("matmul complex transpose", "MatMul", (_C, _C), {"transpose_a": True},
         a([[-3 + 4j, 5 + 5j], [5 + 5j, 8 - 6j]], np.complex64)),
    Case("matmul int32 wraps", "MatMul", (a([[2**31 - 1, 1]], I32), a([[2], [3]], I32)), {},
         a([[1]], I32)),
    Case("matmul empty inner", "MatMul", (np.zeros((2, 0), F32), np.zeros((0, 3), F32)), {},
         np.zeros((2, 3), F32)),
    Case("matmul grad hints", "MatMul", (_A, _B), {"grad_a": True, "grad_b": True},
         a([[58, 64], [139, 154]], I32)),
    Case("matmul f16 accumulates in float32", "MatMul",
         (np.ones((1, 4096), F16), np.ones((4096, 1), F16)), {}, a([[4096]], F16)),
    Case("matmul f16 no overflow inside", "MatMul",
         (a([[60000, 60000, -60000]], F16), np.ones((3, 1), F16)), {}, a([[60000]], F16)),
    Case("matmul bf16 accumulates in float32", "MatMul",
         (np.ones((1, 4096), BF16), np.ones((4096, 1), BF16)), {}, a([[4096]], BF16)),
    # BatchMatMulV2: adjoints conjugate; batch dims broadcast.
    Case("batch matmul adj_x complex", "BatchMatMulV2", (_C, _C), {"adj_x": True},
         a([[5, 1 - 7j], [1 + 7j, 10]], np.complex64)),
    Case("batch matmul adj_y complex", "BatchMatMulV2",
         (a([[1 + 1j, 2]], np.complex128), a([[1j, 1 - 1j]], np.complex128)), {"adj_y": True},
         a([[3 + 1j]], np.complex128)),
    Case("batch matmul broadcast", "BatchMatMulV2",
         (np.arange(12, dtype=I64).reshape(2, 1, 2, 3), np.arange(60, dtype=I64).reshape(4, 3, 5)),
         {}, np.matmul(np.arange(12, dtype=I64).reshape(2, 1, 2, 3),
                       np.arange(60, dtype=I64).reshape(4, 3, 5))),
    Case("batch matmul int16", "BatchMatMulV2", (np.ones((2, 2), np.int16),) * 2, {},
         a([[2, 2], [2, 2]], np.int16)),
    Case("batch matmul int64 wraps", "BatchMatMulV2",
         (a([[2**62, 2**62]], I64), a([[2], [3]], I64)), {}, a([[2**62]], I64)),
    Case("batch matmul f16", "BatchMatMulV2",
         (a([[60000, 60000, -60000]], F16), np.ones((3, 1), F16)), {}, a([[60000]], F16)),
    Case("batch matmul empty batch", "BatchMatMulV2",
         (np.zeros((0, 2, 3), F32), np.ones((3, 4), F32)), {}, np.zeros((0, 2, 4), F32)),
    # Softmax, LogSoftmax: stable for large logits; +inf or NaN in a row gives NaN.
    Case("softmax rows with inf and nan", "Softmax", (_ROWS,), {},
         a([[nan, nan], [nan, nan], [nan, nan], [nan, nan], [0, 1]], F32)),
    Case("log softmax rows with inf and nan", "LogSoftmax", (_ROWS,), {},
         a([[nan, nan], [nan, nan], [nan, nan], [nan, nan], [-inf, 0]], F32)),
    Case("softmax large", "Softmax", (a([1000.0, 0.0, -1000.0], F32),), {}, a([1, 0, 0], F32)),
    Case("log softmax large", "LogSoftmax", (a([1000.0, 0.0, -1000.0], F32),), {},
         a([0, -1000, -2000], F32)),
    Case("log softmax", "LogSoftmax", (_X3,), {},
         Close(a([[-2.4076059, -1.4076059, -0.40760595], [-1.0986123] * 3], F32))),
    Case("softmax 3-d", "Softmax", (a([[[1.0, 2], [3, 5]], [[0, 0], [-1, 1]]], F32),), {},
         Close(a([[[0.26894143, 0.7310586], [0.11920291, 0.880797]],
                  [[0.5, 0.5], [0.11920291, 0.880797]]], F32))),
    Case("softmax f16", "Softmax", (a([1.0, 2, 3, 4], F16),), {},
         a([0.03204345703125, 0.087158203125, 0.2369384765625, 0.64404296875], F16)),
    Case("log softmax f16", "LogSoftmax", (a([1.0, 2, 3, 4], F16),), {},
         a([-3.439453125, -2.439453125, -1.439453125, -0.43994140625], F16)),
    Case("softmax bf16", "Softmax", (a([1.0, 2, 3, 4], BF16),), {},
         a([0.031982421875, 0.08740234375, 0.236328125, 0.64453125], BF16)),
    Case("log softmax bf16", "LogSoftmax", (a([1.0, 2, 3, 4], BF16),), {},
         a([-3.4375, -2.4375, -1.4375, -0.44140625], BF16)),
    # Sums over many classes accumulate in float32 (a bfloat16 running sum would stall).
    Case("softmax bf16 many classes", "Softmax", (np.zeros((1, 1000), BF16),), {},
         np.full((1, 1000), 0.001, BF16)),
    Case("log softmax bf16 many classes", "LogSoftmax", (np.zeros((1, 1000), BF16),), {},
         np.full((1, 1000), -6.90625, BF16)),
    Case("softmax f16 many classes", "Softmax", (np.zeros((2, 1000), F16),), {},
         np.full((2, 1000), 0.001, F16)),
    Case("log softmax f16 many classes", "LogSoftmax", (np.zeros((2, 1000), F16),), {},
         np.full((2, 1000), -6.90625, F16)),
    Case("softmax empty classes", "Softmax", (np.zeros((2, 0), F32),), {}, np.zeros((2, 0), F32)),
    Case("softmax empty batch", "LogSoftmax", (np.zeros((0, 3), F32),), {}, np.zeros((0, 3), F32)),
    # The cross-entropies.
    Case("sparse xent f64", "SparseSoftmaxCrossEntropyWithLogits",
         (_X3.astype(F64), a([2, 0], I64)), {},
         Close((a([0.4076059644443804, 1.0986122886681098], F64),
                a([[0.09003057317038046, 0.2447284710547976, -0.3347590442251782],
                   [-2 / 3, 1 / 3, 1 / 3]], F64)), rtol=1e-12)),
    Case("sparse xent inf", "SparseSoftmaxCrossEntropyWithLogits",
         (a([[-inf, 1.0], [inf, 1.0]], F32), a([0, 1], I32)), {},
         (a([inf, nan], F32), a([[-1, 1], [nan, nan]], F32))),
    Case("sparse xent empty batch", "SparseSoftmaxCrossEntropyWithLogits",
         (np.zeros((0, 3), F32), np.zeros(0, I32)), {},
         (np.zeros(0, F32), np.zeros((0, 3), F32))),
    Case("sparse xent f16", "SparseSoftmaxCrossEntropyWithLogits",
         (_SPARSE_LOGITS[:2].astype(F16), a([0, 3], I64)), {},
         Close((a([0.297607421875, 1.14453125], F16),
                a([[-0.25732421875, 0.0006771087646484375, 0.1656494140625, 0.0909423828125],
                   [0.0784912109375, 0.0784912109375, 0.52490234375, -0.681640625]], F16)),
               rtol=2e-3)),
    Case("xent broadcast features", "SoftmaxCrossEntropyWithLogits",
         (a([1.0, 2, 3], F32), a([[0, 0, 1.0], [0.5, 0.5, 0]], F32)), {},
         Close((a([0.40760595, 1.9076059], F32),
                a([[0.09003057, 0.24472848, -0.33475906], [-0.40996942, -0.25527152, 0.66524094]],
                  F32)))),
    Case("xent broadcast labels", "SoftmaxCrossEntropyWithLogits",
         (_X3, a([0, 0, 1.0], F32)), {},
         Close((a([0.40760595, 1.0986123], F32),
                a([[0.09003057, 0.24472848, -0.33475906], [1 / 3, 1 / 3, -2 / 3]], F32)))),
    Case("xent broadcast both", "SoftmaxCrossEntropyWithLogits",
         (a([[1.0], [2.0]], F32), a([[0.25, 0.75, 0]], F32)), {},
         Close((a([1.0986123, 1.0986123], F32),
                a([[1 / 12, -5 / 12, 1 / 3], [1 / 12, -5 / 12, 1 / 3]], F32)))),
    Case("xent inf", "SoftmaxCrossEntropyWithLogits", (a([[-inf, 1.0]], F32), a([[0, 1.0]], F32)),
         {}, (a([nan], F32), a([[0, 0]], F32))),
    Case("xent no classes", "SoftmaxCrossEntropyWithLogits",
         (np.zeros((2, 0), F32), np.zeros((2, 0), F32)), {},
         (np.zeros(2, F32), np.zeros((2, 0), F32))),
    Case("xent f16", "SoftmaxCrossEntropyWithLogits",
         (_XENT_LOGITS.astype(F16), _XENT_LABELS.astype(F16)), {},
         Close((a([0.170166015625, 0.82470703125], F16),
                a([[-0.15673828125, 0.11419677734375, 0.0419921875],
                   [0.00656890869140625, 0.17529296875, -0.18212890625]], F16)), rtol=2e-3)),
    # L2Loss: squares rounded in T.
    Case("l2 loss", "L2Loss", (a([[1.0, 2], [3, 4]], F32),), {}, a(15, F32)),
    Case("l2 loss f64", "L2Loss", (a([0.5, -1.5, 2], F64),), {}, a(3.25, F64)),
    Case("l2 loss scalar", "L2Loss", (a(3.0, F32),), {}, a(4.5, F32)),
    Case("l2 loss empty", "L2Loss", (np.zeros(0, F32),), {}, a(0, F32)),
    Case("l2 loss nan", "L2Loss", (a([1.0, nan], F32),), {}, a(nan, F32)),
    Case("l2 loss f16 square overflows", "L2Loss", (a([300.0], F16),), {}, a(inf, F16)),
    Case("l2 loss f16", "L2Loss", (np.ones(4096, F16),), {}, a(2048, F16)),
    Case("l2 loss bf16", "L2Loss", (np.ones(4096, BF16),), {}, a(2048, BF16)),
    # BiasAdd: last dim (NHWC) or dim 1 (NCHW, rank 2 included at run time); integers wrap.
    Case("bias add", "BiasAdd", (np.zeros((2, 3), F32), a([1.0, 2, 3], F32)), {},
         a([[1, 2, 3], [1, 2, 3]], F32)),
    Case("bias add nchw", "BiasAdd", (np.zeros((1, 2, 2, 2), F32), a([1.0, 2], F32)),
         {"data_format": "NCHW"}, a([[[[1, 1], [1, 1]], [[2, 2], [2, 2]]]], F32)),
    Case("bias add nchw rank 5", "BiasAdd", (np.zeros((1, 3, 1, 1, 2), F32), a([1.0, 2, 3], F32)),
         {"data_format": "NCHW"}, np.repeat(a([1, 2, 3], F32).reshape(1, 3, 1, 1, 1), 2, axis=4)),
    Case("bias add int8 wraps", "BiasAdd", (a([[120, -120]], np.int8), a([10, -10], np.int8)), {},
         a([[-126, 126]], np.int8)),
    Case("bias add uint8 wraps", "BiasAdd", (a([[250]], np.uint8), a([10], np.uint8)), {},
         a([[4]], np.uint8)),
    Case("bias add complex", "BiasAdd", (a([[1j, 2]], np.complex64), a([1, 1j], np.complex64)), {},
         a([[1 + 1j, 2 + 1j]], np.complex64)),
]  # fmt: skip

VALUE_CASES = DOC_CASES + SEMANTIC_CASES


@pytest.mark.parametrize("fed", [False, True], ids=["const", "fed"])
@pytest.mark.parametrize("case", VALUE_CASES, ids=lambda c: c.id)
def test_tf_values(case, fed):
    check_case(case, fed)


def test_bias_add_nchw_on_a_rank_2_input_at_run_time():
    # TF's shape function wants rank >= 3 for NCHW, its kernel takes rank 2 (dim 1 is last).
    case = Case("nchw 2", "BiasAdd", (np.zeros((2, 3), F32), a([1.0, 2, 3], F32)),
                {"data_format": "NCHW"}, a([[1, 2, 3], [1, 2, 3]], F32))  # fmt: skip
    check_case(case, fed=True)


# -- error tables ------------------------------------------------------------------------------


def z(*shape: int, dtype=F32) -> np.ndarray:
    return np.zeros(shape, dtype)


CONSTRUCTION_ERRORS = [
    Case("matmul inner", "MatMul", (z(2, 3), z(4, 5)), {},
         Raises(r"^Dimensions must be equal, but are 3 and 4 for 'node' \(MatMul\) with input "
                r"shapes: \[2,3\], \[4,5\]\.$")),
    Case("matmul rank 3", "MatMul", (z(2, 3, 4), z(4, 5)), {},
         Raises(r"Shape must be rank 2 but is rank 3")),
    Case("matmul rank 1", "MatMul", (z(2, 3), z(3)), {},
         Raises(r"Shape must be rank 2 but is rank 1")),
    Case("matmul transposed inner", "MatMul", (z(3, 2), z(5, 4)),
         {"transpose_a": True, "transpose_b": True},
         Raises(r"Dimensions must be equal, but are 3 and 4")),
    Case("batch matmul inner", "BatchMatMulV2", (z(7, 2, 3), z(4, 5)), {},
         Raises(r"Dimensions must be equal, but are 3 and 4")),
    Case("batch matmul batch", "BatchMatMulV2", (z(2, 2, 3), z(3, 3, 5)), {},
         Raises(r"Dimensions must be equal, but are 2 and 3")),
    Case("batch matmul rank", "BatchMatMulV2", (z(3), z(3, 5)), {},
         Raises(r"Shape must be at least rank 2 but is rank 1")),
    Case("batch matmul adjoint inner", "BatchMatMulV2", (z(2, 3, 2), z(2, 4, 5)), {"adj_x": True},
         Raises(r"Dimensions must be equal, but are 3 and 4")),
    Case("softmax scalar", "Softmax", (a(1.0, F32),), {},
         Raises(r"Shape must be at least rank 1 but is rank 0")),
    Case("log softmax scalar", "LogSoftmax", (a(1.0, F32),), {},
         Raises(r"Shape must be at least rank 1 but is rank 0")),
    Case("sparse batch", "SparseSoftmaxCrossEntropyWithLogits", (z(3, 3), a([0, 0], I32)), {},
         Raises(r"Dimensions must be equal, but are 3 and 2")),
    Case("sparse rank", "SparseSoftmaxCrossEntropyWithLogits", (z(3), a([0, 0], I32)), {},
         Raises(r"Shape must be rank 2 but is rank 1")),
    Case("sparse labels rank", "SparseSoftmaxCrossEntropyWithLogits", (z(3, 2), z(3, 1, dtype=I32)),
         {}, Raises(r"Shape must be rank 1 but is rank 2")),
    Case("sparse labels out of range", "SparseSoftmaxCrossEntropyWithLogits",
         (z(3, 3), a([0, 5, 1], I32)), {},
         Raises(r"^Received a label value of 5 which is outside the valid range of \[0, 3\)\.  "
                r"Label values: 0 5 1 for 'node'")),
    Case("sparse no class", "SparseSoftmaxCrossEntropyWithLogits", (z(2, 0), a([0, 0], I32)), {},
         Raises(r"Must have at least one class, but got logits shape \[2,0\]")),
    Case("xent rank 3", "SoftmaxCrossEntropyWithLogits", (z(2, 2, 3), z(2, 2, 3)), {},
         Raises(r"Shape must be broadcasted with rank 2, but is rank 3")),
    Case("xent rank 1", "SoftmaxCrossEntropyWithLogits", (z(3), z(3)), {},
         Raises(r"Shape must be broadcasted with rank 2, but is rank 1")),
    Case("xent broadcast", "SoftmaxCrossEntropyWithLogits", (z(2, 3), z(2, 4)), {},
         Raises(r"Dimensions must be equal, but are 3 and 4")),
    Case("bias add", "BiasAdd", (z(2, 4), z(3)), {},
         Raises(r"Dimensions must be equal, but are 4 and 3")),
    Case("bias add rank 1", "BiasAdd", (z(3), z(3)), {},
         Raises(r"Shape must be at least rank 2 but is rank 1")),
    Case("bias add bias rank 2", "BiasAdd", (z(2, 3), z(1, 3)), {},
         Raises(r"Shape must be rank 1 but is rank 2")),
    Case("bias add nchw rank 2", "BiasAdd", (z(2, 3), z(3)), {"data_format": "NCHW"},
         Raises(r"Shape must be at least rank 3 but is rank 2")),
    Case("bias add nchw", "BiasAdd", (z(2, 3, 4), z(4)), {"data_format": "NCHW"},
         Raises(r"Dimensions must be equal, but are 3 and 4")),
    Case("bias add format", "BiasAdd", (z(2, 3), z(3)), {"data_format": "NCDHW"},
         Raises(r"data_format")),
    Case("matmul int16", "MatMul", (z(2, 2, dtype=np.int16),) * 2, {},
         Raises(r"attr 'T' allows only")),
    Case("softmax int", "Softmax", (z(2, dtype=I32),), {}, Raises(r"attr 'T' allows only")),
    Case("l2 loss int", "L2Loss", (z(2, dtype=I64),), {}, Raises(r"attr 'T' allows only")),
    Case("sparse float labels", "SparseSoftmaxCrossEntropyWithLogits", (z(2, 2), z(2)), {},
         Raises(r"attr 'Tlabels' allows only")),
]  # fmt: skip


@pytest.mark.parametrize("case", CONSTRUCTION_ERRORS, ids=lambda c: c.id)
def test_construction_errors_leave_the_graph_unchanged(case):
    scope = Scope.new_root_scope()
    inputs = [mg.Const(scope.with_op_name(f"in{i}"), v) for i, v in enumerate(case.inputs)]
    before = len(scope.graph)
    with pytest.raises(mg.InvalidArgumentError) as info:
        getattr(N, case.op)(scope.with_op_name("node"), *inputs, **case.attrs)
    assert re.search(case.expected.pattern, info.value.message), info.value.message
    assert len(scope.graph) == before
    with pytest.raises(mg.InvalidArgumentError):  # literal inputs (Consts) are rolled back too
        getattr(N, case.op)(scope.with_op_name("node"), *case.inputs, **case.attrs)
    assert len(scope.graph) == before


RUN_TIME_ERRORS = [
    Case("matmul inner", "MatMul", (z(2, 3), z(4, 5)), {},
         Raises(r"^Matrix size-incompatible: In\[0\]: \[2,3\], In\[1\]: \[4,5\]$")),
    Case("matmul transposed inner", "MatMul", (z(3, 2), z(5, 4)),
         {"transpose_a": True, "transpose_b": True},
         Raises(r"^Matrix size-incompatible: In\[0\]: \[3,2\], In\[1\]: \[5,4\]$")),
    Case("matmul ranks differ", "MatMul", (z(2, 3, 4), z(4, 5)), {},
         Raises(r"^In\[0\] and In\[1\] has different ndims: \[2,3,4\] vs\. \[4,5\]$")),
    Case("matmul rank 3", "MatMul", (z(2, 3, 4), z(2, 4, 5)), {},
         Raises(r"^In\[0\] and In\[1\] ndims must be == 2: 3$")),
    Case("matmul rank 1", "MatMul", (z(3), z(3)), {}, Raises(r"ndims must be == 2: 1")),
    Case("batch matmul batch", "BatchMatMulV2", (z(2, 2, 3), z(3, 3, 5)), {},
         Raises(r"^In\[0\] and In\[1\] must have compatible batch dimensions: \[2,2,3\] vs\. "
                r"\[3,3,5\]$")),
    Case("batch matmul inner", "BatchMatMulV2", (z(2, 2, 3), z(2, 4, 5)), {},
         Raises(r"^Matrix size-incompatible: In\[0\]: \[2,2,3\], In\[1\]: \[2,4,5\]$")),
    Case("batch matmul adjoint inner", "BatchMatMulV2", (z(2, 3, 2), z(2, 4, 5)), {"adj_x": True},
         Raises(r"Matrix size-incompatible: In\[0\]: \[2,3,2\], In\[1\]: \[2,4,5\]")),
    Case("batch matmul rank x", "BatchMatMulV2", (z(3), z(3, 5)), {},
         Raises(r"^In\[0\] ndims must be >= 2: 1$")),
    Case("batch matmul rank y", "BatchMatMulV2", (z(3, 3), z(3)), {},
         Raises(r"^In\[1\] ndims must be >= 2: 1$")),
    Case("softmax scalar", "Softmax", (a(1.0, F32),), {},
         Raises(r"^logits must have >= 1 dimension, got \[\]$")),
    Case("log softmax scalar", "LogSoftmax", (a(1.0, F32),), {},
         Raises(r"logits must have >= 1 dimension, got \[\]")),
    Case("sparse labels out of range", "SparseSoftmaxCrossEntropyWithLogits",
         (z(3, 3), a([0, 5, 1], I32)), {},
         Raises(r"^Received a label value of 5 which is outside the valid range of \[0, 3\)\.  "
                r"Label values: 0 5 1$")),
    Case("sparse negative label", "SparseSoftmaxCrossEntropyWithLogits",
         (z(3, 3), a([0, 5, -1], I64)), {},
         Raises(r"^Received a label value of -1 which is outside the valid range of \[0, 3\)\.  "
                r"Label values: 0 5 -1$")),
    Case("sparse many labels", "SparseSoftmaxCrossEntropyWithLogits",
         (z(12, 3), np.arange(12, dtype=I32)), {},
         Raises(r"Received a label value of 11 .*Label values: 0 1 2 3 4 5 6 7 8 9 10 11$")),
    Case("sparse no class", "SparseSoftmaxCrossEntropyWithLogits", (z(2, 0), a([0, 0], I32)), {},
         Raises(r"^Must have at least one class, but got logits shape \[2,0\]$")),
    Case("sparse no class, no batch", "SparseSoftmaxCrossEntropyWithLogits",
         (z(0, 0), z(0, dtype=I32)), {},
         Raises(r"Must have at least one class, but got logits shape \[0,0\]")),
    Case("sparse batch", "SparseSoftmaxCrossEntropyWithLogits", (z(2, 3), a([0, 0, 0], I32)), {},
         Raises(r"^logits and labels must have the same first dimension, got logits shape "
                r"\[2,3\] and labels shape \[3\]$")),
    Case("sparse rank", "SparseSoftmaxCrossEntropyWithLogits", (z(3), a([0, 0, 0], I32)), {},
         Raises(r"^logits must be 2-D, but got shape \[3\]$")),
    Case("sparse labels rank", "SparseSoftmaxCrossEntropyWithLogits", (z(2, 3), a([[0, 0]], I32)),
         {}, Raises(r"^labels must be 1-D, but got shape \[1,2\]$")),
    Case("xent broadcast", "SoftmaxCrossEntropyWithLogits", (z(2, 3), z(2, 4)), {},
         Raises(r"^logits and labels must be broadcastable: logits_size=\[2,3\] "
                r"labels_size=\[2,4\]$")),
    Case("xent rank 3", "SoftmaxCrossEntropyWithLogits", (z(2, 2, 3), z(2, 2, 3)), {},
         Raises(r"^logits and labels must be either 2-dimensional, or broadcasted to be "
                r"2-dimensional$")),
    Case("xent rank 1", "SoftmaxCrossEntropyWithLogits", (z(3), z(3)), {},
         Raises(r"logits and labels must be either 2-dimensional")),
    Case("bias add", "BiasAdd", (z(2, 4), z(3)), {},
         Raises(r"^Must provide as many biases as the last dimension of the input tensor: \[3\] "
                r"vs\. \[2,4\]$")),
    Case("bias add rank 1", "BiasAdd", (z(3), z(3)), {},
         Raises(r"^Input tensor must be at least 2D: \[3\]$")),
    Case("bias add bias rank 2", "BiasAdd", (z(2, 3), z(1, 3)), {},
         Raises(r"^Biases must be 1D: \[1,3\]$")),
    Case("bias add nchw", "BiasAdd", (z(2, 3, 4), z(4)), {"data_format": "NCHW"},
         Raises(r"Must provide as many biases as the last dimension of the input tensor: \[4\] "
                r"vs\. \[2,3,4\]")),
    Case("bias add nchw rank 6", "BiasAdd", (z(1, 1, 1, 1, 1, 3), z(3)), {"data_format": "NCHW"},
         Raises(r"\[3\] vs\. \[1,1,1,1,1,3\]")),
]  # fmt: skip


@pytest.mark.parametrize("case", RUN_TIME_ERRORS, ids=lambda c: c.id)
def test_run_time_errors(case):
    check_case(case, fed=True)


def test_labels_out_of_range_raise_on_every_device(sim_gpus):
    # TF's GPU kernel gives NaN losses for them; minigraph raises as TF's CPU kernel does.
    scope = Scope.new_root_scope().with_device("/gpu:0")
    features = mg.Placeholder(scope.with_op_name("features"), mg.float32)
    labels = mg.Placeholder(scope.with_op_name("labels"), mg.int32)
    xent = N.SparseSoftmaxCrossEntropyWithLogits(scope.with_op_name("xent"), features, labels)
    metadata = mg.RunMetadata()
    sess = Session(scope)
    loss = sess.run(xent.loss, {features: z(2, 3), labels: a([2, 0], I32)}, run_metadata=metadata)
    assert metadata.placement["xent"].endswith("GPU:0")
    np.testing.assert_allclose(loss, [np.log(3)] * 2, rtol=1e-6)
    for bad in ([3, 0], [0, -1]):
        with pytest.raises(mg.InvalidArgumentError, match=r"Received a label value of"):
            sess.run(xent.loss, {features: z(2, 3), labels: a(bad, I32)})


def test_types_the_op_allows_but_no_kernel_takes_are_not_found():
    # TF's MatMul OpDef allows unsigned types; no TF CPU kernel (nor minigraph's) takes them.
    scope = Scope.new_root_scope()
    product = N.MatMul(scope, np.ones((2, 2), np.uint8), np.ones((2, 2), np.uint8))
    assert product.dtype is mg.uint8
    with pytest.raises(mg.NotFoundError, match=r"No registered kernel for op MatMul"):
        Session(scope).run(product)


def test_cross_entropy_inputs_share_one_dtype():
    scope = Scope.new_root_scope()
    features, labels = mg.Const(scope, z(2, 2)), mg.Const(scope, z(2, 2, dtype=F64))
    before = len(scope.graph)
    with pytest.raises(mg.InvalidArgumentError, match=r"float64"):
        N.SoftmaxCrossEntropyWithLogits(scope, features, labels)
    assert len(scope.graph) == before


def test_xent_over_an_unknown_rank_needs_rank_2_features():
    # TF 2.21's shape function: unknown labels merge with rank-2 features; with rank-1 features
    # the broadcast rank is unknown, which it refuses.
    scope = Scope.new_root_scope()
    labels = mg.Placeholder(scope, mg.float32)
    features = mg.Placeholder(scope, mg.float32, shape=[None, 3])
    node = N.SoftmaxCrossEntropyWithLogits(scope, features, labels)
    assert node.loss.shape == TensorShape([None]) and node.backprop.shape == TensorShape([None, 3])
    with pytest.raises(mg.InvalidArgumentError, match=r"but is rank is unknown"):
        N.SoftmaxCrossEntropyWithLogits(scope, mg.Placeholder(scope, mg.float32, shape=[3]), labels)


# -- shape functions over partial shapes (TF's, checked against TF by test_reduction_nn_tf) ----

_f, _i = "float32", "int32"
# (id, op, [(shape, dtype) per input], attrs, [shape per output]); None: unknown.
SHAPE_CASES = [
    ("matmul", "MatMul", [([None, 3], _f), ([3, 4], _f)], {}, [[None, 4]]),
    ("matmul transpose_a", "MatMul", [([3, 2], _f), ([None, 5], _f)], {"transpose_a": True},
     [[2, 5]]),
    ("matmul transpose_b", "MatMul", [([2, None], _f), ([7, 3], _f)], {"transpose_b": True},
     [[2, 7]]),
    ("matmul unknown", "MatMul", [(None, _f), (None, _f)], {}, [[None, None]]),
    ("batch matmul broadcast", "BatchMatMulV2", [([2, 1, 2, 3], _f), ([4, 3, 5], _f)], {},
     [[2, 4, 2, 5]]),
    ("batch matmul unknown rank", "BatchMatMulV2", [(None, _f), ([4, 3, 5], _f)], {}, [None]),
    ("batch matmul unknown batch", "BatchMatMulV2", [([None, None, 2, 3], _f), ([4, 3, 5], _f)],
     {}, [[None, 4, 2, 5]]),
    ("batch matmul unknown vs 1", "BatchMatMulV2", [([None, 2, 3], _f), ([1, 3, 4], _f)], {},
     [[None, 2, 4]]),
    ("batch matmul unknown vs 5", "BatchMatMulV2", [([None, 2, 3], _f), ([5, 3, 4], _f)], {},
     [[5, 2, 4]]),
    ("batch matmul adjoints", "BatchMatMulV2", [([3, 2], _f), ([5, 3], _f)],
     {"adj_x": True, "adj_y": True}, [[2, 5]]),
    ("softmax unknown", "Softmax", [(None, _f)], {}, [None]),
    ("log softmax", "LogSoftmax", [([2, None, 3], _f)], {}, [[2, None, 3]]),
    ("sparse xent", "SparseSoftmaxCrossEntropyWithLogits", [([None, 3], _f), ([2], _i)], {},
     [[2], [2, 3]]),
    ("sparse xent unknown", "SparseSoftmaxCrossEntropyWithLogits", [(None, _f), (None, _i)], {},
     [[None], [None, None]]),
    ("xent", "SoftmaxCrossEntropyWithLogits", [([None, 3], _f), ([2, None], _f)], {},
     [[2], [2, 3]]),
    ("xent broadcast", "SoftmaxCrossEntropyWithLogits", [([3], _f), ([2, 3], _f)], {},
     [[2], [2, 3]]),
    ("xent broadcast both", "SoftmaxCrossEntropyWithLogits", [([2, 1], _f), ([1, 3], _f)], {},
     [[2], [2, 3]]),
    ("xent unknown", "SoftmaxCrossEntropyWithLogits", [(None, _f), (None, _f)], {},
     [[None], [None, None]]),
    ("xent unknown labels", "SoftmaxCrossEntropyWithLogits", [([None, 3], _f), (None, _f)], {},
     [[None], [None, 3]]),
    ("l2 loss", "L2Loss", [([2, None], _f)], {}, [[]]),
    ("bias add", "BiasAdd", [([2, None], _f), ([3], _f)], {}, [[2, 3]]),
    ("bias add unknown bias", "BiasAdd", [([2, 3], _f), (None, _f)], {}, [[2, 3]]),
    ("bias add nchw", "BiasAdd", [([None, None, None], _f), ([4], _f)], {"data_format": "NCHW"},
     [[None, 4, None]]),
    ("bias add unknown", "BiasAdd", [(None, _f), ([4], _f)], {}, [None]),
]  # fmt: skip


@pytest.mark.parametrize("case", SHAPE_CASES, ids=lambda c: c[0])
def test_shapes(case):
    _, op, inputs, attrs, want = case
    scope = Scope.new_root_scope()
    holders = [mg.Placeholder(scope, mg.as_dtype(d), shape=s) for s, d in inputs]
    node = getattr(N, op)(scope, *holders, **attrs)
    assert [o.shape for o in node.outputs] == [TensorShape(w) for w in want]


# -- builders ----------------------------------------------------------------------------------


def test_builders_and_multiple_outputs():
    scope = Scope.new_root_scope()
    x = mg.Const(scope, _X3)
    xent = N.SparseSoftmaxCrossEntropyWithLogits(scope, x, labels=[2, 0])
    assert xent.operation.attrs["Tlabels"] is mg.int32  # a literal: int32, as TF converts it
    assert [o.name for o in xent.outputs] == [xent.loss.name, xent.backprop.name]
    loss, backprop = Session(scope).run([xent.loss, xent.backprop])
    assert loss.shape == (2,) and backprop.shape == (2, 3)
    dense = N.SoftmaxCrossEntropyWithLogits(scope, features=x, labels=np.ones((2, 3), F32) / 3)
    assert dense.loss.shape == TensorShape([2])
    bias = N.BiasAdd(scope, x, [1.0, 2.0, 3.0], data_format="NHWC")
    assert bias.operation.inputs[1].dtype is mg.float32  # the literal takes x's dtype
    product = N.MatMul(scope, x, x, transpose_b=True)
    assert product.shape == TensorShape([2, 2])
    assert mg.registry.signature("MatMul") == (
        "MatMul(a: T, b: T) -> product: T; transpose_a: bool = false, transpose_b: bool = false, "
        "grad_a: bool = false, grad_b: bool = false"
    )


def test_op_defs_match_tf():
    def attrs(op):
        return [x.name for x in mg.registry.get_op_def(op).attrs]

    def allowed(op, attr="T"):
        (spec,) = [x for x in mg.registry.get_op_def(op).attrs if x.name == attr]
        return {d.name for d in spec.allowed}

    assert attrs("MatMul") == ["transpose_a", "transpose_b", "T", "grad_a", "grad_b"]
    assert attrs("BatchMatMulV2") == ["T", "adj_x", "adj_y", "grad_x", "grad_y"]
    assert attrs("SparseSoftmaxCrossEntropyWithLogits") == ["T", "Tlabels"]
    assert attrs("BiasAdd") == ["T", "data_format"]
    assert "int16" not in allowed("MatMul") and "uint64" in allowed("MatMul")
    assert "int16" in allowed("BatchMatMulV2") and len(allowed("BatchMatMulV2")) == 13
    for op in ("Softmax", "LogSoftmax", "L2Loss", "SoftmaxCrossEntropyWithLogits"):
        assert allowed(op) == {"float16", "bfloat16", "float32", "float64"}, op
    assert len(allowed("BiasAdd")) == 14
    outputs = {op: [o.name for o in mg.registry.get_op_def(op).outputs] for op in (
        "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits", "L2Loss", "MatMul",
        "BatchMatMulV2", "BiasAdd")}  # fmt: skip
    assert outputs == {
        "Softmax": ["softmax"], "LogSoftmax": ["logsoftmax"],
        "SparseSoftmaxCrossEntropyWithLogits": ["loss", "backprop"], "L2Loss": ["output"],
        "MatMul": ["product"], "BatchMatMulV2": ["output"], "BiasAdd": ["output"],
    }  # fmt: skip
    assert mg.registry.get_op_def("BiasAdd").attrs[1].default == "NHWC"
    assert mg.registry.get_op_def("SparseSoftmaxCrossEntropyWithLogits").attrs[1].default is (
        mg.int64
    )


def test_operators_build_these_ops():
    # `@` (ops/operators.py) builds MatMul for rank-2 operands, BatchMatMulV2 otherwise.
    pytest.importorskip("ops.operators")
    scope = Scope.new_root_scope()
    m = mg.Placeholder(scope, mg.float32, shape=[2, 3])
    b = mg.Placeholder(scope, mg.float32, shape=[4, 3, 5])
    assert (m @ np.ones((3, 2), np.float32)).op.type == "MatMul"
    assert (m @ b).op.type == "BatchMatMulV2" and (m @ b).shape == TensorShape([4, 2, 5])


def test_half_precision_inputs_stay_on_the_cpu_for_bfloat16(sim_gpus):
    scope = Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.bfloat16, shape=[2, 3])
    y = mg.Placeholder(scope.with_op_name("y"), mg.float16, shape=[2, 3])
    nodes = [N.Softmax(scope.with_op_name("bf"), x), N.Softmax(scope.with_op_name("hf"), y)]
    metadata = mg.RunMetadata()
    values = {x: np.ones((2, 3), ml_dtypes.bfloat16), y: np.ones((2, 3), np.float16)}
    got = Session(scope).run(nodes, values, run_metadata=metadata)
    assert metadata.placement["bf"].endswith("CPU:0") and metadata.placement["hf"].endswith("GPU:0")
    for g in got:
        np.testing.assert_allclose(g.astype(F32), np.full((2, 3), 1 / 3), rtol=1e-2)
    assert run_case(Case("c", "L2Loss", (np.ones(3, F16),)), fed=True).dtype == F16


@pytest.mark.parametrize("specialize", [True, False])
def test_matmul_specialisation_gives_the_kernels_results_and_errors(specialize):
    # Known rank-2 operands are specialised (an inlined np.matmul for small products of known
    # shape, a pooled-memory matmul otherwise); a product that cannot be formed at run time
    # still gets TF's message from the kernel.
    config = mg.SessionConfig(specialize_kernels=specialize)
    rng = np.random.default_rng(5)
    for ta, tb in [(False, False), (True, False), (False, True), (True, True)]:
        scope = Scope.new_root_scope()
        x = mg.Placeholder(scope, mg.float64, shape=[None, 3] if not ta else [3, None])
        y = mg.Placeholder(scope, mg.float64, shape=[None, 4] if not tb else [4, None])
        known = mg.Placeholder(scope, mg.float64, shape=[4, 3] if not ta else [3, 4])
        w = mg.Const(scope, rng.random((4, 3) if tb else (3, 4)))
        attrs = {"transpose_a": ta, "transpose_b": tb}
        free, fixed = N.MatMul(scope, x, y, **attrs), N.MatMul(scope, known, w, **attrs)
        a = rng.random((4, 3) if not ta else (3, 4))
        b = rng.random((3, 4) if not tb else (4, 3))
        with Session(scope, config) as sess:
            got, got_fixed = sess.run([free, fixed], {x: a, y: b, known: a})
            np.testing.assert_array_equal(got, (a.T if ta else a) @ (b.T if tb else b))
            np.testing.assert_array_equal(got_fixed, (a.T if ta else a) @ (w.operation.attrs[
                "value"].T if tb else w.operation.attrs["value"]))  # fmt: skip
            bad = rng.random((5, 4) if not tb else (4, 5))
            with pytest.raises(mg.InvalidArgumentError, match=r"^Matrix size-incompatible"):
                sess.run(free, {x: a, y: bad})
