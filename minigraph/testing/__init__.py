"""Test support for op authors and for minigraph's own tests, kept out of the runtime proper:
nothing in the runtime imports this package (devices only recognise its arrays when it is
loaded).

- `simulated_gpu`: simulated GPUs, a cupy-like array module over numpy that refuses what cupy
  refuses, so GPU placement, copies and every kernel's cupy code path run on machines without
  a GPU (`simulated_gpus(n)`, `pinned_devices(devices)`).
- `gradient_checker`: numeric gradient checks, as TF's `tf.test.compute_gradient`
  (`compute_gradient`, `compute_gradient_error`, `max_error`, and `assert_gradients_close`,
  which a test of a gradient rule calls in one line).
"""

from minigraph.testing.gradient_checker import (
    assert_gradients_close,
    compute_gradient,
    compute_gradient_error,
    max_error,
)
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
    "assert_gradients_close",
    "compute_gradient",
    "compute_gradient_error",
    "max_error",
    "MAX_SIMULATED_GPUS",
    "SimulatedArray",
    "SimulatedCupy",
    "SimulatedGpuDevice",
    "pinned_devices",
    "simulated_cupy",
    "simulated_gpus",
]
