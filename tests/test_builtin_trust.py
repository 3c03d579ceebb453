"""Which built-in kernels of ops.math and ops.array are registered `trusted=True`, and that
they keep the promise (minigraph.register_kernel): outputs of the inferred dtype, shape and
array type, never a view of an input other than the input itself, inputs never written.

A trusted kernel's outputs go unchecked and fed arrays reach it as they are, so each promise
is checked here on the raw kernel results (default config: no check converts them) and again
with `check_kernel_outputs=True` (every output checked against the graph). The elementwise
family's promise (every row of ops.math.ELEMENTWISE_OPS, unary and binary), AddN's and
BroadcastGradientArgs' are checked on their raw results for every dtype each kernel takes,
CPU and simulated GPU. The kernel left untrusted is shown to need it: Reshape returns views of
its input.
"""

import math

import numpy as np
import pytest
from _gather_helpers import sample

import minigraph
import minigraph.testing
from minigraph import KernelContext, Placeholder, Scope, Session, SessionConfig
from minigraph.devices import CpuDevice
from minigraph.memory import BufferPool
from minigraph.testing import SimulatedGpuDevice
from ops import array as array_ops
from ops import math as math_ops

ELEMENTWISE = {row.name for row in math_ops.ELEMENTWISE_OPS}
TRUSTED = {"Shape", "Size", "ConcatV2", "Range", "Cast", "AddN", "BroadcastGradientArgs"}
TRUSTED |= ELEMENTWISE
UNTRUSTED = {"Reshape"}


def test_trusted_flags_of_the_builtin_kernels():
    for op_type in TRUSTED | UNTRUSTED:
        kernels = minigraph.registry.kernels_for(op_type)
        builtin = [k for k in kernels if not k.label]
        assert {k.device_type for k in builtin} == {"CPU", "GPU"}, op_type
        assert all(k.trusted == (op_type in TRUSTED) for k in builtin), op_type


def _run(build, feeds, config=None):
    """Builds `build(scope, placeholders) -> fetches` over placeholders for `feeds` (name ->
    array), runs it, and gives (results, the fed arrays)."""
    scope = Scope.new_root_scope()
    holders = {
        name: Placeholder(scope.with_op_name(name), minigraph.as_dtype(value.dtype)).output
        for name, value in feeds.items()
    }
    fetches = build(scope, holders)
    with Session(scope, config) as sess:
        results = [sess.run(fetches, {holders[n]: v for n, v in feeds.items()}) for _ in range(2)]
    return results[-1]


F32 = np.arange(6, dtype=np.float32).reshape(2, 3)
SCALAR = np.array(2.5, dtype=np.float32)
EMPTY = np.zeros((0, 3), dtype=np.float32)

CASES = {
    "Shape": (lambda s, h: array_ops.Shape(s, h["x"]), {"x": F32}, np.int32, (2,)),
    "Shape of a scalar": (lambda s, h: array_ops.Shape(s, h["x"]), {"x": SCALAR}, np.int32, (0,)),
    "Size int64": (
        lambda s, h: array_ops.Size(s, h["x"], out_type=minigraph.int64),
        {"x": EMPTY}, np.int64, (),
    ),
    "ConcatV2": (
        lambda s, h: array_ops.ConcatV2(s, [h["x"], h["y"]], 0),
        {"x": F32, "y": EMPTY}, np.float32, (2, 3),
    ),
    "Range int": (
        lambda s, h: math_ops.Range(s, h["a"], h["b"], h["c"]),
        {"a": np.array(1, np.int64), "b": np.array(9, np.int64), "c": np.array(3, np.int64)},
        np.int64, (3,),
    ),
    "Range float, empty": (
        lambda s, h: math_ops.Range(s, h["a"], h["b"], h["c"]),
        {"a": np.float32(1), "b": np.float32(1), "c": np.float32(0.5)},
        np.float32, (0,),
    ),
    "Cast": (
        lambda s, h: math_ops.Cast(s, h["x"], DstT=minigraph.int64), {"x": F32}, np.int64, (2, 3),
    ),
    "Cast of a scalar": (
        lambda s, h: math_ops.Cast(s, h["x"], DstT=minigraph.float64),
        {"x": SCALAR}, np.float64, (),
    ),
    "Cast complex to real": (
        lambda s, h: math_ops.Cast(s, h["x"], DstT=minigraph.float32),
        {"x": np.array([1 + 2j, 3 - 1j], np.complex64)}, np.float32, (2,),
    ),
    "Sub of scalars": (
        lambda s, h: math_ops.Sub(s, h["x"], h["y"]), {"x": SCALAR, "y": SCALAR}, np.float32, (),
    ),
    "Maximum broadcast": (
        lambda s, h: math_ops.Maximum(s, h["x"], h["y"]),
        {"x": SCALAR, "y": F32}, np.float32, (2, 3),
    ),
    "FloorDiv of int scalars": (
        lambda s, h: math_ops.FloorDiv(s, h["x"], h["y"]),
        {"x": np.array(7, np.int64), "y": np.array(4, np.int64)}, np.int64, (),
    ),
    "FloorMod broadcast": (
        lambda s, h: math_ops.FloorMod(s, h["x"], h["y"]),
        {"x": np.arange(6, dtype=np.int32).reshape(2, 1, 3), "y": np.array([[3], [5]], np.int32)},
        np.int32, (2, 2, 3),
    ),
    "Cast truncate": (
        lambda s, h: math_ops.Cast(s, h["x"], DstT=minigraph.float16, Truncate=True),
        {"x": F32}, np.float16, (2, 3),
    ),
    "Cast truncate of a scalar": (
        lambda s, h: math_ops.Cast(s, h["x"], DstT=minigraph.bfloat16, Truncate=True),
        {"x": SCALAR}, minigraph.bfloat16.np_dtype, (),
    ),
    "AddN": (
        lambda s, h: math_ops.AddN(s, [h["x"], h["y"], h["x"]]), {"x": F32, "y": F32},
        np.float32, (2, 3),
    ),
    "AddN of scalars": (
        lambda s, h: math_ops.AddN(s, [h["x"], h["y"]]), {"x": SCALAR, "y": SCALAR},
        np.float32, (),
    ),
    "BroadcastGradientArgs": (
        lambda s, h: math_ops.BroadcastGradientArgs(s, h["a"], h["b"]).r1,
        {"a": np.array([2, 3], np.int64), "b": np.array([3], np.int64)}, np.int64, (1,),
    ),
    "Relu of a scalar": (lambda s, h: math_ops.Relu(s, h["x"]), {"x": SCALAR}, np.float32, ()),
    "Sigmoid": (lambda s, h: math_ops.Sigmoid(s, h["x"]), {"x": F32}, np.float32, (2, 3)),
    "Less broadcast": (
        lambda s, h: math_ops.Less(s, h["x"], h["y"]), {"x": F32, "y": SCALAR}, np.bool_, (2, 3),
    ),
    "Equal of unbroadcastable shapes": (
        lambda s, h: math_ops.Equal(s, h["x"], h["y"], incompatible_shape_error=False),
        {"x": F32, "y": np.zeros(4, np.float32)}, np.bool_, (),
    ),
    "LogicalNot": (
        lambda s, h: math_ops.LogicalNot(s, h["x"]), {"x": np.array([True, False])},
        np.bool_, (2,),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("check", [None, True])
def test_trusted_kernels_keep_their_promise(case, check, cpu_only):
    build, feeds, dtype, shape = CASES[case]
    before = {n: v.copy() for n, v in feeds.items()}
    got = _run(build, feeds, SessionConfig(check_kernel_outputs=check))
    assert type(got) is np.ndarray  # not a numpy scalar, not a subclass
    assert got.dtype == dtype and got.shape == shape
    for name, value in feeds.items():
        assert not np.shares_memory(got, value), name
        np.testing.assert_array_equal(value, before[name])  # inputs never written


def test_trusted_kernels_on_a_simulated_gpu(sim_gpus):
    gpu = minigraph.testing.simulated_cupy
    scope = Scope.new_root_scope().with_device("/gpu:0")
    x = Placeholder(scope.with_op_name("x"), minigraph.float32).output
    fetches = [
        array_ops.ConcatV2(scope, [x, x], 1),
        math_ops.Cast(scope, x, DstT=minigraph.float64),
        math_ops.Range(scope, 0.0, 2.0, 0.5),
        array_ops.Shape(scope, x),
        array_ops.Size(scope, x),
        math_ops.Sub(scope, x, np.float32(1)),
        math_ops.FloorMod(scope, np.float32(7), np.float32(-2)),
    ]
    with Session(scope, SessionConfig(check_kernel_outputs=True)) as sess:
        concat, cast, rng, shape, size, sub, mod = sess.run(fetches, {x: gpu.asarray(F32)})
    assert concat.shape == (2, 6) and cast.dtype == np.float64
    assert rng.tolist() == [0.0, 0.5, 1.0, 1.5]
    assert shape.tolist() == [2, 3] and size.tolist() == 6
    assert sub.tolist() == (F32 - 1).tolist() and mod.shape == () and mod.tolist() == -1.0


def test_cast_to_the_same_dtype_passes_the_input_through_and_the_session_copies_it(cpu_only):
    # The kernel returns its input; only a fetch of the fed tensor itself gives the caller's
    # array back, so the session copies this result.
    got = _run(lambda s, h: math_ops.Cast(s, h["x"], DstT=minigraph.float32), {"x": F32})
    assert got is not F32 and not np.shares_memory(got, F32)
    assert got.tolist() == F32.tolist()


def test_why_reshape_stays_untrusted(cpu_only):
    # Its result is a view of its input: the session copies it rather than give the caller a
    # view of the fed array (a trusted kernel would skip that).
    got = _run(lambda s, h: array_ops.Reshape(s, h["x"], [-1]), {"x": F32})
    assert got.tolist() == F32.reshape(-1).tolist()
    assert not np.shares_memory(got, F32)


# -- the elementwise family's promise, on raw kernel results ---------------------------------

# (x shape, y shape): 0-d operands, broadcasts both ways, a single divisor of shape (1,) (the
# integer FloorMod's floor_divide path) and an empty broadcast. Unary ops take the x shapes.
BINARY_SHAPES = [
    ((), ()), ((3,), ()), ((), (2, 3)), ((2, 1, 3), (4, 1)), ((5,), (1,)), ((0, 3), (1, 3)),
]  # fmt: skip


def _pooled_cpu_ctx() -> KernelContext:
    """A CPU context whose `ctx.empty` hands out pooled memory full of junk, at any size."""
    pool = BufferPool(min_bytes=1)
    for k in range(40):
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = 0xA5
    return KernelContext(CpuDevice(0), "node", "Elementwise", buffers=pool)


def _elementwise_kernels():
    """(row, kernel, dtype) for every dtype each built-in elementwise kernel takes."""
    cases = []
    for row in math_ops.ELEMENTWISE_OPS:
        op_def = minigraph.registry.get_op_def(row.name)
        if row.types is None:
            allowed = [minigraph.bool_]
        else:
            (t,) = [a for a in op_def.attrs if a.name == "T"]
            allowed = t.allowed or minigraph.dtypes.ALL_DTYPES
        for kernel in minigraph.registry.kernels_for(row.name):
            for dtype in allowed:
                if kernel.mismatch({"T": dtype}, "") is None:
                    name = f"{kernel.device_type}-{row.name}-{dtype.name}"
                    cases.append(pytest.param(row, kernel, dtype, id=name))
    return cases


def test_every_row_and_dtype_is_covered():
    covered = {(p.values[0].name, p.values[1].device_type) for p in _elementwise_kernels()}
    assert covered == {(r.name, d) for r in math_ops.ELEMENTWISE_OPS for d in ("CPU", "GPU")}


@pytest.mark.parametrize("row, kernel, dtype", _elementwise_kernels())
def test_elementwise_kernels_keep_the_trusted_promise(row, kernel, dtype):
    # An array (never a numpy scalar) of the broadcast shape and the result dtype (bool for
    # comparisons, else x's), in new memory (the pool's on the host), for 0-d operands too;
    # inputs never written.
    gpu = kernel.device_type == "GPU"
    ctx = KernelContext(SimulatedGpuDevice(0), "node", row.name) if gpu else _pooled_cpu_ctx()
    array_type = minigraph.testing.SimulatedArray if gpu else np.ndarray
    want_dtype = np.dtype(bool) if row.boolean else dtype.np_dtype
    attrs = {"incompatible_shape_error": True} if row.attrs else {}
    unary = len(row.inputs) == 1
    for seed, (x_shape, y_shape) in enumerate(BINARY_SHAPES):
        x_host, y_host = sample(dtype, x_shape, seed), sample(dtype, y_shape, seed + 7)
        if dtype.is_unsigned and row.name == "Sub":
            x_host = x_host + y_host.max(initial=0)  # no wrap-around needed to test the promise
        hosts = (x_host,) if unary else (x_host, y_host)
        inputs = [ctx.device.from_host(v) if gpu else v for v in hosts]
        with np.errstate(all="ignore"):
            got = kernel.fn(ctx, *inputs, **attrs)
        shape = x_shape if unary else np.broadcast_shapes(x_shape, y_shape)
        assert type(got) is array_type, (x_shape, y_shape, type(got))
        assert got.dtype == want_dtype and got.shape == shape, (got.dtype, got.shape)
        host = lambda v: ctx.device.to_host(v) if gpu else v  # noqa: E731
        for value, original in zip(inputs, hosts):
            if not gpu:
                assert not np.shares_memory(got, original)
            np.testing.assert_array_equal(host(value), original)  # inputs never written
        got.fill(0)  # the output is no view of an input: writing it leaves them as they were
        for value, original in zip(inputs, hosts):
            np.testing.assert_array_equal(host(value), original)


@pytest.mark.parametrize("device_type", ["CPU", "GPU"])
@pytest.mark.parametrize("dtype", math_ops._ADD_N_TYPES)
def test_add_n_keeps_the_trusted_promise(device_type, dtype):
    (kernel,) = [k for k in minigraph.registry.kernels_for("AddN") if k.device_type == device_type]
    dtype = minigraph.as_dtype(dtype)
    if kernel.mismatch({"T": dtype, "N": 3}, "") is not None:
        assert device_type == "GPU" and dtype is minigraph.bfloat16
        return
    gpu = device_type == "GPU"
    ctx = KernelContext(SimulatedGpuDevice(0), "node", "AddN") if gpu else _pooled_cpu_ctx()
    for shape in ((), (3,), (0, 2), (4, 5)):
        hosts = [sample(dtype, shape, seed) for seed in range(3)]
        inputs = [ctx.device.from_host(v) if gpu else v for v in hosts]
        got = kernel.fn(ctx, inputs)
        assert type(got) is (minigraph.testing.SimulatedArray if gpu else np.ndarray)
        assert got.dtype == dtype.np_dtype and got.shape == shape
        got.fill(0)
        for value, original in zip(inputs, hosts):
            np.testing.assert_array_equal(ctx.device.to_host(value) if gpu else value, original)
        # One input: the input itself, as TF forwards it (the session copies a fed one).
        assert kernel.fn(ctx, inputs[:1]) is inputs[0]


@pytest.mark.parametrize("device_type", ["CPU", "GPU"])
def test_broadcast_gradient_args_keeps_the_trusted_promise(device_type):
    # Host memory on every device: numpy vectors of the input dtype, new arrays.
    (kernel,) = [
        k for k in minigraph.registry.kernels_for("BroadcastGradientArgs")
        if k.device_type == device_type
    ]  # fmt: skip
    assert kernel.host_memory == {"s0", "s1", "r0", "r1"}
    ctx = _pooled_cpu_ctx()
    for dtype in (np.int32, np.int64):
        s0, s1 = np.array([2, 1, 3], dtype), np.array([4, 1], dtype)
        r0, r1 = kernel.fn(ctx, s0, s1)
        assert type(r0) is np.ndarray and r0.dtype == dtype and r0.tolist() == [1]
        assert type(r1) is np.ndarray and r1.dtype == dtype and r1.tolist() == [0, 2]
        empty = kernel.fn(ctx, np.zeros(0, dtype), np.zeros(0, dtype))
        assert [e.shape for e in empty] == [(0,), (0,)] and empty[0].dtype == dtype
