"""The import direction: the runtime (minigraph/) never imports the op library (ops/), and
examples use only the public names of both packages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "minigraph").glob("*.py")), ids=lambda p: p.name)
def test_the_runtime_never_imports_the_op_library(path):
    offending = {m for m in imported_modules(path) if m == "ops" or m.startswith("ops.")}
    assert not offending, f"{path.name} imports {sorted(offending)}"


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_examples_use_public_names_only(path):
    private = {
        m for m in imported_modules(path)
        if m.split(".")[0] in ("minigraph", "ops") and any(p.startswith("_") for p in m.split("."))
    }  # fmt: skip
    assert not private, f"{path.name} imports private names {sorted(private)}"
