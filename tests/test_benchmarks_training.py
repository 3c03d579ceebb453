"""The training and sparse-gradient benchmarks compute what they say they time (benchmarks/
training.py, benchmarks/sparse_gradients.py): the models against NumPy references, the NumPy
formulations of densifying against np.add.at. Small sizes; nothing here asserts on timings.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph
from benchmarks import sparse_gradients, training
from benchmarks.sparse_gradients import (
    GatherGradient,
    _mlp_grad_minigraph,
    _numpy_add_at,
    _numpy_mlp_grads,
    _numpy_reduceat,
    mlp_grad_arrays,
    numpy_densify,
)
from benchmarks.training import _numpy_loss, build_step, model_arrays


def test_model_arrays_have_the_issues_shapes():
    a = model_arrays(1000)
    assert a["table"].shape == (1000, training.DIM) and a["table"].dtype == np.float32
    assert a["ids"].shape == (training.BATCH, training.IDS_PER_EXAMPLE)
    assert a["ids"].dtype == np.int32 and 0 <= a["ids"].min() and a["ids"].max() < 1000
    assert a["labels"].shape == (training.BATCH,) and a["labels"].max() < training.CLASSES
    assert a["w"].shape == (training.DIM, training.CLASSES) and a["b"].shape == (10,)


def _numpy_adagrad_step(a: dict, lr: float = 0.1, init: float = 0.1) -> dict:
    """One TF 1.x Adagrad step of the benchmark's model (float64): repeated ids summed first."""
    table, w, b = (a[k].astype(np.float64) for k in ("table", "w", "b"))
    ids, labels = a["ids"], a["labels"]
    n, k = ids.shape
    h = table[ids].mean(axis=1)
    logits = h @ w + b
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(n), labels] -= 1
    dlogits = p / n
    dw, db = h.T @ dlogits, dlogits.sum(axis=0)
    drows = np.repeat((dlogits @ w.T) / k, k, axis=0)  # one row per id
    dtable = np.zeros_like(table)
    np.add.at(dtable, ids.reshape(-1), drows)
    touched = np.unique(ids)
    out = {}
    for name, value, grad in (("w", w, dw), ("b", b, db)):
        accum = init + grad * grad
        out[name] = value - lr * grad / np.sqrt(accum)
    accum = init + dtable[touched] ** 2
    new_table = table.copy()
    new_table[touched] -= lr * dtable[touched] / np.sqrt(accum)
    out["table"] = new_table
    return out


def test_the_training_step_is_tf1_adagrad_on_the_model(cpu_only):
    a = model_arrays(300, seed=1)  # 2048 ids over 300 rows: many repeats
    step = build_step(a)
    try:
        assert step.how == "mg.train.AdagradOptimizer(0.1).minimize(loss)"
        assert step.step_loss() == pytest.approx(_numpy_loss(a), rel=1e-5)
        want = _numpy_adagrad_step(a)
        table = minigraph.trainable_variables(step.train_op.graph)
        got = dict(zip(("table", "w", "b"), step.session.run([v.value() for v in table])))
        for name in ("table", "w", "b"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-6)
        assert step.step_loss() < _numpy_loss(a)  # the step descends
    finally:
        step.close()


def test_gather_gradient_graphs(cpu_only):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((50, 3), dtype=np.float32)
    ids = rng.integers(0, 50, 40).astype(np.int64)
    dy = rng.standard_normal((40, 3), dtype=np.float32)
    g = GatherGradient(table, ids, dy)
    try:
        np.testing.assert_array_equal(g.forward(), table[ids])
        ones = g.gradient_ones()
        assert isinstance(ones, minigraph.IndexedSlicesValue)
        np.testing.assert_array_equal(ones.values, np.ones((40, 3), np.float32))
        fed = g.gradient_fed()
        np.testing.assert_array_equal(fed.values, dy)
        np.testing.assert_array_equal(fed.indices, ids)
        want = np.zeros((50, 3), np.float32)
        np.add.at(want, ids, dy)
        np.testing.assert_allclose(g.densified(), want, rtol=1e-6)
    finally:
        g.close()


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 30),
    n=st.integers(0, 60),
    width=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_numpy_densify_formulations_equal_add_at(rows, n, width, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, rows, n).astype(np.int64)  # repeats, up to n of one row
    data = rng.standard_normal((n, width), dtype=np.float32)
    want = np.zeros((rows, width), np.float32)
    np.add.at(want, ids, data)
    best = numpy_densify(ids, data, rows)
    for fn in (best, _numpy_add_at(ids, data, rows)):
        np.testing.assert_array_equal(fn(), want)  # repeats added in order: exact
        np.testing.assert_array_equal(fn(), want)  # and again, over the reused output
    if n:
        np.testing.assert_allclose(_numpy_reduceat(ids, data, rows)(), want, rtol=1e-5, atol=1e-5)


def test_mlp_gradient_step_matches_numpy(cpu_only):
    a = mlp_grad_arrays()
    assert a["labels"].dtype == np.int32 and a["labels"].shape == (64,)
    sess, run = _mlp_grad_minigraph(a)
    try:
        got = np.concatenate([np.asarray(g).ravel() for g in run()])
    finally:
        sess.close()
    np.testing.assert_allclose(got, _numpy_mlp_grads(a), rtol=1e-4, atol=1e-6)
    assert got.size == 128 * 256 + 256 * 10


def test_section_targets_are_the_issues():
    assert training.TF_TARGET == "<= 0.80" and training.SIZE_TARGET == "<= 1.30"
    assert sparse_gradients.SPARSE_TARGET == "<= 1.20"
    assert sparse_gradients.DENSE_TARGET == "<= 1.50"
    assert sparse_gradients.MLP_TARGET == "<= 1.00"
    assert (sparse_gradients.BUILD_TARGET, sparse_gradients.GROWTH_TARGET) == ("<= 3", "<= 12")
