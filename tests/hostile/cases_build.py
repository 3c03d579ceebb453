"""Construction and registration: absurd ranks and sizes, names, attrs, dtypes, literals,
variadic lists, scopes, op and kernel registration, shape functions and kernels that misbehave.
"""

# ruff: noqa: E501 - tables of hostile inputs and source snippets read best unwrapped

from __future__ import annotations

import decimal
import fractions
from typing import Any

import numpy as np

from tests.hostile._common import cases_from, gather_reference, must, run, same, scope, uid
from tests.hostile._common import minigraph_module as _mg
from tests.hostile._common import ops_module as _ops
from tests.hostile.battery import Case, Wrong


def _unchanged(graph: Any, n: int) -> None:
    must(len(graph) == n, f"a failed construction left the graph with {len(graph)} nodes, not {n}")


def _refused_and_unchanged(make: Any) -> Any:
    """Runs make(scope); a failure must leave the graph as it was."""

    def go(value: Any) -> None:
        mg = _mg()
        s = scope()
        mg.Const(s.with_op_name("pre"), 1)
        n = len(s.graph)
        try:
            make(s, value)
        except mg.OpError:
            _unchanged(s.graph, n)
            raise

    return go


def build_cases() -> list[Case]:
    out: list[Case] = []
    A = "build"

    # -- shapes: ranks, dims -------------------------------------------------------------------
    def placeholder_shape(s, shape):
        mg = _mg()
        p = mg.Placeholder(s, mg.float32, shape=shape)
        dims = p.shape.dims
        if dims is not None:
            must(len(dims) <= 64, f"a shape of rank {len(dims)} was accepted")
            for d in dims:
                must(d is None or 0 <= d <= 2**63 - 1, f"dim {d} accepted")

    ranks = [[1] * r for r in (0, 1, 63, 64, 65, 70, 1000)] + [[None] * 65, [1] * 100000]
    out += cases_from(
        A,
        "placeholder rank",
        ranks,
        _refused_and_unchanged(placeholder_shape),
        expect=lambda v: "error" if len(v) > 64 else "ok",
    )
    dims = [
        [-1],
        [-2],
        [2**31],
        [2**62],
        [2**63 - 1],
        [2**63],
        [2**64],
        [2**70],
        [10**30],
        [2.0],
        [2.5],
        [float("nan")],
        ["3"],
        [True],
        [np.int64(3)],
        [np.uint64(2**64 - 1)],
        [np.float32(2)],
        [None],
        [[1]],
        [1j],
        [decimal.Decimal(2)],
        [2**63 - 1, 2**63 - 1],
    ]
    out += cases_from(
        A, "placeholder dims", dims, _refused_and_unchanged(placeholder_shape),
        expect=lambda v: "error" if any(
            isinstance(d, (bool, float, complex, str, list, decimal.Decimal, np.floating))
            or (isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                and not 0 <= int(d) <= 2**63 - 1 and int(d) != -1)
            for d in v) else "any",
    )  # fmt: skip
    shapes = [
        "abc",
        5,
        {1: 2},
        b"ab",
        2.5,
        object(),
        iter([1, 2]),
        range(3),
        (2, 3),
        np.array([2, 3]),
        np.array([[2]]),
        np.array(2),
    ]
    out += cases_from(A, "placeholder shape", shapes, _refused_and_unchanged(placeholder_shape))

    # Graph.add_operation, the public low-level entry, given what it does not take.
    def add_operation(which):
        mg = _mg()
        s = scope()
        x = mg.Placeholder(s, mg.float32, [2])
        n = len(s.graph)
        loop: list[Any] = []
        loop.append(loop)
        good = {"op_def": mg.registry.get_op_def("Identity"), "inputs": [x.output], "attrs": {}}
        bad = {
            "builder": {"inputs": [x]}, "operation": {"inputs": [x.operation]},
            "array": {"inputs": [np.ones(2)]}, "none": {"inputs": None},
            "string": {"inputs": "x:0"}, "self_list": {"inputs": [loop]},
            "many": {"inputs": [x.output] * 100_000}, "op_type": {"op_def": "Identity"},
            "attrs": {"attrs": [("T", 1)]}, "prefix": {"prefix": object()},
            "base": {"base_name": "a//b"}, "device": {"requested_device": 3.5},
            "device_text": {"requested_device": "/job:"}, "controls": {"control_inputs": [x]},
            "colocation": {"colocation_group": ["x"]}, "label": {"kernel_label": b"x"},
            "source": {"source": ("f", "line")},
        }[which]  # fmt: skip
        try:
            s.graph.add_operation(**{**good, **bad})
        except mg.OpError:
            _unchanged(s.graph, n)
            raise

    add_operation_args = [
        "builder", "operation", "array", "none", "string", "self_list", "many", "op_type",
        "attrs", "prefix", "base", "device", "device_text", "controls", "colocation", "label",
        "source",
    ]  # fmt: skip
    out += cases_from(A, "add_operation", add_operation_args, add_operation, expect="error")

    # Output ranks above numpy's: every op that adds ranks, known at construction or not.
    def rank_overflow(which):
        mg, ops = _mg(), _ops()
        s = scope()
        if which == "gather":
            ops.GatherV2(s, np.zeros((1,) * 40, np.float32), np.zeros((1,) * 30, np.int32), 0)
        elif which == "gather_nd":
            ops.GatherNd(s, np.zeros((1,) * 40, np.float32), np.zeros((1,) * 30, np.int32))
        elif which == "stitch_scalar_index":
            ops.DynamicStitch(s, [0], [np.zeros((1,) * 64, np.float32)])
        elif which == "partition_scalar":
            ops.DynamicPartition(s, np.zeros((1,) * 64, np.float32), 0, num_partitions=1)
        elif which == "reshape65":
            ops.Reshape(s, np.zeros(1, np.float32), np.ones(65, np.int32))
        elif which == "embedding":
            ids = np.zeros((1,) * 63, np.int32)
            ops.embedding_lookup(s, [np.zeros((2, 1, 1), np.float32)] * 2, ids)
        elif which == "embedding_one_shard":
            ops.embedding_lookup(s, np.zeros((2, 1, 1), np.float32), np.zeros((1,) * 63, np.int32))
        elif which == "stitch_fed":
            d = mg.Placeholder(s, mg.float32)
            g = ops.DynamicStitch(s, [0], [d])
            run(g, {d: np.zeros((1,) * 64, np.float32)})
        elif which == "partition_fed":
            d = mg.Placeholder(s, mg.float32)
            p = mg.Placeholder(s, mg.int32)
            g = ops.DynamicPartition(s, d, p, num_partitions=1)
            run(g.outputs[0], {d: np.zeros((1,) * 64, np.float32), p: np.zeros((), np.int32)})
        elif which == "reshape_fed":
            t = mg.Placeholder(s, mg.int32)
            g = ops.Reshape(s, np.zeros(1, np.float32), t)
            run(g, {t: np.ones(65, np.int32)})
        elif which == "embedding_fed":
            ids = mg.Placeholder(s, mg.int32)
            g = ops.embedding_lookup(s, [np.zeros((2, 1, 1), np.float32)] * 2, ids)
            run(g, {ids: np.zeros((1,) * 63, np.int32)})
        elif which == "gather_fed":
            p = mg.Placeholder(s, mg.float32)
            i = mg.Placeholder(s, mg.int32)
            run(
                ops.GatherV2(s, p, i, 0),
                {p: np.zeros((1,) * 40, np.float32), i: np.zeros((1,) * 30, np.int32)},
            )
        elif which == "concat65":
            ops.ConcatV2(s, [np.zeros((1,) * 64), np.zeros((1,) * 64)], 64)

    kinds = [
        "gather",
        "gather_nd",
        "stitch_scalar_index",
        "partition_scalar",
        "reshape65",
        "embedding",
        "embedding_one_shard",
        "stitch_fed",
        "partition_fed",
        "reshape_fed",
        "embedding_fed",
        "gather_fed",
        "concat65",
    ]
    out += cases_from(A, "rank>64", kinds, rank_overflow, expect="error")

    # -- names ---------------------------------------------------------------------------------
    names = [
        "",
        " ",
        "a b",
        "g\n",
        "\n",
        "a/b",
        "_a",
        "-a",
        ".",
        "..",
        "a" * 10000,
        "é",
        "ｇ",
        "a\x00",
        None,
        5,
        b"g",
        "g:0",
        "^g",
        "a-b",
        "a.b",
        "A_1",
        "g\r",
        "\tg",
        "g\u2028",
    ]

    def op_name(s, name):
        mg = _mg()
        c = mg.Const(s.with_op_name(name), 1.0)
        must(
            "\n" not in c.operation.name and "\x00" not in c.operation.name,
            f"node name {c.operation.name!r} accepted",
        )

    def sub_scope(s, name):
        mg = _mg()
        sub = s.new_sub_scope(name)
        c = mg.Const(sub, 1.0)
        must(
            "\n" not in c.operation.name and "//" not in c.operation.name,
            f"node name {c.operation.name!r} accepted",
        )

    def default_name(s, name):
        mg = _mg()
        b = mg.op_builder("Identity", default_name=name)
        x = b(s, mg.Const(s, 1.0))
        must("\n" not in x.operation.name, f"node name {x.operation.name!r} accepted")

    _legal = {"a-b", "a.b", "A_1", ".", "..", "a" * 10000, "g"}
    out += cases_from(
        A,
        "with_op_name",
        names,
        _refused_and_unchanged(op_name),
        expect=lambda v: "ok" if v in _legal else "error",
    )
    out += cases_from(
        A,
        "new_sub_scope",
        names,
        _refused_and_unchanged(sub_scope),
        expect=lambda v: "ok" if v in _legal or v == "" else "error",
    )
    out += cases_from(
        A,
        "default_name",
        names[:16],
        _refused_and_unchanged(default_name),
        expect=lambda v: "ok" if v in _legal or v is None else "error",
    )

    def explicit_suffix_collision():
        mg = _mg()
        s = scope()
        a = mg.Const(s.with_op_name("g"), 1)
        b = mg.Const(s.with_op_name("g_1"), 2)
        c = mg.Const(s.with_op_name("g"), 3)
        names_ = [a.operation.name, b.operation.name, c.operation.name]
        must(len(set(names_)) == 3, f"names collide: {names_}")
        same(run([a, b, c]), [np.int32(1), np.int32(2), np.int32(3)], "values")

    out.append(Case("names: explicit g_1 then g twice", A, explicit_suffix_collision, "ok"))

    # -- attrs ---------------------------------------------------------------------------------
    def gather_attr(name):
        def make(s, value):
            ops = _ops()
            ops.GatherV2(s, [[1, 2], [3, 4]], [[0], [1]], 1, **{name: value})

        return make

    values = [
        1.0,
        True,
        "1",
        None,
        2**70,
        -(2**70),
        np.int64(0),
        np.bool_(True),
        [0],
        np.array(0),
        1j,
        b"\x00",
        float("nan"),
    ]
    out += cases_from(A, "GatherV2 batch_dims", values, _refused_and_unchanged(
        gather_attr("batch_dims")),
        expect=lambda v: "any" if isinstance(v, np.integer) else "error")  # fmt: skip
    policies = [b"\xff", "error", 5, None, "ERROR\n", "", "DEFAULT", "IGNORE", b"ERROR", ["ERROR"]]
    out += cases_from(A, "GatherV2 bad_indices_policy", policies,
                      _refused_and_unchanged(gather_attr("bad_indices_policy")),
                      expect=lambda v: "ok" if v in ("", "DEFAULT", "IGNORE", b"ERROR")
                      else "error")  # fmt: skip
    out += cases_from(A, "GatherV2 unknown attr", [{"foo": 1}, {"Tparams": "int32"},
                                                   {"Tparams": "float32"}, {"Taxis": 5}],
                      _refused_and_unchanged(lambda s, kw: _ops().GatherV2(s, [1, 2], [0], 0, **kw)),
                      expect=lambda v: "ok" if "Tparams" in v else "error")  # fmt: skip

    def partitions_n(s, n):
        _ops().DynamicPartition(s, [1, 2, 3], [0, 0, 0], num_partitions=n)

    ns = [0, -1, 1.5, True, "2", None, 2**31, 2**62, 2**70, 10**7, np.int32(3)]
    out += cases_from(A, "DynamicPartition num_partitions", ns,
                      _refused_and_unchanged(partitions_n),
                      expect=lambda v: "ok" if isinstance(v, np.integer) else "error",
                      timeout=20)  # fmt: skip

    def cast_to(s, kw):
        _ops().Cast(s, [1.5, 2.5], **kw)

    casts = [
        {"DstT": "flaot32"},
        {"DstT": None},
        {"DstT": object},
        {"DstT": np.float32},
        {"DstT": "string"},
        {"DstT": "int32", "Truncate": True},
        {"DstT": "int32", "Truncate": "yes"},
        {},
        {"DstT": np.dtype("M8")},
        {"DstT": "bfloat16"},
        {"DstT": "complex64"},
        {"DstT": "bool"},
    ]
    out += cases_from(A, "Cast attrs", casts, _refused_and_unchanged(cast_to),
                      expect=lambda v: "ok" if v.get("DstT") in (np.float32, "bfloat16",
                                                                   "complex64", "bool")
                      and "Truncate" not in v else "error")  # fmt: skip

    # Range: NaN, infinities, sizes that cannot exist.
    ranges = [
        (0.0, float("nan"), 1.0),
        (0.0, float("inf"), 1.0),
        (float("-inf"), 0.0, 1.0),
        (0.0, 1e30, 1e-30),
        (0, 2**31 - 1, 1),
        (np.int64(-(2**63)), np.int64(2**63 - 1), np.int64(1)),
        (0, 10, 0),
        (10, 0, 1),
        (0, 10, -1),
        (0.0, 1.0, float("nan")),
        (0.0, 1.0, 1e-320),
        (5, 5, 1),
        (np.float16(0), np.float16(60000), np.float16(1)),
    ]

    def range_of(s, args):
        r = _ops().Range(s, *args)
        must(
            r.shape.dims[0] is None or r.shape.dims[0] <= 2**63 - 1,
            f"Range shape {r.shape} accepted",
        )

    out += cases_from(A, "Range", ranges, _refused_and_unchanged(range_of))

    def range_fed(args):
        mg, ops = _mg(), _ops()
        s = scope()
        dtype = mg.as_dtype(np.asarray(args[0]).dtype if not isinstance(args[0], float)
                            else np.float32)  # fmt: skip
        ps = [mg.Placeholder(s, dtype, shape=[]) for _ in range(3)]
        r = ops.Range(s, *ps)
        got = run(r, dict(zip(ps, [np.asarray(a, dtype.np_dtype) for a in args])))
        must(got.size < 10**7, f"a Range of {got.size} elements")

    fed_ranges = [
        (0.0, float("nan"), 1.0),
        (0.0, float("inf"), 1.0),
        (0.0, 1e30, 1e-30),
        (0.0, 1.0, float("nan")),
        (np.int64(-(2**63)), np.int64(2**63 - 1), np.int64(1)),
        (np.int64(0), np.int64(2**62), np.int64(1)),
        (0.0, 3.0, 1.0),
    ]
    out += cases_from(A, "Range fed", fed_ranges, range_fed, timeout=30)

    # Reshape with absurd or inconsistent targets.
    def reshape_to(s, target):
        _ops().Reshape(s, np.zeros(6, np.float32), np.asarray(target, np.int64))

    targets = [
        [2, 3],
        [-1, 3],
        [-1, -1],
        [-2, 3],
        [2**40, 2**40],
        [0, -1],
        [7],
        [],
        [[2, 3]],
        [2**62, 2**62, 0],
        [6] + [1] * 63,
        [6] + [1] * 64,
    ]
    out += cases_from(A, "Reshape const", targets, _refused_and_unchanged(reshape_to),
                      expect=lambda v: "ok" if v in ([2, 3], [-1, 3], [6] + [1] * 63)
                      else "error")  # fmt: skip

    # Binary ops: broadcasting, zero divisors, overflow.
    def binary(args):
        ops = _ops()
        op, x, y = args
        s = scope()
        got = run(getattr(ops, op)(s, x, y))
        x_, y_ = np.asarray(x), np.asarray(y)
        with np.errstate(all="ignore"):
            want = {
                "Sub": lambda: x_ - y_, "Maximum": lambda: np.maximum(x_, y_),
                "FloorDiv": lambda: (np.floor_divide(x_, y_) if x_.dtype.kind in "iu"
                                     else np.floor(x_ / y_).astype(x_.dtype)),
                "FloorMod": lambda: (np.mod(x_, y_) if x_.dtype.kind in "iu"
                                     else _tf_floor_mod(x_, y_)),
            }[op]()  # fmt: skip
        if not isinstance(x, np.ndarray):
            want = np.asarray(want).astype(got.dtype)  # literals are int32/float32, as in TF
        same(got, want, op)

    i32 = np.int32
    bins = [("Sub", [1, 2], [[1], [2]]), ("Sub", [1, 2], [1, 2, 3]), ("FloorDiv", [1, 2], [0, 1]),
            ("FloorMod", [1, 2], [1, 0]), ("FloorDiv", np.array([-(2**31)], i32),
                                          np.array([-1], i32)),
            ("FloorMod", np.array([-(2**31)], i32), np.array([-1], i32)),
            ("FloorDiv", np.array([1.0, -1.0, 0.0], np.float32), np.array([0.0, 0.0, 0.0],
                                                                          np.float32)),
            ("FloorMod", np.array([5.0, -5.0, 5.0], np.float64), np.array([-3.0, 3.0, 0.0])),
            ("Maximum", np.array([np.nan, 1.0]), np.array([1.0, np.nan])),
            ("Sub", np.array([1, 2], np.uint8), np.array([2, 1], np.uint8)),
            ("Sub", [1, 2], [1.5, 2.5]), ("Maximum", ["a"], ["b"]), ("Sub", [True], [False]),
            ("FloorDiv", np.array([7, -7], np.int64), np.array([2, 2], np.int64)),
            ("FloorMod", np.array([7, -7], np.int64), np.array([-2, 2], np.int64)),
            ("FloorDiv", np.array([1 + 1j]), np.array([1j]))]  # fmt: skip
    out += cases_from(A, "binary", bins, binary)

    # -- dtypes ---------------------------------------------------------------------------------
    dtypes_ = [
        "float",
        "double",
        "half",
        np.longdouble,
        np.dtype("M8[s]"),
        np.dtype([("a", "i4")]),
        str,
        bytes,
        object,
        list,
        5,
        "",
        "int",
        int,
        float,
        complex,
        bool,
        "flaot32",
        "FLOAT32",
        np.dtype(">f4"),
        np.dtype("U3"),
        "bfloat16",
        np.float64,
        None,
        "string",
        "resource",
        "qint8",
        np.void,
        np.str_,
    ]

    def placeholder_dtype(s, d):
        _mg().Placeholder(s, d)

    good = {"float", "double", "half", "bfloat16", "string"}  # TF's names ("int" is not one)
    out += cases_from(A, "Placeholder dtype", dtypes_, _refused_and_unchanged(placeholder_dtype),
                      expect=lambda v: "ok" if (isinstance(v, str) and v in good) or v in (
                          int, float, complex, bool, str, bytes, np.float64, object, np.str_,
                          np.dtype("U3"), np.dtype(">f4")) else "error")  # fmt: skip

    # -- literals ------------------------------------------------------------------------------
    deep = []
    for _ in range(300):
        deep = [deep]
    deep1 = 1
    for _ in range(70):
        deep1 = [deep1]

    class Raising:
        def __len__(self):
            raise RuntimeError("boom")

        def __getitem__(self, i):
            raise RuntimeError("boom")

    class Weird:
        def __array__(self, dtype=None, copy=None):
            raise KeyError("weird")

    literals = [
        [0, True],
        [True, 1.5],
        [[1], [2, 3]],
        2**70,
        -(2**70),
        [2**63],
        [2**64 - 1],
        float("nan"),
        [1, "a"],
        ["a", b"b"],
        ["\ud800"],
        b"\xff",
        {1, 2},
        {"a": 1},
        (x for x in [1]),
        None,
        [None],
        [],
        [[]],
        [[], [1]],
        1 + 2j,
        [1, 1j],
        np.array([1, 2], dtype="M8[s]"),
        np.array([object()]),
        np.array(["a", "b"]),
        np.array([b"a"]),
        np.longdouble(1),
        memoryview(b"ab"),
        bytearray(b"ab"),
        decimal.Decimal(1),
        fractions.Fraction(1, 2),
        deep,
        deep1,
        range(5),
        np.uint64(2**64 - 1),
        np.bool_(True),
        np.array(None),
        np.ma.masked_array([1, 2], mask=[0, 1]),
        np.matrix([[1, 2]]),
        [np.float32(1), np.float64(2)],
        [np.int8(1), 300],
        np.array([1, 2])[::-1],
        np.asfortranarray(np.ones((2, 3))),
        np.zeros((2, 0, 3)),
        [[np.nan, np.inf]],
        [1e39],
        Raising(),
        Weird(),
        np.array([[1, 2], [3, 4]], dtype=np.dtype(">i4")),
        "x" * 100000,
        [b"a\x00b", b""],
        np.array([1.5], np.float16),
        np.arange(10**6),
    ]

    def const_literal(s, v):
        mg = _mg()
        c = mg.Const(s, v)
        # A literal accepted must keep its value (numpy's own conversion as the reference).
        if isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
            want = np.asarray(v) if not isinstance(v, np.ma.MaskedArray) else v.data
            # Constants hold native byte order (TF's dtypes have none): compare values.
            same(run(c), want.astype(want.dtype.newbyteorder("=")), "constant")

    refused_lists = [literals[i] for i in (0, 1, 2, 6, 8, 16, 19)]

    def refused_literal(v):
        bad = (isinstance(v, (set, dict, type(x for x in []), decimal.Decimal,
                              fractions.Fraction, Raising, Weird)) or v is None)  # fmt: skip
        if any(v is r for r in refused_lists):
            bad = True
        if isinstance(v, np.ndarray) and v.dtype.kind in "MOV" and v.dtype != object:
            bad = True
        return "error" if bad else "any"

    out += cases_from(
        A,
        "Const literal",
        literals,
        _refused_and_unchanged(const_literal),
        expect=refused_literal,
        timeout=30,
    )

    # Literal inputs whose dtype a type attr or an earlier input decides.
    def gather_literal(args):
        ops = _ops()
        params, indices, axis = args
        s = scope()
        n = len(s.graph)
        try:
            g = ops.GatherV2(s, params, indices, axis)
        except Exception:
            _unchanged(s.graph, n)
            raise
        got = run(g)
        p_ = np.asarray(params)
        if p_.dtype.kind == "U":
            p_ = np.vectorize(str.encode, otypes=[object])(p_)
        want = gather_reference(p_, indices, int(np.asarray(axis)))
        must(got.shape == want.shape and np.array_equal(got, want), f"{got} vs {want}")

    gl = [
        ([1, 2], [0.5], 0),
        ([1, 2], [True], 0),
        ([1, 2], [0], "0"),
        ([1, 2], [0], 0.0),
        ([1, 2], [0], [0]),
        ([1, 2], [2**40], 0),
        ([1, 2], [[0, 1], [1]], 0),
        ([1, 2], 1, 0),
        ([1, 2], np.array([1], np.uint8), 0),
        ([1, 2], [0], np.int16(0)),
        ([[1, 2]], [0], -1),
        ([[1, 2]], [0], -3),
        ([[1, 2]], [0], 2),
        ("ab", [0], 0),
        ([["a", "b"]], [1], 1),
    ]
    out += cases_from(A, "GatherV2 literal", gl, gather_literal)

    # -- variadic lists ------------------------------------------------------------------------
    def stitch(args):
        mg, ops = _mg(), _ops()
        indices, data = args
        s = scope()
        mg.Const(s, 0)
        n = len(s.graph)
        try:
            g = ops.DynamicStitch(s, indices, data)
        except mg.OpError:
            _unchanged(s.graph, n)
            raise
        run(g)

    def placeholder_in(dtype, shape=None):
        # A fresh graph's placeholder: inputs from another graph must be refused.
        return _mg().Placeholder(scope(), dtype, shape=shape)

    sv = [([], []), ([[0]], []), ([0, 1], [[1]]), (0, [1]), ([[0], [1]], [[1], [1.0]]),
          ([np.array([0], np.int64)], [[1]]), ([[0]], [[1]]), ((0,), (5,)),
          ([[0]] * 2000, [[7]] * 2000), ([[0], None], [[1], [2]]), ([[-1]], [[1]]),
          ([[2**31 - 1]], [[1]]), ([[2**30]], [np.zeros((1, 0))]), ([[0, 1]], [[[1], [2, 3]]]),
          ([placeholder_in(np.int32)], [[1]]), ([[0]], ["a"]), ([[0], [1]], [["a"], [1]]),
          (iter([[0]]), [[1]]), ([[0]], [[[1, 2]]]), ([[0], [0]], [[1], [2]]),
          ([[0], [5]], [[1, 2], [3, 4]])]  # fmt: skip
    out += cases_from(A, "DynamicStitch lists", sv, stitch)

    def concat(args):
        _ops_ = _ops()
        values, axis = args
        s = scope()
        got = run(_ops_.ConcatV2(s, values, axis))
        want = np.concatenate([np.asarray(v) for v in values], axis=int(axis))
        if want.dtype.kind == "U":
            want = np.vectorize(str.encode, otypes=[object])(want)
        same(got, want.astype(got.dtype) if got.dtype != want.dtype else want, "ConcatV2")

    cv = [
        ([[1]], 0),
        ([[1], [2.0]], 0),
        ([[1], [2]], 1),
        ([[1], [2]], -2),
        ([1, 2], 0),
        ([[[1]], [2]], 0),
        ([[1, 2], [3]], 0),
        ([[1], [2]], [0]),
        ([["a"], ["b"]], 0),
        ([[True], [False]], 0),
        ([np.zeros((2, 3)), np.zeros((1, 3))], 0),
        ([np.zeros((2, 3)), np.zeros((2, 1))], -1),
        ([[1]] * 1000, 0),
    ]
    out += cases_from(A, "ConcatV2", cv, concat)

    # -- scopes --------------------------------------------------------------------------------
    def builder_scope(value):
        _ops().GatherV2(value, [1, 2], [0], 0)

    bad_scopes = [None, "abc", 5, _mg_graph(), object(), [], _session()]
    out += cases_from(A, "builder scope", bad_scopes, builder_scope, expect="error")
    out += cases_from(A, "Const scope", bad_scopes, lambda v: _mg().Const(v, 1), expect="error")

    def control(value):
        mg = _mg()
        s = scope()
        s2 = s.with_control_dependencies(value)
        c = mg.Const(s2, 1.0)
        run(c)

    other = scope()
    other_c = _mg().Const(other, 1)
    cvals = [
        5,
        ("a",),
        [None],
        [other_c],
        (x for x in []),
        "abc",
        b"",
        [5],
        {1: 2},
        None,
        [other_c.operation],
        other_c.operation.graph,
    ]
    out += cases_from(A, "with_control_dependencies", cvals, control,
                      expect=lambda v: "any" if isinstance(v, (dict, type(x for x in [])))
                      else "error")  # fmt: skip

    def colocate(value):
        s = scope()
        _mg().Const(s.colocate_with(value), 1)

    out += cases_from(
        A, "colocate_with", [None, other_c, "x", 5, other_c.operation], colocate, expect="error"
    )

    devices = [
        None,
        5,
        "",
        "/job:",
        "gpu:abc",
        "/device:GPU:-1",
        "/device:GPU:99999999999999999999",
        "TPU",
        "nonsense",
        "/job:worker/task:-1",
        "/job:a/job:b",
        "/task:1.5",
        "/device:ＧＰＵ:0",
        "/job:w\n/task:0",
        "cpu",
        "/cpu:0",
        "/gpu:1",
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/replica:x",
        "/device:CPU:0/device:GPU:0",
        b"/cpu:0",
        "/job:worker/task:99999",
        "GPU:*",
        "/device:GPU:*",
        "/job:worker/task:0/device:XLA_GPU:0",
        "/job:$/task:0",
    ]

    def device(value):
        mg = _mg()
        s = scope()
        c = mg.Const(s.with_device(value), [1.0])
        g = mg.Identity(s.with_device(value), c)
        same(run(g), np.array([1.0], np.float32))

    ok_devices = {None, "", "cpu", "/cpu:0", "/gpu:1", "/job:localhost/replica:0/task:0/device:CPU:0",
                  "GPU:*", "/device:GPU:*"}  # fmt: skip
    out += cases_from(
        A, "with_device", devices, device, expect=lambda v: "ok" if v in ok_devices else "any"
    )
    labels = [None, "a\n", 5, "", "x" * 1000, "lab el", "é"]
    out += cases_from(
        A,
        "with_kernel_label",
        labels,
        lambda v: _mg().Identity(scope().with_kernel_label(v), 1.0),
        expect=lambda v: "error" if not isinstance(v, str) or "\n" in v else "any",
    )

    # Immutability of value objects.
    def mutate(which):
        mg = _mg()
        s = scope()
        c = mg.Const(s, 1)
        target = {"scope": s, "output": c.output, "op": c.operation, "shape": c.shape,
                  "dtype": c.dtype, "op_def": c.operation.op_def}[which]  # fmt: skip
        try:
            target.name = "x"
        except AttributeError:
            return
        raise Wrong(f"a {which} accepted a new name")

    out += cases_from(A, "immutable", ["scope", "output", "op", "shape", "dtype", "op_def"], mutate)

    # Symbolic tensors refuse conversion.
    def symbolic(how):
        mg = _mg()
        c = mg.Const(scope(), [1, 2])
        conv = {"asarray": lambda: np.asarray(c), "bool": lambda: bool(c.output),
                "array": lambda: np.array(c.output), "builder_bool": lambda: bool(c),
                "add": lambda: np.add(c.output, 1), "list": lambda: list(c.output)}[how]  # fmt: skip
        conv()
        raise Wrong(f"{how} of a symbolic tensor worked")

    out += cases_from(A, "symbolic", ["asarray", "bool", "array", "builder_bool", "add"], symbolic)

    # finalize: nothing may be added, by builders, literals, sub-scopes or imports.
    def finalized(how):
        mg, ops = _mg(), _ops()
        s = scope()
        c = mg.Const(s, [1, 2])
        s.graph.finalize()
        n = len(s.graph)
        try:
            {"builder": lambda: ops.gather(s, c, [0]), "const": lambda: mg.Const(s, 1),
             "sub": lambda: s.new_sub_scope("x"),
             "import": lambda: mg.import_graph_def(s, scope().graph.as_graph_def()),
             "embedding": lambda: ops.embedding_lookup(s, [c, c], [0])}[how]()  # fmt: skip
        finally:
            _unchanged(s.graph, n)

    out += cases_from(
        A,
        "finalized",
        ["builder", "const", "sub", "import", "embedding"],
        finalized,
        expect=lambda v: "any" if v == "import" else "error",
    )
    out += public_api_cases(A)
    return out


def _mg_graph():
    return _mg().Graph()


def _session():
    mg = _mg()
    return mg.Session(mg.Graph())


def _public_api_call(which: str) -> Any:
    """One public entry point given something it does not take (see public_api_cases)."""
    from minigraph import dot, memory  # noqa: PLC0415 - not loaded by `import minigraph`

    mg = _mg()
    s = scope()
    x = mg.Placeholder(s, mg.float32, [2])
    loop: list[Any] = []
    loop.append(loop)
    spec = mg.DeviceSpec.from_string("/cpu:0")
    calls = {
        "DeviceSpec job": lambda: mg.DeviceSpec(job="a/b"),
        "DeviceSpec job int": lambda: mg.DeviceSpec(job=5),
        "DeviceSpec replica -1": lambda: mg.DeviceSpec(replica=-1),
        "DeviceSpec task str": lambda: mg.DeviceSpec(task="0"),
        "DeviceSpec type int": lambda: mg.DeviceSpec(device_type=5),
        "DeviceSpec type array": lambda: mg.DeviceSpec(device_type=np.array([1, 2])),
        "DeviceSpec index float": lambda: mg.DeviceSpec(device_index=1.5),
        "DeviceSpec index list": lambda: mg.DeviceSpec(device_index=[0]),
        "from_string None": lambda: mg.DeviceSpec.from_string(None),
        "from_string bytes": lambda: mg.DeviceSpec.from_string(b"/cpu:0"),
        "merge_from None": lambda: spec.merge_from(None),
        "is_compatible_with int": lambda: spec.is_compatible_with(3),
        "as_dtype Output": lambda: mg.as_dtype(x.output),
        "as_dtype builder": lambda: mg.as_dtype(x),
        "as_dtype self dict": lambda: mg.as_dtype({"a": loop}),
        "convert_to_array dtype": lambda: mg.dtypes.convert_to_array(1, 5),
        "TensorShape array dim": lambda: mg.TensorShape([np.array([1, 2])]),
        "with_rank array": lambda: mg.TensorShape([2]).with_rank(np.array([1, 2])),
        "with_rank_at_least None": lambda: mg.TensorShape([2]).with_rank_at_least(None),
        "with_rank_at_most str": lambda: mg.TensorShape([2]).with_rank_at_most("1"),
        "si.with_rank int shape": lambda: mg.shape_inference.with_rank(3, 1),
        "check_size None": lambda: mg.tensor_shape.check_size(3),
        "check_rank None": lambda: mg.tensor_shape.check_rank(None),
        "consumers builder": lambda: s.graph.consumers(x),
        "consumers None": lambda: s.graph.consumers(None),
        "consumers other graph": lambda: scope().graph.consumers(x.output),
        "in graph list": lambda: [] in s.graph,
        "in graph Operation": lambda: x.operation in s.graph,
        "get_attr list": lambda: x.operation.get_attr(["dtype"]),
        "OpDef.attr list": lambda: x.operation.op_def.attr(["dtype"]),
        "new_sub_scope array": lambda: s.new_sub_scope(np.array([1, 2])),
        "control deps 0-d array": lambda: s.with_control_dependencies(np.array(x.operation)),
        "list attr 0-d array": lambda: mg.AttrDef("a", "list(int)").canonicalize(np.array(3)),
        "BufferPool max_bytes -1": lambda: memory.BufferPool(-1),
        "BufferPool min_bytes nan": lambda: memory.BufferPool(min_bytes=float("nan")),
        "BufferPool max_idle str": lambda: memory.BufferPool(max_idle="8"),
        "graph_to_dot scope": lambda: dot.graph_to_dot(s),
        "graph_def_to_dot graph": lambda: dot.graph_def_to_dot(s.graph),
        "render_svg timeout nan": lambda: dot.render_svg("digraph {}", "/tmp/x.svg", float("nan")),
        "render_svg text bytes": lambda: dot.render_svg(b"digraph {}", "/tmp/x.svg"),
        "add_shapes array": lambda: s.graph.as_graph_def(add_shapes=np.array([1, 2])),
        "add_shapes Output": lambda: s.graph.as_graph_def(add_shapes=x.output),
        "list_devices verbose array": lambda: mg.list_devices(verbose=np.array([1, 2])),
        "parse text builder": lambda: mg.graph_def.parse_graph_def(b"", text=x),
        "rollback None": lambda: s.graph.rollback(None),
        "rollback no checkpoint": lambda: s.graph.rollback((0, 0, True)),
    }
    return calls[which]()


def public_api_cases(area: str) -> list[Case]:
    """Public entry points beyond the builders, given what they do not take: each must end in
    a typed error (not an AttributeError, TypeError or ValueError from inside, nor a value)."""
    names = [
        "DeviceSpec job", "DeviceSpec job int", "DeviceSpec replica -1", "DeviceSpec task str",
        "DeviceSpec type int", "DeviceSpec type array", "DeviceSpec index float",
        "DeviceSpec index list", "from_string None", "from_string bytes", "merge_from None",
        "is_compatible_with int", "as_dtype Output", "as_dtype builder", "as_dtype self dict",
        "convert_to_array dtype", "TensorShape array dim", "with_rank array",
        "with_rank_at_least None", "with_rank_at_most str", "si.with_rank int shape",
        "check_size None", "check_rank None", "consumers builder", "consumers None",
        "consumers other graph", "in graph list", "in graph Operation", "get_attr list",
        "OpDef.attr list", "new_sub_scope array", "control deps 0-d array",
        "list attr 0-d array", "BufferPool max_bytes -1", "BufferPool min_bytes nan",
        "BufferPool max_idle str", "graph_to_dot scope", "graph_def_to_dot graph",
        "render_svg timeout nan", "render_svg text bytes", "add_shapes array",
        "add_shapes Output", "list_devices verbose array", "parse text builder",
        "rollback None", "rollback no checkpoint",
    ]  # fmt: skip
    return cases_from(area, "public api", names, _public_api_call, expect="error")


def _tf_floor_mod(x, y):
    with np.errstate(all="ignore"):
        mod = np.fmod(x, y)
        fix = (mod != 0) & ((y < 0) != (mod < 0))
        return np.where(fix, mod + y, mod).astype(x.dtype)


# -- registration ------------------------------------------------------------------------------


def register_cases() -> list[Case]:
    out: list[Case] = []
    A = "register"
    SAME = lambda ctx: ctx.input_shapes[0]  # noqa: E731

    def op_def(kw):
        mg = _mg()
        spec = dict(inputs=["x: T"], outputs=["y: T"], attrs=["T: type"], shape_fn=SAME)
        spec.update(kw)
        name = spec.pop("name", f"Hostile{uid()}")
        return mg.OpDef(name, **spec)

    def register(kw):
        mg = _mg()
        before = set(mg.registry.list_ops())
        try:
            builder = mg.register_op(op_def(kw))
        except mg.OpError:
            after = set(mg.registry.list_ops())
            must(after == before, f"a failed register_op registered {sorted(after - before)}")
            raise
        # Whatever registered must be usable: build a node with it.
        return builder

    specs = [
        {"name": "myop"}, {"name": "My Op"}, {"name": "MyOp\n"}, {"name": ""}, {"name": 5},
        {"inputs": ["x: flaot32"], "attrs": []}, {"inputs": ["x:"]}, {"inputs": [":T"]},
        {"inputs": ["x: U"]}, {"inputs": ["lambda: T"]}, {"inputs": ["scope: T"]},
        {"inputs": ["self: T"]}, {"inputs": ["x: N * T"], "attrs": ["T: type", "N: float"]},
        {"inputs": ["x: N * T"], "attrs": ["T: type", "N: type"]},
        {"inputs": ["x: T", "x: T"]}, {"attrs": ["T: type", "a: int = 'x'"]},
        {"attrs": ["T: type", "a: float = 1e400"]}, {"attrs": ["T: type", "a: int >= x"]},
        {"attrs": ["T: {int32, flaot}"]}, {"attrs": ["T: type", "a: {'a', 1}"]},
        {"attrs": ["T: type", "a: {"]}, {"attrs": ["T: type", "a: list(int) >= -1"]},
        {"attrs": ["T: type", "a: shape = [2**70]"]}, {"attrs": ["T: type", "a: shape = [1e99]"]},
        {"attrs": ["T: type", "a: tensor = [1, [2]]"]}, {"attrs": ["T: type", "a: type = flaot32"]},
        {"attrs": ["T: type", "a: int = 99999999999999999999999"]},
        {"attrs": ["T: type", "a: float = 10**400"]}, {"attrs": "T: type"},
        {"shape_fn": 5}, {"doc": 5}, {"attrs": ["T: type", "T: type"]},
        {"attrs": ["T: type", "a\n: int"]}, {"attrs": ["T: type", "a: int = 1\n"]},
        {"attrs": ["T: type", "a: list(flaot)"]}, {"attrs": ["T: type", "a: int = __import__('os')"]},
        {"attrs": ["T: type", "a: string = b'\\xff'"]}, {"attrs": ["T: type", "a: bool = 1"]},
        {"attrs": ["T: type", "a: {int32} = int64"]}, {"outputs": ["y: T", "y: T"]},
        {"outputs": ["shape: T"]}, {"outputs": ["operation: T"]}, {"inputs": ["x: T\n"]},
        {"inputs": [5]}, {"inputs": "x: T"}, {"attrs": ["T: type", "a: int = " + "[" * 200]},
        {"attrs": ["T: type", "a: int >= 1 = 0"]}, {"attrs": ["T: type", "class: int"]},
        {"attrs": ["T: type", "a: tensor = 'x'"]}, {"inputs": ["x: T", "y: Tl"],
                                                    "attrs": ["T: type", "Tl: list(type)"]},
    ]  # fmt: skip

    def spec_expect(kw):
        ok = ({"outputs": ["shape: T"]}, {"outputs": ["operation: T"]},
              {"attrs": ["T: type", "a: float = 1e400"]}, {"attrs": ["T: type", "a: tensor = 'x'"]},
              {"inputs": ["x: T", "y: Tl"], "attrs": ["T: type", "Tl: list(type)"]},
              # Whitespace around a spec is not part of a name or value.
              {"attrs": ["T: type", "a\n: int"]}, {"attrs": ["T: type", "a: int = 1\n"]},
              {"inputs": ["x: T\n"]})  # fmt: skip
        return "any" if kw in ok else "error"

    out += cases_from(A, "register_op", specs, register, expect=spec_expect)

    def reregister(kind):
        mg = _mg()
        name = f"Hostile{uid()}"
        first = mg.register_op(op_def({"name": name}))
        if kind == "same":
            must(mg.register_op(op_def({"name": name})) is first, "an identical OpDef re-registered "
                 "did not return the first builder")  # fmt: skip
        elif kind == "different":
            mg.register_op(op_def({"name": name, "attrs": ["T: {int32}"]}))
        elif kind == "alias_clash":
            mg.op_builder(name, "Hostile" + name)
            mg.register_op(op_def({"name": "Hostile" + name}))

    out += cases_from(
        A,
        "re-register",
        ["same", "different", "alias_clash"],
        reregister,
        expect=lambda v: "ok" if v == "same" else "error",
    )

    def kernel(kw):
        mg = _mg()
        name = f"Hostile{uid()}"
        mg.register_op(op_def({"name": name, "attrs": ["T: type", "n: int = 0"]}))
        args = dict(op_type=name, device_type="CPU", fn=lambda ctx, x, **_: x)
        args.update(kw)
        before = list(mg.registry.kernels_for(name))
        try:
            mg.register_kernel(args.pop("op_type"), args.pop("device_type"), args.pop("fn"), **args)
        except mg.OpError:
            must(mg.registry.kernels_for(name) == before, "a failed register_kernel registered")
            raise

    kernels = [{"op_type": "NoSuchOp"}, {"device_type": "TPU"}, {"device_type": "gpu"},
               {"device_type": "cpu:0"}, {"device_type": ""}, {"device_type": None},
               {"device_type": 5}, {"fn": None}, {"fn": 5}, {"type_constraints": {"T": ["flaot"]}},
               {"type_constraints": {"nope": ["int32"]}}, {"type_constraints": {"n": ["int32"]}},
               {"type_constraints": {"T": "int32"}}, {"type_constraints": {"T": 5}},
               {"host_memory": "nope"}, {"host_memory": ["x", 5]}, {"label": "a\n"},
               {"label": 5}, {"priority": 1.5}, {"priority": True}, {"trusted": "yes"},
               {"attr_constraints": {"n": [1.5]}}, {"attr_constraints": {"nope": [1]}},
               {"attr_constraints": {"n": 5}}, {"device_type": "GPU\n"},
               {"device_type": "ＣＰＵ"}, {"type_constraints": 5}, {"host_memory": 5}]  # fmt: skip
    out += cases_from(
        A,
        "register_kernel",
        kernels,
        kernel,
        expect=lambda v: "ok" if v == {"device_type": "gpu"} else "error",
    )

    # User kernels and shape functions that misbehave: typed errors, usable session after.
    def misbehaving_kernel(what):
        mg = _mg()
        name = f"Hostile{uid()}"
        Op = mg.register_op(op_def({"name": name}))

        class BadStr(Exception):
            def __str__(self):
                raise RuntimeError("no str")

        def fn(ctx, x, **_):
            return {
                "none": lambda: None, "list": lambda: [x], "f64": lambda: x.astype(np.float64),
                "shape": lambda: x[:1], "int": lambda: 5, "str": lambda: "abc",
                "object": lambda: np.array([object()]), "tuple2": lambda: (x, x),
                "badstr": lambda: (_ for _ in ()).throw(BadStr()),
                "stop": lambda: (_ for _ in ()).throw(StopIteration()),
                "recursion": lambda: (_ for _ in ()).throw(RecursionError("deep")),
                "memory": lambda: (_ for _ in ()).throw(MemoryError()),
                "write": lambda: x.__iadd__(1), "view": lambda: x[::1],
                "scalar": lambda: np.float32(1), "strings": lambda: np.array([b"a"], object),
                "matrix": lambda: np.matrix(x), "masked": lambda: np.ma.masked_array(x),
                "lazy": lambda: (y for y in [x]), "ndarray_subclass": lambda: x.view(_Sub),
                "assertion": lambda: (_ for _ in ()).throw(AssertionError("a")),
                "typeerror": lambda: (_ for _ in ()).throw(TypeError("t")),
                "os": lambda: (_ for _ in ()).throw(OSError(5, "io")),
            }[what]()  # fmt: skip

        mg.register_kernel(name, "CPU", fn)
        s = scope()
        p = mg.Placeholder(s, mg.float32, shape=[2])
        y = Op(s, p)
        fed = np.array([1.0, 2.0], np.float32)
        with mg.Session(s) as session:
            try:
                got = session.run(y, {p: fed})
            finally:
                same(fed, np.array([1.0, 2.0], np.float32), "the caller's fed array")
            if what == "view":
                must(not np.shares_memory(got, fed), "a result is a view of the fed array")
            same(got, fed, "kernel result")

    whats = [
        "none",
        "list",
        "f64",
        "shape",
        "int",
        "str",
        "object",
        "tuple2",
        "badstr",
        "stop",
        "recursion",
        "memory",
        "write",
        "view",
        "scalar",
        "strings",
        "matrix",
        "masked",
        "lazy",
        "ndarray_subclass",
        "assertion",
        "typeerror",
        "os",
    ]
    out += cases_from(A, "user kernel", whats, misbehaving_kernel,
                      expect=lambda v: "any" if v in ("view", "ndarray_subclass", "masked",
                                                      "matrix") else "error")  # fmt: skip

    def misbehaving_shape_fn(what):
        mg = _mg()
        name = f"Hostile{uid()}"

        def shape_fn(ctx):
            return {
                "str": lambda: "abc", "none_2": lambda: [None, None], "neg": lambda: [-1],
                "rank65": lambda: [1] * 65, "pair_bad": lambda: ([1], "float32"),
                "gen": lambda: (d for d in [1]), "float": lambda: [1.5], "huge": lambda: [2**70],
                "raise_stop": lambda: (_ for _ in ()).throw(StopIteration()),
                "raise_type": lambda: (_ for _ in ()).throw(TypeError("t")),
                "raise_kbd": lambda: (_ for _ in ()).throw(KeyboardInterrupt()),
                "dict": lambda: {0: [1]}, "bool": lambda: [True], "np": lambda: np.array([2]),
                "shape_obj": lambda: mg.TensorShape([2]), "tuple": lambda: (2,),
                "tuple_none": lambda: (None,), "int": lambda: 3, "nested": lambda: [[1]],
            }[what]()  # fmt: skip

        Op = mg.register_op(op_def({"name": name, "shape_fn": shape_fn}))
        s = scope()
        c = mg.Const(s, [1.0, 2.0])
        n = len(s.graph)
        try:
            y = Op(s, c)
        except BaseException:
            _unchanged(s.graph, n)
            raise
        must(all(d is None or (isinstance(d, int) and 0 <= d < 2**63) for d in y.shape.dims or ()),
             f"shape {y.shape} accepted")  # fmt: skip

    sfs = [
        "str",
        "none_2",
        "neg",
        "rank65",
        "pair_bad",
        "gen",
        "float",
        "huge",
        "raise_stop",
        "raise_type",
        "dict",
        "bool",
        "np",
        "shape_obj",
        "tuple",
        "tuple_none",
        "int",
        "nested",
    ]
    out += cases_from(A, "shape fn", sfs, misbehaving_shape_fn,
                      expect=lambda v: "ok" if v in ("shape_obj", "tuple", "tuple_none",
                                                     "none_2", "nested", "neg")
                      else "error")  # fmt: skip

    # An interrupt in a shape function is the user's, and must propagate unchanged.
    def shape_fn_interrupt():
        mg = _mg()
        name = f"Hostile{uid()}"

        def shape_fn(ctx):
            raise KeyboardInterrupt

        Op = mg.register_op(op_def({"name": name, "shape_fn": shape_fn}))
        s = scope()
        c = mg.Const(s, [1.0])
        n = len(s.graph)
        try:
            Op(s, c)
        except KeyboardInterrupt:
            _unchanged(s.graph, n)
            return
        raise Wrong("no KeyboardInterrupt")

    out.append(Case("shape fn KeyboardInterrupt", A, shape_fn_interrupt, "ok"))

    # Attr values that cannot be written to a GraphDef must be refused when the node is built.
    def exported_attr(args):
        mg = _mg()
        kind, value = args
        name = f"Hostile{uid()}"
        Op = mg.register_op(op_def({"name": name, "attrs": ["T: type", f"a: {kind}"]}))
        s = scope()
        Op(s, mg.Const(s, [1.0]), a=value)
        data = s.graph.as_graph_def().SerializeToString()
        s2 = scope()
        mg.import_graph_def(s2, data)

    E, K = "error", "ok"
    av = [
        ("int", 2**63, E),
        ("int", -(2**63) - 1, E),
        ("int", 2**63 - 1, K),
        ("float", 10**400, E),
        ("float", float("nan"), K),
        ("float", 1e300, E),
        ("string", "\x00", K),
        ("string", "\ud800", E),
        ("list(int)", [2**64], E),
        ("list(float)", [10**400], E),
        ("shape", [2**63], E),
        ("list(shape)", [[2**70]], E),
        ("tensor", np.array([2**63], dtype=object), E),
        ("tensor", np.zeros((1,) * 64), K),
        ("list(string)", ["\ud800"], E),
        ("list(type)", ["flaot"], E),
        ("list(type)", [], K),
        ("string", b"\xff", E),
        ("tensor", np.array(["\ud800"], dtype=object), E),
        ("int", np.uint64(2**64 - 1), E),
    ]
    out += cases_from(A, "exported attr", [a[:2] for a in av], exported_attr)
    for c, a in zip(out[-len(av) :], av):
        c.expect = a[2]

    # Registry look-ups given what is not a name (an unhashable list was a bare TypeError).
    def lookup(which):
        mg = _mg()
        reg = mg.registry
        calls = {
            "get_op_def list": lambda: reg.get_op_def(["GatherV2"]),
            "get_op_def dict": lambda: reg.get_op_def({}),
            "get_op_def int": lambda: reg.get_op_def(3),
            "signature array": lambda: reg.signature(np.array(["GatherV2"])),
            "alias_of list": lambda: reg.alias_of(["Gather"]),
            "kernels_for list": lambda: reg.kernels_for(["GatherV2"]),
            "kernel_device_types list": lambda: reg.kernel_device_types(["GatherV2"]),
            "add_alias op_def str": lambda: reg.add_alias("Alias", "Identity"),
            "add_alias alias list": lambda: reg.add_alias(["A"], reg.get_op_def("Identity")),
            "find_kernel device None": lambda: reg.find_kernel("Identity", None, {}),
            "find_kernel op list": lambda: reg.find_kernel(["Identity"], "CPU", {}),
            "op_builder list": lambda: mg.op_builder(["Identity"]),
            "register_kernel op list": lambda: mg.register_kernel(["Identity"], "CPU", lambda x: x),
            "has_attr list": lambda: reg.get_op_def("GatherV2").has_attr(["batch_dims"]),
        }
        calls[which]()

    lookups = [
        "get_op_def list", "get_op_def dict", "get_op_def int", "signature array",
        "alias_of list", "kernels_for list", "kernel_device_types list", "add_alias op_def str",
        "add_alias alias list", "find_kernel device None", "find_kernel op list",
        "op_builder list", "register_kernel op list", "has_attr list",
    ]  # fmt: skip
    out += cases_from(A, "registry lookup", lookups, lookup, expect="error")

    # A hand-written builder's _build given inputs or attrs of the wrong kind.
    def hand_builder(which):
        mg = _mg()

        class Ident(mg.OpBuilder):
            op_def = mg.registry.get_op_def("Identity")

            def __init__(self, scope, x):
                inputs, attrs = {"inputs": (x, {}), "attrs": ([x], None), "attrs_list": ([x], [])}[
                    which
                ]
                self._build(scope, inputs, attrs)

        s = scope()
        n = len(s.graph)
        try:
            Ident(s, mg.Placeholder(s, mg.float32, [2]))
        except mg.OpError:
            _unchanged(s.graph, n + 1)
            raise

    out += cases_from(
        A, "hand-written _build", ["inputs", "attrs", "attrs_list"], hand_builder, expect="error"
    )
    return out


class _Sub(np.ndarray):
    pass
