"""An op for the battery's cluster cases, imported on the workers through
SessionConfig(op_modules=["tests.hostile._cluster_ops"])."""

from __future__ import annotations

import time

import minigraph
from minigraph.op_def import OpDef

HostileClusterSleep = minigraph.register_op(
    OpDef(
        "HostileClusterSleep",
        inputs=["x: T", "seconds: float32"],
        outputs=["y: T"],
        attrs=["T: type"],
        shape_fn=lambda ctx: ctx.input_shapes[0],
        doc="Returns x after sleeping `seconds`.",
    )
)


def _sleep(ctx, x, seconds, **_):
    time.sleep(float(seconds))
    return x.copy()


minigraph.register_kernel("HostileClusterSleep", "CPU", _sleep)
