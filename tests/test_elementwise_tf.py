"""The elementwise family (ops/math.py) against a live TensorFlow 2.21: OpDefs (names, argument
and attr names and order, allowed dtypes, defaults), the dtypes TF's CPU kernels register, and
values on grids of edge cases (NaN, infinities, -0.0, huge and tiny values, extreme integers)
for every op and every dtype its kernel takes, Cast with Truncate for every pair of dtypes,
BroadcastGradientArgs on random shapes, and TF's run-time error messages. Runs only where
`tensorflow` is importable (`/work/tfvenv/bin/python -m pytest tests/test_elementwise_tf.py`).

Agreement means: bit for bit for integers, bools, and the ops TF computes with one rounding per
operation; within a few ulps for TF's approximated transcendental functions (Eigen's exp, log,
tanh, ...); denormal results compared as zero where TF flushes them (its CPU threads run with
denormals flushed to zero, a deliberate difference). Round of int32/int64 is the identity here
(TF 2.21's CPU kernel returns 0s, a bug, also deliberate).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from _elementwise_helpers import ROWS, cpu_types, np_dtype

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

from tensorflow.python.framework import kernels as tf_kernels  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

import minigraph as mg  # noqa: E402
from ops import math as M  # noqa: E402

OPS = sorted(ROWS) + ["AddN", "BroadcastGradientArgs", "Cast", "Range"]
# The dtypes minigraph has (TF's others: qint*, variant, resource, float8, int4, ...).
MG_TYPES = {d.name for d in mg.dtypes.ALL_DTYPES}


def _tf_name(enum: int) -> str:
    return tf.as_dtype(enum).name.replace("half", "float16")


def _mg_name(dtype: mg.DType) -> str:
    return dtype.name


# -- OpDefs and kernels ---------------------------------------------------------------------


@pytest.mark.parametrize("op_type", OPS)
def test_op_defs_are_tfs(op_type):
    tf_def = op_def_registry.get(op_type)
    mine = mg.registry.get_op_def(op_type)
    assert [a.name for a in mine.inputs] == [a.name for a in tf_def.input_arg]
    assert [a.name for a in mine.outputs] == [a.name for a in tf_def.output_arg]
    assert [a.name for a in mine.attrs] == [a.name for a in tf_def.attr]
    for tf_attr in tf_def.attr:
        attr = mine.attr(tf_attr.name)
        if tf_attr.type == "type":
            allowed = [_tf_name(t) for t in tf_attr.allowed_values.list.type]
            want = [t for t in allowed if t in MG_TYPES] if allowed else None
            got = [d.name for d in attr.allowed] if attr.allowed else None
            assert got == want, tf_attr.name
        if tf_attr.HasField("default_value"):
            default = tf_attr.default_value
            field = default.WhichOneof("value")
            value = getattr(default, field)
            if field == "type":
                value = mg.as_dtype(_tf_name(value))
            assert attr.default == value, tf_attr.name
        else:
            assert not attr.has_default, tf_attr.name
    for tf_arg, arg in zip(tf_def.input_arg, mine.inputs):
        assert (arg.type_attr or "") == tf_arg.type_attr
        assert (arg.number_attr or "") == tf_arg.number_attr
        if tf_arg.type:
            assert arg.dtype.name == _tf_name(tf_arg.type)


def _tf_cpu_types(op_type: str, attr: str = "T") -> set[str] | None:
    found: set[str] = set()
    constrained = False
    for kernel in tf_kernels.get_registered_kernels_for_op(op_type).kernel:
        if kernel.device_type != "CPU":
            continue
        for c in kernel.constraint:
            if c.name == attr:
                constrained = True
                found |= {_tf_name(t) for t in c.allowed_values.list.type}
    return (found & MG_TYPES) if constrained else None


@pytest.mark.parametrize("op_type", sorted(ROWS) + ["AddN"])
def test_cpu_kernels_take_tfs_dtypes(op_type):
    want = _tf_cpu_types(op_type)
    if op_type == "Round":
        assert want == set(cpu_types(op_type))  # int32/int64 included (as the identity)
    if want is None:  # unconstrained: every dtype the OpDef allows (or bools)
        row = ROWS.get(op_type)
        assert row is None or row.cpu is None
        return
    (kernel,) = [k for k in mg.registry.kernels_for(op_type) if k.device_type == "CPU"]
    got = {d.name for d in kernel.type_constraints.get("T", ())}
    if not got:  # unconstrained here: the OpDef's own list
        got = {d.name for d in mg.registry.get_op_def(op_type).attr("T").allowed or ()} or MG_TYPES
    assert got == want


# -- values ---------------------------------------------------------------------------------

_ARG = {"Relu": "features", "Relu6": "features", "Elu": "features", "Softplus": "features"}


def tf_run(op_type: str, *values: np.ndarray, **attrs) -> np.ndarray | Exception:
    row = ROWS.get(op_type)
    names = row.inputs if row else ("x", "y")
    if op_type in _ARG:
        names = (_ARG[op_type],)
    try:
        with tf.device("/cpu:0"):
            args = {n: tf.constant(v) for n, v in zip(names, values)}
            return getattr(tf.raw_ops, op_type)(**args, **attrs).numpy()
    except Exception as e:  # noqa: BLE001 - TF's error, compared below
        return e


def mg_run(op_type: str, *values: np.ndarray, **attrs) -> np.ndarray | Exception:
    scope = mg.Scope.new_root_scope()
    holders = [mg.Placeholder(scope, mg.as_dtype(v.dtype)) for v in values]
    try:
        node = getattr(M, op_type)(scope, *holders, **attrs)
        with mg.Session(scope, mg.SessionConfig(check_kernel_outputs=True)) as sess:
            return sess.run(node, dict(zip(holders, values)))
    except mg.OpError as e:
        return e


def _flushed(values: np.ndarray) -> np.ndarray:
    """Denormals as TF's CPU leaves them: zero."""
    if values.dtype.kind == "c":
        return _flushed(values.real) + 1j * _flushed(values.imag)
    tiny = {2: 6.103515625e-05, 4: 1.1754943508222875e-38, 8: 2.2250738585072014e-308}
    smallest = tiny[values.dtype.itemsize] if values.dtype != np_dtype("bfloat16") else tiny[4]
    if values.dtype.itemsize == 2 and values.dtype != np_dtype("bfloat16"):
        return values.astype(np.float64)  # TF keeps float16 denormals (F16C conversions)
    wide = values.astype(np.float64)
    return np.where(np.abs(wide) < smallest, 0.0, wide)


# Ops TF computes with Eigen's approximations (a few ulps) for these dtypes.
APPROX = {"Exp", "Log", "Log1p", "Tanh", "Sigmoid", "Softplus", "Elu", "Rsqrt", "Reciprocal"}
APPROX_BINARY = {"Pow", "RealDiv", "Div", "FloorDiv", "FloorMod"}


def assert_agrees(op_type: str, got: np.ndarray, want: np.ndarray, inputs) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    kind = got.dtype.kind
    if kind in "biuO":
        assert got.tolist() == want.tolist()
        return
    g, w = _flushed(got), _flushed(want)
    if kind == "c":
        rtol = 1e-4 if got.dtype == np.complex64 else 1e-12
        if op_type in ("Pow", "Log1p"):
            rtol = 1e-3 if got.dtype == np.complex64 else 1e-9  # conditioning, see the README
        nan = np.isnan(g) | np.isnan(w)
        assert np.array_equal(np.isnan(g), np.isnan(w)), (inputs, got, want)
        np.testing.assert_allclose(g[~nan], w[~nan], rtol=rtol, atol=rtol)
        return
    half = got.dtype.itemsize == 2
    exact = (half and op_type != "Rsqrt") or op_type not in APPROX | APPROX_BINARY
    if op_type in ("Maximum", "Minimum"):
        g, w = g + 0.0, w + 0.0  # the sign of a zero between -0.0 and 0.0 is unspecified
    if exact:
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        bad = np.flatnonzero(~same.reshape(-1))
        assert not bad.size, [
            (tuple(v.reshape(-1)[i] for v in np.broadcast_arrays(*inputs)), g.reshape(-1)[i],
             w.reshape(-1)[i]) for i in bad[:5]
        ]  # fmt: skip
        return
    # A few ulps (Eigen's pow is not correctly rounded for large results; half Rsqrt: 1 ulp).
    eps = float(np.finfo(np.float32).eps * 2**16 if got.dtype == np_dtype("bfloat16") else
                np.finfo(got.dtype).eps)  # fmt: skip
    ulps = 32 if op_type == "Pow" else (1.01 if half else 8)
    np.testing.assert_allclose(g, w, rtol=ulps * eps, atol=4 * eps, equal_nan=True)


def float_grid(dtype: np.dtype) -> np.ndarray:
    rng = np.random.default_rng(11)
    finfo = np.finfo(np.float32 if dtype == np_dtype("bfloat16") else dtype)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                float(finfo.max), float(-finfo.max), float(finfo.tiny), 88.0, -88.0, 11.0,
                -11.0, 20.0, -20.0, 700.0, -745.0, 1e-3, -1e-3]  # fmt: skip
    spread = rng.standard_normal(300) * 10.0 ** rng.integers(-4, 4, 300)
    with np.errstate(all="ignore"):
        return np.concatenate([specials, spread]).astype(dtype)


def int_grid(dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(12)
    specials = [int(info.min), int(info.min) + 1, int(info.max), 0, 1, 2, 7, 100]
    if info.min < 0:
        specials += [-1, -2, -7, -100]
    specials = [v for v in specials if info.min <= v <= info.max]
    return np.concatenate(
        [np.array(specials, dtype), rng.integers(info.min, info.max, 200, dtype, endpoint=True)]
    )


def grid(dtype_name: str) -> np.ndarray:
    t = np_dtype(dtype_name)
    if t.kind == "b":
        return np.array([True, False])
    if t.kind in "iu":
        return int_grid(t)
    if t.kind == "c":
        real = float_grid(np.float32 if t == np.complex64 else np.float64)
        finite = real[np.isfinite(real) & (np.abs(real) < 1e3)]
        out = np.empty(finite.size, t)
        out.real, out.imag = finite, finite[::-1]
        return out
    if t.kind == "O":
        return np.array([b"", b"a", b"ab", b"a\x00"], object)
    return float_grid(t)


def _pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of a sample of the grid (a broadcast of a column against a row)."""
    sample = values[:: max(1, values.size // 40)]
    return sample[:, None], sample[None, :]


UNARY = [name for name, row in ROWS.items() if len(row.inputs) == 1]
BINARY = [name for name, row in ROWS.items() if len(row.inputs) == 2]


@pytest.mark.parametrize(
    "op_type, dtype",
    [(op, t) for op in UNARY for t in cpu_types(op)],
)
def test_unary_values_are_tfs(op_type, dtype):
    x = grid(dtype)
    want, got = tf_run(op_type, x), mg_run(op_type, x)
    if op_type == "Round" and x.dtype.kind == "i":
        assert not np.any(want) and got.tolist() == x.tolist()  # TF's bug: see the docstring
        return
    assert not isinstance(want, Exception), want
    with np.errstate(all="ignore"):
        assert_agrees(op_type, got, want, (x,))


@pytest.mark.parametrize(
    "op_type, dtype",
    [(op, t) for op in BINARY for t in cpu_types(op) if t != "string"]
    + [("Equal", "string"), ("NotEqual", "string")],
)
def test_binary_values_are_tfs(op_type, dtype):
    x, y = _pairs(grid(dtype))
    t = x.dtype
    if op_type in ("Div", "FloorDiv", "FloorMod") and t.kind in "iu":
        y = np.where(y == 0, t.type(3), y)
    if op_type == "Pow" and t.kind == "i":
        y = np.abs(y % 40).astype(t)  # non-negative exponents (negative ones raise)
    want, got = tf_run(op_type, x, y), mg_run(op_type, x, y)
    assert not isinstance(want, Exception), want
    with np.errstate(all="ignore"):
        assert_agrees(op_type, got, want, (x, y))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16", "complex128"])
def test_add_n_values_are_tfs(dtype):
    x = grid(dtype)
    inputs = [x, x[::-1].copy(), np.roll(x, 3), x]
    want = tf.raw_ops.AddN(inputs=[tf.constant(v) for v in inputs]).numpy()
    got = _mg_add_n(inputs)
    with np.errstate(all="ignore"):
        assert_agrees("AddN", got, want, inputs)


def _mg_add_n(inputs):
    scope = mg.Scope.new_root_scope()
    holders = [mg.Placeholder(scope, mg.as_dtype(v.dtype)) for v in inputs]
    with mg.Session(scope) as sess:
        return sess.run(M.AddN(scope, holders), dict(zip(holders, inputs)))


# -- Cast with Truncate --------------------------------------------------------------------------

CAST_TYPES = ["bfloat16", "float16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("src", CAST_TYPES)
@pytest.mark.parametrize("dst", CAST_TYPES)
def test_cast_truncate_is_tfs(src, dst):
    x = grid(src)
    if np_dtype(src).kind != "c":
        x = x[np.abs(x.astype(np.float64)) >= 1e-30]  # TF flushes denormal sources
    with tf.device("/cpu:0"):
        want = tf.raw_ops.Cast(x=tf.constant(x), DstT=tf.as_dtype(np_dtype(dst)), Truncate=True)
    scope = mg.Scope.new_root_scope()
    p = mg.Placeholder(scope, mg.as_dtype(src))
    with mg.Session(scope) as sess, np.errstate(all="ignore"):
        got = sess.run(M.Cast(scope, p, mg.as_dtype(dst), Truncate=True), {p: x})
        assert_agrees("Cast", got, want.numpy(), (x,))


# -- BroadcastGradientArgs ----------------------------------------------------------------------


def test_broadcast_gradient_args_on_random_shapes_are_tfs():
    rng = np.random.default_rng(5)
    for _ in range(300):
        a = rng.integers(0, 4, rng.integers(0, 5)).tolist()
        b = rng.integers(0, 4, rng.integers(0, 5)).tolist()
        if rng.random() < 0.5:  # mostly broadcastable pairs
            b = [d if rng.random() < 0.6 else 1 for d in a[len(a) - len(b) :]] if a else b
        try:
            want = [
                r.numpy().tolist()
                for r in tf.raw_ops.BroadcastGradientArgs(s0=tf.constant(a, tf.int32),
                                                          s1=tf.constant(b, tf.int32))
            ]  # fmt: skip
        except tf.errors.InvalidArgumentError as e:
            assert M.broadcast_gradient_args(a, b) is None
            assert f"Incompatible shapes: [{','.join(map(str, a))}] vs." in str(e)
            continue
        assert [list(r) for r in M.broadcast_gradient_args(a, b)] == want, (a, b)


# -- run-time errors -------------------------------------------------------------------------


def _message(e: Exception) -> str:
    return re.split(r" \[Op:| \[\[", str(getattr(e, "message", e)))[0].split("}} ")[-1]


@pytest.mark.parametrize(
    "op_type, x, y",
    [
        ("Div", np.array([1, 2], np.int32), np.array([1, 0], np.int32)),
        ("FloorDiv", np.array([1, 2], np.uint8), np.array(0, np.uint8)),
        ("FloorMod", np.array([1, 2], np.int64), np.array([0, 1], np.int64)),
        ("Pow", np.array([2], np.int32), np.array([-1], np.int32)),
        ("AddV2", np.ones((2, 3), np.float32), np.ones(4, np.float32)),
        ("Equal", np.ones((1, 2), np.int32), np.ones(3, np.int32)),
    ],
)
def test_run_time_messages_are_tfs(op_type, x, y):
    want, got = tf_run(op_type, x, y), mg_run(op_type, x, y)
    assert isinstance(want, tf.errors.InvalidArgumentError)
    assert isinstance(got, mg.InvalidArgumentError)
    assert _message(want) in got.message, (_message(want), got.message)
