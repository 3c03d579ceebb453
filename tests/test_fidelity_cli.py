"""What a new user trips over (issue 24, section 2): `--load` after the command, malformed
`--feed` values, every missing feed named at once, the distributed example's `--help`, a
builder called without its scope, and the CI script's skip report."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
from minigraph.__main__ import main
from ops import GatherNd, gather

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
ENV = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- --load after the command --------------------------------------------------------------------

LIBRARY = """
import numpy as np
import minigraph as mg

mg.register_op(mg.OpDef(
    "FidelityTwice", inputs=["x: T"], outputs=["y: T"], attrs=["T: {float32}"],
    shape_fn=lambda ctx: ctx.input_shapes[0],
))
mg.register_kernel("FidelityTwice", "CPU", lambda ctx, x, **_: x * np.float32(2))
"""

GRAPH = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "FidelityTwice" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
"""


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{graph}", "--load", "{lib}", "--feed", "x:0=[1, 2]", "--fetch", "y:0"],
        ["run", "{graph}", "--feed", "x:0=[1, 2]", "--load", "{lib}", "--fetch", "y:0"],
        ["--load", "{lib}", "run", "{graph}", "--feed", "x:0=[1, 2]", "--fetch", "y:0"],
        ["describe", "FidelityTwice", "--load", "{lib}"],
        ["show", "{graph}", "--load", "{lib}"],
    ],
    ids=["after the file", "between options", "before the command", "describe", "show"],
)
def test_load_is_accepted_before_and_after_the_command(tmp_path, args):
    (tmp_path / "lib.py").write_text(LIBRARY)
    (tmp_path / "g.pbtxt").write_text(GRAPH)
    argv = [a.format(graph=tmp_path / "g.pbtxt", lib=tmp_path / "lib.py") for a in args]
    result = subprocess.run(
        [sys.executable, "-m", "minigraph", *argv],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    if args[0] == "describe":
        assert result.stdout.startswith("FidelityTwice(x: T) -> y: T")
    elif args[0] == "show":
        assert "note: not importable" not in result.stdout and "FidelityTwice  1" in result.stdout
    else:
        assert "y:0 (float32 [2]):\n[2., 4.]" in result.stdout


def test_load_given_twice_loads_both_in_order(tmp_path, capsys):
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text("import builtins\nbuiltins._fidelity_order = ['first']\n")
    second.write_text("import builtins\nbuiltins._fidelity_order.append('second')\n")
    status, _, err = cli(capsys, "--load", str(first), "devices", "--load", str(second))
    assert status == 0, err
    import builtins

    assert builtins._fidelity_order == ["first", "second"]  # type: ignore[attr-defined]
    del builtins._fidelity_order  # type: ignore[attr-defined]


# -- malformed --feed values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        ("[1, x]", "'x' is a name, not a value (a string needs quotes: \"x\")"),
        ("abc", "'abc' is a name, not a value"),
        ("[1, f(2)]", "'f(2)' is not a literal (a Call expression)"),
        ("[[1, 2], [3, 4]", "a syntax error at column 1: '[' was never closed"),
        ("2**3", "'2**3' is not a literal (a BinOp expression)"),
        ("[1, -y]", "'y' is a name, not a value"),
    ],
)
def test_a_malformed_feed_says_what_is_wrong(capsys, value, text):
    status, _, err = cli(capsys, "run", str(DATA / "gather_basic.pb"), "--feed", f"x:0={value}")
    line = one_error_line(err)
    assert status == 1
    assert "<ast." not in line and "object at 0x" not in line
    assert line.startswith(
        f"minigraph: --feed x:0: {value!r} is neither a .npy file nor a Python literal ({text}"
    ), line


# -- every missing feed in one error -------------------------------------------------------------


def test_a_run_names_every_missing_placeholder_at_once():
    root = mg.Scope.new_root_scope()
    x = mg.Placeholder(root.with_op_name("x"), mg.float32, shape=[None, 3])
    k = mg.Placeholder(root.with_op_name("k"), mg.int64)
    n = mg.Placeholder(root.with_op_name("n"), mg.int32, shape=[])
    out = [gather(root, x, k), mg.Identity(root, n)]
    with mg.Session(root) as sess:
        with pytest.raises(mg.InvalidArgumentError) as error:
            sess.run(out)
        message = error.value.message
        assert message.startswith(
            "You must feed a value for placeholder tensor 'x' with dtype float32 and shape [?,3] "
            "(defined at "
        )
        assert "; also not fed: 'k' with dtype int64 (defined at " in message
        assert ", 'n' with dtype int32 and shape [] (defined at " in message
        assert error.value.node_name == "x"
        # One missing: TF's message alone.
        with pytest.raises(mg.InvalidArgumentError) as error:
            sess.run(out, {x: np.zeros((1, 3)), k: [0]})
        assert "also not fed" not in error.value.message
        assert error.value.message.startswith("You must feed a value for placeholder tensor 'n'")


def test_the_cli_names_every_missing_feed(capsys):
    status, _, err = cli(capsys, "run", str(DATA / "gather_basic.pb"))
    line = one_error_line(err)
    assert status == 1
    assert line.startswith("minigraph: InvalidArgumentError: You must feed a value for ")
    for name in ("'x'", "'k'", "'anything'"):
        assert name in line


# -- the distributed example's --help ----------------------------------------------------------


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_distributed_example_explains_itself(flag):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "distributed_embedding.py"), flag],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: distributed_embedding.py [-h] [address]")
    assert "a Dask scheduler's address" in result.stdout
    assert "port" not in result.stderr


def test_the_distributed_example_refuses_unknown_options():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "distributed_embedding.py"), "--nonsense"],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "unrecognized arguments: --nonsense" in result.stderr


# -- a builder called the TF Python way ----------------------------------------------------------


def test_a_builder_without_its_scope_says_it_needs_one():
    with pytest.raises(mg.InvalidArgumentError) as error:
        GatherNd([[1, 2]], [[0]])
    assert "the first argument must be a Scope" in error.value.message
    assert "missing input" not in error.value.message


# -- CI reports why tests skip ---------------------------------------------------------------------


def test_ci_runs_the_readme_test_command_with_the_skip_report():
    # The README's `pytest`, verbatim, with -rs from PYTEST_ADDOPTS for every pytest run.
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    runs = [i for i, line in enumerate(lines) if re.search(r"\bpytest$", line)]
    assert lines[runs[0]] == "pytest"  # the first run is the README's command itself
    assert "MINIGRAPH_TEST_SIMULATED_GPUS=2 pytest" in [lines[i] for i in runs]
    assert lines[runs[0] - 1] == "export PYTEST_ADDOPTS=-rs"


def test_fresh_interpreter_sees_gathernd_scope_message():
    # The same in a new process, where only the builder's own check can answer.
    code = textwrap.dedent(
        """
        import minigraph as mg
        from ops import GatherNd
        try:
            GatherNd([[1, 2]], [[0]])
        except mg.InvalidArgumentError as e:
            print(e.message)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=ENV,
        timeout=120,
    )  # fmt: skip
    assert result.stdout.startswith("GatherNd: the first argument must be a Scope"), result
