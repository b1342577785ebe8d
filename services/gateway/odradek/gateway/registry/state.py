"""The registry's content, rebuilt from the ``_schemas`` topic's records in order (every replica
holds all of it in memory, as Confluent's and Karapace's do), and the records' formats, which are
Confluent's and Karapace's, so a ``_schemas`` topic moves between them and Odradek:

    key   {"keytype":"SCHEMA","subject":s,"version":v,"magic":1}
    value {"subject":s,"version":v,"id":i,"schema":text,"deleted":false[,"schemaType":"JSON"|"PROTOBUF"]
           [,"references":[{"name","subject","version"}]]}          null: the version deleted permanently
    key   {"keytype":"CONFIG","subject":s|null,"magic":0}  value {"compatibilityLevel":"BACKWARD"} or null
    key   {"keytype":"MODE","subject":s|null,"magic":0}    value {"mode":"READWRITE"} or null
    key   {"keytype":"DELETE_SUBJECT","subject":s,"magic":0}  value {"subject":s,"version":latest}
    key   {"keytype":"NOOP","magic":0}

Keys are written with Confluent's field order and no spaces, so that compaction keeps one record
per key whoever wrote it. Not thread-safe by itself: ``log`` applies records under its lock."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from odradek.gateway.registry.schemas import AVRO, Reference, Schema

DEFAULT_LEVEL, DEFAULT_MODE = "BACKWARD", "READWRITE"


@dataclass(frozen=True)
class Version:
    subject: str
    version: int
    id: int
    deleted: bool = False


def _dumps(document: dict) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


# -- records ------------------------------------------------------------------------------------
def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(v: Version, schema: Schema) -> bytes:
    value = {"subject": v.subject, "version": v.version, "id": v.id, "schema": schema.text, "deleted": v.deleted}
    if schema.type != AVRO:
        value["schemaType"] = schema.type
    if schema.references:
        value["references"] = [r.to_json() for r in schema.references]
    return _dumps(value)


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})


def config_value(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "MODE", "subject": subject, "magic": 0})


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def delete_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


NOOP_KEY = _dumps({"keytype": "NOOP", "magic": 0})


# -- the content ----------------------------------------------------------------------------------
@dataclass
class RegistryState:
    schemas: dict[int, Schema] = field(default_factory=dict)
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    levels: dict[str | None, str] = field(default_factory=dict)    # None: the global level
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0

    def apply(self, key: bytes, value: bytes | None) -> None:
        """One ``_schemas`` record; a record this registry does not know is skipped, as Karapace does."""
        try:
            k = json.loads(key)
            v = json.loads(value) if value is not None else None
        except ValueError:
            return
        handler = {"SCHEMA": self._schema, "CONFIG": self._config, "MODE": self._mode,
                   "DELETE_SUBJECT": self._delete_subject}.get(k.get("keytype"))
        if handler is not None:
            handler(k, v)

    def _schema(self, k: dict, v: dict | None) -> None:
        subject, version = k["subject"], k["version"]
        if v is None:
            versions = self.subjects.get(subject, {})
            versions.pop(version, None)
            if not versions:
                self.subjects.pop(subject, None)
            return
        refs = tuple(Reference(r["name"], r["subject"], r["version"]) for r in v.get("references") or ())
        schema_id = v["id"]
        self.schemas.setdefault(schema_id, Schema(v.get("schemaType", AVRO), v["schema"], refs))
        self.max_id = max(self.max_id, schema_id)
        self.subjects.setdefault(subject, {})[version] = Version(subject, version, schema_id, bool(v.get("deleted")))

    def _config(self, k: dict, v: dict | None) -> None:
        if v is None:
            self.levels.pop(k.get("subject"), None)
        else:
            self.levels[k.get("subject")] = v["compatibilityLevel"]

    def _mode(self, k: dict, v: dict | None) -> None:
        if v is None:
            self.modes.pop(k.get("subject"), None)
        else:
            self.modes[k.get("subject")] = v["mode"]

    def _delete_subject(self, k: dict, v: dict | None) -> None:
        if v is None:
            return
        versions = self.subjects.get(v["subject"], {})
        for number, entry in list(versions.items()):
            if number <= v["version"]:
                versions[number] = Version(entry.subject, number, entry.id, True)

    # -- questions ----------------------------------------------------------------------------------
    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def level(self, subject: str | None) -> str:
        return self.levels.get(subject) or self.levels.get(None) or DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE

    def uses_of(self, schema_id: int, deleted: bool = False) -> list[Version]:
        return [v for versions in self.subjects.values() for v in versions.values()
                if v.id == schema_id and (deleted or not v.deleted)]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas (registered under a live version) that refer to ``subject``'s ``version``."""
        ids = {v.id for versions in self.subjects.values() for v in versions.values() if not v.deleted
               and any(r.subject == subject and r.version == version for r in self.schemas[v.id].references)}
        return sorted(ids)
