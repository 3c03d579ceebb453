"""Devices of other processes: what a distributed session places nodes on.

A `RemoteDevice` names a device of a Dask worker (`/job:worker/replica:0/task:1/device:CPU:0`).
The client only places nodes on it and names it in logs, errors and traces; kernels run on the
worker, whose own session sees the same device as a local one (`/device:CPU:0`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minigraph.device_spec import DeviceSpec
from minigraph.devices import Device

__all__ = ["RemoteDevice", "task_of"]


class RemoteDevice(Device):
    """A device of the task `/job:{job}/replica:0/task:{task}`, served by a Dask worker."""

    def __init__(
        self, job: str, task: int, device_type: str, index: int, description: str = ""
    ) -> None:
        self.device_type = device_type  # read by Device.__init__
        super().__init__(index, description)
        self.spec = DeviceSpec(job, 0, task, device_type, index)
        self.name = self.spec.to_string()
        # Short names ("CPU:0") would be ambiguous across tasks.
        self.short_name = self.name
        # The worker's CPU is host memory of that worker, where host-memory inputs are read.
        self.is_host = device_type == "CPU"

    @property
    def local_spec(self) -> DeviceSpec:
        """The name the worker's own session gives this device (`/device:CPU:0`)."""
        return DeviceSpec(device_type=self.device_type, device_index=self.index)

    def to_host(self, array: Any) -> np.ndarray:
        raise TypeError(f"{self.name} lives in another process; its values travel through Dask")

    def from_host(self, array: np.ndarray) -> Any:
        raise TypeError(f"{self.name} lives in another process; its values travel through Dask")

    def accepts(self, value: Any) -> bool:
        return False


def task_of(device: Device) -> DeviceSpec:
    """The job, replica and task of a device, as a partial DeviceSpec."""
    spec = device.spec
    return DeviceSpec(spec.job, spec.replica, spec.task)
