"""`Session`: prune, place, compile and run graphs.

`Session.run(fetches, feed_dict)` looks up a plan for the (feeds, fetches) signature, compiling
it on first use: prune to what the fetches need (fed tensors cut the graph above them), order
the nodes (creation order is topological: the graph is append-only), place them, pick their
kernels, insert one copy per (tensor, destination device) where edges cross devices, and note
each value's last use so it can be released right after.

The plan then runs as one straight-line Python function generated from its steps (as
torch.fx's codegen does): every value is a local variable, deleted after its last consumer, and
a failing step is found from the traceback's line number, so the hot loop carries no
bookkeeping. Tracing, output checking and inter-op parallelism use a step interpreter over the
same steps instead.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import linecache
import os
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from keyword import iskeyword
from typing import Any, NoReturn

import numpy as np

from minigraph import dtypes
from minigraph.builder import OpBuilder
from minigraph.devices import Device, get_devices
from minigraph.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    UnimplementedError,
)
from minigraph.graph import Graph, Operation, Output
from minigraph.kernel import KernelContext
from minigraph.placer import place
from minigraph.scope import Scope

__all__ = ["Session", "SessionConfig", "RunOptions", "RunMetadata", "NodeStats"]


@dataclass(frozen=True)
class SessionConfig:
    """Session options.

    Attributes:
        allow_soft_placement: when a requested device cannot run a node, fall back (GPU, then
            CPU) instead of failing. True by default, as in TF 2.
        log_device_placement: print one line per node when a plan is compiled, in TF's format
            (`g: (GatherV2): /job:localhost/replica:0/task:0/device:CPU:0`), to stderr.
        inter_op_threads: >1 runs independent branches concurrently on a thread pool.
        intra_op_threads: threads a kernel may use to split its own work (KernelContext);
            by default one per CPU, as in TF. Only large kernels split (the gathers from
            4 MiB of output), so small graphs never touch the pool.
        check_kernel_outputs: check every kernel output's dtype and shape against the
            statically inferred ones (slower; for debugging kernels).
        devices: the devices to use; None means `minigraph.devices.get_devices()` at creation.
    """

    allow_soft_placement: bool = True
    log_device_placement: bool = False
    inter_op_threads: int = 1
    intra_op_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    check_kernel_outputs: bool = False
    devices: Sequence[Device] | None = None


@dataclass(frozen=True)
class RunOptions:
    """Per-run options. `trace=True` fills the RunMetadata's step stats."""

    trace: bool = False


class NodeStats:
    """Timing of one executed step (a node, or a copy between devices)."""

    __slots__ = ("node", "op_type", "device", "start_us", "duration_us", "output_shapes", "thread")

    def __init__(self, node, op_type, device, start_us, duration_us, output_shapes, thread):
        self.node = node
        self.op_type = op_type
        self.device = device
        self.start_us = start_us
        self.duration_us = duration_us
        self.output_shapes = output_shapes
        self.thread = thread

    def __repr__(self) -> str:
        return (
            f"NodeStats({self.node!r} ({self.op_type}) on {self.device}: "
            f"{self.duration_us:.1f} us, outputs {self.output_shapes})"
        )


@dataclass
class RunMetadata:
    """Filled by `Session.run(..., run_metadata=md)`.

    Attributes:
        placement: node name -> full device name, for every node of the plan.
        step_stats: per-step timings (only with RunOptions(trace=True)).
    """

    placement: dict[str, str] = field(default_factory=dict)
    step_stats: list[NodeStats] = field(default_factory=list)

    def chrome_trace(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The step stats as a Chrome trace (open in chrome://tracing or ui.perfetto.dev).

        Writes it as JSON to `path` when given; returns the trace dict either way.
        """
        devices = sorted({s.device for s in self.step_stats})
        pid = {d: i for i, d in enumerate(devices)}
        events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid[d], "args": {"name": d}} for d in devices
        ]
        for s in self.step_stats:
            events.append({
                "ph": "X", "name": s.node, "cat": s.op_type, "pid": pid[s.device],
                "tid": s.thread, "ts": s.start_us, "dur": s.duration_us,
                "args": {"op": s.op_type, "output_shapes": [str(x) for x in s.output_shapes]},
            })  # fmt: skip
        trace = {"traceEvents": events, "displayTimeUnit": "ms"}
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(trace, f)
        return trace


# -- plans ---------------------------------------------------------------------------------------


class _Step:
    """One unit of a plan: a kernel call or a copy between devices."""

    __slots__ = (
        "name", "op_type", "device", "origin", "call", "ins", "outs", "op", "specs", "direct",
    )  # fmt: skip

    def __init__(self, name, op_type, device, origin, call, ins, outs, op=None, specs=()):
        # `call(*inputs)` runs the step; `direct`, when set, is (fn, ctx, attrs) such that
        # call(*inputs) == fn(ctx, *inputs, **attrs), which generated code calls without the
        # partial's per-call keyword dict.
        self.direct: tuple[Any, Any, dict[str, Any]] | None = None
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


class _Plan:
    """A compiled (feeds, fetches) signature."""

    def __init__(self) -> None:
        self.feed_order: list[Output] = []  # feeds in slot order
        self.feed_devices: list[Device] = []
        self.fetch_index: dict[Any, int | None] = {}  # target -> result index (None: an op)
        self.fetch_slots: list[int] = []  # the slots returned, in result order
        self.fetch_devices: list[tuple[int, Device]] = []  # results that live off the host
        self.host_feeds = True  # every feed is consumed on the host: no per-run copies
        self.simple = False  # host feeds and fetches, plain generated code: Session.run's hot path
        self.frees: list[list[int]] = []  # per step: slots whose last use it is
        # For inter-op parallelism: per step, how many steps it waits for and who waits on it.
        self.n_deps: list[int] = []
        self.dependents: list[list[int]] = []
        self.uses: dict[int, int] = {}
        self.steps: list[_Step] = []
        self.constants: dict[int, Any] = {}  # slot -> value computed at compile time
        self.n_slots = 0
        self.last_use: dict[int, int] = {}
        self.fn: Any = None
        self.source = ""
        self.code: Any = None
        self.line_to_step: dict[int, int] = {}
        self.placement: dict[str, str] = {}


_plan_ids = itertools.count()


def _codegen(plan: _Plan, fetch_slots: list[int]) -> None:
    """Compiles the plan's steps into one straight-line function `_run(feeds) -> fetches`."""
    name = f"<minigraph-plan-{next(_plan_ids)}>"
    # Bound values (kernels, contexts, attrs, constants) are globals of the generated function,
    # not closure cells: CPython compiles thousands of cells in superlinear time, while global
    # loads are specialised by the interpreter and cost about as much as locals.
    constants = plan.constants
    namespace: dict[str, Any] = {f"c{s}": v for s, v in constants.items()}
    for i, step in enumerate(plan.steps):
        if step.direct is None:
            namespace[f"k{i}"] = step.call
        else:
            fn, ctx, attrs = step.direct
            namespace[f"k{i}"] = fn
            namespace[f"x{i}"] = ctx
            namespace.update({f"a{i}_{j}": v for j, v in enumerate(attrs.values())})

    def var(slot: int) -> str:
        return f"c{slot}" if slot in constants else f"v{slot}"

    body: list[str] = []
    body.append("def _run(feeds):")
    n_feeds = len(plan.feed_order)
    if n_feeds:
        body.append(f"    ({', '.join(f'v{i}' for i in range(n_feeds))},) = feeds")
    frees = plan.frees
    line_to_step = {}
    for i, step in enumerate(plan.steps):
        args = ", ".join(var(s) for s in step.ins)
        if len(step.outs) == 0:
            target = ""
        elif len(step.outs) == 1:
            target = f"v{step.outs[0]} = "
        else:
            target = f"({', '.join(f'v{s}' for s in step.outs)},) = "
        if step.direct is not None:
            attrs = step.direct[2]
            keywords = "".join(f", {k}=a{i}_{j}" for j, k in enumerate(attrs))
            args = f"x{i}, {args}{keywords}" if args else f"x{i}{keywords}"
        body.append(f"    {target}k{i}({args})")
        line_to_step[len(body)] = i  # 1-based line numbers, as tracebacks give them
        dead = frees[i]
        if dead:
            body.append(f"    del {', '.join(f'v{s}' for s in sorted(dead))}")
    body.append(f"    return ({''.join(f'{var(s)}, ' for s in fetch_slots)})")
    source = "\n".join(body) + "\n"
    code = compile(source, name, "exec")
    exec(code, namespace)  # noqa: S102 - the source is generated from the plan, not user text
    plan.fn = namespace["_run"]
    plan.code = plan.fn.__code__
    plan.source = source
    plan.line_to_step = line_to_step
    # Lets tracebacks through the plan show its lines, for as long as the plan lives.
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    weakref.finalize(plan.fn, linecache.cache.pop, name, None)


class _Activated:
    """Runs a kernel with its CUDA device current (only for devices that need it)."""

    __slots__ = ("call", "device")

    def __init__(self, call: Any, device: Device):
        self.call = call
        self.device = device

    def __call__(self, *args: Any) -> Any:
        with self.device.activate():
            return self.call(*args)


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


def _node_error(step: _Step, e: BaseException) -> OpError:
    message = e.message if isinstance(e, OpError) else f"{type(e).__name__}: {e}"
    context = (
        f"\n\t [[node {step.name} ({step.op_type}) on {step.device.name}, "
        f"defined at {step.source}]]"
    )
    return _error_class(e)(message + context, step.name, step.op_type)


class Session:
    """Runs a graph. `Session(scope_or_graph=None, config=SessionConfig())`.

    With no graph, the session uses the graph of the first thing it is asked to fetch. Usable as
    a context manager; `run` may be called from several threads at once.
    """

    _MAX_PLANS = 256

    def __init__(
        self,
        scope_or_graph: Scope | Graph | None = None,
        config: SessionConfig | None = None,
    ):
        if isinstance(scope_or_graph, Scope):
            self.graph: Graph | None = scope_or_graph.graph
        elif isinstance(scope_or_graph, Graph) or scope_or_graph is None:
            self.graph = scope_or_graph
        else:
            raise InvalidArgumentError(
                f"Session takes a Scope or a Graph; got {type(scope_or_graph).__name__}"
            )
        self.config = config or SessionConfig()
        if self.config.inter_op_threads < 1 or self.config.intra_op_threads < 1:
            raise InvalidArgumentError("inter_op_threads and intra_op_threads must be >= 1")
        devices = self.config.devices
        self.devices: list[Device] = list(devices) if devices is not None else get_devices()
        if not any(d.is_host for d in self.devices):
            raise InvalidArgumentError("a session needs a host (CPU) device")
        self._host = next(d for d in self.devices if d.is_host)
        self._plans: dict[Any, _Plan] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._inter_pool: ThreadPoolExecutor | None = None
        self._intra_pool: ThreadPoolExecutor | None = None
        if self.config.intra_op_threads > 1:
            self._intra_pool = ThreadPoolExecutor(
                self.config.intra_op_threads - 1, thread_name_prefix="minigraph-intra"
            )
        if self.config.inter_op_threads > 1:
            self._inter_pool = ThreadPoolExecutor(
                self.config.inter_op_threads, thread_name_prefix="minigraph-inter"
            )

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Releases the plans and thread pools; later runs raise FailedPreconditionError."""
        self._closed = True
        self._plans.clear()
        for pool in (self._inter_pool, self._intra_pool):
            if pool is not None:
                pool.shutdown(wait=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- run -------------------------------------------------------------------------------------

    def run(
        self,
        fetches: Any,
        feed_dict: Mapping[Any, Any] | None = None,
        *,
        options: RunOptions | None = None,
        run_metadata: RunMetadata | None = None,
    ) -> Any:
        """Runs what `fetches` needs and returns their values as numpy arrays.

        Args:
            fetches: an Output, op builder, Operation (run for its effect; gives None), a name
                ("g:0" for a tensor, "g" for an operation, as in TF), or nested lists, tuples,
                dicts and namedtuples of these. The result has the same structure.
            feed_dict: {Output, builder or name: value}. Any tensor may be fed, which cuts the
                graph above it. Values: numpy arrays, Python scalars/lists, or cupy arrays.
            options: RunOptions(trace=True) records per-step timings in `run_metadata`.
            run_metadata: receives the placement and, when tracing, the step stats.

        Raises:
            InvalidArgumentError: a bad fetch or feed, an unfed placeholder, or a kernel's data
                error (with the node, its device and where it was defined).
            NotFoundError: a name that is not in the graph, or a node without a kernel.
            FailedPreconditionError: the session is closed.
        """
        if self._closed:
            raise FailedPreconditionError("Attempted to use a closed Session.")
        # A single fetch needs no structure handling: the common case, kept short.
        leaf = fetches if type(fetches) is Output else _as_target(fetches)
        if leaf is not None:
            if type(leaf) is not Output or leaf._op._graph is not self.graph:
                leaf = self._resolve(leaf)
            targets = (leaf,)
        else:
            flat: list[Any] = []
            template = _flatten(fetches, flat)
            graph = self.graph
            targets = tuple(
                t if type(t) is Output and t.op.graph is graph else self._resolve(t) for t in flat
            )
        feeds: dict[Output, Any] = {}
        all_numpy = True
        if feed_dict:
            graph = self.graph
            for key, value in feed_dict.items():
                if type(key) is Output:
                    out = key
                elif isinstance(key, OpBuilder) and len(key.outputs) == 1:
                    out = key.outputs[0]
                else:
                    out = self._feed_key(key)
                    graph = self.graph
                if out._op._graph is not graph:
                    out = self._feed_key(out)
                value = feeds[out] = _convert_feed(out, value)
                if type(value) is not np.ndarray:
                    all_numpy = False
        # Plans are keyed order-insensitively: feeds and fetches as sets.
        key = (frozenset(feeds), leaf if leaf is not None else frozenset(targets))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._compile(feeds, list(targets), key)
        if plan.simple and all_numpy and options is None and run_metadata is None:
            # The hot path: host feeds, host fetches, no tracing. Nothing but the plan.
            try:
                results = plan.fn(list(map(feeds.__getitem__, plan.feed_order)))
            except Exception as e:  # KeyboardInterrupt and SystemExit pass through unchanged
                _reraise_from_plan(plan, e)
        else:
            results = self._execute(plan, feeds, options, run_metadata)
        index = plan.fetch_index
        if leaf is not None:
            i = index[leaf]
            return None if i is None else results[i]
        return _rebuild(
            template, [None if index[t] is None else results[index[t]] for t in targets]
        )

    def _resolve(self, target: Any) -> Output | Operation:
        if isinstance(target, str):
            if self.graph is None:
                raise InvalidArgumentError(
                    f"cannot resolve the name {target!r}: this Session has no graph yet"
                )
            return self.graph.as_graph_element(target)
        graph = target.graph
        if self.graph is None:
            self.graph = graph
        elif graph is not self.graph:
            raise InvalidArgumentError(
                f"fetch {target.name!r} belongs to another graph than this Session's"
            )
        return target

    def _feed_key(self, key: Any) -> Output:
        if isinstance(key, str):
            if self.graph is None:
                raise InvalidArgumentError(f"cannot resolve feed name {key!r}: no graph yet")
            out = self.graph.get_output(key)
        else:
            out = _as_target(key)
            if isinstance(out, Operation):
                if len(out.outputs) != 1:
                    raise InvalidArgumentError(
                        f"cannot feed operation {out.name!r}: feed one of its outputs"
                    )
                out = out.outputs[0]
            if not isinstance(out, Output):
                raise InvalidArgumentError(
                    f"feed keys must be Outputs, op builders or names; got {type(key).__name__}"
                )
        if self.graph is None:
            self.graph = out.graph
        elif out.graph is not self.graph:
            raise InvalidArgumentError(f"feed {out.name!r} belongs to another graph")
        return out

    # -- compile ---------------------------------------------------------------------------------

    def _compile(self, feeds: Mapping[Output, Any], targets: list[Any], key: Any) -> _Plan:
        fed = set(feeds)
        # Prune: walk back from the fetches; fed tensors cut their producers off.
        needed: set[Operation] = set()
        stack = []
        for t in targets:
            if isinstance(t, Operation):
                stack.append(t)
            elif t not in fed:
                stack.append(t.op)
        while stack:
            op = stack.pop()
            if op in needed:
                continue
            if op.type == "Placeholder" and op.outputs[0] in fed:
                continue  # a fed placeholder has nothing to run, even as a control input
            needed.add(op)
            for inp in op.inputs:
                if inp not in fed and inp.op not in needed:
                    stack.append(inp.op)
            stack.extend(dep for dep in op.control_inputs if dep not in needed)
        ops = sorted(needed, key=lambda o: o._index)  # creation order is topological
        for op in ops:
            if op.type == "Placeholder":
                shape = op.attrs["shape"]
                raise InvalidArgumentError(
                    f"You must feed a value for placeholder tensor '{op.name}' with dtype "
                    f"{op.attrs['dtype'].name}"
                    + (f" and shape {shape}" if shape.dims is not None else "")
                    + f" (defined at {op.source})",
                    op.name,
                    op.type,
                )
        placement = place(ops, self.devices, allow_soft_placement=self.config.allow_soft_placement)
        if self.config.log_device_placement:
            for op in ops:
                print(f"{op.name}: ({op.type}): {placement.device[op].name}", file=sys.stderr)

        plan = _Plan()
        slot_of: dict[tuple[Output, Device], int] = {}  # (value, device) -> slot
        home: dict[Output, Device] = {}
        counter = itertools.count()

        def input_device(op: Operation, j: int) -> Device:
            device = placement.device[op]
            return self._host if j in placement.kernel[op].host_inputs else device

        # Feeds live where their consumers are when those agree (no copy per run), else host.
        consumers_dev: dict[Output, set[Device]] = {}
        for op in ops:
            for j, inp in enumerate(op.inputs):
                if inp in fed:
                    consumers_dev.setdefault(inp, set()).add(input_device(op, j))
        for out in feeds:
            devs = consumers_dev.get(out, set())
            device = next(iter(devs)) if len(devs) == 1 else self._host
            home[out] = device
            slot_of[(out, device)] = next(counter)
            plan.feed_order.append(out)
            plan.feed_devices.append(device)

        const_outputs = {o for op in ops if op.type == "Const" for o in op.outputs}
        steps = plan.steps

        def value_on(out: Output, device: Device) -> int:
            slot = slot_of.get((out, device))
            if slot is not None:
                return slot
            src_device = home[out]
            src = slot_of[(out, src_device)]
            slot = slot_of[(out, device)] = next(counter)
            copy = functools.partial(device.copy_from, source=src_device)
            step = _Step(
                f"{out.name}->{device.short_name}", "_Copy", device, out.op, copy,
                (src,), (slot,),
            )  # fmt: skip
            if src in plan.constants:
                try:
                    plan.constants[slot] = copy(plan.constants[src])  # once, not per run
                except Exception as e:
                    raise _node_error(step, e) from e
                return slot
            steps.append(step)
            return slot

        for op in ops:
            device = placement.device[op]
            kernel = placement.kernel[op]
            ins = tuple(value_on(inp, input_device(op, j)) for j, inp in enumerate(op.inputs))
            outs = []
            for i, out in enumerate(op.outputs):
                out_device = self._host if i in kernel.host_outputs else device
                if out in fed:
                    outs.append(next(counter))  # computed (for control effects) but unused
                    continue
                home[out] = out_device
                slot = slot_of[(out, out_device)] = next(counter)
                outs.append(slot)
            ctx = KernelContext(
                device, op.name, op.type,
                tuple(inp in const_outputs for inp in op.inputs),
                self.config.intra_op_threads, self._intra_pool,
            )  # fmt: skip
            attrs = _kernel_attrs(kernel.fn, op.attrs)
            call = functools.partial(kernel.fn, ctx, **attrs)
            activate = _needs_activation(device)
            if activate:
                call = _Activated(call, device)
            step = _Step(
                op.name, op.type, device, op, call, ins, tuple(outs), op,
                op._output_specs,
            )  # fmt: skip
            if not activate and all(k.isidentifier() and not iskeyword(k) for k in attrs):
                step.direct = (kernel.fn, ctx, attrs)
            plan.placement[op.name] = device.name
            if op.type == "Const" and len(outs) == 1:
                # Constant folding: a Const's value is the same on every run, so its kernel
                # (and any copy of it to another device) runs once, here.
                try:
                    plan.constants[outs[0]] = call()
                except Exception as e:
                    raise _node_error(step, e) from e
                continue
            steps.append(step)
        # Fetched values leave from where they were computed; a target fetched twice, or a
        # value fetched under two names, shares one result.
        fetch_slots: list[int] = []
        for t in targets:
            if t in plan.fetch_index:
                continue
            if isinstance(t, Operation):
                plan.fetch_index[t] = None
                continue
            device = home[t]
            slot = slot_of[(t, device)]
            if slot not in fetch_slots:
                fetch_slots.append(slot)
                if not device.is_host:
                    plan.fetch_devices.append((len(fetch_slots) - 1, device))
            plan.fetch_index[t] = fetch_slots.index(slot)
        plan.fetch_slots = fetch_slots
        plan.n_slots = next(counter)
        for i, step in enumerate(steps):
            for s in step.ins:
                plan.last_use[s] = i
            for s in step.outs:
                plan.last_use.setdefault(s, i)  # produced, never consumed: drop at once
        kept = set(fetch_slots) | set(plan.constants)  # constants live as long as the plan
        plan.frees = [[] for _ in steps]
        for slot, i in plan.last_use.items():
            if slot not in kept:
                plan.frees[i].append(slot)
        plan.host_feeds = all(d.is_host for d in plan.feed_devices)
        plan.simple = (
            plan.host_feeds
            and not plan.fetch_devices
            and not self.config.check_kernel_outputs
            and self._inter_pool is None
        )
        _dependency_tables(plan)
        _codegen(plan, fetch_slots)
        with self._lock:
            if len(self._plans) >= self._MAX_PLANS:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        return plan

    # -- execute ---------------------------------------------------------------------------------

    def _execute(
        self,
        plan: _Plan,
        feeds: Mapping[Output, Any],
        options: RunOptions | None,
        run_metadata: RunMetadata | None,
    ) -> Sequence[Any]:
        """Runs the plan; returns the fetched values (host arrays) in `fetch_slots` order."""
        if plan.host_feeds:
            args = list(map(feeds.__getitem__, plan.feed_order))
            for i, value in enumerate(args):
                if type(value) is not np.ndarray:
                    args[i] = _to_host(value)
        else:
            args = []
            for out, device in zip(plan.feed_order, plan.feed_devices):
                value = feeds[out]
                if not device.accepts(value):
                    if not isinstance(value, np.ndarray):
                        value = _to_host(value)
                    value = device.from_host(value)
                args.append(value)
        trace = options is not None and options.trace
        if run_metadata is not None:
            run_metadata.placement.update(plan.placement)
        check = self.config.check_kernel_outputs
        if trace or check or self._inter_pool is not None:
            stats = run_metadata.step_stats if (trace and run_metadata is not None) else None
            if self._inter_pool is not None and not trace and not check:
                results = self._interpret_parallel(plan, args)
            else:
                results = self._interpret(plan, args, stats, trace)
        else:
            try:
                results = plan.fn(args)
            except Exception as e:  # KeyboardInterrupt and SystemExit pass through unchanged
                _reraise_from_plan(plan, e)
        if plan.fetch_devices:
            results = list(results)
            for i, device in plan.fetch_devices:
                results[i] = device.to_host(results[i])
        return results

    def _interpret(self, plan: _Plan, args: list[Any], stats: list | None, trace: bool):
        slots: list[Any] = [None] * plan.n_slots
        for i, value in enumerate(args):
            slots[i] = value
        for i, value in plan.constants.items():
            slots[i] = value
        check = self.config.check_kernel_outputs
        frees = plan.frees
        thread = threading.get_ident()
        for i, step in enumerate(plan.steps):
            inputs = [slots[s] for s in step.ins]
            start = time.perf_counter_ns() if trace else 0
            try:
                result = step.call(*inputs)
                if trace and step.device.device_type == "GPU":
                    _synchronize(step.device)
            except Exception as e:
                raise _node_error(step, e) from e
            end = time.perf_counter_ns() if trace else 0
            outs = step.outs
            if len(outs) == 1:
                results = (result,)
            elif not outs:
                results = ()  # as the generated plan does: whatever it returns is ignored
            else:
                try:
                    results = tuple(result)
                except TypeError as e:  # not a tuple: report it with the node, as kernels' errors
                    raise _node_error(step, e) from e
                if len(results) != len(outs):
                    raise _node_error(
                        step,
                        InternalError(
                            f"kernel returned {len(results)} outputs, the op has {len(outs)}"
                        ),
                    )
            if check and step.op is not None:
                _check_outputs(step, results)
            for s, v in zip(outs, results):
                slots[s] = v
            if stats is not None:
                stats.append(NodeStats(
                    step.name, step.op_type, step.device.name, start / 1000, (end - start) / 1000,
                    [list(getattr(v, "shape", ())) for v in results], thread,
                ))  # fmt: skip
            for s in frees[i]:
                slots[s] = None
        return [slots[s] for s in plan.fetch_slots]

    def _interpret_parallel(self, plan: _Plan, args: list[Any]) -> list[Any]:
        """Runs independent steps concurrently; values are freed by reference counts."""
        steps = plan.steps
        remaining = list(plan.n_deps)
        dependents = plan.dependents
        uses = dict(plan.uses)
        kept = set(plan.fetch_slots)
        slots: list[Any] = [None] * plan.n_slots
        for i, value in enumerate(args):
            slots[i] = value
        for i, value in plan.constants.items():
            slots[i] = value
        lock = threading.Lock()
        done = threading.Event()
        pending = [len(steps)]
        failure: list[BaseException] = []

        def run_from(i: int) -> None:
            while i is not None:
                step = steps[i]
                try:
                    result = step.call(*[slots[s] for s in step.ins])
                    n_outs = len(step.outs)
                    results = (result,) if n_outs == 1 else tuple(result) if n_outs else ()
                    if len(results) != n_outs:
                        raise InternalError(
                            f"kernel returned {len(results)} outputs, the op has {n_outs}"
                        )
                except BaseException as e:
                    with lock:
                        failure.append(_node_error(step, e).with_traceback(None))
                        failure[-1].__cause__ = e
                    done.set()
                    return
                ready = []
                with lock:
                    for s, v in zip(step.outs, results):
                        slots[s] = v
                    for s in step.ins:
                        uses[s] -= 1
                        if uses[s] == 0 and s not in kept:
                            slots[s] = None
                    for j in dependents[i]:
                        remaining[j] -= 1
                        if remaining[j] == 0:
                            ready.append(j)
                    pending[0] -= 1
                    if pending[0] == 0:
                        done.set()
                if failure:
                    return
                for j in ready[1:]:
                    self._inter_pool.submit(run_from, j)
                i = ready[0] if ready else None

        if not steps:
            return [slots[s] for s in plan.fetch_slots]
        try:
            ready = [i for i, n in enumerate(remaining) if n == 0]
            for i in ready[1:]:
                self._inter_pool.submit(run_from, i)
            run_from(ready[0])  # the calling thread works too, rather than only waiting
            done.wait()
        finally:
            # run_from refers to itself through its closure: break that cycle so that `slots`
            # (fed and fetched values, or every live value after a failure) is freed now, by
            # reference counting, rather than whenever the cyclic garbage collector runs.
            run_from = None
        if failure:
            raise failure[0]
        return [slots[s] for s in plan.fetch_slots]


_accepted_attrs: dict[Any, frozenset[str] | None] = {}


def _kernel_attrs(fn: Any, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attrs `fn` declares as parameters (all of them if it takes **kwargs).

    Binding only what a kernel reads keeps each call's keyword dict small: it is rebuilt on
    every call of the partial.
    """
    names = _accepted_attrs.get(fn, ...)
    if names is ...:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            params = None
        if params is None or any(p.kind is p.VAR_KEYWORD for p in params):
            names = None
        else:
            names = frozenset(p.name for p in params if p.kind is not p.VAR_POSITIONAL)
        _accepted_attrs[fn] = names
    if names is None:
        return dict(attrs)
    return {k: v for k, v in attrs.items() if k in names}


def _dependency_tables(plan: _Plan) -> None:
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


def _reraise_from_plan(plan: _Plan, e: Exception) -> NoReturn:
    """Re-raises `e`, raised inside the generated plan, with the failing node's context."""
    step = _failed_step(plan, e)
    if step is None:
        raise e
    raise _node_error(step, e) from e


def _failed_step(plan: _Plan, e: BaseException) -> _Step | None:
    """The step whose line of the generated plan function raised `e`."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is plan.code:
            index = plan.line_to_step.get(tb.tb_lineno)
            return None if index is None else plan.steps[index]
        tb = tb.tb_next
    return None


def _synchronize(device: Device) -> None:
    cuda = getattr(device.xp, "cuda", None)
    if cuda is not None:
        cuda.get_current_stream().synchronize()


def _check_outputs(step: _Step, results: tuple[Any, ...]) -> None:
    for i, (value, (dtype, shape)) in enumerate(zip(results, step.specs)):
        got = getattr(value, "dtype", None)
        if got != dtype.np_dtype:
            raise _node_error(
                step,
                InternalError(f"kernel output {i} has dtype {got}, the graph says {dtype.name}"),
            )
        if not shape.is_compatible_with(value.shape):
            raise _node_error(
                step,
                InternalError(
                    f"kernel output {i} has shape {list(value.shape)}, the graph says {shape}"
                ),
            )


def _to_host(value: Any) -> np.ndarray:
    get = getattr(value, "get", None)  # cupy arrays
    if callable(get):
        return get()
    return np.asarray(value)


# -- fetch structures ------------------------------------------------------------------------------


def _as_target(value: Any) -> Output | Operation | str | None:
    if isinstance(value, OpBuilder):
        outputs = value.outputs
        return outputs[0] if len(outputs) == 1 else value.operation
    if isinstance(value, (Output, Operation, str)):
        return value
    return None


def _flatten(fetches: Any, out: list[Any]) -> Any:
    """A template of `fetches` whose leaves are indices into `out`."""
    if type(fetches) is list or type(fetches) is tuple:
        # A flat list of tensors, the usual case, without a recursive call per leaf.
        start = len(out)
        for item in fetches:
            leaf = item if type(item) is Output else _as_target(item)
            if leaf is None:
                del out[start:]
                break
            out.append(leaf)
        else:
            return (type(fetches), range(start, len(out)))
    leaf = _as_target(fetches)
    if leaf is not None:
        out.append(leaf)
        return len(out) - 1
    if isinstance(fetches, Mapping):
        return (type(fetches), [(k, _flatten(v, out)) for k, v in fetches.items()])
    if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
        return ("namedtuple", type(fetches), [_flatten(v, out) for v in fetches])
    if isinstance(fetches, (list, tuple)):
        return (type(fetches), [_flatten(v, out) for v in fetches])
    raise InvalidArgumentError(
        f"cannot fetch {type(fetches).__name__} {fetches!r}: fetches are Outputs, op builders, "
        "Operations, names, or lists/tuples/dicts/namedtuples of these"
    )


def _rebuild(template: Any, values: list[Any]) -> Any:
    if isinstance(template, int):
        return values[template]
    if type(template[1]) is range:
        kind, span = template
        items = values[span.start : span.stop]
        return items if kind is list else kind(items)
    if template[0] == "namedtuple":
        return template[1](*[_rebuild(t, values) for t in template[2]])
    kind, items = template
    if issubclass(kind, Mapping):
        try:
            return kind((k, _rebuild(t, values)) for k, t in items)
        except TypeError:
            return {k: _rebuild(t, values) for k, t in items}
    return kind(_rebuild(t, values) for t in items)


# -- feeds -----------------------------------------------------------------------------------------


def _convert_feed(out: Output, value: Any) -> Any:
    """Validates a fed value against the tensor's dtype and static shape (before any run)."""
    target = out._dtype
    if type(value) is np.ndarray and value.dtype is target._np and target is not dtypes.string:
        # The common case: the right dtype already; only the shape needs a look.
        if value.shape == out._shape._dims:
            return value
        array = value
    elif isinstance(value, np.ndarray):
        array = value
        if target.is_string:
            # Object arrays may hold str (encoded to UTF-8 here) or anything else (refused).
            array = dtypes.convert_to_array(array, target)
        elif array.dtype != target.np_dtype:
            if np.can_cast(array.dtype, target.np_dtype, casting="safe"):
                array = array.astype(target.np_dtype)
            else:
                raise InvalidArgumentError(
                    f"Cannot feed value of dtype {array.dtype} for Tensor '{out.name}' of dtype "
                    f"{target.name}: the cast is not safe; cast the value first"
                )
    elif hasattr(value, "__cuda_array_interface__"):
        array = value
        if array.dtype != target.np_dtype:
            raise InvalidArgumentError(
                f"Cannot feed a device array of dtype {array.dtype} for Tensor '{out.name}' of "
                f"dtype {target.name}"
            )
    else:
        try:
            array = dtypes.convert_to_array(value, target)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(
                f"Cannot feed value for Tensor '{out.name}' of dtype {target.name}: {e.message}"
            ) from None
    dims = out.shape.dims
    if dims is not None:
        shape = array.shape
        if len(shape) != len(dims) or any(d is not None and d != s for d, s in zip(dims, shape)):
            raise InvalidArgumentError(
                f"Cannot feed value of shape {list(shape)} for Tensor '{out.name}', which has "
                f"shape {out.shape}"
            )
    return array
