"""Which built-in kernels of ops.math and ops.array are registered `trusted=True`, and that
they keep the promise (minigraph.register_kernel): outputs of the inferred dtype, shape and
array type, never a view of an input other than the input itself, inputs never written.

A trusted kernel's outputs go unchecked and fed arrays reach it as they are, so each promise
is checked here on the raw kernel results (default config: no check converts them) and again
with `check_kernel_outputs=True` (every output checked against the graph). The binary ops'
promise is checked on their raw results for every dtype each kernel takes, CPU and simulated
GPU. The kernel left untrusted is shown to need it: Reshape returns views of its input.
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

BINARY = {"Sub", "Maximum", "FloorDiv", "FloorMod"}
TRUSTED = {"Shape", "Size", "ConcatV2", "Range", "Cast"} | BINARY
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


# -- the binary ops' promise, on raw kernel results ------------------------------------------

# (x shape, y shape): 0-d operands, broadcasts both ways, a single divisor of shape (1,) (the
# integer FloorMod's floor_divide path) and an empty broadcast.
BINARY_SHAPES = [
    ((), ()), ((3,), ()), ((), (2, 3)), ((2, 1, 3), (4, 1)), ((5,), (1,)), ((0, 3), (1, 3)),
]  # fmt: skip


def _pooled_cpu_ctx() -> KernelContext:
    """A CPU context whose `ctx.empty` hands out pooled memory full of junk, at any size."""
    pool = BufferPool(min_bytes=1)
    for k in range(40):
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = 0xA5
    return KernelContext(CpuDevice(0), "node", "Binary", buffers=pool)


def _binary_kernels():
    """(op type, kernel, dtype) for every dtype each built-in binary kernel takes."""
    cases = []
    for op_type in sorted(BINARY):
        (t,) = [a for a in minigraph.registry.get_op_def(op_type).attrs if a.name == "T"]
        for kernel in minigraph.registry.kernels_for(op_type):
            for dtype in t.allowed:
                if kernel.mismatch({"T": dtype}, "") is None:
                    cases.append(
                        pytest.param(
                            kernel, dtype, id=f"{kernel.device_type}-{op_type}-{dtype.name}"
                        )
                    )
    return cases


@pytest.mark.parametrize("kernel, dtype", _binary_kernels())
def test_binary_kernels_keep_the_trusted_promise(kernel, dtype):
    # An array (never a numpy scalar) of the broadcast shape and x's dtype, in new memory (the
    # pool's on the host), for 0-d operands too; inputs never written.
    gpu = kernel.device_type == "GPU"
    ctx = KernelContext(SimulatedGpuDevice(0), "node", "Binary") if gpu else _pooled_cpu_ctx()
    array_type = minigraph.testing.SimulatedArray if gpu else np.ndarray
    for seed, (x_shape, y_shape) in enumerate(BINARY_SHAPES):
        x_host, y_host = sample(dtype, x_shape, seed), sample(dtype, y_shape, seed + 7)
        if dtype.is_unsigned and kernel.op_type == "Sub":
            x_host = x_host + y_host.max(initial=0)  # no wrap-around needed to test the promise
        x, y = (ctx.device.from_host(v) if gpu else v for v in (x_host, y_host))
        got = kernel.fn(ctx, x, y)
        assert type(got) is array_type, (x_shape, y_shape, type(got))
        assert got.dtype == dtype.np_dtype and got.shape == np.broadcast_shapes(x_shape, y_shape)
        if not gpu:
            assert not np.shares_memory(got, x_host) and not np.shares_memory(got, y_host)
        host = lambda v: ctx.device.to_host(v) if gpu else v  # noqa: E731
        np.testing.assert_array_equal(host(x), x_host)  # inputs never written
        np.testing.assert_array_equal(host(y), y_host)
        got.fill(0)  # the output is no view of an input: writing it leaves them as they were
        np.testing.assert_array_equal(host(x), x_host)
        np.testing.assert_array_equal(host(y), y_host)
