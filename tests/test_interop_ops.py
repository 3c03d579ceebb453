"""GraphDef interop both ways for every op of the library, case by case (tests/_interop_cases.py).

Without TensorFlow (the normal suite), against TF 2.21's own graphs and values committed in
tests/data/tf_ops_<family>.pb/.npz (written by tests/data/make_tf_op_graphs.py):
- every registered op has a case (or is listed as minigraph-only, or pending, with a reason);
- the files hold every case as the table has it (same op, same inputs fed);
- minigraph imports TF's graph and runs each case to TF's values (or TF's run-time error);
- what minigraph writes for a case is what TF wrote for it: the same nodes, inputs and attrs
  (defaults included), and Consts of equal value.

With TensorFlow (`/work/tfvenv/bin/python -m pytest tests/test_interop_ops.py`; skipped
elsewhere): TF imports what minigraph writes for each case and runs it to minigraph's values.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import numpy as np
import pytest
from _interop_cases import (
    CASES,
    FAMILIES,
    MINIGRAPH_ONLY,
    PENDING,
    Case,
    assert_same_value,
    build_ours,
    feed_values,
    unpack,
)

import minigraph as mg
import ops  # noqa: F401 - registers the op library
from minigraph import registry, tf_compat
from minigraph.devices import CpuDevice

DATA = Path(__file__).resolve().parent / "data"
REGENERATE = "regenerate with `python tests/data/make_tf_op_graphs.py` where TF 2.21 is installed"


def _param(case: Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


PARAMS = [_param(c) for c in CASES]


# -- the table covers the library ---------------------------------------------------------------


def _library_op(op_type: str) -> bool:
    """Registered by minigraph or its op library (not by a test module run in this process)."""
    module = getattr(registry.builder(op_type), "__module__", None) or ""
    return module.startswith(("minigraph.", "ops."))


def test_every_registered_op_has_a_case():
    covered = {c.op for c in CASES}
    registered = {op for op in registry.list_ops() if _library_op(op)}
    lacking = sorted(registered - covered - set(MINIGRAPH_ONLY) - set(PENDING))
    assert not lacking, f"ops without an interop case in tests/_interop_cases.py: {lacking}"
    stale = sorted((set(MINIGRAPH_ONLY) | set(PENDING)) & covered)
    assert not stale, f"listed as minigraph-only or pending, yet covered: {stale}"
    gone = sorted((set(MINIGRAPH_ONLY) | set(PENDING)) - registered)
    assert not gone, f"listed as minigraph-only or pending, not registered: {gone}"


def test_every_op_is_covered_with_its_dtypes_and_attrs():
    # Each op's cases: a non-float dtype where the op allows one, every multi-output op's
    # outputs (fetches cover all), and every attr with a default set otherwise somewhere.
    for op in {c.op for c in CASES}:
        op_def = registry.get_op_def(op)
        mine = [c for c in CASES if c.op == op]
        dtypes_used = {
            np.asarray(v).dtype
            for c in mine
            for v in c.inputs.values()
            for v in (v if isinstance(v, list) else [v])
        }
        if op_def.inputs and any(
            a.type == "type" and a.allowed and any(not d.is_floating for d in a.allowed)
            for a in op_def.attrs
            if a.name in op_def.inferred_attrs
        ):
            assert any(d.kind not in "f" for d in dtypes_used), f"{op}: no non-float case"
        for attr in op_def.attrs:
            if attr.name in op_def.inferred_attrs or not attr.has_default:
                continue
            declared = tf_compat.tf_attrs(op)
            if declared is not None and attr.name not in declared:
                continue  # minigraph's extension (GatherNd's batch_dims): TF cannot write it
            if attr.type == "bool" or attr.allowed or attr.type in ("int", "list(int)", "shape"):
                assert any(
                    name == attr.name and value != attr.default
                    for c in mine
                    for name, value in c.attrs.items()
                ), f"{op}: no case sets {attr.name} to a non-default value"


# -- TF's files ----------------------------------------------------------------------------------


@functools.cache
def tf_graph_def(family: str):
    return mg.read_graph(DATA / f"tf_ops_{family}.pb")


@functools.cache
def tf_results(family: str) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, str]]]:
    """TF's feeds and fetched values by tensor name, and its errors by case name."""
    with np.load(DATA / f"tf_ops_{family}.npz", allow_pickle=False) as data:
        values = unpack(data)
        errors = {
            name.decode(): (cls.decode(), message.decode("utf-8"))
            for name, cls, message in zip(
                data["error_cases"], data["error_classes"], data["error_messages"]
            )
        }
    return values, errors


class _Families:
    """Each family's TF graph imported once, with a Session (and a CPU-only one) on it."""

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, bool], mg.Session] = {}
        self.scopes: dict[str, mg.Scope] = {}

    def session(self, family: str, cpu_only: bool) -> mg.Session:
        key = (family, cpu_only)
        if key not in self.sessions:
            if family not in self.scopes:
                scope = mg.Scope.new_root_scope()
                mg.import_graph_def(scope, tf_graph_def(family), name="")
                self.scopes[family] = scope
            config = mg.SessionConfig(devices=[CpuDevice(0)]) if cpu_only else None
            self.sessions[key] = mg.Session(self.scopes[family], config)
        return self.sessions[key]

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()


@pytest.fixture(scope="module")
def families():
    made = _Families()
    yield made
    made.close()


def _node_map(graph_def) -> dict[str, object]:
    return {n.name: n for n in graph_def.node}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tf_files_hold_every_case_as_the_table_has_it(family):
    nodes = _node_map(tf_graph_def(family))
    values, errors = tf_results(family)
    for case in (c for c in CASES if c.family == family):
        node = nodes.get(f"{case.name}/op")
        assert node is not None, f"{case.id} is not in tf_ops_{family}.pb: {REGENERATE}"
        assert node.op == case.op, case.id
        feeds = build_ours(case, mg.Scope.new_root_scope()).feeds
        assert feeds.keys() == feed_values(case).keys(), case.id
        for name, value in feeds.items():
            assert name in values, f"{case.id}: {name} not recorded: {REGENERATE}"
            recorded = values[name]
            assert recorded.dtype == value.dtype and recorded.shape == value.shape, name
            assert (
                recorded.tobytes() == value.tobytes()
                if value.dtype != object
                else (recorded.tolist() == value.tolist())
            ), f"{case.id}: the table's {name} is not what TF was fed: {REGENERATE}"
        what_tf_did = f"raised {errors[case.name]}" if case.name in errors else "ran it"
        assert (case.error is not None) == (case.name in errors), f"{case.id}: TF {what_tf_did}"
    assert (DATA / f"tf_ops_{family}.pb").stat().st_size < 200_000


def test_the_tf_data_is_small():
    total = sum(p.stat().st_size for p in DATA.glob("tf_ops_*"))
    assert total < 600_000, total


def _expect_error(case: Case, cls: str, message: str, who: str) -> None:
    want_cls, pattern = case.error
    assert cls == want_cls, (case.id, who, cls, message)
    assert re.search(pattern, message), (case.id, who, message, pattern)


@pytest.mark.parametrize("case", PARAMS)
def test_tf_graph_runs_to_tfs_values(case, families):
    values, errors = tf_results(case.family)
    session = families.session(case.family, case.cpu_only)
    plan = build_ours(case, mg.Scope.new_root_scope())  # the names to run (TF's graph has them)
    feeds = {n: values[n] for n in plan.feeds}
    _run_and_compare(case, plan, session, feeds, values, errors.get(case.name))


def _run_and_compare(case, plan, session, feeds, values, tf_error) -> None:
    """Runs the plan in `session` and compares with TF's `values` (or TF's error)."""
    if plan.setup:
        session.run(plan.setup)
    if case.error:
        assert tf_error is not None, f"{case.id}: TF ran it"
        _expect_error(case, *tf_error, "TF")
        with pytest.raises(mg.OpError) as info:
            session.run(plan.fetches, feeds)
        _expect_error(case, type(info.value).__name__, info.value.message, "minigraph")
        got = [None] * len(plan.fetches)
    else:
        assert tf_error is None, f"{case.id}: TF raised {tf_error}"
        got = session.run(plan.fetches, feeds)
    if plan.after:
        got += session.run(plan.after)
    for name, value in zip(plan.fetches + plan.after, got):
        if case.error and name in plan.fetches:
            continue
        assert_same_value(value, values.get(name), plan.dtypes.get(name, ""), case, name)


# -- what minigraph writes is what TF writes -----------------------------------------------------


def _comparable_node(node) -> tuple:
    attrs = {k: v for k, v in node.attr.items() if not k.startswith("_")}
    return node.op, list(node.input), node.device, attrs


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_our_export_is_what_tf_writes(case):
    scope = mg.Scope.new_root_scope()
    build_ours(case, scope)
    ours = scope.graph.as_graph_def()
    assert ours.versions.min_consumer == 0, case.id
    theirs = _node_map(tf_graph_def(case.family))
    for node in ours.node:
        tf_node = theirs.get(node.name)
        assert tf_node is not None, (case.id, node.name)
        op, inputs, device, attrs = _comparable_node(node)
        tf_op, tf_inputs, tf_device, tf_attrs = _comparable_node(tf_node)
        assert (op, inputs, device) == (tf_op, tf_inputs, tf_device), node.name
        assert set(attrs) == set(tf_attrs), (node.name, set(attrs) ^ set(tf_attrs))
        for key, value in attrs.items():
            if key == "value" and value.HasField("tensor"):
                _assert_same_tensor(value.tensor, tf_attrs[key].tensor, node.name)
            else:
                assert value == tf_attrs[key], (node.name, key, value, tf_attrs[key])
    prefix = f"{case.name}/"
    assert {n.name for n in ours.node} == {n for n in theirs if n.startswith(prefix)}, case.id


def _assert_same_tensor(ours, theirs, what: str) -> None:
    """Const values: the same dtype, shape and elements (TF may choose another encoding of
    them: typed fields or tensor_content, which minigraph reads either way)."""
    from minigraph.graph_def import tensor_from_proto

    assert ours.dtype == theirs.dtype and ours.tensor_shape == theirs.tensor_shape, what
    a, b = tensor_from_proto(ours), tensor_from_proto(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    if a.dtype == object:
        assert a.tolist() == b.tolist(), what
    else:
        assert a.tobytes() == b.tobytes(), what


# -- TensorFlow runs what minigraph writes (TF's venv only) ----------------------------------------


@pytest.fixture(scope="module")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize("case", PARAMS)
def test_tf_runs_what_we_write(case, tf):
    from tensorflow.python.framework import op_def_registry

    scope = mg.Scope.new_root_scope()
    plan = build_ours(case, scope)
    graph_def = scope.graph.as_graph_def()
    assert graph_def.versions.min_consumer == 0, case.id
    for node in graph_def.node:
        known = {a.name for a in op_def_registry.get(node.op).attr}
        assert {k for k in node.attr if not k.startswith("_")} <= known, node.name
    # TF runs our graph; its values (or error) are then what minigraph must give.
    tf_values, tf_error = _run_in_tf(tf, graph_def, plan)
    config = mg.SessionConfig(devices=[CpuDevice(0)]) if case.cpu_only else None
    with mg.Session(scope, config) as session:
        _run_and_compare(case, plan, session, plan.feeds, tf_values, tf_error)


def _run_in_tf(tf, graph_def, plan):
    """Imports our GraphDef into TF (TF's parser) and runs the plan there, on TF's CPU:
    the values by name, and TF's error (class, message) if the main run raised one."""
    tf1 = tf.compat.v1
    tf_graph_def = tf1.GraphDef.FromString(graph_def.SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf_graph_def, name="")
    config = tf1.ConfigProto(device_count={"GPU": 0})
    values, error = {}, None
    with tf1.Session(graph=graph, config=config) as session:
        if plan.setup:
            session.run(plan.setup)
        try:
            got = session.run(plan.fetches, plan.feeds)
            values.update(zip(plan.fetches, got))
        except tf.errors.OpError as e:
            error = (type(e).__name__, e.message)
        if plan.after:
            values.update(zip(plan.after, session.run(plan.after)))
    return {k: v for k, v in values.items() if v is not None}, error
