"""Devices: CPU:0 always; GPU:i through cupy, discovered lazily on first use.

A `Device` owns its array module (`xp`: numpy or cupy) and the copies to and from host memory.
Importing minigraph never imports cupy; the first call that needs the device list does, and if
GPU discovery fails the reason is kept and shown (`list_devices(verbose=True)`, the error of a
strict placement) rather than swallowed.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from minigraph.device_spec import LOCAL_JOB, DeviceSpec
from minigraph.errors import InvalidArgumentError

__all__ = [
    "Device",
    "CpuDevice",
    "CupyGpuDevice",
    "get_devices",
    "list_devices",
    "gpu_unavailable_reason",
    "is_device_array",
    "use_devices",
    "install_cluster_lister",
]


class Device:
    """A place where kernels run. Subclasses set `xp` and implement the host copies."""

    device_type: str = ""
    is_host: bool = False
    #: Simulated devices (see minigraph.testing) say so in their description.
    simulated: bool = False

    def __init__(self, index: int, description: str = ""):
        self.index = index
        self.spec = DeviceSpec(LOCAL_JOB, 0, 0, self.device_type, index)
        self.name = self.spec.to_string()
        self.short_name = f"{self.device_type}:{index}"
        self.description = description
        self.xp: Any = np

    def to_host(self, array: Any) -> np.ndarray:
        """A host (numpy) copy or view of `array`, which lives on this device."""
        raise NotImplementedError

    def from_host(self, array: np.ndarray) -> Any:
        """`array` copied onto this device."""
        raise NotImplementedError

    def copy_from(self, array: Any, source: Device) -> Any:
        """`array`, which lives on `source`, as an array on this device."""
        if source is self:
            return array
        if source.is_host:
            return self.from_host(array)
        host = source.to_host(array)
        return host if self.is_host else self.from_host(host)

    def accepts(self, value: Any) -> bool:
        """Whether `value` already is an array of this device (fed values)."""
        return isinstance(value, np.ndarray)

    def activate(self) -> contextlib.AbstractContextManager[Any]:
        """A context in which this device is current (a CUDA device for cupy)."""
        return contextlib.nullcontext()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class CpuDevice(Device):
    device_type = "CPU"
    is_host = True

    def __init__(self, index: int = 0):
        super().__init__(index, "host memory, numpy kernels")

    def to_host(self, array: Any) -> np.ndarray:
        return array

    def from_host(self, array: np.ndarray) -> np.ndarray:
        return array


class CupyGpuDevice(Device):
    """A CUDA GPU driven through cupy."""

    device_type = "GPU"

    def __init__(self, index: int, cupy: Any, description: str):
        super().__init__(index, description)
        self.xp = cupy
        self._cuda_device = cupy.cuda.Device(index)

    def to_host(self, array: Any) -> np.ndarray:
        return self.xp.asnumpy(array)

    def from_host(self, array: np.ndarray) -> Any:
        if array.dtype == object:
            raise TypeError("string tensors cannot live on a GPU")
        with self._cuda_device:
            return self.xp.asarray(array)

    def copy_from(self, array: Any, source: Device) -> Any:
        if isinstance(source, CupyGpuDevice) and source is not self:
            with self._cuda_device:
                return self.xp.asarray(array)  # peer copy
        return super().copy_from(array, source)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.xp.ndarray) and value.device.id == self.index

    def activate(self) -> contextlib.AbstractContextManager[Any]:
        return self._cuda_device


def is_device_array(value: Any) -> bool:
    """Whether `value` is an array in a GPU's memory: a cupy array (anything exporting the CUDA
    array interface) or an array of a simulated GPU (minigraph.testing)."""
    if hasattr(value, "__cuda_array_interface__"):
        return True
    testing = sys.modules.get("minigraph.testing")  # only loaded where simulated GPUs are used
    return testing is not None and isinstance(value, testing.SimulatedArray)


_lock = threading.Lock()
_discovered: tuple[list[Device], str | None] | None = None
_override: list[Device] | None = None


def _discover() -> tuple[list[Device], str | None]:
    """[CPU:0, GPU:0, ...] and, when there is no GPU, why."""
    devices: list[Device] = [CpuDevice(0)]
    try:
        import cupy  # noqa: PLC0415 - GPU discovery is lazy on purpose
    except Exception as e:  # ImportError, or a broken CUDA install raising anything
        return devices, (
            f"cupy cannot be imported ({type(e).__name__}: {e}); install the GPU extra: "
            "pip install 'minigraph[gpu]'"
        )
    try:
        if not cupy.cuda.is_available():
            return devices, (
                "cupy is installed but cupy.cuda.is_available() is False: no CUDA device or "
                "driver is visible to this process"
            )
        count = cupy.cuda.runtime.getDeviceCount()
        for i in range(count):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            memory = props.get("totalGlobalMem", 0) / 2**30
            devices.append(CupyGpuDevice(i, cupy, f"{name}, {memory:.0f} GiB, cupy kernels"))
    except Exception as e:
        return devices[:1], f"CUDA device discovery failed: {type(e).__name__}: {e}"
    return devices, None


def _state() -> tuple[list[Device], str | None]:
    global _discovered
    if _override is not None:
        return _override, None
    if _discovered is None:
        with _lock:
            if _discovered is None:
                _discovered = _discover()
    return _discovered


def get_devices() -> list[Device]:
    """The devices sessions may use: CPU:0 first, then GPU:0, GPU:1, ..."""
    return list(_state()[0])


def gpu_unavailable_reason() -> str | None:
    """Why there is no GPU (None when there is one)."""
    devices, reason = _state()
    if any(d.device_type == "GPU" for d in devices):
        return None
    return reason or "no GPU device is configured"


def list_devices(verbose: bool = False, target: Any = None) -> list[str]:
    """Full names of the available devices.

    With `verbose`, each entry also describes the device, and when there is no GPU a last entry
    says why (e.g. cupy missing, or no CUDA device visible).

    With `target` (a `distributed.Client` or a scheduler address), the client's devices are
    followed by every task's (`/job:worker/replica:0/task:K/device:CPU:0`, ...).
    """
    if not isinstance(verbose, (bool, np.bool_)):
        raise InvalidArgumentError(f"list_devices: verbose is True or False; got {verbose!r}")
    devices = get_devices()
    if not verbose:
        lines = [d.name for d in devices]
    else:
        lines = []
        for d in devices:
            tag = " [simulated]" if d.simulated else ""
            lines.append(f"{d.name}: {d.description}{tag}")
        reason = gpu_unavailable_reason()
        if reason:
            lines.append(f"GPU: none ({reason})")
    if target is not None and target != "":
        return _cluster_lister[0](target, verbose, lines)
    return lines


# Listing a cluster's devices is minigraph.distributed's (a layer above, and an optional extra):
# the package's __init__ installs it here, so this module never imports upwards.
_cluster_lister: list[Any] = [None]


def install_cluster_lister(fn: Any) -> None:
    """Installs `fn(target, verbose, local_lines) -> lines` behind `list_devices(target=...)`
    (for `minigraph/__init__.py`)."""
    _cluster_lister[0] = fn


@contextlib.contextmanager
def use_devices(devices: list[Device]) -> Iterator[list[Device]]:
    """Makes sessions created inside the block use `devices` (for minigraph.testing)."""
    global _override
    previous = _override
    _override = list(devices)
    try:
        yield list(devices)
    finally:
        _override = previous
