"""Property tests of the reductions (ops/reduction.py) against references written as explicit
loops over every element (Python integers, wrapped to the dtype's width; Python's max/min with
NaN propagated; TF's ArgMax/ArgMin reducer as a scan from index 0 holding the lowest value):
random shapes, axes (negative, in any order, empty), keep_dims, every dtype each CPU kernel
registers, on constant and fed inputs. Under MINIGRAPH_TEST_SIMULATED_GPUS=2 the same checks
run the GPU kernels (bfloat16 stays on the CPU)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _reduction_nn_helpers import BF16, Case, kernel_dtypes, run_case
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph as mg

REDUCTIONS = ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any")


def dtypes_of(op: str) -> list[np.dtype]:
    if op in ("All", "Any"):
        return [np.dtype(bool)]
    return [d.np_dtype for d in kernel_dtypes(op)]


def _floating(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == BF16


def _values(dtype: np.dtype, shape: tuple, seed: int, op: str) -> np.ndarray:
    """Small values every dtype holds exactly, whose sums stay exact in float16; products of
    powers of two (exact until they overflow); NaN and infinities for Max/Min."""
    rng = np.random.default_rng(seed)
    size = math.prod(shape)
    if dtype.kind == "b":
        return (rng.random(size) < 0.6).reshape(shape)
    if op == "Prod":
        pool = [1, 2, -1, -2] if dtype.kind in "ifc" or dtype == BF16 else [1, 2, 3]
    else:
        pool = list(range(-3, 4)) if dtype.kind in "ifc" or dtype == BF16 else list(range(7))
    values = np.array(rng.choice(pool, size), dtype=np.float64)
    if op in ("Max", "Min") and _floating(dtype):
        special = rng.random(size)
        values[special < 0.08] = np.nan
        values[(special >= 0.08) & (special < 0.14)] = np.inf
        values[(special >= 0.14) & (special < 0.2)] = -np.inf
    if dtype.kind == "c":
        imag = rng.choice([0, 1, -1] if op == "Prod" else pool, size)
        return (values + 1j * imag).astype(dtype).reshape(shape)
    return values.astype(dtype).reshape(shape)


def _wrap(value: int, dtype: np.dtype) -> int:
    info = np.iinfo(dtype)
    span = 1 << info.bits
    return (value - info.min) % span + info.min


def _python(v: np.generic) -> object:
    """A numpy scalar as a Python number (floats through float64: exact for these dtypes)."""
    if v.dtype.kind in "iu":
        return int(v)
    if v.dtype.kind == "b":
        return bool(v)
    if v.dtype.kind == "c":
        return complex(v)
    return float(np.float64(v))


def reference(op: str, x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    """op over `axes` of x, by a loop over every element, grouped by output position."""
    dtype = x.dtype
    groups: dict[tuple, list] = {}
    out_index = [k for k in range(x.ndim) if k not in axes]
    for idx in itertools.product(*(range(d) for d in x.shape)):
        groups.setdefault(tuple(idx[k] for k in out_index), []).append(_python(x[idx]))
    out_shape = tuple(d for k, d in enumerate(x.shape) if k not in axes)
    out = np.zeros(out_shape, dtype)
    for key in itertools.product(*(range(d) for d in out_shape)):
        out[key] = _combine(op, groups.get(key, []), dtype)
    if keep:
        out = out.reshape(tuple(1 if k in axes else d for k, d in enumerate(x.shape)))
    return out


def _combine(op: str, values: list, dtype: np.dtype) -> object:
    integer = dtype.kind in "iu"
    if op == "All":
        return all(values)
    if op == "Any":
        return any(values)
    if op in ("Sum", "Mean"):
        total = sum(values, start=0)
        if op == "Sum":
            return _wrap(total, dtype) if integer else total
        if not values:
            return np.nan if _floating(dtype) else 0
        if integer:
            quotient = abs(total) // len(values)  # C's division: towards zero
            return quotient if total >= 0 else -quotient
        if dtype.kind == "c":
            return total / len(values)
        return dtype.type(total) / dtype.type(len(values))  # the count in T, as in TF
    if op == "Prod":
        product = math.prod(values) if dtype.kind != "c" else np.prod(np.array(values))
        return _wrap(product, dtype) if integer else product
    if any(isinstance(v, float) and math.isnan(v) for v in values):
        return np.nan
    if not values:  # TF's identities
        if integer:
            info = np.iinfo(dtype)
            return info.min if op == "Max" else info.max
        return -np.inf if op == "Max" else np.inf
    return max(values) if op == "Max" else min(values)


@st.composite
def reduction_cases(draw, op: str):
    dtype = draw(st.sampled_from(dtypes_of(op)))
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
    axes = draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank))
    axes = [a if draw(st.booleans()) else a - rank for a in axes] if rank else []
    scalar_axis = len(axes) == 1 and draw(st.booleans())
    axis = np.array(axes[0] if scalar_axis else axes, draw(st.sampled_from([np.int32, np.int64])))
    x = _values(dtype, shape, draw(st.integers(0, 2**16)), op)
    return x, axis, draw(st.booleans())


def _check(op: str, x: np.ndarray, axis: np.ndarray, keep: bool, fed: bool) -> None:
    case = Case("p", op, (x, axis), {"keep_dims": keep})
    got = run_case(case, fed)
    rank = x.ndim
    axes = tuple(sorted({int(a) % rank for a in axis.reshape(-1)})) if rank else ()
    want = reference(op, x, axes, keep)
    assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == want.shape
    if op == "Prod" and x.dtype.kind == "c":
        np.testing.assert_allclose(got, want, rtol=1e-5)
    elif _floating(x.dtype) or x.dtype.kind == "c":
        # Exact: the values are small integers (sums exact even in float16) or powers of two.
        np.testing.assert_array_equal(got.astype(np.complex128), want.astype(np.complex128))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", REDUCTIONS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_reductions_match_the_loop_reference(op, data):
    x, axis, keep = data.draw(reduction_cases(op))
    _check(op, x, axis, keep, fed=data.draw(st.booleans()))


@pytest.mark.parametrize(
    "op, dtype",
    [(op, d) for op in REDUCTIONS for d in dtypes_of(op)],
    ids=lambda v: v if isinstance(v, str) else np.dtype(v).name,
)
def test_every_registered_dtype(op, dtype):
    # Every dtype each kernel registers, over a shape with a reduced and a kept dim, both ways.
    x = _values(np.dtype(dtype), (3, 4, 2), seed=7, op=op)
    for axis, keep in ((np.array([1], np.int32), False), (np.array([0, -1], np.int64), True)):
        for fed in (False, True):
            _check(op, x, axis, keep, fed)


# -- ArgMax / ArgMin -------------------------------------------------------------------------


def tf_arg_reference(op: str, x: np.ndarray, axis: int) -> np.ndarray:
    """TF's Eigen ArgMax/ArgMin reducer as a scan: start at index 0 holding the lowest (ArgMax)
    or highest finite value, move only to a strictly better one (NaN never is)."""
    dtype = x.dtype
    if dtype.kind == "b":
        start = op == "ArgMin"
    elif dtype.kind in "iu":
        start = np.iinfo(dtype).min if op == "ArgMax" else np.iinfo(dtype).max
    else:
        info = np.finfo(np.float32) if dtype == BF16 else np.finfo(dtype)
        big = float(info.max)
        if dtype == BF16:
            big = float(np.array(3.3895313892515355e38, BF16))
        start = -big if op == "ArgMax" else big
    moved = np.moveaxis(x, axis, -1)
    out = np.zeros(moved.shape[:-1], np.int64)
    for idx in itertools.product(*(range(d) for d in moved.shape[:-1])):
        best, where = start, 0
        for i in range(moved.shape[-1]):
            v = _python(moved[idx + (i,)])
            if (v > best) if op == "ArgMax" else (v < best):
                best, where = v, i
        out[idx] = where
    return out


def _arg_values(dtype: np.dtype, shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = [info.min, info.max, 0, 1, 2]
        return rng.choice(np.array(pool, dtype), shape)
    if dtype == BF16:
        finite = 3.3895313892515355e38
    else:
        finite = float(np.finfo(dtype).max)
    pool = np.array([np.nan, np.inf, -np.inf, finite, -finite, 0.0, 1.0, -1.0, 1.0])
    return rng.choice(pool, shape).astype(dtype)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_arg_reductions_match_tfs_scan(op, data):
    dtype = data.draw(st.sampled_from(dtypes_of(op)))
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dim = data.draw(st.integers(-rank, rank - 1))
    outputs = [mg.int32, mg.int64] + ([mg.int16, mg.uint16] if op == "ArgMax" else [])
    output_type = data.draw(st.sampled_from(outputs))
    x = _arg_values(np.dtype(dtype), shape, data.draw(st.integers(0, 2**16)))
    case = Case("p", op, (x, np.array(dim, np.int32)), {"output_type": output_type})
    got = run_case(case, fed=data.draw(st.booleans()))
    want = tf_arg_reference(op, x, dim % rank)
    assert got.dtype == output_type.np_dtype
    np.testing.assert_array_equal(got, want.astype(output_type.np_dtype))


@pytest.mark.parametrize(
    "op, dtype",
    [(op, d) for op in ("ArgMax", "ArgMin") for d in dtypes_of(op)],
    ids=lambda v: v if isinstance(v, str) else np.dtype(v).name,
)
def test_arg_every_registered_dtype(op, dtype):
    x = _arg_values(np.dtype(dtype), (4, 5, 3), seed=3)
    for dim in (0, 1, -1):
        for fed in (False, True):
            got = run_case(Case("p", op, (x, np.array(dim, np.int64))), fed)
            np.testing.assert_array_equal(got, tf_arg_reference(op, x, dim % 3))
