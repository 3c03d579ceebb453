"""The `minigraph` command line: `python -m minigraph` or the `minigraph` console script.

    minigraph ops                  registered ops and their signatures
    minigraph describe GatherV2    an op's inputs, attrs (allowed values, defaults), docs, kernels
    minigraph devices              the devices sessions would use, and why there is no GPU
    minigraph show model.pb        a graph file's ops, inputs, outputs, devices (--dot, --svg)
    minigraph run model.pb --feed x:0='[1, 2]' --fetch y:0    run a graph file
    minigraph convert model.pb model.pbtxt                    binary <-> text
    minigraph freeze model.pb model.ckpt frozen.pb --outputs probs   variables -> constants

Op libraries are found through the entry-point group `minigraph.op_libraries` (an installed
package declares `[project.entry-points."minigraph.op_libraries"] name = "module"`), so
minigraph itself never imports them. `--load MODULE` (repeatable) imports more: a module name
(`my_ops`) or a file path (`examples/custom_op.py`, relative to the working directory), which is
imported under a private module name so that it never replaces a module of the same name.
When an op library's module resolves to a local file or folder instead of the installed one (an
`ops.py` in the working directory shadows minigraph's `ops`), the CLI says so on stderr.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence

from minigraph import OpError, __version__, graph_cli, list_devices, registry
from minigraph.libraries import (
    ENTRY_POINT_GROUP,
    autoload_enabled,
    load_entry_points,
    set_autoload,
    shadowing,
)

__all__ = ["main"]


class _LoadError(Exception):
    pass


def _load_module(spec: str) -> None:
    """Imports `spec`: a dotted module name, or the path of a .py file (relative to the
    working directory), run under a private module name as `python path` would run it, with
    its directory on sys.path for its own imports."""
    try:
        if spec.endswith(".py") or os.sep in spec or (os.altsep and os.altsep in spec):
            path = os.path.abspath(os.path.expanduser(spec))
            if not os.path.isfile(path):
                raise _LoadError(f"--load {spec}: no such file ({path})")
            name = _private_module_name(path)
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise _LoadError(f"--load {spec}: not a Python file")
            module = importlib.util.module_from_spec(module_spec)
            folder = os.path.dirname(path)
            if folder not in sys.path:
                sys.path.insert(0, folder)  # as `python path` does, for the file's own imports
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())  # as `python -m` does, for local modules
            importlib.import_module(spec)
    except _LoadError:
        raise
    except Exception as e:
        raise _LoadError(f"--load {spec}: {type(e).__name__}: {e}") from e
    shadowed = shadowing("ops") if spec == "ops" or spec.startswith("ops.") else None
    if shadowed:
        raise _LoadError(f"--load {spec}: {shadowed}")


def _private_module_name(path: str) -> str:
    """A module name for a loaded file that no real module has (`json.py` must not replace
    sys.modules["json"]): `_minigraph_load_json`, numbered when taken by another file."""
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in os.path.basename(path)[:-3])
    name = f"_minigraph_load_{stem}"
    n = 1
    while name in sys.modules and getattr(sys.modules[name], "__file__", None) != path:
        n += 1
        name = f"_minigraph_load_{stem}_{n}"
    return name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minigraph",
        description="Inspect minigraph's registered ops, their kernels and the devices; "
        "show, run, convert and freeze graph files.",
        epilog=f"Op libraries are loaded from the entry-point group {ENTRY_POINT_GROUP!r}.",
    )
    parser.add_argument("--version", action="version", version=f"minigraph {__version__}")
    parser.add_argument("--load", **_LOAD)
    parser.add_argument(
        "--no-entry-points",
        action="store_true",
        help=f"do not load the op libraries of the {ENTRY_POINT_GROUP!r} entry points",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    ops = commands.add_parser("ops", help="list registered ops with their signatures")
    ops.add_argument("--names", action="store_true", help="print only the op names")
    ops.add_argument(
        "--markdown",
        action="store_true",
        help="print a Markdown table per op library module (the README's op list)",
    )
    describe = commands.add_parser("describe", help="describe one op and its kernels")
    describe.add_argument("op", metavar="OP", help="op type name, e.g. GatherV2")
    commands.add_parser("devices", help="list devices (and why there is no GPU)")
    parser.set_defaults(graph_commands=graph_cli.add_commands(commands))
    for command in commands.choices.values():
        # `minigraph run model.pb --load lib.py` as well as `minigraph --load lib.py run ...`.
        # Its own dest: a sub-parser's default would replace what the main parser collected.
        command.add_argument("--load", **{**_LOAD, "dest": "load_after"})
    return parser


_LOAD = {
    "action": "append",
    "default": [],
    "metavar": "MODULE",
    "help": "import an op library (module name or .py path) before running; repeatable",
}


def _cmd_ops(args: argparse.Namespace) -> int:
    names = registry.list_ops()
    if args.markdown:
        print(op_table_markdown(names))
        return 0
    for name in names:
        print(name if args.names else registry.signature(name))
    return 0


def op_table_markdown(names: list[str]) -> str:
    """The registered ops as Markdown: one table per module that registered them (op, the
    device types with kernels, whether it has a gradient rule), in module order. The README's
    op list is this text (tests/test_readme.py keeps them equal)."""
    by_module: dict[str, list[str]] = {}
    for name in names:
        cls = registry.builder(name)
        module = getattr(cls, "__module__", None) or "(registered without a builder)"
        by_module.setdefault(module, []).append(name)
    blocks = []
    for module in sorted(by_module):
        rows = ["| Op | Kernels | Gradient |", "| --- | --- | --- |"]
        for name in by_module[module]:
            devices = ", ".join(registry.kernel_device_types(name)) or "none"
            try:
                rule = registry.gradient_rule(name)
                gradient = "not differentiable" if rule.fn is None else "yes"
            except OpError:
                gradient = "none"
            rows.append(f"| `{name}` | {devices} | {gradient} |")
        blocks.append(f"`{module}` ({len(by_module[module])} ops)\n\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def _cmd_describe(args: argparse.Namespace) -> int:
    names = registry.list_ops()
    op = args.op
    if op not in names:
        target = registry.alias_of(op)
        if target is None:
            known = names + list(registry.list_aliases())
            close = difflib.get_close_matches(op, known, n=5, cutoff=0.5)
            if not close:  # case slips: "gatherv2"
                close = [n for n in known if n.lower() == op.lower()]
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            print(f"minigraph: unknown op {op!r}.{hint}", file=sys.stderr)
            print(
                f"Registered ops: {', '.join(names)}. Load more with --load MODULE.",
                file=sys.stderr,
            )
            return 2
        print(f"{op} is an alias of {target}: its builder makes {target} nodes.")
        print()
        op = target
    print(registry.get_op_def(op).describe())
    print()
    device_types = registry.kernel_device_types(op)
    print(f"Kernels (devices: {', '.join(device_types) if device_types else 'none'}):")
    for kernel in registry.kernels_for(op):
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

    # --no-entry-points: nor when a graph file names an op nobody registered (import_graph_def
    # would load them then); restored after, for callers of main() in a longer process.
    autoload = set_autoload(autoload_enabled() and not args.no_entry_points)
    try:
        return _run(args)
    finally:
        set_autoload(autoload)


def _run(args: argparse.Namespace) -> int:
    def warn(message: str) -> None:
        print(f"minigraph: warning: {message}", file=sys.stderr)

    if not args.no_entry_points:
        load_entry_points(warn)
    try:
        for spec in [*args.load, *args.load_after]:
            _load_module(spec)
    except _LoadError as e:
        print(f"minigraph: {e}", file=sys.stderr)
        return 1
    commands = {"ops": _cmd_ops, "describe": _cmd_describe, "devices": _cmd_devices}
    commands.update(args.graph_commands)
    try:
        status = commands[args.command](args)
        if sys.stdout is not None:  # None when started with stdout closed (`>&-`)
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except OpError as e:
        print(f"minigraph: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """The reader of stdout exited (`minigraph ops | head -1`): stop quietly. Python would
    report the pipe again when it flushes stdout at exit, so stdout now goes to devnull (the
    recipe of Python's signal module docs), and the status is 1, as there."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (stdout replaced)
        pass
    return 1


if __name__ == "__main__":
    sys.exit(main())
