"""minigraph's op library: the gather and partition families, the array and math ops they
compose with, TF's sharded `embedding_lookup`, plus the framework ops' builders.

    from ops import Const, Placeholder, GatherNd, GatherV2, gather, embedding_lookup

Importing this package registers its ops and kernels (explicit `register_op` /
`register_kernel` calls in each module).
"""

from minigraph.framework_ops import Const, Identity, NoOp, Placeholder
from ops.array import ConcatV2, Reshape, Shape, Size
from ops.embedding import embedding_lookup
from ops.gather_ops import Gather, GatherNd, GatherV2, gather, gather_nd
from ops.math import Cast, FloorDiv, FloorMod, Maximum, Range, Sub
from ops.partition import DynamicPartition, DynamicStitch

__all__ = [
    "Const", "Placeholder", "Identity", "NoOp",
    "GatherV2", "Gather", "GatherNd", "gather", "gather_nd",
    "DynamicPartition", "DynamicStitch", "embedding_lookup",
    "Shape", "Size", "Reshape", "ConcatV2",
    "Range", "Cast", "Sub", "Maximum", "FloorDiv", "FloorMod",
]  # fmt: skip
