"""Device names, parsed TF-style into one immutable `DeviceSpec`.

Accepted forms, full or partial: `/job:localhost/replica:0/task:0/device:GPU:1`,
`/device:GPU:1`, `/gpu:1`, `GPU:1`, `gpu`, `/device:CPU:*`. Unset fields (None) match any
device; `*` as the index means any index.
"""

from __future__ import annotations

import re
from typing import Any

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
        set_ = object.__setattr__
        set_(self, "job", job)
        set_(self, "replica", replica)
        set_(self, "task", task)
        set_(self, "device_type", device_type.upper() if device_type else None)
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

    def is_compatible_with(self, other: DeviceSpec) -> bool:
        """True when every field set in both agrees (None matches anything)."""
        for field in ("job", "replica", "task", "device_type", "device_index"):
            a, b = getattr(self, field), getattr(other, field)
            if a is not None and b is not None and a != b:
                return False
        return True

    def merge_from(self, other: DeviceSpec) -> DeviceSpec:
        """This spec with the fields that `other` sets overriding it (TF's nested tf.device)."""
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


def as_device_spec(value: str | DeviceSpec | None) -> DeviceSpec | None:
    """DeviceSpec from a string, a DeviceSpec, or None/'' (no request)."""
    if value is None or isinstance(value, DeviceSpec):
        return value
    if not isinstance(value, str):
        raise InvalidArgumentError(f"a device must be a string or DeviceSpec; got {value!r}")
    if not value.strip():
        return None
    return DeviceSpec.from_string(value)
