"""Each graph optimizer pass alone (minigraph.optimizer), on small pruned and placed graphs:
what it changes, what it must leave alone, and its report. The plan-level results (values,
errors, the user's graph untouched) are in test_optimizer_semantics.py.

Devices are pinned (`cpu_only`, or `sim_gpus` where devices matter).
"""

import _optimizer_ops as oops
import numpy as np
import pytest

import minigraph as mg
import ops.rewrites  # noqa: F401 - the library's rewrites
from minigraph import Const, Identity, NoOp, Placeholder, Scope
from minigraph.optimizer import (
    OptimizerConfig,
    PlanGraph,
    common_subgraph_elimination,
    constant_folding,
    dependency_optimization,
    remapping,
)
from minigraph.placer import place
from minigraph.plan import prune
from ops import GatherV2, Sub, gather

CONFIG = OptimizerConfig()


@pytest.fixture(autouse=True)
def _reset():
    oops.reset()
    yield
    oops.reset()


@pytest.fixture
def root():
    return Scope.new_root_scope()


def out(value):
    """An Output, or the Operation of an op without outputs."""
    if isinstance(value, (mg.Output, mg.Operation)):
        return value
    op = value.operation
    return value.output if op.outputs else op


def graph_of(targets, devices, feeds=()):
    targets = [out(t) for t in targets]
    fed = {out(f) for f in feeds}
    ops = prune(fed, targets)
    return PlanGraph(ops, place(ops, devices), fed, targets, devices[0])


def names(graph):
    return [op.name for op in graph.ops]


def node(graph, name):
    return next(op for op in graph.ops if op.name == name)


# -- constant folding ----------------------------------------------------------------------------


def test_folding_collapses_a_whole_constant_subgraph(root, cpu_only):
    a = Const(root.with_op_name("a"), [1.0, 2.0])
    b = Const(root.with_op_name("b"), [3.0, 5.0])
    c = oops.Add(root.with_op_name("c"), a, b)
    d = oops.Neg(root.with_op_name("d"), c)
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2])
    e = oops.Add(root.with_op_name("e"), d, x)
    graph = graph_of([e], cpu_only, feeds=[x])
    report = constant_folding(graph, CONFIG)
    assert report.folded == ("c", "d")
    assert names(graph) == ["d", "e"]  # d is a Const now, named as the node it stands for
    folded = node(graph, "d")
    assert folded.type == "Const" and folded.get_attr("value").tolist() == [-4.0, -7.0]
    assert not folded.get_attr("value").flags.writeable  # constants are frozen
    assert node(graph, "e").inputs[0] is folded.outputs[0]
    assert (report.nodes_before, report.nodes_after) == (5, 2)
    assert set(report.removed) == {"a", "b"}
    assert "folded: c, d" in str(report)
    assert [n for n, _, _ in oops.CALLS] == ["c", "d"]  # ran once, now, on the host


def test_folding_leaves_stateful_fetched_fed_and_untrusted_nodes(root, cpu_only):
    one = Const(root.with_op_name("one"), [1.0])
    noisy = oops.Noisy(root.with_op_name("noisy"), one)  # stateful
    fetched = oops.Neg(root.with_op_name("fetched"), one)
    untrusted = oops.UntrustedAdd(root.with_op_name("untrusted"), one, one)
    fed_const = Const(root.with_op_name("fed_const"), [2.0])
    reads_feed = oops.Neg(root.with_op_name("reads_feed"), fed_const)
    sink = oops.Add(root.with_op_name("sink"), noisy, untrusted)
    sink2 = oops.Add(root.with_op_name("sink2"), sink, reads_feed)
    graph = graph_of([sink2, fetched], cpu_only, feeds=[fed_const])
    report = constant_folding(graph, CONFIG)
    assert report.folded == ()
    assert names(graph) == ["one", "noisy", "fetched", "untrusted", "reads_feed", "sink", "sink2"]
    assert oops.CALLS == [] and oops._COUNT == [0]  # nothing ran


def test_folding_skips_nodes_with_control_inputs(root, cpu_only):
    effect = oops.Count(root.with_op_name("effect"))
    one = Const(root.with_op_name("one"), [1.0])
    after = oops.Neg(root.with_op_name("after").with_control_dependencies(effect), one)
    sink = oops.Neg(root.with_op_name("sink"), after)
    graph = graph_of([sink], cpu_only)
    assert constant_folding(graph, CONFIG).folded == ()
    assert "effect" in names(graph)


def test_folding_defers_kernel_errors_to_the_run(root, cpu_only):
    bad = Const(root.with_op_name("bad"), [1.0, -3.0])
    check = oops.CheckPositive(root.with_op_name("check"), bad)
    sink = oops.Neg(root.with_op_name("sink"), check)
    graph = graph_of([sink], cpu_only)
    report = constant_folding(graph, CONFIG)
    assert report.folded == ()
    assert report.deferred == (("check", "its kernel raised x[1] = -3.0 is negative"),)
    assert names(graph) == ["bad", "check", "sink"]
    assert "left as they are: check: its kernel raised" in str(report)


def test_folding_size_cap_static_and_measured(root, cpu_only):
    seed = Const(root.with_op_name("seed"), np.float64(7.0))
    big = oops.Big(root.with_op_name("big"), seed, n=1000)  # 8000 bytes
    sink = oops.Neg(root.with_op_name("sink"), big)
    small = OptimizerConfig(max_constant_bytes=7999)
    graph = graph_of([sink], cpu_only)
    report = constant_folding(graph, small)
    assert report.folded == ()
    assert report.deferred == (
        ("big", "its output would take 8000 bytes, over max_constant_bytes=7999"),
    )
    assert oops.CALLS == []  # judged from the static shape: never run
    graph = graph_of([sink], cpu_only)
    assert constant_folding(graph, OptimizerConfig(max_constant_bytes=8000)).folded == ("big",)
    # A shape known only once run: measured after running.
    shape = Placeholder(root.with_op_name("unused"), mg.float32)
    del shape
    strings = Const(root.with_op_name("strings"), ["a" * 50, "b" * 50])
    same = Identity(root.with_op_name("same"), strings)
    sink2 = Identity(root.with_op_name("sink2"), same)
    graph = graph_of([sink2], cpu_only)
    report = constant_folding(graph, OptimizerConfig(max_constant_bytes=100))
    assert report.folded == ()
    assert (
        report.deferred[0][0] == "same" and "over max_constant_bytes=100" in report.deferred[0][1]
    )


def test_folding_a_multi_output_node(root, cpu_only):
    x = Const(root.with_op_name("x"), np.array([1, 2], np.int32))
    two = oops.Two(root.with_op_name("two"), x)
    s = oops.Add(root.with_op_name("s"), two.a, Placeholder(root.with_op_name("p"), mg.int32))
    graph = graph_of([s, two.b], cpu_only, feeds=[s.operation.inputs[1]])
    # two.b is fetched: the node stays as it is.
    assert constant_folding(graph, CONFIG).folded == ()
    graph = graph_of([s], cpu_only, feeds=[s.operation.inputs[1]])
    report = constant_folding(graph, CONFIG)
    assert report.folded == ("two",)
    const = node(graph, "s").inputs[0].op
    assert const.type == "Const" and const.name == "two/folded_0"
    assert const.get_attr("value").tolist() == [2, 3]
    assert "two" in report.removed or "two" not in names(graph)


def test_folded_constants_of_host_memory_outputs_live_on_the_host(root, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    from ops import Shape  # noqa: PLC0415

    c = Const(root.with_op_name("c"), np.zeros((2, 3), np.float32))
    shape = Shape(root.with_op_name("shape").with_device("/gpu:0"), c)
    sink = oops.Neg(root.with_op_name("sink"), mg.Placeholder(root, mg.int32))
    del sink
    fetch = Identity(root.with_op_name("fetch"), shape)
    graph = graph_of([fetch], sim_gpus)
    assert graph.device(node(graph, "shape")) is gpu0
    assert constant_folding(graph, CONFIG).folded == ("shape",)
    assert graph.device(node(graph, "shape")) is cpu  # Shape's output is host memory


# -- common subgraph elimination -----------------------------------------------------------------


def test_cse_merges_duplicates_and_their_consumers(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    a1 = oops.Neg(root.with_op_name("a1"), x)
    a2 = oops.Neg(root.with_op_name("a2"), x)
    b1 = oops.Add(root.with_op_name("b1"), a1, x)
    b2 = oops.Add(root.with_op_name("b2"), a2, x)
    c = oops.Add(root.with_op_name("c"), b1, b2)
    graph = graph_of([c], cpu_only, feeds=[x])
    report = common_subgraph_elimination(graph, CONFIG)
    assert report.merged == (("a2", "a1"), ("b2", "b1"))
    assert names(graph) == ["a1", "b1", "c"]
    b = node(graph, "b1").outputs[0]
    assert node(graph, "c").inputs == (b, b)
    assert report.removed == ("a2", "b2")


def test_cse_merges_equal_constants_by_value_and_bits(root, cpu_only):
    a = Const(root.with_op_name("a"), [1.0, 2.0])
    b = Const(root.with_op_name("b"), [1.0, 2.0])
    z = Const(root.with_op_name("z"), np.float32(0.0))
    nz = Const(root.with_op_name("nz"), np.float32(-0.0))
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[2])
    s1 = oops.Add(root.with_op_name("s1"), x, a)
    s2 = oops.Add(root.with_op_name("s2"), x, b)
    t1 = oops.ScaleList(root.with_op_name("t1"), [x], factor=0.0)
    t2 = oops.ScaleList(root.with_op_name("t2"), [x], factor=-0.0)  # not the same attr
    both = oops.Add(root.with_op_name("both"), t1, t2)  # t1 and t2 are not fetched
    fetch = [s1, s2, both, Identity(root.with_op_name("i1"), z), Identity(root, nz)]
    graph = graph_of(fetch, cpu_only, feeds=[x])
    report = common_subgraph_elimination(graph, CONFIG)
    assert ("b", "a") in report.merged
    assert not any("nz" in pair or "t2" in pair for pair in report.merged)
    # Equal factors merge: the comparison is not simply "never".
    t3 = oops.ScaleList(root.with_op_name("t3"), [x], factor=-0.0)
    graph = graph_of([oops.Add(root, t2, t3)], cpu_only, feeds=[x])
    assert common_subgraph_elimination(graph, CONFIG).merged == (("t3", "t2"),)


@pytest.mark.parametrize(
    "differ",
    ["device", "colocation", "label", "control", "attr"],
)
def test_cse_keeps_nodes_that_differ(root, sim_gpus, differ):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    effect = oops.Count(root.with_op_name("effect"))
    first = oops.Neg(root.with_op_name("anchor"), x)
    s1 = root.with_op_name("n1")
    s2 = root.with_op_name("n2")
    if differ == "device":
        s1, s2 = s1.with_device("/cpu:0"), s2.with_device("/gpu:0")
    elif differ == "colocation":
        s2 = s2.colocate_with(first)
    elif differ == "label":
        s2 = s2.with_kernel_label("other")
    elif differ == "control":
        s2 = s2.with_control_dependencies(effect)
    if differ == "attr":
        n1, n2 = oops.Scale(s1, x, factor=2.0), oops.Scale(s2, x, factor=3.0)
    elif differ == "label":
        n1, n2 = Identity(s1, x), Identity(s2, x)
        mg.register_kernel("Identity", "CPU", lambda ctx, x, T: x, label="other", trusted=True)
    else:
        n1, n2 = Identity(s1, x), Identity(s2, x)
    sink = oops.Add(root.with_op_name("sink"), oops.Add(root, n1, n2), first)
    graph = graph_of([sink], sim_gpus, feeds=[x])
    assert common_subgraph_elimination(graph, CONFIG).merged == ()


def test_cse_never_merges_stateful_or_untrusted_or_fetched_nodes(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    s1, s2 = oops.Noisy(root.with_op_name("s1"), x), oops.Noisy(root.with_op_name("s2"), x)
    u1 = oops.UntrustedAdd(root.with_op_name("u1"), x, x)
    u2 = oops.UntrustedAdd(root.with_op_name("u2"), x, x)
    f1, f2 = oops.Neg(root.with_op_name("f1"), x), oops.Neg(root.with_op_name("f2"), x)
    sink = oops.Add(root.with_op_name("sink"), oops.Add(root, s1, s2), oops.Add(root, u1, u2))
    graph = graph_of([sink, f2, f1], cpu_only, feeds=[x])
    assert common_subgraph_elimination(graph, CONFIG).merged == ()
    # The later of two duplicates is fetched: it stays, and so does the first.
    assert {"f1", "f2"} <= set(names(graph))


# -- dependency optimization ---------------------------------------------------------------------


def test_identity_chains_go_and_their_consumers_read_the_input(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    a = oops.Neg(root.with_op_name("a"), x)
    i1 = Identity(root.with_op_name("i1"), a)
    i2 = Identity(root.with_op_name("i2"), i1)
    b = oops.Neg(root.with_op_name("b"), i2)
    kept = Identity(root.with_op_name("kept"), a)  # fetched: observed
    graph = graph_of([b, kept], cpu_only, feeds=[x])
    report = dependency_optimization(graph, CONFIG)
    assert report.removed == ("i1", "i2")
    assert node(graph, "b").inputs == (node(graph, "a").outputs[0],)
    assert "kept" in names(graph)


def test_identity_of_a_fed_tensor_and_a_fed_identity(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    a = oops.Neg(root.with_op_name("a"), x)
    i = Identity(root.with_op_name("i"), a)
    b = oops.Neg(root.with_op_name("b"), i)
    # i is fed: its consumers read the feed; nothing replaces a fed tensor.
    graph = graph_of([b], cpu_only, feeds=[x, i])
    assert dependency_optimization(graph, CONFIG).removed == ()
    assert node(graph, "b").inputs == (i.output,)
    # An Identity of a fed tensor goes: its consumers read the feed itself.
    j = Identity(root.with_op_name("j"), x)
    c = oops.Neg(root.with_op_name("c"), j)
    graph = graph_of([c], cpu_only, feeds=[x])
    assert dependency_optimization(graph, CONFIG).removed == ("j",)
    assert node(graph, "c").inputs == (x.output,)


def test_identities_that_cross_devices_stay(root, sim_gpus):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    on_gpu = Identity(root.with_op_name("on_gpu").with_device("/gpu:0"), x)
    a = oops.Neg(root.with_op_name("a").with_device("/cpu:0"), on_gpu)  # read back on the CPU
    c = Const(root.with_op_name("c").with_device("/cpu:0"), [1.0, 2.0, 3.0])
    n = oops.Neg(root.with_op_name("n").with_device("/cpu:0"), c)
    staged = Identity(root.with_op_name("staged").with_device("/gpu:0"), n)  # CPU -> GPU
    b = oops.Add(root.with_op_name("b").with_device("/gpu:0"), staged, staged)
    graph = graph_of([a, b], sim_gpus, feeds=[x])
    assert dependency_optimization(graph, CONFIG).removed == ()


def test_identity_control_inputs_pass_to_its_consumers_and_dependents(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    effect = oops.Count(root.with_op_name("effect"))
    i = Identity(root.with_op_name("i").with_control_dependencies(effect), x)
    b = oops.Neg(root.with_op_name("b"), i)
    waits = oops.Neg(root.with_op_name("waits").with_control_dependencies(i.operation), x)
    graph = graph_of([b, waits], cpu_only, feeds=[x])
    assert dependency_optimization(graph, CONFIG).removed == ("i",)
    effect_op = node(graph, "effect")
    assert node(graph, "b").control_inputs == (effect_op,)
    assert node(graph, "waits").control_inputs == (effect_op,)


def test_noops_hand_their_control_inputs_to_their_dependents(root, cpu_only):
    e1, e2 = oops.Count(root.with_op_name("e1")), oops.Count(root.with_op_name("e2"))
    group = NoOp(root.with_op_name("group").with_control_dependencies([e1, e2]))
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    after = oops.Neg(root.with_op_name("after").with_control_dependencies(group), x)
    fetched_noop = NoOp(root.with_op_name("fetched_noop").with_control_dependencies(e1))
    graph = graph_of([after, fetched_noop], cpu_only, feeds=[x])
    report = dependency_optimization(graph, CONFIG)
    assert report.removed == ("group",)
    assert [op.name for op in node(graph, "after").control_inputs] == ["e1", "e2"]
    assert "fetched_noop" in names(graph)


def test_a_noop_stays_where_removing_it_adds_edges(root, cpu_only):
    effects = [oops.Count(root.with_op_name(f"e{i}")) for i in range(3)]
    group = NoOp(root.with_op_name("group").with_control_dependencies(effects))
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    after = [
        oops.Neg(root.with_op_name(f"a{i}").with_control_dependencies(group), x) for i in range(3)
    ]
    graph = graph_of(after, cpu_only, feeds=[x])
    assert dependency_optimization(graph, CONFIG).removed == ()  # 3 * 3 > 3 + 3
    assert "group" in names(graph)


# -- remapping: gather of gather -----------------------------------------------------------------


def test_gather_of_gather_becomes_one_gather(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[5, 2])
    inner = gather(root.with_op_name("inner"), x, [4, 0, 2])
    outer = gather(root.with_op_name("outer"), inner, [[2, 2], [0, 1]])
    sink = Identity(root.with_op_name("sink"), outer)
    graph = graph_of([sink], cpu_only, feeds=[x])
    report = remapping(graph, CONFIG)
    assert report.fused == (("outer", "gather_of_gather"),)
    assert "inner" in report.removed
    fused = node(graph, "outer")
    assert fused.type == "GatherV2" and fused.inputs[0] is x.output
    assert fused.inputs[1].op.get_attr("value").tolist() == [[2, 2], [4, 0]]
    assert fused.outputs[0].shape == outer.output.shape
    assert fused.source == outer.operation.source  # errors name the user's line


def test_a_chain_of_gathers_collapses_in_one_pass(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[6])
    y = x
    for i in range(4):
        y = gather(root.with_op_name(f"g{i}"), y, [5 - i, 0, 1, 2, 3, 4][: 6 - i])
    graph = graph_of([Identity(root.with_op_name("sink"), y)], cpu_only, feeds=[x])
    remapping(graph, CONFIG)
    gathers = [op for op in graph.ops if op.type == "GatherV2"]
    assert [op.name for op in gathers] == ["g3"] and gathers[0].inputs[0] is x.output


@pytest.mark.parametrize(
    "case",
    ["inner out of range", "outer out of range", "unknown rows", "scalar inner", "axis 1",
     "batch dims", "fed inner", "negative"],
)  # fmt: skip
def test_gathers_that_could_fail_or_differ_are_not_fused(root, cpu_only, case):
    rows = None if case == "unknown rows" else 5
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[rows, 2])
    inner_idx = {"inner out of range": [5, 0], "scalar inner": 1, "negative": [-1, 0]}.get(
        case, [4, 0]
    )
    inner = gather(root.with_op_name("inner"), x, inner_idx, axis=1 if case == "axis 1" else 0)
    outer_idx = [2] if case == "outer out of range" else [1, 0]
    if case == "batch dims":
        inner = GatherV2(root.with_op_name("inner2"), x, [[1], [0], [2], [3], [4]], 1, batch_dims=1)
    outer = gather(root.with_op_name("outer"), inner, outer_idx)
    sink = Identity(root.with_op_name("sink"), outer)
    feeds = [x, inner] if case == "fed inner" else [x]
    graph = graph_of([sink], cpu_only, feeds=feeds)
    assert remapping(graph, CONFIG).fused == ()


def test_gathers_on_two_devices_are_not_fused(root, sim_gpus):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[5, 2])
    inner = gather(root.with_op_name("inner").with_device("/gpu:0"), x, [4, 0])
    outer = gather(root.with_op_name("outer").with_device("/cpu:0"), inner, [1])
    graph = graph_of([Identity(root.with_op_name("sink"), outer)], sim_gpus, feeds=[x])
    assert remapping(graph, CONFIG).fused == ()


def test_an_inner_gather_read_elsewhere_stays(root, cpu_only):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[5, 2])
    inner = gather(root.with_op_name("inner"), x, [4, 0])
    outer = gather(root.with_op_name("outer"), inner, [1])
    other = Sub(root.with_op_name("other"), inner, inner)
    graph = graph_of([Identity(root.with_op_name("s1"), outer), other], cpu_only, feeds=[x])
    assert remapping(graph, CONFIG).fused == (("outer", "gather_of_gather"),)
    assert "inner" in names(graph)
