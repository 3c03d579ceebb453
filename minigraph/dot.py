"""Pictures of graphs: Graphviz DOT text (`Graph.to_dot()`, `python -m minigraph show --dot`).

Ops are boxes showing their type and name, filled with one colour per requested device (a
legend lists them), grouped in one dashed box per name scope; data edges are labelled with
dtype and shape (and the output index for ops with several outputs); control edges are dashed.
`graph_def_to_dot` draws a GraphDef that cannot be imported (ops minigraph lacks), without
dtypes and shapes.

Large graphs stay drawable (Graphviz's time grows with the edges it must route around others,
and labelled edges cost it most):
- a Const that several ops read (a shared axis or index tensor) is drawn once, in a "shared
  constants" box, and named in its consumers' labels instead of being wired to each of them:
  one edge from it to every consumer of a long chain is what made `dot` take minutes;
- past `_LABELLED_EDGES` edges, edges carry their dtype and shape as a tooltip (shown on
  hover in an SVG), not as a label;
- past `_LARGE_GRAPH` nodes, `dot`'s layered layout (the one that suits dataflow graphs: inputs
  above, outputs below) runs with its search limits capped (`nslimit`, `nslimit1`, `mclimit`:
  fewer network-simplex and crossing-minimisation passes) and straight edges (`splines=line`),
  so that it lays out thousands of nodes in seconds. (`sfdp`, the force-directed engine made
  for large graphs, took minutes on a 2000-node graph in name-scope clusters.)

Rendering to SVG needs Graphviz's `dot` program (`render_svg`), which is not a Python package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
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


# A Const read by at least this many ops is drawn once, unwired (see the module docstring).
_SHARED_CONSUMERS = 3
# Past this many edges, dtype and shape go into edge tooltips rather than labels.
_LABELLED_EDGES = 300
# Past this many nodes, the layout search is capped.
_LARGE_GRAPH = 500
# Consumer labels name at most this many shared constants (then "+N").
_NAMED_CONSTANTS = 3


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


def _shared_constants(
    nodes: Sequence[tuple[str, str, str]], edges: Sequence[_Edge]
) -> dict[str, int]:
    """{name: consumer count} of the Consts that at least `_SHARED_CONSUMERS` ops read."""
    consts = {name for name, op_type, _ in nodes if op_type == "Const"}
    consumers: dict[str, set[str]] = {}
    for edge in edges:
        if edge.source in consts and not edge.control:
            consumers.setdefault(edge.source, set()).add(edge.target)
    return {c: len(t) for c, t in consumers.items() if len(t) >= _SHARED_CONSUMERS}


class _Scopes:
    """The name-scope tree of the node names: `a/b/op` sits in cluster `a/b`, inside `a`."""

    def __init__(self) -> None:
        self.members: dict[str, list[str]] = {"": []}  # scope -> DOT node lines
        self.children: dict[str, list[str]] = {"": []}

    def add(self, name: str, line: str) -> None:
        scope = name.rpartition("/")[0]
        self._ensure(scope)
        self.members[scope].append(line)

    def _ensure(self, scope: str) -> None:
        if scope in self.members:
            return
        parent = scope.rpartition("/")[0]
        self._ensure(parent)
        self.members[scope] = []
        self.children[scope] = []
        self.children[parent].append(scope)

    def lines(self, scope: str = "", depth: int = 0) -> list[str]:
        indent = "  " * (depth + 1)
        out = [indent + line for line in self.members[scope]]
        for child in self.children[scope]:
            out.append(f"{indent}subgraph {_quote('cluster_' + child)} {{")
            out.append(
                f"{indent}  label={_quote(child.rpartition('/')[2])}; tooltip={_quote(child)}; "
                'style="dashed,rounded"; color="#999999"; fontsize=9;'
            )
            out.extend(self.lines(child, depth + 1))
            out.append(f"{indent}}}")
        return out


def _render(nodes: Sequence[tuple[str, str, str]], edges: Sequence[_Edge]) -> str:
    ids: dict[str, str] = {}
    colours: dict[str, str] = {}
    shared = _shared_constants(nodes, edges)
    reads: dict[str, list[str]] = {}  # consumer -> the shared constants it reads, in order
    drawn = []
    for edge in edges:
        if edge.source in shared and not edge.control:
            names = reads.setdefault(edge.target, [])
            if edge.source not in names:
                names.append(edge.source)
        else:
            drawn.append(edge)
    large = len(nodes) > _LARGE_GRAPH
    labelled = len(drawn) <= _LABELLED_EDGES
    lines = [
        "digraph minigraph {",
        '  graph [rankdir=TB, fontname="Helvetica", fontsize=10'
        + (", nslimit=1, nslimit1=1, mclimit=0.1, splines=line" if large else "")
        + "];",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    scopes = _Scopes()
    constants = []
    for name, op_type, device in nodes:
        node_id = ids[name] = f"n{len(ids)}"
        colour = _NO_DEVICE
        if device:
            colour = colours.get(device) or colours.setdefault(
                device, _PALETTE[len(colours) % len(_PALETTE)]
            )
        text = op_type + "\n" + name
        if name in reads:
            names = reads[name]
            listed = ", ".join(n.rpartition("/")[2] for n in names[:_NAMED_CONSTANTS])
            more = len(names) - _NAMED_CONSTANTS
            text += "\n(reads " + listed + (f" +{more}" if more > 0 else "") + ")"
        tooltip = f"{name} ({op_type})" + (f" on {device}" if device else "")
        if name in shared:
            text += f"\nread by {shared[name]} ops"
            tooltip += f", read by {shared[name]} ops (edges not drawn)"
        line = (
            f"{node_id} [label={_quote(text)}, fillcolor={_quote(colour)}, "
            f"tooltip={_quote(tooltip)}];"
        )
        if name in shared:
            constants.append(line)
        else:
            scopes.add(name, line)
    lines.extend(scopes.lines())
    if constants:
        lines.append("  subgraph cluster_shared_constants {")
        lines.append('    label="shared constants"; style=dashed; fontsize=9;')
        lines.extend("    " + line for line in constants)
        lines.append("  }")
    for edge in drawn:
        attrs = []
        if edge.label:
            key = "label" if labelled else "tooltip"
            attrs.append(f"{key}={_quote(edge.label)}")
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
