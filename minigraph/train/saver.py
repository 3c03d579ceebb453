"""`Saver`: checkpoints of a session's variables, as TF 1.x's `tf.compat.v1.train.Saver`.

    saver = Saver()                       # every variable of the session's graph
    path = saver.save(sess, "ckpt/model")  # atomically: the old file stays readable until then
    saver.restore(sess2, path)            # names, dtypes and shapes checked first

The checkpoint file (minigraph's own format, not TF's) is a ZIP archive, stored uncompressed:

- `index.json`: `{"format": "minigraph-checkpoint", "version": 1, "variables": [{"name",
  "dtype", "shape", "file", "nbytes"}, ...]}`, the variables in the Saver's order;
- one entry per variable (`file`, `"0.bin"`, ...): its value's bytes in C order,
  little-endian; a string variable's are its elements' lengths (uint64, little-endian)
  followed by their bytes.

Every entry carries the ZIP format's CRC-32, checked when read: a corrupt or truncated file is
a DataLossError, never a wrong value. Reading never executes code (no pickle).

Saving writes the archive to a temporary file in the same directory, flushes it to disk
(fsync), then renames it over the target (and syncs the directory): a crash at any point
leaves the previous checkpoint whole and readable (at worst a `.<name>.tmp*` file stays
behind). Values come from running the variables' reads (`Variable.value()`), so saving works
wherever the variables live, remote tasks included; restoring runs one AssignVariableOp per
variable, fed through a Placeholder: the Saver adds those nodes to the graph (`save/...`),
once per variable.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.errors import (
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from minigraph.graph import Graph, Operation, Output
from minigraph.registry import get_op_def
from minigraph.scope import Scope
from minigraph.tensor_shape import TensorShape
from minigraph.variables import Variable, global_variables

__all__ = ["Saver", "load_checkpoint", "list_variables", "FORMAT", "VERSION"]

#: The `format` of a checkpoint's index.
FORMAT = "minigraph-checkpoint"
#: The index version this module writes and reads.
VERSION = 1
_INDEX = "index.json"
# An index larger than this is not one of ours (a variable's entry takes about 100 bytes).
_MAX_INDEX_BYTES = 64 << 20


class Saver:
    """Saves and restores variables. `Saver(var_list=None)`.

    Args:
        var_list: None (every variable of the session's graph, at each save or restore), a
            list of Variables (checkpoint names: their op names, `layer/w`), or a dict
            {checkpoint name: Variable}.

    Raises:
        InvalidArgumentError: var_list holds something else than Variables, two variables of
            one name, or variables of several graphs.
    """

    def __init__(self, var_list: Iterable[Variable] | Mapping[str, Variable] | None = None):
        self._lock = threading.Lock()
        self._restore_ops: dict[Variable, tuple[Output, Operation]] = {}
        self._named: list[tuple[str, Variable]] | None = None
        if var_list is not None:
            self._named = _named(var_list)

    # -- which variables -----------------------------------------------------------------------

    def _variables(self, sess: Any, what: str) -> list[tuple[str, Variable]]:
        graph = getattr(sess, "graph", None)
        if not hasattr(sess, "run"):
            raise InvalidArgumentError(f"Saver.{what} takes a Session; got {type(sess).__name__}")
        if self._named is not None:
            named = self._named
            if named and graph is not None and named[0][1].graph is not graph:
                raise InvalidArgumentError(
                    f"Saver.{what}: the variables belong to another graph than the session's"
                )
            return named
        if not isinstance(graph, Graph):
            raise FailedPreconditionError(
                f"Saver.{what}: the session has no graph yet (give it one, or a var_list)"
            )
        return _named(global_variables(graph))

    # -- save ------------------------------------------------------------------------------------

    def save(self, sess: Any, save_path: str | os.PathLike[str], global_step: Any = None) -> str:
        """Writes the variables' current values to `save_path` (with `-<global_step>` appended
        when given: an int, or a tensor or Variable whose value is one), atomically; returns
        the path written.

        Raises:
            FailedPreconditionError: a variable is not initialized (the message names it).
            NotFoundError: the directory does not exist.
            InvalidArgumentError: a bad path or global_step.
        """
        named = self._variables(sess, "save")
        path = _check_path(save_path, "Saver.save")
        if global_step is not None:
            path = f"{path}-{_step(sess, global_step)}"
        values = sess.run([v.value() for _, v in named]) if named else []
        entries = []
        for (name, var), value in zip(named, values):
            entries.append((name, var.dtype, np.asarray(value)))
        _write_atomically(path, entries)
        return path

    # -- restore ---------------------------------------------------------------------------------

    def restore(
        self, sess: Any, save_path: str | os.PathLike[str], *, allow_extra: bool = False
    ) -> None:
        """Assigns the values saved in `save_path` to the variables, after checking that the
        checkpoint has each one, of its dtype and of a shape its declared shape allows, and
        (unless `allow_extra`) nothing else. Nothing is assigned when a check fails.

        Raises:
            NotFoundError: no such file, or a variable the checkpoint lacks.
            InvalidArgumentError: a dtype or shape that does not match, or (without
                `allow_extra`) variables in the checkpoint that the Saver does not restore.
            DataLossError: the file is not a checkpoint, or is corrupt or truncated.
        """
        if not isinstance(allow_extra, bool):
            raise InvalidArgumentError("Saver.restore: allow_extra must be a bool")
        named = self._variables(sess, "restore")
        path = _check_path(save_path, "Saver.restore")
        saved = _read(path)
        wanted = {name for name, _ in named}
        for name, var in named:
            if name not in saved:
                raise NotFoundError(
                    f"Key {name} not found in checkpoint {path} (it holds {_names(saved)})"
                )
            value = saved[name]
            dtype = dtypes.as_dtype(value.dtype) if value.dtype != object else dtypes.string
            if dtype is not var.dtype:
                raise InvalidArgumentError(
                    f"Saver.restore: variable {name!r} is {var.dtype.name}, but checkpoint "
                    f"{path} holds a {dtype.name} value for it"
                )
            if not var.shape.is_compatible_with(value.shape):
                raise InvalidArgumentError(
                    f"Saver.restore: variable {name!r} has shape {var.shape}, but checkpoint "
                    f"{path} holds a value of shape {TensorShape(value.shape)} for it"
                )
        extra = [name for name in saved if name not in wanted]
        if extra and not allow_extra:
            raise InvalidArgumentError(
                f"Saver.restore: checkpoint {path} holds variables this Saver does not restore: "
                f"{_names(extra)} (restore(..., allow_extra=True) ignores them)"
            )
        if not named:
            return
        ops, feeds = [], {}
        for name, var in named:
            holder, assign = self._restore_op(var)
            ops.append(assign)
            feeds[holder] = saved[name]
        sess.run(ops, feeds)

    def _restore_op(self, var: Variable) -> tuple[Output, Operation]:
        """The Placeholder and AssignVariableOp restoring `var` (made once, in `save/`)."""
        with self._lock:
            found = self._restore_ops.get(var)
            if found is not None:
                return found
            graph = var.graph
            with graph.transaction():
                scope = Scope(graph).new_sub_scope("save")
                near = Scope(graph, scope.name_scope, None, None, (), var.op.colocation_group, "")
                holder = scope.create_op(
                    get_op_def("Placeholder"), [], {"dtype": var.dtype, "shape": var.shape},
                    "Placeholder",
                ).outputs[0]  # fmt: skip
                assign = near.create_op(
                    get_op_def("AssignVariableOp"), [var.handle, holder], {"dtype": var.dtype},
                    "Assign",
                )  # fmt: skip
            found = self._restore_ops[var] = (holder, assign)
            return found


def _named(var_list: Any) -> list[tuple[str, Variable]]:
    if isinstance(var_list, Mapping):
        pairs = list(var_list.items())
    elif isinstance(var_list, (str, bytes)) or not isinstance(var_list, Iterable):
        raise InvalidArgumentError(
            f"Saver: var_list is a list or dict of Variables; got {type(var_list).__name__}"
        )
    else:
        pairs = [(v.op.name if isinstance(v, Variable) else "?", v) for v in var_list]
    seen: dict[str, Variable] = {}
    graph = None
    for name, var in pairs:
        if not isinstance(var, Variable):
            raise InvalidArgumentError(
                f"Saver: var_list holds Variables; got {type(var).__name__} {var!r:.60}"
            )
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"Saver: a checkpoint name is a non-empty str; got {name!r}")
        if name in seen:
            raise InvalidArgumentError(f"Saver: two variables named {name!r} in var_list")
        if graph is None:
            graph = var.graph
        elif var.graph is not graph:
            raise InvalidArgumentError("Saver: the variables of var_list belong to several graphs")
        seen[name] = var
    return list(seen.items())


def _names(names: Iterable[str], limit: int = 10) -> str:
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}]"


def _check_path(path: Any, what: str) -> str:
    if isinstance(path, (bool, int)) or not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"{what}: a path is a str or os.PathLike; got {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text or "\0" in text:
        raise InvalidArgumentError(f"{what}: not a usable path: {path!r}")
    return text


def _step(sess: Any, global_step: Any) -> int:
    value = global_step
    if isinstance(value, (Output, Variable)) or hasattr(value, "operation"):
        value = sess.run(global_step)  # a tensor (or a builder's) holding the step
    array = np.asarray(value)
    if array.shape != () or array.dtype.kind not in "iu":
        raise InvalidArgumentError(
            f"Saver.save: global_step must be an integer scalar; got {array.dtype} of shape "
            f"{list(array.shape)}"
        )
    return int(array)


# -- the file format ---------------------------------------------------------------------------


def _payload(dtype: dtypes.DType, value: np.ndarray) -> bytes | memoryview:
    """An entry's bytes: the value in C order, little-endian; strings as lengths + bytes."""
    if dtype.is_string:
        flat = [v if isinstance(v, bytes) else bytes(v) for v in value.reshape(-1).tolist()]
        lengths = np.array([len(v) for v in flat], dtype="<u8")
        return lengths.tobytes() + b"".join(flat)
    array = np.ascontiguousarray(value)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and _BIG_ENDIAN):
        array = array.astype(array.dtype.newbyteorder("<"))
    return memoryview(array.reshape(-1).view(np.uint8))


_BIG_ENDIAN = np.little_endian is False


def _write_atomically(path: str, entries: Sequence[tuple[str, dtypes.DType, np.ndarray]]) -> None:
    import json  # noqa: PLC0415 - only for checkpoints
    import zipfile  # noqa: PLC0415

    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    if not os.path.isdir(directory):
        raise NotFoundError(f"Saver.save: no such directory for {path!r}: {directory!r}")
    if os.path.isdir(target):
        raise InvalidArgumentError(f"Saver.save: {path!r} is a directory")
    import tempfile  # noqa: PLC0415 - slow to import (shutil, random): on first save only

    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
                index = []
                for k, (name, dtype, value) in enumerate(entries):
                    data = _payload(dtype, value)
                    member = f"{k}.bin"
                    with zf.open(member, "w", force_zip64=True) as out:
                        out.write(data)
                    index.append({
                        "name": name, "dtype": dtype.name, "shape": list(value.shape),
                        "file": member, "nbytes": len(data) if isinstance(data, bytes)
                        else data.nbytes,
                    })  # fmt: skip
                header = {"format": FORMAT, "version": VERSION, "variables": index}
                zf.writestr(_INDEX, json.dumps(header, indent=1))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise FailedPreconditionError(
                f"Saver.save: cannot write {path!r}: {e.strerror or e}"
            ) from None
        raise
    _sync_directory(directory)


def _sync_directory(directory: str) -> None:
    """Makes the rename durable (POSIX: the directory's entry is flushed too)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not on this platform (Windows): the rename is what it offers
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _corrupt(path: str, why: str) -> DataLossError:
    return DataLossError(f"checkpoint {path!r} is corrupt or truncated: {why}")


def _read(path: str) -> dict[str, np.ndarray]:
    """{name: value} of checkpoint `path`, every entry checked (typed errors only)."""
    import json  # noqa: PLC0415 - only for checkpoints
    import zipfile  # noqa: PLC0415

    if not os.path.exists(path):
        raise NotFoundError(f"no checkpoint at {path!r}")
    if os.path.isdir(path):
        raise InvalidArgumentError(f"{path!r} is a directory, not a checkpoint file")
    try:
        with zipfile.ZipFile(path, "r") as zf:
            try:
                info = zf.getinfo(_INDEX)
            except KeyError:
                raise _corrupt(path, f"it has no {_INDEX}") from None
            if info.file_size > _MAX_INDEX_BYTES:
                raise _corrupt(path, f"its index is {info.file_size} bytes")
            try:
                header = json.loads(zf.read(_INDEX).decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                raise _corrupt(path, f"its index is not JSON ({e})") from None
            variables = _checked_index(path, header)
            values: dict[str, np.ndarray] = {}
            for entry in variables:
                name = entry["name"]
                try:
                    member = zf.getinfo(entry["file"])
                except KeyError:
                    raise _corrupt(
                        path, f"the entry {entry['file']!r} of {name!r} is missing"
                    ) from None
                if member.file_size != entry["nbytes"]:
                    raise _corrupt(
                        path, f"{name!r} has {member.file_size} bytes, its index says "
                        f"{entry['nbytes']}",
                    )  # fmt: skip
                values[name] = _decode(path, entry, zf.read(member))
            return values
    except zipfile.BadZipFile as e:  # truncated, not a ZIP, or a CRC-32 mismatch
        raise _corrupt(path, str(e)) from None
    except (EOFError, OverflowError) as e:
        raise _corrupt(path, f"{type(e).__name__}: {e}") from None
    except DataLossError:
        raise
    except OSError as e:  # unreadable: permissions, an I/O error
        raise FailedPreconditionError(
            f"cannot read checkpoint {path!r}: {e.strerror or e}"
        ) from None


def _checked_index(path: str, header: Any) -> list[dict[str, Any]]:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _corrupt(path, f"it is not a {FORMAT} file")
    if header.get("version") != VERSION:
        raise DataLossError(
            f"checkpoint {path!r} has format version {header.get('version')!r}; this minigraph "
            f"reads version {VERSION}"
        )
    variables = header.get("variables")
    if not isinstance(variables, list):
        raise _corrupt(path, "its index lists no variables")
    names = set()
    for entry in variables:
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("name"), str)
            and isinstance(entry.get("file"), str)
            and isinstance(entry.get("dtype"), str)
            and isinstance(entry.get("shape"), list)
            and all(type(d) is int and d >= 0 for d in entry["shape"])
            and type(entry.get("nbytes")) is int
        )
        if not ok:
            raise _corrupt(path, f"a malformed index entry: {str(entry)[:80]}")
        if entry["name"] in names:
            raise _corrupt(path, f"the index names {entry['name']!r} twice")
        names.add(entry["name"])
        try:
            dtype = dtypes.as_dtype(entry["dtype"])
        except InvalidArgumentError:
            raise _corrupt(path, f"unknown dtype {entry['dtype']!r}") from None
        if dtype is dtypes.resource:
            raise _corrupt(path, "a resource dtype")
    return variables


def _decode(path: str, entry: Mapping[str, Any], data: bytes) -> np.ndarray:
    name, shape = entry["name"], tuple(entry["shape"])
    dtype = dtypes.as_dtype(entry["dtype"])
    count = 1
    for d in shape:
        count *= d
    if dtype.is_string:
        head = count * 8
        if len(data) < head:
            raise _corrupt(path, f"{name!r} is shorter than its {count} string lengths")
        lengths = np.frombuffer(data, dtype="<u8", count=count).astype(np.int64)
        if lengths.size and (lengths.min() < 0 or head + int(lengths.sum()) != len(data)):
            raise _corrupt(path, f"{name!r}'s string lengths do not add up to its bytes")
        ends = head + np.cumsum(lengths)
        starts = ends - lengths
        # Per-element: strings are Python objects, one each (as reading them from TF is).
        items = [data[int(a) : int(b)] for a, b in zip(starts.tolist(), ends.tolist())]
        out = np.empty(count, dtype=object)
        out[:] = items
        return out.reshape(shape)
    np_dtype = dtype.np_dtype.newbyteorder("<") if dtype.np_dtype.itemsize > 1 else dtype.np_dtype
    if len(data) != count * np_dtype.itemsize:
        raise _corrupt(
            path, f"{name!r} has {len(data)} bytes; a {dtype.name} value of shape "
            f"{list(shape)} has {count * np_dtype.itemsize}",
        )  # fmt: skip
    array = np.frombuffer(data, dtype=np_dtype).reshape(shape)
    if not np_dtype.isnative:
        array = array.astype(dtype.np_dtype)
    return array


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every value of checkpoint `path`, by name (read-only arrays), checked as `restore`
    checks the file.

    Raises:
        NotFoundError: no such file.
        DataLossError: not a checkpoint, or corrupt or truncated.
    """
    return _read(_check_path(path, "load_checkpoint"))


def list_variables(path: str | os.PathLike[str]) -> list[tuple[str, str, list[int]]]:
    """(name, dtype name, shape) of each variable of checkpoint `path`, in saved order."""
    return [(n, _dtype_name(v), list(v.shape)) for n, v in load_checkpoint(path).items()]


def _dtype_name(value: np.ndarray) -> str:
    return "string" if value.dtype == object else dtypes.as_dtype(value.dtype).name
