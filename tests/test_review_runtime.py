"""Review findings around the runtime: the simulated-GPU helpers' arguments, and the
distributed session's targets (an address Dask cannot parse, a server that is not a Dask
scheduler). Each was found by tests/hostile/battery.py."""

import socket
import threading
import time

import numpy as np
import pytest

import minigraph as mg
from minigraph import InvalidArgumentError
from minigraph.devices import CpuDevice
from minigraph.testing import MAX_SIMULATED_GPUS, pinned_devices, simulated_gpus
from ops import Cast, DynamicPartition, DynamicStitch, Reshape


@pytest.mark.parametrize("count", [-1, 1.5, "2", None, True, MAX_SIMULATED_GPUS + 1])
def test_simulated_gpus_takes_a_gpu_count(count):
    with pytest.raises(InvalidArgumentError, match="simulated_gpus"):
        with simulated_gpus(count):
            pass


def test_simulated_gpus_counts_from_zero():
    with simulated_gpus(0) as devices:
        assert [d.device_type for d in devices] == ["CPU"]
    with simulated_gpus(np.int64(2)) as devices:
        assert [d.device_type for d in devices] == ["CPU", "GPU", "GPU"]


@pytest.mark.parametrize("devices", [5, "CPU", ["CPU"], [], None])
def test_pinned_devices_takes_devices_with_a_host(devices):
    with pytest.raises(InvalidArgumentError, match="pinned_devices"):
        with pinned_devices(devices):
            pass
    with pinned_devices([CpuDevice(0)]) as pinned:
        assert len(pinned) == 1


# -- fed arrays: the plan's feed protection (minigraph/plan.py, session.py) ------------------
# Issue 10 section 2: "a result must not be a view of a fed array unless it is the fed tensor
# itself". Kernels that return their input (Identity, Cast to the same dtype, a one-part
# DynamicPartition) would hand the caller its fed array back for a tensor that is not the fed
# one; plan.fed_pass_through finds those results and the session copies them.


@pytest.mark.parametrize("node", ["identity", "partition1"])
def test_a_fetched_trusted_pass_through_of_a_feed_is_not_the_fed_array(node):
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.int32, shape=[3])
    fetch = {
        "identity": lambda: mg.Identity(scope, x),
        "partition1": lambda: DynamicPartition(scope, x, [0, 0, 0], num_partitions=1)[0],
    }[node]()
    fed = np.array([1, 2, 3], np.int32)
    with pinned_devices([CpuDevice(0)]):  # the feed stays the caller's array
        session = mg.Session(scope)
        for _ in range(3):  # the first run interprets, later ones run generated code
            got = session.run(fetch, {x: fed})
            assert not np.shares_memory(got, fed)
            np.testing.assert_array_equal(got, [1, 2, 3])


def test_an_untrusted_kernel_returning_its_fed_input_gives_a_copy():
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.int32, shape=[3])
    fed = np.array([1, 2, 3], np.int32)
    with pinned_devices([CpuDevice(0)]):  # the feed stays the caller's array
        got = mg.Session(scope).run(Cast(scope, x, DstT=mg.int32), {x: fed})
    assert not np.shares_memory(got, fed)


@pytest.mark.parametrize(
    "config, traced",
    [(mg.SessionConfig(), False), (mg.SessionConfig(inter_op_threads=2), False),
     (mg.SessionConfig(), True)],
)  # fmt: skip
def test_only_the_fed_tensor_itself_comes_back_as_the_fed_array(config, traced):
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope, mg.int32, shape=[3])
    y = mg.Identity(scope, mg.Identity(scope, x))
    fed = np.array([1, 2, 3], np.int32)
    options = mg.RunOptions(trace=True) if traced else None
    with pinned_devices([CpuDevice(0)]):
        session = mg.Session(scope, config=config)
        for _ in range(3):
            same, other = session.run([x, y], {x: fed}, options=options)
            assert same is fed  # documented: the fed tensor, fetched, is the caller's array
            assert not np.shares_memory(other, fed)
            fed[0] += 1  # the results above are not changed by it
            assert other[0] == fed[0] - 1


def test_an_untrusted_kernel_returning_a_view_of_its_fed_input_gives_a_copy():
    scope = mg.Scope.new_root_scope()
    # The sibling that works: a reshape (a view) of the feed comes back copied.
    x = mg.Placeholder(scope, mg.int32, shape=[3])
    fed = np.array([1, 2, 3], np.int32)
    with pinned_devices([CpuDevice(0)]):  # the feed stays the caller's array
        got = mg.Session(scope).run(Reshape(scope, x, [3]), {x: fed})
    assert not np.shares_memory(got, fed)


# -- DynamicStitch on a GPU (ops/partition.py, outside this review's files) ------------------


def test_a_gpu_stitch_of_empty_rows_allocates_no_row_sized_scratch():
    import tracemalloc

    rows = 1 << 22
    scope = mg.Scope.new_root_scope()
    with simulated_gpus(1):
        stitched = DynamicStitch(
            scope.with_device("/gpu:0"), [[rows - 1]], [np.zeros((1, 0), np.float32)]
        )
        with mg.Session(scope) as session:
            session.run(stitched)  # warm: plans, pools
            tracemalloc.start()
            try:
                out = session.run(stitched)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert out.shape == (rows, 0)
    assert peak < rows  # an int32 per row would be 4 * rows bytes


# -- DynamicStitch: later tensors win, on every CPU path ----------------------------------------


@pytest.mark.parametrize(
    "data, want",
    [
        ([["a", "b"], ["c"]], [b"a", b"c"]),  # strings: the object path
        ([[1.0, 2.0], [3.0]], [1.0, 3.0]),  # numbers: the scatter path
        ([[[1, 2], [3, 4]], [[5, 6]]], [[1, 2], [5, 6]]),  # rows: `put` of void items
    ],
)
def test_stitch_repeated_indices_across_tensors_take_the_later_tensor(data, want):
    scope = mg.Scope.new_root_scope()
    stitched = DynamicStitch(scope, [[0, 1], [1]], data)
    with pinned_devices([CpuDevice(0)]):
        got = mg.Session(scope).run(stitched)
    assert got.tolist() == want


distributed = pytest.importorskip("distributed")


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("garbage", "missing port number"),
        ("tcp://", "missing port number"),
        ("tcp://host:notaport", "invalid literal for int"),
        ("tls://host:99999", r"port 99999 is not in \[1, 65535\]"),
        ("tcp://host:0", r"port 0 is not in \[1, 65535\]"),
    ],
)
def test_a_target_dask_cannot_parse_is_an_invalid_argument(target, why, monkeypatch):
    # Refused before any Client is made (one that fails to start takes seconds to close when
    # collected): making one here fails the test.
    class NoClient(distributed.Client):
        def __init__(self, *args, **kwargs):
            raise AssertionError("a Client was made for an address that cannot be parsed")

        def __del__(self):
            pass

    monkeypatch.setattr(distributed, "Client", NoClient)
    scope = mg.Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match=f"is not a Dask scheduler address.*{why}"):
        mg.Session(scope, mg.SessionConfig(connect_timeout=2), target=target)


def test_a_server_that_is_not_a_dask_scheduler_is_unavailable_promptly():
    # A server that answers every connection with bytes Dask reads as an absurd frame length.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            try:
                conn.sendall(b"\xff" * 64 + b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)
                time.sleep(0.5)
            except OSError:
                pass
            finally:
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    scope = mg.Scope.new_root_scope()
    start = time.monotonic()
    try:
        with pytest.raises((mg.UnavailableError, InvalidArgumentError)):
            mg.Session(scope, mg.SessionConfig(connect_timeout=3), target=f"tcp://127.0.0.1:{port}")
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert time.monotonic() - start < 30


# -- session arguments (found by the battery after the rebase on the plan/session rework) ---------


def test_fetches_nested_absurdly_deep_are_an_invalid_argument_not_a_recursion_error():
    scope = mg.Scope.new_root_scope()
    c = mg.Const(scope, [1, 2])
    deep = c
    for _ in range(5000):
        deep = [deep]
    with mg.Session(scope) as session:
        with pytest.raises(InvalidArgumentError, match="nested more than 100 levels"):
            session.run(deep)
        # A nesting that deep is refused, one a little shallower still runs.
        shallow = c
        for _ in range(50):
            shallow = [shallow]
        got = session.run(shallow)
        for _ in range(50):
            got = got[0]
        np.testing.assert_array_equal(got, [1, 2])


@pytest.mark.parametrize(
    "path, error, match",
    [
        ("/nonexistent/dir/t.json", mg.NotFoundError, "cannot write the trace"),
        (".", mg.FailedPreconditionError, "cannot write the trace"),
        (5, InvalidArgumentError, "a path is a str"),
    ],
)
def test_chrome_trace_to_a_path_it_cannot_write_is_a_typed_error(path, error, match):
    scope = mg.Scope.new_root_scope()
    c = mg.Const(scope, [1, 2])
    md = mg.RunMetadata()
    with pinned_devices([CpuDevice(0)]):
        mg.Session(scope).run(c, options=mg.RunOptions(trace=True), run_metadata=md)
    with pytest.raises(error, match=match):
        md.chrome_trace(path)
    assert "traceEvents" in md.chrome_trace()  # without a path it still works
