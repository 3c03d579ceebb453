"""IndexedSlices (sparse gradients): the value object, fetching it as an IndexedSlicesValue,
sparse and mixed aggregation in minigraph.gradients, and convert_to_tensor (densifying, and
its warning for large results). Test ops and their rules: tests/_grad_ops.py."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import warnings
from collections import namedtuple
from pathlib import Path

import _grad_ops as g
import numpy as np
import pytest

import minigraph as mg
import ops
from minigraph import IndexedSlices, IndexedSlicesValue, Placeholder, Scope, Session

F32 = mg.float32
ROOT = Path(__file__).resolve().parents[1]


def library(*names):
    import ops  # noqa: F401 - registers the library

    missing = [n for n in names if n not in mg.registry.list_ops()]
    return pytest.mark.skipif(bool(missing), reason=f"op library lacks {missing}")


@pytest.fixture
def root():
    return Scope.new_root_scope()


def ph(scope, name, shape=(), dtype=F32):
    return Placeholder(scope.with_op_name(name), dtype, list(shape)).output


def const(scope, value, dtype=None):
    return mg.Const(scope, np.asarray(value, dtype)).output


def run(scope, fetches, feeds=None):
    with Session(scope) as session:
        return session.run(fetches, feeds)


# -- the value object -----------------------------------------------------------------------------


def test_components_and_properties(root):
    values = ph(root.with_device("/device:CPU:0"), "values", [2, 3])
    indices = const(root, [4, 1], np.int64)
    shape = const(root, [5, 3], np.int64)
    s = IndexedSlices(values, indices, shape)
    assert (s.values, s.indices, s.dense_shape) == (values, indices, shape)
    assert s.dtype is F32 and s.graph is root.graph and s.op is values.op
    assert s.name == "values:0" and s.device == "/device:CPU:0"
    assert s.shape == mg.TensorShape([5, 3])
    assert "IndexedSlices(values='values:0', indices=" in repr(s)
    with pytest.raises(AttributeError, match="immutable"):
        s.values = values


def test_static_dense_shape(root):
    values = ph(root, "values", [None, 3])
    indices = ph(root, "indices", [None], mg.int32)
    assert IndexedSlices(values, indices).shape == mg.TensorShape(None)
    assert IndexedSlices(values, indices, ph(root, "d", [2], mg.int32)).shape == [None, 3]
    table = ph(root, "table", [7, 3])
    assert IndexedSlices(values, indices, ops.Shape(root, table)).shape == [7, 3]
    partial = ph(root, "partial", [None, 3])
    assert IndexedSlices(values, indices, ops.Shape(root, partial)).shape == [None, 3]
    assert IndexedSlices(values, indices, g.Shape(root, table)).shape == [None, 3]  # not Shape
    # A dense_shape of unknown length (params of unknown rank): what values know, or nothing.
    unknown_length = ph(root, "unknown_length", [None], mg.int64)
    assert IndexedSlices(values, indices, unknown_length).shape == [None, 3]
    anything = Placeholder(root.with_op_name("anything"), F32, None).output
    assert IndexedSlices(anything, indices, unknown_length).shape == mg.TensorShape(None)
    assert IndexedSlices(anything, indices, ops.Shape(root, anything)).shape.rank is None


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda r, v, i: IndexedSlices(np.ones((2, 3)), i), r"values must be an Output .* ndarray"),
        (lambda r, v, i: IndexedSlices(v, [0, 1]), r"indices must be an Output .* got list"),
        (lambda r, v, i: IndexedSlices(v, ph(r, "f", [2])), r"indices must be int32 or int64; got "
         r"float32"),
        (lambda r, v, i: IndexedSlices(v, i, ph(r, "s", [2], mg.int16)), r"dense_shape must be "
         r"int32 or int64"),
        (lambda r, v, i: IndexedSlices(ph(r, "scalar"), i), r"values must have rank >= 1"),
        (lambda r, v, i: IndexedSlices(v, ph(r, "m", [2, 1], mg.int32)), r"indices must be a "
         r"vector"),
        (lambda r, v, i: IndexedSlices(v, ph(r, "three", [3], mg.int32)), r"3 indices for 2 "
         r"slices"),
        (lambda r, v, i: IndexedSlices(v, i, ph(r, "s3", [3], mg.int32)), r"dense_shape 's3:0' has "
         r"3 dims but values have rank 2"),
        (lambda r, v, i: IndexedSlices(v, i, const(r, [5, 4], np.int32)), r"dense_shape \[5, 4\] "
         r"does not fit slices of shape \[3\]"),
        (lambda r, v, i: IndexedSlices(v, ph(Scope.new_root_scope(), "o", [2], mg.int32)),
         r"belongs to another graph"),
    ],
)  # fmt: skip
def test_construction_errors(root, make, match):
    values = ph(root, "v", [2, 3])
    indices = ph(root, "i", [2], mg.int32)
    with pytest.raises(mg.InvalidArgumentError, match=match):
        make(root, values, indices)


def test_it_has_no_truth_value_or_array(root):
    s = IndexedSlices(ph(root, "v", [2]), ph(root, "i", [2], mg.int32))
    with pytest.raises(TypeError, match="symbolic tensor"):
        bool(s)
    with pytest.raises(TypeError, match="symbolic tensor"):
        np.asarray(s)


# -- fetching -------------------------------------------------------------------------------------


def test_session_run_gives_an_indexed_slices_value(root):
    values = const(root, [[1.0, 2.0], [3.0, 4.0]], np.float32)
    indices = const(root, [2, 0], np.int32)
    shape = const(root, [3, 2], np.int32)
    s = IndexedSlices(values, indices, shape)
    got = run(root, s)
    assert isinstance(got, IndexedSlicesValue)
    np.testing.assert_array_equal(got.values, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(got.indices, [2, 0])
    np.testing.assert_array_equal(got.dense_shape, [3, 2])
    no_shape = run(root, IndexedSlices(values, indices))
    assert isinstance(no_shape, IndexedSlicesValue) and no_shape.dense_shape is None
    Pair = namedtuple("Pair", "sparse dense")
    nested = run(root, {"a": [s, values], "b": Pair(s, indices)})
    assert isinstance(nested["a"][0], IndexedSlicesValue)
    assert isinstance(nested["b"], Pair) and isinstance(nested["b"].sparse, IndexedSlicesValue)
    np.testing.assert_array_equal(nested["b"].dense, [2, 0])


# -- sparse gradients -----------------------------------------------------------------------------


def test_a_gather_gives_a_sparse_gradient(root):
    table = ph(root, "table", [4, 2])
    ids = const(root, [3, 1, 3], np.int32)
    rows = g.Gather(root, table, ids)
    (dt,) = mg.gradients(g.Sum(root, g.Square(root, rows)), table)
    assert isinstance(dt, IndexedSlices) and dt.indices is ids
    assert dt.shape == mg.TensorShape([4, 2])
    value = np.arange(8, dtype=np.float32).reshape(4, 2)
    got = run(root, dt, {table: value})
    np.testing.assert_array_equal(got.indices, [3, 1, 3])
    np.testing.assert_allclose(got.values, 2 * value[[3, 1, 3]])
    np.testing.assert_array_equal(got.dense_shape, [4, 2])


def test_sparse_gradients_that_meet_are_concatenated(root):
    table = ph(root, "table", [4, 2])
    a = g.Gather(root, table, const(root, [0, 1], np.int32))
    b = g.Gather(root, table, const(root, [1, 1, 3], np.int64))  # int64: all become int64
    y = g.Add(root, g.Sum(root, a), g.Scale(root, g.Sum(root, b), alpha=10.0))
    (dt,) = mg.gradients(y, table)
    assert isinstance(dt, IndexedSlices)
    assert dt.values.op.type == "ConcatV2" and dt.indices.op.type == "ConcatV2"
    assert dt.indices.dtype is mg.int64
    got = run(root, dt, {table: np.zeros((4, 2), np.float32)})
    np.testing.assert_array_equal(got.indices, [0, 1, 1, 1, 3])
    np.testing.assert_array_equal(got.values[:, 0], [1, 1, 10, 10, 10])


@library("UnsortedSegmentSum")
def test_a_sparse_gradient_meeting_a_dense_one_is_added_densely(root):
    table = ph(root, "table", [4, 2])
    rows = g.Gather(root, table, const(root, [3, 3, 0], np.int32))
    y = g.Add(root, g.Sum(root, rows), g.Sum(root, g.Square(root, table)))
    (dt,) = mg.gradients(y, table)
    assert isinstance(dt, mg.Output) and dt.op.type == "AddN"
    assert {t.op.type for t in dt.op.inputs} == {"UnsortedSegmentSum", "GradTestMul"}
    value = np.arange(8, dtype=np.float32).reshape(4, 2)
    expected = 2 * value
    expected[3] += 2
    expected[0] += 1
    np.testing.assert_allclose(run(root, dt, {table: value}), expected)


@library("UnsortedSegmentSum")
def test_a_rule_for_dense_gradients_gets_a_sparse_one_densified(root):
    p = ph(root, "p", [3, 2])
    table = g.Square(root.with_op_name("sq"), p)  # its rule multiplies: dense only
    rows = g.Gather(root, table, const(root, [2, 2], np.int32))
    (dp,) = mg.gradients(g.Sum(root, rows), p)
    assert dp.op.type == "GradTestMul"
    assert root.graph.get_operation("gradients/sq_grad/UnsortedSegmentSum")
    value = np.ones((3, 2), np.float32)
    np.testing.assert_allclose(run(root, dp, {p: value}), [[0, 0], [0, 0], [4, 4]])


def test_identity_passes_a_sparse_gradient_through(root):
    table = ph(root, "table", [3, 2])
    rows = g.Gather(root, mg.Identity(root, mg.Identity(root, table)), const(root, [1], np.int32))
    (dt,) = mg.gradients(g.Sum(root, rows), table)
    assert isinstance(dt, IndexedSlices)


def test_grad_ys_may_be_sparse(root):
    table = ph(root, "table", [3, 2])
    y = mg.Identity(root.with_op_name("y"), table)
    seed = IndexedSlices(
        const(root, [[1.0, 2.0]], np.float32), const(root, [2], np.int32),
        const(root, [3, 2], np.int32),
    )  # fmt: skip
    (dt,) = mg.gradients(y, table, grad_ys=seed)
    assert isinstance(dt, IndexedSlices)
    assert dt.values.op.name == "gradients/grad_ys_0_values"
    got = run(root, dt, {table: np.zeros((3, 2), np.float32)})
    np.testing.assert_array_equal(got.indices, [2])
    wrong = IndexedSlices(const(root, [[1.0, 2.0]], np.float64), const(root, [2], np.int32))
    with pytest.raises(mg.InvalidArgumentError, match="dtype float64"):
        mg.gradients(y, table, grad_ys=wrong)


def test_a_sparse_gradient_whose_slices_do_not_fit_is_refused(root):
    x = ph(root, "x", [3, 2])
    y = SparseBad(root.with_op_name("bad"), x)
    with pytest.raises(mg.InvalidArgumentError, match=r"sparse gradient slices of shape \[5\]"):
        mg.gradients(y, x)


SparseBad = mg.register_op(
    mg.OpDef("GradTestSparseBad", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
             shape_fn=lambda ctx: ctx.input_shapes[0])
)  # fmt: skip


@mg.register_gradient("GradTestSparseBad")
def _sparse_bad_grad(op, grad):
    s = mg.current_scope(op.graph)
    return IndexedSlices(const(s, np.ones((1, 5), np.float32)), const(s, [0], np.int32))


# -- convert_to_tensor ----------------------------------------------------------------------------


@library("UnsortedSegmentSum")
def test_convert_to_tensor_densifies_with_unsorted_segment_sum(root):
    values = const(root, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    s = IndexedSlices(values, const(root, [2, 0, 2], np.int32), const(root, [4, 2], np.int64))
    dense = mg.convert_to_tensor(s, name="dense")
    assert dense.op.type == "UnsortedSegmentSum" and dense.op.name == "dense"
    assert dense.shape == mg.TensorShape([4, 2])
    np.testing.assert_array_equal(run(root, dense), [[3, 4], [0, 0], [6, 8], [0, 0]])
    assert mg.convert_to_tensor(s, dtype=mg.float32).op.type == "UnsortedSegmentSum"


@library("UnsortedSegmentSum", "GatherV2")
def test_convert_to_tensor_with_a_dense_shape_known_at_run_time(root):
    values = const(root, [[1.0, 2.0]], np.float32)
    shape = ph(root, "shape", [2], mg.int32)
    dense = mg.convert_to_tensor(IndexedSlices(values, const(root, [1], np.int32), shape))
    assert dense.shape == mg.TensorShape([None, 2])
    np.testing.assert_array_equal(run(root, dense, {shape: [3, 2]}), [[0, 0], [1, 2], [0, 0]])


def test_convert_to_tensor_of_tensors_and_literals(root):
    x = ph(root, "x", [2])
    assert mg.convert_to_tensor(x) is x
    builder = mg.Identity(root, x)
    assert mg.convert_to_tensor(builder) is builder.output
    assert mg.convert_to_tensor(x, dtype="float32") is x
    c = mg.convert_to_tensor([1, 2], dtype=mg.int64, name="c", scope=root)
    assert c.op.type == "Const" and c.op.name == "c" and c.dtype is mg.int64


@pytest.mark.parametrize(
    "value, kwargs, match",
    [
        ("x", {"dtype": mg.int32}, r"Tensor conversion requested dtype int32 for Tensor with "
         r"dtype float32"),
        ("sparse", {"dtype": mg.float64}, r"Incompatible tensor conversion requested to `dtype` "
         r"float64 for IndexedSlices"),
        ("shapeless", {}, r"Tensor conversion requested for IndexedSlices without dense_shape"),
        (None, {}, r"None values not supported"),
        ("op", {}, r"cannot convert the Operation 'x' to a tensor"),
        ("split", {}, r"has 2 outputs"),
        ([1.0], {}, r"names no graph; pass scope="),
        ([1.5], {"dtype": mg.int32, "scope": True}, r"."),
        ("x", {"scope": "root"}, r"scope must be a Scope"),
        ("sparse", {"scope": True, "other": True}, r"belongs to another graph"),
    ],
)  # fmt: skip
def test_convert_to_tensor_errors(root, value, kwargs, match):
    x = ph(root, "x", [2])
    things = {
        "x": x,
        "op": x.op,
        "split": g.Split(root, x),
        "sparse": IndexedSlices(x, const(root, [0, 1], np.int32), const(root, [2], np.int32)),
        "shapeless": IndexedSlices(x, const(root, [0, 1], np.int32)),
    }
    if isinstance(value, str):
        value = things[value]
    kwargs = dict(kwargs)
    if kwargs.pop("other", False):
        kwargs["scope"] = Scope.new_root_scope()
    elif kwargs.get("scope") is True:
        kwargs["scope"] = root
    with pytest.raises(mg.InvalidArgumentError, match=match):
        mg.convert_to_tensor(value, **kwargs)


def big_slices(root, rows):
    values = ph(root, "values", [None, 1000])
    indices = ph(root, "indices", [None], mg.int32)
    table = ph(root, "table", [rows, 1000])  # its static shape only: nothing is allocated
    return IndexedSlices(values, indices, ops.Shape(root, table))


def test_densifying_a_large_indexed_slices_warns_with_its_size_and_origin(root):
    s = big_slices(root, 100_000)  # 1e8 elements: TF's threshold
    with pytest.warns(UserWarning) as record:
        # The warning comes first; without UnsortedSegmentSum in the library the build fails.
        with contextlib.suppress(mg.NotFoundError):
            mg.convert_to_tensor(s)
    message = str(record[0].message)
    # TF's wording first, then the shape and where the values come from.
    assert message.startswith(
        "Converting sparse IndexedSlices to a dense Tensor with 100000000 elements. This may "
        "consume a large amount of memory. (Dense shape [100000, 1000], float32; the sparse "
        "values come from 'values' (Placeholder).)"
    )
    assert record[0].filename == __file__  # points at the line that asked for it
    with warnings.catch_warnings(), contextlib.suppress(mg.NotFoundError):
        warnings.simplefilter("error")
        mg.convert_to_tensor(big_slices(Scope.new_root_scope(), 99_999))  # below: silent


@library("UnsortedSegmentSum")
def test_a_large_densification_inside_gradients_says_why(root):
    table = ph(root, "table", [100_000, 1000])
    rows = g.Gather(root, table, const(root, [1], np.int32))
    y = g.Add(root, g.Sum(root, rows), g.Sum(root, g.Square(root.with_op_name("sq"), table)))
    with pytest.warns(UserWarning, match=r"100000000 elements\. .*; the gradients of 'table' "
                      r"\(Placeholder\) output 0 mix dense and sparse ones"):  # fmt: skip
        mg.gradients(y, table)


# -- without the op library --------------------------------------------------------------------


def test_without_the_op_library_the_missing_op_is_named(tmp_path):
    # A fresh interpreter that never imports `ops`: the machinery builds library ops by name.
    code = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import minigraph as mg
import _grad_ops as g

assert "ops" not in sys.modules
root = mg.Scope.new_root_scope()
x = mg.Placeholder(root, mg.float32, [2]).output
y = g.Mul(root, g.Square(root, x), g.Exp(root, x))  # a diamond: AddN sums at x
try:
    mg.gradients(y, x)
except mg.NotFoundError as e:
    print("AddN:", e)
s = mg.IndexedSlices(x, mg.Const(root, np.array([0, 1], np.int32)).output,
                     mg.Const(root, np.array([2], np.int32)).output)
try:
    mg.convert_to_tensor(s)
except mg.NotFoundError as e:
    print("USS:", e)
table = mg.Placeholder(root, mg.float32, [3, 2]).output
rows = g.Gather(root, g.Square(root.with_op_name("sq"), table), np.array([1], np.int32))
try:
    mg.gradients(g.Sum(root, rows), table)  # Square's rule takes dense gradients only
except mg.NotFoundError as e:
    print("dense rule:", e)
assert "ops" not in sys.modules
"""
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "tests")], capture_output=True, text=True,
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "AddN: adding the gradients that meet at 'Placeholder' (Placeholder) output 0 needs " \
        "the op AddN, which no loaded op library defines: `import ops` (minigraph's op " \
        "library) provides it" in out  # fmt: skip
    assert "USS: densifying an IndexedSlices needs the op UnsortedSegmentSum" in out
    assert "dense rule: densifying an IndexedSlices needs the op UnsortedSegmentSum" in out
