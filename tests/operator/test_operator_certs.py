"""Unit tests of the operator's certificate logic (``odradek.operator.certs``): no API server."""

from __future__ import annotations

import base64
import datetime

import pytest
from cryptography import x509

from odradek.certs import CertificateAuthority, alt_names, not_after
from odradek.operator import certs
from odradek.operator.validation import SpecError
from tests.operator.plans import cluster_spec



def existing_of(plan) -> dict:
    return {s["metadata"]["name"]: certs.decode(s) for s in plan.secrets}


def test_plan_makes_both_cas_and_every_certificate():
    plan = certs.plan_certificates("prod", "ns", cluster_spec({}), {}, broker_replicas=2, extra_broker_names={1: ["1.2.3.4"]})
    data = existing_of(plan)
    assert set(data) == set(certs.secret_names("prod").values())
    assert set(data["prod-cluster-ca-cert"]) == {"ca.crt"} and set(data["prod-cluster-ca"]) == {"ca.key"}
    assert set(data["prod-clients-ca-cert"]) == {"ca.crt"} and set(data["prod-clients-ca"]) == {"ca.key"}
    brokers = data["prod-broker-certs"]
    assert set(brokers) == {"ca-bundle.crt", *(f"prod-brokers-{i}.{ext}" for i in (0, 1) for ext in ("crt", "key", "pem"))}
    sans = alt_names(brokers["prod-brokers-1.crt"])
    assert "prod-brokers-1.prod-brokers.ns.svc" in sans and "prod-bootstrap.ns.svc" in sans and "1.2.3.4" in sans
    assert "1.2.3.4" not in alt_names(brokers["prod-brokers-0.crt"])
    cert = x509.load_pem_x509_certificate(brokers["prod-brokers-0.crt"])
    assert cert.subject.rfc4514_string() == "CN=prod-broker,O=odradek"
    assert certs.principal("prod", "broker") == "User:CN=prod-broker,O=odradek"
    ca = CertificateAuthority.from_pem(data["prod-cluster-ca-cert"]["ca.crt"], data["prod-cluster-ca"]["ca.key"])
    cert.verify_directly_issued_by(ca.cert)
    assert "*.prod-controller.ns.svc" in alt_names(data["prod-controller-certs"]["controller.crt"])
    # ZooKeeper's: the client Service the connect string names, and every server's headless name
    assert {"prod-zookeeper.ns.svc", "*.prod-zookeeper-headless.ns.svc"} <= set(
        alt_names(data["prod-zookeeper-certs"]["zookeeper.crt"]))
    days = (not_after(data["prod-gateway-certs"]["gateway.crt"]) - datetime.datetime.now(datetime.timezone.utc)).days
    assert 363 <= days <= 365


def test_plan_is_stable_and_renews_under_the_threshold():
    first = certs.plan_certificates("c", "ns", cluster_spec({"clusterCa": {"validityDays": 30, "renewalDays": 5}}), {}, 1)
    again = certs.plan_certificates("c", "ns", cluster_spec({"clusterCa": {"validityDays": 30, "renewalDays": 5}}),
                                    existing_of(first), 1)
    assert again.versions == first.versions and again.renewed == []
    # 30 days left is under the new threshold of 45: the CA is re-signed with its key, certificates reissued.
    renewed = certs.plan_certificates("c", "ns", cluster_spec({"clusterCa": {"validityDays": 60, "renewalDays": 45}}),
                                      existing_of(first), 1)
    assert "cluster CA (renewed, same key)" in renewed.renewed and "c-brokers-0" in renewed.renewed
    assert renewed.versions["broker"] != first.versions["broker"]
    old_leaf = x509.load_pem_x509_certificate(existing_of(first)["c-broker-certs"]["c-brokers-0.crt"])
    old_leaf.verify_directly_issued_by(renewed.cluster_ca.cert)   # same key: old certificates still verify
    assert renewed.cluster_ca.key_pem == first.cluster_ca.key_pem


def test_a_changed_name_reissues_only_that_broker():
    first = certs.plan_certificates("c", "ns", cluster_spec({}), {}, 2)
    later = certs.plan_certificates("c", "ns", cluster_spec({}), existing_of(first), 2, {0: ["kafka-0.example.com"]})
    assert later.renewed == ["c-brokers-0"]


def test_user_supplied_ca_is_used_and_not_written():
    ca = CertificateAuthority.create("my CA")
    spec = {"clusterCa": {"generateCertificateAuthority": False}}
    with pytest.raises(SpecError, match="c-cluster-ca-cert"):
        certs.plan_certificates("c", "ns", cluster_spec(spec), {}, 1)
    supplied = {"c-cluster-ca-cert": {"ca.crt": ca.cert_pem}, "c-cluster-ca": {"ca.key": ca.key_pem}}
    plan = certs.plan_certificates("c", "ns", cluster_spec(spec), supplied, 1)
    written = {s["metadata"]["name"] for s in plan.secrets}
    assert "c-cluster-ca-cert" not in written and "c-cluster-ca" not in written
    leaf = x509.load_pem_x509_certificate(existing_of(plan)["c-broker-certs"]["c-brokers-0.crt"])
    leaf.verify_directly_issued_by(ca.cert)
    other = CertificateAuthority.create("other")
    with pytest.raises(SpecError, match="does not belong"):
        certs.plan_certificates("c", "ns", cluster_spec(spec), {**supplied, "c-cluster-ca": {"ca.key": other.key_pem}}, 1)


def test_interface_for_pods_and_listeners():
    volumes, mounts = certs.pod_tls_volumes("c", "broker")
    assert {v["secret"]["secretName"] for v in volumes} == {"c-cluster-ca-cert", "c-broker-certs"}
    assert {m["mountPath"] for m in mounts} == {"/etc/odradek/certs/cluster-ca", "/etc/odradek/certs/broker"}
    assert certs.broker_ssl_config("required") == {
        "ssl.keystore.location": "/etc/odradek/certs/broker/$(POD_NAME).pem",
        "ssl.truststore.location": "/etc/odradek/certs/broker/ca-bundle.crt",
        "ssl.client.auth": "required", "ssl.endpoint.identification.algorithm": "https"}
    cp = certs.control_plane_config("c", "controller")
    assert cp["control.plane.ssl.keystore.location"] == "/etc/odradek/certs/controller/controller.pem"
    import re
    pattern = cp["control.plane.ssl.peer.common.name.pattern"]
    assert re.fullmatch(pattern, "c-operator") and not re.fullmatch(pattern, "c-gateway")


def test_user_certificates_come_from_the_clients_ca_and_are_kept():
    plan = certs.plan_certificates("c", "ns", cluster_spec({}), {}, 1)
    secrets = {s["metadata"]["name"]: s for s in plan.secrets}

    class FakeKube:
        def get(self, api_version, kind, namespace, name):
            return secrets.get(name)
    body = {"metadata": {"name": "c", "namespace": "ns"}, "spec": {}}
    issued = certs.user_certificate(FakeKube(), body, "dave")("dave")
    cert = x509.load_pem_x509_certificate(issued["user.crt"].encode())
    assert cert.subject.rfc4514_string() == "CN=dave"
    cert.verify_directly_issued_by(plan.clients_ca.cert)
    secrets["dave"] = {"data": {k: base64.b64encode(v.encode()).decode() for k, v in issued.items()}}
    assert certs.user_certificate(FakeKube(), body, "dave")("dave") == issued        # kept while valid
    assert certs.user_certificate(FakeKube(), body, "dave")("erin")["user.crt"] != issued["user.crt"]
    assert certs.user_certificate(FakeKube(), {**body, "metadata": {"name": "other", "namespace": "ns"}}, "d") is None


def test_expiring_is_what_time_alone_renews():
    plan = certs.plan_certificates("c", "ns", cluster_spec({}), {}, 1)
    existing = existing_of(plan)
    now = datetime.datetime.now(datetime.timezone.utc)
    assert certs.expiring("c", cluster_spec({}), existing, now) == []
    later = certs.expiring("c", cluster_spec({}), existing, now + datetime.timedelta(days=340))
    assert "c-cluster-ca-cert/ca.crt" in later and "c-broker-certs/c-brokers-0.crt" in later
    assert certs.expiring("c", cluster_spec({}), {}, now) == []   # nothing made yet: the reconcile is under way
    # a user-supplied CA close to its end caps its certificates: nothing to renew, no restarts
    ca = CertificateAuthority.create("short", validity=datetime.timedelta(days=10))
    spec = {"clusterCa": {"generateCertificateAuthority": False}}
    supplied = {"c-cluster-ca-cert": {"ca.crt": ca.cert_pem}, "c-cluster-ca": {"ca.key": ca.key_pem}}
    first = certs.plan_certificates("c", "ns", cluster_spec(spec), supplied, 1)
    assert first.warnings and certs.expiring("c", cluster_spec(spec), {**supplied, **existing_of(first)}, now) == []
    again = certs.plan_certificates("c", "ns", cluster_spec(spec), {**supplied, **existing_of(first)}, 1)
    assert again.versions == first.versions
