"""GatherNd's one-coordinate fast path (ops/gather_ops.py `_flatten_index_rows`): index vectors
of depth 1 without batch dims are taken as the row numbers themselves (a view of the indices,
checked once), with the same values, errors and policies as the general path."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from ops import GatherNd, Placeholder

# CPU behaviour (numpy kernels, TF's CPU errors): pinned to CPU:0.
pytestmark = pytest.mark.usefixtures("cpu_only")


def _graph(params_shape, depth, index_dtype, batch_dims=0, policy=""):
    root = mg.Scope.new_root_scope()
    p = Placeholder(root, mg.float32, shape=[None] * len(params_shape))
    lead = [None] * (batch_dims + 1)
    i = Placeholder(root, mg.as_dtype(index_dtype), shape=lead + [depth])
    g = GatherNd(root.with_op_name("g"), p, i, batch_dims=batch_dims, bad_indices_policy=policy)
    return root, p, i, g


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("index_dtype", [np.int16, np.int32, np.int64])
@pytest.mark.parametrize("rows", [0, 1, 7, 300_001])
def test_one_coordinate_matches_fancy_indexing(rows, index_dtype, threads):
    rng = np.random.default_rng(rows)
    params = rng.random((1000, 3), dtype=np.float32)
    idx = rng.integers(0, 1000, size=(rows, 1)).astype(index_dtype)
    root, p, i, g = _graph(params.shape, 1, index_dtype)
    kept = idx.copy()
    with mg.Session(root, mg.SessionConfig(intra_op_threads=threads)) as sess:
        got = sess.run(g, {p: params, i: idx})
    want = params[idx[:, 0].astype(np.int64)]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(idx, kept)  # the indices, read in place, are not written
    assert not np.shares_memory(got, idx)


@pytest.mark.parametrize("bad, shown", [(1000, "1000"), (-1, "-1"), (2**40, str(2**40))])
def test_one_coordinate_reports_the_first_bad_index_as_tf(bad, shown):
    params = np.arange(1000, dtype=np.float32)
    idx = np.zeros((10, 1), np.int64)
    idx[3, 0] = bad
    idx[7, 0] = -5  # a later bad row is not the one reported
    root, p, i, g = _graph(params.shape, 1, np.int64)
    with mg.Session(root) as sess:
        message = rf"indices\[3\] = \[{shown}\] does not index into param shape \[1000\]"
        with pytest.raises(mg.InvalidArgumentError, match=message):
            sess.run(g, {p: params, i: idx})


def test_one_coordinate_int16_negative_is_out_of_range():
    params = np.arange(5, dtype=np.float32)
    idx = np.array([[1], [-1]], np.int16)
    root, p, i, g = _graph(params.shape, 1, np.int16)
    with mg.Session(root) as sess:
        with pytest.raises(mg.InvalidArgumentError, match=r"indices\[1\] = \[-1\]"):
            sess.run(g, {p: params, i: idx})


def test_one_coordinate_ignore_policy_writes_zeros():
    params = np.arange(1, 6, dtype=np.float32)
    idx = np.array([[4], [5], [-1], [0]], np.int64)
    root, p, i, g = _graph(params.shape, 1, np.int64, policy="IGNORE")
    with mg.Session(root) as sess:
        got = sess.run(g, {p: params, i: idx})
    np.testing.assert_array_equal(got, [5, 0, 0, 1])


def test_batch_dims_keep_their_own_row_numbers():
    # With batch dims the row numbers get per-batch offsets: never written into the indices.
    rng = np.random.default_rng(3)
    params = rng.random((4, 50, 2), dtype=np.float32)
    idx = rng.integers(0, 50, size=(4, 6, 1)).astype(np.int64)
    kept = idx.copy()
    root, p, i, g = _graph(params.shape, 1, np.int64, batch_dims=1)
    with mg.Session(root) as sess:
        got = sess.run(g, {p: params, i: idx})
    want = np.stack([params[b][idx[b, :, 0]] for b in range(4)])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(idx, kept)


def test_one_coordinate_index_equal_to_the_dim_is_out_of_range():
    params = np.arange(1000, dtype=np.float32)
    idx = np.array([[999], [1000], [0]], np.int64)  # the largest index, alone, is the bad one
    root, p, i, g = _graph(params.shape, 1, np.int64)
    with mg.Session(root) as sess:
        with pytest.raises(mg.InvalidArgumentError, match=r"indices\[1\] = \[1000\]"):
            sess.run(g, {p: params, i: idx})
