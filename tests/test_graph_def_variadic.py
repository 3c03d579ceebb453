"""GraphDefs of variadic ops (`N * T`, type lists): flat NodeDef inputs and outputs, N and T
attrs, round trips and bad counts; TF's own files are in test_graph_def_tf_files.py."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import graph_def as gd_module
from minigraph.errors import InvalidArgumentError
from ops import ConcatV2, DynamicPartition, DynamicStitch, embedding_lookup

# TF's IdentityN: a type-list input and output.
IDENTITY_N = mg.OpDef(
    "GraphDefTestIdentityN",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: list(type) >= 1"],
    shape_fn=lambda ctx: list(ctx.input_shapes),
)
IdentityN = mg.register_op(IDENTITY_N)
mg.register_kernel(IDENTITY_N.name, "CPU", lambda ctx, values, **_: list(values))


def variadic_graph() -> mg.Scope:
    root = mg.Scope.new_root_scope()
    data = mg.Placeholder(root.with_op_name("data"), mg.float32, shape=[None, 2])
    parts = mg.Placeholder(root.with_op_name("parts"), mg.int32, shape=[None])
    split = DynamicPartition(root.with_op_name("split"), data, parts, num_partitions=3)
    ids = DynamicPartition(
        root.with_op_name("ids"), np.arange(5, dtype=np.int32), parts, num_partitions=3
    )
    DynamicStitch(root.with_op_name("merged"), list(ids.outputs), list(split.outputs))
    ConcatV2(root.with_op_name("joined"), [split.outputs[2], split.outputs[0], data], 0)
    IdentityN(root.with_op_name("both"), [data, parts])
    return root


FEEDS = {
    "data:0": np.arange(10, dtype=np.float32).reshape(5, 2),
    "parts:0": np.array([2, 0, 2, 1, 0], np.int32),
}
FETCHES = ["split:0", "split:2", "merged:0", "joined:0", "both:1"]


def node(graph_def, name):
    (found,) = [n for n in graph_def.node if n.name == name]
    return found


def test_export_writes_flat_inputs_and_counts():
    graph_def = variadic_graph().graph.as_graph_def()
    assert list(node(graph_def, "merged").input) == [
        "ids", "ids:1", "ids:2", "split", "split:1", "split:2",
    ]  # fmt: skip
    merged = node(graph_def, "merged")
    assert merged.attr["N"].i == 3 and merged.attr["T"].type == 1
    assert node(graph_def, "split").attr["num_partitions"].i == 3
    joined = node(graph_def, "joined")
    assert list(joined.input) == ["split:2", "split", "data", "Const_1"]
    assert joined.attr["N"].i == 3 and joined.attr["Tidx"].type == 3
    both = node(graph_def, "both")
    assert list(both.attr["T"].list.type) == [1, 3]  # DT_FLOAT, DT_INT32
    assert graph_def.versions.min_consumer == 0


@pytest.mark.parametrize("prefix", ["", "again"])
def test_round_trip_keeps_structure_and_results(prefix):
    original = variadic_graph()
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, original.graph.as_graph_def().SerializeToString(), name=prefix)
    pre = f"{prefix}/" if prefix else ""
    for op in original.graph.operations:
        twin = scope.graph.get_operation(pre + op.name)
        assert [t.name for t in twin.inputs] == [pre + t.name for t in op.inputs]
        assert [(o.dtype, o.shape) for o in twin.outputs] == [
            (o.dtype, o.shape) for o in op.outputs
        ]
        assert dict(twin.attrs).keys() == dict(op.attrs).keys()
    want = mg.Session(original).run(FETCHES, FEEDS)
    got = mg.Session(scope).run([pre + f for f in FETCHES], {pre + k: v for k, v in FEEDS.items()})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[2], FEEDS["data:0"])  # stitched back in place


def test_embedding_lookup_graphs_round_trip():
    root = mg.Scope.new_root_scope()
    shards = [np.arange(i * 10, i * 10 + 8, dtype=np.float32).reshape(4, 2) for i in range(3)]
    ids = mg.Placeholder(root.with_op_name("ids"), mg.int64, shape=[None])
    out = embedding_lookup(root.with_op_name("lookup"), shards, ids)
    feed = {ids: np.array([0, 5, 11, 3], np.int64)}
    want = mg.Session(root).run(out, feed)
    scope = mg.Scope.new_root_scope()
    (twin,) = mg.import_graph_def(
        scope, root.graph.as_graph_def(), return_elements=[out.name], name=""
    )
    np.testing.assert_array_equal(mg.Session(scope).run(twin, {"ids:0": feed[ids]}), want)


def stitch_text(n: int | None, inputs: list[str]) -> str:
    count = "" if n is None else f'attr {{ key: "N" value {{ i: {n} }} }}'
    ins = " ".join(f'input: "{i}"' for i in inputs)
    return (
        'node { name: "i" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } '
        'attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } '
        "int_val: 0 } } } }"
        'node { name: "d" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
        'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 } } '
        "float_val: 1 } } } }"
        f'node {{ name: "s" op: "DynamicStitch" {ins} {count} '
        'attr { key: "T" value { type: DT_FLOAT } } }'
    )


@pytest.mark.parametrize(
    "n, inputs, match",
    [
        (2, ["i", "d"], "expected 4 inputs for these attrs \\(indices: 2, data: 2\\), got 2"),
        (1, ["i", "d", "d"], "expected 2 inputs for these attrs"),
        (None, ["i", "d"], "attr 'N' is missing: it says how many tensors input 'indices' has"),
        (-1, [], "attr 'N' must be >= 0; got -1"),
        (0, [], "attr 'N' must be >= 1; got 0"),
        (1, ["d", "i"], "input 'indices' \\(element 0\\) must be int32, got float32"),
    ],
)
def test_bad_counts_are_refused_naming_the_node(n, inputs, match):
    scope = mg.Scope.new_root_scope()
    graph_def = gd_module.parse_graph_def(stitch_text(n, inputs))
    with pytest.raises(InvalidArgumentError, match=match) as info:
        mg.import_graph_def(scope, graph_def, name="")
    assert info.value.node_name == "s"
    assert len(scope.graph) == 0


def test_a_good_count_imports():
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, gd_module.parse_graph_def(stitch_text(1, ["i", "d"])), name="")
    np.testing.assert_array_equal(mg.Session(scope).run("s:0"), [1.0])


def test_outputs_of_list_args_are_addressed_flat():
    root = variadic_graph()
    graph_def = root.graph.as_graph_def()
    scope = mg.Scope.new_root_scope()
    parts = mg.import_graph_def(
        scope, graph_def, return_elements=["split:0", "split:2", "ids:1"], name=""
    )
    assert [p.name for p in parts] == ["split:0", "split:2", "ids:1"]
    with pytest.raises(InvalidArgumentError, match="refers to output 3 of 'split'"):
        mg.import_graph_def(scope, graph_def, return_elements=["split:3"])
