"""Kafka's ZooKeeper-mode entity configs and their change notifications (AdminZkClient's side):
what the brokers and the controller write, and what every reader parses.

- ``/config/<entity type>/<entity>`` holds ``{"version":1,"config":{key: "value"}}``; the
  entity types are Kafka's ``topics``, ``clients``, ``users``, ``brokers``, ``ips``, and a
  user's per-client entity is ``users/<user>/clients/<client-id>``. ``<default>`` names the
  default entity. User and client names are *sanitized* as Kafka's ``Sanitizer`` does
  (URL-encoded UTF-8, ``*`` -> ``%2A``, a space -> ``%20``), so any name is one znode name.
- Every change writes a persistent sequential ``/config/changes/config_change_<seq>`` with
  ``{"version":2,"entity_path":"<type>/<entity>"}`` (version 1,
  ``{"entity_type":..,"entity_name":..}``, is read too); brokers follow that folder and re-read
  the entity it names.

Writes are one read-modify-write by compare-and-set on the znode version (a concurrent writer,
e.g. a SCRAM credential beside the quotas of the same user, is never overwritten). Blocking
kazoo calls: run them off the event loop.
"""

from __future__ import annotations

import json
import logging
from typing import Callable, Mapping
from urllib.parse import quote, unquote

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.cluster import paths

log = logging.getLogger(__name__)

DEFAULT = paths.DEFAULT_ENTITY
USERS, CLIENTS, IPS, BROKERS, TOPICS = "users", "clients", "ips", "brokers", "topics"


def sanitize(name: str | None) -> str:
    """Kafka's ``Sanitizer.sanitize`` (None: the default entity)."""
    if name is None:
        return DEFAULT
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str | None:
    return None if name == DEFAULT else unquote(name)


def read_entity_config(zk, entity_type: str, entity: str) -> tuple[dict[str, str], int]:
    """An entity's config and its znode version (({}, -1): no znode)."""
    try:
        data, stat = zk.get(paths.entity_config(entity_type, entity))
    except NoNodeError:
        return {}, -1
    return parse_entity_config(data, f"{entity_type}/{entity}"), stat.version


def parse_entity_config(data: bytes | None, where: str) -> dict[str, str]:
    """An entity config znode's ``config`` (``{}`` when unreadable: logged, naming ``where``)."""
    try:
        config = json.loads(data or b"{}").get("config") or {}
    except (ValueError, AttributeError):
        log.warning("ignoring the unreadable config of %s", where)
        return {}
    return {k: str(v) for k, v in config.items()}


def write_entity_config(zk, entity_type: str, entity: str,
                        change: Callable[[dict[str, str]], Mapping[str, str]]) -> dict[str, str]:
    """Read-modify-write of an entity's znode (retried on a concurrent change), then the change
    notification, as Kafka's AdminZkClient.changeConfigs; returns the config written."""
    path = paths.entity_config(entity_type, entity)
    while True:
        before, version = read_entity_config(zk, entity_type, entity)
        after = dict(change(dict(before)))
        body = json.dumps({"version": 1, "config": after}).encode()
        try:
            if version < 0:
                zk.create(path, body, makepath=True)
            else:
                zk.set(path, body, version=version)
            break
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
    zk.create(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}", notification(entity_type, entity),
              sequence=True, makepath=True)
    return after


def notification(entity_type: str, entity: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": f"{entity_type}/{entity}"}).encode()


def parse_notification(data: bytes) -> tuple[str, str]:
    """(entity type, entity) of a notification; ValueError / KeyError if unreadable."""
    doc = json.loads(data)
    if doc.get("version") == 1:
        return doc["entity_type"], doc["entity_name"]
    entity_type, _, entity = doc["entity_path"].partition("/")
    if not entity:
        raise ValueError(f"no entity in {doc['entity_path']!r}")
    return entity_type, entity
