"""A client of Confluent Schema Registry's REST API (the gateway serves one at its own URL,
docs/schema-registry.md): schemas by id, a subject's latest version, registration, and the codec
of a schema id. Schemas by id never change, so they and their codecs are cached per process
(keyed by the registry's URL and the id), as Confluent's clients cache them: an executor asks
once per id, not once per record."""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from odradek.client import http_client
from odradek.serde import codecs

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_CACHE: dict[tuple[str, int], "codecs.AvroCodec | codecs.JsonCodec | codecs.ProtobufCodec"] = {}
_CACHE_LOCK = threading.Lock()


class RegistryError(RuntimeError):
    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(f"schema registry: {message} (HTTP {status}, error_code {error_code})")
        self.status, self.error_code = status, error_code


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """As the registry answers it; by id, a Protobuf schema's ``text`` is the base64
    ``FileDescriptorProto`` (asked with ``format=serialized``, as Confluent's deserializers ask)."""
    type: str
    text: str
    references: tuple[Reference, ...] = ()
    id: int | None = None
    subject: str | None = None
    version: int | None = None

    @classmethod
    def from_json(cls, body: dict) -> "RegisteredSchema":
        refs = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
        return cls(body.get("schemaType") or codecs.AVRO, body["schema"], refs, body.get("id"),
                   body.get("subject"), body.get("version"))


class SchemaRegistry:
    def __init__(self, url: str, token: str | None = None, ca_file: str | None = None, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.http = http_client(self.url, token, ca_file, timeout, {"accept": CONTENT_TYPE})

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "SchemaRegistry":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _get(self, path: str, **params) -> dict:
        return self._answer(self.http.get(path, params=params))

    @staticmethod
    def _answer(response: httpx.Response) -> dict:
        if response.status_code >= 300:
            try:
                body = response.json()
                code, message = body.get("error_code", response.status_code), body.get("message", response.text)
            except ValueError:
                code, message = response.status_code, response.text
            raise RegistryError(response.status_code, code, message)
        return response.json()

    def schema(self, schema_id: int) -> RegisteredSchema:
        body = self._get(f"/schemas/ids/{schema_id}", format="serialized")
        return RegisteredSchema.from_json({**body, "id": schema_id})

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        """A subject's version as registered (a Protobuf schema as .proto text: ``codec`` of its
        id gives the descriptor)."""
        body = self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}")
        return RegisteredSchema.from_json(body)

    def register(self, subject: str, schema_type: str, text: str) -> int:
        body = {"schema": text} if schema_type == codecs.AVRO else {"schema": text, "schemaType": schema_type}
        response = self.http.post(f"/subjects/{quote(subject, safe='')}/versions", json=body,
                                  headers={"content-type": CONTENT_TYPE})
        return int(self._answer(response)["id"])

    def codec(self, schema_id: int):
        """The codec of a schema id (cached for the process)."""
        key = (self.url, schema_id)
        with _CACHE_LOCK:
            cached = _CACHE.get(key)
        if cached is None:
            cached = self.codec_of(self.schema(schema_id))
            with _CACHE_LOCK:
                _CACHE[key] = cached
        return cached

    def codec_of(self, schema: RegisteredSchema):
        if schema.type == codecs.AVRO:
            return codecs.AvroCodec(schema.text, self._avro_named(schema.references, {}))
        if schema.type == codecs.JSON:
            if schema.references:
                raise codecs.SchemaError("JSON Schemas with references are not supported here")
            return codecs.JsonCodec(schema.text)
        if schema.type == codecs.PROTOBUF:
            # well-known imports (google/protobuf/*.proto, which Confluent's serializers may
            # register as references) come from protobuf's own pool; others are not supported
            return codecs.ProtobufCodec(base64.b64decode(schema.text))
        raise codecs.SchemaError(f"unknown schema type {schema.type}")

    def _avro_named(self, references, named: dict) -> dict:
        """The named types of Avro references (theirs first), as Confluent's serializers resolve them."""
        for ref in references:
            referenced = self.version(ref.subject, ref.version)
            self._avro_named(referenced.references, named)
            codecs.AvroCodec(referenced.text, named)   # parsing adds its named types to ``named``
        return named
