"""The resource variable ops' kernels against numpy references written differently (row by row,
in index order, as TF's CPU kernels loop), for every dtype TF's CPU kernels register, with the
construction and run-time error tables, copy-on-write, and sparse updates that touch only the
rows they name."""

from __future__ import annotations

import time

import numpy as np
import pytest
from _gather_helpers import ids, sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops
import ops.resource_variables as rv
from minigraph import Scope, Session, Variable
from minigraph.resources import ResourceHandle, handle_value

ALL = list(mg.dtypes.ALL_DTYPES)
NUMERIC = [d for d in ALL if d.is_numeric]
FLOATS = [mg.bfloat16, mg.float16, mg.float32, mg.float64, mg.complex64, mg.complex128]
INDEX = [mg.int32, mg.int64]

OPS = [
    "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp",
    "AssignSubVariableOp", "VarIsInitializedOp", "DestroyResourceOp", "VariableShape",
    "ResourceGather", "ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate",
    "ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdagrad",
    "ResourceApplyAdam", "ResourceSparseApplyMomentum", "ResourceSparseApplyAdagrad",
]  # fmt: skip


@pytest.fixture
def root():
    return Scope.new_root_scope()


def _run(scope, op, variables, feeds=None, steps=1):
    """Initializes `variables`, runs `op` `steps` times, returns the variables' values."""
    with Session(scope) as sess:
        sess.run([v.initializer for v in variables])
        for _ in range(steps):
            sess.run(op, feeds)
        return sess.run(list(variables))


def _tol(dtype):
    return {
        "bfloat16": 3e-2, "float16": 3e-3, "float32": 1e-5, "complex64": 1e-5,
    }.get(dtype.name, 1e-12)  # fmt: skip


def _close(got, want, dtype):
    got = np.asarray(got)
    if dtype.is_integer or dtype.is_bool or dtype.is_string:
        np.testing.assert_array_equal(got, want)
        return
    tol = _tol(dtype)
    np.testing.assert_allclose(got.astype(np.complex128), np.asarray(want, np.complex128),
                               rtol=tol, atol=tol)  # fmt: skip


def test_every_op_is_registered_stateful_with_cpu_and_gpu_kernels():
    for name in OPS:
        assert mg.registry.get_op_def(name).is_stateful, name
        kernels = mg.registry.kernels_for(name)
        assert {k.device_type for k in kernels} == {"CPU", "GPU"}, name
        assert all(k.trusted for k in kernels), name


# -- reads and assigns -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=ids)
def test_assign_and_read_every_dtype(root, dtype):
    first, second = sample(dtype, (2, 3), seed=1), sample(dtype, (2, 3), seed=2)
    v = Variable(root, first, name="v")
    assign = v.assign(ops.Const(root, second), read_value=False)
    with Session(root) as sess:
        sess.run(v.initializer)
        got = sess.run(v)
        np.testing.assert_array_equal(got, first)
        assert got.dtype == dtype.np_dtype
        sess.run(assign)
        np.testing.assert_array_equal(sess.run(v), second)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids)
def test_assign_add_and_sub_every_dtype(root, dtype):
    a, b = sample(dtype, (4,), seed=3), sample(dtype, (4,), seed=4)
    v = Variable(root, a, name="v")
    add, sub = v.assign_add(ops.Const(root, b)), v.assign_sub(ops.Const(root, b))
    with np.errstate(all="ignore"):
        after_add = a + b  # integers wrap, as TF's
        after_sub = after_add - b
    with Session(root) as sess:
        sess.run(v.initializer)
        _close(sess.run(add), after_add, dtype)
        _close(sess.run(sub), after_sub, dtype)


def test_is_initialized_and_variable_shape(root):
    v = Variable(root, np.zeros((2, 5), np.float32), name="v")
    shapes = [rv.VariableShape(root, v), rv.VariableShape(root, v, out_type=mg.int64)]
    assert shapes[0].shape == mg.TensorShape([2]) and shapes[1].dtype is mg.int64
    with Session(root) as sess:
        assert not sess.run(rv.VarIsInitializedOp(root, v))
        sess.run(v.initializer)
        assert sess.run(rv.VarIsInitializedOp(root, v))
        got = sess.run(shapes)
    assert got[0].tolist() == [2, 5] and got[0].dtype == np.int32 and got[1].dtype == np.int64


def test_builders_fill_the_variables_dtype_for_literals(root):
    v = Variable(root, np.zeros(3, np.float64), name="v")
    read = rv.ReadVariableOp(root, v)  # dtype from the handle
    add = rv.AssignAddVariableOp(root, v, [1, 2, 3])  # int literals as float64
    scatter = rv.ResourceScatterAdd(root, v, [0], [1.5])
    apply = rv.ResourceApplyGradientDescent(root, v, 1, [1, 1, 1])
    assert read.dtype is mg.float64
    assert add.operation.get_attr("dtype") is mg.float64
    assert apply.operation.get_attr("T") is mg.float64
    assert read.operation.colocation_group == "v" and apply.operation.colocation_group == "v"
    (got,) = _run(root, [add, scatter, apply], [v])
    assert got.tolist() == [1.5, 1.0, 2.0]


# -- ResourceGather ------------------------------------------------------------------------------


def _ref_gather(params, indices, bd):
    """tf.gather(params, indices, axis=bd, batch_dims=bd), batch by batch."""
    if bd == 0:
        return np.take(params, indices, axis=0)
    if params.shape[0] == 0:
        shape = params.shape[:bd] + indices.shape[bd:] + params.shape[bd + 1 :]
        return np.zeros(shape, params.dtype)
    return np.stack([_ref_gather(p, i, bd - 1) for p, i in zip(params, indices)])


@pytest.mark.parametrize("dtype", ALL, ids=ids)
@pytest.mark.parametrize("index", INDEX, ids=ids)
def test_gather_every_dtype(root, dtype, index):
    params = sample(dtype, (5, 2), seed=5)
    v = Variable(root, params, name="v")
    idx = np.array([[4, 0], [2, 2]], index.np_dtype)
    g = rv.ResourceGather(root, v, idx)
    assert g.shape == mg.TensorShape([2, 2, 2])
    with Session(root) as sess:
        sess.run(v.initializer)
        got = sess.run(g)
    np.testing.assert_array_equal(got, params[idx])
    assert got.dtype == params.dtype


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_gather_with_batch_dims_property(data):
    bd = data.draw(st.integers(0, 2))
    batch = data.draw(st.lists(st.integers(0, 3), min_size=bd, max_size=bd))
    rows = data.draw(st.integers(1, 4))
    inner = data.draw(st.lists(st.integers(0, 3), max_size=2))
    extra = data.draw(st.lists(st.integers(0, 3), max_size=2))
    params = np.arange(int(np.prod(batch + [rows] + inner)), dtype=np.float64).reshape(
        batch + [rows] + inner
    )
    idx_shape = batch + extra
    indices = np.random.default_rng(len(idx_shape)).integers(0, rows, idx_shape)
    scope = Scope.new_root_scope()
    v = Variable(scope, params, name="v")
    g = rv.ResourceGather(scope, v, indices.astype(np.int64), batch_dims=bd)
    want = _ref_gather(params, indices, bd)
    assert g.shape == mg.TensorShape(want.shape)
    with Session(scope) as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(g), want)


def test_gather_scalar_and_empty_indices(root):
    v = Variable(root, np.arange(6.0).reshape(3, 2), name="v")
    scalar, empty = rv.ResourceGather(root, v, 2), rv.ResourceGather(root, v, np.zeros(0, np.int32))
    with Session(root) as sess:
        sess.run(v.initializer)
        a, b = sess.run([scalar, empty])
    assert a.tolist() == [4.0, 5.0] and b.shape == (0, 2)


# -- scatters ----------------------------------------------------------------------------------


def _ref_scatter(table, indices, updates, kind):
    table = table.copy()
    flat = indices.reshape(-1)
    rows = np.broadcast_to(updates, indices.shape + table.shape[1:]).reshape(
        (flat.size,) + table.shape[1:]
    )
    with np.errstate(all="ignore"):
        for i, index in enumerate(flat.tolist()):  # TF's CPU loop, one index after the other
            if kind == "add":
                table[index] = table[index] + rows[i]
            elif kind == "sub":
                table[index] = table[index] - rows[i]
            else:
                table[index] = rows[i]
    return table


SCATTERS = [("add", rv.ResourceScatterAdd, NUMERIC), ("sub", rv.ResourceScatterSub, NUMERIC),
            ("update", rv.ResourceScatterUpdate, ALL)]  # fmt: skip


@pytest.mark.parametrize(
    "kind, builder, dtype",
    [(k, b, d) for k, b, types in SCATTERS for d in types],
    ids=lambda x: x if isinstance(x, str) else getattr(x, "name", None),
)
def test_scatter_every_dtype_with_repeated_indices(root, kind, builder, dtype):
    table = sample(dtype, (5, 2), seed=6)
    indices = np.array([[3, 1], [3, 3]], np.int32)
    updates = sample(dtype, (2, 2, 2), seed=7)
    v = Variable(root, table, name="v")
    (got,) = _run(root, builder(root, v, indices, updates), [v])
    _close(got, _ref_scatter(table, indices, updates, kind), dtype)


@pytest.mark.parametrize(
    "kind, builder", [(k, b) for k, b, _ in SCATTERS], ids=["add", "sub", "update"]
)
def test_scatter_a_scalar_update_to_every_row_named(root, kind, builder):
    table = np.arange(8.0).reshape(4, 2)
    v = Variable(root, table, name="v")
    (got,) = _run(root, builder(root, v, [1, 3, 1], 10.0), [v])
    np.testing.assert_array_equal(got, _ref_scatter(table, np.array([1, 3, 1]), 10.0, kind))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 6), st.integers(0, 3), st.integers(0, 12), st.integers(0, 2**31),
    st.sampled_from(["add", "sub", "update"]),
)  # fmt: skip
def test_scatter_property(rows, inner, n, seed, kind):
    rng = np.random.default_rng(seed)
    table = rng.integers(-5, 5, (rows, inner)).astype(np.float64)
    indices = rng.integers(0, rows, n)
    updates = rng.integers(-5, 5, (n, inner)).astype(np.float64)
    scope = Scope.new_root_scope()
    v = Variable(scope, table, name="v")
    builder = {"add": rv.ResourceScatterAdd, "sub": rv.ResourceScatterSub,
               "update": rv.ResourceScatterUpdate}[kind]  # fmt: skip
    (got,) = _run(scope, builder(scope, v, indices.astype(np.int64), updates), [v])
    np.testing.assert_array_equal(got, _ref_scatter(table, indices, updates, kind))


# -- the apply ops -------------------------------------------------------------------------------


def _c(x):
    return np.asarray(x, np.complex128)


def _ref_dense(op, var, slots, s, g, attrs):
    """The update rules, in complex128 (exact enough to check every dtype)."""
    var, g = _c(var), _c(g)
    slots = [_c(x) for x in slots]
    if op == "ResourceApplyGradientDescent":
        return [var - s["alpha"] * g]
    if op == "ResourceApplyMomentum":
        (a,) = slots
        a = a * s["momentum"] + g
        step = (
            g * s["lr"] + a * s["momentum"] * s["lr"] if attrs.get("use_nesterov") else a * s["lr"]
        )
        return [var - step, a]
    if op == "ResourceApplyAdagrad":
        (a,) = slots
        if attrs.get("update_slots", True):
            a = a + g * g
        return [var - s["lr"] * g / np.sqrt(a), a]
    m, v = slots
    alpha = s["lr"] * np.sqrt(1 - s["beta2_power"]) / (1 - s["beta1_power"])
    m = m + (g - m) * (1 - s["beta1"])
    v = v + (g * g - v) * (1 - s["beta2"])
    num = (g * (1 - s["beta1"]) + s["beta1"] * m) if attrs.get("use_nesterov") else m
    return [var - num * alpha / (np.sqrt(v) + s["epsilon"]), m, v]


def _ref_sparse(op, var, accum, s, g, indices, attrs):
    var, accum, g = _c(var).copy(), _c(accum).copy(), _c(g)
    for i, row in enumerate(indices.tolist()):  # one index after the other, as TF's CPU loop
        if op == "ResourceSparseApplyAdagrad":
            if attrs.get("update_slots", True):
                accum[row] = accum[row] + g[i] * g[i]
            var[row] = var[row] - s["lr"] * g[i] / np.sqrt(accum[row])
        else:
            accum[row] = accum[row] * s["momentum"] + g[i]
            if attrs.get("use_nesterov"):
                var[row] = var[row] - (s["lr"] * g[i] + s["lr"] * accum[row] * s["momentum"])
            else:
                var[row] = var[row] - s["lr"] * accum[row]
    return [var, accum]


DENSE = [
    ("ResourceApplyGradientDescent", {}), ("ResourceApplyMomentum", {}),
    ("ResourceApplyMomentum", {"use_nesterov": True}), ("ResourceApplyAdagrad", {}),
    ("ResourceApplyAdagrad", {"update_slots": False}), ("ResourceApplyAdam", {}),
    ("ResourceApplyAdam", {"use_nesterov": True}),
]  # fmt: skip
SLOTS = {"ResourceApplyMomentum": ("accum",), "ResourceApplyAdagrad": ("accum",),
         "ResourceApplyAdam": ("m", "v")}  # fmt: skip
SCALARS = {
    "ResourceApplyGradientDescent": {"alpha": 0.5},
    "ResourceApplyMomentum": {"lr": 0.5, "momentum": 0.75},
    "ResourceApplyAdagrad": {"lr": 0.5},
    "ResourceApplyAdam": {"beta1_power": 0.5, "beta2_power": 0.25, "lr": 0.5, "beta1": 0.5,
                          "beta2": 0.75, "epsilon": 0.125},
    "ResourceSparseApplyMomentum": {"lr": 0.5, "momentum": 0.75},
    "ResourceSparseApplyAdagrad": {"lr": 0.5},
}  # fmt: skip


def _positive(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 2.0, shape)
    if dtype.is_complex:
        values = values + 0.25j * rng.uniform(0.5, 1.0, shape)
    return values.astype(dtype.np_dtype)


@pytest.mark.parametrize("op, attrs", DENSE, ids=lambda x: x if isinstance(x, str) else str(x))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids)
def test_dense_apply_ops_every_dtype(root, op, attrs, dtype):
    shape = (3, 2)
    var0 = _positive(dtype, shape, 1)
    slots0 = [_positive(dtype, shape, 2 + k) for k, _ in enumerate(SLOTS.get(op, ()))]
    grad = _positive(dtype, shape, 9)
    s = SCALARS[op]
    variables = [Variable(root, var0, name="var")] + [
        Variable(root, x, name=n) for x, n in zip(slots0, SLOTS.get(op, ()))
    ]
    kwargs = dict(zip(SLOTS.get(op, ()), variables[1:]))
    kwargs.update({k: np.array(v, dtype.np_dtype) for k, v in s.items()})
    kwargs["delta" if op == "ResourceApplyGradientDescent" else "grad"] = grad
    node = getattr(rv, op)(root, var=variables[0], **kwargs, **attrs)
    got = _run(root, node, variables)
    want = _ref_dense(op, var0, slots0, s, grad, attrs)
    for g, w in zip(got, want):
        _close(g, w, dtype)


@pytest.mark.parametrize(
    "op, attrs",
    [("ResourceSparseApplyMomentum", {}), ("ResourceSparseApplyMomentum", {"use_nesterov": True}),
     ("ResourceSparseApplyAdagrad", {}), ("ResourceSparseApplyAdagrad", {"update_slots": False})],
    ids=["momentum", "nesterov", "adagrad", "adagrad-no-slots"],
)  # fmt: skip
@pytest.mark.parametrize("dtype", FLOATS, ids=ids)
@pytest.mark.parametrize("index", INDEX, ids=ids)
def test_sparse_apply_ops_every_dtype_with_repeats(root, op, attrs, dtype, index):
    var0, accum0 = _positive(dtype, (5, 2), 1), _positive(dtype, (5, 2), 2)
    indices = np.array([3, 0, 3, 3, 1], index.np_dtype)
    grad = _positive(dtype, (5, 2), 3)
    s = SCALARS[op]
    var = Variable(root, var0, name="var")
    accum = Variable(root.colocate_with(var.op), accum0, name="accum")
    scalars = {k: np.array(v, dtype.np_dtype) for k, v in s.items()}
    node = getattr(rv, op)(root, var, accum, grad=grad, indices=indices, **scalars, **attrs)
    got = _run(root, node, [var, accum])
    want = _ref_sparse(op, var0, accum0, s, grad, indices, attrs)
    for g, w in zip(got, want):
        _close(g, w, dtype)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["ResourceSparseApplyMomentum", "ResourceSparseApplyAdagrad"]),
    st.booleans(), st.integers(1, 6), st.lists(st.integers(0, 2), max_size=2),
    st.integers(0, 20), st.integers(0, 2**31),
)  # fmt: skip
def test_sparse_apply_property_repeats_apply_in_order(op, flag, rows, inner, n, seed):
    rng = np.random.default_rng(seed)
    shape = (rows, *inner)
    if 0 in inner:
        return  # TF refuses empty rows ("Inner dimension should be greater than zero.")
    var0 = rng.uniform(-1, 1, shape)
    accum0 = rng.uniform(0.5, 1, shape)
    indices = rng.integers(0, rows, n)
    grad = rng.uniform(-1, 1, (n, *inner))
    attrs = {"use_nesterov": flag} if "Momentum" in op else {"update_slots": flag}
    scope = Scope.new_root_scope()
    var = Variable(scope, var0, name="var")
    accum = Variable(scope.colocate_with(var.op), accum0, name="accum")
    scalars = SCALARS[op]
    node = getattr(rv, op)(scope, var, accum, grad=grad, indices=indices, **scalars, **attrs)
    got = _run(scope, node, [var, accum])
    want = _ref_sparse(op, var0, accum0, scalars, grad, indices, attrs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.real, rtol=1e-10, atol=1e-12)


def test_an_op_may_update_one_variable_as_two(root):
    # var and accum the same variable (TF allows it): the lock is taken once.
    v = Variable(root, np.full(3, 4.0), name="v")
    (got,) = _run(root, rv.ResourceApplyAdagrad(root, v, v, 1.0, np.ones(3)), [v])
    np.testing.assert_allclose(got, 5.0 - 1.0 / np.sqrt(5.0))


# -- copy-on-write, and sparse updates touching only their rows ---------------------------------


def _var_state(sess):
    ((_, var),) = [item for m in sess.resources.managers().values() for item in m.items()]
    return var


def test_copy_on_write_keeps_reads_and_sparse_updates_in_place(root, cpu_only):
    v = Variable(root, np.zeros((1000, 4), np.float32), name="v")
    read = v.value()
    sparse = rv.ResourceScatterAdd(root, v, [1, 2], np.ones((2, 4), np.float32))
    dense = v.assign_add(np.ones((1000, 4), np.float32), read_value=False)
    with Session(root) as sess:
        sess.run(v.initializer)
        state = _var_state(sess)
        first = sess.run(read)
        assert np.shares_memory(first, state.value) and not first.flags.writeable  # no copy
        sess.run(sparse)  # copies once (a reader holds the array), then owns its array
        table = state.value
        assert table is not first and first.sum() == 0.0
        sess.run(sparse)
        assert state.value is table  # rows updated in place: no copy of the table
        second = sess.run(read)  # copy-on-read from now on
        assert second is not table and second[1].tolist() == [2.0] * 4
        sess.run(sparse)
        assert state.value is table and second[1].tolist() == [2.0] * 4
        sess.run(dense)
        assert state.value is table  # nobody shares it: in place
        assert sess.run(read)[1].tolist() == [4.0] * 4


def test_a_sparse_step_costs_the_rows_it_names_not_the_table(cpu_only):
    def step_time(rows):
        scope = Scope.new_root_scope()
        var = Variable(scope, ops.Fill(scope, [rows, 16], 1.0), name="var")
        accum = Variable(scope.colocate_with(var.op), ops.Fill(scope, [rows, 16], 0.1),
                         name="accum")  # fmt: skip
        ids_ = np.arange(0, 256 * 7, 7, dtype=np.int32) % 1000
        step = rv.ResourceSparseApplyAdagrad(scope, var, accum, 0.1, np.ones((256, 16),
                                             np.float32), ids_)  # fmt: skip
        with Session(scope) as sess:
            sess.run([var.initializer, accum.initializer])
            sess.run(step)
            times = []
            for _ in range(15):
                start = time.perf_counter()
                sess.run(step)
                times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]

    small, large = step_time(1_000), step_time(1_000_000)
    assert large < 5 * small + 2e-3, (small, large)  # a table pass would be ~500x


# -- errors ----------------------------------------------------------------------------------------


def _v(scope, shape=(4, 2), dtype=np.float32, name="v"):
    return Variable(scope, np.zeros(shape, dtype), name=name)


CONSTRUCTION_ERRORS = [
    ("read dtype", lambda s: rv.ReadVariableOp(s, _v(s), mg.int32),
     r"Trying to read variable 'v' with wrong dtype. Expected float32 got int32"),
    ("gather dtype", lambda s: rv.ResourceGather(s, _v(s), [0], dtype=mg.float64),
     "Trying to gather from variable 'v' with wrong dtype. Expected float32 got float64"),
    ("gather negative batch_dims", lambda s: rv.ResourceGather(s, _v(s), [0], batch_dims=-1),
     r"batch_dims is negative \(-1\)"),
    ("gather batch_dims >= rank", lambda s: rv.ResourceGather(s, _v(s), [[0]], batch_dims=2),
     "Shape must be at least rank 3 but is rank 2"),
    ("gather scalar variable", lambda s: rv.ResourceGather(s, _v(s, ()), [0]),
     "Shape must be at least rank 1 but is rank 0"),
    ("gather batch mismatch",
     lambda s: rv.ResourceGather(s, _v(s), np.zeros((3, 1), np.int32), batch_dims=1),
     r"params.shape\[0\]: 4 should be equal to indices.shape\[0\]: 3"),
    ("scatter updates shape", lambda s: rv.ResourceScatterAdd(s, _v(s), [1], np.ones((1, 3))),
     r"Must have updates.shape = indices.shape \+ params.shape\[1:\] or updates.shape = \[\], "
     r"got updates.shape \[1,3\], indices.shape \[1\], params.shape \[4,2\] \(variable 'v'\)"),
    ("scatter scalar variable", lambda s: rv.ResourceScatterUpdate(s, _v(s, ()), [0], 1.0),
     "Shape must be at least rank 1 but is rank 0"),
    ("scatter dtype",
     lambda s: rv.ResourceScatterAdd(s, _v(s), [0], ops.Const(s, np.ones((1, 2), np.int32))),
     "Trying to scatter into variable 'v' with wrong dtype. Expected float32 got int32"),
    ("apply lr not scalar", lambda s: rv.ResourceApplyGradientDescent(s, _v(s), [0.1],
                                                                      np.ones((4, 2))),
     r"alpha is not a scalar: \[1\]"),
    ("apply grad shape", lambda s: rv.ResourceApplyGradientDescent(s, _v(s), 0.1, np.ones((1, 2))),
     r"var and delta do not have the same shape: variable 'v' is \[4,2\] and delta is \[1,2\]"),
    ("apply accum shape",
     lambda s: rv.ResourceApplyAdagrad(s, _v(s), _v(s, (2, 2), name="a"), 0.1, np.ones((4, 2))),
     r"var and accum do not have the same shape: variable 'v' is \[4,2\] and accum 'a' is "
     r"\[2,2\]"),
    ("apply accum dtype",
     lambda s: rv.ResourceApplyAdagrad(s, _v(s), _v(s, dtype=np.float64, name="a"), 0.1,
                                       np.ones((4, 2), np.float32)),
     "Trying to update variable 'a' with wrong dtype. Expected float64 got float32"),
    ("apply var dtype",
     lambda s: rv.ResourceApplyGradientDescent(
         s, _v(s), 0.1, ops.Const(s, np.ones((4, 2), np.float64))),
     "Trying to update variable 'v' with wrong dtype. Expected float32 got float64"),
    ("sparse indices rank",
     lambda s: rv.ResourceSparseApplyAdagrad(s, _v(s), _v(s, name="a"), 0.1, np.ones((1, 2)),
                                             [[0]]),
     "Shape must be rank 1 but is rank 2"),
    ("sparse grad rows",
     lambda s: rv.ResourceSparseApplyAdagrad(s, _v(s), _v(s, name="a"), 0.1, np.ones((2, 2)),
                                             [0]),
     "grad must be the same size as indices in the first dimension"),
    ("sparse grad inner",
     lambda s: rv.ResourceSparseApplyMomentum(s, _v(s), _v(s, name="a"), 0.1, np.ones((1, 3)),
                                              [0], 0.9),
     r"var and grad must match in every dimension but the first: variable 'v' is \[4,2\] and "
     r"grad is \[1,3\]"),
    ("handle not scalar",
     lambda s: rv.ReadVariableOp(s, ops.Placeholder(s, mg.resource, [2]), mg.float32),
     r"a resource handle is a scalar; input 0 has shape \[2\]"),
    ("variable of handles", lambda s: rv.VarHandleOp(s, dtype=mg.resource, shape=[]),
     "a variable cannot hold resource handles"),
    ("Const of a handle", lambda s: ops.Const(s, 1, dtype=mg.resource),
     "cannot convert 1 to a resource tensor"),
]  # fmt: skip


@pytest.mark.parametrize(
    "build, message", [c[1:] for c in CONSTRUCTION_ERRORS], ids=[c[0] for c in CONSTRUCTION_ERRORS]
)
def test_construction_errors(root, build, message):
    with pytest.raises(mg.InvalidArgumentError, match=message):
        build(root)


RUN_TIME_ERRORS = [
    ("gather out of range", "gather", {"indices": [1, 5]},
     r"indices\[1\] = 5 is not in \[0, 4\)"),
    ("gather negative", "gather", {"indices": [[0, -1]]},
     r"indices\[0,1\] = -1 is not in \[0, 4\)"),
    ("scatter out of range", "scatter", {"indices": [4], "updates": np.ones((1, 2))},
     r"indices\[0\] = 4 is not in \[0, 4\)"),
    ("scatter updates shape", "scatter", {"indices": [0, 1], "updates": np.ones((2, 3))},
     r"Must have updates.shape = indices.shape \+ params.shape\[1:\] or updates.shape = \[\], got "
     r"updates.shape \[2,3\], indices.shape \[2\], params.shape \[4,2\]"),
    ("lr not scalar", "apply", {"lr": [0.1], "grad": np.ones((4, 2))},
     r"alpha is not a scalar: \[1\]"),
    ("grad shape", "apply", {"lr": 0.1, "grad": np.ones((1, 2))},
     r"var and delta do not have the same shape\[4,2\] \[1,2\]"),
    ("sparse out of range", "sparse", {"indices": [0, 7], "grad": np.ones((2, 2))},
     "Index 7 at offset 1 in indices is out of range"),
    ("sparse negative", "sparse", {"indices": [-1], "grad": np.ones((1, 2))},
     "Index -1 at offset 0 in indices is out of range"),
    ("sparse indices rank", "sparse", {"indices": [[0]], "grad": np.ones((1, 2))},
     "indices must be one-dimensional"),
    ("sparse grad rows", "sparse", {"indices": [0], "grad": np.ones((2, 2))},
     "grad must be the same size as indices in the first dimension."),
    ("sparse grad inner", "sparse", {"indices": [0], "grad": np.ones((1, 3))},
     "var and grad must match in dimension 1"),
    ("sparse grad rank", "sparse", {"indices": [0], "grad": 1.0},
     "grad must have the same number of dimensions as var"),
]  # fmt: skip


@pytest.mark.parametrize(
    "kind, feeds, message", [c[1:] for c in RUN_TIME_ERRORS], ids=[c[0] for c in RUN_TIME_ERRORS]
)
def test_run_time_errors(root, kind, feeds, message):
    v = _v(root)
    accum = Variable(root.colocate_with(v.op), np.ones((4, 2), np.float32), name="accum")
    holders = {
        "indices": ops.Placeholder(root, mg.int32, None),
        "updates": ops.Placeholder(root, mg.float32, None),
        "lr": ops.Placeholder(root, mg.float32, None),
        "grad": ops.Placeholder(root, mg.float32, None),
    }
    node = {
        "gather": lambda: rv.ResourceGather(root, v, holders["indices"]),
        "scatter": lambda: rv.ResourceScatterAdd(root, v, holders["indices"], holders["updates"]),
        "apply": lambda: rv.ResourceApplyGradientDescent(root, v, holders["lr"], holders["grad"]),
        "sparse": lambda: rv.ResourceSparseApplyAdagrad(
            root, v, accum, 0.1, holders["grad"], holders["indices"]
        ),
    }[kind]()
    with Session(root) as sess:
        sess.run([v.initializer, accum.initializer])
        with pytest.raises(mg.InvalidArgumentError, match=message) as info:
            sess.run(node, {holders[k]: x for k, x in feeds.items()})
        assert info.value.node_name == node.operation.name
        assert sess.run(v).tolist() == [[0, 0]] * 4  # nothing written


def test_inner_dimension_zero_and_scalar_variables_are_refused_at_run_time(root):
    empty = Variable(root, np.zeros((3, 0), np.float32), name="empty")
    scalar = Variable(root, np.float32(1.0), name="scalar")
    bad_rows = rv.ResourceSparseApplyAdagrad(root, empty, empty, 0.1, np.zeros((1, 0)), [0])
    h = ops.Placeholder(root, mg.resource, None)
    bad_rank = rv.ResourceSparseApplyAdagrad(root, h, h, 0.1, np.ones(1, np.float32), [0])
    with Session(root) as sess:
        sess.run([empty.initializer, scalar.initializer])
        with pytest.raises(mg.InvalidArgumentError, match="Inner dimension should be greater"):
            sess.run(bad_rows)
        with pytest.raises(mg.InvalidArgumentError, match="var must be at least 1 dimensional"):
            sess.run(bad_rank, {h: sess.run(scalar.handle)})


def test_fed_handles_are_checked(root):
    h = ops.Placeholder(root, mg.resource, [])
    read = rv.ReadVariableOp(root, h, mg.float32)
    v = Variable(root, [1.0], name="v")
    with Session(root) as sess:
        sess.run(v.initializer)
        assert sess.run(read, {h: sess.run(v.handle)}).tolist() == [1.0]
        with pytest.raises(mg.InvalidArgumentError, match="must be a scalar resource handle"):
            sess.run(read, {h: np.array(3, dtype=object)})
        elsewhere = ResourceHandle("/job:ps/replica:0/task:0/device:CPU:0", "", "v", mg.float32,
                                   mg.TensorShape([1]))  # fmt: skip
        with pytest.raises(
            mg.InvalidArgumentError,
            match="Trying to access resource v located "
            "in device /job:ps/replica:0/task:0/device:CPU:0 from device",
        ):
            sess.run(read, {h: handle_value(elsewhere)})
        wrong = ResourceHandle(sess.run(v.handle)[()].device, "", "v", mg.float64,
                               mg.TensorShape([1]))  # fmt: skip
        with pytest.raises(mg.InvalidArgumentError, match="Trying to assign variable with wrong"):
            sess.run(rv.AssignVariableOp(root, h, [1.0]), {h: handle_value(wrong)})


def test_kernels_outside_a_session_say_so():
    from minigraph import KernelContext
    from minigraph.devices import CpuDevice

    ctx = KernelContext(CpuDevice(0), "read", "ReadVariableOp")
    handle = handle_value(
        ResourceHandle(CpuDevice(0).name, "", "v", mg.float32, mg.TensorShape([]))
    )
    kernel = mg.registry.find_kernel("ReadVariableOp", "CPU", {"dtype": mg.float32}, "", "r").fn
    with pytest.raises(mg.FailedPreconditionError, match="needs a session's resources"):
        kernel(ctx, handle, dtype=mg.float32)
