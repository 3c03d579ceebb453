"""Unique (TF 2.21's op; the optimizers deduplicate sparse gradients with it): TF's examples,
a numpy reference over random vectors of every dtype TF's CPU kernel takes, first-appearance
order, NaNs, empty input, errors, the trusted-kernel promise, CPU and simulated GPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph as mg
import ops  # noqa: F401 - registers the op library
from minigraph import registry

Unique = registry.builder("Unique")


def run(x, out_idx=None, **session):
    s = mg.Scope.new_root_scope()
    u = Unique(s, x) if out_idx is None else Unique(s, x, out_idx=out_idx)
    with mg.Session(s, **session) as sess:
        return sess.run([u.y, u.idx])


def reference(x):
    """Written differently from the kernel: a dict in a Python loop."""
    seen: dict = {}
    idx = []
    for v in x.tolist():
        key = v if v == v else object()  # NaN: each one distinct
        idx.append(seen.setdefault(key, len(seen)))
    y = np.empty(len(seen), x.dtype)
    for pos, i in enumerate(idx):
        y[i] = x[pos]
    return y, np.array(idx)


def test_tfs_doc_example():
    y, idx = run(np.array([1, 1, 2, 4, 4, 4, 7, 8, 8], np.int32))
    np.testing.assert_array_equal(y, [1, 2, 4, 7, 8])
    np.testing.assert_array_equal(idx, [0, 0, 1, 2, 2, 2, 3, 4, 4])
    assert idx.dtype == np.int32


def test_nans_are_distinct_and_signed_zeros_one_value_as_tfs():
    y, idx = run(np.array([np.nan, 1.0, np.nan, -0.0, 0.0]), out_idx=mg.int64)
    assert np.isnan(y[[0, 2]]).all() and y[1] == 1.0 and y[3] == 0.0 and y.size == 4
    np.testing.assert_array_equal(idx, [0, 1, 2, 3, 3])
    assert idx.dtype == np.int64


@pytest.mark.parametrize(
    "dtype",
    [mg.float32, mg.float64, mg.float16, mg.bfloat16, mg.int8, mg.int16, mg.int32, mg.int64,
     mg.uint8, mg.uint16, mg.uint32, mg.uint64, mg.bool_],
)  # fmt: skip
def test_every_dtype_against_the_reference(dtype):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2 if dtype is mg.bool_ else 6, 40).astype(dtype.np_dtype)
    y, idx = run(x)
    ry, ridx = reference(x)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(idx, ridx)


def test_strings_and_empty_vectors():
    y, idx = run(np.array([b"b", b"a", b"b", b""], object))
    assert y.tolist() == [b"b", b"a", b""] and idx.tolist() == [0, 1, 0, 2]
    y, idx = run(np.zeros(0, np.float32))
    assert y.shape == (0,) and y.dtype == np.float32 and idx.shape == (0,)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=30), st.sampled_from(["int32", "int64", "float64"]))
def test_random_vectors_match_the_reference(values, dtype):
    x = np.array(values, dtype)
    y, idx = run(x)
    ry, ridx = reference(x)
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(idx.reshape(-1), ridx.reshape(-1))
    np.testing.assert_array_equal(y[idx], x)


def test_not_a_vector_is_refused_at_construction_or_run():
    s = mg.Scope.new_root_scope()
    with pytest.raises(mg.InvalidArgumentError, match="must be rank 1"):
        Unique(s, np.zeros((2, 2)))
    with pytest.raises(mg.InvalidArgumentError, match="out_idx"):
        Unique(s, np.zeros(2), out_idx=mg.float32)
    x = mg.Placeholder(s, mg.float32, None)
    u = Unique(s, x)
    with mg.Session(s) as sess, pytest.raises(mg.InvalidArgumentError, match="1D vector"):
        sess.run(u.y, {x: np.zeros((2, 2), np.float32)})


def test_the_outputs_are_fresh_arrays_of_the_inferred_types(sim_gpus):
    s = mg.Scope.new_root_scope()
    x = mg.Placeholder(s, mg.int64, [None])
    results = {}
    for device in ("/device:CPU:0", "/device:GPU:0"):
        u = Unique(s.with_device(device), x)
        results[device] = u
    feed = np.array([5, 3, 5, 9], np.int64)
    with mg.Session(s, mg.SessionConfig(check_kernel_outputs=True)) as sess:
        for device, u in results.items():
            meta = mg.RunMetadata()
            y, idx = sess.run([u.y, u.idx], {x: feed}, run_metadata=meta)
            assert meta.placement[u.operation.name].endswith(device[len("/device:") :])
            np.testing.assert_array_equal(y, [5, 3, 9])
            np.testing.assert_array_equal(idx, [0, 1, 0, 2])
            assert not np.shares_memory(y, feed)
    np.testing.assert_array_equal(feed, [5, 3, 5, 9])  # the input is never written
