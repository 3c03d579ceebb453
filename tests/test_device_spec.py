"""DeviceSpec: parsing TF device names, canonical strings, compatibility and merging."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigraph
from minigraph import DeviceSpec, InvalidArgumentError
from minigraph.device_spec import as_device_spec

FULL = "/job:localhost/replica:0/task:0/device:GPU:1"


@pytest.mark.parametrize(
    "text, fields",
    [
        (FULL, ("localhost", 0, 0, "GPU", 1)),
        ("/device:GPU:1", (None, None, None, "GPU", 1)),
        ("/gpu:1", (None, None, None, "GPU", 1)),
        ("GPU:1", (None, None, None, "GPU", 1)),
        ("gpu", (None, None, None, "GPU", None)),
        ("/device:CPU:*", (None, None, None, "CPU", None)),
        ("cpu:0", (None, None, None, "CPU", 0)),
        ("/CPU:0", (None, None, None, "CPU", 0)),
        ("/device:gpu:12", (None, None, None, "GPU", 12)),
        ("/job:worker/task:3", ("worker", None, 3, None, None)),
        ("/replica:2", (None, 2, None, None, None)),
        ("  /gpu:0  ", (None, None, None, "GPU", 0)),
        ("", (None, None, None, None, None)),
    ],
)
def test_from_string_parses_full_and_partial_names(text, fields):
    spec = DeviceSpec.from_string(text)
    assert (spec.job, spec.replica, spec.task, spec.device_type, spec.device_index) == fields


@pytest.mark.parametrize(
    "text, canonical",
    [
        (FULL, FULL),
        ("/device:GPU:1", "/device:GPU:1"),
        ("/gpu:1", "/device:GPU:1"),
        ("GPU:1", "/device:GPU:1"),
        ("gpu", "/device:GPU:*"),
        ("/device:CPU:*", "/device:CPU:*"),
        ("cpu:0", "/device:CPU:0"),
        ("/job:localhost/gpu:1", "/job:localhost/device:GPU:1"),
        ("/task:0/job:w", "/job:w/task:0"),
        ("", ""),
    ],
)
def test_to_string_is_canonical(text, canonical):
    spec = DeviceSpec.from_string(text)
    assert spec.to_string() == canonical
    assert str(spec) == canonical
    assert repr(spec) == f"DeviceSpec({canonical!r})"
    assert DeviceSpec.from_string(canonical) == spec


def test_device_type_is_case_insensitive():
    assert DeviceSpec.from_string("/device:gpu:1") == DeviceSpec.from_string("/GPU:1")
    assert DeviceSpec(device_type="gpu", device_index=1).device_type == "GPU"
    assert hash(DeviceSpec.from_string("gpu:1")) == hash(DeviceSpec.from_string("GPU:1"))


@pytest.mark.parametrize(
    "text, why",
    [
        ("/device:GPU:x", r"device index 'x' is not a number or '\*'"),
        ("/gpu:1.5", r"device index '1.5' is not a number"),
        ("/gpu:-1", r"device index '-1' is not a number"),
        ("gpu:1:2", r"device index '1:2' is not a number"),
        ("/gpu:\u00b2", r"device index '\u00b2' is not a number"),  # '²'.isdigit() is True
        ("/job:", r"empty job"),
        ("/replica:x", r"replica must be a number"),
        ("/task:", r"task must be a number"),
        ("/task:\u0661", r"task must be a number"),  # Arabic-Indic digit one
        ("/device:", r"unrecognised part 'device:'"),
        ("/1gpu:0", r"unrecognised part '1gpu:0'"),
        ("/gpu 0", r"unrecognised part 'gpu 0'"),
        ("/gpu:0/cpu:0", r"more than one device type"),
    ],
)
def test_invalid_names_raise_invalid_argument_with_help(text, why):
    with pytest.raises(InvalidArgumentError, match=why) as info:
        DeviceSpec.from_string(text)
    message = str(info.value)
    assert message.startswith(f"invalid device name {text!r}")
    # The message shows what a valid name looks like.
    assert "expected e.g. '/job:localhost/replica:0/task:0/device:GPU:0'" in message
    assert "'gpu'" in message


def test_scope_with_device_rejects_invalid_names():
    scope = minigraph.Scope.new_root_scope()
    with pytest.raises(InvalidArgumentError, match=r"invalid device name '/device:GPU:one'"):
        scope.with_device("/device:GPU:one")


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_invalid_argument(text):
    try:
        spec = DeviceSpec.from_string(text)
    except InvalidArgumentError as e:
        assert "invalid device name" in str(e)
    else:
        # What parses round-trips through its canonical form.
        assert DeviceSpec.from_string(spec.to_string()) == spec


specs = st.builds(
    DeviceSpec,
    job=st.none() | st.sampled_from(["localhost", "worker"]),
    replica=st.none() | st.integers(0, 3),
    task=st.none() | st.integers(0, 3),
    device_type=st.none() | st.sampled_from(["CPU", "GPU", "gpu"]),
    device_index=st.none() | st.integers(0, 3),
)


@given(specs)
def test_round_trip_of_typed_specs(spec):
    if spec.device_type is None and spec.device_index is not None:
        spec = DeviceSpec(spec.job, spec.replica, spec.task, None, None)  # not expressible
    assert DeviceSpec.from_string(spec.to_string()) == spec


@given(specs, specs)
def test_is_compatible_with_is_symmetric_and_field_wise(a, b):
    assert a.is_compatible_with(b) == b.is_compatible_with(a)
    fields = ("job", "replica", "task", "device_type", "device_index")
    expected = all(
        getattr(a, f) is None or getattr(b, f) is None or getattr(a, f) == getattr(b, f)
        for f in fields
    )
    assert a.is_compatible_with(b) == expected
    assert a.is_compatible_with(a)


def test_is_compatible_with_examples():
    full = DeviceSpec.from_string(FULL)
    assert DeviceSpec.from_string("gpu").is_compatible_with(full)
    assert DeviceSpec.from_string("/device:GPU:*").is_compatible_with(full)
    assert DeviceSpec.from_string("/gpu:1").is_compatible_with(full)
    assert DeviceSpec.from_string("").is_compatible_with(full)
    assert not DeviceSpec.from_string("/gpu:0").is_compatible_with(full)
    assert not DeviceSpec.from_string("cpu").is_compatible_with(full)
    assert not DeviceSpec.from_string("/job:worker/gpu:1").is_compatible_with(full)


def test_device_spec_is_immutable():
    spec = DeviceSpec.from_string("/gpu:1")
    with pytest.raises(AttributeError, match="DeviceSpec is immutable"):
        spec.device_index = 2
    with pytest.raises(AttributeError, match="DeviceSpec is immutable"):
        spec.device_type = "CPU"
    assert spec.device_index == 1


def test_device_spec_is_hashable_and_equal_by_value():
    a = DeviceSpec.from_string("/device:GPU:1")
    b = DeviceSpec.from_string("gpu:1")
    c = DeviceSpec.from_string("gpu:2")
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert len({a, b, c}) == 2
    assert {a: "x"}[b] == "x"
    assert a != "/device:GPU:1"  # not equal to strings
    # An index without a type is not dropped from identity.
    assert DeviceSpec(device_index=1) != DeviceSpec()


def test_merge_from_overrides_fields_set_in_other():
    base = DeviceSpec.from_string("/job:localhost/replica:0/task:0/device:CPU:0")
    merged = base.merge_from(DeviceSpec.from_string("/gpu:1"))
    assert merged.to_string() == FULL
    # Unset fields of the other spec keep ours.
    assert base.merge_from(DeviceSpec()) == base
    assert DeviceSpec.from_string("/gpu:1").merge_from(DeviceSpec(job="w")).to_string() == (
        "/job:w/device:GPU:1"
    )
    # A new type without an index does not inherit the old type's index.
    assert DeviceSpec.from_string("/gpu:1").merge_from(DeviceSpec.from_string("cpu")) == (
        DeviceSpec.from_string("/device:CPU:*")
    )
    # Merging returns a new spec; neither input changes.
    assert base.to_string() == "/job:localhost/replica:0/task:0/device:CPU:0"


def test_merge_from_index_only():
    merged = DeviceSpec.from_string("/gpu:1").merge_from(DeviceSpec(device_index=3))
    assert merged == DeviceSpec.from_string("/gpu:3")


def test_is_partial():
    assert not DeviceSpec.from_string(FULL).is_partial
    assert DeviceSpec.from_string("/gpu:1").is_partial
    assert DeviceSpec.from_string("/job:localhost/replica:0/task:0/device:GPU:*").is_partial


def test_as_device_spec():
    spec = DeviceSpec.from_string("gpu")
    assert as_device_spec(spec) is spec
    assert as_device_spec(None) is None
    assert as_device_spec("") is None
    assert as_device_spec("   ") is None
    assert as_device_spec("/gpu:0") == DeviceSpec.from_string("GPU:0")
    with pytest.raises(
        InvalidArgumentError, match="a device must be a string or DeviceSpec; got 3"
    ):
        as_device_spec(3)
