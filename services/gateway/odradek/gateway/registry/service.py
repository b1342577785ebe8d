"""The registry's operations, as Confluent Schema Registry defines them: reads answer from this
replica's ``RegistryState``; writes (register, delete, config, mode) run on the primary only
(``routes`` forwards them), one at a time, after the primary has applied every record written so
far, so that ids and versions are allocated once. Parsing (protoc for Protobuf) runs in a thread.

Reads across replicas (``fresh``): a read that would answer "not found" (a subject, version, id,
subject-level config or mode) first catches this replica up with the ``_schemas`` log's end, then
answers again: whatever a write acknowledged before the read began, through any replica, is
found. Other answers are this replica's state as far as it has applied the log: for a moment
after a write through another replica, ``latest``, lists and levels may be the previous ones."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from odradek.gateway.registry import schemas as sc
from odradek.gateway.registry import state as st
from odradek.gateway.registry.errors import (IncompatibleSchema, InvalidCompatibilityLevel, InvalidMode,
                                             InvalidSchema, InvalidVersion, NotFound, OperationNotPermitted,
                                             ReferenceExists, SchemaNotFound, SubjectLevelConfigNotFound,
                                             SubjectLevelModeNotFound,
                                             SubjectNotFound, SubjectNotSoftDeleted, SubjectSoftDeleted,
                                             VersionNotFound, VersionNotSoftDeleted, VersionSoftDeleted)
from odradek.gateway.registry.log import SchemasLog

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1
READ_WAIT_S = 10.0        # how long a "not found" waits for this replica to catch up (then 50002)
T = TypeVar("T")


@dataclass(frozen=True)
class Registration:
    schema: sc.Schema
    id: int | None = None            # IMPORT mode: the id to keep
    version: int | None = None


class Registry:
    def __init__(self, log: SchemasLog):
        self.log = log
        self._parsed: dict[int, sc.Parsed] = {}

    @property
    def state(self) -> st.RegistryState:
        return self.log.state

    # -- parsing ------------------------------------------------------------------------------------
    def _referenced(self, schema: sc.Schema, seen: frozenset = frozenset()) -> dict[str, str]:
        """Reference name -> text, dependencies first (Avro needs a named type before its use)."""
        out: dict[str, str] = {}
        for ref in schema.references:
            version = self.state.subjects.get(ref.subject, {}).get(ref.version)
            if version is None or (ref.subject, ref.version) in seen:
                raise InvalidSchema(f"Invalid schema reference {ref.name}: subject {ref.subject} "
                                    f"version {ref.version} not found")
            target = self.state.schemas[version.id]
            out |= self._referenced(target, seen | {(ref.subject, ref.version)})
            out[ref.name] = target.text
        return out

    def referenced(self, schema_id: int) -> dict[str, str]:
        """The texts the schema ``schema_id`` refers to, by reference name (JSON Schema's ``$ref``s)."""
        return self._referenced(self.schema(schema_id))

    async def parse(self, schema: sc.Schema) -> sc.Parsed:
        referenced = self._referenced(schema)
        return await asyncio.to_thread(sc.parse, schema, referenced)

    async def parsed(self, schema_id: int) -> sc.Parsed:
        if schema_id not in self._parsed:
            self._parsed[schema_id] = await self.parse(self.state.schemas[schema_id])
        return self._parsed[schema_id]

    # -- reads ----------------------------------------------------------------------------------------
    async def fresh(self, read: Callable[[], T | Awaitable[T]]) -> T:
        """``read()``'s answer, checked against the log's end when it is "not found" (see the
        module's docstring): one end-offset query and a wait for the reader, on that path only."""
        try:
            return await _answer(read)
        except NotFound:
            await self.log.caught_up(READ_WAIT_S)
        return await _answer(read)

    def schema(self, schema_id: int) -> sc.Schema:
        if schema_id not in self.state.schemas:
            raise SchemaNotFound()
        return self.state.schemas[schema_id]

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s in self.state.subjects if s.startswith(prefix) and self.state.versions(s, deleted))

    def versions(self, subject: str, deleted: bool = False) -> list[st.Version]:
        found = self.state.versions(subject, deleted)
        if not found:
            raise SubjectNotFound(subject)
        return found

    def version(self, subject: str, version: str | int, deleted: bool = False) -> st.Version:
        number = parse_version(version)
        found = self.versions(subject, deleted=True)
        if number == -1:
            live = [v for v in found if deleted or not v.deleted]
            if not live:
                raise VersionNotFound(subject, version)
            return live[-1]
        match = [v for v in found if v.version == number and (deleted or not v.deleted)]
        if not match:
            raise VersionNotFound(subject, version)
        return match[0]

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        v = self.version(subject, version)
        return self.state.referenced_by(subject, v.version)

    async def lookup(self, subject: str, schema: sc.Schema, deleted: bool = False) -> st.Version:
        versions = self.versions(subject, deleted)
        new = await self.parse(schema)
        for v in reversed(versions):
            if await self._same(new, v.id):
                return v
        raise SchemaNotFound()

    async def _same(self, new: sc.Parsed, schema_id: int) -> bool:
        old = self.state.schemas[schema_id]
        if old.type != new.schema.type or old.references != new.schema.references:
            return False
        return old.text == new.schema.text or (await self.parsed(schema_id)).canonical == new.canonical

    async def compatibility(self, subject: str, schema: sc.Schema, version: str | int | None) -> list[str]:
        """Why ``schema`` may not be registered in ``subject`` (against ``version``, or every
        version its level compares when None); empty: it may."""
        new = await self.parse(schema)
        level = self.state.level(subject)
        if version is None:
            return await self._check(level, new, self.state.versions(subject))
        target = self.version(subject, version)
        return await self._check(level.removesuffix("_TRANSITIVE"), new, [target])

    async def _check(self, level: str, new: sc.Parsed, versions: list[st.Version]) -> list[str]:
        earlier = [await self.parsed(v.id) for v in versions]
        return await asyncio.to_thread(sc.check, level, new, earlier)

    def level(self, subject: str | None, default_to_global: bool = False) -> str:
        if subject is not None and subject not in self.state.levels and not default_to_global:
            raise SubjectLevelConfigNotFound(subject)
        return self.state.level(subject)

    def mode(self, subject: str | None, default_to_global: bool = False) -> str:
        if subject is not None and subject not in self.state.modes and not default_to_global:
            raise SubjectLevelModeNotFound(subject)
        return self.state.mode(subject)

    # -- writes (the primary only) ------------------------------------------------------------------------
    async def register(self, subject: str, request: Registration) -> st.Version:
        async with self.log.primacy():
            mode = self.state.mode(subject)
            if mode == "READONLY":
                raise OperationNotPermitted(f"Subject {subject} is in read-only mode", 422, 42205)
            if request.id is not None and mode != "IMPORT":
                raise OperationNotPermitted(f"Subject {subject} is not in import mode", 422, 42205)
            new = await self.parse(request.schema)
            live = self.state.versions(subject)
            for v in reversed(live):
                if await self._same(new, v.id):
                    return v
            if mode != "IMPORT":
                problems = await self._check(self.state.level(subject), new, live)
                if problems:
                    raise IncompatibleSchema(problems)
            if request.id is not None and request.id in self.state.schemas and not await self._same(new, request.id):
                raise OperationNotPermitted(f"Overwrite new schema with id {request.id} is not permitted.", 422, 42205)
            schema_id = request.id if request.id is not None else await self._id_for(new)
            every = self.state.versions(subject, deleted=True)
            number = request.version or (every[-1].version + 1 if every else 1)
            version = st.Version(subject, number, schema_id)
            await self.log.write([(st.schema_key(subject, number), st.schema_value(version, request.schema))])
            self._parsed.setdefault(schema_id, new)
            return version

    async def _id_for(self, new: sc.Parsed) -> int:
        """The id of the same schema registered under any subject, else the next id."""
        for schema_id, schema in sorted(self.state.schemas.items()):
            if schema.type == new.schema.type and await self._same(new, schema_id):
                return schema_id
        return self.state.max_id + 1

    async def delete_version(self, subject: str, version: str | int, permanent: bool) -> int:
        async with self.log.primacy():
            self._writable(subject)
            v = self.version(subject, version, deleted=permanent)
            if self.state.referenced_by(subject, v.version):
                raise ReferenceExists(f"One or more references exist to the schema {{subject={subject}, "
                                      f"version={v.version}}}")
            if permanent:
                if not v.deleted:
                    raise VersionNotSoftDeleted(subject, v.version)
                await self.log.write([(st.schema_key(subject, v.version), None)])
            elif v.deleted:
                raise VersionSoftDeleted(subject, v.version)
            else:
                await self._soft_delete([v])
            return v.version

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self.log.primacy():
            self._writable(subject)
            every = self.versions(subject, deleted=True)
            live = [v for v in every if not v.deleted]
            for v in live:
                if self.state.referenced_by(subject, v.version):
                    raise ReferenceExists(f"One or more references exist to the schema {{subject={subject}, "
                                          f"version={v.version}}}")
            if not permanent:
                if not live:
                    raise SubjectSoftDeleted(subject)
                await self._soft_delete(live)
                return [v.version for v in live]
            if live:
                raise SubjectNotSoftDeleted(subject)
            records = [(st.schema_key(subject, v.version), None) for v in every]
            records += [(key(subject), None) for key, kept in ((st.config_key, self.state.levels),
                                                               (st.mode_key, self.state.modes)) if subject in kept]
            await self.log.write(records)
            return [v.version for v in every]

    async def _soft_delete(self, versions: list[st.Version]) -> None:
        await self.log.write([(st.schema_key(v.subject, v.version),
                               st.schema_value(st.Version(v.subject, v.version, v.id, True), self.state.schemas[v.id]))
                              for v in versions])

    def _writable(self, subject: str) -> None:
        if self.state.mode(subject) == "READONLY":
            raise OperationNotPermitted(f"Subject {subject} is in read-only mode", 422, 42205)

    async def set_level(self, subject: str | None, level: str | None) -> str:
        if not isinstance(level, str) or level.upper() not in sc.LEVELS:
            raise InvalidCompatibilityLevel(level)
        async with self.log.primacy():
            await self.log.write([(st.config_key(subject), st.config_value(level.upper()))])
        return level.upper()

    async def delete_level(self, subject: str | None) -> str:
        async with self.log.primacy():
            before = self.level(subject)
            await self.log.write([(st.config_key(subject), None)])
            return before

    async def set_mode(self, subject: str | None, mode: str | None, force: bool = False) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise InvalidMode(mode)
        mode = mode.upper()
        async with self.log.primacy():
            if mode == "IMPORT" and not force and (self.state.subjects if subject is None
                                                  else self.state.versions(subject)):
                raise OperationNotPermitted("Cannot import since found existing subjects", 422, 42205)
            await self.log.write([(st.mode_key(subject), st.mode_value(mode))])
        return mode

    async def delete_mode(self, subject: str) -> str:
        async with self.log.primacy():
            before = self.mode(subject)
            await self.log.write([(st.mode_key(subject), None)])
            return before


async def _answer(read: Callable[[], T | Awaitable[T]]) -> T:
    out = read()
    return await out if inspect.isawaitable(out) else out


def parse_version(version: str | int) -> int:
    """A path's version: 1..2^31-1, or ``latest`` / -1 (returned as -1); else 42202."""
    if str(version).lower() == "latest":
        return -1
    try:
        number = int(version)
    except (TypeError, ValueError):
        raise InvalidVersion(version) from None
    if number == -1 or 1 <= number <= MAX_VERSION:
        return number
    raise InvalidVersion(version)
