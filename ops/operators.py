"""Python operators on tensors: `x + 1`, `a @ b`, `-x`, `x < y`, `m & n`, as TF 1.x graph tensors
have them. Importing the op library registers them with the runtime
(`minigraph.registry.register_operator`), which defines none itself: `Output` and single-output
builders dispatch each operator to the function registered here. `x[...]` (StridedSlice) is
registered by ops/array.py, next to StridedSlice.

Each operator builds the op TF's Python operator builds, named as TF names it (`add`, `sub`,
`truediv`, `matmul`, `and`, `Less`, `Neg`, ...) under `minigraph.current_scope(graph)`: the
innermost `Scope.as_default()` block over the tensor's graph, else the graph's root scope (a
literal operand's Const and truediv's Casts are named `Const` and `Cast` there, where TF
puts them under the op's name: `add/y`, `truediv/Cast`). A literal
operand (`x + 1`, `1 - x`, `x * np.float64(2)`) becomes a Const of the tensor's dtype, as
`tf.convert_to_tensor(y, dtype=x.dtype)` does; a literal that does not fit (`int_x + 1.5`) is
an InvalidArgumentError. `==` and `!=` are not operators here: Outputs compare by identity, as
TF 1.x graph tensors do (use `ops.Equal` / `ops.NotEqual`).

TF's quirks kept:
- `/` on integers casts both operands to a float type first (int8, int16, uint8, uint16 to
  float32; int32, int64, uint32, uint64 to float64), then divides (RealDiv); `//` is FloorDiv and
  `%` FloorMod, on every numeric type.
- `@` is MatMul when both operands have rank 2, BatchMatMulV2 otherwise (unknown rank included).
- `&`, `|`, `^` and `~` are logical, on bool tensors only (TF uses bitwise ops for integers,
  which minigraph does not have); `^` is TF's logical_xor composition.
"""

from __future__ import annotations

from typing import Any

from minigraph import (
    InvalidArgumentError,
    Output,
    current_scope,
    dtypes,
    registry,
)
from minigraph.builder import as_output

__all__: list[str] = []  # the operators are reached through Output, not by name

# TF's truediv: integer operands are cast to this float type before RealDiv.
_TRUEDIV_FLOAT = {
    dtypes.int8: dtypes.float32, dtypes.int16: dtypes.float32, dtypes.uint8: dtypes.float32,
    dtypes.uint16: dtypes.float32, dtypes.int32: dtypes.float64, dtypes.int64: dtypes.float64,
    dtypes.uint32: dtypes.float64, dtypes.uint64: dtypes.float64,
}  # fmt: skip


def _tensor(*operands: Any) -> Output:
    """The first operand that is a tensor (an operator always has one: Python called it)."""
    for value in operands:
        out = as_output(value)
        if out is not None:
            return out
    raise InvalidArgumentError("a tensor operator needs a tensor operand")  # unreachable


def _build(op_type: str, name: str, inputs: list[Any], attrs: dict[str, Any] | None = None):
    scope = current_scope(_tensor(*inputs).graph)
    op_def = registry.get_op_def(op_type)
    return scope.create_op(op_def, inputs, attrs or {}, name).outputs[0]


def _binary(op_type: str, name: str):
    def operator(x: Any, y: Any) -> Output:
        return _build(op_type, name, [x, y])

    operator.__name__ = name
    operator.__doc__ = f"`{name}`: the {op_type} op over the two operands."
    return operator


def _unary(op_type: str, name: str):
    def operator(x: Any) -> Output:
        return _build(op_type, name, [x])

    operator.__name__ = name
    operator.__doc__ = f"`{name}`: the {op_type} op."
    return operator


def _convert_like(value: Any, like: Output) -> Output:
    """`value` as a tensor: an Output as it is, a literal as a Const of `like`'s dtype (as a
    literal input of a builder becomes: in the current name scope, without its op name, device
    request or control dependencies, so the placer puts it with its consumer)."""
    out = as_output(value)
    if out is not None:
        return out
    scope = current_scope(like.graph).new_sub_scope("").with_device("")
    scope = scope.with_no_control_dependencies().clear_colocation()
    array = dtypes.convert_to_array(value, like.dtype)
    attrs = {"value": array, "dtype": dtypes.as_dtype(array.dtype)}
    return scope.create_op(registry.get_op_def("Const"), [], attrs, "Const").outputs[0]


def _truediv(x: Any, y: Any) -> Output:
    tensor = _tensor(x, y)
    x_t, y_t = _convert_like(x, tensor), _convert_like(y, tensor)
    if x_t.dtype is not y_t.dtype:
        raise InvalidArgumentError(
            f"x and y must have the same dtype for `/`, got {x_t.dtype.name} != {y_t.dtype.name}"
        )
    target = _TRUEDIV_FLOAT.get(x_t.dtype)
    if target is not None:
        x_t = _build("Cast", "Cast", [x_t], {"DstT": target})
        y_t = _build("Cast", "Cast_1", [y_t], {"DstT": target})
    elif x_t.dtype is dtypes.bool_ or x_t.dtype is dtypes.string:
        raise InvalidArgumentError(f"`/` is not defined on {x_t.dtype.name} tensors")
    return _build("RealDiv", "truediv", [x_t, y_t])


def _matmul(x: Any, y: Any) -> Output:
    tensor = _tensor(x, y)
    a, b = _convert_like(x, tensor), _convert_like(y, tensor)
    if a.shape.rank == 2 and b.shape.rank == 2:
        return _build("MatMul", "matmul", [a, b])
    return _build("BatchMatMulV2", "matmul", [a, b])


def _logical(op_type: str, name: str):
    def operator(x: Any, y: Any) -> Output:
        tensor = _tensor(x, y)
        if tensor.dtype is not dtypes.bool_:
            raise InvalidArgumentError(
                f"`{name}` on tensors is logical and takes bool tensors; got "
                f"{tensor.dtype.name} (minigraph has no bitwise ops)"
            )
        return _build(op_type, name, [x, y])

    operator.__name__ = name
    return operator


def _xor(x: Any, y: Any) -> Output:
    # TF's logical_xor: (x | y) & ~(x & y).
    tensor = _tensor(x, y)
    if tensor.dtype is not dtypes.bool_:
        raise InvalidArgumentError(
            f"`^` on tensors is logical and takes bool tensors; got {tensor.dtype.name}"
        )
    a, b = _convert_like(x, tensor), _convert_like(y, tensor)
    either = _build("LogicalOr", "LogicalOr", [a, b])
    both = _build("LogicalAnd", "LogicalAnd", [a, b])
    return _build("LogicalAnd", "xor", [either, _build("LogicalNot", "LogicalNot", [both])])


def _invert(x: Any) -> Output:
    if _tensor(x).dtype is not dtypes.bool_:
        raise InvalidArgumentError(
            f"`~` on tensors is logical not and takes a bool tensor; got {_tensor(x).dtype.name}"
        )
    return _build("LogicalNot", "LogicalNot", [x])


# TF Python's names for the nodes its operators build.
_OPERATORS = {
    "add": _binary("AddV2", "add"),
    "sub": _binary("Sub", "sub"),
    "mul": _binary("Mul", "mul"),
    "truediv": _truediv,
    "floordiv": _binary("FloorDiv", "floordiv"),
    "mod": _binary("FloorMod", "mod"),
    "pow": _binary("Pow", "pow"),
    "matmul": _matmul,
    "lt": _binary("Less", "Less"),
    "le": _binary("LessEqual", "LessEqual"),
    "gt": _binary("Greater", "Greater"),
    "ge": _binary("GreaterEqual", "GreaterEqual"),
    "and": _logical("LogicalAnd", "and"),
    "or": _logical("LogicalOr", "or"),
    "xor": _xor,
    "neg": _unary("Neg", "Neg"),
    "abs": _unary("Abs", "Abs"),
    "invert": _invert,
}

for _name, _fn in _OPERATORS.items():
    registry.register_operator(_name, _fn)
del _name, _fn
