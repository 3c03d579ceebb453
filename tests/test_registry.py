"""The op and kernel registries and register_op (minigraph/registry.py, minigraph/builder.py)."""

from __future__ import annotations

import inspect
import itertools

import pytest

import minigraph as mg
from minigraph import OpBuilder, OpDef, Scope, registry
from minigraph.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError

_counter = itertools.count()


def unique_op_name(stem: str = "Op") -> str:
    """A CamelCase op type name not used by any other test (the registry is process-global)."""
    return f"RegistryTest{stem}{next(_counter)}"


def _kernel(ctx, *inputs, **attrs):
    return inputs[0] if inputs else None


def make_op(stem="Op", **specs):
    """Registers a fresh op (default: `x: T -> y: T`) and returns (name, builder class)."""
    name = unique_op_name(stem)
    specs.setdefault("inputs", ["x: T"])
    specs.setdefault("outputs", ["y: T"])
    attrs = list(specs.pop("attrs", []))
    if not any(a.split(":")[0].strip() == "T" for a in attrs):
        attrs.append("T: type")  # the default `x: T` needs T declared, as in TF
    return name, mg.register_op(OpDef(name, attrs=attrs, **specs))


# -- ops -----------------------------------------------------------------------------------------


def test_register_op_returns_a_builder_class():
    name, builder = make_op(attrs=["T: {int32, float32}", "k: int = 3", "mode: string"])
    assert isinstance(builder, type) and issubclass(builder, OpBuilder)
    assert builder.__name__ == name
    assert builder.__module__ == __name__
    assert builder.op_def is registry.get_op_def(name)
    assert builder.__doc__ == registry.signature(name)
    params = inspect.signature(builder).parameters
    # An attr without a default follows the inputs positionally (TF's C++ wrappers); the others
    # are keyword-only.
    assert list(params) == ["scope", "x", "mode", "k"]
    assert params["k"].kind is inspect.Parameter.KEYWORD_ONLY and params["k"].default == 3
    assert params["mode"].default is inspect.Parameter.empty
    node = builder(Scope.new_root_scope(), [1.5], mode="m")
    assert node.operation.type == name
    assert node.operation.attrs == {"T": mg.float32, "k": 3, "mode": "m"}


def test_builder_doc_includes_the_op_doc():
    name = unique_op_name("Doc")
    builder = mg.register_op(OpDef(name, doc="  Does a thing.\n"))
    assert builder.__doc__ == f"{name}()\n\nDoes a thing."


def test_register_op_with_a_hand_written_builder():
    class Custom(OpBuilder):
        def __init__(self, scope, x, *, scale=2):
            self._build(scope, [x], {"scale": scale})

    name = unique_op_name("Custom")
    op_def = OpDef(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: type", "scale: int"])
    returned = mg.register_op(op_def, builder=Custom)
    assert returned is Custom
    assert Custom.op_def is op_def
    node = Custom(Scope.new_root_scope(), 1)
    assert node.operation.get_attr("scale") == 2
    assert node.operation.name == name


def test_register_op_rejects_a_builder_that_is_not_an_op_builder():
    name = unique_op_name("BadBuilder")
    with pytest.raises(InvalidArgumentError, match="builder must be an OpBuilder subclass"):
        mg.register_op(OpDef(name), builder=object)
    # Nothing was registered: the op can still be registered properly.
    with pytest.raises(NotFoundError, match=f"Op type not registered: '{name}'"):
        registry.get_op_def(name)
    mg.register_op(OpDef(name))
    assert name in registry.list_ops()


def test_registering_the_same_op_twice_raises():
    name, _ = make_op("Twice")
    first = registry.get_op_def(name)
    with pytest.raises(AlreadyExistsError, match=f"Op type '{name}' is already registered"):
        mg.register_op(OpDef(name, inputs=["a: int32"]))
    assert registry.get_op_def(name) is first


def test_registering_a_framework_op_name_again_raises():
    with pytest.raises(AlreadyExistsError, match="Op type 'Identity' is already registered"):
        mg.register_op(OpDef("Identity"))
    assert registry.signature("Identity") == "Identity(input: T) -> output: T"


def test_only_op_defs_can_be_registered():
    with pytest.raises(InvalidArgumentError, match="expected an OpDef, got str"):
        registry.add_op_def("Identity")


def test_get_op_def_unknown_op_suggests_close_names():
    with pytest.raises(NotFoundError, match=r"Op type not registered: 'Identty'\. Did you mean "):
        registry.get_op_def("Identty")
    with pytest.raises(NotFoundError, match=r"Did you mean [^?]*\bIdentity\b"):
        registry.get_op_def("Identty")
    with pytest.raises(NotFoundError, match=r"Did you mean [^?]*\bPlaceholder\b"):
        registry.get_op_def("PlaceHolder")


def test_get_op_def_unknown_op_without_close_names():
    with pytest.raises(NotFoundError, match=r"^Op type not registered: 'Qqqqqqqq'\. \(Registered"):
        registry.get_op_def("Qqqqqqqq")


def test_not_found_is_a_lookup_error():
    with pytest.raises(LookupError, match="Op type not registered"):
        registry.signature("Nope")


def test_list_ops():
    name, _ = make_op("Listed")
    ops = registry.list_ops()
    assert ops == sorted(ops)
    assert {"Const", "Identity", "NoOp", "Placeholder", name} <= set(ops)
    assert len(ops) == len(set(ops))


def test_op_builder_alias_with_its_own_default_name():
    name, _ = make_op("Aliased")
    alias = mg.op_builder(name, "Alias", default_name="Alias")
    assert alias.__name__ == "Alias"
    assert alias.__module__ == __name__
    scope = Scope.new_root_scope()
    assert alias(scope, 1).operation.name == "Alias"
    assert alias(scope, 1).operation.name == "Alias_1"
    assert alias(scope, 1).operation.type == name


# -- kernels: registration -----------------------------------------------------------------------


def test_register_kernel_for_an_unknown_op_raises():
    with pytest.raises(NotFoundError, match=r"Op type not registered: 'NoSuchOpForKernel'"):
        mg.register_kernel("NoSuchOpForKernel", "CPU", _kernel)


def test_register_kernel_returns_a_kernel_def():
    name, _ = make_op(
        outputs=["y: T", "n: int32"], inputs=["x: T", "axis: int32"], attrs=["k: int = 0"]
    )
    kernel = mg.register_kernel(
        name, "cpu", _kernel, type_constraints={"T": ["float32", mg.int32]},
        attr_constraints={"k": [0, 1]}, host_memory=["axis", "n"], label="lbl", priority=3,
    )  # fmt: skip
    assert kernel.op_type == name
    assert kernel.device_type == "CPU"
    assert kernel.fn is _kernel
    assert kernel.type_constraints == {"T": frozenset({mg.float32, mg.int32})}
    assert kernel.attr_constraints == {"k": frozenset({0, 1})}
    assert kernel.host_memory == {"axis", "n"}
    assert kernel.host_inputs == {1}
    assert kernel.host_outputs == {1}
    assert (kernel.label, kernel.priority) == ("lbl", 3)
    assert registry.kernels_for(name) == [kernel]
    assert registry.kernel_device_types(name) == ["CPU"]
    with pytest.raises(AttributeError, match="KernelDef is immutable"):
        kernel.priority = 5


def test_duplicate_kernel_raises():
    name, _ = make_op("Dup")
    mg.register_kernel(name, "CPU", _kernel, type_constraints={"T": [mg.int32]})
    with pytest.raises(
        AlreadyExistsError,
        match=f"a kernel for {name} on CPU with these constraints is already registered",
    ):
        mg.register_kernel(name, "cpu", lambda ctx, x, T: x, type_constraints={"T": ["int32"]})
    assert len(registry.kernels_for(name)) == 1


def test_kernels_differing_in_constraints_label_or_priority_are_not_duplicates():
    name, _ = make_op("NotDup")
    mg.register_kernel(name, "CPU", _kernel)
    mg.register_kernel(name, "CPU", _kernel, label="special")
    mg.register_kernel(name, "CPU", _kernel, priority=1)
    mg.register_kernel(name, "CPU", _kernel, type_constraints={"T": [mg.int32]})
    mg.register_kernel(name, "GPU", _kernel)
    assert len(registry.kernels_for(name)) == 5
    assert registry.kernel_device_types(name) == ["CPU", "GPU"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(device_type="not a type"), r"invalid device type 'not a type'"),
        (dict(device_type=""), r"invalid device type ''"),
        (dict(fn=42), r"kernel for .* on CPU is not callable"),
        (dict(type_constraints={"k": [mg.int32]}), r"type constraint on non-type attr 'k'"),
        (dict(type_constraints={"U": [mg.int32]}), r"has no attr 'U'; it has \['T', 'k'\]"),
        (dict(type_constraints={"T": ["int33"]}), r"unknown dtype name 'int33'"),
        (dict(attr_constraints={"nope": [1]}), r"has no attr 'nope'"),
        (dict(attr_constraints={"k": ["one"]}), r"attr 'k' \(int\): expected an int, got 'one'"),
        (dict(host_memory=["z"]), r"host_memory names \['z'\] are not inputs or outputs"),
    ],
)
def test_register_kernel_argument_errors(kwargs, message):
    name, _ = make_op("KernelArgs", attrs=["k: int = 0"])
    args = dict(device_type="CPU", fn=_kernel)
    args.update(kwargs)
    with pytest.raises(InvalidArgumentError, match=message):
        mg.register_kernel(name, args.pop("device_type"), args.pop("fn"), **args)
    assert registry.kernels_for(name) == []


# -- kernels: selection --------------------------------------------------------------------------


def test_find_kernel_selects_by_type_constraint():
    name, _ = make_op("ByType")
    ints = mg.register_kernel(name, "CPU", _kernel, type_constraints={"T": [mg.int32, mg.int64]})
    floats = mg.register_kernel(name, "CPU", _kernel, type_constraints={"T": [mg.float32]})
    assert registry.find_kernel(name, "CPU", {"T": mg.int64}) is ints
    assert registry.find_kernel(name, "CPU", {"T": mg.float32}) is floats


def test_find_kernel_selects_by_attr_constraint_values_and_predicates():
    name, _ = make_op("ByAttr", attrs=["mode: string = 'a'", "k: int = 0"])
    by_value = mg.register_kernel(name, "CPU", _kernel, attr_constraints={"mode": [b"a", "b"]})
    by_predicate = mg.register_kernel(
        name, "CPU", _kernel, attr_constraints={"k": lambda k: k > 10}, priority=-1
    )
    attrs = {"T": mg.int32, "mode": "b", "k": 0}
    assert registry.find_kernel(name, "CPU", attrs) is by_value
    assert registry.find_kernel(name, "CPU", {**attrs, "mode": "c", "k": 11}) is by_predicate
    with pytest.raises(NotFoundError, match=r"attr mode='c' not supported; attr k=3 not supported"):
        registry.find_kernel(name, "CPU", {**attrs, "mode": "c", "k": 3})


def test_find_kernel_matches_labels_exactly():
    name, _ = make_op("ByLabel")
    plain = mg.register_kernel(name, "CPU", _kernel)
    fast = mg.register_kernel(name, "CPU", _kernel, label="fast")
    assert registry.find_kernel(name, "CPU", {"T": mg.int32}) is plain
    assert registry.find_kernel(name, "CPU", {"T": mg.int32}, label="fast") is fast
    with pytest.raises(
        NotFoundError,
        match=r"kernel has no label, node asks for 'slow'; kernel has label 'fast', node asks for",
    ):
        registry.find_kernel(name, "CPU", {"T": mg.int32}, label="slow")


def test_labelled_kernels_do_not_serve_unlabelled_nodes():
    name, _ = make_op("OnlyLabel")
    mg.register_kernel(name, "CPU", _kernel, label="fast")
    with pytest.raises(NotFoundError, match=r"\(kernel has label 'fast'\)"):
        registry.find_kernel(name, "CPU", {"T": mg.int32})


def test_find_kernel_prefers_the_highest_priority():
    name, _ = make_op("ByPriority")
    low = mg.register_kernel(name, "CPU", _kernel, priority=-5)
    high = mg.register_kernel(name, "CPU", _kernel, priority=7, type_constraints={"T": ["int32"]})
    mid = mg.register_kernel(name, "CPU", _kernel, priority=0, type_constraints={"T": ["int64"]})
    assert registry.kernels_for(name) == [high, mid, low]
    assert registry.find_kernel(name, "CPU", {"T": mg.int32}) is high
    assert registry.find_kernel(name, "CPU", {"T": mg.int64}) is mid
    assert registry.find_kernel(name, "CPU", {"T": mg.float64}) is low


def test_find_kernel_ignores_kernels_of_other_device_types():
    name, _ = make_op("ByDevice")
    gpu = mg.register_kernel(name, "GPU", _kernel)
    cpu = mg.register_kernel(name, "CPU", _kernel)
    assert registry.find_kernel(name, "GPU", {"T": mg.int32}) is gpu
    assert registry.find_kernel(name, "CPU", {"T": mg.int32}) is cpu


def test_find_kernel_error_names_op_dtypes_device_and_available_kernels():
    name, _ = make_op("Missing", inputs=["x: T", "i: Tidx"], attrs=["Tidx: {int32, int64}"])
    mg.register_kernel(name, "CPU", _kernel)
    mg.register_kernel(
        name, "GPU", _kernel, type_constraints={"T": [mg.float32]}, host_memory=["i"]
    )
    with pytest.raises(
        NotFoundError, match=rf"^No registered kernel for op {name} on device type GPU "
    ) as info:
        registry.find_kernel(name, "GPU", {"T": mg.int32, "Tidx": mg.int64}, node_name="n1")
    message = str(info.value)
    assert message == (
        f"No registered kernel for op {name} on device type GPU with [T=int32, Tidx=int64] "
        "(T=int32 not in {float32}). Registered kernels: CPU; "
        "GPU (T in {float32}; host memory: i)"
    )
    assert info.value.node_name == "n1"
    assert info.value.op_type == name


def test_find_kernel_for_an_op_without_kernels():
    name, _ = make_op("NoKernels")
    with pytest.raises(
        NotFoundError,
        match=rf"^No registered kernel for op {name} on device type CPU with \[T=float32\]\. "
        r"Registered kernels: none$",
    ):
        registry.find_kernel(name, "CPU", {"T": mg.float32})


def test_framework_op_kernels():
    assert registry.kernel_device_types("Const") == ["CPU", "GPU"]
    assert registry.kernel_device_types("Identity") == ["CPU", "GPU"]
    assert registry.kernel_device_types("Placeholder") == ["CPU"]
    assert registry.kernel_device_types("NoOp") == ["CPU", "GPU"]
    gpu_const = registry.find_kernel("Const", "GPU", {"value": None, "dtype": mg.float32})
    assert gpu_const.device_type == "GPU"
    with pytest.raises(NotFoundError, match=r"op Const on device type GPU with \[dtype=string\]"):
        registry.find_kernel("Const", "GPU", {"value": None, "dtype": mg.string})
    assert registry.find_kernel("Const", "CPU", {"value": None, "dtype": mg.string})
