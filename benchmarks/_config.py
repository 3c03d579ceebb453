"""Run modes (full, --quick, hidden --smoke), the run context, and the environment header.

The modes differ only in repeat counts and, for the kernel and GPU sections, in sizes: quick
divides the kernel sizes by about 10 and says so in every table title it affects.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.util
import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks._report import Report

__all__ = ["Mode", "MODES", "Bench", "environment", "peer_versions"]


@dataclass(frozen=True)
class Mode:
    """Sizes and repeat counts of one run mode."""

    name: str
    #: Kernel sizes: the leading (row/count) dims are divided by this.
    kernel_divisor: int
    kernel_repeats: int
    #: Executor: samples per figure and the seconds one sample (an inner loop) should take.
    exec_samples: int
    exec_sample_s: float
    chain_nodes: int
    wide_nodes: int
    #: Memory: rows of the [rows, 1024] float32 tensor (2048 rows = 8 MiB) and chain length.
    memory_rows: int
    memory_nodes: int
    memory_repeats: int
    build_nodes: int
    build_repeats: int
    #: GPU: size multipliers tried (largest first, kept under the cap), repeats, memory cap.
    gpu_factors: tuple[int, ...]
    gpu_repeats: int
    gpu_cap_bytes: int
    #: Seconds to wait before a sample of another runtime than the previous sample's (peers),
    #: while the previous one's thread pools stop spinning (benchmarks._timing.interleaved).
    settle_s: float = 0.0

    @property
    def scaled(self) -> bool:
        return self.kernel_divisor != 1


MODES = {
    "full": Mode(
        "full", kernel_divisor=1, kernel_repeats=15, exec_samples=21, exec_sample_s=0.05,
        chain_nodes=1000, wide_nodes=100, memory_rows=2048, memory_nodes=100, memory_repeats=3,
        build_nodes=10_000, build_repeats=5, gpu_factors=(40, 20, 10, 4, 2, 1), gpu_repeats=11,
        gpu_cap_bytes=40 << 30, settle_s=0.15,
    ),
    "quick": Mode(
        "quick", kernel_divisor=10, kernel_repeats=9, exec_samples=11, exec_sample_s=0.015,
        chain_nodes=1000, wide_nodes=100, memory_rows=2048, memory_nodes=100, memory_repeats=1,
        build_nodes=10_000, build_repeats=3, gpu_factors=(10, 4, 2, 1), gpu_repeats=5,
        gpu_cap_bytes=16 << 30, settle_s=0.15,
    ),
    # Hidden: the smallest configuration of every section, for tests/test_benchmarks_smoke.py.
    "smoke": Mode(
        "smoke", kernel_divisor=1000, kernel_repeats=1, exec_samples=2, exec_sample_s=0.001,
        chain_nodes=20, wide_nodes=10, memory_rows=64, memory_nodes=10, memory_repeats=1,
        build_nodes=200, build_repeats=1, gpu_factors=(1,), gpu_repeats=1,
        gpu_cap_bytes=1 << 30,
    ),
}  # fmt: skip


@dataclass
class Bench:
    """What a section gets: the mode, the report, and which optional peers to try."""

    mode: Mode
    report: Report
    peers: bool = True
    #: Run the GPU section on minigraph's simulated GPU with numpy (exercises the code only).
    gpu_simulate: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def peer_versions() -> dict[str, str | None]:
    """Installed versions of the optional peers (None: not installed). Imports nothing.
    TensorFlow, when this interpreter lacks it, is the Python that MINIGRAPH_BENCH_TF_PYTHON
    names (benchmarks._peer_runner runs it there)."""
    found: dict[str, str | None] = {}
    for module, dists in {
        "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
        "onnxruntime": ("onnxruntime", "onnxruntime-gpu"),
        "onnx": ("onnx",),
        "cupy": ("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x"),
    }.items():
        version = None
        if importlib.util.find_spec(module) is not None:
            version = next((v for v in map(_version, dists) if v), "unknown version")
        found[module] = version
    tf_python = os.environ.get("MINIGRAPH_BENCH_TF_PYTHON")
    if found["tensorflow"] is None and tf_python:
        found["tensorflow"] = f"in its own process ({tf_python})"
    return found


#: Environment variables that set the thread count of NumPy's BLAS (read at its import).
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def environment() -> dict[str, Any]:
    """What the header prints: versions, CPUs, date."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "peers": peer_versions(),
        "blas_threads": {
            name: os.environ[name] for name in _BLAS_THREAD_VARIABLES if name in os.environ
        },
    }
