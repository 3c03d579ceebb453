"""Helpers shared by the battery's case modules."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tests.hostile.battery import Case, Wrong

_ids = itertools.count()

#: Every dtype name minigraph has (the cases that sweep dtypes use these).
DTYPE_NAMES = (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
    "uint16", "uint32", "uint64", "complex64", "complex128", "bool", "string",
)  # fmt: skip


def uid() -> int:
    """A number unique in this process (for op type names registered by cases)."""
    return next(_ids)


def minigraph_module() -> Any:
    """`minigraph`, imported on first use (as `scope` and `run` here do)."""
    import minigraph  # noqa: PLC0415

    return minigraph


def ops_module() -> Any:
    """`ops`, imported on first use."""
    import ops  # noqa: PLC0415

    return ops


def scope() -> Any:
    import minigraph as mg  # noqa: PLC0415

    return mg.Scope.new_root_scope()


def run(fetches: Any, feeds: Any = None, graph: Any = None, config: Any = None, **kw: Any) -> Any:
    """Runs `fetches` in a new session over their graph (or `graph`), closing it after."""
    import minigraph as mg  # noqa: PLC0415

    if graph is None:
        probe = fetches[0] if isinstance(fetches, (list, tuple)) else fetches
        graph = probe.graph if hasattr(probe, "graph") else probe.operation.graph
    with mg.Session(graph, config) as session:
        return session.run(fetches, feeds, **kw)


def same(got: Any, want: Any, what: str = "value") -> None:
    """Raises Wrong unless `got` equals the reference `want` (dtype, shape and values; NaNs
    equal)."""
    got_a = np.asarray(got)
    want_a = np.asarray(want)
    if got_a.dtype != want_a.dtype:
        raise Wrong(f"{what}: dtype {got_a.dtype}, expected {want_a.dtype}")
    if got_a.shape != want_a.shape:
        raise Wrong(f"{what}: shape {got_a.shape}, expected {want_a.shape}")
    if got_a.dtype.kind == "O":
        equal = got_a.tolist() == want_a.tolist()
    elif got_a.dtype.kind in "fc" or got_a.dtype.name == "bfloat16":
        g = got_a.astype(np.complex128) if got_a.dtype.kind == "c" else got_a.astype(np.float64)
        w = want_a.astype(g.dtype)
        equal = bool(np.all((g == w) | (np.isnan(g) & np.isnan(w))))
    else:
        equal = np.array_equal(got_a, want_a)
    if not equal:
        raise Wrong(f"{what}: got {_short(got_a)}, expected {_short(want_a)}")


def _short(a: np.ndarray) -> str:
    text = np.array2string(a, threshold=12, edgeitems=3)
    return " ".join(text.split())[:200]


def must(condition: bool, message: str) -> None:
    if not condition:
        raise Wrong(message)


def cases_from(
    area: str, prefix: str, values: list[Any], make: Any, expect: Any = "any", timeout: float = 30.0
) -> list[Case]:
    """One case per value: `make(value)` runs it; `expect` is a str or a function of the
    value."""
    out = []
    for k, value in enumerate(values):
        e = expect(value) if callable(expect) else expect
        out.append(Case(f"{prefix}[{k}]={_label(value)}", area, _bind(make, value), e, timeout))
    return out


def _bind(fn: Any, value: Any) -> Any:
    return lambda: fn(value)


def _label(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= 50 else text[:47] + "..."


def gather_reference(params: Any, indices: Any, axis: int = 0) -> np.ndarray:
    """np.take with TF's rule for out-of-range indices: an error on the CPU (so a value that
    came back is Wrong), zeros on a GPU (TF's GPU kernels do not check indices)."""
    from minigraph.devices import get_devices  # noqa: PLC0415

    params = np.asarray(params)
    idx = np.asarray(indices)
    axis = axis % max(params.ndim, 1)
    n = params.shape[axis] if params.ndim else 0
    bad = (idx < 0) | (idx >= n)
    if not bad.any():
        return np.take(params, idx, axis=axis)
    if not any(d.device_type == "GPU" for d in get_devices()):
        raise Wrong(f"out-of-range indices {idx[bad].tolist()[:3]} accepted on the CPU")
    out = (
        np.take(params, np.where(bad, 0, idx), axis=axis)
        if n
        else np.zeros(params.shape[:axis] + idx.shape + params.shape[axis + 1 :], params.dtype)
    )
    mask = bad.reshape((1,) * axis + idx.shape + (1,) * (params.ndim - axis - 1))
    out[np.broadcast_to(mask, out.shape)] = 0
    return out
