"""Devices: discovery (CPU always, GPUs through cupy), simulated GPUs and their copy counters."""

import importlib.util
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import minigraph
import minigraph.devices as devices_mod
import minigraph.testing
from minigraph import InvalidArgumentError, Session, SessionConfig
from minigraph.devices import CpuDevice
from minigraph.testing import SimulatedArray, SimulatedGpuDevice

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


# -- discovery -----------------------------------------------------------------------------------


def test_cpu0_always_exists_and_comes_first():
    devices = minigraph.get_devices()
    assert devices[0].name == CPU0
    assert devices[0].is_host and devices[0].device_type == "CPU"
    assert devices[0].xp is np
    assert minigraph.list_devices()[0] == CPU0
    assert all(isinstance(name, str) for name in minigraph.list_devices())


def test_verbose_list_explains_why_there_is_no_gpu_on_this_machine():
    reason = minigraph.gpu_unavailable_reason()
    if reason is None:
        pytest.skip("this machine has a GPU")
    assert reason.startswith(("cupy cannot be imported", "cupy is installed but", "CUDA device"))
    lines = minigraph.list_devices(verbose=True)
    assert lines[0] == f"{CPU0}: host memory, numpy kernels"
    assert lines[-1] == f"GPU: none ({reason})"


def test_verbose_list_with_no_gpu_names_the_reason(no_gpu):
    assert minigraph.list_devices() == [CPU0]
    assert minigraph.list_devices(verbose=True) == [
        f"{CPU0}: host memory, numpy kernels",
        f"GPU: none ({no_gpu})",
    ]
    assert minigraph.gpu_unavailable_reason() == no_gpu


def test_discover_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ImportError
    devices, reason = devices_mod._discover()
    assert [d.name for d in devices] == [CPU0]
    assert reason.startswith("cupy cannot be imported (ModuleNotFoundError")
    assert "pip install 'minigraph[gpu]'" in reason


def _fake_cupy(available=True, count=0, fail=None):
    def get_device_count():
        if fail:
            raise fail
        return count

    runtime = types.SimpleNamespace(
        getDeviceCount=get_device_count,
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "totalGlobalMem": 8 * 2**30},
    )
    cuda = types.SimpleNamespace(
        is_available=lambda: available, runtime=runtime, Device=lambda i: ("cuda", i)
    )
    module = types.ModuleType("cupy")
    module.cuda = cuda
    return module


def test_discover_with_cupy_but_no_cuda_device(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(available=False))
    devices, reason = devices_mod._discover()
    assert [d.name for d in devices] == [CPU0]
    assert "cupy.cuda.is_available() is False" in reason
    assert "no CUDA device or driver is visible" in reason


def test_discover_keeps_the_reason_when_discovery_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(fail=RuntimeError("driver too old")))
    devices, reason = devices_mod._discover()
    assert [d.name for d in devices] == [CPU0]
    assert reason == "CUDA device discovery failed: RuntimeError: driver too old"


def test_discover_lists_cuda_devices(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=2))
    devices, reason = devices_mod._discover()
    assert reason is None
    assert [d.name for d in devices] == [CPU0, GPU0, GPU1]
    assert devices[1].description == "Fake GPU, 8 GiB, cupy kernels"
    assert devices[2]._cuda_device == ("cuda", 1)
    assert not devices[1].simulated


def test_importing_minigraph_does_not_import_cupy():
    code = (
        "import sys, minigraph; "
        "s = minigraph.Scope.new_root_scope(); minigraph.Const(s, 1.0); "
        "assert 'cupy' not in sys.modules, 'cupy imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# -- simulated GPUs ------------------------------------------------------------------------------


def test_simulated_gpus_are_seen_by_new_sessions():
    before = minigraph.list_devices()
    with minigraph.testing.simulated_gpus(2) as devices:
        cpu, gpu0, gpu1 = devices
        assert isinstance(cpu, CpuDevice)
        assert isinstance(gpu0, SimulatedGpuDevice) and gpu0.device_type == "GPU"
        assert [d.name for d in Session().devices] == [CPU0, GPU0, GPU1]
        assert minigraph.list_devices() == [CPU0, GPU0, GPU1]
        assert minigraph.gpu_unavailable_reason() is None
        assert Session().devices[1] is gpu0
    # Outside the block the machine's devices are back.
    assert minigraph.list_devices() == before
    assert Session().devices == minigraph.get_devices()
    assert all(d not in devices for d in Session().devices)


def test_simulated_gpus_say_they_are_simulated():
    with minigraph.testing.simulated_gpus(1) as (cpu, gpu):
        assert gpu.simulated and not cpu.simulated
        lines = minigraph.list_devices(verbose=True)
    assert lines == [
        f"{CPU0}: host memory, numpy kernels",
        f"{GPU0}: simulated GPU (a test double: cupy-like arrays over numpy) [simulated]",
    ]


def test_simulated_gpus_nest_and_restore():
    with minigraph.testing.simulated_gpus(1):
        with minigraph.testing.simulated_gpus(3):
            assert len(minigraph.get_devices()) == 4
        assert len(minigraph.get_devices()) == 2


def test_session_keeps_the_devices_it_was_created_with():
    with minigraph.testing.simulated_gpus(1) as (_, gpu):
        sess = Session()
    assert [d.name for d in sess.devices] == [CPU0, GPU0]
    assert sess.devices[1] is gpu
    assert Session().devices == minigraph.get_devices()
    assert gpu not in minigraph.get_devices()


def test_session_config_devices_and_host_requirement():
    gpu = SimulatedGpuDevice(0)
    sess = Session(config=SessionConfig(devices=[CpuDevice(0), gpu]))
    assert sess.devices[1] is gpu
    with pytest.raises(InvalidArgumentError, match="a session needs a host \\(CPU\\) device"):
        Session(config=SessionConfig(devices=[gpu]))


def test_simulated_gpu_counts_copies_and_bytes():
    gpu = SimulatedGpuDevice(0)
    host = np.arange(6, dtype=np.float32)
    on_gpu = gpu.from_host(host)
    assert (gpu.copies_in, gpu.bytes_in, gpu.copies_out, gpu.bytes_out) == (1, 24, 0, 0)
    assert isinstance(on_gpu, SimulatedArray) and not isinstance(on_gpu, np.ndarray)
    # A real copy: changing the host array does not change the device one, nor the reverse.
    host[0] = 99
    back = gpu.to_host(on_gpu)
    assert type(back) is np.ndarray and back.tolist() == [0, 1, 2, 3, 4, 5]
    back[1] = 99
    assert on_gpu.tolist() == [0, 1, 2, 3, 4, 5]
    assert (gpu.copies_out, gpu.bytes_out) == (1, 24)
    gpu.from_host(np.zeros((2, 3), np.int64))
    assert (gpu.copies_in, gpu.bytes_in) == (2, 24 + 48)
    gpu.reset_counters()
    assert (gpu.copies_in, gpu.bytes_in, gpu.copies_out, gpu.bytes_out) == (0, 0, 0, 0)


def test_simulated_gpu_rejects_strings_and_never_accepts_host_arrays():
    gpu = SimulatedGpuDevice(0)
    with pytest.raises(TypeError, match="string tensors cannot live on a GPU"):
        gpu.from_host(np.array([b"a"], dtype=object))
    assert gpu.copies_in == 0
    assert not gpu.accepts(np.zeros(3))


def test_copies_between_devices():
    cpu = CpuDevice(0)
    gpu0, gpu1 = SimulatedGpuDevice(0), SimulatedGpuDevice(1)
    host = np.ones(4, np.float32)
    assert cpu.copy_from(host, cpu) is host
    assert cpu.accepts(host) and not cpu.accepts([1.0])
    on0 = gpu0.copy_from(host, cpu)
    assert gpu0.copy_from(on0, gpu0) is on0  # same device: no copy
    assert gpu0.copies_in == 1
    on1 = gpu1.copy_from(on0, gpu0)  # through the host
    assert (gpu0.copies_out, gpu1.copies_in) == (1, 1)
    back = cpu.copy_from(on1, gpu1)
    assert gpu1.copies_out == 1 and np.array_equal(back, host)


def test_counters_are_thread_safe():
    gpu = SimulatedGpuDevice(0)
    array = np.zeros(10, np.int8)

    def work():
        for _ in range(500):
            gpu.from_host(array)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gpu.copies_in == 4000 and gpu.bytes_in == 40000


# -- real cupy -----------------------------------------------------------------------------------

requires_cupy = pytest.mark.skipif(
    importlib.util.find_spec("cupy") is None, reason="cupy is not installed"
)


@requires_cupy
def test_real_cupy_gpu_runs_a_graph():
    cupy = pytest.importorskip("cupy")
    try:
        available = cupy.cuda.is_available()
    except Exception as e:  # a broken CUDA install
        pytest.skip(f"cupy.cuda.is_available() failed: {e}")
    if not available:
        pytest.skip("cupy.cuda.is_available() is False")
    devices = minigraph.get_devices()
    assert devices[1].name == GPU0 and not devices[1].simulated
    assert devices[1].xp is cupy
    scope = minigraph.Scope.new_root_scope()
    x = minigraph.Placeholder(scope, minigraph.float32, shape=[3])
    y = minigraph.Identity(scope.with_op_name("y"), x)
    metadata = minigraph.RunMetadata()
    with Session(scope) as sess:
        out = sess.run(y, {x: np.array([1, 2, 3], np.float32)}, run_metadata=metadata)
        assert metadata.placement["y"] == GPU0
        assert type(out) is np.ndarray and out.tolist() == [1, 2, 3]
        # A cupy array can be fed directly.
        out = sess.run(y, {x: cupy.asarray(np.array([4, 5, 6], np.float32))})
        assert type(out) is np.ndarray and out.tolist() == [4, 5, 6]
