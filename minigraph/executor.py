"""Step interpreters: the slower ways to run a plan, used for tracing and inter-op parallelism
(otherwise a plan runs as its generated function).

Both take ownership of the `args` list they are given (the fed values, in slot order) and
empty it, so that a fed value is released after its last use like any intermediate. Both stop
at the next step boundary once `cancel` is set (the session is closing) and then raise
FailedPreconditionError. Exceptions that are not `Exception`s (KeyboardInterrupt, SystemExit,
GeneratorExit) propagate unchanged, from whichever thread ran the kernel.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from minigraph.devices import Device
from minigraph.errors import FailedPreconditionError, InternalError
from minigraph.plan import Plan, Step, install_interpreters, node_error

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["NodeStats", "interpret", "interpret_parallel", "resume"]


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


def _closed_during_run() -> FailedPreconditionError:
    return FailedPreconditionError("The Session was closed while this run was in progress.")


def interpret(
    plan: Plan,
    args: list[Any],
    stats: list | None,
    trace: bool,
    cancel: threading.Event | None = None,
) -> list[Any]:
    """Runs the plan step by step on the calling thread, tracing into `stats` on demand."""
    return _run_steps(plan, _initial_slots(plan, args), 0, stats, trace, cancel)


def resume(plan: Plan, slots: list[Any], start: int) -> list[Any]:
    """Runs steps `start`, ... of the plan on values its generated code computed before."""
    return _run_steps(plan, slots, start, None, False, None)


def _run_steps(
    plan: Plan,
    slots: list[Any],
    start: int,
    stats: list | None,
    trace: bool,
    cancel: threading.Event | None,
) -> list[Any]:
    frees = plan.frees
    thread = threading.get_ident()
    steps = plan.steps
    for i in range(start, len(steps)):
        step = steps[i]
        if cancel is not None and cancel.is_set():
            raise _closed_during_run()
        inputs = [slots[s] for s in step.ins]
        start = time.perf_counter_ns() if trace else 0
        try:
            result = step.call(*inputs)
            if trace and step.device.device_type == "GPU":
                _synchronize(step.device)
        except Exception as e:
            raise node_error(step, e) from e
        end = time.perf_counter_ns() if trace else 0
        try:
            results = _step_results(step, result)
        except Exception as e:  # reported with the node, as the kernel's own errors are
            raise node_error(step, e) from e
        for s, v in zip(step.outs, results):
            slots[s] = v
        if stats is not None:
            stats.append(NodeStats(
                step.name, step.op_type, step.device.name, start / 1000, (end - start) / 1000,
                [list(getattr(v, "shape", ())) for v in results], thread,
            ))  # fmt: skip
        del inputs, result, results  # the slots decide what stays alive
        for s in frees[i]:
            slots[s] = None
    return [slots[s] for s in plan.fetch_slots]


def interpret_parallel(
    plan: Plan,
    args: list[Any],
    pool: ThreadPoolExecutor,
    cancel: threading.Event | None = None,
) -> list[Any]:
    """Runs independent steps concurrently; values are freed by reference counts.

    The calling thread works too, and returns only when no step of this run is executing
    any more (after an error, no new step starts and the running ones are waited for), so a
    failed run leaves nothing behind. The one exception is an interrupt (a BaseException that
    is not an Exception): it is re-raised at once, and the steps still running stop at their
    next boundary.
    """
    steps = plan.steps
    slots = _initial_slots(plan, args)
    if not steps:
        return [slots[s] for s in plan.fetch_slots]
    remaining = list(plan.n_deps)
    dependents = plan.dependents
    uses = dict(plan.uses)
    kept = plan.fetch_slot_set
    lock = threading.Lock()
    done = threading.Event()
    active = [1]  # run_from calls started and not finished; the calling thread's is the first
    failure: list[BaseException] = []
    stopped = [False]  # set on an error, an interrupt or close: no further step starts

    def fail(error: BaseException) -> None:
        with lock:
            if not failure:
                failure.append(error)
            stopped[0] = True
        if not isinstance(error, Exception):
            done.set()  # an interrupt: the caller re-raises it without waiting

    def submit(j: int) -> bool:
        with lock:
            active[0] += 1
        try:
            pool.submit(run_from, [j])
        except RuntimeError:  # the pool is shut down (interpreter exit): run it here
            with lock:
                active[0] -= 1
            return False
        return True

    def run_from(todo: list[int]) -> None:
        try:
            while todo and not stopped[0]:
                if cancel is not None and cancel.is_set():
                    fail(_closed_during_run())
                    return
                i = todo.pop()
                step = steps[i]
                try:
                    results = _step_results(step, step.call(*[slots[s] for s in step.ins]))
                except Exception as e:
                    error = node_error(step, e)
                    error.__cause__ = e
                    fail(error)
                    return
                except BaseException as e:  # KeyboardInterrupt, SystemExit: unchanged
                    fail(e)
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
                del results
                if ready:
                    todo.append(ready[0])  # this thread goes on with one, others go to the pool
                    for j in ready[1:]:
                        if not submit(j):
                            todo.append(j)
        finally:
            with lock:
                active[0] -= 1
                if active[0] == 0:
                    done.set()

    try:
        ready = [i for i, n in enumerate(remaining) if n == 0]
        mine = [ready[0]]
        mine += [i for i in ready[1:] if not submit(i)]
        run_from(mine)
        done.wait()
    except BaseException:
        # An interrupt delivered to this thread (while it ran a step or waited): the steps
        # still running elsewhere start nothing new, and the interrupt goes on unchanged.
        stopped[0] = True
        raise
    finally:
        # The closures refer to each other: break that cycle so that `slots` (fed and fetched
        # values, or every live value after a failure) is freed by reference counting now,
        # rather than whenever the cyclic garbage collector runs.
        run_from = submit = fail = None  # noqa: F841
    if failure:
        raise failure[0]
    return [slots[s] for s in plan.fetch_slots]


def _initial_slots(plan: Plan, args: list[Any]) -> list[Any]:
    """The value slots of one run: feeds first, then the plan's folded constants. Empties
    `args`, so that the slots hold the only references the run keeps to the fed values."""
    slots: list[Any] = [None] * plan.n_slots
    slots[: len(args)] = args
    args.clear()
    for i, value in plan.constants.items():
        slots[i] = value
    return slots


def _step_results(step: Step, result: Any) -> tuple[Any, ...]:
    """A kernel's return value as a tuple of outputs (checked when the step has a check)."""
    if step.check is not None:
        return step.check(result)
    n_outs = len(step.outs)
    if n_outs == 1:
        return (result,)
    if n_outs == 0:
        return ()  # as the generated plan does: whatever it returns is ignored
    results = tuple(result)  # a TypeError when it is not a sequence
    if len(results) != n_outs:
        raise InternalError(f"kernel returned {len(results)} outputs, the op has {n_outs}")
    return results


def _synchronize(device: Device) -> None:
    cuda = getattr(device.xp, "cuda", None)
    if cuda is not None:
        cuda.get_current_stream().synchronize()


# Plans interpret their first run, and resume a failed generated run, with these.
install_interpreters(interpret, resume)
