"""Op libraries announced by installed packages: the `minigraph.op_libraries` entry points.

The command line and every Dask worker load them the same way, so one function does it: a
library that fails to import is reported (through `warn`) and skipped, never fatal, and a
local file or folder shadowing an installed library is reported rather than silently loaded in
its place.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

__all__ = ["ENTRY_POINT_GROUP", "load_entry_points", "shadowing"]

#: The entry-point group op libraries announce themselves in.
ENTRY_POINT_GROUP = "minigraph.op_libraries"


def load_entry_points(warn: Callable[[str], None]) -> list[str]:
    """Imports every op library announced in the entry-point group; returns their names."""
    loaded = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # a broken third-party library must not take the others down
            warn(f"cannot load op library {ep.name!r} ({ep.value}): {type(e).__name__}: {e}")
            continue
        shadowed = shadowing(ep.module)
        if shadowed:
            warn(f"op library {ep.name!r} ({ep.value}): {shadowed}")
        loaded.append(ep.name)
    return loaded


def shadowing(module_name: str) -> str | None:
    """Why the imported `module_name` is not the installed one (a local file or folder of the
    same name came first on sys.path, typically from the working directory); None when it is
    the installed one, or when nothing else is installed under that name."""
    top = module_name.partition(".")[0]
    loaded = getattr(sys.modules.get(top), "__file__", None)
    installed = _installed_origin(top)
    if loaded is None or installed is None:
        return None
    if os.path.realpath(loaded) == os.path.realpath(installed):
        return None
    return (
        f"'import {top}' found {loaded}, which shadows the installed {installed}; its ops are "
        f"not loaded. Rename your local '{top}' file or folder, or run from another directory."
    )


def _installed_origin(top: str) -> str | None:
    """Where `import top` would come from if the working directory were not on sys.path."""
    cwd = os.path.realpath(os.getcwd())
    path = [p for p in sys.path if p and os.path.realpath(p) != cwd]
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(top, path if finder is importlib.machinery.PathFinder else None)
        except Exception:  # a third-party finder's problem is not ours to report
            continue
        if spec is not None and spec.origin not in (None, "built-in", "frozen"):
            return spec.origin
    return None
