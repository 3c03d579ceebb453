"""Typed errors, mirroring TensorFlow's `tf.errors` classes.

Every error carries the node name and op type it concerns when there is one, so that callers can
catch by class (`except NotFoundError`) and still report where the problem was. The classes also
derive from the closest Python built-in (`InvalidArgumentError` is a `ValueError`, ...), so code
that knows nothing of minigraph catches them naturally.
"""

from __future__ import annotations

__all__ = [
    "OpError",
    "InvalidArgumentError",
    "NotFoundError",
    "AlreadyExistsError",
    "UnimplementedError",
    "FailedPreconditionError",
    "OutOfRangeError",
    "ResourceExhaustedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "describe_exception",
]


class OpError(Exception):
    """Base class of minigraph's errors.

    Attributes:
        message: the text, without the node context that `str()` may add.
        node_name: the node the error concerns, or None.
        op_type: that node's op type, or None.
    """

    def __init__(self, message: str, node_name: str | None = None, op_type: str | None = None):
        super().__init__(message)
        self.message = message
        self.node_name = node_name
        self.op_type = op_type

    def __reduce__(self):
        return (type(self), (self.message, self.node_name, self.op_type))


class InvalidArgumentError(OpError, ValueError):
    """An argument (dtype, shape, attr or data value) is not valid for the op."""


class NotFoundError(OpError, LookupError):
    """Something named (an op type, a node, a kernel, a device) does not exist."""


class AlreadyExistsError(OpError):
    """Something registered twice (an op type, a kernel)."""


class UnimplementedError(OpError, NotImplementedError):
    """The operation is valid but not implemented here (e.g. no kernel for these dtypes)."""


class FailedPreconditionError(OpError, RuntimeError):
    """The system is not in a state the operation needs (e.g. a closed session)."""


class OutOfRangeError(OpError, IndexError):
    """An operation went past a valid range."""


class ResourceExhaustedError(OpError, MemoryError):
    """A resource (usually memory) ran out."""


class InternalError(OpError, RuntimeError):
    """An invariant of minigraph itself was broken; please report it."""


class UnavailableError(OpError, RuntimeError):
    """A device or service is not available."""


class DataLossError(OpError, OSError):
    """Stored data is corrupt or truncated (a checkpoint file that fails its checks)."""


def describe_exception(e: BaseException) -> str:
    """The message of a minigraph error, else `TypeName: text`, for any exception: even one
    whose `__str__` raises or returns a non-str (user code can raise anything; describing it
    must not raise a second, untyped error)."""
    name = type(e).__name__
    if isinstance(e, OpError):
        text = e.message
        if type(text) is str:
            return text
    try:
        text = str(e)
    except Exception as inner:  # noqa: BLE001 - any failure of user code is described instead
        text = f"<str() of the exception failed: {type(inner).__name__}>"
    return f"{name}: {text}"
