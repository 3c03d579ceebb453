"""Optimizers: TF 1.x's `tf.compat.v1.train` optimizers over resource variables.

    loss = ...                                        # a float scalar of the model
    train_op = minigraph.train.AdagradOptimizer(0.1).minimize(loss)
    sess.run(minigraph.global_variables_initializer(scope))
    sess.run(train_op, feeds)

`GradientDescentOptimizer`, `MomentumOptimizer` (`use_nesterov`), `AdagradOptimizer` and
`AdamOptimizer` build the same graph as TF 1.x's, node for node where it matters:

- `compute_gradients(loss, var_list)` is `minigraph.gradients` of the loss with respect to each
  variable (None for a variable the loss does not depend on, and for integer variables).
- `apply_gradients(pairs, global_step, name)` first makes the slot variables (in the current
  name scope with no control dependencies, as TF's `init_scope`): `<var>/Momentum`,
  `<var>/Adagrad`, `<var>/Adam` and `<var>/Adam_1`, colocated with their variable (so they live
  on its device, a ps task included), not trainable, in the graph's global variables (the
  global initializer initializes them); Adam's `beta1_power` and `beta2_power`, one pair per
  optimizer and graph, colocated with the variable of the smallest name. Then, under a name
  scope named after the optimizer (`Adagrad`, `Adagrad_1`, ...), the hyperparameters become
  tensors (`Adagrad/learning_rate`: a Python float is a float32 Const, cast to each variable's
  dtype, as TF), and each variable's update is built colocated with it, in
  `Adagrad/update_<var>`: a dense gradient (an Output) goes to ResourceApply<Name>; an
  IndexedSlices gradient (a gather or `embedding_lookup` of the variable) to the sparse form,
  after summing the rows of repeated ids (Unique + UnsortedSegmentSum, TF's
  `_deduplicate_indexed_slices`), so a step touches, and costs, only the rows named.
  Gradient descent's sparse step is ResourceScatterAdd of -lr * grad (repeated ids add up).
- The returned Operation (`Adagrad`) runs every update; with `global_step` (an integer
  Variable) it is the AssignAddVariableOp adding 1 to it, after the updates (`Adagrad/update`).

TF 1.x's Adam with sparse gradients, matched: it decays both moments over the whole variable
(`m = m * beta1`, then ResourceScatterAdd of (1 - beta1) * grad into m; the same for v) and
updates every row of the variable, so its step costs the table size. `AdamOptimizer(...,
lazy=True)` (not TF's; as TF Addons' LazyAdam) updates only the rows named: their moments and
values, from the moments' old rows.

`use_locking` is handed to the apply ops: with False (the default) concurrent steps on one
variable may interleave (Hogwild, as TF) but never corrupt memory or tear a row's read; with
True each apply op holds its variables' locks alone. The nodes come from the op library
(`import ops`) by op type name, through the registry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.builder import OpBuilder, as_output
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError, NotFoundError
from minigraph.gradients import gradients
from minigraph.graph import Graph, Operation, Output, check_name
from minigraph.indexed_slices import IndexedSlices
from minigraph.registry import builder
from minigraph.scope import Scope, current_scope
from minigraph.variables import Variable, trainable_variables

__all__ = [
    "Optimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "TRAIN_OP",
]

#: The graph collection the train ops go to, as TF's GraphKeys.TRAIN_OP.
TRAIN_OP = "train_op"

# TF's Optimizer._valid_dtypes.
_VALID = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)

# Above this many elements a slot's initial value is a Fill, not a Const holding every value
# (TF's array_ops.zeros switches at 1000 too).
_SMALL = 1000


def _op(op_type: str) -> Any:
    """The builder of a library op, by type name."""
    try:
        made = builder(op_type)
    except NotFoundError:
        raise NotFoundError(
            f"The optimizers build {op_type} nodes, an op of minigraph's op library: "
            "`import ops` registers it"
        ) from None
    if made is None:
        raise NotFoundError(f"The op {op_type} was registered without a builder")
    return made


def _out(node: Any) -> Output:
    return node if isinstance(node, Output) else node.output


def _names(items: Iterable[Any]) -> str:
    return str([repr(v) for v in items])


def _scope_at(graph: Graph, prefix: str, like: Scope) -> Scope:
    """A scope of name scope `prefix` with `like`'s control dependencies and kernel label, no
    device request and no colocation."""
    return Scope(graph, prefix, None, None, like.control_dependencies, None, like.kernel_label)


def _cast(scope: Scope, x: Output, dtype: DType) -> Output:
    """math_ops.cast: `x` itself when it has `dtype` already."""
    if x.dtype is dtype:
        return x
    return _out(_op("Cast")(scope, x, dtype))


class Optimizer:
    """The base class, as TF 1.x's `tf.compat.v1.train.Optimizer`: subclasses say how to make
    their slots, their hyperparameter tensors and the dense and sparse update of one variable.

    Args:
        use_locking: handed to the apply ops (see the module's docstring).
        name: the name scope of the nodes `apply_gradients` builds, and of the slots' names.
    """

    def __init__(self, use_locking: bool, name: str):
        if not isinstance(use_locking, bool):
            raise InvalidArgumentError(
                f"use_locking must be a bool; got {type(use_locking).__name__}"
            )
        if not name:
            raise InvalidArgumentError("Must specify the optimizer name")
        check_name(name, "optimizer")
        self._use_locking = use_locking
        self._name = name
        # slot name -> (graph, variable op name) -> slot Variable, as TF's _slots.
        self._slots: dict[str, dict[tuple[Graph, str], Variable]] = {}
        self._non_slot: dict[tuple[str, Graph], Variable] = {}
        self._lock = threading.RLock()
        self._tensors: dict[str, Output] = {}

    def get_name(self) -> str:
        return self._name

    # -- the public protocol --------------------------------------------------------------------

    def minimize(
        self,
        loss: Any,
        var_list: Iterable[Variable] | None = None,
        global_step: Variable | None = None,
        name: str | None = None,
        grad_loss: Any = None,
    ) -> Operation:
        """`apply_gradients(compute_gradients(loss, var_list), global_step, name)`.

        The positional order is `(loss, var_list, global_step)` (TF 1.x's is `(loss,
        global_step, var_list)`): pass `global_step=` by keyword to be safe with both.

        Raises:
            InvalidArgumentError: as both; "No gradients provided for any variable" when the
                loss depends on none of the variables (TF's ValueError).
        """
        pairs = self.compute_gradients(loss, var_list=var_list, grad_loss=grad_loss)
        if all(g is None for g, _ in pairs):
            raise InvalidArgumentError(
                "No gradients provided for any variable, check your graph for ops that do not "
                f"support gradients, between variables {_names(v for _, v in pairs)} and loss "
                f"{_out_of(loss)!r}."
            )
        return self.apply_gradients(pairs, global_step=global_step, name=name)

    def compute_gradients(
        self, loss: Any, var_list: Iterable[Variable] | None = None, grad_loss: Any = None
    ) -> list[tuple[Any, Variable]]:
        """`[(gradient, variable)]` for each variable of `var_list` (default: the loss graph's
        trainable variables): an Output, an IndexedSlices (a sparse gradient), or None where
        the loss does not depend on the variable.

        Raises:
            InvalidArgumentError: a loss (or grad_loss) that is not a float tensor ("Invalid
                type ..."), an entry of var_list that is not a Variable of the loss's graph,
                no variables at all ("No variables to optimize."), a variable with a gradient
                whose dtype is not a float type.
        """
        loss_t = _out_of(loss)
        _check_float(loss_t.dtype, loss_t.name)
        if grad_loss is not None:
            grad_loss = _out_of(grad_loss, "grad_loss")
            _check_float(grad_loss.dtype, grad_loss.name)
        graph = loss_t.graph
        variables = trainable_variables(graph) if var_list is None else list(var_list)
        for v in variables:
            _check_variable(v, graph, "var_list")
        if not variables:
            raise InvalidArgumentError("No variables to optimize.")
        grads = gradients(loss_t, [v.handle for v in variables], grad_ys=grad_loss)
        pairs = list(zip(grads, variables))
        for g, v in pairs:
            if g is not None:
                _check_float(v.dtype, v.name)
        return pairs

    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[Any, Variable]],
        global_step: Variable | None = None,
        name: str | None = None,
    ) -> Operation:
        """The Operation applying each gradient to its variable (pairs whose gradient is None
        are skipped); with `global_step`, the increment of that variable that runs after them.

        Raises:
            InvalidArgumentError: no pairs ("No variables provided."), only None gradients
                ("No gradients provided for any variable"), a variable that is not a Variable,
                a gradient that is not a tensor or IndexedSlices of the variable's dtype and
                shape, variables of several graphs, a global_step that is not an integer
                Variable, a bad name.
        """
        pairs = []
        for pair in grads_and_vars:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise InvalidArgumentError(
                    f"apply_gradients takes (gradient, variable) pairs; got {pair!r}"
                )
            pairs.append(tuple(pair))
        if not pairs:
            raise InvalidArgumentError("No variables provided.")
        graph = None
        for _, v in pairs:
            _check_variable(v, graph, "apply_gradients")
            graph = v.graph
        checked = [(_gradient_of(g, v), v) for g, v in pairs]
        var_list = [v for g, v in checked if g is not None]
        if not var_list:
            raise InvalidArgumentError(
                f"No gradients provided for any variable: {_names(v for _, v in checked)}."
            )
        for v in var_list:
            _check_float(v.dtype, v.name)
        if global_step is not None:
            _check_variable(global_step, graph, "global_step")
            if not global_step.dtype.is_integer:
                raise InvalidArgumentError(
                    f"global_step must be an integer variable; {global_step.name!r} is "
                    f"{global_step.dtype.name}"
                )
        if name is not None:
            check_name(name, "op")
        outer = current_scope(graph)
        # One build at a time per optimizer: the hyperparameter tensors are per build.
        with self._lock:
            self._create_slots(outer, var_list)
            try:
                with graph.transaction():  # the name scope is taken by the final node, atomically
                    local = graph.unique_name(outer.name_scope, name or self._name, reserve=False)
                    prefix = f"{outer.name_scope}/{local}" if outer.name_scope else local
                    scope = _scope_at(graph, prefix, outer)
                    self._prepare(scope)
                    updates = []
                    for grad, var in checked:
                        if grad is None:
                            continue
                        where = _scope_at(graph, f"{prefix}/update_{var.op.name}", outer)
                        where = where.colocate_with(var.op)
                        if isinstance(grad, IndexedSlices):
                            updates.append(self._apply_sparse_duplicate_indices(where, grad, var))
                        else:
                            updates.append(self._apply_dense(where, grad, var))
                    named = _scope_at(graph, outer.name_scope, outer)
                    if global_step is None:
                        train_op = self._finish(scope, named.with_op_name(local), updates)
                    else:
                        done = self._finish(scope, scope.with_op_name("update"), updates)
                        near = scope.colocate_with(global_step.op).with_control_dependencies([done])
                        one = _op("Const")(near, np.array(1, global_step.dtype.np_dtype)).output
                        step = named.colocate_with(global_step.op).with_control_dependencies([done])
                        train_op = _op("AssignAddVariableOp")(
                            step.with_op_name(local), global_step.handle, one
                        ).operation
            finally:
                self._tensors = {}
        graph.add_to_collection(TRAIN_OP, train_op)
        return train_op

    def get_slot(self, var: Variable, name: str) -> Variable | None:
        """The slot variable `name` (one of `get_slot_names()`) of `var`, or None."""
        named = self._slots.get(name)
        if not named or not isinstance(var, Variable):
            return None
        return named.get((var.graph, var.op.name))

    def get_slot_names(self) -> list[str]:
        """The names of the slots this optimizer made so far, sorted (Adam: ['m', 'v'])."""
        return sorted(self._slots)

    def variables(self) -> list[Variable]:
        """The variables this optimizer made (slots, Adam's beta powers), sorted by name."""
        found = list(self._non_slot.values())
        for named in self._slots.values():
            found.extend(named.values())
        return sorted(found, key=lambda v: v.name)

    # -- what subclasses define -----------------------------------------------------------------

    def _create_slots(self, outer: Scope, var_list: list[Variable]) -> None:
        """Makes the slots of each variable (holding the optimizer's lock)."""

    def _prepare(self, scope: Scope) -> None:
        """Makes the hyperparameter tensors (in the optimizer's name scope)."""

    def _apply_dense(self, scope: Scope, grad: Output, var: Variable) -> Operation:
        raise NotImplementedError

    def _apply_sparse(
        self, scope: Scope, values: Output, indices: Output, var: Variable
    ) -> Operation:
        """The update of the rows `indices` (distinct) of `var` with the gradient rows
        `values`."""
        raise NotImplementedError

    def _apply_sparse_duplicate_indices(
        self, scope: Scope, grad: IndexedSlices, var: Variable
    ) -> Operation:
        """`_apply_sparse` of the gradient with the rows of repeated ids summed (TF's
        `_deduplicate_indexed_slices`)."""
        unique = _op("Unique")(scope, grad.indices)
        count = _op("StridedSlice")(
            scope, _op("Shape")(scope, unique.y), [0], [1], [1], shrink_axis_mask=1
        )
        summed = _op("UnsortedSegmentSum")(scope, grad.values, unique.idx, count)
        return self._apply_sparse(scope, summed.output, unique.y, var)

    def _finish(self, scope: Scope, named: Scope, updates: list[Operation]) -> Operation:
        """The node running every update (`named`: where it goes, under its name)."""
        return _op("NoOp")(named.with_control_dependencies(updates)).operation

    # -- helpers for subclasses -----------------------------------------------------------------

    def _hyper(self, scope: Scope, value: Any, name: str) -> None:
        """Makes the tensor of a hyperparameter (TF's `convert_to_tensor(value, name=name)`):
        a callable is called first; a tensor or Variable is used as it is (a Variable is
        read), a Python float becomes a float32 Const, a numpy scalar a Const of its dtype."""
        if callable(value) and not isinstance(value, (Output, OpBuilder, Variable)):
            value = value()
        out = as_output(value, scope)
        if out is None:
            try:
                array = dtypes.convert_to_array(value, None)
            except InvalidArgumentError as e:
                raise InvalidArgumentError(
                    f"{self._name}: cannot make {name} a tensor: {e.message}"
                ) from None
            if array.ndim != 0:
                raise InvalidArgumentError(
                    f"{self._name}: {name} must be a scalar; got shape {list(array.shape)}"
                )
            if not dtypes.as_dtype(array.dtype).is_numeric:
                raise InvalidArgumentError(f"{self._name}: {name} must be a number; got {value!r}")
            out = _op("Const")(scope.with_op_name(name), array).output
        elif out.graph is not scope.graph:
            raise InvalidArgumentError(
                f"{self._name}: {name} {out.name!r} belongs to another graph than the variables"
            )
        elif not out.dtype.is_numeric:
            raise InvalidArgumentError(
                f"{self._name}: {name} must be a number; {out.name!r} is {out.dtype.name}"
            )
        elif out.shape.rank not in (None, 0):
            raise InvalidArgumentError(
                f"{self._name}: {name} must be a scalar; {out.name!r} has shape {out.shape}"
            )
        self._tensors[name] = out

    def _t(self, scope: Scope, name: str, dtype: DType) -> Output:
        """The hyperparameter tensor `name`, cast to `dtype` (in `scope`)."""
        return _cast(scope, self._tensors[name], dtype)

    def _slot(
        self, outer: Scope, var: Variable, slot_name: str, value: float, op_name: str
    ) -> Variable:
        """The slot `slot_name` of `var` (made on first use): a Variable `<var>/<op_name>`
        filled with `value`, colocated with `var`, not trainable."""
        named = self._slots.setdefault(slot_name, {})
        key = (var.graph, var.op.name)
        slot = named.get(key)
        if slot is None:
            where = _next_to(_slot_scope(outer, var.op.name), var)
            slot = Variable(
                where, _filled(var, value), dtype=var.dtype, shape=var.shape, trainable=False,
                name=op_name,
            )  # fmt: skip
            named[key] = slot
        return slot


def _slot_scope(outer: Scope, prefix: str) -> Scope:
    """A scope of name scope `prefix`, no control dependencies, device or colocation (TF's
    init_scope inside a variable scope)."""
    return Scope(outer.graph, prefix, None, None, (), None, outer.kernel_label)


def _next_to(scope: Scope, var: Variable) -> Scope:
    """`scope` colocated with `var`, and asking for its device too: a run that uses the slot
    without the variable (fetching it) places it where the variable's request says."""
    return scope.with_device(var.device or None).colocate_with(var.op)


def _filled(var: Variable, value: float) -> Callable[[Scope], Output]:
    """An initial-value callable: `value` in the shape and dtype of `var`. A small shape is a
    Const (`zeros` or `Const`, as TF's initializers name it), a large or partly known one a
    Fill, so that a table's slot does not keep a second table of constants in the graph."""
    name = "zeros" if value == 0 else "Const"
    dtype = var.dtype

    def initial(scope: Scope) -> Output:
        shape = var.shape
        scalar = np.array(value, dtype.np_dtype)
        if shape.is_fully_defined() and shape.num_elements() < _SMALL:
            full = np.full(shape.as_list(), scalar, dtype.np_dtype)
            return _op("Const")(scope.with_op_name(name), full).output
        if shape.is_fully_defined():
            dims: Any = np.array(shape.as_list(), np.int64)
        else:
            dims = _op("Shape")(scope, var.initial_value, out_type=dtypes.int64)
        return _op("Fill")(scope.with_op_name(name), dims, scalar).output

    return initial


def _out_of(value: Any, what: str = "loss") -> Output:
    if isinstance(value, Variable):
        return value.value()
    out = as_output(value)
    if out is None:
        raise InvalidArgumentError(
            f"{what} must be a tensor (an Output or a builder); got {type(value).__name__}"
        )
    return out


def _check_float(dtype: DType, name: str) -> None:
    if dtype not in _VALID:
        raise InvalidArgumentError(
            f"Invalid type {dtype.name} for {name}, expected: {[d.name for d in _VALID]}."
        )


def _check_variable(v: Any, graph: Graph | None, what: str) -> None:
    if not isinstance(v, Variable):
        raise InvalidArgumentError(
            f"{what}: the optimizers update minigraph Variables; got {type(v).__name__} {v!r}"
        )
    if graph is not None and v.graph is not graph:
        raise InvalidArgumentError(
            f"{what}: variable {v.name!r} belongs to another graph than the others (or the loss)"
        )


def _gradient_of(g: Any, v: Variable) -> Any:
    """`g` checked against `v`: None, an IndexedSlices or an Output of v's dtype and shape."""
    if g is None:
        return None
    if isinstance(g, IndexedSlices):
        values, indices = g.values, g.indices
        if values.graph is not v.graph:
            raise InvalidArgumentError(f"The gradient of {v.name!r} belongs to another graph")
        if values.dtype is not v.dtype:
            raise InvalidArgumentError(
                f"The gradient of {v.name!r} ({v.dtype.name}) is {values.dtype.name}: "
                f"{values.name!r}"
            )
        if not indices.dtype.is_integer:
            raise InvalidArgumentError(
                f"The gradient of {v.name!r}: indices must be integers; got {indices.dtype.name}"
            )
        return g
    out = as_output(g, current_scope(v.graph))
    if out is None:
        try:
            out = _op("Const")(current_scope(v.graph), g, v.dtype).output
        except (InvalidArgumentError, TypeError):
            raise InvalidArgumentError(
                f"Gradient must be convertible to a Tensor or IndexedSlices, or None: {g!r}"
            ) from None
    if out.graph is not v.graph:
        raise InvalidArgumentError(f"The gradient of {v.name!r} belongs to another graph")
    if out.dtype is not v.dtype:
        raise InvalidArgumentError(
            f"The gradient of {v.name!r} ({v.dtype.name}) is {out.dtype.name}: {out.name!r}"
        )
    if not out.shape.is_compatible_with(v.shape):
        raise InvalidArgumentError(
            f"The gradient of {v.name!r} (shape {v.shape}) has shape {out.shape}: {out.name!r}"
        )
    return out


class GradientDescentOptimizer(Optimizer):
    """`GradientDescentOptimizer(learning_rate, use_locking=False, name="GradientDescent")`:
    var -= learning_rate * grad (sparse: ResourceScatterAdd of -learning_rate * grad)."""

    def __init__(
        self, learning_rate: Any, use_locking: bool = False, name: str = "GradientDescent"
    ):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate

    def _prepare(self, scope: Scope) -> None:
        self._hyper(scope, self._learning_rate, "learning_rate")

    def _apply_dense(self, scope: Scope, grad: Output, var: Variable) -> Operation:
        lr = self._t(scope, "learning_rate", grad.dtype)
        return _op("ResourceApplyGradientDescent")(
            scope, var.handle, lr, grad, use_locking=self._use_locking
        ).operation

    def _apply_sparse_duplicate_indices(
        self, scope: Scope, grad: IndexedSlices, var: Variable
    ) -> Operation:
        # TF's: no deduplication, the scatter adds repeated rows up.
        lr = self._t(scope, "learning_rate", grad.values.dtype)
        delta = _op("Mul")(scope, _op("Neg")(scope, grad.values), lr)
        return _op("ResourceScatterAdd")(scope, var.handle, grad.indices, delta).operation


class MomentumOptimizer(Optimizer):
    """`MomentumOptimizer(learning_rate, momentum, use_locking=False, name="Momentum",
    use_nesterov=False)`: accum = accum * momentum + grad; var -= lr * accum (Nesterov:
    var -= lr * grad + lr * momentum * accum). Slot "momentum": `<var>/Momentum`."""

    def __init__(
        self,
        learning_rate: Any,
        momentum: Any,
        use_locking: bool = False,
        name: str = "Momentum",
        use_nesterov: bool = False,
    ):
        super().__init__(use_locking, name)
        if not isinstance(use_nesterov, bool):
            raise InvalidArgumentError(
                f"use_nesterov must be a bool; got {type(use_nesterov).__name__}"
            )
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, outer: Scope, var_list: list[Variable]) -> None:
        for v in var_list:
            self._slot(outer, v, "momentum", 0.0, self._name)

    def _prepare(self, scope: Scope) -> None:
        self._hyper(scope, self._learning_rate, "learning_rate")
        self._hyper(scope, self._momentum, "momentum")

    def _apply_dense(self, scope: Scope, grad: Output, var: Variable) -> Operation:
        mom = self.get_slot(var, "momentum")
        return _op("ResourceApplyMomentum")(
            scope, var.handle, mom.handle, self._t(scope, "learning_rate", grad.dtype), grad,
            self._t(scope, "momentum", grad.dtype), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov,
        ).operation  # fmt: skip

    def _apply_sparse(
        self, scope: Scope, values: Output, indices: Output, var: Variable
    ) -> Operation:
        mom = self.get_slot(var, "momentum")
        return _op("ResourceSparseApplyMomentum")(
            scope, var.handle, mom.handle, self._t(scope, "learning_rate", values.dtype),
            values, indices, self._t(scope, "momentum", values.dtype),
            use_locking=self._use_locking, use_nesterov=self._use_nesterov,
        ).operation  # fmt: skip


class AdagradOptimizer(Optimizer):
    """`AdagradOptimizer(learning_rate, initial_accumulator_value=0.1, use_locking=False,
    name="Adagrad")`: accum += grad * grad; var -= lr * grad / sqrt(accum). Slot
    "accumulator": `<var>/Adagrad`, starting at initial_accumulator_value.

    Raises:
        InvalidArgumentError: initial_accumulator_value not positive (TF's ValueError).
    """

    def __init__(
        self,
        learning_rate: Any,
        initial_accumulator_value: float = 0.1,
        use_locking: bool = False,
        name: str = "Adagrad",
    ):
        if not isinstance(initial_accumulator_value, (int, float, np.floating, np.integer)) or (
            isinstance(initial_accumulator_value, bool)
        ):
            raise InvalidArgumentError(
                "initial_accumulator_value must be a number; got "
                f"{type(initial_accumulator_value).__name__}"
            )
        if not initial_accumulator_value > 0.0:
            raise InvalidArgumentError(
                f"initial_accumulator_value must be positive: {initial_accumulator_value}"
            )
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = float(initial_accumulator_value)

    def _create_slots(self, outer: Scope, var_list: list[Variable]) -> None:
        for v in var_list:
            self._slot(outer, v, "accumulator", self._initial_accumulator_value, self._name)

    def _prepare(self, scope: Scope) -> None:
        self._hyper(scope, self._learning_rate, "learning_rate")

    def _apply_dense(self, scope: Scope, grad: Output, var: Variable) -> Operation:
        acc = self.get_slot(var, "accumulator")
        return _op("ResourceApplyAdagrad")(
            scope, var.handle, acc.handle, self._t(scope, "learning_rate", grad.dtype), grad,
            use_locking=self._use_locking,
        ).operation  # fmt: skip

    def _apply_sparse(
        self, scope: Scope, values: Output, indices: Output, var: Variable
    ) -> Operation:
        acc = self.get_slot(var, "accumulator")
        return _op("ResourceSparseApplyAdagrad")(
            scope, var.handle, acc.handle, self._t(scope, "learning_rate", values.dtype),
            values, indices, use_locking=self._use_locking,
        ).operation  # fmt: skip


class AdamOptimizer(Optimizer):
    """`AdamOptimizer(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
    use_locking=False, name="Adam", lazy=False)`, as TF 1.x's (Kingma & Ba's Adam with TF's
    "epsilon hat"): lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); m = beta1 * m + (1 - beta1)
    * g; v = beta2 * v + (1 - beta2) * g * g; var -= lr_t * m / (sqrt(v) + epsilon).

    Slots "m" and "v" (`<var>/Adam`, `<var>/Adam_1`) and the variables `beta1_power`,
    `beta2_power` (beta1^t, beta2^t, float32 for Python floats, multiplied by beta1, beta2 after
    each step's updates).

    Sparse gradients (TF 1.x's behaviour): both moments decay over the whole variable and
    every row of the variable is updated. With `lazy=True` (not TF's; TF Addons' LazyAdam)
    only the rows named are: m and v of those rows, and var's rows from them.
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        use_locking: bool = False,
        name: str = "Adam",
        lazy: bool = False,
    ):
        super().__init__(use_locking, name)
        if not isinstance(lazy, bool):
            raise InvalidArgumentError(f"lazy must be a bool; got {type(lazy).__name__}")
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._lazy = lazy

    def _beta_powers(self, graph: Graph) -> tuple[Variable, Variable]:
        return self._non_slot[("beta1_power", graph)], self._non_slot[("beta2_power", graph)]

    def _create_slots(self, outer: Scope, var_list: list[Variable]) -> None:
        first = min(var_list, key=lambda v: v.name)
        graph = first.graph
        where = _next_to(_slot_scope(outer, outer.name_scope), first)
        for name, value in (("beta1_power", self._beta1), ("beta2_power", self._beta2)):
            if (name, graph) not in self._non_slot:
                if callable(value) and not isinstance(value, (Output, OpBuilder, Variable)):
                    value = value()
                self._non_slot[(name, graph)] = Variable(where, value, trainable=False, name=name)
        for v in var_list:
            self._slot(outer, v, "m", 0.0, self._name)
            self._slot(outer, v, "v", 0.0, self._name)

    def _prepare(self, scope: Scope) -> None:
        self._hyper(scope, self._lr, "learning_rate")
        self._hyper(scope, self._beta1, "beta1")
        self._hyper(scope, self._beta2, "beta2")
        self._hyper(scope, self._epsilon, "epsilon")

    def _powers(self, scope: Scope, var: Variable, dtype: DType) -> tuple[Output, Output]:
        b1, b2 = self._beta_powers(var.graph)
        return _cast(scope, b1.read_value(scope), dtype), _cast(scope, b2.read_value(scope), dtype)

    def _apply_dense(self, scope: Scope, grad: Output, var: Variable) -> Operation:
        t = grad.dtype
        b1p, b2p = self._powers(scope, var, t)
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        return _op("ResourceApplyAdam")(
            scope, var.handle, m.handle, v.handle, b1p, b2p,
            self._t(scope, "learning_rate", t), self._t(scope, "beta1", t),
            self._t(scope, "beta2", t), self._t(scope, "epsilon", t), grad,
            use_locking=self._use_locking,
        ).operation  # fmt: skip

    def _apply_sparse(
        self, scope: Scope, values: Output, indices: Output, var: Variable
    ) -> Operation:
        t = values.dtype
        mul, sub, add = _op("Mul"), _op("Sub"), _op("AddV2")
        div, sqrt = _op("RealDiv"), _op("Sqrt")
        b1p, b2p = self._powers(scope, var, t)
        lr_t = self._t(scope, "learning_rate", t)
        beta1 = self._t(scope, "beta1", t)
        beta2 = self._t(scope, "beta2", t)
        eps = self._t(scope, "epsilon", t)
        # lr = lr_t * sqrt(1 - beta2_power) / (1 - beta1_power), TF's order of operations
        lr = div(scope, mul(scope, lr_t, sqrt(scope, sub(scope, 1, b2p))), sub(scope, 1, b1p))
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_scaled = mul(scope, values, sub(scope, 1, beta1))
        v_scaled = mul(scope, mul(scope, values, values), sub(scope, 1, beta2))
        if self._lazy:
            return self._lazy_sparse(scope, var, m, v, indices, lr, beta1, beta2, eps, m_scaled,
                                     v_scaled)  # fmt: skip
        scatter = _op("ResourceScatterAdd")
        # m_t = m.assign(m * beta1); then scatter_add(m, indices, m_scaled); m_t = m's value
        m_assign = m.assign(mul(scope, m, beta1), read_value=False, scope=scope)
        m_add = scatter(scope.with_control_dependencies([m_assign]), m.handle, indices, m_scaled)
        m_t = m.read_value(scope.with_control_dependencies([m_add.operation]))
        v_assign = v.assign(mul(scope, v, beta2), read_value=False, scope=scope)
        v_add = scatter(scope.with_control_dependencies([v_assign]), v.handle, indices, v_scaled)
        v_t = v.read_value(scope.with_control_dependencies([v_add.operation]))
        step = div(scope, mul(scope, lr, m_t), add(scope, sqrt(scope, v_t), eps))
        var_update = var.assign_sub(step, read_value=False, scope=scope)
        return _op("NoOp")(scope.with_control_dependencies([var_update, m_t.op, v_t.op])).operation

    def _lazy_sparse(
        self, scope: Scope, var: Variable, m: Variable, v: Variable, indices: Output,
        lr: Output, beta1: Output, beta2: Output, eps: Output, m_scaled: Output,
        v_scaled: Output,
    ) -> Operation:  # fmt: skip
        """LazyAdam: the rows named only (the indices are distinct here)."""
        mul, add, div, sqrt = _op("Mul"), _op("AddV2"), _op("RealDiv"), _op("Sqrt")
        m_rows = add(scope, mul(scope, beta1, m.sparse_read(indices, scope)), m_scaled)
        v_rows = add(scope, mul(scope, beta2, v.sparse_read(indices, scope)), v_scaled)
        update = _op("ResourceScatterUpdate")
        m_update = update(scope, m.handle, indices, m_rows).operation
        v_update = update(scope, v.handle, indices, v_rows).operation
        step = div(scope, mul(scope, lr, m_rows), add(scope, sqrt(scope, v_rows), eps))
        var_update = _op("ResourceScatterSub")(scope, var.handle, indices, step).operation
        return _op("NoOp")(
            scope.with_control_dependencies([m_update, v_update, var_update])
        ).operation

    def _finish(self, scope: Scope, named: Scope, updates: list[Operation]) -> Operation:
        # After the updates: beta1_power *= beta1, beta2_power *= beta2 (next to beta1_power).
        graph = scope.graph
        b1, b2 = self._beta_powers(graph)
        after = scope.with_control_dependencies(updates).colocate_with(b1.op)
        mul = _op("Mul")
        assigns = [
            power.assign(mul(after, power, self._tensors[beta]), read_value=False, scope=after)
            for power, beta in ((b1, "beta1"), (b2, "beta2"))
        ]
        return _op("NoOp")(named.with_control_dependencies([*updates, *assigns])).operation
