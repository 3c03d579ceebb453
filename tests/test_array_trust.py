"""Which array kernels are registered `trusted=True`, and that they keep the promise
(minigraph.register_kernel): outputs of exactly the inferred dtype and shape, arrays of the
node's device (never numpy scalars), new memory (never a view of an input; StopGradient
returns its input itself), every element written, inputs never written. Checked on raw kernel
results (CPU with pooled memory full of junk, simulated GPU whose `empty` is a junk pattern),
for every dtype each kernel takes, and through sessions with and without output checks. The
untrusted ones are shown to need it: they return views of their input.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from _gather_helpers import sample

import minigraph as mg
import minigraph.testing
from minigraph import KernelContext, Placeholder, Scope, Session, SessionConfig
from minigraph.devices import CpuDevice
from minigraph.memory import BufferPool
from minigraph.testing import SimulatedGpuDevice
from ops import array as A

TRUSTED = {"Fill", "ZerosLike", "OnesLike", "Tile", "BroadcastTo", "OneHot", "SelectV2", "Pack",
           "Rank", "StopGradient", "Select"}  # fmt: skip
UNTRUSTED = {"ExpandDims", "Squeeze", "Transpose", "StridedSlice", "Slice", "Unpack"}


def test_trusted_flags():
    for op_type in TRUSTED | UNTRUSTED:
        builtin = [k for k in mg.registry.kernels_for(op_type) if not k.label]
        assert {k.device_type for k in builtin} == {"CPU", "GPU"}, op_type
        assert all(k.trusted == (op_type in TRUSTED) for k in builtin), op_type


# (op, build(scope, x) from a [2, 3] input x of the dtype, which dtypes it takes). The builds
# use small constants beside x: 0-d, broadcast, empty and multi-dim outputs.
def _cases(dtype):
    one = sample(dtype, (), 3)
    two = sample(dtype, (2,), 4)
    cases = {
        "Fill": lambda s, x: A.Fill(s, [3, 1, 2], one),
        "Fill 0-d": lambda s, x: A.Fill(s, np.zeros(0, np.int32), one),
        "ZerosLike": lambda s, x: A.ZerosLike(s, x),
        "Tile": lambda s, x: A.Tile(s, x, [2, 3]),
        "Tile empty": lambda s, x: A.Tile(s, x, [0, 1]),
        "BroadcastTo": lambda s, x: A.BroadcastTo(s, x, [4, 2, 3]),
        "BroadcastTo 0-d": lambda s, x: A.BroadcastTo(s, one, np.zeros(0, np.int64)),
        "OneHot": lambda s, x: A.OneHot(s, [[0, 3], [1, -1]], 3, two[0], two[1], axis=1),
        "OneHot 0-d indices": lambda s, x: A.OneHot(s, np.uint8(1), 2, two[0], two[1]),
        "SelectV2": lambda s, x: A.SelectV2(s, [True, False, True], x, one),
        "SelectV2 0-d": lambda s, x: A.SelectV2(s, False, one, one),
        "Select rows": lambda s, x: A.Select(s, [True, False], x, x),
        "Select 0-d": lambda s, x: A.Select(s, True, one, one),
        "Select elementwise": lambda s, x: A.Select(s, np.ones([2, 3], bool), x, x),
        "Pack": lambda s, x: A.Pack(s, [x, x, x], axis=1),
        "Pack 0-d": lambda s, x: A.Pack(s, [one], axis=0),
        "Rank": lambda s, x: A.Rank(s, x),
        "StopGradient": lambda s, x: A.StopGradient(s, x),
    }
    if not dtype.is_string:
        cases["OnesLike"] = lambda s, x: A.OnesLike(s, x)
    return cases


def _all_cases():
    params = []
    for dtype in mg.dtypes.ALL_DTYPES:
        for name in _cases(dtype):
            params.append(pytest.param(dtype, name, id=f"{name}-{dtype.name}"))
    return params


def _pooled_cpu_ctx() -> KernelContext:
    """A CPU context whose `ctx.empty` hands out pooled memory full of junk, at any size."""
    pool = BufferPool(min_bytes=1)
    for k in range(40):
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = 0xA5
    return KernelContext(CpuDevice(0), "node", "Array", buffers=pool)


def _raw_call(kernel, op, ctx, host_inputs, gpu):
    """Calls `kernel` as a plan would for node `op`: inputs on the device (host-memory ones as
    numpy arrays), the attrs its signature declares."""
    params = inspect.signature(kernel.fn).parameters
    attrs = dict(op.attrs) if any(p.kind is p.VAR_KEYWORD for p in params.values()) else {
        k: v for k, v in op.attrs.items() if k in params
    }  # fmt: skip
    host = kernel.flat_host_inputs(op.attrs)
    flat = [
        v if (not gpu or i in host) else ctx.device.from_host(v) for i, v in enumerate(host_inputs)
    ]
    grouped = op.op_def.split_inputs(flat, op.attrs)
    return kernel.fn(ctx, *grouped, **attrs), flat


@pytest.mark.parametrize("device", ["CPU", "GPU"])
@pytest.mark.parametrize("dtype, case", _all_cases())
def test_trusted_kernels_keep_the_promise_on_raw_results(dtype, case, device):
    if device == "GPU" and (dtype.is_string or dtype is mg.bfloat16):
        pytest.skip("cupy holds neither strings nor bfloat16: those nodes stay on the CPU")
    scope = Scope.new_root_scope()
    x_np = sample(dtype, (2, 3), 1)
    x = mg.Const(scope, x_np)
    out = _cases(dtype)[case](scope, x)
    op = out.operation
    # The inputs' values: every input of these nodes is a Const.
    values = [inp.op.get_attr("value") for inp in op.inputs]
    kernel = next(
        k for k in mg.registry.kernels_for(op.type)
        if k.device_type == device and not k.label and k.mismatch(op.attrs, "") is None
    )  # fmt: skip
    gpu = device == "GPU"
    ctx = KernelContext(SimulatedGpuDevice(0), "node", op.type) if gpu else _pooled_cpu_ctx()
    got, flat = _raw_call(kernel, op, ctx, [np.array(v) for v in values], gpu)
    array_type = minigraph.testing.SimulatedArray if gpu and op.type != "Rank" else np.ndarray
    assert type(got) is array_type, type(got)
    assert got.dtype == out.dtype.np_dtype and out.shape == mg.TensorShape(got.shape)

    def host(v):
        return ctx.device.to_host(v) if isinstance(v, minigraph.testing.SimulatedArray) else v

    want = Session(scope, SessionConfig(devices=[CpuDevice(0)])).run(out)
    np.testing.assert_array_equal(host(got), want)  # every element written
    if op.type == "StopGradient":
        assert got is flat[0]  # its input itself, which trusted kernels may pass through
        return
    if op.type == "Select" and op.inputs[0].shape.rank == 0:
        assert got is flat[1] or got is flat[2]  # the chosen input itself, as TF forwards it
        return
    for given, original in zip(flat, values):
        np.testing.assert_array_equal(host(given), original)
        if not gpu:
            assert not np.shares_memory(got, given)


@pytest.mark.parametrize("check", [None, True])
def test_trusted_kernels_through_sessions_never_alias_feeds(check, cpu_only):
    scope = Scope.new_root_scope()
    x = Placeholder(scope.with_op_name("x"), mg.float32).output
    c = Placeholder(scope.with_op_name("c"), mg.bool_).output
    fetches = [A.Fill(scope, A.Shape(scope, x), np.float32(1)), A.ZerosLike(scope, x),
               A.OnesLike(scope, x), A.Tile(scope, x, [1, 1]), A.BroadcastTo(scope, x, [2, 3]),
               A.SelectV2(scope, c, x, x), A.Pack(scope, [x]),
               A.OneHot(scope, [0], 1, x[0, 0], x[0, 1])]  # fmt: skip
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    cond = np.array([True, False, True])
    before = data.copy()
    with Session(scope, SessionConfig(check_kernel_outputs=check)) as sess:
        for _ in range(2):
            got = sess.run(fetches, {x: data, c: cond})
    for value in got:
        assert type(value) is np.ndarray
        assert not np.shares_memory(value, data) and not np.shares_memory(value, cond)
    np.testing.assert_array_equal(got[3], data)  # Tile by ones: a copy, not the input
    np.testing.assert_array_equal(got[4], data)
    np.testing.assert_array_equal(data, before)


def test_trusted_kernels_on_a_simulated_gpu(sim_gpus):
    gpu = minigraph.testing.simulated_cupy
    scope = Scope.new_root_scope().with_device("/gpu:0")
    x = Placeholder(scope.with_op_name("x"), mg.float32).output
    fetches = [A.Fill(scope, [2], np.float32(4)), A.Tile(scope, x, [2, 1]),
               A.BroadcastTo(scope, x, [1, 2, 3]), A.SelectV2(scope, [False, True, False], x, x[0]),
               A.OneHot(scope, [2, 0], 3, np.float32(1), np.float32(0)), A.Pack(scope, [x, x]),
               A.ZerosLike(scope, x), A.OnesLike(scope, x), A.Rank(scope, x)]  # fmt: skip
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    metadata = mg.RunMetadata()
    with Session(scope, SessionConfig(check_kernel_outputs=True)) as sess:
        got = sess.run(fetches, {x: gpu.asarray(data)}, run_metadata=metadata)
    for op in [f.operation for f in fetches]:
        assert metadata.placement[op.name].endswith("GPU:0"), op.name
    assert got[0].tolist() == [4, 4] and got[1].tolist() == np.tile(data, (2, 1)).tolist()
    assert got[3].tolist() == np.where([False, True, False], data, data[0]).tolist()
    assert got[4].tolist() == [[0, 0, 1], [1, 0, 0]] and got[8].tolist() == 2


@pytest.mark.parametrize(
    "build",
    [
        lambda s, x: A.ExpandDims(s, x, 0), lambda s, x: A.Squeeze(s, A.ExpandDims(s, x, 0)),
        lambda s, x: A.Transpose(s, x, [1, 0]), lambda s, x: A.StridedSlice(s, x, [1], [2], [1]),
        lambda s, x: A.Slice(s, x, [0, 1], [-1, -1]), lambda s, x: A.Unpack(s, x, 2)[0],
    ],
    ids=["ExpandDims", "Squeeze", "Transpose", "StridedSlice", "Slice", "Unpack"],
)  # fmt: skip
def test_why_the_view_kernels_stay_untrusted(build, cpu_only):
    # Their results are views of the input; the session copies them rather than give the
    # caller a view of the fed array (a trusted kernel would skip that).
    scope = Scope.new_root_scope()
    x = Placeholder(scope, mg.float32, shape=[2, 3]).output
    out = build(scope, x)
    node = out.op if isinstance(out, mg.Output) else out.operation
    kernel = next(k for k in mg.registry.kernels_for(node.type) if k.device_type == "CPU")
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    host_inputs = [data] + [inp.op.get_attr("value") for inp in node.inputs[1:]]
    ctx = KernelContext(CpuDevice(0), "node", node.type)
    raw, _ = _raw_call(kernel, node, ctx, host_inputs, gpu=False)
    raw = raw[0] if isinstance(raw, list) else raw
    assert np.shares_memory(raw, data)
    got = Session(scope).run(out, {x: data})
    assert not np.shares_memory(got, data)
    np.testing.assert_array_equal(got, raw)
