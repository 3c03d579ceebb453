"""Every example of the seed documents, with its literal expected output.

Sources (/work/shared/seeds): tf.raw_ops.GatherNd (Russian), tensorflow::ops::GatherNd (C++,
Hindi), tf.gather (Russian), the Java Gather op (Portuguese) and tf.raw_ops.GatherV2 (English).
Strings come back as TF returns them: numpy object arrays of bytes.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from _gather_helpers import as_bytes, assert_array_same, msg, run, sample

import minigraph
from minigraph import InvalidArgumentError, Scope
from minigraph.testing import simulated_gpus
from ops import Const, Gather, GatherNd, GatherV2, Placeholder, gather, gather_nd

MATRIX = [["a", "b"], ["c", "d"]]
CUBE = [[["a0", "b0"], ["c0", "d0"]], [["a1", "b1"], ["c1", "d1"]]]

# tf.raw_ops.GatherNd / tensorflow::ops::GatherNd: (indices, params, output), in the order
# the documents give them.
GATHER_ND_EXAMPLES = [
    # Simple indexing into a matrix
    ([[0, 0], [1, 1]], MATRIX, ["a", "d"]),
    # Slice indexing into a matrix
    ([[1], [0]], MATRIX, [["c", "d"], ["a", "b"]]),
    # Indexing into a 3-tensor
    ([[1]], CUBE, [[["a1", "b1"], ["c1", "d1"]]]),
    ([[0, 1], [1, 0]], CUBE, [["c0", "d0"], ["a1", "b1"]]),
    ([[0, 0, 1], [1, 0, 1]], CUBE, ["b0", "b1"]),
    # Batched indexing into a matrix
    ([[[0, 0]], [[0, 1]]], MATRIX, [["a"], ["b"]]),
    # Batched slice indexing into a matrix
    ([[[1]], [[0]]], MATRIX, [[["c", "d"]], [["a", "b"]]]),
    # Batched indexing into a 3-tensor
    (
        [[[1]], [[0]]],
        CUBE,
        [[[["a1", "b1"], ["c1", "d1"]]], [[["a0", "b0"], ["c0", "d0"]]]],
    ),
    (
        [[[0, 1], [1, 0]], [[0, 0], [1, 1]]],
        CUBE,
        [[["c0", "d0"], ["a1", "b1"]], [["a0", "b0"], ["c1", "d1"]]],
    ),
    ([[[0, 0, 1], [1, 0, 1]], [[0, 1, 1], [1, 1, 0]]], CUBE, [["b0", "b1"], ["d0", "c1"]]),
]


@pytest.mark.parametrize("indices, params, expected", GATHER_ND_EXAMPLES)
def test_gather_nd_document_examples(indices, params, expected):
    root = Scope.new_root_scope()
    g = GatherNd(root, Const(root, params), Const(root, indices))
    out = run(root, g)
    assert_array_same(out, as_bytes(expected))
    # The documented output shape: indices.shape[:-1] + params.shape[indices.shape[-1]:].
    i_shape, p_shape = list(np.shape(indices)), list(np.shape(params))
    assert g.shape.as_list() == i_shape[:-1] + p_shape[i_shape[-1] :]


@pytest.mark.parametrize("indices, params, expected", GATHER_ND_EXAMPLES)
def test_gather_nd_document_examples_through_gather_nd(indices, params, expected):
    root = Scope.new_root_scope()
    assert_array_same(run(root, gather_nd(root, params, indices)), as_bytes(expected))


@pytest.mark.parametrize("indices, params, expected", GATHER_ND_EXAMPLES)
def test_gather_nd_document_examples_numeric(indices, params, expected):
    """The same examples on numbers: 'a0' becomes its position's value in a numeric params."""
    letters = np.array(as_bytes(params))
    codes = {v: i + 1 for i, v in enumerate(letters.reshape(-1).tolist())}
    numeric = np.vectorize(lambda v: codes[v], otypes=[np.float32])(letters)
    want = np.vectorize(lambda v: codes[v], otypes=[np.float32])(as_bytes(expected))
    root = Scope.new_root_scope()
    out = run(root, GatherNd(root, numeric, np.array(indices, np.int64)))
    assert_array_same(out, want)


def test_gather_nd_cpp_class_interface():
    """tensorflow::ops::GatherNd(scope, params, indices): .operation, .output, node()."""
    root = Scope.new_root_scope()
    g = GatherNd(root, Const(root, MATRIX), Const(root, [[0, 0], [1, 1]]))
    assert g.operation.type == "GatherNd"
    assert g.operation.name == "GatherNd"
    assert g.node() is g.operation
    assert g.output is g.operation.outputs[0]
    assert g.output.dtype == minigraph.string
    assert_array_same(run(root, g.output), as_bytes(["a", "d"]))
    # Operator Input/Output: a builder is accepted wherever an Output is.
    again = GatherNd(root, g, Const(root, [[1]]))
    assert_array_same(run(root, again), as_bytes(["d"]))
    assert GatherNd(root, Const(root, MATRIX), [[1]]).operation.name == "GatherNd_2"


def test_gather_nd_documented_rank_rule():
    """indices.shape[-1] <= params.rank: equal selects elements, smaller selects slices."""
    root = Scope.new_root_scope()
    p = Const(root, np.arange(24).reshape(2, 3, 4))
    assert GatherNd(root, p, [[1, 2, 3]]).shape.as_list() == [1]
    assert GatherNd(root, p, [[1, 2]]).shape.as_list() == [1, 4]
    with pytest.raises(InvalidArgumentError, match=msg("indices.shape[-1] must be <= params.rank")):
        GatherNd(root, p, [[1, 2, 3, 0]])


@pytest.mark.usefixtures("cpu_only")  # the CPU half assumes CPU placement
def test_gather_nd_documented_cpu_error_gpu_zero():
    """'on CPU, if an out of bound index is found, an error is returned. On GPU ... a 0 is
    stored in the corresponding output value.'"""
    params = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    root = Scope.new_root_scope()
    g = GatherNd(root.with_op_name("g"), params, [[0, 0], [5, 1]])
    with pytest.raises(InvalidArgumentError, match=msg("indices[1] = [5, 1] does not index")):
        run(root, g)
    with simulated_gpus(1):
        assert_array_same(run(root, g), np.array([1.0, 0.0], np.float32))


# -- tf.gather ---------------------------------------------------------------------------------

P_STRINGS = ["p0", "p1", "p2", "p3", "p4", "p5"]
P_FLOATS = [[0, 1.0, 2.0], [10.0, 11.0, 12.0], [20.0, 21.0, 22.0], [30.0, 31.0, 32.0]]


def test_tf_gather_scalar_index_is_scalar_indexing():
    # params[3].numpy() -> b'p3'; tf.gather(params, 3).numpy() -> b'p3'
    root = Scope.new_root_scope()
    params = Const(root, P_STRINGS)
    out = run(root, gather(root, params, 3))
    assert out.shape == () and out.dtype == object
    assert out[()] == b"p3"
    assert out[()] == np.asarray(run(root, params))[3]


def test_tf_gather_vector_of_indices():
    root = Scope.new_root_scope()
    indices = [2, 0, 2, 5]
    out = run(root, gather(root, Const(root, P_STRINGS), indices))
    assert_array_same(out, np.array([b"p2", b"p0", b"p2", b"p5"], dtype=object))


def test_tf_gather_indices_of_any_shape():
    root = Scope.new_root_scope()
    out = run(root, gather(root, Const(root, P_STRINGS), [[2, 0], [2, 5]]))
    assert_array_same(out, np.array([[b"p2", b"p0"], [b"p2", b"p5"]], dtype=object))


def test_tf_gather_rows_then_columns():
    root = Scope.new_root_scope()
    params = Const(root, P_FLOATS)
    rows = run(root, gather(root, params, indices=[3, 1]))
    assert_array_same(rows, np.array([[30.0, 31.0, 32.0], [10.0, 11.0, 12.0]], dtype=np.float32))
    cols = run(root, gather(root, params, indices=[2, 1], axis=1))
    want = np.array([[2.0, 1.0], [12.0, 11.0], [22.0, 21.0], [32.0, 31.0]], dtype=np.float32)
    assert_array_same(cols, want)


def result_shape(p_shape, i_shape, axis=0):  # the document's function, verbatim
    return p_shape[:axis] + i_shape + p_shape[axis + 1 :]


@pytest.mark.parametrize(
    "i_shape, expected", [([], [1, 3]), ([7], [1, 7, 3]), ([7, 5], [1, 7, 5, 3])]
)
def test_tf_gather_result_shape_examples(i_shape, expected):
    assert result_shape([1, 2, 3], i_shape, axis=1) == expected
    root = Scope.new_root_scope()
    params = Placeholder(root, minigraph.float32, shape=[1, 2, 3])
    indices = Placeholder(root, minigraph.int32, shape=i_shape)
    g = gather(root, params, indices, axis=1)
    assert g.shape.as_list() == expected
    feed = {params: sample(minigraph.float32, (1, 2, 3)), indices: np.ones(i_shape, np.int32)}
    assert list(run(root, g, feed).shape) == expected


def test_tf_gather_shape_examples_at_construction():
    root = Scope.new_root_scope()
    params = Const(root, P_FLOATS)
    assert params.shape.as_list() == [4, 3]
    indices = Const(root, [[0, 2]])
    assert gather(root, params, indices=indices, axis=0).shape.as_list() == [1, 2, 3]
    assert gather(root, params, indices=indices, axis=1).shape.as_list() == [4, 1, 2]


def test_tf_gather_axis_2_example_and_slice_identity():
    rng = np.random.default_rng(7)
    params_value = rng.normal(size=(5, 6, 7, 8)).astype(np.float32)
    indices_value = rng.integers(0, 7, size=(10, 11)).astype(np.int32)
    root = Scope.new_root_scope()
    params = Const(root, params_value)
    indices = Const(root, indices_value)
    result = gather(root, params, indices, axis=2)
    assert result.shape.as_list() == [5, 6, 10, 11, 8]
    out = run(root, result)
    assert list(out.shape) == [5, 6, 10, 11, 8]
    # For any location in indices: result[:, :, a, b, :] == params[:, :, indices[a, b], :]
    a, b = 0, 1
    assert bool(np.all(out[:, :, a, b, :] == params_value[:, :, indices_value[a, b], :]))
    for a in range(10):
        for b in range(11):
            assert np.array_equal(out[:, :, a, b, :], params_value[:, :, indices_value[a, b], :])


BATCH_PARAMS = [[0, 0, 1, 0, 2], [3, 0, 0, 0, 4], [0, 5, 0, 6, 0]]
BATCH_INDICES = [[2, 4], [0, 4], [1, 3]]
BATCH_EXPECTED = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int32)


def test_tf_gather_batch_dims_1():
    root = Scope.new_root_scope()
    params = Const(root, BATCH_PARAMS)
    indices = Const(root, BATCH_INDICES)
    out = run(root, gather(root, params, indices, axis=1, batch_dims=1))
    assert_array_same(out, BATCH_EXPECTED)


def test_tf_gather_manually_batched_gather():
    root = Scope.new_root_scope()

    def manually_batched_gather(params, indices, axis):
        batch_dims = 1
        result = []
        for p, i in zip(params, indices):
            r = gather(root, Const(root, p), Const(root, i), axis=axis - batch_dims)
            result.append(run(root, r))
        return np.stack(result)

    out = manually_batched_gather(BATCH_PARAMS, BATCH_INDICES, axis=1)
    assert_array_same(out, BATCH_EXPECTED)


def batched_result_shape(p_shape, i_shape, axis=0, batch_dims=0):  # verbatim
    return p_shape[:axis] + i_shape[batch_dims:] + p_shape[axis + 1 :]


def test_tf_gather_batched_result_shape():
    root = Scope.new_root_scope()
    params = Const(root, BATCH_PARAMS)
    indices = Const(root, BATCH_INDICES)
    shape = batched_result_shape(
        p_shape=params.shape.as_list(), i_shape=indices.shape.as_list(), axis=1, batch_dims=1
    )
    assert shape == [3, 2]
    assert gather(root, params, indices, axis=1, batch_dims=1).shape.as_list() == [3, 2]


def test_tf_gather_batch_dims_minus_one_with_argsort_indices():
    """'tf.gather(values, indices, batch_dims=-1)' with argsort/top_k indices."""
    values = np.array([[3, 1, 2], [9, 7, 8], [4, 6, 5]], np.int32)
    order = np.argsort(values, axis=-1).astype(np.int32)
    root = Scope.new_root_scope()
    g = gather(root, values, order, batch_dims=-1)
    assert g.shape.as_list() == [3, 3]
    assert_array_same(run(root, g), np.sort(values, axis=-1))
    top2 = order[:, ::-1][:, :2]
    assert_array_same(
        run(root, gather(root, values, top2, batch_dims=-1)),
        np.array([[3, 2], [9, 8], [6, 5]], np.int32),
    )


def test_tf_gather_signature_defaults():
    """tf.gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    axis defaults to the first non-batch axis; name names the node."""
    root = Scope.new_root_scope()
    params = Const(root, np.arange(12).reshape(3, 4))
    g = gather(root, params, [[1], [2], [0]], batch_dims=1, name="picked")
    assert g.operation.name == "picked"
    assert int(np.asarray(run(root, g.operation.inputs[2]))) == 1  # axis = batch_dims
    assert_array_same(run(root, g), np.array([[1], [6], [8]]))
    plain = gather(root, params, [2, 0])
    assert int(np.asarray(run(root, plain.operation.inputs[2]))) == 0
    assert_array_same(run(root, plain), np.array([[8, 9, 10, 11], [0, 1, 2, 3]]))


# -- tf.raw_ops.GatherV2 and the Java Gather op ------------------------------------------------


def test_raw_gather_v2_signature():
    """tf.raw_ops.GatherV2(params, indices, axis, batch_dims=0, name=None)."""
    sig = inspect.signature(GatherV2)
    assert list(sig.parameters)[:4] == ["scope", "params", "indices", "axis"]
    assert sig.parameters["batch_dims"].default == 0
    assert sig.parameters["batch_dims"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["bad_indices_policy"].default == ""
    text = minigraph.registry.signature("GatherV2")
    assert text.startswith("GatherV2(params: Tparams, indices: Tindices, axis: Taxis)")
    assert "-> output: Tparams" in text


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_raw_gather_v2_scalar_indices(axis):
    """Scalar indices: output is rank(params) - 1,
    output[a_0, ..., a_n, b_0, ..., b_n] = params[a_0, ..., a_n, indices, b_0, ..., b_n]."""
    params = sample(minigraph.int32, (2, 3, 4))
    a = axis % 3
    index = params.shape[a] - 1
    root = Scope.new_root_scope()
    g = GatherV2(root, params, np.int32(index), axis)
    out = run(root, g)
    assert out.ndim == params.ndim - 1
    assert g.shape.as_list() == list(out.shape)
    for pos in np.ndindex(*out.shape):
        assert out[pos] == params[pos[:a] + (index,) + pos[a:]]


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_raw_gather_v2_vector_indices(axis):
    """Vector indices: output is rank(params),
    output[a_0, ..., a_n, i, b_0, ..., b_n] = params[a_0, ..., a_n, indices[i], b_0, ..., b_n]."""
    params = sample(minigraph.float64, (2, 3, 4), seed=1)
    a = axis % 3
    indices = np.array([1, 0, 1, 1, 0], np.int64)
    root = Scope.new_root_scope()
    out = run(root, GatherV2(root, params, indices, axis))
    assert out.ndim == params.ndim
    for pos in np.ndindex(*out.shape):
        i = pos[a]
        assert out[pos] == params[pos[:a] + (indices[i],) + pos[a + 1 :]]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_raw_gather_v2_higher_rank_indices(axis):
    """Higher rank indices: output is rank(params) + rank(indices) - 1, output[a.., i, ..., j,
    b..] = params[a.., indices[i, ..., j], b..]."""
    params = sample(minigraph.string, (2, 3), seed=2)
    a = axis % 2
    indices = np.array([[[0, 1], [1, 1]], [[1, 0], [0, 0]]], np.int16)
    root = Scope.new_root_scope()
    out = run(root, GatherV2(root, params, indices, axis))
    assert out.ndim == params.ndim + indices.ndim - 1
    for pos in np.ndindex(*out.shape):
        ij = pos[a : a + 3]
        assert out[pos] == params[pos[:a] + (indices[ij],) + pos[a + 3 :]]


def test_raw_gather_v2_documented_output_shape_with_batch_dims():
    """params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]."""
    root = Scope.new_root_scope()
    params = Placeholder(root, minigraph.float32, shape=[2, 3, 4, 5])
    indices = Placeholder(root, minigraph.int64, shape=[2, 3, 6])
    g = GatherV2(root, params, indices, 2, batch_dims=2)
    assert g.shape.as_list() == [2, 3] + [6] + [5]


@pytest.mark.usefixtures("cpu_only")  # the CPU half assumes CPU placement
def test_raw_gather_v2_documented_cpu_error_gpu_zero():
    params = np.array([10, 20, 30], np.int64)
    root = Scope.new_root_scope()
    g = GatherV2(root.with_op_name("g"), params, [2, 3], 0)
    with pytest.raises(InvalidArgumentError, match=msg("indices[1] = 3 is not in [0, 3)")):
        run(root, g)
    with simulated_gpus(1):
        assert_array_same(run(root, g), np.array([30, 0], np.int64))


def test_java_gather_create_with_batch_dims_option():
    """Gather.create(scope, params, indices, axis, Gather.batchDims(...)): the Java name of
    GatherV2, whose nodes are called "Gather"."""
    root = Scope.new_root_scope()
    g = Gather(root, Const(root, BATCH_PARAMS), Const(root, BATCH_INDICES), 1, batch_dims=1)
    assert g.operation.type == "GatherV2"
    assert g.operation.name == "Gather"
    assert g.operation.get_attr("batch_dims") == 1
    assert_array_same(run(root, g.output), BATCH_EXPECTED)
    # output(): params.shape[:axis] + indices.shape + params.shape[axis + 1:] (batch_dims=0)
    h = Gather(root, Const(root, P_FLOATS), Const(root, [[0, 2]]), 1)
    assert h.operation.name == "Gather_1"
    assert h.output.shape.as_list() == [4] + [1, 2] + []
    assert h.node() is h.operation


def test_raw_gather_v2_int16_indices_and_int64_axis():
    """Indices: int16, int32 or int64; axis: int32 or int64."""
    root = Scope.new_root_scope()
    params = Const(root, P_FLOATS)
    g = GatherV2(root, params, np.array([2, 1], np.int16), np.int64(1))
    assert g.operation.get_attr("Tindices") == minigraph.int16
    assert g.operation.get_attr("Taxis") == minigraph.int64
    want = np.array([[2.0, 1.0], [12.0, 11.0], [22.0, 21.0], [32.0, 31.0]], dtype=np.float32)
    assert_array_same(run(root, g), want)
