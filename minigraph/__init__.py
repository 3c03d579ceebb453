"""minigraph: a small, fast, readable dataflow-graph op runtime in the style of TF graph mode.

Build graphs through an immutable `Scope` and op builders, run them with a `Session`, and extend
the runtime with `register_op` / `register_kernel`. Importing minigraph never imports cupy.
"""

from minigraph import devices as _devices
from minigraph import dtypes, errors, registry, shape_inference, train
from minigraph import graph as _graph
from minigraph import session as _session
from minigraph.builder import OpBuilder, op_builder, register_op
from minigraph.device_spec import DeviceSpec
from minigraph.devices import Device, get_devices, gpu_unavailable_reason, list_devices
from minigraph.dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool_,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    resource,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
)
from minigraph.errors import (
    AlreadyExistsError,
    DataLossError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    OutOfRangeError,
    ResourceExhaustedError,
    UnavailableError,
    UnimplementedError,
)
from minigraph.framework_ops import Const, Identity, NoOp, Placeholder
from minigraph.gradients import gradients
from minigraph.graph import Graph, Operation, Output
from minigraph.indexed_slices import IndexedSlices, IndexedSlicesValue, convert_to_tensor
from minigraph.kernel import InlineCall, Input, KernelContext, KernelSpec
from minigraph.op_def import ArgDef, AttrDef, OpDef
from minigraph.optimizer import OptimizerConfig, PassReport, RewriteContext
from minigraph.registry import no_gradient, register_gradient, register_kernel, register_rewrite
from minigraph.scope import Scope, current_scope
from minigraph.session import NodeStats, RunMetadata, RunOptions, Session, SessionConfig
from minigraph.shape_inference import InferenceContext
from minigraph.tensor_shape import TensorShape
from minigraph.variables import (
    Variable,
    global_variables,
    global_variables_initializer,
    trainable_variables,
    variables_initializer,
)

__version__ = "0.1.0"

__all__ = [
    # building
    "Scope", "current_scope", "Graph", "Operation", "Output", "OpBuilder",
    "Const", "Placeholder", "Identity", "NoOp",
    # extending
    "OpDef", "ArgDef", "AttrDef", "InferenceContext", "KernelContext", "KernelSpec",
    "InlineCall", "Input",
    "register_op", "register_kernel", "op_builder", "registry", "shape_inference",
    # gradients
    "gradients", "register_gradient", "no_gradient", "IndexedSlices", "IndexedSlicesValue",
    "convert_to_tensor",
    # variables and training
    "Variable", "global_variables", "trainable_variables", "global_variables_initializer",
    "variables_initializer", "train", "graph_util",
    # the graph optimizer
    "OptimizerConfig", "PassReport", "RewriteContext", "register_rewrite",
    # running
    "Session", "SessionConfig", "RunOptions", "RunMetadata", "NodeStats",
    "Device", "DeviceSpec", "list_devices", "get_devices", "gpu_unavailable_reason",
    # graph files
    "import_graph_def", "write_graph", "read_graph",
    # types
    "TensorShape", "DType", "as_dtype", "dtypes",
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "string",
    "resource",
    # errors
    "errors", "OpError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "UnimplementedError", "FailedPreconditionError", "OutOfRangeError",
    "ResourceExhaustedError", "InternalError", "UnavailableError", "DataLossError",
]  # fmt: skip


# Extension points of lower layers that modules above them fill: this package's __init__ is
# the one module above all, so every import inside the runtime points down a layer. Each loads
# its module on first use (protobuf, Dask and Graphviz stay unloaded until needed).
def _module(name: str):
    import importlib  # noqa: PLC0415

    return importlib.import_module(name)


_graph.install_graph_writers(
    as_graph_def=lambda g, add_shapes=False: _module("minigraph.graph_def").as_graph_def(
        g, add_shapes=add_shapes
    ),
    to_dot=lambda g: _module("minigraph.dot").graph_to_dot(g),
)
_devices.install_cluster_lister(
    lambda target, verbose, local: _module("minigraph.distributed").list_cluster_devices(
        target, verbose, local
    )
)
_session.install_remote_runtime(
    lambda target, config, devices: _module("minigraph.distributed").runtime_for(
        target, config, devices
    )
)

# Graph files: minigraph.graph_def is loaded on first use (it is large; protobuf itself is
# imported only when a GraphDef function runs). `mg.graph_def` (the module, which the README
# uses for parse_graph_def and MAX_CONST_BYTES) loads it too.
_LAZY = {"import_graph_def", "write_graph", "read_graph"}


def __getattr__(name: str):
    if name == "graph_util":  # freezing variables into constants (loads graph_def on use)
        import importlib  # noqa: PLC0415

        return importlib.import_module("minigraph.graph_util")
    if name in _LAZY or name == "graph_def":
        import importlib  # noqa: PLC0415

        # import_module, not `from minigraph import graph_def`: that would ask this function.
        graph_def = importlib.import_module("minigraph.graph_def")
        return graph_def if name == "graph_def" else getattr(graph_def, name)
    raise AttributeError(f"module 'minigraph' has no attribute {name!r}")
