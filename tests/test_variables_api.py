"""`minigraph.Variable` and the graph's variable lists: nodes and names (TF's), reads (fresh
per use, in the consuming scope), assigns and their checks, fetches and feeds, operators,
state per session (uninitialized at first, dropped by close), placement (colocated with the
handle; a GPU keeps the value), and gradients with respect to a variable."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import minigraph as mg
import minigraph.testing
import ops
import ops.resource_variables as rv
from minigraph import Scope, Session, Variable


@pytest.fixture
def root():
    return Scope.new_root_scope()


def _init(sess, scope):
    sess.run(mg.global_variables_initializer(scope))


# -- nodes and names ---------------------------------------------------------------------------


def test_nodes_and_names_are_tensorflows(root):
    v = Variable(root, [1.0, 2.0, 3.0], name="v")
    nodes = [(op.name, op.type) for op in root.graph.operations]
    assert nodes == [
        ("v/Initializer/initial_value", "Const"),
        ("v", "VarHandleOp"),
        ("v/IsInitialized/VarIsInitializedOp", "VarIsInitializedOp"),
        ("v/Assign", "AssignVariableOp"),
        ("v/Read/ReadVariableOp", "ReadVariableOp"),
    ]
    assert v.name == "v:0"
    assert v.op.name == "v" and v.op.type == "VarHandleOp"
    assert v.handle is v.op.outputs[0] and v.handle.dtype is mg.resource
    assert v.initializer.name == "v/Assign"
    assert v.value().name == "v/Read/ReadVariableOp:0"
    assert v.is_initialized().name == "v/IsInitialized/VarIsInitializedOp:0"
    assert v.initial_value.name == "v/Initializer/initial_value:0"
    assert v.dtype is mg.float32 and v.shape == mg.TensorShape([3])
    assert v.get_shape() == v.shape and v.graph is root.graph and v.device == ""
    assert v.op.get_attr("shared_name") == "v" and v.op.get_attr("container") == ""
    assert v.op.get_attr("shape") == mg.TensorShape([3])
    assert repr(v) == "<minigraph.Variable 'v:0' shape=[3] dtype=float32>"


def test_names_are_unique_and_nest_in_name_scopes(root):
    a = Variable(root, 1.0)
    b = Variable(root, 2.0)
    c = Variable(root.new_sub_scope("layer"), 3.0, name="w")
    d = Variable(root.new_sub_scope("layer"), 3.0, name="w")
    assert [a.name, b.name, c.name, d.name] == [
        "Variable:0", "Variable_1:0", "layer/w:0", "layer_1/w:0",
    ]  # fmt: skip
    assert b.op.get_attr("shared_name") == "Variable_1"
    # The name's sub-scope exists: later nodes named like it are made unique.
    x = ops.Identity(root.with_op_name("Variable"), 1.0)
    assert x.operation.name == "Variable_2"


def test_every_node_a_variable_builds_is_colocated_with_its_handle(root):
    v = Variable(root.with_device("/cpu:0"), np.zeros((2, 2), np.float32), name="v")
    built = [
        v.read_value(), v.assign([[1.0, 2.0], [3.0, 4.0]]), v.assign_add(np.ones((2, 2))),
        v.assign_sub(np.ones((2, 2)), read_value=False), v.sparse_read([1]), v + 1.0,
    ]  # fmt: skip
    ops_ = {getattr(x, "op", x) for x in built}
    for op in root.graph.operations:
        if op is not v.op and op.type != "Const" or op.name.startswith("v/"):
            if any(t is v.handle for t in op.inputs) or op.name.startswith("v/"):
                assert op.colocation_group == "v", op.name
    assert ops_
    assert v.op.requested_device.device_type == "CPU"
    # Reads and updates take no device request of their own: they follow the handle.
    assert all(op.requested_device is None for op in ops_ if op is not v.op)


def test_a_variable_made_in_a_colocated_scope_joins_that_group(root):
    v = Variable(root, np.zeros(3, np.float32), name="v")
    slot = Variable(root.colocate_with(v.op), np.zeros(3, np.float32), name="v_slot")
    assert slot.op.colocation_group == "v"
    assert slot.value().op.colocation_group == "v"


def test_the_variable_ignores_the_scopes_control_dependencies(root):
    gate = ops.NoOp(root)
    v = Variable(root.with_control_dependencies([gate]), 1.0, name="v")
    assert v.op.control_inputs == () and v.initializer.control_inputs == ()


def test_variable_lists_per_graph(root):
    a = Variable(root, 1.0, name="a")
    b = Variable(root, 2.0, name="b", trainable=False)
    other = Scope.new_root_scope()
    c = Variable(other, 3.0, name="c")
    assert mg.global_variables(root.graph) == [a, b]
    assert mg.global_variables(root) == [a, b]
    assert mg.trainable_variables(root.graph) == [a]
    assert mg.global_variables(other.graph) == [c]
    assert mg.global_variables(Scope.new_root_scope().graph) == []
    with pytest.raises(mg.InvalidArgumentError, match="takes a Graph or a Scope"):
        mg.global_variables(a)


def test_a_graph_is_not_kept_alive_by_its_variable_list():
    scope = Scope.new_root_scope()
    Variable(scope, 1.0)
    ref = weakref.ref(scope.graph)
    del scope
    gc.collect()
    assert ref() is None


def test_global_variables_initializer_is_a_noop_init_depending_on_every_initializer(root):
    a = Variable(root, 1.0, name="a")
    b = Variable(root, 2.0, name="b")
    init = mg.global_variables_initializer(root.with_control_dependencies([ops.NoOp(root)]))
    assert init.name == "init" and init.type == "NoOp"
    assert set(init.control_inputs) == {a.initializer, b.initializer}
    empty = mg.global_variables_initializer(Scope.new_root_scope())
    assert empty.type == "NoOp" and empty.control_inputs == ()
    some = mg.variables_initializer(root, [b], name="init_b")
    assert some.name == "init_b" and some.control_inputs == (b.initializer,)
    with Session(root) as sess:
        sess.run(some)
        assert sess.run(b) == 2.0
        with pytest.raises(mg.FailedPreconditionError, match="variable a"):
            sess.run(a)


# -- construction --------------------------------------------------------------------------------


def test_initial_values_and_dtypes(root):
    a = Variable(root, [1, 2], name="a")  # Python ints: int32, as tf.constant
    b = Variable(root, [1, 2], dtype=mg.float64, name="b")
    c = Variable(root, np.array([1.5], np.float16), name="c")
    d = Variable(root, ops.Const(root, [b"x", b"yz"]), name="d")
    e = Variable(root, lambda s: ops.Fill(s, [2, 2], 7.0), name="e")
    f = Variable(root, a, name="f")  # another variable: read when f's initializer runs
    assert (a.dtype, b.dtype, c.dtype, d.dtype, e.dtype, f.dtype) == (
        mg.int32, mg.float64, mg.float16, mg.string, mg.float32, mg.int32,
    )  # fmt: skip
    assert e.initial_value.op.name.startswith("e/Initializer/")
    with Session(root) as sess:
        sess.run([a.initializer, b.initializer, c.initializer, d.initializer, e.initializer])
        sess.run(f.initializer)
        got = sess.run([a, b, c, d, e, f])
    assert got[0].tolist() == [1, 2] and got[1].dtype == np.float64
    assert got[3].tolist() == [b"x", b"yz"]
    np.testing.assert_array_equal(got[4], np.full((2, 2), 7.0, np.float32))
    assert got[5].tolist() == [1, 2]


def test_declared_shapes(root):
    x = ops.Placeholder(root, mg.float32, [None, 2])
    v = Variable(root, x, shape=[None, 2], name="v")
    any_shape = Variable(root, [1.0], shape=mg.TensorShape(None), name="any")
    assert v.shape == mg.TensorShape([None, 2])
    with Session(root) as sess:
        sess.run(v.initializer, {x: np.ones((3, 2), np.float32)})
        assert sess.run(v).shape == (3, 2)
        sess.run(any_shape.initializer)
        sess.run(any_shape.assign(ops.Const(root, [1.0, 2.0, 3.0])))
        assert sess.run(any_shape).tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"initial_value": None}, "initial_value must be given"),
        ({"initial_value": 1.0, "name": "a/b"}, "invalid variable name"),
        ({"initial_value": 1.0, "name": ""}, "invalid variable name"),
        ({"initial_value": 1.0, "trainable": 1}, "trainable must be a bool"),
        ({"initial_value": [1.5], "dtype": mg.int32}, "cannot convert the initial value"),
        ({"initial_value": 1.0, "dtype": mg.resource}, "cannot hold resource handles"),
        ({"initial_value": [1.0, 2.0], "shape": [3]}, r"initial value's shape \(\[2\]\) is not "
         r"compatible with the explicitly supplied `shape` argument \(\[3\]\)"),
        ({"initial_value": "float64 tensor", "dtype": mg.float32},
         "dtype float32 was asked for, but the initial value 'Const:0' is float64"),
        ({"initial_value": "unknown shape"}, "not fully known: give the variable's shape"),
        ({"initial_value": [[1.0], [2.0, 3.0]]}, "ragged"),
        ({"initial_value": "an op"}, "is the Operation"),
    ],
)  # fmt: skip
def test_construction_errors(root, kwargs, message):
    if kwargs["initial_value"] == "float64 tensor":
        kwargs["initial_value"] = ops.Const(root, np.float64(1.0))
    elif kwargs["initial_value"] == "unknown shape":
        kwargs["initial_value"] = ops.Placeholder(root, mg.float32, [None])
    elif kwargs["initial_value"] == "an op":
        kwargs["initial_value"] = ops.NoOp(root).operation
    before = len(root.graph.operations)
    with pytest.raises(mg.InvalidArgumentError, match=message):
        Variable(root, **kwargs)
    assert len(root.graph.operations) == before  # the graph is left as it was
    assert mg.global_variables(root) == []


def test_a_scope_is_required():
    with pytest.raises(mg.InvalidArgumentError, match="first argument must be a Scope"):
        Variable([1.0], 1.0)


def test_an_initial_value_of_another_graph_is_refused(root):
    other = ops.Const(Scope.new_root_scope(), 1.0)
    with pytest.raises(mg.InvalidArgumentError, match="belongs to another graph"):
        Variable(root, other)


# -- reads -------------------------------------------------------------------------------------


def test_uses_read_afresh_in_the_consuming_scope(root):
    v = Variable(root, 2.0, name="v")
    inner = root.new_sub_scope("inner")
    y = ops.Mul(inner, v, 3.0)
    read = y.operation.inputs[0].op
    assert read.type == "ReadVariableOp" and read.name == "inner/ReadVariableOp"
    z = ops.Mul(inner, v, 4.0)
    assert z.operation.inputs[0].op is not read  # one read per use, as TF
    assert v.read_value().op.name == "Read/ReadVariableOp"
    assert v.read_value(inner).op.name == "inner/Read/ReadVariableOp"


def test_reads_take_the_scopes_control_dependencies(root):
    v = Variable(root, 1.0, name="v")
    bump = v.assign_add(10.0, read_value=False)
    after = ops.Identity(root.with_control_dependencies([bump]), v)
    assert after.operation.inputs[0].op.control_inputs == (bump,)
    with Session(root) as sess:
        _init(sess, root)
        assert sess.run(after) == 11.0  # the read runs after the assign
        assert sess.run(after) == 21.0


def test_a_value_read_never_changes(root, cpu_only):
    v = Variable(root, np.zeros(3, np.float32), name="v")
    with Session(root) as sess:
        _init(sess, root)
        first = sess.run(v)
        sess.run(v.assign_add(np.ones(3, np.float32)))
        second = sess.run(v)
        sess.run(v.assign_add(np.ones(3, np.float32)))
    assert first.tolist() == [0, 0, 0] and second.tolist() == [1, 1, 1]
    assert not first.flags.writeable  # the variable's own host array, shared: read-only


def test_fetching_and_feeding_a_variable_use_its_own_read(root):
    v = Variable(root, [1.0, 2.0], name="v")
    doubled = ops.Mul(root, v.value(), 2.0)
    fresh = ops.Mul(root, v, 2.0)
    with Session(root) as sess:
        _init(sess, root)
        assert sess.run(v).tolist() == [1.0, 2.0]
        assert sess.run({"v": v, "list": [v, v]})["list"][1].tolist() == [1.0, 2.0]
        # Feeding the variable replaces its own read (what consumes v.value()), as TF.
        assert sess.run(doubled, {v: [5.0, 5.0]}).tolist() == [10.0, 10.0]
        assert sess.run(fresh, {v: [5.0, 5.0]}).tolist() == [2.0, 4.0]


def test_tensor_operators_read_the_variable(root):
    v = Variable(root, np.array([1.0, -2.0], np.float32), name="v")
    m = Variable(root, np.eye(2, dtype=np.float32), name="m")
    exprs = [v + 1, 1 + v, v - v, v * 2, 2 / v, -v, abs(v), v[1:], v < 0, m @ m, m[0, 1]]
    with Session(root) as sess:
        _init(sess, root)
        got = sess.run(exprs)
    assert got[0].tolist() == [2.0, -1.0] and got[1].tolist() == [2.0, -1.0]
    assert got[2].tolist() == [0.0, 0.0] and got[3].tolist() == [2.0, -4.0]
    assert got[4].tolist() == [2.0, -1.0] and got[5].tolist() == [-1.0, 2.0]
    assert got[6].tolist() == [1.0, 2.0] and got[7].tolist() == [-2.0]
    assert got[8].tolist() == [False, True]
    np.testing.assert_array_equal(got[9], np.eye(2)) and got[10] == 0.0
    with pytest.raises(TypeError, match="symbolic"):
        bool(v)
    with pytest.raises(TypeError, match="symbolic"):
        np.asarray(v)
    with pytest.raises(TypeError, match="not iterable"):
        iter(v)


def test_a_variable_of_another_graph_cannot_be_an_input(root):
    v = Variable(Scope.new_root_scope(), 1.0)
    before = len(root.graph.operations)
    with pytest.raises(mg.InvalidArgumentError, match="belongs to another graph"):
        ops.Mul(root, v, 2.0)
    assert len(root.graph.operations) == before


def test_a_node_that_fails_to_build_leaves_no_read_behind(root):
    v = Variable(root, np.zeros((2, 3), np.float32), name="v")
    before = len(root.graph.operations)
    with pytest.raises(mg.InvalidArgumentError):
        ops.MatMul(root, v, np.zeros((2, 3), np.float32))  # inner dims 3 vs 2
    assert len(root.graph.operations) == before


def test_literals_next_to_a_variable_take_its_dtype(root):
    v = Variable(root, np.array([1.0], np.float64), name="v")
    y = ops.AddV2(root, 1, v)  # the literal comes first
    assert y.dtype is mg.float64


# -- assigns -------------------------------------------------------------------------------------


def test_assigns_return_a_read_of_the_new_value(root):
    v = Variable(root, [1.0, 2.0], name="v")
    with Session(root) as sess:
        _init(sess, root)
        assert sess.run(v.assign([3.0, 4.0])).tolist() == [3.0, 4.0]
        assert sess.run(v.assign_add([1.0, 1.0])).tolist() == [4.0, 5.0]
        assert sess.run(v.assign_sub([0.5, 0.5])).tolist() == [3.5, 4.5]
        op = v.assign([0.0, 0.0], read_value=False, name="zero")
        assert isinstance(op, mg.Operation) and op.name == "zero"
        assert sess.run(op) is None and sess.run(v).tolist() == [0.0, 0.0]
        w = Variable(root, [9.0, 9.0], name="w")
        sess.run(w.initializer)
        assert sess.run(v.assign(w)).tolist() == [9.0, 9.0]  # a variable as the value


@pytest.mark.parametrize(
    "value, message",
    [
        (np.array([1, 2], np.int32), r"Cannot assign a int32 value \('Const:0'\) to variable "
         r"'v:0' of dtype float32"),
        ("float64 placeholder", "Cannot assign a float64 value"),
        (np.zeros(3, np.float32), r"Cannot assign a value of shape \[3\] \('Const:0'\) to "
         r"variable 'v:0' of shape \[2\]"),
        ([[1.0, 2.0]], r"Trying to assign to variable 'v' of shape \[2\] a value of shape "
         r"\[1,2\]: the shapes are incompatible"),
        ([1.0, 2.0, 3.0], r"of shape \[2\] a value of shape \[3\]"),
    ],
)  # fmt: skip
def test_wrong_assigns_are_refused_at_construction_naming_both(root, value, message):
    v = Variable(root, [1.0, 2.0], name="v")
    if isinstance(value, np.ndarray):
        value = ops.Const(root, value)
    elif value == "float64 placeholder":
        value = ops.Placeholder(root, mg.float64, [2])
    before = len(root.graph.operations)
    with pytest.raises(mg.InvalidArgumentError, match=message):
        v.assign(value)
    assert len(root.graph.operations) == before


def test_wrong_raw_assign_ops_are_refused_at_construction(root):
    v = Variable(root, [1.0, 2.0], name="v")
    with pytest.raises(mg.InvalidArgumentError, match=r"Trying to assign to variable 'v' with "
                       "wrong dtype. Expected float32 got int32"):  # fmt: skip
        rv.AssignVariableOp(root, v.handle, ops.Const(root, [1, 2]))
    with pytest.raises(mg.InvalidArgumentError, match=r"Trying to add to variable 'v' of shape"):
        rv.AssignAddVariableOp(root, v, ops.Const(root, [1.0]))
    with pytest.raises(mg.InvalidArgumentError, match="Trying to read variable 'v' with wrong "
                       "dtype. Expected float32 got int64"):  # fmt: skip
        rv.ReadVariableOp(root, v, mg.int64)


def test_wrong_assigns_are_refused_at_run_time_naming_both(root):
    v = Variable(root, [1.0, 2.0], name="v")
    x = ops.Placeholder(root, mg.float32, None)
    assign, add = v.assign(x), v.assign_add(x)
    with Session(root) as sess:
        _init(sess, root)
        with pytest.raises(
            mg.InvalidArgumentError,
            match=r"Trying to assign to variable v of shape \[2\] a value of shape \[3\]",
        ):
            sess.run(assign, {x: [1.0, 2.0, 3.0]})
        with pytest.raises(
            mg.InvalidArgumentError,
            match=r"Cannot update variable with shape \[2\] using a Tensor with shape \[1\]",
        ):
            sess.run(add, {x: [1.0]})
        assert sess.run(v).tolist() == [1.0, 2.0]  # nothing changed


def test_validate_shape_checks_the_current_shape(root):
    v = Variable(root, [1.0], shape=[None], name="v")
    x = ops.Placeholder(root, mg.float32, [None])
    strict = rv.AssignVariableOp(root, v, x, validate_shape=True)
    with Session(root) as sess:
        _init(sess, root)
        with pytest.raises(
            mg.InvalidArgumentError,
            match=r"Trying to assign to variable with tensor with wrong shape. Expected \[1\] "
            r"got \[2\]",
        ):
            sess.run(strict, {x: [1.0, 2.0]})
        sess.run(v.assign(x), {x: [1.0, 2.0]})  # validate_shape=False: the shape may change
        assert sess.run(v).tolist() == [1.0, 2.0]


# -- state per session ---------------------------------------------------------------------------


def test_reading_an_uninitialized_variable_names_it(root):
    v = Variable(root.new_sub_scope("layer"), 1.0, name="w")
    with Session(root) as sess:
        with pytest.raises(
            mg.FailedPreconditionError,
            match=r"Could not find variable layer/w\. This could mean that the variable has "
            r"been deleted\. In TF1, it can also mean the variable is uninitialized",
        ) as info:
            sess.run(v)
        assert info.value.node_name == "layer/w/Read/ReadVariableOp"
        assert not sess.run(v.is_initialized())
        sess.run(v.initializer)
        assert sess.run(v.is_initialized())


@pytest.mark.parametrize(
    "build",
    [
        lambda s, v: v.assign_add([1.0]),
        lambda s, v: v.sparse_read([0]),
        lambda s, v: rv.ResourceScatterAdd(s, v, [0], [1.0]),
        lambda s, v: rv.ResourceApplyGradientDescent(s, v, 0.1, [1.0]),
        lambda s, v: rv.ResourceSparseApplyAdagrad(s, v, v, 0.1, [1.0], [0]),
        lambda s, v: rv.VariableShape(s, v),
    ],
    ids=["assign_add", "gather", "scatter", "apply", "sparse apply", "shape"],
)
def test_every_op_on_an_uninitialized_variable_names_it(root, build):
    v = Variable(root, [1.0], name="v")
    node = build(root, v)
    with Session(root) as sess:
        with pytest.raises(mg.FailedPreconditionError, match="Could not find variable v"):
            sess.run(node)


def test_sessions_do_not_share_state(root):
    v = Variable(root, [1.0], name="v")
    bump = v.assign_add([1.0])
    with Session(root) as a, Session(root) as b:
        _init(a, root)
        a.run(bump)
        with pytest.raises(mg.FailedPreconditionError):
            b.run(v)
        _init(b, root)
        assert a.run(v).tolist() == [2.0] and b.run(v).tolist() == [1.0]


def test_close_drops_the_state(root, cpu_only):
    v = Variable(root, np.zeros(1000, np.float32), name="v")
    sess = Session(root)
    _init(sess, root)
    sess.run(v.assign_add(np.ones(1000, np.float32)))
    assert len(sess.resources) == 1
    (mgr,) = sess.resources.managers().values()
    ((_, var),) = mgr.items()
    value = weakref.ref(var.value)
    del var, mgr
    sess.close()
    assert len(sess.resources) == 0
    gc.collect()
    assert value() is None  # the memory is released
    with pytest.raises(mg.FailedPreconditionError, match="closed Session"):
        sess.run(v)


def test_destroy_resource_op_drops_one_variable(root):
    v = Variable(root, [1.0], name="v")
    destroy = rv.DestroyResourceOp(root, v)
    strict = rv.DestroyResourceOp(root, v, ignore_lookup_error=False)
    with Session(root) as sess:
        _init(sess, root)
        sess.run(destroy)
        assert not sess.run(v.is_initialized())
        sess.run(destroy)  # already gone: ignored by default
        with pytest.raises(mg.NotFoundError, match="Resource localhost/v/<unknown> does not exist"):
            sess.run(strict)


def test_variables_with_a_shared_name_share_state(root):
    a = rv.VarHandleOp(root, dtype=mg.float32, shape=[], shared_name="same")
    b = rv.VarHandleOp(root, dtype=mg.float32, shape=[], shared_name="same")
    c = rv.VarHandleOp(root, dtype=mg.float32, shape=[])  # named after its node
    write = rv.AssignVariableOp(root, a, 3.0)
    with Session(root) as sess:
        sess.run(write)
        assert sess.run(rv.ReadVariableOp(root, b)) == 3.0
        with pytest.raises(mg.FailedPreconditionError, match="variable VarHandleOp_2"):
            sess.run(rv.ReadVariableOp(root, c))
        handle = sess.run(a)
    assert handle.shape == () and handle[()].name == "same"


# -- devices -------------------------------------------------------------------------------------


def test_a_variable_on_a_gpu_keeps_its_value_there(sim_gpus):
    cpu, gpu0, gpu1 = sim_gpus
    root = Scope.new_root_scope()
    v = Variable(root.with_device("/gpu:1"), np.arange(4, dtype=np.float32), name="v")
    y = ops.Mul(root, v, 2.0)
    with Session(root) as sess:
        _init(sess, root)
        meta = mg.RunMetadata()
        sess.run(v.assign_add(np.ones(4, np.float32)), run_metadata=meta)
        assert meta.placement["v"].endswith("GPU:1")
        (device,) = [d for d, m in sess.resources.managers().items() if len(m)]
        assert device.endswith("GPU:1")
        (var,) = [r for _, r in sess.resources.manager(device).items()]
        assert isinstance(var.value, minigraph.testing.SimulatedArray)
        gpu1.reset_counters()
        assert sess.run(v).tolist() == [1.0, 2.0, 3.0, 4.0]
        assert gpu1.copies_out == 1  # a read copies the value out, the variable stays
        assert sess.run(y).tolist() == [2.0, 4.0, 6.0, 8.0]


def test_a_variable_of_strings_stays_on_the_cpu(sim_gpus):
    root = Scope.new_root_scope()
    v = Variable(root, [b"a", b"b"], name="v")
    with Session(root) as sess:
        meta = mg.RunMetadata()
        sess.run(v.initializer, run_metadata=meta)
        assert meta.placement["v"].endswith("CPU:0")
        assert sess.run(v).tolist() == [b"a", b"b"]


def test_soft_placement_moves_a_gpu_variable_to_the_cpu(cpu_only):
    root = Scope.new_root_scope()
    v = Variable(root.with_device("/gpu:0"), [1.0], name="v")
    with Session(root) as sess:
        meta = mg.RunMetadata()
        sess.run(v.initializer, run_metadata=meta)
        assert meta.placement["v"].endswith("CPU:0")
        assert sess.run(v).tolist() == [1.0]


# -- gradients -----------------------------------------------------------------------------------


def test_the_gradient_with_respect_to_a_variable_is_dense_for_reads(root):
    v = Variable(root, np.array([1.0, 2.0, 3.0]), name="v")
    loss = ops.Sum(root, ops.Mul(root, v, v), [0])
    (g,) = mg.gradients(loss, v)
    assert isinstance(g, mg.Output) and g.dtype is mg.float64 and g.shape == v.shape
    with Session(root) as sess:
        _init(sess, root)
        np.testing.assert_allclose(sess.run(g), [2.0, 4.0, 6.0])


def test_the_gradient_of_a_gather_of_a_variable_is_indexed_slices(root):
    v = Variable(root, np.ones((4, 2), np.float32), name="v")
    rows = ops.gather(root, v, [3, 0, 3])
    assert rows.operation.type == "ResourceGather"
    (g,) = mg.gradients(ops.Sum(root, rows, [0, 1]), [v])
    assert isinstance(g, mg.IndexedSlices)
    with Session(root) as sess:
        _init(sess, root)
        value = sess.run(g)
    assert value.indices.tolist() == [3, 0, 3] and value.dense_shape.tolist() == [4, 2]
    np.testing.assert_array_equal(value.values, np.ones((3, 2)))


def test_dense_and_sparse_gradients_of_one_variable_add_up(root):
    v = Variable(root, np.ones((3, 2), np.float32), name="v")
    loss = ops.AddV2(root, ops.Sum(root, v, [0, 1]), ops.Sum(root, v.sparse_read([2, 2]), [0, 1]))
    (g,) = mg.gradients(loss, v)
    with Session(root) as sess:
        _init(sess, root)
        np.testing.assert_array_equal(sess.run(g), [[1, 1], [1, 1], [3, 3]])


def test_gradients_of_batched_gathers_and_unconnected_variables(root):
    v = Variable(root, np.arange(12, dtype=np.float64).reshape(2, 3, 2), name="v")
    idx = ops.Const(root, np.array([[2, 2], [0, 1]], np.int64))
    rows = rv.ResourceGather(root, v, idx, batch_dims=1)
    other = Variable(root, [1.0], name="other")
    g, none, zero = mg.gradients(ops.Sum(root, rows, [0, 1, 2]), [v, other, other])[0], *(
        mg.gradients(ops.Sum(root, rows, [0, 1, 2]), [other, other], unconnected_gradients=u)
        for u in ("none", "zero")
    )  # fmt: skip
    assert none == [None, None]
    want = np.zeros((2, 3, 2))
    want[0, 2] = 2
    want[1, 0] = want[1, 1] = 1
    with Session(root) as sess:
        _init(sess, root)
        np.testing.assert_array_equal(sess.run(g), want)
        assert sess.run(zero[0]).tolist() == [0.0]


def test_integer_variables_carry_no_gradient(root):
    v = Variable(root, [1, 2], name="v")
    assert mg.gradients(ops.Sum(root, v, [0]), v) == [None]


def test_a_variable_as_ys_is_its_value(root):
    v = Variable(root, [1.0, 2.0], name="v")
    (g,) = mg.gradients(v, v)
    with Session(root) as sess:
        _init(sess, root)
        assert sess.run(g).tolist() == [1.0, 1.0]


def test_reads_of_variables_of_other_shapes_have_their_own_shapes(root):
    # Nodes of one op type, dtypes and attrs share inferred specs; a read's depend on its
    # handle's producer.
    a = Variable(root, np.zeros((2, 3), np.float32), name="a")
    b = Variable(root, np.zeros((5,), np.float32), name="b")
    assert rv.ReadVariableOp(root, a).shape == mg.TensorShape([2, 3])
    assert rv.ReadVariableOp(root, b).shape == mg.TensorShape([5])
    assert a.read_value().shape == mg.TensorShape([2, 3])


def test_embedding_lookup_of_variables_reads_only_the_rows_named(root):
    shards = [
        Variable(root, np.arange(10, dtype=np.float32).reshape(5, 2), name="s0"),
        Variable(root, np.arange(10, 18, dtype=np.float32).reshape(4, 2), name="s1"),
    ]
    ids_ = ops.Placeholder(root, mg.int32, [None])
    one = ops.embedding_lookup(root, shards[0], ids_)
    both = ops.embedding_lookup(root, shards, ids_)
    kinds = {op.type for op in root.graph.operations}
    assert "ResourceGather" in kinds
    reads = [op for op in root.graph.operations if op.type == "ReadVariableOp"]
    assert all(op.name.endswith("/Read/ReadVariableOp") for op in reads)  # no dense read
    grads = mg.gradients(ops.Sum(root, both, [0, 1]), shards)
    assert all(isinstance(g, mg.IndexedSlices) for g in grads)
    assert [g.values.op.colocation_group for g in grads] == ["s0", "s1"]
    with Session(root) as sess:
        _init(sess, root)
        assert sess.run(one, {ids_: [4, 0]}).tolist() == [[8.0, 9.0], [0.0, 1.0]]
        got = sess.run(both, {ids_: [0, 3, 8]})
        assert got.tolist() == [[0.0, 1.0], [12.0, 13.0], [8.0, 9.0]]
        g0, g1 = sess.run(grads, {ids_: [0, 3, 8, 8]})
    assert g0.indices.tolist() == [0, 4, 4] and g1.indices.tolist() == [1]
