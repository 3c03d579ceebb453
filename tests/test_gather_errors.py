"""The error table: every rule, at the right phase, with TF's wording where TF has one.

Construction: whatever static shapes, attrs and a constant axis decide raises from the builder
call, names the node, and leaves the graph as it was. Run: data-dependent rules (bad indices,
shapes known only when fed, an axis fed at run time) raise from Session.run, with the node.
"""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import INT64_MAX, INT64_MIN, msg, run

import minigraph
from minigraph import InvalidArgumentError, Scope
from ops import Const, GatherNd, GatherV2, Placeholder, gather, gather_nd

# Run-time errors for out-of-range indices are the CPU's (TF's DEFAULT policy writes zeros on a
# GPU; tests/test_gather_gpu.py covers that and the ERROR policy on GPUs).
pytestmark = pytest.mark.usefixtures("cpu_only")

F32, I32, I64 = minigraph.float32, minigraph.int32, minigraph.int64
BIG = 2**62
POLICY_SET = '{"", "DEFAULT", "ERROR", "IGNORE"}'


def ph(root, dtype=F32, shape=None):
    return Placeholder(root, dtype, shape=shape)


def zeros(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def izeros(*shape):
    return np.zeros(shape, np.int32)


# -- construction ------------------------------------------------------------------------------

# (build(root, g): creates the failing node through the scope g named "g", expected message)
CONSTRUCTION = [
    # GatherV2: ranks
    (
        "v2-scalar-params",
        lambda r, g: GatherV2(g, 1.0, [0], 0),
        "Shape must be at least rank 1 but is rank 0",
    ),
    (
        "v2-scalar-params-ph",
        lambda r, g: GatherV2(g, ph(r, F32, []), [0], ph(r, I32, [])),
        "Shape must be at least rank 1 but is rank 0",
    ),
    (
        "v2-axis-vector",
        lambda r, g: GatherV2(g, zeros(2), [0], [0]),
        "Shape must be rank 0 but is rank 1",
    ),
    (
        "v2-axis-ph-vector",
        lambda r, g: GatherV2(g, zeros(2), [0], ph(r, I32, [2])),
        "Shape must be rank 0 but is rank 1",
    ),
    (
        "v2-axis-matrix",
        lambda r, g: GatherV2(g, zeros(2), [0], [[0]]),
        "Shape must be rank 0 but is rank 2",
    ),
    # GatherV2: axis range
    (
        "v2-axis-high",
        lambda r, g: GatherV2(g, zeros(2, 2), [0], 2),
        "Expected axis in the range [-2, 2), but got 2",
    ),
    (
        "v2-axis-low",
        lambda r, g: GatherV2(g, zeros(2, 2), [0], -3),
        "Expected axis in the range [-2, 2), but got -3",
    ),
    (
        "v2-axis-int64-min",
        lambda r, g: GatherV2(g, zeros(2, 2), [0], np.int64(INT64_MIN)),
        f"Expected axis in the range [-2, 2), but got {INT64_MIN}",
    ),
    (
        "v2-axis-int64-max",
        lambda r, g: GatherV2(g, zeros(2, 2), [0], np.int64(INT64_MAX)),
        f"Expected axis in the range [-2, 2), but got {INT64_MAX}",
    ),
    (
        "v2-axis-int32-min",
        lambda r, g: GatherV2(g, zeros(2, 2), [0], np.int32(-(2**31))),
        "Expected axis in the range [-2, 2), but got -2147483648",
    ),
    (
        "v2-axis-unknown-dims",
        lambda r, g: GatherV2(g, ph(r, F32, [None, None]), [0], 2),
        "Expected axis in the range [-2, 2), but got 2",
    ),
    # GatherV2: batch_dims range
    (
        "v2-bd-high",
        lambda r, g: GatherV2(g, zeros(2, 2, 2), izeros(2, 2), 2, batch_dims=3),
        "Expected batch_dims in the range [-2, 2], but got 3",
    ),
    (
        "v2-bd-low",
        lambda r, g: GatherV2(g, zeros(2, 2, 2), izeros(2, 2), 2, batch_dims=-3),
        "Expected batch_dims in the range [-2, 2], but got -3",
    ),
    (
        "v2-bd-scalar-indices",
        lambda r, g: GatherV2(g, zeros(2, 2), 0, 1, batch_dims=1),
        "Expected batch_dims in the range [0, 0], but got 1",
    ),
    (
        "v2-bd-int64-min",
        lambda r, g: GatherV2(g, zeros(2, 2), [0], 0, batch_dims=INT64_MIN),
        f"Expected batch_dims in the range [-1, 1], but got {INT64_MIN}",
    ),
    (
        "v2-bd-huge",
        lambda r, g: GatherV2(g, zeros(2, 2), [0], 0, batch_dims=2**70),
        f"attr 'batch_dims' (int): expected an int64 (TF's int attrs), got {2**70}",
    ),
    (
        "v2-bd-range-unknown-params",
        lambda r, g: GatherV2(g, ph(r), [0], ph(r, I32, []), batch_dims=2),
        "Expected batch_dims in the range [-1, 1], but got 2",
    ),
    (
        "v2-bd-range-unknown-params-neg",
        lambda r, g: GatherV2(g, ph(r), [0], ph(r, I32, []), batch_dims=-2),
        "Expected batch_dims in the range [-1, 1], but got -2",
    ),
    # GatherV2: batch_dims < rank(params)
    (
        "v2-bd-ge-rank",
        lambda r, g: GatherV2(g, zeros(2, 2), izeros(2, 2, 2), 1, batch_dims=2),
        "batch_dims (2) must be less than rank(params) (2).",
    ),
    (
        "v2-bd-ge-rank-neg",
        lambda r, g: GatherV2(g, zeros(2), izeros(2, 2), 0, batch_dims=-1),
        "batch_dims (1) must be less than rank(params) (1).",
    ),
    (
        "v2-bd-ge-rank-fed-axis",
        lambda r, g: GatherV2(g, zeros(2, 2), izeros(2, 2, 2), ph(r, I64, []), batch_dims=2),
        "batch_dims (2) must be less than rank(params) (2).",
    ),
    (
        "v2-bd-huge-unknown-indices",
        lambda r, g: GatherV2(g, zeros(2, 2), ph(r, I32), ph(r, I32, []), batch_dims=BIG),
        f"batch_dims ({BIG}) must be less than rank(params) (2).",
    ),
    # GatherV2: batch_dims <= axis
    (
        "v2-bd-gt-axis",
        lambda r, g: GatherV2(g, zeros(2, 2, 2), izeros(2, 2), 1, batch_dims=2),
        "batch_dims (2) must be less than or equal to axis (1).",
    ),
    (
        "v2-bd-gt-neg-axis",
        lambda r, g: GatherV2(g, zeros(2, 2, 2), izeros(2, 2), -2, batch_dims=2),
        "batch_dims (2) must be less than or equal to axis (1).",
    ),
    (
        "v2-neg-bd-gt-axis",
        lambda r, g: GatherV2(g, zeros(2, 2, 2), izeros(2, 2), 0, batch_dims=-1),
        "batch_dims (1) must be less than or equal to axis (0).",
    ),
    (
        "v2-bd-gt-axis-unknown-params",
        lambda r, g: GatherV2(g, ph(r), izeros(3, 2), 0, batch_dims=1),
        "batch_dims (1) must be less than or equal to axis (0).",
    ),
    (
        "v2-neg-bd-gt-axis-unknown-params",
        lambda r, g: GatherV2(g, ph(r), izeros(3, 2), 0, batch_dims=-1),
        "batch_dims (1) must be less than or equal to axis (0).",
    ),
    (
        "v2-bd-gt-axis-unknown-ranks",
        lambda r, g: GatherV2(g, ph(r), ph(r, I32), 1, batch_dims=2),
        "batch_dims (2) must be less than or equal to axis (1).",
    ),
    (
        "v2-bd-huge-unknown-ranks",
        lambda r, g: GatherV2(g, ph(r), ph(r, I32), 0, batch_dims=BIG),
        f"batch_dims ({BIG}) must be less than or equal to axis (0).",
    ),
    # GatherV2: batch dims of params and indices
    (
        "v2-batch-mismatch",
        lambda r, g: GatherV2(g, zeros(2, 3), izeros(3, 2), 1, batch_dims=1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
    (
        "v2-batch-mismatch-dim1",
        lambda r, g: GatherV2(g, zeros(2, 3, 4), izeros(2, 4), 2, batch_dims=2),
        "params.shape[1]: 3 should be equal to indices.shape[1]: 4",
    ),
    (
        "v2-batch-mismatch-partial",
        lambda r, g: GatherV2(g, ph(r, F32, [None, 3, 4]), ph(r, I32, [5, 2]), 2, batch_dims=2),
        "params.shape[1]: 3 should be equal to indices.shape[1]: 2",
    ),
    (
        "v2-batch-mismatch-fed-axis",
        lambda r, g: GatherV2(g, zeros(2, 3), izeros(3, 2), ph(r, I32, []), batch_dims=1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
    (
        "v2-batch-mismatch-neg-bd",
        lambda r, g: GatherV2(g, zeros(2, 3), izeros(3, 2), 1, batch_dims=-1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
    # GatherV2: attrs and dtypes
    (
        "v2-policy-lowercase",
        lambda r, g: GatherV2(g, zeros(2), [0], 0, bad_indices_policy="ignore"),
        f"GatherV2 'g': attr 'bad_indices_policy' must be one of {POLICY_SET}; got 'ignore'",
    ),
    (
        "v2-policy-unknown",
        lambda r, g: GatherV2(g, zeros(2), [0], 0, bad_indices_policy="CLAMP"),
        "attr 'bad_indices_policy' must be one of",
    ),
    (
        "v2-policy-none",
        lambda r, g: GatherV2(g, zeros(2), [0], 0, bad_indices_policy=None),
        "GatherV2 'g': attr 'bad_indices_policy' (string): expected a string",
    ),
    (
        "v2-indices-int8",
        lambda r, g: GatherV2(g, zeros(2), np.array([0], np.int8), 0),
        "GatherV2 'g': input 'indices' has dtype int8, but attr 'Tindices' allows only {int16, "
        "int32, int64}",
    ),
    (
        "v2-indices-uint16",
        lambda r, g: GatherV2(g, zeros(2), np.array([0], np.uint16), 0),
        "input 'indices' has dtype uint16, but attr 'Tindices' allows only",
    ),
    (
        "v2-indices-float",
        lambda r, g: GatherV2(g, zeros(2), [0.0], 0),
        "input 'indices' has dtype float32, but attr 'Tindices' allows only",
    ),
    (
        "v2-axis-int16",
        lambda r, g: GatherV2(g, zeros(2), [0], np.int16(0)),
        "GatherV2 'g': input 'axis' has dtype int16, but attr 'Taxis' allows only {int32, int64}",
    ),
    (
        "v2-axis-float",
        lambda r, g: GatherV2(g, zeros(2), [0], 0.0),
        "input 'axis' has dtype float32, but attr 'Taxis' allows only",
    ),
    (
        "v2-bd-bool",
        lambda r, g: GatherV2(g, zeros(2, 2), izeros(2, 1), 1, batch_dims=True),
        "GatherV2 'g': attr 'batch_dims' (int): expected an int, got true",
    ),
    (
        "v2-bd-float",
        lambda r, g: GatherV2(g, zeros(2, 2), izeros(2, 1), 1, batch_dims=1.0),
        "attr 'batch_dims' (int): expected an int, got 1.0",
    ),
    # GatherNd: ranks
    (
        "nd-scalar-params",
        lambda r, g: GatherNd(g, 1.0, [0]),
        "params must be at least a vector",
    ),
    (
        "nd-scalar-params-ph",
        lambda r, g: GatherNd(g, ph(r, F32, []), ph(r, I32)),
        "params must be at least a vector",
    ),
    (
        "nd-scalar-indices",
        lambda r, g: GatherNd(g, zeros(2), 0),
        "Shape must be at least rank 1 but is rank 0",
    ),
    (
        "nd-scalar-indices-ph",
        lambda r, g: GatherNd(g, ph(r), ph(r, I32, [])),
        "Shape must be at least rank 1 but is rank 0",
    ),
    # GatherNd: index depth
    (
        "nd-depth",
        lambda r, g: GatherNd(g, zeros(2, 3), izeros(5, 3)),
        "indices.shape[-1] must be <= params.rank, but saw indices shape: [5,3] and params shape: "
        "[2,3]",
    ),
    (
        "nd-depth-vector",
        lambda r, g: GatherNd(g, zeros(4), [0, 0]),
        "indices.shape[-1] must be <= params.rank, but saw indices shape: [2] and params shape: "
        "[4]",
    ),
    (
        "nd-depth-unknown-dims",
        lambda r, g: GatherNd(g, ph(r, F32, [2, None]), ph(r, I32, [None, 3])),
        "indices.shape[-1] must be <= params.rank, but saw indices shape: [?,3] and params shape: "
        "[2,?]",
    ),
    (
        "nd-depth-batch",
        lambda r, g: GatherNd(g, zeros(2, 3), izeros(2, 2), batch_dims=1),
        "indices.shape[-1] must be <= params.rank, but saw indices shape: [2,2] and params shape: "
        "[2,3] (with batch_dims=1)",
    ),
    # GatherNd: batch_dims
    (
        "nd-bd-ge-indices-rank",
        lambda r, g: GatherNd(g, zeros(2, 3), izeros(2), batch_dims=1),
        "batch_dims (1) must be less than rank(indices) (1).",
    ),
    (
        "nd-bd-ge-params-rank",
        lambda r, g: GatherNd(g, zeros(2), izeros(2, 1, 1), batch_dims=1),
        "batch_dims (1) must be less than rank(params) (1).",
    ),
    (
        "nd-bd-ge-rank-unknown-params",
        lambda r, g: GatherNd(g, ph(r), izeros(2, 1), batch_dims=2),
        "batch_dims (2) must be less than rank(indices) (2).",
    ),
    (
        "nd-bd-ge-rank-unknown-indices",
        lambda r, g: GatherNd(g, zeros(2, 2), ph(r, I32), batch_dims=2),
        "batch_dims (2) must be less than rank(params) (2).",
    ),
    (
        "nd-bd-huge",
        lambda r, g: GatherNd(g, zeros(2), izeros(1, 1), batch_dims=BIG),
        f"batch_dims ({BIG}) must be less than rank(indices) (2).",
    ),
    (
        "nd-batch-mismatch",
        lambda r, g: GatherNd(g, zeros(2, 3), izeros(3, 1), batch_dims=1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
    (
        "nd-batch-mismatch-dim1",
        lambda r, g: GatherNd(g, zeros(2, 3, 4), izeros(2, 4, 1), batch_dims=2),
        "params.shape[1]: 3 should be equal to indices.shape[1]: 4",
    ),
    (
        "nd-batch-mismatch-unknown-depth",
        lambda r, g: GatherNd(g, zeros(2, 3), ph(r, I32, [3, None]), batch_dims=1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
    (
        "nd-bd-negative",
        lambda r, g: GatherNd(g, zeros(2, 3), izeros(2, 1), batch_dims=-1),
        "GatherNd 'g': attr 'batch_dims' must be >= 0; got -1",
    ),
    (
        "nd-bd-bool",
        lambda r, g: GatherNd(g, zeros(2, 3), izeros(2, 1), batch_dims=True),
        "GatherNd 'g': attr 'batch_dims' (int): expected an int, got true",
    ),
    # GatherNd: attrs and dtypes
    (
        "nd-policy",
        lambda r, g: GatherNd(g, zeros(2), [[0]], bad_indices_policy="Ignore"),
        f"GatherNd 'g': attr 'bad_indices_policy' must be one of {POLICY_SET}; got 'Ignore'",
    ),
    (
        "nd-indices-uint8",
        lambda r, g: GatherNd(g, zeros(2), np.array([[0]], np.uint8)),
        "GatherNd 'g': input 'indices' has dtype uint8, but attr 'Tindices' allows only {int16, "
        "int32, int64}",
    ),
    (
        "nd-indices-bool",
        lambda r, g: GatherNd(g, zeros(2), [[True]]),
        "input 'indices' has dtype bool, but attr 'Tindices' allows only",
    ),
    # the Python-level functions, where the error comes from the node
    (
        "gather-axis0-bd1",
        lambda r, g: gather(g, zeros(2, 3), izeros(2, 1), axis=0, batch_dims=1),
        "batch_dims (1) must be less than or equal to axis (0).",
    ),
    (
        "gather-bd-too-big",
        lambda r, g: gather(g, zeros(2, 3), izeros(2, 1), axis=1, batch_dims=2),
        "batch_dims (2) must be less than rank(params) (2).",
    ),
    (
        "gather-neg-bd-mismatch",
        lambda r, g: gather(g, zeros(2, 3), izeros(3, 1), batch_dims=-1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
    (
        "gather-nd-bd-mismatch",
        lambda r, g: gather_nd(g, zeros(2, 3), izeros(3, 1), batch_dims=1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
]


@pytest.mark.parametrize("build, message", [pytest.param(b, m, id=i) for i, b, m in CONSTRUCTION])
def test_construction_error(build, message):
    root = Scope.new_root_scope()
    g = root.with_op_name("g")
    with pytest.raises(InvalidArgumentError, match=msg(message)) as info:
        build(root, g)
    error = info.value
    assert error.node_name == "g"
    assert "'g'" in str(error)
    assert error.op_type in ("GatherV2", "GatherNd")
    assert "g" not in root.graph  # nothing of the failed node was added


@pytest.mark.parametrize("build, message", [pytest.param(b, m, id=i) for i, b, m in CONSTRUCTION])
def test_construction_error_leaves_the_graph_unchanged(build, message):
    """Literal inputs become Consts; a failing builder call must remove them again (the
    placeholders some cases build first are theirs to keep)."""
    root = Scope.new_root_scope()
    Const(root, 1.0)
    with pytest.raises(InvalidArgumentError, match=msg(message)):
        build(root, root.with_op_name("g"))
    assert [op.name for op in root.graph.operations if op.type != "Placeholder"] == ["Const"]
    # ... and the names it would have taken are free again.
    assert Const(root, [1]).operation.name == "Const_1"
    assert GatherV2(root.with_op_name("g"), [1, 2], [0], 0).operation.name == "g"


def test_construction_shape_errors_list_the_input_shapes():
    root = Scope.new_root_scope()
    whole = (
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3 for 'g' (GatherV2) with "
        "input shapes: [2,3], [3,2], []."
    )
    with pytest.raises(InvalidArgumentError, match="^" + msg(whole) + "$"):
        GatherV2(root.with_op_name("g"), zeros(2, 3), izeros(3, 2), 1, batch_dims=1)
    whole = (
        "indices.shape[-1] must be <= params.rank, but saw indices shape: [5,3] and params "
        "shape: [2,3] for 'outer/g' (GatherNd) with input shapes: [2,3], [5,3]."
    )
    with pytest.raises(InvalidArgumentError, match="^" + msg(whole) + "$") as info:
        GatherNd(root.new_sub_scope("outer").with_op_name("g"), zeros(2, 3), izeros(5, 3))
    assert info.value.node_name == "outer/g"


PYTHON_LEVEL = [
    (
        "gather-bd-bool",
        lambda r: gather(r, zeros(2), [0], batch_dims=True),
        "batch_dims must be an int; got bool True",
    ),
    (
        "gather-bd-np-bool",
        lambda r: gather(r, zeros(2), [0], batch_dims=np.True_),
        "batch_dims must be an int; got bool",
    ),
    (
        "gather-bd-float",
        lambda r: gather(r, zeros(2), [0], batch_dims=1.0),
        "batch_dims must be an int; got float 1.0",
    ),
    (
        "gather-bd-np-float",
        lambda r: gather(r, zeros(2), [0], batch_dims=np.float64(0)),
        "batch_dims must be an int; got float64",
    ),
    (
        "gather-bd-str",
        lambda r: gather(r, zeros(2), [0], batch_dims="1"),
        "batch_dims must be an int; got str '1'",
    ),
    # batch_dims=None means 0, as in tf.gather (tests/test_fidelity_gather.py).
    (
        "gather-neg-bd-unknown-rank",
        lambda r: gather(r, zeros(2, 2), ph(r, I32), batch_dims=-1),
        "gather: a negative batch_dims with no axis needs indices of known rank",
    ),
    (
        "gather-nd-bd-bool",
        lambda r: gather_nd(r, zeros(2), [[0]], batch_dims=False),
        "batch_dims must be an int; got bool False",
    ),
    (
        "gather-nd-bd-float",
        lambda r: gather_nd(r, zeros(2, 2), [[0]], batch_dims=1.5),
        "batch_dims must be an int; got float 1.5",
    ),
]


@pytest.mark.parametrize("build, message", [pytest.param(b, m, id=i) for i, b, m in PYTHON_LEVEL])
def test_python_level_argument_errors(build, message):
    root = Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match=msg(message)):
        build(root)
    assert not any(op.type in ("GatherV2", "GatherNd") for op in root.graph.operations)


# -- run time --------------------------------------------------------------------------------


def fed(root, g, op, params, indices, axis=None, **attrs):
    """`op` over placeholders of unknown shape; returns (fetch, feed_dict)."""
    p = Placeholder(root, minigraph.as_dtype(np.asarray(params).dtype))
    i = Placeholder(root, minigraph.as_dtype(np.asarray(indices).dtype))
    feed = {p: params, i: indices}
    if op is GatherNd:
        return GatherNd(g, p, i, **attrs), feed
    if axis is None:
        axis = 0
    if isinstance(axis, tuple):  # (dtype, value): a fed axis
        a = Placeholder(root, axis[0])
        feed[a] = axis[1]
        axis = a
    return GatherV2(g, p, i, axis, **attrs), feed


def const(root, g, op, params, indices, axis=0, **attrs):
    if op is GatherNd:
        return GatherNd(g, params, indices, **attrs), {}
    return GatherV2(g, params, indices, axis, **attrs), {}


V = [10, 20, 30]
M22 = [[1, 2], [3, 4]]
I64A = lambda *v: np.array(v, np.int64)  # noqa: E731

# (how the inputs arrive, op, params, indices, extra kwargs, expected message)
RUN_TIME = [
    # GatherV2: out-of-range indices, first bad position in C order
    ("v2-first-bad-2d", GatherV2, V, [[0, 3], [-1, 5]], {}, "indices[0,1] = 3 is not in [0, 3)"),
    (
        "v2-first-bad-negative",
        GatherV2,
        V,
        [[0, -1], [3, 0]],
        {},
        "indices[0,1] = -1 is not in [0, 3)",
    ),
    ("v2-bad-1d", GatherV2, V, [0, 1, 3], {}, "indices[2] = 3 is not in [0, 3)"),
    ("v2-bad-scalar", GatherV2, V, 7, {}, "indices = 7 is not in [0, 3)"),
    (
        "v2-bad-3d",
        GatherV2,
        V,
        [[[0, 0], [0, 0]], [[0, 4], [9, 0]]],
        {},
        "indices[1,0,1] = 4 is not in [0, 3)",
    ),
    (
        "v2-bad-axis1",
        GatherV2,
        [V, V],
        [[0, 2, 2], [1, -2, 0]],
        {"axis": 1},
        "indices[1,1] = -2 is not in [0, 3)",
    ),
    (
        "v2-bad-batched",
        GatherV2,
        [V, V],
        [[0, 2], [3, 0]],
        {"axis": 1, "batch_dims": 1},
        "indices[1,0] = 3 is not in [0, 3)",
    ),
    (
        "v2-int64-max",
        GatherV2,
        V,
        I64A(1, INT64_MAX),
        {},
        f"indices[1] = {INT64_MAX} is not in [0, 3)",
    ),
    (
        "v2-int64-min",
        GatherV2,
        V,
        I64A(INT64_MIN, 0),
        {},
        f"indices[0] = {INT64_MIN} is not in [0, 3)",
    ),
    (
        "v2-int64-min-batched",
        GatherV2,
        [V],
        I64A([INT64_MIN]),
        {"axis": 1, "batch_dims": 1},
        f"indices[0,0] = {INT64_MIN} is not in [0, 3)",
    ),
    (
        "v2-int32-min",
        GatherV2,
        V,
        np.array([-(2**31)], np.int32),
        {},
        "indices[0] = -2147483648 is not in [0, 3)",
    ),
    (
        "v2-int16-min",
        GatherV2,
        V,
        np.array([0, -(2**15)], np.int16),
        {},
        "indices[1] = -32768 is not in [0, 3)",
    ),
    (
        "v2-int16-max",
        GatherV2,
        V,
        np.array([2**15 - 1], np.int16),
        {},
        "indices[0] = 32767 is not in [0, 3)",
    ),
    # ... validated even when a dimension has size zero
    (
        "v2-zero-axis-dim",
        GatherV2,
        zeros(2, 0, 3),
        [0],
        {"axis": 1},
        "indices[0] = 0 is not in [0, 0)",
    ),
    (
        "v2-zero-other-dim",
        GatherV2,
        zeros(0, 4),
        [1, 4],
        {"axis": 1},
        "indices[1] = 4 is not in [0, 4)",
    ),
    (
        "v2-zero-batched",
        GatherV2,
        zeros(2, 0),
        izeros(2, 1),
        {"axis": 1, "batch_dims": 1},
        "indices[0,0] = 0 is not in [0, 0)",
    ),
    # GatherNd: out-of-range index vectors
    (
        "nd-first-bad",
        GatherNd,
        M22,
        [[0, 0], [2, 0], [0, 5]],
        {},
        "indices[1] = [2, 0] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-bad-negative",
        GatherNd,
        M22,
        [[1, 1], [0, -1]],
        {},
        "indices[1] = [0, -1] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-bad-2d-position",
        GatherNd,
        M22,
        [[[0, 0], [1, 1]], [[2, 2], [0, 0]]],
        {},
        "indices[1,0] = [2, 2] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-bad-vector-indices",
        GatherNd,
        V,
        [5],
        {},
        "indices = [5] does not index into param shape [3], node name: g",
    ),
    (
        "nd-bad-slice",
        GatherNd,
        M22,
        [[1], [2]],
        {},
        "indices[1] = [2] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-bad-batched",
        GatherNd,
        M22,
        [[[0]], [[2]]],
        {"batch_dims": 1},
        "indices[1,0] = [2] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-int64-max",
        GatherNd,
        M22,
        I64A([0, INT64_MAX]),
        {},
        f"indices[0] = [0, {INT64_MAX}] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-int64-min",
        GatherNd,
        M22,
        I64A([1, 1], [INT64_MIN, 0]),
        {},
        f"indices[1] = [{INT64_MIN}, 0] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-int16-min",
        GatherNd,
        M22,
        np.array([[-(2**15), 0]], np.int16),
        {},
        "indices[0] = [-32768, 0] does not index into param shape [2,2], node name: g",
    ),
    (
        "nd-zero-params",
        GatherNd,
        zeros(0, 3),
        [[0]],
        {},
        "indices[0] = [0] does not index into param shape [0,3], node name: g",
    ),
    (
        "nd-zero-slice-dim",
        GatherNd,
        zeros(2, 0),
        [[1, 0]],
        {},
        "indices[0] = [1, 0] does not index into param shape [2,0], node name: g",
    ),
]


def _run_time_cases():
    for case_id, op, params, indices, kwargs, message in RUN_TIME:
        for how in ("const", "fed"):
            yield pytest.param(how, op, params, indices, kwargs, message, id=f"{case_id}-{how}")


@pytest.mark.parametrize("how, op, params, indices, kwargs, message", list(_run_time_cases()))
def test_run_time_bad_indices(how, op, params, indices, kwargs, message):
    root = Scope.new_root_scope()
    params = np.asarray(params)
    indices = np.asarray(indices)
    if params.dtype == np.int64:
        params = params.astype(np.int32)
    if (
        indices.dtype == np.int64
        and -(2**31) <= indices.min(initial=0) <= indices.max(initial=0) < 2**31
    ):
        indices = indices.astype(np.int32)  # Python lists: int32, as TF converts them
    make = const if how == "const" else fed
    fetch, feed = make(root, root.with_op_name("g"), op, params, indices, **kwargs)  # builds
    with pytest.raises(InvalidArgumentError, match=msg(message)) as info:
        run(root, fetch, feed)
    assert info.value.node_name == "g"
    assert info.value.op_type == op.__name__
    assert f"[[node g ({op.__name__}) on /job:localhost/replica:0/task:0/device:CPU:0" in str(
        info.value
    )


def test_zero_size_batch_has_no_indices_to_check():
    """A zero-size batch dim leaves no index to validate: the empty result, no error."""
    root = Scope.new_root_scope()
    g = GatherV2(root, zeros(0, 3, 2), np.zeros((0, 2), np.int32), 2, batch_dims=1)
    assert run(root, g).shape == (0, 3, 2)


def test_gather_nd_error_names_a_scoped_node():
    root = Scope.new_root_scope()
    g = GatherNd(root.new_sub_scope("outer").with_op_name("g"), M22, [[3, 0]])
    with pytest.raises(
        InvalidArgumentError,
        match=msg("indices[0] = [3, 0] does not index into param shape [2,2], node name: outer/g"),
    ):
        run(root, g)


def test_first_bad_index_of_many_large_indices():
    """Many bad indices, early ones negative, late ones huge: the first in C order wins."""
    indices = np.zeros((8, 9), np.int64)
    indices[7, 8] = -1
    indices[3, 5] = 100
    indices[3, 6] = INT64_MIN
    indices[2, 8] = INT64_MAX
    root = Scope.new_root_scope()
    g = GatherV2(root.with_op_name("g"), V, indices, 0)
    with pytest.raises(InvalidArgumentError, match=msg(f"indices[2,8] = {INT64_MAX} is not in")):
        run(root, g)
    vectors = np.zeros((40, 2), np.int64)
    vectors[39] = [5, 5]
    vectors[33] = [0, INT64_MIN]
    nd = GatherNd(root.with_op_name("nd"), M22, vectors)
    with pytest.raises(InvalidArgumentError, match=msg(f"indices[33] = [0, {INT64_MIN}] does")):
        run(root, nd)


# Shapes, axes and attrs that only the run can check: placeholders of unknown shape, fed axes.
# (build(root, g) -> (fetch, feed), expected message)
RUN_TIME_SHAPES = [
    # GatherV2, fed axis
    (
        "v2-fed-axis-high",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I64, 2)),
        "Expected axis in the range [-2, 2), but got 2",
    ),
    (
        "v2-fed-axis-low",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I32, -3)),
        "Expected axis in the range [-2, 2), but got -3",
    ),
    (
        "v2-fed-axis-int64-min",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I64, INT64_MIN)),
        f"Expected axis in the range [-2, 2), but got {INT64_MIN}",
    ),
    (
        "v2-fed-axis-int64-max",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I64, INT64_MAX)),
        f"Expected axis in the range [-2, 2), but got {INT64_MAX}",
    ),
    (
        "v2-fed-axis-int32-min",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I32, -(2**31))),
        "Expected axis in the range [-2, 2), but got -2147483648",
    ),
    (
        "v2-fed-axis-vector",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I32, [1])),
        "axis must be scalar",
    ),
    (
        "v2-fed-axis-matrix",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I64, [[0, 1]])),
        "axis must be scalar",
    ),
    (
        "v2-fed-axis-empty",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(1), axis=(I64, np.zeros(0, np.int64))),
        "axis must be scalar",
    ),
    (
        "v2-fed-bd-gt-axis",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(2, 1), axis=(I32, 0), batch_dims=1),
        "batch_dims (1) must be less than or equal to axis (0).",
    ),
    (
        "v2-fed-neg-bd-gt-axis",
        lambda r, g: fed(
            r, g, GatherV2, zeros(2, 3, 4), izeros(2, 3, 1), axis=(I32, -2), batch_dims=-1
        ),
        "batch_dims (2) must be less than or equal to axis (1).",
    ),
    # GatherV2, shapes known only when fed
    (
        "v2-fed-scalar-params",
        lambda r, g: fed(r, g, GatherV2, np.float32(1), izeros(1)),
        "params must be at least 1 dimensional",
    ),
    (
        "v2-fed-scalar-params-fed-axis",
        lambda r, g: fed(r, g, GatherV2, np.float32(1), izeros(1), axis=(I32, 0)),
        "params must be at least 1 dimensional",
    ),
    (
        "v2-fed-axis-vs-rank",
        lambda r, g: fed(r, g, GatherV2, zeros(3), izeros(1), axis=1),
        "Expected axis in the range [-1, 1), but got 1",
    ),
    (
        "v2-fed-bd-range",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(2), axis=(I32, 1), batch_dims=2),
        "Expected batch_dims in the range [-1, 1], but got 2",
    ),
    (
        "v2-fed-bd-range-neg",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(2), axis=(I32, 1), batch_dims=-2),
        "Expected batch_dims in the range [-1, 1], but got -2",
    ),
    (
        "v2-fed-bd-huge",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(2, 1), axis=(I32, 1), batch_dims=BIG),
        f"Expected batch_dims in the range [-2, 2], but got {BIG}",
    ),
    (
        "v2-fed-bd-int64-min",
        lambda r, g: fed(
            r, g, GatherV2, zeros(2, 3), izeros(2, 1), axis=(I32, 1), batch_dims=INT64_MIN
        ),
        f"Expected batch_dims in the range [-2, 2], but got {INT64_MIN}",
    ),
    (
        "v2-fed-bd-ge-rank",
        lambda r, g: fed(r, g, GatherV2, zeros(2), izeros(2, 1), axis=(I32, 0), batch_dims=1),
        "batch_dims (1) must be less than rank(params) (1).",
    ),
    (
        "v2-fed-batch-mismatch",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3), izeros(3, 1), axis=1, batch_dims=1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
    (
        "v2-fed-batch-mismatch-dim1",
        lambda r, g: fed(r, g, GatherV2, zeros(2, 3, 4), izeros(2, 4), axis=2, batch_dims=2),
        "params.shape[1]: 3 should be equal to indices.shape[1]: 4",
    ),
    # GatherNd, shapes known only when fed
    (
        "nd-fed-scalar-params",
        lambda r, g: fed(r, g, GatherNd, np.float32(1), izeros(1)),
        "params must be at least a vector",
    ),
    (
        "nd-fed-scalar-indices",
        lambda r, g: fed(r, g, GatherNd, zeros(3), np.int32(0)),
        "indices must be at least a vector",
    ),
    (
        "nd-fed-depth",
        lambda r, g: fed(r, g, GatherNd, zeros(2, 3, 4), izeros(1, 4)),
        "index innermost dimension length must be <= params rank; saw: 4 vs. 3",
    ),
    (
        "nd-fed-depth-batched",
        lambda r, g: fed(r, g, GatherNd, zeros(2, 3), izeros(2, 2), batch_dims=1),
        "index innermost dimension length must be <= params rank; saw: 2 vs. 1",
    ),
    (
        "nd-fed-bd-ge-indices-rank",
        lambda r, g: fed(r, g, GatherNd, zeros(2, 3), izeros(2), batch_dims=1),
        "GatherNd needs rank(params) > batch_dims and rank(indices) > batch_dims; got params "
        "shape [2, 3], indices shape [2], batch_dims 1",
    ),
    (
        "nd-fed-bd-ge-params-rank",
        lambda r, g: fed(r, g, GatherNd, zeros(2), izeros(2, 1), batch_dims=1),
        "GatherNd needs rank(params) > batch_dims and rank(indices) > batch_dims",
    ),
    (
        "nd-fed-bd-huge",
        lambda r, g: fed(r, g, GatherNd, zeros(2), izeros(2, 1), batch_dims=BIG),
        f"batch_dims {BIG}",
    ),
    (
        "nd-fed-batch-mismatch",
        lambda r, g: fed(r, g, GatherNd, zeros(2, 3), izeros(3, 1), batch_dims=1),
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    ),
]


@pytest.mark.parametrize(
    "build, message", [pytest.param(b, m, id=i) for i, b, m in RUN_TIME_SHAPES]
)
def test_run_time_shape_and_axis_errors(build, message):
    root = Scope.new_root_scope()
    fetch, feed = build(root, root.with_op_name("g"))  # construction accepts it
    with pytest.raises(InvalidArgumentError, match=msg(message)) as info:
        run(root, fetch, feed)
    assert info.value.node_name == "g"
    assert "[[node g (" in str(info.value)


def test_construction_then_run_phase_for_the_same_rule():
    """batch_dims <= axis: at construction with a constant axis, at run with a fed one."""
    root = Scope.new_root_scope()
    params = zeros(2, 3)
    indices = izeros(2, 1)
    with pytest.raises(InvalidArgumentError, match=msg("must be less than or equal to axis (0)")):
        GatherV2(root.with_op_name("g"), params, indices, 0, batch_dims=1)
    axis = Placeholder(root, I32, shape=[])
    g = GatherV2(root.with_op_name("g"), params, indices, axis, batch_dims=1)
    with pytest.raises(InvalidArgumentError, match=msg("must be less than or equal to axis (0)")):
        run(root, g, {axis: 0})
    np.testing.assert_array_equal(run(root, g, {axis: 1}), np.zeros((2, 1), np.float32))


def test_errors_are_value_errors():
    root = Scope.new_root_scope()
    with pytest.raises(ValueError, match=msg("Expected axis in the range")):
        GatherV2(root, zeros(2), [0], 1)
    g = GatherV2(root, zeros(2), [2], 0)
    with pytest.raises(ValueError, match=msg("indices[0] = 2 is not in [0, 2)")):
        run(root, g)
