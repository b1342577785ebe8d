"""The cluster-security settings alone (no cluster): Kafka's znode ACLs per path, and the
start-up refusals of bad ``zookeeper.*`` / ``zookeeper.ssl.*`` / ``control.plane.ssl.*`` settings."""

from __future__ import annotations

import pytest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.cluster.zk_session import ZkSecurity
from odradek.cluster.zk_tls import ZkTls
from odradek.controller.cli import parse_args
from odradek.certs import CertificateAuthority


def test_znode_acls_are_kafkas():
    secure = ZkSecurity("odradek:secret", set_acl=True)
    assert secure.acl("/brokers/topics/t") == [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]
    for sensitive in ("/config/users", "/config/users/alice", "/config/brokers/1", "/delegation_token/tokens/x"):
        assert secure.acl(sensitive) == CREATOR_ALL_ACL, sensitive
    assert secure.acl("/consumers") == OPEN_ACL_UNSAFE
    assert ZkSecurity("odradek:secret").acl("/brokers/topics/t") == OPEN_ACL_UNSAFE  # authenticated, no ACLs


def test_zookeeper_settings(tmp_path):
    assert ZkSecurity.from_settings({}) == ZkSecurity()
    creds = tmp_path / "zk"
    creds.write_text("odradek:secret\n")
    assert ZkSecurity.from_settings({"zookeeper.set.acl": "true", "zookeeper.digest.credentials.file": str(creds)}) \
        == ZkSecurity("odradek:secret", True)
    with pytest.raises(ValueError, match="zookeeper.set.acl is true but zookeeper.digest.credentials.file"):
        ZkSecurity.from_settings({"zookeeper.set.acl": "true"})
    creds.write_text("no-colon\n")
    with pytest.raises(ValueError, match="user:password"):
        ZkSecurity.from_settings({"zookeeper.digest.credentials.file": str(creds)})
    with pytest.raises(ValueError, match="cannot read"):
        ZkSecurity.from_settings({"zookeeper.digest.credentials.file": str(tmp_path / "absent")})


def test_control_plane_settings(tmp_path):
    assert ControlPlaneTls.from_settings({}) is None
    ca = CertificateAuthority.create()
    ca.write_ca(tmp_path / "ca.pem")
    ca.write_issued(tmp_path / "me.pem", "127.0.0.1")
    keystore = {"control.plane.ssl.keystore.location": str(tmp_path / "me.pem")}
    with pytest.raises(ValueError, match="needs control.plane.ssl.truststore.location"):
        ControlPlaneTls.from_settings(keystore)
    with pytest.raises(ValueError, match="do not load"):
        ControlPlaneTls.from_settings({**keystore, "control.plane.ssl.truststore.location": str(tmp_path / "none")})
    tls = ControlPlaneTls.from_settings({**keystore, "control.plane.ssl.truststore.location": str(tmp_path / "ca.pem")})
    assert tls == ControlPlaneTls(str(tmp_path / "me.pem"), str(tmp_path / "ca.pem"), check_hostname=True)
    args = parse_args(["--zookeeper", "127.0.0.1:2181", "--config", "zookeeper.session.timeout.ms=6000",
                       *[a for k, v in {**keystore, "control.plane.ssl.truststore.location": str(tmp_path / "ca.pem"),
                                        "control.plane.ssl.endpoint.identification.algorithm": ""}.items()
                         for a in ("--config", f"{k}={v}")]])
    assert args.tls.check_hostname is False and args.zk_timeouts.session_ms == 6000 and args.zk_security == ZkSecurity()


def test_zookeeper_tls_settings(tmp_path):
    """Kafka's ``zookeeper.ssl.*``: off unless ``zookeeper.ssl.client.enable``; PEM files that
    load; the endpoint check on unless emptied; the controller takes them from --config."""
    ca = CertificateAuthority.create()
    ca.write_ca(tmp_path / "ca.pem")
    ca.write_issued(tmp_path / "me.pem", "127.0.0.1")
    files = {"zookeeper.ssl.keystore.location": str(tmp_path / "me.pem"),
             "zookeeper.ssl.truststore.location": str(tmp_path / "ca.pem")}
    assert ZkTls.from_settings(files) is None
    on = {**files, "zookeeper.ssl.client.enable": "true"}
    assert ZkTls.from_settings(on) == ZkTls(str(tmp_path / "ca.pem"), str(tmp_path / "me.pem"), check_hostname=True)
    assert ZkTls.from_settings({**on, "zookeeper.ssl.endpoint.identification.algorithm": ""}).check_hostname is False
    with pytest.raises(ValueError, match="zookeeper.ssl.truststore.location is not set"):
        ZkTls.from_settings({"zookeeper.ssl.client.enable": "true"})
    with pytest.raises(ValueError, match="do not load"):
        ZkTls.from_settings({**on, "zookeeper.ssl.keystore.location": str(tmp_path / "absent.pem")})
    for key, bad in (("zookeeper.ssl.keystore.type", "JKS"), ("zookeeper.ssl.endpoint.identification.algorithm", "x"),
                     ("zookeeper.ssl.client.enable", "yes")):
        with pytest.raises(ValueError, match=f"Invalid value {bad} for configuration {key}"):
            ZkTls.from_settings({**on, key: bad})
    args = parse_args(["--zookeeper", "127.0.0.1:2181", *[a for k, v in on.items() for a in ("--config", f"{k}={v}")]])
    assert args.zk_security == ZkSecurity(tls=ZkTls(str(tmp_path / "ca.pem"), str(tmp_path / "me.pem")))


def test_only_the_clusters_own_ensemble_has_its_root_locked(tmp_path):
    """TLS with a client certificate and ACLs on: only the cluster's processes can connect, so
    the ensemble is the cluster's and ``ensure_chroot`` locks its root; a shared one stays open."""
    tls = ZkTls("ca.pem", "me.pem")
    assert ZkSecurity("odradek:secret", True, tls).owns_ensemble
    assert not ZkSecurity("odradek:secret", True).owns_ensemble           # plaintext: maybe shared
    assert not ZkSecurity("odradek:secret", False, tls).owns_ensemble     # no ACLs at all
    assert not ZkSecurity("odradek:secret", True, ZkTls("ca.pem")).owns_ensemble   # no client certificate
