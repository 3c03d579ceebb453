"""Fidelity checks against a live TensorFlow (issue 24, section 1): the GraphDef schema field by
field, and graphs using `embedding_lookup` importing and running in TensorFlow. Runs only where
`tensorflow` is importable (never a minigraph dependency)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

import minigraph as mg  # noqa: E402
from minigraph import proto  # noqa: E402
from minigraph.tf_compat import tf_incompatibilities  # noqa: E402

tf1 = tf.compat.v1
_VIEWS = {"GraphDefView", "NodeDefView", "AttrEntry"}  # minigraph's own import views


def _tf_files():
    """TensorFlow's graph.proto and every file it imports, recursively."""
    from tensorflow.core.framework import graph_pb2

    files, todo = {}, [graph_pb2.DESCRIPTOR]
    while todo:
        fd = todo.pop()
        if fd.name not in files:
            files[fd.name] = fd
            todo.extend(fd.dependencies)
    return files


def _messages(descriptors, prefix):
    """{name relative to the package: descriptor} of messages, nested ones included."""
    found = {}

    def walk(message):
        found[message.full_name[len(prefix) :]] = message
        for nested in message.nested_types:
            walk(nested)

    for message in descriptors:
        walk(message)
    return found


def _type_name(descriptor, prefix):
    return None if descriptor is None else descriptor.full_name[len(prefix) :]


def test_graph_protos_closure_is_declared_field_by_field():
    tf_messages, tf_enums = {}, {}
    for fd in _tf_files().values():
        tf_messages.update(_messages(fd.message_types_by_name.values(), "tensorflow."))
        tf_enums.update({e.name: e for e in fd.enum_types_by_name.values()})
    ours_file = proto.GraphDef.DESCRIPTOR.file
    ours = _messages(ours_file.message_types_by_name.values(), "minigraph.graph.")
    assert set(ours) - {v for v in ours if v.split(".")[0] in _VIEWS} == set(tf_messages)
    assert "FullTypeDef" in ours and "FunctionDef.ArgAttrs" in ours  # the issue's, and nested
    for name, theirs in tf_messages.items():
        mine = ours[name]
        assert [f.name for f in mine.fields] == [f.name for f in theirs.fields], name
        for f, g in zip(mine.fields, theirs.fields):
            where = f"{name}.{f.name}"
            assert (f.number, f.type, f.is_repeated) == (g.number, g.type, g.is_repeated), where
            assert _type_name(f.message_type, "minigraph.graph.") == _type_name(
                g.message_type, "tensorflow."
            ), where
            assert _type_name(f.enum_type, "minigraph.graph.") == _type_name(
                g.enum_type, "tensorflow."
            ), where
            oneof = lambda d: None if d.containing_oneof is None else d.containing_oneof.name  # noqa: E731
            assert oneof(f) == oneof(g), where
            assert f.GetOptions().packed == g.GetOptions().packed, where
        assert mine.GetOptions().map_entry == theirs.GetOptions().map_entry, name
    assert set(ours_file.enum_types_by_name) == set(tf_enums)
    for name, theirs in tf_enums.items():
        mine = ours_file.enum_types_by_name[name]
        assert [(v.name, v.number) for v in mine.values] == [
            (v.name, v.number) for v in theirs.values
        ], name


def test_tensorflow_files_with_every_kind_of_field_parse_in_both_formats():
    # A TF GraphDef with full types, debug info and a function library (refused on import),
    # serialized by TF in binary and text: minigraph's schema reads both, field for field.
    from google.protobuf import text_format

    @tf.function
    def double(v):
        return v * 2

    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        tf.shape(x, name="shape")
        double(x)
    theirs = graph.as_graph_def()
    assert theirs.library.function and any(n.HasField("experimental_type") for n in theirs.node)
    binary = mg.graph_def.parse_graph_def(theirs.SerializeToString())
    text = mg.graph_def.parse_graph_def(text_format.MessageToString(theirs))
    assert binary == text
    assert binary.SerializeToString(deterministic=True) == theirs.SerializeToString(
        deterministic=True
    )
    with pytest.raises(mg.UnimplementedError, match="function library"):
        mg.import_graph_def(mg.Scope.new_root_scope(), binary)


def run_in_tf(graph_def, fetches, feeds=None):
    tf_graph_def = tf1.GraphDef.FromString(graph_def.SerializeToString())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf_graph_def, name="")
    with tf1.Session(graph=graph) as session:
        return session.run(fetches, feeds or {})


# -- embedding_lookup graphs in TensorFlow -----------------------------------------------------


def _lookup_graph(n, strategy, known, id_type, ids_shape):
    from ops import embedding_lookup

    root = mg.Scope.new_root_scope()
    table = np.arange(26, dtype=np.float32).reshape(13, 2)
    pieces = [table[p::n] for p in range(n)] if strategy == "mod" else np.array_split(table, n)
    feeds, shards = {}, []
    for k, piece in enumerate(pieces):
        if known or k:
            shards.append(mg.Const(root.with_op_name(f"shard{k}"), piece))
        else:
            shards.append(mg.Placeholder(root.with_op_name(f"shard{k}"), mg.float32, [None, 2]))
            feeds[f"shard{k}:0"] = piece
    ids = mg.Placeholder(root.with_op_name("ids"), mg.as_dtype(id_type), ids_shape)
    out = embedding_lookup(root.with_op_name("emb"), shards, ids, strategy)
    return root, out, table, feeds


@pytest.mark.parametrize("n, strategy", [(1, "mod"), (3, "mod"), (3, "div"), (4, "div")])
@pytest.mark.parametrize("known", [True, False])
@pytest.mark.parametrize("id_type", [np.int32, np.int64, np.int16])
def test_embedding_lookup_graphs_import_and_run_in_tensorflow(n, strategy, known, id_type):
    root, out, table, feeds = _lookup_graph(n, strategy, known, id_type, [None, 2])
    assert tf_incompatibilities(root.graph) == []
    graph_def = root.graph.as_graph_def()
    assert graph_def.versions.min_consumer == 0
    value = np.array([[12, 0], [4, 4], [7, 11]], id_type)
    feeds = {**feeds, "ids:0": value}
    ours = mg.Session(root).run(out, feeds)
    (theirs,) = run_in_tf(graph_def, [out.name], feeds)
    np.testing.assert_array_equal(ours, table[value])
    assert theirs.dtype == ours.dtype and theirs.shape == ours.shape
    np.testing.assert_array_equal(theirs, ours)
    # Bad ids: TensorFlow runs the same check and raises the same message.
    for bad in ([[13, 0]], [[0, -1]]):
        bad_feeds = {**feeds, "ids:0": np.array(bad, id_type)}
        with pytest.raises(mg.InvalidArgumentError) as ours_error:
            mg.Session(root).run(out, bad_feeds)
        with pytest.raises(tf.errors.InvalidArgumentError) as theirs_error:
            run_in_tf(graph_def, [out.name], bad_feeds)
        first = ours_error.value.message.splitlines()[0]
        assert first.startswith("assertion failed: [embedding_lookup: every id must be in")
        assert first in theirs_error.value.message


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_run_time_row_counts_are_checked_by_tensorflow_too(strategy):
    root, out, _, feeds = _lookup_graph(3, strategy, False, np.int64, [None])
    wrong = {"shard0:0": np.zeros((3, 2), np.float32), "ids:0": np.array([0], np.int64)}
    with pytest.raises(mg.InvalidArgumentError) as ours_error:
        mg.Session(root).run(out, wrong)
    with pytest.raises(tf.errors.InvalidArgumentError) as theirs_error:
        run_in_tf(root.graph.as_graph_def(), [out.name], wrong)
    first = ours_error.value.message.splitlines()[0]
    assert first == (
        f"assertion failed: [embedding_lookup: the {strategy} strategy splits] [11] "
        "[rows over 3 shards as] [4 4 3] [; got shard sizes] [3 4 4]"
    )
    assert first in theirs_error.value.message


def test_the_static_shape_matches_tensorflows_embedding_lookup():
    from ops import embedding_lookup

    for ids_shape in ([3], [None], [2, 3], [None, 2]):
        for n in (1, 2, 3):
            shards = [np.zeros((2, 10), np.float32) for _ in range(n)]
            graph = tf.Graph()
            with graph.as_default():
                ids = tf1.placeholder(tf.int64, ids_shape)
                want = tf1.nn.embedding_lookup([tf.constant(s) for s in shards], ids).shape
            root = mg.Scope.new_root_scope()
            got = embedding_lookup(root, shards, mg.Placeholder(root, mg.int64, ids_shape)).shape
            assert got.as_list() == want.as_list(), (ids_shape, n)


# -- Assert and EnsureShape against TensorFlow's kernels ---------------------------------------

_DATA = [
    ["msg", np.int64(13), np.array([1, 0], np.int64)],
    [np.array([1, 2, 3, 4, 5]), np.array([[1, 2], [3, 4]]), np.array([[[1]]])],
    [np.float32(1.5), np.array([0.1, 2.0], np.float32), np.array([True, False]), np.array([b"a"])],
    [np.zeros((0,)), np.zeros((2, 0)), np.array(b"x"), np.arange(7).reshape(7, 1)],
    [np.array([1.0, np.nan, -np.inf, 1e-300, 0.1]), np.float16(0.1), np.array([1 + 2j])],
    [np.uint8(7), np.int8(-3), np.arange(24).reshape(2, 3, 4), np.float32(3.4028235e38)],
]


@pytest.mark.parametrize("data", _DATA, ids=range(len(_DATA)))
@pytest.mark.parametrize("summarize", [1, 3, 20, -1])
def test_assert_messages_are_tensorflows(data, summarize):
    from ops.checks import Assert

    root = mg.Scope.new_root_scope()
    mg.NoOp(root.with_op_name("done").with_control_dependencies(
        Assert(root, False, [mg.Const(root, d) for d in data], summarize=summarize)
    ))  # fmt: skip
    with pytest.raises(mg.InvalidArgumentError) as ours:
        mg.Session(root).run("done")
    with pytest.raises(tf.errors.InvalidArgumentError) as theirs:
        run_in_tf(root.graph.as_graph_def(), ["done"])
    first = ours.value.message.splitlines()[0]
    assert first.startswith("assertion failed: ")
    assert first in theirs.value.message.splitlines()


def test_ensure_shape_is_tensorflows():
    from ops.checks import EnsureShape

    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32)
    EnsureShape(root.with_op_name("e"), x, mg.TensorShape([None, 2]))
    graph_def = root.graph.as_graph_def()
    good = {"x:0": np.ones((3, 2), np.float32)}
    np.testing.assert_array_equal(
        mg.Session(root).run("e:0", good), run_in_tf(graph_def, ["e:0"], good)[0]
    )
    bad = {"x:0": np.ones((3, 4), np.float32)}
    with pytest.raises(
        mg.InvalidArgumentError, match=r"\[3,4\] is not compatible with expected shape \[\?,2\]"
    ):
        mg.Session(root).run("e:0", bad)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"\[3,4\] is not compatible with expected shape \[\?,2\]",
    ):
        run_in_tf(graph_def, ["e:0"], bad)
