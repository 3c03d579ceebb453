"""The library's rewrites (ops/rewrites.py) are exact: each applies where dtype, broadcasting
and shapes make the replacement compute the same bits (-0.0, NaN and infinities included),
and nowhere else. Each case runs with and without the optimizer on special values."""

import _optimizer_ops as oops
import numpy as np
import pytest

import minigraph as mg
import ops.rewrites  # noqa: F401 - the rules under test
from minigraph import Placeholder, Scope, Session, SessionConfig
from minigraph.optimizer import OptimizerConfig, PlanGraph, arithmetic_optimization
from minigraph.placer import place
from minigraph.plan import prune
from minigraph.registry import get_op_def
from ops import (
    BroadcastTo,
    Cast,
    FloorDiv,
    OnesLike,
    Pack,
    Reshape,
    Shape,
    Size,
    StridedSlice,
    ZerosLike,
)

Rank = mg.op_builder(get_op_def("Rank"))
StopGradient = mg.op_builder(get_op_def("StopGradient"))
BF16 = mg.bfloat16.np_dtype
SPECIALS = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-40]


@pytest.fixture
def root():
    return Scope.new_root_scope()


def _values(dtype, shape):
    kind = np.dtype(dtype).kind
    count = int(np.prod([d or 3 for d in shape]))
    if kind in "iu":
        flat = np.arange(count) - count // 2
    else:
        flat = np.resize(np.array(SPECIALS), count)
        if kind == "c":
            flat = flat + 1j * flat[::-1]
    return flat.astype(dtype).reshape([d or 3 for d in shape])


def _simplified(root, y, x, feed, consumer):
    """Whether the optimizer replaced y's node, and that both ways give the same bits."""
    out = consumer(y)
    metadata = mg.RunMetadata()
    results = []
    for optimizer in (True, False):
        with Session(root, SessionConfig(optimizer=optimizer)) as sess, np.errstate(all="ignore"):
            results.append(sess.run(out, {x: feed}, run_metadata=metadata if optimizer else None))
    a, b = results
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind in "iub":
        assert a.tobytes() == b.tobytes()
    else:  # the same values, NaN where NaN, and the sign of every zero
        wide = [v.astype(np.complex128 if v.dtype.kind == "c" else np.float64) for v in (a, b)]
        for part in (np.real, np.imag):
            p, q = part(wide[0]), part(wide[1])
            np.testing.assert_array_equal(p, q)
            np.testing.assert_array_equal(np.signbit(p), np.signbit(q))
    names = {node for r in metadata.optimizer for node, _ in r.simplified + r.fused}
    names |= {node for r in metadata.optimizer if r.name == "dependency_optimization"
              for node in r.removed}  # fmt: skip
    return y.op.name in names


def _identity_consumer(root):
    return lambda y: mg.Identity(root, y)


# (label, dtype, shape of x, how y is made from x, whether the rule applies)
CASES = [
    ("x - 0.0", np.float32, [3], lambda x: x - np.float32(0.0), True),
    ("x - -0.0", np.float32, [3], lambda x: x - np.float32(-0.0), False),
    ("x - 0 int", np.int32, [3], lambda x: x - np.int32(0), True),
    ("x - (0+0j)", np.complex64, [3], lambda x: x - np.complex64(0), True),
    ("x + -0.0", np.float32, [3], lambda x: x + np.float32(-0.0), True),
    ("-0.0 + x", np.float64, [3], lambda x: np.float64(-0.0) + x, True),
    ("x + 0.0", np.float32, [3], lambda x: x + np.float32(0.0), False),
    ("x + 0 uint8", np.uint8, [3], lambda x: x + np.uint8(0), True),
    ("x + -0.0 bfloat16", BF16, [3], lambda x: x + np.full((), -0.0, BF16), True),
    ("x * 1", np.float32, [3], lambda x: x * np.float32(1), True),
    ("1 * x", np.float16, [3], lambda x: np.float16(1) * x, True),
    ("x * 1 int64", np.int64, [3], lambda x: x * np.int64(1), True),
    ("x * 1 complex", np.complex64, [3], lambda x: x * np.complex64(1), False),
    ("x * 2", np.float32, [3], lambda x: x * np.float32(2), False),
    ("x * ones[3], x [None]", np.float32, [None], lambda x: x * np.ones(3, np.float32), False),
    ("x * ones[3], x [2, 3]", np.float32, [2, 3], lambda x: x * np.ones(3, np.float32), True),
    ("x * ones[1, 1], x [3]", np.float32, [3], lambda x: x * np.ones((1, 1), np.float32), False),
    ("x * ones[1], x [None]", np.float32, [None], lambda x: x * np.ones(1, np.float32), True),
    ("x / 1", np.float32, [3], lambda x: x / np.float32(1), True),
    ("x / 1 complex", np.complex128, [3], lambda x: x / np.complex128(1), False),
]  # fmt: skip


@pytest.mark.parametrize("label, dtype, shape, make, applies", CASES, ids=[c[0] for c in CASES])
def test_arithmetic_identities(root, cpu_only, label, dtype, shape, make, applies):
    x = Placeholder(root.with_op_name("x"), mg.as_dtype(dtype), shape=shape)
    y = make(x.output)
    assert _simplified(root, y, x, _values(dtype, shape), _identity_consumer(root)) is applies


@pytest.mark.parametrize(
    "dtype, applies", [(np.int32, True), (np.uint16, True), (np.float32, False)]
)
def test_floor_div_by_one(root, cpu_only, dtype, applies):
    x = Placeholder(root.with_op_name("x"), mg.as_dtype(dtype), shape=[4])
    y = FloorDiv(root, x, np.ones((), dtype)).output
    feed = _values(dtype, [4])
    assert _simplified(root, y, x, feed, _identity_consumer(root)) is applies


@pytest.mark.parametrize("target, applies", [(mg.float32, True), (mg.float64, False)])
def test_cast_to_its_own_dtype(root, cpu_only, target, applies):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    y = Cast(root, x, target).output
    assert _simplified(root, y, x, _values(np.float32, [3]), _identity_consumer(root)) is applies


@pytest.mark.parametrize(
    "make, shape, applies",
    [
        (lambda r, x: Shape(r, x), [2, 3], True),
        (lambda r, x: Shape(r, x, out_type=mg.int64), [2, 3], True),
        (lambda r, x: Shape(r, x), [None, 3], False),
        (lambda r, x: Size(r, x), [2, 3], True),
        (lambda r, x: Size(r, x), [2, None], False),
        (lambda r, x: Rank(r, x), [None, 3], True),
        (lambda r, x: Rank(r, x), None, False),
    ],
)
def test_shapes_of_guaranteed_shapes_become_constants(root, cpu_only, make, shape, applies):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=shape)
    y = make(root, x).output
    feed = np.zeros([d or 2 for d in (shape or [2, 2])], np.float32)
    consumer = lambda y: Cast(root, y, mg.int64)  # noqa: E731
    assert _simplified(root, y, x, feed, consumer) is applies


def _arithmetic_changes(targets, feeds, devices, check_kernel_outputs=None):
    ops_ = prune(set(feeds), targets)
    graph = PlanGraph(ops_, place(ops_, devices), feeds, targets, devices[0], check_kernel_outputs)
    return arithmetic_optimization(graph, OptimizerConfig()).simplified


def test_shapes_that_overflow_int32_keep_their_kernel_error(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2**31, 1])
    y = Placeholder(root.with_op_name("y"), mg.float32, shape=[2**16, 2**16])
    shape = Shape(root.with_op_name("shape"), x)
    size = Size(root.with_op_name("size"), y)
    size64 = Size(root.with_op_name("size64"), y, out_type=mg.int64)
    targets = [Cast(root, t, mg.float32).output for t in (shape, size, size64)]
    assert _arithmetic_changes(targets, [x.output, y.output], cpu_only) == (
        ("size64", "size_of_known_shape"),
    )


def test_unchecked_user_kernels_promise_no_shape(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    made = oops.UntrustedAdd(root.with_op_name("made"), x, x)  # static shape [3]
    shape = Shape(root.with_op_name("shape"), made)
    targets = [Cast(root, shape, mg.float32).output]
    assert _arithmetic_changes(targets, [x.output], cpu_only) == (
        ("shape", "shape_of_known_shape"),
    )  # its outputs are checked: the shape holds
    assert _arithmetic_changes(targets, [x.output], cpu_only, check_kernel_outputs=False) == ()


def test_stop_gradient_is_an_identity_at_run_time(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    y = StopGradient(root.with_op_name("sg"), x).output
    assert _simplified(root, y, x, _values(np.float32, [3]), lambda y: -y)


def test_a_fetched_node_is_never_simplified(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    y = x.output * np.float32(1)
    assert not _simplified(root, y, x, _values(np.float32, [3]), lambda y: y)


# -- shapes: Reshape, BroadcastTo, ZerosLike, OnesLike --------------------------------------------


def _flatten(r, x, dim=0, tail=12, out_type=mg.int32, where=0):
    """TF's flatten: Reshape(x, Pack([tf.shape(x)[dim], tail])) (entries swapped by `where`);
    the Reshape is "y", the others under "f/"."""
    f = r.new_sub_scope("f")
    own = StridedSlice(f, Shape(f, x, out_type=out_type), [dim], [dim + 1], [1],
                       shrink_axis_mask=1).output  # fmt: skip
    parts = [own, np.array(tail, out_type.np_dtype)]
    target = Pack(f, parts if where == 0 else parts[::-1]).output
    return Reshape(r.with_op_name("y"), x, target).output


def _out(builder):
    return builder if isinstance(builder, mg.Output) else builder.output


@pytest.mark.parametrize(
    "shape, feed, make, applies",
    [
        ([None, 3, 4], [5, 3, 4], lambda r, x: _flatten(r, x), True),
        ([None, 3, 4], [5, 3, 4], lambda r, x: _flatten(r, x, where=1), True),  # [12, d0]
        ([None, 3, 4], [5, 3, 4], lambda r, x: _flatten(r, x, out_type=mg.int64), True),
        ([None, 3, 4], [0, 3, 4], lambda r, x: _flatten(r, x, tail=6, where=1), False),
        ([None, None, 4], [5, 3, 4], lambda r, x: _flatten(r, x), False),
        ([None, 0, 4], [5, 0, 4], lambda r, x: _flatten(r, x, tail=0), False),  # -1 by 0
        ([2, None, 6], [2, 5, 6], lambda r, x: _flatten(r, x, dim=1), True),
        (None, [5, 3, 4], lambda r, x: _flatten(r, x), False),
        ([2, 6], [2, 6], lambda r, x: Reshape(r.with_op_name("y"), x, [2, 6]), True),
        ([2, 6], [2, 6], lambda r, x: Reshape(r.with_op_name("y"), x, [-1, 6]), True),
        ([2, 6], [2, 6], lambda r, x: Reshape(r.with_op_name("y"), x, [6, 2]), False),
        ([None, 6], [2, 6], lambda r, x: Reshape(r.with_op_name("y"), x, [-1, 6]), False),
        ([2, 6], [2, 6], lambda r, x: BroadcastTo(r.with_op_name("y"), x, [2, 6]), True),
        ([1, 6], [1, 6], lambda r, x: BroadcastTo(r.with_op_name("y"), x, [2, 6]), False),
        ([None, 6], [2, 6], lambda r, x: BroadcastTo(r.with_op_name("y"), x, [2, 6]), False),
        ([2, 3], [2, 3], lambda r, x: ZerosLike(r.with_op_name("y"), x), True),
        ([2, 3], [2, 3], lambda r, x: OnesLike(r.with_op_name("y"), x), True),
        ([None, 3], [2, 3], lambda r, x: ZerosLike(r.with_op_name("y"), x), False),
    ],
)
def test_shape_rewrites(root, cpu_only, shape, feed, make, applies):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=shape)
    y = _out(make(root, x))
    value = np.arange(int(np.prod(feed)), dtype=np.float32).reshape(feed) - 3.0
    assert _simplified(root, y, x, value, _identity_consumer(root)) is applies


def test_flatten_of_an_empty_batch_and_of_a_fed_batch_size(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3, 4])
    y = _flatten(root, x)
    assert _simplified(root, y, x, np.zeros((0, 3, 4), np.float32), _identity_consumer(root))
    # The dim, fed: it is not x's own dim any more (a wrong value raises Reshape's error).
    root = Scope.new_root_scope()
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3, 4])
    own = StridedSlice(root, Shape(root, x), [0], [1], [1], shrink_axis_mask=1).output
    y = Reshape(root.with_op_name("y"), x, Pack(root, [own, np.int32(12)])).output
    with Session(root, SessionConfig(optimizer=True)) as sess:
        with pytest.raises(mg.InvalidArgumentError, match="Input to reshape"):
            sess.run(y, {x: np.zeros((2, 3, 4), np.float32), own: np.int32(3)})


def test_flatten_keeps_an_int32_shape_for_its_error(root, cpu_only):
    for out_type, shape_kept in ((mg.int32, True), (mg.int64, False)):
        root = Scope.new_root_scope()
        x = Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3, 4])
        y = _flatten(root, x, out_type=out_type)
        metadata = mg.RunMetadata()
        with Session(root, SessionConfig(optimizer=True)) as sess:
            got = sess.run(mg.Identity(root, y), {x: np.ones((2, 3, 4), np.float32)},
                           run_metadata=metadata)  # fmt: skip
        assert got.shape == (2, 12)
        removed = {n for r in metadata.optimizer for n in r.removed}
        assert {"f/StridedSlice", "f/Pack"} <= removed
        assert ("f/Shape" in removed) is not shape_kept


def test_zeros_like_over_the_cap_stays(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[64, 64])
    y = ZerosLike(root.with_op_name("y"), x).output
    config = SessionConfig(optimizer=OptimizerConfig(max_constant_bytes=1000))
    metadata = mg.RunMetadata()
    with Session(root, config) as sess:
        got = sess.run(-y, {x: np.ones((64, 64), np.float32)}, run_metadata=metadata)
    assert not any(r.simplified for r in metadata.optimizer)
    assert (got == 0).all()
