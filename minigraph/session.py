"""`Session`: the user-facing way to run graphs.

`Session.run(fetches, feed_dict)` resolves and flattens the fetches, validates the feeds (dtype
and static shape, before anything runs), looks up the compiled plan of the (feeds, fetches)
signature (compiling it on first use, see `minigraph.plan`), runs it, and gives the fetched
values back in the fetches' structure, as numpy arrays.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.builder import OpBuilder
from minigraph.devices import Device, get_devices, is_device_array
from minigraph.errors import FailedPreconditionError, InvalidArgumentError
from minigraph.executor import NodeStats, interpret, interpret_parallel
from minigraph.graph import Graph, Operation, Output
from minigraph.plan import _Plan, _reraise_from_plan, compile_plan
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
            In a distributed session, the client's own (`/job:localhost/...`) devices.
        cluster: distributed sessions only: {job: [worker address or Dask name, ...]}, task K
            of each job being entry K. None: task K of job `worker` is the worker named K.
        op_modules: distributed sessions only: modules of op libraries to import on every
            worker (the `minigraph.op_libraries` entry points are always loaded).
        connect_timeout: distributed sessions only: seconds to wait for the Dask scheduler
            (connecting, and each request about the cluster) before UnavailableError.
    """

    allow_soft_placement: bool = True
    log_device_placement: bool = False
    inter_op_threads: int = 1
    intra_op_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    check_kernel_outputs: bool = False
    devices: Sequence[Device] | None = None
    cluster: Mapping[str, Sequence[str]] | None = None
    op_modules: Sequence[str] = ()
    connect_timeout: float = 10.0


@dataclass(frozen=True)
class RunOptions:
    """Per-run options. `trace=True` fills the RunMetadata's step stats."""

    trace: bool = False


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


class Session:
    """Runs a graph. `Session(scope_or_graph=None, config=SessionConfig(), target=None)`.

    With no graph, the session uses the graph of the first thing it is asked to fetch. Usable as
    a context manager; `run` may be called from several threads at once.

    `target` runs the graph on a Dask cluster (the `distributed` extra): a `distributed.Client`,
    or a scheduler address such as `"tcp://host:8786"` (the session then owns its client and
    closes it). See `minigraph.distributed`.
    """

    _MAX_PLANS = 256

    def __init__(
        self,
        scope_or_graph: Scope | Graph | None = None,
        config: SessionConfig | None = None,
        target: Any = None,
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
        self._remote: Any = None
        if target is not None and target != "":
            from minigraph.distributed import runtime_for  # noqa: PLC0415 - an optional extra

            try:
                self._remote = runtime_for(target, self.config, self.devices)
            except BaseException:
                self.close()
                raise
        elif self.config.cluster is not None or self.config.op_modules:
            raise InvalidArgumentError(
                "SessionConfig.cluster and op_modules apply to distributed sessions only: "
                "pass target= (a distributed.Client or a scheduler address)"
            )

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Releases the plans and thread pools; later runs raise FailedPreconditionError."""
        self._closed = True
        self._plans.clear()
        if getattr(self, "_remote", None) is not None:
            self._remote.close()
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
        compile_ = compile_plan if self._remote is None else self._remote.compile_plan
        plan = compile_(feeds, targets, self.devices, self._host, self.config, self._intra_pool)
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
        if self._remote is not None:
            return self._remote.execute(plan, feeds, options, run_metadata)
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
                results = interpret_parallel(plan, args, self._inter_pool)
            else:
                results = interpret(plan, args, stats, trace, check)
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
    elif is_device_array(value):
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
