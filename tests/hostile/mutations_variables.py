"""Mutations of variables (issue 22): the resource store and its locks (minigraph/resources.py),
the variable ops (ops/resource_variables.py), `Variable` (minigraph/variables.py), the placer's
resource rule, the Saver, freezing, and the gather/embedding routes to ResourceGather. Each
breaks one key behaviour; a test of tests/test_variables_*.py, test_saver.py or test_freeze.py
must go red.

    python -m tests.hostile.mutations --only VAR  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

OPS_T = ("tests/test_variables_ops.py",)
API = ("tests/test_variables_api.py",)
REFS = ("tests/test_variables_refs.py",)
THREADS = ("tests/test_variables_threads.py",)
TRUST = ("tests/test_variables_trust.py",)
SAVER = ("tests/test_saver.py",)
FREEZE = ("tests/test_freeze.py",)
RES = "minigraph/resources.py"
RV = "ops/resource_variables.py"
VARS = "minigraph/variables.py"

MUTATIONS = [
    # -- state, copy-on-write, locks ---------------------------------------------------------
    Mutation("VAR1", "copy-on-write: an update copies a value a reader holds", RES,
             "        if self.shared:\n            with self._cow:\n                if self.shared:",
             "        if False:\n            with self._cow:\n                if self.shared:",
             API + OPS_T),
    Mutation("VAR2", "a read is a read-only view: no kernel writes into a variable", RES,
             "            value = value.view()\n            value.flags.writeable = False",
             "            pass", TRUST),
    Mutation("VAR3", "Session.close drops the variables", "minigraph/session.py",
             "        self._resources.clear()  # every variable's value goes\n", "", API),
    Mutation("VAR4", "assigns and scatters hold the variable alone", RV,
             "        var = _variable(ctx, resource, dtype)\n        with var.lock.exclusive():\n            current = var.value",
             "        var = _variable(ctx, resource, dtype)\n        with var.lock.shared():\n            current = var.value",
             THREADS),
    Mutation("VAR5", "use_locking=True holds the variables alone", RV,
             'with lock_all(variables, exclusive=attrs["use_locking"]):',
             "with lock_all(variables, exclusive=False):", THREADS),
    Mutation("VAR6", "several variables are locked in one order", RES,
             "    unique = sorted({id(v): v for v in variables}.values(), key=id)",
             "    unique = list({id(v): v for v in variables}.values())", THREADS),
    Mutation("VAR7", "a variable without a value is a FailedPreconditionError naming it", RV,
             "    if var is None or var.value is None:\n        raise _uninitialized(ctx, handle)",
             "    if var is None:\n        raise _uninitialized(ctx, handle)", API),
    Mutation("VAR8", "sparse updates switch dense reads to copies", RV,
             "            var.copy_on_read = True  # dense reads copy from now on: rows update in place",
             "            pass", OPS_T),
    # -- construction and run-time checks -----------------------------------------------------
    Mutation("VAR9", "a read or update of the wrong dtype is refused at construction", RV,
             "    if data is not None and dtype is not None and data.dtype is not dtype:",
             "    if False:", OPS_T + API),
    Mutation("VAR10", "an assign of an incompatible shape is refused at construction", RV,
             "    if data is not None and not data.shape.is_compatible_with(value):",
             "    if False:", API),
    Mutation("VAR11", "an assign of a shape the variable cannot have is refused at run time", RV,
             "    if not handle.shape.is_compatible_with(value.shape):", "    if False:", API),
    Mutation("VAR12", "gathers and scatters check their indices (TF's error)", RV,
             "    bad = _first_bad(xp, flat, n)\n    if bad is not None:\n        value = int(_host(xp, flat[bad]))",
             "    bad = None\n    if bad is not None:\n        value = int(_host(xp, flat[bad]))", OPS_T),
    Mutation("VAR13", "sparse apply ops check their indices (TF's error)", RV,
             "    bad = _first_bad(xp, flat, var.shape[0])", "    bad = None", OPS_T),
    Mutation("VAR14", "node specs of ops reading a handle are not shared between variables",
             "minigraph/graph.py",
             "                return None  # its shape function reads the handle's producer (handle data)",
             "                pass", API + REFS),
    # -- the update rules ------------------------------------------------------------------------
    Mutation("VAR15", "repeated indices of sparse updates apply in order", RV,
             "    return _Segments(xp, flat)",
             "    return None", OPS_T + REFS),
    Mutation("VAR16", "the segmented scan adds what came before", RV,
             "            b = xp.where(ok, b + b[source], b)", "            b = xp.where(ok, b, b)",
             OPS_T + REFS),
    Mutation("VAR17", "scatter adds sum repeated indices", RV,
             "                flat, rows = seg.unique, _segment_sums(xp, seg, rows[seg.order])",
             "                pass", OPS_T),
    Mutation("VAR18", "scatter updates keep the last value of a repeated index", RV,
             "rows[seg.order[seg.ends]]", "rows[seg.order[seg.ends * 0]]", OPS_T),
    Mutation("VAR19", "Adam's first moment decays by 1 - beta1", RV,
             "    xp.multiply(t, 1 - beta1, out=t)", "    xp.multiply(t, beta1, out=t)", REFS),
    Mutation("VAR20", "Momentum's Nesterov step", RV,
             '    if attrs["use_nesterov"]:  # var -= grad * lr + accum * momentum * lr',
             "    if False:", REFS),
    Mutation("VAR21", "Adagrad's update_slots=False leaves the accumulator", RV,
             '    if attrs["update_slots"]:  # accum += grad.square()', "    if True:", REFS),
    Mutation("VAR22", "sparse Adagrad's accumulator after each repeat", RV,
             "        a = xp.add(a, _scan(xp, seg, xp.multiply(g, g))[1])",
             "        a = xp.add(a, xp.multiply(g, g))", OPS_T + REFS),
    # -- Variable -------------------------------------------------------------------------------
    Mutation("VAR23", "a fresh read takes the consuming scope's control dependencies", VARS,
             "            self._graph, scope.name_scope, op_name, None, scope.control_dependencies,",
             "            self._graph, scope.name_scope, op_name, None, (),", API),
    Mutation("VAR24", "a variable's nodes are colocated with its handle", VARS,
             "        self._group = op.colocation_group", "        self._group = None", API),
    Mutation("VAR25", "the placer keeps a resource's users with its handle", "minigraph/placer.py",
             "                uf.union(inputs[j]._op._name, op._name)", "                pass",
             REFS + API),
    Mutation("VAR26", "gradients flow into a variable's handle", "minigraph/gradients.py",
             "    return data is None or data.dtype in TRAINABLE_DTYPES", "    return False", API),
    Mutation("VAR27", "a gather of a variable is a ResourceGather", "ops/gather_ops.py",
             "    if isinstance(params, Variable):  # only the rows named are read (TF's sparse_read)",
             "    if False:", API),
    Mutation("VAR28", "embedding_lookup gathers a variable's rows where it lives", "ops/embedding.py",
             "        rows.append(gather(where, shard, wanted, 0).output)",
             "        rows.append(GatherV2(where, shard, wanted, 0).output)", API),
    # -- Saver and freezing ----------------------------------------------------------------------
    Mutation("VAR29", "saves write a temporary file, then rename it", "minigraph/train/saver.py",
             "        os.replace(tmp, target)", "        os.replace(tmp, target)\n        raise OSError(28, 'injected')",
             SAVER),
    Mutation("VAR30", "restore checks dtypes before assigning", "minigraph/train/saver.py",
             "            if dtype is not var.dtype:", "            if False:", SAVER),
    Mutation("VAR31", "restore refuses variables the checkpoint lacks", "minigraph/train/saver.py",
             "            if name not in saved:", "            if False:", SAVER),
    Mutation("VAR32", "a truncated string entry is corruption", "minigraph/train/saver.py",
             "        if lengths.size and (lengths.min() < 0 or head + int(lengths.sum()) != len(data)):",
             "        if False:", SAVER),
    Mutation("VAR33", "freezing turns a variable's reads into Identities of its value",
             "minigraph/graph_util.py", '    if op.type in ("ReadVariableOp", "Identity"):',
             '    if op.type == "Identity":', FREEZE),
    Mutation("VAR34", "the input forwarding never writes into a read-only value",
             "minigraph/kernel.py", "            and value.flags.writeable\n", "", TRUST),
]  # fmt: skip
