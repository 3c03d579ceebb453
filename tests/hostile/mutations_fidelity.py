"""Mutations of issue 24's fidelity and new-user fixes (sections 1 and 2): literal conversion
(minigraph/dtypes.py), gather's batch_dims, embedding_lookup's static shape, name scope,
run-time row counts and TF-op checks (ops/embedding.py, ops/checks.py), op libraries loaded
for graph files (minigraph/libraries.py, graph_def.py), pictures of large graphs
(minigraph/dot.py) and the command line. Each breaks one key behaviour; a test must go red.

    python -m tests.hostile.mutations --only FA --only FC --only FCLI --only FD --only FE --only FG --only FL  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

LITERALS = ("tests/test_fidelity_literals.py", "tests/test_dtypes.py")
GATHER = ("tests/test_fidelity_gather.py",)
EMB = ("tests/test_fidelity_embedding.py", "tests/test_embedding.py")
CHECKS = ("tests/test_fidelity_checks.py",)
FILES = ("tests/test_fidelity_graph_files.py",)
DOT = ("tests/test_fidelity_dot.py", "tests/test_cli_graph.py")
CLI = ("tests/test_fidelity_cli.py",)
D, E, C = "minigraph/dtypes.py", "ops/embedding.py", "ops/checks.py"

MUTATIONS = [
    # -- literal conversion ------------------------------------------------------------------
    Mutation("FL1", "literal: a numpy array narrows only when every value fits", D,
             "                if int(flat[high]) > info.max:\n                    bad = high",
             "                if False:\n                    bad = high", LITERALS),
    Mutation("FL2", "literal: integers become floats only exactly (2**53 + 1)", D,
             "changed = (real.astype(array.dtype).reshape(-1) != flat) | ~np.isfinite(",
             "changed = ~np.isfinite(", LITERALS),
    Mutation("FL3", "literal: an integer beyond a float's range is refused (-inf converts back)", D,
             "changed = (real.astype(array.dtype).reshape(-1) != flat) | ~np.isfinite(\n                    real.reshape(-1)\n                )",
             "changed = real.astype(array.dtype).reshape(-1) != flat", LITERALS),
    Mutation("FL4", "literal: a float that overflows a narrower float is refused", D,
             "changed = np.isfinite(flat.real) & ~np.isfinite(out.real)",
             "changed = np.zeros(flat.shape, bool)", LITERALS),
    Mutation("FL5", "literal: lossless narrowings are accepted (tf.constant)", D,
             "    if not is_python:\n        return _convert_numpy(array, source, target)",
             "    if not is_python:\n        if not np.can_cast(array.dtype, target.np_dtype, casting=\"safe\"):\n            raise InvalidArgumentError(\"cannot safely cast\")\n        return array.astype(target.np_dtype)",
             LITERALS),
    # -- gather ------------------------------------------------------------------------------
    Mutation("FG1", "gather: batch_dims=None means 0", "ops/gather_ops.py",
             "    if batch_dims is None:\n        return 0", "    if False:\n        return 0", GATHER),
    Mutation("FG2", "gather: a negative batch_dims past rank(indices) names batch_dims",
             "ops/gather_ops.py", "            if batch_dims < -rank:", "            if False:", GATHER),
    # -- embedding_lookup --------------------------------------------------------------------
    Mutation("FE1", "embedding_lookup: the static shape is ids.shape + row shape", E,
             "        if result.shape.merge_with(target) != result.shape:", "        if False:", EMB),
    Mutation("FE2", "embedding_lookup: the scope's op name is the name scope", E,
             'sub = scope.new_sub_scope(name or scope.op_name or "embedding_lookup")',
             'sub = scope.new_sub_scope(name or "embedding_lookup")', EMB),
    Mutation("FE3", "embedding_lookup: ids at or past the row count are refused", E,
             "            ok = LogicalAnd(check, ok, Less(check, high, np.array(total, ids.dtype.np_dtype)))",
             "            ok = ok", EMB),
    Mutation("FE4", "embedding_lookup: negative ids are refused", E,
             "    ok = GreaterEqual(check, low, np.array(0, ids.dtype.np_dtype)).output",
             "    ok = GreaterEqual(check, low, np.array(np.iinfo(ids.dtype.np_dtype).min, ids.dtype.np_dtype)).output",
             EMB),
    Mutation("FE5", "embedding_lookup: run-time row counts are checked against the strategy", E,
             "    ok = All(check, Equal(check, per_shard, expected), 0)",
             "    ok = All(check, Equal(check, per_shard, per_shard), 0)", EMB),
    Mutation("FE6", "embedding_lookup: the div formula over run-time row counts", E,
             "            FloorDiv(checked, flat, AddV2(checked, per_t, np.int64(1))),",
             "            FloorDiv(checked, flat, AddV2(checked, per_t, np.int64(2))),", EMB),
    Mutation("FE7", "embedding_lookup: a shard's run-time row count is read where it lives", E,
             '        at = scope.with_device("").colocate_with(_home(shard))\n        if isinstance',
             "        at = scope\n        if isinstance", EMB),
    Mutation("FE8", "embedding_lookup: known row counts no total fits fail at construction", E,
             "            if not 0 <= a - b <= 1:", "            if False:", EMB),
    Mutation("FE9", "embedding_lookup: one shard's gather runs after the id check", E,
             '        where = sub.with_control_dependencies(check).with_device("").colocate_with(_home(shards[0]))',
             '        where = sub.with_device("").colocate_with(_home(shards[0]))', EMB),
    Mutation("FE10", "embedding_lookup: the id check uses TF's ops only (no ERROR policy)", E,
             "        return gather(where, shards[0], ids_t, 0).output",
             '        return gather(where, shards[0], ids_t, 0, bad_indices_policy="ERROR").output',
             EMB),
    Mutation("FE11", "embedding_lookup: a construction error leaves the graph as it was", E,
             "    with scope.graph.transaction():  # an error leaves the graph as it was\n        return _lookup(",
             "    if True:\n        return _lookup(", EMB),
    # -- Assert and EnsureShape --------------------------------------------------------------
    Mutation("FC1", "Assert: a false condition raises", C,
             "    if bool(condition.reshape(-1)[0]):\n        return ()",
             "    if True:\n        return ()", CHECKS),
    Mutation("FC2", "Assert: TF's summary closes every bracket it opened", C,
             "            if position[0] < limit or opened:", "            if position[0] < limit:",
             CHECKS),
    Mutation("FC3", "Assert: floats in the shortest of 6 and 9 digits (TF's FloatToBuffer)", C,
             "    if narrow(float(text)) != narrow(value):", "    if True:", CHECKS),
    Mutation("FC4", "EnsureShape: an incompatible run-time shape raises", C,
             "    if dims is not None and (", "    if False and (", CHECKS),
    # -- op libraries for graph files --------------------------------------------------------
    Mutation("FA1", "import_graph_def loads the announced op libraries for unknown ops",
             "minigraph/graph_def.py",
             "        if not missing or attempt or not libraries.load_announced():",
             "        if True:", FILES),
    Mutation("FA2", "a library that fails to load is named in the error", "minigraph/libraries.py",
             '        text += " Not loaded: " + "; ".join(state.failed) + "."', "        pass", FILES),
    # -- pictures ------------------------------------------------------------------------------
    Mutation("FD1", "dot: constants several ops read are drawn once, unwired", "minigraph/dot.py",
             "    return {c: len(t) for c, t in consumers.items() if len(t) >= _SHARED_CONSUMERS}",
             "    return {}", DOT),
    Mutation("FD2", "dot: edge labels become tooltips past a size", "minigraph/dot.py",
             "    labelled = len(drawn) <= _LABELLED_EDGES", "    labelled = True", DOT),
    Mutation("FD3", "dot: name scopes are clusters", "minigraph/dot.py",
             "subgraph {_quote('cluster_' + child)} {{", "subgraph {_quote('group_' + child)} {{",
             DOT),
    # -- the command line ----------------------------------------------------------------------
    Mutation("FCLI1", "CLI: --load after the command", "minigraph/__main__.py",
             "        for spec in [*args.load, *args.load_after]:", "        for spec in args.load:",
             CLI),
    Mutation("FCLI2", "every missing placeholder named in one error", "minigraph/plan.py",
             "        others = f\"; also not fed: {', '.join(described[1:])}\" if len(unfed) > 1 else \"\"",
             '        others = ""', CLI),
    Mutation("FCLI3", "CLI: a malformed --feed says what is wrong", "minigraph/graph_cli.py",
             '            f"({_not_literal(text, e)})"', '            f"({e})"', CLI),
    Mutation("FCLI4", "CLI: --no-entry-points also keeps graph imports from loading them",
             "minigraph/__main__.py",
             "    autoload = set_autoload(autoload_enabled() and not args.no_entry_points)",
             "    autoload = set_autoload(autoload_enabled())", FILES),
]  # fmt: skip
