"""Frozen TensorFlow 2.21 models (tests/data, written by tests/data/make_tf_graphs.py from TF 1.x
graph code: variables frozen into Consts) run through `import_graph_def` + `Session.run` and
through `minigraph run`, giving TensorFlow's recorded outputs: an MLP classifier, an embedding
classifier (TF's own sharded embedding_lookup, "mod" and "div") and an attention-style block.
No TensorFlow needed here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
import ops  # noqa: F401 - registers the op library
from minigraph import graph_def as gd_module
from minigraph.__main__ import main

DATA = Path(__file__).resolve().parent / "data"
MODELS = ["mlp_classifier", "embedding_classifier", "attention_block"]

# What each file must hold (what TF really writes for such models), so that a regenerated file
# cannot quietly lose the ops these tests are about.
EXPECTED_OPS = {
    "mlp_classifier": {"MatMul", "BiasAdd", "Relu", "Softmax", "ArgMax", "Shape",
                       "StridedSlice", "Pack", "Reshape", "Identity"},
    "embedding_classifier": {"DynamicPartition", "GatherV2", "ParallelDynamicStitch", "Mean",
                             "MatMul", "BiasAdd", "Relu", "Softmax", "FloorMod", "FloorDiv"},
    "attention_block": {"GatherNd", "Transpose", "BatchMatMulV2", "Softmax", "Reshape",
                        "StridedSlice", "ConcatV2", "Tile", "OneHot", "Pack", "ExpandDims"},
}  # fmt: skip


def recorded(name: str) -> tuple[dict, list[str], list[str], list[np.ndarray]]:
    with np.load(DATA / f"{name}.npz", allow_pickle=False) as data:
        feeds = {n.decode(): data[f"feed_{i}"] for i, n in enumerate(data["feed_names"])}
        fetches = [n.decode() for n in data["fetch_names"]]
        dtypes = [n.decode() for n in data["fetch_dtypes"]]
        values = [data[f"fetch_{i}"] for i in range(len(fetches))]
    return feeds, fetches, dtypes, values


def assert_tf_value(name: str, got: np.ndarray, dtype: str, want: np.ndarray) -> None:
    assert mg.as_dtype(got.dtype).name == dtype, name
    assert got.shape == want.shape, (name, got.shape, want.shape)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("model", MODELS)
def test_the_files_are_small_tf_graphs_of_the_expected_ops(model):
    data = (DATA / f"{model}.pb").read_bytes()
    assert len(data) < 100_000 and (DATA / f"{model}.npz").stat().st_size < 100_000
    graph_def = gd_module.parse_graph_def(data)
    assert graph_def.versions.producer >= 2474  # TF 2.21's graph version
    ops_used = Counter(node.op for node in graph_def.node)
    assert EXPECTED_OPS[model] <= set(ops_used), EXPECTED_OPS[model] - set(ops_used)
    assert not {"VarHandleOp", "ReadVariableOp", "VariableV2"} & set(ops_used)  # frozen
    # Every field TF wrote is declared in graph.proto (re-serializing gives TF's bytes back).
    assert graph_def.SerializeToString(deterministic=True) == data


@pytest.mark.parametrize("model", MODELS)
def test_import_graph_def_and_session_give_tfs_outputs(model):
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, mg.read_graph(DATA / f"{model}.pb"), name="")
    feeds, fetches, dtypes, values = recorded(model)
    with mg.Session(scope) as sess:
        got = sess.run(fetches, feeds)
        again = sess.run(fetches, feeds)  # pooled memory reused: the same values
    assert len(got) == len(values) >= 4
    for name, dtype, want, value, value2 in zip(fetches, dtypes, values, got, again):
        assert_tf_value(name, value, dtype, want)
        np.testing.assert_array_equal(value, value2, err_msg=name)


@pytest.mark.parametrize("model", MODELS)
def test_under_a_name_scope_and_with_checked_kernels(model):
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, mg.read_graph(DATA / f"{model}.pb"), name="model")
    feeds, fetches, dtypes, values = recorded(model)
    config = mg.SessionConfig(check_kernel_outputs=True)  # every kernel's output checked
    with mg.Session(scope, config) as sess:
        got = sess.run([f"model/{f}" for f in fetches], {f"model/{k}": v for k, v in feeds.items()})
    for name, dtype, want, value in zip(fetches, dtypes, values, got):
        assert_tf_value(name, value, dtype, want)


@pytest.mark.parametrize("model", MODELS)
def test_minigraph_run_gives_tfs_outputs(model, tmp_path, capsys):
    feeds, fetches, dtypes, values = recorded(model)
    args = ["run", str(DATA / f"{model}.pb"), "--out", str(tmp_path / "out")]
    for i, (name, value) in enumerate(feeds.items()):
        path = tmp_path / f"feed_{i}.npy"
        np.save(path, value, allow_pickle=False)
        args += ["--feed", f"{name}={path}"]
    for name in fetches:
        args += ["--fetch", name]
    status = main(args)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    for name, dtype, want in zip(fetches, dtypes, values):
        path = tmp_path / "out" / (name.replace("/", "_").replace(":", "_") + ".npy")
        assert f"{name} -> {path}" in captured.out
        assert_tf_value(name, np.load(path, allow_pickle=False), dtype, want)


def test_minigraph_run_prints_the_mlps_predictions(capsys):
    feeds, fetches, _, values = recorded("mlp_classifier")
    features = feeds["features:0"][:2]
    literal = repr(features.tolist())
    status = main(["run", str(DATA / "mlp_classifier.pb"), "--feed", f"features:0={literal}",
                   "--fetch", "predictions:0"])  # fmt: skip
    captured = capsys.readouterr()
    assert status == 0, captured.err
    predictions = values[fetches.index("predictions:0")][:2]
    assert captured.out.startswith("predictions:0 (int64 [2]):\n")
    assert captured.out.split(":\n", 1)[1].strip() == repr(predictions.tolist())


def test_the_embedding_models_agree_across_strategies():
    # The "mod" and "div" shards hold the same table: the looked-up rows are equal.
    scope = mg.Scope.new_root_scope()
    mg.import_graph_def(scope, mg.read_graph(DATA / "embedding_classifier.pb"), name="")
    feeds, _, _, _ = recorded("embedding_classifier")
    mod_rows, div_rows = mg.Session(scope).run(["mod/rows:0", "div/rows:0"], feeds)
    assert mod_rows.shape == feeds["ids:0"].shape + (8,)
    np.testing.assert_array_equal(mod_rows, div_rows)
