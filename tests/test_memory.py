"""The host buffer pool (minigraph.memory) and its use by sessions: buffers are recycled only
once nothing can see their memory, and pooled runs give the same values as unpooled ones."""

from __future__ import annotations

import ctypes
import gc
import threading

import numpy as np
import pytest

import minigraph as mg
from minigraph import memory
from minigraph.memory import BufferPool
from ops import GatherNd, GatherV2, Identity, Placeholder

# CPU behaviour (numpy kernels, host memory, TF's CPU errors): pinned to CPU:0.
pytestmark = pytest.mark.usefixtures("cpu_only")

MiB = 1 << 20


def _pool(**kw):
    kw.setdefault("min_bytes", 1024)
    return BufferPool(**kw)


def _shares(a, b) -> bool:
    return np.shares_memory(a, b)


# -- the pool itself ---------------------------------------------------------------------------


def test_small_and_object_requests_are_not_pooled():
    pool = _pool()
    a = pool.empty((10,), np.float32)  # 40 bytes < min_bytes
    assert a.base is None and a.flags.owndata
    s = pool.empty((1000,), object)
    assert s.dtype == object and s.flags.owndata
    assert pool.held_bytes == 0 and pool.misses == 0


def test_empty_has_the_requested_shape_dtype_and_layout():
    pool = _pool()
    for shape, dtype in [((64, 33), np.float32), ((7, 5, 300), np.int16), ((4096,), np.complex128)]:
        a = pool.empty(shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype)
        assert a.flags.c_contiguous and a.flags.writeable
        a[...] = 1  # the whole array is addressable


def test_a_referenced_buffer_is_never_handed_out_again():
    pool = _pool()
    a = pool.empty((1024,), np.float32)
    b = pool.empty((1024,), np.float32)
    assert not _shares(a, b)
    assert pool.misses == 2


def test_a_dropped_buffer_is_reused():
    pool = _pool()
    a = pool.empty((1024,), np.float32)
    address = a.ctypes.data
    del a
    b = pool.empty((1000,), np.float32)  # same size bucket
    assert b.ctypes.data == address
    assert pool.hits == 1 and pool.misses == 1


def _via_ctypes(c):
    return np.ctypeslib.as_array(c.data_as(ctypes.POINTER(ctypes.c_float)), (1024,))


# (what is kept of a pooled array, how to read the memory through it)
_KEEPERS = {
    "slice": (lambda a: a[3:10], lambda k: k),
    "view of a view": (lambda a: a.reshape(32, 32).T, lambda k: k),
    "dtype view": (lambda a: a.view(np.int32), lambda k: k.view(np.float32)),
    "memoryview": (memoryview, lambda k: np.asarray(k)),
    "frombuffer": (
        lambda a: np.frombuffer(memoryview(a), np.uint8),
        lambda k: k.view(np.float32),
    ),
    "asarray": (np.asarray, lambda k: k),
    "ctypes helper": (lambda a: a.ctypes, _via_ctypes),
    "dlpack": (np.from_dlpack, lambda k: k),
    "as_strided": (lambda a: np.lib.stride_tricks.as_strided(a, (4,), (4,)), lambda k: k),
    "container": (lambda a: [a], lambda k: k[0]),
}


@pytest.mark.parametrize("name", list(_KEEPERS))
def test_anything_that_can_see_the_memory_keeps_it_out_of_the_pool(name):
    keep, read = _KEEPERS[name]
    pool = _pool()
    a = pool.empty((1024,), np.float32)
    a[:] = 7
    kept = keep(a)
    del a
    gc.collect()
    b = pool.empty((1024,), np.float32)
    b[:] = -1
    values = np.asarray(read(kept))
    assert values.size and (values == 7).all()  # never overwritten
    del values, kept
    gc.collect()
    c = pool.empty((1024,), np.float32)  # now the first buffer is free again
    assert not _shares(b, c)
    assert pool.misses == 2 and pool.hits == 1


def test_buffers_of_other_sizes_are_kept_apart():
    pool = _pool()
    a = pool.empty((1024,), np.float32)
    del a
    b = pool.empty((8192,), np.float32)
    assert pool.misses == 2 and b.size == 8192


def test_bucket_rounding_wastes_under_a_fifth():
    for n in [1024, 1025, 3000, 123457, 8 * MiB, 100_000_000]:
        size = memory._bucket(n)
        assert n <= size <= n * 1.19 + 1


def test_cap_falls_back_to_plain_arrays_and_drops_free_buffers_first():
    pool = _pool(max_bytes=11_000)
    a = pool.empty((1024,), np.float32)  # 4096 bytes
    b = pool.empty((1024,), np.float32)
    c = pool.empty((1024,), np.float32)  # over the cap: plain numpy
    assert a.base is not None and b.base is not None and c.base is None
    assert pool.held_bytes == 8192
    del a
    d = pool.empty((1500,), np.float32)  # another bucket: a's free buffer is dropped for it
    assert d.base is not None and pool.held_bytes == 4096 + memory._bucket(6000) <= 11_000


def test_idle_free_buffers_are_dropped_when_a_new_one_is_needed():
    pool = _pool(max_idle=4)
    a = pool.empty((1024,), np.float32)
    held = pool.held_bytes
    del a
    keep = [pool.empty((4096,), np.float32) for _ in range(6)]  # misses; `a` ages out
    assert pool.held_bytes == sum(x.nbytes for x in keep)
    assert held > 0


def test_clear_forgets_buffers_but_arrays_stay_valid():
    pool = _pool()
    a = pool.empty((1024,), np.float32)
    a[:] = 3
    pool.clear()
    assert pool.held_bytes == 0
    b = pool.empty((1024,), np.float32)
    b[:] = 4
    assert (a == 3).all()


def test_disabled_pool_gives_plain_arrays():
    pool = BufferPool(max_bytes=0, min_bytes=1)
    a = pool.empty((1024,), np.float32)
    assert a.base is None and pool.held_bytes == 0


def test_threads_never_share_a_buffer():
    pool = _pool()
    errors = []

    def work(k: int) -> None:
        for _ in range(200):
            a = pool.empty((2048,), np.float32)
            a[:] = k
            if not (a == k).all():
                errors.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # Each thread holds at most two buffers: the last one while it asks for the next.
    assert pool.held_bytes <= 8 * memory._bucket(2048 * 4)


def test_free_bytes_and_repr():
    pool = _pool()
    a = pool.empty((1024,), np.float32)
    assert pool.free_bytes() == 0
    del a
    assert pool.free_bytes() == pool.held_bytes > 0
    assert "BufferPool" in repr(pool)


# -- sessions ------------------------------------------------------------------------------------


def _gather_graph(rows: int, cols: int):
    root = mg.Scope.new_root_scope()
    p = Placeholder(root, mg.float32, shape=[None, cols])
    i = Placeholder(root, mg.int64, shape=[None])
    g = GatherV2(root, p, i, 0)
    return p, i, g


@pytest.mark.parametrize("threads", [1, 2])
def test_fetched_outputs_are_never_overwritten_while_the_user_holds_them(threads):
    p, i, g = _gather_graph(1000, 1024)
    params = np.arange(1000 * 1024, dtype=np.float32).reshape(1000, 1024)
    config = mg.SessionConfig(intra_op_threads=threads)
    with mg.Session(g.operation.graph, config) as sess:
        kept = []
        for k in range(4):
            idx = np.full(600, k, np.int64)  # 2.4 MiB output: pooled
            out = sess.run(g, {p: params, i: idx})
            kept.append(out[5:7])  # only a view survives
            del out
        for k, view in enumerate(kept):
            np.testing.assert_array_equal(view, np.broadcast_to(params[k], (2, 1024)))
        held = sess._buffers.held_bytes
        del kept, view
        for _ in range(5):  # with nothing kept, reruns reuse the pool's buffers: no growth
            sess.run(g, {p: params, i: np.zeros(600, np.int64)})
        assert sess._buffers.held_bytes == held


def test_pooled_and_unpooled_sessions_agree_over_many_runs():
    rng = np.random.default_rng(0)
    root = mg.Scope.new_root_scope()
    p = Placeholder(root, mg.float32, shape=[None, 16, 32])
    i = Placeholder(root, mg.int64, shape=[None, 2])
    nd = GatherNd(root, p, i)
    v2 = GatherV2(root, nd, [3, 1, 2], 1)
    same = Identity(root, nd)
    pooled = mg.Session(root)
    plain = mg.Session(root)
    plain._buffers.enabled = False
    results = []
    for run in range(6):
        params = rng.random((100, 16, 32), dtype=np.float32)
        idx = rng.integers(0, [100, 16], size=(20_000, 2))
        feed = {p: params, i: idx}
        a = pooled.run([nd, v2, same], feed)
        b = plain.run([nd, v2, same], feed)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        assert a[0] is a[2]  # Identity hands the same array through
        if run % 2:
            results.append((a, [x.copy() for x in a]))
    for kept, copies in results:  # kept results were never overwritten by later runs
        for x, y in zip(kept, copies):
            np.testing.assert_array_equal(x, y)
    assert pooled._buffers.hits > 0  # dropped results were recycled


def test_chain_intermediates_are_recycled_within_a_run():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[512, 1024])
    idx = mg.Const(root, np.arange(511, -1, -1, dtype=np.int64))
    y = x
    for _ in range(10):
        y = GatherV2(root, y, idx, 0)
    value = np.random.default_rng(1).random((512, 1024), dtype=np.float32)
    # The gather-of-gather fusion (remapping) would make the chain one gather: keep it a chain.
    config = mg.SessionConfig(intra_op_threads=1, optimizer=mg.OptimizerConfig(remapping=False))
    with mg.Session(root, config) as sess:
        out = sess.run(y, {x: value})
        np.testing.assert_array_equal(out, value)  # reversed an even number of times
        assert len([b for bs in sess._buffers._buffers.values() for b in bs]) == 2
        del out
        sess.run(y, {x: value})
        assert sess._buffers.misses == 2  # the second run allocates nothing


def test_closing_the_session_releases_the_pool():
    p, i, g = _gather_graph(1000, 1024)
    sess = mg.Session(g.operation.graph)
    out = sess.run(g, {p: np.ones((10, 1024), np.float32), i: np.zeros(600, np.int64)})
    assert sess._buffers.held_bytes > 0
    sess.close()
    assert sess._buffers.held_bytes == 0
    assert (out == 1).all()
