"""`Session`: the user-facing way to run graphs.

`Session.run(fetches, feed_dict)` resolves and flattens the fetches, validates the feeds (dtype
and static shape, before anything runs), looks up the compiled plan of the (feeds, fetches)
signature (compiling it on first use, see `minigraph.plan`), runs it, and gives the fetched
values back in the fetches' structure, as numpy arrays.

Lifecycle: every run registers itself (its thread) while in flight. `close` refuses new runs,
lets runs in flight finish (interpreted and inter-op parallel runs stop at their next step with
FailedPreconditionError) and then shuts the thread pools down; closing from inside a run of
the same session (a kernel, a pool thread) leaves the shutdown to the last run to finish.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import TYPE_CHECKING, Any

import numpy as np

from minigraph import dtypes
from minigraph.builder import OpBuilder, as_output
from minigraph.devices import Device, get_devices, is_device_array
from minigraph.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    describe_exception,
)
from minigraph.executor import NodeStats, interpret, interpret_parallel
from minigraph.graph import Graph, Operation, Output
from minigraph.indexed_slices import IndexedSlices, IndexedSlicesValue
from minigraph.memory import BufferPool, available_bytes
from minigraph.optimizer import OptimizerConfig, PassReport, resolve_config
from minigraph.plan import Plan, compile_plan, recover
from minigraph.resources import ResourceStore
from minigraph.scope import Scope

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "Session", "SessionConfig", "RunOptions", "RunMetadata", "NodeStats", "install_remote_runtime",
]  # fmt: skip

# Sessions on a cluster run through minigraph.distributed (a layer above: its workers run
# Sessions, and it is an optional extra): the package's __init__ installs its factory here.
_remote_runtime: list[Any] = [None]


def install_remote_runtime(factory: Any) -> None:
    """Installs `factory(target, config, devices)` behind `Session(target=...)` (for
    `minigraph/__init__.py`)."""
    _remote_runtime[0] = factory


#: The most threads a session's pools may have (a bound on absurd configurations).
MAX_THREADS = 4096


@dataclass(frozen=True)
class SessionConfig:
    """Session options, validated when the config is built.

    Attributes:
        allow_soft_placement: when a requested device cannot run a node, fall back (GPU, then
            CPU) instead of failing. True by default, as in TF 2.
        log_device_placement: print one line per node when a plan is compiled, in TF's format
            (`g: (GatherV2): /job:localhost/replica:0/task:0/device:CPU:0`), to stderr.
        inter_op_threads: >1 runs independent branches concurrently on a thread pool.
        intra_op_threads: threads a kernel may use to split its own work (KernelContext);
            by default one per CPU, as in TF. Only large kernels split (the gathers from
            4 MiB of output), so small graphs never touch the pool.
        check_kernel_outputs: which kernels' outputs are checked on every run against what
            the graph inferred (dtype, shape, array type of the device, output count). None
            (the default): kernels registered without `trusted=True`, i.e. user kernels;
            True: every kernel (for debugging); False: none.
        specialize_kernels: let kernels registered with a specialiser replace themselves,
            per node, by a callable made for its constant inputs and static shapes when a
            plan is compiled (see `register_kernel`). False runs every kernel's general path,
            e.g. to check a specialisation against it.
        devices: the devices to use (a list or tuple of `Device`, with a CPU among them);
            None means `minigraph.devices.get_devices()` when the Session is created. In a
            distributed session, the client's own (`/job:localhost/...`) devices.
        cluster: distributed sessions only: {job: [worker address or Dask name, ...]}, task K
            of each job being entry K, or {job: count}: that many integer-named workers, in
            order, job after job ({"ps": 2, "worker": 1}: ps tasks on workers 0 and 1, worker
            task 0 on worker 2). None: task K of job `worker` is the worker named K.
        op_modules: distributed sessions only: modules of op libraries to import on every
            worker (the `minigraph.op_libraries` entry points are always loaded).
        connect_timeout: distributed sessions only: seconds to wait for the Dask scheduler
            (connecting, and each request about the cluster) before UnavailableError.
        optimizer: the graph optimizer's passes (`minigraph.optimizer.OptimizerConfig`, TF's
            RewriterConfig): True (the default: every pass), False (none), an
            OptimizerConfig switching each pass; None means `optimizer.default_config()`.

    Raises:
        InvalidArgumentError: a field of the wrong type or out of range (thread counts are
            ints in [1, MAX_THREADS]; flags are bools).
    """

    allow_soft_placement: bool = True
    log_device_placement: bool = False
    inter_op_threads: int = 1
    intra_op_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    check_kernel_outputs: bool | None = None
    specialize_kernels: bool = True
    devices: Sequence[Device] | None = None
    cluster: Mapping[str, Sequence[str]] | None = None
    op_modules: Sequence[str] = ()
    connect_timeout: float = 10.0
    optimizer: OptimizerConfig | bool | None = None

    def __post_init__(self) -> None:
        for name in ("allow_soft_placement", "log_device_placement", "specialize_kernels"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise _config_error(name, value, "a bool")
            object.__setattr__(self, name, bool(value))
        for name in ("inter_op_threads", "intra_op_threads"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise _config_error(name, value, "an int")
            if not 1 <= value <= MAX_THREADS:
                raise _config_error(name, value, f"must be >= 1 and <= {MAX_THREADS}")
            object.__setattr__(self, name, int(value))
        check = self.check_kernel_outputs
        if check is not None and not isinstance(check, (bool, np.bool_)):
            raise _config_error("check_kernel_outputs", check, "None, True or False")
        object.__setattr__(self, "check_kernel_outputs", None if check is None else bool(check))
        devices = self.devices
        if devices is not None:
            if isinstance(devices, (str, bytes, Mapping)) or not isinstance(devices, (list, tuple)):
                raise _config_error("devices", devices, "a list or tuple of Device objects")
            for d in devices:
                if not isinstance(d, Device):
                    raise _config_error("devices", devices, "a list or tuple of Device objects")
            names = [d.name for d in devices]
            if len(set(names)) != len(names):
                raise InvalidArgumentError(f"SessionConfig.devices names a device twice: {names}")
            if not any(d.is_host for d in devices):
                raise InvalidArgumentError(
                    f"SessionConfig.devices: a session needs a host (CPU) device; got {names}"
                )
            object.__setattr__(self, "devices", tuple(devices))
        # The cluster's entries are checked in full by minigraph.distributed (the extra).
        cluster = self.cluster
        if cluster is not None and not isinstance(cluster, Mapping):
            raise InvalidArgumentError(
                "SessionConfig.cluster maps job names to lists of worker addresses or names, "
                f"e.g. {{'worker': ['tcp://10.0.0.1:4000']}}; got {type(cluster).__name__}"
            )
        modules = self.op_modules
        if isinstance(modules, (str, bytes)) or not isinstance(modules, Sequence):
            raise _config_error("op_modules", modules, "a list of module names")
        if not all(isinstance(m, str) for m in modules):
            raise _config_error("op_modules", modules, "a list of module names")
        object.__setattr__(self, "op_modules", tuple(modules))
        timeout = self.connect_timeout
        if isinstance(timeout, (bool, np.bool_)) or not isinstance(
            timeout, (int, float, np.integer, np.floating)
        ):
            raise _config_error("connect_timeout", timeout, "must be a number of seconds > 0")
        if not timeout > 0:
            raise _config_error("connect_timeout", timeout, "must be a number of seconds > 0")
        object.__setattr__(self, "connect_timeout", float(timeout))
        object.__setattr__(self, "optimizer", resolve_config(self.optimizer))


def _show(value: Any) -> str:
    """A short repr of a user value, even one whose repr raises."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - describing user objects must not fail
        return f"a {type(value).__name__}"
    if type(text) is not str:
        return f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _config_error(name: str, value: Any, expected: str) -> InvalidArgumentError:
    if not expected.startswith("must"):
        expected = f"must be {expected}"
    return InvalidArgumentError(
        f"SessionConfig.{name} {expected}; got {type(value).__name__} {_show(value)}"
    )


@dataclass(frozen=True)
class RunOptions:
    """Per-run options. `trace=True` fills the RunMetadata's step stats."""

    trace: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.trace, (bool, np.bool_)):
            raise InvalidArgumentError(
                f"RunOptions.trace must be a bool; got {type(self.trace).__name__} "
                f"{_show(self.trace)}"
            )
        object.__setattr__(self, "trace", bool(self.trace))


@dataclass
class RunMetadata:
    """Filled by `Session.run(..., run_metadata=md)`.

    Attributes:
        placement: node name -> full device name, for every node the plan placed (those
            the graph optimizer then removed included) and every node the optimizer made.
        step_stats: per-step timings (only with RunOptions(trace=True)).
        optimizer: what each graph optimizer pass changed in the plan that ran
            (`minigraph.optimizer.PassReport`s, in pass order).
    """

    placement: dict[str, str] = field(default_factory=dict)
    step_stats: list[NodeStats] = field(default_factory=list)
    optimizer: list[PassReport] = field(default_factory=list)

    def chrome_trace(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The step stats as a Chrome trace (open in chrome://tracing or ui.perfetto.dev).

        One process row per device (a worker's devices by their task names), its steps on one
        thread row, whichever threads ran them (a Dask worker runs each task on any thread of
        its pool); steps of one device that overlap in time (inter-op threads) go on further
        rows, the fewest needed. The thread that ran a step is in its args. Writes the trace
        as JSON to `path` when given; returns the trace dict either way.
        """
        devices = sorted({s.device for s in self.step_stats})
        pid = {d: i for i, d in enumerate(devices)}
        events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid[d], "args": {"name": d}} for d in devices
        ]
        lanes: dict[str, list[float]] = {d: [] for d in devices}  # per row: when it is free
        for s in sorted(self.step_stats, key=lambda s: s.start_us):
            ends = lanes[s.device]
            lane = next((i for i, end in enumerate(ends) if end <= s.start_us), len(ends))
            if lane == len(ends):
                ends.append(0.0)
            ends[lane] = s.start_us + s.duration_us
            events.append({
                "ph": "X", "name": s.node, "cat": s.op_type, "pid": pid[s.device],
                "tid": lane, "ts": s.start_us, "dur": s.duration_us,
                "args": {
                    "op": s.op_type, "output_shapes": [str(x) for x in s.output_shapes],
                    "thread": s.thread,
                },
            })  # fmt: skip
        trace = {"traceEvents": events, "displayTimeUnit": "ms"}
        if path is not None:
            if isinstance(path, (bool, int)) or not isinstance(path, (str, bytes, os.PathLike)):
                raise InvalidArgumentError(
                    f"chrome_trace: a path is a str or os.PathLike; got {path!r}"
                )
            import json  # noqa: PLC0415 - only for trace files

            try:
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(trace, f)
            except ValueError as e:  # a path with a NUL character
                raise InvalidArgumentError(f"cannot write the trace to {path!r}: {e}") from None
            except (FileNotFoundError, NotADirectoryError) as e:
                raise NotFoundError(f"cannot write the trace to {path!r}: {e.strerror}") from None
            except OSError as e:
                raise FailedPreconditionError(
                    f"cannot write the trace to {path!r}: {e.strerror or e}"
                ) from None
        return trace


# -- the session ---------------------------------------------------------------------------------

# Threads of a session's pools know their session (to tell a close from inside a run).
_pool_thread = threading.local()


def _mark_pool_thread(session: weakref.ref) -> None:
    _pool_thread.session = session


def _pool_session() -> Any:
    ref = getattr(_pool_thread, "session", None)
    return None if ref is None else ref()


def _shutdown(pools: Sequence[_ThreadPool], wait: bool) -> None:
    for pool in pools:
        pool.shutdown(wait=wait)


class _ThreadPool:
    """A session's thread pool: a ThreadPoolExecutor that a forked child makes anew.

    A child process has only the thread that forked (`multiprocessing.Pool` forks on Linux),
    but a copied executor still counts its parent's threads as idle workers and queues work for
    them, which then never runs: a kernel splitting its work would wait forever. After a fork
    every live pool gets a new executor (threads start on first use); a pool shut down before
    the fork stays shut down. `submit` and `shutdown` are the executor's.
    """

    __slots__ = ("_threads", "_prefix", "_initargs", "_executor", "_lock", "_shut", "__weakref__")

    def __init__(self, threads: int, prefix: str, initargs: tuple[Any, ...]):
        self._threads = threads
        self._prefix = prefix
        self._initargs = initargs
        self._lock = threading.Lock()
        self._shut = False
        self._executor = self._new_executor()
        _live_pools.add(self)

    def _new_executor(self) -> ThreadPoolExecutor:
        # Imported here: `import minigraph` stays light (concurrent.futures loads logging).
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        return ThreadPoolExecutor(
            self._threads, thread_name_prefix=self._prefix, initializer=_mark_pool_thread,
            initargs=self._initargs,
        )  # fmt: skip

    def submit(self, fn: Any, /, *args: Any) -> Any:
        if self._shut:  # a shut executor copied into a child may hold a vanished thread's lock
            raise RuntimeError("cannot schedule new futures after shutdown")
        return self._executor.submit(fn, *args)

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._shut = True
            executor = self._executor
        executor.shutdown(wait=wait)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        if not self._shut:
            self._executor = self._new_executor()


_live_pools: weakref.WeakSet[_ThreadPool] = weakref.WeakSet()
_live_sessions: weakref.WeakSet[Session] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Makes every live session usable in a forked child: new thread pools, and new locks in
    place of any a vanished thread held; the runs of those threads are not in flight here."""
    for pool in list(_live_pools):
        pool._after_fork_in_child()
    for session in list(_live_sessions):
        session._lock = threading.Lock()
        session._idle = threading.Condition(threading.Lock())
        session._running.clear()
        reinit = getattr(session._closing, "_at_fork_reinit", None)  # plans hold this Event
        if reinit is not None:
            reinit()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Session:
    """Runs a graph. `Session(scope_or_graph=None, config=SessionConfig(), target=None)`.

    With no graph, the session uses the graph of the first thing it is asked to fetch. Usable as
    a context manager; `run` may be called from several threads at once, and `close` from any
    thread, at any time.

    `target` runs the graph on a Dask cluster (the `distributed` extra): a `distributed.Client`,
    or a scheduler address such as `"tcp://host:8786"` (the session then owns its client and
    closes it). See `minigraph.distributed`.

    `resources` (keyword only): a `minigraph.resources.ResourceStore` to keep the variables'
    values in instead of a new one, shared with whoever made it (which clears it: `close`
    does not). Distributed sessions use it: the partitions of one session on one worker share
    one store.
    """

    _MAX_PLANS = 256

    def __init__(
        self,
        scope_or_graph: Scope | Graph | None = None,
        config: SessionConfig | None = None,
        target: Any = None,
        *,
        resources: ResourceStore | None = None,
    ):
        self._remote: Any = None
        if isinstance(scope_or_graph, Scope):
            self.graph: Graph | None = scope_or_graph.graph
        elif isinstance(scope_or_graph, Graph) or scope_or_graph is None:
            self.graph = scope_or_graph
        else:
            raise InvalidArgumentError(
                f"Session takes a Scope or a Graph; got {type(scope_or_graph).__name__}"
            )
        if config is not None and not isinstance(config, SessionConfig):
            raise InvalidArgumentError(
                f"Session's config must be a SessionConfig; got {type(config).__name__}"
            )
        self.config = config or SessionConfig()
        devices = self.config.devices
        self.devices: list[Device] = list(devices) if devices is not None else get_devices()
        if not any(d.is_host for d in self.devices):
            raise InvalidArgumentError("a session needs a host (CPU) device")
        self._host = next(d for d in self.devices if d.is_host)
        self._plans: dict[Any, Plan] = {}
        # The last list or tuple of fetches resolved, as (type, length, items as a tuple,
        # targets, template, targets as a key, plan, result order): a run fetching the same
        # objects again skips resolving them.
        self._last_fetches: tuple[Any, ...] | None = None
        self._lock = threading.Lock()
        self._closed = False
        # One entry per run in flight. deque.append and deque.pop are atomic, so the hot path
        # takes no lock, and unlike a list's they do not allocate and free storage every time
        # the deque goes from empty to one entry and back. `_idle` wakes a close waiting.
        self._running: collections.deque[None] = collections.deque()
        self._idle = threading.Condition(threading.Lock())
        self._closing = threading.Event()  # stops interpreted runs at their next step
        self._inter_pool: _ThreadPool | None = None
        self._intra_pool: _ThreadPool | None = None
        # Large host arrays (kernel outputs and temporaries) are recycled through this pool
        # once nothing references them; see minigraph.memory.
        self._buffers = BufferPool()
        # The state of stateful ops (variables), per device; see minigraph.resources. A store
        # given by the caller (`resources=`: what the partitions of one distributed session
        # share on a worker) stays its owner's to clear: close leaves it alone.
        self._owns_resources = resources is None
        self._resources = ResourceStore() if resources is None else resources
        _live_sessions.add(self)  # made usable in a forked child (see _after_fork_in_child)
        me = (weakref.ref(self),)
        if self.config.intra_op_threads > 1:
            self._intra_pool = _ThreadPool(self.config.intra_op_threads - 1, "minigraph-intra", me)
        if self.config.inter_op_threads > 1:
            self._inter_pool = _ThreadPool(self.config.inter_op_threads, "minigraph-inter", me)
        self._pools = tuple(p for p in (self._inter_pool, self._intra_pool) if p is not None)
        if self._pools:
            # A session dropped without close() still lets its idle threads go.
            weakref.finalize(self, _shutdown, self._pools, False)
        if target is not None and target != "":
            try:
                self._remote = _remote_runtime[0](target, self.config, self.devices)
            except BaseException:
                self.close()
                raise
        elif self.config.cluster is not None or self.config.op_modules:
            raise InvalidArgumentError(
                "SessionConfig.cluster and op_modules apply to distributed sessions only: "
                "pass target= (a distributed.Client or a scheduler address)"
            )

    @property
    def resources(self) -> ResourceStore:
        """The session's state: the values of its variables, per device
        (`minigraph.resources.ResourceStore`). A new session holds none; `close` drops them."""
        return self._resources

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the session: later runs raise FailedPreconditionError.

        Runs in flight on other threads either complete or raise FailedPreconditionError
        (interpreted and inter-op parallel runs stop at their next step); close returns once
        they are done and the thread pools are shut down, their threads joined. Called from
        inside a run of this session (a kernel), it does not wait: the last run in flight
        shuts the pools down when it ends. The session's state (its variables' values) is
        dropped. Idempotent.
        """
        with self._idle:
            self._closed = True
            self._closing.set()
        if self._remote is not None:
            self._remote.close()  # ends distributed runs in flight (they raise), then frees
        inside = self._inside_run()
        if not inside:
            with self._idle:
                while self._running:
                    self._idle.wait(0.05)
        self._plans.clear()
        self._buffers.clear()
        if self._owns_resources:
            self._resources.clear()  # every variable's value goes
        if not inside:
            _shutdown(self._pools, True)
        elif not self._running:
            _shutdown(self._pools, _pool_session() is not self)

    def _inside_run(self) -> bool:
        """Whether the calling thread is running a step of this session (a kernel that closes
        it), whose run cannot be waited for."""
        if _pool_session() is self:
            return True
        run_code = Session.run.__code__
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code is run_code and frame.f_locals.get("self") is self:
                return True
            frame = frame.f_back
        return False

    def _run_ended(self) -> None:
        """After a run of a closed session: wake close, and shut down if it was the last."""
        with self._idle:
            self._idle.notify_all()
            last = not self._running
        if last:
            self._plans.clear()
            # A pool thread cannot join itself: from there the threads are released, not joined.
            _shutdown(self._pools, _pool_session() is not self)

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
                dicts and namedtuples of these. The result has the same structure. A builder of
                an op with several outputs gives a namedtuple of their values, by output name;
                an IndexedSlices (a sparse gradient) gives an IndexedSlicesValue.
            feed_dict: {Output, builder or name: value}. Any tensor may be fed, which cuts the
                graph above it; each tensor under one key only. Values: numpy arrays, Python
                scalars/lists, or cupy arrays; see the README for the casts feeds accept.
            options: RunOptions(trace=True) records per-step timings in `run_metadata`.
            run_metadata: receives the placement and, when tracing, the step stats.

        Raises:
            InvalidArgumentError: a bad fetch or feed, an unfed placeholder, or a kernel's data
                error (with the node, its device and where it was defined).
            NotFoundError: a name that is not in the graph, or a node without a kernel.
            FailedPreconditionError: the session is closed (or closes during the run).
            InternalError: a kernel returned something else than the graph says.
        """
        running = self._running
        try:
            running.append(None)
            if self._closed:
                raise FailedPreconditionError("Attempted to use a closed Session.")
            # A single fetch needs no structure handling: the common case, kept short.
            leaf = fetches if type(fetches) is Output else _as_target(fetches)
            if leaf is not None:
                # Slot reads: `leaf.op.graph` costs +3.0% of a one-node run (callgrind).
                if type(leaf) is not Output or leaf._op._graph is not self.graph:
                    leaf = self._resolve(leaf)
                targets = (leaf,)
            else:
                last = self._last_fetches
                kind = type(fetches)
                if (
                    last is not None
                    and kind is last[0]
                    and len(fetches) == last[1]
                    and all(map(is_, fetches, last[2]))  # identity: no user __eq__ runs
                ):
                    targets, template, targets_key = last[3], last[4], last[5]
                else:
                    flat: list[Any] = []
                    template = _flatten(fetches, flat)
                    graph = self.graph
                    targets = tuple(
                        t if type(t) is Output and t.op.graph is graph else self._resolve(t)
                        for t in flat
                    )
                    targets_key = frozenset(targets)
                    last = None
            feeds: dict[Output, Any] = {}
            all_numpy = True
            # The type before the truth value: an Output or array passed as feed_dict has none.
            if (
                feed_dict is not None
                and type(feed_dict) is not dict
                and not isinstance(feed_dict, Mapping)
            ):
                raise _bad_feed_dict(feed_dict)
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
                    # Slot reads: `out.op.graph` costs +2.9% of a one-node run (callgrind).
                    if out._op._graph is not graph:
                        out = self._feed_key(out)
                    if out in feeds:
                        self._refuse_duplicate_feeds(feed_dict)
                    fed = feeds[out] = _convert_feed(out, value)
                    if fed is not value or type(fed) is not np.ndarray:
                        # Device arrays need copies; converted values are ours, and the
                        # slower path releases them after their last use.
                        all_numpy = False
                fed = None  # the run holds fed values only through `feeds`
            # Plans are keyed order-insensitively: feeds and fetches as sets.
            key = (frozenset(feeds), leaf if leaf is not None else targets_key)
            plan = self._plans.get(key)
            if plan is None:
                plan = self._compile(feeds, list(targets), key)
            # The fed arrays a result may pass through (the run releases `feeds`' values; the
            # caller's arrays stay alive in `feed_dict`, so their ids stay theirs).
            fed_ids = {id(v): out for out, v in feeds.items()} if plan.pass_through else None
            if plan.simple and all_numpy and options is None and run_metadata is None:
                # The hot path: host feeds, host fetches, no tracing. Nothing but the plan.
                try:
                    results = plan.fn(list(map(feeds.__getitem__, plan.feed_order)))
                except Exception as e:  # KeyboardInterrupt and SystemExit pass through unchanged
                    failed = e
                else:
                    failed = None
                if failed is not None:  # outside the handler: errors chain to the node's only
                    results = recover(plan, failed)
            else:
                results = self._execute(plan, feeds, options, run_metadata)
            if fed_ids is not None:
                results = _copy_passed_through(results, plan.pass_through, fed_ids)
            if leaf is not None:
                i = plan.fetch_index[leaf]
                return None if i is None else results[i]
            if last is not None and last[6] is plan:
                order = last[7]
            else:
                order = _result_order(plan, targets)
                if type(template[1]) is range and (
                    type(fetches) is list or type(fetches) is tuple
                ):  # a flat list: its items (Outputs, Operations, names, builders) never change
                    self._last_fetches = (
                        type(fetches), len(fetches), tuple(fetches), targets, template,
                        targets_key, plan, order,
                    )  # fmt: skip
            if order is None:  # results come in the targets' order: the usual list of tensors
                values = list(results)
            else:
                values = [None if i is None else results[i] for i in order]
            if type(template[1]) is range and template[1].start == 0:
                return values if template[0] is list else template[0](values)
            return _rebuild(template, values)
        finally:
            try:
                running.pop()
            except IndexError:  # interrupted before it was registered
                pass
            if self._closed:
                self._run_ended()

    def _refuse_duplicate_feeds(self, feed_dict: Mapping[Any, Any]) -> None:
        """Raises for the first tensor that `feed_dict` feeds under two keys."""
        seen: dict[Output, Any] = {}
        for key in feed_dict:
            out = key if type(key) is Output else self._feed_key(key)
            if out in seen:
                raise InvalidArgumentError(
                    f"Tensor {out.name!r} is fed twice, under the keys {_key_text(seen[out])} "
                    f"and {_key_text(key)}: feed each tensor under one key",
                    out.op.name,
                    out.op.type,
                )
            seen[out] = key
        raise InvalidArgumentError("feed_dict changed while it was read")

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
            out = key.operation if isinstance(key, OpBuilder) else key
            if not isinstance(out, (Output, Operation)):
                # A Variable feeds (and fetches) its own read (`Variable.value()`).
                made = as_output(key)
                out = made if made is not None else key
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

    def _compile(self, feeds: Mapping[Output, Any], targets: list[Any], key: Any) -> Plan:
        if self._remote is None:
            plan = compile_plan(
                feeds, targets, self.devices, self._host, self.config, self._intra_pool,
                self._buffers, self._closing, self._resources,
            )  # fmt: skip
        else:
            plan = self._remote.compile_plan(
                feeds, targets, self.devices, self._host, self.config, self._intra_pool
            )
        with self._lock:
            plans = self._plans
            if len(plans) >= self._MAX_PLANS and key not in plans:
                plans.pop(next(iter(plans)))
            plans[key] = plan
        return plan

    # -- execute ---------------------------------------------------------------------------------

    def _execute(
        self,
        plan: Plan,
        feeds: dict[Output, Any],
        options: RunOptions | None,
        run_metadata: RunMetadata | None,
    ) -> Sequence[Any]:
        """Runs the plan; returns the fetched values (host arrays) in `fetch_slots` order."""
        if options is not None and not isinstance(options, RunOptions):
            raise InvalidArgumentError(
                f"options must be a RunOptions; got {type(options).__name__} {_show(options)}"
            )
        if run_metadata is not None and not isinstance(run_metadata, RunMetadata):
            raise InvalidArgumentError(
                f"run_metadata must be a RunMetadata; got {type(run_metadata).__name__} "
                f"{_show(run_metadata)}"
            )
        if self._remote is not None:
            return self._remote.execute(plan, feeds, options, run_metadata)
        # The fed values that an untrusted kernel may see, by the id of what it sees (kept
        # alive with it, so that the id stays unique): a result that is one of them is
        # given back as the array the caller fed.
        exposed: dict[int, tuple[Any, Any]] = {}
        trace = options is not None and options.trace
        if run_metadata is not None:
            run_metadata.placement.update(plan.placement)
            run_metadata.optimizer[:] = plan.optimizer
        # The argument lists are built in the calls: the plan (or interpreter) then holds the
        # only references to the fed values and releases each after its last use.
        if trace:
            stats = run_metadata.step_stats if run_metadata is not None else None
            results = interpret(
                plan, self._arguments(plan, feeds, exposed), stats, True, self._closing
            )
        elif self._inter_pool is not None:
            results = interpret_parallel(
                plan, self._arguments(plan, feeds, exposed), self._inter_pool, self._closing
            )
        else:
            try:
                results = plan.fn(self._arguments(plan, feeds, exposed))
            except Exception as e:  # KeyboardInterrupt and SystemExit pass through unchanged
                failed = e
            else:
                failed = None
            if failed is not None:  # outside the handler: errors chain to the node's only
                results = recover(plan, failed)
        if plan.fetch_devices or plan.unalias:
            results = list(results)
            for i, device in plan.fetch_devices:
                results[i] = device.to_host(results[i])
            for i in plan.unalias:
                results[i] = _unalias(results[i], exposed)
        return results

    @staticmethod
    def _arguments(
        plan: Plan, feeds: dict[Output, Any], exposed: dict[int, tuple[Any, Any]]
    ) -> list[Any]:
        """The plan's arguments: fed values on their devices, protected where the plan says
        an untrusted kernel sees them. Empties `feeds`, which the caller owns."""
        args = list(map(feeds.__getitem__, plan.feed_order))
        feeds.clear()
        protect = plan.protect
        if plan.host_feeds:
            for i, value in enumerate(args):
                if type(value) is not np.ndarray:
                    args[i] = _to_host(value)
            devices = plan.feed_devices
            for i in protect:
                args[i] = _protected(args[i], devices[i], exposed)
            return args
        for i, device in enumerate(plan.feed_devices):
            value = args[i]
            if device.accepts(value):
                # The caller's own array, passed as is unless an untrusted kernel may see it.
                if protect and i in protect:
                    args[i] = _protected(value, device, exposed)
                continue
            if not isinstance(value, np.ndarray):
                value = _to_host(value)
            if device.is_host:
                args[i] = _protected(value, device, exposed) if protect and i in protect else value
            else:
                args[i] = device.from_host(value)  # a private copy
        return args


def _protected(value: Any, device: Device, exposed: dict[int, tuple[Any, Any]]) -> Any:
    """What an untrusted kernel gets of the caller's array: a read-only view on the host (a
    kernel writing into it fails), a private copy on a device (device arrays have no
    read-only flag). `exposed` maps what the kernel got back to the caller's array."""
    if not device.is_host:
        return device.copy_from(value.copy(), device)
    view = value.view()
    view.setflags(write=False)  # cheaper than view.flags.writeable = False
    exposed[id(view)] = (view, value)
    return view


def _copy_passed_through(
    results: Any, indexes: tuple[int, ...], fed_ids: Mapping[int, Output]
) -> Any:
    """`results` with a copy in place of each result (at `indexes`) that is a fed array
    (`fed_ids`: the fed tensor of each fed array's id)."""
    copied = None
    for i in indexes:
        value = results[i]
        out = fed_ids.get(id(value))
        if out is not None:
            if copied is None:
                copied = results = list(results)
            results[i] = _materialise(out, value, value, context=_PASSED_THROUGH)
    return results


_PASSED_THROUGH = (
    "a fetch passes the fed array through (Identity, a Cast to its dtype), and a fetched "
    "value is a copy unless it is the fed tensor itself"
)


def _unalias(value: Any, exposed: dict[int, tuple[Any, Any]]) -> Any:
    """A result that may be a view of a fed array: the fed array itself when it is that array
    (or the read-only view the kernel got of it), else a copy when it shares its memory."""
    hit = exposed.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    if isinstance(value, np.ndarray) and value.base is not None:
        for _, fed in exposed.values():
            if np.may_share_memory(value, fed):
                return value.copy()
    return value


def _bad_feed_dict(feed_dict: Any) -> InvalidArgumentError:
    hint = ""
    if isinstance(feed_dict, (list, tuple)):
        hint = " (for a list of (key, value) pairs, pass dict(pairs))"
    elif isinstance(feed_dict, (Output, OpBuilder)):
        hint = " (to fetch several tensors, pass a list as the first argument: run([a, b]))"
    return InvalidArgumentError(
        f"feed_dict must be a dict {{tensor: value}}; got {type(feed_dict).__name__}{hint}"
    )


def _key_text(key: Any) -> str:
    if isinstance(key, Output):
        return f"Output {key.name!r}"
    if isinstance(key, OpBuilder):
        return f"builder {key.operation.name!r}"
    if isinstance(key, Operation):
        return f"Operation {key.name!r}"
    return _show(key)


def _to_host(value: Any) -> np.ndarray:
    get = getattr(value, "get", None)  # cupy arrays
    if callable(get):
        return get()
    return np.asarray(value)


# -- fetch structures ------------------------------------------------------------------------------


def _as_target(value: Any) -> Output | Operation | str | None:
    """The single graph element `value` stands for; None for structures (and for builders of
    several outputs, which fetch as a namedtuple: see `_flatten`)."""
    if isinstance(value, OpBuilder):
        outputs = value.outputs
        if len(outputs) == 1:
            return outputs[0]
        return value.operation if not outputs else None
    if isinstance(value, (Output, Operation, str)):
        return value
    return as_output(value)  # what stands for a tensor (a Variable: its value), else None


def _result_order(plan: Plan, targets: tuple[Any, ...]) -> list[int | None] | None:
    """Per target, its index in the plan's results (None for an Operation); None when the
    results already come in the targets' order."""
    index = plan.fetch_index
    order = [index[t] for t in targets]
    # Every result is some target's: 0, 1, ..., n-1 in order means exactly the n results.
    if order == list(range(len(order))):
        return None
    return order


# Nesting deeper than this is refused with a typed error before Python's recursion limit is hit
# (here or in `_rebuild`); real fetch structures are a few levels deep.
_MAX_FETCH_DEPTH = 100


def _flatten(fetches: Any, out: list[Any], depth: int = 0) -> Any:
    """A template of `fetches` whose leaves are indices into `out`."""
    if depth > _MAX_FETCH_DEPTH:
        raise InvalidArgumentError(
            f"fetches nested more than {_MAX_FETCH_DEPTH} levels deep: fetch a flatter structure"
        )
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
    if isinstance(fetches, OpBuilder):
        return _flatten_outputs(fetches.operation, out)
    if isinstance(fetches, Mapping):
        return (type(fetches), [(k, _flatten(v, out, depth + 1)) for k, v in fetches.items()])
    if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
        return ("namedtuple", type(fetches), [_flatten(v, out, depth + 1) for v in fetches])
    if isinstance(fetches, (list, tuple)):
        return (type(fetches), [_flatten(v, out, depth + 1) for v in fetches])
    if isinstance(fetches, IndexedSlices):
        # A sparse gradient fetches as TF 1.x's IndexedSlicesValue of numpy arrays.
        parts = [fetches.values, fetches.indices]
        if fetches.dense_shape is None:
            return ("namedtuple", _value_without_shape, [_flatten(p, out) for p in parts])
        parts.append(fetches.dense_shape)
        return ("namedtuple", IndexedSlicesValue, [_flatten(p, out) for p in parts])
    raise InvalidArgumentError(
        f"cannot fetch {type(fetches).__name__} {_show(fetches)}: fetches are Outputs, op "
        "builders, Operations, names, or lists/tuples/dicts/namedtuples of these"
    )


def _value_without_shape(values: Any, indices: Any) -> IndexedSlicesValue:
    return IndexedSlicesValue(values, indices, None)


def _flatten_outputs(op: Operation, out: list[Any]) -> Any:
    """The template of a builder with several outputs: a namedtuple by output arg name, with a
    list of values for an arg that holds a list of tensors."""
    op_def = op.op_def
    lengths_of = getattr(op_def, "output_arg_lengths", None)
    lengths = lengths_of(op.attrs) if lengths_of is not None else (1,) * len(op_def.outputs)
    outputs = op.outputs
    fields: list[Any] = []
    k = 0
    for arg, n in zip(op_def.outputs, lengths):
        if getattr(arg, "is_list", False):
            fields.append((list, list(range(len(out), len(out) + n))))
        else:
            fields.append(len(out))
        out.extend(outputs[k : k + n])
        k += n
    return ("namedtuple", _outputs_tuple(op_def), fields)


_outputs_tuples: dict[Any, type] = {}


def _outputs_tuple(op_def: Any) -> type:
    """`<Op>Outputs`, a namedtuple of the op's output arg names (cached per OpDef)."""
    cls = _outputs_tuples.get(op_def)
    if cls is None:
        names = [a.name for a in op_def.outputs]
        try:
            cls = collections.namedtuple(f"{op_def.name}Outputs", names)
        except ValueError:  # a name namedtuple refuses (a keyword, a leading underscore)
            cls = collections.namedtuple(f"{op_def.name}Outputs", names, rename=True)
        _outputs_tuples[op_def] = cls
    return cls


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
    rebuilt = [_rebuild(t, values) for t in items]
    if kind is list:
        return rebuilt
    try:
        return kind(rebuilt)
    except TypeError:  # a subclass with another constructor: its base type instead
        return list(rebuilt) if issubclass(kind, list) else tuple(rebuilt)


# -- feeds -----------------------------------------------------------------------------------------


# Feeds cast as TF 1's feed_dict does where no value can change, and refuse the rest:
# - the same kind (int and uint to int and uint, float to float, complex to complex): cast;
#   integers are range-checked, and a finite float that would become inf is refused;
# - widenings across kinds that numpy calls "safe" (int8 to float32, float32 to complex64):
#   cast when every value is exact in the target; numpy counts int64 and uint64 to float64
#   and complex128 as safe, but 2**53 + 1 becomes 2**53 there, so those are checked;
# - anything else (float to int, bool to or from a number, numbers to or from strings,
#   int64 to float32): refused, with InvalidArgumentError naming the feed.
# Values are checked on each distinct element once (a broadcast feed, whose zero strides
# repeat a few values, is never expanded to check it), and a cast that would make an array
# larger than the memory available is a ResourceExhaustedError naming the feed.
def _kind_name(dtype: dtypes.DType) -> str:
    """The kind of a numeric, non-bool dtype, as the cast rules above group them."""
    if dtype.is_integer:
        return "integer"
    return "float" if dtype.is_floating else "complex"


def _convert_feed(out: Output, value: Any) -> Any:
    """Validates a fed value against the tensor's dtype and static shape (before any run)."""
    # Slot reads per run: the public properties cost +7.6% of a one-node run (callgrind).
    target = out._dtype
    if type(value) is np.ndarray and value.dtype is target._np and target is not dtypes.string:
        # The common case: the right dtype already; only the shape needs a look.
        if value.shape == out._shape._dims:
            return value
        array = value
    elif isinstance(value, (np.ndarray, np.generic)):
        array = _cast_array(out, value)
    elif is_device_array(value):
        array = value
        if array.dtype != target.np_dtype:
            raise InvalidArgumentError(
                f"Cannot feed a device array of dtype {array.dtype} for Tensor '{out.name}' of "
                f"dtype {target.name}: device arrays are not cast; cast it first"
            )
    else:
        try:
            array = dtypes.convert_to_array(value, target)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(
                f"Cannot feed value for Tensor '{out.name}' of dtype {target.name}: {e.message}"
            ) from None
        except Exception as e:  # an object whose __array__, __len__ or __getitem__ raises
            raise InvalidArgumentError(
                f"Cannot feed value for Tensor '{out.name}' of dtype {target.name}: "
                f"converting it raised {describe_exception(e)}"
            ) from e
    dims = out.shape.dims
    if dims is not None:
        shape = array.shape
        if len(shape) != len(dims) or any(d is not None and d != s for d, s in zip(dims, shape)):
            raise InvalidArgumentError(
                f"Cannot feed value of shape {list(shape)} for Tensor '{out.name}', which has "
                f"shape {out.shape}"
            )
    return array


def _cast_array(out: Output, value: Any) -> np.ndarray:
    """A numpy array or scalar fed for `out`, as a plain array of its dtype (see above)."""
    target = out.dtype
    if isinstance(value, np.ma.MaskedArray):
        raise _feed_error(out, value.dtype, "masked arrays are not supported; fill them first")
    array = np.asarray(value)  # numpy scalars become 0-d arrays, subclasses plain arrays
    source = array.dtype
    # Each distinct element once: a broadcast array's repeated values are looked at once.
    distinct = _distinct(array)
    if target.is_string:
        if source.kind not in "SUO":
            raise _feed_error(out, source, "numbers are not cast to strings")
        _check_fits(out, array, np.dtype(object))
        try:
            converted = dtypes.convert_to_array(distinct, target)
        except InvalidArgumentError as e:
            raise _feed_error(out, source, e.message) from None
        if distinct is array:
            return converted
        return _materialise(out, array, np.broadcast_to(converted, array.shape))
    if source == target.np_dtype:
        return array
    if source.kind in "SUO":
        raise _feed_error(out, source, "strings and objects are not cast to numbers")
    try:
        source_dtype = dtypes.as_dtype(source)
    except InvalidArgumentError as e:
        raise _feed_error(out, source, e.message) from None
    if source_dtype.is_bool or target.is_bool:
        raise _feed_error(out, source, "bool is not cast to or from numbers")
    np_target = target.np_dtype
    if np.can_cast(source, np_target, casting="safe"):
        i = _first_inexact(distinct, np_target)
        if i is not None:
            flat = distinct.reshape(-1)
            with np.errstate(all="ignore"):
                became = flat[i : i + 1].astype(np_target)[0]
            raise _feed_error(
                out, source,
                f"the value {flat[i]} at {_position(distinct.shape, i)} has no exact "
                f"{target.name} value (it would become {became})",
            )  # fmt: skip
        return _materialise(out, array, array, np_target)
    kind, target_kind = _kind_name(source_dtype), _kind_name(target)
    if kind != target_kind:
        raise _feed_error(
            out, source, f"{kind} to {target_kind} casts may change values; cast the value first"
        )
    flat = distinct.reshape(-1)
    if target.is_integer:
        info = np.iinfo(np_target)
        if flat.size:
            i = int(np.argmin(flat))
            if int(flat[i]) >= info.min:
                i = int(np.argmax(flat))
                if int(flat[i]) <= info.max:
                    return _materialise(out, array, array, np_target)
            raise _feed_error(
                out, source,
                f"the value {flat[i]} at {_position(distinct.shape, i)} is out of its range "
                f"[{info.min}, {info.max}]",
            )  # fmt: skip
        return _materialise(out, array, array, np_target)
    # float to a narrower float, complex to a narrower complex: rounding is the cast itself;
    # only a finite value that overflows to inf would change beyond it.
    with np.errstate(over="ignore", invalid="ignore"):
        converted = flat.astype(np_target)
    overflow = np.isinf(converted) & ~np.isinf(flat)
    if overflow.any():
        i = int(np.argmax(overflow))
        raise _feed_error(
            out, source, f"the value {flat[i]} at {_position(distinct.shape, i)} overflows it"
        )
    if distinct is not array:
        return _materialise(out, array, array, np_target)
    return converted.reshape(array.shape)


def _distinct(array: np.ndarray) -> np.ndarray:
    """`array` with each broadcast dimension (stride 0: the same values repeated, as
    np.broadcast_to makes) cut to length 1: every distinct element once, at a position that
    holds it in `array` too. `array` itself when it repeats nothing."""
    strides, shape = array.strides, array.shape
    if all(s or n <= 1 for s, n in zip(strides, shape)):
        return array
    cut = tuple(slice(0, 1) if not s and n > 1 else slice(None) for s, n in zip(strides, shape))
    return array[cut]


def _first_inexact(values: np.ndarray, target: np.dtype) -> int | None:
    """The flat index of the first integer of `values` that float or complex `target` does
    not hold exactly, or None: an integer type wider than the target's significand (int64 to
    float64: 63 bits into 53) rounds large values."""
    source = values.dtype
    if source.kind not in "iu" or target.kind not in "fc" or not values.size:
        return None
    magnitude_bits = source.itemsize * 8 - (source.kind == "i")
    if magnitude_bits <= np.finfo(target).nmant + 1:
        return None  # every value of the source type is exact
    flat = values.reshape(-1)
    with np.errstate(all="ignore"):
        converted = flat.astype(target)
        real = converted.real if target.kind == "c" else converted
        # Back to the integer type: unchanged exactly when exact. A value that rounded up to
        # 2**63 (2**64 for uint64) is past the type, where the conversion back is undefined.
        too_big = real >= float(np.iinfo(source).max)
        changed = too_big | (real.astype(source) != flat)
    if not changed.any():
        return None
    return int(np.argmax(changed))


def _check_fits(out: Output, array: np.ndarray, dtype: np.dtype, context: str = "") -> None:
    """Refuses a feed whose materialised copy (`array`'s elements as `dtype`) would not fit
    in the memory available, before allocating it."""
    nbytes = array.size * dtype.itemsize
    if nbytes <= _ALWAYS_FITS:
        return
    available = available_bytes()
    if available is not None and nbytes > available:
        raise _too_big(out, array, nbytes, f"{_size(available)} are available", context)


def _materialise(
    out: Output,
    array: np.ndarray,
    source: np.ndarray,
    dtype: np.dtype | None = None,
    context: str = "",
) -> np.ndarray:
    """A new array of `source`'s values as `dtype` (its own dtype by default), for the feed
    `array` of `out`; checked against the memory available first."""
    dtype = source.dtype if dtype is None else dtype
    _check_fits(out, array, dtype, context)
    # A broadcast source becomes a C-ordered array (order "K" would follow its zero strides).
    order = "C" if _distinct(source) is not source else "K"
    try:
        return source.astype(dtype, order=order)
    except MemoryError:
        raise _too_big(out, array, array.size * dtype.itemsize, "it failed", context) from None


#: Copies up to this size are made without asking the system how much memory is available.
_ALWAYS_FITS = 64 << 20


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} bytes"


def _too_big(
    out: Output, array: np.ndarray, nbytes: int, why: str, context: str = ""
) -> ResourceExhaustedError:
    kind = "a broadcast array" if _distinct(array) is not array else "an array"
    if context:
        hint = f"; {context}"
    elif out.dtype.is_string:
        hint = "; feed a smaller value"
    else:
        hint = "; feed a smaller value, or one of the tensor's dtype (fed without a copy)"
    return ResourceExhaustedError(
        f"Cannot feed value of shape {list(array.shape)} for Tensor '{out.name}' of dtype "
        f"{out.dtype.name}: {kind} of {array.size} elements, whose copy as "
        f"{out.dtype.name} would take {_size(nbytes)} ({why}){hint}",
        out.op.name,
        out.op.type,
    )


def _position(shape: tuple[int, ...], flat_index: int) -> str:
    if not shape:
        return "[]"
    return str(list(map(int, np.unravel_index(flat_index, shape))))


def _feed_error(out: Output, source: Any, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Cannot feed value of dtype {source} for Tensor '{out.name}' of dtype "
        f"{out.dtype.name}: {why}",
        out.op.name,
        out.op.type,
    )
