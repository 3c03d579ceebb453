"""Sessions: feeds, fetches, configs, run options, threads, closing mid-run, interrupts,
reruns, and aliasing of fed, fetched and constant arrays."""

# ruff: noqa: E501 - tables of hostile inputs and source snippets read best unwrapped

from __future__ import annotations

import collections
import gc
import signal
import threading
import time
from typing import Any

import numpy as np

from tests.hostile._common import cases_from, gather_reference, must, run, same, scope, uid
from tests.hostile._common import minigraph_module as _mg
from tests.hostile._common import ops_module as _ops
from tests.hostile.battery import Case, Wrong

_registered: dict[str, Any] = {}


def _test_ops() -> dict[str, Any]:
    """Ops of this battery (registered once per process): a sleeping identity, an op that
    raises what it is told, an op whose kernel writes into its input."""
    if _registered:
        return _registered
    mg = _mg()
    same_shape = lambda ctx: ctx.input_shapes[0]  # noqa: E731
    sleep = mg.register_op(mg.OpDef(
        "HostileSleep", inputs=["x: T"], outputs=["y: T"], attrs=["T: type", "seconds: float = 0.0"],
        shape_fn=same_shape))  # fmt: skip

    def sleep_kernel(ctx, x, *, seconds, **_):
        time.sleep(seconds)
        return x.copy()

    mg.register_kernel("HostileSleep", "CPU", sleep_kernel)
    mg.register_kernel("HostileSleep", "GPU", sleep_kernel)
    raiser = mg.register_op(mg.OpDef(
        "HostileRaise", inputs=["x: T"], outputs=["y: T"], attrs=["T: type", "what: string"],
        shape_fn=same_shape))  # fmt: skip

    def raise_kernel(ctx, x, *, what, **_):
        exc = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit,
               "GeneratorExit": GeneratorExit, "ValueError": ValueError,
               "none": None}[what]  # fmt: skip
        if exc is not None:
            raise exc()
        return x.copy()

    mg.register_kernel("HostileRaise", "CPU", raise_kernel)
    mg.register_kernel("HostileRaise", "GPU", raise_kernel)
    _registered.update(sleep=sleep, raiser=raiser)
    return _registered


def _pool_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("minigraph-")}


def cases() -> list[Case]:
    out: list[Case] = []
    A = "session"

    # -- feeds -----------------------------------------------------------------------------------
    def feed_float(value):
        mg, ops = _mg(), _ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[None, 3])
        y = ops.gather(s, x, [1, 0])
        before = np.array(value, copy=True) if isinstance(value, np.ndarray) else None
        got = run(y, {x: value})
        want = gather_reference(np.asarray(value), [1, 0])
        if isinstance(value, np.ndarray):
            same(value, before, "the caller's fed array")
        same(got, np.asarray(want).astype(np.float32), "gathered feed")

    f64 = np.arange(6, dtype=np.float64).reshape(2, 3)
    be = np.arange(6, dtype=">f4").reshape(2, 3)
    strided = np.arange(12, dtype=np.float32).reshape(4, 3)[::2]
    fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    readonly = np.arange(6, dtype=np.float32).reshape(2, 3)
    readonly.flags.writeable = False
    feeds = [None, "abc", b"abc", [[1, 2]], [[1, 2, 3], [4, 5, 6]], f64, np.full((2, 3), 1e300),
             np.full((2, 3), np.nan), np.arange(6, dtype=np.int64).reshape(2, 3),
             np.arange(6, dtype=np.int16).reshape(2, 3), np.ones((2, 3), bool),
             np.ones((2, 3), np.complex64), np.ones((2, 3), object), np.full((2, 3), "a"),
             np.array(1.0), [[1, 2, 3], [4, 5]], {1: 2}, {1, 2}, np.ma.masked_array(f64),
             np.matrix(f64), memoryview(np.ones((2, 3), np.float32)), strided, fortran, readonly,
             np.arange(6, dtype=np.float32).reshape(2, 3)[::-1, ::-1], be,
             np.zeros((2, 3), dtype=[("a", "f4")]), np.ones((2, 3), np.float16),
             np.ones((2, 3), np.uint64), np.array([[1, 2, 3], [4, 5, 6]], dtype=np.longdouble),
             np.zeros((0, 3), np.float32), np.zeros((2, 3, 1), np.float32), (x for x in [1]),
             np.full((2, 3), np.finfo(np.float64).max)]  # fmt: skip

    def feed_expect(v):
        valid = (v is f64 or v is strided or v is fortran or v is readonly or v is be
                 or (isinstance(v, list) and v == [[1, 2, 3], [4, 5, 6]]))  # fmt: skip
        if isinstance(v, np.ndarray) and v.dtype in (np.float16, np.int16) and v.shape == (2, 3):
            valid = True
        return "ok" if valid else "any"

    out += cases_from(A, "feed float32[?,3]", feeds, feed_float, expect=feed_expect)

    def feed_int(value):
        mg, ops = _mg(), _ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.int32, shape=[None])
        got = run(ops.gather(s, [10, 20, 30], x), {x: value})
        same(got, gather_reference(np.array([10, 20, 30], np.int32), value), "gather")

    ints = [[1, 2], np.array([2**40]), [-(2**31) - 1], np.array([2**64 - 1], np.uint64),
            [1.0], [True], ["1"], np.array([1, 2], np.int64), np.array([1], np.uint8),
            np.array([5]), np.array([-1]), [2**31 - 1], np.array([0], np.int8),
            np.array([1.5]), np.array([1 + 0j]), np.array([0], ">i8")]  # fmt: skip

    def feed_int_expect(v):
        a = np.asarray(v)
        if not isinstance(v, (list, np.ndarray)) or a.dtype.kind not in "iu" or a.itemsize > 8:
            return "error"
        if np.all((a >= 0) & (a < 3)):
            return "ok"
        # Out of range but an int32: an error on the CPU, zeros on a GPU (TF's GPU kernels);
        # the case's reference (gather_reference) tells which.
        fits = np.all((a >= -(2**31)) & (a < 2**31)) and (a.dtype.kind == "i" or a.max() < 2**31)
        return "any" if fits else "error"

    out += cases_from(A, "feed int32 indices", ints, feed_int, expect=feed_int_expect)

    def feed_string(value):
        mg, ops = _mg(), _ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.string, shape=[None])
        got = run(ops.gather(s, x, [0]), {x: value})
        must(
            got.dtype == object and all(isinstance(v, bytes) for v in got.tolist()),
            f"string result {got!r}",
        )

    strs = [["a", "b"], [b"\xff"], [1], np.array(["a"]), np.array([b"a"]), np.array([1], object),
            ["\ud800"], np.array(["a", None], object), [""], [b"\x00"]]  # fmt: skip
    out += cases_from(A, "feed string", strs, feed_string)

    def feed_keys(which):
        mg, ops = _mg(), _ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[2])
        y = ops.gather(s.with_op_name("y"), x, [1])
        other = mg.Placeholder(scope(), mg.float32, shape=[2])
        parts = ops.DynamicPartition(s, x, [0, 1], num_partitions=2)
        v = np.array([1.0, 2.0], np.float32)
        feed = {
            "unknown": {"nope:0": v}, "index": {"x:5": v}, "opname": {"x": v}, "int": {5: v},
            "none": {None: v}, "operation": {x.operation: v}, "other_graph": {other: v},
            "multi_output": {parts: v}, "twice": {x: v, "x:0": v}, "tuple": {(x,): v},
            "fed_const": {"Const:0": [1]}, "fed_const_dtype": {"Const:0": [1.5]},
            "fed_output_shape": {y: [1.0, 2.0]}, "bytes": {b"x:0": v}, "empty": {"": v},
            "colon": {":0": v}, "spaces": {" x:0": v},
        }[which]  # fmt: skip
        run(y, feed, graph=s.graph)

    keys = [
        "unknown",
        "index",
        "opname",
        "int",
        "none",
        "operation",
        "other_graph",
        "multi_output",
        "twice",
        "tuple",
        "fed_const",
        "fed_const_dtype",
        "fed_output_shape",
        "bytes",
        "empty",
        "colon",
        "spaces",
    ]
    out += cases_from(
        A,
        "feed key",
        keys,
        feed_keys,
        # An op name or a single-output Operation stands for its output 0: lenient, as names are.
        expect=lambda v: "any" if v in ("opname", "fed_const", "operation") else "error",
    )

    def feed_dict_type(value):
        mg, ops = _mg(), _ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[1])
        y = ops.gather(s, x, [0])
        run(y, value(x) if callable(value) else value)

    class WeirdMapping(collections.abc.Mapping):
        def __init__(self, x):
            self.x = x

        def __getitem__(self, k):
            raise KeyError(k)

        def __iter__(self):
            return iter([self.x])

        def __len__(self):
            return 1

    fdt = [
        "abc",
        lambda x: [(x, [1.0])],
        5,
        lambda x: collections.OrderedDict({x: [1.0]}),
        lambda x: {x: [1.0]}.items(),
        b"x",
        1.5,
    ]
    out += cases_from(
        A, "feed_dict type", fdt, feed_dict_type, expect=lambda v: "any" if callable(v) else "error"
    )

    # -- fetches ---------------------------------------------------------------------------------
    def fetch(which):
        mg, ops = _mg(), _ops()
        s = scope()
        c = mg.Const(s.with_op_name("c"), [1, 2])
        parts = ops.DynamicPartition(s, c, [0, 1], num_partitions=2)
        other = mg.Const(scope(), 1)
        deep: Any = c
        for _ in range(5000):
            deep = [deep]
        value = {
            "none": None, "int": 5, "unknown": "nope", "index": "c:9", "empty": "", "list": [],
            "dict": {}, "dict_none": {"a": None}, "set": {c.output}, "lambda": lambda: 1,
            "other_graph": other, "deep": deep, "dict_keys": {(1, 2): c, None: c},
            "bytes": b"c:0", "generator": (t for t in [c]), "multi": parts,
            "parts_list": parts.outputs, "op": c.operation, "op_name": "c", "ndarray": np.ones(2),
            "tuple_of_names": ("c:0", "c"), "namedtuple": collections.namedtuple("P", "a b")(c, c),
            "nested_empty": [[], {}, ()], "float": 1.5, "colon": ":0", "negative": "c:-1",
        }[which]  # fmt: skip
        got = run(value, graph=s.graph)
        if which == "namedtuple":
            must(type(got).__name__ == "P", f"a namedtuple fetch gave {type(got).__name__}")

    fetches = [
        "none",
        "int",
        "unknown",
        "index",
        "empty",
        "list",
        "dict",
        "dict_none",
        "set",
        "lambda",
        "other_graph",
        "deep",
        "dict_keys",
        "bytes",
        "generator",
        "multi",
        "parts_list",
        "op",
        "op_name",
        "ndarray",
        "tuple_of_names",
        "namedtuple",
        "nested_empty",
        "float",
        "colon",
        "negative",
    ]
    ok_fetches = {
        "list",
        "dict",
        "multi",
        "parts_list",
        "op",
        "op_name",
        "tuple_of_names",
        "namedtuple",
        "nested_empty",
        "dict_keys",
    }
    out += cases_from(
        A, "fetch", fetches, fetch, expect=lambda v: "ok" if v in ok_fetches else "error"
    )

    # -- configs ---------------------------------------------------------------------------------
    def config(kw):
        mg = _mg()
        if "devices" in kw and kw["devices"] == "gpu_only":
            from minigraph.testing import SimulatedGpuDevice  # noqa: PLC0415

            kw = {"devices": [SimulatedGpuDevice(0)]}
        if "devices" in kw and kw["devices"] == "cpu_twice":
            kw = {"devices": [mg.devices.CpuDevice(0), mg.devices.CpuDevice(0)]}
        cfg = mg.SessionConfig(**kw)
        s = scope()
        run(mg.Identity(s, 1.0), config=cfg)

    configs = [{"allow_soft_placement": "yes"}, {"allow_soft_placement": 1},
               {"allow_soft_placement": None}, {"log_device_placement": 2},
               {"inter_op_threads": 0}, {"inter_op_threads": -1}, {"inter_op_threads": 2.5},
               {"inter_op_threads": "4"}, {"inter_op_threads": 10**6}, {"inter_op_threads": True},
               {"inter_op_threads": np.int64(2)}, {"inter_op_threads": None},
               {"intra_op_threads": 0}, {"intra_op_threads": 2.5}, {"intra_op_threads": 2**63},
               {"check_kernel_outputs": "yes"}, {"check_kernel_outputs": 1},
               {"devices": "CPU"}, {"devices": []}, {"devices": ["CPU"]},
               {"devices": "gpu_only"}, {"devices": "cpu_twice"}, {"cluster": "x"},
               {"cluster": 5}, {"op_modules": "x"}, {"op_modules": [5]},
               {"connect_timeout": 0}, {"connect_timeout": -1},
               {"connect_timeout": float("nan")}, {"connect_timeout": "5"},
               {"connect_timeout": None}, {"devices": {"a": 1}},
               {"cluster": {"worker": ["x"]}}, {"op_modules": ["os"]},
               {"connect_timeout": float("inf")}]  # fmt: skip
    ok_configs = [configs[10], configs[34]]
    out += cases_from(A, "SessionConfig", configs, config,
                      expect=lambda v: "ok" if any(v is k for k in ok_configs) else (
                          "any" if "connect_timeout" in v and v["connect_timeout"] ==
                          float("inf") else "error"))  # fmt: skip

    def session_args(which):
        mg = _mg()
        s = scope()
        c = mg.Identity(s, 1.0)
        if which == "scope_int":
            mg.Session(5)
        elif which == "config_str":
            mg.Session(s, "x")
        elif which == "config_dict":
            mg.Session(s, {"inter_op_threads": 2})
        elif which == "target_int":
            mg.Session(s, target=5)
        elif which == "target_empty":
            mg.Session(s, target="").run(c)
        elif which == "options_str":
            mg.Session(s).run(c, options="trace")
        elif which == "metadata_int":
            mg.Session(s).run(c, run_metadata=5)
        elif which == "options_trace_str":
            mg.Session(s).run(c, options=mg.RunOptions(trace="yes"))
        elif which == "run_after_close":
            session = mg.Session(s)
            session.close()
            session.run(c)
        elif which == "close_twice":
            session = mg.Session(s)
            session.close()
            session.close()
        elif which == "no_graph":
            mg.Session().run(c)
        elif which == "positional_options":
            mg.Session(s).run(c, None, mg.RunOptions())
        elif which == "chrome_trace_bad_path":
            md = mg.RunMetadata()
            mg.Session(s).run(c, options=mg.RunOptions(trace=True), run_metadata=md)
            md.chrome_trace("/nonexistent/dir/t.json")
        elif which == "chrome_trace_none":
            md = mg.RunMetadata()
            md.chrome_trace(None)

    sargs = [
        "scope_int",
        "config_str",
        "config_dict",
        "target_int",
        "target_empty",
        "options_str",
        "metadata_int",
        "options_trace_str",
        "run_after_close",
        "close_twice",
        "no_graph",
        "chrome_trace_bad_path",
        "chrome_trace_none",
    ]
    out += cases_from(
        A,
        "Session args",
        sargs,
        session_args,
        expect=lambda v: (
            "ok"
            if v in ("target_empty", "close_twice")
            else ("any" if v in ("no_graph", "chrome_trace_none") else "error")
        ),
    )

    # -- threads: correctness under concurrency ---------------------------------------------------
    def concurrent(mode):
        mg, ops = _mg(), _ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.int64, shape=[None])
        table = np.arange(1000, dtype=np.int64) * 3
        y = ops.gather(s, table, x)
        z = ops.gather(s, mg.Identity(s, y), ops.Range(s, 0, ops.Size(s, x), 1))
        cfg = {"plain": mg.SessionConfig(intra_op_threads=1),
               "inter": mg.SessionConfig(inter_op_threads=4, intra_op_threads=1),
               "intra": mg.SessionConfig(intra_op_threads=4),
               "checked": mg.SessionConfig(check_kernel_outputs=True)}[mode]  # fmt: skip
        errors: list[str] = []
        with mg.Session(s, cfg) as session:

            def worker(seed):
                rng = np.random.default_rng(seed)
                for _ in range(150):
                    ids = rng.integers(0, 1000, rng.integers(0, 50))
                    got = session.run(z, {x: ids})
                    if not np.array_equal(got, table[ids]):
                        errors.append(f"thread {seed}: {got[:5]} vs {table[ids][:5]}")
                        return

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            must(not any(t.is_alive() for t in threads), "a run never returned")
        if errors:
            raise Wrong(errors[0])

    out += cases_from(
        A,
        "concurrent runs",
        ["plain", "inter", "intra", "checked"],
        concurrent,
        expect="ok",
        timeout=120,
    )

    def concurrent_build(n_threads):
        mg, ops = _mg(), _ops()
        s = scope()
        c = mg.Const(s.with_op_name("c"), np.arange(10))
        made: list[Any] = []
        lock = threading.Lock()

        def build(k):
            for j in range(100):
                g = ops.gather(s.with_op_name(f"g{k}_{j}"), c, [j % 10])
                with lock:
                    made.append((g, j % 10))

        threads = [threading.Thread(target=build, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        names = [g.operation.name for g, _ in made]
        must(len(set(names)) == len(names), "two nodes share a name")
        # The same calls made by one thread give the node count to expect.
        s1 = scope()
        c1 = mg.Const(s1.with_op_name("c"), np.arange(10))
        for k in range(n_threads):
            for j in range(100):
                ops.gather(s1.with_op_name(f"g{k}_{j}"), c1, [j % 10])
        must(len(s.graph) == len(s1.graph), f"{len(s.graph)} nodes, not {len(s1.graph)}")
        must(sorted(op.name for op in s.graph.operations)
             == sorted(op.name for op in s1.graph.operations), "node names differ")  # fmt: skip
        got = run([g for g, _ in made])
        for (g, j), v in zip(made, got):
            same(v, np.array([j]), g.operation.name)

    out += cases_from(A, "concurrent build", [2, 8], concurrent_build, expect="ok", timeout=120)

    # -- close mid-run -------------------------------------------------------------------------
    def close_mid_run(mode):
        mg = _mg()
        ops_ = _test_ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.float64, shape=[3])
        node = x
        for _k in range(4):
            branches = [ops_["sleep"](s, node, seconds=0.002) for _ in range(4)]
            node = _ops().ConcatV2(s, branches, 0)
            node = _ops().gather(s, node, [0, 1, 2])
        cfg = {"plain": mg.SessionConfig(intra_op_threads=1),
               "inter": mg.SessionConfig(inter_op_threads=4, intra_op_threads=1),
               "intra": mg.SessionConfig(intra_op_threads=4),
               "trace": mg.SessionConfig(intra_op_threads=1)}[mode]  # fmt: skip
        options = mg.RunOptions(trace=True) if mode == "trace" else None
        before = _pool_threads()
        session = mg.Session(s, cfg)
        outcomes: list[str] = []
        value = np.array([1.0, 2.0, 3.0])

        def runner():
            while True:
                try:
                    got = session.run(node, {x: value}, options=options)
                except mg.FailedPreconditionError:
                    outcomes.append("closed")
                    return
                except BaseException as e:  # noqa: BLE001
                    outcomes.append(f"{type(e).__name__}: {e}")
                    return
                if not np.array_equal(got, value):
                    outcomes.append(f"wrong value {got}")
                    return

        threads = [threading.Thread(target=runner) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        session.close()
        for t in threads:
            t.join(20)
        must(not any(t.is_alive() for t in threads), "a run hung after close")
        for o in outcomes:
            must(o == "closed", f"a run in flight ended with {o}")
        left = _pool_threads() - before
        must(not left, f"close left pool threads: {sorted(t.name for t in left)}")

    out += cases_from(
        A,
        "close mid-run",
        ["plain", "inter", "intra", "trace"],
        close_mid_run,
        expect="ok",
        timeout=60,
    )

    # -- interrupts ------------------------------------------------------------------------------
    def interrupt(args):
        mg = _mg()
        what, mode = args
        ops_ = _test_ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[2])
        a = ops_["sleep"](s, x, seconds=0.001)
        b = ops_["raiser"](s, x, what=what)
        c = _ops().ConcatV2(s, [a, b], 0)
        cfg = {"plain": mg.SessionConfig(intra_op_threads=1),
               "inter": mg.SessionConfig(inter_op_threads=4, intra_op_threads=1),
               "trace": mg.SessionConfig(intra_op_threads=1)}[mode]  # fmt: skip
        options = mg.RunOptions(trace=True) if mode == "trace" else None
        exc = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit,
               "GeneratorExit": GeneratorExit}[what]  # fmt: skip
        with mg.Session(s, cfg) as session:
            try:
                session.run(c, {x: [1, 2]}, options=options)
            except exc:
                pass
            except BaseException as e:  # noqa: BLE001
                raise Wrong(f"{what} came out as {type(e).__name__}: {e}") from None
            else:
                raise Wrong(f"{what} vanished")
            # Usable afterwards:
            same(session.run(a, {x: [1, 2]}), np.array([1, 2], np.float32), "a run after it")

    ints = [(w, m) for w in ("KeyboardInterrupt", "SystemExit", "GeneratorExit")
            for m in ("plain", "inter", "trace")]  # fmt: skip
    out += cases_from(A, "interrupt in kernel", ints, interrupt, expect="ok")

    def async_interrupt(mode):
        mg = _mg()
        ops_ = _test_ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=[2])
        node = x
        for _ in range(200):
            node = ops_["sleep"](s, node, seconds=0.001)
        cfg = {
            "plain": mg.SessionConfig(intra_op_threads=1),
            "inter": mg.SessionConfig(inter_op_threads=4, intra_op_threads=1),
        }[mode]

        def alarm(signum, frame):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, alarm)
        try:
            with mg.Session(s, cfg) as session:
                signal.setitimer(signal.ITIMER_REAL, 0.05)
                try:
                    session.run(node, {x: [1, 2]})
                except KeyboardInterrupt:
                    pass
                else:
                    raise Wrong("the run finished before the interrupt")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                same(session.run(node, {x: [3, 4]}), np.array([3, 4], np.float32), "rerun")
        finally:
            signal.signal(signal.SIGALRM, old)

    out += cases_from(
        A, "async interrupt", ["plain", "inter"], async_interrupt, expect="ok", timeout=60
    )

    # -- reruns ----------------------------------------------------------------------------------
    def reruns(kind):
        mg, ops = _mg(), _ops()
        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.float32, shape=None)
        rng = np.random.default_rng(uid())
        with mg.Session(s) as session:
            if kind == "gather":
                y = ops.gather(s, x, [0])
                for _ in range(100):
                    shape = tuple(rng.integers(1, 4, rng.integers(1, 4)))
                    v = rng.standard_normal(shape).astype(np.float32)
                    same(session.run(y, {x: v}), v[[0]], f"rerun shape {shape}")
            elif kind == "const_fast_path":
                table = mg.Const(s, np.arange(40, dtype=np.float32).reshape(10, 4))
                y = ops.gather(s, table, [3, 1, 3], axis=0)
                first = session.run(y)
                for _ in range(50):
                    same(session.run(y), first, "constant-index gather")
                same(first, np.arange(40, dtype=np.float32).reshape(10, 4)[[3, 1, 3]], "value")
            elif kind == "alternating_feeds":
                y = ops.gather(s, x, [0])
                a = np.ones((1, 2), np.float32)
                b = np.zeros((2,), np.float32)
                for k in range(60):
                    v = a if k % 2 else b
                    same(session.run(y, {x: v}), v[[0]], "alternating")

    out += cases_from(
        A, "reruns", ["gather", "const_fast_path", "alternating_feeds"], reruns, expect="ok"
    )

    # -- aliasing --------------------------------------------------------------------------------
    def aliasing(which):
        mg, ops = _mg(), _ops()
        s = scope()
        if which == "const_then_mutate":
            base = np.array([11, 22, 33], np.int32)
            c = mg.Const(s, base)
            base[:] = -1
            same(run(c), np.array([11, 22, 33], np.int32), "constant")
        elif which == "readonly_view_base":
            base = np.array([11, 22, 33], np.int32)
            v = base[:]
            v.flags.writeable = False
            mg.Const(s, v)
            base[:] = -1
            s2 = scope()
            same(run(mg.Const(s2, np.array([11, 22, 33], np.int32))),
                 np.array([11, 22, 33], np.int32), "another graph's constant")  # fmt: skip
        elif which == "broadcast_row":
            row = np.array([1, 2, 3], np.int32)
            c = mg.Const(s, np.broadcast_to(row, (2, 3)))
            row[1] = 42
            same(run(c), np.array([[1, 2, 3], [1, 2, 3]], np.int32), "broadcast constant")
        elif which in (
            "fetched_const",
            "fetched_reshape",
            "fetched_identity",
            "fetched_cast",
            "fetched_partition1",
            "fetched_gather_all",
            "fetched_stitch",
        ):
            value = np.array([7, 8, 9], np.int32)
            c = mg.Const(s, value)
            node = {
                "fetched_const": lambda: c,
                "fetched_reshape": lambda: ops.Reshape(s, c, [3]),
                "fetched_identity": lambda: mg.Identity(s, c),
                "fetched_cast": lambda: ops.Cast(s, c, DstT=mg.int32),
                "fetched_partition1": lambda: ops.DynamicPartition(s, c, [0, 0, 0],
                                                                   num_partitions=1)[0],
                "fetched_gather_all": lambda: ops.gather(s, c, [0, 1, 2]),
                "fetched_stitch": lambda: ops.DynamicStitch(s, [[0, 1, 2]], [c]),
            }[which]()  # fmt: skip
            with mg.Session(s) as session:
                r = session.run(node)
                try:
                    r.flags.writeable = True
                    r[0] = 99
                except ValueError:
                    pass
                same(session.run(node), value, "a rerun after writing to a fetched value")
            s2 = scope()
            same(run(mg.Const(s2, np.array([7, 8, 9], np.int32))), value, "another graph's const")
        elif which.startswith("fed_"):
            x = mg.Placeholder(s.with_op_name("x"), mg.int32, shape=[3])
            node = {
                "fed_identity": lambda: mg.Identity(s, x),
                "fed_reshape": lambda: ops.Reshape(s, x, [3]),
                "fed_cast": lambda: ops.Cast(s, x, DstT=mg.int32),
                "fed_partition1": lambda: ops.DynamicPartition(s, x, [0, 0, 0],
                                                               num_partitions=1)[0],
                "fed_gather_scalar_axis": lambda: ops.gather(s, ops.Reshape(s, x, [1, 3]), 0),
                "fed_concat": lambda: ops.ConcatV2(s, [x, x], 0),
                "fed_gather": lambda: ops.gather(s, x, [0, 1, 2]),
                "fed_stitch": lambda: ops.DynamicStitch(s, [[0, 1, 2]], [x]),
                "fed_gather_nd_empty": lambda: ops.GatherNd(s, x, np.zeros((0,), np.int32)),
            }[which]()  # fmt: skip
            fed = np.array([1, 2, 3], np.int32)
            got = run(node, {x: fed})
            if which != "fed_identity":
                must(not np.shares_memory(got, fed), f"{which}: the result is a view of the feed")
            fed[0] = 100
            must(got.reshape(-1)[0] == 1, f"{which}: the result changed with the feed")
        elif which == "fetch_twice_same_array":
            c = mg.Const(s, np.array([1, 2], np.int32))
            g = ops.gather(s, c, [0, 1])
            a, b = run([g, g])
            if np.shares_memory(a, b) and a.flags.writeable:
                a[0] = 50
                must(b[0] == 1, "two fetches of one tensor share writeable memory")

    whichs = [
        "const_then_mutate",
        "readonly_view_base",
        "broadcast_row",
        "fetched_const",
        "fetched_reshape",
        "fetched_identity",
        "fetched_cast",
        "fetched_partition1",
        "fetched_gather_all",
        "fetched_stitch",
        "fed_identity",
        "fed_reshape",
        "fed_cast",
        "fed_partition1",
        "fed_gather_scalar_axis",
        "fed_concat",
        "fed_gather",
        "fed_stitch",
        "fed_gather_nd_empty",
        "fetch_twice_same_array",
    ]
    out += cases_from(
        A,
        "aliasing",
        whichs[:-1],
        aliasing,
        expect=lambda v: "any" if v == "fed_gather_nd_empty" else "ok",
    )

    def leaks(kind):
        mg, ops = _mg(), _ops()
        import tracemalloc  # noqa: PLC0415

        s = scope()
        x = mg.Placeholder(s.with_op_name("x"), mg.int32, shape=[None])
        y = ops.gather(s, np.arange(10), x)
        gc.collect()
        tracemalloc.start()
        try:
            for k in range(300):
                if kind == "sessions":
                    with mg.Session(s) as session:
                        session.run(y, {x: [k % 10]})
                elif kind == "errors":
                    with mg.Session(s) as session:
                        try:
                            session.run(y, {x: [99]})
                        except mg.InvalidArgumentError:
                            pass
                if k == 50:
                    gc.collect()
                    first = tracemalloc.get_traced_memory()[0]
            gc.collect()
            last = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        must(last - first < 2_000_000, f"memory grew by {last - first} bytes over 250 sessions")

    out += cases_from(A, "leaks", ["sessions", "errors"], leaks, expect="ok", timeout=120)

    # A tensor or an array where the feed_dict goes (`run(y, x)`): their truth value raises.
    def feed_dict_tensor(which):
        mg = _mg()
        s = scope()
        x = mg.Placeholder(s, mg.float32, [2])
        y = mg.Identity(s, x)
        value = {"output": x.output, "builder": x, "array": np.ones(2, np.float32)}[which]
        run(y, value)

    out += cases_from(
        A, "feed_dict tensor", ["output", "builder", "array"], feed_dict_tensor, expect="error"
    )

    # RunMetadata.chrome_trace given a path that no file can have.
    def trace_path(path):
        mg = _mg()
        mg.RunMetadata().chrome_trace(path)

    out += cases_from(A, "chrome_trace path", ["a\x00b", "/tmp/\x00"], trace_path, expect="error")
    return out


def simgpu_cases() -> list[Case]:
    return []
