"""Partially known tensor shapes, as TensorFlow's `TensorShape`.

A shape is either of unknown rank (`dims is None`) or a tuple of dims, each an int >= 0 or None
(unknown). Shapes are immutable values, hashable and comparable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, Union

import numpy as np

from minigraph.errors import InvalidArgumentError

__all__ = [
    "TensorShape", "as_shape", "unknown_shape", "scalar", "MAX_RANK", "MAX_DIM", "check_rank",
    "check_size",
]  # fmt: skip

ShapeLike = Union["TensorShape", Iterable[Any], None]


def _numpy_max_rank() -> int:
    # numpy has no public constant for NPY_MAXDIMS (64 in numpy 2, 32 before); probe it once.
    for rank in (64, 32):
        try:
            np.empty((1,) * rank, np.bool_)
            return rank
        except ValueError:
            continue
    return 32


#: The most dims a tensor may have: numpy's limit, which every kernel's arrays share. Shapes
#: with more are refused wherever they would arise (shape inference, Placeholder shapes,
#: kernels computing an output rank from fed shapes), since numpy itself may crash on them.
MAX_RANK = _numpy_max_rank()
_MAX_RANK = MAX_RANK  # read on the hot path of TensorShape()


def check_rank(rank: int, what: str = "a tensor") -> None:
    """Raises InvalidArgumentError when `rank` is above `MAX_RANK`. Kernels whose output rank
    depends on their inputs' ranks call it (with ctx.invalid_argument's context) before
    handing such shapes to numpy."""
    if type(rank) is not int:
        rank = _rank_arg(rank)
    if rank > MAX_RANK:
        raise InvalidArgumentError(_rank_message(rank, what))


#: The largest dim: TF's dims are int64 (GraphDef writes them so), and numpy's sizes are intp.
MAX_DIM = (1 << 63) - 1


def check_size(shape: TensorShape, what: str = "Shape") -> None:
    """Raises InvalidArgumentError when the known dims of `shape` multiply to more than
    `MAX_DIM` elements, as TF's shape validation does: a dim of 0 makes any shape valid, and
    unknown dims count for nothing. Called where shapes enter from users (shape attrs); the
    inner layers' shapes are products of checked ones or of real arrays."""
    if type(shape) is not TensorShape:
        shape = as_shape(shape)
    known = [d for d in shape.dims or () if d is not None]
    if 0 not in known and math.prod(known) > MAX_DIM:
        raise InvalidArgumentError(f"{what} {shape} is too large (more than 2**63 - 1 entries)")


def _rank_message(rank: int, what: str) -> str:
    return (
        f"{what} would have rank {rank}, above the limit of {MAX_RANK} dimensions (numpy's maximum)"
    )


class TensorShape:
    """A shape with partial knowledge: unknown rank, or known rank with unknown dims (None)."""

    __slots__ = ("_dims",)

    def __init__(self, dims: ShapeLike):
        if dims is None:
            self._dims = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        else:
            kind = type(dims)
            if kind is list:
                dims = tuple(dims)
            elif kind is not tuple:
                dims = _dims_tuple(dims)
            if len(dims) > _MAX_RANK:
                raise InvalidArgumentError(_rank_message(len(dims), "a shape"))
            for d in dims:
                # Fast path: plain ints in [0, MAX_DIM] and None need no conversion.
                if d is not None and (type(d) is not int or d < 0 or d > MAX_DIM):
                    dims = tuple(_as_dim(d) for d in dims)
                    break
            self._dims = dims

    @classmethod
    def _from_tuple(cls, dims: tuple[int | None, ...] | None) -> TensorShape:
        # Trusted constructor for the inner layers: `dims` is canonical, but may come from
        # combining shapes (concatenate, with_rank), so the rank limit is checked here too.
        if dims is not None and len(dims) > _MAX_RANK:
            raise InvalidArgumentError(_rank_message(len(dims), "a shape"))
        shape = object.__new__(cls)
        shape._dims = dims
        return shape

    # -- queries -----------------------------------------------------------------------------

    @property
    def dims(self) -> tuple[int | None, ...] | None:
        """The dims as a tuple (None for unknown dims), or None when the rank is unknown."""
        return self._dims

    @property
    def rank(self) -> int | None:
        """The number of dims, or None when the rank is unknown."""
        return None if self._dims is None else len(self._dims)

    ndims = rank

    def is_fully_defined(self) -> bool:
        """True when the rank and every dim are known."""
        return self._dims is not None and None not in self._dims

    def num_elements(self) -> int | None:
        """The number of elements, or None when not fully defined."""
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:
            n *= d
        return n

    def as_list(self) -> list[int | None]:
        """The dims as a list.

        Raises:
            InvalidArgumentError: the rank is unknown (as TF's ValueError).
        """
        if self._dims is None:
            raise InvalidArgumentError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def __len__(self) -> int:
        if self._dims is None:
            raise InvalidArgumentError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self) -> Iterator[int | None]:
        if self._dims is None:
            raise InvalidArgumentError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key: int | slice) -> Any:
        if self._dims is None:
            if isinstance(key, slice):
                return unknown_shape()
            return None
        if isinstance(key, slice):
            return TensorShape._from_tuple(self._dims[key])
        return self._dims[key]

    # -- combination -------------------------------------------------------------------------

    def is_compatible_with(self, other: ShapeLike) -> bool:
        """True when some fully defined shape is compatible with both."""
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def merge_with(self, other: ShapeLike) -> TensorShape:
        """The most specific shape compatible with both.

        Raises:
            InvalidArgumentError: the shapes are incompatible.
        """
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if len(self._dims) != len(other._dims):
            raise InvalidArgumentError(
                f"Shapes {self} and {other} are not compatible: ranks {len(self._dims)} and "
                f"{len(other._dims)} differ"
            )
        merged = []
        for i, (a, b) in enumerate(zip(self._dims, other._dims)):
            if a is not None and b is not None and a != b:
                raise InvalidArgumentError(
                    f"Shapes {self} and {other} are not compatible: dimension {i} is {a} vs {b}"
                )
            merged.append(a if a is not None else b)
        return TensorShape._from_tuple(tuple(merged))

    def concatenate(self, other: ShapeLike) -> TensorShape:
        """This shape followed by `other` (unknown if either rank is unknown)."""
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return unknown_shape()
        return TensorShape._from_tuple(self._dims + other._dims)

    def with_rank(self, rank: int) -> TensorShape:
        """This shape with its rank known to be `rank`.

        Raises:
            InvalidArgumentError: the rank is known and differs.
        """
        if type(rank) is not int or rank < 0:
            rank = _rank_arg(rank)
        if self._dims is None:
            check_rank(rank, "a shape")
            return TensorShape._from_tuple((None,) * rank)
        if len(self._dims) != rank:
            raise InvalidArgumentError(f"Shape must be rank {rank} but is rank {len(self._dims)}")
        return self

    def with_rank_at_least(self, rank: int) -> TensorShape:
        """This shape, checked to have at least `rank` dims (TF's message on failure).

        Raises:
            InvalidArgumentError: the rank is known and smaller.
        """
        if type(rank) is not int or rank < 0:
            rank = _rank_arg(rank)
        if self._dims is not None and len(self._dims) < rank:
            raise InvalidArgumentError(
                f"Shape must be at least rank {rank} but is rank {len(self._dims)}"
            )
        return self

    def with_rank_at_most(self, rank: int) -> TensorShape:
        """This shape, checked to have at most `rank` dims."""
        if type(rank) is not int or rank < 0:
            rank = _rank_arg(rank)
        if self._dims is not None and len(self._dims) > rank:
            raise InvalidArgumentError(
                f"Shape must be at most rank {rank} but is rank {len(self._dims)}"
            )
        return self

    # -- value protocol ------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorShape):
            return self._dims == other._dims
        if isinstance(other, (list, tuple)):
            return self._dims is not None and self._dims == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._dims)

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        return "[" + ",".join("?" if d is None else str(d) for d in self._dims) + "]"

    def __repr__(self) -> str:
        if self._dims is None:
            return "TensorShape(None)"
        return f"TensorShape({list(self._dims)})"

    def __reduce__(self):
        return (TensorShape, (self._dims,))


def _dims_tuple(dims: Any) -> tuple[Any, ...]:
    """The dims of an iterable other than a list or tuple (a numpy shape, a generator)."""
    if not isinstance(dims, (str, bytes)):
        try:
            return tuple(dims)
        except TypeError:
            pass
    raise InvalidArgumentError(
        f"a shape is a list of dims (ints >= 0 or None) or None; got {dims!r}"
    )


def _as_dim(d: Any) -> int | None:
    if d is None:
        return None
    if isinstance(d, (bool, np.bool_)) or not hasattr(d, "__index__"):
        raise InvalidArgumentError(f"a dimension must be an int >= 0 or None; got {d!r}")
    try:
        value = d.__index__()
    except TypeError:  # a numpy array of several elements, or a type such as `int`
        raise InvalidArgumentError(
            f"a dimension must be an int >= 0 or None; got {type(d).__name__} {d!r}"
        ) from None
    if value < 0:
        # -1 is TF's spelling of "unknown" in shape attrs.
        if value == -1:
            return None
        raise InvalidArgumentError(f"a dimension must be an int >= 0 or None; got {value}")
    if value > MAX_DIM:
        raise InvalidArgumentError(
            f"a dimension must be at most {MAX_DIM} (2**63 - 1, TF's int64 dims); got {value}"
        )
    return value


_UNKNOWN = TensorShape._from_tuple(None)
_SCALAR = TensorShape._from_tuple(())


def unknown_shape(rank: int | None = None) -> TensorShape:
    """A shape of unknown rank, or of known rank with all dims unknown."""
    if rank is None:
        return _UNKNOWN
    rank = _rank_arg(rank)
    check_rank(rank, "a shape")
    return TensorShape._from_tuple((None,) * rank)


def _rank_arg(rank: Any) -> int:
    """A rank argument: an int >= 0 (numpy ints become ints)."""
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) or rank < 0:
        raise InvalidArgumentError(f"a rank is an int >= 0; got {type(rank).__name__} {rank!r}")
    return int(rank)


def scalar() -> TensorShape:
    return _SCALAR


def as_shape(value: ShapeLike) -> TensorShape:
    """A TensorShape from a TensorShape, a sequence of dims, or None (unknown rank)."""
    if isinstance(value, TensorShape):
        return value
    return TensorShape(value)
