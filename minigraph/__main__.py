"""The `minigraph` command line: `python -m minigraph` or the `minigraph` console script.

    minigraph ops                  registered ops and their signatures
    minigraph describe GatherV2    an op's inputs, attrs (allowed values, defaults), docs, kernels
    minigraph devices              the devices sessions would use, and why there is no GPU

Op libraries are found through the entry-point group `minigraph.op_libraries` (an installed
package declares `[project.entry-points."minigraph.op_libraries"] name = "module"`), so
minigraph itself never imports them. `--load MODULE` (repeatable) imports more: a module name
(`my_ops`) or a file path (`examples/custom_op.py`).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from minigraph import OpError, __version__, list_devices, registry

__all__ = ["main"]

ENTRY_POINT_GROUP = "minigraph.op_libraries"


class _LoadError(Exception):
    pass


def _load_entry_points(warn) -> list[str]:
    """Imports every op library announced in the entry-point group; returns their names."""
    loaded = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # a broken third-party library must not break the CLI
            warn(f"cannot load op library {ep.name!r} ({ep.value}): {type(e).__name__}: {e}")
            continue
        loaded.append(ep.name)
    return loaded


def _load_module(spec: str) -> None:
    """Imports `spec`: a dotted module name, or the path of a .py file."""
    try:
        if spec.endswith(".py") or os.sep in spec or (os.altsep and os.altsep in spec):
            path = os.path.abspath(spec)
            if not os.path.isfile(path):
                raise _LoadError(f"--load {spec}: no such file")
            name = os.path.splitext(os.path.basename(path))[0]
            module_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())  # as `python -m` does, for local modules
            importlib.import_module(spec)
    except _LoadError:
        raise
    except Exception as e:
        raise _LoadError(f"--load {spec}: {type(e).__name__}: {e}") from e


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minigraph",
        description="Inspect minigraph's registered ops, their kernels, and the devices.",
        epilog=f"Op libraries are loaded from the entry-point group {ENTRY_POINT_GROUP!r}.",
    )
    parser.add_argument("--version", action="version", version=f"minigraph {__version__}")
    parser.add_argument(
        "--load",
        action="append",
        default=[],
        metavar="MODULE",
        help="import an op library (module name or .py path) before running; repeatable",
    )
    parser.add_argument(
        "--no-entry-points",
        action="store_true",
        help=f"do not load the op libraries of the {ENTRY_POINT_GROUP!r} entry points",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    ops = commands.add_parser("ops", help="list registered ops with their signatures")
    ops.add_argument("--names", action="store_true", help="print only the op names")
    describe = commands.add_parser("describe", help="describe one op and its kernels")
    describe.add_argument("op", metavar="OP", help="op type name, e.g. GatherV2")
    commands.add_parser("devices", help="list devices (and why there is no GPU)")
    return parser


def _cmd_ops(args: argparse.Namespace) -> int:
    names = registry.list_ops()
    for name in names:
        print(name if args.names else registry.signature(name))
    return 0


def _cmd_describe(args: argparse.Namespace) -> int:
    names = registry.list_ops()
    if args.op not in names:
        close = difflib.get_close_matches(args.op, names, n=5, cutoff=0.5)
        if not close:  # case slips: "gatherv2"
            close = [n for n in names if n.lower() == args.op.lower()]
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        print(f"minigraph: unknown op {args.op!r}.{hint}", file=sys.stderr)
        print(f"Registered ops: {', '.join(names)}. Load more with --load MODULE.", file=sys.stderr)
        return 2
    print(registry.get_op_def(args.op).describe())
    print()
    device_types = registry.kernel_device_types(args.op)
    print(f"Kernels (devices: {', '.join(device_types) if device_types else 'none'}):")
    for kernel in registry.kernels_for(args.op):
        print(f"  {kernel.describe()}")
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    for line in list_devices(verbose=True):
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (2 for usage errors and unknown ops)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors: argparse's status
        return int(e.code or 0) if not isinstance(e.code, str) else 2

    def warn(message: str) -> None:
        print(f"minigraph: warning: {message}", file=sys.stderr)

    if not args.no_entry_points:
        _load_entry_points(warn)
    try:
        for spec in args.load:
            _load_module(spec)
    except _LoadError as e:
        print(f"minigraph: {e}", file=sys.stderr)
        return 1
    commands = {"ops": _cmd_ops, "describe": _cmd_describe, "devices": _cmd_devices}
    try:
        return commands[args.command](args)
    except OpError as e:
        print(f"minigraph: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
