"""Test support for op authors and for minigraph's own tests, kept out of the runtime proper:
nothing in the runtime imports this package (devices only recognise its arrays when it is
loaded).

- `simulated_gpu`: simulated GPUs, a cupy-like array module over numpy that refuses what cupy
  refuses, so GPU placement, copies and every kernel's cupy code path run on machines without
  a GPU (`simulated_gpus(n)`, `pinned_devices(devices)`).
"""

from minigraph.testing.simulated_gpu import (
    MAX_SIMULATED_GPUS,
    SimulatedArray,
    SimulatedCupy,
    SimulatedGpuDevice,
    pinned_devices,
    simulated_cupy,
    simulated_gpus,
)

__all__ = [
    "MAX_SIMULATED_GPUS",
    "SimulatedArray",
    "SimulatedCupy",
    "SimulatedGpuDevice",
    "pinned_devices",
    "simulated_cupy",
    "simulated_gpus",
]
