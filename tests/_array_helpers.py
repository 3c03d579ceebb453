"""Shared helpers of the array-op tests: a small description of an op call that both minigraph
and TensorFlow can build (constant inputs, placeholders of chosen static shapes with a fed
value), the runners that classify what happens (an error at construction, an error at run
time, or a value with its static shape), and the tables of error cases whose messages
tests/test_array_errors.py checks against minigraph and tests/test_array_tf.py against TF.
"""

# ruff: noqa: E501 - the tables of error cases read best unwrapped, one case per entry

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import minigraph as mg
import ops.array as array_ops

# -- a call both libraries can build ---------------------------------------------------------


@dataclass(frozen=True)
class Feed:
    """A placeholder of `dtype` (a minigraph DType) and static `shape` (None: unknown rank),
    fed `value` when the graph runs."""

    value: Any
    dtype: Any = None
    shape: Any = "same"  # "same": the value's shape

    def mg_dtype(self) -> mg.DType:
        if self.dtype is not None:
            return mg.as_dtype(self.dtype)
        return mg.as_dtype(np.asarray(self.value).dtype)

    def static_shape(self) -> Any:
        return np.shape(self.value) if self.shape == "same" else self.shape

    def array(self) -> np.ndarray:
        return np.asarray(self.value, dtype=self.mg_dtype().np_dtype)


@dataclass
class Call:
    """`op(*inputs, **attrs)`: an input is a literal (a Const in both libraries), a Feed, or a
    list of those for a list input."""

    op: str
    inputs: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(map(_short, self.inputs))}, {self.attrs})"


def _short(value: Any) -> str:
    if isinstance(value, Feed):
        return f"Feed({np.asarray(value.value).tolist()!r}, shape={value.static_shape()})"
    if isinstance(value, list):
        return "[" + ", ".join(map(_short, value)) + "]"
    return repr(np.asarray(value).tolist())


@dataclass
class Outcome:
    """What a call did: `phase` is "build" (an error at construction), "run" (an error at run
    time) or "ok"; `message` the error text without the node context; for "ok", the static
    shape (a list with None for unknown dims, or None for an unknown rank), the dtype name and
    the values (a list of arrays: one per output)."""

    phase: str
    message: str = ""
    error: type | None = None
    static: Any = None
    dtype: str = ""
    values: list[np.ndarray] = field(default_factory=list)


def message_head(text: str) -> str:
    """An error message without the context minigraph and TF append (node, input shapes)."""
    text = text.split(" for '{{node ")[0].split(" for node ")[0]
    text = re.split(r" for '[^']*' \(\w+\) with input shapes", text)[0]
    text = re.split(r" \[\[node ", text)[0]
    return text.strip()


def build_mg(scope: mg.Scope, call: Call) -> tuple[Any, dict[Any, np.ndarray]]:
    """The call built with minigraph's builders; (its builder object, the feeds)."""
    args, feeds = prepare_mg(scope, call)
    return getattr(array_ops, call.op)(scope, *args, **call.attrs), feeds


def prepare_mg(scope: mg.Scope, call: Call) -> tuple[list[Any], dict[Any, np.ndarray]]:
    """The call's placeholders, built; (the builder's positional arguments, the feeds)."""
    feeds: dict[Any, np.ndarray] = {}

    def convert(value: Any) -> Any:
        if isinstance(value, list):
            return [convert(v) for v in value]
        if isinstance(value, Feed):
            holder = mg.Placeholder(scope, value.mg_dtype(), shape=value.static_shape()).output
            feeds[holder] = value.array()
            return holder
        return value

    return [convert(v) for v in call.inputs], feeds


def run_mg(call: Call, config: mg.SessionConfig | None = None) -> Outcome:
    scope = mg.Scope.new_root_scope()
    try:
        node, feeds = build_mg(scope, call)
    except mg.OpError as e:
        return Outcome("build", message_head(e.message), type(e))
    outputs = list(node.outputs)
    try:
        values = mg.Session(scope, config).run(outputs, feeds)
    except mg.OpError as e:
        return Outcome("run", message_head(e.message), type(e))
    shape = outputs[0].shape if outputs else mg.TensorShape(None)
    static = None if shape.rank is None else list(shape.dims)
    dtype = outputs[0].dtype.name if outputs else ""
    return Outcome("ok", static=static, dtype=dtype, values=[np.asarray(v) for v in values])


# -- the error tables: (id, call, phase, message) --------------------------------------------

F32 = np.arange(6, dtype=np.float32).reshape(2, 3)


def _x(shape: Any = "same", value: Any = F32) -> Feed:
    return Feed(value, "float32", shape)


# Construction errors: each is refused when the node is built, with this message, and the
# graph is left as it was. `tf_phase` says where TF refuses it ("build" or "run": TF refuses
# some of them only at run time, with the same message).
BUILD_ERRORS = [
    ("fill negative dims", Call("Fill", [[2, -1], 1.0]), "build", "Fill dimensions must be >= 0"),
    ("fill dims 2-d", Call("Fill", [[[2]], 1.0]), "build", "Shape must be rank 1 but is rank 2"),
    ("fill value not scalar", Call("Fill", [[2], [1.0]]), "build",
     "Shape must be rank 0 but is rank 1"),
    ("fill too many elements", Call("Fill", [np.array([2**40, 2**40]), 1.0]), "run",
     "Shape [1099511627776,1099511627776] would have more than 2**63 - 1 elements"),
    ("expand dims out of range", Call("ExpandDims", [F32, 3]), "build",
     "dim 3 not in the interval [-3, 2]."),
    ("expand dims below range", Call("ExpandDims", [F32, -4]), "build",
     "dim -4 not in the interval [-3, 2]."),
    ("expand dims two values", Call("ExpandDims", [F32, [1, 2]]), "build",
     "'dim' input must be a tensor with a single value"),
    ("transpose perm out of range", Call("Transpose", [F32, [0, 2]]), "build",
     "perm dim 2 is out of range of input rank 2"),
    ("transpose perm length", Call("Transpose", [F32, [0, 1, 2]]), "build",
     "Dimension must be 2 but is 3"),
    ("transpose perm 2-d", Call("Transpose", [F32, [[0, 1]]]), "build",
     "Shape must be rank 1 but is rank 2"),
    ("transpose perm scalar", Call("Transpose", [F32, 0]), "build",
     "Shape must be rank 1 but is rank 0"),
    ("transpose duplicate perm", Call("Transpose", [F32, [0, 0]]), "run", "1 is missing from {0,0}."),
    ("transpose duplicate negative perm", Call("Transpose", [F32, [-1, 1]]), "run",
     "0 is missing from {1,1}."),
    ("tile multiples length", Call("Tile", [F32, [1, 2, 3]]), "build",
     "Shape must be rank 2 but is rank 3"),
    ("tile multiples 2-d", Call("Tile", [F32, [[1, 2]]]), "build",
     "Shape must be rank 1 but is rank 2"),
    ("tile overflow", Call("Tile", [Feed(np.zeros(1, np.float32), "float32", [2**40]), [2**30]]),
     "build", "Negative dimension size caused by overflow when multiplying 1099511627776 and "
     "1073741824"),
    ("squeeze a dim of 3", Call("Squeeze", [np.zeros([1, 3, 1], np.float32)], {"squeeze_dims": [1]}),
     "build", "Can not squeeze dim[1], expected a dimension of 1, got 3"),
    ("squeeze out of range", Call("Squeeze", [np.zeros([1, 3, 1], np.float32)], {"squeeze_dims": [3]}),
     "build", "squeeze_dims[0] not in [-3,3)."),
    ("squeeze below range", Call("Squeeze", [np.zeros([1, 3, 1], np.float32)], {"squeeze_dims": [0, -4]}),
     "build", "squeeze_dims[1] not in [-3,3)."),
    ("pack shapes differ", Call("Pack", [[np.zeros(2, np.float32), np.zeros(1, np.float32)]]),
     "build", "Dimension 0 in both shapes must be equal, but are 2 and 1. Shapes are [2] and [1].\n"
     "\tFrom merging shape 0 with other shapes."),
    ("pack ranks differ", Call("Pack", [[np.zeros(2, np.float32), np.zeros([1, 2], np.float32)]]),
     "build", "Shapes must be equal rank, but are 1 and 2\n\tFrom merging shape 0 with other shapes."),
    ("pack axis", Call("Pack", [[F32, F32]], {"axis": 3}), "build", "Invalid axis: 3; must be in [-3,3)"),
    ("pack axis below", Call("Pack", [[F32, F32]], {"axis": -4}), "build",
     "Invalid axis: -4; must be in [-3,3)"),
    ("unpack num", Call("Unpack", [F32, 3]), "build", "Dimension must be 3 but is 2"),
    ("unpack axis", Call("Unpack", [F32, 3], {"axis": 2}), "build",
     "Invalid axis: 2; must be in [-2,2)"),
    ("unpack scalar", Call("Unpack", [np.float32(1), 1]), "build", "Invalid axis: 0; must be in [0,0)"),
    ("slice past the end", Call("Slice", [F32, [0, 1], [2, 3]]), "run",
     "Expected size[1] in [0, 2], but got 3"),
    ("slice negative begin", Call("Slice", [F32, [-1, 0], [1, -1]]), "run",
     "Expected begin[0] in [0, 2], but got -1"),
    ("slice begin past the end", Call("Slice", [F32, [0, 4], [2, 1]]), "run",
     "Expected begin[1] in [0, 3], but got 4"),
    ("slice lengths differ", Call("Slice", [F32, [0, 0], [1, 1, 1]]), "build",
     "Dimension 0 in both shapes must be equal, but are 2 and 3. Shapes are [2] and [3]."),
    ("slice rank", Call("Slice", [F32, [0, 0, 0], [1, 1, 1]]), "build",
     "Shape must be rank 3 but is rank 2"),
    ("slice empty dim", Call("Slice", [np.zeros([0, 3], np.float32), [1, 0], [0, 1]]), "run",
     "Expected begin[0] == 0 (got 1) and size[0] == 0 (got 0) when input.dim_size(0) == 0"),
    ("select shapes", Call("SelectV2", [[True, False], np.zeros(3, np.float32), np.zeros(3, np.float32)]),
     "build", "Dimensions must be equal, but are 2 and 3"),
    ("select branches", Call("SelectV2", [True, np.zeros(2, np.float32), np.zeros(3, np.float32)]),
     "build", "Dimensions must be equal, but are 2 and 3"),
    ("select then and else differ", Call("Select", [True, np.zeros(2, np.float32), np.zeros(3, np.float32)]),
     "build", "Dimension 0 in both shapes must be equal, but are 2 and 3. Shapes are [2] and [3]."),
    ("select rows", Call("Select", [[True, False, True], np.zeros([2, 2], np.float32), np.zeros([2, 2], np.float32)]),
     "build", "Dimension 0 in both shapes must be equal, but are 3 and 2. Shapes are [3] and [2]."),
    ("select 2-d condition", Call("Select", [[[True, False]], np.zeros([2, 2], np.float32), np.zeros([2, 2], np.float32)]),
     "build", "Dimension 0 in both shapes must be equal, but are 2 and 1. Shapes are [2,2] and [1,2]."),
    ("select vector of scalars", Call("Select", [[True, False], 1.0, 2.0]), "build",
     "Shapes must be equal rank, but are 0 and 1"),
    ("broadcast_to incompatible", Call("BroadcastTo", [np.zeros(3, np.float32), [2, 4]]), "build",
     "Dimensions must be equal, but are 3 and 4"),
    ("broadcast_to rank", Call("BroadcastTo", [F32, [3]]), "build",
     "Shape must be at most rank 1 but is rank 2"),
    ("broadcast_to empty to 3", Call("BroadcastTo", [np.zeros(0, np.float32), [3]]), "run",
     "Incompatible shapes: [0] vs. [3]"),
    ("broadcast_to 2-d shape", Call("BroadcastTo", [F32, [[2, 3]]]), "build",
     "Shape must be rank 1 but is rank 2"),
    ("one_hot axis below -1", Call("OneHot", [[1, 2], 3, 1.0, 0.0], {"axis": -2}), "build",
     "axis must be >= -1"),
    ("one_hot axis too large", Call("OneHot", [[1, 2], 3, 1.0, 0.0], {"axis": 2}), "run",
     "Expected axis to be -1 or between [0, 2).  But received: 2"),
    ("one_hot negative depth", Call("OneHot", [[1, 2], -1, 1.0, 0.0]), "build",
     "Dimension size, given by scalar input 1, must be non-negative but is -1"),
    ("one_hot on_value vector", Call("OneHot", [[1, 2], 3, [1.0], 0.0]), "run",
     "on_value must be a scalar, but got: [1]"),
    ("one_hot off_value vector", Call("OneHot", [[1, 2], 3, 1.0, [0.0, 1.0]]), "run",
     "off_value must be a scalar, but got: [2]"),
    ("strided_slice stride 0", Call("StridedSlice", [F32, [0], [1], [0]]), "build",
     "strides[0] must be non-zero"),
    ("strided_slice index out of range", Call("StridedSlice", [F32, [2], [3], [1]], {"shrink_axis_mask": 1}),
     "build", "slice index 2 of dimension 0 out of bounds."),
    ("strided_slice negative index out of range",
     Call("StridedSlice", [F32, [-3], [3], [1]], {"shrink_axis_mask": 1}), "build",
     "slice index -1 of dimension 0 out of bounds."),
    ("strided_slice index with a negative stride",
     Call("StridedSlice", [F32, [1], [0], [-1]], {"shrink_axis_mask": 1}), "build",
     "only stride 1 allowed on non-range indexing."),
    ("strided_slice too many entries", Call("StridedSlice", [F32, [0, 0, 0], [1, 1, 1], [1, 1, 1]]),
     "build", "Index out of range using input dim 2; input has only 2 dims"),
    ("strided_slice of a scalar", Call("StridedSlice", [np.float32(1), [0], [1], [1]]), "build",
     "Attempting to slice scalar input."),
    ("strided_slice two ellipses", Call("StridedSlice", [F32, [0, 0], [1, 1], [1, 1]], {"ellipsis_mask": 3}),
     "build", "Multiple ellipses in slice spec not allowed"),
    ("strided_slice lengths differ", Call("StridedSlice", [F32, [0, 0], [1], [1]]), "build",
     "Dimension 0 in both shapes must be equal, but are 2 and 1. Shapes are [2] and [1]."),
    ("strided_slice 2-d begin", Call("StridedSlice", [F32, [[0]], [[1]], [[1]]]), "build",
     "Shape must be rank 1 but is rank 2"),
    # TF's shape inference looks at the strides first, so this is what it reports.
    ("strided_slice 32 entries", Call("StridedSlice", [F32, [0] * 32, [1] * 32, [1] * 32]), "build",
     "Index out of range using input dim 2; input has only 2 dims"),
    ("strided_slice 32 entries on rank 32",
     Call("StridedSlice", [np.zeros([1] * 32, np.float32), [0] * 32, [1] * 32, [1] * 32]), "build",
     "Expected begin, end, and strides to be 1D equal size tensors, but got shapes [32], [32], "
     "and [32] instead."),
]  # fmt: skip

# Run-time errors: the static shapes leave them open (placeholders of unknown shape), the fed
# values show them; TF's kernels give the same messages.
RUN_ERRORS = [
    ("fill negative", Call("Fill", [Feed([2, -1], "int32", None), 1.0]), "Dimension -1 must be >= 0"),
    ("fill dims 2-d", Call("Fill", [Feed([[2]], "int32", None), 1.0]),
     "dims must represent a vector, got shape [1,1]"),
    ("fill value vector", Call("Fill", [[2], Feed([1.0, 2.0], "float32", None)]),
     "value must represent a scalar, got shape [2]"),
    ("fill too large", Call("Fill", [Feed([2**40, 2**40], "int64", None), 1.0]),
     "Shape [1099511627776,1099511627776] would have more than 2**63 - 1 elements"),
    ("expand dims", Call("ExpandDims", [_x(None), Feed(3, "int32", None)]),
     "Tried to expand dim index 3 for tensor with 2 dimensions."),
    ("expand dims two values", Call("ExpandDims", [_x(None), Feed([1, 2], "int32", None)]),
     "'dim' must be a tensor with a single value"),
    ("expand dims no value", Call("ExpandDims", [_x(None), Feed(np.zeros(0, np.int32), "int32", None)]),
     "'dim' must be a tensor with a single value"),
    ("squeeze a dim of 2", Call("Squeeze", [_x([None, 3])], {"squeeze_dims": [0]}),
     "Can not squeeze dim[0], expected a dimension of 1, got 2"),
    ("squeeze out of range", Call("Squeeze", [_x(None)], {"squeeze_dims": [5]}),
     "Tried to squeeze dim index 5 for tensor with 2 dimensions."),
    ("transpose duplicate", Call("Transpose", [_x(None), Feed([0, 0], "int32", None)]),
     "1 is missing from {0,0}."),
    ("transpose out of range", Call("Transpose", [_x(None), Feed([0, 2], "int32", None)]),
     "2 is out of range [0 .. 2)"),
    ("transpose far below range", Call("Transpose", [_x(None), Feed([-3, 0], "int64", None)]),
     "-1 is out of range [0 .. 2)"),
    ("transpose length", Call("Transpose", [_x(None), Feed([0, 1, 2], "int32", None)]),
     "transpose expects a vector of size 2. But input(1) is a vector of size 3"),
    ("transpose 2-d perm", Call("Transpose", [_x(None), Feed([[0, 1]], "int32", None)]),
     "perm must be rank 1, got shape [1,2]"),
    ("tile length", Call("Tile", [_x(None), Feed([1, 2, 3], "int32", None)]),
     "Expected multiples argument to be a vector of length 2 but got length 3"),
    ("tile negative", Call("Tile", [_x(None), Feed([1, -2], "int32", None)]),
     "Expected multiples[1] >= 0, but got -2"),
    ("tile 2-d", Call("Tile", [_x(None), Feed([[1, 2]], "int32", None)]),
     "Expected multiples to be 1-D, but got shape [1,2]"),
    ("pack shapes", Call("Pack", [[Feed([1.0, 2.0], "float32", None), Feed([1.0], "float32", None)]]),
     "Shapes of all inputs must match: values[0].shape = [2] != values[1].shape = [1]"),
    ("pack axis", Call("Pack", [[Feed([1.0, 2.0], "float32", None), Feed([1.0, 3.0], "float32", None)]],
                       {"axis": 3}),
     "axis = 3 not in [-2, 2)"),
    ("unpack num", Call("Unpack", [Feed(np.zeros([3, 3], np.float32), "float32", [None, 3]), 2]),
     "Input shape axis 0 must equal 2, got shape [3,3]"),
    ("unpack axis", Call("Unpack", [_x(None), 2], {"axis": 2}), "axis = 2 not in [-2, 2)"),
    ("slice size", Call("Slice", [_x(None), Feed([0, 1], "int32", None), Feed([2, 3], "int32", None)]),
     "Expected size[1] in [0, 2], but got 3"),
    ("slice begin", Call("Slice", [_x(None), Feed([0, 4], "int32", None), Feed([2, -1], "int32", None)]),
     "Expected begin[1] in [0, 3], but got 4"),
    ("slice size -2", Call("Slice", [_x(None), Feed([0, 0], "int32", None), Feed([1, -2], "int32", None)]),
     "Expected size[1] in [0, 3], but got -2"),
    ("slice lengths", Call("Slice", [_x(None), Feed([0, 0, 0], "int32", None),
                                     Feed([1, 1, 1], "int32", None)]),
     "Expected begin and size arguments to be 1-D tensors of size 2, but got shapes [3] and [3] "
     "instead."),
    ("select", Call("SelectV2", [Feed([True, False], "bool", None), _x(None, [1.0, 2.0, 3.0]),
                                 _x(None, [1.0, 2.0, 3.0])]),
     "condition [2], then [3], and else [3] must be broadcastable"),
    ("select scalar", Call("Select", [True, _x(None, [1.0, 2.0]), _x(None, [3.0])]),
     "'then' and 'else' must have the same size.  but received: [2] vs. [1]"),
    ("select rows", Call("Select", [Feed([True, False, True], "bool", None), _x(None), _x(None)]),
     "Number of batches of 'then' must match size of 'cond', but saw: 2 vs. 3"),
    ("select rows, else", Call("Select", [Feed([True, False], "bool", None), _x(None), _x(None, [[5.0, 6.0]])]),
     "'then' and 'else' must have the same size.  but received: [2,3] vs. [1,2]"),
    ("select rows of a scalar", Call("Select", [Feed([True], "bool", None), _x(None, 1.0), _x(None, 2.0)]),
     "'then' must be at least a vector, but saw shape: []"),
    ("select elementwise", Call("Select", [Feed([True, False, True], "bool", None), _x(None, [1.0, 2.0]),
                                           _x(None, [3.0, 4.0])]),
     "Inputs to operation Select of type Select must have the same size and shape.  Input 0: [3] "
     "!= input 1: [2]"),
    ("select elementwise, else", Call("Select", [Feed([True, False], "bool", None), _x(None, [1.0, 2.0]),
                                                 _x(None, [3.0, 4.0, 5.0])]),
     "Inputs to operation Select of type Select must have the same size and shape.  Input 0: [2] "
     "!= input 2: [3]"),
    ("broadcast_to", Call("BroadcastTo", [_x(None, [1.0, 2.0, 3.0]), Feed([2, 4], "int32", None)]),
     "Incompatible shapes: [3] vs. [2,4]"),
    ("broadcast_to smaller", Call("BroadcastTo", [_x(None, [1.0, 2.0]), Feed([1], "int32", None)]),
     "Unable to broadcast tensor of shape [2] to tensor of shape [1]"),
    ("broadcast_to rank", Call("BroadcastTo", [_x(None), Feed([3], "int32", None)]),
     "Rank of input (2) must be no greater than rank of output shape (1)."),
    ("broadcast_to negative", Call("BroadcastTo", [_x(None), Feed([-1, 3], "int32", None)]),
     "Dimension -1 must be >= 0"),
    ("broadcast_to 2-d", Call("BroadcastTo", [_x(None), Feed([[1]], "int32", None)]),
     "shape must be a vector of {int32,int64}, got shape [1,1]"),
    ("one_hot depth", Call("OneHot", [[1, 5], Feed(-1, "int32", None), 1.0, 0.0]),
     "depth must be non-negative, got: -1"),
    ("one_hot depth vector", Call("OneHot", [[1, 5], Feed([3], "int32", None), 1.0, 0.0]),
     "depth must be a scalar, but got: [1]"),
    ("one_hot on_value", Call("OneHot", [[1, 5], 3, Feed([1.0], "float32", None), 0.0]),
     "on_value must be a scalar, but got: [1]"),
    ("one_hot axis", Call("OneHot", [Feed([1, 5], "int32", None), 3, 1.0, 0.0], {"axis": 3}),
     "Expected axis to be -1 or between [0, 2).  But received: 3"),
    ("strided_slice stride 0", Call("StridedSlice", [_x(None), Feed([0], "int32", None),
                                                     Feed([1], "int32", None), Feed([0], "int32", None)]),
     "strides[0] must be non-zero"),
    ("strided_slice index", Call("StridedSlice", [_x(None), Feed([2], "int32", None), Feed([3], "int32", None),
                                                  Feed([1], "int32", None)], {"shrink_axis_mask": 1}),
     "slice index 2 of dimension 0 out of bounds."),
    ("strided_slice lengths", Call("StridedSlice", [_x(None), Feed([0, 0], "int32", None),
                                                    Feed([1], "int32", None), Feed([1], "int32", None)]),
     "Expected begin, end, and strides to be 1D equal size tensors, but got shapes [2], [1], and "
     "[1] instead."),
    ("strided_slice scalar", Call("StridedSlice", [Feed(np.float32(1), "float32", None), Feed([1], "int32", None),
                                                   Feed([1], "int32", None), Feed([1], "int32", None)]),
     "Attempting to slice scalar input."),
    ("strided_slice too many", Call("StridedSlice", [_x(None), Feed([0, 0, 0], "int32", None),
                                                     Feed([1, 1, 1], "int32", None),
                                                     Feed([1, 1, 1], "int32", None)]),
     "Index out of range using input dim 2; input has only 2 dims"),
    ("strided_slice ellipses", Call("StridedSlice", [_x(None), Feed([0, 0], "int32", None), Feed([1, 1], "int32", None),
                                                     Feed([1, 1], "int32", None)], {"ellipsis_mask": 3}),
     "Multiple ellipses in slice spec not allowed"),
    ("strided_slice index stride", Call("StridedSlice", [_x(None), Feed([1], "int32", None),
                                                         Feed([0], "int32", None), Feed([-1], "int32", None)],
                                        {"shrink_axis_mask": 1}),
     "only stride 1 allowed on non-range indexing."),
]  # fmt: skip
