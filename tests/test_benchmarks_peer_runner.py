"""The benchmarks' peer runner: a worker process that times a peer's jobs itself and answers in
JSON (benchmarks/_peer_runner.py, benchmarks/_peer_worker.py), and the timing helpers' support
for such self-timed jobs. Nothing here asserts on how fast anything is.

Runs the worker under this interpreter with its `noop` job (no peer needed); the TensorFlow jobs
run where this interpreter has TensorFlow (`/work/tfvenv/bin/python -m pytest ...`).
"""

import importlib.util
import os
import sys
import tempfile

import numpy as np
import pytest

from benchmarks import _peer_runner, _timing
from benchmarks._peer_runner import PeerError, PeerProcess, Remote, find_tf_python, tf_worker


@pytest.fixture
def worker():
    with PeerProcess(sys.executable) as peer:
        yield peer


def test_hello_names_the_interpreter(worker):
    assert worker.info["python"] == sys.version.split()[0]
    assert worker.info["numpy"] == np.__version__
    assert "tensorflow" not in worker.info  # nothing loaded unless asked


def test_noop_job_is_timed_in_the_worker(worker):
    remotes = worker.build("noop")
    assert set(remotes) == {"run"}
    run = remotes["run"]
    assert isinstance(run, Remote) and isinstance(run, _timing.SelfTimed)
    n = run.calibrate(0.002)
    assert isinstance(n, int) and n >= 1
    seconds = run.measure(n)
    assert isinstance(seconds, float) and seconds >= 0
    assert run.measure(1, collect=True) >= 0


def test_handles_are_distinct_and_dropped(worker):
    a = worker.build("noop")["run"]
    b = worker.build("noop")["run"]
    assert a.handle != b.handle
    worker.drop([a])
    with pytest.raises(PeerError, match="KeyError"):
        a.measure(1)
    assert b.measure(1) >= 0  # the other one stays
    worker.drop({"run": b})


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p: p.build("no_such_job"), "unknown job 'no_such_job'; jobs: noop"),
        (lambda p: p.request("no_such_op"), "unknown request 'no_such_op'"),
        (lambda p: p.build("noop", bogus=1), "TypeError"),
        (lambda p: p.build("noop")["run"].result(), "the job returned no array"),
    ],
)
def test_errors_in_the_worker_come_back_as_peer_errors(worker, call, message):
    with pytest.raises(PeerError, match=message):
        call(worker)
    assert worker.build("noop")["run"].measure(1) >= 0  # the worker goes on


def test_a_dead_worker_is_a_peer_error_and_close_is_idempotent():
    peer = PeerProcess(sys.executable)
    peer._proc.kill()
    peer._proc.wait()
    with pytest.raises(PeerError, match="exited"):
        peer.build("noop")
    peer.close()
    peer.close()


def test_a_missing_interpreter_is_a_peer_error():
    with pytest.raises(PeerError, match="cannot start"):
        PeerProcess(os.path.join(tempfile.gettempdir(), "no-such-python-here"))


def test_self_timed_jobs_are_sampled_in_the_interleaved_rounds(worker):
    run = worker.build("noop")["run"]
    calls = []
    s = _timing.interleaved({"local": lambda: calls.append(1), "peer": run}, repeats=3)
    assert len(s["local"]) == len(s["peer"]) == 3 and len(calls) == 4  # warmup + 3
    loops = _timing.interleaved_loops(
        {"local": lambda n: [None for _ in range(n)], "peer": run}, repeats=2, target_s=0.001
    )
    assert len(loops["peer"]) == 2 and all(t >= 0 for t in loops["peer"])


def test_settle_sleeps_only_between_groups(monkeypatch):
    slept = []
    monkeypatch.setattr(_timing.time, "sleep", slept.append)
    fns = {"a 1": lambda: None, "a 2": lambda: None, "b 1": lambda: None}
    _timing.interleaved(fns, repeats=1, warmup=0, settle_s=0.25, group=lambda n: n[0])
    assert slept == [0.25]  # a 1, a 2, then b 1: one change of group
    slept.clear()
    _timing.interleaved(fns, repeats=2, warmup=0)
    assert slept == []  # no settle asked


def test_find_tf_python_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(_peer_runner.TF_PYTHON_ENV, sys.executable)
    assert find_tf_python() == (sys.executable, f"{_peer_runner.TF_PYTHON_ENV}={sys.executable}")
    missing = str(tmp_path / "python")
    monkeypatch.setenv(_peer_runner.TF_PYTHON_ENV, missing)
    path, why = find_tf_python()
    assert path is None and "is not an executable file" in why


def test_without_a_tf_python_the_runner_says_how_to_get_one(monkeypatch):
    monkeypatch.delenv(_peer_runner.TF_PYTHON_ENV, raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    peer, why = tf_worker()
    assert peer is None
    assert f"{_peer_runner.TF_PYTHON_ENV} is not set" in why
    assert "pip install tensorflow-cpu==2.21" in why


def test_a_python_without_tensorflow_is_refused_with_the_hint(monkeypatch):
    if importlib.util.find_spec("tensorflow") is not None:
        pytest.skip("this interpreter has TensorFlow")
    monkeypatch.setenv(_peer_runner.TF_PYTHON_ENV, sys.executable)
    peer, why = tf_worker()
    assert peer is None
    assert "cannot run TensorFlow" in why and "ModuleNotFoundError" in why
    assert _peer_runner.TF_HINT in why


def test_footprint_runs_a_job_in_a_fresh_worker():
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc/self/clear_refs")
    with PeerProcess(sys.executable) as fresh:
        mib = fresh.footprint("noop", runs=2)
    assert isinstance(mib, float) and mib >= 0


# -- TensorFlow's jobs, where this interpreter has TensorFlow -----------------------------------


@pytest.fixture(scope="module")
def tf_peer():
    pytest.importorskip("tensorflow")
    with PeerProcess(sys.executable, load="tensorflow") as peer:
        yield peer


def test_tf_mlp_job_computes_the_model(tf_peer, tmp_path):
    from benchmarks.ops import _mlp_numpy, mlp_arrays

    arrays = mlp_arrays()
    path = str(tmp_path / "mlp.npz")
    np.savez(path, **arrays)
    run = tf_peer.build("tf1_mlp", path=path, intra=2, inter=1)["run"]
    np.testing.assert_allclose(run.result(), _mlp_numpy(arrays)(), rtol=1e-5, atol=1e-6)
    assert run.measure(3) > 0


def test_tf_executor_and_gather_jobs(tf_peer):
    remotes = tf_peer.build("tf1_executor", chain=3, wide=2)
    assert set(remotes) == {"single", "chain", "wide", "identity"}
    tiny = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(remotes["chain"].result(), tiny[::-1])  # three reversals
    np.testing.assert_array_equal(remotes["identity"].result(), tiny)
    params = {"shape": [50, 3], "dtype": "float32"}
    indices = {"shape": [7], "high": 50, "dtype": "int64"}
    gather = tf_peer.build("tf_gather", params=params, indices=indices)["run"]
    assert gather.result().shape == (7, 3)
    nd = {"shape": [7, 2], "high": [5, 10], "dtype": "int64"}
    gather_nd = tf_peer.build("tf_gather_nd", params={"shape": [5, 10, 3]}, indices=nd)["run"]
    assert gather_nd.result().shape == (7, 3)
    tf_peer.drop(remotes)


def test_tf_embedding_train_job_is_the_training_benchmarks_model(tf_peer, tmp_path, cpu_only):
    from benchmarks.training import build_step, model_arrays

    arrays = model_arrays(500, seed=2)  # 2048 ids over 500 rows: repeats to deduplicate
    path = str(tmp_path / "model.npz")
    np.savez(path, **arrays)
    remotes = tf_peer.build("tf1_embedding_train", path=path, intra=2, inter=1)
    assert set(remotes) == {"step", "step_loss"}
    tf_losses = [float(remotes["step_loss"].result()) for _ in range(3)]
    step = build_step(arrays)
    try:
        mine = [step.step_loss() for _ in range(3)]
    finally:
        step.close()
    np.testing.assert_allclose(mine, tf_losses, rtol=1e-5)  # the same steps, TF 1.x Adagrad
    assert tf_losses[2] < tf_losses[0]
    assert remotes["step"].measure(2) > 0
    tf_peer.drop(remotes)


def test_tf_mlp_grad_job_computes_both_weight_gradients(tf_peer, tmp_path):
    from benchmarks.sparse_gradients import _numpy_mlp_grads, mlp_grad_arrays

    arrays = mlp_grad_arrays()
    path = str(tmp_path / "mlp.npz")
    np.savez(path, **arrays)
    remotes = tf_peer.build("tf1_mlp_grad", path=path, intra=2, inter=1)
    assert set(remotes) == {"run", "flat"}
    np.testing.assert_allclose(
        remotes["flat"].result(), _numpy_mlp_grads(arrays), rtol=1e-4, atol=1e-6
    )
    assert remotes["run"].measure(3) > 0
    tf_peer.drop(remotes)
