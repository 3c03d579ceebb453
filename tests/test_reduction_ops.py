"""Reductions (ops/reduction.py): TF's documented examples, TF's semantics on the edge cases
(integer means, empty reductions, NaN, float16/bfloat16 accumulation, ArgMax's NaN rule and
narrow output types), builders, shape functions over partial shapes, and error tables for
construction and run time. Every case runs twice: on constant inputs (construction-time shape
inference and the kernels' constant-axis specialisation) and on placeholders of unknown shape
fed at run time (the kernels' general path). tests/test_reduction_nn_tf.py checks these tables
against TensorFlow itself.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from _reduction_nn_helpers import BF16, Case, Raises, a, check_case, run_case

import minigraph as mg
from minigraph import Scope, Session, TensorShape
from ops import reduction as R

nan, inf = float("nan"), float("inf")
F32_MAX = float(np.finfo(np.float32).max)
I32, I64, F32 = np.int32, np.int64, np.float32


def ax(*values: int, dtype=I32) -> np.ndarray:
    return np.array(values if len(values) != 1 else values[0], dtype)


# -- TF's documented examples (tf.math.reduce_* and tf.math.argmax docstrings, literally) ------

_ONES = a([[1, 1, 1], [1, 1, 1]], I32)
_MEAN = a([[1.0, 1.0], [2.0, 2.0]], F32)
_PROD = a([[1.0, 2.0], [3.0, 4.0]], F32)
_MIN3 = a([[[1, 2], [3, 4]], [[1, 2], [3, 4]]], I32)
_MIN2 = a([[1, 2, 3], [4, 5, 6]], I32)
_BOOL = a([[True, True], [False, False]], bool)
_ARG = a([[2, 20, 30, 3, 6], [3, 11, 16, 1, 8], [14, 45, 23, 5, 27]], I32)

DOC_CASES = [
    Case("sum all", "Sum", (_ONES, ax(0, 1)), {}, a(6, I32)),
    Case("sum 0", "Sum", (_ONES, ax(0)), {}, a([2, 2, 2], I32)),
    Case("sum 1", "Sum", (_ONES, ax(1)), {}, a([3, 3], I32)),
    Case("sum 1 keepdims", "Sum", (_ONES, ax(1)), {"keep_dims": True}, a([[3], [3]], I32)),
    Case("mean all", "Mean", (_MEAN, ax(0, 1)), {}, a(1.5, F32)),
    Case("mean 0", "Mean", (_MEAN, ax(0)), {}, a([1.5, 1.5], F32)),
    Case("mean 1", "Mean", (_MEAN, ax(1)), {}, a([1.0, 2.0], F32)),
    Case("mean of ints", "Mean", (a([1, 0, 1, 0], I32), ax(0)), {}, a(0, I32)),
    Case("mean of floats", "Mean", (a([1.0, 0.0, 1.0, 0.0], F32), ax(0)), {}, a(0.5, F32)),
    Case("prod all", "Prod", (_PROD, ax(0, 1)), {}, a(24.0, F32)),
    Case("prod 0", "Prod", (_PROD, ax(0)), {}, a([3.0, 8.0], F32)),
    Case("prod 1", "Prod", (_PROD, ax(1)), {}, a([2.0, 12.0], F32)),
    Case("min", "Min", (a([5, 1, 2, 4], I32), ax(0)), {}, a(1, I32)),
    Case("min negative", "Min", (a([-5, -1, -2, -4], I32), ax(0)), {}, a(-5, I32)),
    Case("min nan", "Min", (a([4, nan], F32), ax(0)), {}, a(nan, F32)),
    Case("min nans", "Min", (a([nan, nan], F32), ax(0)), {}, a(nan, F32)),
    Case("min infs", "Min", (a([-inf, inf], F32), ax(0)), {}, a(-inf, F32)),
    Case("min 3-d", "Min", (_MIN3, ax(0, 1, 2)), {}, a(1, I32)),
    Case("min axis 0", "Min", (_MIN2, ax(0)), {}, a([1, 2, 3], I32)),
    Case("min axis 1", "Min", (_MIN2, ax(1)), {}, a([1, 4], I32)),
    Case("min keepdims", "Min", (_MIN3, ax(0, 1, 2)), {"keep_dims": True}, a([[[1]]], I32)),
    Case(
        "min axis 0 keepdims", "Min", (_MIN3, ax(0)), {"keep_dims": True},
        a([[[1, 2], [3, 4]]], I32),
    ),
    Case("max", "Max", (a([5, 1, 2, 4], I32), ax(0)), {}, a(5, I32)),
    Case("max negative", "Max", (a([-5, -1, -2, -4], I32), ax(0)), {}, a(-1, I32)),
    Case("max nan", "Max", (a([4, nan], F32), ax(0)), {}, a(nan, F32)),
    Case("max nans", "Max", (a([nan, nan], F32), ax(0)), {}, a(nan, F32)),
    Case("max infs", "Max", (a([-inf, inf], F32), ax(0)), {}, a(inf, F32)),
    Case("all", "All", (_BOOL, ax(0, 1)), {}, a(False, bool)),
    Case("all 0", "All", (_BOOL, ax(0)), {}, a([False, False], bool)),
    Case("all 1", "All", (_BOOL, ax(1)), {}, a([True, False], bool)),
    Case("any", "Any", (_BOOL, ax(0, 1)), {}, a(True, bool)),
    Case("any 0", "Any", (_BOOL, ax(0)), {}, a([True, True], bool)),
    Case("any 1", "Any", (_BOOL, ax(1)), {}, a([True, False], bool)),
    Case("argmax", "ArgMax", (a([2, 20, 30, 3, 6], I32), ax(0)), {}, a(2, I64)),
    Case("argmax 0", "ArgMax", (_ARG, ax(0)), {}, a([2, 2, 0, 2, 2], I64)),
    Case("argmax 1", "ArgMax", (_ARG, ax(1)), {}, a([2, 2, 1], I64)),
    Case("argmax ties", "ArgMax", (a([0, 0, 0, 0], I32), ax(0)), {}, a(0, I64)),
]  # fmt: skip


# -- TF's semantics on the edge cases (TF 2.21's CPU kernels' results) -------------------------


def _one_hot(n: int, hot: int) -> np.ndarray:
    x = np.zeros(n, F32)
    x[hot] = 1
    return x


SEMANTIC_CASES = [
    # Integer Mean: 64-bit sums, C's truncation towards zero, 64-bit types wrap.
    Case("mean truncates", "Mean", (a([-7, 0], I32), ax(0)), {}, a(-3, I32)),
    Case("mean truncates -1.5", "Mean", (a([-1, -2], I32), ax(0)), {}, a(-1, I32)),
    Case("mean int8 sums wide", "Mean", (a([100, 100], np.int8), ax(0)), {}, a(100, np.int8)),
    Case("mean uint8 sums wide", "Mean", (a([200, 200], np.uint8), ax(0)), {}, a(200, np.uint8)),
    Case("mean int32 sums wide", "Mean", (a([2**30] * 3, I32), ax(0)), {}, a(2**30, I32)),
    Case(
        "mean uint32 sums wide", "Mean", (a([2**31 + 1] * 2, np.uint32), ax(0)), {},
        a(2**31 + 1, np.uint32),
    ),
    Case("mean int64 wraps", "Mean", (a([2**62, 2**62], I64), ax(0)), {}, a(-(2**62), I64)),
    Case("mean uint64 wraps", "Mean", (a([2**63, 2**63], np.uint64), ax(0)), {}, a(0, np.uint64)),
    Case(
        "mean complex", "Mean", (a([1 + 2j, 2 + 3j], np.complex64), ax(0)), {},
        a(1.5 + 2.5j, np.complex64),
    ),
    Case(
        "mean int axis 1", "Mean", (a([[-5, 2], [7, 8]], np.int16), ax(1)), {},
        a([-1, 7], np.int16),
    ),
    # Integer Sum/Prod wrap in T.
    Case("sum int8 wraps", "Sum", (a([100, 100], np.int8), ax(0)), {}, a(-56, np.int8)),
    Case("sum uint8 wraps", "Sum", (a([200, 200], np.uint8), ax(0)), {}, a(144, np.uint8)),
    Case("prod int32 wraps", "Prod", (a([2**16, 2**16], I32), ax(0)), {}, a(0, I32)),
    # float16 in float16 (pairwise along the last axis, sequential along others).
    Case("sum f16 pairwise", "Sum", (np.ones(4096, np.float16), ax(0)), {}, a(4096, np.float16)),
    Case(
        "sum f16 rows", "Sum", (np.ones((2, 4096), np.float16), ax(1)), {},
        a([4096, 4096], np.float16),
    ),
    Case(
        "sum f16 columns saturate", "Sum", (np.ones((4096, 2), np.float16), ax(0)), {},
        a([2048, 2048], np.float16),
    ),
    Case(
        "mean f16 columns", "Mean", (np.ones((4096, 2), np.float16), ax(0)), {},
        a([0.5, 0.5], np.float16),
    ),
    Case(
        "mean f16 overflows", "Mean", (np.full(4096, 1000, np.float16), ax(0)), {},
        a(inf, np.float16),
    ),
    Case(
        "mean f16 count is inf", "Mean", (np.full(100000, 0.001, np.float16), ax(0)), {},
        a(0, np.float16),
    ),
    # bfloat16 Sum and Mean in float32.
    Case(
        "sum bf16 in float32", "Sum", (np.ones((4096, 2), BF16), ax(0)), {},
        a([4096, 4096], BF16),
    ),
    Case("mean bf16 in float32", "Mean", (np.ones((4096, 2), BF16), ax(0)), {}, a([1, 1], BF16)),
    Case(
        "mean bf16 large count", "Mean", (np.full(100000, 0.001, BF16), ax(0)), {},
        a(0.001, BF16),
    ),
    # NaN propagates through Max and Min, whatever its position.
    *[
        Case(f"{op} nan {d.name}", op, (a(v, d), ax(0)), {}, a(nan, d))
        for op in ("Max", "Min")
        for d in (np.dtype(np.float16), BF16, np.dtype(F32), np.dtype(np.float64))
        for v in ([1.0, nan, 3.0], [nan, 1.0, 3.0], [1.0, 3.0, nan])
    ],
    Case(
        "max nan rows", "Max", (a([[1, nan, 3], [nan, 2, 1], [1, 2, nan]], F32), ax(1)), {},
        a([nan, nan, nan], F32),
    ),
    # Axis forms: int64, negative, several, empty (no reduction), a scalar input.
    Case("axis int64", "Sum", (np.arange(6, dtype=F32).reshape(2, 3), ax(1, dtype=I64)), {},
         a([3, 12], F32)),
    Case("axis negative", "Max", (a([[1, 5], [7, 2]], I32), ax(-1)), {"keep_dims": True},
         a([[5], [7]], I32)),
    Case("axis order", "Sum", (np.arange(24, dtype=I64).reshape(2, 3, 4), ax(2, 0)), {},
         np.arange(24, dtype=I64).reshape(2, 3, 4).sum(axis=(0, 2))),
    Case("axis empty", "Prod", (a([[1, 5], [7, 2]], I32), np.zeros(0, I32)), {},
         a([[1, 5], [7, 2]], I32)),
    Case("axis empty keepdims", "Mean", (a([[1, 5], [7, 2]], I32), np.zeros(0, I64)),
         {"keep_dims": True}, a([[1, 5], [7, 2]], I32)),
    Case("scalar input", "Sum", (a(3.0, F32), np.zeros(0, I32)), {}, a(3.0, F32)),
    Case("scalar input keepdims", "Min", (a(3, I32), np.zeros(0, I32)), {"keep_dims": True},
         a(3, I32)),
    Case("all over int64 axes", "All", (a([[True, False]], bool), ax(0, 1, dtype=I64)),
         {"keep_dims": True}, a([[False]], bool)),
    # ArgMax/ArgMin: the first index; NaN never wins; TF's initial index 0 holds the lowest
    # (highest) finite value, which nothing at or beyond it displaces.
    Case("argmax ties first", "ArgMax", (a([1, 3, 3, 2], I32), ax(0)), {}, a(1, I64)),
    Case("argmin ties first", "ArgMin", (a([1, 0, 0, 2], I32), ax(0)), {}, a(1, I64)),
    Case("argmax bool", "ArgMax", (a([False, True, True], bool), ax(0)), {}, a(1, I64)),
    Case("argmin bool", "ArgMin", (a([True, False, False], bool), ax(0)), {}, a(1, I64)),
    Case("argmax all false", "ArgMax", (a([False, False], bool), ax(0)), {}, a(0, I64)),
    *[
        Case(f"argmax {v}", "ArgMax", (a(v, F32), ax(0)), {}, a(want, I64))
        for v, want in [
            ([nan, nan], 0), ([-inf, -inf], 0), ([-inf, -inf, -F32_MAX], 0), ([-inf, nan, 2.0], 2),
            ([-F32_MAX, -inf], 0), ([nan, -inf, nan], 0), ([-inf, -F32_MAX], 0), ([1.0, nan], 0),
            ([1.0, nan, 3.0], 2), ([nan, 1.0, 3.0], 2), ([-inf, 3.0, -inf], 1),
        ]
    ],
    *[
        Case(f"argmin {v}", "ArgMin", (a(v, F32), ax(0)), {}, a(want, I64))
        for v, want in [
            ([nan, nan], 0), ([inf, inf], 0), ([inf, inf, F32_MAX], 0), ([inf, nan, -2.0], 2),
            ([F32_MAX, inf], 0), ([nan, inf, nan], 0), ([-1.0, nan], 0), ([1.0, nan, 0.0], 2),
        ]
    ],
    *[
        Case(f"argmax nan {d.name}", "ArgMax", (a([1.0] * 50 + [nan] + [3.0] * 49, d), ax(0)),
             {}, a(51, I64))
        for d in (np.dtype(np.float16), BF16, np.dtype(np.float64))
    ],
    Case("argmax nan rows", "ArgMax",
         (a([[nan, 1, 2], [3, nan, 1], [nan, nan, nan], [-inf, nan, -inf]], F32), ax(1)), {},
         a([2, 0, 0, 0], I64)),
    Case("argmax nan along axis 0", "ArgMax",
         (a([[[5, 1], [1, 1]], [[nan, 1], [1, 1]]], F32), ax(0)), {}, a([[0, 0], [0, 0]], I64)),
    Case("argmin nan columns", "ArgMin", (a([[nan, 1, 2], [3, nan, 1]], F32), ax(0)), {},
         a([1, 0, 1], I64)),
    Case("argmax int16 wraps", "ArgMax", (_one_hot(40001, 40000), ax(0)),
         {"output_type": mg.int16}, a(-25536, np.int16)),
    Case("argmax uint16 wraps", "ArgMax", (_one_hot(70001, 70000), ax(0)),
         {"output_type": mg.uint16}, a(4464, np.uint16)),
    Case("argmax int32", "ArgMax", (_ARG, ax(-1)), {"output_type": mg.int32},
         a([2, 2, 1], I32)),
    Case("argmin int32", "ArgMin", (_ARG, ax(0)), {"output_type": mg.int32},
         a([0, 1, 1, 1, 0], I32)),
    Case("argmax other dim empty", "ArgMax", (np.zeros((0, 2), F32), ax(1)), {},
         np.zeros(0, I64)),
    Case("argmax int64 dimension", "ArgMax", (_ARG, ax(1, dtype=I64)), {}, a([2, 2, 1], I64)),
]  # fmt: skip


def _empty_cases() -> list[Case]:
    """TF's identities for empty reductions, per dtype: over a [0] input (every axis) and
    along axis 1 of a [3, 0] input (a non-empty output over empty rows)."""
    cases = []
    for name in (
        "float32", "float64", "float16", "bfloat16", "int32", "int8", "uint8", "int64",
        "uint64", "int16", "uint16", "uint32", "complex64",
    ):  # fmt: skip
        d = mg.as_dtype(name).np_dtype
        floating = d.kind == "f" or d == BF16
        empty, rows = np.zeros(0, d), np.zeros((3, 0), d)
        mean = nan if floating else 0
        cases += [
            Case(f"empty sum {name}", "Sum", (empty, ax(0)), {}, a(0, d)),
            Case(f"empty prod {name}", "Prod", (empty, ax(0)), {}, a(1, d)),
            Case(f"empty mean {name}", "Mean", (empty, ax(0)), {}, a(mean, d)),
            Case(f"empty rows mean {name}", "Mean", (rows, ax(1)), {}, a([mean] * 3, d)),
            Case(f"empty columns mean {name}", "Mean", (rows, ax(0)), {}, np.zeros(0, d)),
        ]
        if d.kind == "c":
            continue
        if floating:
            low, high = -inf, inf
        else:
            low, high = np.iinfo(d).min, np.iinfo(d).max
        cases += [
            Case(f"empty max {name}", "Max", (empty, ax(0)), {}, a(low, d)),
            Case(f"empty min {name}", "Min", (empty, ax(0)), {}, a(high, d)),
            Case(f"empty rows max {name}", "Max", (rows, ax(1)), {}, a([low] * 3, d)),
        ]
    empty = np.zeros(0, bool)
    cases += [
        Case("empty all", "All", (empty, ax(0)), {}, a(True, bool)),
        Case("empty any", "Any", (empty, ax(0)), {}, a(False, bool)),
    ]
    return cases


EMPTY_CASES = _empty_cases()
ALL_CASES = DOC_CASES + SEMANTIC_CASES + EMPTY_CASES


@pytest.mark.parametrize("fed", [False, True], ids=["const", "fed"])
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_tf_values(case, fed):
    check_case(case, fed)


def test_a_run_time_axis_of_any_rank_is_read_flattened():
    # TF's kernel flattens the axis tensor; only its shape function (at construction) wants
    # rank <= 1, which an axis of unknown shape passes.
    case = Case("2-d axis", "Sum", (np.ones((2, 3), F32), ax([[0], [1]])), {}, a(6, F32))
    check_case(case, fed=True)


def test_int16_dimension_is_read_as_int16():
    # TF's ArgMax kernel reads an int16 dimension as the bytes of an int32 (garbage for -1).
    x = np.array([[1, 9, 3], [7, 2, 0]], F32)
    for fed in (False, True):
        got = run_case(Case("int16", "ArgMax", (x, ax(-1, dtype=np.int16))), fed)
        np.testing.assert_array_equal(got, [1, 0])


# -- error tables ------------------------------------------------------------------------------

X23 = np.zeros((2, 3), F32)

CONSTRUCTION_ERRORS = [
    Case("axis too large", "Sum", (X23, ax(5)), {},
         Raises(r"^Invalid reduction dimension 5 for input with 2 dimensions\. for 'node' "
                r"\(Sum\)")),
    Case("axis too small", "Mean", (X23, ax(-3)), {},
         Raises(r"^Invalid reduction dimension -3 for input with 2 dimensions\.")),
    Case("axis of a scalar", "Max", (a(1.0, F32), ax(0)), {},
         Raises(r"Invalid reduction dimension 0 for input with 0 dimensions\.")),
    Case("axis int64 huge", "Min", (X23, ax(2**40, dtype=I64)), {},
         Raises(r"Invalid reduction dimension 1099511627776 for input with 2 dimensions\.")),
    Case("axis rank 2", "Sum", (X23, ax([[0]])), {},
         Raises(r"Shape must be at most rank 1 but is rank 2")),
    Case("axis twice", "Prod", (X23, ax(0, 0)), {},
         Raises(r"Invalid reduction arguments: Axes contains duplicate dimension: 0")),
    Case("axis twice negative", "All", (np.ones((2, 3), bool), ax(1, -1)), {},
         Raises(r"Axes contains duplicate dimension: 1")),
    Case("bad then twice", "Any", (np.ones((2, 3), bool), ax(5, 0, 0)), {},
         Raises(r"Invalid reduction dimension 5")),
    Case("argmax dim too large", "ArgMax", (X23, ax(2)), {},
         Raises(r"Dimension \(2\) must be in the range \[-2, 2\), where 2 is the number of "
                r"dimensions in the input\.")),
    Case("argmin dim too small", "ArgMin", (X23, ax(-3)), {},
         Raises(r"Dimension \(-3\) must be in the range \[-2, 2\)")),
    Case("argmax vector dim", "ArgMax", (X23, ax([0])), {},
         Raises(r"Shape must be rank 0 but is rank 1")),
    Case("argmax of a scalar", "ArgMax", (a(1.0, F32), ax(0)), {},
         Raises(r"Dimension \(0\) must be in the range \[0, 0\)")),
    Case("argmax of a vector, dim 5", "ArgMax", (np.zeros(3, F32), ax(5)), {},
         Raises(r"Dimension \(5\) must be in the range \[-1, 1\)")),
    Case("argmax empty dim", "ArgMax", (np.zeros((2, 0), F32), ax(1)), {},
         Raises(r"Reduction axis 1 is empty in shape \[2,0\]")),
    Case("argmin empty vector", "ArgMin", (np.zeros(0, F32), ax(-1)), {},
         Raises(r"Reduction axis -1 is empty in shape \[0\]")),
    # dtypes the OpDefs refuse
    Case("all of ints", "All", (a([1], I32), ax(0)), {},
         Raises(r"input 'input' must be bool, got int32")),
    Case("max of complex", "Max", (a([1j], np.complex64), ax(0)), {},
         Raises(r"attr 'T' allows only")),
    Case("sum of bools", "Sum", (a([True], bool), ax(0)), {}, Raises(r"attr 'T' allows only")),
    Case("float axis", "Sum", (X23, a([0.0], F32)), {}, Raises(r"attr 'Tidx' allows only")),
    Case("argmax int16 axis fine, argmin not", "ArgMin", (X23, ax(0, dtype=np.int16)), {},
         Raises(r"attr 'Tidx' allows only")),
    Case("argmin int16 output", "ArgMin", (X23, ax(0)), {"output_type": mg.int16},
         Raises(r"output_type")),
]  # fmt: skip


@pytest.mark.parametrize("case", CONSTRUCTION_ERRORS, ids=lambda c: c.id)
def test_construction_errors_leave_the_graph_unchanged(case):
    scope = Scope.new_root_scope()
    inputs = [mg.Const(scope.with_op_name(f"in{i}"), v) for i, v in enumerate(case.inputs)]
    before = len(scope.graph)
    with pytest.raises(mg.InvalidArgumentError) as info:
        R.__dict__[case.op](scope.with_op_name("node"), *inputs, **case.attrs)
    assert len(scope.graph) == before
    assert re.search(case.expected.pattern, info.value.message), info.value.message
    # Literal inputs become Consts inside the builder: they are rolled back too.
    with pytest.raises(mg.InvalidArgumentError):
        R.__dict__[case.op](scope.with_op_name("node"), *case.inputs, **case.attrs)
    assert len(scope.graph) == before


RUN_TIME_ERRORS = [
    Case("axis too large", "Sum", (X23, ax(5)), {},
         Raises(r"^Invalid reduction dimension \(5 for input with 2 dimension\(s\)$")),
    Case("axis too small", "Mean", (X23, ax(-3)), {},
         Raises(r"Invalid reduction dimension \(-3 for input with 2 dimension\(s\)")),
    Case("axis of a scalar", "Max", (a(1.0, F32), ax(-1)), {},
         Raises(r"Invalid reduction dimension \(-1 for input with 0 dimension\(s\)")),
    Case("axis twice", "Sum", (X23, ax(0, 0, -2)), {},
         Raises(r"^Invalid reduction arguments: Axes contains duplicate dimension: 0$")),
    Case("axis twice negative", "Prod", (X23, ax(-1, 1)), {},
         Raises(r"Axes contains duplicate dimension: 1")),
    Case("twice then bad", "All", (np.ones((2, 3), bool), ax(0, 0, 5)), {},
         Raises(r"Axes contains duplicate dimension: 0")),
    Case("bad then twice", "Any", (np.ones((2, 3), bool), ax(5, 0, 0)), {},
         Raises(r"Invalid reduction dimension \(5 for")),
    Case("argmax dim too large", "ArgMax", (X23, ax(2)), {},
         Raises(r"^Expected dimension in the range \[-2, 2\), but got 2$")),
    Case("argmin dim too small", "ArgMin", (X23, ax(-3)), {},
         Raises(r"Expected dimension in the range \[-2, 2\), but got -3")),
    Case("argmax of a scalar", "ArgMax", (a(1.0, F32), ax(0)), {},
         Raises(r"Expected dimension in the range \[0, 0\), but got 0")),
    Case("argmax empty", "ArgMax", (np.zeros(0, F32), ax(0)), {},
         Raises(r"^Reduction axis 0 is empty in shape \[0\]$")),
    Case("argmax empty dim", "ArgMax", (np.zeros((2, 0), F32), ax(-1)), {},
         Raises(r"Reduction axis -1 is empty in shape \[2,0\]")),
    Case("argmax vector dim", "ArgMax", (X23, ax([1])), {},
         Raises(r"^dim must be a scalar, but received tensor of shape: \[1\]$")),
]  # fmt: skip


@pytest.mark.parametrize("case", RUN_TIME_ERRORS, ids=lambda c: c.id)
def test_run_time_errors(case):
    check_case(case, fed=True)


def test_int64_axes_beyond_int32_are_refused_at_run_time():
    # TF's kernels truncate them to 32 bits (2**40 reads as axis 0, 2**32 + 1 as 1) on all but
    # the first call of a process; minigraph refuses them every time.
    for axis in (ax(2**40, dtype=I64), ax(2**32 + 1, dtype=I64), ax([2**40], dtype=I64)):
        message = r"Invalid reduction dimension \(\d+ for input with 2 dimension\(s\)"
        check_case(Case("huge", "Min", (X23, axis), {}, Raises(message)), fed=True)
    # TF's ArgMax kernel truncates the same way.
    message = r"Expected dimension in the range \[-2, 2\), but got 1099511627776"
    check_case(Case("huge", "ArgMax", (X23, ax(2**40, dtype=I64)), {}, Raises(message)), fed=True)


def test_run_time_errors_name_the_node():
    scope = Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32)
    total = R.Sum(scope.with_op_name("total"), x, [3])
    with pytest.raises(mg.InvalidArgumentError) as info:
        Session(scope).run(total, {x: X23})
    assert info.value.node_name == "total" and info.value.op_type == "Sum"


# -- builders ----------------------------------------------------------------------------------


def test_builders_take_the_axis_by_position_as_axis_or_as_tf_opdef_name():
    scope = Scope.new_root_scope()
    x = mg.Const(scope, np.arange(6, dtype=F32).reshape(2, 3))
    nodes = [
        R.Sum(scope, x, 1),
        R.Sum(scope, x, axis=1),
        R.Sum(scope, x, reduction_indices=1),
        R.Sum(scope, input=x, axis=[1]),
        R.Sum(scope, x, [-1], keep_dims=False),
    ]
    results = Session(scope).run(nodes)
    for got in results:
        np.testing.assert_array_equal(got, [3, 12])
    arg = R.ArgMax(scope, x, axis=0, output_type=mg.int32)
    assert arg.operation.inputs[1].op.type == "Const" and arg.dtype is mg.int32
    assert R.ArgMin(scope, x, dimension=1).shape == TensorShape([2])


def test_axis_given_twice_is_refused():
    scope = Scope.new_root_scope()
    x = mg.Const(scope, X23)
    with pytest.raises(mg.InvalidArgumentError, match="the axis given twice"):
        R.Sum(scope, x, 0, axis=1)
    with pytest.raises(mg.InvalidArgumentError, match="the axis given twice"):
        R.Max(scope, x, reduction_indices=0, axis=1)
    with pytest.raises(mg.InvalidArgumentError, match="missing input 'reduction_indices'"):
        R.Mean(scope, x)


def test_an_empty_axis_literal_is_an_int32_vector_or_of_the_tidx_given():
    # numpy's [] is float64 and would be refused; TF converts a literal preferring Tidx's
    # default (int32).
    scope = Scope.new_root_scope()
    x = mg.Const(scope, X23)
    for node, tidx in [
        (R.Sum(scope, x, []), mg.int32),
        (R.Sum(scope, x, axis=()), mg.int32),
        (R.Prod(scope, x, [], Tidx=mg.int64), mg.int64),
        (R.All(scope, np.ones(2, bool), reduction_indices=[]), mg.int32),
    ]:
        assert node.operation.attrs["Tidx"] is tidx
        assert node.operation.inputs[1].shape == TensorShape([0])


def test_builder_signatures_and_docs():
    assert str(inspect.signature(R.Sum)) == "(scope, input, axis, *, keep_dims=False)"
    assert str(inspect.signature(R.ArgMax)) == (
        "(scope, input, axis, *, output_type=minigraph.int64)"
    )
    assert R.Mean.__doc__.startswith(
        "Mean(input: T, reduction_indices: Tidx) -> output: T; keep_dims: bool = false"
    )
    for op in ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin"):
        assert mg.registry.get_op_def(op) is getattr(R, op).op_def
        assert getattr(R, op).__module__ == "ops.reduction"


def test_op_defs_match_tf():
    sig = mg.registry.signature
    assert (
        sig("Sum") == "Sum(input: T, reduction_indices: Tidx) -> output: T; keep_dims: bool = false"
    )
    text = str(mg.registry.get_op_def("All").inputs[0])
    assert "bool" in text
    arg_max = mg.registry.get_op_def("ArgMax")
    assert [x.name for x in arg_max.attrs] == ["T", "Tidx", "output_type"]
    allowed = {x.name: {d.name for d in x.allowed} for x in arg_max.attrs}
    assert allowed["output_type"] == {"int16", "uint16", "int32", "int64"}
    assert allowed["Tidx"] == {"int16", "int32", "int64"}
    arg_min = {x.name: {d.name for d in x.allowed} for x in mg.registry.get_op_def("ArgMin").attrs}
    assert arg_min["output_type"] == {"int32", "int64"} and arg_min["Tidx"] == {"int32", "int64"}
    for op, count in (("Sum", 14), ("Mean", 14), ("Prod", 14), ("Max", 12), ("Min", 12)):
        (t,) = [x for x in mg.registry.get_op_def(op).attrs if x.name == "T"]
        assert len(t.allowed) == count, op
        assert [x.name for x in mg.registry.get_op_def(op).attrs] == ["keep_dims", "T", "Tidx"]


# -- shape functions over partial shapes -------------------------------------------------------

UNKNOWN = "unknown"

# (input shape, axis: a constant value or (UNKNOWN, axis shape), keep_dims) -> output shape
REDUCTION_SHAPES = [
    ([2, None, 3], [0, -1], False, [None]),
    ([2, None, 3], [0, -1], True, [1, None, 1]),
    ([2, None, 3], [-1, 1], True, [2, 1, 1]),
    ([2, None, 3], 1, False, [2, 3]),
    ([2, None, 3], [], False, [2, None, 3]),
    ([2, None, 3], [], True, [2, None, 3]),
    ([], [], False, []),
    ([0, 4], [1], False, [0]),
    ([2, None, 3], (UNKNOWN, [None]), True, [None, None, None]),
    ([2, None, 3], (UNKNOWN, [None]), False, None),
    ([2, None, 3], (UNKNOWN, []), False, None),
    ([2, None, 3], (UNKNOWN, None), True, [None, None, None]),
    (None, [0], True, None),
    (None, [0], False, None),
    (None, (UNKNOWN, [2]), True, None),
]  # fmt: skip


def _axis_input(scope, axis):
    if isinstance(axis, tuple) and axis[0] == UNKNOWN:
        return mg.Placeholder(scope, mg.int32, shape=axis[1])
    return mg.Const(scope, np.array(axis, np.int32))


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod", "All", "Any"])
@pytest.mark.parametrize("shape, axis, keep, want", REDUCTION_SHAPES)
def test_reduction_shapes(op, shape, axis, keep, want):
    scope = Scope.new_root_scope()
    dtype = mg.bool_ if op in ("All", "Any") else mg.float32
    x = mg.Placeholder(scope, dtype, shape=shape)
    node = R.__dict__[op](scope, x, _axis_input(scope, axis), keep_dims=keep)
    assert node.shape == TensorShape(want)
    assert node.dtype is dtype


def test_reduction_shape_is_public_and_shared():
    got = R.reduction_shape(TensorShape([4, None, 2]), TensorShape([2]), np.array([2, 0]), True)
    assert got == TensorShape([1, None, 1])
    assert R.reduction_axes(np.array([-1, 0]), 3) == (2, 0)
    with pytest.raises(mg.InvalidArgumentError, match="duplicate dimension: 2"):
        R.reduction_axes([2, -1], 3)


# (input shape, dimension: constant or UNKNOWN) -> output shape
ARG_SHAPES = [
    ([2, None, 4], -2, [2, 4]),
    ([2, None, 4], 1, [2, 4]),
    ([2, 3, 4], UNKNOWN, [None, None]),
    ([None], 0, []),
    ([7], UNKNOWN, []),
    (None, 0, None),
    (None, UNKNOWN, None),
    ([0, 3], 1, [0]),
]


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape, dim, want", ARG_SHAPES)
def test_arg_shapes(op, shape, dim, want):
    scope = Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.float32, shape=shape)
    d = mg.Placeholder(scope, mg.int32, shape=[]) if dim == UNKNOWN else dim
    node = R.__dict__[op](scope, x, d)
    assert node.shape == TensorShape(want) and node.dtype is mg.int64


def test_arg_of_a_scalar_with_unknown_dimension_fails_at_construction():
    scope = Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.float32, shape=[])
    with pytest.raises(mg.InvalidArgumentError, match=r"the input is a scalar"):
        R.ArgMax(scope, x, mg.Placeholder(scope, mg.int32))


# -- the constant-axis specialisation gives the general path's results -------------------------


@pytest.mark.parametrize("specialize", [True, False])
def test_constant_axes_with_and_without_specialisation(specialize):
    config = mg.SessionConfig(specialize_kernels=specialize)
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 7
    for op in ("Sum", "Mean", "Max", "Min", "Prod"):
        for axis in ([0], [-1, 0], [], [2, 1, 0]):
            for keep in (False, True):
                case = Case("c", op, (x, np.array(axis, I32)), {"keep_dims": keep})
                got = run_case(case, fed=False, config=config)
                fed = run_case(case, fed=True)
                np.testing.assert_array_equal(got, fed)
                assert got.shape == fed.shape and got.dtype == fed.dtype


def test_argmax_nan_rule_on_every_layout():
    # The NaN check picks numpy's answers by flat positions on contiguous host arrays, by
    # take_along_axis otherwise (a transposed view fed as it is); empty inner dims included.
    x = np.array([[[nan, 1.0], [2.0, nan], [0.5, 0.5]], [[-inf, -inf], [nan, nan], [3.0, 1.0]]],
                 F32)  # fmt: skip
    want = {0: [[0, 0], [0, 0], [1, 1]], 1: [[1, 0], [2, 2]], 2: [[1, 0, 0], [0, 0, 0]]}
    for layout in (x, np.asfortranarray(x), x.transpose(2, 1, 0).copy().transpose(2, 1, 0)):
        for dim, expected in want.items():
            for fed in (False, True):
                got = run_case(Case("layout", "ArgMax", (layout, ax(dim))), fed)
                np.testing.assert_array_equal(got, expected)
    got = run_case(Case("empty", "ArgMin", (np.zeros((2, 3, 0), F32), ax(1))), fed=True)
    assert got.shape == (2, 0) and got.dtype == I64
