"""Element types of tensors.

One `DType` object exists per type; compare with `is` or `==` (which also accepts anything
`as_dtype` understands, so `t.dtype == np.float32` works as in TensorFlow).

String tensors are numpy object arrays whose elements are `bytes`, as TensorFlow returns them;
`str` values are encoded to UTF-8 on the way in. bfloat16 comes from `ml_dtypes`, as in TF and JAX.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from minigraph.errors import InvalidArgumentError, ResourceExhaustedError, describe_exception

__all__ = [
    "DType",
    "INT64_MAX",
    "INT64_MIN",
    "as_dtype",
    "convert_to_array",
    "frozen_copy",
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "string",
    "resource",
    "ALL_DTYPES",
    "NUMERIC_DTYPES",
    "INTEGER_DTYPES",
]


class DType:
    """An element type: its name, its numpy dtype and its properties.

    Created only by this module; use the module constants (`minigraph.int32`) or `as_dtype`.
    """

    __slots__ = ("_name", "_np", "_kind")

    def __init__(self, name: str, np_dtype: np.dtype, kind: str):
        self._name = name
        self._np = np_dtype
        self._kind = kind  # one of: bool, int, uint, float, complex, string

    @property
    def name(self) -> str:
        """The canonical name, e.g. 'float32'."""
        return self._name

    @property
    def as_numpy_dtype(self) -> type:
        """The numpy scalar type (`np.float32`, `np.object_` for strings), as TF's property."""
        return self.np_dtype.type

    @property
    def np_dtype(self) -> np.dtype:
        """The `numpy.dtype` instance used for arrays of this type."""
        found = self._np
        # Only bfloat16 is created without its numpy dtype (ml_dtypes is loaded on first use).
        return found if found is not None else _load_bfloat16()

    @property
    def is_bool(self) -> bool:
        """True for bool."""
        return self._kind == "bool"

    @property
    def is_integer(self) -> bool:
        """True for signed and unsigned integer types."""
        return self._kind in ("int", "uint")

    @property
    def is_unsigned(self) -> bool:
        """True for unsigned integer types."""
        return self._kind == "uint"

    @property
    def is_floating(self) -> bool:
        """True for float16/bfloat16/float32/float64."""
        return self._kind == "float"

    @property
    def is_complex(self) -> bool:
        """True for complex64/complex128."""
        return self._kind == "complex"

    @property
    def is_string(self) -> bool:
        """True for string."""
        return self._kind == "string"

    @property
    def is_numeric(self) -> bool:
        """True for integer, floating and complex types."""
        return self._kind in ("int", "uint", "float", "complex")

    @property
    def itemsize(self) -> int:
        """Bytes per element (8 for the object pointers of strings)."""
        return self.np_dtype.itemsize

    def __repr__(self) -> str:
        return f"minigraph.{self._name}"

    def __str__(self) -> str:
        return self._name

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, DType):
            return False
        try:
            return as_dtype(other) is self
        except (TypeError, InvalidArgumentError):
            return False

    # DTypes are singletons (unpickling returns the same object), so identity hashing is
    # right, and being C-level it keeps DTypes cheap as parts of memo keys.
    __hash__ = object.__hash__

    def __reduce__(self):
        return (as_dtype, (self._name,))


bool_ = DType("bool", np.dtype(np.bool_), "bool")
int8 = DType("int8", np.dtype(np.int8), "int")
int16 = DType("int16", np.dtype(np.int16), "int")
int32 = DType("int32", np.dtype(np.int32), "int")
int64 = DType("int64", np.dtype(np.int64), "int")
uint8 = DType("uint8", np.dtype(np.uint8), "uint")
uint16 = DType("uint16", np.dtype(np.uint16), "uint")
uint32 = DType("uint32", np.dtype(np.uint32), "uint")
uint64 = DType("uint64", np.dtype(np.uint64), "uint")
float16 = DType("float16", np.dtype(np.float16), "float")
# Its numpy dtype comes from ml_dtypes, imported on first use (it takes longer to import than
# the rest of minigraph's core): `_np` stays None until then, so code that compares `_np`
# directly takes its general path, which asks `np_dtype`.
bfloat16 = DType("bfloat16", None, "float")  # type: ignore[arg-type]
float32 = DType("float32", np.dtype(np.float32), "float")
float64 = DType("float64", np.dtype(np.float64), "float")
complex64 = DType("complex64", np.dtype(np.complex64), "complex")
complex128 = DType("complex128", np.dtype(np.complex128), "complex")
string = DType("string", np.dtype(object), "string")
# TF's DT_RESOURCE: a handle to state a session keeps (a variable), made by the op that owns it
# (VarHandleOp), never a constant or a feed of numbers. Its values are 0-d object arrays holding
# a `minigraph.resources.ResourceHandle`, in host memory on every device. Not a value dtype:
# not in ALL_DTYPES, and numpy's object dtype still means string (`as_dtype(object)`).
resource = DType("resource", np.dtype(object), "resource")

ALL_DTYPES: tuple[DType, ...] = (
    bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float16, bfloat16, float32, float64, complex64, complex128, string,
)  # fmt: skip
INTEGER_DTYPES = tuple(d for d in ALL_DTYPES if d.is_integer)
NUMERIC_DTYPES = tuple(d for d in ALL_DTYPES if d.is_numeric)

_BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES}
# TF's aliases: "float" and "double" are what REGISTER_OP strings and tf.as_dtype accept.
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "bool_": bool_,
                 "str": string, "bytes": string, "object": string,
                 "resource": resource})  # fmt: skip
_BY_NP: dict[np.dtype, DType] = {d._np: d for d in ALL_DTYPES if d._np is not None}


def _load_bfloat16() -> np.dtype:
    """bfloat16's numpy dtype, importing ml_dtypes on first use."""
    import ml_dtypes  # noqa: PLC0415 - slow to import, and bfloat16 is rarely used

    np_dtype = np.dtype(ml_dtypes.bfloat16)
    _BY_NP[np_dtype] = bfloat16
    bfloat16._np = np_dtype
    return np_dtype


# Python types map as TF's tf.as_dtype does for its own conversions.
_BY_PYTYPE: dict[type, DType] = {
    bool: bool_,
    int: int64,
    float: float64,
    complex: complex128,
    str: string,
    bytes: string,
}


def as_dtype(value: Any) -> DType:
    """Converts a DType, a name (`"int32"`, `"float"`), a numpy dtype or type, or a Python type.

    Raises:
        InvalidArgumentError: `value` names no supported type.
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        found = _BY_NAME.get(value)
        if found is None:
            import difflib  # noqa: PLC0415 - only for this error

            close = difflib.get_close_matches(value.lower(), list(_BY_NAME), n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(close)}?" if close else ""
            raise InvalidArgumentError(
                f"unknown dtype name {value!r}.{hint} Expected one of {sorted(_BY_NAME)}"
            )
        return found
    if isinstance(value, type) and value in _BY_PYTYPE:
        return _BY_PYTYPE[value]
    if value is None:
        # np.dtype(None) is float64: None must not silently mean a type.
        raise InvalidArgumentError("cannot interpret None as a dtype")
    try:
        np_dtype = np.dtype(value)
    except (TypeError, ValueError):
        # ValueError: numpy's for objects with a `.dtype` it cannot use (an Output, a
        # builder) and for malformed structured specs ({'a': ...}).
        raise InvalidArgumentError(
            f"cannot interpret {type(value).__name__} {_describe(value)} as a dtype"
        ) from None
    if not np_dtype.isnative:
        # A byte order is how values are stored, not a type: '>f4' (from a file written on
        # another machine) is float32; arrays are converted to native order where used.
        np_dtype = np_dtype.newbyteorder("=")
    if np_dtype.kind == "O" and not (
        value is object or value is np.object_ or isinstance(value, np.dtype)
    ):
        # np.dtype(list), np.dtype(SomeClass) fall back to object: they name no type.
        raise InvalidArgumentError(f"cannot interpret {value!r} as a dtype")
    found = _BY_NP.get(np_dtype)
    if found is None:
        if np_dtype.kind in "SU":
            return string
        if bfloat16._np is None and np_dtype.name == "bfloat16" and "ml_dtypes" in sys.modules:
            # An ml_dtypes array met before minigraph loaded ml_dtypes itself.
            _load_bfloat16()
            return as_dtype(np_dtype)
        raise InvalidArgumentError(f"numpy dtype {np_dtype} has no minigraph equivalent")
    return found


def frozen_copy(array: np.ndarray) -> np.ndarray:
    """`array`'s values in private storage that no public API can write to: what constants
    hold, so that nothing done to an array a user passed in or got back changes them.

    Numeric arrays become read-only views of a `bytes` object; string (object) arrays, which
    cannot live in a buffer, read-only views of a private copy that only `_FrozenObjects`
    holds. numpy refuses to make either writeable again. An array already held that way is
    returned as it is (so equal constants may share it).
    """
    if _is_frozen(array):
        return array
    check_copy_fits(array, array.dtype)
    if array.dtype.hasobject:
        return np.asarray(_FrozenObjects(np.array(array, order="C")))
    return np.frombuffer(array.tobytes(), dtype=array.dtype).reshape(array.shape)


def distinct_elements(array: np.ndarray) -> np.ndarray:
    """`array` with each broadcast dimension (stride 0, as np.broadcast_to makes) cut to length
    1: every distinct element once, at a position that holds it in `array` too."""
    strides, shape = array.strides, array.shape
    if all(s or n <= 1 for s, n in zip(strides, shape)):
        return array
    return array[
        tuple(slice(0, 1) if not s and n > 1 else slice(None) for s, n in zip(strides, shape))
    ]


def check_copy_fits(array: np.ndarray, dtype: np.dtype) -> None:
    """Refuses a copy of `array` as `dtype` that cannot fit in the memory available."""
    nbytes = array.size * dtype.itemsize
    if nbytes <= 64 << 20:
        return
    from minigraph.memory import available_bytes  # noqa: PLC0415

    available = available_bytes()
    if available is not None and nbytes > available:
        kind = "a broadcast array" if distinct_elements(array) is not array else "an array"
        raise ResourceExhaustedError(
            f"{kind} of shape {list(array.shape)} would take {nbytes} bytes as {dtype}, more "
            f"than the {available} bytes of memory available"
        )


class _FrozenObjects:
    """Exposes a private object array as read-only memory (the `__array_interface__` protocol,
    as numpy's own `as_strided` uses): an array made from it cannot be made writeable, and the
    private array is reachable only through this object's private slot."""

    __slots__ = ("__array_interface__", "_private")

    def __init__(self, private: np.ndarray):
        interface = dict(private.__array_interface__)
        interface["data"] = (interface["data"][0], True)  # (address, read-only)
        self.__array_interface__ = interface
        self._private = private  # keeps the memory (and the elements) alive


def _is_frozen(array: np.ndarray) -> bool:
    """True for a C-contiguous, read-only array whose memory belongs to a `bytes` object or to
    `_FrozenObjects`: nothing can write to it."""
    if array.flags.writeable or not array.flags.c_contiguous:
        return False
    owner = array.base
    while isinstance(owner, np.ndarray):
        owner = owner.base
    return type(owner) is bytes or type(owner) is _FrozenObjects


def _encode_strings(array: np.ndarray) -> np.ndarray:
    """Object array of bytes from an array of str/bytes (UTF-8 for str), TF's representation."""
    flat = array.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    # Per-element conversion is unavoidable here: Python str objects have to be encoded one by
    # one. It runs only on literal and fed string values, never inside a kernel.
    try:
        out[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in flat.tolist()]
    except UnicodeEncodeError as e:
        # Lone surrogates ("\ud800") are str but have no UTF-8 encoding.
        raise InvalidArgumentError(
            f"cannot encode a string element as UTF-8: {e.object[e.start : e.end]!r} ({e.reason})"
        ) from None
    bad = [v for v in out.tolist() if not isinstance(v, bytes)]
    if bad:
        raise InvalidArgumentError(
            f"string tensors hold bytes or str; got an element of type {type(bad[0]).__name__}"
        )
    return out.reshape(array.shape)


def _python_literal_dtype(array: np.ndarray) -> DType:
    """The dtype a Python literal converts to, following tf.convert_to_tensor."""
    kind = array.dtype.kind
    if kind == "i":
        info = np.iinfo(np.int32)
        if array.size == 0 or (array.min() >= info.min and array.max() <= info.max):
            return int32
        return int64
    if kind == "f":
        return float32
    if kind == "c":
        return complex128
    if kind == "b":
        return bool_
    if kind in "SUO":
        return string
    return as_dtype(array.dtype)


def convert_to_array(value: Any, dtype: DType | None = None) -> np.ndarray:
    """Converts a literal (numpy array, Python scalar or nested list) to a numpy array.

    Python literals follow tf.convert_to_tensor: ints become int32 (int64 when they do not fit),
    floats float32, str/bytes strings. numpy arrays keep their dtype unless `dtype` is given.
    A conversion that would change a value (overflow, a float into an int type) is an error.

    Raises:
        InvalidArgumentError: ragged nesting, unsupported element types or a lossy conversion,
            or a `dtype` that names no type.
    """
    if dtype is not None and type(dtype) is not DType:
        dtype = as_dtype(dtype)
    if dtype is resource:
        raise InvalidArgumentError(
            f"cannot convert {_describe(value)} to a resource tensor: resource handles are made "
            "by the op that owns the resource (a variable's VarHandleOp), never from a value"
        )
    kind = type(value)
    if kind is int or kind is float or kind is bool:
        fast = _python_scalar(value, kind, dtype)
        if fast is not None:
            return fast
    is_python = not isinstance(value, (np.ndarray, np.generic))
    try:
        array = np.asarray(value)
    except ValueError as e:
        raise InvalidArgumentError(
            f"cannot convert a ragged nested sequence to a tensor (all lists at one level must "
            f"have the same length): {e}"
        ) from e
    except TypeError as e:  # e.g. a symbolic tensor (an Output) inside a literal
        raise InvalidArgumentError(f"cannot convert {_describe(value)} to a tensor: {e}") from e
    except Exception as e:  # an object whose __array__, __len__ or __getitem__ raises
        raise InvalidArgumentError(f"converting it raised {describe_exception(e)}") from e
    if is_python and array.dtype.kind in "uf" and _python_ints_beyond_int64(value, array):
        # numpy makes uint64 of ints above int64 and float64 of [-1, 2**64 - 1]; tf.constant
        # refuses ints that fit no int64, as do we (a float would change them).
        raise InvalidArgumentError(
            f"cannot convert {_describe(value)} to a tensor: it holds ints outside int64's "
            f"range [{INT64_MIN}, {INT64_MAX}]"
        )
    if is_python and array.dtype.kind in "SU":
        # numpy's fixed-width strings drop trailing NULs and turn numbers mixed in with strings
        # into text; keep the Python objects themselves (same shape: the nesting is regular).
        array = np.asarray(value, dtype=object)
    if (
        array.dtype.kind == "O"
        and array.size
        and not all(
            isinstance(v, (bytes, str)) for v in distinct_elements(array).reshape(-1).tolist()
        )
    ):
        raise InvalidArgumentError(
            "cannot convert a value of mixed or unsupported element types to a tensor "
            f"(elements: {sorted({type(v).__name__ for v in array.reshape(-1).tolist()})})"
        )
    if is_python and array.dtype.kind in "iufc" and _holds_bools(value):
        # numpy turns [0, True] into int64 [0, 1]; tf.constant refuses the mix, as do we (a
        # list of bools alone is a bool tensor).
        raise InvalidArgumentError(
            f"cannot convert {_describe(value)} to a tensor: it mixes bools with numbers"
        )
    source = _python_literal_dtype(array) if is_python else as_dtype(array.dtype)
    target = source if dtype is None else dtype
    if target.is_string:
        if array.dtype.kind not in "SUO" and array.size:
            raise InvalidArgumentError(f"cannot convert a {array.dtype} value to a string tensor")
        check_copy_fits(array, np.dtype(object))
        distinct = distinct_elements(array)  # each distinct string encoded once
        encoded = _encode_strings(distinct)
        if distinct is array:
            return encoded
        return np.array(np.broadcast_to(encoded, array.shape), order="C")
    if array.dtype.kind in "SUO":
        raise InvalidArgumentError(f"cannot convert a string value to a {target.name} tensor")
    if array.dtype == target.np_dtype:
        return array
    if is_python and array.size == 0:
        return array.astype(target.np_dtype)  # an empty literal has no value to lose
    if not is_python:
        return _convert_numpy(array, source, target)
    lossy = not _same_kind(source, target)
    if not lossy:
        # Checked before casting, so that a refused cast never warns (complex -> real, ...).
        with np.errstate(all="ignore"):
            converted = array.astype(target.np_dtype)
            if array.dtype.kind in "fc" and (target.is_floating or target.is_complex):
                # Python floats are doubles; rounding them to a narrower float type is the
                # conversion itself (0.1 -> float32). Only an overflow to inf changes a value.
                lossy = not np.array_equal(np.isfinite(converted), np.isfinite(array))
            else:
                back = converted.real if converted.dtype.kind == "c" else converted
                lossy = not np.array_equal(back.astype(array.dtype), array)
    if lossy:
        raise InvalidArgumentError(
            f"cannot convert {_describe(value)} to {target.name} without changing its value"
        )
    return converted


def _convert_numpy(array: np.ndarray, source: DType, target: DType) -> np.ndarray:
    """A numpy array converted to `target` when no value changes beyond the conversion itself.

    The kinds follow the literal rule (bool only to bool; integers to integers, floats and
    complex; floats to floats and complex): a conversion to a lower kind (float to integer,
    complex to real) is refused whatever the values. Within that, integers must fit the
    target's range and stay exact in a float or complex target (int64 2**53 + 1 does not fit
    float64); floats may round to a narrower float type (that is the conversion), but a finite
    value must not overflow to inf. A refusal names the first value (in C order) that does not
    fit. tf.constant casts numpy arrays unchecked (int64 2**40 becomes int32 0).
    """
    if not _same_kind(source, target):
        if source.is_bool or target.is_bool:
            why = "bool converts only to bool"
        else:
            why = f"{source._kind} to {target._kind} conversions may change values"
        raise InvalidArgumentError(
            f"cannot convert a {source.name} array to {target.name}: {why}; cast it explicitly"
        )
    check_copy_fits(array, target.np_dtype)
    shown = array
    array = distinct_elements(array)  # checked on each distinct element once
    flat = array.reshape(-1)
    bad: int | None = None
    why = ""
    if source.is_integer and target.is_integer:
        if flat.size:
            info = np.iinfo(target.np_dtype)
            low = int(np.argmin(flat))
            if int(flat[low]) < info.min:
                bad = low
            else:
                high = int(np.argmax(flat))
                if int(flat[high]) > info.max:
                    bad = high
            why = f"is out of {target.name}'s range [{info.min}, {info.max}]"
        if bad is None:
            return shown.astype(target.np_dtype, order="C")
    else:
        with np.errstate(all="ignore"):
            converted = array.astype(target.np_dtype)
            if source.is_integer:
                # Exact only if finite and it converts back (float(2**53 + 1) is 2**53).
                # Beyond the target's range it is inf, which numpy may convert back to the
                # very integer (-inf to INT64_MIN): hence the isfinite.
                real = converted.real if target.is_complex else converted
                changed = (real.astype(array.dtype).reshape(-1) != flat) | ~np.isfinite(
                    real.reshape(-1)
                )
                why = f"would become {target.name} "
            else:
                # Rounding to a narrower float is the conversion; only overflow changes more.
                out = converted.reshape(-1)
                changed = np.isfinite(flat.real) & ~np.isfinite(out.real)
                if source.is_complex:
                    changed |= np.isfinite(flat.imag) & ~np.isfinite(out.imag)
                why = f"overflows {target.name}"
        if not changed.any():
            return converted if shown is array else shown.astype(target.np_dtype, order="C")
        bad = int(np.argmax(changed))
        if source.is_integer:
            why += repr(converted.reshape(-1)[bad].item())
    value = flat[bad].item()
    at = "" if array.ndim == 0 else f" at {list(map(int, np.unravel_index(bad, array.shape)))}"
    raise InvalidArgumentError(
        f"cannot convert a {source.name} array to {target.name} without changing its value: "
        f"the value {value!r}{at} {why}"
    )


_INT32 = np.iinfo(np.int32)
# The range of int64, TF's type of int attrs and of Python ints converted to tensors.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _python_scalar(value: Any, kind: type, dtype: DType | None) -> np.ndarray | None:
    """Fast path of convert_to_array for one Python int, float or bool (literal axes, indices
    and scalars are most of what graphs convert); None when the general path must decide."""
    if dtype is None:
        if kind is int:
            if _INT32.min <= value <= _INT32.max:
                return np.array(value, np.int32)
            if INT64_MIN <= value <= INT64_MAX:
                return np.array(value, np.int64)
            return None
        if kind is float:
            dtype = float32
        else:
            return np.array(value, np.bool_)
    if kind is bool:
        return np.array(value, np.bool_) if dtype is bool_ else None
    if kind is int and dtype.is_integer:
        info = np.iinfo(dtype.np_dtype)
        return np.array(value, dtype.np_dtype) if info.min <= value <= info.max else None
    if kind is float and dtype.is_floating and dtype is not bfloat16:
        limit = float(np.finfo(dtype.np_dtype).max)
        if -limit <= value <= limit:  # NaN and overflow to inf go the general way
            return np.array(value, dtype.np_dtype)
    return None


def _python_ints_beyond_int64(value: Any, array: np.ndarray) -> bool:
    """Whether a Python literal that numpy made unsigned or floating holds only ints, some of
    them outside int64 (buffers such as bytearray are uint8 by nature, not Python ints)."""
    if isinstance(value, (bytearray, memoryview)):
        return False
    if array.dtype.kind == "f":
        # Cheap first: floats from ints beyond int64 are that large (in magnitude).
        finite = array[np.isfinite(array)]
        if not finite.size or float(np.abs(finite).max()) < 2.0**63:
            return False
    if isinstance(value, int):
        return True
    if not isinstance(value, (list, tuple)):
        return False
    kinds = set(map(type, np.asarray(value, dtype=object).ravel().tolist()))
    return (
        bool(kinds) and all(issubclass(k, (int, np.integer)) for k in kinds) and (bool not in kinds)
    )


def _holds_bools(value: Any) -> bool:
    """Whether a nested Python literal holds a bool element (or a bool array)."""
    if not isinstance(value, (list, tuple)):
        return False
    # One C-level pass: the literal as an object array of its elements, then their types.
    types = set(map(type, np.asarray(value, dtype=object).ravel().tolist()))
    return bool in types or np.bool_ in types


def _same_kind(source: DType, target: DType) -> bool:
    # bool converts only to bool, as in tf.constant; ints widen to floats, floats to complex.
    if source.is_bool or target.is_bool:
        return source.is_bool and target.is_bool
    order = {"uint": 1, "int": 1, "float": 2, "complex": 3}
    return order[source._kind] <= order.get(target._kind, -1)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
