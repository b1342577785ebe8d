"""The client quotas in force, per quota key, and Kafka's resolution order over them.

``QuotaEntities`` maps each entity — (user, client id), either part ``None`` when the entity
does not name it and ``DEFAULT`` for ``<default>`` — to its quota values, as Kafka's
ZooKeeper-mode brokers hold them after reading ``/config/users`` and ``/config/clients``.

``resolve`` is Kafka's ``DefaultQuotaCallback`` order, taken separately for each quota key
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``): the first entity
below that sets the key applies, and the metric tags say who shares it
(``(user, client-id)`` of the sensor; "" = every value):

1. ``/config/users/<user>/clients/<client-id>``      tags (user, client-id)
2. ``/config/users/<user>/clients/<default>``        tags (user, client-id)
3. ``/config/users/<user>``                          tags (user, "")
4. ``/config/users/<default>/clients/<client-id>``   tags (user, client-id)
5. ``/config/users/<default>/clients/<default>``     tags (user, client-id)
6. ``/config/users/<default>``                       tags (user, "")
7. ``/config/clients/<client-id>``                   tags ("", client-id)
8. ``/config/clients/<default>``                     tags ("", client-id)

So a quota on a user is shared by all that user's clients, a default quota is each user's
(or client's) own. Replaced whole on every change (``replace``): readers on the event loop
see one consistent mapping.
"""

from __future__ import annotations

from typing import Mapping

from odradek.cluster.zk_data import DEFAULT
from odradek.config.quotas import USER_CLIENT_QUOTAS

ENFORCED = tuple(USER_CLIENT_QUOTAS)   # the keys resolved here (the ip one is the connection rates')

Entity = tuple[str | None, str | None]   # (user, client id); DEFAULT for <default>, None: not named
Tags = tuple[str, str]                   # the sensor's (user, client-id) tags


class QuotaEntities:
    def __init__(self) -> None:
        self._by_key: dict[str, dict[Entity, float]] = {k: {} for k in ENFORCED}

    def replace(self, entities: Mapping[Entity, Mapping[str, float]]) -> None:
        by_key: dict[str, dict[Entity, float]] = {k: {} for k in ENFORCED}
        for entity, values in entities.items():
            for key, value in values.items():
                if key in by_key:
                    by_key[key][entity] = value
        self._by_key = by_key

    def enabled(self, key: str) -> bool:
        """Any quota of this key at all (the cheap test every request makes)."""
        return bool(self._by_key[key])

    def resolve(self, key: str, user: str, client_id: str) -> tuple[Tags, float] | None:
        """The quota of ``key`` that applies to this user and client, with its sensor's tags;
        None when none does."""
        quotas = self._by_key[key]
        if not quotas:
            return None
        for entity, tags in ((((user, client_id)), (user, client_id)),
                             ((user, DEFAULT), (user, client_id)),
                             ((user, None), (user, "")),
                             ((DEFAULT, client_id), (user, client_id)),
                             ((DEFAULT, DEFAULT), (user, client_id)),
                             ((DEFAULT, None), (user, "")),
                             ((None, client_id), ("", client_id)),
                             ((None, DEFAULT), ("", client_id))):
            value = quotas.get(entity)
            if value is not None:
                return tags, value
        return None

    def quota_for(self, key: str, tags: Tags) -> float | None:
        """The quota now in force for a sensor's tags (its user and client id; "" for neither)."""
        found = self.resolve(key, *tags)
        return found[1] if found is not None else None
