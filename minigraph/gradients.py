"""Symbolic reverse-mode differentiation: `gradients(ys, xs)` adds the gradient graph, as TF
1.x's `tf.gradients` (tensorflow/python/ops/gradients_util.py) does.

The algorithm is TF's, in one pass over the ops between xs and ys:
1. *Reached*: the ops reachable from the xs' ops along float and complex tensors (integer,
   bool and string tensors carry no gradient), found in one sweep in creation order (the graph
   is append-only, so creation order is topological).
2. *Between*: the reached ops on a path to the ys, found backwards from the ys; each gets a
   pending count, the number of its outputs' consumers among them.
3. From the ys, seeded with `grad_ys` (ones by default), each op whose consumers are all done
   gets the sum of the gradients that reached its outputs (AddN; concatenated IndexedSlices when
   all are sparse; dense when they mix), then its rule (`register_gradient`) turns those into
   one gradient per input. xs' ops that no other x feeds, ops of `stop_gradients` and ops
   declared `no_gradient` pass nothing on; an op with no rule that a gradient must flow through
   is a NotFoundError (a LookupError, as TF's) naming the node and its op type.
Each op is visited once and each edge touched a constant number of times: the cost is linear in
the size of the graph between xs and ys.

Names: everything goes under the `gradients` name scope (uniquified per call: `gradients_1`),
inside the scope current for the graph when `gradients` is called (`Scope.as_default()`); the
nodes of op `a/b/op`'s rule under `gradients/a/b/op_grad`, sums of gradients (`AddN`), the
default `grad_ys_<i>` and zeros directly under `gradients`.

Devices: when the current scope requests a device, every gradient node gets that request, and
no colocation: the user has said where gradients go. Otherwise the nodes built for a forward op
(its rule's nodes, the sum of its outputs' gradients, zeros for its outputs that got none; for
a y, its default grad_ys; for an x, its zeros) request that op's device when it has a request,
and are colocated with it when it is colocated with another node (as the gathers of
`embedding_lookup` are with their shards), requesting that node's device when the forward op
requests none (a run fetching only gradients may prune that node), so that a gradient is
computed where its forward op runs; the gradient nodes of a forward op placed freely are placed
freely too, by the same rules, which puts them on the same device whenever their kernels allow
(joining the forward op's own group instead would let one gradient node without a GPU kernel
move the forward op to the CPU). Gradient nodes take the current scope's control
dependencies, but neither its colocation nor its kernel label (which names the forward ops'
kernels).

The graph changes as one unit: if building the gradient fails (an op without a rule, a rule
that raises or returns a bad gradient), the graph is left exactly as it was.

Nodes of library ops (AddN, ConcatV2, Cast, Fill, Shape, ZerosLike, UnsortedSegmentSum) are
built by op type name through the registry: the runtime does not import the op library, and
says which op is missing (and that `import ops` provides it) when none is loaded.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np

from minigraph import dtypes, registry
from minigraph.builder import OpBuilder, as_output
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError, NotFoundError
from minigraph.graph import Graph, Operation, Output
from minigraph.indexed_slices import (
    IndexedSlices,
    build_library_op,
    densify,
)
from minigraph.op_def import show_value
from minigraph.registry import get_op_def
from minigraph.scope import Scope, current_scope
from minigraph.shape_inference import resource_handle_data
from minigraph.tensor_shape import TensorShape
from minigraph.variables import Variable

__all__ = ["gradients", "TRAINABLE_DTYPES"]

#: The dtypes that carry gradients (TF's `backprop_util.IsTrainable`); integer, bool and string
#: tensors are constants to differentiation.
TRAINABLE_DTYPES = frozenset(
    {dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.complex64,
     dtypes.complex128}
)  # fmt: skip

# Zeros and ones of up to this many elements are Consts, larger ones Fill nodes (TF's
# `_constant_if_small`: serialized graphs stay small).
_SMALL_CONSTANT = 1000

_UNCONNECTED = ("none", "zero")

Gradient = Output | IndexedSlices


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str | None = "gradients",
    stop_gradients: Any = None,
    unconnected_gradients: str = "none",
) -> list[Gradient | None]:
    """The symbolic gradient of `sum(ys)` with respect to each of `xs`, as TF 1.x's
    `tf.gradients`: adds the nodes that compute it and returns one entry per x, in order.

    Args:
        ys: an Output (or single-output builder), or a list of them: what is differentiated
            (their sum, weighted by `grad_ys`).
        xs: an Output or a list of them: what it is differentiated with respect to.
        grad_ys: the gradients the ys receive: None (ones of each y's shape), one tensor (for
            one y), or a list aligned with ys whose entries are tensors, IndexedSlices, numpy
            values (converted to the y's dtype) or None (ones). Each must have its y's dtype
            and a shape compatible with the y's.
        name: the name scope of the new nodes, uniquified (`gradients`, `gradients_1`).
        stop_gradients: an Output or a list of them held constant: no gradient flows through
            their ops (partial rather than total derivatives, TF's example `a + b` with
            `stop_gradients=[a, b]` giving `[1.0, 1.0]`).
        unconnected_gradients: what an x that the ys do not depend on gets: "none" (None) or
            "zero" (zeros of its shape and dtype).

    Returns:
        A list aligned with xs: an Output, an IndexedSlices (a sparse gradient, e.g. of a
        gather's params), or None.

    Raises:
        NotFoundError: an op between xs and ys through which a gradient must flow has no
            gradient rule (register one with `register_gradient`, or declare it
            `no_gradient`); or a library op the gradient needs is not loaded (`import ops`).
        InvalidArgumentError: bad arguments (not tensors, several graphs, a grad_ys entry of
            the wrong dtype or shape, an unknown `unconnected_gradients`), or a rule that
            returns a bad gradient (the wrong count, dtype or shape).
    """
    ys_list = _tensors(ys, "ys")
    xs_list = _tensors(xs, "xs")
    stops = [] if stop_gradients is None else _tensors(stop_gradients, "stop_gradients")
    if not isinstance(unconnected_gradients, str) or unconnected_gradients not in _UNCONNECTED:
        raise InvalidArgumentError(
            f"Unknown value for unconnected_gradients: {unconnected_gradients!r} (use 'none' or "
            "'zero')"
        )
    if grad_ys is None:
        seeds: list[Any] = [None] * len(ys_list)
    elif isinstance(grad_ys, (list, tuple)):
        seeds = list(grad_ys)
    else:
        seeds = [grad_ys]
    if len(seeds) != len(ys_list):
        raise InvalidArgumentError(
            f"Length mismatch. Passed {len(seeds)} grad_ys for {len(ys_list)} ys"
        )
    graph = _one_graph(ys_list, xs_list, stops, seeds)
    if graph is None:
        return []  # no tensor at all: ys and xs are empty
    if name is None:
        name = "gradients"
    user = current_scope(graph)
    with graph.transaction():
        builder = _Builder(graph, user, name)
        return builder.run(ys_list, xs_list, seeds, stops, unconnected_gradients)


# -- arguments ---------------------------------------------------------------------------------


def _tensors(value: Any, what: str) -> list[Output]:
    """One tensor or a list of them, as Outputs."""
    many = isinstance(value, (list, tuple))
    outputs = []
    for i, item in enumerate(value if many else [value]):
        label = f"{what}[{i}]" if many else what
        if isinstance(item, Variable):
            # As TF: an x (or a stop gradient) that is a variable is its handle, which every
            # read's gradient reaches; a y is its value.
            item = item.value() if what == "ys" else item.handle
        if isinstance(item, OpBuilder) and len(item.outputs) != 1:
            raise InvalidArgumentError(
                f"gradients: {label}: {item.operation.name!r} has {len(item.outputs)} outputs: "
                "pick one (builder.outputs[i] or its name)"
            )
        out = as_output(item) if isinstance(item, (Output, OpBuilder)) else None
        if out is None:
            if isinstance(item, IndexedSlices):
                hint = " (an IndexedSlices is a gradient, not a tensor to differentiate)"
            elif isinstance(item, Operation):
                hint = " (pass one of its outputs: op.outputs[i])"
            else:
                hint = ""
            raise InvalidArgumentError(
                f"gradients: {label} must be an Output or a single-output op builder; got "
                f"{type(item).__name__} {show_value(item)}{hint}"
            )
        outputs.append(out)
    return outputs


def _one_graph(*groups: list[Any]) -> Graph | None:
    graph = None
    first = None
    for group in groups:
        for item in group:
            g = getattr(item, "graph", None)
            if g is None or not isinstance(item, (Output, IndexedSlices, OpBuilder)):
                continue
            if graph is None:
                graph, first = g, item
            elif g is not graph:
                raise InvalidArgumentError(
                    f"gradients: {item.name!r} and {first.name!r} belong to different graphs"
                )
    return graph


def _rule_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{qualname}" if module else qualname


# -- the traversal -------------------------------------------------------------------------------


class _Builder:
    """One `gradients` call: its scopes and the gradients collected per op output."""

    def __init__(self, graph: Graph, user: Scope, name: str):
        self.graph = graph
        # The `gradients` name scope. Gradient nodes get scopes of their own (`_scope`): without
        # the user's kernel label (it names the forward ops' kernels) or colocation (they are
        # colocated with their forward ops), with its control dependencies.
        self.name_scope = user.new_sub_scope(name).name_scope
        # A device request in the user's scope decides where every gradient node goes.
        self.user_device = user.device
        self.control = user.control_dependencies
        self.prefixes: dict[str, str] = {}  # forward name scope -> its gradient name scope
        self.rules: dict[str, registry.GradientRule | None] = {}
        self.group_devices: dict[str, Any] = {}  # colocation group -> its node's request
        # op -> per output, the gradients it received: None (none), the one gradient received
        # (or the sum, once summed), or a list of those still to be summed.
        self.grads: dict[Operation, list[Any]] = {}

    def run(
        self,
        ys: list[Output],
        xs: list[Output],
        seeds: list[Any],
        stops: list[Output],
        unconnected: str,
    ) -> list[Gradient | None]:
        to_ops = [y.op for y in ys]
        from_ops = [x.op for x in xs]
        reached = self._reached(from_ops, to_ops)
        reachable_to = {op for op in to_ops if op in reached}
        pending = _pending_counts(to_ops, reached)
        for i, (y, seed) in enumerate(zip(ys, seeds)):
            self._add(y, self._seed(i, y, seed))
        queue: collections.deque[Operation] = collections.deque()
        queued = set()
        for op in to_ops:
            if op not in queued and op in reachable_to and pending.get(op, 0) == 0:
                queued.add(op)
                queue.append(op)
        # xs' ops that no other x feeds (through the ops between), and stop_gradients' ops,
        # pass no gradient on (TF's _StopOps, from the initial pending counts).
        stop_ops = {op for op in from_ops if not any(pending.get(t.op, 0) > 0 for t in op.inputs)}
        stop_ops.update(t.op for t in stops)
        wanted = set(from_ops)
        grads = self.grads
        rules = self.rules
        popleft, enqueue = queue.popleft, queue.append
        while queue:
            op = popleft()
            received = grads.get(op)
            rule = None
            # A received entry holds at least one gradient: _add never records None.
            if received is not None and op not in stop_ops:
                kind = op.type
                rule = rules.get(kind, rules)
                if rule is rules:
                    rule = rules[kind] = _rule_for(op)
            if rule is not None or op in wanted:
                if received is not None and len(received) == 1 and type(received[0]) is not list:
                    out_grads = [received[0]]  # one output, one gradient: nothing to sum
                else:
                    out_grads = self._sum(op, received)
                if rule is not None:
                    self._apply(op, rule, out_grads)
            for t in op.inputs:
                source = t.op
                count = pending.get(source)
                if count is not None:
                    pending[source] = count - 1
                    if count == 1:
                        enqueue(source)
        return [self._result(x, unconnected) for x in xs]

    def _reached(self, from_ops: list[Operation], to_ops: list[Operation]) -> set[Operation]:
        """The ops reachable from `from_ops` along trainable tensors, up to the last of
        `to_ops` (one sweep in creation order)."""
        reached = set(from_ops)
        if not to_ops:
            return reached
        start = min(op.creation_index for op in from_ops) if from_ops else 0
        end = max(op.creation_index for op in to_ops)
        trainable = TRAINABLE_DTYPES
        for op in self.graph.operations[start : end + 1]:
            if op in reached:
                continue
            for t in op.inputs:
                if t.op in reached and (t.dtype in trainable or _trainable_handle(t)):
                    reached.add(op)
                    break
        return reached

    # -- scopes ----------------------------------------------------------------------------------
    # Scopes for gradient nodes are made with Scope's constructor and the graph's name
    # reservation (its construction protocol; the transaction holds the graph's lock) rather
    # than with new_sub_scope, colocate_with and with_device, which copy a scope each: this is
    # once per forward op, on the path whose cost issue 21 bounds (3x building the forward ops).

    def _scope(self, prefix: str, op: Operation) -> Scope:
        """A scope of name scope `prefix` placed for the gradient nodes of `op`."""
        device = self.user_device
        coloc = None
        if device is None:
            device = op.requested_device
            group = op.colocation_group
            if group != op.name:
                coloc = group
                if device is None:
                    device = self._group_device(group)
        return Scope(self.graph, prefix, None, device, self.control, coloc, "")

    def _group_device(self, group: str) -> Any:
        """The device requested by the node a colocation group is named after (None when it
        requests none). Gradient nodes of a forward op colocated with, say, a variable's handle
        request it too: a run that fetches only gradients prunes the handle, and the group
        would then be placed without the request that placed the forward op (TF places the
        whole graph once, before pruning)."""
        devices = self.group_devices
        if group not in devices:
            graph = self.graph
            devices[group] = graph.get_operation(group).requested_device if group in graph else None
        return devices[group]

    def _placed(self, op: Operation) -> Scope:
        """The `gradients` scope, placed for the gradient nodes of `op`."""
        return self._scope(self.name_scope, op)

    def _rule_scope(self, op: Operation) -> Scope:
        """`gradients/<op's name scope>/<op>_grad`, placed for `op`."""
        forward, _, local = op.name.rpartition("/")
        parent = self._prefix(forward) if forward else self.name_scope
        unique = self.graph.unique_name(parent, local + "_grad", reserve=True)
        return self._scope(f"{parent}/{unique}" if parent else unique, op)

    def _prefix(self, forward: str) -> str:
        """The name scope under `gradients` mirroring the forward name scope `forward` (made
        once per call, so that `a/x` and `a/y` share `gradients/a`)."""
        if not forward:
            return self.name_scope
        prefix = self.prefixes.get(forward)
        if prefix is None:
            outer, _, local = forward.rpartition("/")
            parent = self._prefix(outer)
            unique = self.graph.unique_name(parent, local, reserve=True)
            prefix = self.prefixes[forward] = f"{parent}/{unique}" if parent else unique
        return prefix

    # -- gradients -------------------------------------------------------------------------------

    def _add(self, t: Output, grad: Gradient) -> None:
        op = t.op
        received = self.grads.get(op)
        if received is None:
            received = self.grads[op] = [None] * len(op.outputs)
        slot = received[t.index]
        if slot is None:
            received[t.index] = grad
        elif type(slot) is list:
            slot.append(grad)
        else:
            received[t.index] = [slot, grad]

    def _sum(self, op: Operation, received: list[Any] | None) -> list[Gradient | None]:
        """The gradient of each output of `op`, from those it `received`: their sum (TF's
        _AggregatedGrads), stored back so that each sum is built once."""
        if received is None:
            return [None] * len(op.outputs)
        for i, grads in enumerate(received):
            if type(grads) is list:
                received[i] = self._add_n(op, i, grads)
        return list(received)

    def _add_n(self, op: Operation, index: int, grads: list[Gradient]) -> Gradient:
        scope = self._placed(op)
        if all(isinstance(g, IndexedSlices) for g in grads):
            return self._concat_slices(scope, op, grads)
        dense = [
            densify(
                g, scope, cause=f"the gradients of '{op.name}' ({op.type}) output {index} mix "
                "dense and sparse ones, so they are added densely",
            )
            if isinstance(g, IndexedSlices)
            else g
            for g in grads
        ]  # fmt: skip
        why = f"adding the gradients that meet at '{op.name}' ({op.type}) output {index}"
        by_device: dict[str, list[Output]] = {}
        for g in dense:
            by_device.setdefault(g.op.device, []).append(g)
        if len(by_device) == 1:
            return build_library_op(scope, "AddN", [dense], name="AddN", purpose=why)
        # Gradients on several devices are first added per device, next to them (TF's
        # _MultiDeviceAddN), so only one partial sum per device crosses devices.
        partial = []
        for device in sorted(by_device):
            group = by_device[device]
            if len(group) == 1:
                partial.append(group[0])
                continue
            first = group[0].op
            near = Scope(
                self.graph, self.name_scope, None, first.requested_device, self.control,
                first.colocation_group, "",
            )  # fmt: skip
            partial.append(build_library_op(near, "AddN", [group], name="AddN", purpose=why))
        return build_library_op(scope, "AddN", [partial], name="AddN", purpose=why)

    def _concat_slices(self, scope: Scope, op: Operation, grads: list[Any]) -> IndexedSlices:
        """Sparse gradients summed sparsely: their values and indices concatenated (a repeated
        index adds up when densified)."""
        why = f"adding the sparse gradients that meet at '{op.name}' ({op.type})"
        indices = [g.indices for g in grads]
        if len({t.dtype for t in indices}) > 1:  # int32 and int64: as TF, all int64
            indices = [
                t
                if t.dtype is dtypes.int64
                else build_library_op(scope, "Cast", [t], {"DstT": dtypes.int64}, purpose=why)
                for t in indices
            ]
        axis = np.array(0, dtype=np.int32)
        values = build_library_op(scope, "ConcatV2", [[g.values for g in grads], axis], purpose=why)
        joined = build_library_op(scope, "ConcatV2", [indices, axis], purpose=why)
        shape = next((g.dense_shape for g in grads if g.dense_shape is not None), None)
        return IndexedSlices(values, joined, shape)

    def _apply(self, op: Operation, rule: registry.GradientRule, out_grads: list[Any]) -> None:
        """Calls `op`'s rule on its outputs' gradients and records the inputs' gradients."""
        if None in out_grads:  # identity comparisons: Outputs and IndexedSlices have no __eq__
            outputs = op.outputs
            for i, g in enumerate(out_grads):
                if g is None and outputs[i].dtype in TRAINABLE_DTYPES:
                    # An output nothing depends on has gradient 0 (rules may rely on one).
                    out_grads[i] = build_library_op(
                        self._placed(op), "ZerosLike", [outputs[i]], name="zeros_like",
                        purpose=f"the zero gradient of '{op.name}' output {i}",
                    )  # fmt: skip
        scope = self._rule_scope(op)
        if not rule.accepts_indexed_slices and IndexedSlices in map(type, out_grads):
            for i, g in enumerate(out_grads):
                if type(g) is IndexedSlices:
                    cause = f"the gradient rule of {op.type} takes dense gradients"
                    out_grads[i] = densify(g, scope, cause=cause)
        fn = rule.fn
        try:
            with scope.as_default():
                result = fn(op, *out_grads)
        except Exception as e:
            e.add_note(
                f"(raised by the gradient rule {_rule_name(fn)} of node {op.name!r} ({op.type}))"
            )
            raise
        inputs = op.inputs
        graph = self.graph
        grads = self.grads
        if len(inputs) == 1 and (type(result) is Output or isinstance(result, OpBuilder)):
            in_grads: Any = (result,)  # one gradient, not in a list (TF's _AsList)
        else:
            in_grads = _rule_result(result, op, fn)
        for i, (t, g) in enumerate(zip(inputs, in_grads)):
            if g is None:
                continue
            if isinstance(g, OpBuilder) and len(g.outputs) == 1:
                g = g.outputs[0]
            # The common case, checked inline: an Output of t's dtype, shape and graph.
            if not (
                type(g) is Output
                and g.dtype is t.dtype
                and ((shape := g.shape) is t.shape or shape == t.shape)
                and g.op.graph is graph
            ):
                g = _checked(g, t, i, op, fn)
            # _add, inline: once per edge.
            source = t.op
            received = grads.get(source)
            if received is None:
                received = grads[source] = [None] * len(source.outputs)
            slot = received[t.index]
            if slot is None:
                received[t.index] = g
            elif type(slot) is list:
                slot.append(g)
            else:
                received[t.index] = [slot, g]

    def _seed(self, i: int, y: Output, seed: Any) -> Gradient:
        """The gradient y starts with: ones, or the user's grad_ys[i] (TF's _DefaultGradYs)."""
        scope = self._placed(y.op)
        name = f"grad_ys_{i}"
        if seed is None:
            if y.dtype.is_complex:
                raise InvalidArgumentError(
                    f"Gradients of complex tensors ({y.name}) must set grad_ys (y.dtype = "
                    f"{y.dtype.name})"
                )
            if y.dtype.is_string:
                raise InvalidArgumentError(
                    f"Tensor {y.name} with type string must be numeric to obtain a default gradient"
                )
            return _filled(scope, y, 1, name, f"the default grad_ys for {y.name!r}")
        what = f"grad_ys[{i}]"
        if isinstance(seed, IndexedSlices):
            if seed.graph is not self.graph:
                raise InvalidArgumentError(f"gradients: {what} belongs to another graph")
            _check_gradient_for(seed, y, what)
            parts = [
                _identity(scope, t, f"{name}_{part}")
                for t, part in ((seed.indices, "indices"), (seed.values, "values"))
            ]
            shape = seed.dense_shape
            if shape is not None:
                shape = _identity(scope, shape, f"{name}_shape")
            return IndexedSlices(parts[1], parts[0], shape)
        if isinstance(seed, (Output, OpBuilder)):
            out = _tensors(seed, what)[0]
            _check_gradient_for(out, y, what)
            return _identity(scope, out, name)
        if isinstance(seed, Operation):
            raise InvalidArgumentError(
                f"gradients: {what} got the Operation {seed.name!r}; pass one of its outputs"
            )
        try:
            array = dtypes.convert_to_array(seed, y.dtype)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(
                f"gradients: cannot convert {what} to the dtype of {y.name!r} ({y.dtype.name}): "
                f"{e.message}"
            ) from None
        if not TensorShape(array.shape).is_compatible_with(y.shape):
            raise InvalidArgumentError(
                f"gradients: {what} has shape {list(array.shape)}, which {y.name!r} (shape "
                f"{y.shape}) cannot have"
            )
        return _const(scope, array, name)

    def _result(self, x: Output, unconnected: str) -> Gradient | None:
        received = self.grads.get(x.op)
        grad = None if received is None else received[x.index]
        if type(grad) is list:  # not summed yet (defensive: every x's op is visited)
            grad = received[x.index] = self._add_n(x.op, x.index, grad)
        if grad is None and unconnected == "zero":
            scope = self._placed(x.op)
            if x.dtype is dtypes.resource:  # a variable's handle: zeros of the variable
                return _variable_zeros(scope, x)
            return _filled(scope, x, 0, "zeros_like", f"the zero gradient of {x.name!r}")
        return grad


def _pending_counts(to_ops: list[Operation], reached: set[Operation]) -> dict[Operation, int]:
    """The pending count of each op between xs and ys (the reached ops on a path to `to_ops`,
    found breadth first from them, as TF): how many input edges of such ops it feeds. A reached
    input of an op between is itself between, so one pass counts the edges."""
    pending: dict[Operation, int] = {}
    visited: set[Operation] = set()
    queue = collections.deque(op for op in to_ops if op in reached)
    popleft, append = queue.popleft, queue.append
    while queue:
        op = popleft()
        if op in visited:
            continue
        visited.add(op)
        for t in op.inputs:
            source = t.op
            if source in reached:
                pending[source] = pending.get(source, 0) + 1
                if source not in visited:
                    append(source)
    return pending


def _rule_for(op: Operation) -> registry.GradientRule | None:
    """The rule of `op`'s type (None for `no_gradient` ops); an op with neither is an error."""
    try:
        rule = registry.gradient_rule(op.type)
    except NotFoundError:
        raise NotFoundError(
            f"No gradient defined for operation '{op.name}' (op type: {op.type}). A gradient "
            "must flow through it: register one with @minigraph.register_gradient("
            f"{op.type!r}), declare the op not differentiable with minigraph.no_gradient("
            f"{op.type!r}), or hold its output constant (stop_gradients=[...]).",
            op.name,
            op.type,
        ) from None
    return rule if rule.fn is not None else None


def _rule_result(result: Any, op: Operation, fn: Any) -> list[Any]:
    if isinstance(result, (list, tuple)):
        grads = list(result)
    else:
        grads = [result]  # one gradient, for an op with one input (TF's _AsList)
    if len(grads) != len(op.inputs):
        raise InvalidArgumentError(
            f"Num gradients {len(grads)} generated for op {op.node_def()} do not match num "
            f"inputs {len(op.inputs)} (gradient rule {_rule_name(fn)})",
            op.name,
            op.type,
        )
    return grads


def _checked(g: Any, t: Output, i: int, op: Operation, fn: Any) -> Gradient:
    """A rule's gradient for input `i` (tensor `t`) of `op`, checked: a tensor of `t`'s graph,
    dtype and a compatible shape."""
    where = f"gradient rule {_rule_name(fn)} of node {op.name!r} ({op.type}), input {i}"
    if isinstance(g, OpBuilder):
        if len(g.outputs) != 1:
            raise InvalidArgumentError(
                f"{where}: returned {g.operation.name!r}, which has {len(g.outputs)} outputs; "
                "return one of them",
                op.name,
                op.type,
            )
        g = g.outputs[0]
    if not isinstance(g, (Output, IndexedSlices)):
        raise InvalidArgumentError(
            f"{where}: a gradient is an Output, an IndexedSlices or None; got "
            f"{type(g).__name__} {show_value(g)}",
            op.name,
            op.type,
        )
    if g.graph is not t.graph:
        raise InvalidArgumentError(f"{where}: the gradient belongs to another graph", op.name)
    dtype, shape, kind = t.dtype, t.shape, t.dtype.name
    if dtype is dtypes.resource:
        # A variable's handle: its gradient is the variable's (TF's handle data decides).
        data = resource_handle_data(t)
        dtype = data.dtype if data is not None else g.dtype
        shape = data.shape if data is not None else TensorShape(None)
        kind = f"a handle to a {dtype.name} variable"
    if g.dtype is not dtype:
        raise InvalidArgumentError(
            f"{where}: the gradient has dtype {g.dtype.name} but the input {t.name!r} is {kind}",
            op.name,
            op.type,
        )
    if not g.shape.is_compatible_with(shape):
        raise InvalidArgumentError(
            "Incompatible shapes between op input and calculated input gradient. Forward "
            f"operation: {op.name}. Input index: {i}. Original input shape: {shape}. "
            f"Calculated input gradient shape: {g.shape} ({where})",
            op.name,
            op.type,
        )
    if isinstance(g, IndexedSlices) and not g.values.shape[1:].is_compatible_with(shape[1:]):
        raise InvalidArgumentError(
            f"{where}: sparse gradient slices of shape {g.values.shape[1:]} do not fit the "
            f"input {t.name!r} of shape {shape}",
            op.name,
            op.type,
        )
    return g


def _trainable_handle(t: Output) -> bool:
    """Whether a tensor that is not of a trainable dtype still carries a gradient: a handle to
    a variable of a trainable dtype (or of an unknown one, as TF's IsTrainable)."""
    if t.dtype is not dtypes.resource:
        return False
    data = resource_handle_data(t)
    return data is None or data.dtype in TRAINABLE_DTYPES


def _variable_zeros(scope: Scope, handle: Output) -> Output:
    """Zeros of the variable `handle` refers to: a Const of its declared shape when small and
    known, else Fill over its run-time shape (VariableShape)."""
    data = resource_handle_data(handle)
    purpose = f"the zero gradient of the variable {handle.name!r}"
    if data is None:
        raise InvalidArgumentError(
            f"gradients: unconnected_gradients='zero' for {handle.name!r} needs the dtype of the "
            "variable it refers to, which its producer does not say"
        )
    scalar = _scalar(data.dtype, 0)
    size = data.shape.num_elements()
    if size is not None and size < _SMALL_CONSTANT:
        return _const(scope, np.full(data.shape.dims, scalar, dtype=scalar.dtype), "zeros_like")
    dims = build_library_op(scope, "VariableShape", [handle], purpose=purpose)
    return build_library_op(scope, "Fill", [dims, scalar], name="zeros_like", purpose=purpose)


def _check_gradient_for(g: Gradient, y: Output, what: str) -> None:
    if g.dtype is not y.dtype:
        raise InvalidArgumentError(
            f"gradients: {what} has dtype {g.dtype.name} but {y.name!r} has dtype "
            f"{y.dtype.name}: a gradient has its tensor's dtype"
        )
    if not g.shape.is_compatible_with(y.shape):
        raise InvalidArgumentError(
            f"gradients: {what} has shape {g.shape}, incompatible with {y.name!r} of shape "
            f"{y.shape}"
        )


# -- nodes ---------------------------------------------------------------------------------------


def _const(scope: Scope, array: np.ndarray, name: str) -> Output:
    attrs = {"value": array, "dtype": dtypes.as_dtype(array.dtype)}
    return scope.create_op(get_op_def("Const"), [], attrs, name).outputs[0]


def _identity(scope: Scope, t: Output, name: str) -> Output:
    return scope.create_op(get_op_def("Identity"), [t], {}, name).outputs[0]


def _scalar(dtype: DType, value: int) -> np.ndarray:
    if dtype.is_string:
        return np.array(b"", dtype=object)
    return np.array(bool(value) if dtype.is_bool else value, dtype=dtype.np_dtype)


def _filled(scope: Scope, like: Output, value: int, name: str, purpose: str) -> Output:
    """A tensor of `like`'s shape and dtype filled with `value` (0 or 1): a Const when the shape
    is known and small, else Fill (of the static shape, or of Shape(like) at run time), or
    ZerosLike for zeros of an unknown shape."""
    dtype = like.dtype
    scalar = _scalar(dtype, value)
    shape = like.shape
    size = shape.num_elements()
    if size is not None and size < _SMALL_CONSTANT:
        return _const(scope, np.full(shape.dims, scalar, dtype=scalar.dtype), name)
    if size is not None:
        dims: Any = np.array(
            shape.dims, dtype=np.int64 if max(shape.dims) > 2**31 - 1 else np.int32
        )
    elif value == 0:
        return build_library_op(scope, "ZerosLike", [like], name=name, purpose=purpose)
    else:
        dims = build_library_op(scope, "Shape", [like], purpose=purpose)
    return build_library_op(scope, "Fill", [dims, scalar], name=name, purpose=purpose)
