"""Graph files: save a graph as a TensorFlow GraphDef, load it back, run it, look at it.

    python examples/graph_files.py [DIR]

Writes model.pb (binary), model.pbtxt (text) and model.dot into DIR (a temporary directory
by default), then runs the command-line tools on them: `minigraph show`, `run` and `convert`.
The files are TensorFlow's format: `tf.compat.v1.import_graph_def` reads them, and
Netron or TensorBoard show them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

import minigraph as mg
from minigraph.tf_compat import tf_incompatibilities
from ops import GatherNd, gather


def build() -> mg.Scope:
    """Picks rows of a table, then one column of them: the graph we save."""
    scope = mg.Scope.new_root_scope()
    table = mg.Placeholder(scope.with_op_name("table"), mg.float32, shape=[None, 3])
    picks = mg.Placeholder(scope.with_op_name("picks"), mg.int32, shape=[None])
    rows = gather(scope.with_op_name("rows").with_device("CPU:0"), table, picks)
    gather(scope.with_op_name("middle"), rows, [1], axis=1)
    return scope


def main(directory: str) -> None:
    scope = build()
    feeds = {"table:0": np.arange(12, dtype=np.float32).reshape(4, 3), "picks:0": [3, 0]}
    expected = mg.Session(scope).run("middle:0", feeds)

    # 1. Save: binary (.pb) and text (.pbtxt), chosen by the file name.
    binary = mg.write_graph(scope.graph, os.path.join(directory, "model.pb"))
    text = mg.write_graph(scope.graph, os.path.join(directory, "model.pbtxt"))
    print(f"saved {binary} ({os.path.getsize(binary)} bytes) and {text}")
    with open(text, encoding="utf-8") as f:
        print("the text format begins:\n  " + "\n  ".join(f.read().splitlines()[:8]))

    # 2. Load into a new graph and run it: the same names, dtypes, shapes and results.
    loaded = mg.Scope.new_root_scope()
    mg.import_graph_def(loaded, mg.read_graph(binary), name="")
    middle = loaded.graph.get_output("middle:0")
    result = mg.Session(loaded).run(middle, feeds)
    print(f"reloaded: {len(loaded.graph)} nodes; middle:0 is {middle.dtype.name} {middle.shape}")
    print(f"result {result.tolist()} matches the original: {np.array_equal(result, expected)}")

    # 3. Import again under a name, wiring its inputs to tensors of this graph (input_map) and
    #    getting handles back (return_elements), as tf.compat.v1.import_graph_def does.
    fixed = mg.Const(loaded.with_op_name("fixed_picks"), [1, 1, 2])
    (copy,) = mg.import_graph_def(
        loaded,
        mg.read_graph(text),
        input_map={"table:0": loaded.graph.get_output("table:0"), "picks:0": fixed},
        return_elements=["middle:0"],
        name="copy",
    )
    print(f"{copy.name} with picks [1, 1, 2]: {mg.Session(loaded).run(copy, feeds).tolist()}")

    # 4. A graph TensorFlow cannot run: GatherNd's batch_dims is minigraph's. The file says so
    #    (versions.min_consumer), so TensorFlow refuses it instead of computing something else.
    other = mg.Scope.new_root_scope()
    GatherNd(other.with_op_name("per_row"), [[1, 2], [3, 4]], [[1], [0]], batch_dims=1)
    print(f"min_consumer {other.graph.as_graph_def().versions.min_consumer}:")
    for reason in tf_incompatibilities(other.graph):
        print(f"  {reason}")

    # 5. A picture: DOT text for Graphviz (`dot -Tsvg model.dot -o model.svg`).
    dot_file = os.path.join(directory, "model.dot")
    with open(dot_file, "w", encoding="utf-8") as f:
        f.write(scope.graph.to_dot())
    print(f"wrote {dot_file}")

    # 6. The same from the command line.
    commands = [
        ["show", binary],
        ["run", binary, "--feed", "table:0=" + str(feeds["table:0"].tolist()),
         "--feed", "picks:0=[3, 0]", "--fetch", "middle:0"],
        ["convert", binary, os.path.join(directory, "converted.pbtxt")],
    ]  # fmt: skip
    for args in commands:
        print(f"\n$ python -m minigraph {' '.join(_quote(a) for a in args)}")
        result = subprocess.run(
            [sys.executable, "-m", "minigraph", *args], capture_output=True, text=True, check=False
        )
        print((result.stdout + result.stderr).rstrip())
    print("\n(add --dot OUT.dot or --svg OUT.svg to `show` for a picture; SVG needs Graphviz)")


def _quote(arg: str) -> str:
    return f"'{arg}'" if any(c in arg for c in " [],") else arg


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.makedirs(sys.argv[1], exist_ok=True)
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
