"""The command line, as a subprocess: bad files and arguments, feeds, fetches, outputs, pipes.

A command is OK when it ends with a status and no traceback; a traceback on stderr is UNTYPED
(an exception the CLI did not turn into its one-line error), a signal a CRASH.
"""

# ruff: noqa: E501 - tables of hostile inputs and source snippets read best unwrapped

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

from tests.hostile._common import cases_from, must
from tests.hostile.battery import ROOT, Case, Crashed, Wrong

_FILES: dict[str, str] = {}


def _files() -> dict[str, str]:
    """Graph, feed and module files the commands use (made once per process)."""
    if _FILES:
        return _FILES
    import minigraph as mg  # noqa: PLC0415
    from ops import DynamicPartition, gather  # noqa: PLC0415

    d = tempfile.mkdtemp(prefix="minigraph-cli-")
    s = mg.Scope.new_root_scope()
    x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[None, 3])
    k = mg.Placeholder(s.with_op_name("k"), mg.int64, shape=[None])
    gather(s.with_op_name("rows"), x, [1, 0])
    gather(s.with_op_name("pick"), [10, 20, 30], k)
    DynamicPartition(s.with_op_name("parts"), [1.0, 2.0], [0, 1], num_partitions=2)
    mg.Const(s.with_op_name("strings"), ["a", "b"])
    files = {"dir": d, "good": mg.write_graph(s.graph, os.path.join(d, "good.pb")),
             "text": mg.write_graph(s.graph, os.path.join(d, "good.pbtxt"))}  # fmt: skip
    data = open(files["good"], "rb").read()
    for name, content in {
        "garbage.pb": os.urandom(2000),
        "empty.pb": b"",
        "truncated.pb": data[: len(data) // 2],
        "unknown_op.pbtxt": b'node { name: "y" op: "Frob" }',
        "cycle.pbtxt": b'node { name: "a" op: "Identity" input: "b" attr { key: "T" value { type:'
        b' DT_FLOAT } } } node { name: "b" op: "Identity" input: "a" attr { key: "T" value { '
        b"type: DT_FLOAT } } }",
        "huge_partitions.pbtxt": b'node { name: "p" op: "Placeholder" attr { key: "dtype" value '
        b'{ type: DT_FLOAT } } } node { name: "i" op: "Placeholder" attr { key: "dtype" value { '
        b'type: DT_INT32 } } } node { name: "d" op: "DynamicPartition" input: "p" input: "i" '
        b'attr { key: "num_partitions" value { i: 1000000000 } } attr { key: "T" value { type: '
        b"DT_FLOAT } } }",
        "no_outputs.pbtxt": b'node { name: "n" op: "NoOp" }',
        "unicode_é.pb": data,
        "raise_exit.py": b"raise SystemExit(3)\n",
        "raise_kbd.py": b"raise KeyboardInterrupt\n",
        "syntax.py": b"def (:\n",
        "nul.py": b"x = 1\x00\n",
        "json.py": b"import minigraph\n",
        "bad_register.py": b"import minigraph\nminigraph.register_kernel('GatherV2', 'CPU', 5)\n",
        "ops.py": b"# a user's own ops module\n",
    }.items():
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(content)
        files[name] = path
    np.save(os.path.join(d, "x.npy"), np.ones((2, 3), np.float32))
    np.save(os.path.join(d, "x64.npy"), np.ones((2, 3), np.float64))
    np.save(os.path.join(d, "xint.npy"), np.ones((2, 3), np.int64))
    np.save(os.path.join(d, "obj.npy"), np.array([object()]), allow_pickle=True)
    np.save(os.path.join(d, "be.npy"), np.ones((2, 3), ">f4"))
    with open(os.path.join(d, "trunc.npy"), "wb") as f:
        f.write(open(os.path.join(d, "x.npy"), "rb").read()[:40])
    for name in ("x.npy", "x64.npy", "xint.npy", "obj.npy", "be.npy", "trunc.npy"):
        files[name] = os.path.join(d, name)
    os.makedirs(os.path.join(d, "out_is_file"), exist_ok=True)
    open(os.path.join(d, "a_file"), "w").close()
    files["a_file"] = os.path.join(d, "a_file")
    _FILES.update(files)
    return _FILES


def _cli(
    args: list[str],
    shell: str | None = None,
    timeout: float = 60,
    cwd: str | None = None,
    stdin: Any = subprocess.DEVNULL,
) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    if shell is not None:
        cmd: Any = shell
    else:
        cmd = [sys.executable, "-m", "minigraph", *args]
    proc = subprocess.run(cmd, shell=shell is not None, capture_output=True, timeout=timeout,
                          cwd=cwd or ROOT, env=env, stdin=stdin)  # fmt: skip
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), \
        proc.stderr.decode("utf-8", "replace")  # fmt: skip


def _check(rc: int, out: str, err: str, want_rc: Any = None) -> None:
    if rc == -2 and err.rstrip().endswith("KeyboardInterrupt"):
        return  # a KeyboardInterrupt raised by the user's own file: Python's own exit
    if rc < 0:
        raise Crashed(f"killed by signal {-rc}: {err.strip()[-300:]}")
    if "Traceback (most recent call last)" in err:
        last = [line for line in err.strip().splitlines() if line.strip()][-1]
        raise _Untyped(f"traceback: {last}")
    if want_rc is not None and rc not in (want_rc if isinstance(want_rc, tuple) else (want_rc,)):
        raise Wrong(f"exit status {rc}, expected {want_rc}; stderr: {err.strip()[:200]}")
    if rc not in (0,) and err.strip():
        lines = [line for line in err.strip().splitlines() if line.strip()]
        errors = [
            line for line in lines if not line.startswith(("minigraph: warning", "minigraph: note"))
        ]
        must(
            len(errors) <= 3 or errors[0].startswith("usage:"),
            f"a failure printed {len(errors)} lines: {errors[:3]}",
        )


class _Untyped(Exception):
    """A traceback from the CLI: classified UNTYPED by the battery (not an OpError)."""


def cases() -> list[Case]:
    out: list[Case] = []
    A = "cli"

    def command(args):
        f = _files()
        argv, want = args
        argv = [a.format(**{k.replace(".", "_"): v for k, v in f.items()}) for a in argv]
        rc, o, e = _cli(argv)
        _check(rc, o, e, want)

    commands = [
        ([], 2), (["--help"], 0), (["--version"], 0), (["frob"], 2), (["ops"], 0),
        (["ops", "--names"], 0), (["describe"], 2), (["describe", "GatherV2"], 0),
        (["describe", "Gather"], 0), (["describe", "nope"], 2), (["describe", ""], 2),
        (["describe", "\n"], 2), (["describe", "A" * 10000], 2), (["devices"], 0),
        (["--load", "nonexistent.py", "ops"], 1), (["--load", "/etc/passwd", "ops"], 1),
        (["--load", "{dir}", "ops"], 1), (["--load", "json", "ops"], 0),
        (["--load", "os.path", "ops"], 0), (["--load", "...", "ops"], 1), (["--load", "", "ops"], 1),
        (["--load", "{raise_exit_py}", "ops"], (1, 3)), (["--load", "{raise_kbd_py}", "ops"], None),
        (["--load", "{syntax_py}", "ops"], 1), (["--load", "{nul_py}", "ops"], 1),
        (["--load", "{json_py}", "ops"], 0), (["--load", "{bad_register_py}", "ops"], 1),
        (["--load", "no_such_module_xyz", "ops"], 1), (["--no-entry-points", "ops"], 0),
        (["show"], 2), (["show", "{dir}/missing.pb"], 1), (["show", "{dir}"], 1),
        (["show", "{garbage_pb}"], 1), (["show", "{empty_pb}"], 0), (["show", "{truncated_pb}"], 1),
        (["show", "{text}"], 0), (["show", "{good}"], 0), (["show", "{unknown_op_pbtxt}"], 0),
        (["show", "{cycle_pbtxt}"], 0), (["show", "{huge_partitions_pbtxt}"], (0, 1)),
        (["show", "{unicode_é_pb}"], 0), (["show", "{good}", "--dot", "/proc/nope/x.dot"], 1),
        (["show", "{good}", "--dot", "{dir}"], 1), (["show", "{good}", "--svg", "{dir}/g.svg"],
                                                     (0, 1)),
        (["show", "{good}", "--dot", "{dir}/g.dot"], 0), (["show", "/dev/null"], 0),
        (["run", "{good}", "--fetch", "rows:0", "--feed", "x:0=[[1,2,3],[4,5,6]]"], 0),
        (["run", "{no_outputs_pbtxt}"], (0, 1)), (["run", "{good}", "--feed", "x"], 1),
        (["run", "{good}", "--feed", "=1", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0=", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0=[1,", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0=__import__('os').system('echo pwned')", "--fetch",
          "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0=1e999", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0=[[1,2],[3]]", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "nope:0=1", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0={obj_npy}", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0={x_npy}", "--fetch", "rows:0"], 0),
        (["run", "{good}", "--feed", "x:0={x64_npy}", "--fetch", "rows:0"], 0),
        (["run", "{good}", "--feed", "x:0={xint_npy}", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0={be_npy}", "--fetch", "rows:0"], (0, 1)),
        (["run", "{good}", "--feed", "x:0={trunc_npy}", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0={dir}/missing.npy", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--feed", "x:0={dir}", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--fetch", "nope"], 1), (["run", "{good}", "--fetch", "rows:9"], 1),
        (["run", "{good}", "--fetch", "rows:0"], 1),
        (["run", "{good}", "--fetch", "strings:0", "--out", "{dir}/out"], 0),
        (["run", "{good}", "--fetch", "strings:0", "--out", "{a_file}"], 1),
        (["run", "{good}", "--fetch", "strings:0", "--out", "/proc/nope"], 1),
        (["run", "{good}", "--fetch", "parts:0", "--fetch", "parts:1"], 0),
        (["run", "{good}", "--fetch", "parts"], 0),
        (["run", "{good}", "--fetch", "strings:0", "--device", "TPU"], 2),
        (["run", "{good}", "--fetch", "strings:0", "--device", "gpu"], 0),
        (["run", "{good}", "--feed", "k:0=[99]", "--fetch", "pick:0"], 1),
        (["run", "{good}", "--feed", "k:0=[2**70]", "--fetch", "pick:0"], 1),
        (["run", "{good}", "--feed", "k:0=[99999999999999999999999]", "--fetch", "pick:0"], 1),
        (["run", "{good}", "--feed", "k:0=['a']", "--fetch", "pick:0"], 1),
        (["run", "{good}", "--feed", "k:0=[" * 500 + "]" * 500, "--fetch", "pick:0"], 1),
        (["run", "{good}", "--feed", "k:0=[1]", "--feed", "k:0=[2]", "--fetch", "pick:0"], (0, 1)),
        (["run", "{huge_partitions_pbtxt}", "--fetch", "d:0"], 1),
        (["run", "{garbage_pb}"], 1), (["run", "{cycle_pbtxt}"], 1),
        (["convert", "{good}", "{dir}/no/such/dir.pbtxt"], 1), (["convert", "{good}", "{good}"], 0),
        (["convert", "{text}", "{dir}/back.pb"], 0), (["convert", "{garbage_pb}", "{dir}/g.pbtxt"], 1),
        (["convert", "{good}", "{dir}/x.pb", "--text", "--binary"], 2),
        (["convert", "{good}", "{dir}"], 1), (["convert", "{good}", "/proc/x.pb"], 1),
        (["convert", "{dir}/missing.pb", "{dir}/y.pb"], 1),
    ]  # fmt: skip
    out += cases_from(A, "command", commands, command, timeout=90)

    def pipe(shell):
        f = _files()
        py = f"{sys.executable} -m minigraph"
        cmd = shell.format(py=py, good=f["good"])
        rc, o, e = _cli([], shell=cmd)
        _check(rc, o, e)

    pipes = ["{py} ops | head -1", "{py} describe GatherV2 | head -c 10",
             "{py} show {good} | head -1", "{py} ops >&-", "{py} ops --names | head -0",
             "{py} run {good} --fetch strings:0 | head -1", "{py} devices | true",
             "{py} ops 2>&- | head -1"]  # fmt: skip
    out += cases_from(A, "pipe", pipes, pipe, timeout=90)

    def shadowing(which):
        f = _files()
        if which == "ops_py_in_cwd":
            rc, o, e = _cli(["ops"], cwd=f["dir"])
            _check(rc, o, e)
            must("shadows" in e, f"no warning about the local ops.py: {e[:200]}")
        elif which == "load_relative":
            rc, o, e = _cli(["--load", "examples/custom_op.py", "describe", "IndexAdd"],
                            cwd=ROOT)  # fmt: skip
            _check(rc, o, e, 0)

    out += cases_from(A, "shadowing", ["ops_py_in_cwd", "load_relative"], shadowing, timeout=90)
    return out


def simgpu_cases() -> list[Case]:
    return []
