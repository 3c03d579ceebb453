"""Mutations of the training benchmarks' work (issues 21 and 22's performance parts): the
sparse Adagrad kernel's fast paths (ops/resource_variables.py: rows named once updated by
take/put, repeated ones by the scans), Unique's integer keys and what the benchmarks check before they time
(benchmarks/training.py, benchmarks/sparse_gradients.py). Each breaks one key behaviour; a
test must go red.

    python -m tests.hostile.mutations --only BENCH  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

RV = "ops/resource_variables.py"
OPS_T = ("tests/test_variables_ops.py",)
TRAIN_T = ("tests/test_train_sparse.py", "tests/test_train_optimizers.py")
BENCH_T = ("tests/test_benchmarks_training.py",)
UNIQUE_T = ("tests/test_benchmarks_kernel_paths.py", "tests/test_train_unique.py")

MUTATIONS = [
    Mutation("BENCH1", "sparse Adagrad: a row named once has its accumulator written back", RV,
             "            _put_rows(xp, accum, flat, a)\n", "", OPS_T + TRAIN_T),
    Mutation("BENCH2", "sparse Adagrad: the rows named once and the repeated ones both update", RV,
             "    if single.size:\n        once(flat[single], grad[single])\n", "", OPS_T),
    Mutation("BENCH3", "the quick repeat check lets repeated indices through to the scans", RV,
             "    if not bool((ordered[1:] == ordered[:-1]).any()):\n        return None\n",
             "    if True:\n        return None\n", OPS_T),
    Mutation("BENCH4", "rows put as void records land on their own rows", RV,
             "        table.view(record).reshape(-1).put(rows, values.view(record).reshape(-1))",
             "        table.view(record).reshape(-1).put(rows[::-1], values.view(record).reshape(-1))",
             OPS_T + TRAIN_T),
    Mutation("BENCH7", "Unique's integer keys: a key's value part is value - min", RV,
             "        order, ordered = keys % n, keys // n", "        order, ordered = keys % n, keys // (n + 1)",
             UNIQUE_T),
    Mutation("BENCH8", "Unique numbers the values in order of first appearance, not sorted", RV,
             "    number = (xp.cumsum(marks) - 1)[firsts]", "    number = xp.arange(firsts.shape[0])",
             UNIQUE_T),
    Mutation("BENCH9", "Unique's integer keys fall back where value * n would overflow", RV,
             "    if (high - low + 1) * n >= 2**62:", "    if False:", UNIQUE_T),
    Mutation("BENCH5", "the training benchmark's step is Adagrad with the issue's learning rate",
             "benchmarks/training.py", "LEARNING_RATE = 0.1\n", "LEARNING_RATE = 0.2\n", BENCH_T),
    Mutation("BENCH6", "the best NumPy densify adds the repeated ids' rows",
             "benchmarks/sparse_gradients.py", "                current += data.take(at, axis=0)\n",
             "", BENCH_T),
]  # fmt: skip
