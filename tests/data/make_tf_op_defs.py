"""Writes TensorFlow's op definitions and CPU kernel registrations for minigraph's ops, so that
tests/test_op_def_conformance.py checks minigraph's OpDefs and kernels against TensorFlow's
without TensorFlow:

- tf_op_defs.pbtxt: TF's `OpList` (text format, as `text_format.MessageToString` writes it),
  one `op` per op type, sorted by name, stripped of summaries and descriptions. A comment line
  `# not in TensorFlow: A, B` lists the op types asked for that TF does not have.
- tf_cpu_kernels.txt: one line per kernel TF registers for the CPU (device type `CPU`, and
  `DEFAULT`, which TF's CPU device uses too), `OpType DEVICE attr=type,type attr2=type`, the
  kernel's type constraints (dtype names as minigraph spells them: float16, not half); a line
  without constraints is a kernel for every dtype the op allows. Sorted, without duplicates.

The op types are every op `import ops` registers (ops.resource_variables too), plus the ones
that helpers are adding now (`ANTICIPATED`), so that the files do not have to be regenerated
the moment those land. Run it only where TensorFlow 2.21 is installed (never a minigraph
dependency) and minigraph is importable, from anywhere:

    python tests/data/make_tf_op_defs.py
"""

from __future__ import annotations

import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the checkout's minigraph and ops

import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from tensorflow.core.framework import op_def_pb2  # noqa: E402
from tensorflow.python.framework import kernels, op_def_registry  # noqa: E402

from minigraph import registry  # noqa: E402

# Op types named by the issues that helpers are adding to the library now (gradient helpers,
# variables, checkpoints): their TF definitions are recorded ahead of the op.
ANTICIPATED = (
    "Assign",
    "DivNoNan",
    "IdentityN",
    "InvertPermutation",
    "MergeV2Checkpoints",
    "PreventGradient",
    "RestoreV2",
    "SaveV2",
    "SegmentSum",
    "StridedSliceGrad",
    "TensorScatterAdd",
    "TensorScatterUpdate",
    "Unique",
    "UnsortedSegmentMax",
    "VariableV2",
    "Where",
    "Xdivy",
    "Xlogy",
    "ResourceScatterNdAdd",
    "ResourceApplyAdagradV2",
    "ResourceSparseApplyAdagradV2",
    "VarHandleOp",
    "ReadVariableOp",
    "AssignVariableOp",
    "AssignAddVariableOp",
    "AssignSubVariableOp",
    "VarIsInitializedOp",
    "DestroyResourceOp",
    "VariableShape",
    "ResourceGather",
    "ResourceScatterAdd",
    "ResourceScatterSub",
    "ResourceScatterUpdate",
    "ResourceApplyGradientDescent",
    "ResourceApplyMomentum",
    "ResourceApplyAdagrad",
    "ResourceApplyAdam",
    "ResourceSparseApplyMomentum",
    "ResourceSparseApplyAdagrad",
    "ReluGrad",
    "Relu6Grad",
    "EluGrad",
    "SoftplusGrad",
    "SigmoidGrad",
    "TanhGrad",
    "RsqrtGrad",
    "SqrtGrad",
    "ReciprocalGrad",
    "BiasAddGrad",
)
KERNEL_DEVICES = ("CPU", "DEFAULT")


def op_types() -> list[str]:
    """minigraph's registered op types (after importing the op library) and ANTICIPATED."""
    for module in ("ops", "ops.resource_variables"):
        try:
            importlib.import_module(module)
        except ImportError as e:  # a module still being written: its ops are ANTICIPATED
            print(f"warning: cannot import {module}: {e}", file=sys.stderr)
    return sorted(set(registry.list_ops()) | set(ANTICIPATED))


def stripped(op_def: op_def_pb2.OpDef) -> op_def_pb2.OpDef:
    """A copy without the documentation fields."""
    copy = op_def_pb2.OpDef()
    copy.CopyFrom(op_def)
    copy.ClearField("summary")
    copy.ClearField("description")
    for arg in list(copy.input_arg) + list(copy.output_arg):
        arg.ClearField("description")
    for attr in copy.attr:
        attr.ClearField("description")
    return copy


def dtype_name(enum: int) -> str:
    name = tf.as_dtype(enum).name
    return {"half": "float16"}.get(name, name)


def kernel_lines(op_type: str) -> list[str]:
    """One line per group of TF's CPU kernels for `op_type`: kernels whose constraints differ in
    one attr's dtypes are merged (a line means every combination of its dtypes)."""
    combos: dict[tuple[str, tuple[str, ...]], set[tuple[frozenset[str], ...]]] = {}
    for kernel in kernels.get_registered_kernels_for_op(op_type).kernel:
        if kernel.device_type not in KERNEL_DEVICES or kernel.label:
            continue  # labelled kernels run only for nodes that ask for them
        constraints = sorted(kernel.constraint, key=lambda c: c.name)
        key = (kernel.device_type, tuple(c.name for c in constraints))
        value = tuple(
            frozenset(dtype_name(t) for t in c.allowed_values.list.type) for c in constraints
        )
        combos.setdefault(key, set()).add(value)
    lines = []
    for (device, names), values in combos.items():
        for position in reversed(range(len(names))):  # merge on each attr in turn
            merged: dict[tuple[frozenset[str], ...], set[str]] = {}
            for value in values:
                rest = value[:position] + value[position + 1 :]
                merged.setdefault(rest, set()).update(value[position])
            values = {
                rest[:position] + (frozenset(types),) + rest[position:]
                for rest, types in merged.items()
            }
        for value in values:
            parts = [op_type, device]
            parts += [f"{n}={','.join(sorted(types))}" for n, types in zip(names, value)]
            lines.append(" ".join(parts))
    return sorted(lines)


def main() -> int:
    if not tf.__version__.startswith("2.21"):
        print(f"warning: the committed files were made with TF 2.21; this is {tf.__version__}")
    names = op_types()
    op_list = op_def_pb2.OpList()
    missing = []
    kernel_text = []
    for name in names:
        op_def = op_def_registry.get(name)
        if op_def is None:
            missing.append(name)
            continue
        op_list.op.append(stripped(op_def))
        kernel_text += kernel_lines(name)
    header = (
        f"# TensorFlow {tf.__version__}'s OpDefs of minigraph's ops, without documentation.\n"
        "# Written by tests/data/make_tf_op_defs.py; read by tests/test_op_def_conformance.py.\n"
        f"# not in TensorFlow: {', '.join(missing)}\n"
    )
    with open(os.path.join(HERE, "tf_op_defs.pbtxt"), "w", encoding="utf-8") as f:
        f.write(header + text_format.MessageToString(op_list))
    with open(os.path.join(HERE, "tf_cpu_kernels.txt"), "w", encoding="utf-8") as f:
        f.write(
            f"# TensorFlow {tf.__version__}'s CPU (and DEFAULT) kernels of minigraph's ops: "
            "op, device type, type constraints.\n"
            "# Written by tests/data/make_tf_op_defs.py; read by "
            "tests/test_op_def_conformance.py.\n"
        )
        f.write("".join(line + "\n" for line in kernel_text))
    print(
        f"wrote {len(op_list.op)} OpDefs and {len(kernel_text)} CPU kernels; not in TF: {missing}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
