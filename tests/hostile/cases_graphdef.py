"""GraphDef files: truncated, garbage and mutated bytes and text, absurd constants, cycles,
bad names, inputs and attrs, input_map/return_elements abuse, reading and writing files,
round trips against the original graph, and graphs TensorFlow must refuse."""

# ruff: noqa: E501 - tables of hostile inputs and source snippets read best unwrapped

from __future__ import annotations

import os
import random
import tempfile
from typing import Any

import numpy as np

from tests.hostile._common import DTYPE_NAMES, cases_from, must, run, same, scope
from tests.hostile._common import minigraph_module as _mg
from tests.hostile._common import ops_module as _ops
from tests.hostile.battery import ROOT, Case, Wrong

DATA = os.path.join(ROOT, "tests", "data")


def _gd():
    from minigraph import graph_def  # noqa: PLC0415

    return graph_def


def _proto():
    from minigraph import proto  # noqa: PLC0415

    return proto


def _base_graph() -> Any:
    """A graph with placeholders, consts of several dtypes, control inputs, devices, colocation,
    list ops: (scope, fetch names, feeds by name)."""
    mg, ops = _mg(), _ops()
    s = scope()
    x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[None, 3])
    k = mg.Placeholder(s.with_op_name("k"), mg.int32, shape=[None])
    table = mg.Const(s.with_op_name("table"), np.arange(12, dtype=np.float32).reshape(4, 3))
    rows = ops.gather(s.with_op_name("rows").with_device("/device:CPU:0"), x, [1, 0])
    picked = ops.gather(s.colocate_with(rows).with_op_name("picked"), table, k)
    done = mg.NoOp(s.with_control_dependencies([picked]).with_op_name("done"))
    parts = ops.DynamicPartition(s.with_op_name("parts"), k, k % 1 if False else [0, 1, 0],
                                 num_partitions=2)  # fmt: skip
    stitched = ops.DynamicStitch(s.with_op_name("stitch"), [[0, 2], [1]], list(parts.outputs))
    strings = mg.Const(s.with_op_name("strings"), ["a", "bc", ""])
    halves = mg.Const(s.with_op_name("halves"), np.array([1.5, -2], np.float16))
    emb = ops.embedding_lookup(s, [table, table], k)
    del done, strings, halves, stitched, emb
    feeds = {
        "x:0": np.arange(6, dtype=np.float32).reshape(2, 3),
        "k:0": np.array([0, 2, 1], np.int32),
    }
    fetches = ["rows:0", "picked:0", "stitch:0", "strings:0", "halves:0",
               "embedding_lookup/DynamicStitch:0", "done"]  # fmt: skip
    return s, fetches, feeds


def _reference() -> tuple[bytes, str, list[Any], dict[str, np.ndarray], list[str]]:
    s, fetches, feeds = _base_graph()
    values = run(fetches, feeds, graph=s.graph)
    gd = s.graph.as_graph_def()
    from google.protobuf import text_format  # noqa: PLC0415

    return gd.SerializeToString(deterministic=True), text_format.MessageToString(gd), values, \
        feeds, fetches  # fmt: skip


_REF: list[Any] = []


def _ref():
    if not _REF:
        _REF.append(_reference())
    return _REF[0]


def _import_and_run(data: Any, run_it: bool = True) -> None:
    """Imports `data` into a graph holding one node; on error the graph must be unchanged.
    When it imports, runs every placeholder-free tensor it can, feeding placeholders small
    zeros (data errors are typed errors too)."""
    mg = _mg()
    s = scope()
    mg.Const(s.with_op_name("pre"), 1)
    before = [op.name for op in s.graph.operations]
    try:
        mg.import_graph_def(s, data, name="")
    except mg.OpError:
        after = [op.name for op in s.graph.operations]
        must(after == before, f"a failed import left {len(after) - len(before)} nodes behind")
        raise
    if not run_it:
        return
    feeds = {}
    for op in s.graph.operations:
        if op.type == "Placeholder":
            out = op.outputs[0]
            dims = out.shape.dims
            shape = [2] * 2 if dims is None else [1 if d is None else min(d, 4) for d in dims]
            if out.dtype.is_string:
                feeds[out] = np.full(shape, b"", dtype=object)
            else:
                feeds[out] = np.zeros(shape, out.dtype.np_dtype)
    fetches = [o for op in s.graph.operations for o in op.outputs
               if op.type not in ("Placeholder",)][:40]  # fmt: skip
    with mg.Session(s) as session:
        for f in fetches:
            try:
                session.run(f, feeds)
            except mg.OpError:
                pass


def _roundtrip_check(data: bytes) -> None:
    """Imports `data` (the reference graph, possibly re-serialized) and compares its results
    with the original graph's."""
    mg = _mg()
    _, _, values, feeds, fetches = _ref()
    s = scope()
    mg.import_graph_def(s, data, name="")
    got = run(fetches, feeds, graph=s.graph)
    for name, a, b in zip(fetches, got, values):
        if b is None:
            must(a is None, f"{name}: {a!r}")
        else:
            same(a, b, name)


def cases() -> list[Case]:
    out: list[Case] = []
    A = "graphdef"

    # -- round trips -----------------------------------------------------------------------------
    def roundtrip(kind):
        mg = _mg()
        data, text, *_ = _ref()
        if kind == "bytes":
            _roundtrip_check(data)
        elif kind == "message":
            _roundtrip_check(_gd().parse_graph_def(data))
        elif kind == "text":
            _roundtrip_check(_gd().parse_graph_def(text).SerializeToString())
        elif kind == "file_binary" or kind == "file_text":
            path = os.path.join(tempfile.mkdtemp(), "g.pbtxt" if kind == "file_text" else "g.pb")
            mg.write_graph(_gd().parse_graph_def(data), path)
            _roundtrip_check(mg.read_graph(path).SerializeToString())
        elif kind == "reversed":
            gd = _gd().parse_graph_def(data)
            nodes = list(gd.node)[::-1]
            del gd.node[:]
            gd.node.extend(nodes)
            _roundtrip_check(gd.SerializeToString())
        elif kind == "shuffled":
            gd = _gd().parse_graph_def(data)
            nodes = list(gd.node)
            random.Random(7).shuffle(nodes)
            del gd.node[:]
            gd.node.extend(nodes)
            _roundtrip_check(gd.SerializeToString())
        elif kind == "twice":
            s = scope()
            mg.import_graph_def(s, data)
            mg.import_graph_def(s, data)
            data2 = s.graph.as_graph_def().SerializeToString()
            s2 = scope()
            mg.import_graph_def(s2, data2, name="")
            _, _, values, feeds, fetches = _ref()
            got = run(["import_1/" + f for f in fetches],
                      {"import_1/" + k: v for k, v in feeds.items()}, graph=s2.graph)  # fmt: skip
            for name, a, b in zip(fetches, got, values):
                if b is not None:
                    same(a, b, name)
        elif kind == "add_shapes":
            s, fetches, feeds = _base_graph()
            _roundtrip_check(s.graph.as_graph_def(add_shapes=True).SerializeToString())

    kinds = [
        "bytes",
        "message",
        "text",
        "file_binary",
        "file_text",
        "reversed",
        "shuffled",
        "twice",
        "add_shapes",
    ]
    out += cases_from(A, "round trip", kinds, roundtrip, expect="ok", timeout=60)

    # Random gather graphs, exported and imported: same results.
    def random_roundtrip(seed):
        mg, ops = _mg(), _ops()
        rng = np.random.default_rng(seed)
        s = scope()
        dtype = rng.choice([np.float32, np.int64, np.float16, np.bool_, np.complex64, np.uint8])
        shape = tuple(int(d) for d in rng.integers(1, 4, rng.integers(1, 4)))
        value = (rng.standard_normal(shape) * 10).astype(dtype)
        node = mg.Const(s.with_op_name("v"), value).output
        names = []
        for k in range(int(rng.integers(1, 6))):
            rank = node.shape.rank
            axis = int(rng.integers(-rank, rank))
            size = node.shape.dims[axis]
            count = int(rng.integers(0, 4)) if size else 0
            idx = rng.integers(0, max(size, 1), count)
            node = ops.gather(s.with_op_name(f"g{k}"), node, idx.astype(rng.choice(
                [np.int32, np.int64])), axis=axis).output  # fmt: skip
            names.append(node.name)
        want = run(names, graph=s.graph)
        s2 = scope()
        mg.import_graph_def(s2, s.graph.as_graph_def().SerializeToString(), name="")
        got = run(names, graph=s2.graph)
        for n, a, b in zip(names, got, want):
            same(a, b, n)

    out += cases_from(A, "random round trip", list(range(30)), random_roundtrip, expect="ok")

    # -- truncated, garbage, mutated bytes ------------------------------------------------------
    def truncated(fraction):
        data = _ref()[0]
        _import_and_run(data[: int(len(data) * fraction)])

    fractions = [
        0.0,
        0.001,
        0.01,
        0.05,
        0.1,
        0.2,
        0.3,
        0.33,
        0.5,
        0.51,
        0.66,
        0.75,
        0.9,
        0.95,
        0.99,
        0.999,
    ]
    out += cases_from(A, "truncated", fractions, truncated)

    def mutated(seed):
        data = bytearray(_ref()[0])
        rng = random.Random(seed)
        for _ in range(1 + seed % 3):
            pos = rng.randrange(len(data))
            data[pos] = rng.randrange(256)
        _import_and_run(bytes(data))

    out += cases_from(A, "byte flips", list(range(120)), mutated, timeout=60)

    def garbage(kind):
        rng = random.Random(kind)
        data = {
            0: b"", 1: b"\x00" * 10, 2: bytes(rng.randrange(256) for _ in range(1000)),
            3: b"\x0a\xff\xff\xff\xff\x0f", 4: b"\x0a" * 100000, 5: b"node {",
            6: "node { name: 'é' op: 'NoOp' }".encode(), 7: b"\xff\xfe\x00n\x00o",
            8: b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 9: b"versions { producer: -1 }",
            10: b"# only a comment\n", 11: b"node { name: \"a\" op: \"NoOp\" } " * 3,
            12: b"\x1a\x02\x08\x01" * 1000, 13: b"library { function { } }",
            14: b"node { name: 'a' op: 'NoOp' attr { key: 'x' value { func { name: 'f' } } } }",
            15: b"\x0a\x00" * 50000,
        }[kind]  # fmt: skip
        _import_and_run(data)

    out += cases_from(A, "garbage", list(range(16)), garbage)

    def text_mutation(seed):
        mg = _mg()
        text = _ref()[1]
        rng = random.Random(1000 + seed)
        lines = text.splitlines()
        for _ in range(1 + seed % 2):
            i = rng.randrange(len(lines))
            line = lines[i]
            choice = rng.randrange(7)
            if choice == 0:
                del lines[i]
            elif choice == 1:
                lines.insert(i, line)
            elif choice == 2:
                lines[i] = line.replace("size: ", "size: 99999999999")
            elif choice == 3:
                lines[i] = line.replace('"', '"x', 1)
            elif choice == 4:
                lines[i] = line.replace(
                    "DT_FLOAT", rng.choice(["DT_INT32", "DT_RESOURCE", "DT_STRING", "DT_HALF"])
                )
            elif choice == 5:
                lines[i] = line.replace("i: ", "i: -")
            else:
                lines[i] = line.replace('op: "', 'op: "Gather')
        try:
            gd = _gd().parse_graph_def("\n".join(lines))
        except mg.OpError:
            raise
        _import_and_run(gd)

    out += cases_from(A, "text mutation", list(range(60)), text_mutation, timeout=60)

    # -- absurd constants ------------------------------------------------------------------------
    def const_node(fill):
        proto = _proto()
        gd = proto.GraphDef()
        node = gd.node.add()
        node.name = "c"
        node.op = "Const"
        tensor = node.attr["value"].tensor
        fill(tensor)
        node.attr["dtype"].type = tensor.dtype
        return gd

    def shape(t, dims, dtype=1):
        t.dtype = dtype
        for d in dims:
            t.tensor_shape.dim.add(size=d)

    consts = {
        "unknown_dtype": lambda t: setattr(t, "dtype", 100),
        "resource": lambda t: setattr(t, "dtype", 20),
        "huge_splat": lambda t: (shape(t, [2**62]), t.float_val.append(1.0)),
        "huge_zeros": lambda t: shape(t, [2**31, 2**31]),
        "over_int64": lambda t: shape(t, [2**62, 4]),
        "rank65": lambda t: shape(t, [1] * 65),
        "neg_dim": lambda t: shape(t, [-5]),
        "unknown_dim": lambda t: shape(t, [-1]),
        "unknown_rank": lambda t: (
            setattr(t, "dtype", 1),
            setattr(t.tensor_shape, "unknown_rank", True),
        ),
        "unknown_rank_dims": lambda t: (
            shape(t, [2]),
            setattr(t.tensor_shape, "unknown_rank", True),
        ),
        "content_short": lambda t: (shape(t, [4]), setattr(t, "tensor_content", b"\x00" * 15)),
        "content_and_val": lambda t: (
            shape(t, [1]),
            setattr(t, "tensor_content", b"\x00" * 4),
            t.float_val.append(1.0),
        ),
        "too_many": lambda t: (shape(t, [1]), t.float_val.extend([1.0, 2.0])),
        "string_content": lambda t: (shape(t, [1], 7), setattr(t, "tensor_content", b"abcdefgh")),
        "half_range": lambda t: (shape(t, [1], 19), t.half_val.append(70000)),
        "half_negative": lambda t: (shape(t, [1], 19), t.half_val.append(-1)),
        "complex_odd": lambda t: (shape(t, [1], 8), t.scomplex_val.extend([1.0, 2.0, 3.0])),
        "wrong_field": lambda t: (shape(t, [1], 3), t.float_val.append(1.0)),
        "int8_range": lambda t: (shape(t, [1], 6), t.int_val.append(300)),
        "uint8_neg": lambda t: (shape(t, [1], 4), t.int_val.append(-1)),
        "bool_in_int": lambda t: (shape(t, [1], 3), t.bool_val.append(True)),
        "version_number": lambda t: (
            shape(t, [1]),
            setattr(t, "version_number", 5),
            t.float_val.append(1.0),
        ),
        "bfloat16": lambda t: (shape(t, [2], 14), t.half_val.extend([16256, 65535])),
        "big_content": lambda t: (
            shape(t, [2**20], 9),
            setattr(t, "tensor_content", b"\x01" * 8 * 2**20),
        ),
        "empty_strings": lambda t: (shape(t, [3], 7), t.string_val.extend([b"", b"\xff"])),
        "nan": lambda t: (shape(t, [2]), t.float_val.append(float("nan"))),
        "zero_size_huge": lambda t: shape(t, [0, 2**62]),
        "uint64_max": lambda t: (shape(t, [1], 23), t.uint64_val.append(2**64 - 1)),
        "splat_100mb": lambda t: (shape(t, [25 * 2**20]), t.float_val.append(3.0)),
        "int64_min": lambda t: (shape(t, [1], 9), t.int64_val.append(-(2**63))),
    }

    def absurd_const(name):
        gd = const_node(consts[name])
        _import_and_run(gd.SerializeToString())

    out += cases_from(
        A,
        "const",
        list(consts),
        absurd_const,
        expect=lambda v: "ok" if v in ("unknown_dim",) and False else "any",
        timeout=60,
    )

    # -- structure: cycles, names, inputs, attrs --------------------------------------------------
    def text_graph(kind):
        _mg()
        ph = 'node { name: "%s" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'

        def q(extra):
            return (ph % "q")[:-2] + extra + " }"

        idn = 'node { name: "%s" op: "Identity" input: "%s" attr { key: "T" value { type: DT_FLOAT } } }'
        texts = {
            "cycle2": idn % ("a", "b") + idn % ("b", "a"),
            "self_loop": idn % ("a", "a"),
            "cycle3_control": ph % "p" + idn % ("a", "p") + ' node { name: "b" op: "Identity" '
            'input: "a" input: "^c" attr { key: "T" value { type: DT_FLOAT } } } '
            'node { name: "c" op: "NoOp" input: "^b" }',
            "cycle_colocation": ph % "p" + 'node { name: "a" op: "Identity" input: "p" attr { key: '
            '"T" value { type: DT_FLOAT } } attr { key: "_class" value { list { s: "loc:@b" } } } }'
            ' node { name: "b" op: "Identity" input: "p" attr { key: "T" value { type: DT_FLOAT } }'
            ' attr { key: "_class" value { list { s: "loc:@a" } } } }',
            "missing_input": idn % ("a", "nope"),
            "bad_index": ph % "p" + idn % ("a", "p:99"),
            "neg_index": ph % "p" + idn % ("a", "p:-1"),
            "alpha_index": ph % "p" + idn % ("a", "p:abc"),
            "colon_only": ph % "p" + idn % ("a", ":0"),
            "caret_only": ph % "p" + idn % ("a", "^"),
            "double_caret": ph % "p" + 'node { name: "a" op: "NoOp" input: "^^p" }',
            "data_after_control": ph % "p" + 'node { name: "a" op: "Identity" input: "^p" input: '
            '"p" attr { key: "T" value { type: DT_FLOAT } } }',
            "empty_input": ph % "p" + idn % ("a", ""),
            "duplicate_names": ph % "p" + ph % "p",
            "name_space": ph % "a b",
            "name_double_slash": ph % "a//b",
            "name_leading_slash": ph % "/a",
            "name_trailing_slash": ph % "a/",
            "name_underscore": ph % "_a",
            "name_colon": ph % "a:b",
            "name_newline": ph % "a\\n",
            "name_unicode": ph % "é",
            "name_long": ph % ("a" * 100000),
            "name_empty": ph % "",
            "op_empty": 'node { name: "a" op: "" }',
            "const_no_value": 'node { name: "a" op: "Const" attr { key: "dtype" value { type: '
            "DT_FLOAT } } }",
            "placeholder_no_dtype": 'node { name: "a" op: "Placeholder" }',
            "noop_with_input": ph % "p" + 'node { name: "a" op: "NoOp" input: "p" }',
            "identity_two_inputs": ph % "p" + 'node { name: "a" op: "Identity" input: "p" input: '
            '"p" attr { key: "T" value { type: DT_FLOAT } } }',
            "attr_wrong_type": 'node { name: "a" op: "Placeholder" attr { key: "dtype" value { '
            's: "float" } } }',
            "attr_unknown": 'node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: '
            'DT_FLOAT } } attr { key: "foo" value { i: 1 } } }',
            "attr_underscore": 'node { name: "a" op: "Placeholder" attr { key: "dtype" value { '
            'type: DT_FLOAT } } attr { key: "_foo" value { i: 1 } } }',
            "attr_empty_value": 'node { name: "a" op: "Placeholder" attr { key: "dtype" value { '
            "} } }",
            "attr_func": 'node { name: "a" op: "Placeholder" attr { key: "dtype" value { func { '
            'name: "f" } } } }',
            "attr_placeholder": 'node { name: "a" op: "Placeholder" attr { key: "dtype" value { '
            'placeholder: "T" } } }',
            "class_not_list": q(' attr { key: "_class" value { s: "loc:@p" } }'),
            "class_self": q(' attr { key: "_class" value { list { s: "loc:@q" } } }'),
            "class_missing": q(' attr { key: "_class" value { list { s: "loc:@zz" } } }'),
            "class_non_utf8": q(' attr { key: "_class" value { list { s: "loc:@\\377" } } }'),
            "kernel_non_utf8": q(' attr { key: "_kernel" value { s: "\\377" } }'),
            "kernel_newline": q(' attr { key: "_kernel" value { s: "a\\nb" } }'),
            "output_shapes_wrong": q(
                ' attr { key: "shape" value { shape { dim { size: 2 } } } } '
                'attr { key: "_output_shapes" value { list { shape { dim { '
                "size: 3 } } } } }"
            ),
            "output_shapes_count": q(
                ' attr { key: "_output_shapes" value { list { shape { } shape { } } } }'
            ),
            "device_garbage": q(' device: "/job:!!/task:x"'),
            "device_tpu": q(' device: "/device:TPU:0"'),
            "device_unknown_task": q(' device: "/job:worker/task:99"'),
            "stitch_n0": 'node { name: "s" op: "DynamicStitch" attr { key: "N" value { i: 0 } } '
            'attr { key: "T" value { type: DT_FLOAT } } }',
            "stitch_n_neg": 'node { name: "s" op: "DynamicStitch" attr { key: "N" value { i: -1 } } '
            'attr { key: "T" value { type: DT_FLOAT } } }',
            "stitch_n_huge": 'node { name: "s" op: "DynamicStitch" attr { key: "N" value { i: '
            '1099511627776 } } attr { key: "T" value { type: DT_FLOAT } } }',
            "stitch_n_missing": ph % "p" + 'node { name: "s" op: "DynamicStitch" input: "p" input: '
            '"p" attr { key: "T" value { type: DT_FLOAT } } }',
            "partition_huge": ph % "p" + 'node { name: "i" op: "Placeholder" attr { key: "dtype" '
            'value { type: DT_INT32 } } } node { name: "d" op: "DynamicPartition" input: "p" '
            'input: "i" attr { key: "num_partitions" value { i: 1000000000 } } attr { key: "T" '
            "value { type: DT_FLOAT } } }",
            "partition_int64_max": ph % "p" + 'node { name: "i" op: "Placeholder" attr { key: '
            '"dtype" value { type: DT_INT32 } } } node { name: "d" op: "DynamicPartition" input: '
            '"p" input: "i" attr { key: "num_partitions" value { i: 9223372036854775807 } } attr '
            '{ key: "T" value { type: DT_FLOAT } } }',
            "concat_n_huge": ph % "p" + 'node { name: "c" op: "ConcatV2" input: "p" input: "p" '
            'attr { key: "N" value { i: 1000000000 } } attr { key: "T" value { type: DT_FLOAT } } }',
            "min_consumer": "versions { min_consumer: 2000000000 }",
            "bad_consumer": "versions { bad_consumers: 1073741824 }",
            "producer_neg": "versions { producer: -5 } " + ph % "p",
            "gather_attr_list": ph % "p" + 'node { name: "i" op: "Placeholder" attr { key: "dtype" '
            'value { type: DT_INT32 } } } node { name: "a" op: "Const" attr { key: "dtype" value '
            '{ type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 '
            'tensor_shape { } int_val: 0 } } } } node { name: "g" op: "GatherV2" input: "p" input: '
            '"i" input: "a" attr { key: "batch_dims" value { list { i: 1 } } } }',
            "gather_missing_types": ph % "p" + 'node { name: "g" op: "GatherV2" input: "p" input: '
            '"p" input: "p" }',
            "const_value_list": 'node { name: "c" op: "Const" attr { key: "dtype" value { type: '
            'DT_FLOAT } } attr { key: "value" value { list { } } } }',
            "const_dtype_mismatch": 'node { name: "c" op: "Const" attr { key: "dtype" value { '
            'type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape '
            "{ } float_val: 1 } } } }",
            "tlist_huge": 'node { name: "c" op: "NoOp" attr { key: "_x" value { list { type: ['
            + ", ".join(["DT_FLOAT"] * 100000)
            + "] } } } }",
            "many_nodes": "".join(ph % f"p{i}" for i in range(20000)),
            "deep_chain": ph % "n0" + "".join(idn % (f"n{i}", f"n{i - 1}") for i in range(1, 5000)),
            "deep_chain_reversed": "".join(idn % (f"n{i}", f"n{i - 1}") for i in range(4999, 0, -1))
            + ph % "n0",
            "placeholder_shape_huge": 'node { name: "p" op: "Placeholder" attr { key: "dtype" '
            'value { type: DT_FLOAT } } attr { key: "shape" value { shape { dim { size: '
            "9223372036854775807 } dim { size: 9223372036854775807 } } } } }",
            "reshape_absurd": ph % "p" + 'node { name: "s" op: "Const" attr { key: "dtype" value { '
            'type: DT_INT64 } } attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { '
            "dim { size: 2 } } int64_val: 4611686018427387904 int64_val: 4611686018427387904 } } } "
            '} node { name: "r" op: "Reshape" input: "p" input: "s" attr { key: "T" value { type: '
            'DT_FLOAT } } attr { key: "Tshape" value { type: DT_INT64 } } }',
            "range_absurd": 'node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT '
            '} } attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 0 '
            '} } } } node { name: "b" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
            'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: '
            'inf } } } } node { name: "r" op: "Range" input: "a" input: "b" input: "b" attr { key: '
            '"Tidx" value { type: DT_FLOAT } } }',
        }
        text = texts[kind]
        _import_and_run(_gd().parse_graph_def(text))

    ok_kinds = {
        "attr_underscore",
        "unknown_dim",
        "producer_neg",
        "device_unknown_task",
        "many_nodes",
        "deep_chain",
        "deep_chain_reversed",
        "stitch_n_missing",
        "tlist_huge",
        "min_consumer",
        "bad_consumer",
    }
    structure = [
        "cycle2", "self_loop", "cycle3_control", "cycle_colocation", "missing_input", "bad_index",
        "neg_index", "alpha_index", "colon_only", "caret_only", "double_caret",
        "data_after_control", "empty_input", "duplicate_names", "name_space",
        "name_double_slash", "name_leading_slash", "name_trailing_slash", "name_underscore",
        "name_colon", "name_newline", "name_unicode", "name_long", "name_empty", "op_empty",
        "const_no_value", "placeholder_no_dtype", "noop_with_input", "identity_two_inputs",
        "attr_wrong_type", "attr_unknown", "attr_underscore", "attr_empty_value", "attr_func",
        "attr_placeholder", "class_not_list", "class_self", "class_missing", "class_non_utf8",
        "kernel_non_utf8", "kernel_newline", "output_shapes_wrong", "output_shapes_count",
        "device_garbage", "device_tpu", "device_unknown_task", "stitch_n0", "stitch_n_neg",
        "stitch_n_huge", "stitch_n_missing", "partition_huge", "partition_int64_max",
        "concat_n_huge", "min_consumer", "bad_consumer", "producer_neg", "gather_attr_list",
        "gather_missing_types", "const_value_list", "const_dtype_mismatch", "tlist_huge",
        "many_nodes", "deep_chain", "deep_chain_reversed", "placeholder_shape_huge",
        "reshape_absurd", "range_absurd",
    ]  # fmt: skip
    expect_struct = {
        "attr_underscore": "ok", "producer_neg": "any", "device_unknown_task": "any",
        "many_nodes": "ok", "deep_chain": "ok", "deep_chain_reversed": "ok",
        "tlist_huge": "any", "class_self": "any", "name_long": "any", "name_unicode": "error",
        "stitch_n_missing": "error", "min_consumer": "error", "bad_consumer": "error",
        "placeholder_shape_huge": "any",
        "kernel_newline": "error", "class_non_utf8": "any", "device_tpu": "any",
    }  # fmt: skip
    out += cases_from(
        A,
        "structure",
        structure,
        text_graph,
        expect=lambda v: expect_struct.get(v, "error"),
        timeout=60,
    )
    del ok_kinds

    # -- input_map, return_elements, name ----------------------------------------------------------
    def import_args(which):
        mg, ops = _mg(), _ops()
        data = _ref()[0]
        s = scope()
        mine = mg.Const(s.with_op_name("mine"), np.zeros((2, 3), np.float32))
        ints = mg.Const(s.with_op_name("ints"), np.zeros((2, 3), np.int32))
        other = mg.Const(scope(), np.zeros((2, 3), np.float32))
        parts = ops.DynamicPartition(s, [1.0, 2.0], [0, 1], num_partitions=2)
        wide = mg.Const(s, np.zeros((2, 4), np.float32))
        n = len(s.graph)
        kw = {
            "map_missing": {"input_map": {"nope:0": mine}},
            "map_malformed": {"input_map": {"x:": mine}},
            "map_colon": {"input_map": {":0": mine}},
            "map_neg": {"input_map": {"x:-1": mine}},
            "map_int_key": {"input_map": {5: mine}},
            "map_none_key": {"input_map": {None: mine}},
            "map_int_value": {"input_map": {"x:0": 5}},
            "map_str_value": {"input_map": {"x:0": "mine:0"}},
            "map_none_value": {"input_map": {"x:0": None}},
            "map_operation_value": {"input_map": {"x:0": mine.operation}},
            "map_other_graph": {"input_map": {"x:0": other}},
            "map_multi_output": {"input_map": {"x:0": parts}},
            "map_dtype_mismatch": {"input_map": {"x:0": ints}},
            "map_shape_mismatch": {"input_map": {"x:0": wide}},
            "map_control_output": {"input_map": {"^x": mine}},
            "map_control_missing": {"input_map": {"^nope": mine}},
            "map_index_beyond": {"input_map": {"x:5": mine}},
            "map_list": {"input_map": [("x:0", mine)]},
            "map_ok": {"input_map": {"x:0": mine}, "return_elements": ["rows:0"]},
            "map_bare_name": {"input_map": {"x": mine}},
            "ret_missing": {"return_elements": ["nope"]},
            "ret_index": {"return_elements": ["x:9"]},
            "ret_colon": {"return_elements": ["x:"]},
            "ret_empty": {"return_elements": [""]},
            "ret_none": {"return_elements": [None]},
            "ret_str": {"return_elements": "x"},
            "ret_int": {"return_elements": 5},
            "ret_control": {"return_elements": ["^x"]},
            "ret_dup": {"return_elements": ["x", "x", "x:0"]},
            "ret_double_colon": {"return_elements": ["x:0:0"]},
            "name_none": {"name": None},
            "name_space": {"name": "a b"},
            "name_int": {"name": 5},
            "name_slash": {"name": "a/b"},
            "name_newline": {"name": "a\n"},
            "name_long": {"name": "a" * 5000},
            "graph_def_none": {"graph_def": None},
            "graph_def_int": {"graph_def": 5},
            "graph_def_str": {"graph_def": "node {}"},
            "graph_def_dict": {"graph_def": {"node": []}},
            "graph_def_output": {"graph_def": mine},
            "graph_def_bytearray": {"graph_def": bytearray(data)},
            "graph_def_memoryview": {"graph_def": memoryview(data)},
            "scope_graph": {"scope": s.graph},
            "scope_none": {"scope": None},
        }[which]  # fmt: skip
        target = kw.pop("scope", s)
        graph_def = kw.pop("graph_def", data)
        try:
            result = mg.import_graph_def(target, graph_def, **kw)
        except mg.OpError:
            must(len(s.graph) == n, "a failed import changed the graph")
            raise
        if which == "map_ok":
            got = run(result[0])
            same(got, np.zeros((2, 3), np.float32)[[1, 0]], "mapped import")

    iargs = [
        "map_missing",
        "map_malformed",
        "map_colon",
        "map_neg",
        "map_int_key",
        "map_none_key",
        "map_int_value",
        "map_str_value",
        "map_none_value",
        "map_operation_value",
        "map_other_graph",
        "map_multi_output",
        "map_dtype_mismatch",
        "map_shape_mismatch",
        "map_control_output",
        "map_control_missing",
        "map_index_beyond",
        "map_list",
        "map_ok",
        "map_bare_name",
        "ret_missing",
        "ret_index",
        "ret_colon",
        "ret_empty",
        "ret_none",
        "ret_str",
        "ret_int",
        "ret_control",
        "ret_dup",
        "ret_double_colon",
        "name_none",
        "name_space",
        "name_int",
        "name_slash",
        "name_newline",
        "name_long",
        "graph_def_none",
        "graph_def_int",
        "graph_def_str",
        "graph_def_dict",
        "graph_def_output",
        "graph_def_bytearray",
        "graph_def_memoryview",
        "scope_graph",
        "scope_none",
    ]
    iok = {
        "map_ok",
        "map_bare_name",
        "ret_dup",
        "name_none",
        "graph_def_bytearray",
        "graph_def_memoryview",
        "map_control_output",
        "name_long",
    }
    out += cases_from(
        A,
        "import args",
        iargs,
        import_args,
        expect=lambda v: "ok" if v in iok else ("any" if v == "map_shape_mismatch" else "error"),
    )

    # -- files -----------------------------------------------------------------------------------
    def files(which):
        mg = _mg()
        d = tempfile.mkdtemp()
        data = _ref()[0]
        if which == "read_missing":
            mg.read_graph(os.path.join(d, "nope.pb"))
        elif which == "read_dir":
            mg.read_graph(d)
        elif which == "read_empty":
            open(os.path.join(d, "e.pb"), "wb").close()
            mg.read_graph(os.path.join(d, "e.pb"))
        elif which == "read_random":
            with open(os.path.join(d, "r.pb"), "wb") as f:
                f.write(os.urandom(4096))
            mg.read_graph(os.path.join(d, "r.pb"))
        elif which == "read_none":
            mg.read_graph(None)
        elif which == "read_int":
            mg.read_graph(5)
        elif which == "read_bytes_path":
            path = os.path.join(d, "g.pb")
            with open(path, "wb") as f:
                f.write(data)
            mg.read_graph(path.encode())
        elif which == "read_utf16_text":
            path = os.path.join(d, "g.pbtxt")
            with open(path, "wb") as f:
                f.write(_ref()[1].encode("utf-16"))
            mg.read_graph(path)
        elif which == "write_missing_dir":
            mg.write_graph(scope().graph, os.path.join(d, "no", "g.pb"))
        elif which == "write_to_dir":
            mg.write_graph(scope().graph, d)
        elif which == "write_int":
            mg.write_graph(5, os.path.join(d, "g.pb"))
        elif which == "write_none_path":
            mg.write_graph(scope().graph, None)
        elif which == "write_as_text_str":
            mg.write_graph(scope().graph, os.path.join(d, "g.pb"), as_text="yes")
        elif which == "write_bytes":
            mg.write_graph(data, os.path.join(d, "g.pbtxt"))
            _roundtrip_check(mg.read_graph(os.path.join(d, "g.pbtxt")).SerializeToString())
        elif which == "write_read_only_dir":
            os.chmod(d, 0o500)
            try:
                mg.write_graph(scope().graph, os.path.join(d, "g.pb"))
            finally:
                os.chmod(d, 0o700)
        elif which == "write_scope":
            s, fetches, feeds = _base_graph()
            mg.write_graph(s, os.path.join(d, "g.pb"))
            _roundtrip_check(mg.read_graph(os.path.join(d, "g.pb")).SerializeToString())
        elif which == "tf_files":
            for name in sorted(os.listdir(DATA)):
                if name.endswith((".pb", ".pbtxt")):
                    try:
                        _import_and_run(mg.read_graph(os.path.join(DATA, name)))
                    except mg.OpError:
                        pass

    fl = [
        "read_missing",
        "read_dir",
        "read_empty",
        "read_random",
        "read_none",
        "read_int",
        "read_bytes_path",
        "read_utf16_text",
        "write_missing_dir",
        "write_to_dir",
        "write_int",
        "write_none_path",
        "write_as_text_str",
        "write_bytes",
        "write_read_only_dir",
        "write_scope",
        "tf_files",
    ]
    fok = {"read_empty", "write_bytes", "write_scope", "tf_files", "read_bytes_path"}
    out += cases_from(A, "files", fl, files,
                      expect=lambda v: "ok" if v in fok else ("any" if v in (
                          "write_read_only_dir",) else "error"), timeout=60)  # fmt: skip

    # -- TensorFlow compatibility: graphs TF must refuse ------------------------------------------
    def tf_refuses(which):
        mg, ops = _mg(), _ops()
        from minigraph.graph_def import MINIGRAPH_MIN_CONSUMER  # noqa: PLC0415

        s = scope()
        if which == "gather_nd_batch_dims":
            ops.GatherNd(s, [[1, 2], [3, 4]], [[1], [0]], batch_dims=1)
        elif which == "gather_v2_policy":
            ops.GatherV2(s, [1, 2], [0], 0, bad_indices_policy="IGNORE")
        elif which == "gather_v2_error_policy":
            ops.GatherV2(s, [1, 2], [0], 0, bad_indices_policy="ERROR")
        elif which == "embedding":
            ops.embedding_lookup(s, [mg.Const(s, [[1.0]]), mg.Const(s, [[2.0]])], [0, 1])
        elif which == "embedding_one_shard":
            ops.embedding_lookup(s, mg.Const(s, [[1.0]]), [0])
        gd = s.graph.as_graph_def()
        must(gd.versions.min_consumer == MINIGRAPH_MIN_CONSUMER,
             f"{which}: a graph TF would run differently is written with min_consumer "
             f"{gd.versions.min_consumer}")  # fmt: skip

    out += cases_from(
        A,
        "TF must refuse",
        [
            "gather_nd_batch_dims",
            "gather_v2_policy",
            "gather_v2_error_policy",
            "embedding",
            "embedding_one_shard",
        ],
        tf_refuses,
        expect="ok",
    )

    def tf_plain(which):
        mg, ops = _mg(), _ops()
        s = scope()
        if which == "gather":
            ops.gather(s, [1, 2], [0])
        elif which == "partition":
            p = ops.DynamicPartition(s, [1, 2], [0, 1], num_partitions=2)
            ops.DynamicStitch(s, [[0], [1]], list(p.outputs))
        elif which == "math":
            ops.FloorMod(s, ops.Cast(s, ops.Range(s, 0, 5, 1), DstT=mg.int64), np.int64(2))
        gd = s.graph.as_graph_def()
        must(gd.versions.min_consumer == 0, f"{which}: a plain graph marked minigraph-only")

    out += cases_from(A, "TF plain", ["gather", "partition", "math"], tf_plain, expect="ok")

    # Consts of every dtype through a file: values kept exactly.
    def const_dtype(dtype):
        mg = _mg()
        s = scope()
        rng = np.random.default_rng(3)
        if dtype == "string":
            value = np.array([b"a", b"\x00\xff", b""], dtype=object)
        elif dtype == "bool":
            value = rng.integers(0, 2, (3, 2)).astype(bool)
        else:
            value = (rng.standard_normal((3, 2)) * 100).astype(mg.as_dtype(dtype).np_dtype)
        for v in (value, value[:1], np.full((2, 2), value.reshape(-1)[0], value.dtype), value[:0]):
            c = mg.Const(s, v)
            s2 = scope()
            (imported,) = mg.import_graph_def(
                s2, s.graph.as_graph_def().SerializeToString(),
                return_elements=[c.output.name])  # fmt: skip
            same(run(imported), v, f"{dtype} const")

    out += cases_from(A, "const dtype", DTYPE_NAMES, const_dtype, expect="ok")

    # The module's public helpers given what they do not take.
    def helper(which):
        mg = _mg()
        gd = mg.graph_def
        s = scope()
        mg.Placeholder(s, mg.float32, [2])
        calls = {
            "looks_like_text str": lambda: gd.looks_like_text("node {}"),
            "looks_like_text None": lambda: gd.looks_like_text(None),
            "tensor_from_proto None": lambda: gd.tensor_from_proto(None),
            "tensor_from_proto array": lambda: gd.tensor_from_proto(np.ones(2)),
            "tensor_from_proto Output": lambda: gd.tensor_from_proto(
                s.graph.operations[0].outputs[0]
            ),
            "tensor_from_proto GraphDef": lambda: gd.tensor_from_proto(s.graph.as_graph_def()),
        }
        calls[which]()

    helpers = [
        "looks_like_text str", "looks_like_text None", "tensor_from_proto None",
        "tensor_from_proto array", "tensor_from_proto Output", "tensor_from_proto GraphDef",
    ]  # fmt: skip
    out += cases_from(A, "helpers", helpers, helper, expect="error")
    return out


def simgpu_cases() -> list[Case]:
    return []


_ = Wrong
