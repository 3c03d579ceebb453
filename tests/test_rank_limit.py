"""Tensors above numpy's rank limit (64 in numpy 2) are refused with InvalidArgumentError, never
handed to numpy, which may crash on them (issue 10, section 1).

When ranks are known statically the node is refused when it is built (TensorShape refuses such
shapes, so every shape function, Placeholder shape and shape combination is covered); when they
are only known from fed values the kernel refuses before calling numpy, on every device and in
every execution mode. The run-time checks run in a subprocess: a regression would be a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigraph as mg
from minigraph import Scope, TensorShape
from minigraph.errors import InvalidArgumentError
from minigraph.shape_inference import unknown_shape, with_rank
from minigraph.tensor_shape import MAX_RANK, check_rank
from ops import GatherNd, GatherV2, gather

ROOT = Path(__file__).resolve().parent.parent
RANKS = [64, 65, 69, 70]


def test_the_limit_is_numpys():
    assert MAX_RANK == 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32
    np.empty((1,) * MAX_RANK)
    with pytest.raises(ValueError):
        np.empty((1,) * (MAX_RANK + 1))


@pytest.mark.parametrize("rank", RANKS)
def test_tensor_shapes_above_the_limit_are_refused(rank):
    ok = rank <= MAX_RANK
    for make in (
        lambda: TensorShape([1] * rank),
        lambda: TensorShape([None] * rank),
        lambda: unknown_shape(rank),
        lambda: with_rank(unknown_shape(), rank),
        lambda: TensorShape([None] * 40).concatenate([2] * (rank - 40)),
    ):
        if ok:
            assert make().rank == rank
        else:
            with pytest.raises(InvalidArgumentError, match=f"rank {rank}, above the limit of 64"):
                make()


@pytest.mark.parametrize("rank", RANKS)
def test_gathers_with_static_output_rank_above_the_limit_fail_at_construction(rank):
    s = Scope.new_root_scope()
    params = np.zeros((1,) * 40, np.float32)
    # Shapes of unknown dims but known rank are enough.
    fed_params = mg.Placeholder(s, mg.float32, shape=[None] * 40)
    fed_indices = mg.Placeholder(s, mg.int32, shape=[None] * (rank - 39))
    fed_axis = mg.Placeholder(s, mg.int32, shape=[])
    builds = [
        lambda: GatherV2(s, params, np.zeros((1,) * (rank - 39), np.int32), 0),
        lambda: gather(s, params, np.zeros((1,) * (rank - 39), np.int32)),
        lambda: GatherV2(s, fed_params, fed_indices, fed_axis),
        # GatherNd with index vectors of length 0: indices.shape[:-1] + params.shape.
        lambda: GatherNd(s, params, np.zeros((1,) * (rank - 40) + (0,), np.int32)),
    ]
    for build in builds:
        before = len(s.graph)
        if rank <= MAX_RANK:
            assert build().shape.rank == rank
        else:
            with pytest.raises(InvalidArgumentError, match=f"rank {rank}, above the limit"):
                build()
            assert len(s.graph) == before  # the literals' Consts were rolled back too


@pytest.mark.parametrize("rank", [65, 70])
def test_placeholder_shapes_above_the_limit_are_refused(rank):
    s = Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match=f"attr 'shape'.*rank {rank}, above the limit"):
        mg.Placeholder(s, mg.float32, shape=[None] * rank)
    assert len(s.graph) == 0


def test_a_shape_function_returning_too_many_dims_is_an_invalid_argument():
    s = Scope.new_root_scope()
    op = mg.register_op(
        mg.OpDef("RankLimitTestWide", outputs=["y: int32"], shape_fn=lambda ctx: [1] * 70)
    )
    with pytest.raises(InvalidArgumentError, match="output 'y' would have rank 70, above"):
        op(s)
    assert len(s.graph) == 0


def test_check_rank():
    check_rank(MAX_RANK)
    with pytest.raises(InvalidArgumentError, match="the output would have rank 65"):
        check_rank(65, "the output")


_RUNTIME_PROBE = r"""
import contextlib, json
import numpy as np
import minigraph as mg
from minigraph.testing import simulated_gpus
from ops import GatherNd, GatherV2

results = []
modes = {
    "generated": (mg.SessionConfig(), None),
    "traced": (mg.SessionConfig(), mg.RunOptions(trace=True)),
    "parallel": (mg.SessionConfig(inter_op_threads=3), None),
    "checked": (mg.SessionConfig(check_kernel_outputs=True), None),
}
for gpu in (False, True):
    for mode, (config, options) in modes.items():
        for op in ("GatherV2", "GatherNd"):
            for rank in (64, 65, 69, 70):
                s = mg.Scope.new_root_scope()
                device = s.with_device("/device:GPU:0" if gpu else "/device:CPU:0")
                p = mg.Placeholder(s, mg.float32)  # unknown rank: only the feeds know
                i = mg.Placeholder(s, mg.int32)
                if op == "GatherV2":
                    node = GatherV2(device, p, i, 0)
                    indices = np.zeros((1,) * (rank - 39), np.int32)
                else:
                    node = GatherNd(device, p, i)
                    indices = np.zeros((1,) * (rank - 40) + (0,), np.int32)
                feed = {p: np.zeros((1,) * 40, np.float32), i: indices}
                with simulated_gpus(1) if gpu else contextlib.nullcontext():
                    try:
                        with mg.Session(s, config) as session:
                            md = mg.RunMetadata()
                            out = session.run(node, feed, options=options, run_metadata=md)
                            got = ["ok", out.ndim, md.placement[node.operation.name]]
                    except Exception as e:
                        got = [type(e).__name__, str(e).splitlines()[0], e.node_name]
                results.append([gpu, mode, op, rank, got])
print(json.dumps(results))
"""


def test_gathers_whose_output_rank_comes_from_feeds_refuse_before_numpy():
    result = subprocess.run(
        [sys.executable, "-c", _RUNTIME_PROBE],
        cwd=ROOT,
        env=dict(os.environ, PYTHONFAULTHANDLER="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"crashed ({result.returncode}):\n{result.stderr[-3000:]}"
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(results) == 2 * 4 * 2 * 4
    for gpu, mode, op, rank, got in results:
        where = f"{op} rank {rank} on {'GPU' if gpu else 'CPU'} ({mode})"
        if rank <= MAX_RANK:
            assert got[:2] == ["ok", rank], where
            assert got[2].endswith("GPU:0" if gpu else "CPU:0"), where
        else:
            assert got == [
                "InvalidArgumentError",
                f"the output would have rank {rank}, above the limit of 64 dimensions "
                "(numpy's maximum)",
                op,
            ], where
