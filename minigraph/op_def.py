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
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.dtypes import INT64_MAX, INT64_MIN, DType
from minigraph.errors import InvalidArgumentError
from minigraph.tensor_shape import TensorShape, as_shape, check_size

__all__ = ["ArgDef", "AttrDef", "OpDef", "ATTR_TYPES", "MAX_LIST_OUTPUTS", "show_value"]

_SCALAR_ATTR_TYPES = ("int", "float", "bool", "string", "type", "shape", "tensor")
ATTR_TYPES = _SCALAR_ATTR_TYPES + tuple(f"list({t})" for t in _SCALAR_ATTR_TYPES)
_NO_DEFAULT = object()
#: The most tensors a list output (`num_partitions * T`) may have: its length comes from an
#: attr, so a typo (or a graph file) could otherwise ask for billions of outputs and hang the
#: construction that makes them.
MAX_LIST_OUTPUTS = 1 << 20
_MINIMUM_TYPES = ("int",) + tuple(t for t in ATTR_TYPES if t.startswith("list("))
# Used with fullmatch: `$` would also match before a trailing newline.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ArgDef:
    """An input or output: a name and its type, one of
    - a type attr (`x: T`), whose value is inferred from the input's dtype;
    - a fixed dtype (`axis: int32`);
    - a number attr times a type attr or dtype (`values: N * T`): a list of N tensors of one
      type, N being an `int` attr;
    - a type-list attr (`values: Tlist`, `Tlist: list(type)`): a list of tensors, one dtype each;
    - nothing (an output whose dtype the shape function returns).
    """

    __slots__ = ("name", "type_attr", "dtype", "doc", "number_attr", "type_list_attr")

    def __init__(
        self,
        name: str,
        type_attr: str | None = None,
        dtype: Any = None,
        doc: str = "",
        *,
        number_attr: str | None = None,
        type_list_attr: str | None = None,
    ):
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise InvalidArgumentError(f"invalid argument name {name!r}")
        if type_attr is not None and dtype is not None:
            raise InvalidArgumentError(f"argument {name!r}: give type_attr or dtype, not both")
        if type_list_attr is not None and (
            type_attr is not None or dtype is not None or number_attr is not None
        ):
            raise InvalidArgumentError(
                f"argument {name!r}: a type-list attr excludes type_attr, dtype and number_attr"
            )
        if number_attr is not None and type_attr is None and dtype is None:
            raise InvalidArgumentError(
                f"argument {name!r}: a number attr needs a type attr or a dtype ('N * T')"
            )
        for attr in (type_attr, number_attr, type_list_attr):
            if attr is not None and (not isinstance(attr, str) or not _NAME_RE.fullmatch(attr)):
                raise InvalidArgumentError(f"argument {name!r}: invalid attr name {attr!r}")
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "type_attr", type_attr)
        set_(self, "dtype", None if dtype is None else dtypes.as_dtype(dtype))
        set_(self, "doc", doc)
        set_(self, "number_attr", number_attr)
        set_(self, "type_list_attr", type_list_attr)

    def __setattr__(self, key, value):
        raise AttributeError("ArgDef is immutable")

    @property
    def is_list(self) -> bool:
        """True for `N * T` and type-list arguments, which take a list of tensors."""
        return self.number_attr is not None or self.type_list_attr is not None

    @property
    def type_text(self) -> str:
        """The type as written in a signature: `T`, `int32`, `N * T` or `Tlist`."""
        if self.type_list_attr is not None:
            return self.type_list_attr
        if self.type_attr is not None:
            element = self.type_attr
        else:
            element = self.dtype.name if self.dtype is not None else "?"
        return f"{self.number_attr} * {element}" if self.number_attr is not None else element

    def __repr__(self) -> str:
        return f"ArgDef({self.name}: {self.type_text})"

    @classmethod
    def parse(cls, spec: str | ArgDef, attr_types: Mapping[str, str]) -> ArgDef:
        """Parses `name: T`, `name: int32`, `name: N * T` or `name: Tlist` (TF's arg specs).

        `attr_types` maps the op's declared attrs to their types: every attr an argument
        names must be declared, as in TF's REGISTER_OP, so that a misspelt dtype is an error
        rather than a new type attr.
        """
        if isinstance(spec, ArgDef):
            return spec
        if not isinstance(spec, str):
            raise InvalidArgumentError(f"an argument spec is a string or ArgDef; got {spec!r}")
        name, sep, type_text = (part.strip() for part in spec.partition(":"))
        if not sep:
            return cls(name)
        number = None
        match = _NUMBER_RE.fullmatch(type_text)
        if match:
            number, type_text = match.group(1), match.group(2)
            if attr_types.get(number) != "int":
                raise InvalidArgumentError(
                    f"argument spec {spec!r}: {number!r} must be a declared int attr "
                    f"(e.g. '{number}: int >= 1')"
                )
        kind = attr_types.get(type_text)
        if kind == "type":
            return cls(name, type_attr=type_text, number_attr=number)
        if kind == "list(type)" and number is None:
            return cls(name, type_list_attr=type_text)
        if kind is None:
            try:
                return cls(name, dtype=dtypes.as_dtype(type_text), number_attr=number)
            except InvalidArgumentError:
                pass
        raise InvalidArgumentError(
            f"argument spec {spec!r}: {type_text!r} is "
            + (f"an attr of type {kind}" if kind else "neither a dtype nor a declared type attr")
            + (f" (expected {'type' if number else 'type or list(type)'})" if kind else "")
            + _suggest(type_text, [*(d.name for d in dtypes.ALL_DTYPES), *attr_types])
        )


_NUMBER_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\*\s*([A-Za-z_][A-Za-z0-9_]*)")


def _suggest(word: str, candidates: Iterable[str]) -> str:
    import difflib  # noqa: PLC0415 - only for errors: it is slow to import

    close = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


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
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise InvalidArgumentError(f"invalid attr name {name!r}")
        if not isinstance(type, str) or type not in ATTR_TYPES:
            raise InvalidArgumentError(
                f"attr {name!r}: unknown attr type {type!r}; expected one of {list(ATTR_TYPES)}"
            )
        if minimum is not None and (
            isinstance(minimum, bool) or not isinstance(minimum, int) or type not in _MINIMUM_TYPES
        ):
            raise InvalidArgumentError(
                f"attr {name!r}: a minimum is an int, for int and list attrs; got {minimum!r} "
                f"(attr type {type})"
            )
        if minimum is not None and minimum < 0 and type != "int":
            raise InvalidArgumentError(
                f"attr {name!r}: a list's minimum length must be >= 0; got {minimum}"
            )
        if allowed is not None and (
            isinstance(allowed, (str, bytes)) or not isinstance(allowed, Iterable)
        ):
            raise InvalidArgumentError(
                f"attr {name!r}: the allowed values are a list; got {allowed!r}"
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
            try:
                set_(self, "allowed", tuple(coerce_element(v) for v in allowed))
            except InvalidArgumentError as e:
                raise InvalidArgumentError(
                    f"attr {name!r}: an allowed value is not a {element}: {e.message}"
                ) from None
            set_(self, "_allowed_set", frozenset(self.allowed))
        set_(self, "default", _NO_DEFAULT)
        set_(self, "has_default", False)
        if default is not _NO_DEFAULT:
            set_(self, "default", self.canonicalize(default))
            set_(self, "has_default", True)

    def __setattr__(self, key, value):
        raise AttributeError("AttrDef is immutable")

    def allows(self, value: Any) -> bool:
        """Whether the canonical `value` is in the allowed set (True when there is none)."""
        return self._allowed_set is None or value in self._allowed_set

    def canonicalize(self, value: Any) -> Any:
        """The canonical form of `value`, validated against type, allowed set and minimum.

        Raises:
            InvalidArgumentError: with a message naming the attr, the expectation and the value
                (callers prepend the op and node).
        """
        try:
            if self.type.startswith("list("):
                if (
                    isinstance(value, (str, bytes))
                    or not isinstance(value, Iterable)
                    or (isinstance(value, np.ndarray) and value.ndim == 0)  # not iterable
                ):
                    raise InvalidArgumentError(f"expected a list, got {show_value(value)}")
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
                        f"got {show_value(item)}"
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
            text += f' = "{default}"' if isinstance(default, str) else f" = {show_value(default)}"
        return text

    def __repr__(self) -> str:
        return f"AttrDef({self.spec()})"

    @classmethod
    def parse(cls, spec: str | AttrDef) -> AttrDef:
        if isinstance(spec, AttrDef):
            return spec
        if not isinstance(spec, str):
            raise InvalidArgumentError(f"an attr spec is a string or AttrDef; got {spec!r}")
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
            inner = type_text[1:-1].strip()
            if inner[:1] in ("'", '"'):
                attr_type, allowed = "string", _parse_strings(inner, spec)
            else:
                attr_type = "type"
                allowed = [item.strip() for item in inner.split(",") if item.strip()]
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


def _parse_strings(inner: str, spec: str) -> list[str]:
    """The quoted strings of an allowed set such as `"", "ERROR"` (commas may be quoted)."""
    try:
        values = ast.literal_eval(f"[{inner}]")
    except Exception:  # SyntaxError, ValueError, RecursionError, ...: not literals
        values = None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidArgumentError(
            f"cannot parse attr spec {spec!r}: an allowed set of strings holds only quoted "
            'strings, e.g. {"", "ERROR"}'
        )
    return values


def _parse_default(text: str, attr_type: str, spec: str) -> Any:
    if attr_type == "type":
        return text
    if attr_type == "bool" and text in ("true", "false"):
        return text == "true"
    try:
        return ast.literal_eval(text)
    except Exception:  # SyntaxError, ValueError, RecursionError, ...
        raise InvalidArgumentError(f"cannot parse the default of attr spec {spec!r}") from None


# -- coercers: one per scalar attr type; they return the canonical value ------------------------


# TF's int attrs are int64 (AttrValue.i) and its float attrs 32-bit (AttrValue.f): a GraphDef
# can hold no other value.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _coerce_int(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"expected an int, got {show_value(value)}")
    value = int(value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidArgumentError(f"expected an int64 (TF's int attrs), got {show_value(value)}")
    return value


def _coerce_float(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise InvalidArgumentError(f"expected a float, got {show_value(value)}")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a double
        too_large = True
    else:  # inf and nan are values a float attr holds; finite floats beyond float32 are not
        too_large = math.isfinite(result) and abs(result) > _FLOAT32_MAX
    if too_large:
        # TF's float attrs are 32-bit (AttrValue.f): a GraphDef would hold an infinity.
        raise InvalidArgumentError(
            f"expected a float that a 32-bit float attr holds (|x| <= {_FLOAT32_MAX:.6g}, as "
            f"TF's), got {show_value(value)}: too large"
        )
    return result


def _coerce_bool(value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(f"expected a bool, got {show_value(value)}")
    return bool(value)


def _coerce_string(value: Any) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidArgumentError(
                f"expected a string; got bytes that are not UTF-8 ({show_value(value)}: {e.reason})"
            ) from None
    if not isinstance(value, str):
        raise InvalidArgumentError(f"expected a string, got {show_value(value)}")
    try:
        value.encode("utf-8")  # GraphDefs hold UTF-8: lone surrogates ("\ud800") have none
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(
            f"expected a string, got {show_value(value)}, which has no UTF-8 encoding ({e.reason})"
        ) from None
    return value


def _coerce_type(value: Any) -> DType:
    try:
        return dtypes.as_dtype(value)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(
            f"expected a dtype, got {show_value(value)} ({e.message})"
        ) from None


def _coerce_shape(value: Any) -> TensorShape:
    try:
        shape = as_shape(value)
        check_size(shape)
        return shape
    except InvalidArgumentError as e:
        raise InvalidArgumentError(
            f"expected a shape, got {show_value(value)}: {e.message}"
        ) from None
    except TypeError:
        raise InvalidArgumentError(f"expected a shape, got {show_value(value)}") from None


def _coerce_tensor(value: Any) -> np.ndarray:
    # Attr values are shared by every run, every reader and (through the construction memo)
    # every graph: they live in private storage that nothing can write to. A read-only array
    # of the user's is not enough: its memory may still be written through another view.
    return dtypes.frozen_copy(dtypes.convert_to_array(value))


_COERCERS: dict[str, Callable[[Any], Any]] = {
    "int": _coerce_int,
    "float": _coerce_float,
    "bool": _coerce_bool,
    "string": _coerce_string,
    "type": _coerce_type,
    "shape": _coerce_shape,
    "tensor": _coerce_tensor,
}


def show_value(value: Any) -> str:
    """An attr value as minigraph's messages show it, in TF's text form: a dtype by name,
    `true`/`false`, a list in brackets, an array by its shape and dtype, text cut at 60
    characters."""
    if isinstance(value, DType):
        return value.name
    if isinstance(value, np.ndarray):
        return f"array(shape={list(value.shape)}, dtype={value.dtype})"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _show_allowed(allowed: Sequence[Any]) -> str:
    return (
        "{"
        + ", ".join(show_value(v) if not isinstance(v, str) else f'"{v}"' for v in allowed)
        + "}"
    )


class OpDef:
    """The definition of an op type. Immutable once built; register it with `register_op`.

    `has_list_inputs` / `has_list_outputs`: whether an input / output arg is a list (`N * T`
    or a type list), whose node inputs / outputs are then flattened.

    `is_stateful` (TF's OpDef field): the op's kernels have effects or results that its inputs
    and attrs do not determine (random numbers, counters, I/O). The graph optimizer never runs
    such a node at compile time, never merges two of them, and never drops one.
    """

    __slots__ = (
        "name", "inputs", "outputs", "attrs", "shape_fn", "doc", "has_list_inputs",
        "has_list_outputs", "is_stateful", "_attr_index", "_inferred",
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
        is_stateful: bool = False,
    ):
        if not isinstance(name, str) or not _OP_NAME_RE.fullmatch(name):
            raise InvalidArgumentError(
                f"op type name {name!r} must start with a capital letter (CamelCase, as in TF)"
            )
        for what, specs in (("inputs", inputs), ("outputs", outputs), ("attrs", attrs)):
            if isinstance(specs, (str, bytes)) or not isinstance(specs, Iterable):
                raise InvalidArgumentError(
                    f'op {name}: {what} is a list of specs (e.g. ["x: T"]); got {specs!r}'
                )
        if shape_fn is not None and not callable(shape_fn):
            raise InvalidArgumentError(f"op {name}: shape_fn must be callable; got {shape_fn!r}")
        if not isinstance(doc, str):
            raise InvalidArgumentError(f"op {name}: doc must be a string; got {doc!r}")
        if not isinstance(is_stateful, (bool, np.bool_)):
            raise InvalidArgumentError(
                f"op {name}: is_stateful must be a bool; got {type(is_stateful).__name__} "
                f"{show_value(is_stateful)}"
            )
        try:
            attr_defs = [AttrDef.parse(a) for a in attrs]
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"op {name}: {e.message}") from None
        attr_types = {a.name: a.type for a in attr_defs}
        if len(attr_types) != len(attr_defs):
            raise InvalidArgumentError(f"op {name}: an attr is declared twice")
        try:
            args_in = tuple(ArgDef.parse(a, attr_types) for a in inputs)
            args_out = tuple(ArgDef.parse(a, attr_types) for a in outputs)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"op {name}: {e.message}") from None
        arg_names = [a.name for a in args_in] + [a.name for a in args_out]
        if len(set(arg_names)) != len(arg_names):
            raise InvalidArgumentError(f"op {name}: an input or output name is used twice")
        for arg in args_in + args_out:
            _check_arg_attrs(name, arg, attr_types)
        for arg in args_in:
            if arg.type_attr is None and arg.dtype is None and arg.type_list_attr is None:
                raise InvalidArgumentError(f"op {name}: input {arg.name!r} needs a type")
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "inputs", args_in)
        set_(self, "outputs", args_out)
        set_(self, "attrs", tuple(attr_defs))
        set_(self, "shape_fn", shape_fn)
        set_(self, "doc", doc)
        set_(self, "is_stateful", bool(is_stateful))
        set_(self, "_attr_index", {a.name: a for a in attr_defs})
        # Attrs bound to inputs are inferred from them, as TF does: type attrs from dtypes,
        # number attrs from list lengths, type-list attrs from the list's dtypes.
        inferred = set()
        for arg in args_in:
            inferred.update(
                a for a in (arg.type_attr, arg.number_attr, arg.type_list_attr) if a is not None
            )
        set_(self, "_inferred", frozenset(inferred))
        set_(self, "has_list_inputs", any(a.is_list for a in args_in))
        set_(self, "has_list_outputs", any(a.is_list for a in args_out))

    def __setattr__(self, key, value):
        raise AttributeError("OpDef is immutable")

    def attr(self, name: str) -> AttrDef:
        """The AttrDef called `name` (InvalidArgumentError lists the attrs there are)."""
        try:
            return self._attr_index[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            _check_attr_name(name, f"op {self.name}: attr")
            raise InvalidArgumentError(
                f"op {self.name} has no attr {name!r}; it has {sorted(self._attr_index)}"
            ) from None

    def has_attr(self, name: str) -> bool:
        """Whether the op declares an attr called `name`."""
        _check_attr_name(name, f"op {self.name}: has_attr")
        return name in self._attr_index

    @property
    def inferred_attrs(self) -> frozenset[str]:
        """Attrs whose values come from the inputs (type, number and type-list attrs)."""
        return self._inferred

    @property
    def has_list_args(self) -> bool:
        """True when an input or output is a list (`N * T` or a type list)."""
        return self.has_list_inputs or self.has_list_outputs

    def input_arg_lengths(self, attrs: Mapping[str, Any]) -> tuple[int, ...]:
        """How many tensors each input arg holds for a node with `attrs` (1 for plain args)."""
        return _arg_lengths(self.inputs, attrs) if self.has_list_inputs else (1,) * len(self.inputs)

    def output_arg_lengths(self, attrs: Mapping[str, Any]) -> tuple[int, ...]:
        """How many tensors each output arg holds for a node with `attrs`."""
        if not self.has_list_outputs:
            return (1,) * len(self.outputs)
        return _arg_lengths(self.outputs, attrs)

    def split_inputs(self, flat: Sequence[Any], attrs: Mapping[str, Any]) -> list[Any]:
        """Regroups `flat` inputs (as a NodeDef lists them) into one entry per input arg: the
        element itself for a plain arg, a list for a list arg.

        Raises:
            InvalidArgumentError: the count does not match what `attrs` say.
        """
        lengths = self.input_arg_lengths(attrs)
        if sum(lengths) != len(flat):
            raise InvalidArgumentError(
                f"op {self.name}: expected {sum(lengths)} inputs for these attrs "
                f"({self._arg_summary(self.inputs, lengths)}), got {len(flat)}"
            )
        grouped: list[Any] = []
        pos = 0
        for arg, n in zip(self.inputs, lengths):
            grouped.append(list(flat[pos : pos + n]) if arg.is_list else flat[pos])
            pos += n
        return grouped

    @staticmethod
    def _arg_summary(args: Sequence[ArgDef], lengths: Sequence[int]) -> str:
        return ", ".join(f"{a.name}: {n}" if a.is_list else a.name for a, n in zip(args, lengths))

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
        if self.is_stateful:
            lines += ["Stateful: never folded, merged or dropped by the graph optimizer.", ""]
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


_OP_NAME_RE = re.compile(r"[A-Z][A-Za-z0-9_]*")


def _check_attr_name(name: Any, what: str) -> None:
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"{what}: an attr name is a string; got {type(name).__name__} {show_value(name)}"
        )


def _check_arg_attrs(op: str, arg: ArgDef, attr_types: Mapping[str, str]) -> None:
    """Every attr an ArgDef object refers to is declared with the right type (string specs
    were checked when parsed; ArgDef objects may name anything)."""
    for attr, want in (
        (arg.type_attr, ("type",)),
        (arg.number_attr, ("int",)),
        (arg.type_list_attr, ("list(type)",)),
    ):
        if attr is None:
            continue
        kind = attr_types.get(attr)
        if kind not in want:
            got = f"of type {kind}" if kind else "not declared"
            raise InvalidArgumentError(
                f"op {op}: argument {arg.name!r} refers to attr {attr!r}, which is {got}; "
                f"declare it as '{attr}: {want[0]}'"
            )


def _arg_lengths(args: Sequence[ArgDef], attrs: Mapping[str, Any]) -> tuple[int, ...]:
    lengths = []
    for arg in args:
        if arg.number_attr is not None:
            n = attrs[arg.number_attr]
        elif arg.type_list_attr is not None:
            n = len(attrs[arg.type_list_attr])
        else:
            n = 1
        lengths.append(n)
    return tuple(lengths)
