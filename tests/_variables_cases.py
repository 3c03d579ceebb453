"""Cases for the training ops checked against TensorFlow (tests/test_variables_tf.py, and the
reference file tests/data/variables_apply.npz that tests/data/make_variable_refs.py writes).

Each case runs an update op for a few steps on variables with fixed initial values and fixed
per-step inputs (`inputs(case)`, deterministic), in minigraph (`run_minigraph`) or TensorFlow
(`run_tf`, in the TF venv), and gives the variables' values after the last step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

STEPS = 4
LR, MOMENTUM, BETA1, BETA2, EPSILON = 0.1, 0.9, 0.9, 0.999, 1e-8


@dataclass(frozen=True)
class Case:
    name: str
    op: str
    dtype: str
    shape: tuple[int, ...] = (6, 3)
    attrs: dict[str, Any] = field(default_factory=dict)
    sparse: bool = False
    duplicates: bool = False
    scatter: bool = False  # ResourceScatterAdd/Sub/Update: updates, no scalars or slots

    @property
    def slots(self) -> tuple[str, ...]:
        return {
            "ResourceApplyMomentum": ("accum",), "ResourceApplyAdagrad": ("accum",),
            "ResourceApplyAdam": ("m", "v"), "ResourceSparseApplyMomentum": ("accum",),
            "ResourceSparseApplyAdagrad": ("accum",),
        }.get(self.op, ())  # fmt: skip


def _cases() -> list[Case]:
    cases = []
    for dtype in ("float32", "float64"):
        d = dtype[-2:]
        cases += [
            Case(f"gd_{d}", "ResourceApplyGradientDescent", dtype),
            Case(f"momentum_{d}", "ResourceApplyMomentum", dtype),
            Case(f"nesterov_{d}", "ResourceApplyMomentum", dtype, attrs={"use_nesterov": True}),
            Case(f"adagrad_{d}", "ResourceApplyAdagrad", dtype),
            Case(f"adagrad_noslots_{d}", "ResourceApplyAdagrad", dtype,
                 attrs={"update_slots": False}),
            Case(f"adam_{d}", "ResourceApplyAdam", dtype),
            Case(f"adam_nesterov_{d}", "ResourceApplyAdam", dtype, attrs={"use_nesterov": True}),
            Case(f"sparse_momentum_{d}", "ResourceSparseApplyMomentum", dtype, sparse=True),
            Case(f"sparse_nesterov_{d}", "ResourceSparseApplyMomentum", dtype, sparse=True,
                 attrs={"use_nesterov": True}),
            Case(f"sparse_momentum_dups_{d}", "ResourceSparseApplyMomentum", dtype, sparse=True,
                 duplicates=True),
            Case(f"sparse_adagrad_{d}", "ResourceSparseApplyAdagrad", dtype, sparse=True),
            Case(f"sparse_adagrad_dups_{d}", "ResourceSparseApplyAdagrad", dtype, sparse=True,
                 duplicates=True),
            Case(f"sparse_adagrad_vector_dups_{d}", "ResourceSparseApplyAdagrad", dtype,
                 shape=(7,), sparse=True, duplicates=True),
            Case(f"sparse_adagrad_noslots_{d}", "ResourceSparseApplyAdagrad", dtype, sparse=True,
                 duplicates=True, attrs={"update_slots": False}),
            Case(f"scatter_add_dups_{d}", "ResourceScatterAdd", dtype, sparse=True,
                 duplicates=True, scatter=True),
            Case(f"scatter_sub_dups_{d}", "ResourceScatterSub", dtype, sparse=True,
                 duplicates=True, scatter=True),
            Case(f"scatter_update_{d}", "ResourceScatterUpdate", dtype, sparse=True,
                 scatter=True),
        ]  # fmt: skip
    return cases


CASES = _cases()


def inputs(case: Case) -> dict[str, np.ndarray]:
    """Initial values (`var`, slots) and per-step inputs (`grad`, `indices`), fixed."""
    rng = np.random.default_rng(_seed(case.name))
    dtype = np.dtype(case.dtype)
    out = {"var": rng.uniform(-1, 1, case.shape).astype(dtype)}
    for slot in case.slots:
        # Adagrad's accumulator starts positive (TF's initial_accumulator_value); Adam's v too.
        low = 0.1 if slot in ("accum", "v") and "Momentum" not in case.op else -1.0
        out[slot] = rng.uniform(low, 1, case.shape).astype(dtype)
    rows = case.shape[0]
    if case.sparse:
        n = 5
        if case.duplicates:
            ids = rng.integers(0, 3, (STEPS, n))  # few rows: many repeats
        else:
            ids = np.stack([rng.permutation(rows)[:n] for _ in range(STEPS)])
        out["indices"] = ids.astype(np.int32)
        out["grad"] = rng.uniform(-1, 1, (STEPS, n) + case.shape[1:]).astype(dtype)
    else:
        out["grad"] = rng.uniform(-1, 1, (STEPS,) + case.shape).astype(dtype)
    return out


def _seed(name: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(name))


def scalars(case: Case, step: int) -> dict[str, Any]:
    """The scalar inputs of step `step` (0-based), by input name."""
    if case.scatter:
        return {}
    if case.op == "ResourceApplyGradientDescent":
        return {"alpha": LR}
    if "Momentum" in case.op:
        return {"lr": LR, "momentum": MOMENTUM}
    if "Adagrad" in case.op:
        return {"lr": LR}
    t = step + 1
    return {
        "beta1_power": BETA1**t, "beta2_power": BETA2**t, "lr": LR, "beta1": BETA1,
        "beta2": BETA2, "epsilon": EPSILON,
    }  # fmt: skip


def run_minigraph(case: Case, data: dict[str, np.ndarray], config: Any = None) -> dict:
    import minigraph as mg
    import ops.resource_variables as rv

    scope = mg.Scope.new_root_scope()
    names = ("var", *case.slots)
    variables = {n: mg.Variable(scope, data[n], name=n) for n in names}
    dtype = mg.as_dtype(case.dtype)
    grad = mg.Placeholder(scope, dtype, None)
    feeds_of = {}
    builder = getattr(rv, case.op)
    if case.scatter:
        indices = mg.Placeholder(scope, mg.int32, None)
        op = builder(scope, variables["var"], indices, grad)
    else:
        holders = {k: mg.Placeholder(scope, dtype, []) for k in scalars(case, 0)}
        feeds_of = holders
        kwargs = {k: variables[k].handle for k in case.slots}
        kwargs.update(holders)
        kwargs["grad" if case.op != "ResourceApplyGradientDescent" else "delta"] = grad
        if case.sparse:
            indices = mg.Placeholder(scope, mg.int32, None)
            kwargs["indices"] = indices
        op = builder(scope, var=variables["var"].handle, **kwargs, **case.attrs)
    with mg.Session(scope, config) as sess:
        sess.run(mg.global_variables_initializer(scope))
        for step in range(STEPS):
            feed = {grad: data["grad"][step]}
            if case.sparse:
                feed[indices] = data["indices"][step]
            for k, v in scalars(case, step).items():
                feed[feeds_of[k]] = np.array(v, dtype=case.dtype)
            sess.run(op, feed)
        return dict(zip(names, sess.run([variables[n] for n in names])))


def run_tf(case: Case, data: dict[str, np.ndarray]) -> dict:
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        names = ("var", *case.slots)
        variables = {n: tf1.Variable(data[n], name=n, use_resource=True) for n in names}
        grad = tf1.placeholder(case.dtype, None)
        holders = {}
        kwargs = {}
        if case.scatter:
            indices = tf1.placeholder(tf.int32, None)
            op = getattr(tf.raw_ops, case.op)(
                resource=variables["var"].handle, indices=indices, updates=grad
            )
        else:
            holders = {k: tf1.placeholder(case.dtype, []) for k in scalars(case, 0)}
            kwargs = {k: variables[k].handle for k in case.slots}
            kwargs.update(holders)
            kwargs["grad" if case.op != "ResourceApplyGradientDescent" else "delta"] = grad
            if case.sparse:
                indices = tf1.placeholder(tf.int32, None)
                kwargs["indices"] = indices
            op = getattr(tf.raw_ops, case.op)(var=variables["var"].handle, **kwargs, **case.attrs)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            for step in range(STEPS):
                feed = {grad: data["grad"][step]}
                if case.sparse:
                    feed[indices] = data["indices"][step]
                for k, v in scalars(case, step).items():
                    feed[holders[k]] = np.array(v, dtype=case.dtype)
                sess.run(op, feed)
            return dict(zip(names, sess.run([variables[n].read_value() for n in names])))
