"""GraphDef interop cases: for every op the library registers, small concrete calls run both by
minigraph and by TensorFlow 2.21 (tests/test_interop_ops.py; TF's graphs and values are in
tests/data/tf_ops_<family>.pb/.npz, written by tests/data/make_tf_op_graphs.py from this table).

A `Case` is one node of op type `op` on concrete inputs: each input is a Placeholder fed with its
value (so the kernel, not constant folding, computes the result), or a Const when named in
`consts`; attrs are passed to minigraph's builder and to `tf.raw_ops.<op>` alike. Its nodes
live under the name scope `case.name` (`AddV2_int32/x`, `AddV2_int32/op`); the fetches are
every output of the `op` node (the node itself when it has none).

How values compare (`assert_same_value`): dtype and shape always; integers, bools and strings
exactly; floats bit for bit (NaN where NaN, the sign of zeros) unless the case allows `ulps`
units in the last place (of the result's magnitude), which it does only where TF's CPU kernel
legitimately rounds otherwise (Eigen's approximations of exp, log, tanh, ...; another
summation order). Cases whose TF value minigraph deliberately does not reproduce say why in
`deliberate` (values then unchecked, dtypes and shapes still); known bugs in `xfail` (a strict
xfail: the test goes green, and must then lose its mark, when fixed).

Ops TF does not have, which need no case, are in `MINIGRAPH_ONLY` with the reason; the table
must cover every other registered op (tests/test_interop_ops.py checks it through
`minigraph.registry.list_ops()`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import minigraph as mg
import ops  # noqa: F401 - registers the op library
from minigraph import registry

__all__ = [
    "Case",
    "CASES",
    "FAMILIES",
    "MINIGRAPH_ONLY",
    "PENDING",
    "Plan",
    "Var",
    "build_ours",
    "feed_values",
    "build_tf",
    "assert_same_value",
    "pack",
    "unpack",
    "tf_cpu_types",
]

DATA = Path(__file__).resolve().parent / "data"

#: Registered ops TensorFlow 2.21 does not have (no TF graph can hold them), with the reason.
MINIGRAPH_ONLY: dict[str, str] = {}

#: Registered ops with no case yet, with the reason (reported; the completeness test lists them).
PENDING: dict[str, str] = {}


@dataclass(frozen=True)
class Case:
    """One node of op type `op` on concrete inputs, as minigraph and TF run it."""

    op: str
    tag: str
    family: str
    inputs: Mapping[str, Any]  # arg name -> array, or a list of arrays for list args
    attrs: Mapping[str, Any]  # non-inferred attrs; dtypes by name ("int32")
    consts: frozenset[str] = frozenset()  # inputs built as Consts instead of fed Placeholders
    ulps: float = 0  # float tolerance, in units of the dtype's epsilon (0: bit for bit)
    error: tuple[str, str] | None = None  # (error class, regex both messages match) at run time
    xfail: str | None = None  # a known bug: how minigraph differs from TF (strict xfail)
    deliberate: str | None = None  # a deliberate difference: values not compared, dtypes are
    zero_sign: str | None = None  # why the sign of a zero result is not compared
    cpu_only: bool = False  # TF's CPU behaviour, which minigraph's GPU kernels do not share
    unknown_dims: bool = False  # Placeholders declare every dim unknown (rank known)
    feed: Any = None  # Placeholder cases: the value fed to the op's own output
    # Resource variables: name -> initial value (a VarHandleOp each, assigned first; "op" is
    # the op under test itself, a VarHandleOp), those left uninitialized, and those read after
    # the op ran (default: the initialized ones).
    variables: Mapping[str, np.ndarray] = field(default_factory=dict)
    uninitialized: frozenset[str] = frozenset()
    reads: tuple[str, ...] | None = None
    note: str = ""

    @property
    def name(self) -> str:
        """The name scope of the case's nodes (a valid TF node name)."""
        return f"{self.op}_{self.tag}"

    @property
    def id(self) -> str:
        return f"{self.op}/{self.tag}"

    @property
    def read_after(self) -> frozenset[str]:
        """The variables read once the op ran (the initialized ones, unless `reads` says)."""
        if self.reads is not None:
            return frozenset(self.reads)
        return frozenset(self.variables) - self.uninitialized


@dataclass(frozen=True)
class Var:
    """An input that is the handle of the case's variable `name` (a VarHandleOp)."""

    name: str


# -- values --------------------------------------------------------------------------------------

_SAMPLES = {
    # kind -> category -> 8 values (a [2, 4] array); ints fit int8, uints uint8.
    "any": {
        "float": [-2.5, -1.0, -0.5, 0.0, 0.25, 1.0, 1.5, 3.0],
        "int": [-7, -2, -1, 0, 1, 2, 3, 100],
        "uint": [0, 1, 2, 3, 5, 7, 100, 200],
        "complex": [1 + 2j, -0.5, -1j, 3 - 4j, 0j, 0.25 + 0.5j, -2 + 1j, 1.5 - 0.5j],
        "bool": [True, False, True, True, False, False, True, False],
        "string": [b"a", b"", b"bc", b"\xff\x00z", b"hello", b"a b", b"z", b"0"],
    },
    "other": {  # a second operand: some elements equal to "any"'s, in other places
        "float": [1.5, -1.0, 2.0, -0.5, 0.25, -3.0, 1.5, 0.5],
        "int": [3, -2, 5, 0, -1, 2, 3, -7],
        "uint": [3, 1, 5, 3, 2, 7, 9, 200],
        "complex": [1 + 2j, 2 - 1j, -1j, 0.5 + 0.5j, 1 + 0j, -1 - 1j, 0.5j, 1.5 - 0.5j],
        "bool": [True, True, False, True, False, True, False, False],
        "string": [b"a", b"b", b"bc", b"", b"hello", b"x", b"z", b"1"],
    },
    "positive": {
        "float": [0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 10.0],
        "int": [1, 2, 3, 4, 5, 7, 9, 100],
        "uint": [1, 2, 3, 4, 5, 7, 9, 200],
        "complex": [1 + 2j, 0.5, 2j, 3 - 4j, 1 + 1j, 0.25 + 0.5j, -2 + 1j, 1.5 - 0.5j],
    },
    "nonzero": {
        "float": [-2.5, -1.0, -0.5, 0.75, 0.25, 1.0, 1.5, 3.0],
        "int": [-7, -2, -1, 4, 1, 2, 3, 100],
        "uint": [4, 1, 2, 3, 5, 7, 100, 200],
        "complex": [1 + 2j, -0.5, -1j, 3 - 4j, 2 + 0j, 0.25 + 0.5j, -2 + 1j, 1.5 - 0.5j],
    },
    "divisor": {  # a [4] divisor row: signs both ways
        "float": [3.0, -2.0, 0.5, -4.0],
        "int": [3, -2, 1, -4],
        "uint": [3, 2, 1, 4],
        "complex": [1 + 1j, -2 + 0j, 0.5j, 3 - 4j],
    },
    "unit": {  # inside (-1, 1)
        "float": [-0.75, -0.5, -0.25, 0.0, 0.125, 0.25, 0.5, 0.875],
        "complex": [0.5j, -0.5, 0.25 + 0.25j, 0j, 0.125, -0.25j, 0.5 - 0.25j, 0.75],
    },
    "halves": {  # Round, Floor, Ceil: ties both ways
        "float": [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.75, -3.25],
        "int": [-7, -2, -1, 0, 1, 2, 3, 100],
        "complex": [1.5 + 2.5j, -0.5, -1.5j, 3.7 - 4.2j, 0j, 0.5 + 0.5j, -2.5 + 1j, 1.5 - 0.5j],
    },
    "relu6": {
        "float": [-2.5, -1.0, 0.0, 0.5, 3.0, 6.0, 6.5, 100.0],
        "int": [-7, -2, 0, 1, 5, 6, 7, 100],
        "uint": [0, 1, 2, 5, 6, 7, 100, 200],
    },
    "exponent": {  # Pow's y: small, non-negative for integers
        "float": [2.0, 0.5, -1.0, 3.0],
        "int": [2, 0, 1, 3],
        "uint": [2, 0, 1, 3],
        "complex": [2 + 0j, 0.5j, -1 + 0j, 1 + 1j],
    },
}
#: float32 edge values (each op's "edge" case): NaN, infinities, signed zeros, huge and small
#: normal values (no denormals: TF's CPU threads flush them to zero, a deliberate difference).
EDGE_FLOATS = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, 1e30, -3.0]
EDGE_FLOATS_OTHER = [1.0, np.inf, -np.inf, 0.0, -0.0, np.nan, -1e30, 2.0]


def dtype_of(name: str | mg.DType) -> mg.DType:
    return mg.as_dtype(name)


def category(dtype: mg.DType) -> str:
    if dtype.is_bool:
        return "bool"
    if dtype.is_string:
        return "string"
    if dtype.is_complex:
        return "complex"
    if dtype.is_floating:
        return "float"
    return "uint" if dtype.is_unsigned else "int"


def arr(values: Any, dtype: str | mg.DType) -> np.ndarray:
    """`values` as an array of minigraph dtype `dtype` (strings as an object array of bytes)."""
    dtype = dtype_of(dtype)
    if dtype.is_string:
        flat = np.array(values, dtype=object)
        if not flat.size:
            return flat
        encode = np.vectorize(
            lambda v: v if isinstance(v, bytes) else str(v).encode(), otypes=[object]
        )
        return encode(flat)
    return np.asarray(values, dtype=dtype.np_dtype)


def sample(dtype: str | mg.DType, kind: str = "any", shape: Sequence[int] = (2, 4)) -> np.ndarray:
    """Values of `kind` (a key of _SAMPLES) for `dtype`, cycled to `shape`."""
    dtype = dtype_of(dtype)
    values = _SAMPLES[kind][category(dtype)]
    count = int(np.prod(shape))
    picked = [values[i % len(values)] for i in range(count)]
    return arr(picked, dtype).reshape(shape)


# -- TF's CPU kernels (tests/data/tf_cpu_kernels.txt, written by make_tf_op_defs.py) -------------


@functools.cache
def _tf_cpu_kernels() -> dict[str, list[dict[str, set[str]]]]:
    path = DATA / "tf_cpu_kernels.txt"
    if not path.exists():
        raise FileNotFoundError(f"{path}: run tests/data/make_tf_op_defs.py first")
    found: dict[str, list[dict[str, set[str]]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        op_type, _device, *constraints = line.split()
        found.setdefault(op_type, []).append(
            {c.split("=")[0]: set(c.split("=")[1].split(",")) for c in constraints}
        )
    return found


def allowed_dtypes(op: str, attr: str = "T") -> list[mg.DType]:
    """The dtypes minigraph's OpDef allows for type attr `attr` (all of them if unrestricted)."""
    allowed = registry.get_op_def(op).attr(attr).allowed
    return list(allowed) if allowed is not None else list(mg.dtypes.ALL_DTYPES)


#: dtypes that TF's CPU kernel registers (or does not constrain) yet refuses when it runs:
#: (op, attr) -> {dtype: TF's error}. minigraph runs them (a superset); no case uses them.
TF_REFUSES_AT_RUN_TIME = {
    ("Tile", "T"): {"uint16": "TileOp : The input data type is not supported, DataType : uint16"},
}


def tf_cpu_types(op: str, attr: str = "T") -> list[mg.DType]:
    """The dtypes both minigraph's OpDef and a TF CPU kernel allow for `attr`, in minigraph's
    order (ALL_DTYPES), less TF_REFUSES_AT_RUN_TIME."""
    names: set[str] = set()
    for constraints in _tf_cpu_kernels().get(op, []):
        if attr not in constraints:
            names = {d.name for d in mg.dtypes.ALL_DTYPES}
            break
        names |= constraints[attr]
    names -= set(TF_REFUSES_AT_RUN_TIME.get((op, attr), ()))
    return [d for d in mg.dtypes.ALL_DTYPES if d.name in names and d in allowed_dtypes(op, attr)]


# -- the table -------------------------------------------------------------------------------------

_CASES: list[Case] = []
_family = ""


def case(op: str, tag: str, *, consts: Iterable[str] = (), **kwargs: Any) -> Case:
    """Adds a case: kwargs are the op's inputs and attrs by name (split by its OpDef), and the
    Case options (ulps, error, xfail, deliberate, cpu_only, feed, note)."""
    op_def = registry.get_op_def(op)
    options = {k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}
    inputs = {a.name: _normalized(kwargs.pop(a.name)) for a in op_def.inputs if a.name in kwargs}
    missing = [a.name for a in op_def.inputs if a.name not in inputs]
    if missing:
        raise ValueError(f"case {op}/{tag}: no value for inputs {missing}")
    unknown = [k for k in kwargs if not op_def.has_attr(k)]
    if unknown:
        raise ValueError(f"case {op}/{tag}: {unknown} are neither inputs nor attrs of {op}")
    if "uninitialized" in options:
        options["uninitialized"] = frozenset(options["uninitialized"])
    if "variables" in options:
        options["variables"] = {k: _normalized(v) for k, v in options["variables"].items()}
    made = Case(op, tag, _family, inputs, dict(kwargs), frozenset(consts), **options)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", made.name):
        raise ValueError(f"case {made.id}: {made.name!r} is not a TF node name")
    _CASES.append(made)
    return made


def _normalized(value: Any) -> Any:
    """An input value as an array (strings as object arrays of bytes), lists element-wise."""
    if isinstance(value, Var):
        return value
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    value = np.asarray(value)
    return value.astype(object) if value.dtype.kind == "S" else value


_OPTIONS = {
    "ulps",
    "error",
    "xfail",
    "deliberate",
    "zero_sign",
    "cpu_only",
    "unknown_dims",
    "feed",
    "note",
    "variables",
    "uninitialized",
    "reads",
}


def family(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Declares a function that adds one family's cases (one TF file per family)."""

    def declare(fn: Callable[[], None]) -> Callable[[], None]:
        global _family
        _family = name
        fn()
        _family = ""
        return fn

    return declare


def _t(dtype: mg.DType) -> str:
    return dtype.name


# Tolerances where TF's CPU kernels round otherwise (each case that uses one says so).
TRANSCENDENTAL = 4  # Eigen's vectorised exp/log/tanh/... against numpy's (libm's): a few ulps
SUMMATION = 8  # another summation order (Eigen's tree reduction, BLAS blocking)


# ---- elementwise math (ops/math.py) --------------------------------------------------------------

#: Unary ops: op -> (sample kind, tolerance in ulps where TF approximates, note).
UNARY = {
    "Neg": ("any", 0),
    "Abs": ("any", 0),
    "Sign": ("any", 0),
    "Square": ("any", 0),
    "Sqrt": ("positive", 0),
    "Rsqrt": ("positive", TRANSCENDENTAL),
    "Reciprocal": ("nonzero", 2),
    "Exp": ("any", TRANSCENDENTAL),
    "Log": ("positive", TRANSCENDENTAL),
    "Log1p": ("unit", TRANSCENDENTAL),
    "Tanh": ("any", TRANSCENDENTAL),
    "Sigmoid": ("any", TRANSCENDENTAL),
    "Relu": ("any", 0),
    "Relu6": ("relu6", 0),
    "Elu": ("any", TRANSCENDENTAL),
    "Softplus": ("any", TRANSCENDENTAL),
    "Floor": ("halves", 0),
    "Ceil": ("halves", 0),
    "Round": ("halves", 0),
    "Conj": ("any", 0),
}

#: Binary ops with broadcasting: op -> (x kind, y kind, ulps).
BINARY = {
    "AddV2": ("any", "other", 0),
    "Sub": ("any", "other", 0),
    "Mul": ("any", "other", 0),
    "RealDiv": ("any", "divisor", 0),
    "Div": ("any", "divisor", 0),
    "FloorDiv": ("any", "divisor", 0),
    "FloorMod": ("any", "divisor", 0),
    "Maximum": ("any", "other", 0),
    "Minimum": ("any", "other", 0),
    "Pow": ("positive", "exponent", TRANSCENDENTAL),
    "SquaredDifference": ("any", "other", 0),
    "Less": ("any", "other", 0),
    "LessEqual": ("any", "other", 0),
    "Greater": ("any", "other", 0),
    "GreaterEqual": ("any", "other", 0),
    "Equal": ("any", "other", 0),
    "NotEqual": ("any", "other", 0),
    "LogicalAnd": ("any", "other", 0),
    "LogicalOr": ("any", "other", 0),
}

#: Gradient helpers of unary ops: op -> (first input, second input, their sample kinds, ulps).
GRAD_HELPERS = {
    "ReluGrad": ("gradients", "features", "any", "any", 0),
    "Relu6Grad": ("gradients", "features", "any", "relu6", 0),
    "EluGrad": ("gradients", "outputs", "any", "any", 0),
    "SoftplusGrad": ("gradients", "features", "any", "any", TRANSCENDENTAL),
    "SigmoidGrad": ("y", "dy", "unit", "any", 0),
    "TanhGrad": ("y", "dy", "unit", "any", 0),
    "RsqrtGrad": ("y", "dy", "positive", "any", 0),
    "SqrtGrad": ("y", "dy", "positive", "any", 0),
    "ReciprocalGrad": ("y", "dy", "nonzero", "any", 0),
}


def _row(values: np.ndarray) -> np.ndarray:
    """The first row of a [2, 4] sample: a [4] operand that broadcasts against it."""
    return values[0] if values.ndim == 2 else values


def _tolerance(ulps: float, dtype: mg.DType, op: str = "") -> float:
    if dtype.is_complex and op in COMPLEX_DIVIDES:
        return max(ulps, COMPLEX_DIVISION)
    return ulps if (dtype.is_floating or dtype.is_complex) else 0


#: Ops whose complex results divide by a complex number: TF's (Eigen's) complex division is
#: another algorithm than numpy's (Smith's), so the last bits differ, and so may the sign of a
#: zero imaginary part (0.25+0j against 0.25-0j).
COMPLEX_DIVIDES = {
    "RealDiv",
    "Div",
    "Sign",
    "Reciprocal",
    "SqrtGrad",
    "RsqrtGrad",
    "ReciprocalGrad",
}
COMPLEX_DIVISION = 2
#: TF's float32 Reciprocal is Eigen's fast reciprocal refined by a Newton step: within an ulp
#: of 1/x (1/-2.5 is -0.39999998), where numpy divides exactly; float64 and halves are exact.
ZERO_SIGN = (
    "the sign of the zero Relu and Relu6 give for -0.0 is numpy's (-0.0); TF's depends on its "
    "vectorisation (oneDNN's kernel gives +0.0), a deliberate difference (ops/math.py)"
)
ROUND_INT = (
    "Round of int32/int64 is the identity in minigraph; TF 2.21's CPU kernel returns 0 for every "
    "element (a TF bug: tf.round never runs it on integers), a deliberate difference"
)


@family("math")
def _math() -> None:
    for op, (kind, ulps) in UNARY.items():
        arg = registry.get_op_def(op).inputs[0].name  # x, features or input
        for dtype in tf_cpu_types(op):
            deliberate = ROUND_INT if op == "Round" and dtype.name in ("int32", "int64") else None
            case(
                op,
                _t(dtype),
                **{arg: sample(dtype, kind)},
                ulps=_tolerance(ulps, dtype, op),
                deliberate=deliberate,
            )
        if dtype_of("float32") in allowed_dtypes(op):
            zero_sign = ZERO_SIGN if op in ("Relu", "Relu6") else None
            case(op, "edge", **{arg: arr(EDGE_FLOATS, "float32")}, ulps=ulps, zero_sign=zero_sign)
    case("LogicalNot", "bool", x=sample("bool"))
    for op, (kind_x, kind_y, ulps) in BINARY.items():
        types = [mg.bool_] if op.startswith("Logical") else tf_cpu_types(op)
        for dtype in types:
            x = sample(dtype, kind_x)
            y = _row(sample(dtype, kind_y, (4,) if kind_y in ("divisor", "exponent") else (2, 4)))
            case(op, _t(dtype), x=x, y=y, ulps=_tolerance(ulps, dtype, op))
        if dtype_of("float32") in types:
            case(
                op,
                "edge",
                x=arr(EDGE_FLOATS, "float32"),
                y=arr(EDGE_FLOATS_OTHER, "float32"),
                ulps=ulps,
            )
    # Broadcasting both ways, and a scalar.
    case(
        "AddV2",
        "bcast_2x1_1x4",
        x=sample("float32", shape=(2, 1)),
        y=sample("int32", shape=(1, 4)).astype(np.float32),
    )
    case("Mul", "scalar", x=sample("int64"), y=arr(3, "int64"))
    case(
        "Maximum",
        "bcast_3d",
        x=sample("float32", shape=(2, 1, 3)),
        y=sample("float32", "other", (4, 1)),
    )
    case("Less", "bcast_scalar", x=arr(0.5, "float64"), y=sample("float64"))
    case(
        "Equal",
        "incompatible",
        x=sample("int32", shape=(2,)),
        y=sample("int32", shape=(3,)),
        incompatible_shape_error=False,
    )
    case(
        "NotEqual",
        "incompatible",
        x=sample("string", shape=(2,)),
        y=sample("string", shape=(3,)),
        incompatible_shape_error=False,
    )
    # Integer extremes: wrap-around as TF's (two's complement) arithmetic.
    info = np.iinfo(np.int32)
    extremes = arr([info.min, info.max, -1, 0, 1, info.min + 1, 12345, -54321], "int32")
    for op in ("Neg", "Abs", "Square", "Sign"):
        case(op, "int32_extremes", x=extremes)
    case("AddV2", "int32_overflow", x=extremes, y=arr([1, 1, 1, 1, 1, -1, 1, 1], "int32"))
    case("Mul", "uint8_wrap", x=sample("uint8"), y=arr([3, 200, 2, 255], "uint8"))
    # Run-time errors, TF's words.
    case(
        "FloorDiv",
        "int32_by_zero",
        x=sample("int32"),
        y=arr([1, 0, 2, 3], "int32"),
        error=("InvalidArgumentError", "Integer division by zero"),
    )
    case(
        "FloorMod",
        "int64_by_zero",
        x=sample("int64"),
        y=arr([0, 1, 2, 3], "int64"),
        error=("InvalidArgumentError", "Integer division by zero"),
    )
    case(
        "Pow",
        "int32_negative",
        x=sample("int32"),
        y=arr([2, -1, 1, 0], "int32"),
        error=("InvalidArgumentError", "Integers to negative integer powers are not allowed"),
    )
    # BiasAdd (every dtype), NCHW and a 4-D input.
    for dtype in tf_cpu_types("BiasAdd"):
        case(
            "BiasAdd",
            _t(dtype),
            value=sample(dtype, shape=(2, 3)),
            bias=sample(dtype, "other", (3,)),
        )
    case(
        "BiasAdd",
        "NCHW",
        value=sample("float32", shape=(2, 3, 2)),
        bias=arr([1, -2, 0.5], "float32"),
        data_format="NCHW",
    )
    case(
        "BiasAdd",
        "NHWC_4d",
        value=sample("int32", shape=(2, 1, 2, 3)),
        bias=arr([1, -2, 5], "int32"),
    )
    for dtype in tf_cpu_types("BiasAddGrad"):
        case(
            "BiasAddGrad",
            _t(dtype),
            out_backprop=sample(dtype, shape=(4, 2)),
            ulps=_tolerance(SUMMATION, dtype),
        )
    case("BiasAddGrad", "NCHW", out_backprop=sample("float32", shape=(2, 3, 2)), data_format="NCHW")
    # Gradient helpers.
    for op, (first, second, kind_a, kind_b, ulps) in GRAD_HELPERS.items():
        for dtype in tf_cpu_types(op):
            a, b = sample(dtype, kind_a), sample(dtype, kind_b)
            case(op, _t(dtype), **{first: a, second: b}, ulps=_tolerance(ulps, dtype, op))
    # Cast: every dtype to and from float32 and int64, bools, Truncate.
    pairs: dict[tuple[str, str], str] = {}
    for dtype in tf_cpu_types("Cast", "DstT"):
        if dtype.is_string:
            continue
        source = "positive" if dtype.is_unsigned else "any"  # no negative float to unsigned
        pairs.setdefault(("complex64" if dtype.is_complex else "float32", _t(dtype)), source)
        pairs.setdefault((_t(dtype), "int64"), "any")
    for (src, dst), kind in pairs.items():
        case("Cast", f"{src}_to_{dst}", x=sample(src, kind), DstT=dst)
    case("Cast", "bool_to_float16", x=sample("bool"), DstT="float16")
    case("Cast", "complex128_to_float64", x=sample("complex128"), DstT="float64")
    ties = arr([1.00390625, 1.01171875, -1.00390625, 3.3, 1e-3, 1e30, -0.0, 255.75], "float32")
    case("Cast", "float32_to_bfloat16_truncate", x=ties, DstT="bfloat16", Truncate=True)
    case("Cast", "float32_to_bfloat16_round", x=ties, DstT="bfloat16")
    case("Cast", "float32_to_int32_truncate", x=sample("float32"), DstT="int32", Truncate=True)
    case(
        "Cast",
        "float64_to_float16_truncate",
        x=ties.astype(np.float64),
        DstT="float16",
        Truncate=True,
    )
    # AddN, BroadcastGradientArgs, Range.
    for dtype in tf_cpu_types("AddN"):
        case("AddN", _t(dtype), inputs=[sample(dtype), sample(dtype, "other"), sample(dtype)])
    case("AddN", "one_input", inputs=[sample("float32", shape=(3,))])
    for dtype in ("int32", "int64"):
        case("BroadcastGradientArgs", dtype, s0=arr([2, 1, 3], dtype), s1=arr([4, 1, 1, 3], dtype))
    case("BroadcastGradientArgs", "scalar_and_empty", s0=arr([], "int32"), s1=arr([1, 5], "int32"))
    for dtype in tf_cpu_types("Range", "Tidx"):
        if dtype.is_floating:
            start, limit, delta = 0.5, 3.0, 0.75
        else:
            start, limit, delta = 2, 13, 3
        case(
            "Range",
            _t(dtype),
            start=arr(start, dtype),
            limit=arr(limit, dtype),
            delta=arr(delta, dtype),
        )
    case(
        "Range",
        "int64_down",
        start=arr(10, "int64"),
        limit=arr(-3, "int64"),
        delta=arr(-4, "int64"),
    )
    case("Range", "empty", start=arr(5, "int32"), limit=arr(5, "int32"), delta=arr(1, "int32"))
    case(
        "Range",
        "consts",
        start=arr(1, "int32"),
        limit=arr(7, "int32"),
        delta=arr(2, "int32"),
        consts=("start", "limit", "delta"),
    )


# ---- reductions and scans (ops/reduction.py) --------------------------------------------------


def _cube(dtype: str | mg.DType, kind: str = "any") -> np.ndarray:
    return sample(dtype, kind, (2, 3, 4))


@family("reduction")
def _reduction() -> None:
    for op in ("Sum", "Mean", "Max", "Min", "Prod"):
        for dtype in tf_cpu_types(op):
            ulps = SUMMATION if op in ("Sum", "Mean") else 0
            kind = "positive" if op == "Prod" and not dtype.is_complex else "any"
            case(
                op,
                _t(dtype),
                input=_cube(dtype, kind),
                reduction_indices=arr([1], "int32"),
                consts=("reduction_indices",),
                ulps=_tolerance(ulps, dtype),
            )
        case(
            op,
            "keep_dims_int64",
            input=_cube("float32"),
            reduction_indices=arr([0, -1], "int64"),
            keep_dims=True,
            consts=("reduction_indices",),
        )
        case(op, "fed_axis", input=_cube("int32", "positive"), reduction_indices=arr(2, "int32"))
        case(
            op,
            "all_axes",
            input=sample("float64", "positive"),
            reduction_indices=arr([0, 1], "int32"),
            consts=("reduction_indices",),
            ulps=SUMMATION,
        )
        case(
            op,
            "empty_axes",
            input=sample("float32"),
            reduction_indices=arr([], "int32"),
            consts=("reduction_indices",),
        )
        case(
            op,
            "empty_input",
            input=arr(np.zeros((0, 3)), "float32"),
            reduction_indices=arr([0], "int32"),
            consts=("reduction_indices",),
        )
    case(
        "Max",
        "nan",
        input=arr([[1, np.nan, 3], [np.nan, -np.inf, -1]], "float32"),
        reduction_indices=arr([1], "int32"),
        consts=("reduction_indices",),
    )
    case(
        "Min",
        "nan",
        input=arr([[1, np.nan, 3], [np.nan, np.inf, -1]], "float32"),
        reduction_indices=arr([1], "int32"),
        consts=("reduction_indices",),
    )
    case(
        "Mean",
        "int32_truncates",
        input=arr([[1, 2, 2], [-1, -2, -2]], "int32"),
        reduction_indices=arr([1], "int32"),
        consts=("reduction_indices",),
    )
    case(
        "Sum",
        "uint8_wraps",
        input=arr([[200, 100, 1]], "uint8"),
        reduction_indices=arr([1], "int32"),
        consts=("reduction_indices",),
    )
    for op in ("All", "Any"):
        case(
            op,
            "axis1",
            input=_cube("bool"),
            reduction_indices=arr([1], "int32"),
            consts=("reduction_indices",),
        )
        case(
            op,
            "keep_dims_int64",
            input=_cube("bool"),
            reduction_indices=arr([-1, 0], "int64"),
            keep_dims=True,
            consts=("reduction_indices",),
        )
        case(op, "fed_axis", input=_cube("bool"), reduction_indices=arr(2, "int32"))
        case(
            op,
            "empty_input",
            input=arr(np.zeros((2, 0), bool), "bool"),
            reduction_indices=arr([1], "int32"),
            consts=("reduction_indices",),
        )
    for op in ("ArgMax", "ArgMin"):
        for dtype in tf_cpu_types(op):
            case(
                op, _t(dtype), input=_cube(dtype), dimension=arr(1, "int32"), consts=("dimension",)
            )
        for out in allowed_dtypes(op, "output_type"):
            case(
                op,
                f"out_{_t(out)}",
                input=_cube("float32"),
                dimension=arr(-1, "int64"),
                output_type=_t(out),
                consts=("dimension",),
            )
        case(
            op, "ties", input=arr([[1, 3, 3, 1], [2, 2, 2, 2]], "int32"), dimension=arr(1, "int32")
        )
        case(
            op,
            "nan",
            input=arr([[1, np.nan, 3], [np.nan, 5, np.nan]], "float32"),
            dimension=arr(1, "int32"),
        )
    # No int16 `dimension`: TF 2.21's CPU ArgMax reads it as an int32 (its OpDef allows int16;
    # the kernel then sees garbage: "Expected dimension in the range [-3, 3), but got
    # 2056323072", or a wrong axis). A TF bug, avoided.
    for op in ("Cumsum", "Cumprod"):
        for dtype in tf_cpu_types(op):
            case(
                op,
                _t(dtype),
                x=sample(dtype, "positive" if op == "Cumprod" else "any"),
                axis=arr(1, "int32"),
                ulps=_tolerance(SUMMATION, dtype),
            )
        for exclusive, reverse in ((True, False), (False, True), (True, True)):
            case(
                op,
                f"exclusive_{exclusive}_reverse_{reverse}",
                x=_cube("float32"),
                axis=arr(-2, "int64"),
                exclusive=exclusive,
                reverse=reverse,
                consts=("axis",),
            )
        case(op, "axis0_int64", x=_cube("int64"), axis=arr(0, "int32"), consts=("axis",))


# ---- neural-network ops (ops/nn.py) -----------------------------------------------------------


@family("nn")
def _nn() -> None:
    for dtype in tf_cpu_types("MatMul"):
        kind = "any"
        case(
            "MatMul",
            _t(dtype),
            a=sample(dtype, kind, (2, 3)),
            b=sample(dtype, "other", (3, 4)),
            ulps=_tolerance(SUMMATION, dtype),
        )
    for ta, tb in ((True, False), (False, True), (True, True)):
        a = sample("float32", shape=(3, 2) if ta else (2, 3))
        b = sample("float32", "other", (4, 3) if tb else (3, 4))
        case("MatMul", f"transpose_{ta}_{tb}", a=a, b=b, transpose_a=ta, transpose_b=tb)
    case(
        "MatMul",
        "grad_hints",
        a=sample("float64", shape=(2, 3)),
        b=sample("float64", shape=(3, 2)),
        grad_a=True,
        grad_b=True,
    )
    case(
        "MatMul",
        "complex_transpose",
        a=sample("complex64", shape=(3, 2)),
        b=sample("complex64", "other", (3, 2)),
        transpose_a=True,
    )
    for dtype in tf_cpu_types("BatchMatMulV2"):
        case(
            "BatchMatMulV2",
            _t(dtype),
            x=sample(dtype, shape=(2, 2, 3)),
            y=sample(dtype, "other", (3, 2)),
            ulps=_tolerance(SUMMATION, dtype),
        )
    case(
        "BatchMatMulV2",
        "adj_x",
        x=sample("float32", shape=(2, 3, 2)),
        y=sample("float32", shape=(2, 3, 4)),
        adj_x=True,
    )
    case(
        "BatchMatMulV2",
        "adj_y_complex",
        x=sample("complex128", shape=(2, 2, 3)),
        y=sample("complex128", "other", (1, 4, 3)),
        adj_y=True,
    )
    case(
        "BatchMatMulV2",
        "adj_both_bcast",
        x=sample("float64", shape=(2, 1, 3, 2)),
        y=sample("float64", "other", (3, 4, 3)),
        adj_x=True,
        adj_y=True,
    )
    case(
        "BatchMatMulV2",
        "grad_hints",
        x=sample("float32", shape=(2, 3)),
        y=sample("float32", shape=(3, 2)),
        grad_x=True,
        grad_y=True,
    )
    logits = arr([[1.0, 2.0, -1.0, 0.5], [30.0, -30.0, 0.0, 29.5], [0.0, 0.0, 0.0, 0.0]], "float32")
    for op in ("Softmax", "LogSoftmax"):
        for dtype in tf_cpu_types(op):
            case(
                op,
                _t(dtype),
                logits=logits.astype(dtype.np_dtype),
                ulps=_tolerance(TRANSCENDENTAL, dtype),
            )
        case(op, "3d", logits=sample("float32", shape=(2, 2, 3)), ulps=TRANSCENDENTAL)
        case(op, "neg_inf", logits=arr([[0.0, -np.inf, 1.0]], "float32"), ulps=TRANSCENDENTAL)
    labels = arr([1, 0, 3], "int32")
    for dtype in tf_cpu_types("SparseSoftmaxCrossEntropyWithLogits"):
        case(
            "SparseSoftmaxCrossEntropyWithLogits",
            _t(dtype),
            features=logits.astype(dtype.np_dtype),
            labels=labels,
            ulps=_tolerance(TRANSCENDENTAL, dtype),
        )
    case(
        "SparseSoftmaxCrossEntropyWithLogits",
        "int64_labels",
        features=logits,
        labels=labels.astype(np.int64),
        ulps=TRANSCENDENTAL,
    )
    case(
        "SparseSoftmaxCrossEntropyWithLogits",
        "label_out_of_range",
        features=logits,
        labels=arr([1, 4, 0], "int64"),
        error=(
            "InvalidArgumentError",
            "Received a label value of 4 which is outside the valid range of \\[0, 4\\)",
        ),
    )
    probs = arr([[0.25, 0.25, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]], "float32")
    for dtype in tf_cpu_types("SoftmaxCrossEntropyWithLogits"):
        case(
            "SoftmaxCrossEntropyWithLogits",
            _t(dtype),
            features=logits.astype(dtype.np_dtype),
            labels=probs.astype(dtype.np_dtype),
            ulps=_tolerance(TRANSCENDENTAL, dtype),
        )
    case(
        "SoftmaxCrossEntropyWithLogits",
        "bcast_labels",
        features=logits,
        labels=probs[1:2],
        ulps=TRANSCENDENTAL,
    )
    for dtype in tf_cpu_types("L2Loss"):
        case("L2Loss", _t(dtype), t=sample(dtype), ulps=_tolerance(SUMMATION, dtype))
    case("L2Loss", "3d", t=_cube("float64"))


# ---- array ops (ops/array.py) -------------------------------------------------------------------


@family("array")
def _array() -> None:
    for op in ("Identity", "StopGradient"):
        for dtype in tf_cpu_types(op):
            case(op, _t(dtype), input=sample(dtype))
    case("Identity", "scalar", input=arr(7.5, "float64"))
    case("Identity", "empty", input=arr(np.zeros((0, 2)), "int8"))
    for op in ("Shape", "Size"):
        case(op, "float32", input=sample("float32", shape=(2, 3, 1)))
        case(op, "int64_string", input=sample("string", shape=(3, 2)), out_type="int64")
        case(op, "scalar", input=arr(1, "int32"))
    case("Rank", "complex64", input=sample("complex64", shape=(2, 1, 2)))
    case("Rank", "scalar", input=arr(True, "bool"))
    for dtype in tf_cpu_types("Reshape"):
        case(
            "Reshape",
            _t(dtype),
            tensor=sample(dtype),
            shape=arr([4, -1], "int32"),
            consts=("shape",),
        )
    case("Reshape", "fed_int64_shape", tensor=_cube("float32"), shape=arr([3, 2, -1], "int64"))
    case(
        "Reshape", "to_scalar", tensor=arr([5], "int32"), shape=arr([], "int32"), consts=("shape",)
    )
    case(
        "Reshape",
        "bad_size",
        tensor=sample("float32"),
        shape=arr([3, -1], "int32"),
        error=(
            "InvalidArgumentError",
            "Input to reshape is a tensor with 8 values, "
            "but the requested shape requires a multiple of 3",
        ),
    )
    case("ExpandDims", "float32", input=sample("float32"), dim=arr(1, "int32"), consts=("dim",))
    case("ExpandDims", "neg_int64", input=sample("string"), dim=arr(-1, "int64"), consts=("dim",))
    case("ExpandDims", "fed", input=arr(3, "int16"), dim=arr(0, "int32"))
    case("Squeeze", "all", input=sample("float32", shape=(1, 2, 1, 4)))
    case("Squeeze", "dims", input=sample("bool", shape=(1, 2, 1, 4)), squeeze_dims=[-2])
    case("Squeeze", "dims_both", input=sample("uint16", shape=(1, 2, 1, 4)), squeeze_dims=[0, 2])
    for dtype in tf_cpu_types("Transpose"):
        case("Transpose", _t(dtype), x=_cube(dtype), perm=arr([2, 0, 1], "int32"), consts=("perm",))
    case("Transpose", "fed_int64_perm", x=sample("float32"), perm=arr([1, 0], "int64"))
    cube = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    strided = [
        ("plain", [0, 1, 0], [2, 3, 3], [1, 1, 2], {}),
        ("begin_end_masks", [1, 0, 3], [0, 2, 0], [1, 1, -1], {"begin_mask": 2, "end_mask": 5}),
        ("ellipsis", [0, 1], [0, 3], [1, 1], {"ellipsis_mask": 1}),
        ("new_axis", [0, 0, 1], [0, 2, 3], [1, 1, 1], {"new_axis_mask": 1}),
        ("shrink", [1, 0, -1], [2, 3, 0], [1, 1, 1], {"shrink_axis_mask": 5}),
        ("negative_stride", [-1, -1, -1], [-3, -4, -5], [-1, -2, -3], {}),
        (
            "all_masks",
            [1, 0, 0, 2],
            [2, 0, 0, 4],
            [1, 1, 1, 1],
            {
                "begin_mask": 2,
                "end_mask": 2,
                "ellipsis_mask": 4,
                "new_axis_mask": 2,
                "shrink_axis_mask": 1,
            },
        ),
        ("empty", [1, 2, 0], [1, 3, 4], [1, 1, 1], {}),
    ]
    for tag, begin, end, strides, masks in strided:
        case(
            "StridedSlice",
            tag,
            input=cube,
            begin=arr(begin, "int32"),
            end=arr(end, "int32"),
            strides=arr(strides, "int32"),
            consts=("begin", "end", "strides"),
            **masks,
        )
    case(
        "StridedSlice",
        "fed_int64",
        input=sample("string", shape=(4, 2)),
        begin=arr([3, 0], "int64"),
        end=arr([0, 2], "int64"),
        strides=arr([-2, 1], "int64"),
    )
    for dtype in tf_cpu_types("StridedSlice"):
        case(
            "StridedSlice",
            _t(dtype),
            input=_cube(dtype),
            begin=arr([1, 0], "int32"),
            end=arr([2, 3], "int32"),
            strides=arr([1, 2], "int32"),
            shrink_axis_mask=1,
            consts=("begin", "end", "strides"),
        )
    grads = [  # (tag, begin, end, strides, masks, dy's shape, dtype)
        ("plain", [0, 1, 0], [2, 3, 3], [1, 1, 2], {}, (2, 2, 2), "float32"),
        ("shrink", [1, 0, -1], [2, 3, 0], [1, 1, 1], {"shrink_axis_mask": 5}, (3,), "int64"),
        ("new_axis", [0, 0, 1], [0, 2, 3], [1, 1, 1], {"new_axis_mask": 1}, (1, 2, 2, 4), "string"),
        ("negative_stride", [-1, -1, -1], [-3, -4, -5], [-1, -2, -3], {}, (2, 2, 2), "complex64"),
        (
            "masks",
            [1, 0, 3],
            [0, 2, 0],
            [1, 1, -1],
            {"begin_mask": 2, "end_mask": 5},
            (1, 2, 4),
            "bfloat16",
        ),
        ("ellipsis", [0, 1], [0, 3], [1, 1], {"ellipsis_mask": 1}, (2, 3, 2), "bool"),
    ]
    for tag, begin, end, strides, masks, dy_shape, dtype in grads:
        case(
            "StridedSliceGrad",
            tag,
            shape=arr([2, 3, 4], "int32"),
            begin=arr(begin, "int32"),
            end=arr(end, "int32"),
            strides=arr(strides, "int32"),
            dy=sample(dtype, shape=dy_shape),
            consts=("shape", "begin", "end", "strides"),
            **masks,
        )
    case(
        "StridedSliceGrad",
        "fed_int64",
        shape=arr([4, 2], "int64"),
        begin=arr([3, 0], "int64"),
        end=arr([0, 2], "int64"),
        strides=arr([-2, 1], "int64"),
        dy=sample("float64", shape=(2, 2)),
    )
    for dtype in tf_cpu_types("InvertPermutation"):
        case("InvertPermutation", _t(dtype), x=arr([2, 4, 0, 1, 3], dtype))
    case("InvertPermutation", "empty", x=arr([], "int32"))
    case(
        "InvertPermutation",
        "not_a_permutation",
        x=arr([0, 2, 2], "int32"),
        error=("InvalidArgumentError", "2 is duplicated in the input"),
    )
    case(
        "Slice",
        "float32",
        input=_cube("float32"),
        begin=arr([0, 1, 1], "int32"),
        size=arr([-1, 2, 2], "int32"),
        consts=("begin", "size"),
    )
    case(
        "Slice",
        "fed_int64",
        input=sample("complex128"),
        begin=arr([1, 0], "int64"),
        size=arr([1, -1], "int64"),
    )
    case(
        "Slice",
        "string",
        input=sample("string"),
        begin=arr([0, 2], "int32"),
        size=arr([2, 2], "int32"),
        consts=("begin", "size"),
    )
    for dtype in tf_cpu_types("ConcatV2"):
        case(
            "ConcatV2",
            _t(dtype),
            values=[sample(dtype), sample(dtype, "other", (1, 4))],
            axis=arr(0, "int32"),
            consts=("axis",),
        )
    case(
        "ConcatV2",
        "three_neg_axis_int64",
        values=[
            sample("float32", shape=(2, 1)),
            sample("float32"),
            sample("float32", "other", (2, 3)),
        ],
        axis=arr(-1, "int64"),
    )
    for dtype in tf_cpu_types("Pack"):
        case("Pack", _t(dtype), values=[sample(dtype, shape=(3,)), sample(dtype, "other", (3,))])
    case(
        "Pack",
        "axis_neg",
        values=[sample("float32"), sample("float32", "other"), sample("float32")],
        axis=-1,
    )
    case("Pack", "scalars", values=[arr(1, "int64"), arr(2, "int64")])
    for dtype in tf_cpu_types("Unpack"):
        case("Unpack", _t(dtype), value=sample(dtype), num=2)
    case("Unpack", "axis1", value=_cube("float32"), num=3, axis=1)
    case("Unpack", "axis_neg", value=_cube("string"), num=4, axis=-1)
    for dtype in tf_cpu_types("Fill"):
        case("Fill", _t(dtype), dims=arr([2, 3], "int32"), value=sample(dtype)[0, 1])
    case(
        "Fill",
        "int64_dims_const",
        dims=arr([3, 1, 2], "int64"),
        value=arr(-1.5, "float32"),
        consts=("dims",),
    )
    case("Fill", "empty", dims=arr([0, 2], "int32"), value=arr(b"x", "string"))
    for op in ("ZerosLike", "OnesLike"):
        for dtype in tf_cpu_types(op):
            case(op, _t(dtype), x=sample(dtype))
    for dtype in tf_cpu_types("Tile"):
        case(
            "Tile",
            _t(dtype),
            input=sample(dtype, shape=(2, 2)),
            multiples=arr([2, 3], "int32"),
            consts=("multiples",),
        )
    case(
        "Tile",
        "fed_int64_zero",
        input=sample("float32", shape=(2, 2)),
        multiples=arr([0, 2], "int64"),
    )
    for dtype in tf_cpu_types("BroadcastTo"):
        case(
            "BroadcastTo",
            _t(dtype),
            input=sample(dtype, shape=(4,)),
            shape=arr([3, 4], "int32"),
            consts=("shape",),
        )
    case(
        "BroadcastTo",
        "fed_int64",
        input=sample("float32", shape=(2, 1)),
        shape=arr([3, 2, 5], "int64"),
    )
    indices = arr([0, 2, -1, 5, 1], "int32")
    for dtype in tf_cpu_types("OneHot"):
        on, off = sample(dtype)[0, 0], sample(dtype, "other")[0, 3]
        case(
            "OneHot",
            _t(dtype),
            indices=indices,
            depth=arr(3, "int32"),
            on_value=on,
            off_value=off,
            consts=("depth",),
        )
    for index_type in tf_cpu_types("OneHot", "TI"):
        case(
            "OneHot",
            f"TI_{_t(index_type)}",
            indices=arr([[0, 2], [1, 7]], index_type),
            depth=arr(4, "int32"),
            on_value=arr(1.0, "float32"),
            off_value=arr(0.0, "float32"),
            axis=0,
        )
    case(
        "OneHot",
        "axis1_fed_depth",
        indices=arr([[0, 2], [1, -3]], "int64"),
        depth=arr(3, "int32"),
        on_value=arr(5, "int64"),
        off_value=arr(-1, "int64"),
        axis=1,
    )
    condition = arr([True, False, True, False], "bool")
    for op in ("SelectV2", "Select"):
        for dtype in tf_cpu_types(op):
            case(
                op,
                _t(dtype),
                condition=np.stack([condition, ~condition]),
                t=sample(dtype),
                e=sample(dtype, "other"),
            )
    case("SelectV2", "bcast", condition=condition, t=sample("float32"), e=arr(-1.0, "float32"))
    case(
        "SelectV2",
        "bcast_3way",
        condition=arr([[True], [False]], "bool"),
        t=sample("int32", shape=(1, 4)),
        e=sample("int32", "other", (2, 1)),
    )
    case(
        "Select",
        "vector_condition",
        condition=arr([False, True], "bool"),
        t=sample("float32"),
        e=sample("float32", "other"),
    )
    case(
        "Select",
        "scalar_condition",
        condition=arr(True, "bool"),
        t=sample("string"),
        e=sample("string", "other"),
    )
    # Unique (ops/resource_variables.py: the optimizers' deduplication; an array op in TF):
    # every dtype, both index types, first-occurrence order, NaNs never equal, empty.
    for dtype in tf_cpu_types("Unique"):
        values = sample(dtype).reshape(-1)
        case("Unique", _t(dtype), x=np.concatenate([values[2:6], values[:4], values[3:5]]))
    case("Unique", "out_idx_int64", x=arr([3, 1, 3, 3, 0, 1], "int64"), out_idx="int64")
    case("Unique", "nan", x=arr([np.nan, 1.0, np.nan, 1.0, -0.0, 0.0], "float32"))
    case("Unique", "empty", x=arr([], "int32"))


# ---- segment and scatter ops (ops/segment.py) --------------------------------------------------


@family("segment")
def _segment() -> None:
    ids = arr([0, 2, 0, -1], "int32")
    for dtype in tf_cpu_types("UnsortedSegmentSum"):
        case(
            "UnsortedSegmentSum",
            _t(dtype),
            data=sample(dtype, shape=(4, 2)),
            segment_ids=ids,
            num_segments=arr(3, "int32"),
            consts=("num_segments",),
        )
    for index_type in tf_cpu_types("UnsortedSegmentSum", "Tindices"):
        case(
            "UnsortedSegmentSum",
            f"ids_{_t(index_type)}",
            data=_cube("float32"),
            segment_ids=arr([[1, 1, 0], [3, -1, 1]], index_type),
            num_segments=arr(4, "int64"),
        )
    case(
        "UnsortedSegmentSum",
        "id_out_of_range",
        data=sample("float32", shape=(4,)),
        segment_ids=arr([0, 5, 1, 0], "int32"),
        num_segments=arr(3, "int32"),
        error=("InvalidArgumentError", "segment_ids\\[1\\] = 5 is out of range \\[0, 3\\)"),
    )
    updates = sample("float32", shape=(4,))
    sn_indices = arr([[0, 1], [2, 0], [0, 1], [1, 1]], "int32")
    for dtype in tf_cpu_types("ScatterNd"):
        case(
            "ScatterNd",
            _t(dtype),
            indices=sn_indices,
            updates=sample(dtype, shape=(4,)),
            shape=arr([3, 2], "int32"),
            consts=("shape",),
        )
    case(
        "ScatterNd",
        "slices_int64",
        indices=arr([[1], [0], [1]], "int64"),
        updates=sample("float64", shape=(3, 4)),
        shape=arr([3, 4], "int64"),
    )
    case(
        "ScatterNd",
        "ignore",
        indices=arr([[1], [9], [0]], "int32"),
        updates=updates[:3],
        shape=arr([3], "int32"),
        bad_indices_policy="IGNORE",
    )
    case(
        "ScatterNd",
        "bad_index",
        indices=arr([[1], [9], [0]], "int32"),
        updates=updates[:3],
        shape=arr([3], "int32"),
        error=(
            "InvalidArgumentError",
            "indices\\[1\\] = \\[9\\] does not index into shape \\[3\\]",
        ),
    )


# ---- gathers, partitions, checks and the framework ops ------------------------------------


@family("gather")
def _gather() -> None:
    for dtype in tf_cpu_types("GatherV2", "Tparams"):
        case(
            "GatherV2",
            _t(dtype),
            params=sample(dtype),
            indices=arr([[1, 0, 1]], "int32"),
            axis=arr(0, "int32"),
            consts=("axis",),
        )
    for index_type in tf_cpu_types("GatherV2", "Tindices"):
        case(
            "GatherV2",
            f"indices_{_t(index_type)}",
            params=_cube("float32"),
            indices=arr([3, 0, 2], index_type),
            axis=arr(-1, "int64"),
        )
    case(
        "GatherV2",
        "batch_dims",
        params=_cube("int32"),
        indices=arr([[2, 0], [1, 1]], "int64"),
        axis=arr(1, "int32"),
        batch_dims=1,
        consts=("axis",),
    )
    case(
        "GatherV2",
        "batch_dims_neg",
        params=_cube("float32"),
        indices=arr([[3, 0], [1, 1]], "int32"),
        axis=arr(2, "int32"),
        batch_dims=-1,
        consts=("axis",),
    )
    case(
        "GatherV2",
        "out_of_range",
        params=sample("float32"),
        indices=arr([1, 2], "int32"),
        axis=arr(0, "int32"),
        cpu_only=True,
        error=("InvalidArgumentError", "indices\\[1\\] = 2 is not in \\[0, 2\\)"),
    )
    for dtype in tf_cpu_types("GatherNd", "Tparams"):
        case("GatherNd", _t(dtype), params=sample(dtype), indices=arr([[1, 2], [0, 0]], "int32"))
    case("GatherNd", "slices_int64", params=_cube("float32"), indices=arr([[[1], [0]]], "int64"))
    case(
        "GatherNd",
        "ignore",
        params=sample("int32"),
        indices=arr([[1, 2], [5, 0]], "int32"),
        bad_indices_policy="IGNORE",
    )
    case(
        "GatherNd",
        "out_of_range",
        params=sample("float32"),
        indices=arr([[1, 2], [5, 0]], "int32"),
        cpu_only=True,
        error=(
            "InvalidArgumentError",
            "indices\\[1\\] = \\[5, 0\\] does not index into param shape \\[2,4\\]",
        ),
    )
    partitions = arr([2, 0, 2, 1, 0], "int32")
    for dtype in tf_cpu_types("DynamicPartition"):
        case(
            "DynamicPartition",
            _t(dtype),
            data=sample(dtype, shape=(5, 2)),
            partitions=partitions,
            num_partitions=3,
        )
    case(
        "DynamicPartition",
        "empty_partition",
        data=sample("float32", shape=(5,)),
        partitions=arr([0, 0, 3, 0, 3], "int32"),
        num_partitions=4,
    )
    case(
        "DynamicPartition",
        "bad_partition",
        data=sample("float32", shape=(5,)),
        partitions=arr([0, 0, 3, 0, 3], "int32"),
        num_partitions=3,
        error=("InvalidArgumentError", "partitions\\[2\\] = 3 is not in \\[0, 3\\)"),
    )
    for op in ("DynamicStitch", "ParallelDynamicStitch"):
        for dtype in tf_cpu_types(op):
            case(
                op,
                _t(dtype),
                indices=[arr([0, 2], "int32"), arr([[1], [3]], "int32")],
                data=[sample(dtype, shape=(2, 3)), sample(dtype, "other", (2, 1, 3))],
            )
        case(
            op,
            "repeated",
            indices=[arr([0, 1], "int32"), arr([1, 0, 2], "int32")],
            data=[sample("float32", shape=(2,)), sample("float32", "other", (3,))],
        )
    case(
        "Assert",
        "true",
        condition=arr(True, "bool"),
        data=[sample("float32"), sample("int32")],
        summarize=2,
    )
    case(
        "Assert",
        "false",
        condition=arr(False, "bool"),
        data=[arr([1, 2, 3], "int32")],
        error=("InvalidArgumentError", "assertion failed: \\[1 2 3\\]"),
    )
    case("EnsureShape", "partial", input=sample("float32"), shape=[None, 4])
    case("EnsureShape", "string", input=sample("string"), shape=[2, 4])
    case(
        "EnsureShape",
        "mismatch",
        input=sample("float32"),
        shape=[4, None],
        unknown_dims=True,
        error=(
            "InvalidArgumentError",
            "Shape of tensor .*\\[2,4\\] is not compatible with expected shape \\[4,\\?\\]",
        ),
    )


@family("framework")
def _framework() -> None:
    for dtype in mg.dtypes.ALL_DTYPES:
        case("Const", _t(dtype), value=sample(dtype), dtype=_t(dtype))
    case("Const", "scalar", value=arr(-3, "int64"), dtype="int64")
    case("Const", "splat", value=arr(np.full((2, 3), 1.5), "float32"), dtype="float32")
    case("Const", "empty", value=arr(np.zeros((0, 3)), "float64"), dtype="float64")
    case("Const", "strings", value=arr([b"", b"\x00\xff", b"long" * 5], "string"), dtype="string")
    for dtype in ("float32", "string", "bool", "bfloat16"):
        case("Placeholder", dtype, dtype=dtype, shape=[2, 4], feed=sample(dtype))
    case("Placeholder", "unknown_rank", dtype="int32", feed=_cube("int32"))
    case("Placeholder", "partial", dtype="complex64", shape=[None, 4], feed=sample("complex64"))
    case("NoOp", "plain")


# ---- resource variables (ops/resource_variables.py) ----------------------------------------------


@family("variables")
def _variables() -> None:
    v = Var("v")
    table = sample("float32", shape=(4, 2))
    case(
        "VarHandleOp",
        "float32",
        dtype="float32",
        shape=[4, 2],
        shared_name="VarHandleOp_float32/op",
        variables={"op": table},
    )
    case(
        "VarHandleOp",
        "partial_shape_int64",
        dtype="int64",
        shape=[None, 3],
        shared_name="VarHandleOp_partial_shape_int64/op",
        container="",
        debug_name="w",
        variables={"op": sample("int64", shape=(2, 3))},
    )
    for dtype in ("float32", "int32", "string", "bool", "complex128", "bfloat16"):
        case("ReadVariableOp", dtype, resource=v, dtype=dtype, variables={"v": sample(dtype)})
    case(
        "ReadVariableOp",
        "uninitialized",
        resource=v,
        dtype="float32",
        variables={"v": table},
        uninitialized={"v"},
        error=("FailedPreconditionError", "Could not find variable ReadVariableOp_uninitialized/v"),
    )
    case(
        "AssignVariableOp",
        "float32",
        resource=v,
        value=sample("float32", "other", (4, 2)),
        variables={"v": table},
    )
    case(
        "AssignVariableOp",
        "creates_string",
        resource=v,
        value=sample("string"),
        variables={"v": sample("string")},
        uninitialized={"v"},
        reads=("v",),
    )
    case(
        "AssignVariableOp",
        "validate_shape",
        resource=v,
        value=sample("int64", shape=(4, 2)),
        validate_shape=True,
        variables={"v": sample("int64", shape=(4, 2))},
    )
    for op in ("AssignAddVariableOp", "AssignSubVariableOp"):
        for dtype in ("float32", "int64", "complex64", "uint8", "float16"):
            case(
                op, dtype, resource=v, value=sample(dtype, "other"), variables={"v": sample(dtype)}
            )
    case("VarIsInitializedOp", "initialized", resource=v, variables={"v": table})
    case(
        "VarIsInitializedOp",
        "uninitialized",
        resource=v,
        variables={"v": table},
        uninitialized={"v"},
    )
    case("DestroyResourceOp", "initialized", resource=v, variables={"v": table}, reads=())
    case(
        "DestroyResourceOp",
        "missing_ignored",
        resource=v,
        variables={"v": table},
        uninitialized={"v"},
    )
    case(
        "DestroyResourceOp",
        "missing",
        resource=v,
        ignore_lookup_error=False,
        variables={"v": table},
        uninitialized={"v"},
        error=(
            "NotFoundError",
            "(Resource .*DestroyResourceOp_missing/v.*|Container localhost) does not exist",
        ),
        note="TF names the container instead when the session holds no resource yet",
    )
    case("VariableShape", "int32", input=v, variables={"v": _cube("float32")})
    case("VariableShape", "int64", input=v, out_type="int64", variables={"v": sample("string")})
    for index_type in ("int32", "int64"):
        case(
            "ResourceGather",
            index_type,
            resource=v,
            indices=arr([[3, 0], [1, 3]], index_type),
            dtype="float32",
            variables={"v": table},
        )
    case(
        "ResourceGather",
        "batch_dims",
        resource=v,
        indices=arr([[2, 0], [1, 1]], "int32"),
        dtype="int32",
        batch_dims=1,
        variables={"v": _cube("int32")},
    )
    case(
        "ResourceGather",
        "no_validation",
        resource=v,
        indices=arr([2, 2], "int64"),
        dtype="float32",
        validate_indices=False,
        variables={"v": table},
    )
    case(
        "ResourceGather",
        "string",
        resource=v,
        indices=arr([1, 0, 1], "int32"),
        dtype="string",
        variables={"v": sample("string")},
    )
    case(
        "ResourceGather",
        "out_of_range",
        resource=v,
        indices=arr([1, 4], "int32"),
        dtype="float32",
        variables={"v": table},
        cpu_only=True,
        error=("InvalidArgumentError", "indices\\[1\\] = 4 is not in \\[0, 4\\)"),
    )
    repeated = arr([1, 3, 1], "int32")
    for op in ("ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate"):
        for dtype in ("float32", "int32", "float64"):
            case(
                op,
                dtype,
                resource=v,
                indices=repeated,
                updates=sample(dtype, "other", (3, 2)),
                variables={"v": sample(dtype, shape=(4, 2))},
            )
        case(
            op,
            "scalar_int64",
            resource=v,
            indices=arr([[0], [2]], "int64"),
            updates=arr(5.0, "float32"),
            variables={"v": table},
        )
    case(
        "ResourceScatterUpdate",
        "string",
        resource=v,
        indices=arr([0, 2], "int32"),
        updates=sample("string", "other", (2, 4)),
        variables={"v": sample("string", shape=(3, 4))},
    )
    # TF 1.x's optimizers' apply ops: one step each, float32 and float64.
    var, accum = sample("float32", shape=(4, 2)), sample("float32", "positive", (4, 2))
    grad = sample("float32", "other", (4, 2))
    for dtype in ("float32", "float64"):
        cast = {"var": var.astype(dtype), "accum": accum.astype(dtype)}
        g = grad.astype(dtype)
        locking = dtype == "float64"
        case(
            "ResourceApplyGradientDescent",
            dtype,
            var=Var("var"),
            alpha=arr(0.5, dtype),
            delta=g,
            variables={"var": cast["var"]},
            use_locking=locking,
        )
        case(
            "ResourceApplyMomentum",
            dtype,
            var=Var("var"),
            accum=Var("accum"),
            lr=arr(0.1, dtype),
            grad=g,
            momentum=arr(0.9, dtype),
            variables=cast,
            use_locking=locking,
        )
        case(
            "ResourceApplyAdagrad",
            dtype,
            var=Var("var"),
            accum=Var("accum"),
            lr=arr(0.1, dtype),
            grad=g,
            variables=cast,
            use_locking=locking,
            ulps=4,
        )
        case(
            "ResourceApplyAdam",
            dtype,
            var=Var("var"),
            m=Var("m"),
            v=Var("v"),
            beta1_power=arr(0.9, dtype),
            beta2_power=arr(0.999, dtype),
            lr=arr(0.01, dtype),
            beta1=arr(0.9, dtype),
            beta2=arr(0.999, dtype),
            epsilon=arr(1e-7, dtype),
            grad=g,
            variables={"var": cast["var"], "m": g * 0.5, "v": cast["accum"]},
            use_locking=locking,
            ulps=4,
        )
    sparse_grad = sample("float32", "other", (3, 2))
    for index_type in ("int32", "int64"):
        indices = arr([2, 0, 2], index_type)
        locking = index_type == "int64"
        case(
            "ResourceSparseApplyMomentum",
            index_type,
            var=Var("var"),
            accum=Var("accum"),
            lr=arr(0.1, "float32"),
            grad=sparse_grad,
            indices=indices,
            momentum=arr(0.9, "float32"),
            variables={"var": var, "accum": accum},
            use_locking=locking,
        )
        case(
            "ResourceSparseApplyAdagrad",
            index_type,
            var=Var("var"),
            accum=Var("accum"),
            lr=arr(0.1, "float32"),
            grad=sparse_grad,
            indices=indices,
            variables={"var": var, "accum": accum},
            use_locking=locking,
            ulps=4,
        )
    case(
        "ResourceApplyMomentum",
        "nesterov",
        var=Var("var"),
        accum=Var("accum"),
        lr=arr(0.1, "float32"),
        grad=grad,
        momentum=arr(0.9, "float32"),
        use_nesterov=True,
        use_locking=True,
        variables={"var": var, "accum": accum},
    )
    case(
        "ResourceApplyAdagrad",
        "no_slot_update",
        var=Var("var"),
        accum=Var("accum"),
        lr=arr(0.1, "float32"),
        grad=grad,
        update_slots=False,
        variables={"var": var, "accum": accum},
        ulps=4,
    )
    case(
        "ResourceApplyAdam",
        "nesterov",
        var=Var("var"),
        m=Var("m"),
        v=Var("v"),
        beta1_power=arr(0.9, "float32"),
        beta2_power=arr(0.999, "float32"),
        lr=arr(0.01, "float32"),
        beta1=arr(0.9, "float32"),
        beta2=arr(0.999, "float32"),
        epsilon=arr(1e-7, "float32"),
        grad=grad,
        use_nesterov=True,
        variables={"var": var, "m": grad * 0.5, "v": accum},
        ulps=4,
    )
    case(
        "ResourceSparseApplyMomentum",
        "nesterov",
        var=Var("var"),
        accum=Var("accum"),
        lr=arr(0.1, "float32"),
        grad=sparse_grad,
        indices=arr([3, 1, 1], "int32"),
        momentum=arr(0.9, "float32"),
        use_nesterov=True,
        variables={"var": var, "accum": accum},
        ulps=2,
        note="a repeated index: applied one after another, TF's to rounding",
    )
    case(
        "ResourceSparseApplyAdagrad",
        "no_slot_update",
        var=Var("var"),
        accum=Var("accum"),
        lr=arr(0.1, "float32"),
        grad=sparse_grad,
        indices=arr([3, 1, 1], "int64"),
        update_slots=False,
        variables={"var": var, "accum": accum},
        ulps=4,
    )


CASES: tuple[Case, ...] = tuple(_CASES)
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(c.family for c in CASES))


def _check_unique() -> None:
    seen: set[str] = set()
    for c in CASES:
        if c.name in seen:
            raise ValueError(f"two cases named {c.name}")
        seen.add(c.name)


_check_unique()


# -- building a case -------------------------------------------------------------------------------


def _our_attr(kind: str, value: Any) -> Any:
    if kind == "type":
        return mg.as_dtype(value)
    if kind == "list(type)":
        return [mg.as_dtype(v) for v in value]
    return value


@dataclass
class Plan:
    """How a built case runs: `setup` (operations: variables' initial values) first, then
    `fetches` with `feeds` (the op's outputs, or the op itself when it has no value outputs),
    then `after` (the variables' state once the op ran). `dtypes`: each fetched tensor's dtype
    name."""

    feeds: dict[str, np.ndarray]
    fetches: list[str]
    setup: list[str]
    after: list[str]
    dtypes: dict[str, str]


class _Side:
    """What building a case needs from one framework (minigraph's or TF's API)."""

    def const(self, name: str, value: np.ndarray) -> Any: ...
    def placeholder(self, name: str, value: np.ndarray, shape: list) -> Any: ...
    def op(self, op_type: str, name: str, kwargs: dict[str, Any]) -> Any: ...
    def outputs(self, node: Any) -> list[tuple[str, str]]: ...  # (tensor name, dtype name)
    def scoped(self, case: Case) -> Any: ...


def _build(case: Case, side: _Side) -> Plan:
    op_def = registry.get_op_def(case.op)
    plan = Plan({}, [], [], [], {})

    def make(name: str, value: np.ndarray, const: bool) -> Any:
        value = np.asarray(value)
        if const:
            return side.const(name, value)
        plan.feeds[f"{case.name}/{name}:0"] = value
        return side.placeholder(name, value, _declared(case, value))

    handles: dict[str, Any] = {}

    def variable(name: str, value: np.ndarray) -> Any:
        """A VarHandleOp for the case's variable `name` (shared_name: its node's name)."""
        attrs = {
            "dtype": mg.as_dtype(value.dtype).name,
            "shape": list(value.shape),
            "shared_name": f"{case.name}/{name}",
        }
        return side.op("VarHandleOp", name, attrs)

    with side.scoped(case):
        for name, value in case.variables.items():
            if name != "op":
                handles[name] = variable(name, value)
        kwargs: dict[str, Any] = {}
        for arg in op_def.inputs:
            value = case.inputs[arg.name]
            const = arg.name in case.consts
            if isinstance(value, Var):
                kwargs[arg.name] = side.output(handles[value.name])
            elif arg.is_list:
                kwargs[arg.name] = [make(f"{arg.name}_{i}", v, const) for i, v in enumerate(value)]
            else:
                kwargs[arg.name] = make(arg.name, value, const)
        for name, value in case.attrs.items():
            kwargs[name] = value
        node = side.op(case.op, "op", kwargs)
        if "op" in case.variables:
            handles["op"] = node
        for name, value in case.variables.items():
            handle = side.output(handles[name])
            if name not in case.uninitialized:
                initial = side.const(f"{name}_value", np.asarray(value))
                side.op("AssignVariableOp", f"{name}_init", {"resource": handle, "value": initial})
                plan.setup.append(f"{case.name}/{name}_init")
            side.op("VarIsInitializedOp", f"{name}_initialized", {"resource": handle})
            plan.after.append(f"{case.name}/{name}_initialized:0")
            plan.dtypes[plan.after[-1]] = "bool"
            if name in case.read_after:
                dtype = mg.as_dtype(np.asarray(value).dtype).name
                side.op("ReadVariableOp", f"{name}_read", {"resource": handle, "dtype": dtype})
                plan.after.append(f"{case.name}/{name}_read:0")
                plan.dtypes[plan.after[-1]] = dtype
    outputs = [(n, d) for n, d in side.outputs(node) if d != "resource"]
    plan.fetches = [n for n, _ in outputs] or [f"{case.name}/op"]
    plan.dtypes.update(outputs)
    if case.feed is not None:
        plan.feeds[f"{case.name}/op:0"] = np.asarray(case.feed)
    return plan


class _Ours(_Side):
    def __init__(self, scope: mg.Scope) -> None:
        self.root = scope
        self.scope = scope

    def scoped(self, case: Case) -> Any:
        import contextlib  # noqa: PLC0415

        self.scope = self.root.new_sub_scope(case.name)
        return contextlib.nullcontext()

    def const(self, name: str, value: np.ndarray) -> Any:
        return mg.Const(self.scope.with_op_name(name), value).output

    def placeholder(self, name: str, value: np.ndarray, shape: list) -> Any:
        dtype = mg.as_dtype(value.dtype)
        return mg.Placeholder(self.scope.with_op_name(name), dtype, shape=shape).output

    def op(self, op_type: str, name: str, kwargs: dict[str, Any]) -> Any:
        op_def = registry.get_op_def(op_type)
        converted = {}
        for key, value in kwargs.items():
            if op_def.has_attr(key) and not any(a.name == key for a in op_def.inputs):
                value = _our_attr(op_def.attr(key).type, value)
            converted[key] = value
        if op_type == "Const":
            converted = {"value": kwargs["value"], "dtype": mg.as_dtype(kwargs["dtype"])}
        node = registry.builder(op_type)(self.scope.with_op_name(name), **converted)
        return node.operation if hasattr(node, "operation") else node.op

    def output(self, node: Any) -> Any:
        return node.outputs[0]

    def outputs(self, node: Any) -> list[tuple[str, str]]:
        return [(o.name, o.dtype.name) for o in node.outputs]


class _TF(_Side):
    def __init__(self, tf: Any, graph: Any) -> None:
        self.tf = tf
        self.graph = graph

    def scoped(self, case: Case) -> Any:
        return self.graph.name_scope(case.name)

    def dtype(self, dtype: Any) -> Any:
        return self.tf.as_dtype(mg.as_dtype(dtype).name)

    def const(self, name: str, value: np.ndarray) -> Any:
        return self.tf.constant(value, dtype=self.dtype(value.dtype), name=name)

    def placeholder(self, name: str, value: np.ndarray, shape: list) -> Any:
        return self.tf.compat.v1.placeholder(self.dtype(value.dtype), shape, name=name)

    def op(self, op_type: str, name: str, kwargs: dict[str, Any]) -> Any:
        tf = self.tf
        op_def = registry.get_op_def(op_type)
        converted = {}
        for key, value in kwargs.items():
            if not any(a.name == key for a in op_def.inputs):
                kind = op_def.attr(key).type
                if kind == "type":
                    value = self.dtype(value)
                elif kind == "list(type)":
                    value = [self.dtype(v) for v in value]
                elif kind == "shape":
                    value = tf.TensorShape(value)
            converted[key] = value
        if op_type == "Const":
            return tf.constant(kwargs["value"], dtype=converted["dtype"], name=name).op
        if op_type == "Placeholder":
            return tf.compat.v1.placeholder(
                converted["dtype"], converted.get("shape"), name=name
            ).op
        raw = getattr(tf.raw_ops, op_type)
        result = raw(**_raw_op_keywords(raw, op_def, converted), name=name)
        if isinstance(result, tf.Operation):
            return result
        flat = tf.nest.flatten(result)
        return flat[0].op if flat else None

    def output(self, node: Any) -> Any:
        return node.outputs[0]

    def outputs(self, node: Any) -> list[tuple[str, str]]:
        names = {"half": "float16"}
        return [(t.name, names.get(t.dtype.name, t.dtype.name)) for t in node.outputs]


def feed_values(case: Case) -> dict[str, np.ndarray]:
    """What a case feeds, by tensor name (its Plan's feeds, without building it)."""
    feeds = {}
    for arg in registry.get_op_def(case.op).inputs:
        value = case.inputs[arg.name]
        if arg.name in case.consts or isinstance(value, Var):
            continue
        if arg.is_list:
            feeds.update({f"{case.name}/{arg.name}_{i}:0": v for i, v in enumerate(value)})
        else:
            feeds[f"{case.name}/{arg.name}:0"] = value
    if case.feed is not None:
        feeds[f"{case.name}/op:0"] = np.asarray(case.feed)
    return feeds


def _declared(case: Case, value: np.ndarray) -> list[int | None]:
    """The shape a case's Placeholder declares for `value`."""
    return [None] * value.ndim if case.unknown_dims else list(value.shape)


def build_ours(case: Case, scope: mg.Scope) -> Plan:
    """Builds `case` in minigraph under `scope` (with minigraph's builders)."""
    return _build(case, _Ours(scope))


def build_tf(case: Case, tf: Any, graph: Any) -> Plan:
    """Builds `case` with TF's own API (`tf.raw_ops`, `tf.constant`, `tf.compat.v1.placeholder`)
    in TF graph `graph`, which must be the default graph. For tests/data/make_tf_op_graphs.py."""
    plan = _build(case, _TF(tf, graph))
    try:
        graph.get_operation_by_name(f"{case.name}/op")
    except KeyError:
        raise ValueError(f"case {case.id}: TF named its node otherwise") from None
    return plan


def _raw_op_keywords(raw: Callable[..., Any], op_def: Any, kwargs: dict[str, Any]) -> dict:
    """`kwargs` (OpDef names) as `tf.raw_ops.<Op>` names them. Its wrapper renames some args
    (Sum's `reduction_indices` is `axis`, Squeeze's `squeeze_dims` too, Select's `t` is `x`)
    but keeps their order: the inputs, then the attrs not inferred from them, those without a
    default first, in OpDef order."""
    import inspect  # noqa: PLC0415 - only the generator needs it

    params = [p for p in inspect.signature(raw).parameters if p != "name"]
    attrs = [a for a in op_def.attrs if a.name not in op_def.inferred_attrs]
    ordered = [a.name for a in op_def.inputs] + [a.name for a in attrs if not a.has_default]
    ordered += [a.name for a in attrs if a.has_default]
    renamed = dict(zip(ordered, params))
    return {renamed[k]: v for k, v in kwargs.items()}


# -- comparing values -----------------------------------------------------------------------------


def _comparable(value: np.ndarray) -> np.ndarray:
    if value.dtype == mg.bfloat16.np_dtype:
        return value.astype(np.float32)
    return value


def assert_same_value(got: Any, want: Any, dtype: str, case: Case, what: str) -> None:
    """`got` (minigraph's) equals `want` (TF's), of minigraph dtype name `dtype`, as `case`
    says (module docstring)."""
    if want is None or got is None:  # an operation fetched: both None
        assert got is None and want is None, what
        return
    got = np.asarray(got)
    assert mg.as_dtype(got.dtype).name == dtype, (what, got.dtype, dtype)
    want = np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if case.deliberate:
        return
    kind = mg.as_dtype(dtype)
    if kind.is_string:
        assert [bytes(v) for v in got.ravel()] == [bytes(v) for v in want.ravel()], what
        return
    if not (kind.is_floating or kind.is_complex):
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)
        return
    got, want = _comparable(got), _comparable(want).astype(_comparable(got).dtype)
    if case.ulps == 0:
        np.testing.assert_array_equal(got, want, err_msg=what)
        if case.zero_sign:
            return
        parts = (np.real, np.imag) if kind.is_complex else (lambda v: v,)
        for part in parts:
            g, w = part(got), part(want)
            same = np.isnan(g) | (np.signbit(g) == np.signbit(w))
            assert same.all(), (what, "signs of zero differ", got, want)
        return
    eps = float(np.finfo(kind.np_dtype).eps) if kind != mg.bfloat16 else 2.0**-7
    finite = np.isfinite(want)
    scale = float(np.max(np.abs(want[finite]), initial=1.0))
    np.testing.assert_allclose(
        got, want, rtol=case.ulps * eps, atol=case.ulps * eps * scale, err_msg=what
    )


# -- compact storage of many small arrays in one .npz ----------------------------------------------


def pack(records: Sequence[tuple[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Many small named arrays as a few .npz entries: one pool per dtype (bfloat16 as its
    uint16 bits, strings as their bytes and lengths), and an index of names, dtypes, shapes
    and offsets. No pickle is needed to read it (`unpack`)."""
    pools: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, int] = {}
    names, dtypes, shapes, offsets, ranks = [], [], [], [], []
    for name, value in records:
        value = np.asarray(value)
        dtype = mg.as_dtype(value.dtype)
        names.append(name.encode())
        dtypes.append(dtype.name.encode())
        ranks.append(value.ndim)
        shapes.extend(value.shape)
        if dtype.is_string:
            data = [bytes(v) for v in value.ravel()]
            lengths = np.array([len(v) for v in data], np.int64)
            offsets.append(sizes.get("string_lengths", 0))
            pools.setdefault("string_lengths", []).append(lengths)
            pools.setdefault("string_bytes", []).append(np.frombuffer(b"".join(data), np.uint8))
            sizes["string_lengths"] = offsets[-1] + lengths.size
            continue
        flat = value.ravel()
        if dtype == mg.bfloat16:
            flat = flat.view(np.uint16)
        offsets.append(sizes.get(dtype.name, 0))
        pools.setdefault(dtype.name, []).append(flat)
        sizes[dtype.name] = offsets[-1] + flat.size
    packed = {f"pool_{k}": np.concatenate(v) for k, v in pools.items()}
    packed.update(
        names=np.array(names, dtype="S"),
        dtypes=np.array(dtypes, dtype="S"),
        shapes=np.array(shapes, np.int64),
        offsets=np.array(offsets, np.int64),
        ranks=np.array(ranks, np.int64),
    )
    return packed


def unpack(data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays `pack` stored, by name."""
    result = {}
    shapes = data["shapes"].tolist()
    position = 0
    string_starts = None
    if "pool_string_lengths" in data:
        string_starts = np.concatenate([[0], np.cumsum(data["pool_string_lengths"])])
    for name, dtype_name, rank, offset in zip(
        data["names"], data["dtypes"], data["ranks"].tolist(), data["offsets"].tolist()
    ):
        shape = tuple(shapes[position : position + rank])
        position += rank
        dtype = mg.as_dtype(dtype_name.decode())
        count = int(np.prod(shape))
        if dtype.is_string:
            blob = data["pool_string_bytes"].tobytes()
            items = [
                blob[string_starts[i] : string_starts[i + 1]] for i in range(offset, offset + count)
            ]
            value = np.empty(count, dtype=object)
            value[:] = items
            result[name.decode()] = value.reshape(shape)
            continue
        flat = data[f"pool_{dtype.name}"][offset : offset + count]
        if dtype == mg.bfloat16:
            flat = flat.view(mg.bfloat16.np_dtype)
        result[name.decode()] = flat.reshape(shape).copy()
    return result
