"""The optimizers (minigraph.train): each update rule against an independent numpy reference
(dense; sparse with repeated ids summed first), slots (names, colocation, initialisation,
get_slot / get_slot_names / variables), global_step, hyperparameters as tensors, and the
errors TF raises (as InvalidArgumentError, a ValueError)."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
import ops

F32 = np.float32

# Hyperparameters exactly representable in float32 where it matters: TF makes Python floats
# float32 Consts and casts them, so the references use the float32 values too.
LR = 0.25


def _f(x):
    return float(F32(x))


class NumpyOptimizer:
    """Independent references: the update rules written from their definitions, state in
    dicts, repeated ids summed first (np.add.at)."""

    def __init__(self, kind, **args):
        self.kind, self.args, self.state, self.t = kind, args, {}, 0
        self.b1p, self.b2p = F32(args.get("beta1", 0.9)), F32(args.get("beta2", 0.999))

    def dense(self, var, g):
        return self._update(var, g, np.arange(var.shape[0]), lazy=True)

    def sparse(self, var, values, ids):
        rows = np.unique(ids)
        summed = np.zeros((var.shape[0],) + var.shape[1:], var.dtype)
        np.add.at(summed, ids, values)
        return self._update(var, summed[rows], rows, lazy=self.args.get("lazy", True))

    def _update(self, var, g, rows, lazy):
        a, var = self.args, var.copy()
        lr = _f(a["lr"])
        if self.kind == "gd":
            var[rows] -= lr * g
        elif self.kind == "momentum":
            m = _f(a["momentum"])
            acc = self.state.setdefault("acc", np.zeros_like(var))
            acc[rows] = m * acc[rows] + g
            step = lr * g + lr * m * acc[rows] if a.get("nesterov") else lr * acc[rows]
            var[rows] -= step
        elif self.kind == "adagrad":
            acc = self.state.setdefault("acc", np.full_like(var, _f(a.get("init", 0.1))))
            acc[rows] += g * g
            var[rows] -= lr * g / np.sqrt(acc[rows])
        else:  # adam
            b1, b2, eps = _f(a.get("beta1", 0.9)), _f(a.get("beta2", 0.999)), _f(1e-8)
            m = self.state.setdefault("m", np.zeros_like(var))
            v = self.state.setdefault("v", np.zeros_like(var))
            lr_t = lr * np.sqrt(1 - float(self.b2p)) / (1 - float(self.b1p))
            if lazy:
                m[rows] = b1 * m[rows] + (1 - b1) * g
                v[rows] = b2 * v[rows] + (1 - b2) * g * g
                var[rows] -= lr_t * m[rows] / (np.sqrt(v[rows]) + eps)
            else:  # TF 1.x: both moments decay everywhere, every row moves
                full = np.zeros_like(var)
                full[rows] = g
                m[...] = b1 * m + (1 - b1) * full
                v[...] = b2 * v + (1 - b2) * full * full
                var -= lr_t * m / (np.sqrt(v) + eps)
            self.b1p, self.b2p = F32(self.b1p * F32(b1)), F32(self.b2p * F32(b2))
        return var


def make(kind, **args):
    lr = args["lr"]
    if kind == "gd":
        return mg.train.GradientDescentOptimizer(lr)
    if kind == "momentum":
        return mg.train.MomentumOptimizer(
            lr, args["momentum"], use_nesterov=args.get("nesterov", False)
        )
    if kind == "adagrad":
        return mg.train.AdagradOptimizer(lr, initial_accumulator_value=args.get("init", 0.1))
    return mg.train.AdamOptimizer(
        lr, beta1=args.get("beta1", 0.9), beta2=args.get("beta2", 0.999),
        lazy=args.get("lazy", False),
    )  # fmt: skip


RULES = [
    ("gd", {"lr": LR}),
    ("momentum", {"lr": LR, "momentum": 0.5}),
    ("momentum", {"lr": LR, "momentum": 0.5, "nesterov": True}),
    ("adagrad", {"lr": LR, "init": 0.5}),
    ("adam", {"lr": 0.125, "beta1": 0.5, "beta2": 0.75}),
    ("adam", {"lr": 0.125, "lazy": True}),
]
IDS = ["gd", "momentum", "nesterov", "adagrad", "adam", "lazy_adam"]


@pytest.mark.parametrize(("kind", "args"), RULES, ids=IDS)
def test_dense_updates_match_numpy(kind, args):
    rng = np.random.default_rng(1)
    init, target = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, init, name="v")
    loss = ops.Mul(s, 0.5, ops.Sum(s, ops.Square(s, ops.Sub(s, v, target)), [0, 1]))
    train = make(kind, **args).minimize(loss)
    ref, expected = NumpyOptimizer(kind, **args), init
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        for _ in range(5):
            sess.run(train)
            expected = ref.dense(expected, expected - target)  # d loss / d v
            np.testing.assert_allclose(sess.run(v), expected, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize(("kind", "args"), RULES, ids=IDS)
def test_sparse_updates_sum_repeated_ids_first_and_match_numpy(kind, args):
    rng = np.random.default_rng(2)
    init = rng.normal(size=(8, 3))
    ids = np.array([1, 5, 1, 1, 6, 5], np.int32)  # repeats; rows 0, 2, 3, 4, 7 untouched
    weights = rng.normal(size=(6, 3))
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, init, name="v")
    loss = ops.Sum(s, ops.Mul(s, ops.Square(s, v.sparse_read(ids)), weights), [0, 1])
    opt = make(kind, **args)
    pairs = opt.compute_gradients(loss)
    assert isinstance(pairs[0][0], mg.IndexedSlices)
    train = opt.apply_gradients(pairs)
    ref, expected = NumpyOptimizer(kind, **args), init
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        for _ in range(4):
            before = sess.run(v)
            sess.run(train)
            expected = ref.sparse(expected, 2 * expected[ids] * weights, ids)
            after = sess.run(v)
            np.testing.assert_allclose(after, expected, rtol=1e-7, atol=1e-12)
            untouched = [0, 2, 3, 4, 7]
            if kind == "adam" and not args.get("lazy"):
                continue  # TF 1.x's Adam moves rows with a nonzero first moment: all named once
            assert np.array_equal(after[untouched], before[untouched])  # bitwise


def test_tf_adam_moves_rows_no_longer_named_and_lazy_adam_does_not():
    s = mg.Scope.new_root_scope()
    ids = mg.Placeholder(s, mg.int32, [None])
    out = {}
    for lazy in (False, True):
        v = mg.Variable(s, np.ones((4, 2)), name=f"v{int(lazy)}")
        loss = ops.Sum(s, v.sparse_read(ids), [0, 1])
        out[lazy] = (v, mg.train.AdamOptimizer(0.1, lazy=lazy).minimize(loss, var_list=[v]))
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        for lazy, (v, train) in out.items():
            sess.run(train, {ids: [0, 1]})
            row0 = sess.run(v)[0]
            sess.run(train, {ids: [1]})  # row 0 is not named now
            moved = not np.array_equal(sess.run(v)[0], row0)
            assert moved is (not lazy)


def test_slots_are_named_as_tfs_colocated_initialised_and_listed(sim_gpus):
    s = mg.Scope.new_root_scope()
    a = mg.Variable(
        s.new_sub_scope("layer").with_device("/device:GPU:1"), np.ones((2, 3), F32), name="a"
    )
    b = mg.Variable(s, np.ones(3, F32), name="b")
    loss = ops.AddV2(s, ops.Sum(s, a, [0, 1]), ops.Sum(s, ops.Square(s, b), [0]))
    opt = mg.train.AdamOptimizer()
    train = opt.minimize(loss)
    assert train.name == "Adam"
    assert opt.get_slot_names() == ["m", "v"]
    m, v = opt.get_slot(a, "m"), opt.get_slot(a, "v")
    assert (m.name, v.name) == ("layer/a/Adam:0", "layer/a/Adam_1:0")
    assert opt.get_slot(b, "m").name == "b/Adam:0"
    assert opt.get_slot(a, "nope") is None and opt.get_slot(loss, "m") is None
    assert [x.name for x in opt.variables()] == [
        "b/Adam:0", "b/Adam_1:0", "beta1_power:0", "beta2_power:0", "layer/a/Adam:0",
        "layer/a/Adam_1:0",
    ]  # fmt: skip
    for slot in opt.variables():
        assert not slot.trainable
        assert slot in mg.global_variables(s)
        assert slot not in mg.trainable_variables(s)
    assert m.op.colocation_group == a.op.colocation_group
    # beta powers live with the variable of the smallest name ("b")
    beta1 = next(x for x in opt.variables() if x.name == "beta1_power:0")
    assert beta1.op.colocation_group == b.op.colocation_group
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        np.testing.assert_array_equal(sess.run(m), np.zeros((2, 3), F32))
        meta = mg.RunMetadata()
        sess.run(train, run_metadata=meta)
        placed = meta.placement
        assert placed[m.op.name].endswith("GPU:1") and placed[a.op.name].endswith("GPU:1")
        assert placed["Adam/update_layer/a/ResourceApplyAdam"].endswith("GPU:1")
        np.testing.assert_allclose(sess.run(beta1), F32(0.9) * F32(0.9))


def test_slot_names_of_every_optimizer_and_a_second_optimizer():
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, np.ones(2, F32), name="v")
    loss = ops.Sum(s, ops.Square(s, v), [0])
    for opt, slot, name in (
        (mg.train.MomentumOptimizer(0.1, 0.9), "momentum", "v/Momentum:0"),
        (mg.train.MomentumOptimizer(0.1, 0.9), "momentum", "v/Momentum_1:0"),
        (mg.train.AdagradOptimizer(0.1), "accumulator", "v/Adagrad:0"),
        (mg.train.GradientDescentOptimizer(0.1), None, None),
    ):
        train = opt.minimize(loss)
        if slot is None:
            assert opt.get_slot_names() == [] and opt.variables() == []
        else:
            assert opt.get_slot(v, slot).name == name
    assert train.name == "GradientDescent"
    assert s.graph.get_collection(mg.train.TRAIN_OP)[-1] is train
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        acc = mg.global_variables(s)[-1]
        assert acc.name == "v/Adagrad:0"
        np.testing.assert_allclose(sess.run(acc), [0.1, 0.1])


def test_large_slots_start_as_fills_not_constants():
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, np.ones((2000, 4), F32))
    loss = ops.Sum(s, v.sparse_read([3]), [0, 1])
    opt = mg.train.AdagradOptimizer(0.1)
    opt.minimize(loss)
    acc = opt.get_slot(v, "accumulator")
    assert acc.initial_value.op.type == "Fill"
    with mg.Session(s) as sess:
        sess.run(acc.initializer)
        assert sess.run(acc).min() == sess.run(acc).max() == F32(0.1)


def test_global_step_is_incremented_after_the_updates():
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, np.array([1.0, 2.0]), name="v")
    step = mg.Variable(s, np.int64(0), trainable=False, name="global_step")
    loss = ops.Sum(s, ops.Square(s, v), [0])
    train = mg.train.MomentumOptimizer(0.5, 0.5).minimize(loss, global_step=step)
    assert (train.name, train.type) == ("Momentum", "AssignAddVariableOp")
    update = s.graph.get_operation_by_name("Momentum/update")
    assert update in train.control_inputs
    assert train.colocation_group == step.op.colocation_group
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        for i in range(1, 4):
            sess.run(train)
            assert sess.run(step) == i
        # a = 2v, v = 0; a = a / 2, v = -a / 2; a = a / 2 + 2v = -v, v = 1.5 v
        np.testing.assert_allclose(sess.run(v), [-0.25, -0.5])
        sess.run(train)  # two steps without a read between them: a 0-d variable updated twice
        sess.run(train)
        value = sess.run(step)
        assert isinstance(value, np.ndarray) and value.dtype == np.int64 and value == 5


def test_hyperparameters_may_be_tensors_fed_or_callables():
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, np.array([1.0, -1.0]), name="v")
    lr = mg.Placeholder(s, mg.float64, [])
    loss = ops.Sum(s, v, [0])
    gd = mg.train.GradientDescentOptimizer(lr).minimize(loss)
    mom = mg.train.MomentumOptimizer(lambda: 0.5, np.float64(0.0)).minimize(loss)
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        sess.run(gd, {lr: 0.25})
        np.testing.assert_allclose(sess.run(v), [0.75, -1.25])
        sess.run(gd, {lr: 1.0})
        np.testing.assert_allclose(sess.run(v), [-0.25, -2.25])
        sess.run(mom)
        np.testing.assert_allclose(sess.run(v), [-0.75, -2.75])


def test_a_float64_variable_gets_the_float32_learning_rate_cast_as_tfs():
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, np.array([0.0]), name="v")
    train = mg.train.GradientDescentOptimizer(0.1).minimize(ops.Sum(s, v, [0]))
    assert (
        s.graph.get_operation_by_name("GradientDescent/learning_rate").get_attr("dtype")
        is mg.float32
    )
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        sess.run(train)
        assert sess.run(v)[0] == -float(F32(0.1))


def test_integer_variables_get_no_gradient_and_are_skipped():
    s = mg.Scope.new_root_scope()
    i = mg.Variable(s, np.int32(3), name="i")
    w = mg.Variable(s, 2.0, name="w")
    loss = ops.Mul(s, ops.Cast(s, i, mg.float32), w)
    opt = mg.train.GradientDescentOptimizer(0.5)
    pairs = opt.compute_gradients(loss)
    assert pairs[0][0] is None and pairs[0][1] is i and pairs[1][0] is not None
    train = opt.minimize(loss)
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        sess.run(train)
        assert sess.run(w) == 0.5 and sess.run(i) == 3
    with pytest.raises(mg.InvalidArgumentError, match="No gradients provided for any variable"):
        opt.compute_gradients(loss, var_list=[i]) and opt.minimize(loss, var_list=[i])
    with pytest.raises(mg.InvalidArgumentError, match="Invalid type int32 for i:0"):
        opt.apply_gradients([(ops.Const(s, np.int32(1)), i)])


def _model():
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, np.ones(3, F32), name="v")
    return s, v, ops.Sum(s, ops.Square(s, v), [0])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s, v, loss, o: o.minimize(loss, var_list=[3]), "optimizers update minigraph"),
        (lambda s, v, loss, o: o.minimize(loss, var_list=[loss]), "Variables; got Sum"),
        (lambda s, v, loss, o: o.minimize(loss, var_list=[]), r"No variables to optimize\."),
        (
            lambda s, v, loss, o: o.minimize(ops.Const(s, 1.0), var_list=[v]),
            "No gradients provided for any variable, check your graph",
        ),
        (
            lambda s, v, loss, o: o.minimize(ops.Cast(s, loss, mg.int32)),
            r"Invalid type int32 for Cast:0, expected: \['float16', 'bfloat16'",
        ),
        (lambda s, v, loss, o: o.minimize(3.0), "loss must be a tensor"),
        (lambda s, v, loss, o: o.apply_gradients([]), r"No variables provided\."),
        (
            lambda s, v, loss, o: o.apply_gradients([(None, v)]),
            r"No gradients provided for any variable: \[",
        ),
        (lambda s, v, loss, o: o.apply_gradients([v]), r"\(gradient, variable\) pairs"),
        (
            lambda s, v, loss, o: o.apply_gradients([(ops.Const(s, np.ones(3)), v)]),
            r"The gradient of 'v:0' \(float32\) is float64",
        ),
        (
            lambda s, v, loss, o: o.apply_gradients([(ops.Const(s, np.ones(2, F32)), v)]),
            r"has shape \[2\]",
        ),
        (
            lambda s, v, loss, o: o.apply_gradients([("x", v)]),
            "Gradient must be convertible to a Tensor or IndexedSlices, or None",
        ),
        (
            lambda s, v, loss, o: o.minimize(
                loss, global_step=mg.Variable(s, 0.0, trainable=False, name="gs")
            ),
            "global_step must be an integer variable",
        ),
        (
            lambda s, v, loss, o: o.minimize(loss, var_list=[mg.Variable(_model()[0], 1.0)]),
            "belongs to another graph",
        ),
        (
            lambda s, v, loss, o: mg.train.GradientDescentOptimizer(
                ops.Const(s, [0.1, 0.2])
            ).minimize(loss),
            r"learning_rate must be a scalar; 'Const_1:0' has shape \[2\]",
        ),
        (
            lambda s, v, loss, o: mg.train.GradientDescentOptimizer("x").minimize(loss),
            "learning_rate must be a number",
        ),
        (
            lambda s, v, loss, o: mg.train.GradientDescentOptimizer([0.1, 0.2]).minimize(loss),
            "learning_rate must be a scalar",
        ),
        (lambda s, v, loss, o: mg.train.GradientDescentOptimizer(0.1, name=""), "Must specify"),
        (
            lambda s, v, loss, o: mg.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0),
            r"initial_accumulator_value must be positive: 0\.0",
        ),
        (lambda s, v, loss, o: mg.train.MomentumOptimizer(0.1, 0.9, use_nesterov=1), "bool"),
        (lambda s, v, loss, o: mg.train.AdamOptimizer(lazy="yes"), "lazy must be a bool"),
        (lambda s, v, loss, o: mg.train.AdamOptimizer(use_locking=None), "use_locking"),
    ],
)
def test_errors(call, message):
    s, v, loss = _model()
    opt = mg.train.GradientDescentOptimizer(0.1)
    before = len(s.graph.get_operations())
    with pytest.raises(mg.InvalidArgumentError, match=message):
        call(s, v, loss, opt)
    if "another graph" not in message and "Must specify" not in message:
        # No optimizer nodes were left behind (gradients and slots aside).
        names = [op.name for op in s.graph.get_operations()[before:]]
        assert not [n for n in names if n.startswith("GradientDescent")], names


def test_a_learning_rate_that_is_not_a_scalar_fails_at_construction_or_run():
    s, v, loss = _model()
    lr = mg.Placeholder(s, mg.float32, None)
    train = mg.train.GradientDescentOptimizer(lr).minimize(loss)
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        with pytest.raises(mg.InvalidArgumentError, match="alpha is not a scalar"):
            sess.run(train, {lr: [0.1, 0.2]})


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_and_inf_gradients_propagate_as_tfs():
    s = mg.Scope.new_root_scope()
    v = mg.Variable(s, np.array([1.0, 2.0]), name="v")
    g = mg.Placeholder(s, mg.float64, [2])
    train = mg.train.AdagradOptimizer(0.5).apply_gradients([(g, v)])
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        sess.run(train, {g: [np.nan, np.inf]})
        assert np.isnan(sess.run(v)).all()


def test_threads_building_with_one_optimizer_get_their_own_nodes():
    import threading

    s = mg.Scope.new_root_scope()
    opt = mg.train.MomentumOptimizer(0.25, 0.5)
    variables = [mg.Variable(s, np.full(2, float(k)), name=f"v{k}") for k in range(4)]
    trains = [None] * 4
    barrier = threading.Barrier(4)

    def build(k):
        barrier.wait()
        trains[k] = opt.minimize(ops.Sum(s, ops.Square(s, variables[k]), [0]))

    threads = [threading.Thread(target=build, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(t.name for t in trains) == ["Momentum", "Momentum_1", "Momentum_2", "Momentum_3"]
    assert sorted(v.name for v in opt.variables()) == [f"v{k}/Momentum:0" for k in range(4)]
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        sess.run(trains)
        for k, v in enumerate(variables):
            np.testing.assert_allclose(sess.run(v), 0.5 * k)  # v - 0.25 * 2v
