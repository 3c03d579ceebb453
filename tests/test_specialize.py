"""Kernel specialisation (register_kernel(specialize=...), KernelSpec): the protocol, and every
specialised fast path checked against the general kernel on the same inputs, over several runs
of one session each."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import InternalError, InvalidArgumentError, KernelSpec, OpDef
from ops import GatherV2, Placeholder

# CPU behaviour (numpy kernels, host memory, TF's CPU errors): pinned to CPU:0.
pytestmark = pytest.mark.usefixtures("cpu_only")

FAST = mg.SessionConfig(intra_op_threads=1)
GENERAL = mg.SessionConfig(intra_op_threads=1, specialize_kernels=False)


def _outcome(sess: mg.Session, fetch, feed):
    """What a run gives: ('ok', value) or ('error', type, message, node)."""
    try:
        return ("ok", sess.run(fetch, feed))
    except mg.OpError as e:
        return ("error", type(e), e.message, e.node_name)


def _same(a, b) -> None:
    assert a[0] == b[0], (a, b)
    if a[0] == "ok":
        x, y = a[1], b[1]
        assert type(x) is type(y) is np.ndarray
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)
    else:
        assert a[1:] == b[1:]


def _specialised_steps(sess: mg.Session, kind: str) -> list[str]:
    """Names of the plan steps that run a specialised callable of this kind."""
    names = []
    for plan in sess._plans.values():
        for step in plan.steps:
            call = step.call.fallback if isinstance(step.call, mg.InlineCall) else step.call
            if getattr(call, "__name__", "") == kind:
                names.append(step.name)
    return names


TAKE = "gather_v2_constant_indices"  # one checked take
COPY = "gather_v2_constant_indices_general"  # the general kernel on writable indices
KINDS = (TAKE, COPY)


def _compare(fetch, feeds, root, expect=TAKE):
    """Runs every feed through a specialising and a general session, twice each, in turns;
    checks which specialisation (`expect`, or None for none) the node got."""
    fast, general = mg.Session(root, FAST), mg.Session(root, GENERAL)
    with fast, general:
        for _ in range(2):
            for feed in feeds:
                _same(_outcome(fast, fetch, feed), _outcome(general, fetch, feed))
        for kind in KINDS:
            assert bool(_specialised_steps(fast, kind)) == (kind == expect), kind
            assert not _specialised_steps(general, kind)


# -- GatherV2 with constant indices: the fast path against the general kernel ------------------

DTYPES = ["float32", "int64", "bool", "complex64", "bfloat16", "string", "int8"]


def _values(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 100, shape)
    if dtype == "string":
        return np.array([str(v).encode() for v in raw.ravel()], dtype=object).reshape(shape)
    if dtype == "bool":
        return raw % 2 == 0
    return raw.astype(mg.as_dtype(dtype).np_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "static, runtime, indices, axis",
    [
        ([4, 4], [(4, 4)], [3, 2, 1, 0], 0),
        ([None, 3], [(5, 3), (2, 3), (0, 3)], [1, 0, 1], 0),  # n varies: 1 is bad for 1 row
        ([2, None], [(2, 5), (2, 1)], [[4, 0], [2, 2]], 1),  # 2-d indices, axis 1
        ([2, 3, None], [(2, 3, 4), (2, 3, 2)], [3], -1),  # negative axis
        ([None], [(6,), (3,)], [5, 5, 0], 0),  # 1-d params
        ([None, 2, 2], [(4, 2, 2), (1, 2, 2)], [[[0]], [[3]]], 0),
        ([3, 2], [(3, 2)], [], 0),  # no indices at all
    ],
)
def test_gather_v2_constant_indices_match_the_general_kernel(dtype, static, runtime, indices, axis):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.as_dtype(dtype), shape=static)
    idx = mg.Const(root, np.asarray(indices, dtype=np.int64).reshape(np.shape(indices)))
    g = GatherV2(root.with_op_name("g"), x, idx, axis)
    feeds = [{x: _values(dtype, shape, seed)} for seed, shape in enumerate(runtime)]
    _compare(g, feeds, root)


@pytest.mark.parametrize("policy", ["", "DEFAULT", "ERROR", "IGNORE"])
@pytest.mark.parametrize("index_dtype", [np.int16, np.int32, np.int64])
def test_out_of_range_constant_indices_follow_the_policy(policy, index_dtype):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[None, 4])
    idx = mg.Const(root, np.array([[0, 2], [1, 3]], index_dtype))
    g = GatherV2(root.with_op_name("g"), x, idx, 0, bad_indices_policy=policy)
    feeds = [{x: _values("float32", (n, 4), n)} for n in (4, 3, 2, 1, 0, 5)]
    _compare(g, feeds, root)


@pytest.mark.parametrize(
    "static, indices, axis, kwargs, expect",
    [
        ([None, 4], [1, 0], 0, {}, TAKE),
        ([None, 4], "fed", 0, {}, None),  # indices fed: nothing to know in advance
        ([None, 4], [1, -1], 0, {}, COPY),  # numpy would wrap the -1
        ([None, 4], 1, 0, {}, COPY),  # a 0-d result: take would give a numpy scalar
        ([None, None], [1, 0], 0, {}, COPY),  # output size unknown
        (None, [1, 0], 0, {}, COPY),  # rank unknown
        ([None, 0], [1], 0, {}, COPY),  # empty output: numpy would not check the index
        ([2, 3], [[0], [1]], 1, {"batch_dims": 1}, COPY),
        ([None, 1 << 18], [0, 0], 0, {}, COPY),  # 2 MiB output: pooled, threaded
        ([None, 4], [0] * 2000, 0, {}, COPY),  # many indices: numpy's checked take buffers
        ([3, None], [0, 2], 0, {}, COPY),  # the unknown dim is not the gathered one
        ([None, 3], [0, 1], "fed", {}, COPY),  # axis fed
    ],
)
def test_the_fast_path_is_chosen_only_where_it_is_exact(static, indices, axis, kwargs, expect):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=static)
    feed_shapes = [(3, 4), (2, 4)] if static is None else [
        tuple(d if d is not None else n for d in static) for n in (3, 2)
    ]  # fmt: skip
    extra = {}
    if indices == "fed":
        indices = Placeholder(root, mg.int64, shape=[2])
        extra[indices] = np.array([1, 0])
    if axis == "fed":
        axis = Placeholder(root, mg.int32, shape=[])
        extra[axis] = np.int32(0)
    g = GatherV2(root.with_op_name("g"), x, indices, axis, **kwargs)
    feeds = [{x: _values("float32", shape, n), **extra} for n, shape in enumerate(feed_shapes)]
    _compare(g, feeds, root, expect)


def test_fast_path_is_thread_safe():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[None, 4])
    y = x
    for _ in range(50):
        y = GatherV2(root, y, [1, 0, 1], 0)
    # The gather-of-gather fusion (remapping) would shorten the chain this test counts.
    config = mg.SessionConfig(inter_op_threads=2, optimizer=mg.OptimizerConfig(remapping=False))
    value = np.arange(12, dtype=np.float32).reshape(3, 4)
    with mg.Session(root, config) as sess, mg.Session(root, GENERAL) as general:
        import concurrent.futures as cf

        with cf.ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda _: sess.run(y, {x: value}), range(40)))
        want = general.run(y, {x: value})
        for g in got:
            np.testing.assert_array_equal(g, want)
        assert len(_specialised_steps(sess, TAKE)) == 50


# -- the protocol -------------------------------------------------------------------------------

_SEEN: list[KernelSpec] = []


def _scale_kernel(ctx, x, factor, *, mode):
    return (x * factor).astype(x.dtype)


def _scale_specialize(spec: KernelSpec):
    _SEEN.append(spec)
    factor = spec.constants[1]
    if factor is None or spec.attrs["mode"] == "general":
        return None
    if spec.attrs["mode"] == "broken":
        raise RuntimeError("specialiser bug")
    f = int(factor)
    general = spec.general

    def scale_fast(x, factor_):
        if x.dtype != np.int32:
            return general(x, factor_)
        return x * np.int32(f)

    return scale_fast


mg.register_op(
    OpDef(
        "SpecTestScale",
        inputs=["x: T", "factor: int32"],
        outputs=["y: T"],
        attrs=["T: {int32, float32}", 'mode: string = "fast"'],
        shape_fn=lambda ctx: ctx.input_shapes[0],
    )
)
mg.register_kernel("SpecTestScale", "CPU", _scale_kernel, specialize=_scale_specialize)


def _scale_graph(mode: str = "fast", constant: bool = True):
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.int32, shape=[None, 2])
    factor = mg.Const(root, 3) if constant else Placeholder(root, mg.int32, shape=[])
    builder = mg.op_builder("SpecTestScale")
    out = builder(root.with_op_name("s"), x, factor, mode=mode)
    return root, x, factor, out


def test_the_specialiser_sees_the_node():
    _SEEN.clear()
    root, x, factor, out = _scale_graph()
    with mg.Session(root) as sess:
        np.testing.assert_array_equal(sess.run(out, {x: [[1, 2]]}), [[3, 6]])
    (spec,) = _SEEN
    assert spec.ctx.node_name == "s" and spec.ctx.op_type == "SpecTestScale"
    assert dict(spec.attrs) == {"mode": "fast"}  # only the attrs the kernel declares
    assert spec.input_dtypes == (mg.int32, mg.int32)
    assert [str(s) for s in spec.input_shapes] == ["[?,2]", "[]"]
    assert spec.constants[0] is None and int(spec.constants[1]) == 3
    np.testing.assert_array_equal(spec.general(np.array([[1, 1]], np.int32), 3), [[3, 3]])
    assert "SpecTestScale" in repr(spec)


def test_specialisation_is_off_when_the_session_says_so():
    _SEEN.clear()
    root, x, factor, out = _scale_graph()
    with mg.Session(root, GENERAL) as sess:
        np.testing.assert_array_equal(sess.run(out, {x: [[1, 2]]}), [[3, 6]])
    assert _SEEN == []


def test_fed_constant_inputs_are_not_constants():
    _SEEN.clear()
    root, x, factor, out = _scale_graph(constant=False)
    with mg.Session(root) as sess:
        np.testing.assert_array_equal(sess.run(out, {x: [[1, 2]], factor: 2}), [[2, 4]])
    assert _SEEN[0].constants == (None, None)


def test_a_specialiser_that_declines_keeps_the_kernel():
    root, x, factor, out = _scale_graph(mode="general")
    with mg.Session(root) as sess:
        np.testing.assert_array_equal(sess.run(out, {x: [[1, 2]]}), [[3, 6]])


def test_a_failing_specialiser_is_an_internal_error_naming_the_node():
    root, x, factor, out = _scale_graph(mode="broken")
    with mg.Session(root) as sess:
        with pytest.raises(InternalError, match=r"specialiser of the SpecTestScale.*node s"):
            sess.run(out, {x: [[1, 2]]})


def test_specialize_must_be_callable():
    with pytest.raises(InvalidArgumentError, match="specialize must be callable"):
        mg.register_kernel("SpecTestScale", "GPU", _scale_kernel, specialize=42)


def test_specialisers_of_one_plan_share_a_dict():
    _SEEN.clear()
    root, x, factor, out = _scale_graph()
    builder = mg.op_builder("SpecTestScale")
    twice = builder(root.with_op_name("t"), out, factor)
    with mg.Session(root) as sess:
        np.testing.assert_array_equal(sess.run(twice, {x: [[1, 2]]}), [[9, 18]])
        first = list(_SEEN)
        _SEEN.clear()
        sess.run([twice, out], {x: [[1, 2]]})  # another plan
    assert len(first) == 2 and first[0].shared is first[1].shared
    assert _SEEN and _SEEN[0].shared is not first[0].shared


def test_gather_specialisations_share_one_copy_of_shared_indices():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[None, 4])
    idx = mg.Const(root, np.array([1, 0], np.int64))
    y = x
    for _ in range(5):
        y = GatherV2(root, y, idx, 0)
    unfused = mg.SessionConfig(intra_op_threads=1, optimizer=mg.OptimizerConfig(remapping=False))
    with mg.Session(root, unfused) as sess:
        sess.run(y, {x: np.ones((2, 4), np.float32)})
        (plan,) = sess._plans.values()

    def captured(fn, name):
        return dict(zip(fn.__code__.co_freevars, [c.cell_contents for c in fn.__closure__]))[name]

    copies = {id(step.call.args[1]) for step in plan.steps}
    names = {step.call.fallback.__name__ for step in plan.steps}
    assert all(captured(step.call.fallback, "indices") is step.call.args[1] for step in plan.steps)
    assert names == {TAKE}
    assert len(copies) == 1  # one writable copy for the five nodes


def test_inline_fast_path_errors_show_only_the_kernels_error():
    import traceback

    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[None, 4])
    g = GatherV2(root.with_op_name("g"), x, [0, 3], 0)
    with mg.Session(root, FAST) as sess:
        sess.run(g, {x: np.ones((4, 4), np.float32)})
        sess.run(g, {x: np.ones((4, 4), np.float32)})  # the plan's code is generated now
        (plan,) = sess._plans.values()
        assert "f0(" in plan.source
        with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = 3 is not in \[0, 2\)") as e:
            sess.run(g, {x: np.ones((2, 4), np.float32)})
    assert e.value.node_name == "g"
    assert isinstance(e.value.__cause__, InvalidArgumentError)
    text = "".join(traceback.format_exception(e.value))
    assert "IndexError" not in text  # numpy's own error, which only sent the node the slow way


def test_inline_call_protocol():
    calls = []

    def fallback(x, y):
        calls.append((x, y))
        return "fallback"

    inline = mg.InlineCall(lambda a, b, c: a + b + c, fallback, mg.Input(1), 10, mg.Input(0))
    assert inline(1, 2) == 13 and calls == []
    assert inline("s", 2) == "fallback" and calls == [("s", 2)]
    assert "Input(1)" in repr(inline)
    with pytest.raises(TypeError):
        mg.InlineCall(42, fallback)


def _pair_kernel(ctx, x, y):
    return y * 3 - x


def _pair_specialize(spec: KernelSpec):
    def combine(a, k, b):
        if a.shape != b.shape:
            raise ValueError("not for these shapes")  # -> the fallback decides
        return a * k - b

    return mg.InlineCall(combine, spec.general, mg.Input(1), 3, mg.Input(0))


mg.register_op(
    OpDef(
        "SpecTestPair",
        inputs=["x: T", "y: T"],
        outputs=["z: T"],
        attrs=["T: {int32, float32}"],
        shape_fn=lambda ctx: ctx.input_shapes[0],
    )
)
mg.register_kernel("SpecTestPair", "CPU", _pair_kernel, specialize=_pair_specialize, trusted=True)


def test_generated_inline_calls_pass_the_right_inputs():
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.int32, shape=[None])
    y = Placeholder(root, mg.int32, shape=[None])
    z = mg.op_builder("SpecTestPair")(root, x, y)
    with mg.Session(root) as sess:
        for k in range(4):  # the first run interprets, later ones run the generated code
            a, b = np.arange(3, dtype=np.int32) + k, np.full(3, 10 + k, np.int32)
            np.testing.assert_array_equal(sess.run(z, {x: a, y: b}), b * 3 - a)
            # Shapes that broadcast: the direct call refuses them, the fallback computes.
            np.testing.assert_array_equal(sess.run(z, {x: a, y: b[:1]}), b[:1] * 3 - a)
        (plan,) = {id(p): p for p in sess._plans.values()}.values()
        assert "f0(" in plan.source


@pytest.mark.parametrize("policy", ["IGNORE", "ERROR"])
def test_a_direct_call_failing_mid_plan_resumes_with_every_live_value(policy):
    """Generated code runs constant-index gathers as direct `take` calls; when one raises (an
    index out of range of this run's params), the run goes on in the interpreter from that
    node with every value computed so far, and gives what the general kernels give."""
    root = mg.Scope.new_root_scope()
    x = Placeholder(root, mg.float32, shape=[None, 4])
    early = GatherV2(root.with_op_name("early"), x, [1, 0], 0)  # fine for 2+ rows
    kept = mg.Identity(root.with_op_name("kept"), early)
    risky = GatherV2(root.with_op_name("risky"), x, [0, 3], 0, bad_indices_policy=policy)
    later = GatherV2(root.with_op_name("later"), risky, [1, 0], 0)
    mixed = GatherV2(root.with_op_name("mixed"), early, [1], 0)
    fetches = [later, kept, mixed, early, risky]
    feeds = [{x: _values("float32", (n, 4), n)} for n in (5, 2, 4, 3, 2, 6)]
    fast, general = mg.Session(root, FAST), mg.Session(root, GENERAL)
    with fast, general:
        for _ in range(3):
            for feed in feeds:
                want = _outcome(general, fetches, feed)
                got = _outcome(fast, fetches, feed)
                assert got[0] == want[0]
                if want[0] == "ok":
                    for a, b in zip(got[1], want[1]):
                        np.testing.assert_array_equal(a, b)
                else:
                    assert got[1:] == want[1:]
        (plan,) = {id(p): p for p in fast._plans.values()}.values()
        assert plan.code is not None and plan.source.count("f") >= 4  # direct calls ran


def test_registering_again_with_another_specialiser_is_refused():
    # The same kernel and specialiser again: accepted (a module run twice).
    again = mg.register_kernel(
        "SpecTestPair", "CPU", _pair_kernel, specialize=_pair_specialize, trusted=True
    )
    assert again.specialize is _pair_specialize
    with pytest.raises(mg.AlreadyExistsError):
        mg.register_kernel("SpecTestPair", "CPU", _pair_kernel, trusted=True)  # none now
    with pytest.raises(mg.AlreadyExistsError):
        mg.register_kernel(
            "SpecTestPair", "CPU", _pair_kernel, specialize=lambda spec: None, trusted=True
        )
