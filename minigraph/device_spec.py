"""Device names, parsed TF-style into one immutable `DeviceSpec`.

Accepted forms, full or partial: `/job:localhost/replica:0/task:0/device:GPU:1`,
`/device:GPU:1`, `/gpu:1`, `GPU:1`, `gpu`, `/device:CPU:*`. Unset fields (None) match any
device; `*` as the index means any index.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from minigraph.errors import InvalidArgumentError

__all__ = ["DeviceSpec", "LOCAL_JOB"]

LOCAL_JOB = "localhost"
# TF's DeviceNameUtils grammar for device types and job names. Used with fullmatch: `$` would
# also match before a trailing newline.
_TYPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _is_number(text: str) -> bool:
    # ASCII only: str.isdigit() accepts characters such as '²' that int() rejects.
    return text.isascii() and text.isdigit()


class DeviceSpec:
    """A full or partial device name. Immutable; parse with `DeviceSpec.from_string`."""

    __slots__ = ("job", "replica", "task", "device_type", "device_index", "_hash")

    def __init__(
        self,
        job: str | None = None,
        replica: int | None = None,
        task: int | None = None,
        device_type: str | None = None,
        device_index: int | None = None,
    ):
        # Checked here, once: every DeviceSpec is then canonical (a job or device type that
        # parses back, numbers that are plain ints >= 0), so placement and to_string trust it.
        # Fast path: names already seen valid, plain ints; the rest is checked in full.
        if job is not None and (job.__class__ is not str or job not in _NAMES):
            job = _name_field("job", job)
        if replica is not None and (replica.__class__ is not int or replica < 0):
            replica = _index_field("replica", replica)
        if task is not None and (task.__class__ is not int or task < 0):
            task = _index_field("task", task)
        if device_type is not None:
            if device_type.__class__ is not str or device_type not in _NAMES:
                device_type = _name_field("device_type", device_type)
            device_type = device_type.upper() or None  # '' is no type, as None
        if device_index is not None and (device_index.__class__ is not int or device_index < 0):
            device_index = _index_field("device_index", device_index)
        set_ = object.__setattr__
        set_(self, "job", job)
        set_(self, "replica", replica)
        set_(self, "task", task)
        set_(self, "device_type", device_type)
        set_(self, "device_index", device_index)
        set_(self, "_hash", hash((job, replica, task, self.device_type, device_index)))

    def __setattr__(self, key, value):
        raise AttributeError("DeviceSpec is immutable")

    @classmethod
    def from_string(cls, spec: str) -> DeviceSpec:
        """Parses a TF device string.

        Raises:
            InvalidArgumentError: the string is not a device name.
        """
        if not isinstance(spec, str):
            raise InvalidArgumentError(
                f"DeviceSpec.from_string: a device name is a string such as '/device:GPU:0'; "
                f"got {type(spec).__name__} {spec!r}"
            )
        fields: dict[str, Any] = {}
        text = spec.strip()

        def bad(why: str) -> InvalidArgumentError:
            return InvalidArgumentError(
                f"invalid device name {spec!r}: {why}; expected e.g. "
                "'/job:localhost/replica:0/task:0/device:GPU:0', '/device:CPU:0', '/gpu:1', "
                "'GPU:1' or 'gpu'"
            )

        for part in (p for p in text.split("/") if p):
            key, _, value = part.partition(":")
            low = key.lower()
            if low == "job":
                if not value:
                    raise bad("empty job")
                if not _TYPE_RE.fullmatch(value):
                    raise bad(f"job name {value!r} must be a letter then letters, digits or '_'")
                fields["job"] = value
            elif low in ("replica", "task"):
                if not _is_number(value):
                    raise bad(f"{low} must be a number")
                fields[low] = int(value)
            else:
                if low == "device":
                    key, _, value = value.partition(":")
                if not _TYPE_RE.fullmatch(key):
                    raise bad(f"unrecognised part {part!r}")
                if "device_type" in fields:
                    raise bad("more than one device type")
                fields["device_type"] = key
                if value in ("", "*"):
                    fields["device_index"] = None
                elif _is_number(value):
                    fields["device_index"] = int(value)
                else:
                    raise bad(f"device index {value!r} is not a number or '*'")
        return cls(**fields)

    def to_string(self) -> str:
        """The name with only the fields that are set: `/job:localhost/device:GPU:1`."""
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            parts.append(f"/device:{self.device_type}:{index}")
        return "".join(parts)

    @property
    def is_partial(self) -> bool:
        """True when some field is unset (matches several devices)."""
        return None in (self.job, self.replica, self.task, self.device_type, self.device_index)

    def is_compatible_with(self, other: DeviceSpec | str) -> bool:
        """True when every field set in both agrees (None matches anything). `other` may be a
        device string."""
        other = _other_spec(other, "is_compatible_with")
        for field in ("job", "replica", "task", "device_type", "device_index"):
            a, b = getattr(self, field), getattr(other, field)
            if a is not None and b is not None and a != b:
                return False
        return True

    def merge_from(self, other: DeviceSpec | str) -> DeviceSpec:
        """This spec with the fields that `other` sets overriding it (TF's nested tf.device).
        `other` may be a device string."""
        other = _other_spec(other, "merge_from")
        values = {}
        for field in ("job", "replica", "task", "device_type", "device_index"):
            theirs = getattr(other, field)
            values[field] = theirs if theirs is not None else getattr(self, field)
        if other.device_type is not None and other.device_index is None:
            values["device_index"] = None
        return DeviceSpec(**values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeviceSpec):
            return self._hash == other._hash and self.to_string() == other.to_string()
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"DeviceSpec({self.to_string()!r})"


def _field_error(name: str, value: Any, expected: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"DeviceSpec: {name} must be None or {expected}; got {type(value).__name__} {value!r}"
    )


# Job names and device types seen valid (a bounded memo: DeviceSpecs are made per placed node).
_NAMES = {"localhost", "worker", "CPU", "GPU", "cpu", "gpu"}
_NAMES_MAX = 1024


def _name_field(name: str, value: Any) -> str:
    """A job name or device type: a letter then letters, digits or '_' ('' for no type)."""
    if not isinstance(value, str) or not (
        _TYPE_RE.fullmatch(value) or (name == "device_type" and value == "")
    ):
        raise _field_error(name, value, "a letter then letters, digits or '_'")
    value = str(value)
    if value and len(_NAMES) < _NAMES_MAX:
        _NAMES.add(value)
    return value


def _index_field(name: str, value: Any) -> int:
    """A replica, task or device index: an int >= 0 (numpy ints become ints)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise _field_error(name, value, "an int >= 0")
    return int(value)


def _other_spec(other: Any, method: str) -> DeviceSpec:
    if isinstance(other, DeviceSpec):
        return other
    if isinstance(other, str):
        return DeviceSpec.from_string(other)
    raise InvalidArgumentError(
        f"DeviceSpec.{method}: expected a DeviceSpec or a device string; got "
        f"{type(other).__name__} {other!r}"
    )


def as_device_spec(value: str | DeviceSpec | None) -> DeviceSpec | None:
    """DeviceSpec from a string, a DeviceSpec, or None/'' (no request)."""
    if value is None or isinstance(value, DeviceSpec):
        return value
    if not isinstance(value, str):
        raise InvalidArgumentError(f"a device must be a string or DeviceSpec; got {value!r}")
    if not value.strip():
        return None
    return DeviceSpec.from_string(value)
