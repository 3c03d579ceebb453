"""The command line: `python -m minigraph ...` and the `minigraph` console script.

The op libraries come from the `minigraph.op_libraries` entry points, which exist once the
package is installed (`pip install -e .`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GATHER_V2_SIGNATURE = (
    "GatherV2(params: Tparams, indices: Tindices, axis: Taxis) -> output: Tparams; "
    "batch_dims: int = 0, bad_indices_policy: "
)


def cli(*args: str, script: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [script] if script else [sys.executable, "-m", "minigraph"]
    return subprocess.run(
        [*command, *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_ops_lists_signatures_from_the_entry_point_libraries():
    result = cli("ops")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith(GATHER_V2_SIGNATURE) for line in lines), result.stdout
    assert any(line.startswith("GatherNd(params: Tparams, indices: Tindices)") for line in lines)
    assert any(line.startswith("Const(") for line in lines)
    assert result.stderr == ""


def test_ops_names():
    result = cli("ops", "--names")
    assert result.returncode == 0
    names = result.stdout.split()
    assert names == sorted(names)
    assert {"Const", "GatherNd", "GatherV2", "Identity", "NoOp", "Placeholder"} <= set(names)


def test_describe_gather_v2():
    result = cli("describe", "GatherV2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.splitlines()[0].startswith(GATHER_V2_SIGNATURE)
    assert "Gather slices from `params` axis `axis` according to `indices`." in out
    assert "Tindices: {int16, int32, int64} (inferred from inputs)" in out
    assert "Taxis: {int32, int64}" in out
    assert "batch_dims: int = 0" in out
    assert 'bad_indices_policy: {"", "DEFAULT", "ERROR", "IGNORE"}' in out
    assert "Kernels (devices: CPU, GPU):" in out
    kernels = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert any(k.startswith("CPU (") and "host memory: axis" in k for k in kernels)
    assert any(k.startswith("GPU (") and "host memory: axis" in k for k in kernels)


def test_describe_unknown_op_suggests_close_names():
    result = cli("describe", "Nope")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "unknown op 'Nope'. Did you mean: NoOp" in result.stderr
    result = cli("describe", "GatherND")
    assert result.returncode == 2
    assert "Did you mean: GatherNd" in result.stderr


def test_devices():
    result = cli("devices")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "/job:localhost/replica:0/task:0/device:CPU:0: host memory, numpy kernels"
    gpus = [line for line in lines[1:] if "/device:GPU:" in line]
    if not gpus:
        assert lines[-1].startswith("GPU: none (") and lines[-1].endswith(")")


def test_load_a_user_op_library():
    result = cli("--load", "examples/custom_op.py", "describe", "IndexAdd")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "IndexAdd(input: T, indices: Tindices, source: T, axis: Taxis) -> output: T"
    )
    assert "Kernels (devices: CPU, GPU):" in result.stdout


def test_load_a_module_by_name():
    result = cli("--no-entry-points", "--load", "ops", "ops", "--names")
    assert result.returncode == 0, result.stderr
    assert "GatherV2" in result.stdout.split()


def test_load_errors_and_usage_errors():
    result = cli("--load", "no_such_module_here", "ops")
    assert result.returncode == 1
    assert "no_such_module_here" in result.stderr
    assert cli().returncode == 2  # no command
    assert cli("frobnicate").returncode == 2


def test_without_entry_points_only_framework_ops():
    result = cli("--no-entry-points", "ops", "--names")
    assert result.returncode == 0
    assert "GatherV2" not in result.stdout.split()
    assert "Const" in result.stdout.split()


def test_console_script():
    script = Path(sys.executable).with_name("minigraph")
    if not script.exists():
        pytest.skip("the minigraph console script is not installed next to this interpreter")
    result = cli("describe", "GatherNd", script=str(script))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("GatherNd(params: Tparams, indices: Tindices)")


def test_main_in_process(capsys):
    from minigraph.__main__ import main

    assert main(["ops", "--names"]) == 0
    assert "GatherV2" in capsys.readouterr().out
    assert main(["describe", "NoSuchOp"]) == 2
    assert "unknown op 'NoSuchOp'" in capsys.readouterr().err
