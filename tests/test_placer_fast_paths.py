"""The placer's fast paths (a node alone in its group without a request; the kernel look-up
memo; the host-device memo) against its general path, on random graphs over CPU and simulated
GPUs: the same device and kernel for every node, or the same error."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import placer
from ops import GatherV2, Identity, Placeholder


def _random_graph(rng, n):
    root = mg.Scope.new_root_scope()
    dtypes_ = [mg.float32, mg.string, mg.bfloat16, mg.int32]
    values = []
    for k in range(3):
        dtype = dtypes_[k % len(dtypes_)]
        scope = root.with_device("gpu") if rng.random() < 0.3 else root
        values.append(Placeholder(scope.with_op_name(f"x{k}"), dtype, shape=[None, 3]))
    shared = mg.Const(root.with_op_name("shared"), np.array([1, 0], np.int64))
    for k in range(n):
        src = values[rng.integers(len(values))]
        scope = root.with_op_name(f"n{k}")
        roll = rng.random()
        if roll < 0.2:
            scope = scope.with_device(["gpu", "cpu", "GPU:1", "/device:GPU:0"][rng.integers(4)])
        elif roll < 0.3:
            scope = scope.colocate_with(values[rng.integers(len(values))])
        if rng.random() < 0.3:
            node = Identity(scope, src)
        else:
            indices = shared if rng.random() < 0.5 else [int(rng.integers(0, 2))]
            node = GatherV2(scope, src, indices, int(rng.integers(0, 2)))
        values.append(node)
    return root.graph


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("soft", [True, False])
def test_fast_paths_place_as_the_general_path(monkeypatch, sim_gpus, seed, soft):
    rng = np.random.default_rng(seed)
    graph = _random_graph(rng, 40)
    ops = [op for op in graph.get_operations() if op.type != "Placeholder"]
    devices = list(sim_gpus)
    fast = _outcome_soft(ops, devices, soft)
    general = _general_outcome_soft(monkeypatch, ops, devices, soft)
    assert fast == general


def _outcome_soft(ops, devices, soft):
    try:
        result = placer.place(ops, devices, allow_soft_placement=soft)
    except mg.OpError as e:
        return ("error", type(e), e.message)
    return ("ok", {op.name: (result.device[op].name, result.kernel[op]) for op in ops})


def _general_outcome_soft(monkeypatch, ops, devices, soft):
    with monkeypatch.context() as m:
        m.setattr(
            placer, "_place_single", lambda op, ctx, result: placer._place_group([op], ctx, result)
        )
        m.setattr(
            placer._Context, "kernel_or_reason", lambda self, op, d: placer._kernel_or_reason(op, d)
        )
        m.setattr(
            placer._Context,
            "host_of",
            lambda self, d: next(
                (h for h in self.ordered if h.is_host and placer.same_task(h.spec, d.spec)), d
            ),
        )
        return _outcome_soft(ops, devices, soft)


def test_a_node_without_any_kernel_gets_the_general_error(sim_gpus):
    root = mg.Scope.new_root_scope()
    op_def = mg.OpDef("PlacerFastNoKernel", inputs=["x: float"], outputs=["y: float"])
    builder = mg.register_op(op_def)
    x = Placeholder(root, mg.float32, shape=[2])
    node = builder(root.with_op_name("lonely"), x)
    with pytest.raises(mg.NotFoundError, match="Cannot assign a device for operation 'lonely'"):
        placer.place([node.operation], list(sim_gpus))
