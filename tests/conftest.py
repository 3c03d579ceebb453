# ==== execution tests (placer, session, devices, tracing): fixtures ===========================
# Used by test_device_spec.py, test_devices.py, test_placer.py, test_session*.py and
# test_tracing.py; their test ops live in tests/_exec_ops.py.

import pytest

import minigraph.devices
import minigraph.testing

#: The reason `no_gpu` gives for the missing GPU, so tests can check it is reported.
NO_GPU_REASON = "cupy cannot be imported (ModuleNotFoundError: no cupy in this test)"


@pytest.fixture
def exec_ops():
    """The execution tests' op module, with its recorded state cleared."""
    import _exec_ops

    _exec_ops.reset_state()
    yield _exec_ops
    _exec_ops.reset_state()


@pytest.fixture
def events(exec_ops):
    """Node names in the order their ExecTestRecord / ExecTestEffect kernels ran."""
    return exec_ops.EVENTS


@pytest.fixture
def sim_gpus():
    """New Sessions see CPU:0, GPU:0 and GPU:1 (simulated); yields [cpu, gpu0, gpu1]."""
    with minigraph.testing.simulated_gpus(2) as devices:
        yield devices


@pytest.fixture
def no_gpu(monkeypatch):
    """New Sessions see only CPU:0, as on a machine without cupy; returns the reason given."""
    cpu = minigraph.devices.CpuDevice(0)
    monkeypatch.setattr(minigraph.devices, "_override", None)
    monkeypatch.setattr(minigraph.devices, "_discovered", ([cpu], NO_GPU_REASON))
    return NO_GPU_REASON


# ==== end of execution tests fixtures ==========================================================
