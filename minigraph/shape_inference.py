"""Shape functions' context and the helpers they share.

A shape function is pure: `shape_fn(ctx) -> outputs`, where `ctx` is an `InferenceContext` and
`outputs` has one entry per output, each a `TensorShape` (or list of dims, or None for unknown),
or a `(shape, dtype)` pair for outputs whose dtype the OpDef leaves to the shape function. A
single-output op may return its shape alone. Errors are raised as `InvalidArgumentError`; the
graph adds the node's name, op type and input shapes to the message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from minigraph import dtypes
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError
from minigraph.tensor_shape import TensorShape, as_shape, unknown_shape

__all__ = [
    "HandleData",
    "InferenceContext",
    "MAX_CONSTANT_ELEMENTS",
    "MAX_CONSTANT_NODES",
    "SEEN_THROUGH",
    "SHAPE_DTYPES",
    "constant_value",
    "partial_shape_value",
    "register_constant_evaluator",
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
        """The value of input `i` when it is known at construction, else None (read-only).

        This is TF's "computed input tensor": GatherV2's `axis` is usually a constant, and
        knowing it lets the shape function compute the full output shape. Known are Consts,
        Identity of a known value, and what the op libraries' constant evaluators compute from
        known inputs (`register_constant_evaluator`: Shape of a fully defined shape, Pack and
        Cast of constants, ...), as TF's shape refiner evaluates small constant subgraphs.
        """
        if not self._inputs:
            return None
        return constant_value(self._inputs[i])

    def partial_shape_value(self, i: int) -> TensorShape:
        """Input `i`, a 1-D shape tensor (or a scalar -1: unknown rank), as the partial shape
        it is known to hold at construction (TF's MakeShapeFromShapeTensor): its value where
        known (a -1 element is an unknown dim), else what the op libraries' partial-shape
        evaluators know (`Shape` of a partially known input, `Pack` of some known scalars,
        ...), else a shape of the length the tensor's own shape says, or an unknown one.

        Raises:
            InvalidArgumentError: the known value is not a valid shape (TF's message).
        """
        if self._inputs:
            known = partial_shape_value(self._inputs[i])
            if known is not None:
                return known
        shape = self.input_shapes[i]
        if shape.rank == 1 and shape[0] is not None:
            return TensorShape([None] * shape[0])
        return unknown_shape()

    def input_handle_data(self, i: int) -> HandleData | None:
        """For a resource input: the dtype and declared shape of the variable it refers to
        (TF's handle shapes and types), when the graph says (see `resource_handle_data`)."""
        if not self._inputs:
            return None
        return resource_handle_data(self._inputs[i])


#: How many producers one `constant_value` (or `partial_shape_value`) call evaluates at most,
#: and the largest value (in elements) it computes: TF's shape refiner also evaluates only
#: small constant subgraphs. Beyond either, the value is unknown (None).
MAX_CONSTANT_NODES = 64
MAX_CONSTANT_ELEMENTS = 4096

#: The dtypes of the tensors whose values are evaluated (beyond Consts): shape arithmetic's.
SHAPE_DTYPES = frozenset((dtypes.int32, dtypes.int64))
#: The op types whose int32/int64 outputs may have a value (or partial shape) known at
#: construction beyond their dtype and shape (Identity and those with evaluators): the graph's
#: construction memo must not treat two such inputs of one dtype and shape as equal.
SEEN_THROUGH: set[str] = {"Identity"}

#: op type -> fn(tensor, value_of) -> np.ndarray | None: the value of `tensor` (an output of a
#: node of that type) computed from its inputs' values, `value_of(input)` (None where unknown).
_CONSTANT_EVALUATORS: dict[str, Callable[[Any, Callable[[Any], Any]], Any]] = {}
#: op type -> fn(tensor, shape_of, value_of) -> TensorShape | None: the partial shape a 1-D
#: shape tensor holds, from its inputs' partial shapes `shape_of(input)` and values.
_PARTIAL_SHAPE_EVALUATORS: dict[str, Callable[[Any, Callable[[Any], Any], Callable], Any]] = {}


def register_constant_evaluator(
    op_type: str,
    value: Callable[[Any, Callable[[Any], Any]], Any] | None = None,
    partial_shape: Callable[[Any, Callable[[Any], Any], Callable[[Any], Any]], Any] | None = None,
) -> None:
    """Lets shape functions see through nodes of `op_type` (an op library fills this in):
    `value(tensor, value_of)` computes a node's output value from its inputs' values (numpy,
    small; None when it cannot), `partial_shape(tensor, shape_of, value_of)` the partial shape
    a node's 1-D int output holds (None when it cannot say). Both must be pure and cheap, and
    are asked only about int32/int64 outputs (SHAPE_DTYPES)."""
    if value is not None:
        _CONSTANT_EVALUATORS[op_type] = value
    if partial_shape is not None:
        _PARTIAL_SHAPE_EVALUATORS[op_type] = partial_shape
    SEEN_THROUGH.add(op_type)


class _Evaluation:
    """One constant_value/partial_shape_value call: its memo and its budget of producers."""

    __slots__ = ("values", "shapes", "budget")

    def __init__(self) -> None:
        self.values: dict[int, Any] = {}
        self.shapes: dict[int, Any] = {}
        self.budget = MAX_CONSTANT_NODES

    def value(self, tensor: Any) -> np.ndarray | None:
        op = tensor.op
        kind = op.type
        if kind == "Const":
            return op.attrs["value"]
        key = id(tensor)
        if key in self.values:
            return self.values[key][1]
        found = None
        if self.budget > 0 and tensor.dtype in SHAPE_DTYPES:
            self.budget -= 1
            if kind == "Identity":
                found = self.value(op.inputs[0])
            else:
                evaluator = _CONSTANT_EVALUATORS.get(kind)
                if evaluator is not None:
                    found = evaluator(tensor, self.value)
            if found is not None:
                found = np.asarray(found)
                if found.size > MAX_CONSTANT_ELEMENTS or found.dtype != tensor.dtype.np_dtype:
                    found = None
                elif found.flags.writeable:
                    found = found.copy() if found.base is not None else found
                    found.flags.writeable = False
        self.values[key] = (tensor, found)  # the tensor is kept alive: its id stays its own
        return found

    def partial_shape(self, tensor: Any) -> TensorShape | None:
        value = self.value(tensor)
        if value is not None:
            return _shape_from_value(value)
        key = id(tensor)
        if key in self.shapes:
            return self.shapes[key][1]
        found = None
        if self.budget > 0 and tensor.dtype in SHAPE_DTYPES:
            self.budget -= 1
            op = tensor.op
            if op.type == "Identity":
                found = self.partial_shape(op.inputs[0])
            else:
                evaluator = _PARTIAL_SHAPE_EVALUATORS.get(op.type)
                if evaluator is not None:
                    found = evaluator(tensor, self.partial_shape, self.value)
        self.shapes[key] = (tensor, found)
        return found


def _shape_from_value(value: np.ndarray) -> TensorShape | None:
    """A shape tensor's value as a partial shape: -1 elements are unknown dims; a scalar -1 is
    an unknown rank (TF's MakeShapeFromShapeTensor)."""
    if value.dtype.kind not in "iu":
        return None
    if value.ndim == 0:
        if int(value) == -1:
            return unknown_shape()
        raise InvalidArgumentError(
            f"Input tensor must be rank 1, or if its rank 0 it must have value -1 (to represent "
            f"an unknown shape); saw value {int(value)}"
        )
    if value.ndim != 1:
        raise InvalidArgumentError(f"Shape must be rank 1 but is rank {value.ndim}")
    dims = []
    for d in value.tolist():
        if d < -1:
            raise InvalidArgumentError(f"Invalid value in tensor used for shape: {d}")
        dims.append(None if d == -1 else d)
    return TensorShape(dims)


def constant_value(tensor: Any) -> np.ndarray | None:
    """The value of `tensor` (an Output) when it is known at construction (read-only), else
    None: see `InferenceContext.constant_value`."""
    op = tensor.op
    kind = op.type
    if kind == "Const":
        return op.attrs["value"]
    if kind not in SEEN_THROUGH or tensor.dtype not in SHAPE_DTYPES:
        return None
    return _Evaluation().value(tensor)


def partial_shape_value(tensor: Any) -> TensorShape | None:
    """The partial shape the 1-D shape tensor `tensor` holds, as far as it is known at
    construction, else None: see `InferenceContext.partial_shape_value`."""
    return _Evaluation().partial_shape(tensor)


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
