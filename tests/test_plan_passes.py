"""The passes of plan compilation (minigraph.plan), each tested alone on small graphs:
prune, feed_homes, insert_copies, fold, bind_kernels, fetch_table, liveness; and that the
distributed runtime prunes with the same function as a local plan.

Devices are pinned: `sim_gpus` (CPU:0 and two simulated GPUs) where copies matter, `cpu_only`
elsewhere.
"""

import _exec_ops as xops
import numpy as np
import pytest

import minigraph
from minigraph import (
    Const,
    Identity,
    InvalidArgumentError,
    NoOp,
    Placeholder,
    Scope,
    Session,
    SessionConfig,
)
from minigraph.placer import place
from minigraph.plan import (
    KernelBinder,
    Step,
    bind_kernels,
    compile_plan,
    feed_homes,
    fetch_table,
    fold,
    insert_copies,
    liveness,
    prune,
)


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


def node(builder):
    """The builder's output, or its operation when it has none."""
    op = builder.operation
    return builder.output if op.outputs else op


def names(ops):
    return [op.name for op in ops]


def lowered(targets, devices, feeds=()):
    """prune -> place -> feed_homes -> insert_copies, with CPU:0 (devices[0]) as the host."""
    host = devices[0]
    fed = set(feeds)
    ops = prune(fed, targets)
    placement = place(ops, devices)
    homes = feed_homes(list(feeds), ops, placement, host)
    return ops, placement, insert_copies(ops, placement, homes, host)


def copy_steps(steps):
    """(value name, destination device name) of every copy step."""
    return [(s.name.split("->")[0], s.device.name) for s in steps if s.op_type == "_Copy"]


# -- prune ---------------------------------------------------------------------------------------


def test_prune_keeps_control_deps_and_drops_unused_branches(scope):
    x = node(Const(scope.with_op_name("x"), [1.0]))
    a = node(xops.AddOne(scope.with_op_name("a"), x))
    xops.AddOne(scope.with_op_name("unused"), x)
    xops.AddOne(scope.with_op_name("unused2"), a)
    effect = node(xops.Effect(scope.with_op_name("effect")))
    before = node(NoOp(scope.with_op_name("before").with_control_dependencies(effect)))
    b = node(xops.AddOne(scope.with_op_name("b").with_control_dependencies(before), a))
    assert names(prune(set(), [b])) == ["x", "a", "effect", "before", "b"]
    # A fetched operation is a target too; a tensor fetched twice is pruned once.
    assert names(prune(set(), [before, b, b])) == ["x", "a", "effect", "before", "b"]
    assert names(prune(set(), [before])) == ["effect", "before"]


def test_prune_fed_outputs_cut_their_producers(scope):
    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32))
    a = node(xops.AddOne(scope.with_op_name("a"), p))
    b = node(xops.AddOne(scope.with_op_name("b"), a))
    c = node(xops.Add(scope.with_op_name("c"), b, a))
    # a is fed: neither it nor the (unfed) placeholder above it is needed.
    assert names(prune({a}, [c])) == ["b", "c"]
    # A fed target needs nothing at all.
    assert prune({a}, [a]) == []
    # A fed placeholder runs nothing, even as a control input.
    after = node(xops.AddOne(scope.with_op_name("after").with_control_dependencies(p.op), b))
    assert names(prune({p}, [after])) == ["a", "b", "after"]
    # A node whose output is fed still runs when a control edge needs it (and so do its
    # inputs' producers).
    d = node(NoOp(scope.with_op_name("d").with_control_dependencies(a.op)))
    assert names(prune({a, p}, [d])) == ["a", "d"]
    with pytest.raises(InvalidArgumentError, match="'p'"):
        prune({a}, [d])


def test_prune_raises_for_an_unfed_placeholder(scope):
    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32, shape=[2]))
    a = node(xops.AddOne(scope.with_op_name("a"), p))
    with pytest.raises(InvalidArgumentError, match=r"placeholder tensor 'p' with dtype float32"):
        prune(set(), [a])
    assert names(prune({p}, [a])) == ["a"]


def test_distributed_partitioning_prunes_with_the_plan_pass():
    pytest.importorskip("distributed")
    from minigraph.distributed import partition, runtime  # noqa: PLC0415

    assert partition.prune is prune
    assert runtime.prune is prune


# -- feed_homes ----------------------------------------------------------------------------------


def test_feed_homes_follow_consumers_when_they_agree(scope, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32))
    q = node(Placeholder(scope.with_op_name("q"), minigraph.float32))
    r = node(Placeholder(scope.with_op_name("r"), minigraph.float32))
    on_gpu1 = scope.with_device("/gpu:1")
    a = node(xops.AddOne(on_gpu1.with_op_name("a"), p))
    b = node(xops.AddOne(on_gpu1.with_op_name("b"), p))
    c = node(xops.AddOne(on_gpu1.with_op_name("c"), q))
    d = node(xops.AddOne(scope.with_device("/gpu:0").with_op_name("d"), q))
    targets = [a, b, c, d, r]
    ops = prune({p, q, r}, targets)
    homes = feed_homes([p, q, r], ops, place(ops, sim_gpus), cpu)
    assert list(homes) == [p, q, r]  # in feed order
    assert homes[p] is gpu1  # both consumers on GPU:1
    assert homes[q] is cpu  # consumers disagree
    assert homes[r] is cpu  # no consumer: fetched as fed


def test_feed_homes_host_memory_inputs_count_as_host(scope, sim_gpus):
    cpu = sim_gpus[0]
    x = node(Const(scope.with_op_name("x"), [1.0, 2.0]))
    axis = node(Placeholder(scope.with_op_name("axis"), minigraph.int32))
    h = node(xops.HostAxis(scope.with_device("/gpu:0").with_op_name("h"), x, axis))
    ops = prune({axis}, [h])
    placement = place(ops, sim_gpus)
    assert placement.device[h.op] is sim_gpus[1]
    assert feed_homes([axis], ops, placement, cpu)[axis] is cpu


# -- insert_copies -------------------------------------------------------------------------------


def test_copies_once_per_value_and_destination(scope, sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    x = node(Const(scope.with_op_name("x").with_device("/cpu:0"), [1.0]))
    g0, g1 = scope.with_device("/gpu:0"), scope.with_device("/gpu:1")
    a = node(xops.AddOne(g0.with_op_name("a"), x))
    b = node(xops.AddOne(g0.with_op_name("b"), x))
    c = node(xops.Add(g0.with_op_name("c"), a, x))
    d = node(xops.AddOne(g1.with_op_name("d"), x))
    e = node(xops.Add(g1.with_op_name("e"), d, a))
    f = node(xops.Add(scope.with_device("/cpu:0").with_op_name("f"), e, a))
    _, placement, layout = lowered([b, c, e, f], sim_gpus)
    copies = copy_steps(layout.steps)
    assert sorted(copies) == sorted(
        [
            ("x:0", gpu0.name),
            ("x:0", gpu1.name),
            ("a:0", gpu1.name),
            ("e:0", cpu.name),
            ("a:0", cpu.name),
        ]
    )
    # Each copy comes right before the first step that needs it, and reads the value's home.
    order = [s.name for s in layout.steps]
    assert order.index("x:0->GPU:0") < order.index("a") < order.index("b")
    assert order.index("x:0->GPU:1") < order.index("d")
    for step in layout.steps:
        if step.op_type == "_Copy":
            value = step.origin.outputs[0]
            assert step.ins == (layout.slot_of[(value, layout.home[value])],)
            assert step.outs == (layout.slot_of[(value, step.device)],)
    # Node steps read the copy on their own device.
    step_e = next(s for s in layout.steps if s.name == "e")
    assert step_e.ins == (layout.slot_of[(d, gpu1)], layout.slot_of[(a, gpu1)])
    # Every slot is written once.
    outs = [s for step in layout.steps for s in step.outs]
    assert len(outs) == len(set(outs)) and max(outs) < layout.n_slots


def test_copies_of_a_feed_and_no_copies_on_one_device(scope, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32))
    a = node(xops.AddOne(scope.with_device("/gpu:0").with_op_name("a"), p))
    b = node(xops.AddOne(scope.with_device("/gpu:0").with_op_name("b"), p))
    c = node(xops.AddOne(scope.with_device("/cpu:0").with_op_name("c"), p))
    _, _, layout = lowered([a, b, c], sim_gpus, feeds=[p])
    assert layout.feed_order == [p] and layout.feed_devices == [cpu]
    assert copy_steps(layout.steps) == [("p:0", gpu0.name)]
    _, _, layout = lowered([a, b], sim_gpus, feeds=[p])
    assert layout.feed_devices == [gpu0]  # fed where its consumers are: no copy
    assert copy_steps(layout.steps) == []


def test_copies_counted_on_the_devices_during_runs(scope, sim_gpus):
    _, gpu0, gpu1 = sim_gpus
    x = node(Const(scope.with_op_name("x").with_device("/cpu:0"), [1.0]))
    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32, shape=[1]))
    a = node(xops.Add(scope.with_device("/gpu:0").with_op_name("a"), x, p))
    b = node(xops.Add(scope.with_device("/gpu:0").with_op_name("b"), a, p))
    c = node(xops.Add(scope.with_device("/gpu:1").with_op_name("c"), b, p))
    with Session(scope) as sess:
        assert sess.run(c, {p: np.float32([1])}).tolist() == [4.0]  # compiles: copies x
        for _ in range(3):
            gpu0.copies_in = gpu1.copies_in = 0
            assert sess.run(c, {p: np.float32([1])}).tolist() == [4.0]
            assert gpu0.copies_in == 1  # p once (x was copied once, at compile time)
            assert gpu1.copies_in == 2  # p and b


# -- fold ----------------------------------------------------------------------------------------


def _binder(placement, constants, **config):
    return KernelBinder(placement, constants, SessionConfig(**config))


def test_fold_runs_consts_and_their_copies_once(scope, sim_gpus):
    cpu, gpu0, _ = sim_gpus
    x = node(Const(scope.with_op_name("x").with_device("/cpu:0"), [1.0, 2.0]))
    a = node(xops.AddOne(scope.with_device("/gpu:0").with_op_name("a"), x))
    b = node(xops.AddOne(scope.with_device("/cpu:0").with_op_name("b"), x))
    _, placement, layout = lowered([a, b], sim_gpus)
    kinds = [s.op_type for s in layout.steps]
    assert kinds == ["Const", "_Copy", "ExecTestAddOne", "ExecTestAddOne"]
    constants = {}
    gpu0.copies_in = 0
    left = fold(layout.steps, _binder(placement, constants), constants)
    assert [s.name for s in left] == ["a", "b"]
    assert gpu0.copies_in == 1
    x_host, x_gpu = layout.slot_of[(x, cpu)], layout.slot_of[(x, gpu0)]
    assert set(constants) == {x_host, x_gpu}
    assert constants[x_host].tolist() == [1.0, 2.0]
    assert type(constants[x_host]) is np.ndarray
    assert type(constants[x_gpu]) is not np.ndarray  # on the (simulated) GPU
    assert constants[x_gpu].get().tolist() == [1.0, 2.0]


def test_fold_leaves_feeds_and_computed_values_alone(scope, cpu_only):
    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32))
    a = node(xops.AddOne(scope.with_op_name("a"), p))
    _, placement, layout = lowered([a], cpu_only, feeds=[p])
    constants = {}
    left = fold(list(layout.steps), _binder(placement, constants), constants)
    assert left == layout.steps and constants == {}


def test_fold_errors_name_the_node(scope, cpu_only):
    x = node(Const(scope.with_op_name("x"), [1.0]))
    _, placement, layout = lowered([x], cpu_only)

    def out_of_memory():
        raise MemoryError("no room")

    def broken(step):
        step.call = out_of_memory

    with pytest.raises(
        minigraph.ResourceExhaustedError, match=r"(?s)no room.*node x \(Const\) on .*CPU:0"
    ):
        fold(layout.steps, broken, {})


# -- bind_kernels --------------------------------------------------------------------------------


def test_bind_kernels_checks_only_untrusted_outputs(scope, cpu_only):
    x = node(Const(scope.with_op_name("x"), [1.0]))
    a = node(Identity(scope.with_op_name("a"), x))  # a built-in, trusted kernel
    b = node(xops.AddOne(scope.with_op_name("b"), a))  # a user kernel
    _, placement, layout = lowered([b], cpu_only)
    for config, checked in [({}, {"b"}), ({"check_kernel_outputs": True}, {"a", "b"})]:
        constants = {}
        binder = _binder(placement, constants, **config)
        steps = fold([*layout.steps], binder, constants)
        for step in steps:
            step.call = step.check = None
        bind_kernels(steps, binder)
        assert {s.name for s in steps if s.check is not None} == checked
        assert [s.trusted for s in steps] == [True, False]
        assert all(callable(s.call) for s in steps)
        assert steps[1].direct[1].constant_inputs == (False,)  # b reads a, computed per run


# -- fetch_table ---------------------------------------------------------------------------------


def test_fetch_table_shares_results(scope, sim_gpus):
    x = node(Const(scope.with_op_name("x"), [1.0]))
    a = node(xops.AddOne(scope.with_device("/gpu:0").with_op_name("a"), x))
    b = node(xops.AddOne(scope.with_device("/cpu:0").with_op_name("b"), a))
    targets = [a, b, a, b.op, a]
    _, _, layout = lowered(targets, sim_gpus)
    index, slots, off_host = fetch_table(targets, layout)
    assert index == {a: 0, b: 1, b.op: None}
    assert slots == [layout.slot_of[(a, sim_gpus[1])], layout.slot_of[(b, sim_gpus[0])]]
    assert off_host == [(0, sim_gpus[1])]


# -- liveness ------------------------------------------------------------------------------------


def _step(name, ins, outs):
    return Step(name, "T", None, None, None, tuple(ins), tuple(outs))


def test_liveness_frees_after_the_last_consumer():
    steps = [
        _step("s0", [0], [2]),  # slot 0 is fed, 1 is a constant
        _step("s1", [2, 1], [3, 4]),  # 4 is never consumed
        _step("s2", [2, 3], [5]),
        _step("s3", [0, 5], [6]),
    ]
    last_use, frees = liveness(steps, kept={1, 6})
    assert last_use == {0: 3, 1: 1, 2: 2, 3: 2, 4: 1, 5: 3, 6: 3}
    assert [sorted(f) for f in frees] == [[], [4], [2, 3], [0, 5]]


def test_liveness_never_frees_kept_values():
    steps = [_step("s0", [0], [1]), _step("s1", [1], [2]), _step("s2", [1, 0], [3])]
    _, frees = liveness(steps, kept={0, 1, 3})
    assert [sorted(f) for f in frees] == [[], [2], []]


def test_plans_never_free_fetched_or_constant_values(scope, cpu_only):
    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32, shape=[1]))
    c = node(Const(scope.with_op_name("c"), [5.0]))
    a = node(xops.Add(scope.with_op_name("a"), p, c))
    b = node(xops.AddOne(scope.with_op_name("b"), a))
    d = node(xops.Add(scope.with_op_name("d"), b, a))
    config = SessionConfig(devices=cpu_only)
    feed = np.float32([1.0])
    plan = compile_plan({p: feed}, [a, d, p], cpu_only, cpu_only[0], config, None)
    freed = {s for f in plan.frees for s in f}
    assert not freed & set(plan.fetch_slots)  # a (consumed later), d and the fed p
    assert not freed & set(plan.constants)
    step_names = [s.name for s in plan.steps]
    b_slot = plan.steps[step_names.index("b")].outs[0]
    assert b_slot in plan.frees[step_names.index("d")]  # b: after its last consumer
    with Session(scope, config) as sess:
        for _ in range(3):  # interpreted, then generated code
            got_a, got_d, got_p = sess.run([a, d, p], {p: feed})
            assert got_a.tolist() == [6.0] and got_d.tolist() == [13.0]
            assert got_p is feed and feed.tolist() == [1.0]


def test_intermediates_are_released_during_the_run(scope, cpu_only):
    # Each Tracked output dies once the next node has read it: at most two are alive at once.
    x = node(Const(scope.with_op_name("x"), [1.0]))
    y = x
    for i in range(5):
        y = node(xops.Tracked(scope.with_op_name(f"t{i}"), y))
    probe = node(xops.Record(scope.with_op_name("probe"), y))
    with Session(scope) as sess:
        for _ in range(2):
            xops.LIVE.reset()
            assert sess.run(probe).tolist() == [6.0]
            assert xops.LIVE.peak <= 2


@pytest.mark.parametrize("enabled", [True, False])
def test_compiling_and_codegen_restore_the_collector(scope, cpu_only, enabled):
    # Compiling pauses cyclic collection; it leaves the collector as it found it, even when
    # compiling fails.
    import gc  # noqa: PLC0415

    p = node(Placeholder(scope.with_op_name("p"), minigraph.float32, shape=[1]))
    a = node(xops.AddOne(scope.with_op_name("a"), p))
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with Session(scope) as sess:
            with pytest.raises(InvalidArgumentError, match="'p'"):
                sess.run(a)
            assert gc.isenabled() is enabled
            for _ in range(2):  # interpreted, then generated code
                assert sess.run(a, {p: np.array([1.0], np.float32)}).tolist() == [2.0]
                assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_constant_copied_to_another_device_is_read_only_like_the_constant(sim_gpus):
    # fold copies a GPU constant to the CPU once per plan; every run hands out that copy, so a
    # user writing into one result must not change the next run's (found by a hostile review).
    root = minigraph.Scope.new_root_scope()
    c = minigraph.Const(root.with_op_name("c").with_device("/gpu:0"), np.arange(3.0))
    y = minigraph.Identity(root.with_op_name("y").with_device("/cpu:0"), c)
    with minigraph.Session(root, minigraph.SessionConfig(optimizer=False)) as sess:
        first = sess.run(y)
        with pytest.raises(ValueError, match="read-only"):
            first[0] = 7.0
        np.testing.assert_array_equal(sess.run(y), [0.0, 1.0, 2.0])
