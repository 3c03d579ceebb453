"""A custom op from outside the package: IndexAdd, which TensorFlow does not have.

    python examples/custom_op.py

IndexAdd(input, indices, source, axis) is PyTorch's `index_add`: a copy of `input` with the
slices of `source` added at positions `indices` along `axis`,

    output = input;  output[..., indices[i], ...] += source[..., i, ...]   (at `axis`)

where repeated indices all add up. It is linear in `input` and `source`, and it is the adjoint
of a gather along an axis: IndexAdd(zeros, indices, grad, axis) is the gradient of
GatherV2(params, indices, axis) with respect to `params`.

Uses only public names of `minigraph` (what an op library of your own would use):

- an `OpDef` with typed inputs and attrs (TF's REGISTER_OP),
- a shape function that reads the constant `axis` input (`ctx.constant_value`) and checks the
  shapes when the node is built,
- a vectorised numpy CPU kernel (`np.add.at`, unbuffered: repeated indices are all added),
- a GPU kernel for cupy (`xp.add.at`, which cupy runs as `cupyx.scatter_add`: CUDA atomics),
  with the type constraints of those atomics (no int8/int16/complex: those nodes stay on the
  CPU; int64 adds as uint64, the same bits) and `axis` in host memory (TF's
  REGISTER_KERNEL_BUILDER(...HostMemory("axis"))); on a machine without a GPU it runs on the
  simulated GPUs of minigraph.testing, whose cupy-like arrays refuse what cupy refuses,
- `register_op`, which returns the builder class `IndexAdd(scope, input, indices, source,
  axis)`.

Op names are global to the process and registering one twice with another definition is an
error, so this module registers IndexAdd when it is imported: run it as a script (or import it
once). Out-of-range indices are an error on every device.
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
from minigraph.shape_inference import canonical_axis
from ops import GatherV2  # the op library that ships with minigraph (used by the demo only)

# -- 1. the op definition -------------------------------------------------------------------------

INDEX_ADD = OpDef(
    "IndexAdd",
    inputs=["input: T", "indices: Tindices", "source: T", "axis: Taxis"],
    outputs=["output: T"],
    attrs=["T: type", "Tindices: {int32, int64}", "Taxis: {int32, int64} = int32"],
    shape_fn=lambda ctx: index_add_shape(ctx),
    doc="""Adds the slices of `source` into a copy of `input` at `indices` along `axis`.

output = input; output[..., indices[i], ...] += source[..., i, ...] at dimension `axis`.
indices is a vector; source.shape is input.shape with dimension `axis` of len(indices).
Repeated indices all add up; out-of-range indices are an error on every device.""",
)


# -- 2. the shape function: runs when a node is built, so bad shapes fail at construction ---------


def index_add_shape(ctx: InferenceContext) -> TensorShape:
    """The output has the input's shape; with a constant `axis`, `source` must fit it."""
    data, indices, source, axis_shape = ctx.input_shapes
    data.with_rank_at_least(1)
    indices.with_rank(1)
    axis_shape.with_rank(0)
    value = ctx.constant_value(3)  # a numpy array when `axis` comes from a Const, else None
    if data.rank is None or source.rank is None:
        return data
    if source.rank != data.rank:
        raise InvalidArgumentError(
            f"source must have the rank of input ({data.rank}), but has rank {source.rank}"
        )
    if value is None:
        return data  # any dim may be the axis: only the rank is checked
    axis = canonical_axis(int(value), data.rank)
    expected = list(data.dims)
    expected[axis] = indices.dims[0]
    if not source.is_compatible_with(expected):
        shown = TensorShape(expected)
        raise InvalidArgumentError(
            f"source.shape must be input.shape with dimension {axis} of length len(indices): "
            f"expected {shown}, got {source}"
        )
    # The output is the input's shape, with what the source knows of the other dims.
    known = source.dims[:axis] + (data.dims[axis],) + source.dims[axis + 1 :]
    return data.merge_with(known)


# -- 3. kernels -----------------------------------------------------------------------------------


def _prepare(ctx: KernelContext, data: Any, indices: Any, source: Any, axis: Any):
    """Checks the inputs as the shape function does (here with the run's real shapes) and
    returns the output (a copy of the input), the output viewed as [outer, n, inner] and the
    source as [outer, len(indices), inner]. All vectorised: no loop over elements."""
    xp = ctx.xp
    if axis.ndim != 0:
        raise ctx.invalid_argument(f"axis must be a scalar; got shape {list(axis.shape)}")
    try:
        a = canonical_axis(int(axis), data.ndim)  # `axis` is in host memory on every device
    except InvalidArgumentError as e:
        raise ctx.invalid_argument(e.message) from None
    expected = data.shape[:a] + indices.shape + data.shape[a + 1 :]
    if indices.ndim != 1 or source.shape != expected:
        raise ctx.invalid_argument(
            f"source must have shape {list(expected)} for input of shape {list(data.shape)} "
            f"and {indices.size} indices at axis {a}; got {list(source.shape)}"
        )
    n = data.shape[a]
    bad = (indices < 0) | (indices >= n)
    if indices.size and bool(bad.any()):
        i = int(xp.argmax(bad))  # the first bad index
        raise ctx.invalid_argument(f"indices[{i}] = {int(indices[i])} is not in [0, {n})")
    outer = int(np.prod(data.shape[:a], dtype=np.int64))
    inner = int(np.prod(data.shape[a + 1 :], dtype=np.int64))
    out = xp.empty(data.shape, dtype=data.dtype)
    out[...] = data  # a copy: kernels never write into their inputs
    view = out.reshape(outer, n, inner)
    return out, view, source.reshape(outer, indices.size, inner)


def index_add_cpu(ctx: KernelContext, data: Any, indices: Any, source: Any, axis: Any, **_: Any):
    out, view, values = _prepare(ctx, data, indices, source, axis)
    np.add.at(view, (slice(None), indices), values)  # unbuffered: repeated indices all add
    return out


def index_add_gpu(ctx: KernelContext, data: Any, indices: Any, source: Any, axis: Any, **_: Any):
    xp = ctx.xp  # cupy on a GPU (a cupy-like test double on minigraph.testing's simulated GPUs)
    out, view, values = _prepare(ctx, data, indices, source, axis)
    if out.dtype == np.int64:
        # CUDA's atomicAdd has no int64 (cupy refuses it); two's complement adds the same bits
        # as uint64, which it has.
        view, values = view.view(np.uint64), xp.ascontiguousarray(values).view(np.uint64)
    xp.add.at(view, (slice(None), indices), values)  # cupy >= 12: cupyx.scatter_add
    return out


# -- 4. registration: the op (and its builder class), then one kernel per device type ------------

IndexAdd = register_op(INDEX_ADD)

register_kernel("IndexAdd", "CPU", index_add_cpu, type_constraints={"T": mg.dtypes.NUMERIC_DTYPES})
register_kernel(
    "IndexAdd",
    "GPU",
    index_add_gpu,
    # The dtypes cupy's add.at (CUDA atomicAdd) handles, plus int64 through uint64.
    type_constraints={"T": ["int32", "int64", "uint32", "uint64", "float16", "float32", "float64"]},
    host_memory=["axis"],  # the kernel reads `axis` on the host, as TF's HostMemory("axis")
)


# -- 5. using it ----------------------------------------------------------------------------------


def main() -> int:
    print(mg.registry.get_op_def("IndexAdd").signature())
    for kernel in mg.registry.kernels_for("IndexAdd"):
        print(f"  kernel: {kernel.describe()}")
    print()

    scope = Scope.new_root_scope()
    # PyTorch's index_add example: rows 0, 4 and 2 of a [5, 3] tensor of ones get t's rows.
    ones = mg.Const(scope.with_op_name("ones"), np.ones((5, 3), np.float32))
    t = mg.Const(scope.with_op_name("t"), np.arange(1, 10, dtype=np.float32).reshape(3, 3))
    added = IndexAdd(scope.with_op_name("added"), ones, [0, 4, 2], t, 0)

    # The adjoint of a gather: gather three rows of a table (one of them twice), then add them
    # back into zeros of the table's shape: the row gathered twice comes back doubled, rows not
    # gathered as zeros. With a constant axis, the static shape is known when the node is built.
    table = mg.Const(scope.with_op_name("table"), np.arange(15, dtype=np.float32).reshape(5, 3))
    picks = mg.Const(scope.with_op_name("picks"), [3, 1, 3])
    rows = GatherV2(scope.with_op_name("rows"), table, picks, 0)
    zeros = mg.Const(scope.with_op_name("zeros"), np.zeros((5, 3), np.float32))
    back = IndexAdd(scope.with_op_name("back"), zeros, picks, rows, 0)
    print(f"back = IndexAdd(scope, zeros, picks, rows, 0)  ->  static shape {back.shape}")
    # Along another axis: columns 2 and 0 of an int64 matrix get two columns added.
    cols = IndexAdd(scope.with_op_name("cols"), np.zeros((2, 3), np.int64), [2, 2],
                    np.array([[1, 10], [-5, 7]], np.int64), 1)  # fmt: skip

    metadata = mg.RunMetadata()
    with Session(scope) as session:
        values = session.run({"added": added, "back": back, "cols": cols}, run_metadata=metadata)
    print(f"added = IndexAdd(ones, [0, 4, 2], t, 0) = {values['added'].tolist()}")
    print(f"back  = IndexAdd(zeros, [3, 1, 3], rows, 0) = {values['back'].tolist()}")
    print(f"cols  = IndexAdd(zeros, [2, 2], [[1, 10], [-5, 7]], 1) = {values['cols'].tolist()}")
    expected = np.zeros((5, 3), np.float32)
    expected[1] = [3, 4, 5]
    expected[3] = [18, 20, 22]  # row 3 was gathered twice: the two rows add up
    ok = np.array_equal(values["back"], expected)
    ok &= np.array_equal(values["added"], [[2, 3, 4], [1, 1, 1], [8, 9, 10], [1, 1, 1], [5, 6, 7]])
    ok &= np.array_equal(values["cols"], [[0, 0, 11], [0, 0, 2]])
    print("results match numpy:", ok)
    print()

    print("Placement (RunMetadata.placement):")
    for node, device in metadata.placement.items():
        print(f"  {node:<8} {device}")
    print()

    # Errors. Shapes that cannot fit are caught when the node is built ...
    print("Construction-time error (source does not fit input and indices):")
    try:
        IndexAdd(scope.with_op_name("bad"), zeros, picks, np.ones((3, 4), np.float32), 0)
    except InvalidArgumentError as e:
        print(f"  {type(e).__name__}: {e}")
    print(f"  (the graph is unchanged: 'bad' in graph -> {'bad' in scope.graph})")
    print()

    # ... out-of-range index values only when the kernel sees them (here: fed at run time).
    print("Run-time error (an index out of range):")
    fed = mg.Placeholder(scope.with_op_name("fed_indices"), mg.int32, shape=[None])
    added_fed = IndexAdd(scope.with_op_name("added_fed"), zeros, fed, rows, 0)
    try:
        Session(scope).run(added_fed, {fed: [3, 7, 0]})
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
        on_gpu = IndexAdd(scope.with_op_name("on_gpu"), zeros, fed, rows, 0)  # no request
        metadata = mg.RunMetadata()
        result = Session(scope).run(on_gpu, {fed: [0, 0, 4]}, run_metadata=metadata)
        print(f"  on_gpu = IndexAdd(zeros, fed, rows, 0) ran on {metadata.placement['on_gpu']}")
        print(f"  fed [0, 0, 4]: rows 3 and 1 add up in row 0 -> {result.tolist()}")
        try:
            Session(scope).run(on_gpu, {fed: [0, -1, 4]})
        except InvalidArgumentError as e:
            print(f"  out-of-range indices are an error there too: {e.message.splitlines()[0]}")
    print()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
