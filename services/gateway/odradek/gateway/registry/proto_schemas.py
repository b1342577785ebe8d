"""Protobuf schemas: the .proto text parsed by protoc (grpcio-tools ships it as a library; run
as a child process so that its diagnostics come back as the 42201 message and a crash stays
out of the gateway), or a base64 ``FileDescriptorProto`` as Confluent's clients send it
(``google.protobuf``). Compatibility is Confluent's Protobuf rules, written by hand because no
library has them: a message or field's type changed, a scalar changed outside its wire-compatible
group, a required field added or removed, a field moved into a oneof, the package changed.
Adding or removing optional fields, messages and enum constants is compatible, as in Confluent."""

from __future__ import annotations

import base64
import binascii
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from google.protobuf import descriptor_pb2

from odradek.gateway.registry.errors import InvalidSchema

F = descriptor_pb2.FieldDescriptorProto
MAIN = "schema.proto"
# scalars whose values one wire type carries interchangeably (protobuf's "Updating A Message Type")
WIRE_GROUPS = ({F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
               {F.TYPE_SINT32, F.TYPE_SINT64}, {F.TYPE_FIXED32, F.TYPE_SFIXED32},
               {F.TYPE_FIXED64, F.TYPE_SFIXED64}, {F.TYPE_STRING, F.TYPE_BYTES})
NAMED = (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP)


@dataclass(frozen=True)
class ProtoSchema:
    file: descriptor_pb2.FileDescriptorProto
    dependencies: tuple[descriptor_pb2.FileDescriptorProto, ...]

    def serialized(self) -> str:
        """The schema as Confluent's clients ask for it (``?format=serialized``): base64 descriptor."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A base64 FileDescriptorProto, or None when ``text`` is .proto source."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, Exception):   # DecodeError is not exported under one name
        return None
    return proto if proto.name or proto.message_type or proto.enum_type else None


def parse(text: str, referenced: dict[str, str]) -> ProtoSchema:
    found = _descriptor(text)
    deps = tuple(_descriptor(t) or _compile(n, t, ())[0] for n, t in referenced.items())
    if found is not None:
        return ProtoSchema(found, deps)
    files = _compile(MAIN, text, tuple(sorted(referenced.items())))
    return ProtoSchema(files[-1], tuple(files[:-1]))


@lru_cache(maxsize=256)
def _compile(name: str, text: str, imports: tuple[tuple[str, str], ...]) -> tuple:
    with tempfile.TemporaryDirectory(prefix="odradek-proto-") as tmp:
        root = Path(tmp)
        for path, source in ((*imports, (name, text))):
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            decoded = _descriptor(source)
            if decoded is not None:   # a reference registered as a descriptor: no source to give protoc
                raise InvalidSchema(f"Reference {path} is a serialized descriptor; register .proto text "
                                    "to import it from .proto text")
            target.write_text(source)
        out = root / "set.pb"
        done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"-I{_well_known()}",
                               "--include_imports", f"--descriptor_set_out={out}", name],
                              cwd=root, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).replace(f"{root}/", "")
            raise InvalidSchema(f"Invalid PROTOBUF schema: {said}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
        return tuple(files)


@lru_cache(maxsize=1)
def _well_known() -> str:
    import grpc_tools
    return str(Path(grpc_tools.__file__).with_name("_proto"))


def canonical(schema: ProtoSchema) -> str:
    file = descriptor_pb2.FileDescriptorProto()
    file.CopyFrom(schema.file)
    file.ClearField("name")
    file.ClearField("source_code_info")
    for message in _messages(file):
        for field in message.field:
            field.ClearField("json_name")
    return base64.standard_b64encode(file.SerializeToString(deterministic=True)).decode("ascii")


def _messages(file) -> list:
    out, todo = [], list(file.message_type)
    while todo:
        message = todo.pop()
        out.append(message)
        todo += message.nested_type
    return out


def _by_name(file) -> dict[str, descriptor_pb2.DescriptorProto]:
    found = {}

    def walk(prefix: str, messages) -> None:
        for m in messages:
            name = f"{prefix}.{m.name}" if prefix else m.name
            found[name] = m
            walk(name, m.nested_type)
    walk(file.package, file.message_type)
    return found


def incompatibilities(reader: ProtoSchema, writer: ProtoSchema) -> list[str]:
    out = []
    if reader.file.package != writer.file.package:
        out.append(f"PACKAGE_CHANGED: {writer.file.package!r} to {reader.file.package!r}")
    new, old = _by_name(reader.file), _by_name(writer.file)
    for name, message in old.items():
        if name not in new:
            out.append(f"MESSAGE_REMOVED: {name}")
        else:
            out += _fields(name, new[name], message)
    return out


def _fields(name: str, reader, writer) -> list[str]:
    out = []
    new = {f.number: f for f in reader.field}
    old = {f.number: f for f in writer.field}
    for number, field in old.items():
        where = f"{name}.{field.name} (#{number})"
        if number not in new:
            if field.label == F.LABEL_REQUIRED:
                out.append(f"REQUIRED_FIELD_REMOVED: {where}")
            continue
        out += _field(where, new[number], field)
    for number, field in new.items():
        if number not in old and field.label == F.LABEL_REQUIRED:
            out.append(f"REQUIRED_FIELD_ADDED: {name}.{field.name} (#{number})")
    moved = [n for n, f in new.items() if n in old and f.HasField("oneof_index") and not old[n].HasField("oneof_index")]
    if len(moved) > 1:
        out.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {name} fields {moved}")
    return out


def _field(where: str, reader, writer) -> list[str]:
    if (reader.type in NAMED) != (writer.type in NAMED):
        return [f"FIELD_KIND_CHANGED: {where}"]
    if reader.type in NAMED:
        same = reader.type_name.lstrip(".") == writer.type_name.lstrip(".") and reader.type == writer.type
        return [] if same else [f"FIELD_NAMED_TYPE_CHANGED: {where}: {writer.type_name} to {reader.type_name}"]
    if reader.type != writer.type and not any(reader.type in g and writer.type in g for g in WIRE_GROUPS):
        return [f"FIELD_SCALAR_KIND_CHANGED: {where}"]
    if (reader.label == F.LABEL_REPEATED) != (writer.label == F.LABEL_REPEATED):
        return [f"FIELD_LABEL_CHANGED: {where}"]
    return []
