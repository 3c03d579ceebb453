"""The array family's gradient rules and the ops they add against a live TensorFlow 2.21:
`tf.gradients` and `mg.gradients` of the same graphs (static shapes, dims known only at run
time, run-time perms, multiples, bounds and axes, second order), StridedSliceGrad and
InvertPermutation's OpDefs, values and error messages, and gradient graphs exported as
GraphDefs that TF imports and runs to the same values. Runs only where `tensorflow` is
importable (`/work/tfvenv/bin/python -m pytest tests/test_gradients_array_tf.py`)."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402
from test_strided_slice import encode, keys  # noqa: E402

import minigraph as mg  # noqa: E402
from ops import array as A  # noqa: E402
from ops import math as M  # noqa: E402
from ops import reduction  # noqa: E402

tf1 = tf.compat.v1
RNG = np.random.default_rng(23)
F32 = np.float32


def f32(*shape):
    return RNG.uniform(-2.0, 2.0, shape).astype(F32)


def _module_of(op_type):
    return A if hasattr(A, op_type) else M if hasattr(M, op_type) else reduction


class MgOps:
    """`o.Tile(x, [2, 1])` builds minigraph's op in `scope` (inputs by position, attrs by
    name); `o.getitem(x, key)` is `x[key]`."""

    def __init__(self, scope):
        self.scope = scope

    def getitem(self, x, key):
        return x[key]

    def __getattr__(self, op_type):
        builder = getattr(_module_of(op_type), op_type)

        def build(*args, **attrs):
            node = builder(self.scope, *args, **attrs)
            return node.outputs if op_type == "Unpack" else node.output

        return build


class TfOps:
    """The same calls building TF's ops (tf.raw_ops; inputs by position, as the raw op's
    Python signature names them: ExpandDims' `dim` is `axis` there, Select's `t` and `e` are
    `x` and `y`)."""

    def getitem(self, x, key):
        return x[key]

    def __getattr__(self, op_type):
        fn = getattr(tf.raw_ops, op_type)
        names = list(inspect.signature(fn).parameters)

        def tensor(a):
            if isinstance(a, (list, tuple)) and any(isinstance(e, tf.Tensor) for e in a):
                return [tensor(e) for e in a]
            return a if isinstance(a, tf.Tensor) else tf.constant(a)

        def build(*args, **attrs):
            return fn(**{n: tensor(a) for n, a in zip(names, args)}, **attrs)

        return build


def total_mg(scope):
    def total(grads):
        sums = [reduction.Sum(scope, A.Reshape(scope, g, [-1]), 0).output for g in grads]
        return sums[0] if len(sums) == 1 else M.AddN(scope, sums).output

    return total


def total_tf(grads):
    sums = [tf.reduce_sum(g) for g in grads]
    return sums[0] if len(sums) == 1 else tf.add_n(sums)


def nth_gradients(gradients, total, y, xs, order):
    grads = gradients(y, xs)
    for _ in range(order - 1):
        grads = gradients(total([g for g in grads if g is not None]), xs)
    return grads


def both(build, values, shapes=None, order=1):
    """The gradients of build(o, *xs) with respect to each x in minigraph and in TF (None where
    there is none): ([mine], [TF's], minigraph's root scope, fetch names, feeds by name)."""
    values = [np.asarray(v) for v in values]
    shapes = shapes or [v.shape for v in values]
    root = mg.Scope.new_root_scope()
    phs = [mg.Placeholder(root.with_op_name(f"x{i}"), mg.as_dtype(v.dtype), s).output
           for i, (v, s) in enumerate(zip(values, shapes))]  # fmt: skip
    with root.as_default():
        y = build(MgOps(root), *phs)
        grads = nth_gradients(mg.gradients, total_mg(root), y, phs, order)
    fetched = [g for g in grads if g is not None]
    with mg.Session(root) as sess:
        mine_values = iter(sess.run(fetched, dict(zip(phs, values))))
    mine = [None if g is None else next(mine_values) for g in grads]
    graph = tf.Graph()
    with graph.as_default():
        tphs = [tf1.placeholder(tf.as_dtype(v.dtype), s) for v, s in zip(values, shapes)]
        ty = build(TfOps(), *tphs)
        tgrads = nth_gradients(tf1.gradients, total_tf, ty, tphs, order)
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
        scale = float(np.max(np.abs(t), initial=0))
        np.testing.assert_allclose(m, t, rtol=rtol, atol=rtol * scale)


def hidden_i32(o, value):
    """An int32 value TF and minigraph see only at run time (Identity of a constant)."""
    return o.Identity(np.asarray(value, np.int32)) if isinstance(o, TfOps) else mg.Identity(
        o.scope, mg.Const(o.scope, np.asarray(value, np.int32))).output  # fmt: skip


COND = np.array([[True], [False], [True]])

# name -> (build(o, *xs), values, static shapes or None)
CASES = {
    "reshape": (lambda o, x: o.Tanh(o.Reshape(x, [3, -1])), [f32(2, 3, 2)], None),
    "reshape unknown dims": (lambda o, x: o.Reshape(o.Mul(x, x), [-1]), [f32(2, 3)],
                             [[None, 3]]),
    "expand dims and squeeze": (lambda o, x: o.Squeeze(o.Mul(o.ExpandDims(x, 1), x)),
                                [f32(3, 1)], [[None, 1]]),
    "transpose": (lambda o, x: o.Mul(o.Transpose(x, [2, 0, 1]), o.Transpose(x, [2, 0, 1])),
                  [f32(2, 3, 4)], None),
    "transpose run-time perm": (lambda o, x: o.Square(o.Transpose(x, hidden_i32(o, [1, 2, 0]))),
                                [f32(2, 3, 4)], [None]),
    "strided slice": (lambda o, x: o.Square(o.getitem(x, (slice(1, None), slice(None, None, -2),
                                                          None, 2))),
                      [f32(3, 4, 5)], None),
    "strided slice unknown dims": (lambda o, x: o.Square(o.getitem(x, (Ellipsis, 1))),
                                   [f32(2, 3)], [[None, None]]),
    "slice": (lambda o, x: o.Square(o.Slice(x, [1, 0], [2, -1])), [f32(3, 4)], None),
    "slice unknown dims": (lambda o, x: o.Square(o.Slice(x, [1, 0], [-1, 2])), [f32(3, 4)],
                           [None]),
    "concat": (lambda o, x, y: o.Square(o.ConcatV2([x, y, x], 1)), [f32(2, 3), f32(2, 1)],
               None),
    "concat unknown dims": (lambda o, x, y: o.Square(o.ConcatV2([x, y], -1)),
                            [f32(2, 3), f32(2, 2)], [[None, None], [2, None]]),
    "concat run-time axis": (lambda o, x, y: o.Square(o.ConcatV2([y, x], hidden_i32(o, 0))),
                             [f32(2, 3), f32(1, 3)], [None, None]),
    "pack and unpack": (lambda o, x: o.Square(o.Pack(o.Unpack(x, num=3, axis=1)[::-1], axis=0)),
                        [f32(2, 3)], None),
    "tile": (lambda o, x: o.Square(o.Tile(x, [2, 1, 3])), [f32(2, 3, 1)], None),
    "tile run-time multiples": (lambda o, x: o.Square(o.Tile(x, hidden_i32(o, [2, 3]))),
                                [f32(2, 1)], [[None, None]]),
    "broadcast to": (lambda o, x: o.Square(o.BroadcastTo(x, [4, 2, 3])), [f32(2, 1)], None),
    "broadcast to unknown dims": (lambda o, x: o.Square(o.BroadcastTo(x, [4, 2, 3])),
                                  [f32(2, 1)], [[None, None]]),
    "fill": (lambda o, x: o.Square(o.Fill([2, 3], x)), [np.array(1.5, F32)], None),
    "select v2": (lambda o, t, e: o.Square(o.SelectV2(COND, t, e)), [f32(1, 4), f32(4)], None),
    "select v2 unknown dims": (lambda o, t, e: o.Square(o.SelectV2(COND, t, e)),
                               [f32(3, 4), f32(1)], [[None, None], [None]]),
    "select": (lambda o, t, e: o.Square(o.Select([True, False, True], t, e)),
               [f32(3, 2), f32(3, 2)], None),
    "no gradient": (lambda o, x: o.AddV2(o.Mul(o.StopGradient(x), x), o.ZerosLike(x)),
                    [f32(3)], None),
    "one hot values": (lambda o, a, b: o.OneHot([0, 2], 3, a, b), [np.float32(1), np.float32(0)],
                       None),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_are_tfs(name):
    build, values, shapes = CASES[name]
    mine, theirs, *_ = both(build, values, shapes)
    assert_same(mine, theirs)


SECOND_ORDER = ["reshape", "transpose", "strided slice", "strided slice unknown dims", "slice",
                "concat", "concat unknown dims", "pack and unpack", "tile", "broadcast to",
                "select v2", "transpose run-time perm", "tile run-time multiples"]  # fmt: skip


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_order_gradients_are_tfs(name):
    build, values, shapes = CASES[name]
    mine, theirs, *_ = both(build, values, shapes, order=2)
    assert_same(mine, theirs, rtol=2e-6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys())
def test_strided_slice_gradients_of_random_keys_are_tfs(case):
    shape, key = case
    x = RNG.standard_normal(shape).astype(F32)
    mine, theirs, *_ = both(lambda o, v: o.Square(o.getitem(v, key)), [x])
    assert_same(mine, theirs)


# -- the ops the rules add -----------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["StridedSliceGrad", "InvertPermutation"])
def test_op_defs_are_tfs(op_type):
    theirs = op_def_registry.get(op_type)
    mine = mg.registry.get_op_def(op_type)
    assert [a.name for a in mine.inputs] == [a.name for a in theirs.input_arg]
    assert [a.name for a in mine.outputs] == [a.name for a in theirs.output_arg]
    assert [a.name for a in mine.attrs] == [a.name for a in theirs.attr]
    for attr in theirs.attr:
        ours = mine.attr(attr.name)
        if attr.allowed_values.list.type:
            allowed = [tf.as_dtype(t).name for t in attr.allowed_values.list.type]
            assert [d.name for d in ours.allowed] == allowed
        if attr.HasField("default_value"):
            assert ours.has_default


def _tf_strided_slice_grad(shape, key, dy):
    begin, end, strides, masks = encode(key)
    consts = [tf.constant(np.array(s, np.int32).reshape(len(s))) for s in (shape, begin, end,
                                                                          strides)]  # fmt: skip
    return tf.raw_ops.StridedSliceGrad(
        shape=consts[0], begin=consts[1], end=consts[2], strides=consts[3], dy=dy, **masks
    ).numpy()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys())
def test_strided_slice_grad_values_are_tfs(case):
    shape, key = case
    slice_shape = np.zeros(shape)[key].shape
    dy = RNG.standard_normal(slice_shape).astype(F32)
    scope = mg.Scope.new_root_scope()
    begin, end, strides, masks = encode(key)
    specs = [np.array(s, np.int32).reshape(len(s)) for s in (shape, begin, end, strides)]
    got = mg.Session(scope).run(A.StridedSliceGrad(scope, *specs, dy, **masks))
    np.testing.assert_array_equal(got, _tf_strided_slice_grad(shape, key, dy))


def _tf_message(fn):
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        fn()
    return info.value.message.split(" [Op:")[0].split("}} ")[-1]


@pytest.mark.parametrize(
    "shape, begin, end, strides, dy, masks",
    [
        ([2, 3], [0, 1], [2, 3], [1, 1], np.ones((2, 3)), {}),
        ([[2, 3]], [0, 1], [2, 3], [1, 1], np.ones((2, 2)), {}),
        ([-2, 3], [0, 1], [2, 3], [1, 1], np.ones((2, 2)), {}),
        ([2, 3], [0, 1], [2, 3], [1, 0], np.ones((2, 2)), {}),
        ([2, 3], [5], [6], [1], np.ones(3), {"shrink_axis_mask": 1}),
        ([2, 3], [0, 1], [2], [1, 1], np.ones((2, 2)), {}),
    ],
)  # fmt: skip
def test_strided_slice_grad_run_time_messages_are_tfs(shape, begin, end, strides, dy, masks):
    arrays = [np.array(s, np.int32) for s in (shape, begin, end, strides)]
    named = dict(zip(["shape", "begin", "end", "strides"], arrays))
    want = _tf_message(lambda: tf.raw_ops.StridedSliceGrad(**named, dy=dy, **masks))
    scope = mg.Scope.new_root_scope()
    fed = [mg.Placeholder(scope, mg.int32).output for _ in range(4)]
    value = mg.Placeholder(scope, mg.float64).output
    out = A.StridedSliceGrad(scope, *fed, value, **masks)
    with pytest.raises(mg.InvalidArgumentError) as info:
        mg.Session(scope).run(out, {**dict(zip(fed, arrays)), value: dy})
    assert info.value.message.split("\n")[0] == want  # then minigraph names the node


@pytest.mark.parametrize(
    "x", [[2, 0, 1], [], [0, 0, 1], [0, 3, 1], [0, -1, 1], [1, 1, 9], [[0, 1]]], ids=str
)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_invert_permutation_is_tfs(x, dtype):
    value = np.array(x, dtype)
    scope = mg.Scope.new_root_scope()
    fed = mg.Placeholder(scope, mg.as_dtype(dtype)).output
    out = A.InvertPermutation(scope, fed)
    # tf.constant: the raw op converts a numpy int64 argument to int32 once it has seen int32.
    try:
        want = tf.raw_ops.InvertPermutation(x=tf.constant(value)).numpy()
    except tf.errors.InvalidArgumentError:
        want = _tf_message(lambda: tf.raw_ops.InvertPermutation(x=tf.constant(value)))
        with pytest.raises(mg.InvalidArgumentError) as info:
            mg.Session(scope).run(out, {fed: value})
        assert info.value.message.split("\n")[0] == want
        return
    got = mg.Session(scope).run(out, {fed: value})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# -- gradient graphs exported to TF ---------------------------------------------------------------


def run_in_tf(graph_def, fetches, feeds):
    tf_graph_def = tf1.GraphDef.FromString(graph_def.SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf_graph_def, name="")
    with tf1.Session(graph=graph) as session:
        return session.run(fetches, feeds)


EXPORTED = [
    ("strided slice", 1, {"StridedSliceGrad"}),
    ("strided slice unknown dims", 2, {"StridedSliceGrad", "StridedSlice", "Shape"}),
    ("slice unknown dims", 1, {"StridedSliceGrad", "AddV2", "Shape"}),
    ("transpose run-time perm", 2, {"InvertPermutation", "FloorMod"}),
    ("concat", 2, {"Slice"}),
    ("concat unknown dims", 1, {"Slice", "Shape", "AddV2", "Mul"}),
    ("concat run-time axis", 2, {"OneHot", "FloorMod", "Slice"}),
    ("tile run-time multiples", 2, {"Pack", "Transpose", "Sum"}),
    ("tile", 1, {"Sum", "Reshape"}),
    ("pack and unpack", 2, {"Pack", "Unpack"}),
    ("broadcast to unknown dims", 1, {"BroadcastGradientArgs"}),
    ("select v2 unknown dims", 2, {"SelectV2", "BroadcastGradientArgs"}),
    ("select", 1, {"Select", "ZerosLike"}),
    ("fill", 1, {"Sum"}),
    ("expand dims and squeeze", 2, {"Reshape"}),
]


@pytest.mark.parametrize(
    "name, order, types", EXPORTED, ids=[f"{n}-order{o}" for n, o, _ in EXPORTED]
)
def test_gradient_graphs_run_in_tensorflow_with_the_same_values(name, order, types):
    build, values, shapes = CASES[name]
    mine, theirs_live, root, fetches, feeds = both(build, values, shapes, order=order)
    graph_def = root.graph.as_graph_def()
    theirs = run_in_tf(graph_def, fetches, feeds)
    live = [m for m in mine if m is not None]
    assert len(live) == len(theirs)
    for a, b in zip(live, theirs):
        b = np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert_same(mine, theirs_live, rtol=2e-6)
    assert types <= {node.op for node in graph_def.node}
