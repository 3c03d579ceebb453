"""Graph rewrites of the library's ops, for the graph optimizer (`minigraph.optimizer`): each a
function `rule(rw: RewriteContext) -> replacement Outputs or None`, registered below with one
`register_rewrite(op_type, rule, pass_name=...)` call, as kernels are.

Every rule is exact: the replacement computes the same values, bit for bit, and raises what the
node would raise (a rule that cannot prove it leaves the node alone).

- arithmetic_optimization: `x - 0`, `x + -0.0`, `x * 1`, `x // 1`, `x / 1` become x where
  the dtype makes them exact and broadcasting the constant changes no shape (floats: `x + 0.0`
  is not exact, -0.0 + 0.0 being +0.0, so only `x + -0.0` and `x - 0.0` are; complex `x * 1`
  is not, (inf + 0j) * (1 + 0j) having a NaN part); a Cast to the same dtype becomes its input;
  Shape, Size and Rank of a shape every run is guaranteed to have become constants (not where
  an int32 output would overflow: the kernel's error stays), and so do ZerosLike and OnesLike
  of such a shape (up to max_constant_bytes); a Reshape or BroadcastTo to the input's own
  guaranteed shape becomes its input; a Reshape to `[..., tf.shape(x)[i], ...]` (TF's and
  Keras's flatten) becomes a Reshape to a constant with -1 there, where x's other dims are
  known and make that exact.
- remapping: a gather of a gather (GatherV2 on axis 0 of GatherV2 on axis 0, constant indices,
  batch_dims 0, one device) becomes one GatherV2 with the composed indices, when every index
  is statically in range, so that neither gather could have raised.
- dependency_optimization: StopGradient and Snapshot are identities at run time.

Rules for ops another module defines are registered when that op exists (AddV2, Mul, RealDiv,
Rank, StopGradient, Snapshot are defined by other families); this module imports the families
it knows first.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import ops.array
import ops.gather_ops
import ops.math  # noqa: F401 - their ops are registered before the rules below
from minigraph import Output, RewriteContext, TensorShape, register_rewrite
from minigraph.optimizer import remove_identity
from minigraph.registry import list_ops

__all__: list[str] = []

_INT32_MAX = int(np.iinfo(np.int32).max)


# -- arithmetic ----------------------------------------------------------------------------------


def _keeps_shape(x: TensorShape, constant: np.ndarray) -> bool:
    """Whether broadcasting `constant` against any value of static shape `x` gives x's shape
    and can never fail: each of its dims is 1 or a known dim of x."""
    if x.rank is None or constant.ndim > x.rank:
        return False
    dims = x.dims[x.rank - constant.ndim :]
    return all(c == 1 or (d is not None and c == d) for c, d in zip(constant.shape, dims))


def _all_zero(value: np.ndarray, negative: bool) -> bool:
    """Whether every element is zero, with the sign bit `negative` for floats (and both parts
    of complex values)."""
    kind = value.dtype.kind
    if kind in "iu":
        return not value.any()
    if kind == "c":
        return _all_zero(value.real, negative) and _all_zero(value.imag, negative)
    if kind != "f" and value.dtype.name != "bfloat16":
        return False
    as_float = value.astype(np.float64)
    return bool(np.all(as_float == 0) and np.all(np.signbit(as_float) == negative))


def _all_one(value: np.ndarray) -> bool:
    """Whether every element is 1, for real dtypes: complex products and quotients by 1 + 0j
    are not exact ((inf + 0j) * (1 + 0j) has a NaN imaginary part)."""
    if value.dtype.kind not in "iuf" and value.dtype.name != "bfloat16":
        return False
    return bool(np.all(value == 1))


def _neutral(rw: RewriteContext, x: Output, other: Output, test: Any) -> list[Output] | None:
    """[x] when `other` is a constant for which `test` holds and whose broadcasting keeps x's
    guaranteed shape."""
    value = rw.constant(other)
    if value is None or not test(value) or not _keeps_shape(rw.known_shape(x), value):
        return None
    return [x]


def sub_zero(rw: RewriteContext) -> list[Output] | None:
    """`x - 0` is x (floats: +0.0, as -0.0 - +0.0 is -0.0)."""
    x, y = rw.inputs
    return _neutral(rw, x, y, lambda v: _all_zero(v, negative=False))


def add_negative_zero(rw: RewriteContext) -> list[Output] | None:
    """`x + 0` is x for integers, `x + -0.0` for floats (x + +0.0 turns -0.0 into +0.0)."""
    x, y = rw.inputs
    for a, b in ((x, y), (y, x)):
        found = _neutral(rw, a, b, lambda v: _all_zero(v, negative=True))
        if found is not None:
            return found
    return None


def mul_one(rw: RewriteContext) -> list[Output] | None:
    """`x * 1` and `1 * x` are x (not for complex values)."""
    x, y = rw.inputs
    for a, b in ((x, y), (y, x)):
        found = _neutral(rw, a, b, _all_one)
        if found is not None:
            return found
    return None


def div_one(rw: RewriteContext) -> list[Output] | None:
    """`x / 1` is x for floats (-0.0, NaN and infinities included) and integers."""
    x, y = rw.inputs
    return _neutral(rw, x, y, _all_one)


def floor_div_one(rw: RewriteContext) -> list[Output] | None:
    """`x // 1` is x for integers (for floats it is floor(x))."""
    x, y = rw.inputs
    if x.dtype.is_floating or x.dtype.is_complex:
        return None
    return _neutral(rw, x, y, _all_one)


def cast_to_same_type(rw: RewriteContext) -> list[Output] | None:
    """A Cast to the dtype it already has is its input (the kernel returns it as it is)."""
    if rw.op.get_attr("SrcT") is not rw.op.get_attr("DstT"):
        return None
    return [rw.inputs[0]]


# -- shapes --------------------------------------------------------------------------------------


def _known_dims(rw: RewriteContext) -> tuple[int, ...] | None:
    shape = rw.known_shape(rw.inputs[0])
    if shape.dims is None or None in shape.dims:
        return None
    return shape.dims


def shape_of_known_shape(rw: RewriteContext) -> list[Output] | None:
    """Shape of a tensor whose shape every run has: a constant."""
    dims = _known_dims(rw)
    out_type = rw.op.get_attr("out_type")
    if dims is None or (out_type.name == "int32" and any(d > _INT32_MAX for d in dims)):
        return None  # the kernel raises for a dim int32 cannot hold
    return [rw.const(np.array(dims, out_type.np_dtype).reshape(len(dims)), name=rw.op.name)]


def size_of_known_shape(rw: RewriteContext) -> list[Output] | None:
    """Size of a tensor whose shape every run has: a constant."""
    dims = _known_dims(rw)
    if dims is None:
        return None
    size = math.prod(dims)
    out_type = rw.op.get_attr("out_type")
    if out_type.name == "int32" and size > _INT32_MAX:
        return None
    return [rw.const(np.array(size, out_type.np_dtype), name=rw.op.name)]


def rank_of_known_rank(rw: RewriteContext) -> list[Output] | None:
    """Rank of a tensor whose rank every run has: a constant."""
    rank = rw.known_shape(rw.inputs[0]).rank
    if rank is None:
        return None
    return [rw.const(np.array(rank, np.int32), name=rw.op.name)]


def _same_known_shape(rw: RewriteContext, x: Output, target: Output) -> bool:
    """Whether the constant shape `target` (a Reshape's, -1 allowed once; a BroadcastTo's) is
    x's guaranteed, fully known shape."""
    value = rw.constant(target)
    shape = rw.known_shape(x)
    if value is None or value.ndim != 1 or not shape.is_fully_defined():
        return False
    dims = [int(v) for v in value.tolist()]
    if len(dims) != shape.rank:
        return False
    own = list(shape.dims)
    if dims.count(-1) == 1:
        k = dims.index(-1)
        rest = math.prod(d for j, d in enumerate(own) if j != k)
        if rest == 0:
            return False  # -1 next to a zero dim: the kernel refuses it
        dims[k] = own[k]
    return dims == own


def reshape_to_own_shape(rw: RewriteContext) -> list[Output] | None:
    """A Reshape of x to x's own (guaranteed) shape is x."""
    x, target = rw.inputs
    return [x] if _same_known_shape(rw, x, target) else None


def broadcast_to_own_shape(rw: RewriteContext) -> list[Output] | None:
    """A BroadcastTo of x to x's own (guaranteed) shape is x."""
    x, target = rw.inputs
    value = rw.constant(target)
    if value is not None and -1 in value:
        return None  # BroadcastTo refuses -1
    return [x] if _same_known_shape(rw, x, target) else None


def _own_dim(rw: RewriteContext, t: Output, x: Output) -> tuple[int, Any, Any] | None:
    """(i, the Shape node, the StridedSlice node) when `t` is `tf.shape(x)[i]`: a StridedSlice
    of Shape(x) from [i] to [i + 1] by [1], shrinking axis 0, no other masks, i >= 0."""
    op = t.op
    if rw.is_fed(t) or op.type != "StridedSlice":
        return None
    if op.get_attr("shrink_axis_mask") != 1 or any(
        op.get_attr(m) for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask")
    ):
        return None
    shape_t, begin, end, strides = rw.inputs_of(op)
    b, e, step = rw.constant(begin), rw.constant(end), rw.constant(strides)
    if b is None or e is None or step is None or not b.shape == e.shape == step.shape == (1,):
        return None
    i = int(b[0])
    if i < 0 or int(e[0]) != i + 1 or int(step[0]) != 1:
        return None
    shape_op = shape_t.op
    if rw.is_fed(shape_t) or shape_op.type != "Shape" or rw.inputs_of(shape_op)[0] is not x:
        return None
    return i, shape_op, op


def reshape_of_own_dims(rw: RewriteContext) -> list[Output] | None:
    """Reshape(x, Pack([..., tf.shape(x)[i], ...])) with every other entry a constant (TF's
    and Keras's flatten: `reshape(x, [shape(x)[0], 16])`) is Reshape(x, [..., -1, ...]) when
    x's other dims are known and hold as many elements as the constants: -1 then stands for
    x's dim i on every run. The Pack and StridedSlice cannot fail and leave the plan; an int32
    Shape stays (its value unused: it raises for a dim over 2**31 - 1, which it must still
    do), an int64 one leaves too."""
    x, target = rw.inputs
    pack = target.op
    if rw.is_fed(target) or pack.type != "Pack" or pack.get_attr("axis") != 0:
        return None
    shape = rw.known_shape(x)
    if shape.rank is None:
        return None
    values: list[int] = []
    unknown = None
    for j, element in enumerate(rw.inputs_of(pack)):
        value = rw.constant(element)
        if value is not None:
            if value.ndim != 0 or int(value) < 0:
                return None
            values.append(int(value))
            continue
        found = _own_dim(rw, element, x)
        if found is None or unknown is not None or found[0] >= shape.rank:
            return None
        if shape.dims[found[0]] is not None:
            values.append(shape.dims[found[0]])
            continue
        unknown = (j, found)
        values.append(-1)
    if unknown is None:
        return None
    j, (i, shape_op, slice_op) = unknown
    others = [d for k, d in enumerate(shape.dims) if k != i]
    rest = math.prod(v for k, v in enumerate(values) if k != j)
    if None in others or rest == 0 or math.prod(others) != rest:
        return None
    new_target = rw.const(np.array(values, target.dtype.np_dtype))
    node = rw.node("Reshape", [x, new_target], name=rw.op.name)
    for op in (pack, slice_op):
        if rw.can_absorb(op):
            rw.absorb(op)
    if shape_op.get_attr("out_type").name == "int64" and rw.can_absorb(shape_op):
        rw.absorb(shape_op)
    return [node.outputs[0]]


def _fill_of_known_shape(rw: RewriteContext, value: int) -> list[Output] | None:
    """A constant of the input's guaranteed, fully known shape, filled with `value` (numbers
    and bools only; at most max_constant_bytes)."""
    x = rw.inputs[0]
    shape = rw.known_shape(x)
    dtype = x.dtype
    # Numbers and bools only: not strings, nor resource handles (object arrays whose
    # ZerosLike the kernel makes; np.full cannot).
    if not shape.is_fully_defined() or dtype.np_dtype.kind not in "biufc":
        return None
    if math.prod(shape.dims) * dtype.np_dtype.itemsize > rw.max_constant_bytes:
        return None
    return [rw.const(np.full(shape.dims, value, dtype.np_dtype), name=rw.op.name)]


def zeros_like_of_known_shape(rw: RewriteContext) -> list[Output] | None:
    """ZerosLike of a tensor whose shape every run has: a constant (gradients make many)."""
    return _fill_of_known_shape(rw, 0)


def ones_like_of_known_shape(rw: RewriteContext) -> list[Output] | None:
    """OnesLike of a tensor whose shape every run has: a constant."""
    return _fill_of_known_shape(rw, 1)


# -- gathers -------------------------------------------------------------------------------------


def _axis_zero_gather(rw: RewriteContext, op: Any, inputs: tuple[Output, ...]) -> Any:
    """(params, constant indices, axis Output) of a GatherV2 on axis 0 with batch_dims 0 and
    constant indices; None otherwise."""
    if op.type != "GatherV2" or op.get_attr("batch_dims") != 0 or op.kernel_label:
        return None
    params, indices, axis = inputs
    index_values, axis_value = rw.constant(indices), rw.constant(axis)
    if index_values is None or axis_value is None or int(axis_value) != 0:
        return None
    return params, index_values, axis


def gather_of_gather(rw: RewriteContext) -> list[Output] | None:
    """GatherV2(GatherV2(params, i, 0), j, 0) with constant i and j is GatherV2(params, i[j],
    0), when every index is in range (the static shape of params proves it for i, i's length
    for j): neither gather could have raised, so the fused one raises nothing either."""
    outer = _axis_zero_gather(rw, rw.op, rw.inputs)
    if outer is None:
        return None
    inner_out, outer_indices, _ = outer
    inner_op = inner_out.op
    if rw.is_fed(inner_out) or inner_op.type != "GatherV2":
        return None
    inner = _axis_zero_gather(rw, inner_op, rw.inputs_of(inner_op))
    if inner is None or rw.device_of(inner_op) is not rw.device:
        return None
    params, inner_indices, axis = inner
    if inner_indices.ndim < 1:
        return None  # a scalar index drops axis 0: the outer gather reads params' axis 1
    shape = rw.known_shape(params)
    if shape.rank is None or shape.rank < 1:
        return None
    n = shape.dims[0]
    if inner_indices.size and (
        n is None or int(inner_indices.min()) < 0 or int(inner_indices.max()) >= n
    ):
        return None
    m = inner_indices.shape[0]
    if outer_indices.size and (int(outer_indices.min()) < 0 or int(outer_indices.max()) >= m):
        return None
    composed = np.take(inner_indices, outer_indices.astype(np.int64), axis=0)
    if composed.nbytes > rw.max_constant_bytes:
        return None
    fused = rw.node(
        "GatherV2",
        [params, rw.const(composed, inner_indices.dtype), axis],
        {"batch_dims": 0, "bad_indices_policy": rw.op.get_attr("bad_indices_policy")},
        name=rw.op.name,
    )
    if rw.can_absorb(inner_op):
        rw.absorb(inner_op)
    return [fused.outputs[0]]


# -- registration ----------------------------------------------------------------------------------


_REGISTERED = frozenset(list_ops())  # (get_op_def's not-found message would load difflib)


def _exists(op_type: str) -> bool:
    return op_type in _REGISTERED


register_rewrite("Sub", sub_zero, pass_name="arithmetic_optimization")
register_rewrite("FloorDiv", floor_div_one, pass_name="arithmetic_optimization")
register_rewrite("Cast", cast_to_same_type, pass_name="arithmetic_optimization")
register_rewrite("Shape", shape_of_known_shape, pass_name="arithmetic_optimization")
register_rewrite("Size", size_of_known_shape, pass_name="arithmetic_optimization")
register_rewrite("GatherV2", gather_of_gather, pass_name="remapping")
register_rewrite("Reshape", reshape_to_own_shape, pass_name="arithmetic_optimization")
register_rewrite("Reshape", reshape_of_own_dims, pass_name="arithmetic_optimization")
# Ops of families written elsewhere: their rules apply once those ops are registered.
for _op_type, _rule, _pass in (
    ("AddV2", add_negative_zero, "arithmetic_optimization"),
    ("Add", add_negative_zero, "arithmetic_optimization"),
    ("Mul", mul_one, "arithmetic_optimization"),
    ("RealDiv", div_one, "arithmetic_optimization"),
    ("Div", div_one, "arithmetic_optimization"),
    ("Rank", rank_of_known_rank, "arithmetic_optimization"),
    ("BroadcastTo", broadcast_to_own_shape, "arithmetic_optimization"),
    ("ZerosLike", zeros_like_of_known_shape, "arithmetic_optimization"),
    ("OnesLike", ones_like_of_known_shape, "arithmetic_optimization"),
    ("StopGradient", remove_identity, "dependency_optimization"),
    ("Snapshot", remove_identity, "dependency_optimization"),
):
    if _exists(_op_type):
        register_rewrite(_op_type, _rule, pass_name=_pass)
