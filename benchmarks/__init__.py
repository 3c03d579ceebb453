"""minigraph's benchmark suite: `python -m benchmarks [--quick] [--only NAME] [--json FILE]`.

Sections (each a module with a `run(bench)` function and a docstring saying what it measures
and against which baseline):

- kernels: GatherV2 / GatherNd through Session.run on CPU vs single-threaded numpy;
- executor: fixed, per-node and per-output cost of Session.run on tiny graphs;
- memory: peak memory of a 100-node chain of 8 MiB tensors (tracemalloc);
- construction: graph building with shape inference, and the first (compiling) run;
- gpu: cupy kernels on GPU:0 vs a device copy, and host<->device transfers;
- peers: the executor, first-run, kernel, construction, import and memory figures beside ONNX
  Runtime and TensorFlow (when installed: `pip install -e '.[bench]'`), as ratios.

Every figure is a median over repeats with min and max; every comparison is a ratio against a
baseline timed interleaved in the same process. Nothing here asserts on timings: the suite
reports, and CI only smoke-runs it (tests/test_benchmarks_smoke.py).
"""
