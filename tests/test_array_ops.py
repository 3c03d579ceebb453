"""The array ops' values: TensorFlow's documented examples (tf.strided_slice, tf.slice,
tf.stack, tf.unstack, tf.transpose, tf.expand_dims, tf.squeeze, tf.fill, tf.zeros_like,
tf.ones_like, tf.tile, tf.where, tf.broadcast_to, tf.one_hot, tf.rank) literally, every dtype
each op takes, 0-d and empty tensors, and the static shapes the shape functions give from
constant, partially known and unknown inputs (the shapes TF 2.21 infers for the same graphs;
tests/test_array_tf.py checks them against TF itself).
"""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import ALL_DTYPES, sample

import minigraph as mg
import ops  # noqa: F401 - the whole library, as users import it
from minigraph import Placeholder, Scope, Session, TensorShape
from ops import array as A


def run(scope: Scope, fetches, feeds=None):
    return Session(scope).run(fetches, feeds or {})


@pytest.fixture
def root():
    return Scope.new_root_scope()


def ph(scope, dtype, shape, name=None):
    s = scope.with_op_name(name) if name else scope
    return Placeholder(s, dtype, shape=shape).output


T = np.array([[[1, 1, 1], [2, 2, 2]], [[3, 3, 3], [4, 4, 4]], [[5, 5, 5], [6, 6, 6]]], np.int32)


# -- TF's documented examples ---------------------------------------------------------------


def test_strided_slice_doc_examples(root):
    got = run(root, [
        A.StridedSlice(root, T, [1, 0, 0], [2, 1, 3], [1, 1, 1]),
        A.StridedSlice(root, T, [1, 0, 0], [2, 2, 3], [1, 1, 1]),
        A.StridedSlice(root, T, [1, -1, 0], [2, -3, 3], [1, -1, 1]),
    ])  # fmt: skip
    assert got[0].tolist() == [[[3, 3, 3]]]
    assert got[1].tolist() == [[[3, 3, 3], [4, 4, 4]]]
    assert got[2].tolist() == [[[4, 4, 4], [3, 3, 3]]]


def test_strided_slice_doc_equivalences(root):
    # foo[5:,:,:3] on 7x8x9 is foo[5:7,0:8,0:3]; foo[::-1] reverses; foo[3:5,...,4:5] on
    # 10x3x3x10 is foo[3:5,:,:,4:5]; foo[:4, newaxis, :2] on a matrix has shape (4, 1, 2);
    # foo[:, 3, :] has shrink_axis_mask 2.
    foo = np.arange(7 * 8 * 9).reshape(7, 8, 9)
    a = A.StridedSlice(root, foo, [5, 0, 0], [0, 0, 3], [1, 1, 1], end_mask=3, begin_mask=6)
    b = A.StridedSlice(root, foo, [5, 0, 0], [7, 8, 3], [1, 1, 1])
    eight = np.arange(8)
    rev = A.StridedSlice(root, eight, [0], [0], [-1], begin_mask=1, end_mask=1)
    big = np.arange(10 * 3 * 3 * 10).reshape(10, 3, 3, 10)
    c = A.StridedSlice(root, big, [3, 0, 4], [5, 0, 5], [1, 1, 1], ellipsis_mask=2)
    d = A.StridedSlice(root, big, [3, 0, 0, 4], [5, 3, 3, 5], [1, 1, 1, 1])
    e = A.StridedSlice(root, foo[0], [0, 0, 0], [4, 0, 2], [1, 1, 1], new_axis_mask=2)
    with root.as_default():
        g = mg.Const(root, foo).output[:, 3, :]
    assert e.shape == TensorShape([4, 1, 2]) and g.op.get_attr("shrink_axis_mask") == 2
    va, vb, vrev, vc, vd, ve, vg = run(root, [a, b, rev, c, d, e, g])
    np.testing.assert_array_equal(va, vb)
    assert vrev.tolist() == eight[::-1].tolist()
    np.testing.assert_array_equal(vc, vd)
    assert ve.shape == (4, 1, 2)
    np.testing.assert_array_equal(vg, foo[:, 3, :])


def test_slice_doc_examples(root):
    got = run(root, [
        A.Slice(root, T, [1, 0, 0], [1, 1, 3]),
        A.Slice(root, T, [1, 0, 0], [1, 2, 3]),
        A.Slice(root, T, [1, 0, 0], [2, 1, 3]),
    ])  # fmt: skip
    assert got[0].tolist() == [[[3, 3, 3]]]
    assert got[1].tolist() == [[[3, 3, 3], [4, 4, 4]]]
    assert got[2].tolist() == [[[3, 3, 3]], [[5, 5, 5]]]


def test_stack_and_unstack_doc_examples(root):
    x, y, z = [1, 4], [2, 5], [3, 6]
    s0, s1 = run(root, [A.Pack(root, [x, y, z]), A.Pack(root, [x, y, z], axis=1)])
    assert s0.tolist() == [[1, 4], [2, 5], [3, 6]] and s0.dtype == np.int32
    assert s1.tolist() == [[1, 2, 3], [4, 5, 6]]
    m = A.Reshape(root, mg.Const(root, np.arange(12, dtype=np.int32)), [3, 4])
    p, q, r = A.Unpack(root, m, 3).outputs
    assert p.shape.as_list() == [4]
    i, j, k, last = A.Unpack(root, m, 4, axis=1).outputs
    assert i.shape.as_list() == [3]
    back = A.Pack(root, [i, j, k, last], axis=1)
    t = np.random.default_rng(0).normal(size=[2, 3, 4, 5]).astype(np.float32)
    items = A.Unpack(root, t, 4, axis=2).outputs
    assert len(items) == 4 and items[0].shape.as_list() == [2, 3, 5]
    got = run(root, [m, back, *items])
    np.testing.assert_array_equal(got[0], got[1])
    for n in range(4):
        np.testing.assert_array_equal(got[2 + n], t[:, :, n, :])


def test_transpose_doc_examples(root):
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    x3 = np.array([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]], np.int32)
    a, b = run(root, [A.Transpose(root, x, [1, 0]), A.Transpose(root, x3, [0, 2, 1])])
    assert a.tolist() == [[1, 4], [2, 5], [3, 6]]
    assert b.tolist() == [[[1, 4], [2, 5], [3, 6]], [[7, 10], [8, 11], [9, 12]]]


def test_expand_dims_and_squeeze_doc_examples(root):
    image = A.Fill(root, [10, 10, 3], np.float32(0))
    assert A.ExpandDims(root, image, 0).shape.as_list() == [1, 10, 10, 3]
    assert A.ExpandDims(root, image, 1).shape.as_list() == [10, 1, 10, 3]
    assert A.ExpandDims(root, image, -1).shape.as_list() == [10, 10, 3, 1]
    t = np.zeros([1, 2, 1, 3, 1, 1], np.float32)
    all_ones, some = A.Squeeze(root, t), A.Squeeze(root, t, squeeze_dims=[2, 4])
    assert [v.shape for v in run(root, [all_ones, some])] == [(2, 3), (1, 2, 3, 1)]
    x = ph(root, mg.float32, [None, 1, 2])
    assert A.Squeeze(root, x, squeeze_dims=[1]).shape == TensorShape([None, 2])
    assert A.Squeeze(root, x).shape == TensorShape(None)


def test_fill_zeros_like_ones_like_doc_examples(root):
    tensor = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    fill, zeros, ones = run(root, [
        A.Fill(root, [2, 3], 9), A.ZerosLike(root, tensor), A.OnesLike(root, tensor)
    ])  # fmt: skip
    assert fill.tolist() == [[9, 9, 9], [9, 9, 9]] and fill.dtype == np.int32
    assert zeros.tolist() == [[0, 0, 0], [0, 0, 0]] and zeros.dtype == np.int32
    assert ones.tolist() == [[1, 1, 1], [1, 1, 1]] and ones.dtype == np.int32


def test_tile_doc_examples(root):
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    b, c, d = run(root, [A.Tile(root, a, [1, 2]), A.Tile(root, a, [2, 1]), A.Tile(root, a, [2, 2])])
    assert b.tolist() == [[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]]
    assert c.tolist() == [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]]
    assert d.tolist() == [[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]] * 2


def test_select_v2_doc_examples(root):
    tf_ = [True, False, False, True]
    got = run(root, [
        A.SelectV2(root, tf_, [1, 2, 3, 4], [100, 200, 300, 400]),
        A.SelectV2(root, tf_, [1, 2, 3, 4], [100]),
        A.SelectV2(root, [[True, False], [False, True]], [[1, 2], [3, 4]], 100),
        A.SelectV2(root, [[True, False], [False, True]], 1, 100),
        A.SelectV2(root, True, [1, 2, 3, 4], 100),
        A.SelectV2(root, False, [1, 2, 3, 4], 100),
        A.SelectV2(root, [True, False, True], [[1, 2, 3], [4, 5, 6], [7, 8, 9]],
                   [[100], [200], [300]]),
    ])  # fmt: skip
    assert got[0].tolist() == [1, 200, 300, 4] and got[0].dtype == np.int32
    assert got[1].tolist() == [1, 100, 100, 4]
    assert got[2].tolist() == [[1, 100], [100, 4]]
    assert got[3].tolist() == [[1, 100], [100, 1]]
    assert got[4].tolist() == [1, 2, 3, 4]
    assert got[5].tolist() == [100, 100, 100, 100]
    assert got[6].tolist() == [[1, 100, 3], [4, 200, 6], [7, 300, 9]]


def test_select_chooses_whole_tensors_rows_or_elements(root):
    # TF 1's tf.where(cond, x, y) (raw op Select): no broadcasting beyond these three forms.
    t = np.array([[1, 2], [3, 4]], np.int32)
    e = np.array([[5, 6], [7, 8]], np.int32)
    whole, rows, each = run(root, [
        A.Select(root, False, t, e), A.Select(root, [True, False], t, e),
        A.Select(root, [[True, False], [False, True]], t, e),
    ])  # fmt: skip
    assert whole.tolist() == e.tolist()
    assert rows.tolist() == [[1, 2], [7, 8]]
    assert each.tolist() == [[1, 6], [7, 4]]
    x = ph(root, mg.float32, [None, 3])
    y = ph(root, mg.float32, [2, None])
    assert A.Select(root, ph(root, mg.bool_, [None]), x, y).shape == TensorShape([2, 3])
    assert A.Select(root, ph(root, mg.bool_, None), x, y).shape == TensorShape([2, 3])


def test_broadcast_to_doc_examples(root):
    a, b = run(root, [
        A.BroadcastTo(root, [[1, 2, 3]], [2, 3]), A.BroadcastTo(root, [1, 2, 3], [2, 3])
    ])  # fmt: skip
    assert a.tolist() == b.tolist() == [[1, 2, 3], [1, 2, 3]]


def test_one_hot_doc_examples(root):
    got = run(root, [
        A.OneHot(root, [0, 1, 2], 3, 1.0, 0.0),
        A.OneHot(root, [0, 2, -1, 1], 3, 5.0, 0.0, axis=-1),
        A.OneHot(root, [[0, 2], [1, -1]], 3, 1.0, 0.0, axis=-1),
    ])  # fmt: skip
    assert got[0].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]] and got[0].dtype == np.float32
    assert got[1].tolist() == [[5, 0, 0], [0, 0, 5], [0, 0, 0], [0, 5, 0]]
    assert got[2].tolist() == [[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 0, 0]]]


def test_one_hot_output_shapes_per_axis_as_documented(root):
    # features x depth (axis -1), depth x features (axis 0); batch x features x depth,
    # batch x depth x features (axis 1), depth x batch x features (axis 0).
    f = ph(root, mg.int64, [5])
    b = ph(root, mg.int64, [2, 5])
    shapes = [A.OneHot(root, f, 3, 1.0, 0.0).shape, A.OneHot(root, f, 3, 1.0, 0.0, axis=0).shape,
              A.OneHot(root, b, 3, 1.0, 0.0).shape, A.OneHot(root, b, 3, 1.0, 0.0, axis=1).shape,
              A.OneHot(root, b, 3, 1.0, 0.0, axis=0).shape]  # fmt: skip
    assert [s.as_list() for s in shapes] == [[5, 3], [3, 5], [2, 5, 3], [2, 3, 5], [3, 2, 5]]
    scalar = A.OneHot(root, np.int64(1), 4, 1.0, 0.0)
    assert scalar.shape == TensorShape([4]) and run(root, scalar).tolist() == [0, 1, 0, 0]


def test_rank_and_stop_gradient(root):
    x = ph(root, mg.int32, None)
    rank, same = A.Rank(root, x), A.StopGradient(root, x)
    assert rank.shape == TensorShape([]) and rank.dtype is mg.int32
    got_rank, got_same = run(root, [rank, same], {x: T})
    assert got_rank.tolist() == 3 and got_rank.dtype == np.int32
    np.testing.assert_array_equal(got_same, T)


# -- builders, as TF's C++ wrappers ----------------------------------------------------------


def test_builders_take_required_attrs_positionally_and_the_rest_by_keyword(root):
    x = ph(root, mg.float32, [None, 3])
    parts = A.Unpack(root, x, 3, axis=1)
    assert len(parts.outputs) == 3 and parts[1].shape == TensorShape([None])
    hot = A.OneHot(root, np.array([1, 0], np.int64), 2, np.float64(1), np.float64(0), axis=0)
    op = hot.operation
    assert (op.get_attr("axis"), op.get_attr("T"), op.get_attr("TI")) == (0, mg.float64, mg.int64)
    assert A.OneHot(root, indices=[1], depth=2, on_value=1.0, off_value=0.0).shape.as_list() == [
        1,
        2,
    ]
    assert A.Squeeze(root, [[1.0]], squeeze_dims=[0]).shape.as_list() == [1]
    assert A.Pack(root, values=[x, x], axis=-1).operation.get_attr("N") == 2
    literal = A.SelectV2(root, [True, False], [1.5, 2.5], 0)  # 0 takes t's dtype, float32
    assert literal.dtype is mg.float32 and run(root, literal).tolist() == [1.5, 0.0]


def test_op_defs_are_tfs():
    # tests/test_array_tf.py compares every field with TF's registered OpDefs.
    def attr(op, name):
        return mg.registry.get_op_def(op).attr(name)

    assert str(attr("Squeeze", "squeeze_dims")) == "AttrDef(squeeze_dims: list(int) >= 0 = [])"
    assert str(attr("OneHot", "TI")) == "AttrDef(TI: {uint8, int8, int32, int64} = int64)"
    assert [a.name for a in mg.registry.get_op_def("OneHot").attrs] == ["axis", "T", "TI"]
    assert str(attr("StridedSlice", "Index")) == "AttrDef(Index: {int16, int32, int64})"
    assert str(attr("Unpack", "num")) == "AttrDef(num: int >= 0)"
    for mask in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"):
        assert str(attr("StridedSlice", mask)) == f"AttrDef({mask}: int = 0)"
    ones = attr("OnesLike", "T").allowed
    assert mg.string not in ones and len(ones) == len(ALL_DTYPES) - 1


# -- every dtype ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_every_op_takes_every_dtype(dtype, root):
    x_np = sample(dtype, (2, 3), 1)
    x = ph(root, dtype, [2, 3], "x")
    c = ph(root, mg.bool_, [3], "c")
    c_np = np.array([True, False, True])
    on_off = sample(dtype, (2,), 5)
    fetches = {
        "expand": (A.ExpandDims(root, x, 1), x_np[:, None]),
        "squeeze": (A.Squeeze(root, A.ExpandDims(root, x, 0)), x_np),
        "transpose": (A.Transpose(root, x, [1, 0]), x_np.T),
        "strided": (A.StridedSlice(root, x, [1, 2], [0, 0], [-1, -2], end_mask=3),
                    x_np[1::-1, 2::-2]),
        "getitem": (x[-1, None, ::2], x_np[-1, None, ::2]),
        "slice": (A.Slice(root, x, [0, 1], [-1, 2]), x_np[:, 1:3]),
        "pack": (A.Pack(root, [x, x], axis=2), np.stack([x_np, x_np], axis=2)),
        "unpack": (A.Unpack(root, x, 3, axis=1)[2], x_np[:, 2]),
        "tile": (A.Tile(root, x, [2, 1]), np.concatenate([x_np, x_np])),
        "broadcast": (A.BroadcastTo(root, x, [2, 2, 3]), np.stack([x_np, x_np])),
        "select": (A.SelectV2(root, c, x, A.ZerosLike(root, x)),
                   np.where(c_np, x_np, np.zeros_like(x_np) if not dtype.is_string else b"")),
        "fill": (A.Fill(root, [2], x[0, 0]), np.array([x_np[0, 0]] * 2, dtype=x_np.dtype)),
        "zeros": (A.ZerosLike(root, x), np.full((2, 3), b"" if dtype.is_string else 0, x_np.dtype)),
        "one_hot": (A.OneHot(root, [1, -1, 0], 2, on_off[0], on_off[1]),
                    np.array([[on_off[1], on_off[0]], [on_off[1]] * 2, [on_off[0], on_off[1]]],
                             dtype=x_np.dtype)),
        "stop": (A.StopGradient(root, x), x_np),
        "select_v1": (A.Select(root, [False, True], x, x[::-1]), np.stack([x_np[1], x_np[1]])),
        "rank": (A.Rank(root, x), np.int32(2)),
        "concat": (A.ConcatV2(root, [x, x], 1), np.concatenate([x_np, x_np], 1)),
        "reshape": (A.Reshape(root, x, [-1]), x_np.reshape(-1)),
    }  # fmt: skip
    if not dtype.is_string:
        fetches["ones"] = (A.OnesLike(root, x), np.ones((2, 3), x_np.dtype))
    got = run(root, [f for f, _ in fetches.values()], {x: x_np, c: c_np})
    for (name, (out, want)), value in zip(fetches.items(), got):
        want = np.asarray(want)
        assert value.dtype == want.dtype, name
        assert value.shape == want.shape, name
        assert out.shape.is_compatible_with(value.shape), name
        np.testing.assert_array_equal(value, want, err_msg=name)


def test_tile_takes_uint16_which_tfs_kernel_refuses(root):
    got = run(root, A.Tile(root, np.array([1, 2], np.uint16), [2]))
    assert got.dtype == np.uint16 and got.tolist() == [1, 2, 1, 2]


# -- 0-d, empty, NaN ---------------------------------------------------------------------------


def test_scalars_and_empty_tensors(root):
    s = np.float32(2.5)
    empty = np.zeros((0, 3), np.float32)
    cases = {
        "expand scalar": (A.ExpandDims(root, s, 0), np.array([2.5], np.float32)),
        "squeeze to scalar": (A.Squeeze(root, [[7]]), np.int32(7)),
        "transpose scalar": (A.Transpose(root, s, np.zeros(0, np.int32)), s),
        "slice scalar": (A.Slice(root, s, np.zeros(0, np.int32), np.zeros(0, np.int32)), s),
        "strided scalar": (A.StridedSlice(root, s, np.zeros(0, np.int32), np.zeros(0, np.int32),
                                          np.zeros(0, np.int32)), s),
        "index to scalar": (A.StridedSlice(root, [[1, 2], [3, 4]], [1, 0], [2, 1], [1, 1],
                                           shrink_axis_mask=3), np.int32(3)),
        "pack scalars": (A.Pack(root, [s, s]), np.array([2.5, 2.5], np.float32)),
        "unpack to scalars": (A.Unpack(root, [1, 2], 2)[1], np.int32(2)),
        "tile scalar": (A.Tile(root, s, np.zeros(0, np.int32)), s),
        "tile empty": (A.Tile(root, empty, [3, 2]), np.zeros((0, 6), np.float32)),
        "tile by 0": (A.Tile(root, [[1, 2]], [0, 3]), np.zeros((0, 6), np.int32)),
        "fill scalar": (A.Fill(root, np.zeros(0, np.int32), s), s),
        "fill empty": (A.Fill(root, [0, 4], s), np.zeros((0, 4), np.float32)),
        "zeros scalar": (A.ZerosLike(root, s), np.float32(0)),
        "ones empty": (A.OnesLike(root, empty), empty),
        "broadcast scalar to empty": (A.BroadcastTo(root, s, [0, 3]), empty),
        "broadcast 1 to 0": (A.BroadcastTo(root, [1.0], [0]), np.zeros(0, np.float32)),
        "select scalars": (A.SelectV2(root, False, s, np.float32(1)), np.float32(1)),
        "select empty": (A.SelectV2(root, np.zeros((0, 1), bool), empty, s), empty),
        "one_hot depth 0": (A.OneHot(root, [1, 2], 0, 1.0, 0.0), np.zeros((2, 0), np.float32)),
        "one_hot of nothing": (A.OneHot(root, np.zeros(0, np.int64), 2**31 - 1, 1.0, 0.0),
                               np.zeros((0, 2**31 - 1), np.float32)),
        "strided empty": (A.StridedSlice(root, empty, [1], [5], [1]), np.zeros((0, 3), np.float32)),
        "slice empty": (A.Slice(root, empty, [0, 1], [0, -1]), np.zeros((0, 2), np.float32)),
        "unpack none": (A.Pack(root, [A.ExpandDims(root, empty, 0)], axis=0),
                        np.zeros((1, 1, 0, 3), np.float32)),
        "rank scalar": (A.Rank(root, s), np.int32(0)),
    }  # fmt: skip
    got = run(root, [f for f, _ in cases.values()])
    for (name, (out, want)), value in zip(cases.items(), got):
        want = np.asarray(want)
        assert type(value) is np.ndarray, name  # 0-d results are arrays, not numpy scalars
        assert value.dtype == want.dtype and value.shape == want.shape, name
        assert out.shape == TensorShape(want.shape), name
        np.testing.assert_array_equal(value, want, err_msg=name)
    assert A.Unpack(root, empty, 0).outputs == ()


def test_nan_inf_and_extreme_values_pass_through_unchanged(root):
    special = np.array([np.nan, np.inf, -np.inf, -0.0, np.finfo(np.float32).max], np.float32)
    ints = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64)
    got = run(root, [
        A.Tile(root, special, [2]), A.Transpose(root, A.ExpandDims(root, special, 0), [1, 0]),
        A.SelectV2(root, [True] * 5, special, np.float32(0)), A.Fill(root, [2], np.float32("nan")),
        A.OneHot(root, [0], 2, np.float32("-inf"), np.float32("nan")), A.Pack(root, [ints, ints]),
        A.StridedSlice(root, ints, [-1], [0], [-1], end_mask=1),
    ])  # fmt: skip
    np.testing.assert_array_equal(got[0], np.concatenate([special, special]))
    assert np.signbit(got[0][3]) and np.signbit(got[2][3])  # -0.0 kept
    np.testing.assert_array_equal(got[1][:, 0], special)
    assert np.isnan(got[3]).all() and got[4][0, 0] == -np.inf and np.isnan(got[4][0, 1])
    assert got[5].tolist() == [ints.tolist()] * 2 and got[6].tolist() == ints[::-1].tolist()


# -- static shapes --------------------------------------------------------------------------

U = None  # an unknown dim


def _shape_cases(s: Scope) -> dict:
    x = ph(s, mg.float32, [U, 3, 4])
    xu = ph(s, mg.float32, None)
    v2 = ph(s, mg.int32, [2])
    v3 = ph(s, mg.int32, [3])
    vu = ph(s, mg.int32, [U])
    i = ph(s, mg.int32, [])
    return {
        # Fill: dims' values, else their count.
        "fill const": (A.Fill(s, [2, 0, 5], 1.0), [2, 0, 5]),
        "fill of 3 unknown dims": (A.Fill(s, v3, 1.0), [U, U, U]),
        "fill of unknown dims": (A.Fill(s, vu, 1.0), None),
        "fill of a huge but empty shape": (A.Fill(s, np.array([2**62, 0, 2**62]), 1.0),
                                           [2**62, 0, 2**62]),
        "zeros like": (A.ZerosLike(s, x), [U, 3, 4]),
        # ExpandDims: the dim's value, else just the rank (TF gives no rank).
        "expand": (A.ExpandDims(s, x, -2), [U, 3, 1, 4]),
        "expand [[1]]": (A.ExpandDims(s, x, [[1]]), [U, 1, 3, 4]),
        "expand unknown dim": (A.ExpandDims(s, x, i), [U, U, U, U]),
        "expand unknown rank": (A.ExpandDims(s, xu, 0), None),
        # Squeeze: unknown dims named are taken for 1s; unnamed ones hide the rank.
        "squeeze named unknown": (A.Squeeze(s, x, squeeze_dims=[0]), [3, 4]),
        "squeeze all, one unknown": (A.Squeeze(s, x), None),
        "squeeze all known": (A.Squeeze(s, ph(s, mg.float32, [1, 3, 1])), [3]),
        "squeeze duplicates": (A.Squeeze(s, ph(s, mg.float32, [1, 3, 1]), squeeze_dims=[0, 0, -3]),
                               [3, 1]),
        "squeeze unknown rank": (A.Squeeze(s, xu, squeeze_dims=[0]), None),
        # Transpose: perm's values, else the rank (from x, or perm's length).
        "transpose": (A.Transpose(s, x, [2, 0, 1]), [4, U, 3]),
        "transpose negative perm": (A.Transpose(s, x, [-1, -3, 1]), [4, U, 3]),
        "transpose unknown perm": (A.Transpose(s, x, v3), [U, U, U]),
        "transpose unknown x": (A.Transpose(s, xu, [1, 0, 2]), [U, U, U]),
        "transpose unknown both": (A.Transpose(s, xu, v3), [U, U, U]),
        "transpose one entry": (A.Transpose(s, xu, [0]), None),
        # Tile: multiples' values; 0 and 1 are exact even for unknown dims.
        "tile": (A.Tile(s, x, [0, 2, 1]), [0, 6, 4]),  # 0 times an unknown dim is 0
        "tile unknown dim by 2": (A.Tile(s, x, [2, 1, 1]), [U, 3, 4]),
        "tile unknown multiples": (A.Tile(s, x, v3), [U, U, U]),
        "tile unknown x": (A.Tile(s, xu, [2, 3]), [U, U]),
        "tile unknown x of 1s": (A.Tile(s, xu, v2), [U, U]),
        "tile unknown length": (A.Tile(s, xu, vu), None),
        # Slice: size's values; -1 is the dim minus begin when both are known.
        "slice": (A.Slice(s, x, [1, 1, 0], [-1, -1, 2]), [U, 2, 2]),
        "slice unknown begin": (A.Slice(s, x, v3, [2, -1, 1]), [2, U, 1]),
        "slice unknown size": (A.Slice(s, x, [0, 0, 0], v3), [U, U, U]),
        "slice unknown x": (A.Slice(s, xu, [0, 0], [2, 1]), [2, 1]),
        "slice unknown x, -1": (A.Slice(s, xu, [0, 0], [2, -1]), [2, U]),
        # Pack / Unpack.
        "pack merges": (A.Pack(s, [ph(s, mg.float32, [U, 3]), ph(s, mg.float32, [2, U])], axis=1),
                        [2, 2, 3]),
        "pack unknown": (A.Pack(s, [xu, ph(s, mg.float32, [2, U])], axis=-1), [2, U, 2]),
        "pack all unknown": (A.Pack(s, [xu, xu], axis=5), None),
        "unpack unknown dim": (A.Unpack(s, x, 2)[0], [3, 4]),
        "unpack unknown rank": (A.Unpack(s, xu, 2)[1], None),
        # BroadcastTo: shape's values, filled in from the input's dims above 1.
        "broadcast_to": (A.BroadcastTo(s, ph(s, mg.float32, [U]), [2, 3]), [2, 3]),
        "broadcast_to unknown shape": (A.BroadcastTo(s, ph(s, mg.float32, [U, 3]), v3), [U, U, 3]),
        "broadcast_to unknown count": (A.BroadcastTo(s, x, vu), None),
        # SelectV2: the broadcast of the three.
        "select": (A.SelectV2(s, ph(s, mg.bool_, [2, 1]), np.zeros(3, np.float32),
                              np.zeros([1, 1, 1], np.float32)), [1, 2, 3]),
        "select partial": (A.SelectV2(s, ph(s, mg.bool_, [U, 1]), ph(s, mg.float32, [U]),
                                      np.zeros(1, np.float32)), [U, U]),
        "select unknown": (A.SelectV2(s, ph(s, mg.bool_, None), x, x), None),
        # OneHot: depth's value.
        "one_hot": (A.OneHot(s, ph(s, mg.int32, [U, 2]), 5, 1.0, 0.0, axis=1), [U, 5, 2]),
        "one_hot unknown depth": (A.OneHot(s, ph(s, mg.int32, [2]), i, 1.0, 0.0), [2, U]),
        "one_hot unknown rank": (A.OneHot(s, ph(s, mg.int32, None), 3, 1.0, 0.0, axis=3), None),
        "rank": (A.Rank(s, xu), []),
        "stop_gradient": (A.StopGradient(s, x), [U, 3, 4]),
        # StridedSlice: constant bounds; unknown bounds leave masked, shrunk and new axes known.
        "strided": (A.StridedSlice(s, x, [1, 0, 0], [3, 2, 4], [1, 1, 2]), [U, 2, 2]),
        "strided shrink unknown dim": (A.StridedSlice(s, x, [5, 0, 0], [3, 2, 4], [1, 1, 2],
                                                      shrink_axis_mask=1), [2, 2]),
        "strided unknown bounds": (
            A.StridedSlice(s, x, v3, v3, [1, 1, -1], shrink_axis_mask=1, new_axis_mask=2,
                           begin_mask=4, end_mask=4), [1, 3, 4]),
        "strided unknown, masked": (
            A.StridedSlice(s, ph(s, mg.float32, [5, 3, 4]), v3, v3, [1, 2, -1], begin_mask=6,
                           end_mask=6), [U, 2, 4]),
        "strided unknown strides": (A.StridedSlice(s, x, [0], [1], v2[:1]), None),
        "strided unknown rank": (A.StridedSlice(s, xu, [0], [1], [1]), None),
        "strided unknown count": (A.StridedSlice(s, x, vu, vu, vu), None),
        "strided 31 new axes": (A.StridedSlice(s, np.zeros([2, 3]), [0] * 31, [1] * 31, [1] * 31,
                                               new_axis_mask=2**31 - 1), [1] * 31 + [2, 3]),
        "strided new and shrink": (A.StridedSlice(s, np.zeros([2, 3]), [0, 0], [1, 1], [1, 1],
                                                  new_axis_mask=1, shrink_axis_mask=1), [1, 1, 3]),
        "strided ellipsis and new": (A.StridedSlice(s, np.zeros([2, 3]), [0, 0, 0], [1, 1, 1],
                                                    [1, 1, 1], ellipsis_mask=2, new_axis_mask=5),
                                     [1, 2, 3, 1]),
        "getitem with a tensor": (x[i], [3, 4]),
        "getitem slice by a tensor": (x[:, i:], [U, U, 4]),
    }  # fmt: skip


def test_static_shapes_from_constant_partial_and_unknown_inputs(root):
    cases = _shape_cases(root)
    for name, (out, want) in cases.items():
        assert as_tensor(out).shape == TensorShape(want), name


def as_tensor(value):
    return value if isinstance(value, mg.Output) else value.output


# -- graphs TF writes with these ops --------------------------------------------------------


def test_tfs_lowered_batch_dims_gather_nd_imports_and_runs():
    # TF 2.21 lowers gather_nd(batch_dims=1) into StridedSlice, Tile, Transpose, Unpack, Pack,
    # Fill, Prod, ... (tests/data/make_tf_graphs.py wrote the file).
    from pathlib import Path

    graph_def = mg.read_graph(Path(__file__).parent / "data" / "gather_nd_batch_dims_lowered.pb")
    missing = {n.op for n in graph_def.node} - set(mg.registry.list_ops())
    if missing:
        pytest.skip(f"the op library lacks {sorted(missing)}")
    scope = Scope.new_root_scope()
    mg.import_graph_def(scope, graph_def, name="")
    params = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = scope.graph.operations[-1].outputs[0]
    got = Session(scope).run(out, {"params:0": params})
    np.testing.assert_array_equal(got, [params[0, 1], params[1, 2]])  # indices [[1], [2]]
