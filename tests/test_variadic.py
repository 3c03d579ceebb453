"""Variadic op signatures: `N * T` and type-list inputs and outputs (minigraph/op_def.py,
graph.py, builder.py, scope.py, plan.py), with TF's semantics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import minigraph as mg
from minigraph import InternalError, InvalidArgumentError, OpDef, Scope, registry
from minigraph.testing import simulated_gpus

_counter = itertools.count()


def _name(stem: str) -> str:
    return f"VariadicTest{stem}{next(_counter)}"


# -- test ops --------------------------------------------------------------------------------------


def _concat_shape(ctx):
    first = [s[0] if s.rank else None for s in ctx.input_shapes]
    rest = ctx.input_shapes[0][1:] if ctx.input_shapes[0].rank else None
    total = None if None in first else sum(first)
    return mg.TensorShape([total]).concatenate(rest) if rest is not None else None


def _concat_kernel(ctx, values, *, T, N):
    assert isinstance(values, list) and len(values) == N  # the kernel contract under test
    return ctx.xp.concatenate(values)


CONCAT = OpDef(
    _name("Concat"),
    inputs=["values: N * T"],
    outputs=["output: T"],
    attrs=["N: int >= 1", "T: {int32, int64, float32}"],
    shape_fn=_concat_shape,
)
Concat = mg.register_op(CONCAT)
mg.register_kernel(CONCAT.name, "CPU", _concat_kernel)
mg.register_kernel(CONCAT.name, "GPU", _concat_kernel)


def _split_kernel(ctx, value, *, num_split):
    return list(ctx.xp.array_split(value, num_split))


SPLIT = OpDef(
    _name("Split"),
    inputs=["value: T"],
    outputs=["outputs: num_split * T"],
    attrs=["num_split: int >= 1", "T: type"],
    shape_fn=lambda ctx: [None] * ctx.attr("num_split"),
)
Split = mg.register_op(SPLIT)
mg.register_kernel(SPLIT.name, "CPU", _split_kernel)

# TF's IdentityN: one dtype per element, inputs and outputs sharing the type list.
IDENTITY_N = OpDef(
    _name("IdentityN"),
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: list(type) >= 1"],
    shape_fn=lambda ctx: list(ctx.input_shapes),
)
IdentityN = mg.register_op(IDENTITY_N)
mg.register_kernel(IDENTITY_N.name, "CPU", lambda ctx, values, **_: list(values))

# Two list inputs sharing N, a plain input in between, and two output args (one a list).
PAIRS = OpDef(
    _name("Pairs"),
    inputs=["keys: N * int32", "scale: T", "values: N * T"],
    outputs=["total: T", "scaled: N * T"],
    attrs=["N: int >= 1", "T: {float32, float64}"],
    shape_fn=lambda ctx: [[]] + list(ctx.input_shapes[ctx.attr("N") + 1 :]),
)
Pairs = mg.register_op(PAIRS)


def _pairs_kernel(ctx, keys, scale, values, **_):
    scaled = [v * scale for v in values]
    return np.array(sum(float(s.sum()) for s in scaled), scale.dtype), scaled


mg.register_kernel(PAIRS.name, "CPU", _pairs_kernel)


def _bad_list_kernel(ctx, value, *, num_split):
    return [value] * (num_split + 1)  # one too many


BAD_SPLIT = OpDef(
    _name("BadSplit"),
    inputs=["value: T"],
    outputs=["outputs: num_split * T"],
    attrs=["num_split: int >= 1", "T: type"],
)
BadSplit = mg.register_op(BAD_SPLIT)
mg.register_kernel(BAD_SPLIT.name, "CPU", _bad_list_kernel)

# A list input kept in host memory on the GPU (like TF's HostMemory("indices")).
HOST_LIST = OpDef(
    _name("HostList"),
    inputs=["indices: N * int32", "data: T"],
    outputs=["output: T"],
    attrs=["N: int >= 1", "T: type"],
    shape_fn=lambda ctx: ctx.input_shapes[-1],
)
HostList = mg.register_op(HOST_LIST)
SEEN: list = []


def _host_list_kernel(ctx, indices, data, **_):
    SEEN.append((ctx.device.device_type, [type(i) for i in indices], type(data)))
    return data


mg.register_kernel(HOST_LIST.name, "CPU", _host_list_kernel)
mg.register_kernel(HOST_LIST.name, "GPU", _host_list_kernel, host_memory=["indices"])


@pytest.fixture
def s():
    return Scope.new_root_scope()


@pytest.fixture
def cpu_only():
    # Tests that assume CPU placement pin the device list (the suite also runs with GPUs).
    with simulated_gpus(0):
        yield


# -- OpDef -----------------------------------------------------------------------------------------


def test_arg_specs_in_tf_form():
    arg = CONCAT.inputs[0]
    assert (arg.number_attr, arg.type_attr, arg.is_list, arg.type_text) == ("N", "T", True, "N * T")
    assert PAIRS.inputs[0].dtype is mg.int32 and PAIRS.inputs[0].type_text == "N * int32"
    arg = IDENTITY_N.inputs[0]
    assert (arg.type_list_attr, arg.is_list, arg.type_text) == ("T", True, "T")
    assert not PAIRS.inputs[1].is_list
    assert CONCAT.inferred_attrs == {"N", "T"}
    assert SPLIT.inferred_attrs == {"T"}  # num_split is an output count: given, not inferred
    assert PAIRS.signature() == (
        f"{PAIRS.name}(keys: N * int32, scale: T, values: N * T) -> total: T, scaled: N * T"
    )
    assert f"{SPLIT.name}(value: T) -> outputs: num_split * T; num_split: int >= 1" == (
        SPLIT.signature()
    )
    assert "  values: N * T" in PAIRS.describe().splitlines()
    assert "  N: int >= 1 (inferred from inputs)" in PAIRS.describe().splitlines()


def test_arg_lengths_and_split_inputs():
    attrs = {"N": 2, "T": mg.float32}
    assert PAIRS.input_arg_lengths(attrs) == (2, 1, 2)
    assert PAIRS.output_arg_lengths(attrs) == (1, 2)
    assert PAIRS.split_inputs(["k0", "k1", "s", "v0", "v1"], attrs) == [
        ["k0", "k1"],
        "s",
        ["v0", "v1"],
    ]
    assert IDENTITY_N.input_arg_lengths({"T": (mg.int32, mg.string)}) == (2,)
    with pytest.raises(
        InvalidArgumentError, match=r"expected 5 inputs .*keys: 2, scale, values: 2"
    ):
        PAIRS.split_inputs(["k0"], attrs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(inputs=["x: N * T"], attrs=["T: type"]), r"'N' must be a declared int attr"),
        (dict(inputs=["x: N * T"], attrs=["N: float", "T: type"]), r"'N' must be a declared int"),
        (dict(inputs=["x: N * T"], attrs=["N: int"]), r"'T' is neither a dtype nor a declared"),
        (dict(inputs=["x: N * L"], attrs=["N: int", "L: list(type)"]), r"attr of type list"),
        (dict(inputs=["x: N * flaot32"], attrs=["N: int"]), r"did you mean float32"),
        (
            dict(inputs=[mg.ArgDef("x", type_list_attr="L")], attrs=["L: type"]),
            r"refers to attr 'L', which is of type type; declare it as 'L: list\(type\)'",
        ),
        (
            dict(inputs=[mg.ArgDef("x", type_attr="T", number_attr="N")], attrs=["T: type"]),
            r"refers to attr 'N', which is not declared; declare it as 'N: int'",
        ),
    ],
)
def test_op_def_errors_for_list_args(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        OpDef("ListErrors", **kwargs)


def test_arg_def_list_forms_are_exclusive():
    with pytest.raises(InvalidArgumentError, match="a type-list attr excludes"):
        mg.ArgDef("x", type_attr="T", type_list_attr="L")
    with pytest.raises(InvalidArgumentError, match="a number attr needs a type attr or a dtype"):
        mg.ArgDef("x", number_attr="N")


# -- construction ----------------------------------------------------------------------------------


def test_builder_takes_a_list_of_outputs_and_literals(s):
    x = mg.Const(s.with_op_name("x"), np.array([1, 2], np.int64))
    c = Concat(s, [x, [3, 4, 5], np.array([6], np.int64)])
    op = c.operation
    assert op.attrs["N"] == 3 and op.attrs["T"] is mg.int64  # literals took x's dtype
    assert [i.name for i in op.inputs] == ["x:0", "Const:0", "Const_1:0"]
    assert c.shape == mg.TensorShape([6]) and c.dtype is mg.int64
    assert op.node_def() == f"{CONCAT.name} = {CONCAT.name}[N=3, T=int64](x:0, Const:0, Const_1:0)"
    assert mg.Session(s, mg.SessionConfig(devices=[mg.devices.CpuDevice()])).run(c).tolist() == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]


def test_shape_function_sees_every_element(s):
    seen = []

    def shape_fn(ctx):
        seen.append((ctx.input_shapes, ctx.input_dtypes, ctx.num_inputs))
        return ctx.input_shapes[0]

    name = _name("Seen")
    Seen = mg.register_op(
        OpDef(name, inputs=["a: N * T"], outputs=["b: T"], attrs=["N: int", "T: type"], **{
            "shape_fn": shape_fn
        })
    )  # fmt: skip
    Seen(s, [[1.0], [2.0, 3.0]])
    shapes, dtypes_, n = seen[0]
    assert [str(x) for x in shapes] == ["[1]", "[2]"] and n == 2
    assert dtypes_ == (mg.float32, mg.float32)


def test_type_list_inferred_per_element(s, cpu_only):
    ident = IdentityN(s, [np.int64(3), [1.5, 2.5], "text"])
    assert ident.operation.attrs["T"] == (mg.int64, mg.float32, mg.string)
    outs = ident.output  # the output arg is called `output`: a tuple of three Outputs
    assert isinstance(outs, tuple) and [o.dtype for o in outs] == [mg.int64, mg.float32, mg.string]
    assert ident.outputs == outs and ident[2] is outs[2]
    values = mg.Session(s).run(list(ident.outputs))
    assert values[0] == 3 and values[1].tolist() == [1.5, 2.5] and values[2] == b"text"


def test_list_outputs_by_arg_name_and_flat_index(s, cpu_only):
    split = Split(s.with_op_name("sp"), np.arange(7), num_split=3)
    assert len(split.outputs) == 3 and split[1] is split.outputs[1]
    assert [o.name for o in split.outputs] == ["sp:0", "sp:1", "sp:2"]
    got = mg.Session(s).run(["sp:2", split[0]])
    assert got[0].tolist() == [5, 6] and got[1].tolist() == [0, 1, 2]


def test_two_output_args_one_a_list(s, cpu_only):
    p = Pairs(s, [[1], [2]], np.float64(2.0), [[1.0, 2.0], [3.0]])
    assert isinstance(p.total, mg.Output) and len(p.scaled) == 2
    assert [o.index for o in p.scaled] == [1, 2]
    total, (a, b) = mg.Session(s).run([p.total, list(p.scaled)])
    assert total == 12.0 and a.tolist() == [2.0, 4.0] and b.tolist() == [6.0]


def test_graph_add_operation_takes_lists_per_arg(s):
    g = s.graph
    x = mg.Const(s, [1, 2])
    op = g.add_operation(registry.get_op_def(CONCAT.name), [[x.output, x.output]], {})
    assert op.attrs["N"] == 2 and op.inputs == (x.output, x.output)
    assert op.outputs[0].shape == mg.TensorShape([4])


@pytest.mark.parametrize(
    "build, error, message",
    [
        (lambda s: Concat(s, []), InvalidArgumentError,
         r"input 'values' needs at least 1 tensor \(attr 'N' >= 1\); got 0"),
        (lambda s: Concat(s, [mg.Const(s, [1]), mg.Const(s, [1.5])]), InvalidArgumentError,
         r"input 'values' \(element 0\) and input 'values' \(element 1\) share type attr 'T' "
         r"but have dtypes int32 and float32"),
        # Literals take the dtype of an earlier element, as TF converts them.
        (lambda s: Concat(s, [[1], [1.5]]), InvalidArgumentError,
         r"cannot convert input 'values' \(element 1\) to a tensor: cannot convert \[1.5\] "
         r"to int32"),
        (lambda s: Concat(s, [[1.0], np.array([1e300])]), InvalidArgumentError,
         r"input 'values' \(element 1\) to a tensor: cannot convert a float64 array to float32 "
         r"without changing its value: the value 1e\+300 at \[0\] overflows float32"),
        (lambda s: Concat(s, [["a"]]), InvalidArgumentError,
         r"input 'values' \(element 0\) has dtype string, but attr 'T' allows only"),
        (lambda s: Concat(s, mg.Const(s, [1])), InvalidArgumentError,
         r"input 'values' \(N \* T\) takes a list of tensors; got Const"),
        (lambda s: Concat(s, 5), InvalidArgumentError, r"takes a list of tensors; got int"),
        (lambda s: Pairs(s, [[1]], 1.0, [[1.0], [2.0]]), InvalidArgumentError,
         r"input 'keys' and input 'values' share number attr 'N' but have 1 and 2 elements"),
        (lambda s: Pairs(s, [[1.5]], 1.0, [[1.0]]), InvalidArgumentError,
         r"cannot convert input 'keys' \(element 0\) to a tensor"),
        (lambda s: Pairs(s, [mg.Const(s, [1.5])], 1.0, [[1.0]]), InvalidArgumentError,
         r"input 'keys' \(element 0\) must be int32, got float32"),
        (lambda s: Split(s, [1, 2], num_split=0), InvalidArgumentError,
         r"attr 'num_split' must be >= 1; got 0"),
        (lambda s: IdentityN(s, []), InvalidArgumentError,
         r"input 'input': attr 'T' must have at least 1 elements; got 0"),
        (lambda s: Concat(s, [[1]], N=2), InvalidArgumentError,
         r"attr 'N' was given as 2 but input 'values' gives 1"),
        (lambda s: Concat(s, [mg.Const(s, [1]), [2]], T=mg.int64), InvalidArgumentError,
         r"attr 'T' was given as int64 but input 'values' \(element 0\) has dtype int32"),
        (lambda s: Concat(s, [mg.Const(s, [1]).operation]), InvalidArgumentError,
         r"input 'values' \(element 0\) got the Operation 'Const'"),
    ],
)  # fmt: skip
def test_construction_errors_name_the_argument_and_leave_the_graph_unchanged(
    s, build, error, message
):
    mg.Const(s.with_op_name("before"), [0])
    before = [op.name for op in s.graph.operations]
    with pytest.raises(error, match=message):
        build(s)
    # Consts built by the failing call (literals, or the test's own inputs) may remain only
    # when the test made them itself, before the failing node: none of the literals do.
    after = [op.name for op in s.graph.operations if op.type != "Const" or op.name in before]
    assert after == before


def test_literal_in_a_list_takes_the_dtype_of_an_explicit_attr(s):
    c = Concat(s, [[1, 2], [3]], T=mg.int64)
    assert [i.dtype for i in c.operation.inputs] == [mg.int64, mg.int64]


# -- execution -------------------------------------------------------------------------------------


def test_kernel_returning_the_wrong_list_length_is_an_error_with_node_context(s, cpu_only):
    bad = BadSplit(s.with_op_name("bad"), [1, 2, 3], num_split=2)
    with pytest.raises(InternalError, match=r"expected a list of 2 arrays[\s\S]*node bad"):
        mg.Session(s).run(list(bad.outputs))
    with pytest.raises(InternalError, match=r"expected a list of 2 arrays"):
        mg.Session(s).run(list(bad.outputs), options=mg.RunOptions(trace=True))


def test_list_ops_in_every_execution_mode(s, cpu_only):
    x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[None])
    parts = Split(s, x, num_split=2)
    joined = Concat(s, [parts[1], parts[0], parts[1]])
    feed = {x: np.arange(5, dtype=np.float32)}
    expected = [3, 4, 0, 1, 2, 3, 4]
    for config in (
        mg.SessionConfig(),
        mg.SessionConfig(inter_op_threads=3),
        mg.SessionConfig(check_kernel_outputs=True),
    ):
        with mg.Session(s, config) as session:
            assert session.run(joined, feed).tolist() == expected
            traced = session.run(joined, feed, options=mg.RunOptions(trace=True))
            assert traced.tolist() == expected


def test_list_ops_on_a_simulated_gpu_with_a_host_memory_list(s):
    SEEN.clear()
    data = mg.Const(s, np.ones(3, np.float32))
    node = HostList(s.with_device("GPU:0"), [[1], [2]], data)
    with simulated_gpus(1) as (_, gpu):
        metadata = mg.RunMetadata()
        out = mg.Session(s).run(node, run_metadata=metadata)
    assert out.tolist() == [1.0, 1.0, 1.0]
    assert metadata.placement[node.operation.name].endswith("GPU:0")
    device_type, index_types, data_type = SEEN[-1]
    assert device_type == "GPU"
    # The host-memory list stayed on the host; the data was copied to the device.
    assert all(t is np.ndarray for t in index_types)
    assert gpu.copies_in >= 1


def test_concat_on_simulated_gpu_matches_cpu(s):
    c = Concat(s.with_device("GPU:0"), [[1.0, 2.0], [3.0]])
    with simulated_gpus(1):
        assert mg.Session(s).run(c).tolist() == [1.0, 2.0, 3.0]
