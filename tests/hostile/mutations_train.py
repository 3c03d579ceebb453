"""Mutations of the optimizers (issue 22): minigraph/train/optimizer.py, the Unique op and the
0-d AssignAdd fix in ops/resource_variables.py. Each breaks one key behaviour; a test of
tests/test_train_*.py must go red.

    python -m tests.hostile.mutations --only TR  # these mutations only
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

API = ("tests/test_train_api.py",)
SPARSE = ("tests/test_train_sparse.py",)
TF = ("tests/test_train_optimizers.py",)
UNIQUE = ("tests/test_train_unique.py",)
OPT = "minigraph/train/optimizer.py"
RV = "ops/resource_variables.py"

MUTATIONS = [
    Mutation("TR1", "sparse gradients: repeated ids summed before the apply op", OPT,
             "        return self._apply_sparse(scope, summed.output, unique.y, var)",
             "        return self._apply_sparse(scope, grad.values, grad.indices, var)", API),
    Mutation("TR2", "slots colocated with their variable", OPT,
             "    return scope.with_device(var.device or None).colocate_with(var.op)",
             "    return scope", API),
    Mutation("TR3", "TF 1.x's sparse Adam decays m over the whole variable", OPT,
             "        m_assign = m.assign(mul(scope, m, beta1), read_value=False, scope=scope)",
             "        m_assign = m.read_value(scope).op", API),
    Mutation("TR4", "the global_step increment runs after (and with) the updates", OPT,
             "                        step = named.colocate_with(global_step.op).with_control_dependencies([done])",
             "                        step = named.colocate_with(global_step.op)", API),
    Mutation("TR5", "hyperparameters cast to the variable's dtype", OPT,
             "    if x.dtype is dtype:\n        return x",
             "    if True:\n        return x", API),
    Mutation("TR6", "Adam's beta powers multiplied after each step", OPT,
             "        assigns = [\n", "        assigns = [] and [\n", TF),
    Mutation("TR7", "Nesterov momentum reaches the dense apply op", OPT,
             "            self._t(scope, \"momentum\", grad.dtype), use_locking=self._use_locking,\n            use_nesterov=self._use_nesterov,",
             "            self._t(scope, \"momentum\", grad.dtype), use_locking=self._use_locking,\n            use_nesterov=False,",
             API),
    Mutation("TR8", "lazy Adam touches only the rows named", OPT,
             "        if self._lazy:", "        if False:", API),
    Mutation("TR9", "gradient descent's sparse step subtracts", OPT,
             "        delta = _op(\"Mul\")(scope, _op(\"Neg\")(scope, grad.values), lr)",
             "        delta = _op(\"Mul\")(scope, grad.values, lr)", API),
    Mutation("TR10", "slot variables are not trainable", OPT,
             "where, _filled(var, value), dtype=var.dtype, shape=var.shape, trainable=False,",
             "where, _filled(var, value), dtype=var.dtype, shape=var.shape, trainable=True,", API),
    Mutation("TR11", "integer variables refused by apply_gradients", OPT,
             "        for v in var_list:\n            _check_float(v.dtype, v.name)\n",
             "", API),
    Mutation("TR12", "Unique: first-appearance order", RV,
             "    number = (xp.cumsum(marks) - 1)[firsts]",
             "    number = xp.arange(firsts.shape[0])", UNIQUE),
    Mutation("TR13", "AssignAdd of a 0-d variable keeps an array", RV,
             "                var.set(xp.asarray(op(current, value)), owned=True)",
             "                var.set(op(current, value), owned=True)", API),
    Mutation("TR14", "sparse steps do not touch the whole table", OPT,
             "                        if isinstance(grad, IndexedSlices):",
             "                        if isinstance(grad, IndexedSlices):\n                            grad = _op(\"UnsortedSegmentSum\")(where, grad.values, grad.indices, _op(\"StridedSlice\")(where, grad.dense_shape, [0], [1], [1], shrink_axis_mask=1)).output\n                        if isinstance(grad, IndexedSlices):",
             SPARSE),
]  # fmt: skip
