"""The reduction and nn kernels (ops/reduction.py, ops/nn.py) are registered `trusted=True`;
this checks they keep the promise (minigraph.register_kernel): outputs of exactly the dtype and
shape the shape function infers, arrays of the device (never numpy scalars, 0-d included),
never a view of an input, inputs never written. Each kernel runs raw, on contexts whose pooled
memory is full of junk, for every dtype it registers, CPU and simulated GPU; the session then
runs the same nodes with `check_kernel_outputs=True`. BiasAdd writes into its input only when
the plan allows it (`KernelContext.forward_input_or_empty`).
"""

from __future__ import annotations

import numpy as np
import pytest
from _reduction_nn_helpers import BF16, build, dirty_ctx, kernel_dtypes

import minigraph as mg
import minigraph.testing
from minigraph import KernelContext, Scope, Session, SessionConfig
from minigraph.testing import SimulatedGpuDevice

REDUCTIONS = ["Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin"]
NN = [
    "MatMul", "BatchMatMulV2", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
    "SoftmaxCrossEntropyWithLogits", "L2Loss", "BiasAdd",
]  # fmt: skip


def test_every_kernel_is_trusted_on_both_devices():
    for op in REDUCTIONS + NN:
        kernels = [k for k in mg.registry.kernels_for(op) if not k.label]
        assert {k.device_type for k in kernels} == {"CPU", "GPU"}, op
        assert all(k.trusted for k in kernels), op


def _values(dtype: np.dtype, shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    values = rng.integers(1, 5, shape)
    if dtype.kind == "c":
        return (values + 1j).astype(dtype)
    return values.astype(dtype)


def _cases(op: str, dtype: np.dtype) -> list[tuple[tuple, dict]]:
    """(inputs, attrs) per case: 0-d outputs, empty inputs, keep_dims, broadcasts."""
    v = lambda *shape: _values(dtype, shape, len(shape))  # noqa: E731
    i32 = lambda x: np.array(x, np.int32)  # noqa: E731
    if op in ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any"):
        return [
            ((v(4), i32(0)), {"keep_dims": False}),  # a 0-d result
            ((v(2, 3), i32([0, 1])), {"keep_dims": True}),
            ((v(2, 3), i32([])), {"keep_dims": False}),  # no reduction: still a new array
            ((v(), i32([])), {"keep_dims": False}),
            ((v(0, 3), i32([0])), {"keep_dims": False}),  # empty: identities
            ((v(3, 0), i32([1])), {"keep_dims": True}),
        ]
    if op in ("ArgMax", "ArgMin"):
        return [((v(4), i32(0)), {}), ((v(2, 3), i32(-1)), {}), ((v(0, 3), i32(1)), {})]
    if op == "MatMul":
        both = {"transpose_a": True, "transpose_b": True}
        return [((v(2, 3), v(3, 4)), {}), ((v(3, 1), v(4, 3)), both), ((v(2, 0), v(0, 3)), {}),
                ((v(1, 1), v(1, 1)), {})]  # fmt: skip
    if op == "BatchMatMulV2":
        return [((v(2, 1, 2, 3), v(4, 3, 2)), {}), ((v(3, 2), v(3, 4)), {"adj_x": True}),
                ((v(0, 2, 2), v(2, 2)), {"adj_y": True})]  # fmt: skip
    if op in ("Softmax", "LogSoftmax"):
        return [((v(3),), {}), ((v(2, 3, 4),), {}), ((v(2, 0),), {})]
    if op == "SparseSoftmaxCrossEntropyWithLogits":
        return [((v(2, 3), i32([0, 2])), {}), ((v(0, 3), i32([])), {})]
    if op == "SoftmaxCrossEntropyWithLogits":
        return [((v(2, 3), v(2, 3)), {}), ((v(3), v(2, 3)), {}), ((v(2, 0), v(2, 0)), {})]
    if op == "L2Loss":
        return [((v(2, 3),), {}), ((v(),), {}), ((v(0),), {})]
    if op == "BiasAdd":
        return [((v(2, 3), v(3)), {}), ((v(2, 3, 2), v(3)), {"data_format": "NCHW"}),
                ((v(0, 3), v(3)), {})]  # fmt: skip
    raise AssertionError(op)


def _kernel_cases():
    cases = []
    for op in REDUCTIONS + NN:
        attr = "T" if op not in ("All", "Any") else None
        for kernel in mg.registry.kernels_for(op):
            device = kernel.device_type
            if attr is None:
                cases.append(pytest.param(kernel, np.dtype(bool), id=f"{device}-{op}"))
                continue
            for dtype in kernel_dtypes(op, device):
                cases.append(pytest.param(kernel, dtype.np_dtype, id=f"{device}-{op}-{dtype.name}"))
    return cases


def _inferred(op: str, inputs: tuple, attrs: dict) -> tuple[list, dict]:
    """(dtype, shape) per output that the shape function infers for these concrete inputs,
    and the node's canonical attrs (what the kernel receives)."""
    scope = Scope.new_root_scope()
    fetch, _ = build(scope, op, inputs, attrs, fed=False)
    outputs = fetch if isinstance(fetch, list) else [fetch]
    return [(o.dtype.np_dtype, o.shape) for o in outputs], dict(outputs[0].op.attrs)


@pytest.mark.parametrize("kernel, dtype", _kernel_cases())
def test_raw_kernels_keep_the_trusted_promise(kernel, dtype):
    gpu = kernel.device_type == "GPU"
    ctx = KernelContext(SimulatedGpuDevice(0), "node", kernel.op_type) if gpu else dirty_ctx()
    array_type = minigraph.testing.SimulatedArray if gpu else np.ndarray
    for inputs, attrs in _cases(kernel.op_type, np.dtype(dtype)):
        specs, node_attrs = _inferred(kernel.op_type, inputs, attrs)
        host_inputs = [i.copy() for i in inputs]
        # Host-memory inputs (the axis) stay numpy arrays on a GPU.
        device_inputs = [
            ctx.device.from_host(v) if gpu and arg.name not in kernel.host_memory else v
            for v, arg in zip(inputs, mg.registry.get_op_def(kernel.op_type).inputs)
        ]
        got = kernel.fn(ctx, *device_inputs, **node_attrs)
        outputs = got if isinstance(got, tuple) else (got,)
        assert len(outputs) == len(specs)
        host = lambda v: ctx.device.to_host(v) if gpu and type(v) is array_type else v  # noqa: E731
        for out, (want_dtype, want_shape) in zip(outputs, specs):
            assert type(out) is array_type, (inputs, attrs, type(out))
            assert out.dtype == want_dtype and want_shape.is_fully_defined()
            assert out.shape == tuple(want_shape.dims), (out.shape, want_shape)
            if not gpu:
                for v in device_inputs:
                    assert not np.shares_memory(out, v)
        for out in outputs:
            out.fill(0)  # no view of an input: writing the output leaves the inputs as they were
        for v, before in zip(device_inputs, host_inputs):
            np.testing.assert_array_equal(np.asarray(host(v)).astype(np.complex128),
                                          before.astype(np.complex128))  # fmt: skip


@pytest.mark.parametrize("op", REDUCTIONS + NN)
@pytest.mark.parametrize("check", [None, True])
def test_sessions_see_the_inferred_outputs(op, check):
    # The session's own checks (check_kernel_outputs=True) on every case, constant inputs (the
    # reductions' constant-axis specialisation) and fed inputs (the general path).
    dtype = np.dtype(bool) if op in ("All", "Any") else np.dtype(np.float32)
    for inputs, attrs in _cases(op, dtype):
        for fed in (False, True):
            scope = Scope.new_root_scope()
            fetch, feeds = build(scope, op, inputs, attrs, fed)
            before = [v.copy() for v in inputs]
            with Session(scope, SessionConfig(check_kernel_outputs=check)) as sess:
                got = sess.run(fetch, feeds)
            for out in got if isinstance(got, list) else [got]:
                assert type(out) is np.ndarray
                for v in inputs:
                    assert not np.shares_memory(out, v)
            for v, b in zip(inputs, before):
                np.testing.assert_array_equal(v, b)


# -- BiasAdd writes into its input only when the plan allows it --------------------------------


def test_bias_add_forwards_its_input_only_when_allowed():
    from ops import nn  # noqa: PLC0415

    (kernel,) = [k for k in mg.registry.kernels_for("BiasAdd") if k.device_type == "CPU"]
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    bias = np.array([1, 2, 3], np.float32)
    ctx = dirty_ctx("BiasAdd")
    out = kernel.fn(ctx, value, bias, data_format="NHWC")
    assert out is not value and value[0, 0] == 0  # a new array
    ctx.forwardable_inputs = frozenset({0})
    got = kernel.fn(ctx, value, bias, data_format="NHWC")
    assert got is value  # written in place: the plan said the input dies here
    np.testing.assert_array_equal(got, out)
    # Not the bias (input 1), and not an input of another shape or dtype.
    ctx.forwardable_inputs = frozenset({1})
    assert kernel.fn(ctx, out.copy(), bias, data_format="NHWC") is not bias
    assert nn.BiasAdd.op_def.name == "BiasAdd"


def test_half_types_return_their_own_dtype():
    # float16/bfloat16 kernels compute partly in float32; results are rounded into T arrays.
    ctx = dirty_ctx()
    for dtype in (np.dtype(np.float16), BF16):
        for op in ("MatMul", "L2Loss", "Softmax"):
            (kernel,) = [k for k in mg.registry.kernels_for(op) if k.device_type == "CPU"]
            x = np.ones((2, 2), dtype)
            inputs = (x, x) if op == "MatMul" else (x,)
            specs, attrs = _inferred(op, inputs, {})
            out = kernel.fn(ctx, *inputs, **attrs)
            assert type(out) is np.ndarray and out.dtype == dtype, op
