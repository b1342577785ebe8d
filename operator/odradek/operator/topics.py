"""Pure planning of an OdradekTopic against the topic the controller reports.

``plan_topic`` compares the spec with the controller's ``TopicMetadata`` JSON (or None when
the topic does not exist) and returns the admin calls that make the cluster match the spec:
create; increase partitions; set changed configs and delete configs the spec does not name
(drift made with Kafka tools is reverted). Fewer partitions raise ``SpecError``; another
replication factor is ``replicas_change``'s (through the controller's rebalance routes).

Ownership (``check_ownership``, ``owned``): an OdradekTopic manages the topic it created or
adopted, which its ``status.topicId`` records (the topic's UUID: a topic deleted and made again
by someone else is another topic). An existing topic it did not create is adopted only with the
annotation ``odradek.dev/adopt: "true"``; without it the reconcile is refused (reason
``TopicNotOwned``) and the topic is neither altered nor deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from odradek.operator.validation import SpecError, validate_topic_change

ADOPT_ANNOTATION = "odradek.dev/adopt"


@dataclass(frozen=True)
class TopicPlan:
    create: bool = False
    partitions: int | None = None                   # new partition count (increase)
    set_configs: dict[str, str] = field(default_factory=dict)
    delete_configs: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.create or self.partitions or self.set_configs or self.delete_configs)

    def describe(self) -> str:
        if self.create:
            return "create"
        parts = []
        if self.partitions:
            parts.append(f"partitions -> {self.partitions}")
        if self.set_configs:
            parts.append("set " + ", ".join(f"{k}={v}" for k, v in sorted(self.set_configs.items())))
        if self.delete_configs:
            parts.append("delete " + ", ".join(self.delete_configs))
        return "; ".join(parts) or "in sync"


def current_shape(topic: Mapping[str, Any]) -> tuple[int, int]:
    """(partitions, replication factor) of a ``TopicMetadata`` JSON."""
    partitions = topic.get("partitions") or []
    rf = len(partitions[0]["replicas"]) if partitions else 0
    return len(partitions), rf


def plan_topic(spec: Mapping[str, Any], configs: Mapping[str, str], current: Mapping[str, Any] | None) -> TopicPlan:
    if current is None:
        return TopicPlan(create=True)
    partitions, rf = current_shape(current)
    validate_topic_change(spec, partitions, rf)
    want = spec.get("partitions")
    live = {k: str(v) for k, v in (current.get("configs") or {}).items()}
    set_configs = {k: v for k, v in configs.items() if live.get(k) != v}
    delete = tuple(sorted(k for k in live if k not in configs))
    return TopicPlan(partitions=want if want is not None and want > partitions else None,
                     set_configs=set_configs, delete_configs=delete)


def find(cluster: Mapping[str, Any], topic: str) -> Mapping[str, Any] | None:
    """The ``TopicMetadata`` JSON of ``topic`` in the controller's cluster metadata, or None."""
    return next((t for t in cluster.get("topics") or [] if t["name"] == topic), None)


def owned(status: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether ``current`` is the topic this OdradekTopic created or adopted."""
    return current is not None and bool(status.get("topicId")) and status.get("topicId") == current.get("topic_id")


def check_ownership(topic: str, meta: Mapping[str, Any], status: Mapping[str, Any],
                    current: Mapping[str, Any] | None) -> None:
    """``SpecError`` (``TopicNotOwned``) when ``current`` exists, is not this OdradekTopic's and
    the resource does not ask to adopt it."""
    if current is None or owned(status, current):
        return
    if str((meta.get("annotations") or {}).get(ADOPT_ANNOTATION, "")).lower() == "true":
        return
    raise SpecError(f"topic {topic!r} already exists and this OdradekTopic did not create it: set the "
                    f'annotation {ADOPT_ANNOTATION}: "true" to manage it (its configs then follow the spec)',
                    "TopicNotOwned")
