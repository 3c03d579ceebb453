"""Test doubles: simulated GPU devices for machines without one.

A `SimulatedGpuDevice` is a GPU as far as placement and kernel selection go (device type "GPU",
GPU kernels run on it), but its array module is numpy and its "device memory" is host memory.
Every copy across it is a real copy, counted in bytes, so tests can check how many transfers a
plan makes. It is a test double: it says so in `list_devices(verbose=True)` and proves nothing
about cupy; the real cupy path is tested when cupy and a GPU are present.

    with minigraph.testing.simulated_gpus(2) as (cpu, gpu0, gpu1):
        sess = Session(scope)   # sees CPU:0, GPU:0, GPU:1
        ...
        gpu0.bytes_in, gpu0.copies_in
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from minigraph.devices import CpuDevice, Device, _use_devices

__all__ = ["SimulatedGpuDevice", "simulated_gpus"]


class SimulatedGpuDevice(Device):
    """A GPU stand-in running GPU kernels with numpy; counts copies in and out."""

    device_type = "GPU"
    simulated = True

    def __init__(self, index: int):
        super().__init__(index, "simulated GPU (numpy array module; a test double, not cupy)")
        self._lock = threading.Lock()
        self.reset_counters()

    def reset_counters(self) -> None:
        with self._lock:
            self.copies_in = 0
            self.copies_out = 0
            self.bytes_in = 0
            self.bytes_out = 0

    def from_host(self, array: np.ndarray) -> np.ndarray:
        if array.dtype == object:
            raise TypeError("string tensors cannot live on a GPU")
        with self._lock:
            self.copies_in += 1
            self.bytes_in += array.nbytes
        return np.array(array, copy=True)

    def to_host(self, array: Any) -> np.ndarray:
        with self._lock:
            self.copies_out += 1
            self.bytes_out += array.nbytes
        return np.array(array, copy=True)

    def accepts(self, value: Any) -> bool:
        # Host arrays are never "on" a simulated GPU: feeding one must count as a copy.
        return False


@contextlib.contextmanager
def simulated_gpus(count: int = 1) -> Iterator[list[Device]]:
    """Within the block, new Sessions see CPU:0 plus `count` simulated GPUs.

    Yields the device list `[cpu, gpu0, gpu1, ...]`.
    """
    devices: list[Device] = [CpuDevice(0)] + [SimulatedGpuDevice(i) for i in range(count)]
    with _use_devices(devices) as active:
        yield active
