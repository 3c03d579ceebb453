"""TensorFlow interop, both directions, against a live TensorFlow: runs only where `tensorflow`
is importable (it is never a minigraph dependency; see tests/data/make_tf_graphs.py for the
files that let the normal suite check TF's graphs without it)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

import minigraph as mg  # noqa: E402
from minigraph import graph_def as gd_module  # noqa: E402
from minigraph import proto  # noqa: E402
from minigraph.tf_compat import tf_incompatibilities  # noqa: E402
from ops import GatherNd, GatherV2, gather, gather_nd  # noqa: E402

tf1 = tf.compat.v1


def run_in_tf(graph_def, fetches, feeds=None):
    """Imports our GraphDef into a fresh TF graph (TF's own parser) and runs it."""
    tf_graph_def = tf1.GraphDef.FromString(graph_def.SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf_graph_def, name="")
    with tf1.Session(graph=graph) as session:
        return session.run(fetches, feeds or {})


def minigraph_model() -> tuple[mg.Scope, list[str], dict[str, np.ndarray]]:
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3])
    k = mg.Placeholder(root.with_op_name("k"), mg.int64, shape=[None])
    table = mg.Const(root.with_op_name("table"), np.arange(24, dtype=np.int32).reshape(2, 3, 4))
    fetches = []
    fetches.append(gather(root.with_op_name("rows").with_device("/device:CPU:0"), x, [2, 0]))
    fetches.append(gather(root.with_op_name("cols"), x, k, axis=1))
    fetches.append(gather(root.with_op_name("batched"), table, [[2, 0], [1, 1]], 1, batch_dims=1))
    fetches.append(gather(root.with_op_name("last"), table, [[3], [0]], -1, batch_dims=1))
    fetches.append(GatherV2(root.with_op_name("raw"), x, np.array([[1]], np.int16), np.int64(0)))
    nd = GatherNd(root.with_op_name("nd"), table, [[1, 2], [0, 0]])
    fetches.append(nd)
    fetches.append(mg.Identity(root.colocate_with(nd).with_op_name("nd_copy"), nd))
    fetches.append(
        GatherNd(root.with_op_name("ignore"), table, [[1, 2, 3], [9, 0, 0]],
                 bad_indices_policy="IGNORE")
    )  # fmt: skip
    words = mg.Const(root.with_op_name("words"), [["a", "b"], ["c", "d"]])
    fetches.append(gather_nd(root.with_op_name("picked"), words, [[1, 0], [0, 1]]))
    for dtype in mg.dtypes.ALL_DTYPES:
        if dtype.is_string:
            continue
        value = np.arange(6).reshape(2, 3).astype(dtype.np_dtype)
        c = mg.Const(root.with_op_name(f"c_{dtype.name}"), value)
        fetches.append(gather(root.with_op_name(f"g_{dtype.name}"), c, [1, 0], axis=1))
        fetches.append(mg.Const(root.with_op_name(f"s_{dtype.name}"), value[1, 2]))
    done = mg.NoOp(root.with_control_dependencies([fetches[0], fetches[5]]).with_op_name("done"))
    fetches.append(mg.Identity(root.with_control_dependencies([done]).with_op_name("after"), nd))
    feeds = {
        "x:0": np.arange(9, dtype=np.float32).reshape(3, 3),
        "k:0": np.array([2, 2, 0], np.int64),
    }
    return root, [f.name for f in fetches], feeds


def test_minigraph_graphs_run_in_tensorflow_with_the_same_results():
    root, fetches, feeds = minigraph_model()
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == 0
    ours = mg.Session(root).run(fetches, feeds)
    theirs = run_in_tf(graph_def, fetches, feeds)
    assert len(ours) == len(theirs) == 40
    for name, a, b in zip(fetches, ours, theirs):
        b = np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_exported_nodes_have_only_attrs_tensorflow_knows():
    from tensorflow.python.framework import op_def_registry

    root, _, _ = minigraph_model()
    for node in root.graph.as_graph_def(add_shapes=True).node:
        known = {a.name for a in op_def_registry.get(node.op).attr}
        ours = {k for k in node.attr if not k.startswith("_")}
        assert ours <= known, (node.name, ours - known)


@pytest.mark.parametrize(
    "build",
    [
        lambda s: GatherNd(s, np.arange(6).reshape(2, 3), [[1], [0]], batch_dims=1),
        lambda s: GatherV2(s, [1, 2, 3], [0], 0, bad_indices_policy="ERROR"),
        lambda s: GatherV2(s, [1, 2, 3], [0], 0, bad_indices_policy="IGNORE"),
    ],
    ids=["GatherNd batch_dims=1", "GatherV2 ERROR", "GatherV2 IGNORE"],
)
def test_tensorflow_refuses_graphs_that_need_minigraphs_semantics(build):
    root = mg.Scope.new_root_scope()
    build(root.with_op_name("g"))
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == gd_module.MINIGRAPH_MIN_CONSUMER
    with pytest.raises(ValueError, match="min consumer version 1073741824 above current"):
        run_in_tf(graph_def, ["g:0"])
    # minigraph runs it.
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def.SerializeToString(), name="")
    mg.Session(scope).run("g:0")


def test_without_the_marker_tensorflow_would_compute_something_else():
    # Why the marker exists: TF ignores attrs its op lacks and runs GatherNd without batch_dims.
    root = mg.Scope.new_root_scope()
    params = mg.Const(root, np.arange(6).reshape(2, 3))
    GatherNd(root.with_op_name("g"), params, [[1], [0]], batch_dims=1)
    graph_def = root.graph.as_graph_def()
    ours = mg.Session(root).run("g:0")
    graph_def.versions.min_consumer = 0
    theirs = run_in_tf(graph_def, ["g:0"])[0]
    np.testing.assert_array_equal(ours, [1, 3])
    assert not np.array_equal(ours, theirs)


def test_live_tensorflow_graphs_import_and_match():
    graph = tf.Graph()
    with graph.as_default():
        params = tf1.placeholder(tf.float32, [2, 3, 4], name="params")
        a = tf.gather(params, [[2, 0], [1, 1]], axis=1, batch_dims=1, name="a")
        b = tf.gather_nd(params, [[1, 2], [0, 0]], name="b")
        with tf1.colocate_with(b):
            c = tf.identity(b, name="c")
        with tf.control_dependencies([a]):
            d = tf.identity(c, name="d")
    feed = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with tf1.Session(graph=graph) as session:
        want = session.run([a, b, c, d], {params: feed})
    scope = mg.Scope.new_root_scope()
    # TF's own GraphDef message is accepted as it is.
    outs = mg.import_graph_def(
        scope, graph.as_graph_def(add_shapes=True), return_elements=["a:0", "b:0", "c:0", "d:0"]
    )
    got = mg.Session(scope).run(outs, {"import/params:0": feed})
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    assert scope.graph.get_operation("import/c").colocation_group == "import/b"


def test_our_schema_is_tensorflows():
    from tensorflow.core.framework import (
        attr_value_pb2,
        graph_pb2,
        node_def_pb2,
        tensor_pb2,
        tensor_shape_pb2,
        types_pb2,
        versions_pb2,
    )

    pairs = [
        (proto.GraphDef, graph_pb2.GraphDef), (proto.NodeDef, node_def_pb2.NodeDef),
        (proto.AttrValue, attr_value_pb2.AttrValue),
        (proto.AttrValue.ListValue, attr_value_pb2.AttrValue.ListValue),
        (proto.NameAttrList, attr_value_pb2.NameAttrList),
        (proto.TensorProto, tensor_pb2.TensorProto),
        (proto.TensorShapeProto, tensor_shape_pb2.TensorShapeProto),
        (proto.TensorShapeProto.Dim, tensor_shape_pb2.TensorShapeProto.Dim),
        (proto.VersionDef, versions_pb2.VersionDef),
    ]  # fmt: skip
    for ours, theirs in pairs:
        for field in ours.DESCRIPTOR.fields:
            other = theirs.DESCRIPTOR.fields_by_name[field.name]
            assert (field.number, field.type) == (other.number, other.type), field.full_name
            assert field.is_repeated == other.is_repeated, field.full_name
            if field.message_type is not None:
                assert field.message_type.name == other.message_type.name, field.full_name
            if field.containing_oneof is not None:
                assert field.containing_oneof.name == other.containing_oneof.name
    values = {v.name: v.number for v in types_pb2.DataType.DESCRIPTOR.values}
    assert {v.name: v.number for v in proto.DataType.DESCRIPTOR.values} == values


def test_tensorflow_and_minigraph_messages_coexist_in_one_process():
    # Both GraphDef classes are usable side by side: no descriptor pool clash.
    ours = proto.GraphDef()
    ours.node.add(name="x", op="NoOp")
    theirs = tf1.GraphDef.FromString(ours.SerializeToString())
    assert theirs.node[0].name == "x"
    assert type(theirs).DESCRIPTOR.full_name == "tensorflow.GraphDef"
    assert type(ours).DESCRIPTOR.full_name == "minigraph.graph.GraphDef"


def test_variadic_graphs_run_in_tensorflow():
    from ops import ConcatV2, DynamicPartition, DynamicStitch

    root = mg.Scope.new_root_scope()
    data = mg.Placeholder(root.with_op_name("data"), mg.float32, shape=[None, 2])
    parts = mg.Placeholder(root.with_op_name("parts"), mg.int32, shape=[None])
    split = DynamicPartition(root.with_op_name("split"), data, parts, num_partitions=3)
    ids = DynamicPartition(
        root.with_op_name("ids"), np.arange(5, dtype=np.int32), parts, num_partitions=3
    )
    DynamicStitch(root.with_op_name("merged"), list(ids.outputs), list(split.outputs))
    ConcatV2(root.with_op_name("joined"), [split.outputs[2], split.outputs[0], data], 0)
    fetches = ["split:0", "split:1", "split:2", "merged:0", "joined:0"]
    feeds = {
        "data:0": np.arange(10, dtype=np.float32).reshape(5, 2),
        "parts:0": np.array([2, 0, 2, 1, 0], np.int32),
    }
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == 0
    ours = mg.Session(root).run(fetches, feeds)
    theirs = run_in_tf(graph_def, fetches, feeds)
    for name, a, b in zip(fetches, ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_embedding_lookup_graphs_run_in_tensorflow():
    # embedding_lookup checks ids with ops TF has (Min, Max, Assert: tests/test_fidelity_tf.py
    # has the full table), so its graphs carry no min_consumer mark and run in TF as they are.
    from ops import embedding_lookup

    root = mg.Scope.new_root_scope()
    shards = [np.arange(i * 10, i * 10 + 8, dtype=np.float32).reshape(4, 2) for i in range(3)]
    keys = mg.Placeholder(root.with_op_name("keys"), mg.int64, shape=[None])
    lookup = embedding_lookup(root, shards, keys)
    assert tf_incompatibilities(root.graph) == []
    feeds = {"keys:0": np.array([1, 11, 0], np.int64)}
    (theirs,) = run_in_tf(root.graph.as_graph_def(), [lookup.name], feeds)
    np.testing.assert_array_equal(theirs, mg.Session(root).run(lookup, feeds))
