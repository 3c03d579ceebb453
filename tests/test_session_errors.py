"""Kernel errors: re-raised as minigraph error classes with node context, in every execution
mode (generated plan, traced interpreter, inter-op parallel, checked outputs)."""

import inspect

import _exec_ops as xops
import pytest

import minigraph
from minigraph import (
    Const,
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    RunMetadata,
    RunOptions,
    Scope,
    Session,
    SessionConfig,
    UnimplementedError,
)

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

#: A plan's first run interprets its steps; later runs run its generated code.
SECOND_RUN = object()

#: How a plan may be executed: (session config, run options).
MODES = {
    "first run": (SessionConfig(), None),
    "generated": (SessionConfig(), SECOND_RUN),
    "traced": (SessionConfig(), RunOptions(trace=True)),
    "parallel": (SessionConfig(inter_op_threads=4), None),
    "checked": (SessionConfig(check_kernel_outputs=True), None),
}


@pytest.fixture(params=list(MODES))
def mode(request):
    return MODES[request.param]


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


def run(sess, fetches, options, feeds=None):
    if options is SECOND_RUN:
        # The same run once before, so that this one runs the plan's generated code; it must
        # give what the first (interpreted) run gave, error included.
        try:
            first = ("ok", sess.run(fetches, feeds))
        except OpError as e:
            first = ("error", type(e), str(e))
        try:
            second = ("ok", sess.run(fetches, feeds, run_metadata=RunMetadata()))
        except OpError as e:
            assert first == ("error", type(e), str(e))
            raise
        assert first[0] == "ok" and repr(first[1]) == repr(second[1])
        return second[1]
    return sess.run(fetches, feeds, options=options, run_metadata=RunMetadata())


@pytest.mark.parametrize(
    "kind, error, original, text",
    [
        ("value", InvalidArgumentError, ValueError, "ValueError: bad value from the kernel"),
        ("type", InvalidArgumentError, TypeError, "TypeError: wrong type in the kernel"),
        ("memory", ResourceExhaustedError, MemoryError, "MemoryError: out of memory"),
        ("notimpl", UnimplementedError, NotImplementedError, "NotImplementedError: not done"),
        ("runtime", InternalError, RuntimeError, "RuntimeError: something broke"),
        ("invalid", InvalidArgumentError, InvalidArgumentError, r"indices\[3\] = 7 is not in"),
    ],
)
@pytest.mark.usefixtures("cpu_only")  # the message names CPU:0
def test_kernel_errors_become_minigraph_errors_with_node_context(
    scope, mode, kind, error, original, text
):
    config, options = mode
    x = Const(scope.with_op_name("x"), [1.0])
    line = inspect.currentframe().f_lineno + 1
    bad = xops.Fail(scope.with_op_name("bad"), x, kind=kind)
    with Session(scope, config) as sess:
        with pytest.raises(error, match=text) as info:
            run(sess, bad, options)
    e = info.value
    assert type(e) is error
    assert isinstance(e.__cause__, original)
    assert e.node_name == "bad" and e.op_type == "ExecTestFail"
    context = f"[[node bad (ExecTestFail) on {CPU0}, defined at {__file__}:{line}]]"
    assert str(e).endswith(context)
    if kind == "invalid":
        # Already a minigraph error: its class and message are kept, without a type prefix.
        assert str(e).startswith("indices[3] = 7 is not in [0, 5)")


def test_kernel_error_on_a_gpu_names_the_gpu(scope, sim_gpus, mode):
    config, options = mode
    bad = xops.Fail(scope.with_op_name("bad"), Const(scope, [1.0]), kind="memory")
    with Session(scope, config) as sess:
        with pytest.raises(ResourceExhaustedError, match=f"on {GPU0}, defined at"):
            run(sess, bad, options)


def test_session_stays_usable_after_a_kernel_error(scope, mode, events):
    config, options = mode
    p = minigraph.Placeholder(scope.with_op_name("p"), minigraph.int32)
    bad = xops.Fail(scope.with_op_name("bad"), p, kind="value")
    good = xops.Record(scope.with_op_name("good"), xops.AddOne(scope, p))
    with Session(scope, config) as sess:
        for i in range(3):
            with pytest.raises(InvalidArgumentError, match="bad value"):
                run(sess, [good, bad], options, {p: i})
            assert run(sess, good, options, {p: i}) == i + 1
        assert run(sess, xops.AddOne(scope, good), options, {p: 5}) == 7


def test_error_in_a_copy_step_names_the_copy(scope, sim_gpus):
    # A string tensor cannot be copied onto a GPU; placement keeps strings off GPUs unless a
    # GPU kernel (wrongly) claims to take them, as ExecTestAnyGpu's does.
    s = Const(scope.with_op_name("s").with_device("/cpu:0"), ["a"])
    y = xops.AnyGpu(scope.with_op_name("y"), s)
    with Session(scope) as sess:
        with pytest.raises(
            InvalidArgumentError, match=r"TypeError: string tensors cannot live on a GPU"
        ) as info:
            sess.run(y)
    assert "[[node s:0->GPU:0 (_Copy) on " + GPU0 in str(info.value)


def test_keyboard_interrupt_is_not_converted(scope):
    bad = xops.Fail(scope, Const(scope, [1.0]), kind="keyboard")
    with Session(scope) as sess:
        with pytest.raises(KeyboardInterrupt, match="^interrupted inside the kernel$"):
            sess.run(bad)
        with pytest.raises(KeyboardInterrupt, match="^interrupted inside the kernel$"):
            sess.run(bad, options=RunOptions(trace=True))


def test_wrong_number_of_kernel_outputs(scope, mode):
    config, options = mode
    two = xops.TwoOut(scope.with_op_name("two"), Const(scope, [1.0]), mode="one")
    with Session(scope, config) as sess:
        with pytest.raises(
            InternalError,
            match=r"kernel _exec_ops._two_out \(.*\) returned 1 outputs; the op has 2",
        ) as info:
            run(sess, two.outputs, options)
    assert "[[node two (ExecTestTwoOut)" in str(info.value)


def test_wrong_number_of_outputs_of_an_unchecked_kernel(scope):
    two = xops.TwoOut(scope.with_op_name("two"), Const(scope, [1.0]), mode="one")
    for config in (SessionConfig(check_kernel_outputs=False),) + tuple(
        SessionConfig(check_kernel_outputs=False, inter_op_threads=n) for n in (2,)
    ):
        with Session(scope, config) as sess:
            with pytest.raises(
                OpError, match=r"(kernel returned 1 outputs, the op has 2|not enough values)"
            ) as info:
                sess.run(two.outputs)
        assert "[[node two (ExecTestTwoOut)" in str(info.value)


def test_kernel_error_after_partial_work_leaves_no_state(scope, events):
    x = Const(scope, [1.0])
    first = xops.Record(scope.with_op_name("first"), x)
    bad = xops.Fail(scope.with_op_name("bad"), first, kind="value")
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match=r"\[\[node bad"):
            sess.run(bad)
        assert events == ["first"]
        assert sess.run(first).tolist() == [1.0]
        assert events == ["first", "first"]
