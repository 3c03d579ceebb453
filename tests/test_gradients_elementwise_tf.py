"""The elementwise gradient rules and the ops they build against a live TensorFlow 2.21:
OpDefs and CPU dtypes of the gradient ops (ReluGrad, ..., Conj), their kernels' values on
grids of special values, `tf.gradients` and `mg.gradients` of the same graphs (broadcasting,
shapes known only at run time, kinks and ties, complex numbers with TF's conjugations, second
order), and gradient graphs exported as GraphDefs that TF imports and runs to the same values.
Runs only where `tensorflow` is importable
(`/work/tfvenv/bin/python -m pytest tests/test_gradients_elementwise_tf.py`)."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

from tensorflow.python.framework import kernels as tf_kernels  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

import minigraph as mg  # noqa: E402
from ops import math as M  # noqa: E402
from ops import reduction  # noqa: E402

tf1 = tf.compat.v1
MG_TYPES = {d.name for d in mg.dtypes.ALL_DTYPES}
GRADIENT_OPS = [row.name for row in M.GRADIENT_OPS]
RNG = np.random.default_rng(5)


def _tf_name(enum: int) -> str:
    return tf.as_dtype(enum).name.replace("half", "float16")


# -- OpDefs and kernels of the gradient ops ------------------------------------------------


@pytest.mark.parametrize("op_type", GRADIENT_OPS)
def test_op_defs_are_tfs(op_type):
    tf_def = op_def_registry.get(op_type)
    mine = mg.registry.get_op_def(op_type)
    assert [a.name for a in mine.inputs] == [a.name for a in tf_def.input_arg]
    assert [a.name for a in mine.outputs] == [a.name for a in tf_def.output_arg]
    assert [a.name for a in mine.attrs] == [a.name for a in tf_def.attr]
    (tf_attr,) = tf_def.attr
    allowed = [_tf_name(t) for t in tf_attr.allowed_values.list.type]
    assert [d.name for d in mine.attr("T").allowed] == [t for t in allowed if t in MG_TYPES]
    if tf_attr.HasField("default_value"):
        assert mine.attr("T").default is mg.as_dtype(_tf_name(tf_attr.default_value.type))
    else:
        assert not mine.attr("T").has_default


@pytest.mark.parametrize("op_type", GRADIENT_OPS)
def test_cpu_kernels_take_tfs_dtypes(op_type):
    want = set()
    for kernel in tf_kernels.get_registered_kernels_for_op(op_type).kernel:
        if kernel.device_type == "CPU":
            for c in kernel.constraint:
                want |= {_tf_name(t) for t in c.allowed_values.list.type}
    (kernel,) = [k for k in mg.registry.kernels_for(op_type) if k.device_type == "CPU"]
    got = {d.name for d in kernel.type_constraints.get("T", ())}
    got = got or {d.name for d in mg.registry.get_op_def(op_type).attr("T").allowed}
    assert got == want & MG_TYPES


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 6.0, 7.5, -3.0, np.inf, -np.inf, np.nan]


def grid(dtype):
    d = np.dtype(dtype)
    if d.kind in "iu":
        values = [0, 1, 2, 6, 7, 100] + ([-1, -7] if d.kind == "i" else [])
        pairs = list(itertools.product(values, repeat=2))
    elif d.kind == "c":
        # No complex infinities: minigraph's complex arithmetic is numpy's there (as the
        # family's RealDiv: 1 / (inf + 0j) is 0), TF's vectorised one gives NaN.
        values = [0j, 1 + 0j, 1 + 2j, -0.5 + 1j, 2 - 3j, complex(0, np.nan)]
        pairs = list(itertools.product(values, repeat=2))
    else:
        pairs = list(itertools.product(SPECIAL, repeat=2))
    a = np.array([p[0] for p in pairs] * 3, dtype=d)  # long enough for TF's vectorised path
    b = np.array([p[1] for p in pairs] * 3, dtype=d)
    return a, b


def mg_run(op_type, *values):
    root = mg.Scope.new_root_scope()
    phs = [mg.Placeholder(root, mg.as_dtype(v.dtype)) for v in values]
    node = getattr(M, op_type)(root, *phs)
    with mg.Session(root) as sess:
        return sess.run(node, dict(zip(phs, values)))


def tf_raw(op_type, *values):
    names = [a.name for a in mg.registry.get_op_def(op_type).inputs]
    with tf.device("/cpu:0"):
        args = {n: tf.constant(v) for n, v in zip(names, values)}
        return getattr(tf.raw_ops, op_type)(**args).numpy()


def assert_like_tf(got, want, dtype):
    """Equal NaN positions and infinities; finite values within a few ulps (a zero's sign is
    not compared: TF's differs between its scalar and vectorised paths)."""
    d = np.dtype(dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    if d.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    wide = np.complex128 if d.kind == "c" else np.float64
    g, w = got.astype(wide), want.astype(wide)
    parts = (g.real, g.imag, w.real, w.imag) if d.kind == "c" else (g, np.zeros(1), w, np.zeros(1))
    rtol = {2: 4e-3}.get(d.itemsize, 1e-6 if d in (np.float32, np.complex64) else 1e-13)
    if d == mg.bfloat16.np_dtype:
        rtol = 2e-2
    for mine, theirs in ((parts[0], parts[2]), (parts[1], parts[3])):
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(theirs))
        finite = np.isfinite(theirs)
        np.testing.assert_array_equal(mine[~finite & ~np.isnan(theirs)],
                                      theirs[~finite & ~np.isnan(theirs)])  # fmt: skip
        np.testing.assert_allclose(mine[finite], theirs[finite], rtol=rtol, atol=rtol * 1e-3)


def value_cases():
    out = []
    for row in M.GRADIENT_OPS:
        for name in row.cpu or row.types:
            out.append(pytest.param(row.name, name, id=f"{row.name}-{name}"))
    return out


@pytest.mark.parametrize("op_type, dtype_name", value_cases())
def test_kernel_values_are_tfs(op_type, dtype_name):
    dtype = mg.as_dtype(dtype_name).np_dtype
    a, b = grid(dtype)
    args = (a,) if op_type == "Conj" else (a, b)
    with np.errstate(all="ignore"):
        assert_like_tf(mg_run(op_type, *args), tf_raw(op_type, *args), dtype)


# -- the same graphs in TF and minigraph -------------------------------------------------------


class MgOps:
    """`ops.Mul(a, b)` builds minigraph's Mul in `scope` (inputs by position, attrs by name)."""

    def __init__(self, scope):
        self.scope = scope

    def __getattr__(self, op_type):
        builder = getattr(M, op_type)

        def build(*args, **attrs):
            attrs = {k: mg.as_dtype(v) if k == "DstT" else v for k, v in attrs.items()}
            return builder(self.scope, *args, **attrs).output

        return build


class TfOps:
    """`ops.Mul(a, b)` builds TF's Mul (tf.raw_ops, TF's own op types)."""

    def __getattr__(self, op_type):
        names = [a.name for a in mg.registry.get_op_def(op_type).inputs]
        fn = getattr(tf.raw_ops, op_type)

        def build(*args, **attrs):
            attrs = {k: tf.as_dtype(v) if k == "DstT" else v for k, v in attrs.items()}
            args = [tf.constant(a) if isinstance(a, (float, int)) else a for a in args]
            return fn(**dict(zip(names, args)), **attrs)

        return build


def nth_gradients(gradients, total, y, xs, grad_ys, order, one):
    """The gradients of y, then (order > 1) those of total(the gradients), the sum of all
    their elements, seeded with `one` (None, or a complex 1: complex ys need a seed)."""
    grads = gradients(y, xs, grad_ys=grad_ys)
    for _ in range(order - 1):
        grads = gradients(total([g for g in grads if g is not None]), xs, grad_ys=one)
    return grads


def mg_total(scope):
    def total(grads):
        sums = [reduction.Sum(scope, g, list(range(g.shape.rank))).output for g in grads]
        return sums[0] if len(sums) == 1 else M.AddN(scope, sums).output

    return total


def tf_total(grads):
    sums = [tf.reduce_sum(g) for g in grads]
    return sums[0] if len(sums) == 1 else tf.add_n(sums)


def both(build, values, shapes=None, grad_ys=None, order=1):
    """The gradients of build(ops, *xs) with respect to each x, in minigraph and in TF (None
    where there is none): ([mine], [TF's], minigraph's graph, fetch names, feeds by name)."""
    values = [np.asarray(v) for v in values]
    shapes = shapes or [v.shape for v in values]
    root = mg.Scope.new_root_scope()
    phs = [
        mg.Placeholder(root.with_op_name(f"x{i}"), mg.as_dtype(v.dtype), s)
        for i, (v, s) in enumerate(zip(values, shapes))
    ]
    y = build(MgOps(root), *phs)
    seed = None if grad_ys is None else np.asarray(grad_ys, y.dtype.np_dtype)
    one = np.ones((), y.dtype.np_dtype) if y.dtype.is_complex else None
    grads = nth_gradients(mg.gradients, mg_total(root), y, phs, seed, order, one)
    fetched = [g for g in grads if g is not None]
    with mg.Session(root) as sess:
        mine_values = iter(sess.run(fetched, dict(zip(phs, values))))
    mine = [None if g is None else next(mine_values) for g in grads]
    graph = tf.Graph()
    with graph.as_default():
        tphs = [tf1.placeholder(tf.as_dtype(v.dtype), s) for v, s in zip(values, shapes)]
        ty = build(TfOps(), *tphs)
        tseed = None if seed is None else tf.constant(seed)
        tone = None if one is None else tf.constant(one)
        tgrads = nth_gradients(tf1.gradients, tf_total, ty, tphs, tseed, order, tone)
        tfetched = [g for g in tgrads if g is not None]
        with tf1.Session(graph=graph) as sess:
            theirs_values = iter(sess.run(tfetched, dict(zip(tphs, values))))
    theirs = [None if g is None else next(theirs_values) for g in tgrads]
    feeds = {f"x{i}:0": v for i, v in enumerate(values)}
    return mine, theirs, root, [g.name for g in fetched], feeds


def assert_same(mine, theirs, rtol=1e-6):
    assert [m is None for m in mine] == [t is None for t in theirs]
    for m, t in zip(mine, theirs):
        if m is None:
            continue
        t = np.asarray(t)
        assert m.dtype == t.dtype and m.shape == t.shape
        # Absolute errors relative to the largest finite value (cancellation in small ones).
        scale = float(np.max(np.abs(np.nan_to_num(t, posinf=0, neginf=0)), initial=0))
        np.testing.assert_allclose(m, t, rtol=rtol, atol=rtol * scale, equal_nan=True)


F32 = np.float32


def f32(*shape, low=0.5, high=2.0):
    return RNG.uniform(low, high, shape).astype(F32)


CASES = {
    "affine broadcast": (lambda o, x, w, b: o.AddV2(o.Mul(x, w), b),
                         [f32(4, 3), f32(3), f32(1)], None),
    "sub unknown shapes": (lambda o, x, y: o.Sub(o.Mul(x, x), y),
                           [f32(2, 1, 3), f32(4, 1)], [[None, None, None], None]),
    "realdiv and div": (lambda o, x, y: o.AddV2(o.RealDiv(x, y), o.Div(y, x)),
                        [f32(2, 3), f32(2, 1)], [[None, 3], [2, None]]),
    "maximum minimum ties": (lambda o, x, y: o.AddV2(o.Maximum(x, y), o.Minimum(x, o.Neg(y))),
                             [np.array([1.0, 2.0, -1.0, 3.0], F32), np.array(1.0, F32)], None),
    "pow at non-positive bases": (lambda o, x, y: o.Pow(x, y),
                                  [np.array([0.0, -2.0, 2.0, 3.0, 0.0, -1.5], F32),
                                   np.array([2.0, 2.0, 0.5, -1.0, 0.5, 0.5], F32)], None),
    "squared difference": (lambda o, x, y: o.SquaredDifference(x, y),
                           [f32(3, 2), f32(2)], [None, [None]]),
    "floor mod and floor div": (lambda o, x, y: o.AddV2(o.FloorMod(x, y), o.FloorDiv(x, y)),
                                [np.array([5.3, -5.3, 7.7], F32), np.array([2.0, 2.0, -3.0], F32)],
                                None),
    "rounding has no gradient": (lambda o, x: o.AddN([o.Floor(x), o.Ceil(x), o.Round(x)]),
                                 [np.array([0.4, 1.6], F32)], None),
    "unary chain": (lambda o, x: o.Tanh(o.Sigmoid(o.Exp(o.Log1p(o.Square(o.Abs(x)))))),
                    [np.array([0.0, -0.7, 1.2, 0.3], F32)], None),
    "roots and logs": (lambda o, x: o.AddN([o.Sqrt(x), o.Rsqrt(x), o.Reciprocal(x), o.Log(x),
                                            o.Sign(x), o.Neg(x)]),
                       [np.array([0.25, 1.0, 4.0, 0.0], F32)], None),
    "activations at their kinks": (lambda o, x: o.AddN([o.Relu(x), o.Relu6(x), o.Elu(x),
                                                        o.Softplus(x)]),
                                   [np.array([0.0, -0.0, 6.0, -2.0, 3.0, 8.0, -30.0], F32)], None),
    "casts": (lambda o, x: o.Cast(o.Square(o.Cast(x, DstT="float64")), DstT="float16"),
              [np.array([0.5, -1.5], F32)], None),
    "add n": (lambda o, x, y: o.AddN([x, y, x]), [f32(3), f32(3)], None),
    "float16": (lambda o, x, y: o.Tanh(o.Mul(x, y)),
                [f32(2, 3).astype(np.float16), f32(3).astype(np.float16)], None),
    "float64 unknown rank": (lambda o, x, y: o.Pow(o.Maximum(x, y), y),
                             [RNG.uniform(0.5, 2, (3, 1)), RNG.uniform(0.5, 2, (2,))],
                             [None, None]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_are_tfs(name):
    build, values, shapes = CASES[name]
    mine, theirs, *_ = both(build, values, shapes)
    rtol = 2e-3 if any(np.asarray(v).dtype == np.float16 for v in values) else 2e-6
    if name in ("casts",):
        rtol = 2e-3
    assert_same(mine, theirs, rtol=rtol)


def c64(*shape):
    return (RNG.uniform(0.5, 2, shape) + 1j * RNG.uniform(-1, 1, shape)).astype(np.complex64)


COMPLEX_CASES = {
    "mul div": lambda o, x, y: o.RealDiv(o.Mul(x, y), o.AddV2(x, y)),
    "exp log": lambda o, x, y: o.Mul(o.Exp(x), o.Log(y)),
    "roots": lambda o, x, y: o.AddV2(
        o.AddV2(o.Sqrt(x), o.Rsqrt(y)), o.AddV2(o.Reciprocal(x), o.Square(y))
    ),
    "tanh sigmoid": lambda o, x, y: o.Mul(o.Tanh(x), o.Sigmoid(y)),
    "pow": lambda o, x, y: o.Pow(x, y),
    "conj": lambda o, x, y: o.Mul(o.Conj(x), o.Log1p(y)),
    "sub neg": lambda o, x, y: o.Sub(o.Neg(x), y),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_gradients_are_tfs(name):
    values = [c64(2, 3), c64(3)]
    seed = c64(2, 3)
    mine, theirs, *_ = both(COMPLEX_CASES[name], values, grad_ys=seed)
    assert_same(mine, theirs, rtol=2e-5)


def test_complex_squared_difference_differs_from_tf_only_for_imaginary_gradients():
    x, y = c64(3), c64(3)
    build = COMPLEX_CASES["sd"] = lambda o, a, b: o.SquaredDifference(a, b)
    real_seed = np.array([1.0, 2.0, -1.0], np.complex64)
    mine, theirs, *_ = both(build, [x, y], grad_ys=real_seed)
    assert_same(mine, theirs, rtol=1e-6)
    imaginary = np.array([1j, 2j, -1j], np.complex64)
    mine, theirs, *_ = both(build, [x, y], grad_ys=imaginary)
    # z = |x - y|^2 is real: an imaginary seed changes nothing (ours: 0); TF's rule gives
    # 2 * seed * (x - y).
    np.testing.assert_allclose(mine[0], 0, atol=1e-7)
    np.testing.assert_allclose(theirs[0], 2 * imaginary * (x - y), rtol=1e-5)
    del COMPLEX_CASES["sd"]


SECOND_ORDER = {
    "tanh": (lambda o, x: o.Tanh(x), [f32(4, low=-1.5, high=1.5)]),
    "sigmoid": (lambda o, x: o.Sigmoid(x), [f32(4, low=-2, high=2)]),
    "sqrt rsqrt reciprocal": (lambda o, x: o.AddN([o.Sqrt(x), o.Rsqrt(x), o.Reciprocal(x)]),
                              [f32(4)]),
    "activations": (lambda o, x: o.AddN([o.Relu(o.Square(x)), o.Elu(o.Mul(x, x)),
                                         o.Softplus(x), o.Relu6(o.Square(x))]),
                    [np.array([-1.2, 0.4, 2.1, 2.7], F32)]),
    "elu negative": (lambda o, x: o.Elu(o.Mul(x, x)), [np.array([0.5, 1.5], F32)]),
    "mul broadcast": (lambda o, x, y: o.Mul(o.Mul(x, y), y), [f32(2, 3), f32(3)]),
    "exp log1p": (lambda o, x: o.Exp(o.Log1p(o.Square(x))), [f32(3)]),
    "div": (lambda o, x, y: o.RealDiv(o.Square(x), y), [f32(3), f32(3)]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_order_gradients_are_tfs(name):
    build, values = SECOND_ORDER[name]
    mine, theirs, *_ = both(build, values, order=2)
    assert_same(mine, theirs, rtol=2e-5)


def test_complex_second_order_is_tfs():
    build = lambda o, x: o.Mul(o.Tanh(x), o.Rsqrt(x))  # noqa: E731
    mine, theirs, *_ = both(build, [c64(3)], grad_ys=c64(3), order=2)
    assert_same(mine, theirs, rtol=2e-5)


# -- gradient graphs exported to TF ----------------------------------------------------------


def run_in_tf(graph_def, fetches, feeds):
    tf_graph_def = tf1.GraphDef.FromString(graph_def.SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf_graph_def, name="")
    with tf1.Session(graph=graph) as session:
        return session.run(fetches, feeds)


EXPORTED = [
    ("sub unknown shapes", CASES, 1, None),
    ("affine broadcast", CASES, 1, None),
    ("activations at their kinks", CASES, 1, None),
    ("maximum minimum ties", CASES, 1, None),
    ("pow at non-positive bases", CASES, 1, None),
    ("float64 unknown rank", CASES, 1, None),
    ("roots and logs", CASES, 1, None),
    ("sqrt rsqrt reciprocal", SECOND_ORDER, 2, None),
    ("activations", SECOND_ORDER, 2, None),
    ("tanh", SECOND_ORDER, 3, None),
    ("roots", COMPLEX_CASES, 1, "complex"),
    ("conj", COMPLEX_CASES, 1, "complex"),
]


@pytest.mark.parametrize(
    "name, table, order, kind", EXPORTED, ids=[f"{e[0]}-order{e[2]}" for e in EXPORTED]
)
def test_gradient_graphs_run_in_tensorflow_with_the_same_values(name, table, order, kind):
    if kind == "complex":
        build, values, shapes, seed = table[name], [c64(2, 3), c64(3)], None, c64(2, 3)
    else:
        entry = table[name]
        build, values = entry[0], entry[1]
        shapes = entry[2] if len(entry) > 2 else None
        seed = None
    mine, _, root, fetches, feeds = both(build, values, shapes, grad_ys=seed, order=order)
    graph_def = root.graph.as_graph_def()
    theirs = run_in_tf(graph_def, fetches, feeds)
    live = [m for m in mine if m is not None]
    assert len(live) == len(theirs)
    for a, b in zip(live, theirs):
        b = np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        scale = float(np.max(np.abs(np.nan_to_num(b, posinf=0, neginf=0))))
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6 * scale, equal_nan=True)
    types = {node.op for node in graph_def.node}
    if name == "sub unknown shapes":
        assert {"BroadcastGradientArgs", "Shape", "Sum", "Reshape"} <= types
    if name == "activations" and order == 2:
        assert {"ReluGrad", "EluGrad", "Relu6Grad", "SigmoidGrad"} <= types
