"""Mutations of the gradient machinery (issue 21): minigraph/gradients.py,
minigraph/indexed_slices.py, the gradient registry, IndexedSlices fetches and the gradient
checker. Each breaks one key behaviour; a test of tests/test_gradients_*.py must go red.

    python -m tests.hostile.mutations --only GR  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

GRAD_TESTS = ("tests/test_gradients_core.py", "tests/test_gradients_sparse.py",
              "tests/test_gradients_registry.py", "tests/test_gradients_checker.py")  # fmt: skip
CORE = ("tests/test_gradients_core.py",)
SPARSE = ("tests/test_gradients_sparse.py",)
CHECKER = ("tests/test_gradients_checker.py",)
REGISTRY = ("tests/test_gradients_registry.py",)
G = "minigraph/gradients.py"

MUTATIONS = [
    # -- the traversal -------------------------------------------------------------------------
    Mutation("GR1", "gradients: integer tensors carry no gradient", G,
             "if t.op in reached and (t.dtype in trainable or _trainable_handle(t)):",
             "if t.op in reached:", CORE),
    Mutation("GR2", "gradients: an op waits for every consumer's gradient (pending counts)", G,
             "                    if count == 1:", "                    if count >= 1:", CORE),
    Mutation("GR3", "gradients: stop_gradients hold tensors constant", G,
             "stop_ops.update(t.op for t in stops)", "stop_ops.update(())", CORE),
    Mutation("GR4", "gradients: an x fed by another x passes its gradient on (total derivatives)", G,
             "stop_ops = {op for op in from_ops if not any(pending.get(t.op, 0) > 0 for t in op.inputs)}",
             "stop_ops = set(from_ops)", CORE),
    Mutation("GR5", "gradients: gradients that meet are summed", G,
             "                received[i] = self._add_n(op, i, grads)",
             "                received[i] = grads[0]", CORE),
    Mutation("GR6", "gradients: sparse gradients that meet stay sparse (concatenated)", G,
             "if all(isinstance(g, IndexedSlices) for g in grads):", "if False:", SPARSE),
    Mutation("GR7", "gradients: unconnected_gradients='zero' gives zeros", G,
             'if grad is None and unconnected == "zero":', "if False:", CORE),
    Mutation("GR8", "gradients: an op without a rule is an error", G,
             "    except NotFoundError:\n        raise NotFoundError(",
             "    except NotFoundError:\n        return None\n        raise NotFoundError(", CORE),
    Mutation("GR9", "gradients: a float output nothing uses gets zeros for its rule", G,
             "if g is None and outputs[i].dtype in TRAINABLE_DTYPES:", "if False:", CORE),
    Mutation("GR10", "gradients: rules for dense gradients get sparse ones densified", G,
             "if not rule.accepts_indexed_slices and IndexedSlices in map(type, out_grads):",
             "if False:", SPARSE),
    Mutation("GR11", "gradients: the graph changes as a unit (a failure leaves it unchanged)", G,
             "    with graph.transaction():\n        builder = ", "    if True:\n        builder = ", CORE),
    Mutation("GR12", "gradients: a rule's gradient of the wrong dtype is refused", G,
             "    if g.dtype is not dtype:\n", "    if False:\n", CORE),
    Mutation("GR13", "gradients: grad_ys of the wrong dtype are refused", G,
             "    if g.dtype is not y.dtype:\n", "    if False:\n", CORE + SPARSE),
    # -- names and devices ---------------------------------------------------------------------
    Mutation("GR14", "gradients: rule nodes go under gradients/<op>_grad", G,
             'unique = self.graph.unique_name(parent, local + "_grad", reserve=True)',
             "unique = self.graph.unique_name(parent, local, reserve=True)", CORE),
    Mutation("GR15", "gradients: gradient nodes request their forward op's device", G,
             "            device = op.requested_device\n", "            device = None\n", CORE),
    Mutation("GR16", "gradients: gradient nodes join their forward op's colocation", G,
             "            if group != op.name:\n                coloc = group\n",
             "            if group != op.name:\n                coloc = None\n", CORE),
    Mutation("GR17", "gradients: a device in the user's scope decides", G,
             "self.user_device = user.device", "self.user_device = None", CORE),
    Mutation("GR18", "gradients: gradient nodes drop the user's kernel label", G,
             '        return Scope(self.graph, prefix, None, device, self.control, coloc, "")',
             '        return Scope(self.graph, prefix, None, device, self.control, coloc, "x")', CORE),
    # -- registry --------------------------------------------------------------------------------
    Mutation("GR19", "register_gradient: another rule for a registered op is refused",
             "minigraph/registry.py",
             "                if _same_function(old.fn, fn) and old.accepts_indexed_slices == (",
             "                if True or old.accepts_indexed_slices == (", REGISTRY),
    Mutation("GR20", "framework ops: Identity passes sparse gradients through",
             "minigraph/framework_ops.py",
             'register_gradient("Identity", accepts_indexed_slices=True)(_identity_grad)',
             'register_gradient("Identity")(_identity_grad)', SPARSE + REGISTRY),
    # -- IndexedSlices ---------------------------------------------------------------------------
    Mutation("GR21", "Session.run of an IndexedSlices gives an IndexedSlicesValue",
             "minigraph/session.py",
             '        return ("namedtuple", IndexedSlicesValue, [_flatten(p, out) for p in parts])',
             '        return (tuple, [_flatten(p, out) for p in parts])', SPARSE),
    Mutation("GR22", "convert_to_tensor: densifying at TF's threshold warns",
             "minigraph/indexed_slices.py", "if size >= LARGE_SPARSE_NUM_ELEMENTS:",
             "if size > LARGE_SPARSE_NUM_ELEMENTS:", SPARSE),
    Mutation("GR23", "IndexedSlices: slices that cannot fit dense_shape are refused",
             "minigraph/indexed_slices.py",
             "if known is not None and not TensorShape(known)[1:].is_compatible_with(v.shape[1:]):",
             "if False:", SPARSE),
    # -- the gradient checker --------------------------------------------------------------------
    Mutation("GR24", "compute_gradient: numerical Jacobians in float64",
             "minigraph/testing/gradient_checker.py",
             'values = [a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) for a in xs]',
             "values = [a.copy() for a in xs]", CHECKER),
    Mutation("GR25", "compute_gradient: repeated sparse indices add up",
             "minigraph/testing/gradient_checker.py",
             "np.add.at(dense, indices, values.reshape((indices.size,) + x.shape[1:]))",
             "dense[indices] = values.reshape((indices.size,) + x.shape[1:])", CHECKER),
    Mutation("GR26", "assert_gradients_close: a wrong rule fails",
             "minigraph/testing/gradient_checker.py",
             "excess = np.abs(t - n) - (atol + rtol * np.abs(n))",
             "excess = np.abs(t - n) - (atol + rtol * np.abs(n)) - 100", CHECKER),
    # -- audit (issue 21 complete): shapes of unknown length, the coverage table ----------------
    Mutation("GR27", "IndexedSlices.shape: a dense_shape of unknown length (params of unknown rank)",
             "minigraph/indexed_slices.py",
             "length = None if d.shape.dims is None else d.shape.dims[0]  # None: unknown length",
             "length = None if d.shape.dims is None else 0 + d.shape.dims[0]",
             ("tests/test_gradients_sparse.py::test_static_dense_shape",)),
    Mutation("GR28", "coverage: a differentiable op declared no_gradient is caught",
             "ops/array.py", 'register_gradient("StridedSliceGrad")(_strided_slice_grad_grad)',
             'no_gradient("StridedSliceGrad")',
             ("tests/test_gradients_coverage.py::test_every_registered_op_is_covered",)),
    Mutation("GR29", "coverage: an op with neither a rule nor no_gradient is caught",
             "ops/segment.py", 'register_gradient("ScatterNd")(_scatter_nd_grad)', "",
             ("tests/test_gradients_coverage.py::test_every_registered_op_is_covered",)),
    Mutation("GR30", "coverage: every rule is checked numerically (Fill's value gets the sum)",
             "ops/array.py", "return [None, Sum(scope, grad, _all_axes(scope, grad)).output]",
             "return [None, Sum(scope, grad, _all_axes(scope, grad)).output * 2.0]",
             ("tests/test_gradients_coverage.py::test_rule_matches_central_differences",)),
    Mutation("GR31", "gradients: nodes colocated with a pruned node still get its device",
             G, "                if device is None:\n                    device = self._group_device(group)\n",
             "", ("tests/test_gradients_partition.py::test_variable_shards_get_their_gradients_on_their_devices",)),
]  # fmt: skip
