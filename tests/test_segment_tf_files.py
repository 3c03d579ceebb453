"""A graph of UnsortedSegmentSum, ScatterNd and ParallelDynamicStitch written by TensorFlow 2.21
(tests/data/segment_ops.pb, made by tests/data/make_tf_graphs.py) imports and gives TF's
results bit for bit, and exports back as the same plain TF graph; no TensorFlow needed here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import minigraph as mg
import ops.partition  # noqa: F401 - registers ParallelDynamicStitch
import ops.segment  # noqa: F401 - registers UnsortedSegmentSum and ScatterNd
from minigraph import graph_def as gd_module

DATA = Path(__file__).resolve().parent / "data"


def recorded():
    with np.load(DATA / "segment_ops.npz", allow_pickle=False) as data:
        feeds = {n.decode(): data[f"feed_{i}"] for i, n in enumerate(data["feed_names"])}
        fetches = [n.decode() for n in data["fetch_names"]]
        dtypes = [n.decode() for n in data["fetch_dtypes"]]
        values = [data[f"fetch_{i}"] for i in range(len(fetches))]
    return feeds, fetches, dtypes, values


def test_tfs_segment_graph_gives_tfs_results_bit_for_bit():
    scope = mg.Scope.new_root_scope()
    graph_def = mg.read_graph(DATA / "segment_ops.pb")
    assert {"UnsortedSegmentSum", "ScatterNd", "ParallelDynamicStitch"} <= {
        n.op for n in graph_def.node
    }
    mg.import_graph_def(scope, graph_def, name="")
    feeds, fetches, dtypes, values = recorded()
    got = mg.Session(scope, mg.SessionConfig(check_kernel_outputs=True)).run(fetches, feeds)
    assert len(got) == len(values) == 7
    for name, dtype, want, value in zip(fetches, dtypes, values, got):
        assert mg.as_dtype(value.dtype).name == dtype, name
        if value.dtype == object:
            value = value.astype("S")  # as the generator stored TF's strings
        assert value.shape == want.shape and value.tobytes() == want.tobytes(), (name, value)
    halves = got[fetches.index("halves:0")]
    assert halves.tolist() == [2048.0, 0.0, 0.0] and not np.signbit(halves).any()


def test_the_file_round_trips_as_a_plain_tf_graph():
    data = (DATA / "segment_ops.pb").read_bytes()
    graph_def = gd_module.parse_graph_def(data)
    assert graph_def.SerializeToString(deterministic=True) == data
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    again = scope.graph.as_graph_def()
    assert again.versions.min_consumer == 0
    theirs = {n.name: n for n in graph_def.node}
    reloaded = mg.Scope.new_root_scope()
    mg.import_graph_def(reloaded, again, name="")
    for ours in again.node:
        tf_node = theirs[ours.name]
        assert (ours.op, list(ours.input)) == (tf_node.op, list(tf_node.input))
        tf_attrs = {k for k in tf_node.attr if not k.startswith("_")}
        assert set(ours.attr) == tf_attrs, ours.name
        for key in tf_attrs:
            if ours.op == "Const" and key == "value":  # the same values, maybe encoded otherwise
                a = scope.graph.get_operation(ours.name).get_attr("value")
                b = reloaded.graph.get_operation(ours.name).get_attr("value")
                assert a.dtype == b.dtype and a.tolist() == b.tolist(), ours.name
            else:
                assert ours.attr[key] == tf_node.attr[key], (ours.name, key)
    ignore = scope.graph.get_operation("sn_ignore")
    assert ignore.get_attr("bad_indices_policy") == "IGNORE"
    assert scope.graph.get_operation("sums").get_attr("Tnumsegments") is mg.int64
