"""What `import minigraph` does and does not do (minigraph/__init__.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import minigraph

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROBE = """
import json, sys
import minigraph
print(json.dumps({
    "file": minigraph.__file__,
    "modules": sorted(sys.modules),
}))
"""


@pytest.fixture(scope="module")
def fresh_import():
    """`import minigraph` in a new interpreter: its module file and everything it imported."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _top_level(modules):
    return {name.partition(".")[0] for name in modules}


def test_the_probe_imports_this_checkout(fresh_import):
    assert os.path.realpath(fresh_import["file"]) == os.path.realpath(minigraph.__file__)
    assert "minigraph" in fresh_import["modules"]
    assert "numpy" in _top_level(fresh_import["modules"])


def test_import_does_not_import_cupy(fresh_import):
    assert "cupy" not in _top_level(fresh_import["modules"])
    assert not any(name.startswith("cupy") for name in fresh_import["modules"])


def test_import_does_not_import_networkx(fresh_import):
    # to_networkx() imports it on use: it is slow to import.
    assert "networkx" not in _top_level(fresh_import["modules"])


def test_import_does_not_import_dask(fresh_import):
    # Only a distributed session (the `distributed` extra) imports Dask, and minigraph.distributed.
    top = _top_level(fresh_import["modules"])
    assert not {"dask", "distributed", "tornado"} & top
    assert "minigraph.distributed" not in fresh_import["modules"]


def test_import_does_not_import_op_libraries(fresh_import):
    # Op libraries are loaded by the CLI (entry points), never by the runtime.
    assert "ops" not in _top_level(fresh_import["modules"])


def test_all_names_exist():
    assert len(minigraph.__all__) == len(set(minigraph.__all__))
    missing = [name for name in minigraph.__all__ if not hasattr(minigraph, name)]
    assert missing == []


def test_all_contains_the_public_api():
    expected = {
        "Scope", "Graph", "Operation", "Output", "OpBuilder", "Const", "Placeholder", "Identity",
        "NoOp", "OpDef", "ArgDef", "AttrDef", "InferenceContext", "register_op",
        "register_kernel", "op_builder", "TensorShape", "DType", "as_dtype",
        "InvalidArgumentError", "NotFoundError", "AlreadyExistsError", "InternalError",
    }  # fmt: skip
    assert expected <= set(minigraph.__all__)
    for dtype in minigraph.dtypes.ALL_DTYPES:
        name = "bool_" if dtype.name == "bool" else dtype.name
        assert name in minigraph.__all__
        assert getattr(minigraph, name) is dtype


def test_star_import_gives_exactly_all():
    namespace: dict = {}
    exec("from minigraph import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(minigraph.__all__)


def test_version():
    assert minigraph.__version__ == "0.1.0"


def test_import_with_the_op_library_stays_light():
    # `import minigraph, ops` is what users pay before building a graph: the heavy optional
    # parts (protobuf for graph files, networkx, cupy, ml_dtypes for bfloat16, difflib for
    # suggestions in errors, json for trace files, concurrent.futures for a session's thread
    # pools) load on first use only.
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    probe = (
        "import sys\nimport minigraph, ops\nloaded = sorted(sys.modules)\n"
        "import json\nprint(json.dumps(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    top = _top_level(json.loads(result.stdout.strip().splitlines()[-1]))
    heavy_modules = (
        "google", "networkx", "cupy", "onnx", "onnxruntime", "tensorflow", "ml_dtypes", "difflib",
        "json", "concurrent", "logging",
    )  # fmt: skip
    for heavy in heavy_modules:
        assert heavy not in top, heavy


def _run_probe(code: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_ml_dtypes_and_difflib_load_on_first_use():
    out = _run_probe(
        "import sys\n"
        "import minigraph as mg, ops\n"
        "before = [m for m in ('ml_dtypes', 'difflib') if m in sys.modules]\n"
        "np_dtype = mg.bfloat16.np_dtype\n"  # loads ml_dtypes
        "import ml_dtypes, numpy as np\n"
        "ok = np_dtype == np.dtype(ml_dtypes.bfloat16) and mg.as_dtype(np_dtype) is mg.bfloat16\n"
        "c = mg.Const(mg.Scope.new_root_scope(), np.ones(2, ml_dtypes.bfloat16))\n"
        "print(before, ok, c.dtype.name, mg.bfloat16.itemsize)\n"
    )
    assert out == "[] True bfloat16 2"


def test_an_ml_dtypes_array_met_before_minigraph_loads_ml_dtypes():
    out = _run_probe(
        "import ml_dtypes, numpy as np\n"
        "import minigraph as mg\n"
        "a = np.arange(3).astype(ml_dtypes.bfloat16)\n"
        "root = mg.Scope.new_root_scope()\n"
        "x = mg.Placeholder(root, mg.bfloat16, shape=[3])\n"
        "y = mg.Identity(root, x)\n"
        "got = mg.Session(root).run(y, {x: a})\n"
        "print(mg.as_dtype(a.dtype) is mg.bfloat16, got.dtype == a.dtype, got.tolist())\n"
    )
    assert out == "True True [0.0, 1.0, 2.0]"
