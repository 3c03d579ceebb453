"""Runs every script in examples/ as a user would, and checks what it prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def check(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_examples_exist():
    assert {p.name for p in EXAMPLES} >= {"quickstart.py", "placement.py", "custom_op.py"}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_every_example_exits_zero(script: Path, tmp_path: Path):
    if script.name == "distributed_embedding.py":
        pytest.importorskip("distributed")  # the `distributed` extra (CI installs it)
    args = [str(tmp_path / "trace.json")] if script.name == "placement.py" else []
    out = check(run_example(script.name, *args))
    if script.name == "distributed_embedding.py":
        assert "tasks ['/job:worker/task:0', '/job:worker/task:1']" in out
        assert "shard1: /job:worker/replica:0/task:1/device:CPU:0" in out
        assert "✓ equal to numpy's table[ids]" in out


def test_quickstart_matches_the_docs():
    out = check(run_example("quickstart.py"))
    assert "✗" not in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("✓ all ") and last.endswith(" checks match the TF docs"), last
    # GatherNd's string examples.
    assert "[✓] Simple indexing into a matrix" in out
    assert "output     = ['a', 'd']" in out
    assert "output     = [[[['a1', 'b1'], ['c1', 'd1']]], [[['a0', 'b0'], ['c0', 'd0']]]]" in out
    assert "output     = [['b0', 'b1'], ['d0', 'c1']]" in out
    # tf.gather: strings, a matrix, shapes, batch_dims.
    assert "output     = ['p2', 'p0', 'p2', 'p5']" in out
    assert "output     = [[2.0, 1.0], [12.0, 11.0], [22.0, 21.0], [32.0, 31.0]]" in out
    assert "shape      = [5, 6, 10, 11, 8]" in out
    assert "[✓] batch_dims=1: one gather per batch element" in out
    assert "output     = [[1, 2], [3, 4], [5, 6]]" in out
    # The CPU out-of-range error.
    assert "indices[1] = 6 is not in [0, 6)" in out
    # Every example got a mark.
    assert out.count("[✓]") >= 30
    # The header announces as many checks as the footer counts, and one mark per check.
    announced = re.search(r"; (\d+) checks: (\d+) examples fetched in one Session.run", out)
    assert announced, out[:500]
    checks = int(announced.group(1))
    assert last == f"✓ all {checks} checks match the TF docs"
    assert out.count("[✓]") == checks == int(announced.group(2)) + 1


def test_placement_logs_soft_placement_and_writes_a_trace(tmp_path: Path):
    trace = tmp_path / "placement.trace.json"
    result = run_example("placement.py", str(trace))
    out = check(result)
    # The device list says why there is no GPU (when there is none).
    assert f"{CPU}: host memory, numpy kernels" in out
    if GPU not in out:
        assert "GPU: none (" in out
        # log_device_placement: TF's format, on stderr; soft placement put the gathers on CPU.
        assert f"rows: (GatherNd): {CPU}" in result.stderr
        assert f"cols: (GatherV2): {CPU}" in result.stderr
        assert f"rows   {CPU}  * requested /device:GPU:0" in out
        # The strict placement failure explains itself.
        assert "InvalidArgumentError (node 'rows'):" in out
        assert "Cannot assign a device for operation 'rows' (GatherNd)" in out
        assert "Set allow_soft_placement=True to fall back." in out
    assert ": (GatherNd): /job:localhost/replica:0/task:0/device:" in result.stderr
    assert f"Chrome trace written to {trace}" in out
    assert "chrome://tracing" in out and "https://ui.perfetto.dev" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert {"rows", "cols"} <= {e["name"] for e in events if e["ph"] == "X"}


def test_placement_on_a_simulated_gpu(tmp_path: Path):
    result = run_example("placement.py", str(tmp_path / "t.json"), "--simulate-gpu")
    out = check(result)
    assert "simulated GPU" in out
    assert f"rows: (GatherNd): {GPU}" in result.stderr
    # GatherV2's axis lives in host memory: its Const stays on the CPU.
    assert f"axis: (Const): {CPU}" in result.stderr
    assert "the request is met here" in out
    # Strings have no GPU kernel: strict placement fails even with a GPU.
    assert "Cannot assign a device for operation 'names' (GatherV2)" in out
    assert "Tparams=string not in" in out


def test_custom_op_runs_and_reports_errors():
    out = check(run_example("custom_op.py"))
    assert "IndexAdd(input: T, indices: Tindices, source: T, axis: Taxis) -> output: T" in out
    assert "kernel: GPU (T in {float16, float32, float64, int32, int64, uint32, uint64}" in out
    assert "host memory: axis" in out
    assert "static shape [5,3]" in out
    # PyTorch's index_add example, the gather's adjoint (the row gathered twice adds up) and
    # an int64 addition along axis 1.
    assert "= [[2.0, 3.0, 4.0], [1.0, 1.0, 1.0], [8.0, 9.0, 10.0], [1.0, 1.0, 1.0], [5.0, " in out
    assert "[18.0, 20.0, 22.0]" in out
    assert "cols  = IndexAdd(zeros, [2, 2], [[1, 10], [-5, 7]], 1) = [[0, 0, 11], [0, 0, 2]]" in out
    assert "results match numpy: True" in out
    assert f"back     {CPU}" in out or f"back     {GPU}" in out
    # Construction-time error: shapes that cannot fit, with the node and its input shapes.
    assert (
        "InvalidArgumentError: source.shape must be input.shape with dimension 0 of length "
        "len(indices): expected [3,3], got [3,4] for 'bad' (IndexAdd) with input shapes: [5,3], "
        "[3], [3,4], []."
    ) in out
    assert "'bad' in graph -> False" in out
    # Run-time error: the bad index, then the node, its device and where it was defined.
    assert "InvalidArgumentError: indices[1] = 7 is not in [0, 5)" in out
    assert "[[node added_fed (IndexAdd) on " in out
    assert "custom_op.py:" in out
    # The GPU kernel (simulated without a GPU): repeated indices add up, bad ones are errors.
    assert f"ran on {GPU}" in out
    assert "-> [[12.0, 14.0, 16.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], " in out
    assert "out-of-range indices are an error there too: indices[1] = -1 is not in [0, 5)" in out


CUSTOM_OP_GPU_CHECK = """
import sys
import numpy as np
import minigraph as mg
from minigraph.devices import CpuDevice
from minigraph.testing import SimulatedGpuDevice
sys.path.insert(0, "examples")
from custom_op import IndexAdd

cpu = mg.SessionConfig(devices=[CpuDevice(0)])
gpu = mg.SessionConfig(devices=[CpuDevice(0), SimulatedGpuDevice(0)])
indices = np.array([3, 1, 3, 0], np.int32)  # 3 twice: its slices add up
for dtype in ["int32", "int64", "uint32", "uint64", "float16", "float32", "float64"]:
    for axis in (0, 1):
        scope = mg.Scope.new_root_scope()
        base = (np.arange(20).reshape(4, 5) % 7).astype(dtype)
        base = base if axis == 1 else base.T  # [5, 4]: indices into the rows
        source = (np.arange(16).reshape(4, 4) - 5).astype(dtype)
        out = IndexAdd(scope.with_op_name("s"), base, indices, source, axis)
        on_cpu, on_gpu = mg.RunMetadata(), mg.RunMetadata()
        a = mg.Session(scope, cpu).run(out, run_metadata=on_cpu)
        b = mg.Session(scope, gpu).run(out, run_metadata=on_gpu)
        assert on_gpu.placement["s"].endswith("GPU:0") and on_cpu.placement["s"].endswith("CPU:0")
        assert a.dtype == b.dtype == np.dtype(dtype), (a.dtype, b.dtype)
        assert np.array_equal(a, b), (dtype, a, b)
        want = base.copy()
        np.add.at(want, (slice(None),) * axis + (indices,), source)
        assert np.array_equal(a, want), (dtype, axis, a, want)
# int8 has no CUDA atomic add: such nodes stay on the CPU.
scope = mg.Scope.new_root_scope()
small = np.array([100, 100], np.int8)
out = IndexAdd(scope.with_op_name("s"), np.zeros(3, np.int8), [1, 1], small, 0)
metadata = mg.RunMetadata()
assert mg.Session(scope, gpu).run(out, run_metadata=metadata).tolist() == [0, -56, 0]
assert metadata.placement["s"].endswith("CPU:0")
print("ok")
"""


def test_custom_op_gpu_kernel_matches_its_cpu_kernel_on_a_simulated_gpu():
    # The GPU kernel's cupy path (xp.add.at, int64 through uint64) against the numpy CPU kernel,
    # in a fresh process: the example registers IndexAdd when imported.
    result = subprocess.run(
        [sys.executable, "-c", CUSTOM_OP_GPU_CHECK],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
