"""Command line: `python -m benchmarks [--quick] [--only NAME] [--json FILE] [--no-peers]
[--blas-threads N]`.

Runs the sections in order (kernels, ops, gradients, sparse_gradients, training, partition,
executor, memory, construction, graph_def, gpu, distributed, peers), printing a table per
figure group as it goes. A section that fails prints its traceback; the others still run and
the exit status is 1. TensorFlow's figures come from a process of its own: set
MINIGRAPH_BENCH_TF_PYTHON to a Python that has tensorflow (benchmarks._peer_runner). Hidden
options for the smoke test: `--smoke` (or the environment variable MINIGRAPH_BENCH_SMOKE=1)
runs the smallest configuration of every section, and `--gpu-simulate` runs the GPU section's
code on minigraph's simulated GPU with numpy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence

#: What `--blas-threads N` sets: NumPy's BLAS reads its thread count from these when it loads.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _early_blas_threads(argv: Sequence[str]) -> None:
    """Applies `--blas-threads N` from the command line before NumPy loads (below): on a
    loaded machine of few cores, BLAS threads waiting for each other stall small products
    by orders of magnitude (a [64,128]x[128,256] MatMul: 0.1 ms, or 100 ms)."""
    for i, arg in enumerate(argv):
        if arg == "--blas-threads" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--blas-threads="):
            value = arg.split("=", 1)[1]
        else:
            continue
        if value.isdigit() and int(value) >= 1:
            for name in BLAS_THREAD_VARIABLES:
                os.environ[name] = value


if __name__ == "__main__":
    _early_blas_threads(sys.argv[1:])

from benchmarks import (  # noqa: E402 - after the BLAS thread count is set
    construction,
    distributed,
    executor,
    gpu,
    gradients,
    graph_def,
    kernels,
    memory,
    ops,
    partition,
    peers,
    sparse_gradients,
    training,
)
from benchmarks._config import MODES, Bench, environment  # noqa: E402
from benchmarks._report import Report  # noqa: E402

SECTIONS: dict[str, Callable[[Bench], None]] = {
    "kernels": kernels.run,
    "ops": ops.run,
    "gradients": gradients.run,
    "sparse_gradients": sparse_gradients.run,
    "training": training.run,
    "partition": partition.run,
    "executor": executor.run,
    "memory": memory.run,
    "construction": construction.run,
    "graph_def": graph_def.run,
    "gpu": gpu.run,
    "distributed": distributed.run,
    "peers": peers.run,
}


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive thread count, not {text!r}")
    return int(text)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="minigraph benchmarks: medians (min-max) over interleaved repeats, ratios "
        "against baselines timed in the same process. Full mode by default.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer repeats and kernel sizes / 10 (about a minute)"
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help=f"run only these sections (repeatable or comma-separated): {', '.join(SECTIONS)}",
    )
    parser.add_argument("--json", metavar="FILE", help="write every figure to FILE as JSON")
    parser.add_argument(
        "--no-peers",
        action="store_true",
        help="skip the peers section (TensorFlow / ONNX Runtime) even if they import",
    )
    parser.add_argument(
        "--blas-threads",
        type=_positive,
        metavar="N",
        help="NumPy's BLAS threads (sets OPENBLAS_NUM_THREADS etc. before NumPy loads; from the "
        "command line only). 1 on a loaded machine: threaded small products stall there",
    )
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gpu-simulate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    only = [name for item in args.only or [] for name in item.split(",") if name]
    unknown = [name for name in only if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    args.sections = only or list(SECTIONS)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmarks; returns the exit status."""
    args = _parse(argv)
    if args.smoke or os.environ.get("MINIGRAPH_BENCH_SMOKE") == "1":
        mode = MODES["smoke"]
    elif args.quick:
        mode = MODES["quick"]
    else:
        mode = MODES["full"]
    report = Report()
    bench = Bench(mode, report, peers=not args.no_peers, gpu_simulate=args.gpu_simulate)
    env = report.env = environment()
    peers = ", ".join(f"{k} {v or 'not installed'}" for k, v in env["peers"].items())
    scaled = f" (kernel sizes / {mode.kernel_divisor})" if mode.scaled else ""
    report.print(
        f"minigraph benchmarks, mode: {mode.name}{scaled}; sections: {', '.join(args.sections)}"
    )
    report.print(
        f"  {env['date']}  Python {env['python']}  numpy {env['numpy']}  {env['platform']}"
    )
    report.print(f"  CPUs: {env['cpu_count']} ({env['usable_cpus']} usable), {env['processor']}")
    report.print(f"  optional peers: {peers}")
    blas = ", ".join(f"{k}={v}" for k, v in env["blas_threads"].items())
    report.print(f"  NumPy's BLAS threads: {blas or 'its default (one per core)'}")
    if args.blas_threads is not None and env["blas_threads"].get("OPENBLAS_NUM_THREADS") != str(
        args.blas_threads
    ):
        report.print(
            f"  --blas-threads {args.blas_threads} had no effect: NumPy was loaded before "
            "(give it on the command line: python -m benchmarks --blas-threads N)"
        )
    start = time.perf_counter()
    failed = []
    for name in args.sections:
        section_start = time.perf_counter()
        try:
            SECTIONS[name](bench)
        except Exception:
            failed.append(name)
            report.print(f"\nSECTION {name} FAILED:")
            report.print(traceback.format_exc())
        report.print(f"  [{name}: {time.perf_counter() - section_start:.1f} s]")
    elapsed = time.perf_counter() - start
    report.print()
    status = f"FAILED: {', '.join(failed)}" if failed else "ok"
    report.print(f"done in {elapsed:.1f} s ({status})")
    if args.json:
        report.dump(args.json, mode.name, elapsed)
        report.print(f"figures written to {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
