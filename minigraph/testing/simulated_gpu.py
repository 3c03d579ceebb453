"""Simulated GPUs, with a cupy-like array module, for machines without one.

    with minigraph.testing.simulated_gpus(2) as (cpu, gpu0, gpu1):
        sess = Session(scope)   # sees CPU:0, GPU:0, GPU:1
        ...
        gpu0.bytes_in, gpu0.copies_in

A `SimulatedGpuDevice` is the real `CupyGpuDevice` driven by `simulated_cupy`, a stand-in for
the cupy module whose arrays (`SimulatedArray`) keep their data in host memory but behave as
cupy's do. So on a machine without a GPU the runtime's GPU code (placement, the device's copies,
activation, feeding device arrays) and every kernel's `xp is not np` branch run in CI, and a
test comparing a "GPU" result with a CPU one compares two code paths. Every copy the runtime
makes (`from_host`, `to_host`, `copy_from`) is counted, in copies and bytes. The double says
what it is in `list_devices(verbose=True)`.

What the double catches, as cupy does (the error types are cupy's):

- implicit conversion to a host array: `np.asarray(x)`, `np.array(x)`, `__array__`, building
  an array from a list of device arrays, `operator.index(x)` (cupy arrays have no `__index__`:
  `range(x)`, `seq[x]`, `shape[x]` fail): TypeError. Conversions cupy allows (and which
  synchronise with the device) are allowed: `int(x)`, `float(x)`, `bool(x)` of one element,
  `.item()`, `.tolist()`, `.get()`, `str(x)`;
- host arrays as operands of a device computation (`numpy.ndarray`s in ufuncs and operators,
  `where`, `copyto`, `take`, `concatenate`, ...; lists too in ufuncs, operators and indices):
  TypeError. Host data goes to the device only through `xp.asarray` / `xp.array`, where the
  copy is visible;
- dtypes cupy lacks (bfloat16, strings, objects, datetimes, longdouble) wherever an array would
  be made, including `astype` and `view`: ValueError("Unsupported dtype ...");
- arrays of two devices in one operation, or an array used while another device is current
  (cupy raises unless peer access is possible; simulated GPUs never have it): ValueError. The
  current device is per thread (`with xp.cuda.Device(i)`, as `Device.activate()` does);
- numpy functions on device arrays dispatch to the namespace (`__array_function__`,
  `__array_ufunc__`), and those it lacks raise TypeError, as numpy does for cupy arrays;
- cupy's semantics where they differ from numpy's: reductions and `x[i, j]` return 0-d device
  arrays, not scalars; integer-array indexing, `take` and `ufunc.at` wrap out-of-range indices
  instead of raising; `ufunc.at` (cupy's scatter ops) refuses the dtypes CUDA's atomics lack
  (`add.at` on int64, int8, int16, bool, complex: TypeError), `at` exists only for add, maximum
  and minimum; assigning through duplicate integer indices (`x[idx] = v`) keeps an unspecified
  one of the values on cupy: the double keeps the first, where numpy keeps the last, so code
  that relies on numpy's order fails; sorts are stable (cupy's only kind); `empty` is filled
  with a non-zero pattern, so reading memory a kernel did not write shows up.

Stricter than cupy, on purpose: cupy copies a host array used as an index or assigned as a value
(`x[np_idx]`, `x[i] = np_values`) to the device silently, once per call; the double refuses it
(TypeError): write `xp.asarray(...)` so the transfer is visible.

What the double cannot catch (check these on a real GPU: `tests/test_gather_gpu.py` has tests
that run with cupy and a GPU, and `python -m benchmarks --only gpu`):

- anything about CUDA itself: kernel compilation, `RawKernel`/`ElementwiseKernel` code, memory
  limits, streams and asynchrony (work here is synchronous; a missing synchronisation is
  invisible), performance;
- numerical differences: the double computes with numpy (summation order, float16 maths,
  transcendental functions' last bits) and promotes dtypes as the installed numpy does; cupy
  versions differ in scalar type promotion;
- the atomics themselves: it refuses the dtypes cupy's scatter refuses, but cannot show races
  or the order in which a real GPU applies atomic updates;
- functions the namespace lacks raise AttributeError even where cupy has them (add them, see
  below), and numpy-only keyword arguments the wrapped functions accept are not refused.

Extending the namespace (for new GPU kernels): `SimulatedCupy` lists the subset of cupy's API
that our kernels and examples use, one visible line or method per name. For a function whose
cupy semantics equal numpy's, add one line to the class body, e.g.

    searchsorted = _same_as_numpy(np.searchsorted)

which refuses host arrays, checks devices and dtypes and wraps the results. Where cupy differs
from numpy (wrapping indices, refused dtypes, undefined orders), write a method that says how,
next to `take` and `_Ufunc.at`; a new elementwise ufunc is `name = _Ufunc(np.name)`. Then add
a test to tests/test_simulated_cupy.py showing the cupy behaviour the double reproduces.
Already there for partition/stitch-like kernels: `nonzero`, `flatnonzero`, `cumsum`, `bincount`,
stable `argsort`, `searchsorted`, `concatenate`, `repeat`, boolean masks, and `x[idx] = v`
(with cupy's unspecified winner among duplicates).
"""

from __future__ import annotations

import contextlib
import math
import operator
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from minigraph.devices import CpuDevice, CupyGpuDevice, Device, use_devices
from minigraph.errors import InvalidArgumentError

__all__ = [
    "SimulatedArray",
    "SimulatedCupy",
    "SimulatedGpuDevice",
    "MAX_SIMULATED_GPUS",
    "pinned_devices",
    "simulated_cupy",
    "simulated_gpus",
]

# The dtypes cupy can hold (numpy's type characters): bool, signed and unsigned integers,
# float16/32/64, complex64/128. Everything else is refused where an array would be made.
_CUPY_DTYPE_CHARS = frozenset("?bhilqBHILQefdFD")


def _check_dtype(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.char not in _CUPY_DTYPE_CHARS:
        raise ValueError(f"Unsupported dtype {dtype}")  # cupy's message
    return dtype


# -- the current device (per thread, as CUDA's) ----------------------------------------------------

_thread = threading.local()


def _current_device() -> int:
    return getattr(_thread, "device", 0)


class _CudaDevice:
    """`cupy.cuda.Device`: a context manager making a simulated GPU current in this thread."""

    def __init__(self, device: int | None = None):
        self.id = _current_device() if device is None else operator.index(device)

    def __enter__(self) -> _CudaDevice:
        stack = _thread.__dict__.setdefault("stack", [])
        stack.append(_current_device())
        _thread.device = self.id
        return self

    def __exit__(self, *exc: Any) -> None:
        _thread.device = _thread.stack.pop()

    def use(self) -> None:
        _thread.device = self.id

    def synchronize(self) -> None:
        """Work on the double is synchronous: nothing to wait for."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CudaDevice) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id} (simulated)>"


class _Stream:
    def synchronize(self) -> None:
        """Work on the double is synchronous: nothing to wait for."""


class _Cuda:
    """The part of `cupy.cuda` the runtime uses."""

    Device = _CudaDevice

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def get_device_id() -> int:
        return _current_device()

    @staticmethod
    def get_current_stream() -> _Stream:
        return _Stream()


# -- operands and results ------------------------------------------------------------------------


def _device_mismatch(array_device: int, current: int) -> ValueError:
    return ValueError(
        f"The device where the array resides ({array_device}) is different from the current "
        f"device ({current}). Peer access is unavailable between these devices (simulated GPUs "
        "never have it: copy the array with xp.asarray under the destination device)."
    )


def _operand(value: Any, device: int) -> Any:
    """The numpy data behind a device operand; host arrays are refused, as cupy's kernels do."""
    if isinstance(value, SimulatedArray):
        if value._device != device:
            raise _device_mismatch(value._device, device)
        return value._data
    if isinstance(value, np.ndarray):
        raise TypeError(
            f"Unsupported type {type(value)}: a host (numpy) array cannot be an operand of a "
            "device computation; copy it explicitly with xp.asarray"
        )
    if isinstance(value, (list, tuple)):
        return type(value)(_operand(v, device) for v in value)
    return value  # Python and numpy scalars, dtypes, None, slices, ...


def _wrap(result: Any, device: int) -> Any:
    """numpy results as device arrays (0-d arrays for scalars, as cupy's reductions give)."""
    if isinstance(result, np.ndarray):
        _check_dtype(result.dtype)
        return SimulatedArray._new(result, device)
    if isinstance(result, np.generic):
        _check_dtype(result.dtype)
        return SimulatedArray._new(np.asarray(result), device)
    if isinstance(result, tuple):
        return tuple(_wrap(r, device) for r in result)
    if isinstance(result, list):
        return [_wrap(r, device) for r in result]
    return result


def _holds_device_arrays(obj: Any) -> bool:
    if isinstance(obj, SimulatedArray):
        return True
    return isinstance(obj, (list, tuple)) and any(_holds_device_arrays(v) for v in obj)


def _garbage(shape: Any, dtype: np.dtype, order: str) -> np.ndarray:
    data = np.empty(shape, dtype, order)
    if dtype.kind == "b":
        data[...] = True
    else:
        data.reshape(-1, order="A").view(np.uint8)[...] = 0xA5
    return data


def _same_as_numpy(fn: Any) -> Any:
    """A namespace function whose cupy semantics are numpy's `fn`: device arrays (of the current
    device) in, device arrays out; host arrays and unsupported dtypes refused."""

    def call(*args: Any, **kwargs: Any) -> Any:
        device = _current_device()
        args = tuple(_operand(a, device) for a in args)
        kwargs = {k: _operand(v, device) for k, v in kwargs.items()}
        return _wrap(fn(*args, **kwargs), device)

    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = f"cupy.{fn.__name__} (numpy's semantics) on simulated device arrays."
    return staticmethod(call)  # a plain function in the namespace class, not a method


def _wrap_indices(indices: np.ndarray, size: int) -> np.ndarray:
    """Integer indices wrapped into [0, size), as cupy's indexing kernels wrap them."""
    if indices.dtype.kind not in "iu":
        return indices
    # A numpy scalar of the indices' kind keeps their dtype (a Python int could overflow it).
    return np.mod(indices, np.uint64(size) if indices.dtype.kind == "u" else np.int64(size))


def _stable_sort(fn: Any, a: SimulatedArray, axis: int | None, kind: str | None) -> Any:
    if kind not in (None, "stable"):
        raise ValueError(
            f"cupy sorts are always stable: kind must be None or 'stable', got {kind!r}"
        )
    device = _current_device()
    return _wrap(fn(_operand(a, device), axis=axis, kind="stable"), device)


def _index_key(array: SimulatedArray, key: Any, device: int) -> tuple[Any, ...]:
    """`key` with device arrays unwrapped and integer arrays wrapped into range per axis, as
    cupy's indexing does (numpy would raise IndexError); host arrays in keys are refused."""
    parts = list(key) if isinstance(key, tuple) else [key]
    resolved = []
    for part in parts:
        if isinstance(part, SimulatedArray):
            if part._device != device:
                raise _device_mismatch(part._device, device)
            part = part._data
            if part.dtype.kind not in "biu":
                raise IndexError(
                    "arrays used as indices must be of integer or boolean type. "
                    f"(actual: {part.dtype.type})"
                )
        elif isinstance(part, (np.ndarray, list)):
            raise TypeError(
                f"a host {type(part).__name__} used as an index of a device array: cupy copies "
                "it to the device on every call; copy it once, explicitly, with xp.asarray"
            )
        resolved.append(part)
    # Which axis each part indexes (None adds an axis, Ellipsis spans the rest).
    spans = []
    for part in resolved:
        if part is None or part is Ellipsis:
            spans.append(0)
        elif isinstance(part, np.ndarray) and part.dtype.kind == "b":
            spans.append(part.ndim)
        else:
            spans.append(1)
    ellipsis = array.ndim - sum(spans)
    axis = 0
    for i, part in enumerate(resolved):
        if part is Ellipsis:
            axis += ellipsis
            continue
        if isinstance(part, np.ndarray) and part.dtype.kind in "iu" and axis < array.ndim:
            size = array.shape[axis]
            if size:
                resolved[i] = _wrap_indices(part, size)  # cupy wraps; numpy raises
        axis += spans[i]
    if not any(part is Ellipsis for part in resolved):
        # A trailing Ellipsis makes numpy return 0-d views instead of scalars, as cupy does.
        resolved.append(Ellipsis)
    return tuple(resolved)


def _single_leading_index(key: tuple[Any, ...]) -> np.ndarray | None:
    """The integer array of `key` when it is the only advanced index and comes first."""
    first, rest = key[0], key[1:]
    if not (isinstance(first, np.ndarray) and first.dtype.kind in "iu"):
        return None
    if all(part is Ellipsis or (isinstance(part, slice) and part == slice(None)) for part in rest):
        return first
    return None


# -- arrays --------------------------------------------------------------------------------------


def _operators(ufunc: str, inplace: bool = True) -> tuple[Callable[[Any, Any], Any], ...]:
    """SimulatedArray's `__op__`, `__rop__` and, when `inplace`, `__iop__` for the simulated
    cupy's ufunc named `ufunc` (looked up when called: the namespace is defined later)."""

    def forward(self: Any, other: Any) -> Any:
        return getattr(simulated_cupy, ufunc)(self, other)

    def reflected(self: Any, other: Any) -> Any:
        return getattr(simulated_cupy, ufunc)(other, self)

    def in_place(self: Any, other: Any) -> Any:
        return getattr(simulated_cupy, ufunc)(self, other, out=self)

    return (forward, reflected, in_place) if inplace else (forward, reflected)


def _operator(ufunc: str) -> Callable[[Any, Any], Any]:
    """SimulatedArray's `__op__` alone (comparisons and shifts have no reflected form here)."""
    return _operators(ufunc, inplace=False)[0]


class SimulatedArray:
    """A simulated GPU's array: cupy.ndarray's interface over private host memory.

    Made by the namespace (`simulated_cupy.asarray(host)`, `zeros`, ...) or by a
    `SimulatedGpuDevice`'s `from_host`; `.get()` copies it back to a numpy array.
    """

    __slots__ = ("_data", "_device")
    __array_priority__ = 100  # as cupy's: binary operators with numpy arrays come here
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, shape: Any, dtype: Any = float):
        self._data = np.zeros(shape, _check_dtype(dtype))
        self._device = _current_device()

    @classmethod
    def _new(cls, data: np.ndarray, device: int) -> SimulatedArray:
        array = object.__new__(cls)
        array._data = data
        array._device = device
        return array

    # attributes
    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    @property
    def strides(self) -> tuple[int, ...]:
        return self._data.strides

    @property
    def device(self) -> _CudaDevice:
        """The (simulated) CUDA device the array lives on."""
        return _CudaDevice(self._device)

    @property
    def T(self) -> SimulatedArray:
        return SimulatedArray._new(self._data.T, self._device)

    @property
    def real(self) -> SimulatedArray:
        return SimulatedArray._new(self._data.real, self._device)

    @property
    def imag(self) -> SimulatedArray:
        return SimulatedArray._new(self._data.imag, self._device)

    # copies to the host: explicit, or the synchronising conversions cupy allows
    def get(self, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
        """A host copy (a numpy array), as `cupy.ndarray.get`."""
        host = np.array(self._data, order=order, copy=True)
        if out is not None:
            out[...] = host
            return out
        return host

    def tolist(self) -> Any:
        return self._data.tolist()

    def item(self) -> Any:
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self._data.item()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
            "construct a NumPy array explicitly. (minigraph.testing: a simulated GPU array)"
        )

    def __int__(self) -> int:
        return int(self._data)

    def __float__(self) -> float:
        return float(self._data)

    def __complex__(self) -> complex:
        return complex(self._data)

    def __bool__(self) -> bool:
        if self.size == 0:
            warnings.warn(
                "The truth value of an empty array is ambiguous. Returning False",
                DeprecationWarning,
                stacklevel=2,
            )
            return False
        if self.size > 1:
            raise ValueError(
                "The truth value of an array with more than one element is ambiguous. "
                "Use a.any() or a.all()"
            )
        return bool(self._data.reshape(()))

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[SimulatedArray]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        return f"SimulatedArray({self._data!r}, device={self._device})"

    def __str__(self) -> str:
        return str(self._data)

    # numpy interoperability: numpy functions and ufuncs dispatch here, as they do for cupy
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        impl = getattr(simulated_cupy, ufunc.__name__, None)
        if not isinstance(impl, _Ufunc):
            return NotImplemented
        if method == "__call__":
            out = kwargs.pop("out", None)
            if out is not None:
                if len(out) != 1:
                    raise ValueError("The 'out' parameter must have exactly one array value")
                kwargs["out"] = out[0]
            return impl(*inputs, **kwargs)
        if method == "at":
            return impl.at(*inputs)
        return NotImplemented

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func.__module__ != "numpy":
            return NotImplemented
        impl = getattr(simulated_cupy, func.__name__, None)
        if impl is None or not callable(impl):
            return NotImplemented
        if not all(issubclass(t, (SimulatedArray, np.ndarray)) for t in types):
            return NotImplemented
        return impl(*args, **kwargs)

    # indexing
    def __getitem__(self, key: Any) -> SimulatedArray:
        device = self._device
        return SimulatedArray._new(self._data[_index_key(self, key, device)], device)

    def __setitem__(self, key: Any, value: Any) -> None:
        device = _current_device()
        if self._device != device:
            raise _device_mismatch(self._device, device)
        key = _index_key(self, key, device)
        if isinstance(value, np.ndarray):
            raise TypeError(
                "a host array assigned into a device array: cupy copies it to the device on "
                "every call; copy it once, explicitly, with xp.asarray"
            )
        value = _operand(value, device)
        index = _single_leading_index(key)
        if index is not None and index.size > 1:
            # cupy leaves which of several values for one element wins unspecified; numpy
            # keeps the last. Keep the first, so code relying on numpy's order shows up.
            target = self._data[key].shape
            flat = index.reshape(-1)
            rows = np.broadcast_to(value, target).reshape((flat.size,) + target[index.ndim :])
            self._data[(flat[::-1], Ellipsis)] = rows[::-1]
            return
        self._data[key] = value

    # views and copies
    def reshape(self, *shape: Any, order: str = "C") -> SimulatedArray:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return SimulatedArray._new(self._data.reshape(shape, order=order), self._device)

    def ravel(self, order: str = "C") -> SimulatedArray:
        return SimulatedArray._new(self._data.ravel(order), self._device)

    def flatten(self) -> SimulatedArray:
        return simulated_cupy.ravel(self).copy()

    def view(self, dtype: Any = None) -> SimulatedArray:
        if dtype is None:
            return SimulatedArray._new(self._data.view(), self._device)
        return SimulatedArray._new(self._data.view(_check_dtype(dtype)), self._device)

    def transpose(self, *axes: Any) -> SimulatedArray:
        return SimulatedArray._new(self._data.transpose(*axes), self._device)

    def squeeze(self, axis: Any = None) -> SimulatedArray:
        return SimulatedArray._new(self._data.squeeze(axis), self._device)

    def copy(self, order: str = "C") -> SimulatedArray:
        """A copy on the current device (cupy copies across devices here)."""
        return SimulatedArray._new(np.array(self._data, order=order, copy=True), _current_device())

    def astype(self, dtype: Any, order: str = "K", copy: bool = True) -> SimulatedArray:
        dtype = _check_dtype(dtype)
        device = _current_device()
        data = _operand(self, device)
        return SimulatedArray._new(data.astype(dtype, order=order, copy=copy), device)

    def fill(self, value: Any) -> None:
        self[...] = value

    # computations (methods of cupy.ndarray; the namespace functions do the work)
    def take(self, indices: Any, axis: Any = None) -> SimulatedArray:
        return simulated_cupy.take(self, indices, axis)

    def nonzero(self) -> tuple[SimulatedArray, ...]:
        return simulated_cupy.nonzero(self)

    def any(self, axis: Any = None, keepdims: bool = False) -> SimulatedArray:
        return simulated_cupy.any(self, axis=axis, keepdims=keepdims)

    def all(self, axis: Any = None, keepdims: bool = False) -> SimulatedArray:
        return simulated_cupy.all(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> SimulatedArray:
        return simulated_cupy.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> SimulatedArray:
        return simulated_cupy.min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis: Any = None) -> SimulatedArray:
        return simulated_cupy.argmax(self, axis=axis)

    def argmin(self, axis: Any = None) -> SimulatedArray:
        return simulated_cupy.argmin(self, axis=axis)

    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> SimulatedArray:
        return simulated_cupy.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> SimulatedArray:
        return simulated_cupy.prod(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def cumsum(self, axis: Any = None, dtype: Any = None) -> SimulatedArray:
        return simulated_cupy.cumsum(self, axis=axis, dtype=dtype)

    def argsort(self, axis: int = -1, kind: str | None = None) -> SimulatedArray:
        return simulated_cupy.argsort(self, axis=axis, kind=kind)

    def repeat(self, repeats: Any, axis: Any = None) -> SimulatedArray:
        return simulated_cupy.repeat(self, repeats, axis=axis)

    # operators: cupy's ufuncs, which refuse host arrays
    def __neg__(self) -> SimulatedArray:
        return simulated_cupy.negative(self)

    def __pos__(self) -> SimulatedArray:
        return self

    def __abs__(self) -> SimulatedArray:
        return simulated_cupy.absolute(self)

    def __invert__(self) -> SimulatedArray:
        return simulated_cupy.invert(self)

    __add__, __radd__, __iadd__ = _operators("add")
    __sub__, __rsub__, __isub__ = _operators("subtract")
    __mul__, __rmul__, __imul__ = _operators("multiply")
    __truediv__, __rtruediv__ = _operators("true_divide", inplace=False)
    __floordiv__, __rfloordiv__ = _operators("floor_divide", inplace=False)
    __mod__, __rmod__ = _operators("remainder", inplace=False)
    __pow__, __rpow__ = _operators("power", inplace=False)
    __and__, __rand__, __iand__ = _operators("bitwise_and")
    __or__, __ror__, __ior__ = _operators("bitwise_or")
    __xor__, __rxor__ = _operators("bitwise_xor", inplace=False)
    __lshift__ = _operator("left_shift")
    __rshift__ = _operator("right_shift")
    __lt__ = _operator("less")
    __le__ = _operator("less_equal")
    __eq__ = _operator("equal")  # type: ignore[assignment]
    __ne__ = _operator("not_equal")  # type: ignore[assignment]
    __gt__ = _operator("greater")
    __ge__ = _operator("greater_equal")


# -- ufuncs --------------------------------------------------------------------------------------

# The dtypes cupy's scatter_add (CUDA's atomicAdd) and scatter_max/min take; `ufunc.at` uses them.
_ATOMIC_ADD_TYPES = frozenset(
    np.dtype(t) for t in (np.int32, np.uint32, np.uint64, np.float16, np.float32, np.float64)
)
_ATOMIC_MINMAX_TYPES = _ATOMIC_ADD_TYPES - {np.dtype(np.float16)}


class _Ufunc:
    """A cupy ufunc: numpy's maths over device arrays of the current device, host arrays
    refused. `at` exists where cupy has it (add, maximum, minimum), with its dtype limits."""

    def __init__(self, ufunc: np.ufunc, at_types: frozenset[np.dtype] | None = None):
        self._ufunc = ufunc
        self._at_types = at_types
        self.__name__ = ufunc.__name__
        self.nin, self.nout = ufunc.nin, ufunc.nout

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        device = _current_device()
        for a in args:
            if isinstance(a, (list, tuple)):
                raise TypeError(f"Unsupported type {type(a)}: copy it with xp.asarray first")
        inputs = [_operand(a, device) for a in args]
        kwargs = {k: _operand(v, device) for k, v in kwargs.items()}
        if out is None:
            return _wrap(self._ufunc(*inputs, **kwargs), device)
        if not isinstance(out, SimulatedArray):
            raise TypeError(f"Unsupported type {type(out)} for out: it must be a device array")
        self._ufunc(*inputs, out=_operand(out, device), **kwargs)
        return out

    def at(self, a: SimulatedArray, indices: Any, b: Any = None) -> None:
        """In-place `a[indices] op= b`, every duplicate index applied (cupy's scatter ops)."""
        if self._at_types is None:
            raise NotImplementedError(f"`{self.__name__}.at` is not supported yet")
        device = _current_device()
        data = _operand(a, device)
        key = _index_key(a, indices, device)
        if isinstance(b, np.ndarray):
            raise TypeError(
                "a host array as the values of a device scatter: copy it explicitly with xp.asarray"
            )
        values = _operand(b, device)
        has_int_index = any(isinstance(k, np.ndarray) and k.dtype.kind in "iu" for k in key)
        if has_int_index and a.dtype not in self._at_types:
            # cupy casts the values to a's dtype, then needs a CUDA atomic for it.
            names = ", ".join(sorted(str(t) for t in self._at_types))
            raise TypeError(f"scatter_{self.__name__} only supports {names} as data type")
        self._ufunc.at(data, key, values)

    def __repr__(self) -> str:
        return f"<simulated cupy ufunc '{self.__name__}'>"


# -- the namespace -------------------------------------------------------------------------------


class SimulatedCupy:
    """The cupy-like array module of simulated GPUs (`ctx.xp` in their kernels).

    The subset of cupy's API that minigraph's kernels and examples use; see the module docstring
    for what it reproduces of cupy and how to add to it.
    """

    ndarray = SimulatedArray
    cuda = _Cuda()
    newaxis = None

    # dtypes: cupy re-exports numpy's
    dtype = np.dtype
    iinfo = np.iinfo
    finfo = np.finfo
    bool_ = np.bool_
    int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
    uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
    float16, float32, float64 = np.float16, np.float32, np.float64
    complex64, complex128 = np.complex64, np.complex128

    # host <-> device: the only ways host data reaches the device
    @staticmethod
    def asarray(a: Any, dtype: Any = None, order: Any = None) -> SimulatedArray:
        """`a` on the current device: a device array of it is returned as is, another device's
        is copied, host data is copied (a host-to-device transfer)."""
        device = _current_device()
        if isinstance(a, SimulatedArray):
            if a._device == device:
                return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
            # A peer copy, as cupy makes one under the destination device.
            copied = SimulatedArray._new(np.array(a._data, copy=True), device)
            return copied if dtype is None else copied.astype(dtype, copy=False)
        return SimulatedCupy.array(a, dtype=dtype, order=order)

    @staticmethod
    def array(obj: Any, dtype: Any = None, copy: bool = True, order: Any = None) -> SimulatedArray:
        """A new device array from host data (or a copy of a device array)."""
        device = _current_device()
        if isinstance(obj, SimulatedArray):
            return SimulatedCupy.asarray(obj.copy() if copy else obj, dtype=dtype)
        if isinstance(obj, (list, tuple)) and _holds_device_arrays(obj):
            # cupy joins a list of device arrays on the device.
            host = np.array(_operand(obj, device), dtype=dtype, copy=True)
        else:
            host = np.array(obj, dtype=dtype, order=order or "K", copy=True)
        return SimulatedArray._new(host.astype(_check_dtype(host.dtype), copy=False), device)

    @staticmethod
    def asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
        """A host copy of a device array (host data is returned as `np.asarray` gives it)."""
        if isinstance(a, SimulatedArray):
            return a.get(order=order, out=out)
        return np.asarray(a, order=order)

    # creation, on the current device
    @staticmethod
    def empty(shape: Any, dtype: Any = float, order: str = "C") -> SimulatedArray:
        """Uninitialised memory: filled with a non-zero pattern, so code that reads what it did
        not write shows up (numpy's fresh pages are usually zeros)."""
        return _wrap(_garbage(shape, _check_dtype(dtype), order), _current_device())

    @staticmethod
    def empty_like(a: SimulatedArray, dtype: Any = None) -> SimulatedArray:
        dtype = a.dtype if dtype is None else _check_dtype(dtype)
        return _wrap(_garbage(a.shape, dtype, "C"), _current_device())

    @staticmethod
    def zeros(shape: Any, dtype: Any = float, order: str = "C") -> SimulatedArray:
        return _wrap(np.zeros(shape, _check_dtype(dtype), order), _current_device())

    @staticmethod
    def ones(shape: Any, dtype: Any = float, order: str = "C") -> SimulatedArray:
        return _wrap(np.ones(shape, _check_dtype(dtype), order), _current_device())

    @staticmethod
    def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C") -> SimulatedArray:
        device = _current_device()
        if isinstance(fill_value, SimulatedArray):
            fill_value = _operand(fill_value, device)
        elif isinstance(fill_value, np.ndarray):
            _operand(fill_value, device)  # refused
        data = np.full(shape, fill_value, None if dtype is None else _check_dtype(dtype), order)
        return _wrap(data, device)

    arange = _same_as_numpy(np.arange)
    zeros_like = _same_as_numpy(np.zeros_like)
    ones_like = _same_as_numpy(np.ones_like)
    full_like = _same_as_numpy(np.full_like)

    # indexing, with cupy's wrapping of out-of-range indices
    @staticmethod
    def take(a: SimulatedArray, indices: Any, axis: Any = None, out: Any = None) -> Any:
        """cupy.take: out-of-range indices wrap around (numpy's default raises)."""
        device = _current_device()
        data = _operand(a, device)
        if isinstance(indices, np.ndarray) or isinstance(indices, list):
            raise TypeError(
                "a host array as the indices of a device take: cupy copies it to the device on "
                "every call; copy it once, explicitly, with xp.asarray"
            )
        idx = _operand(indices, device)
        if axis is None:
            size, out_shape = data.size, np.shape(idx)
        else:
            axis = operator.index(axis) % max(data.ndim, 1)
            size = data.shape[axis]
            out_shape = data.shape[:axis] + np.shape(idx) + data.shape[axis + 1 :]
        if data.size == 0 and math.prod(out_shape) != 0:
            raise IndexError("cannot do a non-empty take from an empty axes.")  # cupy's
        if size:
            # Wrapped here: numpy's mode="wrap" steps by `size` in a loop (slow for huge values).
            idx = _wrap_indices(np.asarray(idx), size)
        result = np.take(data, idx, axis=axis)
        if out is None:
            return _wrap(result, device)
        _operand(out, device)[...] = result
        return out

    @staticmethod
    def copyto(dst: SimulatedArray, src: Any, casting: str = "same_kind", where: Any = None):
        device = _current_device()
        target = _operand(dst, device)
        if where is None:
            np.copyto(target, _operand(src, device), casting=casting)
        else:
            np.copyto(target, _operand(src, device), casting=casting, where=_operand(where, device))

    where = _same_as_numpy(np.where)
    nonzero = _same_as_numpy(np.nonzero)
    flatnonzero = _same_as_numpy(np.flatnonzero)
    argwhere = _same_as_numpy(np.argwhere)
    unravel_index = _same_as_numpy(np.unravel_index)

    # reductions: 0-d device arrays, not scalars
    any = _same_as_numpy(np.any)
    all = _same_as_numpy(np.all)
    max = amax = _same_as_numpy(np.max)
    min = amin = _same_as_numpy(np.min)
    argmax = _same_as_numpy(np.argmax)
    argmin = _same_as_numpy(np.argmin)
    sum = _same_as_numpy(np.sum)
    prod = _same_as_numpy(np.prod)
    cumsum = _same_as_numpy(np.cumsum)
    cumprod = _same_as_numpy(np.cumprod)
    count_nonzero = _same_as_numpy(np.count_nonzero)
    bincount = _same_as_numpy(np.bincount)

    # shapes and joins
    reshape = _same_as_numpy(np.reshape)
    ravel = _same_as_numpy(np.ravel)
    transpose = _same_as_numpy(np.transpose)
    expand_dims = _same_as_numpy(np.expand_dims)
    squeeze = _same_as_numpy(np.squeeze)
    broadcast_to = _same_as_numpy(np.broadcast_to)
    concatenate = _same_as_numpy(np.concatenate)
    stack = _same_as_numpy(np.stack)
    repeat = _same_as_numpy(np.repeat)
    ascontiguousarray = _same_as_numpy(np.ascontiguousarray)

    # sorting and searching: cupy's sorts are always stable and take no other kind
    @staticmethod
    def sort(a: SimulatedArray, axis: int | None = -1, kind: str | None = None) -> SimulatedArray:
        return _stable_sort(np.sort, a, axis, kind)

    @staticmethod
    def argsort(
        a: SimulatedArray, axis: int | None = -1, kind: str | None = None
    ) -> SimulatedArray:
        return _stable_sort(np.argsort, a, axis, kind)

    searchsorted = _same_as_numpy(np.searchsorted)

    # elementwise ufuncs (operators use these)
    add = _Ufunc(np.add, _ATOMIC_ADD_TYPES)
    subtract = _Ufunc(np.subtract)
    multiply = _Ufunc(np.multiply)
    true_divide = divide = _Ufunc(np.true_divide)
    floor_divide = _Ufunc(np.floor_divide)
    remainder = mod = _Ufunc(np.remainder)
    power = _Ufunc(np.power)
    negative = _Ufunc(np.negative)
    absolute = abs = _Ufunc(np.absolute)
    maximum = _Ufunc(np.maximum, _ATOMIC_MINMAX_TYPES)
    minimum = _Ufunc(np.minimum, _ATOMIC_MINMAX_TYPES)
    bitwise_and = _Ufunc(np.bitwise_and)
    bitwise_or = _Ufunc(np.bitwise_or)
    bitwise_xor = _Ufunc(np.bitwise_xor)
    invert = _Ufunc(np.invert)
    left_shift = _Ufunc(np.left_shift)
    right_shift = _Ufunc(np.right_shift)
    less = _Ufunc(np.less)
    less_equal = _Ufunc(np.less_equal)
    equal = _Ufunc(np.equal)
    not_equal = _Ufunc(np.not_equal)
    greater = _Ufunc(np.greater)
    greater_equal = _Ufunc(np.greater_equal)
    logical_and = _Ufunc(np.logical_and)
    logical_or = _Ufunc(np.logical_or)
    logical_not = _Ufunc(np.logical_not)
    fmod = _Ufunc(np.fmod)
    floor = _Ufunc(np.floor)
    ceil = _Ufunc(np.ceil)
    trunc = _Ufunc(np.trunc)
    rint = _Ufunc(np.rint)
    sign = _Ufunc(np.sign)
    sqrt = _Ufunc(np.sqrt)
    exp = _Ufunc(np.exp)
    log = _Ufunc(np.log)
    log1p = _Ufunc(np.log1p)
    tanh = _Ufunc(np.tanh)
    square = _Ufunc(np.square)
    reciprocal = _Ufunc(np.reciprocal)
    clip = _same_as_numpy(np.clip)
    conjugate = conj = _Ufunc(np.conjugate)
    isnan = _Ufunc(np.isnan)
    isinf = _Ufunc(np.isinf)
    isfinite = _Ufunc(np.isfinite)
    # reductions and nn (ops/reduction.py, ops/nn.py)
    fmax = _Ufunc(np.fmax)
    fmin = _Ufunc(np.fmin)
    matmul = _Ufunc(np.matmul)
    take_along_axis = _same_as_numpy(np.take_along_axis)

    def __repr__(self) -> str:
        return "<simulated cupy (minigraph.testing): numpy behind cupy's array API>"


#: The namespace simulated GPUs use as their `xp`, as the `cupy` module is for real ones.
simulated_cupy = SimulatedCupy()


# -- devices -------------------------------------------------------------------------------------


class SimulatedGpuDevice(CupyGpuDevice):
    """A GPU stand-in: the real CupyGpuDevice driven by `simulated_cupy`, counting its copies.

    `copies_in`/`bytes_in` count what the runtime copies onto it (from the host or another GPU),
    `copies_out`/`bytes_out` what it copies off it; copies kernels make themselves (`xp.asarray`
    inside a kernel) are not counted.
    """

    simulated = True

    def __init__(self, index: int):
        super().__init__(
            index, simulated_cupy, "simulated GPU (a test double: cupy-like arrays over numpy)"
        )
        self._lock = threading.Lock()
        self.reset_counters()

    def reset_counters(self) -> None:
        with self._lock:
            self.copies_in = 0
            self.copies_out = 0
            self.bytes_in = 0
            self.bytes_out = 0

    def _count(self, direction: str, nbytes: int) -> None:
        with self._lock:
            if direction == "in":
                self.copies_in += 1
                self.bytes_in += nbytes
            else:
                self.copies_out += 1
                self.bytes_out += nbytes

    def from_host(self, array: np.ndarray) -> SimulatedArray:
        result = super().from_host(array)
        self._count("in", array.nbytes)
        return result

    def to_host(self, array: Any) -> np.ndarray:
        result = super().to_host(array)
        self._count("out", result.nbytes)
        return result

    def copy_from(self, array: Any, source: Device) -> Any:
        result = super().copy_from(array, source)
        if isinstance(source, SimulatedGpuDevice) and source is not self:
            # A peer copy: CupyGpuDevice copies device to device, not through the host.
            source._count("out", array.nbytes)
            self._count("in", array.nbytes)
        return result


#: The most simulated GPUs `simulated_gpus` makes (a machine has a few; a typo has millions).
MAX_SIMULATED_GPUS = 64


@contextlib.contextmanager
def simulated_gpus(count: int = 1) -> Iterator[list[Device]]:
    """Within the block, new Sessions see CPU:0 plus `count` simulated GPUs.

    Yields the device list `[cpu, gpu0, gpu1, ...]`.

    Raises:
        InvalidArgumentError: `count` is not an int from 0 to MAX_SIMULATED_GPUS.
    """
    if (
        isinstance(count, (bool, np.bool_))
        or not isinstance(count, (int, np.integer))
        or not 0 <= count <= MAX_SIMULATED_GPUS
    ):
        raise InvalidArgumentError(
            f"simulated_gpus(count): count is an int from 0 to {MAX_SIMULATED_GPUS}; got "
            f"{type(count).__name__} {count!r}"
        )
    devices: list[Device] = [CpuDevice(0)] + [SimulatedGpuDevice(i) for i in range(count)]
    with use_devices(devices) as active:
        yield active


@contextlib.contextmanager
def pinned_devices(devices: Sequence[Device]) -> Iterator[list[Device]]:
    """Within the block, new Sessions see exactly `devices` (e.g. `[CpuDevice(0)]` for a test
    that assumes CPU placement on a machine that has GPUs). Blocks nest. Yields the list.

    Raises:
        InvalidArgumentError: `devices` is not a list of Devices with a host (CPU) among them.
    """
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence):
        raise InvalidArgumentError(
            f"pinned_devices takes a list of Devices; got {type(devices).__name__}"
        )
    devices = list(devices)
    if not all(isinstance(d, Device) for d in devices) or not any(d.is_host for d in devices):
        raise InvalidArgumentError(
            f"pinned_devices takes a list of Devices with a host (CPU) among them; got {devices!r}"
        )
    with use_devices(devices) as active:
        yield active
