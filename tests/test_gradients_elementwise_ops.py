"""The ops the elementwise gradient rules build that are not in ELEMENTWISE_OPS
(ops.math.GRADIENT_OPS): Conj and TF's gradient ops ReluGrad, Relu6Grad, EluGrad,
SoftplusGrad, SigmoidGrad, TanhGrad, RsqrtGrad, SqrtGrad, ReciprocalGrad. Values against
numpy references written from TF's formulas (every dtype each CPU kernel takes, CPU and
simulated GPU), TF's special cases (0 where dy is 0 for the Sqrt, Rsqrt and Reciprocal
gradients), the shape rules (equal shapes, or equal element counts with y's shape) with TF's
errors at construction and at run time, OpDefs, and the trusted-kernel promise (new arrays of
the inferred dtype and shape; forwarding a dying input gives the same values)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigraph as mg
from minigraph import KernelContext
from minigraph.devices import CpuDevice
from minigraph.memory import BufferPool
from minigraph.testing import SimulatedArray, SimulatedGpuDevice
from ops import math as M

ROWS = {row.name: row for row in M.GRADIENT_OPS}
BF16 = mg.bfloat16.np_dtype
inf, nan = math.inf, math.nan


def kernel(op: str, device: str = "CPU"):
    (k,) = [k for k in mg.registry.kernels_for(op) if k.device_type == device and not k.label]
    return k


def junk_ctx() -> KernelContext:
    """A CPU context whose ctx.empty hands out pooled memory full of junk."""
    pool = BufferPool(min_bytes=1)
    for k in range(60):
        pool.empty((math.ceil(2 ** (k / 4)),), np.uint8)[:] = 0xA5
    return KernelContext(CpuDevice(0), "node", "Test", buffers=pool)


def run_kernel(op, *values, device="CPU", forward=False):
    """The raw kernel result (a host array), on the CPU or a simulated GPU."""
    if device == "GPU":
        ctx = KernelContext(SimulatedGpuDevice(0), "node", op)
        inputs = [ctx.device.from_host(v) for v in values]
    else:
        ctx = junk_ctx()
        inputs = list(values)
    if forward:
        ctx.forwardable_inputs = frozenset(range(len(values)))
    with np.errstate(all="raise"):  # the kernels compute silently, as TF
        got = kernel(op, device).fn(ctx, *inputs)
    if device == "GPU":
        assert type(got) is SimulatedArray
        return ctx.device.to_host(got)
    return got


# -- references, from TF's formulas, in float64 / complex128 ---------------------------------


def wide(v):
    v = np.asarray(v)
    if v.dtype.kind == "c":
        return v.astype(np.complex128)
    return v.astype(np.float64)


def ref(op, a, b=None):
    a = wide(a)
    b = None if b is None else wide(b)
    with np.errstate(all="ignore"):
        if op == "Conj":
            return np.conj(a)
        if op == "ReluGrad":
            return a * (b > 0)
        if op == "Relu6Grad":
            return a * ((b > 0) & (b < 6))
        if op == "EluGrad":
            return np.where(b < 0, a * (b + 1), a)
        if op == "SoftplusGrad":
            return a / (np.exp(-b) + 1)
        if op == "SigmoidGrad":
            return b * a * (1 - a)
        if op == "TanhGrad":
            return b * (1 - a * a)
        c = np.conj(a)
        if op == "SqrtGrad":
            return np.where(b == 0, 0, 0.5 * b / c)
        if op == "RsqrtGrad":
            return np.where(b == 0, 0, -0.5 * b * c**3)
        if op == "ReciprocalGrad":
            return np.where(b == 0, 0, -b * c * c)
    raise AssertionError(op)


def sample(op, dtype, shape=(3, 4), seed=0):
    """Operands for op in dtype: activations' features around their kinks, y values in the
    functions' ranges."""
    rng = np.random.default_rng(seed)
    d = np.dtype(dtype)
    if d.kind in "iu":
        lo = 0 if d.kind == "u" else -8
        return (rng.integers(lo, 9, shape).astype(d), rng.integers(lo, 9, shape).astype(d))
    a = rng.uniform(-2, 2, shape)
    b = rng.uniform(-2, 8, shape)
    if op in ("SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad"):
        b = rng.uniform(-2, 2, shape)
        if op in ("RsqrtGrad", "SqrtGrad"):
            a = rng.uniform(0.1, 3, shape)
    if d.kind == "c":
        a = a + 1j * rng.uniform(-1, 1, shape)
        b = b + 1j * rng.uniform(-1, 1, shape)
    if op == "EluGrad":
        b = rng.uniform(-1, 2, shape)  # outputs of Elu: > -1
    a.flat[:3] = [0.0, 1.0, -1.0]
    b.flat[:3] = [0.0, 0.0, 6.0]  # the kinks, and a zero dy
    return a.astype(d), b.astype(d)


def tolerance(dtype):
    d = np.dtype(dtype)
    if d == BF16:
        return 2e-2
    if d.itemsize == 2:
        return 4e-3
    return 1e-6 if d in (np.float32, np.complex64) else 1e-14


def cases():
    """(device, op, dtype) for every dtype each kernel takes (the GPU's: all but bfloat16)."""
    out = []
    for device in ("CPU", "GPU"):
        for row in M.GRADIENT_OPS:
            for name in row.cpu or row.types:
                if device == "GPU" and name == "bfloat16":
                    continue
                dtype = mg.as_dtype(name).np_dtype
                out.append(pytest.param(device, row.name, dtype, id=f"{device}-{row.name}-{name}"))
    return out


@pytest.mark.parametrize("device, op, dtype", cases())
def test_values_match_tf_formulas(op, dtype, device):
    row = ROWS[op]
    a, b = sample(op, dtype)
    args = (a,) if len(row.inputs) == 1 else (a, b)
    got = run_kernel(op, *args, device=device)
    assert got.dtype == np.dtype(dtype) and got.shape == a.shape
    want = ref(op, *args)
    if np.dtype(dtype).kind in "iu":
        np.testing.assert_array_equal(got, want.astype(dtype))
        return
    np.testing.assert_allclose(wide(got), want, rtol=tolerance(dtype), atol=tolerance(dtype))


def test_gpu_kernels_take_the_cpu_dtypes_but_bfloat16():
    for row in M.GRADIENT_OPS:
        gpu = kernel(row.name, "GPU")
        cpu = kernel(row.name, "CPU")
        for name in row.cpu or row.types:
            dtype = mg.as_dtype(name)
            assert cpu.mismatch({"T": dtype}, "") is None
            assert (gpu.mismatch({"T": dtype}, "") is None) == (name != "bfloat16"), (row, name)


# -- TF's special values ---------------------------------------------------------------------


def test_relu_family_special_values():
    g = np.array([1.0, 1.0, nan, inf, 2.0, 0.0, 1.0], np.float32)
    f = np.array([0.0, -1.0, -1.0, -1.0, 3.0, 6.0, nan], np.float32)
    got = run_kernel("ReluGrad", g, f)
    # g * (f > 0): 0 at 0, NaN for NaN or inf gradients where f <= 0 (0 * inf), 0 for NaN f.
    np.testing.assert_array_equal(got, [0, 0, nan, nan, 2, 0, 0])
    np.testing.assert_array_equal(run_kernel("Relu6Grad", g, f), [0, 0, nan, nan, 2, 0, 0])
    o = np.array([0.0, -0.5, -1.0, -1.0, 3.0, nan], np.float32)
    g6 = g[:6]
    np.testing.assert_array_equal(run_kernel("EluGrad", g6, o), [1, 0.5, nan, nan, 2, 0])


def test_softplus_grad_special_values():
    g = np.array([1.0, 1.0, nan, inf, 2.0, 0.0, 0.0], np.float32)
    f = np.array([0.0, -100.0, -1.0, 1.0, 100.0, nan, -1000.0], np.float32)
    np.testing.assert_array_equal(run_kernel("SoftplusGrad", g, f), [0.5, 0, nan, inf, 2, nan, 0])


def test_y_dy_gradients_special_values():
    y = np.array([0.0, 0.0, inf, inf, 2.0, 0.5, nan], np.float32)
    dy = np.array([0.0, 1.0, 0.0, 1.0, nan, inf, 0.0], np.float32)
    # Sigmoid and Tanh follow the plain formula (inf * 0 is NaN)...
    np.testing.assert_array_equal(run_kernel("SigmoidGrad", y, dy), [0, 0, nan, -inf, nan, inf,
                                                                     nan])  # fmt: skip
    np.testing.assert_array_equal(run_kernel("TanhGrad", y, dy), [0, 1, nan, -inf, nan, inf, nan])
    # ... Sqrt, Rsqrt and Reciprocal give 0 wherever dy is 0 (TF's mul_no_nan).
    np.testing.assert_array_equal(run_kernel("SqrtGrad", y, dy), [0, inf, 0, 0, nan, inf, 0])
    np.testing.assert_array_equal(run_kernel("RsqrtGrad", y, dy), [0, 0, 0, -inf, nan, -inf, 0])
    np.testing.assert_array_equal(
        run_kernel("ReciprocalGrad", y, dy), [0, 0, 0, -inf, nan, -inf, 0]
    )


def test_complex_gradient_ops_conjugate_y_where_tf_does():
    y = np.array([1 + 2j, 0j, 3 - 1j], np.complex64)
    dy = np.array([1 - 1j, 1 + 0j, 0j], np.complex64)
    # TF 2.21's values.
    assert run_kernel("SigmoidGrad", y, dy).tolist() == [2 - 6j, 0j, 0j]
    assert run_kernel("TanhGrad", y, dy).tolist() == [-8j, 1 + 0j, 0j]
    assert run_kernel("RsqrtGrad", y, dy).tolist() == [4.5 - 6.5j, 0j, 0j]
    assert run_kernel("ReciprocalGrad", y, dy).tolist() == [7 + 1j, 0j, 0j]
    sqrt = run_kernel("SqrtGrad", y, dy)
    np.testing.assert_allclose(sqrt[[0, 2]], [0.3 + 0.1j, 0j], rtol=1e-6)
    # 0.5 / conj(0j) * dy: not finite (TF's scalar path gives inf + nanj, its vectorised
    # one, which minigraph follows, nan + nanj).
    assert not np.isfinite(sqrt[1])
    assert run_kernel("Conj", y).tolist() == [1 - 2j, 0j, 3 + 1j]


def test_half_types_compute_in_their_own_arithmetic():
    # TF computes in T: dy * (1 - y * y) in float16 rounds after each operation.
    y = np.array([0.999, 0.5], np.float16)
    dy = np.array([3.0, 1.0], np.float16)
    t = np.float16
    want = [t(dy[i]) * (t(1) - t(y[i]) * t(y[i])) for i in range(2)]
    assert run_kernel("TanhGrad", y, dy).tolist() == [float(w) for w in want]


# -- shapes: construction and run time, TF's messages ------------------------------------------


def placeholders(*shapes, dtype=mg.float32):
    root = mg.Scope.new_root_scope()
    return root, [mg.Placeholder(root, dtype, s) for s in shapes]


@pytest.mark.parametrize("op", ["ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad"])
def test_activation_gradient_ops_need_equal_shapes(op):
    root, (a, b) = placeholders([3, 2], [2, 3])
    with pytest.raises(mg.InvalidArgumentError, match=r"Dimension 0 in both shapes must be "
                       r"equal, but are 3 and 2\. Shapes are \[3,2\] and \[2,3\]"):  # fmt: skip
        getattr(M, op)(root, a, b)
    root, (a, b) = placeholders([3], [2, 3])
    with pytest.raises(mg.InvalidArgumentError, match="Shapes must be equal rank, but are 1 and 2"):
        getattr(M, op)(root, a, b)
    root, (a, b) = placeholders([None, 2], [3, None])
    node = getattr(M, op)(root, a, b)
    assert node.output.shape.dims == (3, 2)  # merged
    root, (a, b) = placeholders(None, None)
    node = getattr(M, op)(root, a, b)
    with mg.Session(root) as sess:
        with pytest.raises(mg.InvalidArgumentError, match=(
            rf"Inputs to operation {node.operation.name} of type {op} must have the same size "
            r"and shape\.  Input 0: \[3,2\] != input 1: \[2,3\]"
        )):  # fmt: skip
            sess.run(node, {a: np.ones((3, 2), np.float32), b: np.ones((2, 3), np.float32)})


@pytest.mark.parametrize("op", ["SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad",
                                "ReciprocalGrad"])  # fmt: skip
def test_y_dy_gradient_ops_need_equal_element_counts(op):
    # TF's shape function is y's shape; its kernel takes dy of any shape with as many elements.
    root, (y, dy) = placeholders([3, 2], [2, 3])
    node = getattr(M, op)(root, y, dy)
    assert node.output.shape.dims == (3, 2)
    with mg.Session(root) as sess:
        yv = np.arange(1, 7, dtype=np.float32).reshape(3, 2) / 7
        dyv = np.arange(6, dtype=np.float32).reshape(2, 3)
        got = sess.run(node, {y: yv, dy: dyv})
    np.testing.assert_allclose(got, ref(op, yv, dyv.reshape(3, 2)), rtol=1e-6)
    # Counts known to differ fail at construction (TF: at run time, with this message).
    root, (y, dy) = placeholders([3, 2], [2, 4])
    message = "The two arguments to a cwise op must have same number of elements, got 6 and 8"
    with pytest.raises(mg.InvalidArgumentError, match=message):
        getattr(M, op)(root, y, dy)
    root, (y, dy) = placeholders(None, [None])
    node = getattr(M, op)(root, y, dy)
    assert node.output.shape.rank is None
    with mg.Session(root) as sess:
        with pytest.raises(mg.InvalidArgumentError, match=message):
            sess.run(node, {y: np.ones((3, 2), np.float32), dy: np.ones(8, np.float32)})


def test_op_defs():
    sig = {row.name: mg.registry.get_op_def(row.name).signature() for row in M.GRADIENT_OPS}
    conj = mg.registry.get_op_def("Conj")
    assert [a.name for a in conj.inputs] == ["input"] and conj.outputs[0].name == "output"
    (t,) = conj.attrs
    assert t.default is mg.complex64 and [d.name for d in t.allowed] == ["complex64", "complex128"]
    relu = mg.registry.get_op_def("ReluGrad")
    assert [a.name for a in relu.inputs] == ["gradients", "features"]
    assert relu.outputs[0].name == "backprops"
    assert [a.name for a in mg.registry.get_op_def("EluGrad").inputs] == ["gradients", "outputs"]
    for op in ("SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad"):
        op_def = mg.registry.get_op_def(op)
        assert [a.name for a in op_def.inputs] == ["y", "dy"] and op_def.outputs[0].name == "z"
    assert len(sig) == 10


def test_conj_takes_complex_only():
    root, (x,) = placeholders([2])
    with pytest.raises(mg.InvalidArgumentError, match="float32"):
        M.Conj(root, x)


# -- the trusted promise: new arrays of the inferred dtype and shape, inputs untouched ------------


@pytest.mark.parametrize("device", ["CPU", "GPU"])
@pytest.mark.parametrize("op", sorted(ROWS))
def test_trusted_kernels_return_new_arrays_and_leave_inputs_alone(op, device):
    row = ROWS[op]
    k = kernel(op, device)
    assert k.trusted
    for name in row.cpu or row.types:
        dtype = mg.as_dtype(name).np_dtype
        if device == "GPU" and dtype == BF16:
            continue
        for shape in ((), (0, 3), (2, 3)):
            a, b = sample(op, dtype, shape if shape != () else (1,), seed=3)
            if shape == ():
                a, b = a.reshape(()), b.reshape(())
            elif shape == (0, 3):
                a, b = a.reshape(-1)[:0].reshape(0, 3), b.reshape(-1)[:0].reshape(0, 3)
            args = (a,) if len(row.inputs) == 1 else (a, b)
            copies = [v.copy() for v in args]
            got = run_kernel(op, *args, device=device)
            assert type(got) is np.ndarray and got.dtype == dtype and got.shape == shape
            for v, c in zip(args, copies):
                np.testing.assert_array_equal(v, c)
                assert device == "GPU" or not np.shares_memory(got, v)


@pytest.mark.parametrize("op", sorted(ROWS))
def test_forwarded_results_equal_fresh_ones(op):
    row = ROWS[op]
    for name in row.cpu or row.types:
        dtype = mg.as_dtype(name).np_dtype
        a, b = sample(op, dtype, (3, 4), seed=5)
        args = (a,) if len(row.inputs) == 1 else (a, b)
        fresh = run_kernel(op, *(v.copy() for v in args))
        copies = [v.copy() for v in args]
        forwarded = run_kernel(op, *copies, forward=True)
        np.testing.assert_array_equal(forwarded, fresh)
        assert any(forwarded is c for c in copies) == row.forward


def test_same_size_kernel_does_not_forward_an_input_of_another_shape():
    y = np.full((3, 2), 0.5, np.float32)
    dy = np.arange(6, dtype=np.float32).reshape(2, 3)
    ctx = junk_ctx()
    ctx.forwardable_inputs = frozenset({1})
    got = kernel("TanhGrad").fn(ctx, y, dy)
    assert got is not dy and got.shape == (3, 2)
    np.testing.assert_allclose(got, dy.reshape(3, 2) * 0.75)


def test_graph_run_checks_outputs_against_the_graph():
    # check_kernel_outputs: every output is checked against the inferred dtype and shape.
    root, (y, dy) = placeholders([None, 2], [3, 2], dtype=mg.float64)
    nodes = [getattr(M, op)(root, y, dy) for op in ("SigmoidGrad", "ReluGrad", "EluGrad")]
    config = mg.SessionConfig(check_kernel_outputs=True)
    with mg.Session(root, config) as sess:
        got = sess.run(nodes, {y: np.full((3, 2), 0.25), dy: np.ones((3, 2))})
    assert [g.shape for g in got] == [(3, 2)] * 3


def test_add_n_computes_silently_on_gpus_too():
    # Gradients that meet are added by AddN; inf + -inf is NaN, silently, as TF (the simulated
    # GPU runs numpy, which would warn).
    import warnings

    ctx = KernelContext(SimulatedGpuDevice(0), "node", "AddN")
    x = ctx.device.from_host(np.array([np.inf, 1.0], np.float32))
    y = ctx.device.from_host(np.array([-np.inf, 2.0], np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ctx.device.to_host(kernel("AddN", "GPU").fn(ctx, [x, y, y]))
    assert np.isnan(got[0]) and got[1] == 5.0
