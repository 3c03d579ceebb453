"""The import direction: the runtime (minigraph/) never imports the op library (ops/), its
modules use each other's public names, and examples use only the public names of both
packages."""

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


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "minigraph").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT / "minigraph")),
)
def test_the_runtime_never_imports_the_op_library(path):
    offending = {m for m in imported_modules(path) if m == "ops" or m.startswith("ops.")}
    assert not offending, f"{path.name} imports {sorted(offending)}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "minigraph").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT / "minigraph")),
)
def test_runtime_modules_use_each_others_public_names(path):
    # Standard 8: a module reaches into another only through names that module made public
    # (a private submodule of the importer's own package, as proto/_descriptor.py, is its own).
    # Attribute reads on other modules' objects (`op._inputs`) are not checked here: the few
    # hot loops that keep them say why, with a measured figure.
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules: set[str] = set()  # local names bound to minigraph modules
    offending = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("minigraph"):
            parts = node.module.split(".")
            for i, part in enumerate(parts):
                if _is_private(part) and not ".".join(parts[: i + 1]).startswith(package + "."):
                    offending.append(f"import from {node.module}")
            for alias in node.names:
                if _is_private(alias.name) and node.module != me:
                    offending.append(f"{node.module}.{alias.name}")
                if (ROOT / Path(*parts) / f"{alias.name}.py").exists() or (
                    ROOT / Path(*parts) / alias.name
                ).is_dir():
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("minigraph.") and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _is_private(node.attr)
        ):
            offending.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    assert not offending, f"{me} uses private names of other modules: {offending}"


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_examples_use_public_names_only(path):
    private = {
        m for m in imported_modules(path)
        if m.split(".")[0] in ("minigraph", "ops") and any(p.startswith("_") for p in m.split("."))
    }  # fmt: skip
    assert not private, f"{path.name} imports private names {sorted(private)}"


@pytest.mark.parametrize(
    "path", sorted(p for p in (ROOT / "ops").glob("*.py") if p.stem != "__init__"),
    ids=lambda p: p.name,
)  # fmt: skip
def test_no_op_library_submodule_is_shadowed_by_a_package_attribute(path):
    # `from ops import gather` gives the tf.gather function; a module `ops/gather.py` would
    # then be unreachable as `ops.gather` (`import ops.gather` would bind the function).
    import importlib

    import ops

    module = importlib.import_module(f"ops.{path.stem}")
    assert getattr(ops, path.stem) is module, (
        f"ops.{path.stem} is {getattr(ops, path.stem)!r}, not the submodule: rename one of them"
    )
    namespace: dict = {}
    exec(f"import ops.{path.stem} as m", namespace)
    assert namespace["m"] is module


def test_import_ops_gather_gives_the_function_and_the_module_is_reachable():
    import ops
    import ops.gather_ops

    assert callable(ops.gather) and ops.gather.__name__ == "gather"
    assert ops.gather_ops.gather is ops.gather


def _runtime_import_graph() -> dict[str, set[str]]:
    """minigraph module -> the minigraph modules it imports, at module level or inside a
    function (a deferred import still points somewhere), TYPE_CHECKING blocks excepted. The
    package's own __init__ is left out: it is the top layer, which wires lower layers' extension
    points to the modules above them."""
    edges: dict[str, set[str]] = {}
    for path in sorted((ROOT / "minigraph").rglob("*.py")):
        me = _module_name(path)
        if me == "minigraph":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skipped = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(n) for n in ast.walk(node))
        targets = edges.setdefault(me, set())
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not node.module.startswith("minigraph"):
                    continue
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    parts = full.split(".")
                    is_module = (ROOT / Path(*parts)).with_suffix(".py").exists() or (
                        ROOT / Path(*parts)
                    ).is_dir()
                    targets.add(full if is_module else node.module)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("minigraph."))
        targets.discard(me)
        targets.discard("minigraph")
    return edges


def test_runtime_imports_point_down_a_layer():
    # Layers: every import inside minigraph/ (deferred ones included) goes to a module below
    # the importer, so the import graph has no cycle. A lower layer that needs something above
    # it (Graph.as_graph_def, Session(target=...), a plan's interpreter) offers an extension
    # point that the module above fills.
    import networkx as nx

    graph = nx.DiGraph()
    for module, targets in _runtime_import_graph().items():
        graph.add_node(module)
        # A package's __init__ re-exporting its own submodules is not a layer inversion.
        graph.add_edges_from((module, t) for t in targets if not t.startswith(module + "."))
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"imports that point up a layer (cycles): {cycles[:5]}"
