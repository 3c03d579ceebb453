"""The op and kernel registries, mirroring TF's `REGISTER_OP` and `REGISTER_KERNEL_BUILDER`.

Both registries are process-global and append-only. Registration is explicit: an op library
calls `register_op` once per op and `register_kernel` once per kernel; nothing is discovered by
scanning modules. Registering an identical op again (same signature, attrs, docs and shape
function, as when a notebook cell or a module runs twice) returns the builder registered first,
and registering the same kernel function under the same key again does nothing; anything else
registered under a taken name or kernel key is an AlreadyExistsError. A kernel is replaced by
registering another one with a higher `priority`, or under a `label` that nodes ask for.

Device types are names such as "CPU" and "GPU" (built in); kernels and device requests may only
name known device types, and `register_device_type` adds one.

A kernel is a callable `fn(ctx, *inputs, **attrs)` where `ctx` is a `KernelContext`
(`ctx.xp` is the device's array module: numpy or cupy), `inputs` are arrays on the kernel's
device (host arrays for host-memory inputs) and `attrs` are the node's canonical attr values.
It returns its output array, or a tuple of arrays for ops with several outputs.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from minigraph import dtypes
from minigraph.dtypes import DType
from minigraph.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from minigraph.op_def import OpDef, show_value

__all__ = [
    "KernelDef",
    "add_op_def",
    "add_alias",
    "builder",
    "get_op_def",
    "list_ops",
    "signature",
    "alias_of",
    "list_aliases",
    "register_kernel",
    "register_device_type",
    "device_types",
    "check_device_type",
    "find_kernel",
    "kernel_attrs",
    "kernels_for",
    "kernel_device_types",
    "OPERATORS",
    "register_operator",
    "operator_function",
    "GradientRule",
    "register_gradient",
    "no_gradient",
    "gradient_rule",
    "REWRITE_PASSES",
    "register_rewrite",
    "rewrites_for",
]

_lock = threading.RLock()
_ops: dict[str, OpDef] = {}
_builders: dict[str, type] = {}  # op type -> the builder class registered with it
_aliases: dict[str, str] = {}  # builder name -> op type (`Gather` -> `GatherV2`)
_kernels: dict[str, list[KernelDef]] = {}
_device_types: set[str] = {"CPU", "GPU"}
_operators: dict[str, Callable[..., Any]] = {}


# -- ops ---------------------------------------------------------------------------------------


def add_op_def(op_def: OpDef, builder: type | None = None) -> type | None:
    """Adds `op_def` with its builder class; returns the builder registered for the op (the
    first one when an identical OpDef was registered before). For `register_op` (builder.py);
    users call `minigraph.register_op`, which also makes the builder class.

    Raises:
        AlreadyExistsError: a different op (or an alias) has that name; the message says what
            differs.
    """
    if not isinstance(op_def, OpDef):
        raise InvalidArgumentError(f"expected an OpDef, got {type(op_def).__name__}")
    with _lock:
        name = op_def.name
        if name in _aliases:
            raise AlreadyExistsError(
                f"Op type {name!r} cannot be registered: it is the name of a builder aliasing "
                f"{_aliases[name]}"
            )
        existing = _ops.get(name)
        if existing is not None:
            why = _op_def_difference(existing, op_def)
            if why is None:
                return _builders.get(name)
            raise AlreadyExistsError(
                f"Op type {name!r} is already registered, with a different definition ({why}); "
                "op names are global to the process: pick another name, or restart to change "
                "a definition"
            )
        _ops[name] = op_def
        if builder is not None:
            _builders[name] = builder
        return builder


def _op_def_difference(old: OpDef, new: OpDef) -> str | None:
    """What makes `new` differ from the registered `old`; None when they are identical."""
    if old is new:
        return None
    parts = (
        ("inputs", lambda d: [(repr(a), a.doc) for a in d.inputs]),
        ("outputs", lambda d: [(repr(a), a.doc) for a in d.outputs]),
        ("attrs", lambda d: [(a.spec(), a.doc) for a in d.attrs]),
        ("doc", lambda d: d.doc),
    )
    for what, key in parts:
        if key(old) != key(new):
            return f"its {what} differ"
    if old.is_stateful != new.is_stateful:
        return f"is_stateful is {old.is_stateful} there, {new.is_stateful} here"
    if not _same_function(old.shape_fn, new.shape_fn):
        return "its shape function differs"
    return None


def _same_function(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are the same function: the same object, or functions with equal
    code, name, defaults and closure values (as when the cell or module defining them runs
    again)."""
    if a is b:
        return True
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if code_a is None or code_b is None:
        return _equal(a, b)
    return (
        # Code objects compare by name, bytecode, constants, names and line numbers, but not by
        # file name, which an interactive shell may change each time a cell runs.
        code_a == code_b
        and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
        and getattr(a, "__module__", None) == getattr(b, "__module__", None)
        and _equal(getattr(a, "__defaults__", None), getattr(b, "__defaults__", None))
        and _equal(getattr(a, "__kwdefaults__", None), getattr(b, "__kwdefaults__", None))
        and _same_cells(getattr(a, "__closure__", None), getattr(b, "__closure__", None))
    )


def _same_cells(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        try:
            x, y = x.cell_contents, y.cell_contents
        except ValueError:  # an empty cell
            return False
        if not (_same_function(x, y) if callable(x) and callable(y) else _equal(x, y)):
            return False
    return True


def _equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        result = a == b
        return result if isinstance(result, bool) else False  # arrays compare elementwise
    except Exception:
        return False


def _builder_of(op_type: str) -> type | None:
    """The builder class registered with `op_type` (None for ops registered without one)."""
    return _builders.get(op_type)


def builder(op_type: str) -> type | None:
    """The builder class registered with `op_type` (the class `register_op` returned; its
    `__module__` is the op library module that registered it), or None for an op registered
    without one.

    Raises:
        NotFoundError: `op_type` is not a registered op.
    """
    get_op_def(op_type)
    return _builders.get(op_type)


def add_alias(alias: str, op_def: OpDef) -> None:
    """Records that the builder named `alias` makes `op_def`'s nodes, when `op_def` is the
    registered definition of its op type (for `op_builder`, builder.py; a builder made for an
    unregistered OpDef gets no alias).

    Raises:
        AlreadyExistsError: `alias` is an op type, or an alias of another op.
    """
    if not isinstance(op_def, OpDef):
        raise InvalidArgumentError(
            f"add_alias: op_def must be an OpDef; got {type(op_def).__name__} {op_def!r}"
        )
    _check_op_type(alias, "add_alias: alias")
    op_type = op_def.name
    with _lock:
        if _ops.get(op_type) is not op_def:
            return
        if alias in _ops:
            raise AlreadyExistsError(
                f"cannot name a builder of {op_type} {alias!r}: an op type has that name"
            )
        target = _aliases.get(alias)
        if target is not None and target != op_type:
            raise AlreadyExistsError(
                f"a builder named {alias!r} already aliases {target}; pick another name"
            )
        _aliases[alias] = op_type


def alias_of(name: str) -> str | None:
    """The op type that the builder alias `name` makes (`alias_of("Gather") == "GatherV2"`),
    or None when `name` is not an alias."""
    _check_op_type(name, "alias_of: name")
    return _aliases.get(name)


def list_aliases() -> dict[str, str]:
    """Every builder alias and the op type it makes, sorted by alias."""
    return dict(sorted(_aliases.items()))


def get_op_def(op_type: str) -> OpDef:
    """The OpDef of `op_type`.

    Raises:
        NotFoundError: no such op; the message lists close names, and says when `op_type` is
            the name of a builder aliasing another op.
    """
    try:
        op_def = _ops.get(op_type)
    except TypeError:  # unhashable: refused below
        op_def = None
    if op_def is None:
        _check_op_type(op_type, "get_op_def: op_type")
        alias = _aliases.get(op_type)
        if alias is not None:
            raise NotFoundError(
                f"Op type not registered: {op_type!r}. It is the name of a builder that makes "
                f"{alias} nodes: use get_op_def({alias!r})."
            )
        import difflib  # noqa: PLC0415 - only for this error: it is slow to import

        close = difflib.get_close_matches(op_type, list(_ops), n=5, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise NotFoundError(
            f"Op type not registered: {op_type!r}.{hint} (Registered ops: {len(_ops)}; "
            "is the op library that defines it imported?)"
        )
    return op_def


def _check_op_type(op_type: Any, what: str) -> None:
    if not isinstance(op_type, str):
        raise InvalidArgumentError(
            f"{what} must be an op type name (a string such as 'GatherV2'); got "
            f"{type(op_type).__name__} {show_value(op_type)}"
        )


def list_ops() -> list[str]:
    """The names of all registered ops, sorted."""
    return sorted(_ops)


def signature(op_type: str) -> str:
    """`GatherV2(params: Tparams, indices: Tindices, axis: Taxis) -> output: Tparams; ...`."""
    return get_op_def(op_type).signature()


# -- kernels -----------------------------------------------------------------------------------


class KernelDef:
    """A registered kernel: which op and device type it serves, and under which constraints."""

    __slots__ = (
        "op_type", "device_type", "fn", "type_constraints", "attr_constraints",
        "host_memory", "host_inputs", "host_outputs", "label", "priority", "_op_def", "trusted",
        "specialize",
    )  # fmt: skip

    def __init__(
        self,
        op_def: OpDef,
        device_type: str,
        fn: Callable[..., Any],
        type_constraints: Mapping[str, frozenset[DType]],
        attr_constraints: Mapping[str, Any],
        host_memory: frozenset[str],
        label: str,
        priority: int,
        trusted: bool = False,
        specialize: Callable[[Any], Any] | None = None,
    ):
        set_ = object.__setattr__
        set_(self, "op_type", op_def.name)
        set_(self, "device_type", device_type)
        set_(self, "fn", fn)
        set_(self, "type_constraints", dict(type_constraints))
        set_(self, "attr_constraints", dict(attr_constraints))
        set_(self, "host_memory", host_memory)
        in_names = [a.name for a in op_def.inputs]
        out_names = [a.name for a in op_def.outputs]
        host_in = frozenset(in_names.index(n) for n in host_memory if n in in_names)
        host_out = frozenset(out_names.index(n) for n in host_memory if n in out_names)
        set_(self, "host_inputs", host_in)
        set_(self, "host_outputs", host_out)
        set_(self, "label", label)
        set_(self, "priority", priority)
        set_(self, "_op_def", op_def)
        set_(self, "trusted", trusted)
        set_(self, "specialize", specialize)

    def __setattr__(self, key, value):
        raise AttributeError("KernelDef is immutable")

    def flat_host_inputs(self, attrs: Mapping[str, Any]) -> frozenset[int]:
        """Flat input positions kept in host memory for a node with `attrs` (every element of
        a host-memory list arg). `host_inputs` holds arg positions, which are the flat ones
        for ops without list inputs."""
        if not self.host_inputs or not self._op_def.has_list_inputs:
            return self.host_inputs
        return _flat_positions(self.host_inputs, self._op_def.input_arg_lengths(attrs))

    def flat_host_outputs(self, attrs: Mapping[str, Any]) -> frozenset[int]:
        """Flat output positions kept in host memory for a node with `attrs`."""
        if not self.host_outputs or not self._op_def.has_list_outputs:
            return self.host_outputs
        return _flat_positions(self.host_outputs, self._op_def.output_arg_lengths(attrs))

    def mismatch(self, attrs: Mapping[str, Any], label: str) -> str | None:
        """Why this kernel cannot run a node with `attrs` and kernel `label`; None if it can."""
        if label != self.label:
            want = f"label {self.label!r}" if self.label else "no label"
            return f"kernel has {want}, node asks for {label!r}" if label else f"kernel has {want}"
        for name, allowed in self.type_constraints.items():
            if attrs[name] not in allowed:
                return f"{name}={attrs[name].name} not in {_names(allowed)}"
        for name, allowed in self.attr_constraints.items():
            value = attrs[name]
            ok = allowed(value) if callable(allowed) else value in allowed
            if not ok:
                return f"attr {name}={value!r} not supported"
        return None

    def describe(self) -> str:
        parts = [f"{k} in {_names(v)}" for k, v in self.type_constraints.items()]
        if self.host_memory:
            parts.append(f"host memory: {', '.join(sorted(self.host_memory))}")
        if self.label:
            parts.append(f"label {self.label!r}")
        return f"{self.device_type}" + (f" ({'; '.join(parts)})" if parts else "")

    def __repr__(self) -> str:
        return f"KernelDef({self.op_type} on {self.describe()})"


def _flat_positions(args: frozenset[int], lengths: tuple[int, ...]) -> frozenset[int]:
    positions = []
    start = 0
    for i, n in enumerate(lengths):
        if i in args:
            positions.extend(range(start, start + n))
        start += n
    return frozenset(positions)


def _names(allowed: Iterable[DType]) -> str:
    return "{" + ", ".join(sorted(d.name for d in allowed)) + "}"


def canonical_device_type(device_type: str) -> str:
    """'cpu', 'CPU' -> 'CPU'; device types are upper case, as in TF."""
    if (
        not isinstance(device_type, str)
        or not device_type.isidentifier()
        or not device_type.isascii()
    ):
        raise InvalidArgumentError(f"invalid device type {device_type!r}")
    return device_type.upper()


def register_device_type(device_type: str) -> str:
    """Makes `device_type` (e.g. "TPU") known, so kernels and device requests may name it;
    returns its canonical (upper-case) name. "CPU" and "GPU" are built in. Registering a known
    device type again does nothing.

    A device type names a kind of device; sessions still need a `Device` of that type to run
    anything on it.
    """
    canonical = canonical_device_type(device_type)
    with _lock:
        _device_types.add(canonical)
    return canonical


def device_types() -> list[str]:
    """The known device types, sorted ("CPU", "GPU" and any registered ones)."""
    return sorted(_device_types)


def check_device_type(device_type: str, what: str = "device type") -> str:
    """The canonical name of a known device type.

    Raises:
        InvalidArgumentError: the device type is not known; close known names are suggested.
    """
    canonical = canonical_device_type(device_type)
    if canonical not in _device_types:
        import difflib  # noqa: PLC0415 - only for this error: it is slow to import

        known = sorted(_device_types)
        close = difflib.get_close_matches(canonical, known, n=2, cutoff=0.5)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise InvalidArgumentError(
            f"unknown {what} {device_type!r}.{hint} Known device types: {', '.join(known)} "
            "(minigraph.registry.register_device_type adds one)"
        )
    return canonical


def register_kernel(
    op_type: str,
    device_type: str,
    fn: Callable[..., Any],
    *,
    type_constraints: Mapping[str, Iterable[Any]] | None = None,
    attr_constraints: Mapping[str, Any] | None = None,
    host_memory: Iterable[str] = (),
    label: str = "",
    priority: int = 0,
    trusted: bool = False,
    specialize: Callable[[Any], Any] | None = None,
) -> KernelDef:
    """Registers `fn` as the kernel of `op_type` on devices of `device_type` ("CPU", "GPU").

    Registering the same function again under the same op, device type, label, priority and
    constraints returns the registered KernelDef and changes nothing. To replace a kernel,
    register the new one with a higher `priority` (it wins wherever both match) or under a
    `label` (used by nodes built under `Scope.with_kernel_label(label)`).

    Args:
        op_type: a registered op.
        device_type: the device type served, case-insensitive: "CPU", "GPU", or one added
            with `register_device_type`.
        fn: `fn(ctx, *inputs, **attrs) -> output or tuple of outputs`.
        type_constraints: `{type attr: allowed dtypes}`; nodes with other dtypes do not match.
        attr_constraints: `{attr: allowed values or predicate}`.
        host_memory: names of inputs/outputs kept in host memory on this device (TF's
            `HostMemory("axis")`); the kernel receives and returns those as numpy arrays.
        label: matches only nodes built under `Scope.with_kernel_label(label)`.
        priority: among matching kernels, the highest priority wins.
        trusted: skip the run-time checks of this kernel's outputs (dtype, shape, array type)
            and the read-only wrapping of fed arrays it receives. Sessions check the outputs
            of untrusted kernels by default (`SessionConfig.check_kernel_outputs`); mark a
            kernel trusted only when its own tests check its outputs against the op's shape
            function, it never writes into its inputs, and it never returns a view of an
            input other than the input itself (as the built-in kernels do).
        specialize: `specialize(spec) -> callable or None`, called once per node when a plan
            is compiled, with a `minigraph.KernelSpec` (the node's context, attrs, static input
            dtypes and shapes, and the values of its constant inputs). A callable it returns
            runs instead of `fn` for that node, called with the inputs only; it must return
            and raise exactly what `fn` would, for any input (typically by calling
            `spec.general(*inputs)` for whatever it was not made for). None keeps `fn`.
            `SessionConfig(specialize_kernels=False)` turns specialisation off.

    Raises:
        NotFoundError: `op_type` is not registered.
        AlreadyExistsError: another function is registered with the same op, device, label,
            priority and constraints.
        InvalidArgumentError: an unknown device type, or constraints that name unknown attrs
            or arguments.
    """
    op_def = get_op_def(op_type)
    device_type = check_device_type(device_type)
    if not isinstance(label, str) or not label.isprintable():
        raise InvalidArgumentError(
            f"kernel for {op_type}: a label is a printable string (no newlines); got {label!r}"
        )
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidArgumentError(f"kernel for {op_type}: a priority is an int; got {priority!r}")
    if not callable(fn):
        raise InvalidArgumentError(f"kernel for {op_type} on {device_type} is not callable")
    if type(trusted) is not bool:
        raise InvalidArgumentError(
            f"kernel for {op_type} on {device_type}: trusted must be a bool, got "
            f"{type(trusted).__name__}"
        )
    if specialize is not None and not callable(specialize):
        raise InvalidArgumentError(
            f"kernel for {op_type} on {device_type}: specialize must be callable or None"
        )
    types: dict[str, frozenset[DType]] = {}
    for name, allowed in _mapping(type_constraints, "type_constraints", op_type).items():
        if op_def.attr(name).type != "type":
            raise InvalidArgumentError(f"{op_type}: type constraint on non-type attr {name!r}")
        allowed = _values(allowed, f"type_constraints[{name!r}]", op_type)
        types[name] = frozenset(dtypes.as_dtype(d) for d in allowed)
    attr_checks: dict[str, Any] = {}
    for name, allowed in _mapping(attr_constraints, "attr_constraints", op_type).items():
        attr_def = op_def.attr(name)
        if not callable(allowed):
            allowed = _values(allowed, f"attr_constraints[{name!r}]", op_type)
        attr_checks[name] = (
            allowed if callable(allowed) else frozenset(attr_def.canonicalize(v) for v in allowed)
        )
    if isinstance(host_memory, str):
        host_memory = [host_memory]  # one name, as TF's HostMemory("axis")
    host = frozenset(_values(host_memory, "host_memory", op_type))
    arg_names = {a.name for a in op_def.inputs} | {a.name for a in op_def.outputs}
    unknown = host - arg_names
    if unknown:
        raise InvalidArgumentError(
            f"{op_type}: host_memory names {sorted(unknown, key=repr)} are not inputs or outputs "
            f"(it has {sorted(arg_names)})"
        )
    kernel = KernelDef(
        op_def, device_type, fn, types, attr_checks, host, label, priority, trusted, specialize
    )
    with _lock:
        existing = _kernels.setdefault(op_type, [])
        for other in existing:
            if (
                other.device_type == device_type
                and other.label == label
                and other.priority == priority
                and other.type_constraints == kernel.type_constraints
                and other.attr_constraints == kernel.attr_constraints
            ):
                if (
                    other.host_memory == host
                    and other.trusted == trusted
                    and _same_function(other.fn, fn)
                    and _same_function(other.specialize, specialize)  # None is None
                ):
                    return other  # registered again (a module or cell run twice)
                raise AlreadyExistsError(
                    f"a kernel for {op_type} on {device_type} with these constraints is "
                    f"already registered ({_fn_name(other.fn)}); to replace it, register "
                    f"{_fn_name(fn)} with a higher priority (priority={priority + 1}) or under "
                    "a label (label='...', chosen by Scope.with_kernel_label)"
                )
        existing.append(kernel)
        existing.sort(key=lambda k: -k.priority)
    return kernel


def _mapping(value: Any, what: str, op_type: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"kernel for {op_type}: {what} maps attr names to allowed values; got "
            f"{type(value).__name__}"
        )
    return value


def _values(value: Any, what: str, op_type: str) -> list[Any]:
    """`value` as a list of its elements (a list, tuple, set, ...; not a str or bytes)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgumentError(
            f"kernel for {op_type}: {what} must be a list; got {type(value).__name__} {value!r}"
        )
    return list(value)


def _fn_name(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{name}" if module else name


def kernels_for(op_type: str) -> list[KernelDef]:
    """All kernels registered for `op_type`, highest priority first."""
    _check_op_type(op_type, "kernels_for: op_type")
    return list(_kernels.get(op_type, ()))


def kernel_device_types(op_type: str) -> list[str]:
    """Device types that have at least one kernel for `op_type`."""
    _check_op_type(op_type, "kernel_device_types: op_type")
    return sorted({k.device_type for k in _kernels.get(op_type, ())})


def find_kernel(
    op_type: str,
    device_type: str,
    attrs: Mapping[str, Any],
    label: str = "",
    node_name: str | None = None,
) -> KernelDef:
    """The best kernel for a node on `device_type`.

    Raises:
        NotFoundError: no kernel matches; the message names the op, its dtypes, the device and
            the devices (with constraints) that do have kernels.
    """
    if type(op_type) is not str:
        _check_op_type(op_type, "find_kernel: op_type")
    if type(device_type) is not str:
        raise InvalidArgumentError(
            f"find_kernel: device_type must be a string such as 'CPU'; got "
            f"{type(device_type).__name__} {show_value(device_type)}"
        )
    device_type = device_type.upper()
    reasons = []
    for kernel in _kernels.get(op_type, ()):
        if kernel.device_type != device_type:
            continue
        why = kernel.mismatch(attrs, label)
        if why is None:
            return kernel
        reasons.append(why)
    type_attrs = ", ".join(f"{k}={v.name}" for k, v in attrs.items() if isinstance(v, DType))
    available = [k.describe() for k in _kernels.get(op_type, ())]
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    raise NotFoundError(
        f"No registered kernel for op {op_type} on device type {device_type} with "
        f"[{type_attrs}]{detail}. Registered kernels: "
        + ("; ".join(available) if available else "none"),
        node_name,
        op_type,
    )


# -- tensor operators --------------------------------------------------------------------------

#: The Python operators an op library may define on `Output` and single-output builders, by
#: name (the dunder without underscores; a reflected form, `1 - x`, calls the same function with
#: the operands swapped). `==` and `!=` are not among them: Outputs compare by identity, as TF
#: 1.x graph tensors do, so that they stay dictionary keys.
OPERATORS = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
    "lt", "le", "gt", "ge", "and", "or", "xor",
    "neg", "abs", "invert", "getitem",
)  # fmt: skip


def register_operator(name: str, fn: Callable[..., Any]) -> None:
    """Makes `fn` the implementation of a tensor operator: `fn(x, y)` for a binary operator
    (either operand may be a literal; the other is an Output), `fn(x)` for a unary one,
    `fn(x, key)` for `getitem`. It builds the node (through `minigraph.current_scope(graph)`)
    and returns its Output. The runtime defines no operator itself: it knows no op but the
    framework's, so an op library registers them (the `ops` library does, on import).

    Registering the same function again does nothing.

    Raises:
        InvalidArgumentError: an unknown operator name, or `fn` not callable.
        AlreadyExistsError: another function is registered for `name`.
    """
    if not isinstance(name, str) or name not in OPERATORS:
        raise InvalidArgumentError(
            f"register_operator: unknown operator {name!r}; operators are {', '.join(OPERATORS)}"
        )
    if not callable(fn):
        raise InvalidArgumentError(f"register_operator({name!r}): fn must be callable; got {fn!r}")
    with _lock:
        old = _operators.get(name)
        if old is not None and not _same_function(old, fn):
            raise AlreadyExistsError(
                f"operator {name!r} is already defined by {_fn_name(old)}; it cannot also be "
                f"{_fn_name(fn)}"
            )
        _operators[name] = fn


def operator_function(name: str) -> Callable[..., Any] | None:
    """The function registered for the tensor operator `name`, or None."""
    return _operators.get(name)


# -- gradient rules ------------------------------------------------------------------------------


class GradientRule:
    """How `minigraph.gradients` differentiates an op type: `fn(op, *output_grads)` returning one
    gradient per input (None for an input without one), or `fn=None` for an op registered with
    `no_gradient`. `accepts_indexed_slices`: the rule takes IndexedSlices output gradients as
    they come; otherwise they are densified before the call."""

    __slots__ = ("op_type", "fn", "accepts_indexed_slices")

    def __init__(self, op_type: str, fn: Callable[..., Any] | None, accepts_indexed_slices: bool):
        set_ = object.__setattr__
        set_(self, "op_type", op_type)
        set_(self, "fn", fn)
        set_(self, "accepts_indexed_slices", accepts_indexed_slices)

    def __setattr__(self, key, value):
        raise AttributeError("GradientRule is immutable")

    def __repr__(self) -> str:
        if self.fn is None:
            return f"GradientRule({self.op_type}: not differentiable)"
        sparse = ", accepts IndexedSlices" if self.accepts_indexed_slices else ""
        return f"GradientRule({self.op_type}: {_fn_name(self.fn)}{sparse})"


_gradients: dict[str, GradientRule] = {}


def register_gradient(
    op_type: str, *, accepts_indexed_slices: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator registering `fn(op, *output_grads)` as the gradient rule of `op_type`, as TF's
    `@tf.RegisterGradient("OpType")`; it returns `fn` unchanged:

        @mg.register_gradient("Square")
        def _square_grad(op, grad):
            return grad * (2.0 * op.inputs[0])

    `minigraph.gradients` calls the rule once per node of that type that a gradient flows
    through, with the node and one gradient per output (an Output, an IndexedSlices, or None
    for an integer or bool output that receives none; float outputs that receive none get
    zeros), inside a `Scope.as_default()` block named `gradients/<node>_grad`: the rule builds
    with tensor operators and `minigraph.current_scope(op.graph)`. It returns one gradient per
    input (a list, or the gradient itself for one input): an Output, an IndexedSlices, or None.

    With `accepts_indexed_slices=True` the rule receives IndexedSlices output gradients as they
    are (a rule that passes them on, as Identity's); otherwise they are densified first.

    Registering the same function again does nothing (a module or notebook cell run twice).

    Raises:
        NotFoundError: `op_type` is not a registered op (register the op first).
        InvalidArgumentError: `fn` is not callable, or a flag is not a bool.
        AlreadyExistsError: another rule is registered for `op_type`, or it was declared not
            differentiable with `no_gradient`.
    """
    get_op_def(op_type)
    if type(accepts_indexed_slices) is not bool:
        raise InvalidArgumentError(
            f"register_gradient({op_type!r}): accepts_indexed_slices must be a bool; got "
            f"{type(accepts_indexed_slices).__name__}"
        )

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise InvalidArgumentError(
                f"register_gradient({op_type!r}) decorates a function fn(op, *output_grads); "
                f"got {type(fn).__name__} {show_value(fn)}"
            )
        with _lock:
            old = _gradients.get(op_type)
            if old is not None:
                if old.fn is None:
                    raise AlreadyExistsError(
                        f"op type {op_type!r} is registered as not differentiable (no_gradient); "
                        f"it cannot also have the gradient {_fn_name(fn)}"
                    )
                if _same_function(old.fn, fn) and old.accepts_indexed_slices == (
                    accepts_indexed_slices
                ):
                    return fn
                raise AlreadyExistsError(
                    f"a gradient for op type {op_type!r} is already registered "
                    f"({_fn_name(old.fn)}); it cannot also be {_fn_name(fn)}"
                )
            _gradients[op_type] = GradientRule(op_type, fn, accepts_indexed_slices)
        return fn

    return register


def no_gradient(op_type: str) -> None:
    """Declares `op_type` not differentiable, as TF's `tf.no_gradient` / `NotDifferentiable`:
    its inputs get no gradient (None) from it, and gradients reaching it stop there without an
    error. Declaring it again does nothing.

    Raises:
        NotFoundError: `op_type` is not a registered op.
        AlreadyExistsError: a gradient rule is registered for `op_type`.
    """
    get_op_def(op_type)
    with _lock:
        old = _gradients.get(op_type)
        if old is not None:
            if old.fn is None:
                return
            raise AlreadyExistsError(
                f"op type {op_type!r} has the gradient {_fn_name(old.fn)}; it cannot also be "
                "declared not differentiable"
            )
        _gradients[op_type] = GradientRule(op_type, None, False)


def gradient_rule(op_type: str) -> GradientRule:
    """The gradient rule registered for `op_type` (its `fn` is None for `no_gradient` ops).

    Raises:
        NotFoundError: neither a rule nor `no_gradient` is registered for `op_type`.
    """
    rule = _gradients.get(op_type) if type(op_type) is str else None
    if rule is None:
        _check_op_type(op_type, "gradient_rule: op_type")
        raise NotFoundError(f"No gradient defined for op type {op_type!r}", None, op_type)
    return rule


# -- graph rewrites ----------------------------------------------------------------------------

#: The graph optimizer's passes that run registered rewrites (see `minigraph.optimizer`).
REWRITE_PASSES = ("dependency_optimization", "arithmetic_optimization", "remapping")
_rewrites: dict[tuple[str, str], tuple[Callable[..., Any], ...]] = {}


def register_rewrite(
    op_type: str, fn: Callable[..., Any], *, pass_name: str = "arithmetic_optimization"
) -> None:
    """Registers `fn` as a rewrite of `op_type`'s nodes, tried by the graph optimizer's pass
    `pass_name` (one of REWRITE_PASSES) on every node of that type a plan runs.

    `fn(rw)` gets a `minigraph.optimizer.RewriteContext` for the node (`rw.op`, its current
    `rw.inputs`, constant values, guaranteed shapes, devices, and ways to build new nodes) and
    returns None to leave the node alone, or one replacement Output per output of the node, each
    with the node's dtype and a compatible shape, computing exactly the same values (and raising
    what the node would raise). Several rewrites of one op run in registration order; the first
    that returns replacements wins. Registering the same function again does nothing.

    Raises:
        NotFoundError: `op_type` is not registered.
        InvalidArgumentError: an unknown pass name, or `fn` not callable.
    """
    get_op_def(op_type)
    if not isinstance(pass_name, str) or pass_name not in REWRITE_PASSES:
        raise InvalidArgumentError(
            f"register_rewrite({op_type!r}): pass_name must be one of {list(REWRITE_PASSES)}; "
            f"got {pass_name!r}"
        )
    if not callable(fn):
        raise InvalidArgumentError(
            f"register_rewrite({op_type!r}): fn must be callable; got {fn!r}"
        )
    key = (op_type, pass_name)
    with _lock:
        known = _rewrites.get(key, ())
        if not any(_same_function(f, fn) for f in known):
            _rewrites[key] = (*known, fn)


def rewrites_for(op_type: str, pass_name: str) -> tuple[Callable[..., Any], ...]:
    """The rewrites registered for `op_type` in the optimizer pass `pass_name`, in order."""
    return _rewrites.get((op_type, pass_name), ())


_accepted_attrs: dict[Any, frozenset[str] | None] = {}


def kernel_attrs(fn: Any, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attrs `fn` declares as parameters (all of them if it takes **kwargs).

    Binding only what a kernel reads keeps each call's keyword dict small: it is rebuilt on
    every call of the partial.
    """
    names = _accepted_attrs.get(fn, ...)
    if names is ...:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            params = None
        if params is None or any(p.kind is p.VAR_KEYWORD for p in params):
            names = None
        else:
            names = frozenset(p.name for p in params if p.kind is not p.VAR_POSITIONAL)
        _accepted_attrs[fn] = names
    if names is None:
        return dict(attrs)
    return {k: v for k, v in attrs.items() if k in names}
