"""GatherNd's index linearisation split over intra-op threads (ops/gather.py `_checked_rows`):
the threaded path against the one-thread path and an element-by-element reference, over several
runs of one session each, with bad indices placed in every block."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from ops import GatherNd, Placeholder
from ops.gather_ops import _PARALLEL_ROWS

# CPU behaviour (numpy kernels, host memory, TF's CPU errors): pinned to CPU:0.
pytestmark = pytest.mark.usefixtures("cpu_only")

ROWS = _PARALLEL_ROWS + 12_345  # above the threshold, and not a multiple of the thread count


def _reference(params: np.ndarray, indices: np.ndarray, batch_dims: int) -> np.ndarray:
    """out[b..., i...] = params[b..., *indices[b..., i..., :]], written out per index vector."""
    depth = indices.shape[-1]
    lead = indices.shape[:-1]
    out = np.empty(lead + params.shape[batch_dims + depth :], params.dtype)
    for pos in np.ndindex(*lead):
        vector = tuple(int(v) for v in indices[pos])
        out[pos] = params[pos[:batch_dims] + vector]
    return out


def _graph(params_shape, indices_shape, index_dtype, batch_dims=0, policy=""):
    root = mg.Scope.new_root_scope()
    p = Placeholder(root, mg.float32, shape=[None] * len(params_shape))
    i = Placeholder(root, mg.as_dtype(index_dtype), shape=[None] * len(indices_shape))
    g = GatherNd(root.with_op_name("g"), p, i, batch_dims=batch_dims, bad_indices_policy=policy)
    return root, p, i, g


def _outcome(sess, g, feed):
    try:
        return ("ok", sess.run(g, feed))
    except mg.OpError as e:
        return ("error", type(e), e.message)


@pytest.mark.parametrize("index_dtype", [np.int16, np.int32, np.int64])
@pytest.mark.parametrize("dims", [(97,), (40, 33), (12, 7, 9)])
def test_threaded_linearisation_matches_one_thread_and_the_reference(dims, index_dtype):
    rng = np.random.default_rng(len(dims))
    params = rng.random(dims + (3,), dtype=np.float32)
    root, p, i, g = _graph(params.shape, (ROWS, len(dims)), index_dtype)
    two = mg.Session(root, mg.SessionConfig(intra_op_threads=2))
    three = mg.Session(root, mg.SessionConfig(intra_op_threads=3))
    one = mg.Session(root, mg.SessionConfig(intra_op_threads=1))
    with one, two, three:
        for run in range(3):
            idx = rng.integers(0, dims, size=(ROWS, len(dims))).astype(index_dtype)
            feed = {p: params, i: idx}
            want = one.run(g, feed)
            if run == 0:
                np.testing.assert_array_equal(want[:500], _reference(params, idx[:500], 0))
                np.testing.assert_array_equal(want[-500:], _reference(params, idx[-500:], 0))
            np.testing.assert_array_equal(two.run(g, feed), want)
            np.testing.assert_array_equal(three.run(g, feed), want)


@pytest.mark.parametrize("policy", ["", "ERROR", "IGNORE"])
@pytest.mark.parametrize(
    "where, value",
    [
        (0, -1),  # first block, negative
        (ROWS // 2 + 3, 40),  # second block, one past the end
        (ROWS - 1, 10**6),  # last row
        (ROWS // 3, np.iinfo(np.int32).min),
    ],
)
def test_bad_indices_in_any_block_match_one_thread(where, value, policy):
    rng = np.random.default_rng(7)
    dims = (40, 33)
    params = rng.random(dims + (2,), dtype=np.float32)
    root, p, i, g = _graph(params.shape, (ROWS, 2), np.int32, policy=policy)
    one = mg.Session(root, mg.SessionConfig(intra_op_threads=1))
    two = mg.Session(root, mg.SessionConfig(intra_op_threads=2))
    with one, two:
        for column in (0, 1):
            idx = rng.integers(0, dims, size=(ROWS, 2)).astype(np.int32)
            idx[where, column] = value
            feed = {p: params, i: idx}
            want, got = _outcome(one, g, feed), _outcome(two, g, feed)
            assert want[0] == got[0]
            if want[0] == "ok":
                np.testing.assert_array_equal(got[1], want[1])
                assert (got[1][where] == 0).all()  # IGNORE: the bad row is zeros
            else:
                assert got[1:] == want[1:]
                assert f"indices[{where}]" in got[2]


def test_batch_dims_and_a_zero_size_dim():
    rng = np.random.default_rng(3)
    params = rng.random((4, 50, 30, 2), dtype=np.float32)
    m = ROWS // 4 + 1
    idx = rng.integers(0, [50, 30], size=(4, m, 2)).astype(np.int64)
    root, p, i, g = _graph(params.shape, idx.shape, np.int64, batch_dims=1)
    with mg.Session(root, mg.SessionConfig(intra_op_threads=2)) as sess:
        got = sess.run(g, {p: params, i: idx})
    np.testing.assert_array_equal(got[:, :50], _reference(params, idx[:, :50], 1))
    np.testing.assert_array_equal(got[:, -50:], _reference(params, idx[:, -50:], 1))
    # A zero-size indexed dim: every index is out of range.
    root, p, i, g = _graph((5, 0, 2), (ROWS, 2), np.int64)
    with mg.Session(root, mg.SessionConfig(intra_op_threads=2)) as sess:
        with pytest.raises(mg.InvalidArgumentError, match=r"indices\[0\] = \[0, 0\]"):
            sess.run(g, {p: np.zeros((5, 0, 2), np.float32), i: np.zeros((ROWS, 2), np.int64)})
