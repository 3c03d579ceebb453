"""examples/train_embedding.py: trains (the loss falls, the accuracy beats chance), prints its
progress lines and writes a checkpoint that restores; locally and (with the `distributed`
extra) on a LocalCluster with two ps tasks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "train_embedding.py"
LINE = re.compile(r"^\s*(\d+)\s+(\d+\.\d{4})\s+(\d+\.\d)$")


def run(*args: str, timeout: int = 240) -> str:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True,
        text=True, encoding="utf-8", timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def progress(out: str) -> list[tuple[int, float]]:
    lines = out.splitlines()
    header = lines.index(
        next(line for line in lines if line.split() == ["step", "loss", "steps/s"])
    )
    rows = []
    for line in lines[header + 1 :]:
        m = LINE.match(line)
        if not m:
            break
        rows.append((int(m.group(1)), float(m.group(2))))
    return rows


def accuracy(out: str) -> float:
    m = re.search(r"^accuracy (\d\.\d{3}) on 2048 held-out examples \(chance 0\.10\)$", out, re.M)
    assert m, out
    return float(m.group(1))


def test_it_trains_locally_and_writes_a_checkpoint(tmp_path):
    path = tmp_path / "sub" / "model.ckpt"
    out = run("--steps", "240", "--every", "60", "--checkpoint", str(path))
    rows = progress(out)
    assert [step for step, _ in rows] == [60, 120, 180, 240]
    assert rows[-1][1] < rows[0][1] - 0.3, rows  # the loss falls
    assert accuracy(out) > 0.5
    assert f"checkpoint written: {path}-240 (global_step 240)" in out
    names = {n: (dtype, shape) for n, dtype, shape in mg.train.list_variables(f"{path}-240")}
    assert names["embedding0"] == names["embedding1"] == ("float32", [1000, 16])
    assert names["embedding0/Adagrad"] == ("float32", [1000, 16])
    assert names["global_step"] == ("int64", [])
    values = mg.train.load_checkpoint(f"{path}-240")
    assert values["global_step"] == 240
    assert not np.allclose(values["embedding0/Adagrad"], 0.001)


def test_a_last_partial_interval_gets_a_line_and_bad_flags_are_refused(tmp_path):
    rows = progress(run("--steps", "7", "--every", "5", "--checkpoint", str(tmp_path / "c")))
    assert [step for step, _ in rows] == [5, 7]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "0"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "must be positive" in result.stderr


def test_on_a_cluster_with_two_ps_tasks(tmp_path):
    pytest.importorskip("distributed")
    out = run("--cluster", "--steps", "6", "--every", "3", "--checkpoint",
              str(tmp_path / "c.ckpt"), timeout=300)  # fmt: skip
    for k in (0, 1):
        task = f"/job:ps/replica:0/task:{k}/device:CPU:0"
        assert f"embedding{k}: {task}, embedding{k}/Adagrad: {task}" in out
    assert [step for step, _ in progress(out)] == [3, 6]
    accuracy(out)
    assert f"checkpoint written: {tmp_path / 'c.ckpt'}-6 (global_step 6)" in out
    values = mg.train.load_checkpoint(f"{tmp_path / 'c.ckpt'}-6")
    assert values["embedding1"].shape == (1000, 16) and values["global_step"] == 6
