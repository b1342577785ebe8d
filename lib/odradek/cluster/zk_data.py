"""Every znode kind the brokers and the controller share, once: its path, encoding and decoding
(Kafka's ``ZkData``). Where the layout's roots are is ``odradek.cluster.paths``; what a znode
holds and how it is read is here, so a writer and its readers cannot drift apart.

Kinds (all UTF-8 JSON unless said otherwise; relative to the cluster's chroot):

- ``BROKER``: ``/brokers/ids/<id>``, the ephemeral registration (``BrokerInfo``);
- ``CONTROLLER``: ``/controller``, ``{"id","epoch","url"}`` of the active controller;
- ``MAINTENANCE``: ``/admin/maintenance/<id>``, persistent while broker ``<id>`` is in
  maintenance mode (the controller elects it nowhere), ``{"version":1,"broker"}``;
- ``LOG_DIR_EVENT``: ``/log_dir_event_notification/log_dir_event_<seq>``, a broker's offline
  log directory, ``{"version":1,"broker","event":1,"broker_epoch"}``;
- ``ENTITY_CONFIG``: ``/config/<entity type>/<entity>``, Kafka's dynamic configs
  ``{"version":1,"config":{key: "value"}}`` (topics, brokers, users, clients, ips; a user's
  client is ``users/<user>/clients/<client-id>``); names *sanitized* as Kafka's ``Sanitizer``;
- ``CONFIG_CHANGE``: ``/config/changes/config_change_<seq>``, which entity changed
  (``{"version":2,"entity_path":"<type>/<entity>"}``; version 1 is read too);
- ``SCRAM_CREDENTIAL``: one value inside a user's entity config, keyed by mechanism:
  ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``;
- ``QUOTA_ENTITY``: where a client quota entity's config lives (user, user's client, client, ip);
- ``ACL`` and ``ACL_CHANGE``: ``/kafka-acl/<Type>/<name>`` and
  ``/kafka-acl-extended/prefixed/<Type>/<name>`` with ``{"version":1,"acls":[...]}``; the
  change notifications ``/kafka-acl-changes/acl_changes_<seq>`` (``<TYPE>:<name>``) and
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` (JSON).

Decoders raise ``ValueError`` (or ``KeyError``) on an unreadable znode; callers decide whether
that is logged and skipped. Pure: no ZooKeeper client here.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass
from typing import Mapping, NamedTuple
from urllib.parse import quote, unquote

from odradek.cluster import paths
from odradek.cluster.model import BrokerInfo

log = logging.getLogger(__name__)

DEFAULT = paths.DEFAULT_ENTITY
USERS, CLIENTS, IPS, BROKERS, TOPICS = "users", "clients", "ips", "brokers", "topics"


def sequence_of(child: str, prefix: str) -> int:
    """The sequence number of a persistent sequential child ``<prefix><seq>`` (-1: not one)."""
    rest = child[len(prefix):]
    return int(rest) if child.startswith(prefix) and rest.isdigit() else -1


class _Broker:
    def path(self, broker_id: int) -> str:
        return paths.broker(broker_id)

    def encode(self, info: BrokerInfo) -> bytes:
        return json.dumps(info.to_json()).encode()

    def decode(self, data: bytes) -> BrokerInfo:
        return BrokerInfo.from_json(json.loads(data))


class _Maintenance:
    root = paths.MAINTENANCE

    def path(self, broker_id: int) -> str:
        return paths.maintenance(broker_id)

    def encode(self, broker_id: int) -> bytes:
        return json.dumps({"version": 1, "broker": broker_id}).encode()

    def broker_ids(self, children: list[str]) -> frozenset[int]:
        """The brokers in maintenance, from the root's children (other names are skipped)."""
        return frozenset(int(c) for c in children if c.isdigit())


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """Who the active controller is: its id, the controller epoch, its internal API's URL."""
    id: str
    epoch: int
    url: str


class _Controller:
    path = paths.CONTROLLER

    def encode(self, info: ControllerInfo) -> bytes:
        return json.dumps({"id": info.id, "epoch": info.epoch, "url": info.url}).encode()

    def decode(self, data: bytes) -> ControllerInfo:
        return self.from_doc(json.loads(data))

    @staticmethod
    def from_doc(doc: Mapping) -> ControllerInfo:
        return ControllerInfo(str(doc["id"]), int(doc["epoch"]), str(doc["url"]))


@dataclass(frozen=True, slots=True)
class LogDirEvent:
    broker: int
    broker_epoch: int
    event: int = paths.LOG_DIR_FAILURE


class _LogDirEvent:
    prefix = paths.log_dir_event(paths.LOG_DIR_EVENT_PREFIX)   # the sequential child's path, seq appended

    def encode(self, event: LogDirEvent) -> bytes:
        return json.dumps({"version": 1, "broker": event.broker, "event": event.event,
                           "broker_epoch": event.broker_epoch}).encode()

    def decode(self, data: bytes) -> LogDirEvent:
        doc = json.loads(data)
        return LogDirEvent(int(doc["broker"]), int(doc.get("broker_epoch", -1)), int(doc.get("event", 0)))


class _EntityConfig:
    def path(self, entity_type: str, entity: str) -> str:
        """``/config/brokers/<id>``, ``/config/brokers/<default>``, ``/config/users/<user>``..."""
        return paths.entity_config(entity_type, entity)

    def encode(self, config: Mapping[str, str]) -> bytes:
        return json.dumps({"version": 1, "config": dict(config)}).encode()

    def decode(self, data: bytes | None, where: str) -> dict[str, str]:
        """The znode's ``config`` (``{}`` when unreadable: logged, naming ``where``)."""
        try:
            config = json.loads(data or b"{}").get("config") or {}
        except (ValueError, AttributeError):
            log.warning("ignoring the unreadable config of %s", where)
            return {}
        return {k: str(v) for k, v in config.items()}

    @staticmethod
    def sanitize(name: str | None) -> str:
        """Kafka's ``Sanitizer.sanitize`` (None: the default entity)."""
        if name is None:
            return DEFAULT
        return quote(name, safe="").replace("~", "%7E")

    @staticmethod
    def desanitize(name: str) -> str | None:
        return None if name == DEFAULT else unquote(name)


class _ConfigChange:
    root = paths.CONFIG_CHANGES
    prefix = f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}"   # the sequential child's path

    def encode(self, entity_type: str, entity: str) -> bytes:
        return json.dumps({"version": 2, "entity_path": f"{entity_type}/{entity}"}).encode()

    def decode(self, data: bytes) -> tuple[str, str]:
        """(entity type, entity) of a notification; ValueError / KeyError if unreadable."""
        doc = json.loads(data)
        if doc.get("version") == 1:
            return doc["entity_type"], doc["entity_name"]
        entity_type, _, entity = doc["entity_path"].partition("/")
        if not entity:
            raise ValueError(f"no entity in {doc['entity_path']!r}")
        return entity_type, entity

    def sequence(self, child: str) -> int:
        return sequence_of(child, paths.CONFIG_CHANGE_PREFIX)


class ScramCredential(NamedTuple):
    """What a SCRAM login needs of a user (RFC 5802), never the password; in scramp's order."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class _ScramCredential:
    def encode(self, c: ScramCredential) -> str:
        b64 = lambda data: base64.b64encode(data).decode()   # noqa: E731
        return (f"salt={b64(c.salt)},stored_key={b64(c.stored_key)},server_key={b64(c.server_key)},"
                f"iterations={c.iterations}")

    def decode(self, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(","))
        return ScramCredential(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                               base64.b64decode(fields["server_key"]), int(fields["iterations"]))


# Kafka's client quota entity types, as AlterClientQuotas names them
USER, CLIENT_ID, IP = "user", "client-id", "ip"
QuotaEntity = tuple[tuple[str, str | None], ...]   # ((entity type, name or None for the default), ...)


class _QuotaEntity:
    """Where a quota entity's config lives: ``users/<u>``, ``users/<u>/clients/<c>``,
    ``clients/<c>``, ``ips/<ip>`` (sanitized names; ``<default>`` for None)."""

    def entity_path(self, entity: QuotaEntity) -> str:
        """The ``<type>/<entity>`` the entity's config and change notification name."""
        names = {t: ENTITY_CONFIG.sanitize(n) for t, n in entity}
        if IP in names:
            return f"{IPS}/{names[IP]}"
        if USER in names:
            client = f"/clients/{names[CLIENT_ID]}" if CLIENT_ID in names else ""
            return f"{USERS}/{names[USER]}{client}"
        return f"{CLIENTS}/{names[CLIENT_ID]}"


class _Acl:
    literal_root, prefixed_root = "/kafka-acl", "/kafka-acl-extended/prefixed"

    def root(self, prefixed: bool) -> str:
        return self.prefixed_root if prefixed else self.literal_root

    def path(self, type_name: str, name: str, prefixed: bool) -> str:
        """``type_name``: Kafka's spelling in the path (``Topic``, ``TransactionalId``)."""
        return f"{self.root(prefixed)}/{type_name}/{name}"

    def encode(self, acls: list[dict]) -> bytes:
        return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()

    def decode(self, data: bytes | None) -> list[dict]:
        return list(json.loads(data).get("acls", ())) if data else []


class _AclChange:
    literal, extended = "/kafka-acl-changes", "/kafka-acl-extended-changes"
    roots = (literal, extended)
    child_prefix = "acl_changes_"

    def encode(self, type_name: str, name: str, pattern: str) -> tuple[str, bytes]:
        """(change root, payload) of Kafka's notification for a change of one resource pattern
        (``type_name``: ``TOPIC``; ``pattern``: ``LITERAL`` / ``PREFIXED``)."""
        if pattern == "LITERAL":
            return self.literal, f"{type_name}:{name}".encode()
        return self.extended, json.dumps({"version": 1, "resourceType": type_name, "name": name,
                                          "patternType": pattern}).encode()

    def decode(self, root: str, data: bytes) -> tuple[str, str, str]:
        """(TYPE, name, PATTERN) of a notification under ``root``."""
        if root == self.literal:
            kind, _, name = data.decode().partition(":")
            return kind.upper(), name, "LITERAL"
        doc = json.loads(data)
        return doc["resourceType"].upper(), doc["name"], doc["patternType"].upper()

    def sequence(self, child: str) -> int:
        return sequence_of(child, self.child_prefix)


BROKER = _Broker()
CONTROLLER = _Controller()
LOG_DIR_EVENT = _LogDirEvent()
MAINTENANCE = _Maintenance()
ENTITY_CONFIG = _EntityConfig()
CONFIG_CHANGE = _ConfigChange()
SCRAM_CREDENTIAL = _ScramCredential()
QUOTA_ENTITY = _QuotaEntity()
ACL = _Acl()
ACL_CHANGE = _AclChange()
