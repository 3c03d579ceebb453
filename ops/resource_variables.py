"""Resource variables: TF 2.x graph mode's variable ops and the training ops that update them.
Op definitions (TF 2.21's OpDefs), shape functions, CPU and GPU kernels, builders, gradients.

A variable's state lives in the Session, per device (`minigraph.resources`): VarHandleOp makes
the handle (its device, container, shared name, dtype and declared shape), in host memory on
every device; every other op here looks the variable up in its node's device's ResourceMgr
(`ctx.resources`). `minigraph.Variable` builds these nodes for the usual cases.

- VarHandleOp; ReadVariableOp; AssignVariableOp (creates the variable), AssignAddVariableOp,
  AssignSubVariableOp; VarIsInitializedOp; DestroyResourceOp; VariableShape.
- ResourceGather (`batch_dims`; `validate_indices` is accepted and ignored, as by TF's CPU
  kernel: indices are always checked): only the rows named are read.
- ResourceScatterAdd / Sub / Update: `updates` of shape indices.shape + var.shape[1:], or a
  scalar for every row named. Repeated indices add up (Add, Sub; summed first, then applied,
  where TF's CPU kernel adds them one at a time: the values agree to rounding); Update keeps
  the last one, as TF's CPU kernel.
- The apply ops of TF 1.x's optimizers (tf.compat.v1.train): ResourceApplyGradientDescent
  (GradientDescentOptimizer, dense; its sparse updates are ResourceScatterAdd),
  ResourceApplyMomentum and ResourceSparseApplyMomentum (MomentumOptimizer, `use_nesterov`),
  ResourceApplyAdagrad and ResourceSparseApplyAdagrad (AdagradOptimizer, `update_slots`),
  ResourceApplyAdam (AdamOptimizer, `use_nesterov`; its sparse path assigns and scatter-adds).
  TF's CPU formulas, in TF's operation order (float32 and float64 values match TF's to
  rounding). Sparse ops apply repeated indices one after another, as TF's CPU kernels do
  (the optimizers sum them first), computed with log2(largest repeat count) vectorised
  rounds, so the values agree with TF's to rounding; without repeats each row is updated
  exactly as TF's kernel does. Their cost grows with the rows named, never the table size.

Locks (TF's): every variable has a shared/exclusive lock. Reads, gathers and VariableShape
share it; assigns and scatters hold it alone; the apply ops hold it alone with
`use_locking=True`, and share it (updates of one variable may then interleave: Hogwild, as
TF, but never corrupt memory) with `use_locking=False`, the default. Ops locking several
variables take the locks in one global order. Values are copy-on-write: a read hands out the
variable's array itself, read-only, and the next update first copies it, so a value read never
changes; after a sparse update dense reads copy, so sparse updates never copy the table.

Errors, TF's wording where TF has one: a variable read or updated before any assign is a
FailedPreconditionError naming it (TF 2.21's ReadVariableOp message; TF's apply ops say
"Invalid variable reference", an InternalError); a dtype or shape that does not match the
variable's is refused at construction when the handle's producer says what it is, naming both,
and at run time otherwise. Out-of-range indices are TF's InvalidArgumentErrors on every device.

Deliberate differences from TF: an assign of a value whose shape the variable's declared shape
does not allow is refused at run time too (TF's AssignVariableOp then replaces the variable's
shape); a VarHandleOp with an empty shared_name names its variable after its node (TF would
share one variable among all of them); ResourceGather with `batch_dims` checks the batch
dims (TF's kernel crashes) and names the index's own value in its out-of-range error (TF's
shows it plus a batch offset); the dtype of a resource tensor is checked by every kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from minigraph import (
    Const,
    FailedPreconditionError,
    IndexedSlices,
    InvalidArgumentError,
    KernelContext,
    NotFoundError,
    OpDef,
    Output,
    Scope,
    TensorShape,
    convert_to_tensor,
    current_scope,
    dtypes,
    no_gradient,
    register_gradient,
    register_kernel,
    register_op,
)
from minigraph.builder import OpBuilder, as_output
from minigraph.resources import ResourceHandle, Var, handle_of, handle_value, lock_all
from minigraph.shape_inference import HandleData, InferenceContext, resource_handle_data
from minigraph.tensor_shape import check_rank
from minigraph.variables import Variable
from ops.array import ConcatV2, ExpandDims, Pack, Reshape, Size, Slice
from ops.math import AddV2, Cast, Mul, Range
from ops.reduction import Prod
from ops.segment import UnsortedSegmentSum

__all__ = [
    "gather_variable",
    "VarHandleOp",
    "ReadVariableOp",
    "AssignVariableOp",
    "AssignAddVariableOp",
    "AssignSubVariableOp",
    "VarIsInitializedOp",
    "DestroyResourceOp",
    "VariableShape",
    "ResourceGather",
    "ResourceScatterAdd",
    "ResourceScatterSub",
    "ResourceScatterUpdate",
    "ResourceApplyGradientDescent",
    "ResourceApplyMomentum",
    "ResourceApplyAdagrad",
    "ResourceApplyAdam",
    "ResourceSparseApplyMomentum",
    "ResourceSparseApplyAdagrad",
    "Unique",
]

# TF's `numbertypes` (the scatter and apply ops' allowed set) without the quantized types.
_NUMBER = (
    "{float32, float64, int32, uint8, int16, int8, complex64, int64, bfloat16, uint16, "
    "complex128, float16, uint32, uint64}"
)
_INDICES = "Tindices: {int32, int64}"

# -- op definitions (TF 2.21's) ------------------------------------------------------------------

VAR_HANDLE_OP = OpDef(
    "VarHandleOp",
    outputs=["resource: resource"],
    attrs=[
        'container: string = ""',
        'shared_name: string = ""',
        'debug_name: string = ""',
        "dtype: type",
        "shape: shape",
        "allowed_devices: list(string) = []",
    ],  # fmt: skip
    shape_fn=lambda ctx: _var_handle_shape(ctx),
    is_stateful=True,
    doc="""A handle to the variable (container, shared_name) of the node's device in the running
session, of `dtype` and declared `shape` (possibly partial). An empty shared_name means the
node's name; an empty container TF's default, "localhost". `allowed_devices` is recorded only.""",
)

READ_VARIABLE_OP = OpDef(
    "ReadVariableOp",
    inputs=["resource: resource"],
    outputs=["value: dtype"],
    attrs=["dtype: type"],
    shape_fn=lambda ctx: _read_shape(ctx),
    is_stateful=True,
    doc="The variable's current value (a snapshot: later updates do not change it).",
)

ASSIGN_VARIABLE_OP = OpDef(
    "AssignVariableOp",
    inputs=["resource: resource", "value: dtype"],
    attrs=["dtype: type", "validate_shape: bool = false"],
    shape_fn=lambda ctx: _assign_shape(ctx, "assign to"),
    is_stateful=True,
    doc="""Gives the variable the value `value` (creating it on first use). The value must be
compatible with the variable's declared shape; with `validate_shape`, of the current value's
shape too.""",
)

ASSIGN_ADD_VARIABLE_OP = OpDef(
    "AssignAddVariableOp",
    inputs=["resource: resource", "value: dtype"],
    attrs=["dtype: type"],
    shape_fn=lambda ctx: _assign_shape(ctx, "add to"),
    is_stateful=True,
    doc="Adds `value` (of the variable's shape) to the variable.",
)

ASSIGN_SUB_VARIABLE_OP = OpDef(
    "AssignSubVariableOp",
    inputs=["resource: resource", "value: dtype"],
    attrs=["dtype: type"],
    shape_fn=lambda ctx: _assign_shape(ctx, "subtract from"),
    is_stateful=True,
    doc="Subtracts `value` (of the variable's shape) from the variable.",
)

VAR_IS_INITIALIZED_OP = OpDef(
    "VarIsInitializedOp",
    inputs=["resource: resource"],
    outputs=["is_initialized: bool"],
    shape_fn=lambda ctx: _scalar_handle_shape(ctx, TensorShape([])),
    is_stateful=True,
    doc="Whether the variable has a value in the running session.",
)

DESTROY_RESOURCE_OP = OpDef(
    "DestroyResourceOp",
    inputs=["resource: resource"],
    attrs=["ignore_lookup_error: bool = true"],
    shape_fn=lambda ctx: _scalar_handle_shape(ctx, None),
    is_stateful=True,
    doc="""Drops the resource from the running session (a variable is then uninitialized);
a resource that does not exist is an error unless `ignore_lookup_error`.""",
)

VARIABLE_SHAPE = OpDef(
    "VariableShape",
    inputs=["input: resource"],
    outputs=["output: out_type"],
    attrs=["out_type: {int32, int64} = int32"],
    shape_fn=lambda ctx: _variable_shape_shape(ctx),
    is_stateful=True,
    doc="The shape of the variable's current value.",
)

RESOURCE_GATHER = OpDef(
    "ResourceGather",
    inputs=["resource: resource", "indices: Tindices"],
    outputs=["output: dtype"],
    attrs=["batch_dims: int = 0", "validate_indices: bool = true", "dtype: type", _INDICES],
    shape_fn=lambda ctx: _gather_shape(ctx),
    is_stateful=True,
    doc="""The variable's slices along axis `batch_dims` named by `indices` (tf.gather of its
value with axis = batch_dims): shape var.shape[:b] + indices.shape[b:] + var.shape[b + 1:].
Only those rows are read. Indices must be in [0, var.shape[b]).""",
)


def _scatter_def(name: str, dtype_spec: str, what: str) -> OpDef:
    return OpDef(
        name,
        inputs=["resource: resource", "indices: Tindices", "updates: dtype"],
        attrs=[f"dtype: {dtype_spec}", _INDICES],
        shape_fn=lambda ctx: _scatter_shape(ctx, what),
        is_stateful=True,
        doc=f"""The variable's rows `indices` {what} `updates` (shape indices.shape +
var.shape[1:], or a scalar for every row).""",
    )


RESOURCE_SCATTER_ADD = _scatter_def("ResourceScatterAdd", _NUMBER, "plus")
RESOURCE_SCATTER_SUB = _scatter_def("ResourceScatterSub", _NUMBER, "minus")
RESOURCE_SCATTER_UPDATE = _scatter_def("ResourceScatterUpdate", "type", "replaced by")

_LOCKING = "use_locking: bool = false"
_NESTEROV = "use_nesterov: bool = false"
_SLOTS = "update_slots: bool = true"
_T = f"T: {_NUMBER}"

RESOURCE_APPLY_GRADIENT_DESCENT = OpDef(
    "ResourceApplyGradientDescent",
    inputs=["var: resource", "alpha: T", "delta: T"],
    attrs=[_T, _LOCKING],
    shape_fn=lambda ctx: _apply_shape(ctx, "ResourceApplyGradientDescent"),
    is_stateful=True,
    doc="var -= delta * alpha.",
)

RESOURCE_APPLY_MOMENTUM = OpDef(
    "ResourceApplyMomentum",
    inputs=["var: resource", "accum: resource", "lr: T", "grad: T", "momentum: T"],
    attrs=[_T, _LOCKING, _NESTEROV],
    shape_fn=lambda ctx: _apply_shape(ctx, "ResourceApplyMomentum"),
    is_stateful=True,
    doc="""accum = accum * momentum + grad; var -= accum * lr, or with use_nesterov
var -= grad * lr + accum * momentum * lr.""",
)

RESOURCE_APPLY_ADAGRAD = OpDef(
    "ResourceApplyAdagrad",
    inputs=["var: resource", "accum: resource", "lr: T", "grad: T"],
    attrs=[_T, _LOCKING, _SLOTS],
    shape_fn=lambda ctx: _apply_shape(ctx, "ResourceApplyAdagrad"),
    is_stateful=True,
    doc="accum += grad * grad (when update_slots); var -= grad * lr * rsqrt(accum).",
)

RESOURCE_APPLY_ADAM = OpDef(
    "ResourceApplyAdam",
    inputs=[
        "var: resource",
        "m: resource",
        "v: resource",
        "beta1_power: T",
        "beta2_power: T",
        "lr: T",
        "beta1: T",
        "beta2: T",
        "epsilon: T",
        "grad: T",
    ],  # fmt: skip
    attrs=[_T, _LOCKING, _NESTEROV],
    shape_fn=lambda ctx: _apply_shape(ctx, "ResourceApplyAdam"),
    is_stateful=True,
    doc="""alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m += (grad - m) * (1 - beta1);
v += (grad * grad - v) * (1 - beta2); var -= m * alpha / (sqrt(v) + epsilon), or with
use_nesterov var -= (grad * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon).""",
)

RESOURCE_SPARSE_APPLY_MOMENTUM = OpDef(
    "ResourceSparseApplyMomentum",
    inputs=[
        "var: resource",
        "accum: resource",
        "lr: T",
        "grad: T",
        "indices: Tindices",
        "momentum: T",
    ],  # fmt: skip
    attrs=[_T, _INDICES, _LOCKING, _NESTEROV],
    shape_fn=lambda ctx: _apply_shape(ctx, "ResourceSparseApplyMomentum"),
    is_stateful=True,
    doc="""ResourceApplyMomentum on the rows `indices` of var and accum, with grad's rows, one
index after the other.""",
)

RESOURCE_SPARSE_APPLY_ADAGRAD = OpDef(
    "ResourceSparseApplyAdagrad",
    inputs=["var: resource", "accum: resource", "lr: T", "grad: T", "indices: Tindices"],
    attrs=[_T, _INDICES, _LOCKING, _SLOTS],
    shape_fn=lambda ctx: _apply_shape(ctx, "ResourceSparseApplyAdagrad"),
    is_stateful=True,
    doc="""ResourceApplyAdagrad on the rows `indices` of var and accum, with grad's rows, one
index after the other.""",
)


# -- shape functions -----------------------------------------------------------------------------


def _handle(ctx: InferenceContext, i: int) -> HandleData | None:
    """What resource input `i` refers to (None when the graph does not say), the input checked
    to be a scalar handle."""
    shape = ctx.input_shapes[i]
    if shape.rank not in (None, 0):
        raise InvalidArgumentError(f"a resource handle is a scalar; input {i} has shape {shape}")
    return ctx.input_handle_data(i)


def _checked_dtype(data: HandleData | None, dtype: Any, verb: str) -> None:
    if data is not None and dtype is not None and data.dtype is not dtype:
        raise InvalidArgumentError(
            f"Trying to {verb} variable '{data.name}' with wrong dtype. Expected "
            f"{data.dtype.name} got {dtype.name}"
        )


def _var_shape(ctx: InferenceContext, i: int, dtype: Any, verb: str) -> TensorShape:
    """The declared shape of the variable of input `i` (unknown when the graph does not say),
    its dtype checked against `dtype`."""
    data = _handle(ctx, i)
    _checked_dtype(data, dtype, verb)
    return data.shape if data is not None else TensorShape(None)


def _var_handle_shape(ctx: InferenceContext) -> TensorShape:
    if ctx.attr("dtype") is dtypes.resource:
        raise InvalidArgumentError("a variable cannot hold resource handles (dtype resource)")
    return TensorShape([])


def _read_shape(ctx: InferenceContext) -> TensorShape:
    return _var_shape(ctx, 0, ctx.attr("dtype"), "read")


def _assign_shape(ctx: InferenceContext, verb: str) -> list[Any]:
    data = _handle(ctx, 0)
    _checked_dtype(data, ctx.attr("dtype"), verb)
    value = ctx.input_shapes[1]
    if data is not None and not data.shape.is_compatible_with(value):
        raise InvalidArgumentError(
            f"Trying to {verb} variable '{data.name}' of shape {data.shape} a value of shape "
            f"{value}: the shapes are incompatible"
        )
    return []


def _scalar_handle_shape(ctx: InferenceContext, output: TensorShape | None) -> Any:
    _handle(ctx, 0)
    return [] if output is None else output


def _variable_shape_shape(ctx: InferenceContext) -> TensorShape:
    data = _handle(ctx, 0)
    rank = None if data is None else data.shape.rank
    return TensorShape([rank])


def _gather_shape(ctx: InferenceContext) -> TensorShape:
    params = _var_shape(ctx, 0, ctx.attr("dtype"), "gather from")
    indices = ctx.input_shapes[1]
    bd = ctx.attr("batch_dims")
    if bd < 0:
        raise InvalidArgumentError(f"batch_dims is negative ({bd})")
    params.with_rank_at_least(bd + 1)
    indices.with_rank_at_least(bd)
    if params.rank is None or indices.rank is None:
        return TensorShape(None)
    p, q = params.dims, indices.dims
    for k in range(bd):
        if p[k] is not None and q[k] is not None and p[k] != q[k]:
            raise InvalidArgumentError(
                f"params.shape[{k}]: {p[k]} should be equal to indices.shape[{k}]: {q[k]}"
            )
    batch = [p[k] if p[k] is not None else q[k] for k in range(bd)]
    out = TensorShape(batch + list(q[bd:]) + list(p[bd + 1 :]))
    check_rank(out.rank, "the output")
    return out


def _scatter_shape(ctx: InferenceContext, what: str) -> list[Any]:
    data = _handle(ctx, 0)
    _checked_dtype(data, ctx.attr("dtype"), "scatter into")
    params = data.shape if data is not None else TensorShape(None)
    params.with_rank_at_least(1)
    indices, updates = ctx.input_shapes[1], ctx.input_shapes[2]
    if updates.rank != 0:
        expected = indices.concatenate(params[1:])
        if not updates.is_compatible_with(expected):
            raise InvalidArgumentError(
                "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = "
                f"[], got updates.shape {updates}, indices.shape {indices}, params.shape "
                f"{params} (variable '{data.name if data else '?'}')"
            )
    return []


def _apply_shape(ctx: InferenceContext, op_type: str) -> list[Any]:
    """The apply ops' checks: every variable of dtype T and of var's shape, scalars scalar, the
    gradient of var's shape (dense) or of rows of it (sparse)."""
    row = _APPLY[op_type]
    names = [a.name for a in _OP_DEFS[op_type].inputs]
    dtype = ctx.attr("T")
    shape_of = dict(zip(names, ctx.input_shapes))
    var_data = _handle(ctx, 0)
    _checked_dtype(var_data, dtype, "update")
    var = var_data.shape if var_data is not None else TensorShape(None)
    for slot in row.slots:
        i = names.index(slot)
        data = _handle(ctx, i)
        _checked_dtype(data, dtype, "update")
        if data is not None and not data.shape.is_compatible_with(var):
            raise InvalidArgumentError(
                f"var and {slot} do not have the same shape: variable "
                f"'{var_data.name if var_data else '?'}' is {var} and {slot} "
                f"'{data.name}' is {data.shape}"
            )
    for name in row.scalars:
        if shape_of[name].rank not in (None, 0):
            raise InvalidArgumentError(f"{name} is not a scalar: {shape_of[name]}")
    grad = shape_of[row.grad]
    if not row.sparse:
        if not grad.is_compatible_with(var):
            raise InvalidArgumentError(
                f"var and {row.grad} do not have the same shape: variable "
                f"'{var_data.name if var_data else '?'}' is {var} and {row.grad} is {grad}"
            )
        return []
    var.with_rank_at_least(1)
    indices = shape_of["indices"].with_rank(1)
    grad = grad.with_rank_at_least(1)
    if not grad[:1].is_compatible_with(indices):
        raise InvalidArgumentError(
            f"grad must be the same size as indices in the first dimension: grad is {grad}, "
            f"indices {indices}"
        )
    if not grad[1:].is_compatible_with(var[1:]):
        raise InvalidArgumentError(
            f"var and grad must match in every dimension but the first: variable "
            f"'{var_data.name if var_data else '?'}' is {var} and grad is {grad}"
        )
    return []


# -- kernel helpers ------------------------------------------------------------------------------


def _text(shape: Sequence[int]) -> str:
    """TF's TensorShape::DebugString: `[2,3]`."""
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _handle_of(ctx: KernelContext, value: Any, what: str) -> ResourceHandle:
    try:
        handle = handle_of(value, what)
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    if handle.device != ctx.device.name:
        raise ctx.invalid_argument(
            f"Trying to access resource {handle.name} located in device {handle.device} from "
            f"device {ctx.device.name} (the variables an op uses must live on its device: make "
            "them colocated, e.g. Variable(scope.colocate_with(other.op), ...), as optimizers "
            "make their slots)"
        )
    return handle


def _manager(ctx: KernelContext) -> Any:
    mgr = ctx.resources
    if mgr is None:
        raise FailedPreconditionError(
            f"{ctx.op_type} needs a session's resources (variables live in a Session); this "
            "kernel runs outside one",
            ctx.node_name,
            ctx.op_type,
        )
    return mgr


def _uninitialized(ctx: KernelContext, handle: ResourceHandle) -> FailedPreconditionError:
    return FailedPreconditionError(
        f"Could not find variable {handle.name}. This could mean that the variable has been "
        "deleted. In TF1, it can also mean the variable is uninitialized: run its initializer "
        "first (Variable.initializer, or the op of global_variables_initializer(scope)). Debug "
        f"info: container={handle.container}, device={handle.device}",
        ctx.node_name,
        ctx.op_type,
    )


def _lookup(ctx: KernelContext, value: Any, what: str) -> tuple[ResourceHandle, Var | None]:
    handle = _handle_of(ctx, value, what)
    found = _manager(ctx).lookup(*handle.key)
    if found is not None and not isinstance(found, Var):
        raise ctx.invalid_argument(
            f"resource {handle.container}/{handle.name} is a {type(found).__name__}, not a variable"
        )
    return handle, found


def _variable(ctx: KernelContext, value: Any, dtype: Any, what: str = "resource") -> Var:
    """The initialized variable a handle names, of `dtype`."""
    handle, var = _lookup(ctx, value, what)
    if var is None or var.value is None:
        raise _uninitialized(ctx, handle)
    if dtype is not None and var.dtype is not dtype:
        raise ctx.invalid_argument(
            f"Trying to access variable {handle.name} with wrong dtype. Expected "
            f"{var.dtype.name} got {dtype.name}"
        )
    return var


def _host(xp: Any, array: Any) -> np.ndarray:
    return array if xp is np else array.get()


def _position(shape: tuple[int, ...], flat: int) -> str:
    """TF's SliceDebugString: `[0,1]`; '' for a scalar."""
    if not shape:
        return ""
    return "[" + ",".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def _first_bad(xp: Any, flat: Any, limit: int) -> int | None:
    """The first position of `flat` (1-D int64) outside [0, limit), or None."""
    if flat.size == 0:
        return None
    bad = (flat < 0) | (flat >= limit)
    if not bool(bad.any()):
        return None
    return int(xp.argmax(bad))


def _flat_indices(ctx: KernelContext, indices: Any, n: int) -> Any:
    """`indices` as a 1-D int64 vector, each checked to be in [0, n) (TF's message)."""
    xp = ctx.xp
    flat = indices.reshape(-1).astype(np.int64, copy=False)
    bad = _first_bad(xp, flat, n)
    if bad is not None:
        value = int(_host(xp, flat[bad]))
        raise ctx.invalid_argument(
            f"indices{_position(indices.shape, bad)} = {value} is not in [0, {n})"
        )
    return flat


def _rsqrt(xp: Any, x: Any) -> Any:
    return xp.reciprocal(xp.sqrt(x))


class _Segments:
    """The repeated-index structure of a 1-D index vector, in stable sorted order: `order`
    (positions sorted by index), `unique` (the distinct indices), `group` (per sorted position,
    its index's number in `unique`), `start` (per sorted position, where its run starts),
    `ends` (per distinct index, the last sorted position of its run), `longest` (the most
    times one index repeats)."""

    __slots__ = ("order", "unique", "group", "start", "ends", "longest")

    def __init__(self, xp: Any, flat: Any):
        n = flat.shape[0]
        order = xp.argsort(flat, kind="stable")
        ordered = flat[order]
        first = xp.empty(n, dtype=bool)
        first[:1] = True
        xp.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        starts = xp.flatnonzero(first)
        group = xp.cumsum(first) - 1
        ends = xp.empty_like(starts)
        ends[:-1] = starts[1:] - 1
        ends[-1:] = n - 1
        self.order = order
        self.unique = ordered[starts]
        self.group = group
        self.start = starts[group]
        self.ends = ends
        self.longest = int((ends - starts).max()) + 1


def _unique_or_segments(xp: Any, flat: Any) -> _Segments | None:
    """None when no index repeats (the usual case: each row is then updated once, exactly as
    TF does it), else the segments."""
    if flat.size < 2:
        return None
    ordered = xp.sort(flat)  # a plain sort answers "any repeat?" at a third of the segments' cost
    if not bool((ordered[1:] == ordered[:-1]).any()):
        return None
    return _Segments(xp, flat)


def _scan(xp: Any, seg: _Segments, b: Any, a: Any = None) -> tuple[Any, Any]:
    """Inclusive scan, within each run of `seg` (rows in sorted order), of the affine maps
    x -> a * x + b applied in order: per row, the (a, b) of its run's maps so far composed.
    `a` None means every map adds only (a = 1): a segmented running sum. Hillis-Steele over
    log2(longest) vectorised rounds."""
    n = b.shape[0]
    position = xp.arange(n)
    d = 1
    while d < seg.longest:
        prev = position - d
        ok = prev >= seg.start
        source = xp.where(ok, prev, 0)
        ok = ok.reshape((n,) + (1,) * (b.ndim - 1))
        if a is None:
            b = xp.where(ok, b + b[source], b)
        else:
            b, a = xp.where(ok, a * b[source] + b, b), xp.where(ok, a * a[source], a)
        d *= 2
    return a, b


def _take_rows(xp: Any, table: Any, rows: Any) -> Any:
    """table[rows], a new array (take: 3x numpy's fancy indexing for rows of a table)."""
    return table.take(rows, axis=0)


def _put_rows(xp: Any, table: Any, rows: Any, values: Any) -> None:
    """table[rows] = values for distinct rows of a 2-D table: on the CPU one put of the rows
    as void records where both are contiguous (3-6x numpy's fancy-index assignment)."""
    if xp is np and table.flags.c_contiguous and values.flags.c_contiguous:
        record = np.dtype((np.void, table.shape[1] * table.dtype.itemsize))
        table.view(record).reshape(-1).put(rows, values.view(record).reshape(-1))
        return
    table[rows] = values


def _split_repeats(xp: Any, flat: Any, seg: _Segments) -> tuple[Any, Any]:
    """(positions of the indices named once, positions of the repeated ones), each in their
    original order: the rows named once take the one-update path (a batch of ids from a
    large table repeats few), only the repeated ones the scans."""
    runs = seg.ends - xp.concatenate((seg.ends[:1] * 0 - 1, seg.ends[:-1])) > 1
    repeated = xp.empty(flat.shape[0], dtype=bool)
    repeated[seg.order] = runs[seg.group]
    return xp.flatnonzero(~repeated), xp.flatnonzero(repeated)


def _segment_sums(xp: Any, seg: _Segments, rows: Any) -> Any:
    """Per distinct index, the sum of `rows` (in sorted order) of its run, added in order."""
    if xp is np:
        starts = np.concatenate(([0], seg.ends[:-1] + 1))
        return np.add.reduceat(rows, starts, axis=0)
    return _scan(xp, seg, rows)[1][seg.ends]


# -- kernels: handles, reads, assigns ---------------------------------------------------------


def _var_handle_kernel(
    ctx: KernelContext, *, container: str, shared_name: str, dtype: Any, shape: TensorShape
) -> np.ndarray:
    handle = ctx.cache.get("handle")
    if handle is None:
        made = ResourceHandle(
            ctx.device.name, container, shared_name or ctx.node_name, dtype, shape
        )
        handle = ctx.cache["handle"] = handle_value(made)
    return handle


def _read_kernel(ctx: KernelContext, resource: Any, *, dtype: Any) -> Any:
    var = _variable(ctx, resource, dtype)
    with var.lock.shared():
        return var.share()


def _check_declared(ctx: KernelContext, handle: ResourceHandle, value: Any, verb: str) -> None:
    if not handle.shape.is_compatible_with(value.shape):
        raise ctx.invalid_argument(
            f"Trying to {verb} variable {handle.name} of shape {handle.shape} a value of shape "
            f"{_text(value.shape)}: the shapes are incompatible"
        )


def _assign_kernel(
    ctx: KernelContext, resource: Any, value: Any, *, dtype: Any, validate_shape: bool
) -> tuple[()]:
    handle = _handle_of(ctx, resource, "resource")
    if handle.dtype is not dtype:
        raise ctx.invalid_argument(
            f"Trying to assign variable with wrong dtype. Expected {handle.dtype.name} got "
            f"{dtype.name} (variable {handle.name})"
        )
    _check_declared(ctx, handle, value, "assign to")
    var = _manager(ctx).lookup_or_create(
        handle.container, handle.name, lambda: Var(handle.dtype, handle.shape, handle.name)
    )
    if not isinstance(var, Var) or var.dtype is not dtype:
        raise ctx.invalid_argument(
            f"resource {handle.container}/{handle.name} is not a {dtype.name} variable"
        )
    # A dying intermediate (nothing else sees it) becomes the variable's own array.
    owned = 1 in ctx.forwardable_inputs and value.flags.c_contiguous
    with var.lock.exclusive():
        if validate_shape and var.value is not None and var.value.shape != value.shape:
            raise ctx.invalid_argument(
                "Trying to assign to variable with tensor with wrong shape. Expected "
                f"{_text(var.value.shape)} got {_text(value.shape)}"
            )
        var.set(value, owned)
    return ()


def _assign_update_kernel(add: bool) -> Callable[..., tuple[()]]:
    def kernel(ctx: KernelContext, resource: Any, value: Any, *, dtype: Any) -> tuple[()]:
        xp = ctx.xp
        var = _variable(ctx, resource, dtype)
        with var.lock.exclusive():
            current = var.value
            if current.shape != value.shape:
                raise ctx.invalid_argument(
                    f"Cannot update variable with shape {_text(current.shape)} using a Tensor "
                    f"with shape {_text(value.shape)}, shapes must be equal."
                )
            op = xp.add if add else xp.subtract
            if var.shared:  # copy-on-write and the update in one pass
                # (asarray: numpy gives a scalar, not a 0-d array, for 0-d operands)
                var.set(xp.asarray(op(current, value)), owned=True)
            else:
                op(current, value, out=current)
        return ()

    kernel.__name__ = kernel.__qualname__ = f"_assign_{'add' if add else 'sub'}_kernel"
    return kernel


def _is_initialized_kernel(ctx: KernelContext, resource: Any) -> np.ndarray:
    _, var = _lookup(ctx, resource, "resource")
    return np.array(var is not None and var.value is not None)


def _destroy_kernel(ctx: KernelContext, resource: Any, *, ignore_lookup_error: bool) -> tuple[()]:
    handle = _handle_of(ctx, resource, "resource")
    if not _manager(ctx).delete(*handle.key) and not ignore_lookup_error:
        raise NotFoundError(
            f"Resource {handle.container}/{handle.name}/<unknown> does not exist.",
            ctx.node_name,
            ctx.op_type,
        )
    return ()


def _variable_shape_kernel(ctx: KernelContext, input: Any, *, out_type: Any) -> np.ndarray:  # noqa: A002
    var = _variable(ctx, input, None)
    with var.lock.shared():
        shape = var.value.shape
    return np.array(shape, dtype=out_type.np_dtype)


# -- kernels: gather and scatter --------------------------------------------------------------


def _gather_kernel(
    ctx: KernelContext, resource: Any, indices: Any, *, batch_dims: int, dtype: Any
) -> Any:
    xp = ctx.xp
    var = _variable(ctx, resource, dtype)
    bd = batch_dims
    if bd < 0:
        raise ctx.invalid_argument(f"batch_dims is negative ({bd})")
    with var.lock.shared():
        params = var.value
        shape = params.shape
        if params.ndim < bd + 1:
            raise ctx.invalid_argument(
                f"params must be at least {bd + 1}-dimensional (batch_dims {bd}); got shape "
                f"{_text(shape)}"
            )
        if indices.ndim < bd:
            raise ctx.invalid_argument(
                f"indices must be at least {bd}-dimensional (batch_dims {bd}); got shape "
                f"{_text(indices.shape)}"
            )
        for k in range(bd):
            if shape[k] != indices.shape[k]:
                raise ctx.invalid_argument(
                    f"params.shape[{k}]: {shape[k]} should be equal to indices.shape[{k}]: "
                    f"{indices.shape[k]}"
                )
        n = shape[bd]
        flat = _flat_indices(ctx, indices, n)
        out_shape = shape[:bd] + indices.shape[bd:] + shape[bd + 1 :]
        check_rank(len(out_shape), "the output")
        if math.prod(out_shape) == 0:
            return xp.empty(out_shape, dtype=params.dtype)
        if bd == 0:
            return xp.take(params, flat, axis=0).reshape(out_shape)
        batch = math.prod(shape[:bd])
        inner = math.prod(shape[bd + 1 :])
        rows = flat.reshape(batch, -1) + (xp.arange(batch, dtype=np.int64) * n)[:, None]
        table = params.reshape(batch * n, inner)
        return xp.take(table, rows.reshape(-1), axis=0).reshape(out_shape)


def _scatter_kernel(kind: str) -> Callable[..., tuple[()]]:
    def kernel(ctx: KernelContext, resource: Any, indices: Any, updates: Any, *, dtype: Any):
        xp = ctx.xp
        var = _variable(ctx, resource, dtype)
        with var.lock.exclusive():
            params = var.value
            if params.ndim < 1 or (
                updates.ndim != 0 and updates.shape != indices.shape + params.shape[1:]
            ):
                raise ctx.invalid_argument(
                    "Must have updates.shape = indices.shape + params.shape[1:] or "
                    f"updates.shape = [], got updates.shape {_text(updates.shape)}, "
                    f"indices.shape {_text(indices.shape)}, params.shape {_text(params.shape)}"
                )
            n = params.shape[0]
            flat = _flat_indices(ctx, indices, n)
            if flat.size == 0:
                return ()
            var.copy_on_read = True  # dense reads copy from now on: rows update in place
            table = var.writable().reshape(n, -1)
            rows = _rows(xp, updates, flat.size, table.shape[1])
            seg = _unique_or_segments(xp, flat)
            if kind == "update":
                if seg is not None:  # the last of each repeated index wins, as TF's CPU kernel
                    flat, rows = seg.unique, rows[seg.order[seg.ends]]
                table[flat] = rows
                return ()
            if seg is not None:
                flat, rows = seg.unique, _segment_sums(xp, seg, rows[seg.order])
            current = table[flat]
            table[flat] = current + rows if kind == "add" else current - rows
        return ()

    kernel.__name__ = kernel.__qualname__ = f"_scatter_{kind}_kernel"
    return kernel


def _rows(xp: Any, updates: Any, n: int, inner: int) -> Any:
    """`updates` as n rows of `inner` values (a scalar repeated)."""
    if updates.ndim == 0:
        return xp.broadcast_to(updates.reshape(1, 1), (n, inner))
    return updates.reshape(n, inner)


# -- the apply ops -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ApplyRow:
    """One apply op: its variables after `var`, scalar inputs, gradient input, whether sparse,
    and `update(xp, arrays, scalars, grad, attrs)`, which updates the arrays in place."""

    op_type: str
    slots: tuple[str, ...]
    scalars: tuple[str, ...]
    grad: str
    sparse: bool
    update: Callable[..., None]


def _gradient_descent(xp: Any, arrays: list[Any], s: dict[str, Any], grad: Any, attrs: Any):
    (var,) = arrays
    xp.subtract(var, xp.multiply(grad, s["alpha"]), out=var)  # var -= grad * lr


def _momentum(xp: Any, arrays: list[Any], s: dict[str, Any], grad: Any, attrs: Any) -> None:
    var, accum = arrays
    lr, m = s["lr"], s["momentum"]
    xp.multiply(accum, m, out=accum)  # accum = accum * momentum + grad
    xp.add(accum, grad, out=accum)
    if attrs["use_nesterov"]:  # var -= grad * lr + accum * momentum * lr
        step = xp.multiply(grad, lr)
        xp.add(step, xp.multiply(xp.multiply(accum, m), lr), out=step)
    else:  # var -= accum * lr
        step = xp.multiply(accum, lr)
    xp.subtract(var, step, out=var)


def _adagrad(xp: Any, arrays: list[Any], s: dict[str, Any], grad: Any, attrs: Any) -> None:
    var, accum = arrays
    if attrs["update_slots"]:  # accum += grad.square()
        xp.add(accum, xp.multiply(grad, grad), out=accum)
    step = xp.multiply(grad, s["lr"])  # var -= grad * lr * accum.rsqrt()
    xp.multiply(step, _rsqrt(xp, accum), out=step)
    xp.subtract(var, step, out=var)


def _adam(xp: Any, arrays: list[Any], s: dict[str, Any], grad: Any, attrs: Any) -> None:
    var, m, v = arrays
    beta1, beta2, eps = s["beta1"], s["beta2"], s["epsilon"]
    # alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power), in T, as TF's CPU kernel.
    alpha = s["lr"] * xp.sqrt(1 - s["beta2_power"]) / (1 - s["beta1_power"])
    t = xp.subtract(grad, m)  # m += (grad - m) * (1 - beta1)
    xp.multiply(t, 1 - beta1, out=t)
    xp.add(m, t, out=m)
    t = xp.subtract(xp.multiply(grad, grad), v)  # v += (grad.square() - v) * (1 - beta2)
    xp.multiply(t, 1 - beta2, out=t)
    xp.add(v, t, out=v)
    if attrs["use_nesterov"]:  # ((grad * (1 - beta1) + beta1 * m) * alpha) / (sqrt(v) + eps)
        num = xp.multiply(grad, 1 - beta1)
        xp.add(num, xp.multiply(beta1, m), out=num)
        xp.multiply(num, alpha, out=num)
    else:  # (m * alpha) / (sqrt(v) + eps)
        num = xp.multiply(m, alpha)
    den = xp.sqrt(v)
    xp.add(den, eps, out=den)
    xp.divide(num, den, out=num)
    xp.subtract(var, num, out=var)


def _sparse_momentum(
    xp: Any, tables: list[Any], s: dict[str, Any], grad: Any, flat: Any, attrs: Any
) -> None:
    var, accum = tables
    lr, m = s["lr"], s["momentum"]
    nesterov = attrs["use_nesterov"]
    seg = _unique_or_segments(xp, flat)
    if seg is None:  # TF's per-row update, each row once
        a = xp.add(xp.multiply(accum[flat], m), grad)  # a = a * momentum + g
        accum[flat] = a
        if nesterov:  # v -= lr * g + lr * a * momentum
            step = xp.add(xp.multiply(lr, grad), xp.multiply(xp.multiply(lr, a), m))
        else:  # v -= lr * a
            step = xp.multiply(lr, a)
        var[flat] = xp.subtract(var[flat], step)
        return
    # Repeated indices, one after the other: accum after the k-th occurrence of a row is
    # m**k * a0 + sum_j m**(k - j) g_j, a scan of the maps a -> m * a + g.
    g = grad[seg.order]
    ones = xp.ones((g.shape[0],) + (1,) * (g.ndim - 1), dtype=g.dtype)
    powers, sums = _scan(xp, seg, g, xp.multiply(ones, m))
    a = xp.add(xp.multiply(powers, accum[seg.unique][seg.group]), sums)
    if nesterov:
        steps = xp.add(xp.multiply(lr, g), xp.multiply(xp.multiply(lr, a), m))
    else:
        steps = xp.multiply(lr, a)
    accum[seg.unique] = a[seg.ends]
    var[seg.unique] = xp.subtract(var[seg.unique], _segment_sums(xp, seg, steps))


def _sparse_adagrad(
    xp: Any, tables: list[Any], s: dict[str, Any], grad: Any, flat: Any, attrs: Any
) -> None:
    var, accum = tables
    lr = s["lr"]
    update_slots = attrs["update_slots"]
    vector = var.shape[1] == 1 and attrs["_var_rank"] == 1  # TF's inner_dim == 1 branch

    def step(g: Any, a: Any) -> Any:  # two temporaries, written in place
        t, r = xp.multiply(lr, g), xp.sqrt(a)
        if vector:  # var(index) -= lr * g / sqrt(a)
            return xp.divide(t, r, out=t)
        return xp.multiply(t, xp.reciprocal(r, out=r), out=t)  # v -= lr * g * a.rsqrt()

    def once(flat: Any, grad: Any) -> None:  # TF's per-row update, each row named once
        a = _take_rows(xp, accum, flat)
        if update_slots:  # a += g.square()
            xp.add(a, xp.multiply(grad, grad), out=a)
            _put_rows(xp, accum, flat, a)
        rows = _take_rows(xp, var, flat)
        xp.subtract(rows, step(grad, a), out=rows)
        _put_rows(xp, var, flat, rows)

    seg = _unique_or_segments(xp, flat)
    if seg is None:
        once(flat, grad)
        return
    single, repeated = _split_repeats(xp, flat, seg)
    if single.size:
        once(flat[single], grad[single])
    flat, grad = flat[repeated], grad[repeated]
    seg = _Segments(xp, flat)
    g = grad[seg.order]
    a = accum[seg.unique][seg.group]
    if update_slots:  # accum after each occurrence: a0 + the squares so far
        a = xp.add(a, _scan(xp, seg, xp.multiply(g, g))[1])
        accum[seg.unique] = a[seg.ends]
    var[seg.unique] = xp.subtract(var[seg.unique], _segment_sums(xp, seg, step(g, a)))


_APPLY = {
    row.op_type: row
    for row in (
        _ApplyRow("ResourceApplyGradientDescent", (), ("alpha",), "delta", False,
                  _gradient_descent),
        _ApplyRow("ResourceApplyMomentum", ("accum",), ("lr", "momentum"), "grad", False,
                  _momentum),
        _ApplyRow("ResourceApplyAdagrad", ("accum",), ("lr",), "grad", False, _adagrad),
        _ApplyRow("ResourceApplyAdam", ("m", "v"),
                  ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"), "grad",
                  False, _adam),
        _ApplyRow("ResourceSparseApplyMomentum", ("accum",), ("lr", "momentum"), "grad", True,
                  _sparse_momentum),
        _ApplyRow("ResourceSparseApplyAdagrad", ("accum",), ("lr",), "grad", True,
                  _sparse_adagrad),
    )
}  # fmt: skip


def _apply_kernel(row: _ApplyRow) -> Callable[..., tuple[()]]:
    """The kernel of an apply op: checks as TF's kernel, the locks per `use_locking`, then
    `row.update` on the variables' (copy-on-write) arrays."""
    op_def = _OP_DEFS[row.op_type]
    names = [a.name for a in op_def.inputs]
    resources = ["var", *row.slots]

    def kernel(ctx: KernelContext, *inputs: Any, **attrs: Any) -> tuple[()]:
        xp = ctx.xp
        given = dict(zip(names, inputs))
        dtype = attrs["T"]
        variables = [_variable(ctx, given[r], dtype, r) for r in resources]
        scalars = {}
        for name in row.scalars:
            value = given[name]
            if value.ndim != 0:
                raise ctx.invalid_argument(f"{name} is not a scalar: {_text(value.shape)}")
            scalars[name] = value
        grad = given[row.grad]
        with lock_all(variables, exclusive=attrs["use_locking"]):
            values = [v.value for v in variables]
            var = values[0]
            for slot, value in zip(row.slots, values[1:]):
                if value.shape != var.shape:
                    raise ctx.invalid_argument(
                        f"var and {slot} do not have the same shape{_text(var.shape)} "
                        f"{_text(value.shape)}"
                    )
            if not row.sparse:
                if grad.shape != var.shape:
                    raise ctx.invalid_argument(
                        f"var and {row.grad} do not have the same shape{_text(var.shape)} "
                        f"{_text(grad.shape)}"
                    )
                row.update(xp, [v.writable() for v in variables], scalars, grad, attrs)
                return ()
            flat = _check_sparse(ctx, var, grad, given["indices"])
            if flat.size == 0:
                return ()
            for v in variables:
                v.copy_on_read = True  # dense reads copy from now on: rows update in place
            n = var.shape[0]
            tables = [v.writable().reshape(n, -1) for v in variables]
            rows = grad.reshape(flat.size, -1)
            row.update(xp, tables, scalars, rows, flat, {**attrs, "_var_rank": var.ndim})
        return ()

    kernel.__name__ = kernel.__qualname__ = f"_{row.op_type}_kernel"
    return kernel


def _check_sparse(ctx: KernelContext, var: Any, grad: Any, indices: Any) -> Any:
    """TF's checks of a sparse apply op, in TF's order; the indices as int64."""
    xp = ctx.xp
    if var.ndim < 1:
        raise ctx.invalid_argument("var must be at least 1 dimensional")
    if indices.ndim != 1:
        raise ctx.invalid_argument("indices must be one-dimensional")
    if grad.ndim != var.ndim:
        raise ctx.invalid_argument("grad must have the same number of dimensions as var")
    for d in range(1, var.ndim):
        if var.shape[d] != grad.shape[d]:
            raise ctx.invalid_argument(f"var and grad must match in dimension {d}")
    n = indices.shape[0]
    if grad.shape[0] != n:
        raise ctx.invalid_argument("grad must be the same size as indices in the first dimension.")
    if math.prod(var.shape[1:]) == 0:
        raise ctx.invalid_argument("Inner dimension should be greater than zero.")
    flat = indices.astype(np.int64, copy=False)
    bad = _first_bad(xp, flat, var.shape[0])
    if bad is not None:
        value = int(_host(xp, flat[bad]))
        raise ctx.invalid_argument(f"Index {value} at offset {bad} in indices is out of range")
    return flat


# -- builders ----------------------------------------------------------------------------------


class _OnResource(OpBuilder):
    """Builders of ops that use resources: a Variable passed for a resource input stands for
    its handle; the node is colocated with the op that makes its first handle (TF's placer
    keeps resource consumers with the resource); and a value dtype attr left out (`dtype`,
    `T`) is the variable's when no tensor input says it, so literals convert to it."""

    def _build(self, scope: Scope, inputs: list[Any], attrs: dict[str, Any]) -> None:
        op_def = self.op_def
        inputs = list(inputs)
        first = None
        for k, arg in enumerate(op_def.inputs[: len(inputs)]):
            if arg.dtype is not dtypes.resource:
                continue
            if isinstance(inputs[k], Variable):
                inputs[k] = inputs[k].handle
            out = as_output(inputs[k], build=False)
            if first is None and out is not None and out.dtype is dtypes.resource:
                first = out
        if first is not None and isinstance(scope, Scope) and first.graph is scope.graph:
            scope = scope.colocate_with(first.op)
            data = resource_handle_data(first)
            if data is not None:
                for attr in ("dtype", "T"):
                    if (
                        op_def.has_attr(attr)
                        and attr not in attrs
                        and not _typed(op_def, attr, inputs)
                    ):
                        attrs = {**attrs, attr: data.dtype}
        super()._build(scope, inputs, attrs)


def _typed(op_def: OpDef, attr: str, inputs: list[Any]) -> bool:
    """Whether an input bound to type attr `attr` is a tensor (which then decides it)."""
    for arg, value in zip(op_def.inputs, inputs):
        if arg.type_attr == attr and (
            as_output(value, build=False) is not None
            or getattr(type(value), "_as_graph_output", None) is not None
        ):
            return True
    return False


def _resource_builder(op_def: OpDef) -> type[OpBuilder]:
    generated = register_op(op_def)
    if not any(a.dtype is dtypes.resource for a in op_def.inputs):
        return generated
    return type(
        op_def.name,
        (_OnResource, generated),
        {
            "__doc__": generated.__doc__,
            "__module__": __name__,
            "__signature__": generated.__signature__,
        },
    )


def gather_variable(
    scope: Scope, variable: Variable, indices: Any, axis: Any, batch_dims: int
) -> OpBuilder | None:
    """`ops.gather` of a Variable: a ResourceGather (only the rows named are read, where the
    variable lives) when the axis is `batch_dims` (given so, or as a constant), as TF's
    tf.gather reads variables; None for another axis (the caller gathers a read of it)."""
    bd = batch_dims
    if bd < 0:
        rank = getattr(getattr(indices, "shape", None), "rank", None)
        if rank is None:
            return None
        bd += rank
    if axis is not None:
        value = as_output(axis, build=False)
        if value is not None:
            value = value.op.get_attr("value") if value.op.type == "Const" else None
        else:
            value = axis
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            return None
        rank = variable.shape.rank
        value = int(value)
        if value < 0:
            if rank is None:
                return None
            value += rank
        if value != bd:
            return None
    return ResourceGather(scope.with_device(""), variable, indices, batch_dims=bd)


# -- gradients ---------------------------------------------------------------------------------


def _read_grad(op: Any, grad: Any) -> Any:
    """ReadVariableOp passes its gradient to the handle (dense or IndexedSlices), as TF's."""
    return grad


def _variable_shape_of(scope: Scope, handle: Output) -> Output:
    """The variable's shape as an int32 vector: a Const when the handle's producer declares it
    fully, else VariableShape (TF's `variable_shape`)."""
    data = resource_handle_data(handle)
    if data is not None and data.shape.is_fully_defined():
        return Const(scope, np.array(data.shape.dims, dtype=np.int32)).output
    return VariableShape(scope.colocate_with(handle.op), handle).output


def _gather_grad(op: Any, grad: Any) -> list[Any]:
    """ResourceGather's gradient for the variable: IndexedSlices of its rows at batch_dims 0
    (TF's rule); dense for batch_dims > 0 (TF 2.21's rule makes wrong shapes there): the
    gradient's rows summed into the variable's rows, batch by batch, with UnsortedSegmentSum."""
    scope = current_scope(op.graph)
    handle, indices = op.inputs
    if isinstance(grad, IndexedSlices):
        grad = convert_to_tensor(grad, scope=scope)
    shape = _variable_shape_of(scope, handle)
    bd = op.get_attr("batch_dims")
    if bd == 0:
        size = ExpandDims(scope, Size(scope, indices, out_type=indices.dtype), 0).output
        rows = Slice(scope, shape, [1], [-1]).output
        if indices.dtype is dtypes.int64:
            rows = Cast(scope, rows, DstT=dtypes.int64).output
        values = Reshape(scope, grad, ConcatV2(scope, [size, rows], 0)).output
        return [IndexedSlices(values, Reshape(scope, indices, size).output, shape), None]
    ids = indices
    if ids.dtype is dtypes.int64:
        shape64 = Cast(scope, shape, DstT=dtypes.int64).output
    else:
        shape64 = shape
    batch = Prod(scope, Slice(scope, shape64, [0], [bd]), 0).output
    n = Reshape(scope, Slice(scope, shape64, [bd], [1]), np.zeros(0, np.int32)).output
    offsets = ExpandDims(
        scope,
        Mul(scope, Range(scope, ids.dtype.np_dtype.type(0), batch, ids.dtype.np_dtype.type(1)), n),
        1,
    ).output
    per_batch = Reshape(scope, ids, Pack(scope, [batch, ids.dtype.np_dtype.type(-1)])).output
    flat = Reshape(scope, AddV2(scope, per_batch, offsets), np.array([-1], np.int32)).output
    inner = Slice(scope, shape, [bd + 1], [-1]).output
    rows = Reshape(scope, grad, ConcatV2(scope, [np.array([-1], np.int32), inner], 0)).output
    dense = UnsortedSegmentSum(scope, rows, flat, Mul(scope, batch, n)).output
    return [Reshape(scope, dense, shape).output, None]


# -- registration ------------------------------------------------------------------------------

_OP_DEFS: dict[str, OpDef] = {
    d.name: d
    for d in (
        VAR_HANDLE_OP, READ_VARIABLE_OP, ASSIGN_VARIABLE_OP, ASSIGN_ADD_VARIABLE_OP,
        ASSIGN_SUB_VARIABLE_OP, VAR_IS_INITIALIZED_OP, DESTROY_RESOURCE_OP, VARIABLE_SHAPE,
        RESOURCE_GATHER, RESOURCE_SCATTER_ADD, RESOURCE_SCATTER_SUB, RESOURCE_SCATTER_UPDATE,
        RESOURCE_APPLY_GRADIENT_DESCENT, RESOURCE_APPLY_MOMENTUM, RESOURCE_APPLY_ADAGRAD,
        RESOURCE_APPLY_ADAM, RESOURCE_SPARSE_APPLY_MOMENTUM, RESOURCE_SPARSE_APPLY_ADAGRAD,
    )
}  # fmt: skip

VarHandleOp = _resource_builder(VAR_HANDLE_OP)
ReadVariableOp = _resource_builder(READ_VARIABLE_OP)
AssignVariableOp = _resource_builder(ASSIGN_VARIABLE_OP)
AssignAddVariableOp = _resource_builder(ASSIGN_ADD_VARIABLE_OP)
AssignSubVariableOp = _resource_builder(ASSIGN_SUB_VARIABLE_OP)
VarIsInitializedOp = _resource_builder(VAR_IS_INITIALIZED_OP)
DestroyResourceOp = _resource_builder(DESTROY_RESOURCE_OP)
VariableShape = _resource_builder(VARIABLE_SHAPE)
ResourceGather = _resource_builder(RESOURCE_GATHER)
ResourceScatterAdd = _resource_builder(RESOURCE_SCATTER_ADD)
ResourceScatterSub = _resource_builder(RESOURCE_SCATTER_SUB)
ResourceScatterUpdate = _resource_builder(RESOURCE_SCATTER_UPDATE)
ResourceApplyGradientDescent = _resource_builder(RESOURCE_APPLY_GRADIENT_DESCENT)
ResourceApplyMomentum = _resource_builder(RESOURCE_APPLY_MOMENTUM)
ResourceApplyAdagrad = _resource_builder(RESOURCE_APPLY_ADAGRAD)
ResourceApplyAdam = _resource_builder(RESOURCE_APPLY_ADAM)
ResourceSparseApplyMomentum = _resource_builder(RESOURCE_SPARSE_APPLY_MOMENTUM)
ResourceSparseApplyAdagrad = _resource_builder(RESOURCE_SPARSE_APPLY_ADAGRAD)

# The dtypes TF's CPU kernels register (minigraph has no quantized, variant or 4/8-bit float
# types); GPU kernels take them but bfloat16 and strings, which cupy lacks.
_ALL = list(dtypes.ALL_DTYPES)
_ARITHMETIC = [d for d in dtypes.ALL_DTYPES if d.is_numeric]  # no bool, no string
_FLOATS = [dtypes.bfloat16, dtypes.float16, dtypes.float32, dtypes.float64, dtypes.complex64,
           dtypes.complex128]  # fmt: skip
_IDS = [dtypes.int32, dtypes.int64]


def _gpu(types: list[Any]) -> list[Any]:
    return [d for d in types if not d.is_string and d is not dtypes.bfloat16]


# Trusted: every kernel returns new arrays of the inferred dtype and shape, or (ReadVariableOp)
# the variable's own array, which is read-only and never updated in place once read
# (tests/test_variables_trust.py). None writes to its inputs.
for _device, _types in (("CPU", lambda t: t), ("GPU", _gpu)):
    register_kernel(
        "VarHandleOp", _device, _var_handle_kernel, type_constraints={"dtype": _types(_ALL)},
        host_memory=["resource"], trusted=True,
    )  # fmt: skip
    register_kernel(
        "ReadVariableOp", _device, _read_kernel, type_constraints={"dtype": _types(_ALL)},
        host_memory=["resource"], trusted=True,
    )  # fmt: skip
    register_kernel(
        "AssignVariableOp", _device, _assign_kernel, type_constraints={"dtype": _types(_ALL)},
        host_memory=["resource"], trusted=True,
    )  # fmt: skip
    for _op, _add in (("AssignAddVariableOp", True), ("AssignSubVariableOp", False)):
        register_kernel(
            _op, _device, _assign_update_kernel(_add),
            type_constraints={"dtype": _types(_ARITHMETIC)}, host_memory=["resource"],
            trusted=True,
        )  # fmt: skip
    register_kernel(
        "VarIsInitializedOp", _device, _is_initialized_kernel,
        host_memory=["resource", "is_initialized"], trusted=True,
    )  # fmt: skip
    register_kernel(
        "DestroyResourceOp", _device, _destroy_kernel, host_memory=["resource"], trusted=True
    )
    register_kernel(
        "VariableShape", _device, _variable_shape_kernel, host_memory=["input", "output"],
        trusted=True,
    )  # fmt: skip
    register_kernel(
        "ResourceGather", _device, _gather_kernel,
        type_constraints={"dtype": _types(_ALL), "Tindices": _IDS}, host_memory=["resource"],
        trusted=True,
    )  # fmt: skip
    for _op, _kind, _dtypes in (
        ("ResourceScatterAdd", "add", _ARITHMETIC),
        ("ResourceScatterSub", "sub", _ARITHMETIC),
        ("ResourceScatterUpdate", "update", _ALL),
    ):
        register_kernel(
            _op, _device, _scatter_kernel(_kind),
            type_constraints={"dtype": _types(_dtypes), "Tindices": _IDS},
            host_memory=["resource"], trusted=True,
        )  # fmt: skip
    for _row in _APPLY.values():
        _constraints = {"T": _types(_FLOATS)}
        if _row.sparse:
            _constraints["Tindices"] = _IDS
        register_kernel(
            _row.op_type, _device, _apply_kernel(_row), type_constraints=_constraints,
            host_memory=["var", *_row.slots], trusted=True,
        )  # fmt: skip

register_gradient("ReadVariableOp", accepts_indexed_slices=True)(_read_grad)
register_gradient("ResourceGather")(_gather_grad)
for _op in (
    "VarHandleOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "VarIsInitializedOp", "DestroyResourceOp", "VariableShape", "ResourceScatterAdd",
    "ResourceScatterSub", "ResourceScatterUpdate", *_APPLY,
):  # fmt: skip
    no_gradient(_op)


# -- Unique: the optimizers' deduplication of sparse gradients -----------------------------------
# (TF's _deduplicate_indexed_slices: Unique + UnsortedSegmentSum; an array op, here with the ops
# it serves.)

UNIQUE = OpDef(
    "Unique",
    inputs=["x: T"],
    outputs=["y: T", "idx: out_idx"],
    attrs=["T: type", "out_idx: {int32, int64} = int32"],
    shape_fn=lambda ctx: _unique_shape(ctx),
    doc="""The distinct values of the 1-D `x` in the order they first appear (`y`), and for each
element of x the position of its value in y (`idx`): x == y[idx]. NaNs are all distinct (TF's
hash map compares them unequal); 0.0 and -0.0 are one value.""",
)


def _unique_shape(ctx: InferenceContext) -> list[TensorShape]:
    x = ctx.input_shapes[0].with_rank(1)
    return [TensorShape([None]), x]


def _unique_kernel(ctx: KernelContext, x: Any, *, T: Any, out_idx: Any) -> tuple[Any, Any]:  # noqa: N803
    xp = ctx.xp
    if x.ndim != 1:
        raise ctx.invalid_argument(f"unique expects a 1D vector. got shape {_text(x.shape)}")
    n = x.shape[0]
    if n == 0:
        return x.copy(), xp.zeros(0, dtype=out_idx.np_dtype)
    # Sorted runs of equal values (stable: a run's first position is the value's first one),
    # then the runs renumbered in order of first appearance.
    keys = _stable_int_keys(xp, x)
    if keys is None:
        order = xp.argsort(x, kind="stable")
        ordered = x[order]
    else:  # integers: one plain sort of value * n + position (a third of a stable argsort)
        keys = xp.sort(keys)
        order, ordered = keys % n, keys // n
    first = xp.empty(n, dtype=bool)
    first[:1] = True
    first[1:] = ordered[1:] != ordered[:-1]
    run = xp.cumsum(first) - 1
    firsts = order[xp.flatnonzero(first)]  # per run, where its value first appears in x
    # The runs in order of first appearance, without a sort: mark the first positions; a
    # run's number is how many marks come before its own.
    marks = xp.zeros(n, dtype=bool)
    marks[firsts] = True
    number = (xp.cumsum(marks) - 1)[firsts]
    idx = xp.empty(n, dtype=out_idx.np_dtype)
    idx[order] = number[run]
    return x[xp.flatnonzero(marks)], idx


def _stable_int_keys(xp: Any, x: Any) -> Any:
    """For integer x: (x - min) * n + position as int64, whose plain sort orders x stably;
    None for other dtypes or where the keys would not fit."""
    n = x.shape[0]
    if x.dtype.kind not in "iu" or n < 2:
        return None
    low, high = int(x.min()), int(x.max())
    if (high - low + 1) * n >= 2**62:
        return None
    if x.dtype.kind == "u":  # x - low never wraps, and fits int64 below 2**62
        shifted = (x - x.dtype.type(low)).astype(np.int64)
    else:
        shifted = x.astype(np.int64) - low
    return shifted * n + xp.arange(n, dtype=np.int64)


Unique = register_op(UNIQUE)
_UNIQUE_TYPES = [d for d in dtypes.ALL_DTYPES if not d.is_complex]  # TF's CPU kernel's
register_kernel(
    "Unique", "CPU", _unique_kernel, type_constraints={"T": _UNIQUE_TYPES, "out_idx": _IDS},
    trusted=True,
)  # fmt: skip
register_kernel(
    "Unique", "GPU", _unique_kernel,
    type_constraints={"T": _gpu(_UNIQUE_TYPES), "out_idx": _IDS}, trusted=True,
)  # fmt: skip
# No gradient rule: TF registers none for Unique.
