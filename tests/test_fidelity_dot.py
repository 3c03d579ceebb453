"""Pictures of large graphs (issue 24): `minigraph show --svg` gave up after 120 s on a 100-node
gather chain whose nodes share their axis and index constants. Shared constants are drawn once,
name scopes are clusters, edge labels give way to tooltips past a size, and large graphs get a
capped layout, so that a 2000-node graph draws in seconds (where Graphviz's `dot` is
installed: `apt-get install graphviz`)."""

from __future__ import annotations

import re
import shutil
import time

import numpy as np
import pytest

import minigraph as mg
from minigraph import dot
from minigraph.__main__ import main
from ops import GatherV2, gather

HAS_DOT = shutil.which("dot") is not None


def gather_chain(n: int, shared: bool = True, scopes: int = 10) -> mg.Graph:
    """The issue's graph: a chain of gathers reading one axis and one index constant, in
    `scopes` name scopes (`shared=False`: literal constants, one pair per gather)."""
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, shape=[4, 4]).output
    idx = mg.Const(root.with_op_name("idx"), np.array([1, 0, 3, 2], np.int32))
    axis = mg.Const(root.with_op_name("axis"), np.int32(0))
    blocks = [root.new_sub_scope(f"block{k}") for k in range(scopes)]
    for i in range(n):
        where = blocks[i * scopes // n]
        x = (GatherV2(where, x, idx, axis) if shared else gather(where, x, [1, 0, 3, 2])).output
    return root.graph


def node_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"\s+n\d+ \[label=", line)]


def test_shared_constants_are_drawn_once_without_edges():
    text = gather_chain(100).to_dot()
    assert "subgraph cluster_shared_constants {" in text
    (idx,) = [line for line in node_lines(text) if '"Const\\nidx\\nread by 100 ops"' in line]
    idx_id = idx.split()[0]
    assert f"{idx_id} ->" not in text  # no edge from it
    consumer = next(line for line in node_lines(text) if "block0/GatherV2\\n" in line)
    assert "(reads idx, axis)" in consumer
    assert text.count("->") == 100  # the chain itself: x -> g0 -> ... -> g99


def test_constants_read_by_fewer_ops_keep_their_edges():
    text = gather_chain(2).to_dot()  # each constant read twice: still wired
    assert "cluster_shared_constants" not in text and "reads" not in text
    assert text.count("->") == 2 + 2 * 2


def test_name_scopes_are_clusters_nested_as_the_names():
    root = mg.Scope.new_root_scope()
    outer = root.new_sub_scope("outer")
    inner = outer.new_sub_scope("inner")
    x = mg.Placeholder(root.with_op_name("x"), mg.int32, [2])
    y = gather(inner.with_op_name("y"), x, [1])
    gather(outer.with_op_name("z"), y, [0])
    text = root.graph.to_dot()
    opened = text.index('subgraph "cluster_outer" {')
    nested = text.index('subgraph "cluster_outer/inner" {')
    assert opened < nested < text.index('label="GatherV2\\nouter/inner/y"')
    assert 'label="inner"; tooltip="outer/inner"' in text
    # Root-scope nodes stay outside every cluster.
    assert text.index('label="Placeholder\\nx"') < opened


def test_edge_labels_become_tooltips_past_a_size():
    small = gather_chain(20, shared=False).to_dot()
    assert 'label="float32 [4,4]"' in small and 'tooltip="float32 [4,4]"' not in small
    large = gather_chain(400, shared=False).to_dot()
    assert 'label="float32 [4,4]"' not in large
    assert '[tooltip="float32 [4,4]"]' in large


def test_large_graphs_get_a_capped_layout():
    assert "nslimit" not in gather_chain(100).to_dot()
    head = gather_chain(2000).to_dot().splitlines()[1]
    assert "nslimit=1, nslimit1=1, mclimit=0.1, splines=line" in head


def test_graph_defs_are_drawn_the_same_way():
    graph = gather_chain(100)
    assert dot.graph_def_to_dot(graph.as_graph_def()).count("->") == 100


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed: apt-get install graphviz")
@pytest.mark.parametrize("shared", [True, False], ids=["shared constants", "literal constants"])
def test_a_2000_node_graph_draws_in_seconds(tmp_path, shared):
    graph = gather_chain(2000 if shared else 700, shared=shared, scopes=100)
    assert len(graph) >= 2000
    path = tmp_path / "chain.svg"
    start = time.perf_counter()
    dot.render_svg(graph.to_dot(), str(path), timeout=60.0)
    took = time.perf_counter() - start
    svg = path.read_text()
    assert svg.startswith("<?xml") and "block99/GatherV2" in svg
    # About 3 s alone on the 2-vCPU machine (before: the 100-node chain gave up after 120 s);
    # the bound leaves room for a loaded machine.
    assert took < 45.0, f"dot took {took:.1f} s"


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed: apt-get install graphviz")
def test_show_svg_of_the_issues_100_node_chain(tmp_path, capsys):
    model = tmp_path / "chain.pb"
    mg.write_graph(gather_chain(100), str(model))
    start = time.perf_counter()
    status = main(["show", str(model), "--svg", str(tmp_path / "chain.svg")])
    took = time.perf_counter() - start
    out = capsys.readouterr().out
    assert status == 0 and f"wrote {tmp_path / 'chain.svg'}" in out
    assert took < 30.0, f"show --svg took {took:.1f} s"
