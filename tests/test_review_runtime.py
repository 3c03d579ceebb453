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


distributed = pytest.importorskip("distributed")


@pytest.mark.parametrize("target", ["garbage", "tcp://", "tcp://host:notaport"])
def test_a_target_dask_cannot_parse_is_an_invalid_argument(target):
    scope = mg.Scope.new_root_scope()
    with pytest.raises((InvalidArgumentError, mg.UnavailableError), match="Dask scheduler"):
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
