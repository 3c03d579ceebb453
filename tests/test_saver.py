"""`minigraph.train.Saver`: checkpoints round trip every dtype; restore checks names, dtypes and
shapes first (typed errors, nothing assigned); a corrupt or truncated file is a DataLossError,
never a crash or a wrong value; saving is atomic (an injected failure, or a process killed
mid-save, leaves the previous checkpoint readable)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest
from _gather_helpers import sample

import minigraph as mg
import ops  # noqa: F401 - the op library
from minigraph import Scope, Session, Variable
from minigraph.train import Saver, list_variables, load_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def root():
    return Scope.new_root_scope()


def _model(scope):
    return [
        Variable(scope, np.arange(6, dtype=np.float32).reshape(2, 3), name="w"),
        Variable(scope.new_sub_scope("layer"), np.array([1, -2], np.int64), name="b"),
        Variable(scope, [b"x", b"", b"\x00yz"], name="s"),
        Variable(scope, np.float64(2.5), name="scalar"),
        Variable(scope, np.zeros((0, 4), np.float16), name="empty"),
        Variable(scope, np.array([True, False]), name="flags"),
        Variable(scope, np.array([1 + 2j], np.complex64), name="c"),
        Variable(scope, sample(mg.bfloat16, (3,), seed=1), name="bf"),
    ]


def _init(sess, scope):
    sess.run(mg.global_variables_initializer(scope))


def test_round_trip_of_every_kind_of_value(root, tmp_path):
    variables = _model(root)
    saver = Saver()
    with Session(root) as sess:
        _init(sess, root)
        sess.run(variables[0].assign_add(np.ones((2, 3), np.float32)))
        saved = sess.run(variables)
        path = saver.save(sess, tmp_path / "model.ckpt")
    assert path == str(tmp_path / "model.ckpt")
    assert [n for n, _, _ in list_variables(path)] == [
        "w", "layer/b", "s", "scalar", "empty", "flags", "c", "bf",
    ]  # fmt: skip
    with Session(root) as fresh:  # a new session: uninitialized until restored
        saver.restore(fresh, path)
        restored = fresh.run(variables)
    for a, b in zip(restored, saved):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    loaded = load_checkpoint(path)
    assert not loaded["w"].flags.writeable
    np.testing.assert_array_equal(loaded["w"], saved[0])


def test_var_lists_and_names(root, tmp_path):
    a = Variable(root, [1.0], name="a")
    b = Variable(root, [2.0], name="b")
    with Session(root) as sess:
        _init(sess, root)
        only_a = Saver([a]).save(sess, tmp_path / "a")
        renamed = Saver({"first": a, "second": b}).save(sess, tmp_path / "renamed")
    assert [n for n, _, _ in list_variables(only_a)] == ["a"]
    assert [n for n, _, _ in list_variables(renamed)] == ["first", "second"]
    with Session(root) as sess:
        Saver({"second": a, "first": b}).restore(sess, renamed)
        assert sess.run([a, b]) == [[2.0], [1.0]]


@pytest.mark.parametrize(
    "var_list, message",
    [
        (["not a variable"], "var_list holds Variables; got str"),
        ("abc", "var_list is a list or dict of Variables; got str"),
        ({"": None}, "var_list holds Variables"),
    ],
)
def test_bad_var_lists(var_list, message):
    with pytest.raises(mg.InvalidArgumentError, match=message):
        Saver(var_list)


def test_two_variables_of_one_name_or_of_two_graphs_are_refused(root):
    a = Variable(root, 1.0, name="a")
    other = Variable(Scope.new_root_scope(), 1.0, name="b")
    with pytest.raises(mg.InvalidArgumentError, match="two variables named 'a'"):
        Saver([a, a])
    with pytest.raises(mg.InvalidArgumentError, match="several graphs"):
        Saver([a, other])


def test_global_step_names_the_file(root, tmp_path):
    Variable(root, 1.0, name="a")
    step = Variable(root, np.int64(7), name="global_step")
    with Session(root) as sess:
        _init(sess, root)
        saver = Saver()
        assert saver.save(sess, tmp_path / "m", global_step=3) == f"{tmp_path / 'm'}-3"
        assert saver.save(sess, tmp_path / "m", global_step=step) == f"{tmp_path / 'm'}-7"
        with pytest.raises(mg.InvalidArgumentError, match="global_step must be an integer"):
            saver.save(sess, tmp_path / "m", global_step=1.5)


def test_saving_an_uninitialized_variable_names_it(root, tmp_path):
    Variable(root, 1.0, name="never")
    with Session(root) as sess, pytest.raises(mg.FailedPreconditionError, match="never"):
        Saver().save(sess, tmp_path / "m")
    assert not os.listdir(tmp_path)


def test_save_path_errors(root, tmp_path):
    Variable(root, 1.0, name="a")
    with Session(root) as sess:
        _init(sess, root)
        with pytest.raises(mg.NotFoundError, match="no such directory"):
            Saver().save(sess, tmp_path / "missing" / "m")
        with pytest.raises(mg.InvalidArgumentError, match="is a directory"):
            Saver().save(sess, tmp_path)
        with pytest.raises(mg.InvalidArgumentError, match="a path is a str"):
            Saver().save(sess, 3)
        with pytest.raises(mg.InvalidArgumentError, match="takes a Session"):
            Saver().save("not a session", tmp_path / "m")


# -- restore's checks ----------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    scope = Scope.new_root_scope()
    Variable(scope, np.ones((2, 3), np.float32), name="w")
    Variable(scope, np.zeros(2, np.float32), name="b")
    with Session(scope) as sess:
        _init(sess, scope)
        return Saver().save(sess, tmp_path / "saved")


def _restore_into(path, *variables, allow_extra=False):
    scope = Scope.new_root_scope()
    made = [Variable(scope, value, name=name) for name, value in variables]
    with Session(scope) as sess:
        _init(sess, scope)
        try:
            Saver().restore(sess, path, allow_extra=allow_extra)
        finally:
            values = sess.run(made)
    return values


def test_restore_refuses_a_missing_variable(saved):
    with pytest.raises(mg.NotFoundError, match=r"Key v not found in checkpoint .*saved"):
        _restore_into(saved, ("w", np.zeros((2, 3), np.float32)), ("b", np.zeros(2, np.float32)),
                      ("v", [1.0]))  # fmt: skip


def test_restore_refuses_extra_variables_unless_allowed(saved):
    with pytest.raises(mg.InvalidArgumentError, match=r"holds variables this Saver does not "
                       r"restore: \['b'\]"):  # fmt: skip
        _restore_into(saved, ("w", np.zeros((2, 3), np.float32)))
    (w,) = _restore_into(saved, ("w", np.zeros((2, 3), np.float32)), allow_extra=True)
    assert (w == 1).all()


def test_restore_refuses_a_wrong_dtype_or_shape_and_assigns_nothing(saved):
    with pytest.raises(mg.InvalidArgumentError, match="variable 'b' is float64, but checkpoint "
                       ".* holds a float32 value for it"):  # fmt: skip
        _restore_into(saved, ("w", np.zeros((2, 3), np.float32)), ("b", np.zeros(2, np.float64)))
    with pytest.raises(mg.InvalidArgumentError, match=r"variable 'w' has shape \[3,2\], but "
                       r"checkpoint .* holds a value of shape \[2,3\]"):  # fmt: skip
        _restore_into(saved, ("w", np.zeros((3, 2), np.float32)), ("b", np.zeros(2, np.float32)))
    # Nothing was assigned: the checks come first.
    scope = Scope.new_root_scope()
    w = Variable(scope, np.full((2, 3), 5.0, np.float32), name="w")
    b = Variable(scope, np.zeros(2, np.float64), name="b")
    with Session(scope) as sess:
        _init(sess, scope)
        with pytest.raises(mg.InvalidArgumentError):
            Saver().restore(sess, saved)
        assert (sess.run(w) == 5).all()
        del b


def test_restore_into_a_partially_known_shape(saved):
    scope = Scope.new_root_scope()
    w = Variable(scope, np.zeros((1, 3), np.float32), shape=[None, 3], name="w")
    b = Variable(scope, np.zeros(2, np.float32), name="b")
    with Session(scope) as sess:
        Saver().restore(sess, saved)
        assert sess.run(w).shape == (2, 3) and sess.run(b).shape == (2,)


def test_restore_builds_its_nodes_once(saved):
    scope = Scope.new_root_scope()
    Variable(scope, np.zeros((2, 3), np.float32), name="w")
    Variable(scope, np.zeros(2, np.float32), name="b")
    saver = Saver()
    with Session(scope) as sess:
        saver.restore(sess, saved)
        count = len(scope.graph.operations)
        saver.restore(sess, saved)
        assert len(scope.graph.operations) == count
    names = [op.name for op in scope.graph.operations if op.name.startswith("save/")]
    assert "save/Placeholder" in names and "save/Assign" in names


def test_restore_of_a_missing_file(root, tmp_path):
    Variable(root, 1.0, name="a")
    with Session(root) as sess:
        with pytest.raises(mg.NotFoundError, match="no checkpoint at"):
            Saver().restore(sess, tmp_path / "nothing")
        with pytest.raises(mg.InvalidArgumentError, match="is a directory"):
            Saver().restore(sess, tmp_path)


def test_save_on_a_gpu_restore_on_the_cpu(tmp_path, sim_gpus):
    scope = Scope.new_root_scope()
    v = Variable(scope.with_device("/gpu:0"), np.arange(4.0), name="v")
    with Session(scope) as sess:
        _init(sess, scope)
        path = Saver().save(sess, tmp_path / "gpu")
    cpu_scope = Scope.new_root_scope()
    w = Variable(cpu_scope.with_device("/cpu:0"), np.zeros(4), name="v")
    with Session(cpu_scope) as sess:
        Saver().restore(sess, path)
        assert sess.run(w).tolist() == [0.0, 1.0, 2.0, 3.0]
    del v


# -- corrupt files ---------------------------------------------------------------------------------


def _rewrite(path, change):
    """Rewrites checkpoint `path` with `change(name, data) -> data` applied to each member."""
    with zipfile.ZipFile(path) as zf:
        members = [(info.filename, zf.read(info)) for info in zf.infolist()]
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members:
            data = change(name, data)
            if data is not None:
                zf.writestr(name, data)


def _index(change):
    def edit(name, data):
        if name != "index.json":
            return data
        header = json.loads(data)
        change(header)
        return json.dumps(header)

    return edit


CORRUPTIONS = [
    ("truncated", lambda p: open(p, "r+b").truncate(os.path.getsize(p) // 2),
     "corrupt or truncated"),
    ("empty file", lambda p: open(p, "wb").close(), "corrupt or truncated"),
    ("not a zip", lambda p: open(p, "wb").write(b"\x00" * 1000), "corrupt or truncated"),
    ("flipped byte", lambda p: _flip(p), "corrupt or truncated"),
    ("no index", lambda p: _rewrite(p, lambda n, d: None if n == "index.json" else d),
     "has no index.json"),
    ("index not json", lambda p: _rewrite(p, lambda n, d: b"{" if n == "index.json" else d),
     "index is not JSON"),
    ("another format", lambda p: _rewrite(p, _index(lambda h: h.update(format="x"))),
     "not a minigraph-checkpoint file"),
    ("newer version", lambda p: _rewrite(p, _index(lambda h: h.update(version=99))),
     "format version 99"),
    ("bad entry", lambda p: _rewrite(p, _index(lambda h: h["variables"][0].update(shape=[-1]))),
     "a malformed index entry"),
    ("size mismatch", lambda p: _rewrite(p, _index(lambda h: h["variables"][0].update(
        shape=[5, 3]))), "has 24 bytes; a float32 value of shape \\[5, 3\\] has 60"),
    ("entry missing", lambda p: _rewrite(p, lambda n, d: None if n == "0.bin" else d),
     "the entry '0.bin' of 'w' is missing"),
    ("unknown dtype", lambda p: _rewrite(p, _index(lambda h: h["variables"][0].update(
        dtype="float128"))), "unknown dtype 'float128'"),
    ("string lengths", lambda p: _rewrite(p, lambda n, d: d[:-1] if n == "2.bin" else d),
     "string lengths do not add up|index says"),
]  # fmt: skip


def _flip(path):
    """Flips one byte inside the first entry's data (its local header read for the offset)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.infolist()[0]
    data = bytearray(open(path, "rb").read())
    at = info.header_offset
    name_len, extra_len = (
        int.from_bytes(data[at + 26 : at + 28], "little"),
        int.from_bytes(data[at + 28 : at + 30], "little"),
    )
    data[at + 30 + name_len + extra_len] ^= 0xFF
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("corrupt, message", [c[1:] for c in CORRUPTIONS],
                         ids=[c[0] for c in CORRUPTIONS])  # fmt: skip
def test_corrupt_checkpoints_are_data_loss_errors(tmp_path, corrupt, message):
    scope = Scope.new_root_scope()
    w = Variable(scope, np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    Variable(scope, np.zeros(2, np.float32), name="b")
    Variable(scope, [b"ab", b"c"], name="s")
    with Session(scope) as sess:
        _init(sess, scope)
        path = Saver().save(sess, tmp_path / "c")
        corrupt(path)
        with pytest.raises(mg.DataLossError, match=message):
            Saver().restore(sess, path)
        assert sess.run(w)[1, 2] == 5.0  # nothing assigned
    with pytest.raises(mg.DataLossError):
        load_checkpoint(path)


# -- atomic saves --------------------------------------------------------------------------------


def test_a_failure_mid_save_leaves_the_previous_checkpoint(root, tmp_path, monkeypatch):
    import minigraph.train.saver as saver_module

    a = Variable(root, np.zeros(1000), name="a")
    Variable(root, np.zeros(10), name="b")
    with Session(root) as sess:
        _init(sess, root)
        path = Saver().save(sess, tmp_path / "m")
        sess.run(a.assign_add(np.ones(1000)))
        real = saver_module._payload
        calls = []

        def failing(dtype, value):
            calls.append(1)
            if len(calls) == 2:
                raise OSError(28, "No space left on device")
            return real(dtype, value)

        monkeypatch.setattr(saver_module, "_payload", failing)
        with pytest.raises(mg.FailedPreconditionError, match="No space left on device"):
            Saver().save(sess, path)
    assert os.listdir(tmp_path) == ["m"]  # the temporary file is gone
    assert (load_checkpoint(path)["a"] == 0).all()  # the previous checkpoint, whole


_SAVE_FOREVER = """
import sys
import numpy as np
import minigraph as mg, ops
scope = mg.Scope.new_root_scope()
k = mg.Placeholder(scope, mg.float64, [])
v = mg.Variable(scope, np.zeros(1_500_000), name="v")
fill = v.assign(ops.Fill(scope, [1_500_000], k), read_value=False)
saver = mg.train.Saver()
with mg.Session(scope) as sess:
    for step in range(1_000_000):
        sess.run(fill, {k: float(step)})
        saver.save(sess, sys.argv[1])
        print(step, flush=True)
"""


def test_a_process_killed_mid_save_leaves_a_readable_checkpoint(tmp_path):
    path = str(tmp_path / "live.ckpt")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rng = np.random.default_rng(0)
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", _SAVE_FOREVER, path], stdout=subprocess.PIPE, env=env
        )
        try:
            assert proc.stdout.readline()  # one save done
            time.sleep(rng.uniform(0.0, 0.3))  # then kill it wherever it is
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            proc.stdout.close()
        value = load_checkpoint(path)["v"]  # readable, whole, one save's values
        assert value.shape == (1_500_000,) and (value == value[0]).all()
