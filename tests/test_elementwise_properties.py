"""Property tests of the elementwise family (ops/math.py) against references written
differently from the kernels: Python arithmetic on `.tolist()` values, one element at a time
(integers wrapped modulo 2**bits; floats computed in double precision and rounded once to the
dtype, which is the correctly rounded result for +, -, *, / and sqrt of float16, bfloat16 and
float32 values), over random dtypes, broadcastable shapes (0-d and empty included) and values
(NaN, infinities, -0.0, extreme integers), run through sessions (so on a simulated GPU in the
CI's GPU variant). Also `broadcast_shape` against np.broadcast_shapes, for known and partial
shapes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from _elementwise_helpers import ROWS, assert_close, cpu_types, ieee_div, np_dtype, tolerance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays, mutually_broadcastable_shapes

import minigraph as mg
from minigraph import InvalidArgumentError, TensorShape
from ops import math as M

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Per op (tests parametrized by op): enough examples to meet every dtype a few times.
PER_OP = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- running many examples: one graph and session per (op, dtypes, attrs) ---------------------

_SESSIONS: dict[Any, Any] = {}


def run(op_type: str, *values: np.ndarray, **attrs: Any) -> np.ndarray:
    key = (op_type, tuple(v.dtype for v in values), tuple(sorted(attrs.items())))
    entry = _SESSIONS.get(key)
    if entry is None:
        scope = mg.Scope.new_root_scope()
        holders = [mg.Placeholder(scope, mg.as_dtype(v.dtype)) for v in values]
        node = getattr(M, op_type)(scope, *holders, **attrs)
        session = mg.Session(scope, mg.SessionConfig(check_kernel_outputs=True))
        entry = _SESSIONS[key] = (session, holders, node)
    session, holders, node = entry
    return session.run(node, dict(zip(holders, values)))


@pytest.fixture(scope="module", autouse=True)
def _close_sessions():
    yield
    for session, _, _ in _SESSIONS.values():
        session.close()
    _SESSIONS.clear()


# -- values ------------------------------------------------------------------------------------

_FLOAT_WIDTH = {"float16": 16, "float32": 32, "float64": 64, "bfloat16": 32}


def values(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `dtype` whose elements cover the dtype's range and special values."""
    t = np_dtype(dtype)
    if dtype == "bool":
        return arrays(np.bool_, shape)
    if t.kind in "iu":
        info = np.iinfo(t)
        ints = st.one_of(
            st.integers(int(info.min), int(info.max)),
            st.sampled_from([int(info.min), int(info.max), 0, 1, -1 if t.kind == "i" else 2]),
        )
        return arrays(t, shape, elements=ints)
    if t.kind == "c":
        width = 64 if t == np.complex64 else 128
        return arrays(t, shape, elements=st.complex_numbers(width=width))
    width = _FLOAT_WIDTH[dtype]
    floats = arrays(np.dtype(f"float{width}"), shape, elements=st.floats(width=width))
    if dtype == "bfloat16":
        return floats.map(lambda a: a.astype(t))
    return floats


def real_types(op_type: str) -> list[str]:
    """The op's CPU dtypes but complex and string (tested on their own below)."""
    return [t for t in cpu_types(op_type) if not t.startswith("complex") and t != "string"]


@st.composite
def operands(draw: Any, op: str, arity: int = 2) -> list[np.ndarray]:
    dtype = draw(st.sampled_from(real_types(op)))
    if arity == 1:
        shape = draw(st.sampled_from([(), (0,), (3,), (2, 3), (1, 0, 2)]))
        return [draw(values(dtype, shape))]
    shapes = draw(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3))
    return [draw(values(dtype, s)) for s in shapes.input_shapes]


def elementwise(fn: Any, dtype: np.dtype, *arrays_: np.ndarray) -> np.ndarray:
    """`fn` applied to broadcast elements as Python values; results rounded to `dtype` once
    (integers wrapped)."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays_))
    flats = [np.broadcast_to(a, shape).reshape(-1).tolist() for a in arrays_]
    results = [fn(*items) for items in zip(*flats)]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        span = 1 << info.bits
        wrapped = [(int(v) - info.min) % span + info.min for v in results]
        return np.array(wrapped, dtype=dtype).reshape(shape)  # (np.array would go via float64)
    if dtype.kind in "b":
        return np.array(results, dtype=dtype).reshape(shape)
    with np.errstate(all="ignore"):
        return np.array(results, dtype=np.float64).astype(dtype).reshape(shape)


def rounded(value: float, dtype: np.dtype) -> float:
    """A double rounded to `dtype` and back (what an operation in that dtype leaves)."""
    with np.errstate(all="ignore"):
        return float(np.array(value, np.float64).astype(dtype))


# -- binary references -----------------------------------------------------------------------


def _max(a: Any, b: Any) -> Any:
    if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
        return math.nan
    return a if a >= b else b


def _min(a: Any, b: Any) -> Any:
    if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
        return math.nan
    return a if a <= b else b


def _trunc_div(a: Any, b: Any) -> Any:
    if isinstance(a, int):
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return ieee_div(a, b)


def _floor_div(dtype: np.dtype) -> Any:
    def ref(a: Any, b: Any) -> Any:
        if isinstance(a, int):
            return a // b
        q = rounded(ieee_div(a, b), dtype)
        return q if math.isnan(q) or math.isinf(q) else float(math.floor(q))

    return ref


def _floor_mod(dtype: np.dtype) -> Any:
    def ref(a: Any, b: Any) -> Any:
        if isinstance(a, int):
            return a % b
        try:
            m = math.fmod(a, b)
        except ValueError:  # fmod(inf, b), fmod(a, 0): NaN in C
            return math.nan
        if m != 0 and (b < 0) != (m < 0):
            m = rounded(m + b, dtype)
        return m

    return ref


def _squared_difference(dtype: np.dtype) -> Any:
    def ref(a: Any, b: Any) -> Any:
        if isinstance(a, int):
            return (a - b) * (a - b)
        d = rounded(a - b, dtype)
        return d * d

    return ref


def _arith(fn: Any) -> Any:
    """An IEEE-safe float operation (Python raises OverflowError where IEEE gives inf)."""

    def ref(a: Any, b: Any) -> Any:
        try:
            return fn(a, b)
        except OverflowError:
            return math.copysign(math.inf, fn(math.copysign(1.0, a), math.copysign(1.0, b)))

    return ref


def binary_reference(op: str, dtype: np.dtype) -> Any:
    return {
        "AddV2": lambda a, b: a + b,
        "Sub": lambda a, b: a - b,
        "Mul": _arith(lambda a, b: a * b),
        "RealDiv": ieee_div,
        "Div": _trunc_div,
        "FloorDiv": _floor_div(dtype),
        "FloorMod": _floor_mod(dtype),
        "Maximum": _max,
        "Minimum": _min,
        "SquaredDifference": _squared_difference(dtype),
        "Less": lambda a, b: a < b,
        "LessEqual": lambda a, b: a <= b,
        "Greater": lambda a, b: a > b,
        "GreaterEqual": lambda a, b: a >= b,
        "Equal": lambda a, b: a == b,
        "NotEqual": lambda a, b: a != b,
        "LogicalAnd": lambda a, b: a and b,
        "LogicalOr": lambda a, b: a or b,
    }[op]


BINARY = [
    "AddV2", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "FloorMod", "Maximum", "Minimum",
    "SquaredDifference", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
    "LogicalAnd", "LogicalOr",
]  # fmt: skip


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal values, NaN as NaN; a zero's sign is compared where the op defines it."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    if got.dtype.kind == "f" or got.dtype == np_dtype("bfloat16"):
        g, w = got.astype(np.float64), want.astype(np.float64)
        nan = np.isnan(w)
        assert np.array_equal(np.isnan(g), nan), (got, want)
        assert np.array_equal(g[~nan], w[~nan]), (got, want)
    else:
        assert got.tolist() == want.tolist(), (got, want)


@pytest.mark.parametrize("op", BINARY)
@PER_OP
@given(data=st.data())
def test_binary_ops_match_python_arithmetic(op, data):
    x, y = data.draw(operands(op))
    if op in ("Div", "FloorDiv", "FloorMod") and x.dtype.kind in "iu":
        y = np.where(y == 0, y.dtype.type(1), y)  # division by zero: tests/test_elementwise_errors
    row = ROWS[op]
    want_dtype = np.dtype(bool) if row.boolean else x.dtype
    want = elementwise(binary_reference(op, x.dtype), want_dtype, x, y)
    got = run(op, x, y)
    if op in ("Maximum", "Minimum"):
        # The sign of a zero picked between -0.0 and 0.0 is unspecified (as in TF).
        got, want = got + got.dtype.type(0), want + want.dtype.type(0)
    _same(got, want)


@SETTINGS
@given(st.data())
def test_pow_matches_python_powers(data):
    dtype = data.draw(st.sampled_from(real_types("Pow")))
    t = np_dtype(dtype)
    shapes = data.draw(mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    if t.kind == "i":
        x = data.draw(values(dtype, shapes.input_shapes[0]))
        y = data.draw(arrays(t, shapes.input_shapes[1], elements=st.integers(0, 70)))
        want = elementwise(lambda a, b: a**b, t, x, y)  # 0 ** 0 is 1; overflow wraps
        _same(run("Pow", x, y), want)
        return
    width = _FLOAT_WIDTH[dtype]
    wide = np.dtype(f"float{width}")
    bases = st.floats(0.0, 40.0, width=width)
    exponents = st.floats(-4.0, 4.0, width=width)
    x = data.draw(arrays(wide, shapes.input_shapes[0], elements=bases)).astype(t)
    y = data.draw(arrays(wide, shapes.input_shapes[1], elements=exponents)).astype(t)

    def power(a: float, b: float) -> float:
        try:
            return math.pow(a, b)
        except (OverflowError, ZeroDivisionError, ValueError):
            return math.inf

    want = elementwise(power, t, x, y)
    assert_close(run("Pow", x, y), want, rtol=tolerance(t), atol=float(np.finfo(np.float16).tiny))


@SETTINGS
@given(st.sampled_from(list(mg.dtypes.ALL_DTYPES)), st.data())
def test_equality_takes_every_dtype(dtype, data):
    shapes = data.draw(mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    if dtype.is_string:
        words = st.sampled_from([b"", b"a", b"b\x00"])
        x, y = (
            np.array(data.draw(st.lists(words, min_size=math.prod(s), max_size=math.prod(s))),
                     dtype=object).reshape(s)
            for s in shapes.input_shapes
        )  # fmt: skip
    else:
        x, y = (data.draw(values(dtype.name, s)) for s in shapes.input_shapes)
    for op in ("Equal", "NotEqual"):
        want = elementwise(binary_reference(op, x.dtype), np.dtype(bool), x, y)
        _same(run(op, x, y), want)


# -- unary references ------------------------------------------------------------------------


def _sign(a: Any) -> Any:
    if isinstance(a, float) and math.isnan(a):
        return math.nan
    return (a > 0) - (a < 0)


def _relu(a: Any) -> Any:
    return 0 if a < 0 else a  # NaN and -0.0 are kept


def _relu6(a: Any) -> Any:
    r = _relu(a)
    return 6 if r > 6 else r


def _rounding(fn: Any) -> Any:
    def ref(a: Any) -> Any:
        if isinstance(a, int) or math.isnan(a) or math.isinf(a):
            return a
        return math.copysign(float(fn(a)), a)  # keeps -0.0 (and -0.4 rounds to -0.0)

    return ref


def _sqrt(a: float) -> float:
    if math.isnan(a) or a < 0:
        return math.nan
    return math.sqrt(a) if a != math.inf else math.inf


def _abs(a: Any) -> Any:
    return abs(a)


UNARY_EXACT = {
    "Neg": lambda a: -a,
    "Abs": _abs,
    "Sign": _sign,
    "Square": _arith(lambda a, b: a * b),
    "Sqrt": _sqrt,
    "Reciprocal": lambda a: ieee_div(1.0, a),
    "Floor": _rounding(math.floor),
    "Ceil": _rounding(math.ceil),
    "Round": _rounding(round),  # Python rounds half to even, as TF
    "Relu": _relu,
    "Relu6": _relu6,
    "LogicalNot": lambda a: not a,
}


@pytest.mark.parametrize("op", sorted(UNARY_EXACT))
@PER_OP
@given(data=st.data())
def test_unary_ops_match_python_arithmetic(op, data):
    (x,) = data.draw(operands(op, arity=1))
    fn = UNARY_EXACT[op]
    ref = (lambda a: fn(a, a)) if op == "Square" else fn
    want = elementwise(ref, np.dtype(bool) if op == "LogicalNot" else x.dtype, x)
    got = run(op, x)
    if op in ("Sign",):
        _same(got + got.dtype.type(0), want + want.dtype.type(0))  # Sign(-0.0) is 0.0 either way
        assert not np.signbit(got[got == 0]).any()
        return
    if op in ("Relu", "Relu6"):
        got, want = got + got.dtype.type(0), want + want.dtype.type(0)  # sign of 0: unspecified
    _same(got, want)
    if got.dtype.kind == "f":
        # Signs of zeros too: Neg(0.0) is -0.0, Ceil(-0.5) is -0.0, Round(-0.4) is -0.0.
        finite = np.isfinite(want.astype(np.float64))
        assert np.array_equal(np.signbit(got)[finite], np.signbit(want)[finite])


def _stable_sigmoid(a: float) -> float:
    if math.isnan(a):
        return a
    if a >= 0:
        return 1.0 / (1.0 + math.exp(-a))
    e = math.exp(a)
    return e / (1.0 + e)


def _softplus(a: float) -> float:
    if math.isnan(a) or a == math.inf:
        return a
    return max(a, 0.0) + math.log1p(math.exp(-abs(a)))


def _guard(fn: Any, below: float = -math.inf, at: float | None = None) -> Any:
    """fn with C's special values: NaN below the domain, `at` at its edge, inf for inf."""

    def ref(a: float) -> float:
        if math.isnan(a):
            return a
        if a < below:
            return math.nan
        if a == below and at is not None:
            return at
        try:
            return fn(a)
        except OverflowError:
            return math.inf
        except ValueError:
            return math.nan

    return ref


UNARY_APPROX = {
    "Exp": _guard(math.exp),
    "Log": _guard(lambda a: math.log(a) if a != math.inf else a, below=0.0, at=-math.inf),
    "Log1p": _guard(lambda a: math.log1p(a) if a != math.inf else a, below=-1.0, at=-math.inf),
    "Tanh": _guard(math.tanh),
    "Sigmoid": _stable_sigmoid,
    "Softplus": _softplus,
    "Elu": _guard(lambda a: math.expm1(a) if a < 0 else a),
    "Rsqrt": _guard(lambda a: math.copysign(math.inf, a) if a == 0 else 1 / math.sqrt(a)),
}


@pytest.mark.parametrize("op", sorted(UNARY_APPROX))
@PER_OP
@given(data=st.data())
def test_transcendental_ops_within_a_few_ulps_of_exact_values(op, data):
    (x,) = data.draw(operands(op, arity=1))
    t = x.dtype
    want = elementwise(UNARY_APPROX[op], t, x)
    got = run(op, x)
    # atol: results that underflow (TF flushes denormals; Elu's exp(x) - 1 near 0 cancels).
    eps = 2.0**-7 if t == np_dtype("bfloat16") else float(np.finfo(t).eps)
    atol = eps * 4 if op == "Elu" else float(np.finfo(np.float32).tiny) * 4
    if t == np_dtype("bfloat16"):
        atol = max(atol, 2.0**-120)
    assert_close(got, want, rtol=tolerance(t), atol=atol)


# -- complex numbers: Python's complex arithmetic, TF's quirks explicit ----------------------


@SETTINGS
@given(
    st.sampled_from(["complex64", "complex128"]),
    st.sampled_from(["AddV2", "Sub", "Mul", "SquaredDifference", "Neg", "Square", "Sign"]),
    st.data(),
)
def test_complex_arithmetic(dtype, op, data):
    t = np_dtype(dtype)
    parts = st.floats(-1e3, 1e3, width=32)
    x = data.draw(arrays(t, (4,), elements=st.builds(complex, parts, parts)))
    y = data.draw(arrays(t, (4,), elements=st.builds(complex, parts, parts)))
    inputs = (x,) if op in ("Neg", "Square", "Sign") else (x, y)

    def reference(a: complex, b: complex = 0j) -> complex:
        if op == "AddV2":
            return a + b
        if op == "Sub":
            return a - b
        if op == "Mul":
            return a * b
        if op == "SquaredDifference":
            d = a - b
            return d * d.conjugate()  # TF: (x - y) * conj(x - y), real
        if op == "Neg":
            return -a
        if op == "Square":
            return a * a
        return 0j if a == 0 else a / abs(a)

    want = np.array([reference(*v) for v in zip(*(i.tolist() for i in inputs))], t)
    assert_close(run(op, *inputs), want, rtol=tolerance(t), atol=tolerance(t))


# -- broadcast_shape ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 4), max_size=4),
    st.lists(st.integers(0, 4), max_size=4),
)
def test_broadcast_shape_of_known_shapes_is_numpys(a, b):
    try:
        want = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        with pytest.raises(InvalidArgumentError, match="Dimensions must be equal, but are"):
            M.broadcast_shape(TensorShape(a), TensorShape(b))
        return
    assert M.broadcast_shape(TensorShape(a), TensorShape(b)) == list(want)


@st.composite
def partial_pair(draw: Any) -> tuple[list[int], list[int], list[Any], list[Any]]:
    """Two known shapes and partial versions of them (some dims unknown)."""
    a = draw(st.lists(st.integers(0, 3), max_size=4))
    b = draw(st.lists(st.integers(0, 3), max_size=4))
    pa = [None if draw(st.booleans()) else d for d in a]
    pb = [None if draw(st.booleans()) else d for d in b]
    return a, b, pa, pb


@settings(max_examples=300, deadline=None)
@given(partial_pair(), st.lists(st.lists(st.integers(0, 3), min_size=8, max_size=8), max_size=6))
def test_broadcast_shape_of_partial_shapes_holds_for_every_completion(pair, fills):
    a, b, pa, pb = pair
    try:
        got = M.broadcast_shape(TensorShape(pa), TensorShape(pb))
    except InvalidArgumentError:
        # Known dims already conflict: no completion broadcasts, the true shapes included.
        with pytest.raises(ValueError):
            np.broadcast_shapes(tuple(a), tuple(b))
        return
    assert got.rank == max(len(pa), len(pb))
    # Every completion of the unknown dims that broadcasts gives a shape compatible with `got`
    # (the true one first, then random ones).
    completions = [(a, b)]
    for fill in fills:
        it = iter(fill)
        completions.append(
            ([d if d is not None else next(it) for d in pa],
             [d if d is not None else next(it) for d in pb])
        )  # fmt: skip
    for ca, cb in completions:
        try:
            full = np.broadcast_shapes(tuple(ca), tuple(cb))
        except ValueError:
            continue
        assert got.is_compatible_with(list(full)), (pa, pb, got, full)
    # Known where both inputs determine it: a dim known on one side and 1 or equal on the other.
    assert M.broadcast_shape(TensorShape(None), TensorShape(pb)).rank is None
    assert M.broadcast_shape(TensorShape(pa), TensorShape(None)).rank is None


def test_broadcast_shape_examples():
    B = M.broadcast_shape
    S = TensorShape
    assert B(S([None, 3]), S([3])) == [None, 3]
    assert B(S([None]), S([4])) == [4]  # the unknown dim must be 1 or 4
    assert B(S([None]), S([1])) == [None]
    assert B(S([None]), S([None])) == [None]
    assert B(S([2, 1, None]), S([5, 1])) == [2, 5, None]
    assert B(S([]), S([0, 2])) == [0, 2]
    assert B(S(None), S([3])).rank is None
    with pytest.raises(InvalidArgumentError, match="but are 3 and 4"):
        B(S([None, 3]), S([2, 4]))
