"""Test ops and a worker plugin for the cluster tests, imported on the workers through
SessionConfig(op_modules=["_dist_ops"]) (the workers inherit this process's sys.path). Op names
start with "DistTest"."""

from __future__ import annotations

import os
import time

import numpy as np
from distributed import WorkerPlugin

import minigraph
from minigraph.op_def import OpDef

DistTestSleep = minigraph.register_op(
    OpDef(
        "DistTestSleep",
        inputs=["x: T", "seconds: float32"],
        outputs=["y: T"],
        attrs=["T: type"],
        shape_fn=lambda ctx: ctx.input_shapes[0],
        doc="Returns x after sleeping `seconds` (a long kernel to kill a worker in).",
    )
)
DistTestPid = minigraph.register_op(
    OpDef(
        "DistTestPid",
        outputs=["pid: int64"],
        shape_fn=lambda ctx: [],
        doc="The id of the process the kernel runs in.",
    )
)


def _sleep(ctx, x, seconds, **_):
    time.sleep(float(seconds))
    return x


def _pid(ctx):
    return np.array(os.getpid(), dtype=np.int64)


minigraph.register_kernel("DistTestSleep", "CPU", _sleep)
minigraph.register_kernel("DistTestPid", "CPU", _pid)


class Arrivals(WorkerPlugin):
    """Records every value that enters a worker's memory, as Dask's worker state sees it:
    (key, how: 'released' = scattered to it, 'flight' = fetched from another worker,
    'executing' = computed there, nbytes)."""

    name = "dist-test-arrivals"

    def setup(self, worker):
        self.worker = worker
        self.log = []

    def transition(self, key, start, finish, **kwargs):
        if finish == "memory":
            ts = self.worker.state.tasks.get(key)
            self.log.append((key, start, None if ts is None else ts.nbytes))


def arrivals(dask_worker):
    """For client.run: the worker's arrivals so far, then forgets them."""
    plugin = dask_worker.plugins[Arrivals.name]
    log, plugin.log = plugin.log, []
    return log


class SimulatedGpus(WorkerPlugin):
    """Gives the worker's new sessions one simulated GPU (minigraph.testing) until removed."""

    name = "dist-test-simulated-gpus"

    def setup(self, worker):
        from minigraph.testing import simulated_gpus

        self._context = simulated_gpus(1)
        self._context.__enter__()

    def teardown(self, worker):
        self._context.__exit__(None, None, None)
