"""Input forwarding, the plan side (minigraph.optimizer.forward_inputs): which inputs a node
may overwrite with its output (`KernelContext.forwardable_inputs`). A chain of elementwise
nodes reuses one buffer; no fed, fetched, constant or still needed array is ever written.

The test ops (tests/_optimizer_ops.py) write into `ctx.forward_input_or_empty` and record
which input they overwrote. Devices are pinned to the CPU (forwarding applies to host arrays).
"""

import _optimizer_ops as oops
import numpy as np
import pytest

import minigraph as mg
import ops  # noqa: F401 - the tensor operators
from minigraph import Const, Identity, Placeholder, Scope, Session, SessionConfig
from minigraph.optimizer import OptimizerConfig

pytestmark = pytest.mark.usefixtures("cpu_only")

# The graph passes off: the graphs run as built, so each node is there to forward into.
FORWARD = SessionConfig(
    optimizer=OptimizerConfig(
        constant_folding=False, common_subgraph_elimination=False,
        arithmetic_optimization=False, remapping=False, dependency_optimization=False,
    )
)  # fmt: skip
NO_FORWARD = SessionConfig(optimizer=False)
N = 100_000  # 400 KB of float32: worth forwarding (and guarding)


@pytest.fixture(autouse=True)
def _reset():
    oops.reset()
    yield
    oops.reset()


@pytest.fixture
def root():
    return Scope.new_root_scope()


def forwarded(name):
    """The inputs node `name` overwrote, over the runs recorded."""
    return [used for node, used, _ in oops.CALLS if node == name]


def buffers(names):
    return {node: buf for node, _, buf in oops.CALLS if node in names}


def run_twice(root, fetches, feeds, config=FORWARD):
    """Interpreted, then generated code; the second run's CALLS are kept."""
    with Session(root, config) as sess:
        first = sess.run(fetches, feeds)
        oops.CALLS.clear()
        second = sess.run(fetches, feeds)
    return first, second


def test_a_chain_reuses_one_buffer(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    y = oops.Neg(root.with_op_name("n0"), x)  # its input is the feed: a new buffer
    for i in range(1, 5):
        y = oops.Neg(root.with_op_name(f"n{i}"), y)
    feed = np.arange(N, dtype=np.float32)
    first, second = run_twice(root, y, {x: feed})
    assert forwarded("n0") == [None]
    assert [forwarded(f"n{i}") for i in range(1, 5)] == [[0]] * 4
    ids = buffers([f"n{i}" for i in range(5)])
    assert len(set(ids.values())) == 1  # one buffer for the whole chain
    np.testing.assert_array_equal(second, -feed)
    np.testing.assert_array_equal(first, second)
    assert feed[1] == 1.0 and feed[-1] == N - 1  # the feed is never written


def test_binary_chain_forwards_into_the_dying_operand(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    a = oops.Neg(root.with_op_name("a"), x)
    b = oops.Add(root.with_op_name("b"), x, a)  # x is fed: only a may be overwritten
    c = oops.Add(root.with_op_name("c"), b, x)
    feed = np.ones(N, np.float32)
    _, got = run_twice(root, c, {x: feed})
    assert forwarded("b") == [1] and forwarded("c") == [0]
    np.testing.assert_array_equal(got, np.ones(N, np.float32))
    assert (feed == 1).all()


def test_fetched_constant_and_still_needed_arrays_are_never_written(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    c = Const(root.with_op_name("c"), np.full(N, 2.0, np.float32))
    a = oops.Neg(root.with_op_name("a"), x)
    fetched = oops.Neg(root.with_op_name("fetched"), a)  # fetched below: kept
    b = oops.Add(root.with_op_name("b"), fetched, c)  # neither may be overwritten
    later = oops.Neg(root.with_op_name("later"), a)  # a is read after b
    d = oops.Add(root.with_op_name("d"), b, later)  # both die here
    feed = np.ones(N, np.float32)
    _, (got_fetched, got_d) = run_twice(root, [fetched, d], {x: feed})
    assert forwarded("fetched") == [None]  # a is still needed by `later`
    assert forwarded("b") == [None]
    assert forwarded("later") == [0]  # a's last use
    assert forwarded("d") == [0]
    np.testing.assert_array_equal(got_fetched, np.ones(N, np.float32))
    np.testing.assert_array_equal(got_d, np.full(N, 4.0, np.float32))  # (1 + 2) + 1
    assert (c.operation.get_attr("value") == 2.0).all() and (feed == 1).all()


def test_the_same_array_twice_is_not_forwarded(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    a = oops.Neg(root.with_op_name("a"), x)
    b = oops.Add(root.with_op_name("b"), a, a)
    _, got = run_twice(root, b, {x: np.ones(N, np.float32)})
    assert forwarded("b") == [None]
    np.testing.assert_array_equal(got, np.full(N, -2.0, np.float32))


def test_a_trusted_kernel_passing_a_feed_through_is_guarded(root):
    # OptTestPass returns its input itself (trust allows it, as Identity's kernel does): its
    # output is then the feed, which must not be overwritten: the plan makes it a copy.
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    p = oops.Pass(root.with_op_name("p"), x)
    n = oops.Neg(root.with_op_name("n"), p)
    feed = np.ones(N, np.float32)
    _, got = run_twice(root, n, {x: feed})
    assert forwarded("n") == [0]
    np.testing.assert_array_equal(got, -np.ones(N, np.float32))
    assert (feed == 1).all()
    # An Identity of a constant likewise.
    c = Const(root.with_op_name("c"), np.full(N, 3.0, np.float32))
    m = oops.Neg(root.with_op_name("m"), Identity(root.with_op_name("i"), c))
    _, got = run_twice(root, m, None)
    np.testing.assert_array_equal(got, np.full(N, -3.0, np.float32))
    assert (c.operation.get_attr("value") == 3.0).all()


def test_a_pass_through_still_read_later_is_protected(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    a = oops.Neg(root.with_op_name("a"), x)
    p = oops.Pass(root.with_op_name("p"), a)  # p may be a itself
    n = oops.Neg(root.with_op_name("n"), p)  # may not write into p: a is read later
    later = oops.Add(root.with_op_name("later"), a, n)
    _, got = run_twice(root, later, {x: np.ones(N, np.float32)})
    np.testing.assert_array_equal(got, np.zeros(N, np.float32))


def test_views_from_untrusted_kernels_are_never_forwarded(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    a = oops.Neg(root.with_op_name("a"), x)
    u = oops.UntrustedAdd(root.with_op_name("u"), a, a)  # untrusted: its output is no candidate
    n = oops.Neg(root.with_op_name("n"), u)
    _, got = run_twice(root, n, {x: np.ones(N, np.float32)})
    assert forwarded("n") == [None]
    np.testing.assert_array_equal(got, np.full(N, 2.0, np.float32))


def test_a_value_an_untrusted_kernel_may_view_is_not_overwritten_while_the_view_lives(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    t = oops.Neg(root.with_op_name("t"), oops.Neg(root.with_op_name("n0"), x))
    view = oops.UntrustedPass(root.with_op_name("view"), t)  # t itself, for all the plan knows
    w = oops.Neg(root.with_op_name("w"), t)  # t's last reader: but the view is read after
    out = oops.Add(root.with_op_name("out"), w, view)
    _, got = run_twice(root, out, {x: np.ones(N, np.float32)})
    assert forwarded("t") == [0] and forwarded("w") == [None]
    np.testing.assert_array_equal(got, np.zeros(N, np.float32))


@pytest.mark.parametrize("threads", [2, 4])
def test_with_inter_op_threads_a_value_read_twice_is_never_forwarded(root, threads):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    a = oops.Neg(root.with_op_name("a"), oops.Neg(root.with_op_name("n0"), x))
    b = oops.Neg(root.with_op_name("b"), a)  # a's two readers may run in either order
    c = oops.Neg(root.with_op_name("c"), a)
    d = oops.Add(root.with_op_name("d"), b, c)
    e = oops.Neg(root.with_op_name("e"), d)  # d has one reader: forwarded
    config = SessionConfig(optimizer=FORWARD.optimizer, inter_op_threads=threads)
    for _ in range(3):
        _, got = run_twice(root, e, {x: np.ones(N, np.float32)}, config)
        np.testing.assert_array_equal(got, np.full(N, 2.0, np.float32))
    assert forwarded("a") == [0]  # n0 had one reader
    assert forwarded("b") == [None] and forwarded("c") == [None]
    assert forwarded("e") == [0]


def test_forwarding_off_and_results_equal(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    y = x
    for i in range(4):
        y = oops.Add(root.with_op_name(f"s{i}"), oops.Neg(root, y), x)
    feed = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    _, on = run_twice(root, y, {x: feed})
    assert any(used is not None for _, used, _ in oops.CALLS)
    oops.CALLS.clear()
    _, off = run_twice(root, y, {x: feed}, NO_FORWARD)
    assert all(used is None for _, used, _ in oops.CALLS)
    np.testing.assert_array_equal(on, off)


def test_the_library_elementwise_ops_reuse_buffers(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    y = ((x * 2.0) + 1.0) * 3.0
    feed = np.ones(N, np.float32)
    with Session(root, FORWARD) as sess:
        sess.run(y, {x: feed})
        plan = next(iter(sess._plans.values()))
    forwardable = [s.ctx.forwardable_inputs for s in plan.steps if s.ctx is not None]
    assert forwardable == [frozenset(), frozenset({0}), frozenset({0})]
    with Session(root, FORWARD) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: feed}), np.full(N, 9.0, np.float32))
    assert (feed == 1).all()


def test_the_input_forwarding_switch_alone(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[N])
    y = oops.Neg(root.with_op_name("b"), oops.Neg(root.with_op_name("a"), x))
    feed = np.ones(N, np.float32)
    config = SessionConfig(optimizer=OptimizerConfig(input_forwarding=False))
    _, off = run_twice(root, y, {x: feed}, config)
    assert forwarded("b") == [None]
    _, on = run_twice(root, y, {x: feed})
    assert forwarded("b") == [0]
    np.testing.assert_array_equal(on, off)


@pytest.mark.parametrize(
    "value, index, shape, dtype, reused",
    [
        (np.zeros(6, np.float32), 0, (6,), np.float32, True),
        (np.zeros(6, np.float32), 1, (6,), np.float32, False),  # not a forwardable input
        (np.zeros(6, np.float32), 0, (2, 3), np.float32, False),  # another shape
        (np.zeros(6, np.float32), 0, (6,), np.float64, False),  # another dtype
        (np.zeros(12, np.float32)[::2], 0, (6,), np.float32, False),  # not contiguous
        (np.zeros(6, np.float32), 0, [6], np.float32, True),  # a list shape
    ],
)
def test_forward_input_or_empty_checks_the_buffer(value, index, shape, dtype, reused):
    from minigraph.devices import CpuDevice
    from minigraph.kernel import KernelContext

    ctx = KernelContext(CpuDevice(0), "n", "OptTestNeg", (False,))
    ctx.forwardable_inputs = frozenset({0})
    out = ctx.forward_input_or_empty(index, value, shape, dtype)
    assert (out is value) is reused
    assert out.shape == tuple(shape) and out.dtype == dtype
    frozen = np.zeros(6, np.float32)
    frozen.flags.writeable = False  # a variable's value, shared with its readers
    assert ctx.forward_input_or_empty(0, frozen, (6,), np.float32) is not frozen
