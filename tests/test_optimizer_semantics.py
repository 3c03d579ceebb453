"""The graph optimizer never changes what a run gives: values (hypothesis over random small
graphs of the library's ops, run with and without it), errors (still named after the user's
nodes and lines, kernel errors met while folding raised by the run), stateful nodes (never
folded, merged or dropped), fed and fetched tensors, control dependencies (inter-op threads
included), and the user's Graph itself.

Sessions here ask for the optimizer explicitly (`SessionConfig(optimizer=True/False)`), so
they compare both ways whatever MINIGRAPH_TEST_OPTIMIZER says.
"""

import _optimizer_ops as oops
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops.rewrites  # noqa: F401 - the library's rewrites
from minigraph import Const, Identity, NoOp, Placeholder, Scope, Session, SessionConfig
from minigraph.registry import get_op_def
from ops import Cast, Shape, Size, gather

ON = SessionConfig(optimizer=True)
OFF = SessionConfig(optimizer=False)
StopGradient = mg.op_builder(get_op_def("StopGradient"))


@pytest.fixture(autouse=True)
def _reset():
    oops.reset()
    yield
    oops.reset()


@pytest.fixture
def root():
    return Scope.new_root_scope()


def run_both(root, fetches, feeds=None, runs=2, **config):
    """The results with and without the optimizer (each run `runs` times: interpreted, then
    generated code), and the optimized run's metadata."""
    metadata = mg.RunMetadata()
    results = []
    for optimizer in (True, False):
        with Session(root, SessionConfig(optimizer=optimizer, **config)) as sess:
            for _ in range(runs):
                got = sess.run(fetches, feeds, run_metadata=metadata if optimizer else None)
            results.append(got)
    return results[0], results[1], metadata


def same_values(a, b):
    """Equal dtype, shape and values, NaN where NaN and the sign of every zero included."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        return bool(
            np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b))
        )
    return bool(np.array_equal(a, b))


# -- values: random graphs -----------------------------------------------------------------------

_SPECIAL = [0.0, -0.0, 1.0, -1.5, 2.0, np.inf, -np.inf, np.nan, 3e38]


@st.composite
def graphs(draw):
    """(scope, fetches, feeds): a random small graph of library ops over one float32 feed and
    constants (specials: -0.0, NaN, infinities), with the patterns the passes look for mixed
    in (constant subgraphs, duplicates, Identity chains, x * 1, x + -0.0, gathers of gathers,
    shapes)."""
    from ops import Maximum  # noqa: PLC0415

    root = Scope.new_root_scope()
    n = draw(st.integers(1, 4))
    unknown = draw(st.booleans())
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[None if unknown else n])
    values = st.lists(st.sampled_from(_SPECIAL), min_size=n, max_size=n)
    # (tensor, "n" for a vector of n or "s" for a scalar, how to build it again)
    pool = [(x.output, "n", None)]
    for _ in range(draw(st.integers(0, 2))):
        pool.append((Const(root, np.float32(draw(values))).output, "n", None))
    pool.append((Const(root, np.float32(draw(st.sampled_from(_SPECIAL)))).output, "s", None))
    indices = st.lists(st.integers(0, n - 1), min_size=n, max_size=n)
    binary = {
        "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b, "max": lambda a, b: Maximum(root, a, b).output,
    }  # fmt: skip
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(
            st.sampled_from(
                [*binary, "neg", "identity", "stop", "neutral", "neutral", "gather", "gather2",
                 "gather2", "dup", "shape", "size"]
            )
        )  # fmt: skip
        # Mostly the newest values: chains, so that rewritten nodes have consumers.
        a, ka, _ = draw(st.sampled_from(pool[-2:] if draw(st.booleans()) else pool))
        b, kb, _ = draw(st.sampled_from([p for p in pool if ka == "s" or p[1] in (ka, "s")]))
        kind_out = ka  # unary ops keep their input's kind
        if kind in binary:
            make = lambda f=binary[kind], a=a, b=b: f(a, b)  # noqa: E731
            kind_out = kb if ka == "s" else ka
        elif kind == "neg":
            make = lambda a=a: -a  # noqa: E731
        elif kind == "identity":
            make = lambda a=a: Identity(root, Identity(root, a)).output  # noqa: E731
        elif kind == "stop":
            make = lambda a=a: StopGradient(root, a).output  # noqa: E731
        elif kind == "neutral":
            # Mostly a neutral element (x + -0.0, x - 0.0, x * 1, x / 1), else a near miss.
            name, value = draw(
                st.sampled_from([("add", -0.0), ("sub", 0.0), ("mul", 1.0), ("div", 1.0)])
            )
            if draw(st.booleans()):
                name = draw(st.sampled_from(["add", "sub", "mul", "div"]))
                value = draw(st.sampled_from([0.0, -0.0, 1.0]))
            shape = draw(st.sampled_from([(), (1,), (n,)]))
            c = Const(root, np.full(shape, value, np.float32)).output
            f = binary[name]
            # Read by a Neg: a fetched node is never replaced, an intermediate may be.
            make = lambda f=f, a=a, c=c: -f(a, c)  # noqa: E731
            kind_out = "n" if shape == (n,) else ka
        elif kind in ("gather", "gather2") and ka == "n":
            first, second = draw(indices), draw(indices)
            if kind == "gather":
                make = lambda a=a, i=first: gather(root, a, i).output  # noqa: E731
            else:

                def make(a=a, i=first, j=second):
                    return gather(root, gather(root, a, i), j).output

            kind_out = "n"
        elif kind == "dup" and any(p[2] is not None for p in pool):
            _, kind_out, make = draw(st.sampled_from([p for p in pool if p[2] is not None]))
        elif kind == "shape" and ka == "n" and n == 1:
            make = lambda a=a: Cast(root, Shape(root, a), mg.float32).output  # noqa: E731
        elif kind == "size":
            make = lambda a=a: Cast(root, Size(root, a), mg.float32).output  # noqa: E731
            kind_out = "s"
        else:
            continue
        pool.append((make(), kind_out, make))
    fetched = [pool[-1], *draw(st.lists(st.sampled_from(pool), max_size=3))]
    feed = np.float32(draw(values))
    return root, [t for t, _, _ in fetched], {x: feed}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_values_are_the_same_with_and_without_the_optimizer(case):
    root, fetches, feeds = case
    with np.errstate(all="ignore"):
        optimized, plain, _ = run_both(root, fetches, feeds)
    for got, want in zip(optimized, plain):
        assert same_values(got, want), (got, want)


def test_a_graph_collapses_to_one_gather_as_under_grappler(root, cpu_only):
    # The example: a constant gather, two identical gathers and an Identity chain.
    table = Const(root.with_op_name("table"), np.arange(12, dtype=np.float32).reshape(6, 2))
    rows = gather(root.with_op_name("rows"), table, [5, 1, 3])  # constant: folds
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3, 2])
    a = gather(root.with_op_name("a"), Identity(root, Identity(root, x)), [2, 0])
    b = gather(root.with_op_name("b"), x, [2, 0])
    total = Identity(root.with_op_name("total"), a.output + b.output + gather(root, rows, [0, 1]))
    feed = {x: np.ones((3, 2), np.float32)}
    optimized, plain, metadata = run_both(root, total, feed)
    assert same_values(optimized, plain)
    by_pass = {r.name: r for r in metadata.optimizer}
    assert by_pass["constant_folding"].folded  # rows and the gather of it
    assert ("b", "a") in by_pass["common_subgraph_elimination"].merged
    assert len(by_pass["dependency_optimization"].removed) == 2
    with Session(root, ON) as sess:
        sess.run(total, feed)
        plan = next(iter(sess._plans.values()))
        assert [s.op_type for s in plan.steps].count("GatherV2") == 1


# -- the user's graph ----------------------------------------------------------------------------


def _snapshot(graph):
    return [(op.node_def(), op.source, op.requested_device) for op in graph.operations]


def test_the_users_graph_never_changes(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[4])
    c = Const(root, [1.0, 2.0, 3.0, 4.0])
    y = Identity(root, (c + c) * 1.0 + x)
    z = gather(root, gather(root, y, [3, 2, 1]), [0, 0])
    s = Cast(root, Shape(root, z), mg.float32)
    group = NoOp(root.with_control_dependencies([z.operation]))
    before = _snapshot(root.graph)
    optimized, plain, metadata = run_both(root, [z, s, group], {x: np.zeros(4, np.float32)})
    assert any(r.changed for r in metadata.optimizer)
    assert _snapshot(root.graph) == before
    assert all(op.graph is root.graph for op in root.graph.operations)


# -- errors --------------------------------------------------------------------------------------


def test_errors_name_the_users_nodes_and_lines(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2])
    i = Identity(root.with_op_name("i"), Identity(root, x))  # removed by the optimizer
    c = Const(root, [1.0, 1.0])
    check = oops.CheckPositive(root.with_op_name("check"), i.output * (c + c))  # rebuilt node
    out = oops.Neg(root.with_op_name("out"), check)
    messages = []
    for config in (ON, OFF):
        with Session(root, config) as sess, pytest.raises(mg.InvalidArgumentError) as info:
            sess.run(out, {x: np.float32([1, -1])})
        messages.append(str(info.value))
        assert info.value.node_name == "check"
    assert messages[0] == messages[1]
    assert "x[1] = -2.0 is negative" in messages[0]
    assert "node check (OptTestCheckPositive)" in messages[0]
    assert "test_optimizer_semantics.py:" in messages[0]


def test_kernel_errors_met_while_folding_are_raised_by_the_run(root, cpu_only):
    bad = Const(root.with_op_name("bad"), [3.0, -1.0])
    check = oops.CheckPositive(root.with_op_name("check"), bad)
    out = oops.Neg(root.with_op_name("out"), check)
    metadata = mg.RunMetadata()
    for config in (ON, OFF):
        with Session(root, config) as sess:
            for _ in range(2):
                with pytest.raises(mg.InvalidArgumentError, match=r"(?s)x\[1\] = -1.0.*check"):
                    sess.run(out, run_metadata=metadata)
            # The session stays usable; another fetch of the graph runs.
            assert sess.run(bad).tolist() == [3.0, -1.0]


def test_bad_gathers_keep_their_errors_and_messages(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3, 2])
    inner = gather(root.with_op_name("inner"), x, [2, 7])  # 7 is out of range
    outer = gather(root.with_op_name("outer"), inner, [1, 0])
    out = Identity(root.with_op_name("out"), outer)
    messages = []
    for config in (ON, OFF):
        with Session(root, config) as sess, pytest.raises(mg.InvalidArgumentError) as info:
            sess.run(out, {x: np.zeros((3, 2), np.float32)})
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "indices[1] = 7 is not in [0, 3)" in messages[0] and "node inner" in messages[0]


def test_a_node_a_rewrite_no_longer_needs_still_runs_and_raises(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    check = oops.CheckPositive(root.with_op_name("check"), x)
    shape = Cast(root, Shape(root.with_op_name("shape"), check), mg.int64)  # a constant now
    metadata = mg.RunMetadata()
    for config in (ON, OFF):
        with Session(root, config) as sess:
            md = metadata if config is ON else None
            assert sess.run(shape, {x: np.ones(3, np.float32)}, run_metadata=md).tolist() == [3]
            with pytest.raises(mg.InvalidArgumentError, match=r"(?s)is negative.*node check"):
                sess.run(shape, {x: np.float32([1, -1, 1])})
    assert any(r.simplified for r in metadata.optimizer)


# -- stateful nodes ------------------------------------------------------------------------------


def test_stateful_nodes_run_every_time_and_are_never_merged(root, cpu_only):
    one = Const(root, np.int64(1))
    c1 = oops.Count(root.with_op_name("c1"))
    c2 = oops.Count(root.with_op_name("c2"))  # the same op and inputs: still two nodes
    total = Identity(root, c1.output + c2.output + one)
    with Session(root, ON) as sess:
        got = [int(sess.run(total)) for _ in range(3)]
    assert got == [0 + 1 + 1, 2 + 3 + 1, 4 + 5 + 1]


def test_a_stateful_node_whose_value_nothing_needs_still_runs(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    noisy = oops.Noisy(root.with_op_name("noisy"), x)
    shape = Shape(root.with_op_name("shape"), noisy)  # a constant for the optimizer
    fetched = Cast(root, shape, mg.int64)
    metadata = mg.RunMetadata()
    feed = {x: np.zeros(3, np.float32)}
    with Session(root, ON) as sess:
        for _ in range(3):
            assert sess.run(fetched, feed, run_metadata=metadata).tolist() == [3]
    assert oops._COUNT == [3]  # noisy ran on every run
    simplified = [r for r in metadata.optimizer if r.simplified]
    assert simplified and simplified[0].simplified == (("shape", "shape_of_known_shape"),)


# -- fed and fetched tensors ---------------------------------------------------------------------


def test_fed_and_fetched_tensors_keep_their_identity(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    i = Identity(root.with_op_name("i"), x)
    j = Identity(root.with_op_name("j"), i)
    k = oops.Neg(root.with_op_name("k"), j)
    feed = np.float32([1, 2, 3])
    with Session(root, ON) as sess:
        got_x, got_j, got_k = sess.run([x, j, k], {x: feed})
        assert got_x is feed  # a fetch of the fed tensor itself gives the caller's array
        assert got_j is not feed and got_j.tolist() == [1, 2, 3]  # never the feed itself
        # Feeding the middle of the chain cuts it there.
        assert sess.run(k, {i: np.float32([5, 5, 5])}).tolist() == [-5, -5, -5]
        assert sess.run(k, {j: np.float32([7, 7, 7])}).tolist() == [-7, -7, -7]
        # A fed Const is not a constant.
        c = Const(root.with_op_name("c"), [1.0, 1.0, 1.0])
        m = oops.Neg(root.with_op_name("m"), c)
        assert sess.run(m, {c: np.float32([4, 4, 4])}).tolist() == [-4, -4, -4]
        assert sess.run(m).tolist() == [-1, -1, -1]
    assert feed.tolist() == [1, 2, 3]


def test_a_fed_output_of_a_rebuilt_node_stays_fed(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2])
    two = oops.Two(root.with_op_name("two"), Identity(root.with_op_name("i"), x))  # rebuilt
    reads_a = oops.Neg(root.with_op_name("reads_a"), two.a)  # two.a is fed below
    feeds = {x: np.float32([1, 2]), two.a: np.float32([10, 20])}
    optimized, plain, metadata = run_both(root, [reads_a, two.b], feeds)
    assert optimized[0].tolist() == plain[0].tolist() == [-10, -20]
    assert optimized[1].tolist() == plain[1].tolist() == [2, 4]
    assert "i" in {n for r in metadata.optimizer for n in r.removed}


def test_a_fetched_identity_of_a_constant_is_a_new_array(root, cpu_only):
    c = Const(root, [1.0, 2.0])
    i = Identity(root.with_op_name("i"), c)
    n = oops.Neg(root, i)
    optimized, plain, _ = run_both(root, [i, n])
    assert same_values(optimized[0], plain[0]) and same_values(optimized[1], plain[1])


# -- control dependencies ------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 4])
def test_control_dependencies_keep_their_order(root, cpu_only, threads):
    # c2 waits for c1 through a NoOp and an Identity that the optimizer removes.
    c1 = oops.Count(root.with_op_name("c1"))
    group = NoOp(root.with_op_name("group").with_control_dependencies([c1.operation]))
    x = Placeholder(root.with_op_name("x"), mg.int64, shape=[])
    i = Identity(root.with_op_name("i").with_control_dependencies([group]), x)
    c2 = oops.Count(root.with_op_name("c2").with_control_dependencies([i.operation]))
    late = oops.Count(root.with_op_name("late"))
    config = SessionConfig(optimizer=True, inter_op_threads=threads)
    metadata = mg.RunMetadata()
    with Session(root, config) as sess:
        for _ in range(20):
            a, b, _ = sess.run([c1, c2, late], {x: np.int64(0)}, run_metadata=metadata)
            assert b > a
    removed = {n for r in metadata.optimizer for n in r.removed}
    assert {"group", "i"} <= removed


# -- reports -------------------------------------------------------------------------------------


def test_reports_go_to_run_metadata_and_the_placement_log(root, cpu_only, capfd):
    c = Const(root.with_op_name("c"), [1.0, 2.0])
    folded = oops.Neg(root.with_op_name("folded"), c)
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2])
    out = oops.Add(root.with_op_name("out"), Identity(root.with_op_name("i"), x), folded)
    metadata = mg.RunMetadata()
    config = SessionConfig(optimizer=True, log_device_placement=True)
    with Session(root, config) as sess:
        sess.run(out, {x: np.zeros(2, np.float32)}, run_metadata=metadata)
    err = capfd.readouterr().err
    assert "optimizer: constant_folding: " in err and "folded: folded" in err
    assert "optimizer: dependency_optimization: " in err and "removed: i" in err
    assert [r.name for r in metadata.optimizer] == [
        "constant_folding", "common_subgraph_elimination", "arithmetic_optimization",
        "remapping", "dependency_optimization",
    ]  # fmt: skip
    assert metadata.optimizer[0].folded == ("folded",)
    assert metadata.placement["i"].endswith("CPU:0")  # placed, then removed
    with Session(root, OFF) as sess:
        sess.run(out, {x: np.zeros(2, np.float32)}, run_metadata=metadata)
    assert metadata.optimizer == []
