"""Static shape inference of GatherV2 and GatherNd, the op definitions and the builders."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import ALL_DTYPES, INDEX_DTYPES, ids, ref_gather, ref_gather_nd, run, sample

import minigraph
from minigraph import Scope, TensorShape
from ops import Const, Gather, GatherNd, GatherV2, Placeholder, gather, gather_nd

U = None  # an unknown dim


def placeholders(root, p_shape, i_shape, p_dtype=minigraph.float32, i_dtype=minigraph.int32):
    """Placeholders with these static shapes (None: unknown rank)."""
    return Placeholder(root, p_dtype, shape=p_shape), Placeholder(root, i_dtype, shape=i_shape)


def as_list_or_none(shape: TensorShape):
    return None if shape.rank is None else shape.as_list()


# -- GatherV2 with a constant axis ---------------------------------------------------------------

V2_CONSTANT_AXIS = [
    # (params shape, indices shape, axis, batch_dims, expected output shape)
    ([5], [], 0, 0, []),
    ([5], [3], 0, 0, [3]),
    ([5], [2, 3], 0, 0, [2, 3]),
    ([4, 3], [1, 2], 0, 0, [1, 2, 3]),
    ([4, 3], [1, 2], 1, 0, [4, 1, 2]),
    ([4, 3], [1, 2], -1, 0, [4, 1, 2]),
    ([4, 3], [1, 2], -2, 0, [1, 2, 3]),
    ([5, 6, 7, 8], [10, 11], 2, 0, [5, 6, 10, 11, 8]),
    ([5, 6, 7, 8], [10, 11], -2, 0, [5, 6, 10, 11, 8]),
    ([5, 6, 7, 8], [], 3, 0, [5, 6, 7]),
    # batch dims
    ([3, 5], [3, 2], 1, 1, [3, 2]),
    ([3, 5], [3, 2], -1, -1, [3, 2]),
    ([3, 5], [3], 1, 1, [3]),
    ([3, 5], [3], 1, -1, [3, 3]),  # -1 + rank(indices) = 0
    ([2, 3, 4, 5], [2, 3, 6], 2, 2, [2, 3, 6, 5]),
    ([2, 3, 4, 5], [2, 3, 6], 3, 2, [2, 3, 4, 6]),
    ([2, 3, 4, 5], [2, 3, 6], 3, -1, [2, 3, 4, 6]),
    ([2, 3, 4, 5], [2, 6, 7], 1, 1, [2, 6, 7, 4, 5]),
    ([2, 3, 4, 5], [2, 6, 7], 2, 1, [2, 3, 6, 7, 5]),
    ([2, 3, 4, 5], [2, 6, 7], 2, -2, [2, 3, 6, 7, 5]),
    ([2, 3, 4, 5], [2, 6, 7], -1, -3, [2, 3, 4, 2, 6, 7]),  # -3 + 3 = 0
    ([2, 3, 4, 5], [2], 3, 1, [2, 3, 4]),
    # zero-size dims are ordinary dims
    ([0, 3], [4], 1, 0, [0, 4]),
    ([2, 0], [0], 1, 0, [2, 0]),
    ([2, 3], [0, 5], 0, 0, [0, 5, 3]),
    # unknown dims propagate from params and indices
    ([U, 3], [4], 0, 0, [4, 3]),
    ([U, 3], [4], 1, 0, [U, 4]),
    ([2, U, 4], [U, 5], 1, 0, [2, U, 5, 4]),
    # ... and batch dims merge: the known one wins
    ([U, 5], [3, 2], 1, 1, [3, 2]),
    ([3, 5], [U, 2], 1, 1, [3, 2]),
    ([U, 5], [U, 2], 1, 1, [U, 2]),
    ([U, 4, 5], [3, U, 6], 2, 2, [3, 4, 6]),
    # unknown ranks
    (None, [3], 0, 0, None),
    (None, [3, 2], 1, 1, None),
    ([4, 3], None, 1, 0, None),
    ([4, 3], None, 1, 1, None),
    ([4, 3], None, 1, -1, None),
    (None, None, 0, 0, None),
]


@pytest.mark.parametrize("p_shape, i_shape, axis, batch_dims, expected", V2_CONSTANT_AXIS)
def test_gather_v2_static_shape_constant_axis(p_shape, i_shape, axis, batch_dims, expected):
    root = Scope.new_root_scope()
    params, indices = placeholders(root, p_shape, i_shape)
    g = GatherV2(root, params, indices, axis, batch_dims=batch_dims)
    assert as_list_or_none(g.shape) == expected
    assert g.dtype == minigraph.float32


@pytest.mark.parametrize("axis_dtype", [np.int32, np.int64])
def test_gather_v2_axis_constant_of_either_type(axis_dtype):
    root = Scope.new_root_scope()
    params, indices = placeholders(root, [2, 3, 4], [5])
    axis = Const(root, np.array(-2, axis_dtype))
    g = GatherV2(root, params, indices, axis)
    assert g.shape.as_list() == [2, 5, 4]
    assert g.operation.get_attr("Taxis") == minigraph.as_dtype(axis_dtype)


# -- GatherV2 with an axis known only at run time --------------------------------------------

V2_UNKNOWN_AXIS = [
    # (params shape, indices shape, batch_dims, expected): rank = rank(p) + rank(i) - 1 - bd,
    # with the leading batch dims still known.
    ([4, 3], [], 0, [U]),
    ([4, 3], [5], 0, [U, U]),
    ([4, 3], [5, 6], 0, [U, U, U]),
    ([3, 5], [3, 2], 1, [3, U]),
    ([U, 5], [3, 2], 1, [3, U]),
    ([2, 3, 4], [2, 3, 6], 2, [2, 3, U]),
    # negative batch_dims are normalised first (TF would say rank 3 + 2 - 1 + 1 = 5 here)
    ([3, 5, 7], [3, 2], -1, [3, U, U]),
    ([2, 3, 4], [2, 3, 6], -1, [2, 3, U]),
    ([2, 3, 4], [2, 3, 6], -3, [U, U, U, U, U]),
    # unknown ranks
    (None, [3, 2], 0, None),
    ([4, 3], None, 0, None),
    ([4, 3], None, -1, None),
]


@pytest.mark.parametrize("p_shape, i_shape, batch_dims, expected", V2_UNKNOWN_AXIS)
@pytest.mark.parametrize("axis_dtype", [minigraph.int32, minigraph.int64], ids=ids)
def test_gather_v2_static_shape_fed_axis(p_shape, i_shape, batch_dims, expected, axis_dtype):
    root = Scope.new_root_scope()
    params, indices = placeholders(root, p_shape, i_shape)
    axis = Placeholder(root, axis_dtype, shape=[])
    g = GatherV2(root, params, indices, axis, batch_dims=batch_dims)
    assert as_list_or_none(g.shape) == expected


def test_gather_v2_fed_axis_of_unknown_shape_is_accepted():
    root = Scope.new_root_scope()
    params, indices = placeholders(root, [4, 3], [2])
    axis = Placeholder(root, minigraph.int32)  # unknown rank: could still be a scalar
    g = GatherV2(root, params, indices, axis)
    assert g.shape.as_list() == [U, U]
    feed = {params: sample(minigraph.float32, (4, 3)), indices: [2, 0], axis: 1}
    assert run(root, g, feed).shape == (4, 2)


def test_gather_v2_static_shape_matches_run_time_shape_with_negative_batch_dims():
    """The fed-axis rank is right where TF's would be wrong (negative batch_dims)."""
    root = Scope.new_root_scope()
    params, indices = placeholders(root, [3, 5, 7], [3, 2])
    axis = Placeholder(root, minigraph.int32, shape=[])
    g = GatherV2(root, params, indices, axis, batch_dims=-1)
    feed = {
        params: sample(minigraph.float32, (3, 5, 7)),
        indices: np.array([[0, 4], [1, 2], [3, 3]], np.int32),
        axis: 1,
    }
    out = run(root, g, feed)
    assert out.shape == (3, 2, 7)
    assert g.shape.is_compatible_with(out.shape)
    assert g.shape.rank == 3


# -- GatherNd ----------------------------------------------------------------------------------

ND_SHAPES = [
    # (params shape, indices shape, batch_dims, expected)
    ([2, 2], [2, 2], 0, [2]),
    ([2, 2], [2, 1], 0, [2, 2]),
    ([2, 2, 2], [1, 1], 0, [1, 2, 2]),
    ([2, 2, 2], [2, 3], 0, [2]),
    ([2, 2], [2, 1, 2], 0, [2, 1]),
    ([2, 2, 2], [2, 2, 2], 0, [2, 2, 2]),
    ([4], [1], 0, []),
    ([4, 5], [0], 0, [4, 5]),  # depth 0: the whole params per index vector
    ([4, 5], [3, 0], 0, [3, 4, 5]),
    ([4, 5], [0, 2], 0, [0]),
    ([0, 5], [3, 1], 0, [3, 5]),
    # any depth up to rank(params) (TF's kernel stops at 7)
    ([2] * 9, [3, 8], 0, [3, 2]),
    ([2] * 9, [3, 9], 0, [3]),
    # batch dims in front
    ([3, 4, 5], [3, 2, 1], 1, [3, 2, 5]),
    ([3, 4, 5], [3, 2, 2], 1, [3, 2]),
    ([3, 4, 5], [3, 1], 1, [3, 5]),
    ([3, 4, 5], [3, 4, 1], 2, [3, 4]),
    ([3, 4, 5], [3, 4, 7, 0], 2, [3, 4, 7, 5]),
    ([3, 4, 5], [3, 0], 1, [3, 4, 5]),
    # unknown dims and ranks
    ([U, 3], [5, 1], 0, [5, 3]),
    ([2, 3], [U, 2], 0, [U]),
    ([U, U, 6], [4, U, 2], 0, [4, U, 6]),
    ([U, 4, 5], [3, 2, 1], 1, [3, 2, 5]),
    ([3, 4, 5], [U, 2, 1], 1, [3, 2, 5]),
    ([2, 3], [5, U], 0, None),  # the index depth decides the rank
    (None, [5, 2], 0, None),
    ([2, 3], None, 0, None),
    (None, [3, 5, 2], 1, None),
]


@pytest.mark.parametrize("p_shape, i_shape, batch_dims, expected", ND_SHAPES)
def test_gather_nd_static_shape(p_shape, i_shape, batch_dims, expected):
    root = Scope.new_root_scope()
    params, indices = placeholders(root, p_shape, i_shape, i_dtype=minigraph.int64)
    g = GatherNd(root, params, indices, batch_dims=batch_dims)
    assert as_list_or_none(g.shape) == expected


@pytest.mark.parametrize("p_shape, i_shape, batch_dims, expected", ND_SHAPES)
def test_gather_nd_static_shape_matches_run_time(p_shape, i_shape, batch_dims, expected):
    """Filling the unknown dims with a concrete size gives the same shape when run."""
    fill = 2
    p_concrete = [fill if d is None else d for d in (p_shape or [3, 3, 3])]
    if i_shape is None:
        i_concrete = p_concrete[:batch_dims] + [2, 1]
    else:
        i_concrete = [fill if d is None else d for d in i_shape]
        for k in range(batch_dims):  # shared batch dims: the known one of the two
            size = i_shape[k] if p_shape is None or p_shape[k] is None else p_shape[k]
            p_concrete[k] = i_concrete[k] = fill if size is None else size
    root = Scope.new_root_scope()
    params, indices = placeholders(root, p_shape, i_shape, i_dtype=minigraph.int64)
    # IGNORE: index 0 into a zero-size dim is out of range, and that is not the point here.
    g = GatherNd(root, params, indices, batch_dims=batch_dims, bad_indices_policy="IGNORE")
    out = run(
        root,
        g,
        {
            params: sample(minigraph.float32, tuple(p_concrete)),
            indices: np.zeros(i_concrete, np.int64),
        },
    )
    assert g.shape.is_compatible_with(out.shape)
    if expected is not None and None not in expected:
        assert list(out.shape) == expected


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ids)
def test_output_dtype_is_the_params_dtype(dtype):
    root = Scope.new_root_scope()
    params = Placeholder(root, dtype, shape=[3, 2])
    for index_dtype in INDEX_DTYPES:
        indices = Placeholder(root, index_dtype, shape=[4, 1])
        assert GatherV2(root, params, indices, 1).dtype == dtype
        assert GatherNd(root, params, indices).dtype == dtype
        assert GatherV2(root, params, indices, 1).operation.get_attr("Tparams") == dtype
        assert GatherNd(root, params, indices).operation.get_attr("Tindices") == index_dtype


# -- op definitions ----------------------------------------------------------------------------


def test_gather_v2_op_def():
    op_def = minigraph.registry.get_op_def("GatherV2")
    assert [(a.name, a.type_attr) for a in op_def.inputs] == [
        ("params", "Tparams"),
        ("indices", "Tindices"),
        ("axis", "Taxis"),
    ]
    assert [(a.name, a.type_attr) for a in op_def.outputs] == [("output", "Tparams")]
    attrs = {a.name: a for a in op_def.attrs}
    assert set(attrs) == {"batch_dims", "Tparams", "Tindices", "Taxis", "bad_indices_policy"}
    assert attrs["batch_dims"].type == "int" and attrs["batch_dims"].default == 0
    assert attrs["Tparams"].type == "type" and attrs["Tparams"].allowed is None
    assert set(attrs["Tindices"].allowed) == {minigraph.int16, minigraph.int32, minigraph.int64}
    assert set(attrs["Taxis"].allowed) == {minigraph.int32, minigraph.int64}
    assert attrs["bad_indices_policy"].type == "string"
    assert attrs["bad_indices_policy"].default == ""
    assert set(attrs["bad_indices_policy"].allowed) == {"", "DEFAULT", "ERROR", "IGNORE"}


def test_gather_nd_op_def():
    op_def = minigraph.registry.get_op_def("GatherNd")
    assert [(a.name, a.type_attr) for a in op_def.inputs] == [
        ("params", "Tparams"),
        ("indices", "Tindices"),
    ]
    assert [(a.name, a.type_attr) for a in op_def.outputs] == [("output", "Tparams")]
    attrs = {a.name: a for a in op_def.attrs}
    assert set(attrs) == {"Tparams", "Tindices", "bad_indices_policy", "batch_dims"}
    assert set(attrs["Tindices"].allowed) == {minigraph.int16, minigraph.int32, minigraph.int64}
    assert attrs["bad_indices_policy"].default == ""
    assert set(attrs["bad_indices_policy"].allowed) == {"", "DEFAULT", "ERROR", "IGNORE"}
    assert attrs["batch_dims"].type == "int" and attrs["batch_dims"].default == 0


@pytest.mark.parametrize("policy", ["", "DEFAULT", "ERROR", "IGNORE"], ids=ids)
def test_policies_are_recorded(policy):
    root = Scope.new_root_scope()
    g = GatherV2(root, [1, 2], [0], 0, bad_indices_policy=policy)
    n = GatherNd(root, [1, 2], [[0]], bad_indices_policy=policy)
    assert g.operation.get_attr("bad_indices_policy") == policy
    assert n.operation.get_attr("bad_indices_policy") == policy


def test_default_attrs():
    root = Scope.new_root_scope()
    g = GatherV2(root, [1, 2], [0], 0)
    n = GatherNd(root, [1, 2], [[0]])
    assert g.operation.get_attr("batch_dims") == 0
    assert g.operation.get_attr("bad_indices_policy") == ""
    assert n.operation.get_attr("batch_dims") == 0
    assert n.operation.get_attr("bad_indices_policy") == ""


# -- builders ----------------------------------------------------------------------------------


def test_builders_expose_operation_output_and_node():
    root = Scope.new_root_scope()
    for builder, args in (
        (GatherV2, ([[1, 2], [3, 4]], [1], 1)),
        (Gather, ([[1, 2], [3, 4]], [1], 1)),
        (GatherNd, ([[1, 2], [3, 4]], [[1]])),
    ):
        g = builder(root, *args)
        assert g.node() is g.operation
        assert g.output is g.operation.outputs[0]
        assert g.outputs == g.operation.outputs
        assert g.output.shape == g.shape


def test_default_node_names_and_uniquification():
    root = Scope.new_root_scope()
    names = [
        GatherV2(root, [1, 2], [0], 0).operation.name,
        GatherV2(root, [1, 2], [0], 0).operation.name,
        Gather(root, [1, 2], [0], 0).operation.name,
        Gather(root, [1, 2], [0], 0).operation.name,
        GatherNd(root, [1, 2], [[0]]).operation.name,
        GatherNd(root, [1, 2], [[0]]).operation.name,
        gather(root, [1, 2], [0]).operation.name,
        gather_nd(root, [1, 2], [[0]]).operation.name,
    ]
    assert names == [
        "GatherV2",
        "GatherV2_1",
        "Gather",
        "Gather_1",
        "GatherNd",
        "GatherNd_1",
        "GatherV2_2",
        "GatherNd_2",
    ]


def test_scoped_and_explicit_names():
    root = Scope.new_root_scope()
    outer = root.new_sub_scope("outer")
    assert GatherV2(outer.with_op_name("g"), [1, 2], [0], 0).operation.name == "outer/g"
    assert gather(outer, [1, 2], [0], name="picked").operation.name == "outer/picked"
    assert gather_nd(outer, [1, 2], [[0]], name="nd").operation.name == "outer/nd"
    assert Gather(outer, [1, 2], [0], 0).operation.name == "outer/Gather"


def test_gather_inputs_by_keyword():
    root = Scope.new_root_scope()
    g = GatherV2(root, params=[[1, 2], [3, 4]], indices=[1, 0], axis=1)
    np.testing.assert_array_equal(run(root, g), [[2, 1], [4, 3]])
    n = GatherNd(root, params=[[1, 2], [3, 4]], indices=[[1, 0]])
    np.testing.assert_array_equal(run(root, n), [3])


def test_gather_is_an_alias_of_gather_v2():
    assert Gather.op_def is GatherV2.op_def
    assert Gather.default_name == "Gather"


# -- ops.gather / ops.gather_nd ----------------------------------------------------------------


@pytest.mark.parametrize(
    "batch_dims, expected_axis", [(0, 0), (1, 1), (2, 2), (-1, 2), (-2, 1), (-3, 0)]
)
def test_gather_default_axis_is_the_first_non_batch_axis(batch_dims, expected_axis):
    root = Scope.new_root_scope()
    params, indices = placeholders(root, [2, 3, 4, 5], [2, 3, 6])
    g = gather(root, params, indices, batch_dims=batch_dims)
    axis = g.operation.inputs[2].op.get_attr("value")
    assert int(axis) == expected_axis
    bd = batch_dims % 3 if batch_dims < 0 else batch_dims
    expected = [2, 3, 4, 5][:expected_axis] + [2, 3, 6][bd:] + [2, 3, 4, 5][expected_axis + 1 :]
    assert g.shape.as_list() == expected


def test_gather_negative_batch_dims_with_literal_indices():
    root = Scope.new_root_scope()
    params = np.arange(24).reshape(2, 3, 4)
    indices = np.array([[0, 2], [1, 0]], np.int32)
    g = gather(root, params, indices, batch_dims=-1)  # axis = 1
    assert g.shape.as_list() == [2, 2, 4]
    np.testing.assert_array_equal(run(root, g), np.stack([params[0][[0, 2]], params[1][[1, 0]]]))
    h = gather(root, params, indices.tolist(), batch_dims=-1)
    assert h.shape.as_list() == [2, 2, 4]


def test_gather_axis_zero_keeps_batch_dims_zero():
    root = Scope.new_root_scope()
    g = gather(root, np.arange(6).reshape(2, 3), [1], axis=0)
    assert g.operation.get_attr("batch_dims") == 0
    assert g.shape.as_list() == [1, 3]


def test_gather_passes_batch_dims_and_axis():
    root = Scope.new_root_scope()
    params, indices = placeholders(root, [2, 3, 4], [2, 5])
    g = gather(root, params, indices, axis=2, batch_dims=1)
    assert g.operation.get_attr("batch_dims") == 1
    assert g.shape.as_list() == [2, 3, 5]
    g = gather(root, params, indices, axis=-1, batch_dims=np.int64(-1))
    assert g.operation.get_attr("batch_dims") == -1
    assert g.shape.as_list() == [2, 3, 5]


def test_gather_nd_passes_batch_dims():
    root = Scope.new_root_scope()
    params, indices = placeholders(root, [2, 3, 4], [2, 5, 1])
    g = gather_nd(root, params, indices, batch_dims=1)
    assert g.operation.get_attr("batch_dims") == 1
    assert g.shape.as_list() == [2, 5, 4]
    g = gather_nd(root, params, indices, batch_dims=np.int32(1))
    assert g.shape.as_list() == [2, 5, 4]


# -- nothing is rejected that could still be valid ---------------------------------------------

MAYBE_VALID = [
    # (params placeholder shape, indices placeholder shape, axis or None (fed), batch_dims,
    #  a params value, an indices value, the axis to feed) that construction must accept
    (None, [3, 2], -1, 1, (3, 4, 5), [[0, 4], [1, 1], [3, 0]], None),
    (None, None, 1, -1, (3, 4), [[0], [1], [3]], None),
    (None, None, 0, -1, (4,), [3, 0], None),
    (None, [3], 0, -1, (4, 2), [3, 0, 1], None),
    ([None, 4], [None, 2], 1, 1, (3, 4), [[0, 1], [2, 3], [3, 3]], None),
    ([None, None], [None], None, 1, (2, 5), [4, 0], 1),
    ([2, None, None], None, None, -1, (2, 3, 4), [[0, 3], [1, 1]], 2),
    (None, None, None, 3, (1, 1, 1, 2, 2), [[[[1]]]], 4),
]


@pytest.mark.parametrize(
    "p_shape, i_shape, axis, batch_dims, p_value, i_value, fed_axis", MAYBE_VALID
)
def test_gather_v2_accepts_what_could_be_valid(
    p_shape, i_shape, axis, batch_dims, p_value, i_value, fed_axis
):
    root = Scope.new_root_scope()
    params, indices = placeholders(root, p_shape, i_shape)
    feed = {params: sample(minigraph.float32, p_value), indices: np.array(i_value, np.int32)}
    if axis is None:
        axis = Placeholder(root, minigraph.int64, shape=[])
        feed[axis] = fed_axis
    g = GatherV2(root, params, indices, axis, batch_dims=batch_dims)  # no error here
    out = run(root, g, feed)
    a = fed_axis if fed_axis is not None else axis
    np.testing.assert_array_equal(out, ref_gather(feed[params], feed[indices], a, batch_dims))
    assert g.shape.is_compatible_with(out.shape)


ND_MAYBE_VALID = [
    (None, [2, 5], 0, (2, 2, 2, 2, 2), [[1, 0, 1, 0, 1], [0, 0, 0, 0, 1]]),
    ([2, None], [None, None], 0, (2, 3), [[1, 2]]),
    ([None, 3], [2, None], 1, (2, 3), [[2], [0]]),
    (None, None, 2, (2, 2, 3), [[[1], [0]], [[2], [2]]]),
    ([None], [None, None], 0, (0,), np.zeros((0, 1))),
]


@pytest.mark.parametrize("p_shape, i_shape, batch_dims, p_value, i_value", ND_MAYBE_VALID)
def test_gather_nd_accepts_what_could_be_valid(p_shape, i_shape, batch_dims, p_value, i_value):
    root = Scope.new_root_scope()
    params, indices = placeholders(root, p_shape, i_shape)
    g = GatherNd(root, params, indices, batch_dims=batch_dims)  # no error here
    p = sample(minigraph.float32, p_value)
    i = np.array(i_value, np.int32)
    out = run(root, g, {params: p, indices: i})
    np.testing.assert_array_equal(out, ref_gather_nd(p, i, batch_dims))
    assert g.shape.is_compatible_with(out.shape)
