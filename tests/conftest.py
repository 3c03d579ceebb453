"""Test configuration: the machine the suite runs on, and the fixtures that pin devices.

The suite must pass on a machine without a GPU and on one with GPUs. A CI variant runs it with
simulated GPUs present as if discovered (minigraph.testing):

    MINIGRAPH_TEST_SIMULATED_GPUS=2 pytest

Device-agnostic tests (most of them: values against references) then run their kernels on a
simulated GPU, through the cupy-like namespace, so the GPU code paths are tested against the
same references.

Pinning devices, one mechanism: a test that assumes a device set asks for it through a fixture,
on the test or on its module (`pytestmark = pytest.mark.usefixtures("cpu_only")`):

- `cpu_only`: new Sessions see CPU:0 only, whatever the machine has (tests of CPU behaviour:
  TF's CPU errors for out-of-range indices, CPU placement, host-only results);
- `no_gpu`: the same, as a machine without cupy (tests of the "why there is no GPU" messages);
- `sim_gpus`: CPU:0 and two simulated GPUs (tests of GPU placement and copies);
- `minigraph.testing.simulated_gpus(n)` inside a test, for other counts.

Tests that build their own device list pass it explicitly (`SessionConfig(devices=...)`).

The graph optimizer, one switch (the CI runs the suite both ways):

    MINIGRAPH_TEST_OPTIMIZER=off pytest

makes new Sessions default to the optimizer off (`OPTIMIZER_ENV` below), so every graph the
suite runs also runs unoptimized and must give the same values; tests that compare both ways
themselves pass `SessionConfig(optimizer=True/False)`.
"""

import os

import pytest

import minigraph.devices
import minigraph.optimizer
import minigraph.testing

#: The reason `no_gpu` gives for the missing GPU, so tests can check it is reported.
NO_GPU_REASON = "cupy cannot be imported (ModuleNotFoundError: no cupy in this test)"

#: Simulated GPUs the whole run sees as the machine's devices (the CI's GPU variant).
SIMULATED_GPUS_ENV = "MINIGRAPH_TEST_SIMULATED_GPUS"


def _simulated_gpu_count() -> int:
    raw = os.environ.get(SIMULATED_GPUS_ENV, "").strip() or "0"
    try:
        count = int(raw)
    except ValueError:
        raise pytest.UsageError(f"{SIMULATED_GPUS_ENV} must be a GPU count, got {raw!r}") from None
    if count < 0:
        raise pytest.UsageError(f"{SIMULATED_GPUS_ENV} must be >= 0, got {count}")
    return count


SIMULATED_GPUS = _simulated_gpu_count()

#: The optimizer switch (the CI runs the suite both ways): MINIGRAPH_TEST_OPTIMIZER=off makes
#: new Sessions default to the graph optimizer off (`minigraph.optimizer.set_default_config`),
#: so every graph the suite runs also runs unoptimized and must give the same values; "on", the
#: default, leaves it on. Tests that pass SessionConfig(optimizer=...) keep what they ask for.
OPTIMIZER_ENV = "MINIGRAPH_TEST_OPTIMIZER"


def _optimizer_switch() -> bool:
    raw = os.environ.get(OPTIMIZER_ENV, "").strip().lower() or "on"
    if raw not in ("on", "off"):
        raise pytest.UsageError(f"{OPTIMIZER_ENV} must be 'on' or 'off', got {raw!r}")
    return raw == "on"


OPTIMIZER_ON = _optimizer_switch()
# Set at import, before test modules are collected: configs they build at import get it too.
minigraph.optimizer.set_default_config(OPTIMIZER_ON)


def pytest_report_header(config):
    optimizer = f"graph optimizer {'on' if OPTIMIZER_ON else 'off'} ({OPTIMIZER_ENV})"
    if SIMULATED_GPUS:
        return (
            f"minigraph devices: CPU:0 and {SIMULATED_GPUS} simulated GPU(s) "
            f"({SIMULATED_GPUS_ENV}={SIMULATED_GPUS}); {optimizer}"
        )
    return f"minigraph devices: as discovered ({minigraph.list_devices()}); {optimizer}"


@pytest.fixture(scope="session", autouse=True)
def machine_devices():
    """The devices sessions see by default: the machine's, or the simulated GPU variant's."""
    if not SIMULATED_GPUS:
        yield minigraph.get_devices()
        return
    with minigraph.testing.simulated_gpus(SIMULATED_GPUS) as devices:
        yield devices


# ==== device pinning ==============================================================================


@pytest.fixture
def cpu_only():
    """New Sessions see CPU:0 only, whatever the machine (or the CI variant) has."""
    with minigraph.testing.pinned_devices([minigraph.devices.CpuDevice(0)]) as devices:
        yield devices


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


# ==== execution tests (placer, session, devices, tracing): fixtures ===========================
# Used by test_device_spec.py, test_devices.py, test_placer.py, test_session*.py and
# test_tracing.py; their test ops live in tests/_exec_ops.py.


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


# ==== end of execution tests fixtures ==========================================================
