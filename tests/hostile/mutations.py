"""Mutation check of the test suite: break the code on purpose at key points of each major
feature and confirm that a test goes red.

    python -m tests.hostile.mutations             # every mutation (about 3 minutes on 2 cores)
    python -m tests.hostile.mutations --only GD   # mutations whose id starts with GD

Each mutation replaces one exact piece of source text (which must occur exactly once) in a
scratch copy of the working tree, then runs the tests that cover the feature there. KILLED: a
test went red; SURVIVED: the suite did not notice (a missing test). The working tree itself is
never modified.
"""

# ruff: noqa: E501 - tables of hostile inputs and source snippets read best unwrapped

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Mutation:
    id: str
    feature: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


GD_TESTS = ("tests/test_graph_def.py", "tests/test_graph_def_errors.py",
            "tests/test_graph_def_proto.py", "tests/test_graph_def_tf_files.py",
            "tests/test_graph_def_variadic.py", "tests/test_review_graph_files.py",
            "tests/test_review_construction.py")  # fmt: skip
DIST_TESTS = ("tests/test_distributed_partition.py", "tests/test_distributed.py")
PART_TESTS = ("tests/test_partition_kernels.py", "tests/test_partition_ops.py",
              "tests/test_review_runtime.py")  # fmt: skip
EMB_TESTS = ("tests/test_embedding.py", "tests/test_embedding_helper_ops.py",
             "tests/test_review_construction.py")  # fmt: skip
SIM_TESTS = ("tests/test_simulated_cupy.py", "tests/test_partition_kernels.py",
             "tests/test_gather_gpu.py", "tests/test_devices.py")  # fmt: skip
FEED_TESTS = ("tests/test_session_trust.py", "tests/test_session_feeds.py",
              "tests/test_constants_immutable.py")  # fmt: skip
README_TESTS = ("tests/test_readme.py",)
GATHER_TESTS = ("tests/test_gather_fast_path.py",)
MEMO_TESTS = ("tests/test_session_trust.py", "tests/test_literal_memo.py")
LOCK_TESTS = ("tests/test_session_concurrency.py",)

MUTATIONS = [
    # -- GraphDef import and export ---------------------------------------------------------
    Mutation("GD1", "GraphDef: TF must refuse graphs that need minigraph's semantics",
             "minigraph/graph_def.py", "    if needs_minigraph:\n        graph_def.versions",
             "    if False:\n        graph_def.versions", GD_TESTS),
    Mutation("GD2", "GraphDef: graphs needing a newer reader are refused",
             "minigraph/graph_def.py", "if versions.min_consumer > MINIGRAPH_MIN_CONSUMER:",
             "if False:", GD_TESTS),
    Mutation("GD3", "GraphDef: splat constants (one value repeated) written typed",
             "minigraph/graph_def.py", "if array.size > 1 and not (flat == first[0]).all():",
             "if False:", GD_TESTS),
    Mutation("GD4", "GraphDef: TF's splat rule when reading",
             "minigraph/graph_def.py",
             "np.broadcast_to(flat[-1:], (count - given,))",
             "np.zeros(count - given, dtype=flat.dtype)", GD_TESTS),
    Mutation("GD5", "GraphDef: _output_shapes checked against inference",
             "minigraph/graph_def.py", "        if decoded.shapes is not None:\n",
             "        if False:\n", GD_TESTS),
    Mutation("GD6", "GraphDef: colocation from _class",
             "minigraph/graph_def.py", 'if text.startswith("loc:@") and',
             'if text.startswith("loc:#") and', GD_TESTS),
    Mutation("GD7", "GraphDef: tensor_content length checked",
             "minigraph/graph_def.py",
             "        if len(content) != count * np_dtype.itemsize:",
             "        if False:", GD_TESTS),
    Mutation("GD8", "GraphDef: inputs of output > 0 written as node:i",
             "minigraph/graph_def.py",
             "return tensor.op.name if tensor.index == 0 else tensor.name",
             "return tensor.op.name", GD_TESTS),
    Mutation("GD9", "GraphDef: a failed import leaves the graph unchanged",
             "minigraph/graph.py", "            except BaseException:\n                self.rollback(mark)\n                raise\n            self.release(mark)\n\n    # -- construction",
             "            except BaseException:\n                self.release(mark)\n                raise\n            self.release(mark)\n\n    # -- construction",
             GD_TESTS),
    Mutation("GD10", "GraphDef: cycles found and shown",
             "minigraph/graph_def.py", "cycle = nx.find_cycle(dag)",
             "cycle = [(0, 0)]", GD_TESTS),
    Mutation("GD11", "GraphDef: constants over the size bound refused before allocation",
             "minigraph/graph_def.py",
             "if max(count, nonzero) * np_dtype.itemsize > MAX_CONST_BYTES:",
             "if False:", GD_TESTS),
    Mutation("GD12", "GraphDef: half_val holds float16 bits",
             "minigraph/graph_def.py",
             "return wide.astype(np.uint16).view(dtype.np_dtype)",
             "return wide.astype(dtype.np_dtype)", GD_TESTS),
    # -- distributed partitioning -----------------------------------------------------------
    Mutation("DP1", "partition: a cut edge always goes to a later stage",
             "minigraph/distributed/partition.py",
             "stage[u] + (task[u] != task[op])", "stage[u] + 0", DIST_TESTS),
    Mutation("DP2", "partition: constants copied into each partition that reads them",
             "minigraph/distributed/partition.py",
             "        and group_size[op.colocation_group] == 1\n",
             "        and False\n", DIST_TESTS),
    Mutation("DP3", "partition: control edges between partitions order them",
             "minigraph/distributed/partition.py",
             "                    after[source.index] = None\n", "                    pass\n",
             DIST_TESTS),
    Mutation("DP4", "partition: merging keeps the partition DAG acyclic",
             "minigraph/distributed/partition.py",
             "            if _reaches_indirectly(quotient, keep, g) or _reaches_indirectly(quotient, g, keep):",
             "            if False:", DIST_TESTS),
    Mutation("DP5", "runtime: large feeds scattered to the worker, small ones embedded",
             "minigraph/distributed/runtime.py", "if value.nbytes <= EMBED_BYTES:",
             "if True:", DIST_TESTS),
    # -- DynamicPartition / DynamicStitch kernels -------------------------------------------
    Mutation("PK1", "DynamicPartition: out-of-range partitions refused (boundary)",
             "ops/partition.py", "if int(unsigned.max()) < limit:",
             "if int(unsigned.max()) <= limit:", PART_TESTS),
    Mutation("PK2", "DynamicPartition: the sort path keeps C order (stable)",
             "ops/partition.py", 'order = np.argsort(keys, kind="stable")',
             'order = np.argsort(keys, kind="quicksort")', PART_TESTS),
    Mutation("PK8", "DynamicStitch CPU scatter: later tensors win",
             "ops/partition.py", "        for flat, source in zip(flats, sources):\n            if flat.size:",
             "        for flat, source in reversed(list(zip(flats, sources))):\n            if flat.size:",
             PART_TESTS),
    Mutation("PK9", "DynamicStitch CPU windowed scatter: later tensors win within a window",
             "ops/partition.py", "for flat, source, cut in zip(flats, sources, cuts):",
             "for flat, source, cut in reversed(list(zip(flats, sources, cuts))):", PART_TESTS),
    Mutation("PK10", "DynamicStitch CPU windowed scatter: each window zero-filled",
             "ops/partition.py", "        out[lo:hi] = 0\n", "        pass\n", PART_TESTS),
    Mutation("PK11", "DynamicStitch CPU windowed scatter: the threads cover every window",
             "ops/partition.py",
             "for w in range(windows * k // threads, windows * (k + 1) // threads):",
             "for w in range(windows * k // threads, windows * (k + 1) // threads - (k > 0)):",
             PART_TESTS),
    Mutation("PK12", "DynamicPartition CPU: the threads fill every part",
             "ops/partition.py",
             "            for i in range(k, n, threads):\n                at = positions[i]",
             "            for i in range(k, n, threads + 1):\n                at = positions[i]",
             PART_TESTS),
    Mutation("PK13", "DynamicPartition CPU: large partitions use the intra-op threads",
             "ops/partition.py", "    if flat.size >= _PARALLEL_PARTITION_ROWS:\n",
             "    if False:\n", PART_TESTS),
    Mutation("PK14", "DynamicPartition CPU: the sort path writes into pooled memory",
             "ops/partition.py",
             '    if xp is np and np.dtype(rows.dtype).kind != "O" and rows.size:\n',
             "    if False:\n", PART_TESTS),
    Mutation("PK3", "DynamicStitch CPU (strings): later tensors win",
             "ops/partition.py", "    for flat, values in zip(flats, data):\n        if flat.size:",
             "    for flat, values in reversed(list(zip(flats, data))):\n        if flat.size:",
             PART_TESTS),
    Mutation("PK4", "DynamicStitch GPU: the last writer wins",
             "ops/partition.py", "xp.maximum.at(writer, positions", "xp.minimum.at(writer, positions",
             PART_TESTS),
    Mutation("PK5", "DynamicStitch GPU: unnamed rows are zeros",
             "ops/partition.py", "        out[unnamed] = 0\n", "        pass\n", PART_TESTS),
    Mutation("PK6", "DynamicPartition: constant partitions give exact first dims",
             "ops/partition.py", "firsts = [int(c) for c in counts]",
             "firsts = [int(c) for c in counts[::-1]]", PART_TESTS),
    Mutation("PK7", "DynamicStitch: negative indices refused",
             "ops/partition.py", "        if low < 0:\n            at = int(xp.argmax(flat < 0))",
             "        if False:\n            at = int(xp.argmax(flat < 0))", PART_TESTS),
    # -- embedding_lookup -------------------------------------------------------------------
    Mutation("EL1", "embedding_lookup: the div strategy's shard of an id",
             "ops/embedding.py", "FloorDiv(checked, flat, const(per + 1))",
             "FloorDiv(checked, flat, const(per + 2))", EMB_TESTS),
    Mutation("EL2", "embedding_lookup: ids checked against the whole table",
             "ops/embedding.py",
             "        checks = [_check_ids(scope, flat, [0], total)]",
             "        checks = []",
             EMB_TESTS),
    Mutation("EL3", "embedding_lookup: each gather colocated with its shard",
             "ops/embedding.py",
             '        where = scope.with_device("").colocate_with(_home(shard))\n        rows.append',
             "        where = scope\n        rows.append", EMB_TESTS),
    Mutation("EL4", "embedding_lookup: shard sizes checked against the strategy",
             "ops/embedding.py", "    if sizes != expected:", "    if False:", EMB_TESTS),
    Mutation("EL5", "embedding_lookup: arithmetic widened when ids' dtype cannot hold the rows",
             "ops/embedding.py", "if max(total, n) > np.iinfo(work.np_dtype).max:", "if False:",
             EMB_TESTS),
    Mutation("EL6", "embedding_lookup: the mod strategy's row inside a shard",
             "ops/embedding.py", "new_ids = FloorDiv(checked, flat, const(n)).output",
             "new_ids = FloorMod(checked, flat, const(n)).output", EMB_TESTS),
    # -- the simulated cupy double -----------------------------------------------------------
    Mutation("SC1", "double: implicit conversion to a host array refused",
             "minigraph/testing/simulated_gpu.py", "    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:\n",
             "    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:\n        return self._data\n",
             SIM_TESTS),
    Mutation("SC2", "double: dtypes cupy lacks refused",
             "minigraph/testing/simulated_gpu.py", "    if dtype.char not in _CUPY_DTYPE_CHARS:\n",
             "    if False:\n", SIM_TESTS),
    Mutation("SC3", "double: out-of-range indices wrap as cupy's",
             "minigraph/testing/simulated_gpu.py", "def _wrap_indices(indices: np.ndarray, size: int) -> np.ndarray:\n",
             "def _wrap_indices(indices: np.ndarray, size: int) -> np.ndarray:\n    return indices\n",
             SIM_TESTS),
    Mutation("SC4", "double: arrays of two devices refused",
             "minigraph/testing/simulated_gpu.py", "def _device_mismatch(array_device: int, current: int) -> ValueError:\n",
             "def _device_mismatch(array_device: int, current: int) -> ValueError:\n    return None\n",
             SIM_TESTS),
    # -- feed protection and kernel output checks (perf's files: mutated here only) ------------
    Mutation("FP1", "feeds: untrusted kernels get read-only views",
             "minigraph/session.py", "    view.setflags(write=False)  # cheaper than view.flags.writeable = False\n",
             "    pass\n", FEED_TESTS),
    Mutation("FP2", "feeds: results that are views of a feed come back copied",
             "minigraph/session.py", "            if np.may_share_memory(value, fed):\n                return value.copy()",
             "            if np.may_share_memory(value, fed):\n                return value",
             FEED_TESTS),
    Mutation("KC1", "kernel output checks: untrusted kernels checked by default",
             "minigraph/plan.py", "if outs and (check_all or (check_untrusted and not trusted)):",
             "if outs and check_all:", FEED_TESTS),
    Mutation("KC2", "kernel output checks: the dtype compared",
             "minigraph/plan.py", "            and value.dtype is fast[1]\n",
             "            and True\n", FEED_TESTS),
    # -- issue 10 section 8: fast paths and locks ----------------------------------------------
    Mutation("GF1", "GatherV2 constant-index fast path: generated code's direct take",
             "ops/gather_ops.py",
             "return InlineCall(np.ndarray.take, gather_v2_constant_indices, Input(0), indices, fast)",
             "return InlineCall(np.ndarray.take, gather_v2_constant_indices, Input(0), indices[..., ::-1], fast)",
             GATHER_TESTS),
    Mutation("GF2", "GatherV2 constant-index fast path: the interpreted fallback",
             "ops/gather_ops.py",
             "        # What `take` rejects (bad indices for this params, no ndarray) goes TF's way.\n        return general(params, indices, axis_)",
             "        # What `take` rejects (bad indices for this params, no ndarray) goes TF's way.\n        return general(params, indices[..., ::-1], axis_)",
             GATHER_TESTS),
    Mutation("GF3", "GatherV2 constant indices: large gathers keep the general (threaded) kernel",
             "ops/gather_ops.py",
             "        def gather_v2_constant_indices_general(params: Any, indices_: Any, axis_: Any) -> Any:\n            return general(params, indices, axis_)",
             "        def gather_v2_constant_indices_general(params: Any, indices_: Any, axis_: Any) -> Any:\n            return np.take(params, indices, axis=int(axis_))",
             GATHER_TESTS),
    Mutation("ME1", "construction memo: keys hold the attr value's type",
             "minigraph/graph.py", "                key.append((k, type(v), v))",
             "                key.append((k, v))", MEMO_TESTS),
    Mutation("AO1", "Graph.add_operation checks its arguments at the boundary",
             "minigraph/graph.py",
             "        inputs, requested_device, control_inputs = _checked_add_arguments(\n",
             "        inputs, requested_device, control_inputs = (inputs, requested_device, "
             "control_inputs) if True else _checked_add_arguments(\n",
             ("tests/test_public_names.py",)),
    Mutation("LK1", "lock: Graph.add",
             "minigraph/graph.py",
             "        protocol: Scope's path, called once per node).\"\"\"\n        with self.lock:",
             "        protocol: Scope's path, called once per node).\"\"\"\n        with __import__('contextlib').nullcontext():",
             LOCK_TESTS),
    Mutation("LK2", "lock: the session's plan-cache insert",
             "minigraph/session.py", "        with self._lock:\n            plans = self._plans",
             "        with __import__('contextlib').nullcontext():\n            plans = self._plans",
             LOCK_TESTS),
    Mutation("LK3", "lock: the parallel interpreter",
             "minigraph/executor.py", "    lock = threading.Lock()\n    done = threading.Event()",
             "    lock = __import__('contextlib').nullcontext()\n    done = threading.Event()",
             LOCK_TESTS),
    Mutation("KC3", "kernel output checks: the shape compared",
             "minigraph/plan.py", "            and value.shape == fast[2]\n",
             "            and True\n", FEED_TESTS),
    # -- the README test -------------------------------------------------------------------
    Mutation("RM1", "README: printed values compared",
             "README.md", "print(session.run(first, feed))  # [4. 5. 6.]",
             "print(session.run(first, feed))  # [4. 5. 7.]", README_TESTS),
    Mutation("RM2", "README: CLI samples compared",
             "README.md", "  Placeholder  3\n", "  Placeholder  4\n", README_TESTS),
    Mutation("RM3", "README: error messages in comments compared",
             "README.md", "# Op type not registered: 'GatherND'. Did you mean GatherNd, GatherV2, ...? ...",
             "# Op type not registered: 'GatherND'. Did you mean Gather? ...", README_TESTS),
]  # fmt: skip


#: The areas' own tables (tests/hostile/mutations_<area>.py), listed here explicitly (no
#: scanning): each sits beside the feature's tests, and `all_mutations()` joins them to the core
#: table above. Imported on call: each area module imports `Mutation` from this one.
AREAS = (
    "elementwise", "array", "reduction_nn", "segment", "fidelity", "hostile3", "gradients",
    "gradients_elementwise", "gradients_reduction_nn", "gradients_gather", "variables",
    "optimizer", "train", "bench", "perf", "ps",
)  # fmt: skip


def all_mutations() -> list[Mutation]:
    """The core table and every area's, in that order."""
    import importlib

    found = list(MUTATIONS)
    for area in AREAS:
        found.extend(importlib.import_module(f"hostile.mutations_{area}").MUTATIONS)
    return found


def _copy_tree(dest: str) -> None:
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".pytest_cache",
                                    ".ruff_cache", ".hypothesis", "*.egg-info")  # fmt: skip
    shutil.copytree(ROOT, dest, ignore=ignore, dirs_exist_ok=True)


def run(mutations: list[Mutation], timeout: float) -> list[tuple[Mutation, str, str]]:
    results = []
    scratch = tempfile.mkdtemp(prefix="minigraph-mutations-")
    tree = os.path.join(scratch, "tree")
    _copy_tree(tree)
    env = dict(os.environ, PYTHONPATH=tree)
    for m in mutations:
        path = os.path.join(tree, m.path)
        original = open(path, encoding="utf-8").read()
        count = original.count(m.old)
        if count != 1:
            results.append((m, "STALE", f"the text to mutate occurs {count} times"))
            print(f"STALE    {m.id}: {m.feature}", flush=True)
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(original.replace(m.old, m.new))
        began = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                 *m.tests], cwd=tree, env=env, capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
            lines = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
            if proc.returncode == 0:
                outcome, detail = "SURVIVED", "every test passed"
            else:
                outcome = "KILLED"
                detail = lines[0][len("FAILED ") :] if lines else proc.stdout.strip()[-200:]
        except subprocess.TimeoutExpired:
            outcome, detail = "KILLED", f"the tests did not finish in {timeout:g} s (a hang)"
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
        seconds = time.monotonic() - began
        results.append((m, outcome, detail))
        print(f"{outcome:8} {m.id}: {m.feature} ({seconds:.0f} s): {detail[:160]}", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.hostile.mutations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", action="append", help="mutation id prefixes to run")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per mutation")
    args = parser.parse_args(argv)
    chosen = [m for m in all_mutations() if not args.only or m.id.startswith(tuple(args.only))]
    results = run(chosen, args.timeout)
    survived = [m for m, outcome, _ in results if outcome != "KILLED"]
    print(f"\n{len(results) - len(survived)} of {len(results)} mutations killed")
    for m in survived:
        print(f"  not killed: {m.id} {m.feature}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
