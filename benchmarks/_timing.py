"""Timing helpers shared by every section: interleaved repeats and median/min/max statistics.

The machine is shared and noisy, so every comparison times the baseline and the candidates
*interleaved*: each repeat times every function once, in an order that rotates from repeat to
repeat, so slow phases of the machine hit all of them alike. A ratio is then taken per repeat
(paired samples) and summarised like any other figure: median, min and max over the repeats.

Clock: `time.perf_counter_ns`. Garbage collection stays enabled (users pay for it too); what a
timed call returns is kept until after the clock is read, so freeing a large result is not
part of the figure (for baseline and candidates alike).

A function may also be a `SelfTimed` object, which times itself (a peer in another process,
benchmarks._peer_runner): it is sampled in the same rounds and order as the others, and what
it reports is its sample.
"""

from __future__ import annotations

import abc
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Stats", "SelfTimed", "interleaved", "interleaved_loops", "loop_count", "paired", "once",
    "run_loop",
]  # fmt: skip

_now = time.perf_counter_ns


@dataclass(frozen=True)
class Stats:
    """Median, min and max of a list of samples (any unit; see the field that holds it)."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: Iterable[float]) -> Stats:
        values = list(samples)
        if not values:
            raise ValueError("no samples")
        return cls(statistics.median(values), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Stats:
        """The same figure in another unit (e.g. seconds -> ms with factor 1e3)."""
        lo, hi = sorted((self.min * factor, self.max * factor))
        return Stats(self.median * factor, lo, hi, self.n)

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}


class SelfTimed(abc.ABC):
    """A job that times itself: `measure(n, collect)` returns the seconds n calls took (after
    `gc.collect()` when `collect`), `calibrate(target_s)` how many calls fill `target_s`.
    Calling the object runs it (once, or n times), untimed here."""

    @abc.abstractmethod
    def calibrate(self, target_s: float) -> int:
        """How many calls fill about `target_s` seconds."""

    @abc.abstractmethod
    def measure(self, n: int = 1, collect: bool = False) -> float:
        """Seconds that n calls take (timed by the job itself)."""

    def __call__(self, n: int | None = None) -> None:
        self.measure(1 if n is None else n)


def _order(names: list[str], repeat: int) -> list[str]:
    k = repeat % len(names)
    return names[k:] + names[:k]


class _Settle:
    """Sleeps `seconds` before a sample whose group differs from the previous sample's."""

    def __init__(self, seconds: float, group: Callable[[str], str] | None):
        self.seconds = seconds
        self.group = group or (lambda name: name)
        self.last: str | None = None

    def __call__(self, name: str) -> None:
        if self.seconds <= 0:
            return
        g = self.group(name)
        if self.last is not None and g != self.last:
            time.sleep(self.seconds)
        self.last = g


def interleaved(
    fns: Mapping[str, Callable[[], Any]],
    repeats: int,
    warmup: int = 1,
    before: Callable[[], Any] | None = None,
    clock: Callable[[Callable[[], Any]], tuple[float, Any]] | None = None,
    settle_s: float = 0.0,
    group: Callable[[str], str] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each zero-argument function: `repeats` samples each, interleaved.

    A `SelfTimed` function reports its own samples (`before` then means a collection of its
    own). Each function runs `warmup` times first (untimed); `before()`, when given, runs untimed
    before every timed call (e.g. `gc.collect`). Returns name -> samples, with sample i of
    every function taken in the same round i (use `paired` for per-round ratios). `clock(fn)`,
    when given, replaces the host clock: it returns (seconds, result), e.g. from CUDA events.

    `settle_s`: seconds to sleep before a sample whose `group(name)` (default: the name)
    differs from the previous sample's. Runtimes' thread pools spin-wait after their work
    (ONNX Runtime's intra-op threads about 70 ms, OpenBLAS's about 100 ms here): on a machine
    of two cores the next runtime's sample would share the CPU with them.
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    settle = _Settle(settle_s, group)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in _order(names, r):
            fn = fns[name]
            settle(name)
            if isinstance(fn, SelfTimed):
                samples[name].append(fn.measure(1, collect=before is not None))
                continue
            if before is not None:
                before()
            if clock is not None:
                elapsed, result = clock(fn)
                del result
                samples[name].append(elapsed)
                continue
            start = _now()
            result = fn()
            stop = _now()
            del result
            samples[name].append((stop - start) * 1e-9)
    return samples


def loop_count(fn: Callable[[int], Any], target_s: float, cap: int = 1_000_000) -> int:
    """How many iterations of `fn(n)` (a loop that runs something n times) fill `target_s`."""
    n = 1
    while True:
        start = _now()
        fn(n)
        elapsed = (_now() - start) * 1e-9
        if elapsed >= target_s / 4 or n >= cap:
            break
        n *= 4 if elapsed < target_s / 64 else 2
    return max(1, min(cap, round(n * target_s / max(elapsed, 1e-9))))


def interleaved_loops(
    fns: Mapping[str, Callable[[int], Any]],
    repeats: int,
    target_s: float,
    warmup: int = 1,
    settle_s: float = 0.0,
    group: Callable[[str], str] | None = None,
) -> dict[str, list[float]]:
    """Seconds per iteration of each `fn(n)` (which runs its job n times in a loop).

    For microsecond-scale jobs: each function's loop count is calibrated so that one sample
    takes about `target_s`; samples are interleaved as in `interleaved` (`settle_s` and
    `group` as there). Every function should use the same kind of loop (`for _ in range(n):
    ...`) so their loop overheads cancel.
    """
    names = list(fns)
    counts = {
        name: fn.calibrate(target_s) if isinstance(fn, SelfTimed) else loop_count(fn, target_s)
        for name, fn in fns.items()
    }
    for _ in range(warmup):
        for name in names:
            fns[name](counts[name])
    settle = _Settle(settle_s, group)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in _order(names, r):
            n = counts[name]
            fn = fns[name]
            settle(name)
            if isinstance(fn, SelfTimed):
                samples[name].append(fn.measure(n) / n)
                continue
            start = _now()
            fn(n)
            samples[name].append((_now() - start) * 1e-9 / n)
    return samples


def run_loop(run: Callable[[Any, Any], Any], fetch: Any, feed: Any) -> Callable[[int], None]:
    """`loop(n)` for `interleaved_loops`: calls `run(fetch, feed)` n times (a Session.run)."""

    def loop(n: int) -> None:
        for _ in range(n):
            run(fetch, feed)

    return loop


def paired(fn: Callable[..., float], *series: list[float]) -> Stats:
    """Stats of `fn(a_i, b_i, ...)` over rounds i of interleaved samples (e.g. ratios)."""
    return Stats.of(fn(*values) for values in zip(*series))


def once(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = _now()
    result = fn()
    return (_now() - start) * 1e-9, result
