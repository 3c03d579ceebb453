"""Mutations for issue 24, section 3 (the hostile review's findings) and write_graph's
permissions: each breaks one fix, or one lock or boundary the suite did not guard, and names
the tests that must go red. Run them with the table's runner:

    python -c "import sys; sys.path.insert(0, 'tests'); from hostile.mutations import run; \\
        from hostile.mutations_hostile3 import MUTATIONS; run(MUTATIONS, 600)"
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

FORK = ("tests/test_hostile3_fork.py",)
FEEDS = ("tests/test_hostile3_feeds.py",)
FILES = ("tests/test_hostile3_graph_files.py",)
PLANS = ("tests/test_hostile3_plans.py",)
CLUSTER = ("tests/test_hostile3_cluster.py",)
CHECKOUT = ("tests/test_hostile3_checkout.py",)

MUTATIONS = [
    # -- fork -------------------------------------------------------------------------------
    Mutation("H3F1", "fork: a child's thread pools get new executors",
             "minigraph/session.py", "            self._executor = self._new_executor()",
             "            pass", FORK),
    Mutation("H3F2", "fork: the codegen lock is made anew in the child",
             "minigraph/plan.py", "    _codegen_lock = threading.Lock()\n    me = threading.get_ident()",
             "    me = threading.get_ident()", FORK),
    Mutation("H3F3", "fork: a collection pause of a vanished thread ends in the child",
             "minigraph/plan.py", "    if inherited:  # a vanished thread would have turned collections back on",
             "    if False:", FORK),
    Mutation("H3F4", "fork: buffer pools get new locks in the child",
             "minigraph/memory.py", "        pool._lock = threading.Lock()", "        pass", FORK),
    Mutation("H3F5", "fork: runs of vanished threads are not in flight in the child",
             "minigraph/session.py", "        session._running.clear()", "        pass", FORK),
    # -- locks and boundaries the suite did not guard ----------------------------------------
    Mutation("H3L1", "the buffer pool's lock in empty()",
             "minigraph/memory.py", "        with self._lock:\n            self._tick += 1",
             "        if True:\n            self._tick += 1", PLANS),
    Mutation("H3L2", "the codegen lock",
             "minigraph/plan.py", "    with _codegen_lock:\n        if plan.code is None and not plan.interpret_only:",
             "    if True:\n        if plan.code is None and not plan.interpret_only:", PLANS),
    Mutation("H3B1", "GraphDef int_val: one past the top of the range wraps (uint8 256)",
             "minigraph/graph_def.py", "    if wide.min() < low or wide.max() > high:",
             "    if wide.min() < low or wide.max() > high + 1:", FILES),
    Mutation("H3B2", "GraphDef int_val: one past the bottom of the range wraps (int8 -129)",
             "minigraph/graph_def.py", "    if wide.min() < low or wide.max() > high:",
             "    if wide.min() < low - 1 or wide.max() > high:", FILES),
    Mutation("H3B3", "integer feeds: INT32_MIN itself is in range",
             "minigraph/session.py", "            if int(flat[i]) >= info.min:",
             "            if int(flat[i]) > info.min:", FEEDS),
    # -- feeds ------------------------------------------------------------------------------
    Mutation("H3V1", "feeds: int64 -> float64 (numpy's 'safe') is checked for exactness",
             "minigraph/session.py", "        i = _first_inexact(distinct, np_target)",
             "        i = None", FEEDS),
    Mutation("H3V2", "feeds: a broadcast feed is checked on its distinct values",
             "minigraph/session.py", "    if all(s or n <= 1 for s, n in zip(strides, shape)):",
             "    if True:", FEEDS),
    Mutation("H3V3", "feeds: a copy past the memory available is refused first",
             "minigraph/session.py", "    if available is not None and nbytes > available:",
             "    if False:", FEEDS),
    Mutation("H3V4", "feeds: a fetch passing a fed array through is copied within the budget",
             "minigraph/session.py", "            results[i] = _materialise(out, value, value, context=_PASSED_THROUGH)",
             "            results[i] = value.copy()", FEEDS),
    # -- graph files ------------------------------------------------------------------------
    Mutation("H3G1", "import budget: checked before anything is allocated",
             "minigraph/graph_def.py", "    budget.remaining = _check_import_size(nodes)",
             "    budget.remaining = None", FILES),
    Mutation("H3G2", "import budget: byte-identical values count once",
             "minigraph/graph_def.py", "        if sum(map(len, entries)) <= _SHARED_ATTRS_MAX:  # decoded once and shared",
             "        if False:", FILES),
    Mutation("H3G3", "import budget: strings count their pointers and bytes objects",
             "minigraph/graph_def.py", "        return count * _STRING_ELEMENT_BYTES + given * _BYTES_OBJECT_BYTES + proto.ByteSize()",
             "        return count * 8", FILES),
    Mutation("H3G4", "import budget: large entries are charged as they are built",
             "minigraph/graph_def.py", "                budget.charging = len(data) > _PREPASS_ENTRY_MAX",
             "                budget.charging = False", FILES),
    Mutation("H3G5", "read_graph: a stream's first byte must start a GraphDef (/dev/zero)",
             "minigraph/graph_def.py", "        if not chunks and chunk[0] < 8:",
             "        if False:", FILES),
    Mutation("H3G6", "read_graph: a regular file's size is checked before reading",
             "minigraph/graph_def.py", "        size = info.st_size\n        if size > MAX_GRAPH_FILE_BYTES:",
             "        size = info.st_size\n        if False:", FILES),
    Mutation("H3G7", "write_graph: only regular files are replaced",
             "minigraph/graph_def.py", "    if info is not None and not stat.S_ISREG(info.st_mode):",
             "    if info is not None and stat.S_ISDIR(info.st_mode):", FILES),
    Mutation("H3G8", "write_graph: files get the umask's permissions, not mkstemp's 0600",
             "minigraph/graph_def.py", "            os.fchmod(f.fileno(), mode)", "            pass", FILES),
    Mutation("H3G9", "write_graph: a symlink is written through",
             "minigraph/graph_def.py", "    target = os.path.realpath(path)", "    target = path", FILES),
    Mutation("H3N1", ".npy feeds: the declared size is checked against the file",
             "minigraph/graph_cli.py", "            if held < nbytes:", "            if False:", FILES),
    # -- plans ------------------------------------------------------------------------------
    Mutation("H3P1", "huge plans: a failed compile falls back to the interpreter",
             "minigraph/plan.py", "                except (MemoryError, RecursionError):\n                    plan.interpret_only = True",
             "                except ZeroDivisionError:\n                    plan.interpret_only = True", PLANS),
    Mutation("H3P2", "huge plans: plans over MAX_GENERATED_STEPS are never compiled",
             "minigraph/plan.py", "            if len(plan.steps) > MAX_GENERATED_STEPS:",
             "            if False:", PLANS),
    # -- the cluster ------------------------------------------------------------------------
    Mutation("H3C1", "connect: the scheduler's handshake is asked for within the timeout",
             "minigraph/distributed/cluster.py", "    _probe(target, timeout)\n", "", CLUSTER),
    Mutation("H3C2", "connect: a Client that failed to start is closed where it failed",
             "minigraph/distributed/cluster.py", "            _close_failed(e)\n", "", CLUSTER),
    Mutation("H3C3", "close: runs waiting on the cluster are ended first",
             "minigraph/distributed/runtime.py", "        self._stop.set()  # first: a registration waiting holds the lock taken next",
             "        pass", CLUSTER),
    Mutation("H3C4", "close: a run's wait on its futures notices the close",
             "minigraph/distributed/runtime.py", "                if self._stop.is_set():\n                    raise _Closed()\n                self._check_generations(generations)",
             "                self._check_generations(generations)", CLUSTER),
    # -- which checkout the environment points at --------------------------------------------
    Mutation("H3K1", "the shadowing warning: a library beside the running minigraph is its own",
             "minigraph/libraries.py", "    if running is not None and _path_entry(loaded) == _path_entry(running):",
             "    if False:", CHECKOUT),
]  # fmt: skip
