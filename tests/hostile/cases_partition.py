"""DynamicPartition, DynamicStitch and embedding_lookup: random cases against references
written as plain loops, bad partitions and indices (constant and fed), absurd counts, dtype
mixes, shard-size mismatches, out-of-range ids for both strategies; the same on simulated
GPUs, and the simulated GPUs themselves."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from tests.hostile._common import DTYPE_NAMES, cases_from, must, run, same, scope
from tests.hostile._common import minigraph_module as _mg
from tests.hostile._common import ops_module as _ops
from tests.hostile.battery import Case, Wrong

_DTYPES = DTYPE_NAMES


def _values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    mg = _mg()
    if dtype == "string":
        flat = [f"s{int(v)}".encode() for v in rng.integers(0, 100, int(np.prod(shape)))]
        return np.array(flat, dtype=object).reshape(shape)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    np_dtype = mg.as_dtype(dtype).np_dtype
    return (rng.standard_normal(shape) * 50).astype(np_dtype)


def _ref_partition(data: np.ndarray, partitions: np.ndarray, n: int) -> list[np.ndarray]:
    """outputs[i]: the rows data[js] with partitions[js] == i, in C order of js (a loop)."""
    p = partitions.reshape(-1)
    rows = data.reshape((p.size,) + data.shape[partitions.ndim :])
    out = []
    for i in range(n):
        picked = [rows[j] for j in range(p.size) if p[j] == i]
        out.append(np.array(picked, dtype=data.dtype).reshape((len(picked),) + rows.shape[1:]))
    return out


def _ref_stitch(indices: list[np.ndarray], data: list[np.ndarray]) -> np.ndarray:
    """merged[indices[m][js]] = data[m][js], the last writer winning, zeros elsewhere."""
    extra = data[0].shape[indices[0].ndim :]
    written: dict[int, Any] = {}
    for idx, values in zip(indices, data):
        flat = idx.reshape(-1)
        rows = values.reshape((flat.size,) + extra)
        for j in range(flat.size):
            written[int(flat[j])] = rows[j]
    n = max(written) + 1 if written else 0
    if data[0].dtype == object:
        out = np.full((n,) + extra, b"", dtype=object)
    else:
        out = np.zeros((n,) + extra, data[0].dtype)
    for k, row in written.items():
        out[k] = row
    return out


def _devices(on_gpu: bool) -> Any:
    if not on_gpu:
        return contextlib.nullcontext()
    from minigraph.testing import simulated_gpus  # noqa: PLC0415

    return simulated_gpus(2)


def _partition_case(seed: int, on_gpu: bool = False) -> None:
    mg, ops = _mg(), _ops()
    rng = np.random.default_rng(seed)
    dtype = _DTYPES[seed % len(_DTYPES)]
    n = int(rng.choice([1, 2, 3, 7, 17, 40, 70000])) if seed % 9 else 1
    p_rank = int(rng.integers(0, 3))
    p_shape = tuple(int(d) for d in rng.integers(0, 4, p_rank))
    extra = tuple(int(d) for d in rng.integers(0, 3, int(rng.integers(0, 3))))
    data = _values(rng, dtype, p_shape + extra)
    partitions = rng.integers(0, min(n, 5), p_shape).astype(np.int32)
    if n > 5 and partitions.size:
        partitions.reshape(-1)[0] = n - 1
    constant = seed % 2 == 0
    s = scope()
    dev = s.with_device("/device:GPU:0") if on_gpu else s
    with _devices(on_gpu):
        if constant:
            part = ops.DynamicPartition(dev, data, partitions, num_partitions=n)
            feeds = None
        else:
            d = mg.Placeholder(s, mg.as_dtype(dtype), shape=None)
            p = mg.Placeholder(s, mg.int32, shape=[None] * p_rank)
            part = ops.DynamicPartition(dev, d, p, num_partitions=n)
            feeds = {d: data, p: partitions}
        if len(part.outputs) != n:
            raise Wrong(f"{len(part.outputs)} outputs for num_partitions={n}")
        picks = list(range(min(n, 6))) + ([n - 1] if n > 6 else [])
        got = run([part.outputs[i] for i in picks], feeds, graph=s.graph)
    want = _ref_partition(data, partitions, n)
    for i, g in zip(picks, got):
        same(g, want[i], f"DynamicPartition output {i} ({dtype}, n={n})")
        if constant:
            must(part.outputs[i].shape.is_compatible_with(g.shape), "static shape disagrees")


def _stitch_case(seed: int, on_gpu: bool = False) -> None:
    mg, ops = _mg(), _ops()
    rng = np.random.default_rng(10_000 + seed)
    dtype = _DTYPES[seed % len(_DTYPES)]
    m = int(rng.integers(1, 5))
    extra = tuple(int(d) for d in rng.integers(0, 3, int(rng.integers(0, 3))))
    top = int(rng.integers(1, 12))
    indices, data = [], []
    for _ in range(m):
        shape = tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 3))))
        indices.append(rng.integers(0, top, shape).astype(np.int32))  # duplicates and gaps
        data.append(_values(rng, dtype, shape + extra))
    if all(i.size == 0 for i in indices):
        indices[0] = np.array([0], np.int32)
        data[0] = _values(rng, dtype, (1,) + extra)
    constant = seed % 2 == 0
    s = scope()
    dev = s.with_device("/device:GPU:1") if on_gpu else s
    with _devices(on_gpu):
        if constant:
            g = ops.DynamicStitch(dev, indices, data)
            feeds = None
        else:
            ph_i = [mg.Placeholder(s, mg.int32) for _ in indices]
            ph_d = [mg.Placeholder(s, mg.as_dtype(dtype)) for _ in data]
            g = ops.DynamicStitch(dev, ph_i, ph_d)
            feeds = dict(zip(ph_i + ph_d, indices + data))
        got = run(g, feeds, graph=s.graph)
    same(got, _ref_stitch(indices, data), f"DynamicStitch ({dtype}, {m} tensors)")


def _embedding_case(seed: int, on_gpu: bool = False) -> None:
    mg, ops = _mg(), _ops()
    rng = np.random.default_rng(20_000 + seed)
    strategy = ["mod", "div"][seed % 2]
    n = int(rng.integers(1, 7))
    total = int(rng.integers(n, 40))
    row = tuple(int(d) for d in rng.integers(1, 3, int(rng.integers(0, 3))))
    dtype = ["float32", "int64", "float16", "complex64", "int32"][seed % 5]
    table = _values(rng, dtype, (total,) + row)
    if strategy == "mod":
        shards = [table[k::n] for k in range(n)]
    else:
        q, r = divmod(total, n)
        bounds = np.cumsum([0] + [q + 1 if k < r else q for k in range(n)])
        shards = [table[bounds[k] : bounds[k + 1]] for k in range(n)]
    id_dtype = [np.int16, np.int32, np.int64][seed % 3]
    ids = rng.integers(0, total, tuple(int(d) for d in rng.integers(0, 4, seed % 4)))
    ids = ids.astype(id_dtype)
    s = scope()
    with _devices(on_gpu):
        consts = [mg.Const(s.with_device(f"/device:GPU:{k % 2}") if on_gpu else s, sh)
                  for k, sh in enumerate(shards)]  # fmt: skip
        params = consts if n > 1 or seed % 3 else consts[0]
        if seed % 4 == 0:
            ph = mg.Placeholder(s, mg.as_dtype(id_dtype), shape=[None] * ids.ndim)
            g = ops.embedding_lookup(s, params, ph, partition_strategy=strategy)
            got = run(g, {ph: ids}, graph=s.graph)
        else:
            g = ops.embedding_lookup(s, params, ids, partition_strategy=strategy)
            got = run(g, graph=s.graph)
    same(got, table[ids.astype(np.int64)], f"embedding_lookup {strategy} x{n} ids {ids.shape}")
    must(g.shape.is_compatible_with(got.shape), f"static shape {g.shape} vs {got.shape}")


def cases() -> list[Case]:
    out: list[Case] = []
    A = "partition"
    out += cases_from(
        A, "partition vs loop", list(range(70)), _partition_case, expect="ok", timeout=60
    )
    out += cases_from(A, "stitch vs loop", list(range(60)), _stitch_case, expect="ok")
    out += cases_from(A, "embedding vs take", list(range(60)), _embedding_case, expect="ok")

    # -- bad partitions ------------------------------------------------------------------------
    def bad_partition(args):
        mg, ops = _mg(), _ops()
        kind, constant = args
        data = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
        partitions = {
            "too_big": np.array([[0, 1, 17], [0, 0, 0]], np.int32),
            "negative": np.array([[0, -1, 0], [0, 0, 0]], np.int32),
            "not_prefix": np.zeros((3, 2), np.int32),
            "longer": np.zeros((2, 3, 2, 1), np.int32),
            "int64": np.zeros((2, 3), np.int64),
            "float": np.zeros((2, 3), np.float32),
            "scalar_bad": np.array(9, np.int32),
            "empty_bad_shape": np.zeros((0,), np.int32),
            "min_int": np.array([[0, 0, -(2**31)], [0, 0, 0]], np.int32),
        }[kind]  # fmt: skip
        s = scope()
        if constant:
            g = ops.DynamicPartition(s, data, partitions, num_partitions=7)
            run(g.outputs[0], graph=s.graph)
        else:
            p = mg.Placeholder(s, mg.as_dtype(partitions.dtype))
            g = ops.DynamicPartition(s, data, p, num_partitions=7)
            run(g.outputs[0], {p: partitions}, graph=s.graph)

    kinds = [
        "too_big",
        "negative",
        "not_prefix",
        "longer",
        "int64",
        "float",
        "scalar_bad",
        "empty_bad_shape",
        "min_int",
    ]
    out += cases_from(
        A,
        "bad partitions",
        [(k, c) for k in kinds for c in (True, False)],
        bad_partition,
        expect="error",
    )

    def partition_message(constant):
        mg, ops = _mg(), _ops()
        s = scope()
        partitions = np.array([[0, 1, 2], [3, 4, 17]], np.int32)
        try:
            if constant:
                ops.DynamicPartition(s, np.zeros((2, 3)), partitions, num_partitions=7)
            else:
                p = mg.Placeholder(s, mg.int32)
                g = ops.DynamicPartition(s, np.zeros((2, 3)), p, num_partitions=7)
                run(g.outputs[0], {p: partitions}, graph=s.graph)
        except mg.InvalidArgumentError as e:
            must("partitions[1,2] = 17 is not in [0, 7)" in str(e), f"message: {e}")
            raise
        raise Wrong("accepted")

    out += cases_from(A, "partition message", [True, False], partition_message, expect="error")

    # -- bad stitches --------------------------------------------------------------------------
    def bad_stitch(args):
        mg, ops = _mg(), _ops()
        kind, constant = args
        indices, data = {
            "negative": ([np.array([0, -3], np.int32)], [np.zeros((2, 2))]),
            "shape": ([np.array([0, 1], np.int32)], [np.zeros((3, 2))]),
            "rows": ([np.array([0], np.int32), np.array([1], np.int32)],
                     [np.zeros((1, 2)), np.zeros((1, 3))]),
            "int64": ([np.array([0], np.int64)], [np.zeros((1,))]),
            "huge_index": ([np.array([2**31 - 1], np.int32)], [np.zeros((1, 4))]),
            "big_alloc": ([np.array([10**9], np.int32)], [np.zeros((1, 64))]),
            "lengths": ([np.array([0], np.int32)], [np.zeros((1,)), np.zeros((1,))]),
            "dtype_mix": ([np.array([0], np.int32), np.array([1], np.int32)],
                          [np.zeros((1,), np.float32), np.zeros((1,), np.float64)]),
        }[kind]  # fmt: skip
        s = scope()
        if constant:
            g = ops.DynamicStitch(s, indices, data)
            run(g, graph=s.graph)
        else:
            pi = [mg.Placeholder(s, mg.as_dtype(i.dtype)) for i in indices]
            pd = [mg.Placeholder(s, mg.as_dtype(d.dtype)) for d in data]
            g = ops.DynamicStitch(s, pi, pd)
            run(g, dict(zip(pi + pd, indices + data)), graph=s.graph)

    skinds = [
        "negative",
        "shape",
        "rows",
        "int64",
        "huge_index",
        "big_alloc",
        "lengths",
        "dtype_mix",
    ]
    out += cases_from(
        A,
        "bad stitch",
        [(k, c) for k in skinds for c in (True, False)],
        bad_stitch,
        expect=lambda v: "any" if v[0] == "big_alloc" else "error",
        timeout=60,
    )

    # -- embedding_lookup abuse ----------------------------------------------------------------
    def bad_embedding(kind):
        mg, ops = _mg(), _ops()
        s = scope()
        table = np.arange(26, dtype=np.float32).reshape(13, 2)
        mod = [mg.Const(s, table[k::3]) for k in range(3)]
        ids = mg.Placeholder(s, mg.int64, shape=[None])
        big = np.arange(40000, dtype=np.float32).reshape(40000, 1)
        build = {
            "id_too_big_mod": lambda: (ops.embedding_lookup(s, mod, ids), {ids: [13]}),
            "id_too_big_div": lambda: (ops.embedding_lookup(s, [mg.Const(s, table[:5]),
                                                                mg.Const(s, table[5:9]),
                                                                mg.Const(s, table[9:])], ids,
                                                            partition_strategy="div"),
                                       {ids: [13]}),
            "id_negative_mod": lambda: (ops.embedding_lookup(s, mod, ids), {ids: [-1]}),
            "id_negative_div": lambda: (ops.embedding_lookup(s, [mg.Const(s, table[:7]),
                                                                 mg.Const(s, table[7:])], ids,
                                                             partition_strategy="div"),
                                        {ids: [-1]}),
            "id_huge": lambda: (ops.embedding_lookup(s, mod, ids), {ids: [2**62]}),
            "id_min": lambda: (ops.embedding_lookup(s, mod, ids), {ids: [-(2**63)]}),
            "one_shard_bad": lambda: (ops.embedding_lookup(s, mg.Const(s, table), ids),
                                      {ids: [13]}),
            "ids_float": lambda: (ops.embedding_lookup(s, mod, [0.5]), None),
            "ids_uint8": lambda: (ops.embedding_lookup(s, mod, np.array([1], np.uint8)), None),
            "ids_bool": lambda: (ops.embedding_lookup(s, mod, [True]), None),
            "params_empty": lambda: (ops.embedding_lookup(s, [], [0]), None),
            "params_none": lambda: (ops.embedding_lookup(s, None, [0]), None),
            "params_str": lambda: (ops.embedding_lookup(s, "abc", [0]), None),
            "uneven_mod": lambda: (ops.embedding_lookup(s, [mg.Const(s, table[:4]),
                                                            mg.Const(s, table[4:])], [0]), None),
            "row_mismatch": lambda: (ops.embedding_lookup(s, [mg.Const(s, table[:7]),
                                                              mg.Const(s, np.zeros((6, 3),
                                                                                   np.float32))],
                                                          [0]), None),
            "dtype_mix": lambda: (ops.embedding_lookup(s, [mg.Const(s, table[:7]),
                                                           mg.Const(s, table[7:].astype(
                                                               np.float64))], [0]), None),
            "strategy_upper": lambda: (ops.embedding_lookup(s, mod, [0], "MOD"), None),
            "strategy_none": lambda: (ops.embedding_lookup(s, mod, [0], None), None),
            "strategy_one_shard": lambda: (ops.embedding_lookup(s, mod[0], [0], "nope"), None),
            "max_norm": lambda: (ops.embedding_lookup(s, mod, [0], max_norm=1.0), None),
            "scalar_shard": lambda: (ops.embedding_lookup(s, [mg.Const(s, 1.0),
                                                              mg.Const(s, 2.0)], [0]), None),
            "unknown_rows": lambda: (ops.embedding_lookup(s, [mg.Placeholder(s, mg.float32),
                                                              mg.Const(s, table)], [0]), None),
            "empty_table": lambda: (ops.embedding_lookup(s, [mg.Const(s, np.zeros((0, 2))),
                                                             mg.Const(s, np.zeros((0, 2)))],
                                                         ids), {ids: [0]}),
            "empty_ids": lambda: (ops.embedding_lookup(s, mod, np.zeros((0, 3), np.int32)),
                                  None),
            "scalar_id": lambda: (ops.embedding_lookup(s, mod, 12), None),
            "int16_total_large": lambda: (ops.embedding_lookup(
                s, [mg.Const(s, big[0::2]), mg.Const(s, big[1::2])],
                np.array([32767, 1, 0, 32766], np.int16)), None),
            "builder_multi": lambda: (ops.embedding_lookup(s, ops.DynamicPartition(
                s, table, [0] * 13, num_partitions=2), [0]), None),
            "shard_other_graph": lambda: (ops.embedding_lookup(s, [mg.Const(scope(), table)],
                                                               [0]), None),
        }[kind]  # fmt: skip
        g, feeds = build()
        got = run(g, feeds, graph=s.graph)
        if kind == "scalar_id":
            same(got, table[12], "scalar id")
        elif kind == "int16_total_large":
            same(got, big[[32767, 1, 0, 32766]], "int16 ids over a large table")

    ekinds = [
        "id_too_big_mod",
        "id_too_big_div",
        "id_negative_mod",
        "id_negative_div",
        "id_huge",
        "id_min",
        "one_shard_bad",
        "ids_float",
        "ids_uint8",
        "ids_bool",
        "params_empty",
        "params_none",
        "params_str",
        "uneven_mod",
        "row_mismatch",
        "dtype_mix",
        "strategy_upper",
        "strategy_none",
        "strategy_one_shard",
        "max_norm",
        "scalar_shard",
        "unknown_rows",
        "empty_table",
        "empty_ids",
        "scalar_id",
        "int16_total_large",
        "builder_multi",
        "shard_other_graph",
    ]
    eok = {"empty_ids", "scalar_id", "int16_total_large"}
    out += cases_from(
        A, "embedding abuse", ekinds, bad_embedding, expect=lambda v: "ok" if v in eok else "error"
    )

    def id_message(strategy):
        mg, ops = _mg(), _ops()
        s = scope()
        table = np.arange(26, dtype=np.float32).reshape(13, 2)
        if strategy == "mod":
            shards = [mg.Const(s, table[k::3]) for k in range(3)]
        else:
            shards = [mg.Const(s, table[:5]), mg.Const(s, table[5:9]), mg.Const(s, table[9:])]
        ids = mg.Placeholder(s, mg.int32, shape=[None, 2])
        g = ops.embedding_lookup(s, shards, ids, partition_strategy=strategy)
        try:
            run(g, {ids: [[0, 1], [13, 2]]}, graph=s.graph)
        except mg.InvalidArgumentError as e:
            must("indices[1,0] = 13 is not in [0, 13)" in str(e), f"message: {e}")
            raise

    out += cases_from(A, "id message", ["mod", "div"], id_message, expect="error")
    return out


def simgpu_cases() -> list[Case]:
    out: list[Case] = []
    A = "simgpu"
    out += cases_from(
        A,
        "partition on GPU",
        list(range(0, 70, 3)),
        lambda k: _partition_case(k, True),
        expect="ok",
        timeout=60,
    )
    out += cases_from(
        A, "stitch on GPU", list(range(0, 60, 3)), lambda k: _stitch_case(k, True), expect="ok"
    )
    out += cases_from(
        A,
        "embedding on GPU",
        list(range(0, 60, 3)),
        lambda k: _embedding_case(k, True),
        expect="ok",
    )

    def gpus(arg):
        from minigraph.testing import simulated_gpus  # noqa: PLC0415

        with simulated_gpus(arg) as devices:
            mg = _mg()
            s = scope()
            c = mg.Identity(s.with_device("/device:GPU:0"), [1.0])
            same(run(c), np.array([1.0], np.float32), "identity")
            del devices

    out += cases_from(
        A,
        "simulated_gpus(n)",
        [0, -1, 1.5, "2", None, 3, True],
        gpus,
        expect=lambda v: "ok" if v in (0, 3) and v is not True else "error",
    )

    def gpu_feeds(which):
        mg, ops = _mg(), _ops()
        from minigraph.testing import simulated_cupy, simulated_gpus  # noqa: PLC0415

        with simulated_gpus(2) as (cpu, g0, g1):
            s = scope()
            x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[3])
            y = ops.gather(s.with_device("/device:GPU:0"), x, [2, 0])
            host = np.array([1.0, 2.0, 3.0], np.float32)
            with simulated_cupy.cuda.Device(1):
                on1 = simulated_cupy.asarray(host)
            with simulated_cupy.cuda.Device(0):
                on0 = simulated_cupy.asarray(host)
                on0_f64 = simulated_cupy.asarray(host.astype(np.float64))
            value = {"gpu0": on0, "gpu1": on1, "host": host, "gpu0_f64": on0_f64,
                     "gpu0_list": [on0]}[which]  # fmt: skip
            got = run(y, {x: value})
            same(got, host[[2, 0]], "gathered")
            del cpu, g0, g1

    out += cases_from(
        A,
        "fed device array",
        ["gpu0", "gpu1", "host", "gpu0_f64", "gpu0_list"],
        gpu_feeds,
        expect=lambda v: "ok" if v in ("gpu0", "host", "gpu1") else "any",
    )

    def gpu_policy(where):
        ops = _ops()
        from minigraph.testing import simulated_gpus  # noqa: PLC0415

        with simulated_gpus(1):
            s = scope()
            dev = s.with_device(where)
            g = ops.gather(dev, [1.0, 2.0], [0, 5])
            got = run(g)
        if "GPU" in where:
            same(got, np.array([1.0, 0.0], np.float32), "GPU out-of-range policy (zeros)")
        else:
            raise Wrong(f"the CPU gave {got} for an out-of-range index")

    out += cases_from(
        A,
        "gather out of range",
        ["/device:GPU:0", "/device:CPU:0"],
        gpu_policy,
        expect=lambda v: "ok" if "GPU" in v else "error",
    )

    def const_from_device_array(which):
        mg = _mg()
        from minigraph.testing import simulated_cupy  # noqa: PLC0415

        arr = simulated_cupy.asarray(np.array([1, 2], np.int32))
        s = scope()
        if which == "const":
            mg.Const(s, arr)
        elif which == "literal":
            _ops().gather(s, arr, [0])
        elif which == "list":
            mg.Const(s, [arr, arr])

    out += cases_from(
        A,
        "device array as literal",
        ["const", "literal", "list"],
        const_from_device_array,
        expect="any",
    )
    return out
