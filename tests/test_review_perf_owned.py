"""Review findings in files a performance engineer is rewriting (minigraph/session.py,
plan.py, executor.py): the failing regression tests, marked xfail(strict=True) until the
rewrite fixes them (a test that starts passing then fails, so the marker must go).
Each was found by tests/hostile/battery.py; the report lists them with their repro."""

import numpy as np
import pytest

import minigraph as mg
from ops import Cast, Reshape


@pytest.fixture
def scope():
    return mg.Scope.new_root_scope()


@pytest.mark.xfail(
    strict=True,
    reason="review: a deeply nested fetch structure raises an untyped RecursionError from "
    "session.py's fetch flattening; owned by perf",
)
def test_a_deeply_nested_fetch_is_a_typed_error(scope):
    fetch = mg.Const(scope, [1, 2])
    for _ in range(5000):
        fetch = [fetch]
    with pytest.raises(mg.InvalidArgumentError):
        mg.Session(scope).run(fetch)


@pytest.mark.xfail(
    strict=True,
    reason="review: RunMetadata.chrome_trace to a missing directory raises an untyped "
    "FileNotFoundError (session.py); owned by perf",
)
def test_chrome_trace_to_a_missing_directory_is_a_typed_error(scope, tmp_path):
    metadata = mg.RunMetadata()
    mg.Session(scope).run(
        mg.Identity(scope, [1.0]), options=mg.RunOptions(trace=True), run_metadata=metadata
    )
    with pytest.raises(mg.NotFoundError):
        metadata.chrome_trace(str(tmp_path / "missing" / "trace.json"))


@pytest.mark.xfail(
    strict=True,
    reason="review: fetching Identity(x) of a fed x returns the caller's fed array itself, so "
    "changing the feed after the run changes the result; only the fed tensor itself may come "
    "back as the fed array (issue 10 section 2); owned by perf (plan/session feed protection)",
)
def test_a_fetched_identity_of_a_feed_is_not_the_fed_array(scope):
    x = mg.Placeholder(scope, mg.int32, shape=[3])
    fed = np.array([1, 2, 3], np.int32)
    got = mg.Session(scope).run(mg.Identity(scope, x), {x: fed})
    assert not np.shares_memory(got, fed)


@pytest.mark.xfail(
    strict=True,
    reason="review: an untrusted kernel returning its fed input as is (Cast to the same "
    "dtype) gives the caller a view of the fed array; the feed protection copies views but "
    "not the input itself; owned by perf (plan/session feed protection)",
)
def test_an_untrusted_kernel_returning_its_fed_input_gives_a_copy(scope):
    x = mg.Placeholder(scope, mg.int32, shape=[3])
    fed = np.array([1, 2, 3], np.int32)
    got = mg.Session(scope).run(Cast(scope, x, DstT=mg.int32), {x: fed})
    assert not np.shares_memory(got, fed)


def test_an_untrusted_kernel_returning_a_view_of_its_fed_input_gives_a_copy(scope):
    # The sibling that works: a reshape (a view) of the feed comes back copied.
    x = mg.Placeholder(scope, mg.int32, shape=[3])
    fed = np.array([1, 2, 3], np.int32)
    got = mg.Session(scope).run(Reshape(scope, x, [3]), {x: fed})
    assert not np.shares_memory(got, fed)
