"""minigraph's benchmark suite: `python -m benchmarks [--quick] [--only NAME] [--json FILE]`.

Sections (each a module with a `run(bench)` function and a docstring saying what it measures
and against which baseline):

- kernels: GatherV2 / GatherNd through Session.run on CPU vs single-threaded numpy and the
  two-thread copy bandwidth;
- ops: the core ops' kernels vs the same NumPy expression, input forwarding, and the MLP beside
  TensorFlow and ONNX Runtime;
- gradients: building gradient graphs (chains, linearity) and the optimizer on the MLP's
  gradient graph (node counts, step time);
- sparse_gradients: a gather's sparse gradient vs the forward gather, densifying it vs NumPy,
  the MLP's gradient step vs TensorFlow;
- training: one step of the embedding classifier (Adagrad) vs TensorFlow, and over table sizes;
- partition: DynamicPartition / DynamicStitch and the sharded embedding_lookup (fused and not)
  vs one GatherV2;
- executor: fixed, per-node and per-output cost of Session.run on tiny graphs;
- memory: peak memory of a 100-node chain of 8 MiB tensors (tracemalloc);
- construction: graph building with shape inference, and the first (compiling) run;
- graph_def: GraphDef export and import;
- gpu: cupy kernels on GPU:0 vs a device copy, and host<->device transfers;
- distributed: a Dask cluster's runs vs bare Dask round trips for the same bytes, including a
  training step with the table on two parameter-server tasks;
- peers: the executor, first-run, kernel, construction, import and memory figures beside ONNX
  Runtime and TensorFlow (when installed: `pip install -e '.[bench]'`), as ratios.

Every figure is a median over repeats with min and max; every comparison is a ratio against a
baseline timed interleaved in the same process. Nothing here asserts on timings: the suite
reports, and CI only smoke-runs it (tests/test_benchmarks_smoke.py).
"""
