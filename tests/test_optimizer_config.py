"""The optimizer's switches and registration API: OptimizerConfig (validated when built, as
SessionConfig), `SessionConfig(optimizer=...)`, the process default (the test suite's
MINIGRAPH_TEST_OPTIMIZER switch uses it), each pass on and off alone, `register_rewrite`, and
OpDef's `is_stateful`."""

import _optimizer_ops as oops
import numpy as np
import pytest

import minigraph as mg
import ops.rewrites  # noqa: F401 - the library's rewrites
from minigraph import (
    Const,
    Identity,
    InvalidArgumentError,
    OpDef,
    OptimizerConfig,
    Placeholder,
    Scope,
    Session,
    SessionConfig,
    register_rewrite,
)
from minigraph import optimizer as opt
from minigraph.registry import REWRITE_PASSES, rewrites_for
from ops import gather

PASS_NAMES = [name for name, _ in opt.PASSES]


@pytest.fixture
def root():
    return Scope.new_root_scope()


# -- OptimizerConfig -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("constant_folding", 1, r"OptimizerConfig.constant_folding must be a bool; got int 1"),
        ("remapping", "yes", r"OptimizerConfig.remapping must be a bool; got str 'yes'"),
        ("input_forwarding", None, r"input_forwarding must be a bool; got NoneType"),
        ("max_constant_bytes", -1, r"max_constant_bytes must be >= 0 and <= 1099511627776"),
        ("max_constant_bytes", 1.5, r"max_constant_bytes must be an int; got float 1.5"),
        ("max_constant_bytes", True, r"max_constant_bytes must be an int; got bool True"),
        ("iterations", 0, r"iterations must be >= 1 and <= 16; got int 0"),
        ("iterations", 17, r"iterations must be >= 1 and <= 16"),
    ],
)
def test_config_fields_are_checked_when_built(field, value, message):
    with pytest.raises(InvalidArgumentError, match=message):
        OptimizerConfig(**{field: value})


def test_config_defaults_and_disabled():
    default = OptimizerConfig()
    assert all(getattr(default, name) for name in PASS_NAMES) and default.input_forwarding
    assert default.max_constant_bytes == 10 * 1024 * 1024 and default.iterations == 2
    off = OptimizerConfig.disabled()
    assert not any(getattr(off, name) for name in PASS_NAMES) and not off.input_forwarding
    assert not off.rewrites_graph and default.rewrites_graph
    assert OptimizerConfig(constant_folding=np.bool_(False)).constant_folding is False
    assert OptimizerConfig(iterations=np.int64(3)).iterations == 3


def test_session_config_takes_a_config_a_bool_or_the_default():
    assert SessionConfig(optimizer=True).optimizer == OptimizerConfig()
    assert SessionConfig(optimizer=False).optimizer == OptimizerConfig.disabled()
    mine = OptimizerConfig(remapping=False)
    assert SessionConfig(optimizer=mine).optimizer is mine
    assert SessionConfig().optimizer is opt.default_config()
    with pytest.raises(InvalidArgumentError, match=r"SessionConfig.optimizer must be an Opt"):
        SessionConfig(optimizer="on")
    with pytest.raises(InvalidArgumentError, match=r"got dict"):
        SessionConfig(optimizer={"constant_folding": False})


def test_the_process_default_applies_to_configs_built_afterwards():
    previous = opt.set_default_config(OptimizerConfig(remapping=False))
    try:
        assert SessionConfig().optimizer == OptimizerConfig(remapping=False)
        assert opt.set_default_config(False) == OptimizerConfig(remapping=False)
        assert SessionConfig().optimizer == OptimizerConfig.disabled()
        with pytest.raises(InvalidArgumentError, match="set_default_config must be"):
            opt.set_default_config("off")
    finally:
        opt.set_default_config(previous)


# -- each pass on and off ------------------------------------------------------------------------


def _every_kind_of_change(root):
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[4, 2])
    c = Const(root, [1.0, 2.0])
    folded = oops.Neg(root.with_op_name("folded"), c)  # constant_folding
    d1 = oops.Neg(root.with_op_name("d1"), x)
    d2 = oops.Neg(root.with_op_name("d2"), x)  # common_subgraph_elimination
    plus = oops.Add(root.with_op_name("plus"), d1, d2)
    one = Identity(root.with_op_name("one"), plus.output * 1.0)  # arithmetic_optimization
    inner = gather(root.with_op_name("inner"), one, [3, 1, 0])
    outer = gather(root.with_op_name("outer"), inner, [2, 0])  # remapping
    i = Identity(root.with_op_name("i"), outer)  # dependency_optimization
    return x, oops.Add(root.with_op_name("out"), i, folded + np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("switched_off", [None, *PASS_NAMES])
def test_each_pass_switches_on_and_off_alone(root, cpu_only, switched_off):
    x, out = _every_kind_of_change(root)
    config = OptimizerConfig() if switched_off is None else OptimizerConfig(**{switched_off: False})
    metadata = mg.RunMetadata()
    feed = {x: np.arange(8, dtype=np.float32).reshape(4, 2)}
    with Session(root, SessionConfig(optimizer=config)) as sess:
        got = sess.run(out, feed, run_metadata=metadata)
    with Session(root, SessionConfig(optimizer=False)) as sess:
        np.testing.assert_array_equal(got, sess.run(out, feed))
    ran = {r.name: r for r in metadata.optimizer}
    assert set(ran) == set(PASS_NAMES) - {switched_off}
    assert all(report.changed for report in ran.values())
    assert ran.get("constant_folding", None) is None or "folded" in ran["constant_folding"].folded


def test_one_iteration_and_reports_merged_over_iterations(root, cpu_only):
    x, out = _every_kind_of_change(root)
    feed = {x: np.zeros((4, 2), np.float32)}
    counts = {}
    for iterations in (1, 2):
        metadata = mg.RunMetadata()
        config = SessionConfig(optimizer=OptimizerConfig(iterations=iterations))
        with Session(root, config) as sess:
            sess.run(out, feed, run_metadata=metadata)
        counts[iterations] = {r.name: r for r in metadata.optimizer}
    for report in counts[2].values():  # a pass's counts are its own changes
        removed = len(report.removed) + len(report.merged)
        assert report.nodes_before - report.nodes_after <= removed + len(report.folded)


# -- register_rewrite ----------------------------------------------------------------------------


def test_register_rewrite_refuses_what_it_cannot_run():
    rule = opt.remove_identity
    with pytest.raises(mg.NotFoundError, match="Op type not registered: 'NoSuchOp'"):
        register_rewrite("NoSuchOp", rule)
    with pytest.raises(InvalidArgumentError, match=r"pass_name must be one of \["):
        register_rewrite("OptTestNeg", rule, pass_name="constant_folding")
    with pytest.raises(InvalidArgumentError, match="fn must be callable"):
        register_rewrite("OptTestNeg", "not a function")
    assert REWRITE_PASSES == ("dependency_optimization", "arithmetic_optimization", "remapping")


def _double_negation(rw):
    """-(-x) is x, bit for bit (NaN's sign included)."""
    inner = rw.inputs[0].op
    if inner.type != "OptTestNeg" or not rw.can_absorb(inner):
        return None
    rw.absorb(inner)
    return [rw.inputs_of(inner)[0]]


def test_a_registered_rewrite_runs_once_and_reports(root, cpu_only):
    register_rewrite("OptTestNeg", _double_negation)
    register_rewrite("OptTestNeg", _double_negation)  # again: nothing changes
    assert rewrites_for("OptTestNeg", "arithmetic_optimization") == (_double_negation,)
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    twice = oops.Neg(root.with_op_name("twice"), oops.Neg(root.with_op_name("once"), x))
    out = oops.Add(root.with_op_name("out"), twice, x)
    metadata = mg.RunMetadata()
    feed = np.float32([1.0, -0.0, np.nan])
    with Session(root, SessionConfig(optimizer=True)) as sess:
        got = sess.run(out, {x: feed}, run_metadata=metadata)
    with Session(root, SessionConfig(optimizer=False)) as sess:
        want = sess.run(out, {x: feed})
    np.testing.assert_array_equal(got, want)
    arithmetic = next(r for r in metadata.optimizer if r.name == "arithmetic_optimization")
    assert arithmetic.simplified == (("twice", "_double_negation"),)
    assert set(arithmetic.removed) == {"once", "twice"}


class _Rules:
    """Broken rewrites, each picked by the test through `mode`."""

    mode = "none"

    @classmethod
    def rule(cls, rw):
        if rw.op.name != "target":
            return None
        if cls.mode == "raises":
            raise ValueError("rule bug")
        if cls.mode == "dtype":
            return [rw.const(np.zeros(3, np.float64))]
        if cls.mode == "count":
            return [rw.inputs[0], rw.inputs[0]]
        if cls.mode == "later":
            return [rw.consumers(rw.op.outputs[0])[0].outputs[0]]
        if cls.mode == "no kernel":
            return [rw.node("OptTestNoKernel", [rw.inputs[0]]).outputs[0]]
        if cls.mode == "absorb fetched":
            rw.absorb(rw.inputs[0].op)
        return None


@pytest.mark.parametrize(
    "mode, message",
    [
        ("raises", r"rewrite _Rules.rule of node target \(OptTestScale\) failed: ValueError: "
                   r"rule bug \(defined at .*test_optimizer_config.py:\d+\)"),
        ("dtype", r"replaced target:0 \(float32\) by a float64 tensor"),
        ("count", r"returned 2 outputs; the node has 1"),
        ("later", r"replaced target:0 by after:0, which does not come before it"),
        ("absorb fetched", r"absorbs before \(OptTestNeg\), which must stay"),
    ],
)  # fmt: skip
def test_broken_rewrites_are_internal_errors_naming_them(root, cpu_only, mode, message):
    register_rewrite("OptTestScale", _Rules.rule)
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    before = oops.Neg(root.with_op_name("before"), x)
    target = oops.Scale(root.with_op_name("target"), before, factor=2.0)
    after = oops.Neg(root.with_op_name("after"), target)
    _Rules.mode = mode
    try:
        with Session(root, SessionConfig(optimizer=True)) as sess:
            with pytest.raises(mg.InternalError, match=message):
                sess.run([after, before], {x: np.zeros(3, np.float32)})
    finally:
        _Rules.mode = "none"


def test_a_rewrite_needing_a_missing_kernel_is_skipped(root, cpu_only):
    register_rewrite("OptTestScale", _Rules.rule)
    x = Placeholder(root.with_op_name("x"), mg.float32, shape=[3])
    target = oops.Scale(root.with_op_name("target"), x, factor=2.0)
    out = oops.Neg(root.with_op_name("out"), target)
    _Rules.mode = "no kernel"
    metadata = mg.RunMetadata()
    try:
        with Session(root, SessionConfig(optimizer=True)) as sess:
            got = sess.run(out, {x: np.ones(3, np.float32)}, run_metadata=metadata)
    finally:
        _Rules.mode = "none"
    assert got.tolist() == [-2.0, -2.0, -2.0]
    arithmetic = next(r for r in metadata.optimizer if r.name == "arithmetic_optimization")
    assert arithmetic.simplified == ()
    ((node, why),) = arithmetic.deferred
    assert node == "target" and "_Rules.rule: No registered kernel for op OptTestNoKernel" in why


# -- OpDef.is_stateful ---------------------------------------------------------------------------


def test_is_stateful_is_a_checked_part_of_the_definition():
    op_def = OpDef("OptConfigStateful", outputs=["y: int32"], is_stateful=True)
    assert op_def.is_stateful and "Stateful: never folded" in op_def.describe()
    assert not OpDef("OptConfigPlain", outputs=["y: int32"]).is_stateful
    with pytest.raises(AttributeError, match="immutable"):
        op_def.is_stateful = False
    with pytest.raises(InvalidArgumentError, match="is_stateful must be a bool; got int 1"):
        OpDef("OptConfigBad", is_stateful=1)
    mg.register_op(op_def)
    mg.register_op(OpDef("OptConfigStateful", outputs=["y: int32"], is_stateful=True))  # again
    with pytest.raises(mg.AlreadyExistsError, match="is_stateful is True there, False here"):
        mg.register_op(OpDef("OptConfigStateful", outputs=["y: int32"]))
