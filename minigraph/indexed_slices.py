"""`IndexedSlices`, the sparse gradient, and `convert_to_tensor`, which densifies it.

An `IndexedSlices(values, indices, dense_shape)` stands for the dense tensor `dense` with
`dense[indices[i], ...] += values[i, ...]` (zeros elsewhere): what the gradient of a gather
with respect to its params is, as in TensorFlow (tensorflow/python/framework/indexed_slices.py).
It is a value object over three Outputs of one graph; `Session.run` of one returns an
`IndexedSlicesValue` (a namedtuple of numpy arrays, TF 1.x's), and `convert_to_tensor` turns it
into a dense tensor with UnsortedSegmentSum, warning when that tensor is large.

The runtime knows no op but the framework's, so the nodes built here (UnsortedSegmentSum, and
GatherV2 for a dense shape known only at run time) come from the op library through the
registry, by op type name; `build_library_op` says which op is missing when none is loaded.
"""

from __future__ import annotations

import collections
import math
import os
import sys
import warnings
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.builder import OpBuilder, as_output
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError, NotFoundError
from minigraph.graph import Graph, Operation, Output, symbolic_message
from minigraph.op_def import show_value
from minigraph.registry import get_op_def
from minigraph.scope import Scope, current_scope
from minigraph.tensor_shape import TensorShape

# Besides the user-facing names, helpers minigraph.gradients shares.
__all__ = [
    "IndexedSlices",
    "IndexedSlicesValue",
    "convert_to_tensor",
    "LARGE_SPARSE_NUM_ELEMENTS",
    "build_library_op",
    "constant_shape",
    "densify",
]

#: Densifying an IndexedSlices into a tensor of at least this many elements warns (TF's
#: `_LARGE_SPARSE_NUM_ELEMENTS`).
LARGE_SPARSE_NUM_ELEMENTS = 100_000_000

_INDEX_DTYPES = (dtypes.int32, dtypes.int64)

IndexedSlicesValue = collections.namedtuple(
    "IndexedSlicesValue", ["values", "indices", "dense_shape"]
)
IndexedSlicesValue.__doc__ = """The value of an IndexedSlices, as `Session.run` returns it: numpy
arrays `values`, `indices` and `dense_shape` (None when the IndexedSlices has none)."""


class IndexedSlices:
    """A sparse representation of slices of a dense tensor: `IndexedSlices(values, indices,
    dense_shape=None)`, as TF's `tf.IndexedSlices`.

    `values` is an Output of shape [N, D1, ..., Dn], `indices` a 1-D int32 or int64 Output of
    shape [N], `dense_shape` None or a 1-D int32 or int64 Output: the shape of the dense tensor
    `dense` with `dense[indices[i], ...] += values[i, ...]` (a repeated index adds up). The
    gradient of a gather with respect to its params is one. Immutable; compares by identity.

    Raises:
        InvalidArgumentError: a component is not an Output, of the wrong dtype or rank, the
            components belong to different graphs, or their static shapes cannot agree.
    """

    __slots__ = ("_values", "_indices", "_dense_shape")

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None):
        v = _component(values, "values")
        i = _component(indices, "indices")
        d = None if dense_shape is None else _component(dense_shape, "dense_shape")
        for name, part in (("indices", i), ("dense_shape", d)):
            if part is not None and part.dtype not in _INDEX_DTYPES:
                raise InvalidArgumentError(
                    f"IndexedSlices: {name} must be int32 or int64; got {part.dtype.name} "
                    f"({part.name!r})"
                )
            if part is not None and part.graph is not v.graph:
                raise InvalidArgumentError(
                    f"IndexedSlices: {name} {part.name!r} belongs to another graph than values "
                    f"{v.name!r}"
                )
        if v.shape.rank == 0:
            raise InvalidArgumentError(
                f"IndexedSlices: values must have rank >= 1 (a slice per index); {v.name!r} is "
                "a scalar"
            )
        if i.shape.rank not in (None, 1):
            raise InvalidArgumentError(
                f"IndexedSlices: indices must be a vector; {i.name!r} has shape {i.shape}"
            )
        if not i.shape.is_compatible_with(v.shape[:1]):
            raise InvalidArgumentError(
                f"IndexedSlices: {i.shape[0]} indices for {v.shape[0]} slices of values (shape "
                f"{v.shape})"
            )
        if d is not None:
            if d.shape.rank not in (None, 1):
                raise InvalidArgumentError(
                    f"IndexedSlices: dense_shape must be a vector; {d.name!r} has shape {d.shape}"
                )
            if not d.shape.is_compatible_with([v.shape.rank]):
                raise InvalidArgumentError(
                    f"IndexedSlices: dense_shape {d.name!r} has {d.shape[0]} dims but values "
                    f"have rank {v.shape.rank}"
                )
            known = constant_shape(d)
            if known is not None and not TensorShape(known)[1:].is_compatible_with(v.shape[1:]):
                raise InvalidArgumentError(
                    f"IndexedSlices: dense_shape {list(known)} does not fit slices of shape "
                    f"{v.shape[1:]} (values {v.shape})"
                )
        set_ = object.__setattr__
        set_(self, "_values", v)
        set_(self, "_indices", i)
        set_(self, "_dense_shape", d)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("IndexedSlices is immutable")

    @property
    def values(self) -> Output:
        """The slices: an Output of shape [N, D1, ..., Dn]."""
        return self._values

    @property
    def indices(self) -> Output:
        """Where each slice goes along the dense tensor's first dimension: [N] int32/int64."""
        return self._indices

    @property
    def dense_shape(self) -> Output | None:
        """The dense tensor's shape as a 1-D Output, or None."""
        return self._dense_shape

    @property
    def dtype(self) -> DType:
        """The element type (that of `values`)."""
        return self._values.dtype

    @property
    def graph(self) -> Graph:
        """The graph of the three components."""
        return self._values.graph

    @property
    def op(self) -> Operation:
        """The operation producing `values` (TF's `IndexedSlices.op`)."""
        return self._values.op

    @property
    def name(self) -> str:
        """The name of `values`."""
        return self._values.name

    @property
    def device(self) -> str:
        """The device requested for `values`' op ('' when none was)."""
        return self._values.device

    @property
    def shape(self) -> TensorShape:
        """The static shape of the dense tensor: the value of `dense_shape` when it is known at
        construction (a Const, or the Shape of a fully defined tensor), else what the static
        shapes of `values` and `dense_shape` say."""
        d = self._dense_shape
        if d is None:
            return TensorShape(None)
        known = constant_shape(d)
        if known is not None:
            return TensorShape(known)
        shape = TensorShape([None]).concatenate(self._values.shape[1:])
        if d.op.type == "Shape":  # the shape of a tensor whose static shape is partly known
            shape = _merged(shape, d.op.inputs[0].shape)
        length = None if d.shape.dims is None else d.shape.dims[0]  # None: unknown length
        return _merged(shape, TensorShape(None if length is None else [None] * length))

    def __neg__(self) -> IndexedSlices:
        return IndexedSlices(-self._values, self._indices, self._dense_shape)

    # A symbolic value: no truth value, no array (as Output).
    def __bool__(self) -> bool:
        raise TypeError(symbolic_message(f"IndexedSlices {self.name!r}", "a Python bool"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(symbolic_message(f"IndexedSlices {self.name!r}", "a numpy array"))

    def __repr__(self) -> str:
        shape = "" if self._dense_shape is None else f", dense_shape={self._dense_shape.name!r}"
        return (
            f"IndexedSlices(values={self._values.name!r}, indices={self._indices.name!r}{shape}, "
            f"dtype={self.dtype.name})"
        )


def _merged(a: TensorShape, b: TensorShape) -> TensorShape:
    return a.merge_with(b) if a.is_compatible_with(b) else a


def _component(value: Any, what: str) -> Output:
    out = as_output(value) if isinstance(value, (Output, OpBuilder)) else None
    if out is None:
        raise InvalidArgumentError(
            f"IndexedSlices: {what} must be an Output (or a single-output op builder); got "
            f"{type(value).__name__} {show_value(value)}"
        )
    return out


def constant_shape(shape: Output) -> tuple[int, ...] | None:
    """The value of a 1-D shape tensor when it is known at construction: a Const's value, or the
    static shape of the input of a Shape node when that is fully defined (as TF's
    `constant_value` sees through Shape); else None."""
    op = shape.op
    if op.type == "Const":
        value = op.get_attr("value")
        if value.ndim == 1 and value.dtype.kind in "iu":
            return tuple(int(v) for v in value.tolist())
        return None
    if op.type == "Shape" and op.inputs:
        static = op.inputs[0].shape
        if static.is_fully_defined():
            return static.dims
    return None


def build_library_op(
    scope: Scope,
    op_type: str,
    inputs: list[Any],
    attrs: dict[str, Any] | None = None,
    name: str | None = None,
    purpose: str = "",
) -> Output:
    """Builds a node of the op library's `op_type` by name in `scope` and returns its first
    output; `purpose` says what needs it when the op is not registered.

    Raises:
        NotFoundError: no loaded op library defines `op_type`; the message says that
            `import ops` (minigraph's op library) provides it.
    """
    try:
        op_def = get_op_def(op_type)
    except NotFoundError:
        need = f"{purpose} needs" if purpose else "this needs"
        raise NotFoundError(
            f"{need} the op {op_type}, which no loaded op library defines: `import ops` "
            "(minigraph's op library) provides it",
            None,
            op_type,
        ) from None
    return scope.create_op(op_def, inputs, attrs or {}, name).outputs[0]


def densify(value: IndexedSlices, scope: Scope, name: str | None = None, cause: str = "") -> Output:
    """The dense tensor `value` stands for, as UnsortedSegmentSum(values, indices,
    dense_shape[0]) built in `scope` (named `name`), warning when it has at least
    LARGE_SPARSE_NUM_ELEMENTS elements; `cause` says what asked for it (for the warning)."""
    d = value.dense_shape
    if d is None:
        raise InvalidArgumentError(
            f"Tensor conversion requested for IndexedSlices without dense_shape: {value!r}"
        )
    known = constant_shape(d)
    purpose = "densifying an IndexedSlices"
    if known is not None:
        size = math.prod(known)
        if size >= LARGE_SPARSE_NUM_ELEMENTS:
            values = value.values
            made_by = f"'{values.op.name}' ({values.op.type})"
            reason = f"; {cause}" if cause else ""
            warnings.warn(
                f"Converting sparse IndexedSlices to a dense Tensor with {size} elements. This "
                f"may consume a large amount of memory. (Dense shape {list(known)}, "
                f"{value.dtype.name}; the sparse values come from {made_by}{reason}.)",
                UserWarning,
                stacklevel=_user_stacklevel(),
            )
        rows: Any = np.array(known[0], dtype=d.dtype.np_dtype)
    else:
        # dense_shape[0], known only at run time.
        rows = build_library_op(
            scope,
            "GatherV2",
            [d, np.array(0, dtype=np.int32), np.array(0, dtype=np.int32)],
            purpose=purpose,
        )
    target = scope if name is None else scope.with_op_name(name)
    return build_library_op(
        target, "UnsortedSegmentSum", [value.values, value.indices, rows], purpose=purpose
    )


def _user_stacklevel() -> int:
    """The `stacklevel` that makes a warning point at the first frame outside minigraph/ and its
    op library (the user's line that asked for the conversion)."""
    package = os.path.dirname(os.path.abspath(__file__))
    internal = (os.path.join(package, ""), os.path.join(os.path.dirname(package), "ops", ""))
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(internal):
        frame = frame.f_back
        level += 1
    return level


def convert_to_tensor(
    value: Any, dtype: Any = None, name: str | None = None, scope: Scope | None = None
) -> Output:
    """`value` as an Output, as TF's `tf.convert_to_tensor`.

    - An Output (or single-output builder) is returned as it is.
    - An IndexedSlices is densified: UnsortedSegmentSum(values, indices, dense_shape[0]) in
      `scope` (default: `minigraph.current_scope(value.graph)`), named `name`. A dense tensor
      of at least LARGE_SPARSE_NUM_ELEMENTS (1e8) elements warns (UserWarning, as TF), with its
      size and the op the sparse values come from.
    - A literal (Python scalar, nested list, numpy array) becomes a Const of `dtype` in `scope`,
      which is then required: a literal names no graph.

    Raises:
        InvalidArgumentError: `dtype` differs from the value's; an IndexedSlices without a
            dense_shape; None; an Operation or a builder of several outputs; a literal without
            `scope`, or one that does not convert to `dtype`.
        NotFoundError: densifying needs UnsortedSegmentSum and no op library is loaded.
    """
    target = None if dtype is None else dtypes.as_dtype(dtype)
    if scope is not None and not isinstance(scope, Scope):
        raise InvalidArgumentError(
            f"convert_to_tensor: scope must be a Scope; got {type(scope).__name__}"
        )
    if isinstance(value, IndexedSlices):
        if target is not None and target is not value.dtype:
            raise InvalidArgumentError(
                f"Incompatible tensor conversion requested to `dtype` {target.name} for "
                f"IndexedSlices ({value!r}) with dtype {value.dtype.name}"
            )
        if scope is not None and scope.graph is not value.graph:
            raise InvalidArgumentError(
                f"convert_to_tensor: {value!r} belongs to another graph than the scope's"
            )
        return densify(value, scope or current_scope(value.graph), name)
    if isinstance(value, (Output, OpBuilder)):
        if isinstance(value, OpBuilder) and len(value.outputs) != 1:
            raise InvalidArgumentError(
                f"convert_to_tensor: {value.operation.name!r} ({value.operation.type}) has "
                f"{len(value.outputs)} outputs; pick one with .outputs[i] or its name"
            )
        out = as_output(value)
        if target is not None and target is not out.dtype:
            raise InvalidArgumentError(
                f"Tensor conversion requested dtype {target.name} for Tensor with dtype "
                f"{out.dtype.name}: {out!r}"
            )
        return out
    if value is None:
        raise InvalidArgumentError("convert_to_tensor: None values not supported.")
    if isinstance(value, Operation):
        raise InvalidArgumentError(
            f"convert_to_tensor: cannot convert the Operation {value.name!r} to a tensor; pass "
            "one of its outputs (op.outputs[i])"
        )
    if scope is None:
        raise InvalidArgumentError(
            f"convert_to_tensor: the literal {show_value(value)} names no graph; pass scope= "
            "(the Scope to build its Const in)"
        )
    array = dtypes.convert_to_array(value, target)
    attrs = {"value": array, "dtype": dtypes.as_dtype(array.dtype)}
    const = scope if name is None else scope.with_op_name(name)
    return const.create_op(get_op_def("Const"), [], attrs, "Const").outputs[0]
