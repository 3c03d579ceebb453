"""Mutations of the performance paths (issue 23, helper O2): the construction fast path for
Python scalar literals (minigraph/scope.py `_create_with_scalar_literals`, minigraph/graph.py
`add_after_consts`), GatherNd's one-coordinate path (ops/gather_ops.py) and the import-time
laziness of bfloat16. Each breaks one key behaviour;
a test of tests/test_perf_paths_*.py or tests/test_import.py must go red.

    python -m tests.hostile.mutations --only PF  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

BUILD = ("tests/test_perf_paths_construction.py",)
IMPORT = ("tests/test_import.py",)
SCOPE = "minigraph/scope.py"
GRAPH = "minigraph/graph.py"
GATHER = "ops/gather_ops.py"
ND = ("tests/test_perf_paths_gather.py",)

MUTATIONS = [
    Mutation("PF1", "a failed literal node restores the name counters it advanced", GRAPH,
             "        for key, count in counters:\n            if count is None:",
             "        for key, count in ():\n            if count is None:", BUILD),
    Mutation("PF2", "a failed literal node frees the names of its Consts", GRAPH,
             "            del self._by_name[op._name]\n            names.pop(op._name[start:], None)",
             "            del self._by_name[op._name]", BUILD),
    Mutation("PF3", "fast path: an explicit type attr gives a literal its dtype", SCOPE,
             "                        if hint is None and type_attr in attrs:\n                            hint = _as_dtype_or_none(attrs[type_attr])\n                # Keys",
             "                        pass\n                # Keys", BUILD),
    Mutation("PF4", "fast path: a literal takes the dtype of a literal before it", SCOPE,
             "                    converted.setdefault(type_attr, hit[0])",
             "                    pass", BUILD),
    Mutation("PF5", "fast path: a literal takes the dtype of a tensor of its type attr", SCOPE,
             "                        if out is not None:\n                            hint = out._dtype\n                            break",
             "                        if out is not None:\n                            break", BUILD),
    Mutation("PF7", "GatherNd depth 1: an index equal to the dim is out of range", GATHER,
             "            if not n or int(column.view(_UNSIGNED[np.dtype(column.dtype)]).max()) < dims[0]:",
             "            if not n or int(column.view(_UNSIGNED[np.dtype(column.dtype)]).max()) <= dims[0]:", ND),
    Mutation("PF8", "GatherNd depth 1: negative indices are out of range", GATHER,
             "            if not n or int(column.view(_UNSIGNED[np.dtype(column.dtype)]).max()) < dims[0]:",
             "            if not n or int(column.max()) < dims[0]:", ND),
    Mutation("PF9", "GatherNd with batch dims never writes its offsets into the indices", GATHER,
             "    flat, bad, mask = _flatten_index_rows(ctx, idx, dims, raises, writable=bd > 0)",
             "    flat, bad, mask = _flatten_index_rows(ctx, idx, dims, raises, writable=False)", ND),
    Mutation("PF6", "import ops does not load ml_dtypes (bfloat16 tables made on first use)", "ops/math.py",
             "    lambda: 88.0,\n)",
             "    lambda: 88.0,\n)\n_EAGER = dtypes.bfloat16.np_dtype", IMPORT),
]  # fmt: skip
