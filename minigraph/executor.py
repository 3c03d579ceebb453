"""Step interpreters: the slower ways to run a plan, used for tracing, output checking and
inter-op parallelism (otherwise a plan runs as its generated function)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from minigraph.devices import Device
from minigraph.errors import InternalError
from minigraph.plan import _node_error, _Plan, _Step

__all__ = ["NodeStats", "interpret", "interpret_parallel"]


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


def interpret(
    plan: _Plan, args: list[Any], stats: list | None, trace: bool, check: bool
) -> list[Any]:
    """Runs the plan step by step, tracing into `stats` and checking outputs on demand."""
    slots = _initial_slots(plan, args)
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
        try:
            results = _step_results(step, result)
        except Exception as e:  # reported with the node, as the kernel's own errors are
            raise _node_error(step, e) from e
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


def interpret_parallel(plan: _Plan, args: list[Any], pool: ThreadPoolExecutor) -> list[Any]:
    """Runs independent steps concurrently; values are freed by reference counts."""
    steps = plan.steps
    remaining = list(plan.n_deps)
    dependents = plan.dependents
    uses = dict(plan.uses)
    kept = set(plan.fetch_slots)
    slots = _initial_slots(plan, args)
    lock = threading.Lock()
    done = threading.Event()
    pending = [len(steps)]
    failure: list[BaseException] = []

    def run_from(i: int) -> None:
        while i is not None:
            step = steps[i]
            try:
                results = _step_results(step, step.call(*[slots[s] for s in step.ins]))
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
                pool.submit(run_from, j)
            i = ready[0] if ready else None

    if not steps:
        return [slots[s] for s in plan.fetch_slots]
    try:
        ready = [i for i, n in enumerate(remaining) if n == 0]
        for i in ready[1:]:
            pool.submit(run_from, i)
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


def _initial_slots(plan: _Plan, args: list[Any]) -> list[Any]:
    """The value slots of one run: feeds first, then the plan's folded constants."""
    slots: list[Any] = [None] * plan.n_slots
    slots[: len(args)] = args
    for i, value in plan.constants.items():
        slots[i] = value
    return slots


def _step_results(step: _Step, result: Any) -> tuple[Any, ...]:
    """A kernel's return value as a tuple of outputs (the op's count, checked)."""
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
