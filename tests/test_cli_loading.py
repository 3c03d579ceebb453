"""The command line as a user meets it (issue 14 sections 3 and 4, issue 10 section 5): `--load`
resolves paths from any working directory and imports files under a private module name; a
local `ops.py` shadowing the op library is reported; aliases are described; a closed pipe
ends the command quietly. Framework frames are recognised by file location, so a user's own
`ops.py` does not hide source lines."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONIOENCODING="utf-8")


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "minigraph", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


# -- --load ----------------------------------------------------------------------------------


def test_load_a_file_by_a_relative_path_from_another_directory(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    relative = os.path.relpath(ROOT / "examples" / "custom_op.py", work)
    for spec in (relative, str(ROOT / "examples" / "custom_op.py")):
        result = cli("--load", spec, "describe", "IndexAdd", cwd=work)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("IndexAdd(input: T, indices: Tindices, source: T, ")


def test_a_loaded_file_imports_its_neighbours(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helpers_for_cli_test.py").write_text("DOC = 'from a neighbour'\n")
    (lib / "my_ops.py").write_text(
        textwrap.dedent(
            """
            import minigraph as mg
            from helpers_for_cli_test import DOC

            mg.register_op(mg.OpDef("CliNeighbourOp", outputs=["y: int32"], doc=DOC))
            """
        )
    )
    result = cli("--load", "lib/my_ops.py", "describe", "CliNeighbourOp", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "from a neighbour" in result.stdout


def test_a_loaded_file_never_replaces_a_module_of_the_same_name(tmp_path):
    # The file is named like a standard module; loading it must not replace sys.modules["json"]
    # (which minigraph and everything else use afterwards).
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "json.py").write_text(
        textwrap.dedent(
            """
            import sys
            import minigraph as mg

            mg.register_op(mg.OpDef("CliJsonNamedOp", outputs=["y: int32"]))
            print("module name:", __name__, file=sys.stderr)
            """
        )
    )
    probe = textwrap.dedent(
        f"""
        import json, sys
        from minigraph.__main__ import main
        status = main(["--no-entry-points", "--load", {str(lib / "json.py")!r}, "ops", "--names"])
        assert sys.modules["json"] is json, sys.modules["json"]
        print("json intact:", json.dumps({{"a": 1}}), "status", status)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert 'json intact: {"a": 1} status 0' in result.stdout
    assert "CliJsonNamedOp" in result.stdout
    assert "module name: _minigraph_load_json" in result.stderr


def test_load_errors_say_what_and_where(tmp_path):
    result = cli("--load", "no/such/file.py", "ops", cwd=tmp_path)
    assert result.returncode == 1
    assert "--load no/such/file.py: no such file (" in result.stderr
    assert str(tmp_path / "no" / "such" / "file.py") in result.stderr
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    result = cli("--load", "broken.py", "ops", cwd=tmp_path)
    assert result.returncode == 1
    assert "--load broken.py: RuntimeError: boom" in result.stderr
    assert "Traceback" not in result.stderr


# -- a local ops.py shadowing the op library -------------------------------------------------


@pytest.fixture
def shadowed(tmp_path):
    """A working directory with the user's own `ops.py`."""
    (tmp_path / "ops.py").write_text("def helper():\n    return 1\n")
    return tmp_path


def test_the_cli_reports_a_local_ops_module_shadowing_the_library(shadowed):
    result = cli("ops", "--names", cwd=shadowed)
    assert result.returncode == 0
    assert "GatherV2" not in result.stdout.split()
    message = result.stderr
    assert "op library 'ops'" in message
    assert f"'import ops' found {shadowed / 'ops.py'}, which shadows the installed " in message
    # The installed library: this checkout's, or another one's when the environment has that
    # one installed (the test must not depend on which).
    installed = message.split("which shadows the installed ", 1)[1].split(";", 1)[0]
    assert installed.endswith(os.path.join("ops", "__init__.py")) and os.path.isfile(installed)
    assert "Rename your local 'ops' file or folder, or run from another directory." in message


def test_load_ops_reports_the_shadowing_and_fails(shadowed):
    result = cli("--no-entry-points", "--load", "ops", "ops", cwd=shadowed)
    assert result.returncode == 1
    assert "--load ops: 'import ops' found" in result.stderr


def test_no_report_without_shadowing(tmp_path):
    result = cli("ops", "--names", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "GatherV2" in result.stdout.split()


def test_source_lines_are_found_by_file_location_not_module_name(shadowed):
    # The user's own ops.py is imported as `ops`; its frames (and the script's) are user code.
    (shadowed / "ops.py").write_text(
        textwrap.dedent(
            """
            import minigraph as mg

            def make(scope):
                return mg.Const(scope, [1, 2])  # line 5
            """
        )
    )
    (shadowed / "main.py").write_text(
        textwrap.dedent(
            """
            import minigraph as mg
            import ops

            scope = mg.Scope.new_root_scope()
            node = ops.make(scope)
            direct = mg.Const(scope, 3)  # line 7
            print(node.operation.source)
            print(direct.operation.source)
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "main.py"], cwd=shadowed, env=ENV, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.endswith("ops.py:5"), first
    assert second.endswith("main.py:7"), second


# -- describe --------------------------------------------------------------------------------


def test_describe_an_alias_says_what_it_aliases():
    result = cli("describe", "Gather")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Gather is an alias of GatherV2: its builder makes GatherV2 nodes."
    assert lines[1] == ""
    assert lines[2].startswith("GatherV2(params: Tparams, indices: Tindices, axis: Taxis)")
    assert "Kernels (devices: CPU, GPU):" in result.stdout


def test_unknown_names_suggest_aliases_too():
    result = cli("describe", "Gathr")
    assert result.returncode == 2
    assert "Did you mean: Gather" in result.stderr


# -- pipes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["ops"], ["describe", "GatherV2"], ["devices"]])
def test_a_closed_pipe_ends_the_command_quietly(args):
    # The reader is gone before the command writes anything, as with `| head -1` on a busy
    # machine: every write fails with EPIPE.
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "minigraph", *args],
            cwd=ROOT,
            env=ENV,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert result.stderr == ""
    assert result.returncode == 1


def test_head_sees_the_first_line():
    result = subprocess.run(
        f"{sys.executable} -m minigraph describe GatherV2 | head -1",
        shell=True,
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.startswith("GatherV2(params: Tparams")
    assert result.stdout.count("\n") == 1
    assert "BrokenPipeError" not in result.stderr and "Traceback" not in result.stderr
