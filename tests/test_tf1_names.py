"""What a TensorFlow 1.x user reaches for (issue 14, section 1): TF 1.x names as aliases of
minigraph's own (documented in one README table), and symbolic tensors that refuse to be used
as values, as TF's graph tensors do."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import Scope
from minigraph.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from ops import GatherV2, gather


@pytest.fixture
def graph():
    s = Scope.new_root_scope()
    x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[None, 3])
    g = gather(s.with_op_name("g").with_device("/device:CPU:0"), x, [1, 0])
    h = mg.Identity(s.with_op_name("h"), g)
    return s, x, g, h


def test_graph_aliases(graph):
    s, x, g, h = graph
    assert s.graph.get_operations() == s.graph.operations
    assert [op.name for op in s.graph.get_operations()] == ["x", "Const", "Const_1", "g", "h"]
    assert s.graph.get_operation_by_name("g") is g.operation
    assert s.graph.get_tensor_by_name("g:0") is g.output
    with pytest.raises(InvalidArgumentError, match="tensor names have the form"):
        s.graph.get_tensor_by_name("g")
    with pytest.raises(InvalidArgumentError, match="tensor names have the form"):
        s.graph.get_tensor_by_name("g:x")
    with pytest.raises(NotFoundError, match="'g' .* has 1 outputs"):
        s.graph.get_tensor_by_name("g:1")
    with pytest.raises(NotFoundError, match="no node named 'nope'"):
        s.graph.get_operation_by_name("nope")


def test_operation_and_output_aliases(graph):
    s, x, g, h = graph
    assert g.operation.values() == g.operation.outputs == (g.output,)
    assert g.output.get_shape() is g.output.shape
    assert g.output.get_shape() == [2, 3]
    assert g.output.value_index == g.output.index == 0
    assert g.output.device == "/device:CPU:0" == g.operation.device
    assert h.output.device == ""
    assert g.consumers() == [h.operation] == g.output.consumers()
    assert h.consumers() == []


def test_finalize_makes_the_graph_read_only(graph):
    s, x, g, h = graph
    assert not s.graph.finalized
    s.graph.finalize()
    assert s.graph.finalized
    n = len(s.graph)
    with pytest.raises(FailedPreconditionError, match="Graph is finalized and cannot be modified"):
        mg.Identity(s, h)
    with pytest.raises(FailedPreconditionError, match="finalized"):
        gather(s, x, [0])  # its literal's Const is refused first
    with pytest.raises(FailedPreconditionError, match="finalized"):
        s.new_sub_scope("layer")
    with pytest.raises(RuntimeError):  # TF raises RuntimeError: FailedPrecondition is one
        mg.Const(s, 1)
    assert len(s.graph) == n
    # Running is unaffected.
    out = mg.Session(s).run(h, {x: np.ones((2, 3), np.float32)})
    assert out.shape == (2, 3)


def test_symbolic_tensors_refuse_conversion(graph):
    s, x, g, h = graph
    for symbolic, what in ((g.output, "Output 'g:0'"), (g, "GatherV2 'g'")):
        with pytest.raises(TypeError, match=f"{what} is a symbolic tensor.*Session"):
            np.asarray(symbolic)
        with pytest.raises(TypeError, match=f"{what} is a symbolic tensor.*a Python bool"):
            bool(symbolic)
        with pytest.raises(TypeError, match="symbolic tensor"):
            if symbolic:
                pass
        with pytest.raises(TypeError, match="symbolic tensor"):
            np.array([symbolic, symbolic])
        with pytest.raises(TypeError, match="symbolic tensor"):
            np.add(symbolic, 1)


def test_symbolic_tensors_inside_literals_are_invalid_arguments(graph):
    s, x, g, h = graph
    n = len(s.graph)
    with pytest.raises(InvalidArgumentError, match="input 'params'.*symbolic tensor"):
        GatherV2(s, [g.output, 1.0], [0], 0)
    with pytest.raises(InvalidArgumentError, match="symbolic tensor"):
        mg.Const(s, [h, h])
    assert len(s.graph) == n


def test_identity_and_membership_still_work(graph):
    s, x, g, h = graph
    # Equality is identity and hashing is object hashing: containers do not call __bool__.
    assert g.output in [x.output, g.output]
    assert g.output in {g.output: 1}
    assert h.operation.inputs == (g.output,)
    assert (g.output == x.output) is False
