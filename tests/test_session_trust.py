"""What a hostile or careless user can do to a Session, and what they get: typed errors for bad
arguments and configs, kernels that cannot reach the caller's fed arrays, user kernels whose
outputs are checked, placement errors with source lines, and bounded costs at scale."""

import collections
import difflib
import gc
import inspect
import tracemalloc

import _exec_ops as xops
import numpy as np
import pytest

import minigraph
import minigraph.graph
import minigraph.plan
from minigraph import (
    Const,
    Identity,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    Placeholder,
    RunMetadata,
    RunOptions,
    Scope,
    Session,
    SessionConfig,
)
from minigraph.devices import CpuDevice
from minigraph.testing import SimulatedGpuDevice, simulated_gpus

MODES = {
    "generated": (SessionConfig(), None),
    "traced": (SessionConfig(), RunOptions(trace=True)),
    "parallel": (SessionConfig(inter_op_threads=4), None),
    "checked": (SessionConfig(check_kernel_outputs=True), None),
}


@pytest.fixture
def scope(exec_ops):
    return Scope.new_root_scope()


@pytest.fixture(params=list(MODES))
def mode(request):
    return MODES[request.param]


def _traced_peak(fn):
    """(fn(), the peak of traced memory during it above the memory traced as it began)."""
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    return out, peak


# -- run arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "feed_dict, message",
    [
        ("abc", r"feed_dict must be a dict \{tensor: value\}; got str"),
        ([("p", 1.0)], r"got list \(for a list of \(key, value\) pairs, pass dict\(pairs\)\)"),
        (5, "got int"),
        ([], "got list"),
    ],
)
def test_feed_dict_must_be_a_mapping(scope, feed_dict, message):
    p = Placeholder(scope.with_op_name("p"), minigraph.float32)
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match=message):
            sess.run(p, feed_dict)
        assert sess.run(p, {"p": 1.0}) == 1.0


def test_options_and_run_metadata_types(scope):
    x = Const(scope, 1.0)
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match="options must be a RunOptions; got str"):
            sess.run(x, options="trace")
        with pytest.raises(InvalidArgumentError, match="run_metadata must be a RunMetadata; got"):
            sess.run(x, run_metadata=5)
        with pytest.raises(InvalidArgumentError, match="RunOptions.trace must be a bool"):
            RunOptions(trace="yes")
        assert sess.run(x, options=RunOptions(trace=True), run_metadata=RunMetadata()) == 1.0


class Unprintable:
    def __repr__(self):
        raise RuntimeError("no repr")


def test_fetching_an_unprintable_object_is_a_typed_error(scope):
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match="cannot fetch Unprintable a Unprintable"):
            sess.run([Const(scope, 1), Unprintable()])


def test_fetch_structures_with_unusual_constructors_come_back_as_their_base_type(scope):
    class Labelled(tuple):
        def __new__(cls, label, items):
            return super().__new__(cls, items)

    x = Const(scope, 1)
    with Session(scope) as sess:
        out = sess.run([Labelled("a", [x, x]), {"k": x}])
    assert type(out[0]) is tuple and out[0] == (1, 1)


# -- SessionConfig -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"intra_op_threads": "4"}, r"intra_op_threads must be an int; got str '4'"),
        ({"intra_op_threads": 2.5}, r"intra_op_threads must be an int; got float 2.5"),
        ({"inter_op_threads": True}, r"inter_op_threads must be an int; got bool True"),
        ({"inter_op_threads": 0}, r"inter_op_threads must be >= 1 and <= 4096; got int 0"),
        ({"intra_op_threads": -3}, r"must be >= 1"),
        ({"intra_op_threads": 10**9}, r"<= 4096; got int 1000000000"),
        ({"devices": "CPU"}, r"devices must be a list or tuple of Device objects; got str"),
        ({"devices": ["CPU:0"]}, r"devices must be a list or tuple of Device objects"),
        ({"devices": {"cpu": CpuDevice(0)}}, r"devices must be a list or tuple"),
        ({"devices": [SimulatedGpuDevice(0)]}, r"a session needs a host \(CPU\) device"),
        ({"devices": [CpuDevice(0), CpuDevice(0)]}, r"names a device twice"),
        ({"allow_soft_placement": "no"}, r"allow_soft_placement must be a bool; got str"),
        ({"log_device_placement": 1}, r"log_device_placement must be a bool; got int 1"),
        ({"check_kernel_outputs": "all"}, r"check_kernel_outputs must be None, True or False"),
        ({"connect_timeout": 0}, r"connect_timeout must be a number of seconds > 0; got int 0"),
        ({"connect_timeout": "1"}, r"connect_timeout must be a number of seconds > 0; got str"),
        ({"cluster": ["tcp://x:1"]}, r"cluster maps job names to lists of worker addresses"),
        ({"op_modules": "ops"}, r"op_modules must be a list of module names; got str 'ops'"),
        ({"op_modules": [1]}, r"op_modules must be a list of module names"),
    ],
)
def test_session_config_is_validated_when_built(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        SessionConfig(**kwargs)


def test_session_config_canonical_values():
    config = SessionConfig(intra_op_threads=np.int64(3), devices=[CpuDevice(0)])
    assert type(config.intra_op_threads) is int and config.intra_op_threads == 3
    assert type(config.devices) is tuple  # frozen, like the rest of the config
    assert SessionConfig(allow_soft_placement=np.bool_(False)).allow_soft_placement is False


def test_session_takes_only_a_session_config(scope):
    with pytest.raises(InvalidArgumentError, match="config must be a SessionConfig; got dict"):
        Session(scope, {"inter_op_threads": 2})


# -- kernel errors that cannot be printed ----------------------------------------------------------


def test_an_exception_whose_str_raises_is_still_a_typed_error(scope, mode):
    config, options = mode
    bad = xops.Fail(scope.with_op_name("bad"), Const(scope, [1.0]), kind="badstr")
    with Session(scope, config) as sess:
        with pytest.raises(
            InternalError,
            match=r"UnprintableError: <str\(\) of the exception failed: RuntimeError>\n\t "
            r"\[\[node bad \(ExecTestFail\)",
        ) as info:
            sess.run(bad, options=options)
    assert type(info.value.__cause__) is xops.UnprintableError


def test_a_shape_function_raising_an_unprintable_exception(exec_ops):
    def shape_fn(ctx):
        raise xops.UnprintableError()

    op = minigraph.register_op(
        minigraph.OpDef("TrustUnprintableShape", inputs=["x: T"], outputs=["y: T"],
                        attrs=["T: type"], shape_fn=shape_fn)
    )  # fmt: skip
    scope = Scope.new_root_scope()
    with pytest.raises(InternalError, match=r"raised UnprintableError: <str\(\) of the exc"):
        op(scope, [1.0])


# -- feeds: keys -----------------------------------------------------------------------------------


def test_one_tensor_fed_under_two_keys_is_refused(scope, events):
    p = Placeholder(scope.with_op_name("x"), minigraph.int32)
    y = xops.Record(scope, p)
    same = np.array(1, np.int32)
    with Session(scope) as sess:
        for feed in (
            {p.output: 1, "x:0": 2},
            {p: 1, "x": 2},
            {"x:0": same, p: same},  # even the very same value: one tensor, one key
        ):
            with pytest.raises(
                InvalidArgumentError, match=r"Tensor 'x:0' is fed twice, under the keys .* and "
            ):
                sess.run(y, feed)
        assert events == []
        assert sess.run(y, {"x:0": 3}) == 3


# -- feeds: casts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, dtype",
    [
        (np.random.default_rng(0).standard_normal(3), minigraph.float32),  # what randn gives
        (np.array([1.5, -2.25, 3.0], np.float32), minigraph.float16),
        (np.array([1.5, -2.25, 3.0], np.float64), minigraph.bfloat16),
        (np.array([1, -2, 3], np.int64), minigraph.int32),
        (np.array([1, 2, 200], np.int32), minigraph.uint8),
        (np.array([1, 2, 3], np.uint64), minigraph.int8),
        (np.array([1, -2, 3], np.int8), minigraph.int64),
        (np.array([1 + 2j, 3, -1j], np.complex128), minigraph.complex64),
        (np.array([1, 2, 3], np.int16), minigraph.float32),  # exact widening across kinds
        (np.array([1.5, 2, 3], np.float32), minigraph.complex64),
    ],
)
def test_feeds_accept_same_kind_and_exact_casts(scope, value, dtype):
    p = Placeholder(scope, dtype, shape=[3])
    y = Identity(scope, p)
    with Session(scope) as sess:
        out = sess.run(y, {p: value})
    assert out.dtype == dtype.np_dtype
    np.testing.assert_array_equal(out, value.astype(dtype.np_dtype))


def test_feeding_a_numpy_scalar_casts_it_too(scope):
    p = Placeholder(scope, minigraph.float32, shape=[])
    with Session(scope) as sess:
        out = sess.run(Identity(scope, p), {p: np.float64(0.1)})
    assert out.dtype == np.float32 and out == np.float32(0.1)


@pytest.mark.parametrize(
    "value, dtype, message",
    [
        (np.array([1, 2**31], np.int64), minigraph.int32,
         r"the value 2147483648 at \[1\] is out of its range \[-2147483648, 2147483647\]"),
        (np.array([[0, -1]], np.int32), minigraph.uint16,
         r"the value -1 at \[0, 1\] is out of its range \[0, 65535\]"),
        (np.array([200], np.uint8), minigraph.int8, r"the value 200 at \[0\] is out of its"),
        (np.array([2**63], np.uint64), minigraph.int64, r"the value 9223372036854775808 at"),
        (np.array([1.0, 1e300], np.float64), minigraph.float32,
         r"the value 1e\+300 at \[1\] overflows it"),
        (np.array([1e300j]), minigraph.complex64, r"overflows it"),
        (np.array([1.5], np.float32), minigraph.int32, r"float to integer casts may change"),
        (np.array([1 + 0j]), minigraph.float64, r"complex to float casts may change"),
        (np.array([2**40], np.int64), minigraph.float32, r"integer to float casts may change"),
        (np.array([True]), minigraph.int32, r"bool is not cast to or from numbers"),
        (np.array([1], np.uint8), minigraph.bool_, r"bool is not cast to or from numbers"),
        (np.bool_(True), minigraph.float32, r"bool is not cast to or from numbers"),
        (np.array([1]), minigraph.string, r"numbers are not cast to strings"),
        (np.array(["1"]), minigraph.float32, r"strings and objects are not cast to numbers"),
        (np.array([1], dtype=object), minigraph.int32, r"strings and objects are not cast"),
        (np.array(["2020-01-01"], "datetime64[D]"), minigraph.int64, r"no minigraph equivalent"),
        (np.ma.masked_array([1.0], mask=[True]), minigraph.float64, r"masked arrays"),
    ],
)  # fmt: skip
def test_feeds_refuse_casts_that_change_values(scope, events, value, dtype, message):
    p = Placeholder(scope.with_op_name("p"), dtype)
    y = xops.Record(scope, Identity(scope, p))
    with Session(scope) as sess:
        with pytest.raises(InvalidArgumentError, match=message) as info:
            sess.run(y, {p: value})
    assert "for Tensor 'p:0' of dtype " + dtype.name in str(info.value)
    assert info.value.node_name == "p"
    assert events == []


def test_a_fed_object_that_fails_to_convert_is_a_typed_error(scope):
    class Hostile:
        def __array__(self, *args, **kwargs):
            raise RuntimeError("no array here")

    p = Placeholder(scope.with_op_name("p"), minigraph.float32)
    with Session(scope) as sess:
        with pytest.raises(
            InvalidArgumentError,
            match=r"Tensor 'p:0' of dtype float32: converting it raised RuntimeError: no array",
        ):
            sess.run(p, {p: Hostile()})


class Tagged(np.ndarray):
    """An ndarray subclass, as libraries make them."""


@pytest.mark.usefixtures("cpu_only")  # host arrays and read-only views
def test_ndarray_subclasses_are_fed_as_plain_arrays(scope, exec_ops):
    seen = []
    exec_ops.CALLS.append(lambda ctx, x: seen.append(type(x)))
    p = Placeholder(scope, minigraph.float64, shape=[1, 2])
    with Session(scope) as sess:
        out = sess.run(xops.Call(scope, p), {p: np.array([[1.0, 2.0]]).view(Tagged)})
    assert type(out) is np.ndarray and seen == [np.ndarray]


# -- feeds: what kernels can do to them ------------------------------------------------------------


@pytest.mark.usefixtures("cpu_only")  # host arrays and read-only views
def test_a_user_kernel_cannot_modify_the_callers_fed_array(scope, mode):
    config, options = mode
    p = Placeholder(scope.with_op_name("p"), minigraph.int32, shape=[3])
    y = xops.Mutate(scope.with_op_name("y"), p)
    fed = np.array([1, 2, 3], np.int32)
    with Session(scope, config) as sess:
        with pytest.raises(InvalidArgumentError, match=r"read-only.*\n\t \[\[node y \(ExecTestM"):
            sess.run(y, {p: fed}, options=options)
        assert fed.tolist() == [1, 2, 3] and fed.flags.writeable
        # Through a trusted pass-through (Identity) too.
        with pytest.raises(InvalidArgumentError, match="read-only"):
            sess.run(xops.Mutate(scope, Identity(scope, p)), {p: fed}, options=options)
        assert fed.tolist() == [1, 2, 3]
        # A kernel may still modify what it made itself.
        out = sess.run(xops.Mutate(scope, xops.AddOne(scope, p)), {p: fed}, options=options)
        assert out.tolist() == [3, 4, 5] and fed.tolist() == [1, 2, 3]


@pytest.mark.usefixtures("cpu_only")  # host arrays and read-only views
def test_a_result_is_never_a_view_of_a_fed_array_unless_it_is_the_fed_tensor(scope, mode):
    config, options = mode
    p = Placeholder(scope, minigraph.float64, shape=[3])
    fed = np.array([1.0, 2.0, 3.0])
    reverse = xops.View(scope, p, mode="reverse")
    same = xops.View(scope, p, mode="same")
    deep = xops.View(scope, Identity(scope, reverse), mode="reverse")
    fetches = [reverse, same, deep, Identity(scope, p), p]
    with Session(scope, config) as sess:
        r, s, d, i, f = sess.run(fetches, {p: fed}, options=options)
    assert r.tolist() == [3.0, 2.0, 1.0] and not np.shares_memory(r, fed)
    assert d.tolist() == [1.0, 2.0, 3.0] and not np.shares_memory(d, fed)
    # Passed through (returned as is by a kernel): copies, since they are not the fed tensor.
    assert s.tolist() == i.tolist() == [1.0, 2.0, 3.0]
    assert not np.shares_memory(s, fed) and not np.shares_memory(i, fed)
    assert f is fed  # the fed tensor itself, given back as is
    fed[0] = 42.0
    assert r.tolist() == [3.0, 2.0, 1.0] and d.tolist() == [1.0, 2.0, 3.0]
    assert s.tolist() == i.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.usefixtures("cpu_only")  # host arrays and read-only views
def test_built_in_kernels_get_fed_arrays_as_they_are(scope):
    """Trusted kernels are neither checked nor given read-only views: no per-feed cost."""
    p = Placeholder(scope, minigraph.float32, shape=[2])
    fed = np.array([1.0, 2.0], np.float32)
    trusted = xops.View(scope.with_kernel_label("trusted"), p, mode="same")
    with Session(scope) as sess:
        assert sess.run(p, {p: fed}) is fed
        # Pass-throughs come back as copies (only the fed tensor itself is the fed array).
        assert sess.run(Identity(scope, p), {p: fed}).tolist() == [1.0, 2.0]
        assert not np.shares_memory(sess.run(trusted, {p: fed}), fed)
        plan = sess._plans[next(iter(sess._plans))]
        assert plan.simple and not plan.protect and not plan.unalias
        assert all(step.check is None for step in plan.steps)


def test_on_a_gpu_user_kernels_get_private_copies_of_fed_arrays(scope, sim_gpus):
    """A host array fed to a GPU kernel is copied onto the GPU anyway; a device array fed as
    is would be the caller's own, so an untrusted kernel gets a copy of it."""
    cpu, gpu0, _ = sim_gpus
    p = Placeholder(scope.with_op_name("p"), minigraph.int32, shape=[3])
    y = xops.Mutate(scope.with_op_name("y").with_device("/gpu:0"), p)
    host = np.array([1, 2, 3], np.int32)
    device = gpu0.from_host(host)
    with Session(scope) as sess:
        assert sess.run(y, {p: host}).tolist() == [2, 3, 4]
        assert sess.run(y, {p: device}).tolist() == [2, 3, 4]
        assert sess.run(y, {p: device}).tolist() == [2, 3, 4]
    assert host.tolist() == [1, 2, 3] and device.tolist() == [1, 2, 3]


# -- kernel outputs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "returned, message",
    [
        ("none", r"returned a NoneType as output 0; expected a numpy.ndarray of float32 \[2\]"),
        ("list", r"returned a list as output 0; expected a numpy.ndarray"),
        ("tuple", r"returned a tuple as output 0"),
        ("subclass", r"returned a numpy.ma.MaskedArray as output 0"),
        ("float64", r"returned output 0 with dtype float64; the graph says float32"),
        ("short", r"returned output 0 with shape \[1\]; the graph says \[2\]"),
        ("rank", r"returned output 0 with shape \[1, 2\]; the graph says \[2\]"),
    ],
)
def test_user_kernel_outputs_are_checked_by_default(scope, mode, returned, message):
    config, options = mode
    bad = xops.Returns(scope.with_op_name("bad"), Const(scope, [1.0, 2.0]), mode=returned)
    with Session(scope, config) as sess:
        with pytest.raises(InternalError, match=message) as info:
            sess.run(bad, options=options)
    text = str(info.value)
    assert text.startswith(f"kernel _exec_ops._returns ({xops.__file__}:")
    assert text.endswith("]]") and "[[node bad (ExecTestReturns) on " in text


def test_numpy_scalars_from_user_kernels_become_arrays(scope, mode):
    config, options = mode
    one = xops.Returns(scope, Const(scope, 7.0), mode="scalar")
    with Session(scope, config) as sess:
        out = sess.run(one, options=options)
    assert type(out) is np.ndarray and out.shape == () and out == 7.0


def test_trusted_kernels_skip_the_checks_unless_asked(scope):
    bad = xops.Returns(scope.with_kernel_label("trusted"), Const(scope, [1.0]), mode="float64")
    with Session(scope) as sess:
        assert sess.run(bad).dtype == np.float64  # trusted: unchecked
    with Session(scope, SessionConfig(check_kernel_outputs=True)) as sess:
        with pytest.raises(InternalError, match="dtype float64; the graph says float32"):
            sess.run(bad)
    user = xops.Returns(scope, Const(scope, [1.0]), mode="float64")
    with Session(scope, SessionConfig(check_kernel_outputs=False)) as sess:
        assert sess.run(user).dtype == np.float64  # checks off


def test_output_checks_on_a_gpu_and_for_host_memory_outputs(scope, sim_gpus):
    bad = xops.Returns(scope.with_device("gpu"), Const(scope, [1.0]), mode="float64")
    two = xops.TwoOut(scope.with_kernel_label("wrong-second"), [1, 2])
    with Session(scope) as sess:
        with pytest.raises(InternalError, match="dtype float64; the graph says float32"):
            sess.run(bad)
        with pytest.raises(InternalError, match="output 1 with dtype int64; the graph says int32"):
            sess.run(two.outputs)


def test_register_kernel_trusted_must_be_a_bool(exec_ops):
    with pytest.raises(InvalidArgumentError, match="trusted must be a bool, got str"):
        minigraph.register_kernel("ExecTestReturns", "CPU", lambda ctx, x: x, trusted="yes")


# -- fetching builders of several outputs ----------------------------------------------------------


def test_a_builder_of_several_outputs_fetches_all_of_them_by_name(scope):
    two = xops.TwoOut(scope.with_op_name("two"), [1, 2])
    with Session(scope) as sess:
        out = sess.run(two)
        assert type(out).__name__ == "ExecTestTwoOutOutputs" and out._fields == ("a", "b")
        assert out.a.tolist() == [1, 2] and out.b.tolist() == [2, 3]
        a, b = out
        assert b.tolist() == [2, 3]
        nested = sess.run({"two": two, "list": [two, two.a]})
        assert nested["two"].b.tolist() == [2, 3] and nested["list"][1].tolist() == [1, 2]
        assert nested["list"][0].a.tolist() == [1, 2]
        assert sess.run(two.operation) is None  # an Operation still runs for its effect


# -- placement errors ------------------------------------------------------------------------------


def test_placement_errors_carry_the_source_line(scope):
    strict = SessionConfig(allow_soft_placement=False)
    line = inspect.currentframe().f_lineno + 1
    y = xops.CpuOnly(scope.with_op_name("y").with_device("/gpu:0"), [1.0])
    with Session(scope, strict) as sess:
        with pytest.raises(InvalidArgumentError, match="Cannot assign a device") as info:
            sess.run(y)
    assert f"[[node y (ExecTestCpuOnly), defined at {__file__}:{line}]]" in str(info.value)
    line = inspect.currentframe().f_lineno + 1
    z = xops.NoKernel(scope.with_op_name("z"), [1.0])
    with Session(scope) as sess:
        with pytest.raises(NotFoundError, match="Cannot assign a device") as info:
            sess.run(z)
    assert f"[[node z (ExecTestNoKernel), defined at {__file__}:{line}]]" in str(info.value)


def test_placement_errors_of_colocated_groups_name_every_source(scope):
    strict = SessionConfig(allow_soft_placement=False)
    a = xops.CpuOnly(scope.with_op_name("a"), [1.0])
    b = xops.GpuOnly(scope.with_op_name("b").colocate_with(a), a)
    with Session(scope, strict) as sess:
        with pytest.raises(InvalidArgumentError) as info:
            sess.run(b)
    assert "[[node a (ExecTestCpuOnly), defined at " in str(info.value)
    assert "[[node b (ExecTestGpuOnly), defined at " in str(info.value)


# -- scale -----------------------------------------------------------------------------------------


def test_unknown_name_suggestions_are_bounded_in_large_graphs(monkeypatch):
    scope = Scope.new_root_scope()
    n = minigraph.graph._SUGGEST_ALL * 2
    for i in range(n):
        minigraph.NoOp(scope.with_op_name(f"node_{i}"))
    seen = []
    real = difflib.get_close_matches

    def counting(word, possibilities, *args, **kwargs):
        seen.append(len(possibilities))
        return real(word, possibilities, *args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", counting)
    with pytest.raises(NotFoundError, match=r"Did you mean 'node_1234'"):
        scope.graph.get_operation("node_1234x")
    with pytest.raises(NotFoundError, match=r"node named 'zz'\.$"):
        scope.graph.get_operation("zz")
    assert seen and max(seen) <= 2 * minigraph.graph._SUGGEST_WINDOW
    # Small graphs are searched in full.
    small = Scope.new_root_scope()
    minigraph.NoOp(small.with_op_name("alpha"))
    with pytest.raises(NotFoundError, match=r"Did you mean 'alpha'"):
        small.graph.get_operation("alpah")
    # The sorted names follow the graph as it grows.
    minigraph.NoOp(scope.with_op_name("zz_new"))
    with pytest.raises(NotFoundError, match=r"Did you mean 'zz_new'"):
        scope.graph.get_operation("zz_nwe")


def test_plans_do_not_leak_their_code_file_names(scope):
    """Every compiled plan names its generated code; names of dead plans are reused (CPython
    keeps code file names interned for good)."""
    x = Const(scope, 1)
    names = set()
    for _ in range(50):
        with Session(scope) as sess:
            sess.run(x)
            sess.run(x)  # the second run generates the plan's code
            names.add(next(iter(sess._plans.values())).code.co_filename)
        del sess
        gc.collect()
    assert len(names) <= 3


def test_wide_fetches_compile_and_share_results(scope):
    p = Placeholder(scope, minigraph.int32, shape=[])
    outs = [xops.AddOne(scope, p) for _ in range(3000)]
    with Session(scope) as sess:
        values = sess.run(outs + outs[::-1] + [p], {p: 1})
        assert len(values) == 6001 and all(v == 2 for v in values[:6000]) and values[-1] == 1
        plan = next(iter(sess._plans.values()))
        assert len(plan.fetch_slots) == 3001


@pytest.mark.parametrize("execution", ["generated", "traced", "parallel"])
def test_peak_memory_on_a_simulated_gpu_is_two_tensors(execution):
    """A chain of GPU nodes over a fed 8 MiB tensor holds at most the running kernel's input
    and output: the fed value's device copy is released after its last use."""
    config, options = {
        "generated": (SessionConfig(), None),
        "traced": (SessionConfig(), RunOptions(trace=True)),
        "parallel": (SessionConfig(inter_op_threads=2), None),
    }[execution]
    rows = 2048
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[rows, 1024])
    node = x
    for _ in range(10):
        node = minigraph.Identity(
            root.with_device("gpu"), xops.AddOne(root.with_device("gpu"), node)
        )
    value = np.zeros((rows, 1024), np.float32)
    with simulated_gpus(1) as (cpu, gpu0):
        with Session(root, config) as sess:
            sess.run(node, {x: value}, options=options)
            assert gpu0.copies_in == 1
            gc.collect()
            out, peak = _traced_peak(lambda: sess.run(node, {x: value}, options=options))
    assert out[0, 0] == 10.0
    assert peak < 2.5 * value.nbytes, peak / value.nbytes


# -- construction memo ---------------------------------------------------------------------------


def test_the_construction_memo_tells_bool_attrs_from_ints(exec_ops):
    """batch_dims=True must be refused even right after an identical node with batch_dims=1,
    whose canonical attrs the memo holds (True == 1 in Python)."""
    gather = pytest.importorskip("ops").GatherV2
    scope = Scope.new_root_scope()
    params = np.zeros((2, 3), np.float32)
    indices = np.zeros((2, 1), np.int32)
    assert gather(scope, params, indices, 1, batch_dims=1).shape.as_list() == [2, 1]
    with pytest.raises(InvalidArgumentError, match=r"attr 'batch_dims' \(int\): expected an int"):
        gather(scope, params, indices, 1, batch_dims=True)
    with pytest.raises(InvalidArgumentError, match=r"attr 'batch_dims' \(int\): expected an int"):
        gather(scope, params, indices, 1, batch_dims=1.0)


def test_fetched_multi_output_namedtuples_are_cached_per_op(scope):
    one = xops.TwoOut(scope, [1])
    two = xops.TwoOut(scope, [2])
    with Session(scope) as sess:
        first, second = sess.run([one, two])
    assert type(first) is type(second)
    assert isinstance(first, tuple) and collections.namedtuple  # a namedtuple: a tuple


def test_a_builder_with_a_list_output_fetches_a_list(scope):
    partition = pytest.importorskip("ops").DynamicPartition
    data = np.array([10, 20, 30, 40], np.int32)
    parts = partition(scope, data, np.array([0, 1, 1, 0], np.int32), num_partitions=2)
    one = partition(scope, data, np.zeros(4, np.int32), num_partitions=1)
    with Session(scope) as sess:
        out, single = sess.run([parts, one])
    assert out._fields == ("outputs",)
    assert [v.tolist() for v in out.outputs] == [[10, 40], [20, 30]]
    # A builder of one (flat) output stands for that output, as everywhere else.
    assert single.tolist() == [10, 20, 30, 40]


@pytest.mark.parametrize("execution", ["generated", "traced", "parallel"])
def test_a_cast_feed_is_released_after_its_last_use(execution):
    """The float32 copy made of a float64 feed is the run's own value: freed like one."""
    gather = pytest.importorskip("ops").GatherV2
    config, options = MODES[execution]
    rows = 2048
    root = Scope.new_root_scope()
    x = Placeholder(root, minigraph.float32, shape=[rows, 1024])
    order = Const(root, np.arange(rows)[::-1].astype(np.int32))
    node = x
    for _ in range(6):
        node = gather(root, node, order, 0)
    value = np.zeros((rows, 1024), np.float64)  # cast to float32 on every run
    size = rows * 1024 * 4
    with Session(root, config) as sess:
        sess.run(node, {x: value}, options=options)
        gc.collect()
        out, peak = _traced_peak(lambda: sess.run(node, {x: value}, options=options))
    assert out.dtype == np.float32
    assert peak < 2.5 * size, peak / size
