"""Shape functions' context and the helpers they share.

A shape function is pure: `shape_fn(ctx) -> outputs`, where `ctx` is an `InferenceContext` and
`outputs` has one entry per output, each a `TensorShape` (or list of dims, or None for unknown),
or a `(shape, dtype)` pair for outputs whose dtype the OpDef leaves to the shape function. A
single-output op may return its shape alone. Errors are raised as `InvalidArgumentError`; the
graph adds the node's name, op type and input shapes to the message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from minigraph import dtypes
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError
from minigraph.tensor_shape import TensorShape, as_shape, unknown_shape

__all__ = [
    "HandleData",
    "InferenceContext",
    "resource_handle_data",
    "with_rank",
    "with_rank_at_least",
    "with_rank_at_most",
    "merge",
    "merge_dim",
    "canonical_axis",
    "unknown_shape",
]


class InferenceContext:
    """What a shape function may look at: input shapes, dtypes, attrs, constant inputs."""

    __slots__ = ("op_type", "node_name", "input_shapes", "input_dtypes", "attrs", "_inputs")

    def __init__(
        self,
        op_type: str,
        node_name: str,
        input_shapes: tuple[TensorShape, ...],
        input_dtypes: tuple[DType, ...],
        attrs: Mapping[str, Any],
        inputs: Sequence[Any] = (),
    ):
        self.op_type = op_type
        self.node_name = node_name
        self.input_shapes = input_shapes
        self.input_dtypes = input_dtypes
        self.attrs = attrs
        self._inputs = inputs  # the input Outputs, looked at only by constant_value

    @property
    def num_inputs(self) -> int:
        """How many inputs the node has."""
        return len(self.input_shapes)

    def input_shape(self, i: int) -> TensorShape:
        """The static shape of input `i`."""
        return self.input_shapes[i]

    def attr(self, name: str) -> Any:
        """The canonical value of attr `name`."""
        return self.attrs[name]

    def constant_value(self, i: int) -> np.ndarray | None:
        """The value of input `i` when it is known at construction (a Const), else None.

        This is TF's "computed input tensor": GatherV2's `axis` is usually a constant, and
        knowing it lets the shape function compute the full output shape.
        """
        if not self._inputs:
            return None
        op = self._inputs[i].op
        return op.attrs["value"] if op.type == "Const" else None

    def input_handle_data(self, i: int) -> HandleData | None:
        """For a resource input: the dtype and declared shape of the variable it refers to
        (TF's handle shapes and types), when the graph says (see `resource_handle_data`)."""
        if not self._inputs:
            return None
        return resource_handle_data(self._inputs[i])


class HandleData(NamedTuple):
    """What a resource tensor refers to: the `dtype` and declared (possibly partial) `shape`
    of its variable, its `name` (the shared name) and the `op` that makes the handle."""

    dtype: DType
    shape: TensorShape
    name: str
    op: Any


#: How deep `resource_handle_data` follows Identity nodes (a bound for cyclic-looking input).
_MAX_IDENTITIES = 1000


def resource_handle_data(tensor: Any) -> HandleData | None:
    """The HandleData of a resource tensor (an Output of dtype resource): from the op that makes
    it, through Identity nodes, when that op declares the resource's `dtype` and `shape` attrs
    (VarHandleOp does); None otherwise (a fed handle, a tensor of another dtype)."""
    for _ in range(_MAX_IDENTITIES):
        if getattr(tensor, "dtype", None) is not dtypes.resource:
            return None
        op = tensor.op
        if op.type == "Identity":
            tensor = op.inputs[0]
            continue
        attrs = op.attrs
        dtype, shape = attrs.get("dtype"), attrs.get("shape")
        if not isinstance(dtype, DType) or not isinstance(shape, TensorShape):
            return None
        if dtype is dtypes.resource:  # a Placeholder of handles: what it refers to is unknown
            return None
        return HandleData(dtype, shape, attrs.get("shared_name") or op.name, op)
    return None


def with_rank(shape: TensorShape, rank: int) -> TensorShape:
    """`shape` known to have rank `rank` (TF's `WithRank`)."""
    if type(shape) is not TensorShape:
        shape = as_shape(shape)  # a list of dims; anything else is refused there
    return shape.with_rank(rank)


def with_rank_at_least(shape: TensorShape, rank: int) -> TensorShape:
    """`shape`, checked to have at least `rank` dims (TF's `WithRankAtLeast`)."""
    if type(shape) is not TensorShape:
        shape = as_shape(shape)  # a list of dims; anything else is refused there
    return shape.with_rank_at_least(rank)


def with_rank_at_most(shape: TensorShape, rank: int) -> TensorShape:
    if type(shape) is not TensorShape:
        shape = as_shape(shape)  # a list of dims; anything else is refused there
    return shape.with_rank_at_most(rank)


def merge(a: Any, b: Any) -> TensorShape:
    """The most specific shape compatible with `a` and `b` (TF's `Merge`)."""
    return as_shape(a).merge_with(b)


def merge_dim(a: int | None, b: int | None, what: str = "dimensions") -> int | None:
    """One dim from two that must agree; None stands for unknown."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise InvalidArgumentError(f"{what} must be equal, but are {a} and {b}")


def canonical_axis(axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) made non-negative; TF's wording on failure."""
    if axis < -rank or axis >= rank:
        raise InvalidArgumentError(
            f"Expected {what} in the range [{-rank}, {rank}), but got {axis}"
        )
    return axis + rank if axis < 0 else axis
