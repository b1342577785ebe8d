"""Quota arithmetic and rules, without a broker: Kafka's sampled rate and throttle time, the
resolution order of user / client-id quotas, AlterClientQuotas' entity checks, and Kafka's
sanitized znode names."""

from types import SimpleNamespace as C

import pytest

from odradek.broker.quotas.entities import QuotaEntities
from odradek.config.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from odradek.broker.quotas.manager import ClientQuotaManager, user_of
from odradek.broker.quotas.rate import SampledRate, throttle_time_ms
from odradek.broker.handlers.client_quotas import _typed, entity_of
from odradek.config.quotas import USER_CLIENT_QUOTAS as USER_CLIENT_KEYS
from odradek.cluster.zk_data import DEFAULT, ENTITY_CONFIG

sanitize, desanitize = ENTITY_CONFIG.sanitize, ENTITY_CONFIG.desanitize
from odradek.errors import KafkaError


def test_a_new_sensor_divides_by_at_least_samples_minus_one_windows():
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(1000, 0)
    assert rate.window_size_ms(0) == 10_000   # 10 full windows assumed, as Kafka's Rate.windowSize
    assert rate.rate(0) == pytest.approx(100.0)
    # X = (O - T) / T * W: 100 B/s observed against 50 B/s over 10 s -> 10 s
    assert throttle_time_ms(rate, rate.rate(0), 50, 0) == 10_000


def test_old_samples_expire_and_the_window_slides():
    rate = SampledRate(11, 1000, now_ms=0)
    for t in range(0, 20_000, 500):
        rate.record(100, t)        # 200 B/s steadily
    assert rate.rate(20_000) == pytest.approx(200, rel=0.1)
    assert rate.rate(60_000) == 0   # 11 windows later nothing is left


def test_throttle_brings_a_steady_producer_to_its_quota():
    """A client that waits each throttle time out gets the quota's rate over a minute."""
    quotas = ClientQuotaManager()
    quotas.apply({("alice", None): {PRODUCER_BYTE_RATE: 10_000}})
    now, sent = 0.0, 0
    while now < 60_000:
        throttle = quotas.record(PRODUCER_BYTE_RATE, "alice", "app", 4096, now_ms=now)
        sent += 4096
        now += 5 + throttle
    assert sent / (now / 1000) == pytest.approx(10_000, rel=0.1)


def test_resolution_order_is_kafkas():
    e = QuotaEntities()
    everything = {("u", "c"): 1, ("u", DEFAULT): 2, ("u", None): 3, (DEFAULT, "c"): 4, (DEFAULT, DEFAULT): 5,
                  (DEFAULT, None): 6, (None, "c"): 7, (None, DEFAULT): 8}
    expected_tags = [("u", "c"), ("u", "c"), ("u", ""), ("u", "c"), ("u", "c"), ("u", ""), ("", "c"), ("", "c")]
    for drop in range(8):  # remove the most specific entity each time: the next one applies
        e.replace({k: {PRODUCER_BYTE_RATE: v} for k, v in everything.items() if v > drop})
        assert e.resolve(PRODUCER_BYTE_RATE, "u", "c") == (expected_tags[drop], drop + 1)
    e.replace({})
    assert e.resolve(PRODUCER_BYTE_RATE, "u", "c") is None and not e.enabled(PRODUCER_BYTE_RATE)


def test_each_quota_key_resolves_on_its_own():
    e = QuotaEntities()
    e.replace({("u", None): {PRODUCER_BYTE_RATE: 100}, (None, "c"): {CONSUMER_BYTE_RATE: 200}})
    assert e.resolve(PRODUCER_BYTE_RATE, "u", "c") == (("u", ""), 100)
    assert e.resolve(CONSUMER_BYTE_RATE, "u", "c") == (("", "c"), 200)


def test_principal_names():
    assert user_of("User:alice") == "alice" and user_of("User:ANONYMOUS") == "ANONYMOUS"


def _entity(*pairs):
    return [C(entity_type=t, entity_name=n) for t, n in pairs]


def test_alter_entities_and_their_paths():
    assert entity_of(_entity(("user", "a b")))[0] == "users/a%20b"
    assert entity_of(_entity(("user", None), ("client-id", "x*")))[0] == "users/<default>/clients/x%2A"
    assert entity_of(_entity(("client-id", None)))[0] == "clients/<default>"
    assert entity_of(_entity(("ip", "127.0.0.1")))[0] == "ips/127.0.0.1"
    for bad, message in (((), "Invalid empty client quota entity"),
                         ((("group", "g"),), "Unhandled client quota entity type: group"),
                         ((("user", ""),), "Empty user not supported"),
                         ((("user", "u"), ("ip", "127.0.0.1")), "Invalid quota entity combination, IP entity "
                                                                "should not be used with user/client ID entity.")):
        with pytest.raises(KafkaError) as e:
            entity_of(_entity(*bad))
        assert e.value.message == message


def test_values_as_kafka_stores_them():
    assert _typed("producer_byte_rate", 1024.0, USER_CLIENT_KEYS) == "1024"
    assert _typed("request_percentage", 50.5, USER_CLIENT_KEYS) == "50.5"
    with pytest.raises(KafkaError, match="must be a LONG value"):
        _typed("producer_byte_rate", 10.5, USER_CLIENT_KEYS)
    with pytest.raises(KafkaError, match="Invalid configuration key nope"):
        _typed("nope", 1.0, USER_CLIENT_KEYS)


def test_sanitized_names_round_trip():
    for name in ("alice", "CN=a,O=b", "a b*c~", "ü"):
        assert desanitize(sanitize(name)) == name
    assert sanitize("CN=a b") == "CN%3Da%20b" and sanitize(None) == DEFAULT


def test_the_mutation_token_bucket_is_kafkas():
    """KIP-599's TokenBucket: full at first (quota x samples x window), a record may overdraw
    it, the deficit's refill time is the throttle, refilled at the quota's rate up to the burst."""
    from odradek.broker.quotas.rate import TokenBucket, bucket_throttle_ms
    bucket = TokenBucket(11, 1000, now_ms=0.0)
    assert bucket.tokens(2.0, 0.0) == 22.0
    assert bucket.record(30, 2.0, 0.0) == -8.0 and bucket_throttle_ms(-8.0, 2.0) == 4000
    assert bucket.tokens(2.0, 1000.0) == -6.0
    assert bucket.tokens(2.0, 100_000.0) == 22.0


def test_connection_rates_are_kafkas():
    """KIP-612: the broker's and the listener's rates delay accepting (at most one window), the
    inter-broker listener beside others is exempt from the broker's; an address over its rate
    is refused and taken back from all three."""
    from odradek.broker.quotas.connections import ConnectionRates, configure
    rates = ConnectionRates()
    configure(rates, 2, ["EXTERNAL", "REPLICATION"], "REPLICATION", {"listener.name.replication.max.connection."
                                                                      "creation.rate": "100"})
    assert [rates.accept_delay_ms("EXTERNAL", now=1000.0) for _ in range(21)][-2:] == [0, 500]
    assert rates.accept_delay_ms("REPLICATION", now=1000.0) == 0
    assert rates.accept_delay_ms("EXTERNAL", now=1000.0) == 1000  # bounded by the window
    rates.apply_ip_rates({"<default>": 1})
    assert [rates.ip_delay_ms("REPLICATION", "10.0.0.1", now=2000.0) for _ in range(11)][-1] == 1000
    # the 11th taken back from the address (10 kept) and from the listener (its 1 accepted, less 1)
    assert (rates.rate("ip:10.0.0.1", 2000.0), rates.rate("listener:REPLICATION", 2000.0)) == (1.0, 0.0)
