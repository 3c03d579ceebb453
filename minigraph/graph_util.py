"""Freezing: a graph's variables turned into constants, for an inference GraphDef that needs no
session state (TF's `tf.compat.v1.graph_util.convert_variables_to_constants`).

    frozen = convert_variables_to_constants(sess, scope.graph, ["probs"])
    write_graph(frozen, "frozen.pb")            # TensorFlow imports and runs it as it is

The result holds only the nodes the outputs need, with TF's conversions: each VarHandleOp they
use becomes a Const of the variable's current value (same name), a ReadVariableOp of it an
Identity, a ResourceGather a GatherV2 (axis a Const `<name>/axis`, its batch_dims kept), a
VariableShape a Shape, a VarIsInitializedOp the constant true, an Identity of a handle an
Identity of the value. An output that needs an update of a variable (an assign, a scatter, an
apply op) cannot be frozen: InvalidArgumentError names it. Every other node is copied as it is
(attrs, device requests, control inputs, colocation when its target is kept).

`freeze_graph_def(graph_def, outputs, values)` does the same from the values of a checkpoint
(`minigraph.train.load_checkpoint`), by VarHandleOp name, without a session: what
`minigraph freeze` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from minigraph import dtypes
from minigraph.errors import InternalError, InvalidArgumentError, NotFoundError
from minigraph.graph import Graph, Operation, Output
from minigraph.registry import get_op_def
from minigraph.scope import Scope
from minigraph.variables import global_variables

__all__ = ["convert_variables_to_constants", "freeze_graph_def", "extract_sub_graph"]

# Ops that use a variable and whose frozen form is computed from its value.
_READS = ("ReadVariableOp", "ResourceGather", "VariableShape", "VarIsInitializedOp", "Identity")


def convert_variables_to_constants(
    sess: Any,
    input_graph_def: Any,
    output_node_names: Sequence[str],
    variable_names_whitelist: Iterable[str] | None = None,
    variable_names_blacklist: Iterable[str] | None = None,
) -> Any:
    """A GraphDef of what `output_node_names` need from `input_graph_def` (a GraphDef, or a
    Graph or Scope), each variable they use a Const of its value in `sess` (TF's function;
    the white/black lists filter variables by VarHandleOp name: those left out stay
    variables).

    Raises:
        NotFoundError: an output node that is not in the graph, or a variable missing from the
            session's graph.
        FailedPreconditionError: a variable the outputs use is not initialized in `sess`.
        InvalidArgumentError: an output that needs a variable's update.
    """
    graph = _graph(input_graph_def)
    needed = _needed(graph, output_node_names)
    handles = _variables_needed(needed, variable_names_whitelist, variable_names_blacklist)
    values = _session_values(sess, [op.name for op in handles])
    return _frozen(graph, needed, values, handles)


def freeze_graph_def(
    graph_def: Any, output_node_names: Sequence[str], values: Mapping[str, np.ndarray]
) -> Any:
    """A GraphDef of what `output_node_names` need from `graph_def` (a GraphDef, or a Graph or
    Scope), each variable they use a Const of `values[<its VarHandleOp's name>]` (a
    checkpoint's values: `minigraph.train.load_checkpoint(path)`).

    Raises:
        NotFoundError: an output node that is not in the graph, or a variable `values` lacks.
        InvalidArgumentError: a value of another dtype or shape than its variable's, or an
            output that needs a variable's update.
    """
    if not isinstance(values, Mapping):
        raise InvalidArgumentError(
            f"freeze_graph_def: values maps variable names to arrays; got {type(values).__name__}"
        )
    graph = _graph(graph_def)
    needed = _needed(graph, output_node_names)
    handles = _variables_needed(needed, None, None)
    found = {}
    for op in handles:
        if op.name not in values:
            raise NotFoundError(
                f"freeze: no value for variable {op.name!r} (the values hold {sorted(values)[:10]})"
            )
        found[op.name] = values[op.name]
    return _frozen(graph, needed, found, handles)


def extract_sub_graph(graph_def: Any, dest_nodes: Sequence[str]) -> Any:
    """The GraphDef of the nodes `dest_nodes` need (inputs and control inputs), in order."""
    graph = _graph(graph_def)
    return _frozen(graph, _needed(graph, dest_nodes), {}, [])


# -- steps ----------------------------------------------------------------------------------------


def _graph(value: Any) -> Graph:
    """A Graph for `value`: itself (a Graph or a Scope's), or a GraphDef imported as it is."""
    graph = getattr(value, "graph", value)
    if isinstance(graph, Graph):
        return graph
    from minigraph import graph_def as gd  # noqa: PLC0415 - protobuf loads on use

    scope = Scope.new_root_scope()
    gd.import_graph_def(scope, value, name="")
    return scope.graph


def _outputs(graph: Graph, names: Sequence[str]) -> list[Operation]:
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise InvalidArgumentError(
            f"freeze: output_node_names is a non-empty list of node names; got {names!r}"
        )
    ops = []
    for name in names:
        if not isinstance(name, str):
            raise InvalidArgumentError(f"freeze: an output node name is a str; got {name!r}")
        node = name[1:] if name.startswith("^") else name.split(":")[0]
        try:
            ops.append(graph.get_operation(node))
        except (NotFoundError, KeyError, ValueError):
            raise NotFoundError(f"freeze: no node {node!r} in the graph") from None
    return ops


def _needed(graph: Graph, names: Sequence[str]) -> list[Operation]:
    """The nodes the outputs need (data and control inputs), in creation order."""
    needed: set[Operation] = set()
    stack = list(_outputs(graph, names))
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return sorted(needed, key=lambda op: op.creation_index)


def _variables_needed(needed: list[Operation], whitelist: Any, blacklist: Any) -> list[Operation]:
    """The VarHandleOps among the `needed` nodes that the white/black lists let through."""
    allow = None if whitelist is None else set(whitelist)
    deny = set() if blacklist is None else set(blacklist)
    return [
        op
        for op in needed
        if op.type == "VarHandleOp" and (allow is None or op.name in allow) and op.name not in deny
    ]


def _session_values(sess: Any, names: list[str]) -> dict[str, np.ndarray]:
    """The current values of the variables of these VarHandleOp names in `sess`, read through
    their own reads (`<name>/Read/ReadVariableOp`, as TF) or a Variable's."""
    graph = getattr(sess, "graph", None)
    if not names:
        return {}
    if not isinstance(graph, Graph):
        raise InvalidArgumentError("freeze: the session has no graph to read the variables from")
    by_name = {v.op.name: v for v in global_variables(graph)}
    reads = []
    for name in names:
        variable = by_name.get(name)
        if variable is not None:
            reads.append(variable.value())
            continue
        try:
            read = graph.get_operation(f"{name}/Read/ReadVariableOp")
        except (NotFoundError, KeyError, ValueError):
            read = None
        if read is None or read.type != "ReadVariableOp" or read.inputs[0].op.name != name:
            raise NotFoundError(
                f"freeze: the session's graph has no variable {name!r} (a VarHandleOp with its "
                f"read {name}/Read/ReadVariableOp, as Variables and TF make)"
            )
        reads.append(read.outputs[0])
    return dict(zip(names, sess.run(reads)))


def _frozen(
    graph: Graph,
    needed: list[Operation],
    values: Mapping[str, Any],
    handles: Sequence[Operation],
) -> Any:
    """The GraphDef of the `needed` nodes (`_needed`), the `handles` made Consts of `values`."""
    from minigraph import graph_def as gd  # noqa: PLC0415 - protobuf loads on use

    taken = {op.name for op in graph.operations}
    out = Graph()
    made: dict[Output, Output] = {}  # each kept tensor -> its copy
    value_of: dict[Output, Output] = {}  # a converted variable's handle -> its Const
    ops: dict[str, Operation] = {}
    frozen = {op.name for op in handles}
    kept = {op.name for op in needed}

    def add(op: Operation, op_type: str, inputs: list[Any], attrs: Mapping[str, Any],
            name: str | None = None) -> Operation:  # fmt: skip
        name = op.name if name is None else name
        prefix, _, base = name.rpartition("/")
        group = op.colocation_group if op.colocation_group in kept else None
        copy = out.add_operation(
            get_op_def(op_type), inputs, dict(attrs), prefix=prefix, base_name=base,
            requested_device=op.requested_device,
            control_inputs=[ops[c.name] for c in op.control_inputs if c.name in ops],
            colocation_group=group, kernel_label=op.kernel_label, source=op.source,
        )  # fmt: skip
        if copy.name != name:
            raise InternalError(f"freeze: node {name!r} was written as {copy.name!r}")
        ops[name] = copy
        return copy

    for op in needed:
        if op.type == "VarHandleOp" and op.name in frozen:
            const = add(op, "Const", [], {"value": _checked_value(op, values[op.name]),
                                          "dtype": op.get_attr("dtype")})  # fmt: skip
            value_of[op.outputs[0]] = const.outputs[0]
            continue
        if any(t in value_of for t in op.inputs):
            _convert_read(op, value_of, made, add, taken)
            continue
        grouped = op.op_def.split_inputs([made[t] for t in op.inputs], op.attrs)
        copy = add(op, op.type, grouped, op.attrs)
        made.update(zip(op.outputs, copy.outputs))
    return gd.as_graph_def(out)


def _convert_read(
    op: Operation,
    value_of: dict[Output, Output],
    made: dict[Output, Output],
    add: Callable[..., Operation],
    taken: set[str],
) -> None:
    """The frozen form of a node using a converted variable's handle."""
    handle = op.inputs[0]
    value = value_of.get(handle)
    if op.type not in _READS or value is None or any(t in value_of for t in op.inputs[1:]):
        variable = next(t for t in op.inputs if t in value_of).op.name
        raise InvalidArgumentError(
            f"freeze: the outputs need node {op.name!r} ({op.type}), which updates or uses "
            f"variable {variable!r} in a way a constant cannot stand for; freeze outputs that "
            "only read variables"
        )
    dtype = value.dtype
    if op.type in ("ReadVariableOp", "Identity"):
        copy = add(op, "Identity", [value], {"T": dtype})
        if op.type == "Identity":  # an Identity of the handle: a handle to the same value
            value_of[op.outputs[0]] = copy.outputs[0]
            return
    elif op.type == "ResourceGather":
        bd = op.get_attr("batch_dims")
        index_dtype = op.get_attr("Tindices")
        axis = add(
            op, "Const", [],
            {"value": np.array(bd, dtype=index_dtype.np_dtype), "dtype": index_dtype},
            _unique(f"{op.name}/axis", taken),
        )  # fmt: skip
        attrs = {"batch_dims": bd, "Tparams": dtype, "Tindices": index_dtype, "Taxis": index_dtype}
        copy = add(op, "GatherV2", [value, made[op.inputs[1]], axis.outputs[0]], attrs)
    elif op.type == "VariableShape":
        copy = add(op, "Shape", [value], {"T": dtype, "out_type": op.get_attr("out_type")})
    else:  # VarIsInitializedOp: the variable had a value
        copy = add(op, "Const", [], {"value": np.array(True), "dtype": dtypes.bool_})
    made[op.outputs[0]] = copy.outputs[0]


def _checked_value(op: Operation, value: Any) -> np.ndarray:
    dtype, shape = op.get_attr("dtype"), op.get_attr("shape")
    try:
        array = dtypes.convert_to_array(value, None)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"freeze: the value of {op.name!r}: {e.message}") from None
    got = dtypes.as_dtype(array.dtype)
    if got is not dtype:
        raise InvalidArgumentError(
            f"freeze: variable {op.name!r} is {dtype.name}, its value {got.name}"
        )
    if not shape.is_compatible_with(array.shape):
        raise InvalidArgumentError(
            f"freeze: variable {op.name!r} has shape {shape}, its value {list(array.shape)}"
        )
    return array


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 0
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    taken.add(candidate)
    return candidate
