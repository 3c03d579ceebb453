"""Review findings in construction: dims, attr values and literals that no GraphDef (TF's
int64 dims and attrs, UTF-8 strings) can hold, list outputs of absurd length, Range's
non-finite arguments, literals numpy would silently change, byte orders, registration
arguments of the wrong kind. Each was found by tests/hostile/battery.py."""

import numpy as np
import pytest

import minigraph as mg
from minigraph import InvalidArgumentError, OpDef
from minigraph.op_def import MAX_LIST_OUTPUTS
from minigraph.tensor_shape import MAX_DIM, TensorShape
from minigraph.tf_compat import register_tf_attrs, tf_incompatibilities
from ops import Cast, DynamicPartition, Range, Reshape

SAME = lambda ctx: ctx.input_shapes[0]  # noqa: E731
_count = iter(range(10**6))


def unique(prefix):
    return f"{prefix}{next(_count)}"


@pytest.fixture
def scope():
    return mg.Scope.new_root_scope()


# -- dims: TF's are int64 -------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [MAX_DIM + 1, 2**64, 2**70, np.uint64(2**64 - 1)])
def test_a_dim_beyond_int64_is_refused(scope, dim):
    with pytest.raises(InvalidArgumentError, match="at most 9223372036854775807"):
        TensorShape([dim])
    with pytest.raises(InvalidArgumentError, match="at most"):
        mg.Placeholder(scope, mg.float32, shape=[2, dim])
    assert len(scope.graph) == 0


def test_the_largest_int64_dim_is_a_dim_and_exports(scope):
    p = mg.Placeholder(scope.with_op_name("p"), mg.float32, shape=[MAX_DIM])
    assert p.shape.dims == (MAX_DIM,)
    data = scope.graph.as_graph_def().SerializeToString()
    loaded = mg.Scope.new_root_scope()
    mg.import_graph_def(loaded, data, name="")
    assert loaded.graph.get_output("p:0").shape.dims == (MAX_DIM,)


def test_a_shape_function_returning_a_dim_beyond_int64_is_refused(scope):
    name = unique("ReviewHugeDim")
    Op = mg.register_op(OpDef(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
                              shape_fn=lambda ctx: [2**70]))  # fmt: skip
    with pytest.raises(mg.InternalError, match="not a shape"):
        Op(scope, [1.0])


def test_range_sizes_that_no_dim_holds_are_construction_errors(scope):
    with pytest.raises(InvalidArgumentError, match="at most"):
        Range(scope, 0.0, 1e30, 1e-30)
    with pytest.raises(InvalidArgumentError, match="at most"):
        Range(scope, np.int64(-(2**63)), np.int64(2**63 - 1), np.int64(1))


# -- attr values a GraphDef must hold ------------------------------------------------------------


def op_with_attr(kind):
    name = unique("ReviewAttr")
    return mg.register_op(
        OpDef(
            name, inputs=["x: T"], outputs=["y: T"], attrs=["T: type", f"a: {kind}"], shape_fn=SAME
        )  # fmt: skip
    )


@pytest.mark.parametrize(
    "kind, value, match",
    [
        ("int", 2**63, "int64"),
        ("int", -(2**63) - 1, "int64"),
        ("int", np.uint64(2**64 - 1), "int64"),
        ("list(int)", [1, 2**64], "int64"),
        ("float", 10**400, "too large"),
        ("float", 1e39, "32-bit"),
        ("float", -1e308, "32-bit"),
        ("list(float)", [1.0, 10**400], "too large"),
        ("string", "\ud800", "UTF-8"),
        ("list(string)", ["ok", "\udfff"], "UTF-8"),
        ("shape", [2**63], "at most"),
    ],
)
def test_attr_values_no_graph_def_holds_are_refused_when_the_node_is_built(
    scope, kind, value, match
):
    Op = op_with_attr(kind)
    x = mg.Const(scope, [1.0])
    with pytest.raises(InvalidArgumentError, match=match):
        Op(scope, x, a=value)
    assert len(scope.graph) == 1
    scope.graph.as_graph_def().SerializeToString()  # what was built exports


@pytest.mark.parametrize(
    "kind, value", [("int", 2**63 - 1), ("int", -(2**63)), ("float", 3.0e38), ("float", -1e-45)]
)
def test_attr_values_at_the_limits_export_and_import(scope, kind, value):
    Op = op_with_attr(kind)
    node = Op(scope.with_op_name("n"), mg.Const(scope, [1.0]), a=value)
    loaded = mg.Scope.new_root_scope()
    mg.import_graph_def(loaded, scope.graph.as_graph_def().SerializeToString(), name="")
    got = loaded.graph.get_operation("n").get_attr("a")
    want = node.operation.get_attr("a")
    # Float attrs are 32-bit in a GraphDef (as TF's): equal once rounded, never infinite.
    assert got == (float(np.float32(want)) if kind == "float" else want)


def test_attr_defaults_beyond_int64_are_refused_when_the_op_is_defined():
    with pytest.raises(InvalidArgumentError, match="int64"):
        OpDef(unique("ReviewDefault"), attrs=["a: int = 99999999999999999999999"])


def test_a_list_attr_minimum_is_a_length_and_cannot_be_negative():
    with pytest.raises(InvalidArgumentError, match="minimum length must be >= 0"):
        OpDef(unique("ReviewMin"), attrs=["a: list(int) >= -1"])
    OpDef(unique("ReviewMin"), attrs=["a: int >= -1"])  # an int's minimum may be negative


# -- list outputs of absurd length ---------------------------------------------------------------


@pytest.mark.parametrize("n", [MAX_LIST_OUTPUTS + 1, 2**31, 2**62])
def test_list_outputs_beyond_the_bound_are_refused_at_once(scope, n):
    # Refused from the attr alone, before any output is made (no timing needed: without the
    # bound, 2**62 outputs would never finish).
    with pytest.raises(InvalidArgumentError, match="MAX_LIST_OUTPUTS"):
        DynamicPartition(scope, [1.0, 2.0], [0, 0], num_partitions=n)
    assert len(scope.graph) == 0


def test_a_graph_file_asking_for_a_billion_partitions_is_refused_at_once():
    text = (
        'node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } } '
        'node { name: "i" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } } '
        'node { name: "d" op: "DynamicPartition" input: "p" input: "i" attr { key: '
        '"num_partitions" value { i: 1000000000 } } attr { key: "T" value { type: DT_FLOAT } } }'
    )
    from minigraph.graph_def import parse_graph_def

    scope = mg.Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match="1000000000 tensors"):
        mg.import_graph_def(scope, parse_graph_def(text))
    assert len(scope.graph) == 0


# -- Range: NaN and infinities are argument errors, not internal ones ----------------------------


@pytest.mark.parametrize(
    "args",
    [(0.0, float("nan"), 1.0), (0.0, float("inf"), 1.0), (float("-inf"), 0.0, 1.0),
     (0.0, 1.0, float("nan")), (-1e308, 1e308, 1e-10)],
)  # fmt: skip
def test_range_of_non_finite_values_is_an_invalid_argument(scope, args):
    args = [np.float64(a) for a in args]
    with pytest.raises(InvalidArgumentError, match="finite"):
        Range(scope, *args)
    ps = [mg.Placeholder(scope, mg.float64, shape=[]) for _ in range(3)]
    r = Range(scope, *ps)
    with pytest.raises(InvalidArgumentError, match="finite"):
        mg.Session(scope).run(r, dict(zip(ps, args)))


def test_range_of_finite_floats_still_counts_as_tf(scope):
    assert mg.Session(scope).run(Range(scope, 0.0, 1.0, 0.25)).tolist() == [0, 0.25, 0.5, 0.75]


# -- literals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [[-1, 2**64 - 1], [2**63], 2**63, 2**64 - 1, [[2**63, 1]], (1, 2**63)]
)
def test_python_ints_outside_int64_are_refused_not_made_unsigned_or_float(scope, value):
    with pytest.raises(InvalidArgumentError, match="outside int64"):
        mg.Const(scope, value)
    assert len(scope.graph) == 0


def test_python_int_literals_in_range_keep_tf_types(scope):
    assert mg.Const(scope, [2**62]).dtype == mg.int64
    assert mg.Const(scope, [1, 2]).dtype == mg.int32
    assert mg.Const(scope, [1, 2**63, 1.5]).dtype == mg.float32  # a float among them: floats
    assert mg.Const(scope, bytearray(b"ab")).dtype == mg.uint8  # a buffer, not Python ints


def test_a_huge_int_fed_to_an_int_placeholder_is_refused(scope):
    x = mg.Placeholder(scope, mg.int64, shape=[1])
    with pytest.raises(InvalidArgumentError, match="outside int64"):
        mg.Session(scope).run(mg.Identity(scope, x), {x: [2**64 - 1]})


@pytest.mark.parametrize("dtype", [">f4", ">i8", ">c16", "<f4"])
def test_arrays_of_either_byte_order_are_their_dtype(scope, dtype):
    value = np.arange(6).reshape(2, 3).astype(dtype)
    want = np.dtype(dtype).newbyteorder("=")
    assert mg.as_dtype(np.dtype(dtype)).np_dtype == want
    c = mg.Const(scope, value)
    x = mg.Placeholder(scope, mg.as_dtype(want), shape=[2, 3])
    y = mg.Identity(scope, x)
    got_c, got_y = mg.Session(scope).run([c, y], {x: value})
    for got in (got_c, got_y):
        assert got.dtype == want and got.dtype.isnative
        np.testing.assert_array_equal(got, value)


def test_an_object_whose_conversion_raises_is_refused_with_a_typed_error(scope):
    class Weird:
        def __array__(self, dtype=None, copy=None):
            raise KeyError("weird")

    with pytest.raises(InvalidArgumentError, match="KeyError"):
        mg.Const(scope, Weird())
    with pytest.raises(InvalidArgumentError, match="KeyError"):
        Cast(scope, Weird(), DstT=mg.float32)
    assert len(scope.graph) == 0


# -- registration and TF attrs: arguments of the wrong kind --------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"type_constraints": {"T": 5}},
        {"type_constraints": {"T": "int32"}},
        {"type_constraints": 5},
        {"attr_constraints": {"n": 5}},
        {"attr_constraints": [("n", [1])]},
        {"host_memory": 5},
        {"host_memory": ["nope", 5]},
    ],
)
def test_register_kernel_arguments_of_the_wrong_kind_are_typed_and_register_nothing(kwargs):
    name = unique("ReviewKernel")
    mg.register_op(OpDef(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: type", "n: int = 0"],
                         shape_fn=SAME))  # fmt: skip
    with pytest.raises(InvalidArgumentError):
        mg.register_kernel(name, "CPU", lambda ctx, x, **_: x, **kwargs)
    assert mg.registry.kernels_for(name) == []
    mg.register_kernel(name, "CPU", lambda ctx, x, **_: x, type_constraints={"T": ["float32"]},
                       attr_constraints={"n": [0]}, host_memory=["x"])  # fmt: skip


@pytest.mark.parametrize("attrs", [5, None, "batch_dims", [1, 2]])
def test_register_tf_attrs_takes_a_list_of_names(attrs):
    with pytest.raises(InvalidArgumentError, match="register_tf_attrs"):
        register_tf_attrs(unique("ReviewTf"), attrs)


@pytest.mark.parametrize("value", [5, None, "graph"])
def test_tf_incompatibilities_takes_a_graph_or_scope(value):
    with pytest.raises(InvalidArgumentError, match="Graph or Scope"):
        tf_incompatibilities(value)
    assert tf_incompatibilities(mg.Scope.new_root_scope()) == []


@pytest.mark.parametrize(
    "sizes, match",
    [
        ([2**62, 2**62], "overflow when multiplying 4611686018427387904 and 4611686018427387904"),
        ([2**32, 2**32], "overflow when multiplying 4294967296 and 4294967296"),
        ([2**21, 2**21, 2**21, -1], "overflow when multiplying 4398046511104 and 2097152"),
    ],
)
def test_reshape_to_more_elements_than_int64_counts_is_a_construction_error(scope, sizes, match):
    # TF's shape function (InferenceContext::Multiply) refuses it the same way; the graph keeps
    # no node of the failed construction.
    p = mg.Placeholder(scope, mg.float32)
    n = len(scope.graph)
    with pytest.raises(InvalidArgumentError, match=match):
        Reshape(scope, p, np.array(sizes, np.int64))
    assert len(scope.graph) == n
    # The largest count that fits is still a shape.
    r = Reshape(scope, p, np.array([2**31, 2**31, 1], np.int64))
    assert r.output.shape.as_list() == [2**31, 2**31, 1]


def test_embedding_div_arithmetic_widens_when_int32_ids_cannot_count_the_rows(scope):
    # 2**32 + 1 rows over two shards (rows of zero elements: nothing is allocated). The div
    # strategy's boundary row (2**31 + 1) fits no int32, so the shard arithmetic must run in
    # int64 although the ids are int32.
    from minigraph.testing import pinned_devices
    from ops import embedding_lookup

    rows = [2**31 + 1, 2**31]
    shards = [mg.Const(scope, np.zeros((r, 0), np.float32)) for r in rows]
    ids = mg.Placeholder(scope, mg.int32, shape=[None])
    looked = embedding_lookup(scope, shards, ids, partition_strategy="div")
    assert any(op.type == "Cast" and op.attrs["DstT"] is mg.int64 for op in scope.graph.operations)
    with pinned_devices([mg.devices.CpuDevice(0)]):
        got = mg.Session(scope).run(looked, {ids: np.array([0, 2**31 - 1], np.int32)})
    assert got.shape == (2, 0) and got.dtype == np.float32


@pytest.mark.parametrize(
    "shape, ok",
    [
        ([2**62, 2**62], False),
        ([2**62, None, 4], False),  # unknown dims count for nothing
        ([2**31, 2**31, 2], False),
        ([0, 2**62, 2**62], True),  # a zero dim: no elements at all
        ([None, 2**63 - 1], True),
        ([2**31, 2**31], True),
    ],
)
def test_shape_attrs_with_more_elements_than_int64_counts_are_refused(shape, ok):
    scope = mg.Scope.new_root_scope()
    if ok:
        mg.Placeholder(scope, mg.float32, shape=shape)
        return
    with pytest.raises(mg.InvalidArgumentError, match=r"is too large \(more than 2\*\*63 - 1"):
        mg.Placeholder(scope, mg.float32, shape=shape)
    assert scope.graph.get_operations() == []
