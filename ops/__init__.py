"""minigraph's op library: the gather family, plus the framework ops' builders.

    from ops import Const, Placeholder, GatherNd, GatherV2, gather

Importing this package registers its ops and kernels (explicit `register_op` /
`register_kernel` calls in each module).
"""

from minigraph.framework_ops import Const, Identity, NoOp, Placeholder
from ops.gather import Gather, GatherNd, GatherV2, gather, gather_nd

__all__ = [
    "Const", "Placeholder", "Identity", "NoOp",
    "GatherV2", "Gather", "GatherNd", "gather", "gather_nd",
]  # fmt: skip
