"""Every registered op's OpDef is TensorFlow 2.21's, and its CPU kernels take every dtype TF's
CPU kernels take, checked against TF's own definitions recorded in tests/data (written by
tests/data/make_tf_op_defs.py: tf_op_defs.pbtxt, TF's OpList in text format, and
tf_cpu_kernels.txt); no TensorFlow needed here.

Compared for each op: input and output arg names, order and types (type attr, number attr,
type-list attr or fixed dtype), attr names and order, attr types, allowed values (TF's dtypes
that minigraph does not have, such as qint8, variant, float8 and int4, left out), defaults,
minimums and `is_stateful`. Ops TF does not have are listed in `MINIGRAPH_ONLY` with a reason.
Known differences are listed in `KNOWN_DIFFERENCES`: each op's test is then a strict xfail
(the bug stays visible until fixed), and a second test checks that these are its only ones.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

import minigraph as mg
import ops  # noqa: F401 - registers the op library
from minigraph import proto, registry, tf_compat
from minigraph.errors import InvalidArgumentError
from minigraph.tensor_shape import TensorShape

DATA = Path(__file__).resolve().parent / "data"
OP_DEFS_FILE = DATA / "tf_op_defs.pbtxt"
KERNELS_FILE = DATA / "tf_cpu_kernels.txt"
REGENERATE = "regenerate with `python tests/data/make_tf_op_defs.py` where TF 2.21 is installed"

#: Registered ops TensorFlow 2.21 does not have, with the reason they exist.
MINIGRAPH_ONLY: dict[str, str] = {}

#: Differences from TF's OpDefs that minigraph chose (README, "How the design maps to
#: TensorFlow"), exactly as `op_def_differences` words them, with the reason. Not failures.
_POLICY = (
    "attr bad_indices_policy: TF allows any value, ours only ['', 'DEFAULT', 'ERROR', 'IGNORE']"
)
_POLICY_WHY = (
    "TF's kernel refuses other values when it is constructed (at run time); minigraph's OpDef "
    "lists the four TF accepts, so a bad value fails when the node is built"
)
DELIBERATE_DIFFERENCES: dict[str, dict[str, str]] = {
    "GatherNd": {_POLICY: _POLICY_WHY},
    "ScatterNd": {_POLICY: _POLICY_WHY},
}

#: Known differences from TF's OpDefs, exactly as `op_def_differences` words them (bugs in the
#: op library, reported; each op's conformance test is a strict xfail while they last).
KNOWN_DIFFERENCES: dict[str, list[str]] = {}

#: TF's CPU kernel dtype combinations that minigraph deliberately has no CPU kernel for:
#: (op type, attr, dtype) -> reason. An entry covers every combination holding that dtype.
KERNEL_EXCEPTIONS: dict[tuple[str, str, str], str] = {}

#: What the CPU kernel check reports for TF's kernels that register no constraint on an attr
#: (TF decides in the kernel's constructor which dtypes it takes): attr -> the dtypes TF's
#: constructor refuses, which minigraph need not have either.
UNCONSTRAINED_REFUSED: dict[tuple[str, str], str] = {}


# -- reading TF's files -------------------------------------------------------------------------


def _message(name: str):
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(proto.POOL.FindMessageTypeByName(name))


def load_tf_op_defs() -> tuple[dict[str, object], set[str]]:
    """TF's OpDefs by name, and the op types the generator found TF lacks."""
    text = OP_DEFS_FILE.read_text(encoding="utf-8")
    op_list = text_format.Parse(text, _message("minigraph.graph.OpList")())
    match = re.search(r"^# not in TensorFlow:(.*)$", text, re.M)
    lacking = {n.strip() for n in match.group(1).split(",") if n.strip()} if match else set()
    return {op.name: op for op in op_list.op}, lacking


def load_tf_cpu_kernels() -> dict[str, list[dict[str, set[str]]]]:
    """TF's CPU (and DEFAULT) kernels by op type: a list of {attr: dtypes} constraints."""
    found: dict[str, list[dict[str, set[str]]]] = {}
    for line in KERNELS_FILE.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        op_type, _device, *constraints = line.split()
        found.setdefault(op_type, []).append(
            {c.split("=")[0]: set(c.split("=")[1].split(",")) for c in constraints}
        )
    return found


TF_OP_DEFS, TF_LACKS = load_tf_op_defs()
TF_CPU_KERNELS = load_tf_cpu_kernels()
_DATA_TYPE_NAME = proto.DataType.Name


def mg_dtype(enum: int) -> mg.DType | None:
    """minigraph's dtype for TF's DataType enum value, or None where minigraph has none."""
    name = _DATA_TYPE_NAME(enum)[3:].lower()  # DT_FLOAT -> float
    try:
        return mg.as_dtype(name)
    except (InvalidArgumentError, TypeError):
        return None


def _mg_dtype_named(name: str) -> mg.DType | None:
    try:
        return mg.as_dtype(name)
    except (InvalidArgumentError, TypeError):
        return None


# -- the comparison -----------------------------------------------------------------------------


def _arg_type(arg) -> str:
    """An arg's type in one notation for both sides: `T`, `N * T`, `N * int32`, `list Tlist`,
    `int32`."""
    if arg.type_list_attr:
        return f"list {arg.type_list_attr}"
    if arg.type_attr:
        element = arg.type_attr
    else:
        dtype = mg_dtype(arg.type)
        element = dtype.name if dtype is not None else _DATA_TYPE_NAME(arg.type)
    return f"{arg.number_attr} * {element}" if arg.number_attr else element


def _our_arg_type(arg: mg.op_def.ArgDef) -> str:
    if arg.type_list_attr:
        return f"list {arg.type_list_attr}"
    element = arg.type_attr if arg.type_attr else (arg.dtype.name if arg.dtype else "?")
    return f"{arg.number_attr} * {element}" if arg.number_attr else element


def _tf_default(attr) -> object:
    """TF's default value, in minigraph's canonical form (for the attr's type)."""
    value = attr.default_value
    kind = attr.type
    if kind.startswith("list("):
        element = kind[5:-1]
        items = getattr(value.list, _LIST_FIELD[element])
        return tuple(_tf_scalar(element, v) for v in items)
    return _tf_scalar(kind, getattr(value, _LIST_FIELD[kind]))


_LIST_FIELD = {
    "int": "i",
    "float": "f",
    "bool": "b",
    "string": "s",
    "type": "type",
    "shape": "shape",
    "tensor": "tensor",
    "func": "func",
}


def _tf_scalar(kind: str, value: object) -> object:
    if kind == "type":
        return mg_dtype(value) or _DATA_TYPE_NAME(value)
    if kind == "string":
        return value.decode("utf-8")
    if kind == "shape":
        if value.unknown_rank:
            return TensorShape(None)
        return TensorShape([d.size if d.size >= 0 else None for d in value.dim])
    if kind == "float":
        return float(np.float32(value))
    return value


def _same_default(ours: object, theirs: object, kind: str) -> bool:
    if kind == "float":
        return np.float32(ours) == np.float32(theirs)
    if kind == "list(float)":
        return np.array_equal(np.float32(ours), np.float32(theirs))
    return type(ours) is type(theirs) and ours == theirs


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, mg.DType):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


def _allowed(attr) -> list | None:
    """TF's allowed values, in minigraph's terms, or None (anything of the attr's type)."""
    if not attr.HasField("allowed_values"):
        return None
    values = attr.allowed_values.list
    if attr.type in ("type", "list(type)"):
        # TF's dtypes minigraph does not have (qint8, variant, float8, int4, ...) are left out.
        return [d for d in (mg_dtype(t) for t in values.type) if d is not None]
    if attr.type in ("string", "list(string)"):
        return [s.decode("utf-8") for s in values.s]
    return [getattr(values, _LIST_FIELD[attr.type.removeprefix("list(").rstrip(")")])]


def op_def_differences(op_type: str, *, with_deliberate: bool = False) -> list[str]:
    """How minigraph's registered OpDef of `op_type` differs from TF's: one line each, less the
    DELIBERATE_DIFFERENCES unless `with_deliberate`."""
    theirs = TF_OP_DEFS[op_type]
    ours = registry.get_op_def(op_type)
    problems = []
    for what, tf_args, our_args in (
        ("input", theirs.input_arg, ours.inputs),
        ("output", theirs.output_arg, ours.outputs),
    ):
        tf_sig = [f"{a.name}: {_arg_type(a)}" for a in tf_args]
        our_sig = [f"{a.name}: {_our_arg_type(a)}" for a in our_args]
        if tf_sig != our_sig:
            problems.append(f"{what}s: TF has ({', '.join(tf_sig)}), ours ({', '.join(our_sig)})")
    tf_names = [a.name for a in theirs.attr]
    # Attrs TF's op lacks that the library declares as its own (minigraph.tf_compat: written to
    # files only when not at their default, which then makes TF refuse the file) are extensions.
    declared = tf_compat.tf_attrs(op_type)
    extensions = [
        a.name
        for a in ours.attrs
        if a.name not in tf_names
        and declared is not None
        and a.name not in declared
        and a.has_default
    ]
    our_names = [a.name for a in ours.attrs if a.name not in extensions]
    if tf_names != our_names:
        problems.append(f"attrs: TF has {tf_names}, ours {our_names}")
    for tf_attr in theirs.attr:
        if not ours.has_attr(tf_attr.name):
            continue
        attr = ours.attr(tf_attr.name)
        name = tf_attr.name
        if attr.type != tf_attr.type:
            problems.append(f"attr {name}: TF's type is {tf_attr.type}, ours {attr.type}")
            continue
        allowed = _allowed(tf_attr)
        ours_allowed = list(attr.allowed) if attr.allowed is not None else None
        if allowed is None and ours_allowed is not None:
            problems.append(
                f"attr {name}: TF allows any value, ours only {_show(tuple(ours_allowed))}"
            )
        elif allowed is not None and ours_allowed is None:
            problems.append(f"attr {name}: TF allows only {_show(tuple(allowed))}, ours any value")
        elif allowed is not None and set(allowed) != set(ours_allowed):
            extra = [v for v in ours_allowed if v not in allowed]
            lacking = [v for v in allowed if v not in ours_allowed]
            problems.append(
                f"attr {name}: allowed values differ: ours lacks {_show(tuple(lacking))}, "
                f"has {_show(tuple(extra))} TF lacks"
            )
        if tf_attr.HasField("default_value"):
            want = _tf_default(tf_attr)
            if not attr.has_default:
                problems.append(f"attr {name}: TF's default is {_show(want)}, ours has none")
            elif not _same_default(attr.default, want, attr.type):
                problems.append(
                    f"attr {name}: TF's default is {_show(want)}, ours {_show(attr.default)}"
                )
        elif attr.has_default:
            problems.append(f"attr {name}: TF has no default, ours is {_show(attr.default)}")
        tf_minimum = tf_attr.minimum if tf_attr.has_minimum else None
        if tf_minimum != attr.minimum:
            problems.append(f"attr {name}: TF's minimum is {tf_minimum}, ours {attr.minimum}")
    if theirs.is_stateful != ours.is_stateful:
        problems.append(f"is_stateful: TF's is {theirs.is_stateful}, ours {ours.is_stateful}")
    if with_deliberate:
        return problems
    deliberate = DELIBERATE_DIFFERENCES.get(op_type, {})
    return [p for p in problems if p not in deliberate]


# -- the tests ---------------------------------------------------------------------------------


def _library_op(op_type: str) -> bool:
    """Registered by minigraph or its op library (not by a test module run in this process)."""
    module = getattr(registry.builder(op_type), "__module__", None) or ""
    return module.startswith(("minigraph.", "ops."))


OUR_OPS = [op for op in registry.list_ops() if _library_op(op)]
IN_TF = [op for op in OUR_OPS if op in TF_OP_DEFS]


def test_every_registered_op_is_recorded_or_minigraph_only():
    unrecorded = [op for op in OUR_OPS if op not in TF_OP_DEFS and op not in TF_LACKS]
    assert not unrecorded, f"no TF OpDef recorded for {unrecorded}: {REGENERATE}"
    unexplained = [op for op in OUR_OPS if op in TF_LACKS and op not in MINIGRAPH_ONLY]
    assert not unexplained, f"TF 2.21 lacks {unexplained}: list them in MINIGRAPH_ONLY"
    stale = [op for op in MINIGRAPH_ONLY if op in TF_OP_DEFS or op not in OUR_OPS]
    assert not stale, f"MINIGRAPH_ONLY names ops TF has or minigraph lacks: {stale}"


def test_the_recorded_files_are_tfs_and_small():
    text = OP_DEFS_FILE.read_text(encoding="utf-8")
    assert text.startswith("# TensorFlow 2.21")
    assert "description:" not in text and "summary:" not in text  # stripped of docs
    assert OP_DEFS_FILE.stat().st_size + KERNELS_FILE.stat().st_size < 250_000
    # A few facts of TF 2.21's definitions, so that a bad regeneration cannot pass unseen.
    gather = TF_OP_DEFS["GatherV2"]
    assert [a.name for a in gather.attr] == ["batch_dims", "Tparams", "Tindices", "Taxis"]
    assert TF_OP_DEFS["Assert"].is_stateful and not TF_OP_DEFS["AddV2"].is_stateful
    assert {"int32", "int64"} <= TF_CPU_KERNELS["GatherV2"][0]["Tindices"]


@pytest.mark.parametrize(
    "op_type",
    [
        pytest.param(
            op,
            marks=pytest.mark.xfail(strict=True, reason="; ".join(KNOWN_DIFFERENCES[op])),
        )
        if op in KNOWN_DIFFERENCES
        else op
        for op in IN_TF
    ],
)
def test_op_def_is_tfs(op_type):
    assert op_def_differences(op_type) == []


def test_deliberate_differences_are_still_there():
    # Each DELIBERATE_DIFFERENCES entry describes the op as it is (a stale one must go).
    for op_type, differences in DELIBERATE_DIFFERENCES.items():
        assert set(differences) <= set(op_def_differences(op_type, with_deliberate=True))


def test_known_differences_are_exactly_these():
    # Each KNOWN_DIFFERENCES entry is still exactly how the op differs (fixed ones must go).
    for op_type, known in KNOWN_DIFFERENCES.items():
        assert op_def_differences(op_type) == known, op_type


# -- CPU kernels ---------------------------------------------------------------------------------


def _type_attr_values(op_def: mg.op_def.OpDef, tf_def, attr: str) -> list[mg.DType]:
    """The dtypes an unconstrained TF kernel takes for `attr`: those TF's OpDef allows that
    minigraph has (every minigraph dtype when TF's OpDef allows any)."""
    tf_attr = next(a for a in tf_def.attr if a.name == attr)
    allowed = _allowed(tf_attr)
    return list(allowed) if allowed is not None else list(mg.dtypes.ALL_DTYPES)


def cpu_kernel_gaps(op_type: str) -> list[str]:
    """TF's CPU kernel dtype combinations (dtypes minigraph has) that find_kernel finds no CPU
    kernel for, one line each ("T=int8"), less KERNEL_EXCEPTIONS."""
    op_def = registry.get_op_def(op_type)
    tf_def = TF_OP_DEFS[op_type]
    type_attrs = [a.name for a in op_def.attrs if a.type == "type"]
    base = {a.name: a.default for a in op_def.attrs if a.has_default}
    gaps = set()
    for constraints in TF_CPU_KERNELS.get(op_type, []):
        axes = []
        for attr in type_attrs:
            # TF registers some kernels its OpDef never lets run (MatMul's int16): only the
            # dtypes TF's OpDef allows count.
            values = _type_attr_values(op_def, tf_def, attr)
            if attr in constraints:
                values = [d for d in values if d.name in constraints[attr]]
            axes.append([(attr, d) for d in values])
        for combo in itertools.product(*axes):
            if any((op_type, a, d.name) in KERNEL_EXCEPTIONS for a, d in combo):
                continue
            attrs = {**base, **dict(combo)}
            try:
                registry.find_kernel(op_type, "CPU", attrs)
            except mg.NotFoundError:
                gaps.add(" ".join(f"{a}={d.name}" for a, d in combo))
    return sorted(gaps)


KNOWN_KERNEL_GAPS: dict[str, list[str]] = {}


@pytest.mark.parametrize(
    "op_type",
    [
        pytest.param(
            op,
            marks=pytest.mark.xfail(
                strict=True, reason="no CPU kernel for " + "; ".join(KNOWN_KERNEL_GAPS[op])
            ),
        )
        if op in KNOWN_KERNEL_GAPS
        else op
        for op in IN_TF
    ],
)
def test_cpu_kernels_take_every_dtype_tfs_do(op_type):
    assert cpu_kernel_gaps(op_type) == []


def test_known_kernel_gaps_are_exactly_these():
    for op_type, known in KNOWN_KERNEL_GAPS.items():
        assert cpu_kernel_gaps(op_type) == known, op_type


# -- no more than TF's CPU kernels, and the GPU takes what cupy holds ------------------------------


def _kernel_combinations(op_type: str):
    """Every combination of the op's type attrs its OpDef allows, as attr dicts (the other
    attrs at their defaults), with a label ("T=int8 Tindices=int32")."""
    op_def = registry.get_op_def(op_type)
    type_attrs = [a for a in op_def.attrs if a.type == "type"]
    base = {a.name: a.default for a in op_def.attrs if a.has_default}
    axes = [
        [(a.name, d) for d in (a.allowed if a.allowed is not None else mg.dtypes.ALL_DTYPES)]
        for a in type_attrs
    ]
    for combo in itertools.product(*axes):
        yield " ".join(f"{a}={d.name}" for a, d in combo), combo, {**base, **dict(combo)}


def _has_kernel(op_type: str, device: str, attrs: dict) -> bool:
    try:
        registry.find_kernel(op_type, device, attrs)
    except mg.NotFoundError:
        return False
    return True


def cpu_kernel_extras(op_type: str) -> list[str]:
    """The dtype combinations minigraph has a CPU kernel for and TF has none (TF builds such a
    node, then its Session fails to find a kernel: minigraph must too)."""
    tf_kernels = TF_CPU_KERNELS.get(op_type, [])
    extras = []
    for label, combo, attrs in _kernel_combinations(op_type):
        if not _has_kernel(op_type, "CPU", attrs):
            continue
        in_tf = any(
            all(attr not in c or dtype.name in c[attr] for attr, dtype in combo) for c in tf_kernels
        )
        if not in_tf:
            extras.append(label)
    return extras


#: CPU kernel dtype combinations minigraph has and TF lacks, deliberately: op type -> (the
#: combinations, as `cpu_kernel_extras` words them, and the reason).
DELIBERATE_KERNEL_EXTRAS: dict[str, tuple[list[str], str]] = {
    "ScatterNd": (
        [f"T={t} Tindices=int16" for t in sorted(d.name for d in mg.dtypes.ALL_DTYPES)],
        "TF's OpDef allows int16 indices, its kernels lack them; GatherNd takes int16 indices "
        "and its gradient is a ScatterNd of them (README: deliberate differences)",
    ),
}


@pytest.mark.parametrize("op_type", IN_TF)
def test_cpu_kernels_take_no_dtype_tfs_do_not(op_type):
    want = DELIBERATE_KERNEL_EXTRAS.get(op_type, ([], ""))[0]
    assert sorted(cpu_kernel_extras(op_type)) == sorted(want)


#: Ops with CPU kernels and no GPU kernel at all, with the reason.
CPU_ONLY_OPS: dict[str, str] = {
    "Placeholder": "a fed value is placed where its consumers are; the node runs no kernel",
}


def gpu_kernel_gaps(op_type: str) -> list[str]:
    """The CPU kernel dtype combinations cupy can hold (no bfloat16, no strings) with no GPU
    kernel: the GPU takes every dtype the CPU takes but those."""
    gaps = []
    for label, combo, attrs in _kernel_combinations(op_type):
        if any(d.is_string or d is mg.bfloat16 for _, d in combo):
            continue
        if _has_kernel(op_type, "CPU", attrs) and not _has_kernel(op_type, "GPU", attrs):
            gaps.append(label)
    return gaps


# The library's ops (IN_TF: a test module may register ops of its own in one process).
@pytest.mark.parametrize("op_type", [op for op in IN_TF if op not in CPU_ONLY_OPS])
def test_gpu_kernels_take_what_cupy_holds(op_type):
    assert gpu_kernel_gaps(op_type) == []


def test_cpu_only_ops_have_no_gpu_kernel():
    for op_type in CPU_ONLY_OPS:
        assert all(
            not _has_kernel(op_type, "GPU", attrs) for _, _, attrs in _kernel_combinations(op_type)
        ), op_type


@pytest.mark.parametrize(
    "op_type, attrs",
    [
        ("Range", {"Tidx": mg.int8}),
        ("Range", {"Tidx": mg.uint64}),
        ("RealDiv", {"T": mg.int32}),
        ("Round", {"T": mg.int8}),
    ],
)
def test_a_dtype_tfs_opdef_allows_and_its_kernels_lack_fails_to_find_a_kernel(op_type, attrs):
    # TF builds the node, then its Session reports no kernel (NotFoundError): the same here.
    base = {a.name: a.default for a in registry.get_op_def(op_type).attrs if a.has_default}
    for device in ("CPU", "GPU"):
        assert not _has_kernel(op_type, device, {**base, **attrs}), (op_type, device)
