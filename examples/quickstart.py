"""Quickstart: every example of TensorFlow's GatherNd, GatherV2 and tf.gather docs, on minigraph.

    python examples/quickstart.py

Builds each example as graph nodes (`GatherNd(scope, params, indices)`, `GatherV2(scope, ...)`,
`gather(scope, ...)`, the Java-style `Gather(scope, ...)`), fetches all of them with ONE
`Session.run(dict)`, and prints each result next to the value the TF docs give. Exits with
status 1 if any result differs.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import minigraph as mg
from ops import Gather, GatherNd, GatherV2, gather

# -- output helpers ------------------------------------------------------------------------------


def _marks() -> tuple[str, str]:
    """A check mark and a cross, or ASCII when the terminal cannot print them."""
    try:
        "✓✗".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAIL"
    return "✓", "✗"


OK, BAD = _marks()


def plain(value: Any) -> Any:
    """A fetched value as plain Python (nested lists; string elements decoded to str)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value


class Example:
    """One documented example: what to fetch, what the docs say it returns, how to compare."""

    def __init__(
        self,
        section: str,
        title: str,
        fetch: Any,
        expected: Any,
        shown: dict[str, Any],
        check: str = "value",
        dtype: str | None = None,
        static: Any = None,
        then: Any = None,
    ):
        self.section = section
        self.title = title
        self.fetch = fetch
        self.expected = expected
        self.shown = shown
        self.check = check  # "value", "shape" or "true"
        self.dtype = dtype
        self.static = static  # shape inferred at construction (for "shape" checks)
        self.then = then  # numpy post-processing of the fetched value (tf.stack, a comparison)

    def outcome(self, value: Any) -> tuple[Any, bool]:
        """(what to print as the output, whether it matches the docs)."""
        if self.then is not None:
            value = self.then(value)
        if self.check == "shape":
            got = list(value.shape)
            return got, got == self.expected and self.static == self.expected
        if self.check == "true":
            return bool(value), bool(value) is True
        got = plain(value)
        ok = got == self.expected
        if self.dtype is not None:
            ok = ok and mg.as_dtype(value.dtype).name == self.dtype
        return got, ok


EXAMPLES: list[Example] = []


def example(section: str, title: str, fetch: Any, expected: Any, **kwargs: Any) -> None:
    keys = ("check", "dtype", "static", "then")
    shown = {k: v for k, v in kwargs.items() if k not in keys}
    options = {k: v for k, v in kwargs.items() if k in keys}
    EXAMPLES.append(Example(section, title, fetch, expected, shown, **options))


# -- the graph -----------------------------------------------------------------------------------

scope = mg.Scope.new_root_scope()

# tf.raw_ops.GatherNd / tensorflow::ops::GatherNd ------------------------------------------------
ND = "GatherNd (tf.raw_ops.GatherNd, tensorflow::ops::GatherNd)"
matrix = [["a", "b"], ["c", "d"]]
cube = [[["a0", "b0"], ["c0", "d0"]], [["a1", "b1"], ["c1", "d1"]]]
nd = scope.new_sub_scope("gather_nd")  # nodes are named gather_nd/GatherNd, gather_nd/GatherNd_1..

for title, params, indices, output in [
    ("Simple indexing into a matrix", matrix, [[0, 0], [1, 1]], ["a", "d"]),
    ("Slice indexing into a matrix", matrix, [[1], [0]], [["c", "d"], ["a", "b"]]),
    ("Indexing into a 3-tensor", cube, [[1]], [[["a1", "b1"], ["c1", "d1"]]]),
    ("Indexing into a 3-tensor", cube, [[0, 1], [1, 0]], [["c0", "d0"], ["a1", "b1"]]),
    ("Indexing into a 3-tensor", cube, [[0, 0, 1], [1, 0, 1]], ["b0", "b1"]),
    ("Batched indexing into a matrix", matrix, [[[0, 0]], [[0, 1]]], [["a"], ["b"]]),
    ("Batched slice indexing into a matrix", matrix, [[[1]], [[0]]], [[["c", "d"]], [["a", "b"]]]),
    (
        "Batched indexing into a 3-tensor",
        cube,
        [[[1]], [[0]]],
        [[[["a1", "b1"], ["c1", "d1"]]], [[["a0", "b0"], ["c0", "d0"]]]],
    ),
    (
        "Batched indexing into a 3-tensor",
        cube,
        [[[0, 1], [1, 0]], [[0, 0], [1, 1]]],
        [[["c0", "d0"], ["a1", "b1"]], [["a0", "b0"], ["c1", "d1"]]],
    ),
    (
        "Batched indexing into a 3-tensor",
        cube,
        [[[0, 0, 1], [1, 0, 1]], [[0, 1, 1], [1, 1, 0]]],
        [["b0", "b1"], ["d0", "c1"]],
    ),
]:
    # As in C++: `GatherNd(scope, params, indices)`; Python lists become Const nodes.
    g = GatherNd(nd, params, indices)
    example(ND, title, g, output, indices=indices, params=params, dtype="string")

# tf.gather ----------------------------------------------------------------------------------------
TG = "tf.gather"
tg = scope.new_sub_scope("gather")
p_list = ["p0", "p1", "p2", "p3", "p4", "p5"]
params = mg.Const(tg.with_op_name("params"), p_list)  # a string tensor (elements are bytes)

example(
    TG,
    "Scalar index: gather(params, 3) == params[3]",
    gather(tg, params, 3),
    "p3",
    params=p_list,
    indices=3,
)
example(
    TG,
    "Indices along one axis",
    gather(tg, params, [2, 0, 2, 5]),
    ["p2", "p0", "p2", "p5"],
    indices=[2, 0, 2, 5],
    dtype="string",
)
example(
    TG,
    "Indices of any shape: output shape == indices shape",
    gather(tg, params, [[2, 0], [2, 5]]),
    [["p2", "p0"], ["p2", "p5"]],
    indices=[[2, 0], [2, 5]],
    dtype="string",
)

m_list = [[0, 1.0, 2.0], [10.0, 11.0, 12.0], [20.0, 21.0, 22.0], [30.0, 31.0, 32.0]]
m = mg.Const(tg.with_op_name("matrix"), m_list)  # float32, as tf.constant
example(
    TG,
    "Rows of a matrix",
    gather(tg, m, indices=[3, 1]),
    [[30.0, 31.0, 32.0], [10.0, 11.0, 12.0]],
    params=m_list,
    indices=[3, 1],
    dtype="float32",
)
example(
    TG,
    "Columns of a matrix (axis=1)",
    gather(tg, m, indices=[2, 1], axis=1),
    [[2.0, 1.0], [12.0, 11.0], [22.0, 21.0], [32.0, 31.0]],
    indices=[2, 1],
    axis=1,
    dtype="float32",
)

# result_shape(p_shape, i_shape, axis) = p_shape[:axis] + i_shape + p_shape[axis+1:]
p123 = mg.Const(tg.with_op_name("p123"), np.zeros([1, 2, 3], np.float32))
for i_shape, expected in [([], [1, 3]), ([7], [1, 7, 3]), ([7, 5], [1, 7, 5, 3])]:
    g = gather(tg, p123, np.zeros(i_shape, np.int32), axis=1)
    example(
        TG,
        f"result_shape([1, 2, 3], {i_shape}, axis=1)",
        g,
        expected,
        check="shape",
        static=g.shape.as_list(),
    )

i02 = mg.Const(tg.with_op_name("indices"), [[0, 2]])
for axis, expected in [(0, [1, 2, 3]), (1, [4, 1, 2])]:
    g = gather(tg, m, indices=i02, axis=axis)
    example(
        TG,
        f"params.shape [4, 3], indices [[0, 2]], axis={axis}: shape",
        g,
        expected,
        check="shape",
        static=g.shape.as_list(),
    )

rng = np.random.default_rng(0)
normal = rng.standard_normal((5, 6, 7, 8)).astype(np.float32)  # tf.random.normal((5, 6, 7, 8))
uniform = rng.integers(0, 7, size=(10, 11), dtype=np.int32)  # tf.random.uniform(.., maxval=7)
result = gather(tg, normal, uniform, axis=2, name="result")
example(
    TG,
    "params (5, 6, 7, 8), indices (10, 11), axis=2: shape",
    result,
    [5, 6, 10, 11, 8],
    check="shape",
    static=result.shape.as_list(),
)


def same_slice(r: np.ndarray, a: int = 0, b: int = 1) -> bool:
    """tf.reduce_all(result[:, :, a, b, :] == params[:, :, indices[a, b], :])"""
    return bool(np.array_equal(r[:, :, a, b, :], normal[:, :, uniform[a, b], :]))


example(
    TG,
    "result[:, :, a, b, :] == params[:, :, indices[a, b], :]",
    result,
    True,
    check="true",
    a=0,
    b=1,
    then=same_slice,
)

# batch_dims
b_params = [[0, 0, 1, 0, 2], [3, 0, 0, 0, 4], [0, 5, 0, 6, 0]]
b_indices = [[2, 4], [0, 4], [1, 3]]
bp = mg.Const(tg.with_op_name("batch_params"), b_params)
bi = mg.Const(tg.with_op_name("batch_indices"), b_indices)
batched = gather(tg, bp, bi, axis=1, batch_dims=1)
example(
    TG,
    "batch_dims=1: one gather per batch element",
    batched,
    [[1, 2], [3, 4], [5, 6]],
    params=b_params,
    indices=b_indices,
    axis=1,
    batch_dims=1,
    dtype="int32",
)

# manually_batched_gather: for p, i in zip(params, indices): gather(p, i, axis=axis-batch_dims)
manual = tg.new_sub_scope("manual")
manual_rows = [
    gather(manual, gather(manual, bp, k), gather(manual, bi, k), axis=1 - 1) for k in range(3)
]
example(
    TG,
    "manually_batched_gather(params, indices, axis=1): a gather per row, stacked",
    manual_rows,
    [[1, 2], [3, 4], [5, 6]],
    then=np.stack,
)
example(
    TG,
    "batched_result_shape(p_shape=[3, 5], i_shape=[3, 2], axis=1, batch_dims=1)",
    batched,
    [3, 2],
    check="shape",
    static=batched.shape.as_list(),
)

# batch_dims=-1 with the indices of an argsort: sorts each row.
values = [[30, 10, 20], [5, 7, 6]]
order = np.argsort(values, axis=-1).astype(np.int32)  # tf.argsort
example(
    TG,
    "gather(values, argsort(values), batch_dims=-1) sorts each row",
    gather(tg, values, order, batch_dims=-1),
    [[10, 20, 30], [5, 6, 7]],
    values=values,
    indices=order.tolist(),
    batch_dims=-1,
)

# tf.raw_ops.GatherV2 and the Java API's Gather.create ---------------------------------------------
V2 = "GatherV2 (tf.raw_ops.GatherV2; Java Gather.create(scope, params, indices, axis, options))"
v2 = scope.new_sub_scope("gather_v2")
cube_values = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
c = mg.Const(v2.with_op_name("params"), cube_values)
for kind, indices in [
    ("Scalar indices: output rank = rank(params) - 1", 2),
    ("Vector indices: output rank = rank(params)", [2, 0]),
    ("Higher rank indices: rank(params) + rank(indices) - 1", [[0, 1], [2, 2]]),
]:
    example(
        V2,
        kind,
        GatherV2(v2, c, indices, 1),
        np.take(cube_values, indices, axis=1).tolist(),
        params="arange(24).reshape(2, 3, 4)",
        indices=indices,
        axis=1,
    )
example(
    V2,
    "batch_dims=1 (GatherV2 attr)",
    GatherV2(v2, bp, bi, 1, batch_dims=1),
    [[1, 2], [3, 4], [5, 6]],
    axis=1,
    batch_dims=1,
)
java = Gather(v2, bp, bi, 1, batch_dims=1)  # Gather.create(scope, params, indices, axis, ...)
example(
    V2,
    f"Java-style Gather(...) node {java.operation.name!r} (op type GatherV2)",
    java,
    [[1, 2], [3, 4], [5, 6]],
    axis=1,
    batch_dims=1,
)


# -- run -------------------------------------------------------------------------------------------


def main() -> int:
    g = EXAMPLES[0].fetch
    print("minigraph quickstart: the examples of TF's GatherNd, tf.gather and GatherV2 docs\n")
    print("Builders return objects like TF C++'s ops::GatherNd:")
    print(f"  g = GatherNd(scope, params, indices)  ->  {g!r}")
    print(f"  g.operation / g.node() -> {g.node()!r};  g.output -> {g.output!r}")
    total = len(EXAMPLES) + 1  # every example, then the CPU out-of-range error
    print(
        f"  graph: {len(scope.graph)} nodes; {total} checks: {len(EXAMPLES)} examples fetched "
        "in one Session.run(dict), then the out-of-range error on CPU\n"
    )

    fetches = {f"example_{i}": ex.fetch for i, ex in enumerate(EXAMPLES)}
    with mg.Session(scope) as session:
        values = session.run(fetches)  # {name: numpy array}, one run for every example

    failures = 0
    section = None
    for i, ex in enumerate(EXAMPLES):
        if ex.section != section:
            section = ex.section
            print(f"== {section} ==")
        shown, ok = ex.outcome(values[f"example_{i}"])
        failures += not ok
        print(f"[{OK if ok else BAD}] {ex.title}")
        for name, value in ex.shown.items():
            print(f"      {name:<10} = {value}")
        label = "shape" if ex.check == "shape" else "output"
        if ex.check == "shape":
            print(f"      {'static':<10} = {ex.static}   (inferred when the node was built)")
        print(f"      {label:<10} = {shown}")
        print(f"      {'expected':<10} = {ex.expected}")
    print()

    # "Note that on CPU, if an out of bound index is found, an error is returned."
    print("== Out-of-range indices on CPU are an error ==")
    bad = gather(scope.new_sub_scope("errors"), params, [1, 6])
    try:
        mg.Session(scope).run(bad)
    except mg.InvalidArgumentError as e:
        print(f"[{OK}] gather(params, [1, 6]) raised InvalidArgumentError:")
        print("      " + str(e).replace("\n", "\n      "))
    else:
        failures += 1
        print(f"[{BAD}] gather(params, [1, 6]) did not raise")
    print()

    if failures:
        print(f"{BAD} {failures} of {total} checks differ from the TF docs")
        return 1
    print(f"{OK} all {total} checks match the TF docs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
