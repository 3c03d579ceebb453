"""The GraphDef schema: graph.proto, the committed descriptor built from it, TF's numbers, and
the promise that `import minigraph` imports neither protobuf nor networkx."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

import minigraph as mg
from minigraph import proto
from minigraph.proto import _descriptor, generate

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "minigraph" / "proto" / "graph.proto"

# TensorFlow's DataType numbers (tensorflow/core/framework/types.proto), written out here
# independently of minigraph.graph_def's table.
TF_NUMBERS = {
    "float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7,
    "complex64": 8, "int64": 9, "bool": 10, "bfloat16": 14, "uint16": 17, "complex128": 18,
    "float16": 19, "uint32": 22, "uint64": 23,
}  # fmt: skip


def declared_fields() -> set[tuple[str, str, int]]:
    """(message or enum path, field or value, number) for everything graph.proto declares,
    read from the text with a brace-counting scan (enough for the file's plain layout)."""
    fields = set()
    stack: list[tuple[str, str]] = []  # (kind, name) of the enclosing blocks
    text = re.sub(r"//[^\n]*", "", PROTO.read_text())
    for token in re.finditer(r"(message|enum|oneof)\s+(\w+)\s*\{|\{|\}|([^;{}]+);", text):
        kind, name, statement = token.group(1), token.group(2), token.group(3)
        if kind:
            stack.append((kind, name))
        elif token.group(0) == "{":
            stack.append(("", ""))
        elif token.group(0) == "}":
            stack.pop()
        elif statement and stack:
            path = ".".join(n for k, n in stack if k in ("message", "enum"))
            if stack[-1][0] == "enum":
                match = re.match(r"\s*(\w+)\s*=\s*(\d+)", statement)
            else:
                match = re.match(
                    r"\s*(?:repeated\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*(\d+)", statement
                )
            if match:
                fields.add((path, match.group(1), int(match.group(2))))
    return fields


def descriptor_fields() -> set[tuple[str, str, int]]:
    fields = set()

    def walk(message, prefix):
        path = f"{prefix}{message.name}"
        for field in message.field:
            fields.add((path, field.name, field.number))
        for nested in message.nested_type:
            if not nested.options.map_entry:
                walk(nested, f"{path}.")

    for message in file_proto().message_type:
        walk(message, "")
    for enum in file_proto().enum_type:
        for value in enum.value:
            fields.add((enum.name, value.name, value.number))
    return fields


def file_proto() -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(_descriptor.SERIALIZED)


def test_the_committed_descriptor_declares_what_graph_proto_declares():
    assert declared_fields() == descriptor_fields()
    assert ("GraphDef", "node", 1) in declared_fields()
    assert ("TensorProto", "half_val", 13) in declared_fields()


@pytest.mark.skipif(
    importlib.util.find_spec("grpc_tools") is None,
    reason="grpcio-tools (protoc) is not installed: pip install grpcio-tools",
)
def test_the_committed_descriptor_is_protocs_output():
    compiled = descriptor_pb2.FileDescriptorProto.FromString(generate.compile_descriptor())
    assert compiled == file_proto()
    assert generate.main(["--check"]) == 0


def test_the_package_is_minigraphs_and_the_names_are_tfs():
    assert file_proto().package == "minigraph.graph"
    assert file_proto().syntax == "proto3"
    assert proto.GraphDef.DESCRIPTOR.file.pool is proto.POOL
    # Text format uses TF's enum names.
    assert proto.DataType.Name(1) == "DT_FLOAT" and proto.DataType.Value("DT_HALF") == 19


@pytest.mark.parametrize("dtype", mg.dtypes.ALL_DTYPES, ids=lambda d: d.name)
def test_dtypes_are_written_with_tfs_numbers(dtype):
    root = mg.Scope.new_root_scope()
    mg.Placeholder(root.with_op_name("p"), dtype)
    (node,) = root.graph.as_graph_def().node
    assert node.attr["dtype"].type == TF_NUMBERS[dtype.name]


_PROBE = """
import json, sys
import minigraph, ops
scope = minigraph.Scope.new_root_scope()
ops.gather(scope, [1, 2], [0])
data = scope.graph.as_graph_def().SerializeToString()
after_export = sorted(sys.modules)
minigraph.import_graph_def(minigraph.Scope.new_root_scope(), data)
print(json.dumps({"after_export": after_export, "after_import": sorted(sys.modules)}))
"""


def test_protobuf_and_networkx_are_imported_only_on_use():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    light = subprocess.run(
        [sys.executable, "-c", "import sys, minigraph, ops; print(sorted(sys.modules))"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=True,
    )  # fmt: skip
    assert "google.protobuf" not in light.stdout and "networkx" not in light.stdout
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=True,
    )  # fmt: skip
    modules = json.loads(result.stdout)
    assert "google.protobuf" in modules["after_export"]
    # A graph in dependency order (every exported one) imports without networkx.
    assert "networkx" not in modules["after_import"]
