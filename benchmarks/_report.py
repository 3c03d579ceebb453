"""Tables on stdout and the raw figures for `--json`.

Every figure goes through `Report.add` (section, case, metric, unit, median/min/max, target)
so that the JSON dump holds exactly what the tables show, and more (ratios' min and max).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from benchmarks._timing import Stats

__all__ = ["Report", "num", "cell", "ratio_cell", "MISS"]

#: Appended to a figure that misses its target.
MISS = " !"


def num(x: float) -> str:
    """About three significant digits, never in exponent notation."""
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def cell(s: Stats | None) -> str:
    """`median (min-max)`, or '-' when there is no figure."""
    if s is None:
        return "-"
    sep = " .. " if s.min < 0 else "-"
    return f"{num(s.median)} ({num(s.min)}{sep}{num(s.max)})"


def met(value: float, target: str | None) -> bool | None:
    """Whether `value` meets a target written as '<= 1.10', '< 10', '>= 60' (None: no target)."""
    if not target:
        return None
    op, _, bound = target.partition(" ")
    limit = float(bound)
    return {"<": value < limit, "<=": value <= limit, ">": value > limit, ">=": value >= limit}[op]


def ratio_cell(s: Stats | None, target: str | None = None, spread: bool = False) -> str:
    """A ratio's median (with min-max when `spread`), marked when it misses `target`."""
    if s is None:
        return "-"
    if spread:
        text = cell(s)
    else:  # one more digit than num() near 1, where targets like 1.10 sit
        text = f"{s.median:.3f}" if abs(s.median) < 10 else num(s.median)
    return text + (MISS if met(s.median, target) is False else "")


class Report:
    """Prints tables as the sections produce them and keeps every figure for `--json`."""

    def __init__(self, out: TextIO | None = None):
        self.out = out or sys.stdout
        self.records: list[dict[str, Any]] = []
        self.env: dict[str, Any] = {}

    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def heading(self, title: str) -> None:
        self.print()
        self.print(f"== {title} " + "=" * max(0, 96 - len(title)))

    def note(self, text: str) -> None:
        self.print(f"  {text}")

    def table(
        self,
        title: str,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        notes: Sequence[str] = (),
    ) -> None:
        """A plain-text table: first column left-aligned, the others right-aligned."""
        self.print()
        if title:
            self.print(title)
        widths = [len(h) for h in header]
        for row in rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row)]

        def line(cells: Sequence[str]) -> str:
            parts = [cells[0].ljust(widths[0])]
            parts += [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
            return "  " + "  ".join(parts).rstrip()

        self.print(line(header))
        self.print("  " + "  ".join("-" * w for w in widths))
        for row in rows:
            self.print(line(row))
        for text in notes:
            self.note(text)

    def add(
        self,
        section: str,
        case: str,
        metric: str,
        value: Stats | float | bool | str | None,
        unit: str,
        *,
        target: str | None = None,
        baseline: str | None = None,
        note: str | None = None,
    ) -> None:
        """Records one figure. `target` reads like '<= 1.10' (in `unit`); `baseline` names
        what a ratio is taken against."""
        record: dict[str, Any] = {"section": section, "case": case, "metric": metric, "unit": unit}
        if isinstance(value, Stats):
            record.update(value.as_dict())
            record["met"] = met(value.median, target)
        elif isinstance(value, (bool, str)) or value is None:
            record["value"] = value
        else:
            record.update(median=value, min=value, max=value, n=1, met=met(value, target))
        if target is not None:
            record["target"] = target
        if baseline is not None:
            record["baseline"] = baseline
        if note is not None:
            record["note"] = note
        self.records.append(record)

    def dump(self, path: str, mode: str, elapsed_s: float) -> None:
        data = {"mode": mode, "elapsed_s": elapsed_s, "env": self.env, "records": self.records}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
