"""DynamicPartition, DynamicStitch and the sharded embedding_lookup on CPU.

What is timed (medians over interleaved repeats, ratios per repeat, all in one process):
- DynamicPartition of 1e6 int64 values into 8 parts by random int32 partitions, through
  `Session.run` of one fed node, against the best single-threaded numpy I could write for the
  job: the bounds check (one `max` over the partitions viewed as unsigned), then one
  `compress` per part (a stable counting partition: no argsort).
- DynamicStitch of those 8 parts back into 1e6 rows by their positions, against numpy's
  bounds check (`min`/`max` per index tensor), a zero-filled output and one fancy assignment per
  part in list order.
- embedding_lookup of 1e6 random ids over a table split in 4 "mod" shards, against one
  GatherV2 over the unsharded table (both through `Session.run` with the default config, every
  table fed), for 64-byte and 256-byte rows; target (issue 23) at most 1.15x. With every shard
  on one device the optimizer fuses the composition (ops/embedding.py,
  `fused_sharded_lookup`) into one FusedShardedLookup node that gathers each row straight
  into the output; the id check (Min, Max, Assert) and the id arithmetic (FloorMod, FloorDiv)
  stay. Also timed: the same graph with the fusion off (`OptimizerConfig(remapping=False)`),
  TF's composition node by node, which moves every row twice (the per-shard gather, then the
  stitch). The notes give a few traced runs' per-node breakdown (fused lookup, id check, each
  op of the id arithmetic) against the single gather's median.
- For scale, the notes also give `numpy_fused_lookup`, a windowed two-move formulation in
  numpy (each shard's rows into a cache-sized scratch, from there into place, two threads).
Quick mode divides the sizes by 10.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

import minigraph
from benchmarks._config import Bench
from benchmarks._report import cell, num, ratio_cell
from benchmarks._timing import Stats, interleaved, paired
from minigraph import OptimizerConfig, Scope, Session, SessionConfig
from ops import DynamicPartition, DynamicStitch, GatherV2, Placeholder, embedding_lookup

__all__ = ["run", "numpy_fused_lookup", "numpy_partition", "numpy_stitch"]

SECTION = "partition"
TARGET = "<= 1.50"
LOOKUP_TARGET = "<= 1.15"  # issue 23: the fused lookup against one GatherV2
PARTS = 8
SHARDS = 4


def numpy_partition(data: np.ndarray, parts: np.ndarray, n: int) -> list[np.ndarray]:
    """The baseline: bounds check, then one stable compress per part."""
    if parts.size and int(parts.view(np.uint32).max()) >= n:
        raise IndexError("partition out of range")
    return [data.compress(parts == i) for i in range(n)]


def numpy_stitch(indices: list[np.ndarray], data: list[np.ndarray]) -> np.ndarray:
    """The baseline: bounds check and size, zero-filled output, assignments in list order."""
    high = -1
    for idx in indices:
        if idx.size:
            if int(idx.min()) < 0:
                raise IndexError("negative index")
            high = max(high, int(idx.max()))
    out = np.zeros((high + 1,) + data[0].shape[indices[0].ndim :], data[0].dtype)
    for idx, values in zip(indices, data):
        out[idx] = values
    return out


# Bytes of rows per window of the fused lookup: its scratch stays in the last-level cache
# (measured best of 1, 4 and 16 MiB for 64- and 256-byte rows).
_FUSED_WINDOW_BYTES = 4 << 20


def numpy_fused_lookup(
    shards: list[np.ndarray], ids: np.ndarray, out: np.ndarray, pool: ThreadPoolExecutor
) -> np.ndarray:
    """The "mod" lookup over a power-of-two number of shards, fused: no partitioned or
    gathered intermediates. The ids are split in two halves, one per thread; each thread
    walks its half a window at a time, takes every shard's rows for the window into a scratch
    and then the scratch's rows into place in `out` (rows move twice, but the second time
    from cache). The ids must be valid: the caller checks them."""
    count = len(shards)
    shift = count.bit_length() - 1
    width = out.shape[1]
    window = max(1024, _FUSED_WINDOW_BYTES // max(1, out.itemsize * width))

    def half(k: int) -> None:
        start, stop = ids.size * k // 2, ids.size * (k + 1) // 2
        scratch = np.empty((window, width), out.dtype)
        where = np.empty(window, np.intp)
        steps = np.arange(window, dtype=np.intp)
        shard_of = np.empty(window, np.int32)
        row_of = np.empty(window, np.int32)
        mask = np.empty(window, np.bool_)
        for lo in range(start, stop, window):
            hi = min(stop, lo + window)
            c = hi - lo
            np.bitwise_and(ids[lo:hi], count - 1, out=shard_of[:c], casting="unsafe")
            np.right_shift(ids[lo:hi], shift, out=row_of[:c], casting="unsafe")
            filled = 0
            for s, shard in enumerate(shards):
                np.equal(shard_of[:c], s, out=mask[:c])
                at = np.flatnonzero(mask[:c])
                m = at.size
                shard.take(row_of[:c].take(at), 0, scratch[filled : filled + m], "clip")
                where[at] = steps[filled : filled + m]
                filled += m
            scratch.take(where[:c], 0, out[lo:hi], "clip")

    list(pool.map(half, range(2)))
    return out


def _partition_jobs(n: int, rng: np.random.Generator) -> dict[str, Any]:
    data = rng.integers(0, 1 << 40, n, dtype=np.int64)
    parts = rng.integers(0, PARTS, n, dtype=np.int32)
    pieces = numpy_partition(data, parts, PARTS)
    where = numpy_partition(np.arange(n, dtype=np.int32), parts, PARTS)
    root = Scope.new_root_scope()
    d = Placeholder(root, minigraph.int64, shape=[None])
    p = Placeholder(root, minigraph.int32, shape=[None])
    dp = DynamicPartition(root, d, p, num_partitions=PARTS)
    idx = [Placeholder(root, minigraph.int32, shape=[None]) for _ in range(PARTS)]
    vals = [Placeholder(root, minigraph.int64, shape=[None]) for _ in range(PARTS)]
    st = DynamicStitch(root, idx, vals)
    sess = Session(root)
    feed_dp = {d: data, p: parts}
    feed_st = {**dict(zip(idx, where)), **dict(zip(vals, pieces))}
    problems = []
    if not all(np.array_equal(a, b) for a, b in zip(sess.run(dp.outputs, feed_dp), pieces)):
        problems.append("DynamicPartition returned a wrong result")
    if not np.array_equal(sess.run(st, feed_st), data):
        problems.append("DynamicStitch returned a wrong result")
    return {
        "DynamicPartition": (
            lambda: sess.run(dp.outputs, feed_dp),
            lambda: numpy_partition(data, parts, PARTS),
        ),
        "DynamicStitch": (
            lambda: sess.run(st, feed_st),
            lambda: numpy_stitch(where, pieces),
        ),
        "session": sess,
        "problems": problems,
    }


def _lookup_job(
    n: int, rows: int, width: int, rng: np.random.Generator, pool: ThreadPoolExecutor
) -> dict[str, Any]:
    table = rng.random((rows, width), dtype=np.float32)
    shards = [np.ascontiguousarray(table[k::SHARDS]) for k in range(SHARDS)]
    ids_value = rng.integers(0, rows, n, dtype=np.int64)
    root = Scope.new_root_scope()
    ids = Placeholder(root, minigraph.int64, shape=[None])
    shard_in = [Placeholder(root, minigraph.float32, shape=list(s.shape)) for s in shards]
    table_in = Placeholder(root, minigraph.float32, shape=[rows, width])
    sharded = embedding_lookup(root, shard_in, ids)
    single = GatherV2(root, table_in, ids, 0)
    sess = Session(root)
    # The same graph as TF's composition runs it, node by node (no fused lookup).
    unfused = Session(root, SessionConfig(optimizer=OptimizerConfig(remapping=False)))
    feed_sharded = {ids: ids_value, **dict(zip(shard_in, shards))}
    feed_single = {ids: ids_value, table_in: table}
    fused_out = np.empty((n, width), np.float32)
    problems = []
    expected = sess.run(single, feed_single)
    if not np.array_equal(sess.run(sharded, feed_sharded), expected):
        problems.append("embedding_lookup returned a wrong result")
    if not np.array_equal(unfused.run(sharded, feed_sharded), expected):
        problems.append("embedding_lookup (not fused) returned a wrong result")
    if not _fused(sess, sharded, feed_sharded):
        problems.append("embedding_lookup was not fused into one FusedShardedLookup node")
    if not np.array_equal(numpy_fused_lookup(shards, ids_value, fused_out, pool), expected):
        problems.append("numpy_fused_lookup returned a wrong result")
    return {
        "traced": lambda: _traced(sess, sharded, feed_sharded),
        "fns": {
            "sharded": lambda: sess.run(sharded, feed_sharded),
            "unfused": lambda: unfused.run(sharded, feed_sharded),
            "single": lambda: sess.run(single, feed_single),
            "numpy take": lambda: table.take(ids_value, axis=0),
            "fused floor": lambda: numpy_fused_lookup(shards, ids_value, fused_out, pool),
        },
        "sessions": (sess, unfused),
        "problems": problems,
    }


def _fused(sess: Session, fetch: Any, feed: dict[Any, Any]) -> bool:
    """Whether the optimizer fused the lookup (its report names the rule)."""
    meta = minigraph.RunMetadata()
    sess.run(fetch, feed, run_metadata=meta)
    return any(rule == "fused_sharded_lookup" for r in meta.optimizer for _, rule in r.fused)


# What the lookup's trace is summed into: the composition's parts, the id arithmetic per op.
_GROUPS = {
    "FusedShardedLookup": "fused lookup", "DynamicStitch": "stitch",
    "DynamicPartition": "partition", "FloorMod": "FloorMod",
    "FloorDiv": "FloorDiv", "Range": "Range", "Cast": "Cast", "Sub": "Sub", "Maximum": "Maximum",
}  # fmt: skip


def _traced(sess: Session, fetch: Any, feed: dict[Any, Any]) -> dict[str, float]:
    """One traced run of the lookup: seconds per group of nodes."""
    meta = minigraph.RunMetadata()
    sess.run(fetch, feed, run_metadata=meta, options=minigraph.RunOptions(trace=True))
    groups: dict[str, float] = {}
    for step in meta.step_stats:
        leaf = step.node.rsplit("/", 1)[-1]
        if "/check_ids/" in step.node:
            group = "id check"  # Min, Max and the Assert over the ids
        elif step.op_type == "GatherV2":
            group = "shard_ids" if leaf.startswith("shard_ids") else "shard gathers"
        else:
            group = _GROUPS.get(step.op_type, "other")
        groups[group] = groups.get(group, 0.0) + step.duration_us * 1e-6
    return groups


def _trace_note(case: str, traces: list[dict[str, float]], single: float) -> str:
    """Median traced ms per group, and as a fraction of the single gather's median time."""
    names = sorted(
        {g for t in traces for g in t}, key=lambda g: -np.median([t.get(g, 0.0) for t in traces])
    )
    parts = []
    for name in names:
        ms = float(np.median([t.get(name, 0.0) for t in traces])) * 1e3
        parts.append(f"{name} {num(ms)} ({ms / single:.2f}x)")
    return f"{case}: traced per node, median ms (x the single gather): " + ", ".join(parts)


def _ratio(samples: dict[str, list[float]], a: str, b: str) -> Stats:
    return paired(lambda x, y: x / y, samples[a], samples[b])


def run(bench: Bench) -> None:
    """Times the partition family and prints one table."""
    report, mode = bench.report, bench.mode
    divisor = mode.kernel_divisor
    n = max(1000, 1_000_000 // divisor)
    title = "Partition, stitch and sharded embedding_lookup on CPU"
    if mode.scaled:
        title += f" [{mode.name}: sizes / {divisor}]"
    report.heading(title)
    rng = np.random.default_rng(0)
    rows_out: list[list[str]] = []
    notes: list[str] = []

    jobs = _partition_jobs(n, rng)
    try:
        fns: dict[str, Callable[[], Any]] = {}
        for name in ("DynamicPartition", "DynamicStitch"):
            fns[name], fns[f"{name} numpy"] = jobs[name]
        samples = interleaved(fns, mode.kernel_repeats, warmup=1)
    finally:
        jobs["session"].close()
    notes += jobs["problems"]
    for name, case in (
        ("DynamicPartition", f"{n} int64 into {PARTS} parts"),
        ("DynamicStitch", f"{PARTS} parts back into {n} int64"),
    ):
        mine = Stats.of(samples[name]).scaled(1e3)
        base = Stats.of(samples[f"{name} numpy"]).scaled(1e3)
        ratio = _ratio(samples, name, f"{name} numpy")
        rows_out.append([name, case, cell(mine), "numpy " + cell(base), ratio_cell(ratio, TARGET)])
        report.add(SECTION, f"{name} {case}", "time minigraph", mine, "ms")
        report.add(SECTION, f"{name} {case}", "time numpy", base, "ms")
        report.add(SECTION, f"{name} {case}", "ratio minigraph/numpy", ratio, "x",
                   target=TARGET, baseline="numpy")  # fmt: skip

    rows = max(1000, 1_000_000 // divisor)
    for width in (16, 64):
        pool = ThreadPoolExecutor(2, thread_name_prefix="fused-floor")
        job = _lookup_job(n, rows, width, rng, pool)
        try:
            samples = interleaved(job["fns"], mode.kernel_repeats, warmup=1)
            traces = [job["traced"]() for _ in range(max(3, mode.kernel_repeats // 3))]
        finally:
            for session in job["sessions"]:
                session.close()
            pool.shutdown()
        notes += job["problems"]
        case = f"{n} ids, table [{rows},{width}] f32 in {SHARDS} shards"
        mine = Stats.of(samples["sharded"]).scaled(1e3)
        base = Stats.of(samples["single"]).scaled(1e3)
        ratio = _ratio(samples, "sharded", "single")
        target = LOOKUP_TARGET if n == 1_000_000 else None  # the case: 1e6 ids
        unfused = Stats.of(samples["unfused"]).scaled(1e3)
        unfused_ratio = _ratio(samples, "unfused", "single")
        rows_out.append([
            "embedding_lookup", case, cell(mine), "GatherV2 " + cell(base),
            ratio_cell(ratio, target),
        ])  # fmt: skip
        rows_out.append([
            "  not fused", case, cell(unfused), "GatherV2 " + cell(base),
            ratio_cell(unfused_ratio, None),
        ])  # fmt: skip
        report.add(SECTION, case, "time embedding_lookup", mine, "ms")
        report.add(SECTION, case, "time embedding_lookup not fused", unfused, "ms")
        report.add(SECTION, case, "time single GatherV2", base, "ms")
        report.add(SECTION, case, "ratio sharded/single", ratio, "x", target=target,
                   baseline="single GatherV2")  # fmt: skip
        report.add(SECTION, case, "ratio not fused/single", unfused_ratio, "x",
                   baseline="single GatherV2")  # fmt: skip
        numpy_take = Stats.of(samples["numpy take"]).scaled(1e3)
        notes.append(f"{case}: numpy take of the unsharded table {num(numpy_take.median)} ms")
        floor = _ratio(samples, "fused floor", "single")
        notes.append(
            f"{case}: numpy_fused_lookup (a windowed two-move lookup in numpy) "
            f"{num(Stats.of(samples['fused floor']).median * 1e3)} ms, {floor.median:.2f}x the "
            "single gather"
        )
        notes.append(_trace_note(case, traces, base.median))
    notes = [
        f"ms: median (min-max) over {mode.kernel_repeats} interleaved repeats; ratios: median "
        f"of per-repeat ratios; targets: partition and stitch {TARGET} numpy (' !' marks a miss).",
        "numpy baselines: DynamicPartition = bounds check + one compress per part; "
        "DynamicStitch = bounds check + zeros + one assignment per part.",
        f"embedding_lookup: target {LOOKUP_TARGET} the single gather (1e6 ids), fused (one "
        "move per row); 'not fused' is TF's composition node by node (rows move twice: "
        "shard gather, then stitch).",
        *notes,
    ]
    report.table("", ["op", "case", "minigraph ms", "baseline ms", "ratio"], rows_out, notes)
