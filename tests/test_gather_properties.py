"""Property-based tests: the kernels against the loop references of _gather_helpers, on random
dtypes, ranks, shapes (zero-size dims included), axes, batch_dims, layouts and static-shape
knowledge, with valid and out-of-range indices, on the CPU and on a simulated GPU."""

from __future__ import annotations

import numpy as np
import pytest
from _gather_helpers import (
    ALL_DTYPES,
    GPU_DTYPES,
    INDEX_DTYPES,
    assert_array_same,
    first_bad_nd,
    first_bad_v2,
    msg,
    non_contiguous,
    position_text,
    ref_gather,
    ref_gather_batched,
    ref_gather_nd,
    run,
    sample,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph
from minigraph import InvalidArgumentError, Scope
from minigraph.testing import simulated_gpus
from ops import GatherNd, GatherV2, Placeholder, gather

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=False,
)

dims = st.integers(0, 3)


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


@st.composite
def v2_cases(draw, dtypes=ALL_DTYPES):
    rank = draw(st.integers(1, 4))
    p_shape = draw(st.lists(dims, min_size=rank, max_size=rank))
    axis = draw(st.integers(0, rank - 1))
    batch_dims = draw(st.integers(0, axis))
    extra = draw(st.lists(dims, min_size=0, max_size=max(0, 4 - rank)))
    if p_shape[axis] == 0 and _size(p_shape[:batch_dims] + extra) > 0:
        extra = [0] + extra  # nothing is valid in an empty dimension: no indices at all
    i_shape = p_shape[:batch_dims] + extra
    return {
        "dtype": draw(st.sampled_from(dtypes)),
        "index_dtype": draw(st.sampled_from(INDEX_DTYPES)),
        "p_shape": tuple(p_shape),
        "i_shape": tuple(i_shape),
        "axis": axis,
        "batch_dims": batch_dims,
        "negative_axis": draw(st.booleans()),
        "negative_batch_dims": draw(st.booleans()) and batch_dims < len(i_shape),
        "axis_how": draw(st.sampled_from(["const", "fed32", "fed64"])),
        "shape_how": draw(st.sampled_from(["known", "unknown_dims", "unknown_rank"])),
        "layout": draw(st.sampled_from(["contiguous", "strided"])),
        "seed": draw(st.integers(0, 2**16)),
    }


@st.composite
def nd_cases(draw, dtypes=ALL_DTYPES):
    rank = draw(st.integers(1, 4))
    p_shape = draw(st.lists(dims, min_size=rank, max_size=rank))
    batch_dims = draw(st.integers(0, rank - 1))
    depth = draw(st.integers(0, rank - batch_dims))
    extra = draw(st.lists(dims, min_size=0, max_size=2))
    indexed = p_shape[batch_dims : batch_dims + depth]
    if 0 in indexed and _size(p_shape[:batch_dims] + extra) > 0:
        extra = [0] + extra
    return {
        "dtype": draw(st.sampled_from(dtypes)),
        "index_dtype": draw(st.sampled_from(INDEX_DTYPES)),
        "p_shape": tuple(p_shape),
        "i_shape": tuple(p_shape[:batch_dims] + extra + [depth]),
        "batch_dims": batch_dims,
        "shape_how": draw(st.sampled_from(["known", "unknown_dims", "unknown_rank"])),
        "layout": draw(st.sampled_from(["contiguous", "strided"])),
        "seed": draw(st.integers(0, 2**16)),
    }


def v2_indices(case):
    rng = np.random.default_rng(case["seed"])
    n = case["p_shape"][case["axis"]]
    values = rng.integers(0, max(n, 1), size=case["i_shape"])
    return values.astype(case["index_dtype"].np_dtype)


def nd_indices(case):
    rng = np.random.default_rng(case["seed"])
    bd, p_shape, i_shape = case["batch_dims"], case["p_shape"], case["i_shape"]
    limits = np.array(p_shape[bd : bd + i_shape[-1]] or [1], np.int64)
    values = rng.integers(0, np.maximum(limits, 1), size=i_shape[:-1] + (len(limits),))
    return values[..., : i_shape[-1]].astype(case["index_dtype"].np_dtype)


def inject_bad(case, indices, limits, data):
    """Overwrites some entries with out-of-range values (negative, too big, extreme)."""
    if indices.size == 0:
        return indices
    info = np.iinfo(indices.dtype)
    flat = indices.copy().reshape(-1)
    count = data.draw(st.integers(1, min(3, flat.size)))
    for _ in range(count):
        k = data.draw(st.integers(0, flat.size - 1))
        limit = int(limits[k % len(limits)])
        value = data.draw(
            st.sampled_from([-1, -limit - 1, limit, limit + 7, int(info.min), int(info.max)])
        )
        flat[k] = np.clip(value, info.min, info.max)
    return flat.reshape(indices.shape)


def placeholder_shape(shape, how):
    if how == "known":
        return list(shape)
    if how == "unknown_dims":
        return [None] * len(shape)
    return None


def layout(array, how):
    return non_contiguous(array) if how == "strided" else array


def build_v2(root, case, params, indices, policy=""):
    """The GatherV2 node for `case` and its feed_dict."""
    p = Placeholder(root, case["dtype"], shape=placeholder_shape(params.shape, case["shape_how"]))
    i = Placeholder(
        root, case["index_dtype"], shape=placeholder_shape(indices.shape, case["shape_how"])
    )
    feed = {p: layout(params, case["layout"]), i: layout(indices, case["layout"])}
    axis = case["axis"] - len(params.shape) if case["negative_axis"] else case["axis"]
    batch_dims = case["batch_dims"]
    if case["negative_batch_dims"]:
        batch_dims -= indices.ndim
    axis_input = axis
    if case["axis_how"] != "const":
        dtype = minigraph.int32 if case["axis_how"] == "fed32" else minigraph.int64
        axis_input = Placeholder(root, dtype, shape=[])
        feed[axis_input] = axis
    g = GatherV2(
        root.with_op_name("g"),
        p,
        i,
        axis_input,
        batch_dims=batch_dims,
        bad_indices_policy=policy,
    )
    return g, feed


def build_nd(root, case, params, indices, policy=""):
    p = Placeholder(root, case["dtype"], shape=placeholder_shape(params.shape, case["shape_how"]))
    i = Placeholder(
        root, case["index_dtype"], shape=placeholder_shape(indices.shape, case["shape_how"])
    )
    feed = {p: layout(params, case["layout"]), i: layout(indices, case["layout"])}
    g = GatherNd(
        root.with_op_name("g"), p, i, batch_dims=case["batch_dims"], bad_indices_policy=policy
    )
    return g, feed


# -- valid indices -----------------------------------------------------------------------------


@SETTINGS
@given(v2_cases())
def test_gather_v2_agrees_with_the_reference(case):
    params = sample(case["dtype"], case["p_shape"], seed=case["seed"])
    indices = v2_indices(case)
    root = Scope.new_root_scope()
    g, feed = build_v2(root, case, params, indices)
    out = run(root, g, feed)
    expected = ref_gather(params, indices, case["axis"], case["batch_dims"])
    assert_array_same(out, expected)
    assert_array_same(out, ref_gather_batched(params, indices, case["axis"], case["batch_dims"]))
    assert g.shape.is_compatible_with(out.shape)
    if case["shape_how"] == "known":
        # Known shapes give the full static shape, or (fed axis) its rank and batch dims.
        assert g.shape.rank == out.ndim
        assert list(g.shape)[: case["batch_dims"]] == list(out.shape[: case["batch_dims"]])
        if case["axis_how"] == "const":
            assert g.shape.as_list() == list(out.shape)


@SETTINGS
@given(nd_cases())
def test_gather_nd_agrees_with_the_reference(case):
    params = sample(case["dtype"], case["p_shape"], seed=case["seed"])
    indices = nd_indices(case)
    root = Scope.new_root_scope()
    g, feed = build_nd(root, case, params, indices)
    out = run(root, g, feed)
    assert_array_same(out, ref_gather_nd(params, indices, case["batch_dims"]))
    assert g.shape.is_compatible_with(out.shape)
    if case["shape_how"] == "known":
        assert g.shape.as_list() == list(out.shape)


@SETTINGS
@given(v2_cases(dtypes=(minigraph.float32, minigraph.string)), st.booleans())
def test_gather_matches_gather_v2_with_default_axis(case, negative):
    """ops.gather with no axis is GatherV2 with axis = batch_dims (normalised if negative)."""
    params = sample(case["dtype"], case["p_shape"], seed=case["seed"])
    case = dict(case, axis=case["batch_dims"])
    if params.shape[case["axis"]] == 0 and indices_size(case) > 0:
        return  # (drawn for another axis: no valid indices exist here)
    indices = v2_indices(case)
    bd = case["batch_dims"]
    if negative and bd < indices.ndim:
        bd -= indices.ndim
    root = Scope.new_root_scope()
    out = run(root, gather(root, params, indices, batch_dims=bd))
    assert_array_same(out, ref_gather(params, indices, case["batch_dims"], case["batch_dims"]))


def indices_size(case):
    return _size(case["i_shape"])


# -- out-of-range indices ----------------------------------------------------------------------


@pytest.mark.usefixtures("cpu_only")
@SETTINGS
@given(v2_cases(), st.sampled_from(["", "DEFAULT", "ERROR", "IGNORE"]), st.data())
def test_gather_v2_bad_indices_on_cpu(case, policy, data):
    params = sample(case["dtype"], case["p_shape"], seed=case["seed"])
    n = case["p_shape"][case["axis"]]
    indices = inject_bad(case, v2_indices(case), [n], data)
    root = Scope.new_root_scope()
    g, feed = build_v2(root, case, params, indices, policy)
    bad = first_bad_v2(indices, n)
    if bad is None or policy == "IGNORE":
        expected = ref_gather(params, indices, case["axis"], case["batch_dims"], ignore_bad=True)
        assert_array_same(run(root, g, feed), expected)
        return
    pos, value = bad
    text = f"indices{position_text(pos)} = {value} is not in [0, {n})"
    with pytest.raises(InvalidArgumentError, match="^" + msg(text)) as info:
        run(root, g, feed)
    assert info.value.node_name == "g"


@pytest.mark.usefixtures("cpu_only")
@SETTINGS
@given(nd_cases(), st.sampled_from(["", "DEFAULT", "ERROR", "IGNORE"]), st.data())
def test_gather_nd_bad_indices_on_cpu(case, policy, data):
    params = sample(case["dtype"], case["p_shape"], seed=case["seed"])
    bd = case["batch_dims"]
    dims = case["p_shape"][bd : bd + case["i_shape"][-1]]
    indices = nd_indices(case)
    if dims:
        indices = inject_bad(case, indices, dims, data)
    root = Scope.new_root_scope()
    g, feed = build_nd(root, case, params, indices, policy)
    bad = first_bad_nd(indices, dims)
    if bad is None or policy == "IGNORE":
        expected = ref_gather_nd(params, indices, bd, ignore_bad=True)
        assert_array_same(run(root, g, feed), expected)
        return
    pos, vector = bad
    shape_text = "[" + ",".join(str(d) for d in case["p_shape"]) + "]"
    text = (
        f"indices{position_text(pos)} = [{', '.join(str(v) for v in vector)}] does not index "
        f"into param shape {shape_text}, node name: g"
    )
    with pytest.raises(InvalidArgumentError, match="^" + msg(text)):
        run(root, g, feed)


# -- simulated GPU -----------------------------------------------------------------------------


@SETTINGS
@given(
    v2_cases(dtypes=GPU_DTYPES),
    st.sampled_from(["", "DEFAULT", "ERROR", "IGNORE"]),
    st.data(),
)
def test_gather_v2_on_a_simulated_gpu(case, policy, data):
    """On a GPU, DEFAULT (and '') and IGNORE write zeros; ERROR raises the CPU's message."""
    params = sample(case["dtype"], case["p_shape"], seed=case["seed"])
    n = case["p_shape"][case["axis"]]
    indices = v2_indices(case)
    if data.draw(st.booleans()):
        indices = inject_bad(case, indices, [n], data)
    root = Scope.new_root_scope()
    g, feed = build_v2(root, case, params, indices, policy)
    expected = ref_gather(params, indices, case["axis"], case["batch_dims"], ignore_bad=True)
    bad = first_bad_v2(indices, n)
    with simulated_gpus(1):
        if bad is not None and policy == "ERROR":
            pos, value = bad
            with_msg = f"indices{position_text(pos)} = {value} is not in [0, {n})"
            with pytest.raises(InvalidArgumentError, match="^" + msg(with_msg)) as info:
                run(root, g, feed)
            assert "device:GPU:0" in str(info.value)
        else:
            assert_array_same(run(root, g, feed), expected)


@SETTINGS
@given(nd_cases(dtypes=GPU_DTYPES), st.sampled_from(["", "DEFAULT", "IGNORE"]), st.data())
def test_gather_nd_on_a_simulated_gpu_writes_zeros(case, policy, data):
    params = sample(case["dtype"], case["p_shape"], seed=case["seed"])
    bd = case["batch_dims"]
    dims = case["p_shape"][bd : bd + case["i_shape"][-1]]
    indices = nd_indices(case)
    if dims and data.draw(st.booleans()):
        indices = inject_bad(case, indices, dims, data)
    root = Scope.new_root_scope()
    g, feed = build_nd(root, case, params, indices, policy)
    with simulated_gpus(1):
        assert_array_same(run(root, g, feed), ref_gather_nd(params, indices, bd, ignore_bad=True))
