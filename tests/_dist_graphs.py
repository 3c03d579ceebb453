"""Random gather graphs spread over the client and two worker tasks (for the partition and
cluster tests): a table (a Const, or a fed Placeholder), then gathers of rows and Identities,
each on a random task, some with control dependencies, and a random set of fetches."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

import minigraph as mg
from ops import gather

#: "" is no request: the client.
TASKS = ["", "/job:worker/task:0", "/job:worker/task:1"]


@st.composite
def recipes(draw: Any, max_nodes: int = 7) -> dict[str, Any]:
    rows = draw(st.integers(1, 5))
    cols = draw(st.integers(1, 3))
    recipe: dict[str, Any] = {
        "table": np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) + 1,
        "table_task": draw(st.sampled_from(TASKS)),
        "fed": draw(st.booleans()),
        "nodes": [],
    }
    sizes = [rows]  # rows of each tensor: the table, then every node
    for _ in range(draw(st.integers(1, max_nodes))):
        source = draw(st.integers(0, len(sizes) - 1))
        kind = draw(st.sampled_from(["gather", "gather", "identity"]))
        if kind == "gather":
            indices = draw(st.lists(st.integers(0, sizes[source] - 1), min_size=1, max_size=4))
        else:
            indices = None
        control = draw(st.none() | st.integers(1, len(sizes) - 1)) if len(sizes) > 1 else None
        recipe["nodes"].append((source, kind, indices, draw(st.sampled_from(TASKS)), control))
        sizes.append(sizes[source] if indices is None else len(indices))
    n = len(recipe["nodes"])
    recipe["fetches"] = draw(st.lists(st.integers(1, n), min_size=1, max_size=3, unique=True))
    return recipe


def build(recipe: dict[str, Any]) -> tuple[mg.Scope, list[mg.Output], dict[mg.Output, Any]]:
    """The recipe's graph: (scope, fetches, feeds)."""
    scope = mg.Scope.new_root_scope()
    table_scope = scope.with_device(recipe["table_task"]).with_op_name("table")
    feeds = {}
    if recipe["fed"]:
        table = mg.Placeholder(table_scope, mg.float32, shape=[None, recipe["table"].shape[1]])
        feeds[table.output] = recipe["table"]
    else:
        table = mg.Const(table_scope, recipe["table"])
    tensors = [table.output]
    for i, (source, kind, indices, task, control) in enumerate(recipe["nodes"], 1):
        s = scope.with_device(task).with_op_name(f"n{i}")
        if control is not None:
            s = s.with_control_dependencies(tensors[control].op)
        if kind == "gather":
            out = gather(s, tensors[source], np.array(indices, dtype=np.int32)).output
        else:
            out = mg.Identity(s, tensors[source]).output
        tensors.append(out)
    return scope, [tensors[i] for i in recipe["fetches"]], feeds


def reference(recipe: dict[str, Any]) -> list[np.ndarray]:
    """The fetched values, computed with numpy."""
    values = [recipe["table"]]
    for source, _kind, indices, _task, _control in recipe["nodes"]:
        values.append(values[source] if indices is None else values[source][indices])
    return [values[i] for i in recipe["fetches"]]
