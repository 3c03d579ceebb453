"""Plans too large to generate code for, and the locks that guard codegen and the buffer pool
(issue 24, section 3: "Huge plans", "Tests that do not guard what they should").

- A plan whose code CPython cannot compile (a MemoryError from compile(), as a 10**6-node chain
  gave) keeps running through the step interpreter, every run; plans of more than
  MAX_GENERATED_STEPS steps never generate code at all.
- Many threads asking for the same plan's code generate it once; many threads taking buffers
  from one pool never get the same memory while both hold it.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest
from _thread_helpers import run_threads

import minigraph as mg
from minigraph import memory as memory_module
from minigraph import plan as plan_module
from minigraph.memory import BufferPool
from minigraph.op_def import OpDef

pytestmark = pytest.mark.usefixtures("cpu_only")

# A step the graph optimizer leaves alone (an Identity chain it would remove): a user op whose
# kernel is not registered trusted, so that no pass folds, merges or drops it.
Step = mg.register_op(
    OpDef(
        "Hostile3Step",
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=["T: type"],
        shape_fn=lambda ctx: ctx.input_shapes[0],
    )
)
mg.register_kernel("Hostile3Step", "CPU", lambda ctx, x, T: x)


def chain(n: int):
    """A Placeholder x and n steps after it: (scope, x, the last step)."""
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.float32, shape=[3])
    y = x
    for _ in range(n):
        y = Step(scope, y)
    return scope, x, y


FEED = np.array([1.0, 2.0, 3.0], np.float32)


# -- huge plans ------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [MemoryError, RecursionError])
def test_a_plan_whose_code_cannot_be_compiled_keeps_running(monkeypatch, error):
    scope, x, y = chain(30)
    calls = []

    def failing_compile(*args, **kwargs):
        calls.append(args[1])
        raise error("the compiler gave up")

    monkeypatch.setattr(plan_module, "compile", failing_compile, raising=False)
    with mg.Session(scope) as session:
        for _ in range(5):  # the first run interprets, later ones would generate code
            np.testing.assert_array_equal(session.run(y, {x: FEED}), FEED)
            np.testing.assert_array_equal(session.run([y, x], {x: FEED})[0], FEED)
        (first, second) = session._plans.values()
        assert first.interpret_only and second.interpret_only
        assert first.code is None and second.code is None
    assert len(calls) == 2  # once per plan, never again
    # The file names the failed compiles took are free again (and listed once).
    free = plan_module._free_plan_numbers
    assert all(int(name[len("<minigraph-plan-") : -1]) in free for name in calls)
    assert len(set(free)) == len(free)


def test_errors_of_an_interpreted_plan_still_name_the_node(monkeypatch):
    monkeypatch.setattr(plan_module, "MAX_GENERATED_STEPS", 2)
    scope = mg.Scope.new_root_scope()
    x = mg.Placeholder(scope.with_op_name("x"), mg.int32, shape=[None])
    from ops import gather

    g = gather(scope.with_op_name("g"), [1.0, 2.0, 3.0], x)
    out = Step(scope, Step(scope, g))
    with mg.Session(scope) as session:
        for _ in range(3):
            assert session.run(out, {x: [2, 0]}).tolist() == [3.0, 1.0]
        for _ in range(2):
            with pytest.raises(mg.InvalidArgumentError, match=r"node g \(GatherV2\)"):
                session.run(out, {x: [7]})


def test_plans_over_the_step_limit_are_interpreted_without_compiling(monkeypatch):
    monkeypatch.setattr(plan_module, "MAX_GENERATED_STEPS", 50)
    compiled = []
    real = plan_module._codegen
    monkeypatch.setattr(plan_module, "_codegen", lambda p: (compiled.append(p), real(p)))
    small_scope, sx, sy = chain(50)
    big_scope, bx, by = chain(51)
    with mg.Session(small_scope) as small, mg.Session(big_scope) as big:
        for _ in range(3):
            np.testing.assert_array_equal(small.run(sy, {sx: FEED}), FEED)
            np.testing.assert_array_equal(big.run(by, {bx: FEED}), FEED)
        (small_plan,) = small._plans.values()
        (big_plan,) = big._plans.values()
    assert compiled == [small_plan]
    assert small_plan.code is not None and big_plan.code is None and big_plan.interpret_only


def test_a_real_plan_over_the_limit_runs_every_time():
    # The real limit (65,536 steps); 10**6 steps behaved the same before the fix, only
    # compile() then failed with MemoryError on the second run.
    n = plan_module.MAX_GENERATED_STEPS + 100
    scope, x, y = chain(n)
    with mg.Session(scope) as session:
        for _ in range(3):
            np.testing.assert_array_equal(session.run(y, {x: FEED}), FEED)
        (plan,) = session._plans.values()
        assert len(plan.steps) > plan_module.MAX_GENERATED_STEPS
        assert plan.code is None and plan.interpret_only


# -- the codegen lock ----------------------------------------------------------------------------


def test_threads_asking_for_a_plans_code_at_once_generate_it_once(monkeypatch):
    generated: dict[int, int] = {}
    real = plan_module._codegen
    counting = threading.Lock()

    def count(plan):
        with counting:
            generated[id(plan)] = generated.get(id(plan), 0) + 1
        real(plan)

    monkeypatch.setattr(plan_module, "_codegen", count)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # thread switches all the time: races show
    try:
        for _ in range(3):
            scope, x, y = chain(300)
            fetches = [y, *[Step(scope, y) for _ in range(5)]]
            session = mg.Session(scope)
            plans = []
            for k in range(1, len(fetches) + 1):
                session.run(fetches[:k], {x: FEED})  # compiled, first run interpreted
            plans = list(session._plans.values())

            def body(i, session=session, fetches=fetches, x=x):
                for k in range(len(fetches), 0, -1):
                    values = session.run(fetches[:k], {x: FEED})
                    assert all(np.array_equal(v, FEED) for v in values)

            run_threads(8, body)
            assert [generated.get(id(p)) for p in plans] == [1] * len(plans)
            for p in plans:  # the code the plan runs is the one it records
                assert p.fn.__code__ is p.code
            session.close()
    finally:
        sys.setswitchinterval(switch)


# -- the buffer pool's lock ----------------------------------------------------------------------


def test_threads_hammering_one_pool_never_share_memory(monkeypatch):
    pool = BufferPool(max_bytes=1 << 22, min_bytes=256, max_idle=8)
    sizes = [(64,), (96,), (128,), (200,)]
    # Another thread may run between a buffer's reference count being read and the array
    # made from it (a GIL switch): without the pool's lock, two threads then get one buffer.
    real_refs = memory_module._refs

    def refs_then_yield(items, i):
        count = real_refs(items, i)
        time.sleep(0)
        return count

    monkeypatch.setattr(memory_module, "_refs", refs_then_yield)
    live: dict[int, int] = {}  # buffer address -> the thread holding an array of it
    registry = threading.Lock()

    def take(i):
        a = pool.empty(sizes[(i + len(live)) % len(sizes)], np.float64)
        address = a.__array_interface__["data"][0]
        with registry:
            other = live.get(address)
            live[address] = i
        assert other is None, f"threads {other} and {i} were handed the same buffer"
        return a, address

    def give_back(address):
        with registry:
            del live[address]  # before the array is dropped: then the pool may reuse it

    def body(i):
        held = []
        for k in range(400):
            a, address = take(i)
            a.fill(i * 10_000 + k)
            held.append((a, address, i * 10_000 + k))
            if len(held) > 2:
                b, b_address, value = held.pop(0)
                assert (b == value).all(), "another holder wrote into this buffer"
                give_back(b_address)
                del b
        for b, b_address, value in held:
            assert (b == value).all(), "another holder wrote into this buffer"
            give_back(b_address)

    run_threads(8, body)
    assert pool.hits > 0  # buffers were recycled, so the race was possible
