"""Plans: what a Session compiles once per (feeds, fetches) signature, and how they run.

`compile_plan` runs a pipeline of passes, each a function of this module that can be read and
tested alone (`minigraph.placer.place` is the second):

- `prune(fed, targets) -> ops`: the nodes the fetches need, in creation order (topological:
  the graph is append-only); fed tensors cut the graph above them, control inputs are kept.
- `place(ops, devices) -> Placement`: each node's device and kernel.
- `optimize(...)` (minigraph.optimizer): the graph optimizer's passes rewrite the placed graph
  (constant folding, common subgraph elimination, registered rewrites, Identity and NoOp
  removal); the user's Graph never changes.
- `feed_homes(feeds, ops, placement, host) -> {feed: device}`: where each fed value lives.
- `insert_copies(ops, placement, homes, host) -> Layout`: the steps in run order, a slot per
  value, and one copy step per (value, destination device) where edges cross devices.
- `fold(steps, bind, constants) -> steps`: Consts (and their copies) run once, at compile time.
- `bind_kernels(steps, bind)`: each node step's kernel call (context, attrs, specialisation,
  output checks for untrusted kernels).
- `fetch_table(targets, layout)`: which slots the run returns, in result order.
- `liveness(steps, kept) -> (last_use, frees)`: each value is released after its last use.
- `forward_inputs(...)` (minigraph.optimizer): which inputs each node may overwrite with its
  output (`KernelContext.forwardable_inputs`), from liveness.
- `trust_tables(plan, slot_of)`, `dependency_tables(plan)`: read-only feeds for untrusted
  kernels; the step graph for inter-op parallelism (only when needed).
- `generate(plan)` (codegen): the straight-line function, made on the second run.

The plan then runs as one straight-line Python function generated from its steps (as
torch.fx's codegen does): every value is a local variable, deleted after its last consumer, and
a failing step is found from the traceback's line number, so the hot path carries no
bookkeeping. Tracing and inter-op parallelism use the step interpreters of `minigraph.executor`
over the same steps instead.

Trust is decided here, once per plan, so that runs of built-in kernels pay nothing for it: the
outputs of kernels not registered `trusted=True` go through an `_OutputCheck` (dtype, shape,
array type, output count), and when such a kernel can see a fed array the plan says so
(`protect`: feeds to pass read-only; `unalias`: results that may be views of a feed).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import linecache
import os
import sys
import threading
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from keyword import iskeyword
from operator import attrgetter
from types import MappingProxyType
from typing import Any, NoReturn

import numpy as np

from minigraph.devices import Device
from minigraph.errors import (
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    UnimplementedError,
    describe_exception,
)
from minigraph.graph import Operation, Output
from minigraph.kernel import InlineCall, Input, KernelContext, KernelSpec
from minigraph.optimizer import forward_inputs, optimize
from minigraph.placer import Placement, place
from minigraph.registry import kernel_attrs

__all__ = [
    "MAX_GENERATED_STEPS",
    "KernelBinder",
    "Layout",
    "Plan",
    "Step",
    "bind_kernels",
    "compile_plan",
    "dependency_tables",
    "feed_homes",
    "fetch_table",
    "fold",
    "generate",
    "insert_copies",
    "install_interpreters",
    "liveness",
    "node_error",
    "prune",
    "recover",
    "trust_tables",
]


class Step:
    """One unit of a plan: a kernel call or a copy between devices."""

    __slots__ = (
        "name", "op_type", "device", "origin", "call", "ins", "outs", "op", "specs", "direct",
        "check", "trusted", "ctx",
    )  # fmt: skip

    def __init__(self, name, op_type, device, origin, call, ins, outs, op=None, specs=()):
        # `call(*inputs)` runs the step; `direct`, when set, is (fn, ctx, attrs) such that
        # call(*inputs) == fn(ctx, *inputs, **attrs), which generated code calls without the
        # partial's per-call keyword dict.
        self.direct: tuple[Any, Any, dict[str, Any]] | None = None
        # `check(result)`, when set, validates a kernel's return value and gives its outputs
        # as a tuple; `trusted`: the step's code is the framework's or a trusted kernel.
        self.check: _OutputCheck | None = None
        self.trusted = True
        self.ctx: KernelContext | None = None  # a node step's, once bound
        self.name = name
        self.op_type = op_type
        self.device = device
        self.origin = origin  # the Operation whose user code the step comes from
        self.call = call
        self.ins = ins
        self.outs = outs
        self.op = op
        self.specs = specs

    @property
    def source(self) -> str:
        # Looked up only when needed (errors): decoding a line number is not free.
        return self.origin.source


class Plan:
    """A compiled (feeds, fetches) signature."""

    def __init__(self) -> None:
        self.feed_order: list[Output] = []  # feeds in slot order
        self.feed_devices: list[Device] = []
        self.fetch_index: dict[Any, int | None] = {}  # target -> result index (None: an op)
        self.fetch_slots: list[int] = []  # the slots returned, in result order
        self.fetch_slot_set: frozenset[int] = frozenset()
        self.fetch_devices: list[tuple[int, Device]] = []  # results that live off the host
        self.host_feeds = True  # every feed is consumed on the host: no per-run copies
        # Feeds an untrusted kernel may see (passed read-only, or copied on a device), and
        # results that may be views of a fed array (see trust_tables).
        self.protect: frozenset[int] = frozenset()
        self.unalias: tuple[int, ...] = ()
        # Results that may be a caller's fed array passed through by kernels (Identity, a Cast
        # to the same dtype) without being a fetch of the fed tensor (see fed_pass_through).
        self.pass_through: tuple[int, ...] = ()
        # Host feeds and fetches, no protection, plain generated code: Session.run's hot path.
        self.simple = False
        self.frees: list[list[int]] = []  # per step: slots whose last use it is
        # For inter-op parallelism: per step, how many steps it waits for and who waits on it.
        self.n_deps: list[int] = []
        self.dependents: list[list[int]] = []
        self.uses: dict[int, int] = {}
        self.steps: list[Step] = []
        self.constants: dict[int, Any] = {}  # slot -> value computed at compile time
        self.n_slots = 0
        self.last_use: dict[int, int] = {}
        self.fn: Any = None
        self.source = ""
        self.code: Any = None
        self.line_to_step: dict[int, int] = {}
        self.slot_names: dict[int, str] = {}  # the generated function's name of each slot
        self.placement: dict[str, str] = {}
        self.optimizer: list[Any] = []  # the graph optimizer's PassReports
        # Runs through the step interpreter for good: too many steps to generate code for, or
        # compiling its code failed (see generate).
        self.interpret_only = False


# Generated code needs a file name per plan (tracebacks and linecache tell plans apart by it).
# CPython keeps a code object's file name interned for good, so names of dead plans are reused
# (a free list; list.append and list.pop are atomic) rather than made fresh for every plan.
_free_plan_numbers: list[int] = []
_plan_numbers = itertools.count()


def _plan_file_name() -> tuple[str, int]:
    try:
        number = _free_plan_numbers.pop()
    except IndexError:
        number = next(_plan_numbers)
    return f"<minigraph-plan-{number}>", number


def _release_plan_file_name(name: str, number: int) -> None:
    linecache.cache.pop(name, None)
    _free_plan_numbers.append(number)


def _inlined(step: Step) -> bool:
    """Whether generated code calls the step's InlineCall as a direct call plus fallback (a
    step whose outputs are checked calls the InlineCall object instead)."""
    return type(step.call) is InlineCall and len(step.outs) == 1 and step.check is None


_codegen_lock = threading.Lock()

#: Plans of more steps than this run through the step interpreter on every run: generating
#: their code would take seconds and about 7 KiB per step (CPython's compiler), and from about
#: 80k steps the generated function runs no faster than the interpreter (measured: 100k
#: Identity steps take 0.24 s generated, 0.15 s interpreted).
MAX_GENERATED_STEPS = 1 << 16


def generate(plan: Plan) -> Any:
    """The plan's generated function, made on first use (once, whichever thread asks).

    A plan of more than MAX_GENERATED_STEPS steps, or one whose code the compiler cannot make
    (MemoryError, RecursionError), keeps its interpreting `fn` for good: a plan that ran once
    never stops running.
    """
    with _codegen_lock:
        if plan.code is None and not plan.interpret_only:
            if len(plan.steps) > MAX_GENERATED_STEPS:
                plan.interpret_only = True
            else:
                try:
                    with _gc_paused():  # compiling allocates much and frees little
                        _codegen(plan)
                except (MemoryError, RecursionError):
                    plan.interpret_only = True
        return plan.fn


# Threads inside `_gc_paused`, and whether each turns collections back on when it leaves.
_pauses: dict[int, bool] = {}


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic collections inside: compiling makes many new objects and no garbage, which
    collections would only traverse."""
    me = threading.get_ident()
    if me in _pauses:  # nested on this thread: the outer pause decides
        yield
        return
    _pauses[me] = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _pauses.pop(me, False):
            gc.enable()


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: a lock another thread held then, or a
    collection pause it was in, would never end. Both start afresh here."""
    global _codegen_lock
    _codegen_lock = threading.Lock()
    me = threading.get_ident()
    inherited = False
    for thread in [t for t in _pauses if t != me]:
        inherited = _pauses.pop(thread) or inherited
    if inherited:  # a vanished thread would have turned collections back on
        if me in _pauses:
            _pauses[me] = True
        else:
            gc.enable()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


# The step interpreters are minigraph.executor's, a layer above (it runs Plans): it installs
# them here when imported (the package imports it), so this module never imports upwards.
_interpreters: dict[str, Any] = {}


def install_interpreters(interpret: Any, resume: Any) -> None:
    """Installs the step interpreters a plan's first run and error recovery use (for
    `minigraph.executor`)."""
    _interpreters["interpret"] = interpret
    _interpreters["resume"] = resume


class _FirstRun:
    """A new plan's `fn`. The first run interprets the steps (`minigraph.executor`), so that
    a plan run once (a large graph run for one result) never pays for generating code, and a
    first run costs about what compiling the plan did; later runs generate the straight-line
    function, which then replaces this object as `fn`."""

    __slots__ = ("plan", "cancel", "used")

    def __init__(self, plan: Plan, cancel: Any):
        self.plan = plan
        self.cancel = cancel
        self.used = False

    def __call__(self, feeds: list[Any]) -> Any:
        if self.used and not self.plan.interpret_only:
            fn = generate(self.plan)
            if fn is not self:
                # The generated function must own the only reference to its list of fed values
                # (it drops the list once unpacked, releasing each value after its last use).
                return fn(_hand_over(feeds))
        self.used = True
        return _interpreters["interpret"](self.plan, feeds, None, False, self.cancel)


def _hand_over(items: list[Any]) -> list[Any]:
    """A new list of `items`' values; `items` is left empty."""
    moved = items.copy()
    items.clear()
    return moved


def _codegen(plan: Plan) -> None:
    """Compiles the plan's steps into one straight-line function `_run(feeds) -> fetches`.

    `feeds` is a list the function owns: it is dropped once unpacked, so that each fed value
    (a device copy, a converted array) is released after its last use, as intermediates are.
    """
    # Bound values (kernels, contexts, attrs, constants) are globals of the generated function,
    # not closure cells: CPython compiles thousands of cells in superlinear time, while global
    # loads are specialised by the interpreter and cost about as much as locals.
    constants = plan.constants
    namespace: dict[str, Any] = {f"c{s}": v for s, v in constants.items()}
    for i, step in enumerate(plan.steps):
        if _inlined(step):
            inline = step.call
            namespace[f"f{i}"] = inline.fn
            namespace.update(
                {f"g{i}_{j}": a for j, a in enumerate(inline.args) if not isinstance(a, Input)}
            )
        elif step.direct is None:
            namespace[f"k{i}"] = step.call
        else:
            fn, ctx, attrs = step.direct
            namespace[f"k{i}"] = fn
            namespace[f"x{i}"] = ctx
            namespace.update({f"a{i}_{j}": v for j, v in enumerate(attrs.values())})
        if step.check is not None:
            check = step.check
            namespace[f"q{i}"] = check.one if len(step.outs) == 1 else check

    # Local variables are reused once their value is released (register allocation): a
    # chain needs two names instead of one per step, and CPython compiles fewer names faster.
    names: dict[int, str] = {s: f"c{s}" for s in constants}
    released: list[str] = []
    fresh = itertools.count()

    def bind(slot: int) -> str:
        name = names[slot] = released.pop() if released else f"v{next(fresh)}"
        return name

    body: list[str] = []
    body.append("def _run(feeds):")
    n_feeds = len(plan.feed_order)
    if n_feeds:
        body.append(f"    ({', '.join(bind(i) for i in range(n_feeds))},) = feeds")
    body.append("    del feeds")
    frees = plan.frees
    line_to_step = {}
    for i, step in enumerate(plan.steps):
        args = ", ".join([names[s] for s in step.ins])
        checked = step.check is not None
        # Outputs are named before the step's inputs are released: never an input's name.
        if len(step.outs) == 0:
            target = ""
        elif len(step.outs) == 1:
            target = f"{bind(step.outs[0])} = "
        else:
            target = f"({', '.join([bind(s) for s in step.outs])},) = "
        if step.direct is not None:
            attrs = step.direct[2]
            keywords = "".join(f", {k}=a{i}_{j}" for j, k in enumerate(attrs))
            args = f"x{i}, {args}{keywords}" if args else f"x{i}{keywords}"
        call = f"k{i}({args})"
        if checked:
            call = f"q{i}({call})"  # on the kernel's line: errors map to the same step
        if _inlined(step):
            # The direct call alone: when it raises, `recover` resumes the run in the step
            # interpreter from this step, whose InlineCall then runs its fallback.
            inline_args = [
                names[step.ins[a.index]] if isinstance(a, Input) else f"g{i}_{j}"
                for j, a in enumerate(step.call.args)
            ]
            call = f"f{i}({', '.join(inline_args)})"
        body.append(f"    {target}{call}")
        line_to_step[len(body)] = i  # 1-based line numbers, as tracebacks give them
        dead = frees[i]
        if dead:
            gone = [names[s] for s in sorted(dead)]
            body.append(f"    del {', '.join(gone)}")
            released.extend(reversed(gone))
    body.append(f"    return ({''.join(f'{names[s]}, ' for s in plan.fetch_slots)})")
    source = "\n".join(body) + "\n"
    name, number = _plan_file_name()
    try:
        code = compile(source, name, "exec")
    except BaseException:
        _release_plan_file_name(name, number)
        raise
    exec(code, namespace)  # noqa: S102 - the source is generated from the plan, not user text
    plan.fn = namespace["_run"]
    plan.slot_names = names
    plan.code = plan.fn.__code__
    plan.source = source
    plan.line_to_step = line_to_step
    # Lets tracebacks through the plan show its lines, for as long as the plan lives.
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    weakref.finalize(plan.fn, _release_plan_file_name, name, number)


# -- kernel output checks ------------------------------------------------------------------------


def _kernel_name(fn: Any) -> str:
    """`module.qualname (file:line)` of a kernel function, for error messages."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__qualname__", None) or type(target).__name__
    module = getattr(target, "__module__", None)
    if module:
        name = f"{module}.{name}"
    code = getattr(target, "__code__", None)
    if code is not None:
        name += f" ({code.co_filename}:{code.co_firstlineno})"
    return name


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


class _OutputCheck:
    """Validates what an untrusted kernel returned.

    Each output must be an array of the step's device (a numpy array for host-memory outputs;
    numpy scalars, which numpy's 0-d arithmetic returns, become 0-d arrays), of the dtype the
    graph inferred, with a shape compatible with the inferred one. Errors name the kernel and
    what it returned; the plan adds the node. `check(result)` gives the outputs as a tuple;
    `check.one(value)`, for ops with one output, gives the output itself (generated code).
    """

    __slots__ = ("kernel", "specs", "array_types", "n", "_fast")

    def __init__(self, fn: Any, specs: tuple[Any, ...], array_types: tuple[type, ...]):
        self.kernel = _kernel_name(fn)
        self.specs = specs
        self.array_types = array_types
        self.n = len(specs)
        # The common case, checked with identity and tuple comparisons only: an array of the
        # exact type, the exact (canonical) dtype object and a fully known shape.
        dtype, shape = specs[0] if specs else (None, None)
        known = shape is not None and shape.dims is not None and None not in shape.dims
        self._fast = (array_types[0], dtype.np_dtype, tuple(shape.dims)) if known else None

    def one(self, value: Any) -> Any:
        fast = self._fast
        if (
            fast is not None
            and type(value) is fast[0]
            and value.dtype is fast[1]
            and value.shape == fast[2]
        ):
            return value
        return self._check(0, value)

    def __call__(self, result: Any) -> tuple[Any, ...]:
        n = self.n
        if n == 1:
            return (self.one(result),)
        if type(result) is not tuple and type(result) is not list:
            raise self._error(f"returned a {_type_name(result)}, not a tuple of {n} outputs")
        if len(result) != n:
            raise self._error(f"returned {len(result)} outputs; the op has {n}")
        return tuple([self._check(i, value) for i, value in enumerate(result)])

    def _check(self, i: int, value: Any) -> Any:
        dtype, shape = self.specs[i]
        array_type = self.array_types[i]
        if type(value) is not array_type:
            if array_type is np.ndarray and isinstance(value, np.generic):
                value = np.asarray(value)
            elif array_type is np.ndarray or not isinstance(value, array_type):
                raise self._error(
                    f"returned a {_type_name(value)} as output {i}; expected a "
                    f"{array_type.__module__}.{array_type.__name__} of {dtype.name} {shape}"
                )
        if value.dtype != dtype.np_dtype:
            raise self._error(
                f"returned output {i} with dtype {value.dtype}; the graph says {dtype.name}"
            )
        dims = shape.dims
        if dims is not None:
            got = value.shape
            if len(got) != len(dims) or any(d is not None and d != g for d, g in zip(dims, got)):
                raise self._error(
                    f"returned output {i} with shape {list(got)}; the graph says {shape}"
                )
        return value

    def _error(self, what: str) -> InternalError:
        return InternalError(f"kernel {self.kernel} {what}")


class _Activated:
    """Runs a kernel with its CUDA device current (only for devices that need it)."""

    __slots__ = ("call", "device")

    def __init__(self, call: Any, device: Device):
        self.call = call
        self.device = device

    def __call__(self, *args: Any) -> Any:
        with self.device.activate():
            return self.call(*args)


class _ListArgs:
    """Adapts a kernel of an op with list args to the flat calling convention of steps: the
    kernel receives one list per list input arg and returns a list per list output arg
    (a tuple with one entry per output arg when there are several); the step passes and gets
    flat values."""

    __slots__ = ("call", "ins", "outs", "n_out", "labels")

    def __init__(self, call: Any, op: Operation):
        op_def = op.op_def
        self.call = call
        self.ins = tuple(
            zip(op_def.input_arg_lengths(op.attrs), [a.is_list for a in op_def.inputs])
        )
        self.outs = tuple(
            zip(op_def.output_arg_lengths(op.attrs), [a.is_list for a in op_def.outputs])
        )
        self.labels = tuple(a.name for a in op_def.outputs)
        self.n_out = len(op.outputs)

    def __call__(self, *flat: Any) -> Any:
        args: list[Any] = []
        pos = 0
        for n, is_list in self.ins:
            args.append(list(flat[pos : pos + n]) if is_list else flat[pos])
            pos += n
        result = self.call(*args)
        if len(self.outs) == 1:
            per_arg: Any = (result,)
        elif isinstance(result, (list, tuple)) and len(result) == len(self.outs):
            per_arg = result
        else:
            raise InternalError(
                f"kernel returned {_describe_result(result)}; expected a tuple with one entry "
                f"per output arg ({', '.join(self.labels)})"
            )
        values: list[Any] = []
        for (n, is_list), value, label in zip(self.outs, per_arg, self.labels):
            if not is_list:
                values.append(value)
            elif isinstance(value, (list, tuple)) and len(value) == n:
                values.extend(value)
            else:
                raise InternalError(
                    f"kernel returned {_describe_result(value)} for output '{label}'; expected "
                    f"a list of {n} arrays"
                )
        if self.n_out == 1:
            return values[0]
        return tuple(values)


def _describe_result(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def _needs_activation(device: Device) -> bool:
    return type(device).activate is not Device.activate


def _error_class(e: BaseException) -> type[OpError]:
    if isinstance(e, OpError):
        return type(e)
    if isinstance(e, MemoryError):
        return ResourceExhaustedError
    if isinstance(e, NotImplementedError):
        return UnimplementedError
    if isinstance(e, (ValueError, TypeError, IndexError)):
        return InvalidArgumentError
    return InternalError


def node_error(step: Step, e: BaseException) -> OpError:
    message = describe_exception(e)
    name, op_type, source = step.name, step.op_type, step.source
    # A fused kernel (the optimizer's) raising the error of a node it stands for names it.
    origin = getattr(e, "fused_origin", None)
    if type(origin) is tuple and len(origin) == 3:
        name, op_type, source = origin
    context = f"\n\t [[node {name} ({op_type}) on {step.device.name}, defined at {source}]]"
    return _error_class(e)(message + context, name, op_type)


def compile_plan(
    feeds: Mapping[Output, Any],
    targets: list[Any],
    devices: Sequence[Device],
    host: Device,
    config: Any,
    intra_pool: Any,
    buffers: Any = None,
    cancel: Any = None,
    resources: Any = None,
) -> Plan:
    """Prunes, places and compiles the graph for these feeds and fetch targets.

    The passes, in order (each a function of this module, or `minigraph.placer.place`):
    `prune` -> `place` -> `optimize` -> `feed_homes` -> `insert_copies` -> `fold` ->
    `bind_kernels` -> `fetch_table` -> `liveness` -> `forward_inputs` -> `trust_tables` (only
    with untrusted kernels) ->
    `dependency_tables` (only for inter-op threads); `generate` (codegen) runs on the second
    run. The plan's `fn` runs it: the first run through the step interpreter, later ones
    through generated code (see `_FirstRun`). `cancel` (a threading.Event) stops an
    interpreted run. `resources` (a `minigraph.resources.ResourceStore`, the session's state)
    gives each node's KernelContext the ResourceMgr of its device.

    Raises:
        InvalidArgumentError: an unfed placeholder, or a placement that cannot be met.
        NotFoundError: a node with no kernel on any device.
    """
    # A plan is thousands of new objects: collections would cost a third of a 10k-node compile.
    with _gc_paused():
        plan = _compile(feeds, targets, devices, host, config, intra_pool, buffers, resources)
    plan.fn = _FirstRun(plan, cancel)
    return plan


def _compile(
    feeds: Mapping[Output, Any],
    targets: list[Any],
    devices: Sequence[Device],
    host: Device,
    config: Any,
    intra_pool: Any,
    buffers: Any,
    resources: Any = None,
) -> Plan:
    ops = prune(feeds, targets)
    placement = place(
        ops,
        devices,
        allow_soft_placement=config.allow_soft_placement,
        log_device_placement=config.log_device_placement,
    )
    plan = Plan()
    placed_on = placement.device
    # Every node the placer placed, and the nodes the optimizer made.
    plan.placement = {op.name: placed_on[op].name for op in ops}
    ops, fetched = _optimized(plan, ops, placement, feeds, targets, host, config)
    if plan.optimizer:
        for op in ops:
            plan.placement.setdefault(op._name, placed_on[op].name)
    layout = insert_copies(ops, placement, feed_homes(feeds, ops, placement, host), host)
    for user, computed in fetched.items():  # a fetched tensor's node was rewritten
        device = layout.home[user] = layout.home[computed]
        layout.slot_of[(user, device)] = layout.slot_of[(computed, device)]
    plan.feed_order = layout.feed_order
    plan.feed_devices = layout.feed_devices
    plan.n_slots = layout.n_slots
    binder = KernelBinder(placement, plan.constants, config, intra_pool, buffers, resources)
    plan.steps = steps = fold(layout.steps, binder, plan.constants)
    bind_kernels(steps, binder)
    plan.fetch_index, plan.fetch_slots, plan.fetch_devices = fetch_table(targets, layout)
    plan.fetch_slot_set = frozenset(plan.fetch_slots)
    kept = plan.fetch_slot_set | set(plan.constants)
    plan.last_use, plan.frees = liveness(steps, kept)
    if config.optimizer.input_forwarding:
        forward_inputs(
            steps, layout.slot_of, len(plan.feed_order), kept, plan.last_use,
            config.inter_op_threads > 1,
        )  # fmt: skip
    plan.host_feeds = all(d.is_host for d in plan.feed_devices)
    if binder.untrusted:  # trusted kernels see fed values as they are
        trust_tables(plan, layout.slot_of)
    if plan.feed_order:
        fed_pass_through(plan, layout.slot_of)
    plan.simple = (
        plan.host_feeds
        and not plan.fetch_devices
        and not plan.protect
        and not plan.unalias
        and config.inter_op_threads == 1
    )
    if config.inter_op_threads > 1:
        dependency_tables(plan)  # only the inter-op interpreter reads them
    return plan


def _optimized(
    plan: Plan,
    ops: list[Operation],
    placement: Placement,
    feeds: Mapping[Output, Any],
    targets: list[Any],
    host: Device,
    config: Any,
) -> tuple[list[Operation], Mapping[Output, Output]]:
    """The graph optimizer's pass (minigraph.optimizer) over the placed graph: the nodes to run
    and, for each fetched tensor whose node it rebuilt, the Output computing it now. Its
    reports go to `plan.optimizer` and, with log_device_placement, to stderr."""
    optimizer = config.optimizer
    if not ops or not optimizer.rewrites_graph:
        return ops, {}
    optimized = optimize(
        ops, placement, feeds, targets, host, optimizer, config.check_kernel_outputs
    )
    plan.optimizer = optimized.reports
    if config.log_device_placement:
        for report in optimized.reports:
            if report.changed or report.deferred:
                print(f"optimizer: {report}", file=sys.stderr)
    return optimized.ops, optimized.fetches


# -- the passes ----------------------------------------------------------------------------------


def prune(fed: Collection[Output], targets: Iterable[Output | Operation]) -> list[Operation]:
    """The operations the targets need, in creation order (which is topological: the graph
    is append-only). Fed tensors cut their producers off (a fed placeholder runs nothing, even
    as a control input); control inputs are needed as data inputs are.

    Raises:
        InvalidArgumentError: a needed placeholder is not fed.
    """
    needed: set[Operation] = set()
    stack = []
    for t in targets:
        if isinstance(t, Operation):
            stack.append(t)
        elif t not in fed:
            stack.append(t.op)
    # Per-node slot reads: the public properties cost +3.2% of a 3000-node first run (callgrind).
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        if op._type == "Placeholder" and op._outputs[0] in fed:
            continue
        needed.add(op)
        for inp in op._inputs:
            if inp not in fed and inp._op not in needed:
                stack.append(inp._op)
        stack.extend(dep for dep in op._control_inputs if dep not in needed)
    ops = sorted(needed, key=attrgetter("creation_index"))
    unfed = [op for op in ops if op._type == "Placeholder"]
    if unfed:
        # TF's message for the first; every other one too, so that one error says it all.
        described = [
            f"'{op.name}' with dtype {op.attrs['dtype'].name}"
            + (f" and shape {op.attrs['shape']}" if op.attrs["shape"].dims is not None else "")
            + f" (defined at {op.source})"
            for op in unfed
        ]
        others = f"; also not fed: {', '.join(described[1:])}" if len(unfed) > 1 else ""
        raise InvalidArgumentError(
            f"You must feed a value for placeholder tensor {described[0]}{others}",
            unfed[0].name,
            unfed[0].type,
        )
    return ops


def feed_homes(
    feeds: Iterable[Output], ops: Sequence[Operation], placement: Placement, host: Device
) -> dict[Output, Device]:
    """Where each fed value lives: on its consumers' device when they all agree (no copy per
    run; a host-memory input counts as the host), else on the host. In feed order."""
    placed_on, kernel_of = placement.device, placement.kernel
    fed = feeds if isinstance(feeds, (set, frozenset, Mapping)) else set(feeds)
    consumers: dict[Output, set[Device]] = {}
    if fed:
        for op in ops:
            host_in = kernel_of[op].flat_host_inputs(op.attrs)
            for j, inp in enumerate(op.inputs):
                if inp in fed:
                    device = host if j in host_in else placed_on[op]
                    consumers.setdefault(inp, set()).add(device)
    homes = {}
    for out in feeds:
        devs = consumers.get(out, ())
        homes[out] = next(iter(devs)) if len(devs) == 1 else host
    return homes


class Layout:
    """What `insert_copies` gives: the steps in run order and where every value lives.

    Attributes:
        steps: one per node (its kernel not bound yet: `call` is None) and one per copy.
        slot_of: (value, device) -> slot; a value copied to another device has a slot there.
        home: value -> the device that produces it (or where it is fed).
        feed_order / feed_devices: the fed values, in slot order (slots 0..n-1), and homes.
        n_slots: slots in all (fed outputs of nodes that still run get a slot nobody reads).
    """

    __slots__ = ("steps", "slot_of", "home", "feed_order", "feed_devices", "n_slots")

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.slot_of: dict[tuple[Output, Device], int] = {}
        self.home: dict[Output, Device] = {}
        self.feed_order: list[Output] = []
        self.feed_devices: list[Device] = []
        self.n_slots = 0


def insert_copies(
    ops: Sequence[Operation],
    placement: Placement,
    homes: Mapping[Output, Device],
    host: Device,
) -> Layout:
    """Lays out the steps: one per node, in order, each preceded by the copies its inputs
    need. A value is copied once per (value, destination device), where its first consumer
    there needs it; host-memory inputs and outputs of a kernel live on the host."""
    placed_on, kernel_of = placement.device, placement.kernel
    layout = Layout()
    steps, slot_of, home = layout.steps, layout.slot_of, layout.home
    counter = itertools.count()
    for out, device in homes.items():
        home[out] = device
        slot_of[(out, device)] = next(counter)
        layout.feed_order.append(out)
        layout.feed_devices.append(device)

    def value_on(out: Output, device: Device) -> int:
        src_device = home[out]
        src = slot_of[(out, src_device)]
        slot = slot_of[(out, device)] = next(counter)
        copy = functools.partial(device.copy_from, source=src_device)
        steps.append(
            Step(f"{out.name}->{device.short_name}", "_Copy", device, out.op, copy, (src,), (slot,))
        )
        return slot

    # Per-node slot reads: the public properties cost +2.9% of a 3000-node first run (callgrind).
    for op in ops:
        device = placed_on[op]
        kernel = kernel_of[op]
        op_attrs = op._attrs
        host_in = kernel.flat_host_inputs(op_attrs)
        ins_list = []
        for j, inp in enumerate(op._inputs):
            where = host if j in host_in else device
            slot = slot_of.get((inp, where))
            ins_list.append(value_on(inp, where) if slot is None else slot)
        outs = []
        host_outputs = kernel.flat_host_outputs(op_attrs)
        for i, out in enumerate(op._outputs):
            if out in homes:
                outs.append(next(counter))  # computed (for control effects) but unused
                continue
            out_device = host if i in host_outputs else device
            home[out] = out_device
            slot = slot_of[(out, out_device)] = next(counter)
            outs.append(slot)
        steps.append(
            Step(op._name, op._type, device, op, None, tuple(ins_list), tuple(outs), op,
                 op._output_specs)
        )  # fmt: skip
    layout.n_slots = next(counter)
    return layout


def fold(steps: list[Step], bind: Any, constants: dict[int, Any]) -> list[Step]:
    """Constant folding: runs each Const step, and each copy of a constant to another device,
    once, here (their value is the same on every run), storing the value in `constants` by
    slot; gives the steps left. `bind(step)` binds a Const step's kernel first."""
    left = []
    for step in steps:
        if step.op_type == "Const" and len(step.outs) == 1:  # copies are "_Copy" steps
            bind(step)
            try:
                value = step.call()
                constants[step.outs[0]] = value if step.check is None else step.check(value)[0]
            except Exception as e:
                raise node_error(step, e) from e
        elif step.op is None and step.ins[0] in constants:
            try:
                value = step.call(constants[step.ins[0]])
            except Exception as e:
                raise node_error(step, e) from e
            if isinstance(value, np.ndarray):
                # The copy of a constant to another device is made once per plan and handed to
                # every run, as the constant itself is: read-only like it, so that a fetched
                # result written by its user cannot change the next run's.
                value.setflags(write=False)
            constants[step.outs[0]] = value
        else:
            left.append(step)
    return left


def bind_kernels(steps: Sequence[Step], binder: KernelBinder) -> None:
    """Binds the kernel of every node step not bound yet (copies come bound)."""
    binder.bind_all([step for step in steps if step.call is None])


class KernelBinder:
    """Binds a node step's kernel: its context, attrs and specialisation (which may use the
    constant inputs folded so far), list-arg and device-activation adapters, and the check of
    its outputs (kernels not registered `trusted=True`, or all with check_kernel_outputs=True).
    Nodes with equal kernels and attrs share one attrs dict."""

    def __init__(
        self,
        placement: Placement,
        constants: Mapping[int, Any],
        config: Any,
        intra_pool: Any = None,
        buffers: Any = None,
        resources: Any = None,
    ):
        self.kernel_of = placement.kernel
        self.constants = constants
        # None (the default): check the outputs of untrusted kernels; True: of every kernel.
        self.check_all = config.check_kernel_outputs is True
        self.check_untrusted = config.check_kernel_outputs is not False
        self.specialize = config.specialize_kernels
        self.intra_threads = config.intra_op_threads
        self.intra_pool = intra_pool
        self.buffers = buffers
        self.resources = resources  # a ResourceStore: each context gets its device's manager
        self.shared: dict[Any, Any] = {}  # KernelSpec.shared: specialisers' work for this plan
        # Per kernel function and canonical attrs: the attrs it receives and whether generated
        # code may pass them as keywords.
        self.bound: dict[tuple[Any, int], tuple[dict[str, Any], bool, Mapping[str, Any]]] = {}
        self.activates: dict[Device, bool] = {}
        self.untrusted = False  # whether it bound an untrusted kernel

    def __call__(self, step: Step) -> None:
        self.bind_all((step,))

    def bind_all(self, steps: Iterable[Step]) -> None:
        """Binds each of `steps` (node steps). One loop over local names: this is most of a
        large graph's compile time."""
        constants, kernel_of, bound, activates = (
            self.constants, self.kernel_of, self.bound, self.activates,
        )  # fmt: skip
        check_all, check_untrusted = self.check_all, self.check_untrusted
        specialize, shared = self.specialize, self.shared
        intra_threads, intra_pool, buffers = self.intra_threads, self.intra_pool, self.buffers
        store = self.resources
        untrusted = False
        # Per-node slot reads: the public properties cost +3.9% of a 3000-node first run.
        for step in steps:
            op, device, ins = step.op, step.device, step.ins
            kernel = kernel_of[op]
            op_attrs = op._attrs
            inputs = op._inputs
            ctx = KernelContext(
                device, op._name, op._type,
                tuple([s in constants for s in ins]),  # the same value on every run
                intra_threads, intra_pool, buffers,
                None if store is None else store.manager(device.name),
            )  # fmt: skip
            step.ctx = ctx
            fn = kernel.fn
            key = (fn, id(op_attrs))  # the attrs mapping stays alive with `op`
            known = bound.get(key)
            if known is None:
                attrs = kernel_attrs(fn, op_attrs)
                keywords = all(k.isidentifier() and not iskeyword(k) for k in attrs)
                known = bound[key] = (attrs, keywords, MappingProxyType(attrs))
            attrs, keywords, attrs_view = known
            call = functools.partial(fn, ctx, **attrs)
            fast = None
            if kernel.specialize is not None and specialize:
                spec = KernelSpec(
                    ctx, attrs_view, tuple([i._dtype for i in inputs]),
                    tuple([i._shape for i in inputs]), tuple([constants.get(s) for s in ins]),
                    call, shared,
                )  # fmt: skip
                try:
                    fast = kernel.specialize(spec)
                except Exception as e:
                    raise InternalError(
                        f"the specialiser of the {op.type} kernel on {device.name} failed: "
                        f"{type(e).__name__}: {e} (node {op.name}, defined at {op.source})",
                        op.name,
                        op.type,
                    ) from e
                if fast is not None:
                    call = fast
            list_args = op._op_def.has_list_args
            if list_args:
                call = _ListArgs(call, op)
            activate = activates.get(device)
            if activate is None:
                activate = activates[device] = _needs_activation(device)
            if activate:
                call = _Activated(call, device)
            step.call = call
            if fast is None and keywords and not (activate or list_args):
                step.direct = (fn, ctx, attrs)
            trusted = step.trusted = kernel.trusted
            if not trusted:
                untrusted = True
            outs = step.outs
            if outs and (check_all or (check_untrusted and not trusted)):
                host_outputs = kernel.flat_host_outputs(op_attrs)
                array_types = tuple(
                    np.ndarray if i in host_outputs else getattr(device.xp, "ndarray", object)
                    for i in range(len(outs))
                )
                step.check = _OutputCheck(fn, op._output_specs, array_types)
        if untrusted:
            self.untrusted = True


def fetch_table(
    targets: Sequence[Any], layout: Layout
) -> tuple[dict[Any, int | None], list[int], list[tuple[int, Device]]]:
    """(target -> result index, or None for an operation; the slots returned, in result
    order; the results that live off the host, with their device). Fetched values leave from
    where they were computed; a target fetched twice shares one result (the session has
    resolved names to tensors: one value is one target). (Dicts, not list scans: compiling is
    linear in the number of fetches.)"""
    home, slot_of = layout.home, layout.slot_of
    fetch_index: dict[Any, int | None] = {}
    fetch_slots: list[int] = []
    fetch_devices: list[tuple[int, Device]] = []
    for t in targets:
        if t in fetch_index:
            continue
        if isinstance(t, Operation):
            fetch_index[t] = None
            continue
        device = home[t]
        j = fetch_index[t] = len(fetch_slots)
        fetch_slots.append(slot_of[(t, device)])
        if not device.is_host:
            fetch_devices.append((j, device))
    return fetch_index, fetch_slots, fetch_devices


def liveness(
    steps: Sequence[Step], kept: Collection[int]
) -> tuple[dict[int, int], list[list[int]]]:
    """(slot -> index of the step that uses it last; per step, the slots to release right
    after it). A value is released after its last consumer, one nobody consumes right after
    its producer; `kept` slots (fetched values, constants) never are."""
    last_use: dict[int, int] = {}
    for i, step in enumerate(steps):
        for s in step.ins:
            last_use[s] = i
        for s in step.outs:
            last_use.setdefault(s, i)  # produced, never consumed: drop at once
    frees: list[list[int]] = [[] for _ in steps]
    for slot, i in last_use.items():
        if slot not in kept:
            frees[i].append(slot)
    return last_use, frees


def trust_tables(plan: Plan, slot_of: Mapping[tuple[Output, Device], int]) -> None:
    """Which feeds an untrusted kernel may see, and which results may be views of a feed.

    A slot `may_alias` a feed when it holds a fed array passed as is or anything computed from
    one (trusted kernels may pass an input through, as Identity does). It `may_view` a feed
    when an untrusted kernel, which may return views of its inputs, is on that path. Copies
    to another device make private arrays. Plans of trusted kernels get empty tables, so only
    plans that run user kernels on fed values pay for the protection.
    """
    may_alias = {slot_of[(out, d)] for out, d in zip(plan.feed_order, plan.feed_devices)}
    may_view: set[int] = set()
    exposed = False
    for step in plan.steps:
        if step.op is None or not any(s in may_alias for s in step.ins):
            continue  # a copy between devices, or a step that sees no fed value
        viewed = not step.trusted or any(s in may_view for s in step.ins)
        exposed = exposed or not step.trusted
        may_alias.update(step.outs)
        if viewed:
            may_view.update(step.outs)
    if exposed:
        # Every result that may be a fed array, or a view of one, goes through the check
        # (a result that is the read-only view a kernel got is given back as the fed array).
        plan.protect = frozenset(range(len(plan.feed_order)))
        plan.unalias = tuple(i for i, s in enumerate(plan.fetch_slots) if s in may_alias)


def fed_pass_through(plan: Plan, slot_of: Mapping[tuple[Output, Device], int]) -> None:
    """Which results may be the caller's fed array itself, passed through by a kernel that
    returns its input (Identity, a Cast to the same dtype, a one-part DynamicPartition).

    Only a fetch of the fed tensor itself gives the caller's array back; any other result
    must be the graph's own value (changing the feed afterwards must not change it), so the
    session copies these results when, in a run, they are a fed array. Feeds placed off the
    host arrive as private copies and pass nothing through.
    """
    fed = {slot_of[(out, d)] for out, d in zip(plan.feed_order, plan.feed_devices) if d.is_host}
    reached = set(fed)
    for step in plan.steps:
        if step.op is not None and any(s in reached for s in step.ins):
            reached.update(step.outs)
    plan.pass_through = tuple(
        i for i, s in enumerate(plan.fetch_slots) if s in reached and s not in fed
    )


def dependency_tables(plan: Plan) -> None:
    """Per step: the steps it waits for (data and control), and slot use counts."""
    steps = plan.steps
    producer: dict[int, int] = {}
    step_of_op: dict[Operation, int] = {}
    for i, step in enumerate(steps):
        for s in step.outs:
            producer[s] = i
        if step.op is not None:
            step_of_op[step.op] = i
    deps: list[set[int]] = [set() for _ in steps]
    for i, step in enumerate(steps):
        for s in step.ins:
            plan.uses[s] = plan.uses.get(s, 0) + 1
            if s in producer:
                deps[i].add(producer[s])
        if step.op is not None:
            for dep in step.op.control_inputs:
                if dep in step_of_op:
                    deps[i].add(step_of_op[dep])
    plan.n_deps = [len(d) for d in deps]
    plan.dependents = [[] for _ in steps]
    for i, d in enumerate(deps):
        for j in sorted(d):
            plan.dependents[j].append(i)


def recover(plan: Plan, e: Exception) -> list[Any]:
    """Handles `e`, raised inside the plan's generated function: when a step's direct call
    (InlineCall) raised, the run goes on in the step interpreter from that step, with the
    values the function held (its frame's locals), and its results are returned; otherwise
    `e` is re-raised with the failing node's context."""
    found = _failed_frame(plan, e)
    if found is None:
        raise e
    index, frame = found
    step = plan.steps[index]
    if not _inlined(step):
        raise node_error(step, e) from e
    values = frame.f_locals
    e.__traceback__ = None  # it holds the function's frame, and so every live value
    del found, frame, e
    return _interpreters["resume"](plan, _live_slots(plan, index, values), index)


def _live_slots(plan: Plan, index: int, values: Mapping[str, Any]) -> list[Any]:
    """The value slots of a run about to execute step `index`, from the generated function's
    locals (each live slot is bound to its register-allocated name) and the constants."""
    slots: list[Any] = [None] * plan.n_slots
    for i, value in plan.constants.items():
        slots[i] = value
    names = plan.slot_names
    produced = list(range(len(plan.feed_order)))
    for step in plan.steps[:index]:
        produced.extend(step.outs)
    last_use, kept = plan.last_use, plan.fetch_slot_set
    for s in produced:
        if s in kept or last_use.get(s, -1) >= index:
            slots[s] = values[names[s]]
    return slots


def _reraise_from_plan(plan: Plan, e: Exception) -> NoReturn:
    """Re-raises `e`, raised inside the generated plan, with the failing node's context."""
    found = _failed_frame(plan, e)
    if found is None:
        raise e
    raise node_error(plan.steps[found[0]], e) from e


def _failed_frame(plan: Plan, e: BaseException) -> tuple[int, Any] | None:
    """(step index, frame) of the generated plan function's line that raised `e`."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is plan.code:
            index = plan.line_to_step.get(tb.tb_lineno)
            return None if index is None else (index, tb.tb_frame)
        tb = tb.tb_next
    return None
