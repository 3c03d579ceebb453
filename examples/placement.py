"""Devices and placement: ask for a GPU, see where nodes ran, and write a Chrome trace.

    python examples/placement.py [TRACE.json] [--simulate-gpu]

1. Lists the devices (and, when there is no GPU, why not).
2. Builds a small graph whose gathers ask for `/device:GPU:0` (`scope.with_device`).
3. Runs it with `log_device_placement=True`: one line per node, in TF's format, on stderr.
   Soft placement is on by default, so without a GPU the nodes fall back to the CPU.
4. Prints `RunMetadata.placement` and, with `RunOptions(trace=True)`, the per-node timings;
   writes them as a Chrome trace file.
5. Shows the error of a strict placement (`allow_soft_placement=False`).

With `--simulate-gpu` the same graph runs on a simulated GPU (minigraph.testing: a test double
whose array module is numpy), so the GPU placement and the copies between devices are visible on
a machine without one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

import numpy as np

import minigraph as mg
from ops import GatherNd, gather

try:
    from minigraph.testing import simulated_gpus
except ImportError:  # an older minigraph without the test doubles
    simulated_gpus = None


def build_graph() -> tuple[mg.Scope, dict[str, mg.OpBuilder]]:
    """Embedding-style look-ups: pick rows of a table, then two of their columns.

    The constants are made in the root scope, with no device request: the placer puts each one
    where its consumers are (the `axis` of GatherV2 lives in host memory, so it stays on the
    CPU). Literal inputs (`GatherNd(gpu, table, [[4]])`) would become Consts that inherit the
    scope's GPU request instead.
    """
    scope = mg.Scope.new_root_scope()
    table = mg.Const(scope.with_op_name("table"), np.arange(20, dtype=np.float32).reshape(5, 4))
    picks = mg.Const(scope.with_op_name("picks"), [[4], [0], [2]])
    which = mg.Const(scope.with_op_name("which"), [3, 1])
    axis = mg.Const(scope.with_op_name("axis"), 1)
    gpu = scope.with_device("/device:GPU:0")  # a request; soft placement may override it
    rows = GatherNd(gpu.with_op_name("rows"), table, picks)
    cols = gather(gpu, rows, which, axis=axis, name="cols")
    return scope, {"rows": rows, "cols": cols}


def show_devices() -> None:
    print("Devices (minigraph.list_devices(verbose=True)):")
    for line in mg.list_devices(verbose=True):
        print(f"  {line}")
    print()


def run_logged(scope: mg.Scope, fetches: dict[str, mg.OpBuilder], trace_path: str) -> None:
    print("Session.run with SessionConfig(log_device_placement=True) -- the log goes to stderr:")
    sys.stdout.flush()
    config = mg.SessionConfig(log_device_placement=True)  # allow_soft_placement=True: default
    with mg.Session(scope, config) as session:
        metadata = mg.RunMetadata()
        values = session.run(fetches, options=mg.RunOptions(trace=True), run_metadata=metadata)
    sys.stderr.flush()
    for name, value in values.items():
        print(f"  {name} = {value.tolist()}")
    print()

    print("RunMetadata.placement (node -> device; * = requested elsewhere, soft placement):")
    for node, device in metadata.placement.items():
        requested = scope.graph.get_operation(node).device  # '' when none was requested
        note = ""
        if requested:
            met = mg.DeviceSpec.from_string(requested).is_compatible_with(
                mg.DeviceSpec.from_string(device)
            )
            note = f"  (requested {requested})" if met else f"  * requested {requested}"
        print(f"  {node:<6} {device}{note}")
    print()

    print("RunMetadata.step_stats (RunOptions(trace=True)):")
    for s in metadata.step_stats:
        short = s.device.rsplit("/device:", 1)[-1]
        print(f"  {s.node:<16} {s.op_type:<10} {short:<6} {s.duration_us:8.1f} us")
    metadata.chrome_trace(trace_path)
    print(f"\nChrome trace written to {trace_path}")
    print("  open it in chrome://tracing (Load) or drag it onto https://ui.perfetto.dev")
    print()


def run_strict(scope: mg.Scope, fetches: dict[str, mg.OpBuilder]) -> None:
    print("Strict placement: SessionConfig(allow_soft_placement=False)")
    config = mg.SessionConfig(allow_soft_placement=False)
    try:
        with mg.Session(scope, config) as session:
            values = session.run(fetches)
    except mg.InvalidArgumentError as e:
        print(f"  {type(e).__name__} (node {e.node_name!r}):")
        print(f"  {e}")
    else:
        print(f"  the request is met here: cols = {values['cols'].tolist()}")
    print()

    # Strings never live on a GPU: no GPU kernel takes them, so this fails on every machine.
    root = mg.Scope.new_root_scope()
    words = mg.Const(root.with_op_name("words"), ["ada", "grace", "alan"])
    picks = mg.Const(root.with_op_name("picks"), [2, 0])
    zero = mg.Const(root.with_op_name("axis"), 0)
    names = gather(root.with_device("/device:GPU:0"), words, picks, axis=zero, name="names")
    print("Strict placement of a string gather on /device:GPU:0:")
    try:
        mg.Session(root, config).run(names)
    except mg.InvalidArgumentError as e:
        print(f"  {type(e).__name__}: {e}")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "trace", nargs="?", help="where to write the Chrome trace (default: a temp directory)"
    )
    parser.add_argument(
        "--simulate-gpu",
        action="store_true",
        help="run on CPU:0 plus a simulated GPU:0 (minigraph.testing)",
    )
    args = parser.parse_args(argv)
    if args.simulate_gpu and simulated_gpus is None:
        parser.error("--simulate-gpu needs minigraph.testing.simulated_gpus")
    trace_path = args.trace or os.path.join(
        tempfile.mkdtemp(prefix="minigraph-"), "placement.trace.json"
    )

    devices = simulated_gpus(1) if args.simulate_gpu else contextlib.nullcontext()
    with devices:
        if args.simulate_gpu:
            print("--simulate-gpu: sessions see CPU:0 and a simulated GPU:0\n")
        show_devices()
        scope, fetches = build_graph()
        run_logged(scope, fetches, trace_path)
        run_strict(scope, fetches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
