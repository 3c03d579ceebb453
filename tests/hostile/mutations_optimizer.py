"""Mutations of the graph optimizer (issue 23): minigraph/optimizer.py, the library's rewrites
(ops/rewrites.py), input forwarding, and OpDef.is_stateful. Each breaks one key behaviour; a
test of tests/test_optimizer_*.py must go red.

    python -m tests.hostile.mutations_optimizer            # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

import sys

from hostile.mutations import Mutation

PASSES = ("tests/test_optimizer_passes.py",)
SEMANTICS = ("tests/test_optimizer_semantics.py",)
REWRITES = ("tests/test_optimizer_rewrites.py",)
FORWARDING = ("tests/test_optimizer_forwarding.py",)
CONFIG = ("tests/test_optimizer_config.py",)
FUSED = ("tests/test_optimizer_fused_lookup.py",)
HOSTILE = ("tests/test_optimizer_hostile.py",)
OPT = "minigraph/optimizer.py"
LIB = "ops/rewrites.py"
EMB = "ops/embedding.py"

MUTATIONS = [
    # -- constant folding --------------------------------------------------------------------
    Mutation("OPT1", "folding: stateful, fetched and fed nodes never fold", OPT,
             "            if graph.replaceable(op):\n                _fold(",
             "            if True:\n                _fold(", PASSES + SEMANTICS),
    Mutation("OPT2", "folding: only trusted kernels run at compile time", OPT,
             "        return  # a user kernel may have effects the optimizer cannot see",
             "        pass", PASSES),
    Mutation("OPT3", "folding: a kernel error leaves the node for the run to report", OPT,
             '        report.deferred.append((op._name, f"its kernel raised {describe_exception(e)}"))\n        return',
             "        raise", PASSES + SEMANTICS),
    Mutation("OPT4", "folding: the size cap, judged from static shapes", OPT,
             "        if size > cap:\n            return f\"its output would take",
             "        if False:\n            return f\"its output would take", PASSES),
    Mutation("OPT5", "folding: constants of host-memory outputs live on the host", OPT,
             "        device = graph.host if j in host_outputs else None",
             "        device = None", PASSES),
    # -- common subgraph elimination ---------------------------------------------------------
    Mutation("OPT6", "CSE: float attrs compared by their bits (0.0 is not -0.0)", OPT,
             '        return ("float", value.hex())', '        return ("float", value)', PASSES),
    Mutation("OPT7", "CSE: control inputs are part of a node's identity", OPT,
             "        ctrl_key, device_of[op],",
             "        None, device_of[op],", PASSES),
    Mutation("OPT8", "CSE: stateful nodes are never merged", OPT,
             "        if not op._outputs or op._op_def.is_stateful:\n            continue\n        ins = op._inputs",
             "        if not op._outputs:\n            continue\n        ins = op._inputs", PASSES + SEMANTICS),
    # -- dependency optimization -------------------------------------------------------------
    Mutation("OPT9", "Identity: one that crosses devices stays", OPT,
             "    if any(device is not here for device in rw.reader_devices(rw.op.outputs[0])):",
             "    if False:", PASSES),
    Mutation("OPT10", "replacing a node: its control dependents wait for what it waited for", OPT,
             "        deps.extend(own_ctrl)\n", "", PASSES + SEMANTICS),
    Mutation("OPT11", "replacing a node: its consumers gain its control inputs", OPT,
             "                    self.extra_ctrl.setdefault(consumer, []).extend(own_ctrl)",
             "                    pass", PASSES),
    Mutation("OPT12", "NoOps stay where removing them adds edges", OPT,
             "        if n_in * n_out > n_in + n_out:", "        if False:", PASSES),
    # -- what never changes ------------------------------------------------------------------
    Mutation("OPT13", "fetched nodes are never replaced", OPT,
             "        return not (op._op_def.is_stateful or self.is_protected(op) or self.has_fed_output(op))",
             "        return not (op._op_def.is_stateful or self.has_fed_output(op))",
             PASSES + SEMANTICS),
    Mutation("OPT14", "a fed tensor stays the fed tensor when its producer is rebuilt", OPT,
             "                if old not in fed:  # a fed tensor stays the fed tensor",
             "                if True:", SEMANTICS + PASSES),
    Mutation("OPT15", "a node a rewrite no longer needs still runs (its errors stay)", OPT,
             '            or (op not in removable and op._type != "Const")',
             "            or False", SEMANTICS),
    Mutation("OPT16", "unchecked user kernels promise no static shape", OPT,
             "        if output in self.fed or self.checked_shapes:", "        if True:", REWRITES),
    # -- the library's rewrites --------------------------------------------------------------
    Mutation("OPT17", "x + 0.0 is not exact for floats: only x + -0.0", LIB,
             "        found = _neutral(rw, a, b, lambda v: _all_zero(v, negative=True))",
             "        found = _neutral(rw, a, b, lambda v: _all_zero(v, negative=False))", REWRITES),
    Mutation("OPT18", "x - -0.0 is not exact for floats: only x - 0.0", LIB,
             "    return _neutral(rw, x, y, lambda v: _all_zero(v, negative=False))",
             "    return _neutral(rw, x, y, lambda v: not v.any())", REWRITES),
    Mutation("OPT19", "complex x * 1 is not exact", LIB,
             '    if value.dtype.kind not in "iuf" and value.dtype.name != "bfloat16":',
             '    if value.dtype.kind not in "iufc" and value.dtype.name != "bfloat16":', REWRITES),
    Mutation("OPT20", "broadcasting the constant must keep x's shape", LIB,
             "    return all(c == 1 or (d is not None and c == d) for c, d in zip(constant.shape, dims))",
             "    return True", REWRITES),
    Mutation("OPT21", "Shape of a dim int32 cannot hold keeps its kernel error", LIB,
             '    if dims is None or (out_type.name == "int32" and any(d > _INT32_MAX for d in dims)):',
             "    if dims is None:", REWRITES),
    Mutation("OPT22", "gather of gather: inner indices in range of params", LIB,
             "        n is None or int(inner_indices.min()) < 0 or int(inner_indices.max()) >= n",
             "        n is None or int(inner_indices.min()) < 0 or int(inner_indices.max()) > n",
             PASSES),
    Mutation("OPT23", "gather of gather: outer indices in range of the inner result", LIB,
             "    if outer_indices.size and (int(outer_indices.min()) < 0 or int(outer_indices.max()) >= m):",
             "    if outer_indices.size and (int(outer_indices.min()) < 0 or int(outer_indices.max()) > m):",
             PASSES),
    Mutation("OPT24", "gather of gather: a scalar inner index is not composable", LIB,
             "    if inner_indices.ndim < 1:", "    if False:", PASSES),
    Mutation("OPT25", "gather of gather: both gathers on one device", LIB,
             "    if inner is None or rw.device_of(inner_op) is not rw.device:",
             "    if inner is None:", PASSES),
    Mutation("OPT26", "gather of gather: the composed indices", LIB,
             "    composed = np.take(inner_indices, outer_indices.astype(np.int64), axis=0)",
             "    composed = inner_indices[: len(outer_indices)]", PASSES + SEMANTICS),
    # -- input forwarding --------------------------------------------------------------------
    Mutation("OPT27", "forwarding: fed values are never overwritten", OPT,
             "    unsafe = [s < n_feeds or s in kept for s in range(n)]",
             "    unsafe = [s in kept for s in range(n)]",
             FORWARDING),
    Mutation("OPT28", "forwarding: a value read later is never overwritten", OPT,
             "                elif latest[root] > k:", "                elif False:", FORWARDING),
    Mutation("OPT29", "forwarding: a trusted pass-through is guarded", OPT,
             "            step.call = _FreshOutputs(step.call, tuple(guards))",
             "            pass", FORWARDING),
    Mutation("OPT30", "forwarding: with inter-op threads, one reader only", OPT,
             "                    if uses[s] != 1 or loose[root]:", "                    if False:",
             FORWARDING),
    Mutation("OPT31", "forwarding: untrusted kernels' outputs may be views", OPT,
             "        if not step.trusted:  # may return views of any input\n            for o in step.outs:\n                for s in ins:\n                    union(o, s)\n            continue",
             "        if not step.trusted:  # may return views of any input\n            continue",
             FORWARDING),
    # -- the fused sharded lookup (ops/embedding.py) -----------------------------------------
    Mutation("OPT34", "fused lookup: its errors name the node it stands for", EMB,
             "            e.fused_origin = (name, op_type, source)", "            pass", FUSED),
    Mutation("OPT35", "fused lookup: only shards gathered on the stitch's device", EMB,
             "    if not _constant_is(rw, axis, 0) or rw.device_of(op) is not rw.device:",
             "    if not _constant_is(rw, axis, 0):", FUSED),
    Mutation("OPT36", "fused lookup: each block's ids checked against their shard", EMB,
             "                if bool((i >= b).any()):", "                if False:", FUSED),
    Mutation("OPT37", "fused lookup: partitions checked before rows move", EMB,
             "            if int(p.max()) >= shards:", "            if False:", FUSED),
    Mutation("OPT38", "fused lookup: the scratch's rows go back to their positions", EMB,
             "                    g[at] = order[filled : filled + c]",
             "                    g[at] = order[:c]", FUSED),
    Mutation("OPT39", "fused lookup: each shard's offset in the one view", EMB,
             "                np.add(ids[lo:hi], b, out=g)", "                np.copyto(g, ids[lo:hi])",
             FUSED),
    Mutation("OPT40", "a fetched node is replaced only by a new node of its name", OPT,
             "            if fetched and not _stands_in(op, outputs, rw.created):",
             "            if False:", REWRITES),
    # -- shape rewrites (ops/rewrites.py) ----------------------------------------------------
    Mutation("OPT41", "flatten: -1 only where x's other dims hold the constants' elements", LIB,
             "    if None in others or rest == 0 or math.prod(others) != rest:",
             "    if None in others or rest == 0:", REWRITES),
    Mutation("OPT42", "flatten: an int32 Shape stays for its overflow error", LIB,
             '    if shape_op.get_attr("out_type").name == "int64" and rw.can_absorb(shape_op):',
             "    if rw.can_absorb(shape_op):", REWRITES),
    Mutation("OPT43", "ZerosLike/OnesLike fold only up to max_constant_bytes", LIB,
             "    if math.prod(shape.dims) * dtype.np_dtype.itemsize > rw.max_constant_bytes:",
             "    if False:", REWRITES),
    # -- hostile review (H9): tests/test_optimizer_hostile.py ---------------------------------
    Mutation("OPT44", "fused lookup: every shard's rank is checked, not only the first's", EMB,
             "        if shard.ndim < 1 or shard.shape[1:] != row_shape or shard.dtype != first.dtype:",
             "        if shard.shape[1:] != row_shape or shard.dtype != first.dtype:", HOSTILE),
    Mutation("OPT45", "CSE: a bucket maps full keys to nodes (linear in distinct constants)", OPT,
             "        other = bucket.get(key)\n        if other is None:",
             "        other = next((o for k, o in list(bucket.items()) if k == key), None)\n        if other is None:",
             HOSTILE),
    Mutation("OPT46", "a fetch that may be a constant the optimizer made reads a copy", OPT,
             "    if graph.made_constants:\n        _copy_exposed_constants(graph)",
             "    if False:\n        _copy_exposed_constants(graph)", HOSTILE),
    Mutation("OPT47", "copies of made constants: a trusted kernel may pass an input through", OPT,
             "                not trusted\n                or any(",
             "                not trusted\n                and any(", HOSTILE),
    Mutation("OPT48", "ZerosLike/OnesLike become constants for numbers and bools only", LIB,
             '    if not shape.is_fully_defined() or dtype.np_dtype.kind not in "biufc":',
             '    if not shape.is_fully_defined() or dtype.is_string:', HOSTILE),
    Mutation("OPT49", "copies of made constants read on a CPU from another device: on the host", OPT,
             "        elif any(d is not None and d.device_type == \"CPU\" for d in readers):",
             "        elif False:", HOSTILE),
    Mutation("OPT50", "copies of made constants: compared with the shape they replaced", OPT,
             "    return graph.replaced_shape.get(a, a._shape)._dims == b._shape._dims",
             "    return a._shape._dims == b._shape._dims", HOSTILE),
    Mutation("OPT51", "copies of made constants: not for a node that computes on them", OPT,
             "    return graph.replaced_shape.get(a, a._shape)._dims == b._shape._dims",
             "    return graph.replaced_shape.get(a, a._shape).is_compatible_with(b._shape)", HOSTILE),
    # -- OpDef.is_stateful -------------------------------------------------------------------
    Mutation("OPT32", "is_stateful is part of an op's definition", "minigraph/registry.py",
             "    if old.is_stateful != new.is_stateful:", "    if False:", CONFIG),
    Mutation("OPT33", "SessionConfig resolves and checks its optimizer", "minigraph/session.py",
             '        object.__setattr__(self, "optimizer", resolve_config(self.optimizer))\n', "",
             CONFIG),
]  # fmt: skip


def main() -> int:
    from hostile.mutations import run

    results = run(MUTATIONS, 600)
    survived = [m for m, outcome, _ in results if outcome != "KILLED"]
    print(f"\n{len(results) - len(survived)} of {len(results)} mutations killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
