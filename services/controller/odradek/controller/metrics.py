"""The controller's Prometheus series, computed at scrape time from the ``Controller``'s state,
named as Strimzi's JMX-exporter rules name Apache Kafka's controller MBeans
(``kafka.controller:type=KafkaController`` / ``ControllerStats``). As in Kafka, only the
active controller reports 1 active controller and the cluster-wide counts; a standby reports
0 for all of them, so ``sum(kafka_controller_kafkacontroller_activecontrollercount)`` over
every controller is 1 in a healthy cluster. The list is docs/observability.md's.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import Metric

from odradek.metrics_http import gauge

from . import replication
from .service import Controller

ZK_STATES = ("CONNECTED", "SUSPENDED", "LOST")


class ControllerCollector:
    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def collect(self) -> Iterator[Metric]:
        c = self.controller
        snapshot = c.active_snapshot
        prefix = "kafka_controller_kafkacontroller_"
        yield gauge(prefix + "activecontrollercount", "1 on the active controller, 0 on a standby", int(c.active))
        yield gauge(prefix + "offlinepartitionscount", "partitions without a leader (active controller only)",
                    replication.offline(snapshot) if snapshot else 0)
        yield gauge(prefix + "globaltopiccount", "topics (active controller only)",
                    len(snapshot.topics) if snapshot else 0)
        yield gauge(prefix + "globalpartitioncount", "partitions (active controller only)",
                    sum(len(t.states) for t in snapshot.topics.values()) if snapshot else 0)
        yield _count("kafka_controller_controllerstats_leaderelectionrateandtimems",
                     "partition leader changes this instance wrote as the active controller", c.leader_elections)
        yield _count("kafka_controller_controllerstats_controllerchangerateandtimems",
                     "times this instance was elected the active controller", c.elections_won)
        yield gauge("kafka_server_sessionexpirelistener_sessionstate", "1 for the ZooKeeper session's current state",
                    labels=["state"], samples=[([s], 1 if s == c.zk_state else 0) for s in ZK_STATES])


def _count(name: str, doc: str, value: int) -> Metric:
    """Kafka's RateAndTimeMs timers as Strimzi exports them: a ``_count`` (no quantiles here)."""
    family = Metric(name, doc, "summary")
    family.add_sample(name + "_count", {}, value)
    return family
