"""Smoke test of the benchmark suite: every section runs in its smallest configuration.

The benchmarks report and never assert on timings; this only checks that `python -m
benchmarks` runs each section to the end, prints its tables and exits 0 (a few seconds).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADINGS = {
    "kernels": "== Kernels on CPU",
    "ops": "== Ops: elementwise, reductions, MatMul",
    "gradients": "== Gradient graph construction",
    "sparse_gradients": "== Sparse gradients: a gather's gradient, densifying it",
    "training": "== Training: an embedding classifier's Adagrad step",
    "partition": "== Partition, stitch and sharded embedding_lookup",
    "executor": "== Executor overhead",
    "memory": "== Peak memory",
    "construction": "== Graph construction",
    "graph_def": "== GraphDef export and import",
    "gpu": "== GPU",
    "distributed": "== Distributed sessions",
    "peers": "== Peers",
}


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without a TensorFlow Python for the peer runner, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAPH_BENCH_TF_PYTHON"}
    return {**env, **(extra or {})}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        env=_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_section_runs_and_prints_its_tables(tmp_path):
    out = tmp_path / "figures.json"
    proc = _run("--smoke", "--no-peers", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for heading in HEADINGS.values():
        assert heading in proc.stdout
    assert "mg/np" in proc.stdout  # the kernels table's ratio column
    assert "fixed cost per run" in proc.stdout
    assert "No-copy checks" in proc.stdout
    assert "done in" in proc.stdout and "(ok)" in proc.stdout
    data = json.loads(out.read_text())
    assert data["mode"] == "smoke"
    sections = {r["section"] for r in data["records"]}
    assert {"kernels", "ops", "executor", "memory", "construction"} <= sections
    assert {"gradients", "sparse_gradients", "training"} <= sections
    assert not any(
        r["metric"] == "error" for r in data["records"]
        if r["section"] in ("sparse_gradients", "training")
    )  # fmt: skip
    ops_records = [r for r in data["records"] if r["section"] == "ops"]
    metrics = {r["metric"] for r in ops_records}
    assert "ratio minigraph/numpy" in metrics  # elementwise, reductions and MatMul rows
    assert "forwarding on: first run peak" in metrics
    assert "minigraph Session.run" in metrics  # the MLP
    assert not any(r["metric"] == "error" for r in ops_records)
    medians = [r for r in data["records"] if "median" in r]
    assert medians and all({"min", "max", "n", "unit"} <= set(r) for r in medians)


def test_only_one_section_with_the_smoke_environment_variable():
    proc = _run("--quick", "--only", "executor", "--no-peers",
                env={"MINIGRAPH_BENCH_SMOKE": "1"})  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mode: smoke" in proc.stdout
    assert HEADINGS["executor"] in proc.stdout
    assert HEADINGS["kernels"] not in proc.stdout


def test_ops_section_alone_without_peers():
    proc = _run("--smoke", "--only", "ops", "--no-peers")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert HEADINGS["ops"] in proc.stdout
    for text in ("AddV2", "FloorDiv int32", "ArgMax, axis 1", "MatMul", "forwarding on", "MLP"):
        assert text in proc.stdout
    assert "peers skipped (--no-peers)" in proc.stdout
    assert "(ok)" in proc.stdout


def test_gpu_section_code_runs_on_the_simulated_gpu():
    proc = _run("--smoke", "--only", "gpu", "--gpu-simulate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "simulated GPU" in proc.stdout
    assert "% of copy" in proc.stdout
    assert "host->device" in proc.stdout and "device->host" in proc.stdout
    assert "error" not in proc.stdout.lower()


def test_peers_section_without_peers_says_how_to_install_them():
    # Hides ONNX Runtime, onnx and TensorFlow even where they are installed.
    code = (
        "import sys\n"
        "for name in ('onnxruntime', 'onnx', 'tensorflow'):\n"
        "    sys.modules[name] = None\n"
        "from benchmarks.__main__ import main\n"
        "sys.exit(main(['--smoke', '--only', 'peers,executor']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert HEADINGS["peers"] in proc.stdout
    assert "pip install -e '.[bench]'" in proc.stdout
    assert "MINIGRAPH_BENCH_TF_PYTHON" in proc.stdout  # how to give TensorFlow its process
    assert HEADINGS["executor"] in proc.stdout  # the rest still runs
    assert "(ok)" in proc.stdout


def test_training_and_sparse_gradient_sections_alone_without_peers():
    proc = _run("--smoke", "--only", "sparse_gradients,training", "--no-peers")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("sparse_gradients", "training"):
        assert HEADINGS[name] in proc.stdout
    for text in (
        "Sparse gradient of a gather", "Densifying it", "np.zeros + np.add.at",
        "MLP gradient step", "Gradient construction with the library's rules",
        "One training step", "mg.train.AdagradOptimizer(0.1).minimize(loss)",
        "The same step across table sizes", "fastest / fastest", "Where a step goes",
        "calls/step",
    ):  # fmt: skip
        assert text in proc.stdout, text
    assert proc.stdout.count("peers skipped (--no-peers)") == 2  # the MLP's and the step's
    assert "(ok)" in proc.stdout


def test_blas_threads_are_set_before_numpy_loads():
    env = {k: "" for k in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    proc = _run("--smoke", "--only", "executor", "--no-peers", "--blas-threads", "1", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NumPy's BLAS threads: OPENBLAS_NUM_THREADS=1" in proc.stdout
    assert "had no effect" not in proc.stdout


@pytest.mark.parametrize(
    "args", [["--only", "nope"], ["--bogus"], ["--blas-threads", "0"], ["--blas-threads", "x"]]
)
def test_bad_arguments_are_rejected(args):
    proc = _run(*args)
    assert proc.returncode == 2
