"""The README's code runs and prints what the README says it prints.

Conventions for everyone writing README sections (this test enforces them):

1. Every ```python block is a complete script: it runs on its own, as `python your_script.py`
   in an empty temporary directory (so an error's "defined at your_script.py:LINE" is true), with
   this checkout's `minigraph` and `ops` importable. It must exit with status 0.
2. The output of a `print(...)` is written as a comment: at the end of the print's line, or,
   for long or multi-line output, on the comment lines right below a print that has no comment
   of its own (same indentation; a blank line ends them). Comparison ignores how whitespace is
   broken into lines and runs, so long outputs may be wrapped freely; `...` stands for any text
   (numpy's `array([...], ...)`, a path). A print without a comment is not checked.
3. A block whose output depends on the machine (GPUs, timings, paths) says so with a comment
   line `# output varies by machine`: it must still run, but its comments are not compared.
4. A ```text block right after a paragraph ending in "`minigraph ARGS` prints:" is that
   command's output (run as `python -m minigraph ARGS` from the repository root). Lines
   compare exactly (trailing blanks aside); `...` inside a line stands for any text, and a
   line that is only `...` for any number of lines.
5. In ```sh blocks, every line starting with `minigraph ` is run (from the repository root)
   and must exit with status 0; a trailing `# comment` is not part of the command.
6. The set-up commands (the first ```sh block) are not run here: `.ci/run` runs them on a
   clean machine, and a test below checks that it runs them verbatim.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
MACHINE_MARKER = "# output varies by machine"


def fenced_blocks(text: str) -> list[tuple[str, str, int, str]]:
    """(language, code, line number of the opening fence, text just before the fence)."""
    blocks = []
    pattern = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
    for m in pattern.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip().rsplit("\n\n", 1)[-1]
        blocks.append((m.group(1), m.group(2), line, before))
    return blocks


BLOCKS = fenced_blocks(README)
PYTHON = [(code, line) for lang, code, line, _ in BLOCKS if lang == "python"]
CLI_OUTPUTS = [
    (m.group(1), code, line)
    for lang, code, line, before in BLOCKS
    if lang == "text" and (m := re.search(r"`minigraph ([^`]+)` prints:\s*$", before))
]
CLI_LINES = [
    (cmd.split("#", 1)[0].strip(), line)
    for lang, code, line, _ in BLOCKS
    if lang == "sh"
    for cmd in code.splitlines()
    if cmd.startswith("minigraph ")
]


# -- the comment convention ------------------------------------------------------------------


def expectations(code: str) -> dict[int, str]:
    """{first line of a print statement: the output its comments announce}."""
    lines = code.splitlines()
    expected = {}
    for node in ast.walk(ast.parse(code)):
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print"):
            continue
        last = lines[node.end_lineno - 1]
        comment = _trailing_comment(last)
        if comment is not None:
            expected[node.lineno] = comment
            continue
        indent = lines[node.lineno - 1][: node.col_offset]
        parts = []
        for below in lines[node.end_lineno :]:
            if below.startswith(indent + "# "):
                parts.append(below[len(indent) + 2 :])
            else:
                break
        if parts:
            expected[node.lineno] = "\n".join(parts)
    return expected


def _trailing_comment(line: str) -> str | None:
    """The `# comment` ending a line of code (a '#' outside string literals), or None."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[i + 1 :].strip()
    return None


def matches(expected: str, actual: str) -> bool:
    """Whitespace-insensitive comparison where `...` in `expected` stands for any text."""

    def squash(text: str) -> str:
        return " ".join(text.split())

    parts = [re.escape(squash(p)) for p in squash(expected).split("...")]
    return re.fullmatch(r"\s*(.*?)\s*".join(parts), squash(actual), re.S) is not None


_RUNNER = """
import ast, builtins, json, runpy, sys
printed = {}
real_print = builtins.print

def recording_print(*args, sep=" ", end="\\n", file=None, flush=False):
    if file is None or file is sys.stdout:
        frame = sys._getframe(1)
        if frame.f_code.co_filename == "your_script.py":
            text = sep.join(str(a) for a in args)
            printed.setdefault(starts.get(frame.f_lineno, frame.f_lineno), []).append(text)
    real_print(*args, sep=sep, end=end, file=file, flush=flush)

# A print statement over several lines may report any of them: key by its first line.
starts = {}
for node in ast.walk(ast.parse(open("your_script.py", encoding="utf-8").read())):
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        for line in range(node.lineno, node.end_lineno + 1):
            starts.setdefault(line, node.lineno)
builtins.print = recording_print
try:
    runpy.run_path("your_script.py", run_name="__main__")
finally:
    with open("printed.json", "w") as f:
        json.dump(printed, f)
"""


def run_block(code: str, tmp_path: Path) -> dict[int, str]:
    """Runs a python block as your_script.py; returns {line: what its print statement printed}."""
    (tmp_path / "your_script.py").write_text(code, encoding="utf-8")
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", _RUNNER],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    printed = json.loads((tmp_path / "printed.json").read_text())
    return {int(k): "\n".join(v) for k, v in printed.items()}


# -- the README's python blocks --------------------------------------------------------------


def test_the_readme_has_code_to_check():
    assert len(PYTHON) >= 8
    assert sum(len(expectations(code)) for code, _ in PYTHON) >= 20
    assert CLI_OUTPUTS and CLI_LINES


@pytest.mark.parametrize("code, line", PYTHON, ids=[f"README.md:{line}" for _, line in PYTHON])
def test_python_block_prints_what_its_comments_say(code, line, tmp_path):
    if "from distributed import" in code:
        pytest.importorskip("distributed")  # the `distributed` extra (CI installs it)
    printed = run_block(code, tmp_path)
    if MACHINE_MARKER in code:
        return
    problems = []
    for at, expected in expectations(code).items():
        where = f"README.md:{line + at}"
        if at not in printed:
            problems.append(f"{where}: the print did not run (expected {expected!r})")
        elif not matches(expected, printed[at]):
            problems.append(
                f"{where}:\n  README says: {expected!r}\n  it printed:  {printed[at]!r}"
            )
    assert not problems, "\n".join(problems)


# -- the README's command-line samples -------------------------------------------------------


def cli(args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "minigraph", *shlex.split(args)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def lines_match(expected: list[str], actual: list[str]) -> bool:
    """`...` alone on a line matches any number of lines; inside a line, any text."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(lines_match(rest, actual[k:]) for k in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(p) for p in head.rstrip().split("..."))
    return re.fullmatch(pattern, actual[0].rstrip()) is not None and lines_match(rest, actual[1:])


@pytest.mark.parametrize(
    "args, sample, line", CLI_OUTPUTS, ids=[f"README.md:{line}" for _, _, line in CLI_OUTPUTS]
)
def test_cli_sample_output_is_true(args, sample, line):
    result = cli(args)
    assert result.returncode == 0, result.stderr
    expected = sample.rstrip("\n").splitlines()
    actual = result.stdout.rstrip("\n").splitlines()
    assert lines_match(expected, actual), (
        f"README.md:{line}: `minigraph {args}` prints\n{result.stdout}\nnot\n{sample}"
    )


@pytest.mark.parametrize("command, line", CLI_LINES, ids=[c for c, _ in CLI_LINES])
def test_cli_commands_in_the_readme_run(command, line):
    result = cli(command[len("minigraph ") :])
    assert result.returncode == 0, f"README.md:{line}: {command}\n{result.stderr}"
    assert result.stdout


# -- set-up ----------------------------------------------------------------------------------


def test_ci_runs_the_readme_set_up_commands_verbatim():
    first_sh = next(code for lang, code, _, _ in BLOCKS if lang == "sh")
    commands = [c for c in first_sh.splitlines() if c.strip()]
    assert commands[0].startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in commands:
        assert command in script, f".ci/run does not run the README's {command!r}"


# -- the test's own rules --------------------------------------------------------------------


def test_the_conventions_themselves():
    code = (
        "x = 1\n"
        "print(x)  # 1\n"
        "print('a # b')  # a # b\n"
        "if x:\n"
        "    print('long')\n"
        "    # first part\n"
        "    # second part\n"
        "print('unchecked')\n"
        "\n"
        "# a comment, not an expectation: a blank line separates it from the print\n"
        "print(2)\n"
        "# 2\n"
        "print(3)  # 3\n"
        "# an explanation of what comes next: the print above has its own comment\n"
        "print(\n"
        "    4\n"
        ")  # 4\n"
    )
    assert expectations(code) == {
        2: "1",
        3: "a # b",
        5: "first part\nsecond part",
        11: "2",
        13: "3",
        15: "4",
    }
    assert matches("first part second part", "first part\nsecond   part")
    assert matches("[array([4., 5., 6.], ...), None]", "[array([4., 5., 6.], dtype=float32), None]")
    assert not matches("[1 2]", "[1 3]")
    assert lines_match(["a", "...", "d"], ["a", "b", "c", "d"])
    assert lines_match(["a ... z"], ["a b c z"])
    assert not lines_match(["a", "d"], ["a", "b", "d"])
