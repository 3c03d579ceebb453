"""Registration that catches mistakes and forgives re-runs (issue 10 section 5, issue 14 section
2): `register_op` validates everything before registering anything; an identical OpDef or the
same kernel function registered again (a notebook cell or module run twice) is accepted;
anything else is an AlreadyExistsError that says how to replace a kernel; device types must be
known; builder aliases are recorded."""

from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pytest

import minigraph as mg
from minigraph import OpBuilder, OpDef, Scope, registry
from minigraph.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError

_counter = itertools.count()


def fresh(stem: str) -> str:
    return f"RegTest{stem}{next(_counter)}"


_cells = itertools.count()


def run_cell(source: str, name: str) -> dict:
    """Runs `source` as a notebook cell would (new function objects each time, under a new
    file name, as IPython's `<ipython-input-N-...>`); returns its namespace. `NAME` in the
    source is replaced by `name`."""
    namespace: dict = {"__name__": "__cell__"}
    filename = f"<ipython-input-{next(_cells)}>"
    code = compile(textwrap.dedent(source).replace("NAME", name), filename, "exec")
    exec(code, namespace)
    return namespace


CELL = """
import numpy as np
import minigraph as mg

SCALE = 2

def shape(ctx):
    return ctx.input_shapes[0]

DEF = mg.OpDef("NAME", inputs=["x: T"], outputs=["y: T"], attrs=["T: {int32, float32}"],
               shape_fn=shape, doc="Doubles x.")
Op = mg.register_op(DEF)

def kernel(ctx, x, **_):
    return x * SCALE

KERNEL = mg.register_kernel("NAME", "CPU", kernel)
"""


# -- atomic registration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "specs, message",
    [
        ({"attrs": ["lambda: int"]}, "attr name 'lambda' is a Python keyword"),
        ({"inputs": ["class: int32"]}, "input name 'class' is a Python keyword"),
        ({"outputs": ["yield: int32"]}, "output name 'yield' is a Python keyword"),
        ({"inputs": ["scope: int32"]}, "'scope' cannot name an input or attr"),
        ({"attrs": ["scope: int = 1"]}, "'scope' cannot name an input or attr"),
        ({"attrs": ["self: int = 1"]}, "'self' cannot name an input or attr"),
        ({"inputs": ["k: int32"], "attrs": ["k: int = 1"]}, "attr 'k' has the name of an input"),
    ],
)
def test_register_op_validates_everything_before_registering(specs, message):
    name = fresh("Atomic")
    with pytest.raises(InvalidArgumentError, match=message):
        mg.register_op(OpDef(name, **specs))
    with pytest.raises(NotFoundError):
        registry.get_op_def(name)
    # A corrected retry registers (no AlreadyExistsError forever).
    builder = mg.register_op(OpDef(name, inputs=["x: int32"], outputs=["y: int32"]))
    assert builder.op_def is registry.get_op_def(name)


def test_names_with_a_trailing_newline_never_reach_the_registry():
    name = fresh("Newline")
    for make in (
        lambda: OpDef(name + "\n"),
        lambda: OpDef(name, inputs=[mg.ArgDef("x\n", dtype="int32")]),
        lambda: OpDef(name, attrs=[mg.AttrDef("k\n", "int")]),
    ):
        with pytest.raises(InvalidArgumentError):
            mg.register_op(make())
    assert name not in registry.list_ops() and name + "\n" not in registry.list_ops()


def test_a_hand_written_builder_may_take_keyword_free_names_as_it_likes():
    class Custom(OpBuilder):
        def __init__(self, scope, x, *, scope_size=1):
            self._build(scope, [x], {"scope_size": scope_size})

    name = fresh("Hand")
    op_def = OpDef(name, inputs=["x: int32"], outputs=["y: int32"], attrs=["scope_size: int"])
    assert mg.register_op(op_def, builder=Custom) is Custom


# -- identical re-registration -------------------------------------------------------------------


def test_rerunning_a_cell_returns_the_registered_builder_and_kernel():
    name = fresh("Cell")
    first = run_cell(CELL, name)
    second = run_cell(CELL, name)  # new function objects with the same code
    assert second["DEF"] is not first["DEF"]
    assert second["Op"] is first["Op"]
    assert second["KERNEL"] is first["KERNEL"]
    assert registry.get_op_def(name) is first["DEF"]
    assert len(registry.kernels_for(name)) == 1
    s = Scope.new_root_scope()
    assert mg.Session(s, mg.SessionConfig(devices=_cpu())).run(second["Op"](s, [3])).tolist() == [6]


def test_the_same_op_def_object_registered_twice_returns_the_same_builder():
    name = fresh("Twice")
    op_def = OpDef(name, inputs=["x: int32"], outputs=["y: int32"])
    assert mg.register_op(op_def) is mg.register_op(op_def)


@pytest.mark.parametrize(
    "change, what",
    [
        (('doc="Doubles x."', 'doc="Triples x."'), "its doc differ"),
        (("T: {int32, float32}", "T: {int32, float64}"), "its attrs differ"),
        (('outputs=["y: T"]', 'outputs=["z: T"]'), "its outputs differ"),
        (("return ctx.input_shapes[0]", "return [None]"), "its shape function differs"),
    ],
)
def test_a_different_definition_under_a_taken_name_is_already_exists(change, what):
    name = fresh("Changed")
    run_cell(CELL, name)
    with pytest.raises(AlreadyExistsError, match=f"already registered, with a different .*{what}"):
        run_cell(CELL.replace(*change), name)


def test_a_shape_function_with_different_closure_values_is_different():
    name = fresh("Closure")

    def make(k):
        return OpDef(name, outputs=["y: int32"], shape_fn=lambda ctx: [k])

    mg.register_op(make(1))
    mg.register_op(make(1))
    with pytest.raises(AlreadyExistsError, match="its shape function differs"):
        mg.register_op(make(2))


def test_reregistering_a_hand_written_builder_binds_the_registered_op_def():
    name = fresh("HandAgain")

    def define():
        class Custom(OpBuilder):
            def __init__(self, scope, x):
                self._build(scope, [x], {})

        op_def = OpDef(name, inputs=["x: int32"], outputs=["y: int32"])
        return mg.register_op(op_def, builder=Custom)

    first, second = define(), define()
    assert second is not first
    assert second.op_def is first.op_def is registry.get_op_def(name)


# -- kernels -------------------------------------------------------------------------------------


def _cpu():
    return [mg.get_devices()[0]]


def test_a_different_kernel_function_under_a_taken_key_says_how_to_replace_it():
    name = fresh("Replace")
    cell = run_cell(CELL, name)
    with pytest.raises(AlreadyExistsError, match="already registered .*kernel.*") as info:
        mg.register_kernel(name, "CPU", lambda ctx, x, **_: x * 3)
    message = str(info.value)
    assert "higher priority (priority=1)" in message and "label" in message
    assert len(registry.kernels_for(name)) == 1
    # The documented ways: a higher priority wins; a label is chosen per node.
    mg.register_kernel(name, "CPU", lambda ctx, x, **_: x * 3, priority=1)
    mg.register_kernel(name, "CPU", lambda ctx, x, **_: x * 5, label="five")
    s = Scope.new_root_scope()
    config = mg.SessionConfig(devices=_cpu())
    plain = cell["Op"](s, [1])
    labelled = cell["Op"](s.with_kernel_label("five"), [1])
    assert mg.Session(s, config).run([plain, labelled]) == [np.array([3]), np.array([5])]


def test_the_same_kernel_with_other_host_memory_is_already_exists():
    name = fresh("Host")
    mg.register_op(OpDef(name, inputs=["x: int32"], outputs=["y: int32"]))

    def kernel(ctx, x):
        return x

    mg.register_kernel(name, "CPU", kernel)
    assert mg.register_kernel(name, "cpu", kernel) is registry.kernels_for(name)[0]
    with pytest.raises(AlreadyExistsError):
        mg.register_kernel(name, "CPU", kernel, host_memory=["x"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"label": 5}, "a label is a printable string"),
        ({"label": "loud\n"}, "a label is a printable string"),
        ({"priority": "1"}, "a priority is an int"),
        ({"priority": True}, "a priority is an int"),
    ],
)
def test_kernel_label_and_priority_are_typed(kwargs, message):
    name = fresh("KernelArgs")
    mg.register_op(OpDef(name, inputs=["x: int32"], outputs=["y: int32"]))
    with pytest.raises(InvalidArgumentError, match=message):
        mg.register_kernel(name, "CPU", lambda ctx, x: x, **kwargs)
    assert registry.kernels_for(name) == []


# -- device types --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "device, hint",
    [("TPU", "Known device types: CPU, GPU"), ("GUP", "Did you mean GPU"), ("cpux", "CPU")],
)
def test_kernels_for_unknown_device_types_are_refused(device, hint):
    name = fresh("Device")
    mg.register_op(OpDef(name, inputs=["x: int32"], outputs=["y: int32"]))
    with pytest.raises(InvalidArgumentError, match=f"unknown device type '{device}'") as info:
        mg.register_kernel(name, device, lambda ctx, x: x)
    assert hint in str(info.value)
    assert registry.kernels_for(name) == []


def test_a_registered_device_type_is_accepted_by_kernels_and_scopes():
    name = fresh("NewDevice")
    mg.register_op(OpDef(name, inputs=["x: int32"], outputs=["y: int32"]))
    device_type = f"XPU{next(_counter)}"
    with pytest.raises(InvalidArgumentError):
        Scope.new_root_scope().with_device(f"/device:{device_type}:0")
    assert registry.register_device_type(device_type.lower()) == device_type
    assert registry.register_device_type(device_type) == device_type  # idempotent
    assert device_type in registry.device_types()
    kernel = mg.register_kernel(name, device_type.lower(), lambda ctx, x: x)
    assert kernel.device_type == device_type
    scope = Scope.new_root_scope().with_device(f"/device:{device_type}:0")
    assert scope.device.device_type == device_type


@pytest.mark.parametrize("device", ["nonsense", "/device:TPU:0", "/job:worker/device:GUP:0"])
def test_scopes_refuse_unknown_device_types(device):
    with pytest.raises(InvalidArgumentError, match="unknown device type"):
        Scope.new_root_scope().with_device(device)


@pytest.mark.parametrize(
    "device",
    [
        "/job:worker/task:1/device:CPU:0",
        "/job:ps/replica:0/task:3",
        "/job:worker",
        "gpu",
        "/device:GPU:*",
        "cpu:0",
    ],
)
def test_job_and_task_parts_stay_valid(device):
    assert Scope.new_root_scope().with_device(device).device is not None


@pytest.mark.parametrize("bad", ["", "1PU", "T PU", "TPÜ", 5, None])
def test_register_device_type_refuses_non_names(bad):
    with pytest.raises(InvalidArgumentError, match="invalid device type"):
        registry.register_device_type(bad)


# -- aliases ---------------------------------------------------------------------------------


def test_gather_is_a_recorded_alias_of_gather_v2():
    import ops  # noqa: F401 - registers the gather family

    assert registry.alias_of("Gather") == "GatherV2"
    assert registry.list_aliases()["Gather"] == "GatherV2"
    assert registry.alias_of("GatherV2") is None
    with pytest.raises(NotFoundError, match="a builder that makes GatherV2 nodes"):
        registry.get_op_def("Gather")


def test_aliases_cannot_take_op_names_or_other_aliases():
    import ops  # noqa: F401

    with pytest.raises(AlreadyExistsError, match="an op type has that name"):
        mg.op_builder("GatherV2", "GatherNd")
    with pytest.raises(AlreadyExistsError, match="already aliases GatherV2"):
        mg.op_builder("GatherNd", "Gather")
    assert mg.op_builder("GatherV2", "Gather").op_def is registry.get_op_def("GatherV2")
    with pytest.raises(AlreadyExistsError, match="the name of a builder aliasing GatherV2"):
        mg.register_op(OpDef("Gather"))
