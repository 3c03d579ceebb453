"""Op definitions: typed inputs and outputs, typed attrs, a shape function and a doc string.

The declarative form mirrors TensorFlow's `REGISTER_OP` strings::

    OpDef(
        "GatherV2",
        inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
        outputs=["output: Tparams"],
        attrs=["batch_dims: int = 0", "Tparams: type",
               "Tindices: {int16, int32, int64}", "Taxis: {int32, int64}"],
        shape_fn=gather_v2_shape,
        doc="Gather slices from params axis `axis` according to indices.",
    )

An input or output is `name: T` where T names a type attr (bound: its value is inferred from
the input's dtype) or a fixed dtype (`axis: int32`). An attr is `name: TYPE [>= MIN] [= DEFAULT]`
with TYPE one of int, float, bool, string, type, shape, tensor, list(...) of those, or an
allowed set: `{int16, int32}` (a type attr) or `{"", "ERROR"}` (a string attr). `AttrDef` and
`ArgDef` objects may be passed instead of strings.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.dtypes import DType
from minigraph.errors import InvalidArgumentError
from minigraph.tensor_shape import TensorShape, as_shape

__all__ = ["ArgDef", "AttrDef", "OpDef", "ATTR_TYPES"]

_SCALAR_ATTR_TYPES = ("int", "float", "bool", "string", "type", "shape", "tensor")
ATTR_TYPES = _SCALAR_ATTR_TYPES + tuple(f"list({t})" for t in _SCALAR_ATTR_TYPES)
_NO_DEFAULT = object()
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ArgDef:
    """An input or output: a name and either a type attr or a fixed dtype (or neither: set by
    the shape function)."""

    __slots__ = ("name", "type_attr", "dtype", "doc")

    def __init__(self, name: str, type_attr: str | None = None, dtype: Any = None, doc: str = ""):
        if not _NAME_RE.match(name):
            raise InvalidArgumentError(f"invalid argument name {name!r}")
        if type_attr is not None and dtype is not None:
            raise InvalidArgumentError(f"argument {name!r}: give type_attr or dtype, not both")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type_attr", type_attr)
        object.__setattr__(self, "dtype", None if dtype is None else dtypes.as_dtype(dtype))
        object.__setattr__(self, "doc", doc)

    def __setattr__(self, key, value):
        raise AttributeError("ArgDef is immutable")

    @property
    def type_text(self) -> str:
        """The type as written in a signature: a type attr, a dtype or an allowed set."""
        if self.type_attr is not None:
            return self.type_attr
        return self.dtype.name if self.dtype is not None else "?"

    def __repr__(self) -> str:
        return f"ArgDef({self.name}: {self.type_text})"

    @classmethod
    def parse(cls, spec: str | ArgDef, type_attrs: Iterable[str]) -> ArgDef:
        if isinstance(spec, ArgDef):
            return spec
        name, sep, type_text = (part.strip() for part in spec.partition(":"))
        if not sep:
            return cls(name)
        if type_text in type_attrs:
            return cls(name, type_attr=type_text)
        try:
            return cls(name, dtype=dtypes.as_dtype(type_text))
        except InvalidArgumentError:
            # An undeclared name is a type attr; OpDef declares it as an unconstrained `type`.
            if _NAME_RE.match(type_text):
                return cls(name, type_attr=type_text)
            raise InvalidArgumentError(f"cannot parse argument spec {spec!r}") from None


class AttrDef:
    """A typed attribute: name, type, optional allowed values, minimum and default.

    `minimum` bounds an int attr's value, or a list attr's length.
    """

    __slots__ = (
        "name", "type", "allowed", "minimum", "default", "doc", "has_default", "_coerce",
        "_allowed_set",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        type: str,  # noqa: A002 - TF's own word for it
        *,
        allowed: Sequence[Any] | None = None,
        minimum: int | None = None,
        default: Any = _NO_DEFAULT,
        doc: str = "",
    ):
        if not _NAME_RE.match(name):
            raise InvalidArgumentError(f"invalid attr name {name!r}")
        if type not in ATTR_TYPES:
            raise InvalidArgumentError(
                f"attr {name!r}: unknown attr type {type!r}; expected one of {list(ATTR_TYPES)}"
            )
        element = type[5:-1] if type.startswith("list(") else type
        coerce_element = _COERCERS[element]
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "type", type)
        set_(self, "doc", doc)
        set_(self, "minimum", minimum)
        set_(self, "allowed", None)
        set_(self, "_allowed_set", None)
        set_(self, "_coerce", coerce_element)
        if allowed is not None:
            set_(self, "allowed", tuple(coerce_element(v) for v in allowed))
            set_(self, "_allowed_set", frozenset(self.allowed))
        set_(self, "default", _NO_DEFAULT)
        set_(self, "has_default", False)
        if default is not _NO_DEFAULT:
            set_(self, "default", self.canonicalize(default))
            set_(self, "has_default", True)

    def __setattr__(self, key, value):
        raise AttributeError("AttrDef is immutable")

    def canonicalize(self, value: Any) -> Any:
        """The canonical form of `value`, validated against type, allowed set and minimum.

        Raises:
            InvalidArgumentError: with a message naming the attr, the expectation and the value
                (callers prepend the op and node).
        """
        try:
            if self.type.startswith("list("):
                if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                    raise InvalidArgumentError(f"expected a list, got {_show(value)}")
                canonical = tuple(self._coerce(v) for v in value)
                items = canonical
            else:
                canonical = self._coerce(value)
                items = (canonical,)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"attr '{self.name}' ({self.type}): {e.message}") from None
        if self._allowed_set is not None:
            for item in items:
                if item not in self._allowed_set:
                    raise InvalidArgumentError(
                        f"attr '{self.name}' must be one of {_show_allowed(self.allowed)}; "
                        f"got {_show(item)}"
                    )
        if self.minimum is not None:
            if self.type == "int" and canonical < self.minimum:
                raise InvalidArgumentError(
                    f"attr '{self.name}' must be >= {self.minimum}; got {canonical}"
                )
            if self.type.startswith("list(") and len(canonical) < self.minimum:
                raise InvalidArgumentError(
                    f"attr '{self.name}' must have at least {self.minimum} elements; "
                    f"got {len(canonical)}"
                )
        return canonical

    @property
    def type_text(self) -> str:
        """The type as written in a signature: a type attr, a dtype or an allowed set."""
        if self.allowed is not None and self.type in ("type", "string"):
            return _show_allowed(self.allowed)
        text = self.type
        if self.minimum is not None:
            text += f" >= {self.minimum}"
        return text

    def spec(self) -> str:
        """The attr as TF writes it: `batch_dims: int = 0`."""
        text = f"{self.name}: {self.type_text}"
        if self.has_default:
            default = self.default
            # Strings in double quotes, as in the allowed set and TF's REGISTER_OP strings.
            text += f' = "{default}"' if isinstance(default, str) else f" = {_show(default)}"
        return text

    def __repr__(self) -> str:
        return f"AttrDef({self.spec()})"

    @classmethod
    def parse(cls, spec: str | AttrDef) -> AttrDef:
        if isinstance(spec, AttrDef):
            return spec
        name, sep, rest = (part.strip() for part in spec.partition(":"))
        if not sep:
            raise InvalidArgumentError(f"cannot parse attr spec {spec!r}: expected 'name: type'")
        type_text, default_text = _split_default(rest)
        minimum = None
        match = re.match(r"^(.*?)\s*>=\s*(-?\d+)$", type_text)
        if match:
            type_text, minimum = match.group(1), int(match.group(2))
        allowed = None
        if type_text.startswith("{"):
            if not type_text.endswith("}"):
                raise InvalidArgumentError(f"cannot parse attr spec {spec!r}: unclosed '{{'")
            items = [item.strip() for item in type_text[1:-1].split(",") if item.strip()]
            if items and items[0][0] in "'\"":
                attr_type, allowed = "string", [ast.literal_eval(item) for item in items]
            else:
                attr_type, allowed = "type", items
        else:
            attr_type = type_text
        default = _NO_DEFAULT
        if default_text is not None:
            default = _parse_default(default_text, attr_type, spec)
        return cls(name, attr_type, allowed=allowed, minimum=minimum, default=default)


def _split_default(text: str) -> tuple[str, str | None]:
    """Splits `type = default` at the first '=' that is not part of '>=' nor quoted."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "=" and (i == 0 or text[i - 1] != ">"):
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), None


def _parse_default(text: str, attr_type: str, spec: str) -> Any:
    if attr_type == "type":
        return text
    if attr_type == "bool" and text in ("true", "false"):
        return text == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise InvalidArgumentError(f"cannot parse the default of attr spec {spec!r}") from None


# -- coercers: one per scalar attr type; they return the canonical value ------------------------


def _coerce_int(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"expected an int, got {_show(value)}")
    return int(value)


def _coerce_float(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise InvalidArgumentError(f"expected a float, got {_show(value)}")
    return float(value)


def _coerce_bool(value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(f"expected a bool, got {_show(value)}")
    return bool(value)


def _coerce_string(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise InvalidArgumentError(f"expected a string, got {_show(value)}")
    return value


def _coerce_type(value: Any) -> DType:
    try:
        return dtypes.as_dtype(value)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"expected a dtype, got {_show(value)} ({e.message})") from None


def _coerce_shape(value: Any) -> TensorShape:
    try:
        return as_shape(value)
    except (InvalidArgumentError, TypeError):
        raise InvalidArgumentError(f"expected a shape, got {_show(value)}") from None


def _coerce_tensor(value: Any) -> np.ndarray:
    array = dtypes.convert_to_array(value)
    if array.flags.writeable:
        # Attr values are shared by every run and every reader: freeze a private copy.
        array = array.copy()
        array.flags.writeable = False
    return array


_COERCERS: dict[str, Callable[[Any], Any]] = {
    "int": _coerce_int,
    "float": _coerce_float,
    "bool": _coerce_bool,
    "string": _coerce_string,
    "type": _coerce_type,
    "shape": _coerce_shape,
    "tensor": _coerce_tensor,
}


def _show(value: Any) -> str:
    if isinstance(value, DType):
        return value.name
    if isinstance(value, np.ndarray):
        return f"array(shape={list(value.shape)}, dtype={value.dtype})"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _show_allowed(allowed: Sequence[Any]) -> str:
    return "{" + ", ".join(_show(v) if not isinstance(v, str) else f'"{v}"' for v in allowed) + "}"


class OpDef:
    """The definition of an op type. Immutable once built; register it with `register_op`."""

    __slots__ = (
        "name", "inputs", "outputs", "attrs", "shape_fn", "doc",
        "_attr_index", "_inferred", "_input_type_attrs",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        *,
        inputs: Sequence[str | ArgDef] = (),
        outputs: Sequence[str | ArgDef] = (),
        attrs: Sequence[str | AttrDef] = (),
        shape_fn: Callable[..., Any] | None = None,
        doc: str = "",
    ):
        if not re.match(r"^[A-Z][A-Za-z0-9_]*$", name):
            raise InvalidArgumentError(
                f"op type name {name!r} must start with a capital letter (CamelCase, as in TF)"
            )
        attr_defs = [AttrDef.parse(a) for a in attrs]
        declared = {a.name for a in attr_defs}
        if len(declared) != len(attr_defs):
            raise InvalidArgumentError(f"op {name}: an attr is declared twice")
        args_in = tuple(ArgDef.parse(a, declared) for a in inputs)
        args_out = tuple(ArgDef.parse(a, declared) for a in outputs)
        arg_names = [a.name for a in args_in] + [a.name for a in args_out]
        if len(set(arg_names)) != len(arg_names):
            raise InvalidArgumentError(f"op {name}: an input or output name is used twice")
        for arg in args_in + args_out:
            if arg.type_attr is not None and arg.type_attr not in declared:
                attr_defs.append(AttrDef(arg.type_attr, "type"))
                declared.add(arg.type_attr)
            elif arg.type_attr is not None:
                kind = next(a for a in attr_defs if a.name == arg.type_attr).type
                if kind != "type":
                    raise InvalidArgumentError(
                        f"op {name}: argument {arg.name!r} refers to attr {arg.type_attr!r} "
                        f"of type {kind}, not type"
                    )
        for arg in args_in:
            if arg.type_attr is None and arg.dtype is None:
                raise InvalidArgumentError(f"op {name}: input {arg.name!r} needs a type")
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "inputs", args_in)
        set_(self, "outputs", args_out)
        set_(self, "attrs", tuple(attr_defs))
        set_(self, "shape_fn", shape_fn)
        set_(self, "doc", doc)
        set_(self, "_attr_index", {a.name: a for a in attr_defs})
        # Type attrs bound to inputs are inferred from the inputs' dtypes, as TF does.
        inferred = {a.type_attr for a in args_in if a.type_attr is not None}
        set_(self, "_inferred", frozenset(inferred))
        set_(self, "_input_type_attrs", tuple(a.type_attr for a in args_in))

    def __setattr__(self, key, value):
        raise AttributeError("OpDef is immutable")

    def attr(self, name: str) -> AttrDef:
        """The AttrDef called `name` (InvalidArgumentError lists the attrs there are)."""
        try:
            return self._attr_index[name]
        except KeyError:
            raise InvalidArgumentError(
                f"op {self.name} has no attr {name!r}; it has {sorted(self._attr_index)}"
            ) from None

    @property
    def inferred_attrs(self) -> frozenset[str]:
        """Type attrs whose values come from input dtypes."""
        return self._inferred

    def signature(self) -> str:
        """`GatherV2(params: Tparams, ...) -> output: Tparams; batch_dims: int = 0`."""
        ins = ", ".join(f"{a.name}: {a.type_text}" for a in self.inputs)
        outs = ", ".join(f"{a.name}: {a.type_text}" for a in self.outputs)
        text = f"{self.name}({ins})"
        if outs:
            text += f" -> {outs}"
        extra = [a.spec() for a in self.attrs if a.name not in self._inferred]
        if extra:
            text += "; " + ", ".join(extra)
        return text

    def describe(self) -> str:
        """A multi-line description: signature, attrs with allowed values and defaults, doc."""
        lines = [self.signature(), ""]
        if self.doc:
            lines += [self.doc.strip(), ""]
        if self.inputs:
            lines.append("Inputs:")
            lines += [f"  {a.name}: {a.type_text}" for a in self.inputs]
        if self.outputs:
            lines.append("Outputs:")
            lines += [f"  {a.name}: {a.type_text}" for a in self.outputs]
        if self.attrs:
            lines.append("Attrs:")
            for a in self.attrs:
                note = " (inferred from inputs)" if a.name in self._inferred else ""
                lines.append(f"  {a.spec()}{note}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"OpDef({self.signature()})"
