"""The client quotas' Prometheus series, in the names Strimzi's JMX-exporter rules give Apache
Kafka's quota sensors (``kafka.server:type=<Produce|Fetch|Request|ControllerMutation>,
user=<user>,client-id=<client-id>``, attribute names with ``-`` as ``_``), and KIP-612's
per-listener connection accept rates and throttle times (``kafka.server:type=socket-server-metrics``:
``connection-accept-rate``, ``broker-connection-accept-rate``, ``connection-accept-throttle-time``,
``ip-connection-accept-throttle-time``).

A sensor's labels are ``resource`` and the tags Kafka names its MBean with: ``user`` and
``clientId``, each left out when empty (Kafka's JMX names skip empty tags, so Strimzi's three
quota rules give these three label sets). Values, as Kafka's:

- ``kafka_server_quota_byte_rate`` (Produce, Fetch): bytes/s over the quota's 11 windows;
- ``kafka_server_quota_request_time`` (Request): percent of a request thread, same windows;
- ``kafka_server_quota_tokens`` (ControllerMutation): what the token bucket holds now;
- ``kafka_server_quota_mutation_rate`` (ControllerMutation): partitions/s mutated, 11 windows;
- ``kafka_server_quota_throttle_time``: the average throttle time (ms) given over Kafka's
  default metric window, 30-60 s (NaN without a throttle in it).

Series exist for the clients a quota applies to, from their first request (Kafka records only
once a quota of that type exists too). Computed at scrape time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from odradek.broker.quotas.connections import ConnectionRates
from odradek.broker.quotas.entities import Tags
from odradek.config.quotas import CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.metrics_http import gauge

# quota key -> Kafka's quota type
RESOURCES = {PRODUCER_BYTE_RATE: "Produce", CONSUMER_BYTE_RATE: "Fetch", REQUEST_PERCENTAGE: "Request",
             CONTROLLER_MUTATION_RATE: "ControllerMutation"}
_DOCS = {"byte_rate": "bytes per second of the client (its quota's windows)",
         "request_time": "percent of a request-handling thread the client takes (its quota's windows)",
         "tokens": "the controller mutation quota's token bucket: partitions the client may still mutate",
         "mutation_rate": "partitions per second the client created or deleted (its quota's windows)",
         "throttle_time": "average throttle time (ms) given to the client over the last 30-60 s"}


def _labels(key: str, tags: Tags) -> dict[str, str]:
    labels = {"resource": RESOURCES[key]}
    if tags[0]:
        labels["user"] = tags[0]
    if tags[1]:
        labels["clientId"] = tags[1]
    return labels


@dataclass(eq=False)
class QuotaCollector:
    quotas: ClientQuotaManager
    connection_rates: ConnectionRates

    def collect(self) -> Iterator[Metric]:
        families = {attr: GaugeMetricFamily(f"kafka_server_quota_{attr}", _DOCS[attr]) for attr in _DOCS}
        for key, tags, attribute, value in self.quotas.sensors():
            family = families[attribute.replace("-", "_")]
            family.add_sample(family.name, _labels(key, tags), value)
        throttle = families["throttle_time"]
        for (key, tags), times in list(self.quotas.throttle_times.items()):
            throttle.add_sample(throttle.name, _labels(key, tags), times.avg())
        yield from families.values()
        yield from self._connections()

    def _connections(self) -> Iterator[Metric]:
        rates = self.connection_rates
        prefix = "kafka_server_socket_server_metrics_"
        for name, times in (("connection_accept_throttle_time", rates.accept_throttle_times),
                            ("ip_connection_accept_throttle_time", rates.ip_throttle_times)):
            yield gauge(prefix + name, "average ms new connections were throttled over the last 30-60 s, "
                        "per listener (KIP-612)", labels=["listener"],
                        samples=[([listener], t.avg()) for listener, t in sorted(times.items())])
        yield gauge(prefix + "connection_accept_rate", "connections accepted per second, per listener",
                    labels=["listener"], samples=[([listener], rates.rate(f"listener:{listener}"))
                                                  for listener in sorted(rates.listeners_seen)])
        yield gauge(prefix + "broker_connection_accept_rate", "connections accepted per second, all listeners",
                    rates.rate("broker"))
