"""An adversarial battery: hostile inputs thrown at minigraph's public API, each outcome
classified.

    python -m tests.hostile.battery                  # every area; a summary and the findings
    python -m tests.hostile.battery --area graphdef  # one area (repeatable)
    python -m tests.hostile.battery --sim 2          # machine devices: two simulated GPUs
    python -m tests.hostile.battery --json out.json  # every outcome, for comparing runs
    python -m tests.hostile.battery --list           # the cases, without running them

Outcomes:

- OK: a typed minigraph error (an `OpError`), or a correct result. A TypeError saying that a
  symbolic tensor has no value until a Session runs it is intended, and OK.
- CRASH: the process died (a signal: segfault, abort; or an exit nobody asked for).
- HANG: the case did not finish within its time limit.
- UNTYPED: another exception escaped (TypeError, ValueError, AttributeError, RecursionError,
  UnicodeError, ...): user input reached code that did not check it.
- WRONG: a silently wrong value against an independent numpy reference, a bad input accepted
  (no error where one is required), a valid input refused, or a broken promise (a caller's
  array changed, a constant changed, a thread left behind).

Cases run in worker processes, one case at a time, so a crash or a hang loses only its own
case: the runner records it, kills the worker and starts another at the next case. Case `i`
is the same in every process (the case list is built deterministically).

The numbers of a run are restated in the review's report; OK outcomes that are InternalErrors
(typed, but "please report it") are counted apart, as they usually mean a missing check.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

if __package__ in (None, ""):  # `python tests/hostile/battery.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "tests.hostile"

OK, CRASH, HANG, UNTYPED, WRONG = "OK", "CRASH", "HANG", "UNTYPED", "WRONG"
OUTCOMES = (OK, CRASH, HANG, UNTYPED, WRONG)
AREAS = ("build", "register", "session", "graphdef", "cli", "partition", "simgpu", "cluster")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Wrong(Exception):
    """Raised by a case's own check: a wrong value, an accepted bad input, a broken promise."""


class Crashed(Exception):
    """Raised by a case whose subprocess (a CLI command, a script) died of a signal."""


class Hung(Exception):
    """Raised by a case whose subprocess or thread did not finish in time."""


@dataclass
class Case:
    """One hostile input. `fn` runs it; `expect` says what counts as OK:

    - "any": a typed error or a normal return (the case checks values itself, raising Wrong);
    - "error": a typed error is required (a normal return is WRONG: a bad input accepted);
    - "ok": a normal return is required (a typed error is WRONG: a valid input refused).
    """

    name: str
    area: str
    fn: Callable[[], Any]
    expect: str = "any"
    timeout: float = 30.0


def case(area: str, name: str, expect: str = "any", timeout: float = 30.0):
    """Decorator form: `@case("build", "name")` over a function of no arguments."""

    def register(fn: Callable[[], Any]) -> Case:
        return Case(name, area, fn, expect, timeout)

    return register


def build_cases(areas: tuple[str, ...] = AREAS) -> list[Case]:
    """Every case of the given areas, in a fixed order."""
    from tests.hostile import (  # noqa: PLC0415 - the case modules import minigraph
        cases_build,
        cases_cli,
        cases_cluster,
        cases_graphdef,
        cases_partition,
        cases_session,
    )

    builders = {
        "build": cases_build.build_cases,
        "register": cases_build.register_cases,
        "session": cases_session.cases,
        "graphdef": cases_graphdef.cases,
        "cli": cases_cli.cases,
        "partition": cases_partition.cases,
        "simgpu": cases_partition.simgpu_cases,
        "cluster": cases_cluster.cases,
    }
    out: list[Case] = []
    for area in areas:
        made = builders[area]()
        for c in made:
            c.area = area
        out.extend(made)
    return out


# -- classification (inside a worker) -----------------------------------------------------------


def _is_symbolic_refusal(e: BaseException) -> bool:
    return type(e) is TypeError and "symbolic tensor" in str(e)


def _where(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    for frame in reversed(frames):
        if "/minigraph/" in frame.filename or "/ops/" in frame.filename:
            return f"{os.path.relpath(frame.filename, ROOT)}:{frame.lineno}"
    if frames:
        return f"{os.path.relpath(frames[-1].filename, ROOT)}:{frames[-1].lineno}"
    return "?"


def _text(e: BaseException, limit: int = 300) -> str:
    try:
        text = str(e)
    except Exception:  # noqa: BLE001
        text = "<str() failed>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def classify(c: Case) -> tuple[str, str, bool]:
    """(outcome, detail, whether a typed error was an InternalError)."""
    from minigraph.errors import InternalError, OpError  # noqa: PLC0415
    from tests.hostile import battery  # noqa: PLC0415 - this file may run as __main__

    try:
        c.fn()
    except battery.Wrong as e:
        return WRONG, _text(e, 600), False
    except battery.Crashed as e:
        return CRASH, _text(e, 600), False
    except (battery.Hung, subprocess.TimeoutExpired) as e:
        return HANG, _text(e, 300), False
    except OpError as e:
        internal = isinstance(e, InternalError)
        detail = f"{type(e).__name__}: {_text(e)}"
        if c.expect == "ok":
            return WRONG, f"valid input refused: {detail}", internal
        return OK, detail, internal
    except BaseException as e:  # noqa: BLE001 - classifying everything is the point
        if _is_symbolic_refusal(e):
            return OK, f"TypeError (intended): {_text(e, 120)}", False
        return UNTYPED, f"{type(e).__name__}: {_text(e)} [at {_where(e)}]", False
    if c.expect == "error":
        return WRONG, "bad input accepted: no error", False
    return OK, "ok", False


def _worker(start: int, stop: int, areas: tuple[str, ...], sim: int) -> None:
    """Runs cases [start, stop) of `areas`, one JSON line each on the protocol pipe."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    log = os.open(os.path.join(_scratch(), f"worker-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT)
    os.dup2(log, 1)  # cases' own prints (placement logs, warnings) must not reach the protocol
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    os.chdir(_scratch())
    cases = build_cases(areas)
    context = None
    if sim:
        from minigraph.testing import simulated_gpus  # noqa: PLC0415

        context = simulated_gpus(sim)
        context.__enter__()
    for i in range(start, min(stop, len(cases))):
        c = cases[i]
        proto.write(json.dumps({"start": i}) + "\n")
        began = time.monotonic()
        outcome, detail, internal = classify(c)
        proto.write(
            json.dumps(
                {
                    "i": i,
                    "outcome": outcome,
                    "detail": detail,
                    "internal": internal,
                    "seconds": round(time.monotonic() - began, 3),
                }
            )
            + "\n"
        )
    proto.write(json.dumps({"done": True}) + "\n")
    proto.flush()
    os._exit(0)  # threads a case left behind must not keep the worker alive


def _scratch() -> str:
    path = os.environ.get("MINIGRAPH_BATTERY_SCRATCH") or os.path.join(
        "/tmp", f"minigraph-battery-{os.getuid()}"
    )
    os.makedirs(path, exist_ok=True)
    return path


# -- the runner ---------------------------------------------------------------------------------


def run(areas: tuple[str, ...], sim: int, verbose: bool) -> list[dict[str, Any]]:
    cases = build_cases(areas)
    results: dict[int, dict[str, Any]] = {}
    i = 0
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["MINIGRAPH_BATTERY_SCRATCH"] = _scratch()
    while i < len(cases):
        cmd = [sys.executable, "-m", "tests.hostile.battery", "--worker", str(i), str(len(cases))]
        cmd += ["--sim", str(sim)]
        for area in areas:
            cmd += ["--area", area]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env,
            start_new_session=True,
        )  # fmt: skip
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        buffer = b""
        current = None
        deadline = time.monotonic() + 120  # worker start-up: imports, case list
        next_i = i
        while True:
            timeout = deadline - time.monotonic()
            if timeout <= 0 or not selector.select(timeout):
                # A hang: the case (or the start-up) did not finish in time.
                _kill(proc)
                if current is None:
                    raise SystemExit(f"battery: a worker did not start at case {i}")
                results[current] = _result(
                    cases[current], HANG, f"no result in {cases[current].timeout:g} s"
                )
                _say(verbose, results[current])
                next_i = current + 1
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                code = proc.wait()
                if current is not None and current not in results:
                    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
                    results[current] = _result(cases[current], CRASH, f"worker died: {how}")
                    _say(verbose, results[current])
                    next_i = current + 1
                else:
                    next_i = len(cases) if current is None else current + 1
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            finished = False
            for line in lines:
                message = json.loads(line)
                if "start" in message:
                    current = message["start"]
                    deadline = time.monotonic() + cases[current].timeout
                elif "done" in message:
                    finished = True
                else:
                    r = _result(cases[message["i"]], message["outcome"], message["detail"])
                    r["internal"] = message["internal"]
                    r["seconds"] = message["seconds"]
                    results[message["i"]] = r
                    _say(verbose, r)
            if finished:
                _kill(proc)
                next_i = len(cases)
                break
        selector.close()
        i = next_i
    return [results[k] for k in sorted(results)]


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _result(c: Case, outcome: str, detail: str) -> dict[str, Any]:
    return {"area": c.area, "name": c.name, "outcome": outcome, "detail": detail,
            "internal": False}  # fmt: skip


def _say(verbose: bool, r: dict[str, Any]) -> None:
    if verbose or r["outcome"] != OK:
        print(f"{r['outcome']:8} {r['area']}/{r['name']}: {r['detail']}", flush=True)


def summary(results: list[dict[str, Any]]) -> str:
    lines = []
    by_area: dict[str, Counter] = {}
    for r in results:
        by_area.setdefault(r["area"], Counter())[r["outcome"]] += 1
    total = Counter(r["outcome"] for r in results)
    internal = sum(1 for r in results if r["outcome"] == OK and r.get("internal"))
    header = f"{'area':10} {'cases':>6} " + " ".join(f"{o:>8}" for o in OUTCOMES)
    lines.append(header)
    for area, counts in by_area.items():
        n = sum(counts.values())
        lines.append(f"{area:10} {n:6} " + " ".join(f"{counts[o]:8}" for o in OUTCOMES))
    lines.append(f"{'total':10} {len(results):6} " + " ".join(f"{total[o]:8}" for o in OUTCOMES))
    lines.append(f"(OK outcomes that were InternalErrors: {internal})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.hostile.battery",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--area", action="append", choices=AREAS, help="only these areas")
    parser.add_argument(
        "--sim",
        type=int,
        default=int(os.environ.get("MINIGRAPH_TEST_SIMULATED_GPUS", "0") or 0),
        help="simulated GPUs as machine devices",
    )
    parser.add_argument("--json", metavar="FILE", help="write every outcome to FILE")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every outcome")
    parser.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    areas = tuple(args.area or AREAS)
    if args.worker:
        _worker(args.worker[0], args.worker[1], areas, args.sim)
        return 0
    if args.list:
        for c in build_cases(areas):
            print(f"{c.area}/{c.name} (expect {c.expect})")
        return 0
    began = time.monotonic()
    results = run(areas, args.sim, args.verbose)
    print()
    print(summary(results))
    print(f"({time.monotonic() - began:.0f} s; simulated GPUs: {args.sim})")
    internal = [r for r in results if r["outcome"] == OK and r.get("internal")]
    if internal:
        print("\nInternalErrors (typed, but usually a missing check):")
        for r in internal:
            print(f"  {r['area']}/{r['name']}: {r['detail']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["outcome"] == OK for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
