"""Tracing (RunOptions(trace=True), RunMetadata.step_stats, Chrome traces) and
SessionConfig(check_kernel_outputs=...)."""

import json
import threading

import _exec_ops as xops
import numpy as np
import pytest

import minigraph
from minigraph import (
    Const,
    Identity,
    InternalError,
    NodeStats,
    Placeholder,
    RunMetadata,
    RunOptions,
    Scope,
    Session,
    SessionConfig,
)

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
TRACE = RunOptions(trace=True)


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


def build_chain(scope):
    x = Const(scope.with_op_name("x"), np.ones((2, 3), np.float32))
    a = xops.AddOne(scope.with_op_name("a"), x)
    b = xops.TwoOut(scope.with_op_name("b"), a)
    return xops.Add(scope.with_op_name("c"), b.a, b.b)


# -- step stats ----------------------------------------------------------------------------------


def test_trace_fills_step_stats_per_node(scope, no_gpu):
    c = build_chain(scope)
    metadata = RunMetadata()
    with Session(scope) as sess:
        value = sess.run(c, options=TRACE, run_metadata=metadata)
    assert value.tolist() == [[5.0] * 3] * 2
    stats = metadata.step_stats
    assert all(isinstance(s, NodeStats) for s in stats)
    # Consts are folded when the plan is compiled: they do not run (nor show) per step.
    assert [(s.node, s.op_type) for s in stats] == [
        ("a", "ExecTestAddOne"),
        ("b", "ExecTestTwoOut"),
        ("c", "ExecTestAdd"),
    ]
    assert all(s.device == CPU0 for s in stats)
    assert [s.output_shapes for s in stats] == [[[2, 3]], [[2, 3], [2, 3]], [[2, 3]]]
    assert all(s.start_us > 0 and s.duration_us >= 0 for s in stats)
    starts = [s.start_us for s in stats]
    assert starts == sorted(starts)
    for before, after in zip(stats, stats[1:]):
        assert before.start_us + before.duration_us <= after.start_us
    assert all(s.thread == threading.get_ident() for s in stats)
    assert metadata.placement == {"x": CPU0, "a": CPU0, "b": CPU0, "c": CPU0}


def test_trace_of_zero_output_nodes(scope, events):
    effect = xops.Effect(scope.with_op_name("effect"))
    group = minigraph.NoOp(scope.with_op_name("group").with_control_dependencies(effect))
    metadata = RunMetadata()
    with Session(scope) as sess:
        assert sess.run(group, options=TRACE, run_metadata=metadata) is None
    assert [(s.node, s.output_shapes) for s in metadata.step_stats] == [
        ("effect", []),
        ("group", []),
    ]
    assert events == ["effect"]


def test_no_trace_without_the_option(scope):
    c = build_chain(scope)
    metadata = RunMetadata()
    with Session(scope) as sess:
        sess.run(c, run_metadata=metadata)
        sess.run(c, options=RunOptions(), run_metadata=metadata)
    assert metadata.step_stats == []
    assert set(metadata.placement) == {"x", "a", "b", "c"}


def test_traced_and_untraced_runs_agree(scope):
    p = Placeholder(scope, minigraph.int32, shape=[3])
    out = xops.Add(scope, xops.AddOne(scope, p), p)
    value = np.array([1, 2, 3], np.int32)
    with Session(scope) as sess:
        plain = sess.run(out, {p: value})
        traced = sess.run(out, {p: value}, options=TRACE, run_metadata=RunMetadata())
        traced_no_metadata = sess.run(out, {p: value}, options=TRACE)
    assert plain.tolist() == traced.tolist() == traced_no_metadata.tolist() == [3, 5, 7]


def test_trace_records_copies_between_devices(scope, sim_gpus):
    x = Placeholder(scope.with_op_name("x"), minigraph.float32, shape=[4])
    on_cpu = Identity(scope.with_op_name("on_cpu").with_device("/cpu:0"), x)
    y = xops.AddOne(scope.with_op_name("y"), on_cpu)
    metadata = RunMetadata()
    with Session(scope) as sess:
        sess.run(y, {x: np.zeros(4, np.float32)}, options=TRACE, run_metadata=metadata)
    assert [(s.node, s.op_type, s.device) for s in metadata.step_stats] == [
        ("on_cpu", "Identity", CPU0),
        ("on_cpu:0->GPU:0", "_Copy", GPU0),
        ("y", "ExecTestAddOne", GPU0),
    ]
    assert metadata.step_stats[1].output_shapes == [[4]]


def test_trace_with_inter_op_threads(scope):
    c = build_chain(scope)
    metadata = RunMetadata()
    with Session(scope, SessionConfig(inter_op_threads=4)) as sess:
        assert sess.run(c, options=TRACE, run_metadata=metadata).tolist() == [[5.0] * 3] * 2
    assert [s.node for s in metadata.step_stats] == ["a", "b", "c"]


def test_node_stats_repr():
    stats = NodeStats("g", "GatherV2", CPU0, 10.0, 2.5, [[2, 3]], 1)
    assert repr(stats) == f"NodeStats('g' (GatherV2) on {CPU0}: 2.5 us, outputs [[2, 3]])"


# -- Chrome trace --------------------------------------------------------------------------------


def test_chrome_trace_writes_valid_json(scope, sim_gpus, tmp_path):
    x = Placeholder(scope.with_op_name("x"), minigraph.float32, shape=[4])
    on_cpu = Identity(scope.with_op_name("on_cpu").with_device("/cpu:0"), x)
    y = xops.AddOne(scope.with_op_name("y"), on_cpu)
    metadata = RunMetadata()
    with Session(scope) as sess:
        sess.run(y, {x: np.zeros(4, np.float32)}, options=TRACE, run_metadata=metadata)
    path = tmp_path / "run.trace.json"
    returned = metadata.chrome_trace(path)
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    assert trace == returned
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert [e["name"] for e in complete] == ["on_cpu", "on_cpu:0->GPU:0", "y"]
    for event, stats in zip(complete, metadata.step_stats):
        assert event["ts"] == stats.start_us and event["dur"] == stats.duration_us
        assert event["cat"] == event["args"]["op"] == stats.op_type
        assert event["args"]["thread"] == stats.thread
        assert event["tid"] == 0  # one row per device: the steps do not overlap
    assert complete[2]["args"]["output_shapes"] == ["[4]"]
    # One process per device, named after it.
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert sorted(names.values()) == [CPU0, GPU0]
    assert names[complete[0]["pid"]] == CPU0 and names[complete[2]["pid"]] == GPU0
    assert all(e["name"] == "process_name" for e in events if e["ph"] == "M")


def test_chrome_trace_rows_per_device_not_per_thread():
    # As a distributed run reports them: one worker device's steps ran on different threads
    # of the worker's pool, another's overlap in time (inter-op threads).
    w0 = "/job:worker/replica:0/task:0/device:CPU:0"
    metadata = RunMetadata(
        step_stats=[
            NodeStats("a", "T", w0, 0.0, 10.0, [], 111),
            NodeStats("b", "T", w0, 10.0, 5.0, [], 222),
            NodeStats("c", "T", w0, 20.0, 5.0, [], 333),
            NodeStats("p", "T", CPU0, 0.0, 10.0, [], 1),
            NodeStats("q", "T", CPU0, 5.0, 10.0, [], 2),
            NodeStats("r", "T", CPU0, 12.0, 10.0, [], 1),
            NodeStats("s", "T", CPU0, 14.0, 1.0, [], 3),
        ]
    )
    events = metadata.chrome_trace()["traceEvents"]
    rows = {e["name"]: (e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {names[rows[n][0]] for n in "abc"} == {w0}
    assert {rows[n][1] for n in "abc"} == {0}  # three threads, one row
    assert [rows[n][1] for n in "pqrs"] == [0, 1, 0, 2]  # the fewest rows without overlap
    assert {names[rows[n][0]] for n in "pqrs"} == {CPU0}
    threads = {e["name"]: e["args"]["thread"] for e in events if e["ph"] == "X"}
    assert threads == {"a": 111, "b": 222, "c": 333, "p": 1, "q": 2, "r": 1, "s": 3}


def test_chrome_trace_without_path_and_without_stats(tmp_path):
    metadata = RunMetadata()
    assert metadata.chrome_trace() == {"traceEvents": [], "displayTimeUnit": "ms"}
    metadata.chrome_trace(str(tmp_path / "empty.json"))
    assert json.loads((tmp_path / "empty.json").read_text()) == {
        "traceEvents": [],
        "displayTimeUnit": "ms",
    }


# -- checked kernel outputs ----------------------------------------------------------------------

CHECKED = SessionConfig(check_kernel_outputs=True)
UNCHECKED = SessionConfig(check_kernel_outputs=False)
BAD_OUTPUT = r"kernel _exec_ops._bad_output \(.*_exec_ops.py:\d+\) returned "


@pytest.mark.parametrize("check", [True, None])
@pytest.mark.parametrize("inter_op_threads", [1, 4])
def test_check_kernel_outputs_catches_a_wrong_dtype(scope, inter_op_threads, check):
    bad = xops.BadOutput(scope.with_op_name("bad"), Const(scope, [1.0, 2.0]), mode="dtype")
    config = SessionConfig(check_kernel_outputs=check, inter_op_threads=inter_op_threads)
    with Session(scope, config) as sess:
        with pytest.raises(
            InternalError,
            match=BAD_OUTPUT + r"output 0 with dtype float64; the graph says float32\n\t "
            r"\[\[node bad \(ExecTestBadOutput\)",
        ):
            sess.run(bad)
    # Unchecked, the wrong value goes through: the check is what catches it.
    with Session(scope, UNCHECKED) as sess:
        assert sess.run(bad).dtype == np.float64


def test_check_kernel_outputs_catches_a_wrong_shape(scope):
    bad = xops.BadOutput(scope.with_op_name("bad"), Const(scope, [1.0, 2.0]), mode="shape")
    with Session(scope, CHECKED) as sess:
        with pytest.raises(
            InternalError, match=BAD_OUTPUT + r"output 0 with shape \[3\]; the graph says \[2\]"
        ):
            sess.run(bad, options=TRACE, run_metadata=RunMetadata())
    with Session(scope, UNCHECKED) as sess:
        assert sess.run(bad).shape == (3,)


def test_check_kernel_outputs_accepts_correct_and_partially_known_shapes(scope):
    p = Placeholder(scope, minigraph.float32, shape=[None, 2])
    ok = xops.BadOutput(scope, p, mode="ok")
    two = xops.TwoOut(scope, p)
    unknown = xops.BadOutput(scope, Placeholder(scope, minigraph.int32), mode="shape")
    with Session(scope, CHECKED) as sess:
        values = sess.run([ok, two.outputs], {p: np.zeros((3, 2), np.float32)})
        assert values[0].shape == (3, 2) and values[1][1].tolist() == [[1.0, 1.0]] * 3
        # Unknown static shape: any shape is compatible.
        assert sess.run(unknown, {"Placeholder_1": [1, 2]}).tolist() == [1, 2, 1]


def test_check_kernel_outputs_checks_every_output(scope):
    two = xops.TwoOut(scope.with_op_name("two").with_kernel_label("wrong-second"), [1, 2])
    with Session(scope, CHECKED) as sess:
        with pytest.raises(
            InternalError, match=r"returned output 1 with dtype int64; the graph says int32"
        ):
            sess.run(two.a)
