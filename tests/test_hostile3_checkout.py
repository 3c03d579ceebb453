"""The command line run from a checkout while another copy of minigraph is installed (issue 24,
section 3: with the project installed editable from another checkout, about 22 tests failed on
the CLI's warning that a local `ops` shadows the installed one).

A checkout run from its own folder loads its own `minigraph` and its own `ops`, side by side:
they belong together, whichever copy the environment has installed, so the CLI says nothing.
A stray `ops` that does not sit beside the running minigraph is still reported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

from minigraph import libraries

ROOT = Path(__file__).resolve().parent.parent


def another_installed_copy(tmp_path: Path) -> Path:
    """A folder holding another copy's `minigraph` and `ops` packages (never imported: the
    checkout's come first), where `import ops` resolves once the working directory is left
    out, as the shadowing check looks."""
    other = tmp_path / "other-checkout"
    for package in ("minigraph", "ops"):
        (other / package).mkdir(parents=True)
        (other / package / "__init__.py").write_text("raise ImportError('the other copy')\n")
    return other


def cli(*args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "minigraph", *args],
        cwd=cwd, env=env, capture_output=True, text=True, encoding="utf-8", timeout=120,
    )  # fmt: skip


def test_a_checkout_run_with_another_copy_installed_warns_about_nothing(tmp_path):
    other = another_installed_copy(tmp_path)
    result = cli("ops", "--names", cwd=ROOT, pythonpath=other)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "GatherV2" in result.stdout.split()


def test_graph_commands_of_such_a_checkout_are_quiet_too(tmp_path):
    other = another_installed_copy(tmp_path)
    bad = tmp_path / "missing.pb"
    result = cli("run", str(bad), "--fetch", "y:0", cwd=ROOT, pythonpath=other)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"minigraph: NotFoundError: no such graph file: {str(bad)!r}"
    ]


def test_the_check_sees_a_library_beside_the_running_minigraph_as_its_own(monkeypatch, tmp_path):
    elsewhere = tmp_path / "site-packages"
    monkeypatch.setattr(
        libraries, "_installed_origin", lambda top: str(elsewhere / top / "__init__.py")
    )
    assert libraries.shadowing("ops") is None  # ops and minigraph both from this checkout
    stray = types.ModuleType("ops")
    stray.__file__ = str(tmp_path / "work" / "ops.py")
    monkeypatch.setitem(sys.modules, "ops", stray)
    message = libraries.shadowing("ops.gather_ops")
    assert message is not None
    assert f"'import ops' found {stray.__file__}, which shadows the installed " in message
