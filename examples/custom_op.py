"""A custom op from outside the package: ScatterNd, the inverse of GatherNd.

    python examples/custom_op.py

Uses only public names of `minigraph` (what an op library of your own would use):

- an `OpDef` with typed inputs and attrs (TF's REGISTER_OP),
- a shape function that reads the constant `shape` input (`ctx.constant_value`),
- a vectorised numpy CPU kernel (`np.add.at` over flat row numbers: duplicates are summed),
- a GPU kernel for cupy (`xp.add.at`, which cupy runs as `cupyx.scatter_add`: CUDA atomics),
  with the type constraints of those atomics and `shape` in host memory
  (TF's REGISTER_KERNEL_BUILDER(...HostMemory("shape"))); on a machine without a GPU it runs on
  the simulated GPUs of minigraph.testing, whose cupy-like arrays refuse what cupy refuses,
- `register_op`, which returns the builder class `ScatterNd(scope, indices, updates, shape)`.

Op names are global to the process and registering one twice is an error, so this module
registers ScatterNd when it is imported: run it as a script (or import it once).

Semantics are TF's ScatterNd: output = zeros(shape), then output[indices[i]] += updates[i] for
every index vector; out-of-range index vectors are an error on CPU and are skipped on GPU.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import numpy as np

import minigraph as mg
from minigraph import (
    InferenceContext,
    InvalidArgumentError,
    KernelContext,
    OpDef,
    Scope,
    Session,
    TensorShape,
    register_kernel,
    register_op,
)
from ops import GatherNd  # the op library that ships with minigraph (used by the demo only)

# -- 1. the op definition -------------------------------------------------------------------------

SCATTER_ND = OpDef(
    "ScatterNd",
    inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
    outputs=["output: T"],
    attrs=["T: type", "Tindices: {int16, int32, int64}"],
    shape_fn=lambda ctx: scatter_nd_shape(ctx),
    doc="""Scatters `updates` into a new zero tensor of shape `shape` at `indices`.

The inverse of GatherNd: indices [..., K] are index vectors into the first K dims of the output;
updates has shape indices.shape[:-1] + shape[K:]. Updates to the same index are summed.
On CPU an out-of-range index vector is an error; on GPU it is skipped.""",
)


# -- 2. the shape function: runs when a node is built, so bad shapes fail at construction ---------


def _dims(shape: TensorShape) -> str:
    return str(shape) if shape.rank is not None else "?"


def scatter_nd_shape(ctx: InferenceContext) -> TensorShape:
    """The output shape is the value of `shape`: fully known when `shape` is a constant."""
    indices, updates, shape_shape = ctx.input_shapes
    indices.with_rank_at_least(1)
    shape_shape.with_rank(1)
    value = ctx.constant_value(2)  # a numpy array when `shape` comes from a Const, else None
    if value is None:
        # Only the output rank is known: the length of the `shape` vector (when static).
        n = shape_shape.dims[0] if shape_shape.rank is not None else None
        return TensorShape(None if n is None else [None] * n)
    if (value < 0).any():
        raise InvalidArgumentError(f"shape must be non-negative; got {value.tolist()}")
    output = TensorShape(value.tolist())
    if indices.rank is None or updates.rank is None:
        return output
    depth = indices.dims[-1]
    outer = indices.rank - 1
    if depth is not None and depth > output.rank:
        raise InvalidArgumentError(
            f"indices.shape[-1] must be <= rank(shape), but indices.shape[-1] = {depth} and "
            f"shape = {output}"
        )
    if output.num_elements() == 0 and (indices.num_elements() or updates.num_elements()):
        raise InvalidArgumentError("Indices and updates specified for empty output")
    if updates.rank < outer or not indices[:-1].is_compatible_with(updates[:outer]):
        raise InvalidArgumentError(
            f"Dimensions [0,{outer}) of indices[shape={_dims(indices)}] must match dimensions "
            f"[0,{outer}) of updates[shape={_dims(updates)}]"
        )
    if depth is not None and not output[depth:].is_compatible_with(updates[outer:]):
        raise InvalidArgumentError(
            f"Dimensions [{depth},{output.rank}) of output[shape={output}] must match dimensions "
            f"[{outer},{updates.rank}) of updates[shape={_dims(updates)}]"
        )
    return output


# -- 3. kernels -----------------------------------------------------------------------------------


def _prepare(ctx: KernelContext, indices: Any, updates: Any, shape: Any):
    """Index vectors as flat row numbers into the output viewed as [rows, slice]; a mask of the
    vectors that are out of range; updates as [N, slice]. All vectorised, no element loops."""
    xp = ctx.xp
    dims = tuple(int(d) for d in np.asarray(shape).tolist())  # `shape` is in host memory
    if any(d < 0 for d in dims):
        raise ctx.invalid_argument(f"shape must be non-negative; got {list(dims)}")
    depth = indices.shape[-1]
    if depth > len(dims):
        raise ctx.invalid_argument(
            f"indices.shape[-1] must be <= rank(shape); got {depth} and shape {list(dims)}"
        )
    n = int(np.prod(indices.shape[:-1], dtype=np.int64))
    rows = indices.reshape(n, depth).astype(np.int64)
    slice_size = int(np.prod(dims[depth:], dtype=np.int64))
    expected = indices.shape[:-1] + dims[depth:]
    if updates.shape != expected:
        raise ctx.invalid_argument(
            f"updates must have shape {list(expected)} for indices of shape "
            f"{list(indices.shape)} and shape {list(dims)}; got {list(updates.shape)}"
        )
    bounds = xp.asarray(np.array(dims[:depth], dtype=np.int64))
    bad = ((rows < 0) | (rows >= bounds)).any(axis=1)
    # Row-major strides of the first `depth` dims: flat = sum(rows[:, k] * stride[k]).
    strides = np.ones(depth, dtype=np.int64)
    for k in range(depth - 2, -1, -1):  # a loop over the index depth, not over elements
        strides[k] = strides[k + 1] * dims[k + 1]
    flat = (xp.where(bad[:, None], 0, rows) * xp.asarray(strides)).sum(axis=1)
    return dims, flat, bad, updates.reshape(n, slice_size), depth


def scatter_nd_cpu(ctx: KernelContext, indices: Any, updates: Any, shape: Any, **attrs: Any):
    dims, flat, bad, values, depth = _prepare(ctx, indices, updates, shape)
    if bad.any():
        i = int(np.argmax(bad))  # the first bad index vector, in C order
        position = np.unravel_index(i, indices.shape[:-1]) if indices.ndim > 1 else ()
        where = "[" + ",".join(str(int(p)) for p in position) + "]" if position else ""
        vector = ", ".join(str(v) for v in indices.reshape(len(bad), depth)[i].tolist())
        raise ctx.invalid_argument(
            f"indices{where} = [{vector}] does not index into shape "
            f"[{','.join(str(d) for d in dims)}]"
        )
    rows = int(np.prod(dims[:depth], dtype=np.int64))
    out = np.zeros((rows, values.shape[1]), dtype=values.dtype)
    np.add.at(out, flat, values)  # unbuffered: duplicate rows are all added
    return out.reshape(dims)


def scatter_nd_gpu(ctx: KernelContext, indices: Any, updates: Any, shape: Any, **attrs: Any):
    xp = ctx.xp  # cupy on a GPU (a cupy-like test double on minigraph.testing's simulated GPUs)
    dims, flat, bad, values, depth = _prepare(ctx, indices, updates, shape)
    if bool(bad.any()):  # as TF's GPU kernel: out-of-range index vectors are skipped
        keep = ~bad
        flat, values = flat[keep], values[keep]
    rows = int(np.prod(dims[:depth], dtype=np.int64))
    out = xp.zeros((rows, values.shape[1]), dtype=values.dtype)
    target, addends = out, values
    if out.dtype == np.int64:
        # CUDA's atomicAdd has no int64 (cupy refuses it); two's complement adds the same bits
        # as uint64, which it has.
        target, addends = out.view(np.uint64), values.view(np.uint64)
    xp.add.at(target, flat, addends)  # cupy >= 12: cupyx.scatter_add; duplicates all added
    return out.reshape(dims)


# -- 4. registration: the op (and its builder class), then one kernel per device type ------------

ScatterNd = register_op(SCATTER_ND)

INDEX_TYPES = ["int16", "int32", "int64"]
register_kernel(
    "ScatterNd",
    "CPU",
    scatter_nd_cpu,
    type_constraints={"T": mg.dtypes.NUMERIC_DTYPES, "Tindices": INDEX_TYPES},
)
register_kernel(
    "ScatterNd",
    "GPU",
    scatter_nd_gpu,
    # The dtypes cupy's add.at (CUDA atomicAdd) handles, plus int64 through uint64.
    type_constraints={
        "T": ["int32", "int64", "uint32", "uint64", "float16", "float32", "float64"],
        "Tindices": ["int32", "int64"],
    },
    host_memory=["shape"],  # the kernel reads `shape` on the host, as TF's HostMemory("shape")
)


# -- 5. using it ----------------------------------------------------------------------------------


def main() -> int:
    print(mg.registry.get_op_def("ScatterNd").signature())
    for kernel in mg.registry.kernels_for("ScatterNd"):
        print(f"  kernel: {kernel.describe()}")
    print()

    # Gather three rows of a table (one of them twice), then scatter them back into a table of
    # the same shape: a row gathered twice comes back doubled, rows not gathered as zeros. (This
    # is how TF computes GatherNd's gradient: ScatterNd(indices, grad, shape(params)).)
    scope = Scope.new_root_scope()
    table = mg.Const(scope.with_op_name("table"), np.arange(15, dtype=np.float32).reshape(5, 3))
    picks = mg.Const(scope.with_op_name("picks"), [[3], [1], [3]])
    shape = mg.Const(scope.with_op_name("shape"), [5, 3])
    rows = GatherNd(scope.with_op_name("rows"), table, picks)
    back = ScatterNd(scope.with_op_name("back"), picks, rows, shape)
    # With a constant `shape`, the output shape is fully known when the node is built.
    print(f"back = ScatterNd(scope, picks, rows, shape)  ->  static shape {back.shape}")

    # Element scatter (TF's doc example): 1-D output, index vectors of length 1.
    elems = ScatterNd(scope.with_op_name("elems"), [[4], [3], [1], [7]], [9, 10, 11, 12], [8])

    metadata = mg.RunMetadata()
    with Session(scope) as session:
        values = session.run({"rows": rows, "back": back, "elems": elems}, run_metadata=metadata)
    print(f"rows  = GatherNd(table, [[3], [1], [3]]) = {values['rows'].tolist()}")
    print(f"back  = ScatterNd([[3], [1], [3]], rows, [5, 3]) = {values['back'].tolist()}")
    elems_value = values["elems"].tolist()
    print(f"elems = ScatterNd([[4], [3], [1], [7]], [9, 10, 11, 12], [8]) = {elems_value}")
    expected = np.zeros((5, 3), np.float32)
    expected[1] = [3, 4, 5]
    expected[3] = [18, 20, 22]  # row 3 was gathered twice: the two updates are summed
    ok = np.array_equal(values["back"], expected)
    ok &= np.array_equal(values["elems"], [0, 11, 0, 10, 9, 0, 0, 12])
    print("round trip matches numpy:", ok)
    print()

    print("Placement (RunMetadata.placement):")
    for node, device in metadata.placement.items():
        print(f"  {node:<8} {device}")
    print()

    # Errors. Shapes that cannot fit are caught when the node is built ...
    print("Construction-time error (updates do not match indices and shape):")
    try:
        ScatterNd(scope.with_op_name("bad"), picks, np.ones((3, 4), np.float32), shape)
    except InvalidArgumentError as e:
        print(f"  {type(e).__name__}: {e}")
    print(f"  (the graph is unchanged: 'bad' in graph -> {'bad' in scope.graph})")
    print()

    # ... out-of-range index values only when the kernel sees them (here: fed at run time).
    print("Run-time error (an index vector out of range, on CPU):")
    fed = mg.Placeholder(scope.with_op_name("fed_indices"), mg.int32, shape=[None, 1])
    cpu = scope.with_device("/device:CPU:0")  # GPU kernels skip bad indices instead
    scattered = ScatterNd(cpu.with_op_name("scattered"), fed, rows, shape)
    try:
        Session(scope).run(scattered, {fed: [[3], [7], [0]]})
    except InvalidArgumentError as e:
        print(f"  {type(e).__name__}: {e}")
    print()

    # The GPU kernel, on a simulated GPU (minigraph.testing: numpy behind a GPU device), or on
    # the real one when cupy sees a GPU. Sessions prefer a GPU when a node has a GPU kernel.
    from minigraph.testing import simulated_gpus

    simulate = mg.gpu_unavailable_reason() is not None
    with simulated_gpus(1) if simulate else contextlib.nullcontext():
        if simulate:
            print("No GPU here: the same graph on a simulated GPU (minigraph.testing):")
        else:
            print("The same graph on the GPU:")
        on_gpu = ScatterNd(scope.with_op_name("on_gpu"), fed, rows, shape)  # no request
        metadata = mg.RunMetadata()
        result = Session(scope).run(on_gpu, {fed: [[3], [7], [0]]}, run_metadata=metadata)
        print(
            f"  on_gpu = ScatterNd(scope, fed, rows, shape) ran on {metadata.placement['on_gpu']}"
        )
        print("  out-of-range index vectors are skipped on GPU, as in TF: [[3], [7], [0]] ->")
        print(f"  {result.tolist()}")
    print()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
