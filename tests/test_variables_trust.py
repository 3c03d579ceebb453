"""The resource variable kernels are registered `trusted=True`; they keep the promise
(minigraph.register_kernel): outputs of the inferred dtype, shape and array type (checked with
check_kernel_outputs=True, every output against the graph), never a view of an input, inputs
never written (fed arrays stay as they were), and ReadVariableOp's output, the variable's own
array, read-only (no kernel can write into it), CPU and simulated GPU."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
import ops
import ops.resource_variables as rv
from minigraph import Scope, Session, SessionConfig, Variable
from minigraph.builder import as_output

OPS = [name for name in rv.__all__ if name[0].isupper()]


def test_every_kernel_is_trusted():
    for name in OPS:
        assert all(k.trusted for k in mg.registry.kernels_for(name)), name


def _checked_session(scope):
    return Session(scope, SessionConfig(check_kernel_outputs=True))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_outputs_are_what_the_graph_says_and_no_input_is_written(device, sim_gpus):
    root = Scope.new_root_scope().with_device(f"/{device}:0")
    v = Variable(root, np.arange(12, dtype=np.float32).reshape(4, 3), name="v")
    a = Variable(root.colocate_with(v.op), np.ones((4, 3), np.float32), name="a")
    feeds = {
        "ids": np.array([[3, 1], [0, 3]], np.int32),
        "rows": np.array([1, 1, 2], np.int64),
        "grad": np.full((3, 3), 0.5, np.float32),
        "dense": np.full((4, 3), 0.25, np.float32),
        "upd": np.full((3, 3), 2.0, np.float32),
    }
    holders = {k: ops.Placeholder(root, mg.as_dtype(x.dtype), x.shape) for k, x in feeds.items()}
    kept = {k: x.copy() for k, x in feeds.items()}
    fetches = [
        v.value(), rv.ResourceGather(root, v, holders["ids"]), rv.VarIsInitializedOp(root, v),
        rv.VariableShape(root, v), rv.VariableShape(root, v, out_type=mg.int64), v.handle,
    ]  # fmt: skip
    updates = [
        rv.ResourceScatterAdd(root, v, holders["rows"], holders["upd"]),
        rv.ResourceScatterUpdate(root, v, holders["rows"], holders["upd"]),
        rv.ResourceApplyAdagrad(root, v, a, 0.1, holders["dense"]),
        rv.ResourceSparseApplyAdagrad(root, v, a, 0.1, holders["grad"], holders["rows"]),
        rv.ResourceSparseApplyMomentum(root, v, a, 0.1, holders["grad"], holders["rows"], 0.9),
        rv.AssignAddVariableOp(root, v, holders["dense"]),
        rv.AssignVariableOp(root, v, holders["dense"]),
    ]  # fmt: skip
    feed = {holders[k]: x for k, x in feeds.items()}
    with _checked_session(root) as sess:
        sess.run(mg.global_variables_initializer(root))
        for update in updates:
            sess.run(update, feed)
            got = sess.run(fetches, feed)
            for value, fetch in zip(got[:-1], fetches[:-1]):
                out = as_output(fetch)
                assert value.dtype == out.dtype.np_dtype
                assert mg.TensorShape(value.shape).is_compatible_with(out.shape)
                for fed in feeds.values():
                    assert not np.shares_memory(value, fed)
    for k, x in feeds.items():
        np.testing.assert_array_equal(x, kept[k])  # never written


def test_a_read_is_read_only_and_no_kernel_writes_into_it(cpu_only):
    root = Scope.new_root_scope()
    v = Variable(root, np.zeros((512, 512), np.float32), name="v")
    # Relu of a dying read could be forwarded into the read's buffer: it must not be.
    y = ops.Relu(root, ops.AddV2(root, v.read_value(), 1.0))
    with Session(root) as sess:
        sess.run(v.initializer)
        before = sess.run(v)
        assert not before.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            before[0, 0] = 1.0
        assert (sess.run(y) == 1.0).all()
        assert (sess.run(v) == 0.0).all() and (before == 0.0).all()
