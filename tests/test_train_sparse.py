"""Sparse steps (IndexedSlices gradients of gathers and embedding_lookup over variables): they
touch only the rows named and cost what those rows cost, not the table size (checked on the
graph: no tensor of the update is table-sized; and at run time: the memory a warmed-up step
allocates is a small fraction of the table's), except TF 1.x's Adam, whose documented decay of
the moments is dense. Concurrent training threads: no crash, no lost update, no torn row with
use_locking=True."""

from __future__ import annotations

import sys
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
import ops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _thread_helpers import run_threads  # noqa: E402

ROWS, DIM = 200_000, 16


def optimizers():
    return {
        "gd": mg.train.GradientDescentOptimizer(0.5),
        "momentum": mg.train.MomentumOptimizer(0.5, 0.9),
        "nesterov": mg.train.MomentumOptimizer(0.5, 0.9, use_nesterov=True),
        "adagrad": mg.train.AdagradOptimizer(0.5),
        "lazy_adam": mg.train.AdamOptimizer(0.5, lazy=True),
        "adam": mg.train.AdamOptimizer(0.5),
    }


def embedding_model(kind, rows=ROWS, shards=2):
    s = mg.Scope.new_root_scope()
    tables = [
        mg.Variable(s, np.ones((rows // shards, DIM), np.float32), name=f"emb{k}")
        for k in range(shards)
    ]
    ids = mg.Placeholder(s.with_op_name("ids"), mg.int32, [None, 4])
    h = ops.Mean(s, ops.embedding_lookup(s, tables, ids), 1)
    loss = ops.Mean(s, ops.Sum(s, ops.Square(s, h), [1]), [0])
    train = optimizers()[kind].minimize(loss)
    return s, tables, ids, train


def update_tensors(graph, prefix):
    return [
        out for op in graph.get_operations() if op.name.startswith(prefix)
        for out in op.outputs if out.dtype is not mg.resource
    ]  # fmt: skip


@pytest.mark.parametrize("kind", ["gd", "momentum", "nesterov", "adagrad", "lazy_adam"])
def test_no_tensor_of_a_sparse_update_is_table_sized(kind):
    s, tables, _, train = embedding_model(kind)
    prefix = f"{train.name}/update_emb0/"
    outs = update_tensors(s.graph, prefix)
    assert outs, prefix
    for out in outs:
        n = out.shape.num_elements() if out.shape.is_fully_defined() else None
        assert n is None or n < ROWS // 2, f"{out.name} has shape {out.shape}"
        if out.shape.rank:  # the rows of a batch, never the table's
            assert out.shape[0] != ROWS // 2, f"{out.name} has shape {out.shape}"


def test_tf_adams_sparse_update_is_dense_as_documented():
    s, tables, _, train = embedding_model("adam")
    shapes = [out.shape for out in update_tensors(s.graph, "Adam/update_emb0/")]
    assert mg.TensorShape([ROWS // 2, DIM]) in shapes  # m * beta1: the whole table


@pytest.mark.parametrize("kind", ["gd", "momentum", "adagrad", "lazy_adam", "adam"])
def test_a_sparse_step_allocates_a_fraction_of_the_table(kind):
    s, tables, ids, train = embedding_model(kind)
    batch = {ids: np.random.default_rng(0).integers(0, ROWS, size=(64, 4))}
    table_bytes = ROWS * DIM * 4
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        for _ in range(2):  # warm up: plans, and the tables' first (copy-on-write) update
            sess.run(train, batch)
        tracemalloc.start()
        try:
            sess.run(train, batch)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    if kind == "adam":  # TF 1.x's decay of both moments: table-sized temporaries
        assert peak > table_bytes // 4
    else:
        assert peak < table_bytes // 20, f"{peak} bytes for a {table_bytes}-byte table"


@pytest.mark.parametrize("kind", ["gd", "momentum", "nesterov", "adagrad", "lazy_adam"])
def test_rows_not_named_stay_bitwise_unchanged(kind):
    s, tables, ids, train = embedding_model(kind, rows=40)
    rng = np.random.default_rng(3)
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        before = sess.run(tables)
        sess.run(train, {ids: np.array([[0, 2, 2, 5], [7, 0, 9, 9]])})
        after = sess.run(tables)
        named = {0: [0, 1], 1: [2, 3, 4]}  # mod: id -> row id // 2 of shard id % 2
        for k in (0, 1):
            changed = np.flatnonzero(np.any(after[k] != before[k], axis=1))
            assert changed.tolist() == named[k]
        batch = rng.integers(0, 40, size=(3, 4))
        sess.run(train, {ids: batch})
        again = sess.run(tables)
        for k in (0, 1):
            changed = np.flatnonzero(np.any(again[k] != after[k], axis=1))
            assert set(changed) <= set(batch[batch % 2 == k].ravel() // 2)


def test_concurrent_locked_steps_lose_no_update():
    s = mg.Scope.new_root_scope()
    table = mg.Variable(s, np.zeros((50, 8)), name="table")
    ids = np.array([3, 7, 7, 11], np.int32)
    loss = ops.Sum(s, table.sparse_read(ids), [0, 1])  # gradient 1 per id
    opts = [
        mg.train.GradientDescentOptimizer(0.5, use_locking=True),
        mg.train.AdagradOptimizer(0.5, use_locking=True),
    ]
    trains = [opt.minimize(loss) for opt in opts]
    threads, steps = 4, 25
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        run_threads(threads, lambda i: [sess.run(trains[0]) for _ in range(steps)])
        value = sess.run(table)
        expected = np.zeros((50, 8))
        expected[[3, 11]] = -0.5 * threads * steps
        expected[7] = -1.0 * threads * steps
        np.testing.assert_array_equal(value, expected)
        run_threads(threads, lambda i: [sess.run(trains[1]) for _ in range(steps)])
        acc = sess.run(opts[1].get_slot(table, "accumulator"))
        n = threads * steps  # repeated ids summed first: row 7's gradient is 2 per step
        np.testing.assert_allclose(acc[[3, 7, 11], 0], [0.1 + n, 0.1 + 4 * n, 0.1 + n])
        assert np.all(acc[[3, 7, 11]] == acc[[3, 7, 11], :1])
        np.testing.assert_array_equal(np.delete(acc, [3, 7, 11], axis=0), 0.1)


@pytest.mark.parametrize("use_locking", [True, False])
def test_training_threads_with_readers_never_tear_a_row(use_locking):
    # Every row starts uniform and every gradient row is uniform, so a consistent row stays
    # uniform: a read that sees a row half updated would show two values in it.
    s = mg.Scope.new_root_scope()
    table = mg.Variable(s, np.ones((64, 256), np.float32), name="table")
    ids = mg.Placeholder(s, mg.int32, [None])
    loss = ops.Sum(s, ops.Square(s, table.sparse_read(ids)), [0, 1])
    train = mg.train.AdagradOptimizer(0.01, use_locking=use_locking).minimize(loss)
    stop = threading.Event()
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        rng = np.random.default_rng(5)
        batches = [rng.integers(0, 64, size=32).astype(np.int32) for _ in range(8)]

        def body(i):
            if i == 0:  # the reader
                torn = 0
                while not stop.is_set():
                    value = sess.run(table)
                    torn += int(np.any(value != value[:, :1]))
                return torn
            for k in range(30):
                sess.run(train, {ids: batches[(i + k) % 8]})
            return 0

        def run(i):
            try:
                return body(i)
            finally:
                if i != 0:
                    done.append(i)
                    if len(done) == 3:
                        stop.set()

        done: list[int] = []
        results = run_threads(4, run)
        value = sess.run(table)
    assert np.isfinite(value).all() and (value < 1).any()
    if use_locking:
        assert results[0] == 0, "a read saw a row half written"


@pytest.mark.parametrize("kind", ["gd", "momentum", "nesterov", "adagrad", "lazy_adam", "adam"])
def test_an_empty_batch_and_out_of_range_ids(kind):
    s, tables, ids, train = embedding_model(kind, rows=20)
    with mg.Session(s) as sess:
        sess.run(mg.global_variables_initializer(s))
        before = sess.run(tables)
        sess.run(train, {ids: np.zeros((0, 4), np.int32)})  # no row named: nothing moves
        after = sess.run(tables)
        for k in (0, 1):
            assert np.array_equal(after[k], before[k])
        with pytest.raises(mg.InvalidArgumentError, match="every id must be in"):
            sess.run(train, {ids: np.array([[0, 1, 2, 40]], np.int32)})
        for k, table in enumerate(sess.run(tables)):
            assert np.array_equal(table, before[k])  # a failed step updates nothing
