"""The graph optimizer: named passes that rewrite the graph a plan runs, once per plan, after
placement and before kernels are bound (minigraph.plan), as TF's Grappler rewrites a placed
graph. `SessionConfig(optimizer=OptimizerConfig(...))` switches each pass, as TF's
RewriterConfig does; all are on by default.

Each pass is a function `pass_(graph: PlanGraph, config: OptimizerConfig) -> PassReport`, run in
this order (twice by default, `OptimizerConfig.iterations`, while they still change something):

- `constant_folding`: a node whose inputs are all constants runs now, on the host, with its own
  CPU kernel, and becomes Const nodes; node by node in graph order, so whole constant subgraphs
  fold. Only nodes of ops that are not stateful, whose CPU kernel is registered trusted (a user
  kernel may have effects the optimizer cannot see), without control inputs, and whose outputs
  are at most `max_constant_bytes`. A kernel that raises leaves its node as it is: the run
  reports the error, as it would have without the optimizer.
- `common_subgraph_elimination`: nodes with the same op, inputs, attrs, device (requested and
  placed), colocation, kernel label and control inputs compute the same values: later ones are
  merged into the first. Never stateful ops; only trusted kernels.
- `arithmetic_optimization`: the rewrites op libraries register for it (`register_rewrite`):
  exact simplifications such as x * 1, x + -0.0, Shape, Size and Rank of guaranteed shapes.
- `remapping`: registered fusions, such as a gather of a gather with constant indices, or the
  sharded lookup (partition -> per-shard gathers -> stitch on one device) as one kernel.
- `dependency_optimization`: Identity nodes (and ops registered as identities, such as
  StopGradient) that nothing observes are removed, their consumers reading the input; NoOps are
  removed with their control inputs handed to their dependents.

What no pass does: change the user's Graph (rewritten nodes are new Operations of a private
graph that keep the user's node names and source lines, so errors still name them), replace a
fed tensor or a fetched operation, replace a fetched tensor by anything but a new node of its
producer's name (a fusion rooted there: the fetch is still computed, never an alias of another
value or a constant), fold, merge or drop a stateful node, drop a node that could fail at run
time unless what replaces it fails the same way, or lose a control edge's meaning (a node's
control inputs pass to whoever relied on them). Nor does a fetch become a constant's array:
a constant the optimizer made that a fetch may be (a fetched Identity of a folded node) is
read through a copy node (`_copy_exposed_constants`), so every run's result is a new array.

Input forwarding (`forward_inputs`, run by the plan after liveness): which inputs each node may
overwrite with its output (`KernelContext.forwardable_inputs`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from minigraph import dtypes, registry
from minigraph.devices import Device
from minigraph.errors import InternalError, InvalidArgumentError, NotFoundError, describe_exception
from minigraph.graph import Graph, Operation, Output
from minigraph.kernel import InlineCall, KernelContext
from minigraph.op_def import OpDef
from minigraph.placer import Placement
from minigraph.registry import KernelDef
from minigraph.tensor_shape import TensorShape

__all__ = [
    "OptimizerConfig",
    "PassReport",
    "PlanGraph",
    "Edit",
    "RewriteContext",
    "Optimized",
    "PASSES",
    "optimize",
    "constant_folding",
    "common_subgraph_elimination",
    "arithmetic_optimization",
    "remapping",
    "dependency_optimization",
    "remove_identity",
    "default_config",
    "set_default_config",
    "resolve_config",
    "forward_inputs",
]

#: Grappler's cap on a folded constant (ConstantFolding's kMaxConstantSize).
DEFAULT_MAX_CONSTANT_BYTES = 10 * 1024 * 1024
_MAX_ITERATIONS = 16
_SWITCHES = (
    "constant_folding",
    "common_subgraph_elimination",
    "arithmetic_optimization",
    "remapping",
    "dependency_optimization",
    "input_forwarding",
)


@dataclass(frozen=True)
class OptimizerConfig:
    """Which optimizer passes run (TF's RewriterConfig; see the module doc for what each does).

    Attributes:
        constant_folding, common_subgraph_elimination, arithmetic_optimization, remapping,
            dependency_optimization: the graph passes, each on or off.
        input_forwarding: let nodes write their output into an input buffer that nothing else
            can see any more (`KernelContext.forward_input_or_empty`).
        max_constant_bytes: the largest output constant folding makes (Grappler's 10 MiB).
        iterations: how many times the passes run, at most (they stop once nothing changes).

    `OptimizerConfig.disabled()` turns everything off; `SessionConfig(optimizer=False)` too.

    Raises:
        InvalidArgumentError: a switch that is not a bool, or a number out of range.
    """

    constant_folding: bool = True
    common_subgraph_elimination: bool = True
    arithmetic_optimization: bool = True
    remapping: bool = True
    dependency_optimization: bool = True
    input_forwarding: bool = True
    max_constant_bytes: int = DEFAULT_MAX_CONSTANT_BYTES
    iterations: int = 2

    def __post_init__(self) -> None:
        for name in _SWITCHES:
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise _config_error(name, value, "must be a bool")
            object.__setattr__(self, name, bool(value))
        for name, low, high in (
            ("max_constant_bytes", 0, 1 << 40),
            ("iterations", 1, _MAX_ITERATIONS),
        ):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise _config_error(name, value, "must be an int")
            if not low <= value <= high:
                raise _config_error(name, value, f"must be >= {low} and <= {high}")
            object.__setattr__(self, name, int(value))

    @classmethod
    def disabled(cls) -> OptimizerConfig:
        """Every pass off (TF's `disable_meta_optimizer`)."""
        return cls(**{name: False for name in _SWITCHES})

    @property
    def rewrites_graph(self) -> bool:
        """Whether any graph pass is on (input forwarding aside)."""
        return any(getattr(self, name) for name, _ in PASSES)


def _config_error(name: str, value: Any, expected: str) -> InvalidArgumentError:
    shown = repr(value) if isinstance(value, (bool, int, float, str)) else type(value).__name__
    return InvalidArgumentError(
        f"OptimizerConfig.{name} {expected}; got {type(value).__name__} {shown}"
    )


_default_lock = threading.Lock()
_default: list[OptimizerConfig] = [OptimizerConfig()]


def default_config() -> OptimizerConfig:
    """The optimizer config of Sessions whose SessionConfig names none (all passes on, unless
    `set_default_config` changed it)."""
    return _default[0]


def set_default_config(config: OptimizerConfig | bool) -> OptimizerConfig:
    """Makes `config` the default of SessionConfigs built from now on (as TF's
    `tf.config.optimizer.set_experimental_options` sets the process's); returns the previous
    default. True means every pass on, False every pass off. The test suite's switch
    (MINIGRAPH_TEST_OPTIMIZER=off, tests/conftest.py) uses it."""
    resolved = resolve_config(config, "set_default_config")
    with _default_lock:
        previous = _default[0]
        _default[0] = resolved
    return previous


def resolve_config(value: Any, what: str = "SessionConfig.optimizer") -> OptimizerConfig:
    """The OptimizerConfig that `value` stands for: itself, True (all on), False (all off) or
    None (the default, `default_config()`).

    Raises:
        InvalidArgumentError: anything else.
    """
    if isinstance(value, OptimizerConfig):
        return value
    if value is None:
        return default_config()
    if isinstance(value, (bool, np.bool_)):
        return OptimizerConfig() if value else OptimizerConfig.disabled()
    raise InvalidArgumentError(
        f"{what} must be an OptimizerConfig, True, False or None; got {type(value).__name__}"
    )


# -- reports -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PassReport:
    """What one pass changed in one plan (`RunMetadata.optimizer`, and the placement log).

    Attributes:
        name: the pass (an OptimizerConfig switch).
        nodes_before, nodes_after: the plan's node count before the pass first ran, and that
            count changed by what the pass did (over every round it ran).
        folded: nodes that became constants.
        merged: (duplicate, the node it was merged into).
        simplified: (node, rewrite) for nodes an arithmetic rewrite replaced.
        fused: (node, rewrite) for nodes a fusion replaced.
        removed: nodes that left the plan (their values now come from elsewhere).
        deferred: (node, why) for nodes a pass left as they are where it might have changed
            them: a kernel error during folding (reported by the run instead), a size cap.
    """

    name: str
    nodes_before: int
    nodes_after: int
    folded: tuple[str, ...] = ()
    merged: tuple[tuple[str, str], ...] = ()
    simplified: tuple[tuple[str, str], ...] = ()
    fused: tuple[tuple[str, str], ...] = ()
    removed: tuple[str, ...] = ()
    deferred: tuple[tuple[str, str], ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the pass changed the plan."""
        return bool(self.folded or self.merged or self.simplified or self.fused or self.removed)

    def __str__(self) -> str:
        parts = [f"{self.name}: {self.nodes_before} -> {self.nodes_after} nodes"]
        for what, items in (
            ("folded", self.folded),
            ("merged", [f"{a} into {b}" for a, b in self.merged]),
            ("simplified", [f"{a} ({b})" for a, b in self.simplified]),
            ("fused", [f"{a} ({b})" for a, b in self.fused]),
            ("removed", self.removed),
            ("left as they are", [f"{a}: {b}" for a, b in self.deferred]),
        ):
            if items:
                parts.append(f"{what}: {_listed(items)}")
        return "; ".join(parts)


def _listed(items: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"


class _Report:
    """A PassReport being filled."""

    def __init__(self, name: str, graph: PlanGraph):
        self.name = name
        self.before = len(graph.ops)
        self.folded: list[str] = []
        self.merged: list[tuple[str, str]] = []
        self.simplified: list[tuple[str, str]] = []
        self.fused: list[tuple[str, str]] = []
        self.removed: list[str] = []
        self.deferred: list[tuple[str, str]] = []

    def done(self, graph: PlanGraph) -> PassReport:
        return PassReport(
            self.name, self.before, len(graph.ops), tuple(self.folded), tuple(self.merged),
            tuple(self.simplified), tuple(self.fused), tuple(self.removed), tuple(self.deferred),
        )  # fmt: skip


def _merged(a: PassReport, b: PassReport) -> PassReport:
    """Two reports of one pass (two iterations) as one."""
    after = a.nodes_after + b.nodes_after - b.nodes_before  # this pass's own changes
    return PassReport(
        a.name, a.nodes_before, after, a.folded + b.folded, a.merged + b.merged,
        a.simplified + b.simplified, a.fused + b.fused, a.removed + b.removed,
        a.deferred + tuple(d for d in b.deferred if d not in a.deferred),
    )  # fmt: skip


# -- the plan's graph ----------------------------------------------------------------------------


class PlanGraph:
    """The graph a plan will run, as the passes see and change it.

    `ops` are the plan's nodes in run (topological) order: the user's Operations, and, once a
    pass changed something, new Operations of a private graph standing for them (a node whose
    inputs changed is rebuilt under its own name, attrs and source; a folded or fused node's
    replacement takes its name). `placement` gives every node its device and kernel. The user's
    Graph is never changed.

    Fed tensors and fetched operations are never replaced, fetched tensors only by a new node
    of their producer's name (a fusion rooted there); `fetches` maps each fetched tensor to the
    Output of `ops` that computes it now.
    """

    def __init__(
        self,
        ops: Sequence[Operation],
        placement: Placement,
        fed: Collection[Output],
        targets: Iterable[Output | Operation],
        host: Device,
        check_kernel_outputs: bool | None = None,
    ):
        self.ops: list[Operation] = list(ops)
        self.placement = placement
        self.fed = frozenset(fed)
        self.host = host
        # Whether the static shapes of untrusted kernels' outputs hold at run time.
        self.checked_shapes = check_kernel_outputs is not False
        self.max_constant_bytes = DEFAULT_MAX_CONSTANT_BYTES
        self.fetches: dict[Output, Output] = {}
        self.fetched_ops: dict[Operation, Operation] = {}
        for t in targets:
            if isinstance(t, Operation):
                self.fetched_ops[t] = t
            elif t not in self.fed:
                self.fetches[t] = t
        # Nodes that may leave the plan once nothing needs them: what a pass replaced (their
        # values come from elsewhere), what a fusion absorbed, nodes the optimizer made.
        # Anything else a rewrite no longer needs still runs, so that its errors stay.
        self.removable: set[Operation] = set()
        # The Consts the passes made (values some run used to compute): see
        # `_copy_exposed_constants`.
        self.made_constants: set[Operation] = set()
        # A made constant's output -> the static shape of the tensor it replaced (a folded
        # value's shape is exact; whatever read the tensor inferred from the old one).
        self.replaced_shape: dict[Output, TensorShape] = {}
        self._names: set[str] | None = None  # of `ops` and the nodes made: see `names`
        self.user_graph: Graph | None = self.ops[0]._graph if self.ops else None
        self._scratch: Graph | None = None
        self._consumers: dict[Output, list[Operation]] | None = None
        self._dependents: dict[Operation, list[Operation]] | None = None
        self._position: dict[Operation, int] | None = None
        self._protected: set[Operation] | None = None
        self._host_kernels: dict[tuple[Any, ...], Any] = {}

    @property
    def names(self) -> set[str]:
        """The names of the plan's nodes and of the nodes the passes made (made on first use:
        most plans never need a new name)."""
        if self._names is None:
            self._names = {op._name for op in self.ops}
        return self._names

    @property
    def scratch(self) -> Graph:
        """The private graph of the nodes the passes make and rebuild."""
        if self._scratch is None:
            self._scratch = Graph()
        return self._scratch

    # -- queries ---------------------------------------------------------------------------------

    def device(self, op: Operation) -> Device:
        """The device `op` is placed on."""
        return self.placement.device[op]

    def kernel(self, op: Operation) -> Any:
        """The KernelDef `op` runs with."""
        return self.placement.kernel[op]

    def value_device(self, output: Output) -> Device | None:
        """Where `output`'s value lives: its producer's device, or the host for a host-memory
        output; None for a fed tensor (its home is decided later)."""
        if output in self.fed:
            return None
        op = output._op
        device = self.placement.device[op]
        if output._index in self.placement.kernel[op].flat_host_outputs(op._attrs):
            return self.host if not device.is_host else device
        return device

    def consumers(self, output: Output) -> list[Operation]:
        """The nodes of `ops` that read `output` (as the current pass found the graph)."""
        if self._consumers is None:
            index: dict[Output, list[Operation]] = {}
            for op in self.ops:
                for inp in op._inputs:
                    users = index.get(inp)
                    if users is None:
                        index[inp] = [op]
                    elif users[-1] is not op:
                        users.append(op)
            self._consumers = index
        return self._consumers.get(output, [])

    def reader_devices(self, output: Output) -> set[Device]:
        """The devices `output` is read on by its consumers (the host for a host-memory input
        of a kernel on another device)."""
        found = set()
        kernel_of, device_of = self.placement.kernel, self.placement.device
        for op in self.consumers(output):
            device = device_of[op]
            host_in = kernel_of[op].flat_host_inputs(op._attrs)
            for j, inp in enumerate(op._inputs):
                if inp is output:
                    found.add(self.host if j in host_in and not device.is_host else device)
        return found

    def control_dependents(self, op: Operation) -> list[Operation]:
        """The nodes of `ops` with `op` among their control inputs."""
        if self._dependents is None:
            index: dict[Operation, list[Operation]] = {}
            for other in self.ops:
                for dep in other._control_inputs:
                    index.setdefault(dep, []).append(other)
            self._dependents = index
        return self._dependents.get(op, [])

    def position(self, op: Operation) -> int | None:
        """`op`'s index in `ops`, None when it is not there."""
        if self._position is None:
            self._position = {op: i for i, op in enumerate(self.ops)}
        return self._position.get(op)

    def is_protected(self, op: Operation) -> bool:
        """Whether `op` must stay as it is: a fetched operation or the producer of a fetched
        tensor."""
        if self._protected is None:
            self._protected = set(self.fetched_ops.values()) | {
                out._op for out in self.fetches.values()
            }
        return op in self._protected

    def has_fed_output(self, op: Operation) -> bool:
        fed = self.fed
        return bool(fed) and any(out in fed for out in op._outputs)

    def replaceable(self, op: Operation) -> bool:
        """Whether a pass may replace `op`'s outputs and remove it: not stateful, not fetched,
        no output fed."""
        return not (op._op_def.is_stateful or self.is_protected(op) or self.has_fed_output(op))

    def constant(self, output: Output) -> np.ndarray | None:
        """`output`'s value when a Const of the plan computes it and it is not fed (read-only)."""
        op = output._op
        if op._type != "Const" or output in self.fed or op._control_inputs:
            return None
        return op._attrs["value"]

    def known_shape(self, output: Output) -> TensorShape:
        """`output`'s static shape where every run is guaranteed to have it (fed values are
        checked, so are the outputs of untrusted kernels unless the session turned the checks
        off; trusted kernels promise it); else an unknown shape."""
        if output in self.fed or self.checked_shapes:
            return output._shape
        op = output._op
        kernel = self.placement.kernel.get(op)
        if op._type == "Const" or (kernel is not None and kernel.trusted):
            return output._shape
        return TensorShape(None)

    def host_kernel(self, op: Operation) -> Any:
        """The CPU kernel of `op` (what constant folding runs), or None."""
        key = (op._type, id(op._attrs), op._kernel_label)
        found = self._host_kernels.get(key, key)
        if found is key:
            try:
                found = registry.find_kernel(op._type, "CPU", op._attrs, op._kernel_label)
            except NotFoundError:
                found = None
            self._host_kernels[key] = found
        return found

    def is_taken(self, name: str) -> bool:
        """Whether the user's graph or the plan has a node `name`."""
        return name in self.names or (self.user_graph is not None and name in self.user_graph)

    def new_name(self, base: str) -> str:
        """A node name neither the user's graph nor the plan has."""
        name, k = base, 0
        while self.is_taken(name):
            k += 1
            name = f"{base}_{k}"
        return name

    # -- building --------------------------------------------------------------------------------

    def new_const(
        self, value: Any, dtype: Any, name: str, like: Operation, device: Device | None = None
    ) -> Operation:
        """A Const of the plan holding `value` (frozen), standing in for a value of `like`'s,
        placed on `device` (default: `like`'s) when a Const kernel can hold it there, else on
        the host."""
        dtype = dtypes.as_dtype(dtype)
        array = dtypes.frozen_copy(dtypes.convert_to_array(value, dtype))
        op_def = registry.get_op_def("Const")
        attrs = MappingProxyType({"value": array, "dtype": dtype})
        const = Operation(
            self.scratch, name, op_def, (), (), attrs, None, name, "", like._source,
            ((dtype, TensorShape(array.shape)),), like._index,
        )  # fmt: skip
        device = self.placement.device[like] if device is None else device
        try:
            kernel = registry.find_kernel("Const", device.device_type, attrs, "", name)
        except NotFoundError:
            device = self.host
            kernel = registry.find_kernel("Const", "CPU", attrs, "", name)
        self._adopt(const, device, kernel)
        self.made_constants.add(const)
        return const

    def new_node(
        self,
        op_type: str | OpDef,
        inputs: Sequence[Any],
        attrs: Mapping[str, Any],
        name: str,
        like: Operation,
        kernels: Sequence[KernelDef] = (),
        device: Device | None = None,
    ) -> Operation:
        """A node of the registered op `op_type`, validated as Graph.add_operation validates
        (attrs canonicalised, shape function run on the inputs' static shapes and constant
        values), with `like`'s device request, colocation and source, placed on `device`
        (default: `like`'s device). `inputs` has one entry per input arg (a list for a list
        arg).

        `op_type` may instead be an OpDef that is not registered: an op private to plans
        (a fusion's, which no Graph or GraphDef ever holds), whose kernels are `kernels`.

        Raises:
            InvalidArgumentError: what the op refuses for these inputs and attrs.
            NotFoundError: no kernel for it on that device.
        """
        private = isinstance(op_type, OpDef)
        if private:
            op_def = op_type
            op_type = op_def.name
        else:
            op_def = registry.get_op_def(op_type)
            kernels = ()
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise InvalidArgumentError(f"{op_type}: inputs is a list, one entry per input arg")
        if len(inputs) != len(op_def.inputs):
            raise InvalidArgumentError(
                f"{op_type} takes {len(op_def.inputs)} inputs; got {len(inputs)}"
            )
        scratch = self.scratch
        flat: list[Output] = []
        with scratch.lock:
            stand_ins: list[Any] = []
            for arg, value in zip(op_def.inputs, inputs):
                if arg.is_list:
                    if not isinstance(value, (list, tuple)):
                        raise InvalidArgumentError(
                            f"{op_type}: input '{arg.name}' takes a list of Outputs"
                        )
                    stand_ins.append([self._stand_in(v) for v in value])
                    flat.extend(value)
                else:
                    stand_ins.append(self._stand_in(value))
                    flat.append(value)
            # Shape functions read constant inputs through their producers: stand-ins of the
            # scratch graph carry the real inputs' dtypes, shapes and constant values.
            checked = scratch.add(
                op_def, stand_ins, dict(attrs), "", "Rewrite", None, (), None, "", like._source
            )
        device = self.placement.device[like] if device is None else device
        if private:
            kernel = _private_kernel(op_def, kernels, device, checked._attrs, name)
        else:
            kernel = registry.find_kernel(op_type, device.device_type, checked._attrs, "", name)
        group = like._colocation_group if like._colocation_group != like._name else name
        node = Operation(
            scratch, name, op_def, tuple(flat), (), checked._attrs, like._requested_device,
            group, "", like._source, checked._output_specs, like._index,
        )  # fmt: skip
        self._adopt(node, device, kernel)
        return node

    def _stand_in(self, output: Any) -> Output:
        if type(output) is not Output:
            raise InvalidArgumentError(
                f"inputs of new nodes are Outputs of the plan; got {type(output).__name__}"
            )
        scratch = self.scratch
        if self.constant(output) is not None:
            source = output._op
            const = scratch.add_const(
                source._op_def, "", source._source, (source._attrs, source._output_specs), None
            )
            return const._outputs[0]
        holder = scratch.add(
            registry.get_op_def("Placeholder"), [], {"dtype": output._dtype,
            "shape": output._shape}, "", "StandIn", None, (), None, "", "optimizer",
        )  # fmt: skip
        return holder._outputs[0]

    def _adopt(self, op: Operation, device: Device, kernel: Any) -> None:
        self.placement.device[op] = device
        self.placement.kernel[op] = kernel
        self.removable.add(op)  # made by the optimizer: it may go when nothing needs it
        self.names.add(op._name)

    def edit(self) -> Edit:
        """A new set of changes to `ops`, applied by `apply`."""
        return Edit(self)

    # -- applying a pass's changes ---------------------------------------------------------------

    def apply(self, edit: Edit) -> list[str]:
        """Applies `edit`: every input and control input redirected to what replaces it, the
        nodes whose inputs changed rebuilt, new nodes inserted before the node they replace,
        and the nodes nothing needs any more dropped. Returns the names that left the plan."""
        if edit.empty:
            return []
        subst, ctrl_map, extra, inserted = edit.subst, edit.ctrl_map, edit.extra_ctrl, edit.inserted
        fed = self.fed
        clone_of: dict[Operation, Operation] = {}
        ctrl_memo: dict[Operation, tuple[Operation, ...]] = {}
        resolve = edit.resolve

        def ctrl_of(dep: Operation) -> tuple[Operation, ...]:
            known = ctrl_memo.get(dep)
            if known is None:
                mapped = ctrl_map.get(dep)
                if mapped is None:
                    known = (clone_of.get(dep, dep),)
                else:
                    flat: list[Operation] = []
                    for d in mapped:
                        flat.extend(ctrl_of(d))
                    known = tuple(flat)
                ctrl_memo[dep] = known
            return known

        removable = self.removable
        placement = self.placement
        rebuilt: list[Operation] = []

        def rebuild(op: Operation) -> None:
            if op in ctrl_map:  # replaced or merged: nothing reads it any more
                rebuilt.append(op)
                return
            ins = op._inputs
            new_ins = tuple([resolve(i) for i in ins]) if ins else ins
            ctrl = op._control_inputs
            more = extra.get(op)
            new_ctrl = ctrl
            if ctrl or more:
                deps: list[Operation] = []
                for dep in ctrl:
                    deps.extend(ctrl_of(dep))
                if more:
                    for dep in more:
                        deps.extend(ctrl_of(dep))
                new_ctrl = tuple(dict.fromkeys(deps))
            if new_ins == ins and new_ctrl == ctrl:
                rebuilt.append(op)
                return
            clone = Operation(
                self.scratch, op._name, op._op_def, new_ins, new_ctrl, op._attrs,
                op._requested_device, op._colocation_group, op._kernel_label, op._source,
                op._output_specs, op._index,
            )  # fmt: skip
            clone._value_key = op._value_key
            for old, new in zip(op._outputs, clone._outputs):
                if old not in fed:  # a fed tensor stays the fed tensor
                    subst[old] = new
            clone_of[op] = clone
            placement.device[clone] = placement.device[op]
            placement.kernel[clone] = placement.kernel[op]
            if op in removable:
                removable.add(clone)
            rebuilt.append(clone)

        for op in self.ops:
            for new in inserted.get(op, ()):
                rebuild(new)
            rebuild(op)
        for user, current in self.fetches.items():
            self.fetches[user] = resolve(current)
        for user, current in self.fetched_ops.items():
            self.fetched_ops[user] = clone_of.get(current, current)
        before = [op._name for op in self.ops]
        self._protected = None
        self.ops = self._needed(rebuilt)
        self._consumers = self._dependents = self._position = None
        self._names = None
        kept = {op._name for op in self.ops}
        return [name for name in before if name not in kept]

    def _needed(self, ops: list[Operation]) -> list[Operation]:
        """`ops` less the removable nodes that nothing needs (data or control)."""
        removable, fed = self.removable, self.fed
        needed: set[Operation] = set()
        stack = [
            op
            for op in ops
            if op._op_def.is_stateful
            or self.is_protected(op)
            or (op not in removable and op._type != "Const")
        ]
        while stack:
            op = stack.pop()
            if op in needed:
                continue
            needed.add(op)
            for inp in op._inputs:
                if inp not in fed and inp._op not in needed:
                    stack.append(inp._op)
            stack.extend(dep for dep in op._control_inputs if dep not in needed)
        return [op for op in ops if op in needed]


def _private_kernel(
    op_def: OpDef, kernels: Sequence[KernelDef], device: Device, attrs: Any, name: str
) -> KernelDef:
    """The first of a plan-private op's `kernels` that runs a node with `attrs` on `device`."""
    for kernel in kernels:
        if (
            kernel._op_def is op_def
            and kernel.device_type == device.device_type
            and kernel.mismatch(attrs, "") is None
        ):
            return kernel
    raise NotFoundError(
        f"No kernel for the plan-private op {op_def.name} on device type {device.device_type}",
        name,
        op_def.name,
    )


class Edit:
    """The changes one pass makes to a PlanGraph, applied together by `PlanGraph.apply`.

    Attributes:
        subst: Output -> the Output that replaces it for every consumer.
        ctrl_map: Operation -> the nodes a control edge on it now stands for.
        extra_ctrl: Operation -> control inputs it gains (those of a node it read from that was
            replaced: it must still run after them).
        inserted: Operation -> new nodes that go right before it (what replaces it).
    """

    def __init__(self, graph: PlanGraph):
        self.graph = graph
        self.subst: dict[Output, Output] = {}
        self.ctrl_map: dict[Operation, tuple[Operation, ...]] = {}
        self.extra_ctrl: dict[Operation, list[Operation]] = {}
        self.inserted: dict[Operation, list[Operation]] = {}
        self.new_position: dict[Operation, int] = {}

    @property
    def empty(self) -> bool:
        return not (self.subst or self.ctrl_map or self.extra_ctrl or self.inserted)

    def resolve(self, output: Output) -> Output:
        """What `output` stands for after this edit's replacements so far."""
        subst = self.subst
        while True:
            new = subst.get(output)
            if new is None:
                return output
            output = new

    def position(self, op: Operation) -> int | None:
        """Where `op` is (or will be) in the plan; None when nowhere."""
        found = self.graph.position(op)
        return self.new_position.get(op) if found is None else found

    def replace(
        self,
        root: Operation,
        outputs: Sequence[Output],
        created: Sequence[Operation] = (),
        absorbed: Iterable[Operation] = (),
    ) -> None:
        """Replaces every output of `root` by `outputs` (already checked) and lets `root` go.

        `created` are new nodes (before `root` in run order); `absorbed` nodes whose work the
        replacement does, which may go once nothing else needs them. Whoever depended on `root`
        by a control edge now depends on the nodes `root`'s inputs and replacements come from,
        and on `root`'s control inputs; consumers of `root` gain its control inputs.
        """
        graph = self.graph
        fed = graph.fed
        made = graph.made_constants
        for old, new in zip(root._outputs, outputs):
            self.subst[old] = new
            if new._op in made:
                known = graph.replaced_shape.get(old, old._shape)
                graph.replaced_shape[new] = graph.replaced_shape.get(new, known)
        at = graph.position(root)
        if created:
            self.inserted.setdefault(root, []).extend(created)
            for op in created:
                self.new_position[op] = at if at is not None else -1
        own_ctrl = list(root._control_inputs) + self.extra_ctrl.get(root, [])
        deps: list[Operation] = []
        for out in [self.resolve(i) for i in root._inputs] + list(outputs):
            producer = out._op
            if out not in fed and producer._type != "Const" and producer is not root:
                deps.append(producer)
        deps.extend(own_ctrl)
        self.ctrl_map[root] = tuple(dict.fromkeys(deps))
        if own_ctrl:
            for out in root._outputs:
                for consumer in graph.consumers(out):
                    self.extra_ctrl.setdefault(consumer, []).extend(own_ctrl)
        graph.removable.add(root)
        graph.removable.update(absorbed)

    def merge(self, duplicate: Operation, kept: Operation) -> None:
        """`duplicate` computes what `kept` does (same op, inputs, attrs, control inputs)."""
        for old, new in zip(duplicate._outputs, kept._outputs):
            self.subst[old] = new
        self.ctrl_map[duplicate] = (kept,)
        self.graph.removable.add(duplicate)


# -- constant folding ----------------------------------------------------------------------------


def constant_folding(graph: PlanGraph, config: OptimizerConfig) -> PassReport:
    """Runs each node whose data inputs are all constants (and that may fold: see the module
    doc) on the host, now, and replaces its outputs by Const nodes. Nodes are visited in run
    order, so a constant subgraph folds whole."""
    report = _Report("constant_folding", graph)
    edit = graph.edit()
    cap = config.max_constant_bytes
    values: dict[Output, np.ndarray] = {}
    for op in graph.ops:
        if op._type == "Const":
            value = graph.constant(op._outputs[0])
            if value is not None:
                values[op._outputs[0]] = value
            continue
        outputs = op._outputs
        if not outputs or op._control_inputs or op._type == "Placeholder":
            continue
        for i in op._inputs:
            if i not in values:
                break
        else:
            args = [values[i] for i in op._inputs]
            if graph.replaceable(op):
                _fold(graph, edit, report, op, args, values, cap)
    report.removed.extend(n for n in graph.apply(edit) if n not in report.folded)
    return report.done(graph)


def _fold(
    graph: PlanGraph,
    edit: Edit,
    report: _Report,
    op: Operation,
    args: list[np.ndarray],
    values: dict[Output, np.ndarray],
    cap: int,
) -> None:
    """Folds `op`, whose inputs are the constants `args`, when its kernel may run now and
    succeeds; records why not in `report` otherwise."""
    kernel = graph.host_kernel(op)
    if kernel is None or not kernel.trusted:
        return  # a user kernel may have effects the optimizer cannot see
    too_big = _static_bytes(op, cap)
    if too_big is not None:
        report.deferred.append((op._name, too_big))
        return
    try:
        results = _run_on_host(graph.host, op, kernel, args)
    except Exception as e:  # deferred: the run raises it, with the node's context
        report.deferred.append((op._name, f"its kernel raised {describe_exception(e)}"))
        return
    problem = _check_folded(op, results, cap)
    if problem is not None:
        report.deferred.append((op._name, problem))
        return
    outputs = op._outputs
    host_outputs = graph.kernel(op).flat_host_outputs(op._attrs)
    consts = []
    for j, (value, (dtype, _)) in enumerate(zip(results, op._output_specs)):
        name = op._name if len(outputs) == 1 else graph.new_name(f"{op._name}/folded_{j}")
        device = graph.host if j in host_outputs else None
        const = graph.new_const(value, dtype, name, op, device)
        consts.append(const)
        values[outputs[j]] = const._attrs["value"]
    edit.replace(op, [c._outputs[0] for c in consts], consts)
    report.folded.append(op._name)


def _static_bytes(op: Operation, cap: int) -> str | None:
    """Why `op`'s outputs are too large to fold, judged from their static shapes; None when
    they may fit."""
    for dtype, shape in op._output_specs:
        dims = shape.dims
        if dims is None or None in dims:
            continue
        size = math.prod(dims) * (dtype.np_dtype.itemsize if not dtype.is_string else 8)
        if size > cap:
            return f"its output would take {size} bytes, over max_constant_bytes={cap}"
    return None


def _run_on_host(host: Device, op: Operation, kernel: Any, args: list[np.ndarray]) -> list[Any]:
    """`op`'s kernel run once on constant inputs; its outputs, flat."""
    ctx = KernelContext(host, op._name, op._type, (True,) * len(args), 1, None, None)
    op_def = op._op_def
    attrs = registry.kernel_attrs(kernel.fn, op._attrs)
    call_args = op_def.split_inputs(args, op._attrs) if op_def.has_list_inputs else args
    result = kernel.fn(ctx, *call_args, **attrs)
    n = len(op._outputs)
    if op_def.has_list_outputs:
        lengths = op_def.output_arg_lengths(op._attrs)
        per_arg = (result,) if len(lengths) == 1 else tuple(result)
        flat: list[Any] = []
        for arg, value in zip(op_def.outputs, per_arg):
            if arg.is_list:
                flat.extend(value)
            else:
                flat.append(value)
        if len(flat) != n:
            raise InternalError(f"kernel returned {len(flat)} outputs; the op has {n}")
        return flat
    if n == 1:
        return [result]
    flat = list(result)
    if len(flat) != n:
        raise InternalError(f"kernel returned {len(flat)} outputs; the op has {n}")
    return flat


def _check_folded(op: Operation, results: list[Any], cap: int) -> str | None:
    """Why the folded `results` cannot stand for `op`'s outputs; None when they can."""
    for i, (value, (dtype, shape)) in enumerate(zip(results, op._output_specs)):
        if isinstance(value, np.generic):
            value = results[i] = np.asarray(value)
        if type(value) is not np.ndarray:
            return f"its kernel returned a {type(value).__name__} as output {i}"
        if value.dtype != dtype.np_dtype:
            return f"its kernel returned output {i} as {value.dtype}, not {dtype.name}"
        if not shape.is_compatible_with(TensorShape(value.shape)):
            return f"its kernel returned output {i} of shape {list(value.shape)}, not {shape}"
        size = value.nbytes
        if dtype.is_string and size <= cap:
            size += sum(map(len, value.reshape(-1)))
        if size > cap:
            return f"its output takes {size} bytes, over max_constant_bytes={cap}"
    return None


# -- common subgraph elimination -----------------------------------------------------------------

# Tensor attrs (Const values) larger than this are not compared.
_MAX_COMPARED_BYTES = 64 * 1024


def common_subgraph_elimination(graph: PlanGraph, config: OptimizerConfig) -> PassReport:
    """Merges each node into an earlier one with the same op, inputs (after merges), attrs,
    requested and placed device, colocation, kernel label and control inputs: deterministic
    kernels compute the same values from the same inputs. Stateful nodes, fetched nodes and
    nodes of untrusted kernels are never merged away."""
    report = _Report("common_subgraph_elimination", graph)
    edit = graph.edit()
    subst = edit.subst
    # Nodes bucketed by (op type, inputs): most buckets hold one node, whose full key is then
    # never made. A bucket holding more (every Const shares one: no inputs) maps full keys to
    # the first node that may absorb others, so that a plan of n distinct constants costs
    # O(n), not O(n**2). The full key's attrs part is interned per attrs mapping (nodes with
    # equal attrs usually share one mapping).
    buckets: dict[tuple[Any, ...], Operation | dict[Any, Operation]] = {}
    attr_ids: dict[int, int | None] = {}
    interned: dict[Any, int] = {}
    kernel_of, device_of = graph.placement.kernel, graph.placement.device
    fed = graph.fed

    def mergeable(node: Operation) -> bool:  # may stand for the nodes equal to it
        return kernel_of[node].trusted and not (fed and graph.has_fed_output(node))

    for op in graph.ops:
        if not op._outputs or op._op_def.is_stateful:
            continue
        ins = op._inputs
        if subst and ins:
            ins = tuple([edit.resolve(i) for i in ins])
        first = (op._type, ins)
        bucket = buckets.get(first)
        if bucket is None:
            buckets[first] = op  # alone so far: its full key is made only if another comes
            continue
        if not isinstance(bucket, dict):
            only = bucket
            bucket = buckets[first] = {}
            only_key = _full_key(only, edit, attr_ids, interned, device_of)
            if only_key is not None and mergeable(only):
                bucket[only_key] = only
        key = _full_key(op, edit, attr_ids, interned, device_of)
        if key is None or not mergeable(op):
            continue
        other = bucket.get(key)
        if other is None:
            bucket[key] = op
        elif not graph.is_protected(op):
            edit.merge(op, other)
            report.merged.append((op._name, other._name))
    report.removed.extend(graph.apply(edit))
    return report.done(graph)


def _full_key(
    op: Operation,
    edit: Edit,
    attr_ids: dict[int, int | None],
    interned: dict[Any, int],
    device_of: Mapping[Operation, Device],
) -> tuple[Any, ...] | None:
    """What besides op type and inputs two nodes must share to compute the same values;
    None for a node never merged (an attr too large to compare)."""
    attrs = op._attrs
    akey = attr_ids.get(id(attrs), -1)
    if akey == -1:
        value = _attrs_key(attrs)
        akey = attr_ids[id(attrs)] = (
            None if value is None else interned.setdefault(value, len(interned))
        )
    if akey is None:
        return None
    ctrl = op._control_inputs
    ctrl_key: Any = None
    if ctrl:
        deps: list[Any] = []
        for dep in ctrl:
            deps.extend(edit.ctrl_map.get(dep, (dep,)))
        ctrl_key = frozenset(deps)
    group = op._colocation_group
    return (
        akey, op._requested_device, None if group == op._name else group, op._kernel_label,
        ctrl_key, device_of[op],
    )  # fmt: skip


def _attrs_key(attrs: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A hashable key of canonical attrs, equal exactly when the values are (floats by their
    bits: 0.0 and -0.0 differ); None when one is too large to compare."""
    items = []
    for name in sorted(attrs):
        value = _value_key(attrs[name])
        if value is None:
            return None
        items.append((name, value))
    return tuple(items)


def _value_key(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            if value.size > 1024:
                return None
            return ("strings", value.shape, tuple(value.reshape(-1).tolist()))
        if value.nbytes > _MAX_COMPARED_BYTES:
            return None
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, tuple):
        items = [_value_key(v) for v in value]
        return None if None in items else ("tuple", tuple(items))
    return (type(value).__name__, value)


# -- registered rewrites -------------------------------------------------------------------------


class RewriteContext:
    """What a registered rewrite (`register_rewrite`) sees of one node, and how it builds the
    node's replacement.

    Attributes:
        op: the node (an Operation of the plan).
        inputs: its inputs as they are now (rewrites earlier in the pass applied: a producer
            may be a node another rewrite just made).
        device: the device the node is placed on.
        max_constant_bytes: the optimizer's cap on a constant it makes.

    A rewrite returns one Output per output of `op` (each of the same dtype and a compatible
    shape, computed before `op` in run order: an input, a node's output, or something made
    with `const` / `node`), or None to leave `op` alone. Nodes that `op`'s replacement reads
    keep running; nodes it makes unnecessary go only when the rewrite `absorb`s them, vouching
    that the replacement raises whatever they would have.
    """

    __slots__ = ("op", "inputs", "_graph", "_edit", "created", "absorbed")

    def __init__(self, graph: PlanGraph, edit: Edit, op: Operation, inputs: tuple[Output, ...]):
        self.op = op
        self.inputs = inputs
        self._graph = graph
        self._edit = edit
        self.created: list[Operation] = []
        self.absorbed: list[Operation] = []

    @property
    def device(self) -> Device:
        return self._graph.device(self.op)

    @property
    def max_constant_bytes(self) -> int:
        return self._graph.max_constant_bytes

    def constant(self, output: Output) -> np.ndarray | None:
        """`output`'s value when it comes from a Const that is not fed (a read-only array),
        else None."""
        return self._graph.constant(output)

    def known_shape(self, output: Output) -> TensorShape:
        """`output`'s static shape where every run is guaranteed to have it, else an unknown
        shape (the outputs of unchecked user kernels)."""
        return self._graph.known_shape(output)

    def is_fed(self, output: Output) -> bool:
        return output in self._graph.fed

    def device_of(self, value: Operation | Output) -> Device | None:
        """The device a node is placed on, or where a tensor's value lives (None for a fed
        tensor, whose home is decided later)."""
        if isinstance(value, Operation):
            return self._graph.device(value)
        return self._graph.value_device(value)

    def consumers(self, output: Output) -> list[Operation]:
        """The nodes reading `output`, in the graph as this pass found it."""
        return self._graph.consumers(output)

    def reader_devices(self, output: Output) -> set[Device]:
        """The devices the consumers of `output` read it on (as `consumers`)."""
        return self._graph.reader_devices(output)

    def inputs_of(self, op: Operation) -> tuple[Output, ...]:
        """Another node's inputs as they are now (as `inputs` are the node's)."""
        resolve = self._edit.resolve
        return tuple([resolve(i) for i in op._inputs])

    def position(self, op: Operation) -> int:
        """Where `op` runs in the plan, as a sort key (-1 for a node made by this pass)."""
        found = self._edit.position(op)
        return -1 if found is None else found

    def can_absorb(self, op: Operation) -> bool:
        """Whether the replacement may take over `op`'s work: a plan node, not stateful, not
        fetched, no output fed, no control inputs or control dependents."""
        graph = self._graph
        return (
            graph.position(op) is not None
            and graph.replaceable(op)
            and not op._control_inputs
            and not graph.control_dependents(op)
        )

    def absorb(self, *ops: Operation) -> None:
        """Lets `ops` leave the plan once nothing else needs them: the replacement computes
        what they did and raises what they would have."""
        for op in ops:
            if not self.can_absorb(op):
                raise InternalError(
                    f"a rewrite of {self.op.name} ({self.op.type}) absorbs {op.name} "
                    f"({op.type}), which must stay (see RewriteContext.can_absorb)"
                )
        self.absorbed.extend(ops)

    def const(self, value: Any, dtype: Any = None, *, name: str | None = None) -> Output:
        """A new constant (converted as `Const` converts literals), on the node's device."""
        array = dtypes.convert_to_array(value, None if dtype is None else dtypes.as_dtype(dtype))
        const = self._graph.new_const(array, array.dtype, self._name(name, "Const"), self.op)
        self.created.append(const)
        return const._outputs[0]

    def node(
        self,
        op_type: str | OpDef,
        inputs: Sequence[Any],
        attrs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        kernels: Sequence[KernelDef] = (),
    ) -> Operation:
        """A new node of the registered op `op_type` on the node's device (its request,
        colocation and source too), validated by the op's shape function. `inputs` has one
        entry per input arg (a list for a list arg). `name`: the node's own name, for the node
        that stands for it (errors then name it); by default a new name under it.

        `op_type` may be an OpDef that is not registered, with its `kernels` (KernelDefs made
        for it): an op only plans run, such as a fusion's kernel, which then never appears in
        a Graph, a GraphDef or the op registry.

        Raises:
            NotFoundError: no kernel for it on that device (the rewrite is then not applied).
        """
        base = op_type.name if isinstance(op_type, OpDef) else op_type
        node = self._graph.new_node(
            op_type, inputs, attrs or {}, self._name(name, base), self.op, kernels
        )
        self.created.append(node)
        return node

    def _name(self, name: str | None, base: str) -> str:
        if name is None:
            return self._graph.new_name(f"{self.op.name}/{base}")
        if name == self.op.name and all(op._name != name for op in self.created):
            return name
        if self._graph.is_taken(name):
            raise InternalError(f"a rewrite of {self.op.name} names a new node {name!r}, taken")
        return name


def remove_identity(rw: RewriteContext) -> list[Output] | None:
    """The rewrite of Identity-like nodes (`register_rewrite(op, remove_identity,
    pass_name="dependency_optimization")`): the node is its input 0, unless the value crosses
    devices through it (read from another device, or read on another): an Identity placed to
    stage a value on a device stays, as Grappler keeps device-crossing Identities. (A fed
    input is read where its readers are, which removing the node does not change.)"""
    x = rw.inputs[0]
    here = rw.device
    if not rw.is_fed(x) and rw.device_of(x) is not here:
        return None
    if any(device is not here for device in rw.reader_devices(rw.op.outputs[0])):
        return None
    return [x]


def _rule_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _run_rewrites(
    graph: PlanGraph, config: OptimizerConfig, pass_name: str, report: _Report, into: list[Any]
) -> Edit:
    """Tries the registered rewrites of `pass_name` on every node that may be replaced."""
    edit = graph.edit()
    builtin = (remove_identity,) if pass_name == "dependency_optimization" else ()
    lookup = registry.rewrites_for
    graph.max_constant_bytes = config.max_constant_bytes
    for op in graph.ops:
        rules = lookup(op._type, pass_name)
        if builtin and op._type == "Identity":
            rules = builtin + rules
        if not rules or op._op_def.is_stateful or graph.has_fed_output(op):
            continue
        # A fetched tensor's producer may only be replaced by a new node of its own name (a
        # fusion rooted at it): the fetch is then computed, never an alias of another value.
        fetched = graph.is_protected(op)
        if fetched and op in graph.fetched_ops.values():
            continue
        inputs = tuple([edit.resolve(i) for i in op._inputs])
        for rule in rules:
            rw = RewriteContext(graph, edit, op, inputs)
            try:
                result = rule(rw)
            except NotFoundError as e:  # a node it would make has no kernel there
                report.deferred.append((op._name, f"{_rule_name(rule)}: {e.message}"))
                _discard(graph, rw)
                continue
            except InternalError:
                raise
            except Exception as e:
                raise InternalError(
                    f"the {pass_name} rewrite {_rule_name(rule)} of node {op._name} "
                    f"({op._type}) failed: {describe_exception(e)} (defined at {op.source})",
                    op._name,
                    op._type,
                ) from e
            if result is None:
                _discard(graph, rw)
                continue
            outputs = _checked_replacement(rule, rw, edit, result)
            if fetched and not _stands_in(op, outputs, rw.created):
                _discard(graph, rw)
                continue
            edit.replace(op, outputs, rw.created, rw.absorbed)
            into.append((op._name, _rule_name(rule)))
            break
    return edit


def _stands_in(op: Operation, outputs: Sequence[Output], created: Sequence[Operation]) -> bool:
    """Whether `outputs` all come from one node the rewrite made under `op`'s name, that is
    not a constant (whose value the run would hand out as it is)."""
    producers = {out._op for out in outputs}
    if len(producers) != 1:
        return False
    (node,) = producers
    return node in created and node._name == op._name and node._type != "Const"


def _discard(graph: PlanGraph, rw: RewriteContext) -> None:
    for op in rw.created:
        graph.names.discard(op._name)


def _checked_replacement(rule: Any, rw: RewriteContext, edit: Edit, result: Any) -> list[Output]:
    op = rw.op

    def bad(what: str) -> InternalError:
        return InternalError(
            f"the rewrite {_rule_name(rule)} of node {op.name} ({op.type}) {what}",
            op.name,
            op.type,
        )

    if isinstance(result, Output) or not isinstance(result, (list, tuple)):
        raise bad(f"returned {type(result).__name__}; expected a list of {len(op.outputs)}")
    if len(result) != len(op._outputs):
        raise bad(f"returned {len(result)} outputs; the node has {len(op._outputs)}")
    at = rw._graph.position(op)
    for old, new in zip(op._outputs, result):
        if type(new) is not Output:
            raise bad(f"returned a {type(new).__name__} for {old.name}; expected an Output")
        if new._dtype is not old._dtype:
            raise bad(f"replaced {old.name} ({old.dtype.name}) by a {new.dtype.name} tensor")
        if not old._shape.is_compatible_with(new._shape):
            raise bad(f"replaced {old.name} {old.shape} by a tensor of shape {new.shape}")
        producer = new._op
        if producer in rw.created or new in rw._graph.fed:
            continue
        where = edit.position(producer)
        if where is None or at is None or where >= at:
            raise bad(f"replaced {old.name} by {new.name}, which does not come before it")
    return list(result)


def arithmetic_optimization(graph: PlanGraph, config: OptimizerConfig) -> PassReport:
    """The `arithmetic_optimization` rewrites op libraries registered (`register_rewrite`):
    exact simplifications, such as x * 1 where dtype and broadcasting make it exact."""
    report = _Report("arithmetic_optimization", graph)
    edit = _run_rewrites(graph, config, "arithmetic_optimization", report, report.simplified)
    report.removed.extend(graph.apply(edit))
    return report.done(graph)


def remapping(graph: PlanGraph, config: OptimizerConfig) -> PassReport:
    """The `remapping` rewrites op libraries registered: fusions of several nodes into one,
    such as a gather of a gather with constant indices."""
    report = _Report("remapping", graph)
    edit = _run_rewrites(graph, config, "remapping", report, report.fused)
    report.removed.extend(graph.apply(edit))
    return report.done(graph)


def dependency_optimization(graph: PlanGraph, config: OptimizerConfig) -> PassReport:
    """Removes Identity nodes (and ops registered with `remove_identity`, such as StopGradient)
    whose output nothing observes, their consumers reading the input, and NoOps, their
    dependents taking over their control inputs (where that adds no more edges than it
    removes, as Grappler's dependency optimizer)."""
    report = _Report("dependency_optimization", graph)
    done: list[Any] = []
    edit = _run_rewrites(graph, config, "dependency_optimization", report, done)
    for op in graph.ops:
        if op._type != "NoOp" or graph.is_protected(op) or op in edit.ctrl_map:
            continue
        n_in = len(op._control_inputs) + len(edit.extra_ctrl.get(op, ()))
        n_out = len(graph.control_dependents(op))
        if n_in * n_out > n_in + n_out:
            continue
        edit.replace(op, ())
    report.removed.extend(graph.apply(edit))
    return report.done(graph)


#: The graph passes, in the order they run (each an OptimizerConfig switch).
PASSES: tuple[tuple[str, Callable[[PlanGraph, OptimizerConfig], PassReport]], ...] = (
    ("constant_folding", constant_folding),
    ("common_subgraph_elimination", common_subgraph_elimination),
    ("arithmetic_optimization", arithmetic_optimization),
    ("remapping", remapping),
    ("dependency_optimization", dependency_optimization),
)


class Optimized:
    """What `optimize` gives the plan: the nodes to run (their devices and kernels are in the
    placement it was given), each fetched tensor's Output among them, and the reports."""

    __slots__ = ("ops", "fetches", "reports")

    def __init__(self, ops: list[Operation], fetches: dict[Output, Output], reports: list[Any]):
        self.ops = ops
        self.fetches = fetches
        self.reports = reports


def optimize(
    ops: Sequence[Operation],
    placement: Placement,
    fed: Collection[Output],
    targets: Iterable[Output | Operation],
    host: Device,
    config: OptimizerConfig,
    check_kernel_outputs: bool | None = None,
) -> Optimized:
    """Runs the passes `config` turns on over a pruned, placed graph (minigraph.plan's).

    `placement` gains the devices and kernels of the nodes the passes make. Passes run in
    PASSES order, up to `config.iterations` times, stopping once a round changes nothing; a
    pass's reports of several rounds are merged into one.
    """
    graph = PlanGraph(ops, placement, fed, targets, host, check_kernel_outputs)
    reports: dict[str, PassReport] = {}
    for _ in range(config.iterations):
        changed = False
        for name, run in PASSES:
            if not getattr(config, name) or not graph.ops:
                continue
            report = run(graph, config)
            changed = changed or report.changed
            reports[name] = _merged(reports[name], report) if name in reports else report
        if not changed:
            break
    if graph.made_constants:
        _copy_exposed_constants(graph)
    fetches = {user: now for user, now in graph.fetches.items() if now is not user}
    return Optimized(graph.ops, fetches, list(reports.values()))


# A constant the optimizer made (a folded value, a Shape of a known shape) stands for a value
# each run used to compute afresh. Where a kernel may hand it to a fetch as it is (a fetched
# Identity of a folded node: trusted kernels may return an input itself), the run would give
# the user the constant's read-only array, the same one every run, where the graph as built
# gives a new, writable array: such a constant is read through a plan-private copy node.
_COPY = OpDef(
    "OptimizerConstantCopy",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type"],
    shape_fn=lambda ctx: ctx.input_shapes[0],
    doc="A new array equal to the input: a constant the optimizer made, read by a fetch.",
)


def _copy_kernel(ctx: KernelContext, value: np.ndarray, T: Any = None) -> np.ndarray:
    return value.copy()


_COPY_KERNELS = (KernelDef(_COPY, "CPU", _copy_kernel, {}, {}, frozenset(), "", 0, trusted=True),)


def _same_static_shape(graph: PlanGraph, a: Output, b: Output) -> bool:
    """Whether input `a` had output `b`'s static shape (dims known and unknown alike) when `b`
    was inferred: what a trusted kernel returning its input as it is (Identity, a Cast to its
    own dtype) infers. A node whose output shape differs from the input's (a MatMul of a
    weight) computes its output."""
    return graph.replaced_shape.get(a, a._shape)._dims == b._shape._dims


def _copy_exposed_constants(graph: PlanGraph) -> None:
    """Reads each constant the optimizer made that a fetch may be (through kernels that may
    return an input as it is: any input of an untrusted kernel, an input of an output's dtype
    and static shape for a trusted one) through a copy node, on host (numpy) devices; a value on
    another device reaches the user as a new host array anyway."""
    fed = graph.fed
    # Output -> the devices of the nodes that may hand it on as it is (None: fetched itself).
    exposed: dict[Output, set[Device | None]] = {out: {None} for out in graph.fetches.values()}
    kernel_of, device_of = graph.placement.kernel, graph.placement.device
    for op in reversed(graph.ops):
        outs = [o for o in op._outputs if o in exposed]
        if not outs:
            continue
        trusted = kernel_of[op].trusted
        for inp in op._inputs:
            if inp not in fed and (
                not trusted
                or any(inp._dtype is o._dtype and _same_static_shape(graph, inp, o) for o in outs)
            ):  # fmt: skip
                exposed.setdefault(inp, set()).add(device_of[op])
    edit = graph.edit()
    for const in graph.ops:
        out = const._outputs[0] if const in graph.made_constants else None
        readers = exposed.get(out) if out is not None else None
        if not readers:
            continue
        if graph.device(const).device_type == "CPU":
            device = graph.device(const)
        elif any(d is not None and d.device_type == "CPU" for d in readers):
            # Read on a CPU from another device: the plan copies a constant across once, for
            # every run; a copy node on the host makes a new array per run.
            device = graph.host
        else:
            continue  # a value fetched from another device reaches the user as a new array
        source = graph.new_const(
            const._attrs["value"], out._dtype, graph.new_name(f"{const._name}/value"), const,
            device,
        )  # fmt: skip
        copy = graph.new_node(
            _COPY, [source._outputs[0]], {"T": out._dtype}, graph.new_name(f"{const._name}/copy"),
            const, _COPY_KERNELS, device,
        )  # fmt: skip
        edit.inserted.setdefault(const, []).extend([source, copy])
        edit.subst[out] = copy._outputs[0]
    graph.apply(edit)


# -- input forwarding ----------------------------------------------------------------------------

# Values smaller than this (known from their static shape) are not worth a guard's per-run cost.
_GUARD_MIN_BYTES = 64 * 1024


class _FreshOutputs:
    """Wraps a trusted kernel that might hand an input back as its output (trusted kernels may
    return an input itself, as Identity does): such an output becomes a copy, so that the plan
    may let a later node overwrite it. `picks[j]`: the input positions output j might be."""

    __slots__ = ("call", "picks", "single")

    def __init__(self, call: Any, picks: tuple[tuple[int, ...], ...]):
        self.call = call
        self.picks = picks
        self.single = len(picks) == 1

    def __call__(self, *inputs: Any) -> Any:
        result = self.call(*inputs)
        if self.single:
            for i in self.picks[0]:
                if result is inputs[i]:
                    return result.copy()
            return result
        results = list(result)
        for j, picks in enumerate(self.picks):
            for i in picks:
                if results[j] is inputs[i]:
                    results[j] = results[j].copy()
        return tuple(results)


def forward_inputs(
    steps: Sequence[Any],
    slot_of: Mapping[tuple[Output, Device], int],
    n_feeds: int,
    kept: Collection[int],
    last_use: Mapping[int, int],
    parallel: bool,
) -> int:
    """Sets each node step's `KernelContext.forwardable_inputs`: the inputs whose buffer the
    node may write its output into. Returns how many inputs are forwardable in all.

    Input i of step k is forwardable when its value was made in this run by a trusted kernel
    on k's device (a host device: numpy arrays), is neither fed, constant nor fetched, is read
    once by k and never after k (with inter-op threads: k is its only reader), and no other
    value that may be the same array is read after k or is another input of k. Values may be
    the same array where a trusted kernel returned an input itself (as Identity does: trust
    allows it) or an untrusted one a view of it; copies between devices are new arrays. Where
    a trusted kernel could pass a fed, constant or still needed value through to a value that
    a later node might overwrite, its step is wrapped so that such an output is a copy (only
    for values that may be large, and never for inline calls, whose fast path it would cost).
    """
    # Per slot (lists: this runs once per plan over every step): its dtype, static dims and
    # device. A fetched tensor a rewrite rebuilt has two keys for one slot, of one dtype.
    n = 1 + max(slot_of.values(), default=-1)
    for step in steps:
        for s in step.outs:
            n = max(n, s + 1)
    dtype_of: list[Any] = [None] * n
    dims_of: list[Any] = [None] * n
    device_of: list[Any] = [None] * n
    for (out, device), s in slot_of.items():
        dtype_of[s] = out._dtype
        dims_of[s] = out._shape._dims
        device_of[s] = device
    kept = kept if isinstance(kept, (set, frozenset)) else set(kept)
    uses = [0] * n
    for step in steps:
        for s in step.ins:
            uses[s] += 1
    last = [-1] * n
    for s, i in last_use.items():
        last[s] = i
    # Union-find over slots that may be one array, and per class root: the last step reading
    # any of them, whether one is fed, constant or fetched, and (inter-op threads) whether one
    # has a reader that may run at any time relative to the class's newest value.
    parent = list(range(n))
    latest = last[:]
    unsafe = [s < n_feeds or s in kept for s in range(n)]
    loose = [False] * n
    made_by = [False] * n  # made by a trusted node step

    def find(s: int) -> int:
        root = parent[s]
        if root == s:
            return s
        while parent[root] != root:
            root = parent[root]
        while parent[s] != root:
            parent[s], s = root, parent[s]
        return root

    def union(made: int, source: int) -> None:
        ra, rb = find(made), find(source)
        if ra != rb:
            parent[rb] = ra
            if latest[rb] > latest[ra]:
                latest[ra] = latest[rb]
            unsafe[ra] = unsafe[ra] or unsafe[rb]
            loose[ra] = loose[ra] or loose[rb]
        if uses[source] > 1:
            loose[ra] = True  # `source` has another reader, which may run at any time

    def may_share(s: int, end: int, out_slot: int) -> bool:
        """Whether writing into the value of `out_slot` at step `end` could change `s`."""
        root = find(s)
        if unsafe[root]:
            return True
        if parallel:
            return loose[root] or uses[s] > 1
        return latest[root] > end or any(find(t) == root for t in steps[end].ins if t != out_slot)

    read_counts: dict[int, dict[int, int]] = {}

    def reads_of(end: int) -> dict[int, int]:
        """How often step `end` reads each slot (counted once per step: a node of n inputs
        asked about each of them costs O(n), not O(n**2))."""
        found = read_counts.get(end)
        if found is None:
            found = read_counts[end] = {}
            for t in steps[end].ins:
                found[t] = found.get(t, 0) + 1
        return found

    def forward_end(s: int, k: int) -> int | None:
        """The step that may overwrite `s`, read last after step k by a node that might
        forward it and large enough to be worth a guard; None when none may."""
        end = last[s]
        if end <= k or s in kept or (parallel and uses[s] != 1):
            return None
        consumer = steps[end]
        device = device_of[s]
        if consumer.op is None or consumer.device is not device or device.xp is not np:
            return None
        if reads_of(end).get(s) != 1:
            return None
        dims, dtype = dims_of[s], dtype_of[s]
        if dims is not None and None not in dims:
            itemsize = 8 if dtype.is_string else dtype.np_dtype.itemsize
            if math.prod(dims) * itemsize < _GUARD_MIN_BYTES:
                return None
        for o in consumer.op._outputs:  # an output that could have the value's dtype and shape
            if o._dtype is dtype and _compatible(dims, o._shape._dims):
                return end
        return None

    def spoils(s: int, o: int, k: int) -> bool:
        """Whether `o`, made at step k, being `s` itself would keep a later node from
        overwriting `s`: `o` is fetched, or read after that node, or by it too."""
        end = forward_end(s, k)
        if end is None:
            return False
        return o in kept or last[o] > end or o in steps[end].ins

    count = 0
    any_made = False
    for k, step in enumerate(steps):
        if step.op is None:
            continue  # a copy to another device: a new array, which no kernel overwrites
        ins = step.ins
        allowed: list[int] = []
        device = step.device
        if any_made and ins and device.xp is np:
            roots = None
            for i, s in enumerate(ins):
                if not made_by[s] or device_of[s] is not device:
                    continue
                if roots is None:
                    roots = [find(t) for t in ins]
                    root_counts: dict[int, int] = {}
                    for t in roots:
                        root_counts[t] = root_counts.get(t, 0) + 1
                root = roots[i]
                # Not fed, constant or fetched; no other input is (or may be) the same array.
                if unsafe[root] or root_counts[root] != 1:
                    continue
                if parallel:
                    if uses[s] != 1 or loose[root]:
                        continue
                elif latest[root] > k:
                    continue
                allowed.append(i)
            if allowed and step.ctx is not None:
                step.ctx.forwardable_inputs = frozenset(allowed)
                count += len(allowed)
        if not step.trusted:  # may return views of any input
            for o in step.outs:
                for s in ins:
                    union(o, s)
            continue
        inline = type(step.call) is InlineCall
        guards: list[tuple[int, ...]] | None = None
        for j, o in enumerate(step.outs):
            dtype = dtype_of[o]
            if dtype is None:
                continue  # computed for its effects only (a fed output): never read
            made_by[o] = any_made = True
            end = -1
            picks: list[int] = []
            for i, s in enumerate(ins):
                if dtype_of[s] is not dtype or not _compatible(dims_of[s], dims_of[o]):
                    continue  # a trusted kernel returns an input only as its own output
                root = find(s)
                if not unsafe[root] and (
                    (not loose[root] and uses[s] <= 1) if parallel else latest[root] <= k
                ):
                    # s (and whatever may be its array) is read no more after this step: if
                    # o is s, nobody else sees it. (The usual case, a chain: no guard.)
                    union(o, s)
                    continue
                if end == -1:
                    end = None if inline else forward_end(o, k)
                if (
                    not inline
                    and i not in allowed
                    and (
                        (end is not None and may_share(s, end, o))
                        or (made_by[s] and spoils(s, o, k))
                    )
                ):
                    picks.append(i)  # guarded: the output is never that input
                else:
                    union(o, s)
            if picks:
                if guards is None:
                    guards = [()] * len(step.outs)
                guards[j] = tuple(picks)
        if guards is not None:
            step.call = _FreshOutputs(step.call, tuple(guards))
            step.direct = None
    return count


def _compatible(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    """Whether two static shapes' dims (None: unknown rank) may be the same shape."""
    if a is None or b is None or a == b:
        return True
    if len(a) != len(b):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a, b))
