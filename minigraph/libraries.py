"""Op libraries announced by installed packages: the `minigraph.op_libraries` entry points.

The command line and every Dask worker load them the same way, so one function does it: a
library that fails to import is reported (through `warn`) and skipped, never fatal, and a
local file or folder shadowing an installed library is reported rather than silently loaded in
its place.

`import_graph_def` loads them too, once per process, when a graph names an op type nobody
registered (`load_announced`): a graph file read in a new process runs without an explicit
`import ops`. `missing_ops_hint` says what to import when an op type is still unknown.
`set_autoload(False)` turns that loading off (the CLI's `--no-entry-points`).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import threading
import warnings
from collections.abc import Callable
from importlib.metadata import entry_points

__all__ = [
    "ENTRY_POINT_GROUP",
    "autoload_enabled",
    "load_announced",
    "load_entry_points",
    "missing_ops_hint",
    "set_autoload",
    "shadowing",
]

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


class _Announced:
    """What `load_announced` did, once per process: the libraries announced (as "name
    (module)"), and the ones that failed, with why."""

    __slots__ = ("announced", "failed")

    def __init__(self) -> None:
        self.announced: list[str] = []
        self.failed: list[str] = []


_lock = threading.Lock()
_state: _Announced | None = None
_autoload = True


def set_autoload(enabled: bool) -> bool:
    """Whether `import_graph_def` may load the announced op libraries (default True); returns
    the previous setting."""
    global _autoload
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autoload takes a bool; got {type(enabled).__name__}")
    previous, _autoload = _autoload, enabled
    return previous


def autoload_enabled() -> bool:
    """Whether `import_graph_def` may load the announced op libraries (`set_autoload`)."""
    return _autoload


def load_announced() -> bool:
    """Imports every op library the entry points announce, the first time it is called in this
    process (later calls return at once); returns whether it loaded anything this call.

    Does nothing while autoloading is off (`set_autoload(False)`). A library that fails to
    import is skipped with a warning, and named by `missing_ops_hint`.
    """
    global _state
    if not _autoload or _state is not None:
        return False
    with _lock:
        if _state is not None:
            return False
        state = _Announced()
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            state.announced.append(ep.name if ep.value == ep.name else f"{ep.name} ({ep.value})")

        def warn(message: str) -> None:
            state.failed.append(message)
            warnings.warn(f"minigraph: {message}", RuntimeWarning, stacklevel=4)

        load_entry_points(warn)
        _state = state
    return True


def missing_ops_hint(one: bool) -> str:
    """What to do about op types that are not registered after `load_announced`, for an error
    message (`one`: the error names a single op type)."""
    it = "it" if one else "them"
    if not _autoload:
        return (
            f"Import the op library that defines {it} first (`import ops` for minigraph's "
            "own; loading the installed op libraries is turned off)."
        )
    state = _state
    if state is None or not state.announced:
        return (
            f"No installed package announces an op library (entry-point group "
            f"{ENTRY_POINT_GROUP!r}): import the module that defines {it} first (minigraph's "
            "own: `import ops`)."
        )
    text = (
        f"The op libraries installed packages announce are loaded "
        f"({', '.join(state.announced)}) and none defines {it}: import the module that does "
        "first (e.g. `import my_ops`)."
    )
    if state.failed:
        text += " Not loaded: " + "; ".join(state.failed) + "."
    return text


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
    running = getattr(sys.modules.get("minigraph"), "__file__", None)
    if running is not None and _path_entry(loaded) == _path_entry(running):
        # The library beside the minigraph that is running, from one source tree (a checkout
        # run from its own folder while another one is installed): they belong together.
        return None
    return (
        f"'import {top}' found {loaded}, which shadows the installed {installed}; its ops are "
        f"not loaded. Rename your local '{top}' file or folder, or run from another directory."
    )


def _path_entry(origin: str) -> str:
    """The sys.path folder a module was found in: its file's folder, or the folder above a
    package's `__init__.py`."""
    path = os.path.realpath(origin)
    folder = os.path.dirname(path)
    if os.path.basename(path) == "__init__.py":
        folder = os.path.dirname(folder)
    return folder


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
