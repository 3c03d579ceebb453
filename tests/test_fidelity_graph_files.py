"""Graph files as TensorFlow 2.21 writes them (issue 24): every field of graph.proto's closure
parses (NodeDef.experimental_type and the rest), and a file naming ops nobody registered loads
the op libraries that entry points announce, or names the library to import."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
from minigraph import graph_def as gd
from minigraph import proto

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def full_type_name(number: int) -> str:
    enum = proto.POOL.FindEnumTypeByName("minigraph.graph.FullTypeId")
    return enum.values_by_number[number].name


# -- TensorFlow's full types and the rest of the schema ----------------------------------------


def test_a_tf_text_file_whose_shape_node_has_a_full_type_imports_and_runs():
    # TF 2.21 writes experimental_type on Shape nodes (tests/data/make_tf_typed_graph.py).
    graph_def = mg.read_graph(DATA / "shape_typed.pbtxt")
    (shape,) = [n for n in graph_def.node if n.HasField("experimental_type")]
    assert shape.op == "Shape"
    assert full_type_name(shape.experimental_type.type_id) == "TFT_PRODUCT"
    assert full_type_name(shape.experimental_type.args[0].args[0].type_id) == "TFT_INT32"
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    want = np.load(DATA / "shape_typed.npz")
    names = [n.decode() for n in want["fetch_names"]]
    got = mg.Session(scope).run(names, {"x:0": want["feed"]})
    for i, (name, value) in enumerate(zip(names, got)):
        expected = want[f"fetch_{i}"]
        assert value.dtype == expected.dtype and np.array_equal(value, expected), name


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_full_types_survive_a_conversion(tmp_path, suffix):
    graph_def = mg.read_graph(DATA / "shape_typed.pbtxt")
    path = tmp_path / f"copy{suffix}"
    mg.write_graph(graph_def, path)
    assert mg.read_graph(path) == graph_def


# Every message of TF's graph.proto closure, with fields of each kind, in TF's text format.
EVERY_FIELD = """
node {
  name: "x" op: "Placeholder" device: "/device:CPU:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: -1 name: "batch" } dim { size: 3 } } } }
  experimental_debug_info { original_node_names: "x0" original_func_names: "f" }
  experimental_type {
    type_id: TFT_PRODUCT
    args { type_id: TFT_TENSOR args { type_id: TFT_FLOAT } }
    args { type_id: TFT_LITERAL i: 7 }
    args { type_id: TFT_NAMED s: "field" }
  }
}
node {
  name: "c" op: "Const"
  attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
                                       int_val: 1 int_val: 2 version_number: 0 } } }
  attr { key: "_unused" value { list { s: "a" i: 1 f: 0.5 b: true type: DT_INT8
    shape { unknown_rank: true }
    tensor { dtype: DT_RESOURCE resource_handle_val { device: "d" container: "c" name: "n"
             hash_code: 1 maybe_type_name: "t"
             dtypes_and_shapes { dtype: DT_FLOAT shape { dim { size: 1 } } } } }
    tensor { dtype: DT_VARIANT variant_val { type_name: "v" metadata: "m"
             tensors { dtype: DT_FLOAT } } }
    func { name: "f" attr { key: "T" value { type: DT_FLOAT } } } } } }
}
versions { producer: 2474 min_consumer: 0 bad_consumers: 1 }
debug_info {
  files: "model.py"
  frames_by_id { key: 1 value { file_index: 0 line: 3 col: 1 func: "f" code: "x = 1" } }
  traces_by_id { key: 2 value { frame_id: 1 file_line_cols { line: 4 } } }
  traces { key: "x" value { frame_id: 1 } }
  name_to_trace_id { key: "x" value: 2 }
}
"""

LIBRARY = """
library {
  function {
    signature {
      name: "f" summary: "s" description: "d" is_stateful: true control_output: "c"
      input_arg { name: "a" type: DT_FLOAT description: "x" handle_data { dtype: DT_FLOAT }
                  experimental_full_type { type_id: TFT_TENSOR } is_ref: false }
      output_arg { name: "b" type_attr: "T" number_attr: "N" type_list_attr: "L" }
      attr { name: "T" type: "type" default_value { type: DT_FLOAT } description: "t"
             has_minimum: true minimum: 1 allowed_values { list { type: DT_FLOAT } } }
      deprecation { version: 3 explanation: "old" }
      is_commutative: true is_aggregate: true allows_uninitialized_input: true
      is_distributed_communication: true
    }
    attr { key: "_noinline" value { b: true } }
    arg_attr { key: 0 value { attr { key: "_output_shapes" value { list { } } } } }
    resource_arg_unique_id { key: 0 value: 1 }
    node_def { name: "m" op: "Mul" input: "a" input: "a" }
    ret { key: "b" value: "m:z:0" }
    control_ret { key: "c" value: "m" }
  }
  gradient { function_name: "f" gradient_func: "g" }
  registered_gradients { gradient_func: "g" registered_op_type: "Op" }
}
"""


def test_every_field_of_the_schema_parses_in_text_and_binary():
    graph_def = gd.parse_graph_def(EVERY_FIELD)
    assert graph_def.node[0].experimental_type.args[1].i == 7
    assert graph_def.node[0].experimental_type.args[2].s == "field"
    assert graph_def.debug_info.traces_by_id[2].file_line_cols[0].line == 4
    again = gd.parse_graph_def(graph_def.SerializeToString())
    assert again == graph_def
    # What minigraph ignores is ignored: the graph imports (the `_` attr is not read).
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    assert mg.Session(scope).run("c:0").tolist() == [1, 2]


def test_a_function_library_parses_and_is_refused_on_import():
    graph_def = gd.parse_graph_def(EVERY_FIELD + LIBRARY)
    signature = graph_def.library.function[0].signature
    assert signature.input_arg[0].experimental_full_type.type_id == 1000  # TFT_TENSOR
    assert graph_def.library.registered_gradients[0].registered_op_type == "Op"
    with pytest.raises(mg.UnimplementedError, match="function library"):
        mg.import_graph_def(mg.Scope.new_root_scope(), graph_def)


# -- op libraries loaded when a graph needs them -----------------------------------------------


def run_fresh(code: str) -> subprocess.CompletedProcess:
    """`code` in a new interpreter that has imported nothing of ours (so not `ops`)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="default")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip


def test_a_graph_file_runs_in_a_new_process_without_importing_ops():
    result = run_fresh(
        """
        import sys
        import numpy as np
        import minigraph as mg
        assert "ops" not in sys.modules
        graph_def = mg.read_graph("tests/data/gather_basic.pb")
        assert "ops" not in sys.modules
        scope = mg.Scope.new_root_scope()
        mg.import_graph_def(scope, graph_def, name="")
        print("ops" in sys.modules)
        x = np.arange(9, dtype=np.float32).reshape(3, 3)
        print(mg.Session(scope).run("rows:0", {"x:0": x}).tolist())
        # Bytes and a second import: nothing loads twice.
        mg.import_graph_def(mg.Scope.new_root_scope(), graph_def.SerializeToString())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", "[[6.0, 7.0, 8.0], [0.0, 1.0, 2.0]]"]
    assert "Warning" not in result.stderr


def test_an_op_nobody_defines_names_the_libraries_and_what_to_import():
    result = run_fresh(
        """
        import minigraph as mg
        text = 'node { name: "y" op: "Frob" } node { name: "z" op: "Frob2" }'
        try:
            mg.import_graph_def(mg.Scope.new_root_scope(), mg.graph_def.parse_graph_def(text))
        except mg.NotFoundError as e:
            print(e.message)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "Op types not registered: 'Frob' (first used by node 'y'), 'Frob2' (first used by node "
        "'z'). The op libraries installed packages announce are loaded (ops) and none defines "
        "them: import the module that does first (e.g. `import my_ops`). (`minigraph ops` lists "
        "the registered ops)"
    )


def test_a_library_that_fails_to_load_is_named():
    result = run_fresh(
        """
        import importlib.metadata as md
        import minigraph.libraries as libraries
        broken = md.EntryPoint("broken", "no_such_module_anywhere", libraries.ENTRY_POINT_GROUP)
        real = libraries.entry_points
        libraries.entry_points = lambda group: [*real(group=group), broken]
        import minigraph as mg
        text = 'node { name: "y" op: "Frob" }'
        try:
            mg.import_graph_def(mg.Scope.new_root_scope(), mg.graph_def.parse_graph_def(text))
        except mg.NotFoundError as e:
            print(e.message)
        """
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip()
    assert "are loaded (ops, broken (no_such_module_anywhere)) and none defines it" in out
    assert "Not loaded: cannot load op library 'broken' (no_such_module_anywhere): " in out
    assert "ModuleNotFoundError" in out
    assert "RuntimeWarning: minigraph: cannot load op library 'broken'" in result.stderr


def test_without_autoload_the_error_says_to_import_the_library():
    result = run_fresh(
        """
        import sys
        import minigraph as mg
        from minigraph import libraries
        assert libraries.set_autoload(False) is True and not libraries.autoload_enabled()
        try:
            graph_def = mg.read_graph("tests/data/gather_basic.pb")
            mg.import_graph_def(mg.Scope.new_root_scope(), graph_def)
        except mg.NotFoundError as e:
            print(e.message)
        print("ops" in sys.modules)
        """
    )
    assert result.returncode == 0, result.stderr
    first, loaded = result.stdout.strip().splitlines()
    assert first.startswith("Op types not registered: 'GatherV2' (first used by node ")
    assert "Import the op library that defines them first (`import ops` for minigraph's " in first
    assert loaded == "False"


def test_the_cli_without_entry_points_does_not_load_them_for_a_graph_either():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "minigraph", "--no-entry-points", "show",
         "tests/data/gather_basic.pb"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "note: not importable here (NotFoundError: Op types not registered: " in result.stdout
    assert "loading the installed op libraries is turned off" in result.stdout
