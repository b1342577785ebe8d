"""Operator-managed CAs and certificates against a real kube-apiserver (the shared operator):
the CA and certificate Secrets, SANs, owner references, renewal under ``renewalDays`` with the
brokers rolled one at a time, a user-supplied CA, and a bad CA spec changing nothing.

No kubelet: the test plays its part as test_operator_k8s_brokers does (its helpers)."""

from __future__ import annotations

import base64
import datetime

import pytest
from cryptography import x509

from odradek.certs import CertificateAuthority, alt_names
from odradek.dev.waiting import wait_until
from odradek.operator import certs
from tests.operator.test_operator_k8s_brokers import (ANNOTATION, assert_rolls_one_at_a_time, ensure_pods, hashes,
                                                      mark_ready, pods, pods_path, spec, template_hash)
from tests.support.k8s import condition

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]


def secret(k8s, ns, name):
    obj = k8s.child(ns, "Secret", name)
    return None if obj is None else {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}


def test_ca_secrets_sans_and_renewal_rolls_brokers(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "sec"
    short = {"clusterCa": {"validityDays": 30, "renewalDays": 5}}
    cr = k8s.apply_cluster(ns, c, {**spec(), **short}, {ANNOTATION: fake_controller.url})
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers"), 30, "the brokers' StatefulSet")
    n = certs.secret_names(c)
    for name, keys in ((n["cluster_ca_cert"], {"ca.crt"}), (n["cluster_ca"], {"ca.key"}),
                       (n["clients_ca_cert"], {"ca.crt"}), (n["clients_ca"], {"ca.key"}),
                       (n["controller"], {"controller.crt", "controller.key", "controller.pem"}),
                       (n["operator"], {"operator.crt", "operator.key", "operator.pem"}),
                       (f"{c}-zookeeper-digest", {"credentials"})):
        assert set(secret(k8s, ns, name)) == keys, name
        refs = k8s.child(ns, "Secret", name)["metadata"]["ownerReferences"]
        assert [(r["kind"], r["uid"]) for r in refs] == [("OdradekCluster", cr["metadata"]["uid"])], name
    brokers = secret(k8s, ns, n["broker"])
    assert set(brokers) == {"ca-bundle.crt", *(f"{c}-brokers-{i}.{e}" for i in range(3) for e in ("crt", "key", "pem"))}
    sans = alt_names(brokers[f"{c}-brokers-2.crt"])
    assert {f"{c}-brokers-2.{c}-brokers.{ns}.svc", f"{c}-bootstrap.{ns}.svc", f"{c}-bootstrap"} <= set(sans), sans
    ca_key = secret(k8s, ns, n["cluster_ca"])["ca.key"]
    ca = CertificateAuthority.from_pem(secret(k8s, ns, n["cluster_ca_cert"])["ca.crt"], ca_key)
    x509.load_pem_x509_certificate(brokers[f"{c}-brokers-2.crt"]).verify_directly_issued_by(ca.cert)

    ensure_pods(k8s, ns, f"{c}-brokers")
    wait_until(lambda: len(pods(k8s, ns, c)) == 3, 30, "3 broker pods")
    for name in pods(k8s, ns, c):
        mark_ready(k8s, ns, name)
    old = set(hashes(k8s, ns, c).values())
    # 30 days left is under a threshold of 45: renewed CA (same key), reissued certificates, a roll
    k8s.apply_cluster(ns, c, {**spec(), "clusterCa": {"validityDays": 60, "renewalDays": 45}},
                      {ANNOTATION: fake_controller.url})
    new = wait_until(lambda: (h := template_hash(k8s, ns, c)) not in old and h, 30, "the new pod template")
    renewed = secret(k8s, ns, n["broker"])
    assert renewed[f"{c}-brokers-2.crt"] != brokers[f"{c}-brokers-2.crt"]
    assert secret(k8s, ns, n["cluster_ca"])["ca.key"] == ca_key
    leaf = x509.load_pem_x509_certificate(renewed[f"{c}-brokers-2.crt"])
    assert 58 <= (leaf.not_valid_after_utc - leaf.not_valid_before_utc).days <= 60
    # the controller's certificate changed too: no broker restarts before its Deployment has rolled
    wait_until(lambda: "waiting for the controller to roll first" in (k8s.cluster(ns, c)["status"].get("rolling") or "")
               or not controller_pods(k8s, ns, c), 30, "the brokers' roll to wait for the controller's")
    assert set(hashes(k8s, ns, c).values()) == old, "a broker restarted while the controller rolled"
    roll_controller(k8s, ns, c)
    assert_rolls_one_at_a_time(k8s, ns, c, new)


def controller_pods(k8s, ns, c):
    sel = f"app.kubernetes.io/instance={c},app.kubernetes.io/component=controller"
    return [p for p in k8s.call("GET", pods_path(ns), query=[("labelSelector", sel)])["items"]
            if not p["metadata"].get("deletionTimestamp")]


def roll_controller(k8s, ns, c):
    """Play the kubelet for the controller's pods until its Deployment has rolled: the
    deployment controller removes the old pod once the new one is Ready (no pods without
    kube-controller-manager: nothing to do)."""
    template = k8s.child(ns, "Deployment", f"{c}-controller")["spec"]["template"]["metadata"]["annotations"]

    def rolled() -> bool:
        listed = controller_pods(k8s, ns, c)
        for pod in listed:
            mark_ready(k8s, ns, pod["metadata"]["name"])
        return all(p["metadata"]["annotations"].get(certs.CERTS_ANNOTATION) == template[certs.CERTS_ANNOTATION]
                   for p in listed)
    wait_until(rolled, 60, "the controller's Deployment rolled", 1)


def test_user_supplied_ca(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "own"
    user_ca = CertificateAuthority.create("users own CA")
    for name, key, data in ((f"{c}-cluster-ca-cert", "ca.crt", user_ca.cert_pem), (f"{c}-cluster-ca", "ca.key", user_ca.key_pem)):
        k8s.apply(f"/api/v1/namespaces/{ns}/secrets/{name}",
                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                   "data": {key: base64.b64encode(data).decode()}})
    k8s.apply_cluster(ns, c, {**spec(replicas=1), "clusterCa": {"generateCertificateAuthority": False}},
                      {ANNOTATION: fake_controller.url})
    brokers = wait_until(lambda: secret(k8s, ns, f"{c}-broker-certs"), 30, "the brokers' certificates")
    x509.load_pem_x509_certificate(brokers[f"{c}-brokers-0.crt"]).verify_directly_issued_by(user_ca.cert)
    assert secret(k8s, ns, f"{c}-cluster-ca")["ca.key"] == user_ca.key_pem
    assert not k8s.child(ns, "Secret", f"{c}-cluster-ca")["metadata"].get("ownerReferences")  # the user's

    # time alone: a certificate with 2 days left (under renewalDays 30) is renewed by the status
    # timer's check, with nothing else changing the cluster
    short = user_ca.issue_certificate(*certs.broker_names(c, ns, 0), common_name=f"{c}-broker",
                                      organization=certs.ORGANIZATION, validity=datetime.timedelta(days=2))
    k8s.merge(f"/api/v1/namespaces/{ns}/secrets/{c}-broker-certs", {"data": {
        f"{c}-brokers-0.crt": base64.b64encode(short.cert_pem).decode(),
        f"{c}-brokers-0.key": base64.b64encode(short.key_pem).decode()}})
    renewed = wait_until(lambda: (d := secret(k8s, ns, f"{c}-broker-certs")) and d[f"{c}-brokers-0.crt"] != short.cert_pem
                         and d, 30, "the renewal of a certificate close to its end")
    leaf = x509.load_pem_x509_certificate(renewed[f"{c}-brokers-0.crt"])
    assert (leaf.not_valid_after_utc - leaf.not_valid_before_utc).days >= 364
    assert certs.RENEWAL_ANNOTATION in k8s.cluster(ns, c)["metadata"]["annotations"]


def test_missing_user_ca_fails_without_partial_change(k8s, operator, namespace):
    ns, c = namespace, "nocas"
    k8s.apply_cluster(ns, c, {**spec(), "clientsCa": {"generateCertificateAuthority": False}})
    cr = wait_until(lambda: (x := k8s.cluster(ns, c)) and x.get("status", {}).get("phase") == "Failed" and x,
                    30, "the Failed phase")
    ready = condition(cr, "Ready")
    assert ready["reason"] == "InvalidSpec" and f"{c}-clients-ca-cert" in ready["message"], ready
    for kind, name in (("StatefulSet", f"{c}-brokers"), ("Secret", f"{c}-cluster-ca"), ("Secret", f"{c}-broker-certs")):
        assert k8s.child(ns, kind, name) is None, f"{kind}/{name} was made for an invalid spec"
