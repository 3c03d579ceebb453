"""Graphs made by TensorFlow 2.21 (tests/data, written by tests/data/make_tf_graphs.py) import
and give TensorFlow's results; no TensorFlow needed here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
import ops  # noqa: F401 - registers GatherV2 and GatherNd
from minigraph import graph_def as gd_module
from minigraph.errors import NotFoundError

DATA = Path(__file__).resolve().parent / "data"


def expected(name: str) -> tuple[dict, list[str], list[str], list[np.ndarray]]:
    with np.load(DATA / f"{name}.npz", allow_pickle=False) as data:
        feeds = {n.decode(): data[f"feed_{i}"] for i, n in enumerate(data["feed_names"])}
        fetches = [n.decode() for n in data["fetch_names"]]
        dtypes = [n.decode() for n in data["fetch_dtypes"]]
        values = [data[f"fetch_{i}"] for i in range(len(fetches))]
    return feeds, fetches, dtypes, values


def comparable(value: np.ndarray) -> np.ndarray:
    # As the generator stored TF's results: strings as fixed-width bytes, bfloat16 as float32.
    if value.dtype == object:
        return value.astype("S")
    if value.dtype == mg.bfloat16.np_dtype:
        return value.astype(np.float32)
    return value


@pytest.mark.parametrize(
    "file, results",
    [
        ("gather_basic.pb", "gather_basic"),
        ("gather_basic.pbtxt", "gather_basic"),
        ("variadic.pb", "variadic"),
        ("consts.pb", "consts"),
    ],  # fmt: skip
)
def test_tf_graphs_give_tfs_results(file, results):
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, mg.read_graph(DATA / file), name="")
    feeds, fetches, dtypes, values = expected(results)
    got = mg.Session(scope).run(fetches, feeds)
    assert len(got) == len(values) >= 5
    for name, dtype, want, value in zip(fetches, dtypes, values, got):
        assert mg.as_dtype(value.dtype).name == dtype, name
        value = comparable(value)
        assert value.shape == want.shape, name
        np.testing.assert_array_equal(value, want, err_msg=name)


def test_gather_basic_details():
    graph_def = mg.read_graph(DATA / "gather_basic.pb")
    assert graph_def == mg.read_graph(DATA / "gather_basic.pbtxt")
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="tf")
    graph = scope.graph
    # Placeholders with known, partial and unknown shapes.
    assert graph.get_output("tf/x:0").shape.as_list() == [None, 3]
    assert graph.get_output("tf/anything:0").shape.rank is None
    # tf.gather with batch_dims, a name scope, negative axis.
    per_batch = graph.get_operation("tf/batched/per_batch")
    assert per_batch.get_attr("batch_dims") == 1
    assert per_batch.outputs[0].shape.as_list() == [2, 2, 4]
    # TF's GatherV2 has no bad_indices_policy, its GatherNd no batch_dims: the defaults.
    assert per_batch.get_attr("bad_indices_policy") == ""
    assert graph.get_operation("tf/nd").get_attr("batch_dims") == 0
    assert graph.get_operation("tf/ignore").get_attr("bad_indices_policy") == "IGNORE"
    # Devices, colocation and control dependencies.
    assert graph.get_operation("tf/raw_v2").device == "/device:CPU:0"
    assert graph.get_operation("tf/nd_copy").colocation_group == "tf/nd"
    done = graph.get_operation("tf/done")
    assert [c.name for c in done.control_inputs] == ["tf/nd_copy", "tf/rows"]  # as TF wrote them
    # int16 indices and an int64 axis on the raw op.
    raw = graph.get_operation("tf/raw_v2")
    assert (raw.get_attr("Tindices"), raw.get_attr("Taxis")) == (mg.int16, mg.int64)


def test_tf_files_parse_without_unknown_fields():
    # Re-serializing reproduces TF's bytes exactly: every field TF wrote is declared in
    # graph.proto with TF's number and type (undeclared ones would move to the end).
    for file in ("gather_basic.pb", "consts.pb", "variadic.pb", "gather_nd_batch_dims_lowered.pb"):
        data = (DATA / file).read_bytes()
        assert gd_module.parse_graph_def(data).SerializeToString(deterministic=True) == data


def test_reexport_is_a_plain_tf_graph():
    graph_def = mg.read_graph(DATA / "gather_basic.pb")
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    again = scope.graph.as_graph_def()
    assert again.versions.min_consumer == 0
    theirs = {n.name: n for n in graph_def.node}
    assert [n.name for n in again.node] == [n.name for n in graph_def.node]
    for ours in again.node:
        tf_node = theirs[ours.name]
        assert (ours.op, list(ours.input), ours.device) == (
            tf_node.op, list(tf_node.input), tf_node.device
        )  # fmt: skip
        # The same attrs, less TF's annotations (_output_shapes was not asked for).
        tf_attrs = {
            k
            for k in tf_node.attr
            if k not in ("_output_shapes", "_has_manual_control_dependencies")
        }
        assert set(ours.attr) == tf_attrs, ours.name
        for key in tf_attrs:
            assert ours.attr[key] == tf_node.attr[key], (ours.name, key)


def test_the_lowered_gather_nd_imports_now_that_its_ops_exist():
    # TF 2.21 lowers gather_nd with batch_dims to StridedSlice, Tile, Transpose, ... which the op
    # library now has (tests/test_array_ops.py checks the values).
    graph_def = mg.read_graph(DATA / "gather_nd_batch_dims_lowered.pb")
    assert not {n.op for n in graph_def.node} - set(mg.registry.list_ops())
    mg.import_graph_def(mg.Scope.new_root_scope(), graph_def)


def test_a_graph_naming_ops_nobody_registered_names_each_with_its_first_node():
    graph_def = mg.read_graph(DATA / "gather_nd_batch_dims_lowered.pb")
    renamed = {"StridedSlice": "NoSuchSlice", "Tile": "NoSuchTile", "Transpose": "NoSuchPerm"}
    for node in graph_def.node:
        node.op = renamed.get(node.op, node.op)
    missing = {n.op for n in graph_def.node} - set(mg.registry.list_ops())
    assert missing == set(renamed.values())
    scope = mg.Scope.new_root_scope()
    before = len(scope.graph)
    with pytest.raises(NotFoundError) as info:
        mg.import_graph_def(scope, graph_def)
    message = str(info.value)
    # Every missing type once, with the first node (in file order) that uses it.
    assert message.count("first used by") == len(missing)
    for op_type in missing:
        first = next(n.name for n in graph_def.node if n.op == op_type)
        assert f"'{op_type}' (first used by node '{first}')" in message
    assert len(scope.graph) == before
