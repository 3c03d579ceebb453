"""Pictures of graphs: Graphviz DOT text (`Graph.to_dot()`, `python -m minigraph show --dot`).

Ops are boxes showing their type and name, filled with one colour per requested device (a
legend lists them); data edges are labelled with dtype and shape (and the output index for ops
with several outputs); control edges are dashed. `graph_def_to_dot` draws a GraphDef that cannot
be imported (ops minigraph lacks), without dtypes and shapes.

Rendering to SVG needs Graphviz's `dot` program (`render_svg`), which is not a Python package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any

from minigraph.errors import InvalidArgumentError, NotFoundError, UnavailableError
from minigraph.graph import Graph

__all__ = ["graph_to_dot", "graph_def_to_dot", "render_svg", "GRAPHVIZ_HELP"]

GRAPHVIZ_HELP = (
    "Graphviz's `dot` program is needed to draw SVG and was not found on PATH. Install "
    "Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz; conda: "
    "conda install graphviz; others: https://graphviz.org/download/), or write DOT text with "
    "--dot OUT.dot and open it in any Graphviz viewer."
)
# Fill colours, one per distinct requested device in order of appearance; no request: white.
_PALETTE = (
    "#cfe2f3", "#d9ead3", "#fce5cd", "#ead1dc", "#fff2cc", "#d0e0e3", "#f4cccc", "#d9d2e9",
)  # fmt: skip
_NO_DEVICE = "#ffffff"


class _Edge:
    __slots__ = ("source", "target", "label", "control")

    def __init__(self, source: str, target: str, label: str, control: bool) -> None:
        self.source, self.target, self.label, self.control = source, target, label, control


def graph_to_dot(graph: Graph) -> str:
    """DOT text of `graph`."""
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(
            f"graph_to_dot takes a Graph (scope.graph); got {type(graph).__name__}"
        )
    nodes = []
    edges = []
    for op in graph.operations:
        nodes.append((op.name, op.type, op.device))
        for tensor in op.inputs:
            label = f"{tensor.dtype.name} {tensor.shape}"
            if len(tensor.op.outputs) > 1:
                label = f":{tensor.index} {label}"
            edges.append(_Edge(tensor.op.name, op.name, label, False))
        for dep in op.control_inputs:
            edges.append(_Edge(dep.name, op.name, "", True))
    return _render(nodes, edges)


def graph_def_to_dot(graph_def: Any) -> str:
    """DOT text of a GraphDef message, without importing it (so ops need not be registered);
    edges show the output index only."""
    try:
        if isinstance(graph_def, Graph):
            raise TypeError  # a Graph has no `node`: told apart for the hint
        names = {node.name for node in graph_def.node}
    except (AttributeError, TypeError):
        hint = " (for a Graph, use graph_to_dot)" if isinstance(graph_def, Graph) else ""
        raise InvalidArgumentError(
            f"graph_def_to_dot takes a GraphDef message; got {type(graph_def).__name__}{hint}"
        ) from None
    nodes = []
    edges = []
    for node in graph_def.node:
        nodes.append((node.name, node.op, node.device))
        for text in node.input:
            control = text.startswith("^")
            source, _, index = text.lstrip("^").partition(":")
            if source not in names:
                continue  # a broken reference: drawn by nobody, reported by import_graph_def
            label = "" if control or index in ("", "0") else f":{index}"
            edges.append(_Edge(source, node.name, label, control))
    return _render(nodes, edges)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _render(nodes: Iterable[tuple[str, str, str]], edges: Iterable[_Edge]) -> str:
    ids: dict[str, str] = {}
    colours: dict[str, str] = {}
    lines = [
        "digraph minigraph {",
        '  graph [rankdir=TB, fontname="Helvetica", fontsize=10];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    for name, op_type, device in nodes:
        node_id = ids[name] = f"n{len(ids)}"
        colour = _NO_DEVICE
        if device:
            colour = colours.get(device) or colours.setdefault(
                device, _PALETTE[len(colours) % len(_PALETTE)]
            )
        label = _quote(op_type + "\n" + name)
        tooltip = _quote(f"{name} ({op_type})" + (f" on {device}" if device else ""))
        lines.append(f"  {node_id} [label={label}, fillcolor={_quote(colour)}, tooltip={tooltip}];")
    for edge in edges:
        attrs = []
        if edge.label:
            attrs.append(f"label={_quote(edge.label)}")
        if edge.control:
            attrs.append("style=dashed")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {ids[edge.source]} -> {ids[edge.target]}{suffix};")
    if colours:
        lines.append("  subgraph cluster_devices {")
        lines.append('    label="requested devices"; style=dashed; fontsize=9;')
        for i, (device, colour) in enumerate(colours.items()):
            lines.append(
                f"    device{i} [label={_quote(device)}, fillcolor={_quote(colour)}, "
                "shape=note, fontsize=9];"
            )
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


_MAX_TIMEOUT = 24 * 3600.0  # a day; past that subprocess's timers overflow


def render_svg(dot_text: str, path: str, timeout: float = 120.0) -> None:
    """Renders DOT text to an SVG file with Graphviz's `dot`.

    Raises:
        NotFoundError: `dot` is not installed (the message says how to get it).
        UnavailableError: `dot` failed or timed out.
    """
    if not isinstance(dot_text, str):
        raise InvalidArgumentError(
            f"render_svg: dot_text must be a str; got {type(dot_text).__name__}"
        )
    if not isinstance(path, (str, os.PathLike)) or "\0" in str(os.fspath(path)):
        raise InvalidArgumentError(f"render_svg: path must be a file path; got {path!r}")
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout <= _MAX_TIMEOUT
    ):
        raise InvalidArgumentError(
            f"render_svg: timeout must be a number of seconds in (0, {_MAX_TIMEOUT}]; got "
            f"{timeout!r}"
        )
    program = shutil.which("dot")
    if program is None:
        raise NotFoundError(GRAPHVIZ_HELP)
    try:
        result = subprocess.run(
            [program, "-Tsvg", "-o", path],
            input=dot_text.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UnavailableError(f"Graphviz's dot took more than {timeout:g} s; gave up") from None
    if result.returncode != 0:
        detail = result.stderr.decode("utf-8", errors="replace").strip()
        raise UnavailableError(f"Graphviz's dot failed (exit {result.returncode}): {detail}")
