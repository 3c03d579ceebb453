"""A numeric gradient checker, as TF's `tf.test.compute_gradient` (gradient_checker_v2.py):
the Jacobian that `minigraph.gradients` builds (theoretical) beside one from central
differences (numerical), for a test of every gradient rule.

    from minigraph.testing import assert_gradients_close

    def test_square_grad():
        assert_gradients_close(lambda s, x: ops.Square(s, x), [np.array([1.0, -2.0])])

`f(scope, *xs)` builds the function under test from placeholders of the given values' dtypes
and shapes (a scope first, as minigraph's builders take one; the scope is also the default, so
tensor operators work) and returns one tensor. Differences from TF's checker:

- The numerical Jacobian is computed in float64 (complex128 for complex values): `f` is built a
  second time over float64 placeholders and differenced there (central differences with steps
  delta and delta/2, Richardson-extrapolated), so a float32 or float16 rule is checked against a
  reference much more precise than itself. When `f` cannot be built in
  float64 (it mixes in constants of its own dtype, or uses an op without float64), it is
  differenced in the values' own dtype, by the perturbation actually representable there, and
  `assert_gradients_close` loosens its default tolerances accordingly.
- Both Jacobians are float64 arrays of shape [y size, x size] (a complex y or x counts twice,
  real and imaginary parts, as in TF). Sparse gradients (IndexedSlices) are densified, their
  repeated indices added.
- Arguments other than those differentiated (indices, axes) are closed over by `f`, since
  only float and complex values have gradients.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.builder import as_output
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError, OpError
from minigraph.framework_ops import Placeholder
from minigraph.gradients import TRAINABLE_DTYPES, gradients
from minigraph.graph import Output
from minigraph.indexed_slices import IndexedSlicesValue
from minigraph.scope import Scope
from minigraph.session import Session, SessionConfig

__all__ = [
    "compute_gradient",
    "compute_gradient_error",
    "max_error",
    "assert_gradients_close",
    "DEFAULT_DELTA",
]

#: The default perturbation: exactly representable in binary floating point, which keeps
#: rounding noise out of the differences (TF's choice).
DEFAULT_DELTA = 1.0 / 1024

# Default (rtol, atol) of assert_gradients_close by the precision of what is compared: the
# theoretical Jacobian's dtypes (the values' and f's output's), and the dtype the numerical one
# was differenced in (float64 unless f could not be built so).
_THEORETICAL_TOLERANCE = {
    "float64": (1e-5, 1e-6), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
}  # fmt: skip
_NUMERIC_TOLERANCE = {
    "float64": (1e-5, 1e-6), "float32": (2e-3, 2e-3), "float16": (5e-2, 5e-2),
    "bfloat16": (1e-1, 1e-1),
}  # fmt: skip

_REAL = {
    "complex64": dtypes.float32, "complex128": dtypes.float64,
}  # fmt: skip


def _real(dtype: DType) -> DType:
    return _REAL.get(dtype.name, dtype)


class _Jacobians:
    """The outcome of one check: per x, the theoretical and numerical Jacobians, and the dtype
    the numerical ones were differenced in."""

    def __init__(
        self,
        theoretical: tuple[np.ndarray, ...],
        numerical: tuple[np.ndarray, ...],
        x_dtypes: list[DType],
        y_dtype: DType,
        numeric_dtype: DType | None,
    ):
        self.theoretical = theoretical
        self.numerical = numerical
        self.x_dtypes = x_dtypes
        self.y_dtype = y_dtype
        self.numeric_dtype = numeric_dtype  # None: float64; else the values' own dtypes


def compute_gradient(
    f: Callable[..., Any], x: Sequence[Any], delta: float | None = None
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """The theoretical and numerical Jacobians of `y = f(scope, *xs)` at `x`, as TF's
    `tf.test.compute_gradient(f, x, delta)`.

    Args:
        f: `f(scope, *xs) -> Output` (or a single-output builder): builds y from placeholders
            of `x`'s dtypes and shapes, in `scope` (also the default scope, for operators).
        x: a list or tuple of the values of the arguments (numpy arrays, Python scalars or
            nested lists; Python floats are float32, as in TF). Each must be of a float or
            complex dtype.
        delta: the perturbation of the central differences (default 1/1024).

    Returns:
        (theoretical, numerical): two tuples with one float64 array per argument, of shape
        [y size, argument size] (complex parts count twice).

    Raises:
        InvalidArgumentError: `x` is not a list or tuple, a value or y has no gradients (not a
            float or complex dtype), `f` does not return a tensor, or a gradient of an empty y
            is not zeros of its argument's shape.
    """
    result = _compute(f, x, delta)
    return result.theoretical, result.numerical


def max_error(grad1: Sequence[np.ndarray], grad2: Sequence[np.ndarray]) -> float:
    """The largest elementwise absolute difference between two lists of Jacobians (TF's
    `gradient_checker_v2.max_error`); 0 for empty ones."""
    error = 0.0
    for a, b in zip(grad1, grad2):
        a, b = np.asarray(a), np.asarray(b)
        if a.size or b.size:
            error = max(error, float(np.max(np.abs(a - b))))
    return error


def compute_gradient_error(
    f: Callable[..., Any], x: Sequence[Any], delta: float | None = None
) -> float:
    """The largest absolute difference between the theoretical and numerical Jacobians of
    `f` at `x` over all its arguments (TF1's `compute_gradient_error`)."""
    theoretical, numerical = compute_gradient(f, x, delta)
    return max_error(theoretical, numerical)


def assert_gradients_close(
    f: Callable[..., Any],
    x: Sequence[Any],
    *,
    delta: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Asserts that the gradient minigraph builds for `f(scope, *xs)` at `x` matches central
    differences: `|theoretical - numerical| <= atol + rtol * |numerical|` elementwise, for
    every argument. Returns the Jacobians (as `compute_gradient`).

    The default tolerances follow the least precise of the arguments' and y's dtypes, and
    the dtype the numerical Jacobian was differenced in (float64 when `f` builds in float64):
    float64 rtol 1e-5 / atol 1e-6, float32 1e-4 / 1e-5, float16 1e-2, bfloat16 5e-2; a
    float32 numerical Jacobian 2e-3, float16 5e-2, bfloat16 1e-1.

    Raises:
        AssertionError: the Jacobians differ; the message names the argument, the worst
            element (y index, argument index), both values and the tolerances.
    """
    result = _compute(f, x, delta)
    default_rtol, default_atol = _tolerance(result)
    rtol = default_rtol if rtol is None else float(rtol)
    atol = default_atol if atol is None else float(atol)
    for i, (t, n) in enumerate(zip(result.theoretical, result.numerical)):
        if not t.size:
            continue
        excess = np.abs(t - n) - (atol + rtol * np.abs(n))
        bad = ~(excess <= 0)  # NaN counts as a mismatch
        if bad.any():
            worst = np.where(bad, np.nan_to_num(excess, nan=np.inf), -np.inf)
            row, col = np.unravel_index(int(np.argmax(worst)), t.shape)
            raise AssertionError(
                f"the gradient with respect to argument {i} ({result.x_dtypes[i].name}) does not "
                f"match central differences: {int(bad.sum())} of {t.size} Jacobian elements "
                f"differ; the worst, d y[{row}] / d x{i}[{col}]: theoretical "
                f"{float(t[row, col])!r}, numerical {float(n[row, col])!r} (rtol={rtol}, "
                f"atol={atol}; max error "
                f"{max_error([t], [n])!r}).\ntheoretical =\n{_show(t)}\nnumerical =\n{_show(n)}"
            )
    return result.theoretical, result.numerical


def _show(jacobian: np.ndarray) -> str:
    if jacobian.size > 400:
        return f"<{jacobian.shape[0]} x {jacobian.shape[1]} Jacobian>"
    return np.array2string(jacobian, precision=6, suppress_small=True)


def _tolerance(result: _Jacobians) -> tuple[float, float]:
    names = {_real(d).name for d in [*result.x_dtypes, result.y_dtype]}
    tolerances = [_THEORETICAL_TOLERANCE[n] for n in names]
    if result.numeric_dtype is not None:
        tolerances += [_NUMERIC_TOLERANCE[_real(d).name] for d in result.x_dtypes]
        tolerances.append(_NUMERIC_TOLERANCE[_real(result.y_dtype).name])
    return max(t[0] for t in tolerances), max(t[1] for t in tolerances)


# -- the computation ---------------------------------------------------------------------------


def _values(x: Any) -> list[np.ndarray]:
    if not isinstance(x, (list, tuple)):
        raise InvalidArgumentError(
            "`x` must be a list or tuple of values convertible to a Tensor (arguments to `f`), "
            f"not a {type(x).__name__}"
        )
    values = []
    for i, value in enumerate(x):
        array = np.array(dtypes.convert_to_array(value))  # a private, writable copy
        dtype = dtypes.as_dtype(array.dtype)
        if dtype not in TRAINABLE_DTYPES:
            raise InvalidArgumentError(
                f"Cannot compute gradient for unsupported type {dtype.name} of argument {i}: "
                "only float and complex values have gradients (close over other arguments in f)"
            )
        values.append(array)
    return values


def _build(f: Callable[..., Any], scope: Scope, placeholders: list[Output]) -> Output:
    with scope.as_default():
        built = f(scope, *placeholders)
    y = as_output(built) if not isinstance(built, (list, tuple)) else None
    if y is None:
        raise InvalidArgumentError(
            f"f must return one tensor (an Output or a single-output builder); got "
            f"{type(built).__name__}"
        )
    return y


def _compute(f: Callable[..., Any], x: Any, delta: float | None) -> _Jacobians:
    if not callable(f):
        raise InvalidArgumentError(f"f must be callable: f(scope, *xs); got {type(f).__name__}")
    delta = DEFAULT_DELTA if delta is None else float(delta)
    if not delta > 0 or not np.isfinite(delta):
        raise InvalidArgumentError(f"delta must be a positive finite number; got {delta}")
    xs = _values(x)
    x_dtypes = [dtypes.as_dtype(a.dtype) for a in xs]
    root = Scope.new_root_scope()
    phs = [
        Placeholder(root.with_op_name(f"x{i}"), d, a.shape).output
        for i, (d, a) in enumerate(zip(x_dtypes, xs))
    ]
    y = _build(f, root, phs)
    if y.dtype not in TRAINABLE_DTYPES:
        raise InvalidArgumentError(
            f"Cannot compute gradient for unsupported type {y.dtype.name} of y ({y.name!r})"
        )
    config = SessionConfig(intra_op_threads=1)
    with Session(root, config) as session:
        feeds = dict(zip(phs, xs))
        y_shape = np.shape(session.run(y, feeds))
        dy = Placeholder(root.with_op_name("dy"), y.dtype, y_shape).output
        grads = gradients(y, phs, grad_ys=dy)
        theoretical = _theoretical(session, grads, feeds, dy, y_shape, y.dtype, xs)
        y64, phs64, numeric_dtype = _float64_twin(f, root, xs)
        if y64 is None:
            y64, phs64 = y, phs
        numerical = tuple(
            _numerical(session, y64, phs64, xs, i, y_shape, y.dtype, delta, numeric_dtype)
            for i in range(len(xs))
        )
    return _Jacobians(theoretical, numerical, x_dtypes, y.dtype, numeric_dtype)


def _float64_twin(
    f: Callable[..., Any], root: Scope, xs: list[np.ndarray]
) -> tuple[Output | None, list[Output], DType | None]:
    """f built again over float64 (complex128) placeholders: (y, placeholders, None); or
    (None, [], the values' dtype) when it cannot be."""
    graph = root.graph
    wide = [dtypes.complex128 if a.dtype.kind == "c" else dtypes.float64 for a in xs]
    try:
        with graph.transaction():
            phs = [
                Placeholder(root.with_op_name(f"x{i}_float64"), d, a.shape).output
                for i, (d, a) in enumerate(zip(wide, xs))
            ]
            y = _build(f, root, phs)
            if y.dtype not in TRAINABLE_DTYPES:
                raise InvalidArgumentError("not a float y")
    except (OpError, TypeError, ValueError):
        # f needs its own dtypes: difference in those instead.
        return None, [], dtypes.as_dtype(xs[0].dtype) if xs else None
    return y, phs, None


def _flat_real(array: np.ndarray) -> np.ndarray:
    """The elements of `array` as a flat float64 vector, a complex element as two reals."""
    array = np.ascontiguousarray(array)
    if array.dtype.kind == "c":
        return array.astype(np.complex128).reshape(-1).view(np.float64)
    return array.astype(np.float64).reshape(-1)


def _theoretical(
    session: Session,
    grads: list[Any],
    feeds: dict[Output, np.ndarray],
    dy: Output,
    y_shape: tuple[int, ...],
    y_dtype: DType,
    xs: list[np.ndarray],
) -> tuple[np.ndarray, ...]:
    """One run per element of y (real and imaginary parts apart): the gradient of that element
    with respect to every argument, as a row of each Jacobian."""
    y_size = int(np.prod(y_shape, dtype=np.int64)) * (2 if y_dtype.is_complex else 1)
    sizes = [a.size * (2 if a.dtype.kind == "c" else 1) for a in xs]
    jacobians = [np.zeros((y_size, n)) for n in sizes]
    dy_data = np.zeros(y_shape, dtype=y_dtype.np_dtype)
    flat = dy_data.reshape(-1).view(_real(y_dtype).np_dtype)
    fetched = [(i, g) for i, g in enumerate(grads) if g is not None]
    run_feeds = dict(feeds)
    run_feeds[dy] = dy_data
    if y_size == 0:
        # An empty y: its gradients must be zeros of their arguments' shapes (TF's check).
        for (i, _), value in zip(fetched, session.run([g for _, g in fetched], run_feeds)):
            dense = _dense(value, xs[i])
            if dense.shape != xs[i].shape:
                raise InvalidArgumentError(
                    f"Empty gradient has wrong shape: expected {xs[i].shape}, got {dense.shape}"
                )
            if np.any(dense):
                raise InvalidArgumentError("Empty tensor with nonzero gradients")
        return tuple(jacobians)
    targets = [g for _, g in fetched]
    for row in range(y_size):
        flat[row] = 1
        values = session.run(targets, run_feeds)
        flat[row] = 0
        for (i, _), value in zip(fetched, values):
            jacobians[i][row] = _flat_real(_dense(value, xs[i]))
    return tuple(jacobians)


def _dense(value: Any, x: np.ndarray) -> np.ndarray:
    """A fetched gradient as a dense array of `x`'s shape (an IndexedSlicesValue added up)."""
    if not isinstance(value, IndexedSlicesValue):
        return np.asarray(value)
    values = np.asarray(value.values)
    indices = np.asarray(value.indices).astype(np.int64).reshape(-1)
    rows = x.shape[0] if x.ndim else 0
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= rows):
        raise InvalidArgumentError(
            f"a sparse gradient has indices out of range for an argument of shape "
            f"{list(x.shape)}: {indices.tolist()}"
        )
    if value.dense_shape is not None and tuple(np.asarray(value.dense_shape).tolist()) != x.shape:
        raise InvalidArgumentError(
            f"a sparse gradient has dense_shape {np.asarray(value.dense_shape).tolist()} for an "
            f"argument of shape {list(x.shape)}"
        )
    dense = np.zeros(x.shape, dtype=np.result_type(values.dtype, np.float64))
    np.add.at(dense, indices, values.reshape((indices.size,) + x.shape[1:]))
    return dense


def _numerical(
    session: Session,
    y: Output,
    phs: list[Output],
    xs: list[np.ndarray],
    param: int,
    y_shape: tuple[int, ...],
    y_dtype: DType,
    delta: float,
    own_dtype: DType | None,
) -> np.ndarray:
    """Central differences of y in each element of argument `param`, in float64 unless
    `own_dtype` says f could only be built in the values' own dtypes.

    In float64, the differences with steps `delta` and `delta / 2` are combined by Richardson
    extrapolation, (4 D(delta/2) - D(delta)) / 3, which cancels the delta**2 term of the error
    (four runs per element): with delta = 1/1024, plain central differences are off by about
    delta**2 / 6 times the third derivative (2e-6 for exp(x**2) at x = 0.66), more than a
    float64 rule's tolerance; the extrapolated ones by about delta**4 / 480 times the fifth.
    In a narrow dtype rounding dominates, and the plain differences are used, by the steps
    actually representable there."""
    if own_dtype is None:
        values = [a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) for a in xs]
    else:
        values = [a.copy() for a in xs]
    x = values[param]
    x_flat = x.reshape(-1).view(_real(dtypes.as_dtype(x.dtype)).np_dtype)
    y_size = int(np.prod(y_shape, dtype=np.int64)) * (2 if y_dtype.is_complex else 1)
    jacobian = np.zeros((y_size, x_flat.size))
    feeds = dict(zip(phs, values))
    run = session.run
    step_type = x_flat.dtype.type

    def difference(col: int, h: float) -> np.ndarray:
        original = x_flat[col]
        x_flat[col] = original + step_type(h)
        up = x_flat[col]
        y_pos = _flat_real(run(y, feeds))
        x_flat[col] = original - step_type(h)
        down = x_flat[col]
        y_neg = _flat_real(run(y, feeds))
        x_flat[col] = original
        # The step actually taken: in a narrow dtype x +- h is rounded.
        step = float(up) - float(down)
        if step == 0:
            raise InvalidArgumentError(
                f"delta={delta} does not change argument {param}'s element {col} "
                f"({float(original)!r}) in {x.dtype}: f could not be built in float64, so pass "
                "a larger delta"
            )
        return (y_pos - y_neg) / step

    for col in range(x_flat.size):
        coarse = difference(col, delta)
        if own_dtype is None:
            jacobian[:, col] = (4.0 * difference(col, delta / 2) - coarse) / 3.0
        else:
            jacobian[:, col] = coarse
    return jacobian
