"""The cluster's processes as principals (``odradek.operator.principals``), without an API
server: the pods' arguments, as the security plan and the builders make them for applying,
parse with the real CLIs against the Secrets' files; the control plane admits the operator's
and the probe's certificates and refuses the gateway's."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import ssl
import subprocess
import threading
from pathlib import Path
from unittest import mock

import pytest
from aiohttp import web

from odradek.cluster import control_plane, control_plane_http
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.operator import admin, certs, principals
from odradek.operator.probe import main as probe
from tests.operator.plans import children as planned, cluster_spec

NS = "ns"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """The children of cluster ``c`` with their certificates, and the Secrets' files laid out
    where the pods mount them (under a temporary root)."""
    root = tmp_path_factory.mktemp("pod")
    plan = certs.plan_certificates("c", NS, cluster_spec({}), {}, 1)
    children = planned("c", NS, {}, plan.versions)
    secrets = {s["metadata"]["name"]: certs.decode(s) for s in
               [*plan.secrets, principals.zookeeper_secret("c", NS, None)]}
    for kind, name in (("Deployment", "c-controller"), ("StatefulSet", "c-brokers")):
        pod = next(c for c in children if (c["kind"], c["metadata"]["name"]) == (kind, name))["spec"]["template"]["spec"]
        volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        for mount in pod["containers"][0]["volumeMounts"]:
            if mount["name"] in volumes:
                target = root / mount["mountPath"].lstrip("/")
                target.mkdir(parents=True, exist_ok=True)
                for key, data in secrets[volumes[mount["name"]]].items():
                    (target / key).write_bytes(data)
    return root, children, plan


def args_of(secured, kind, name):
    """The container's arguments as the process gets them: ``$(VAR)`` expanded as the kubelet
    does, then, for a ``sh -c`` command, through a real shell (with ``odradek`` replaced by
    printing its arguments)."""
    root, children, _ = secured
    child = next(c for c in children if (c["kind"], c["metadata"]["name"]) == (kind, name))
    container = child["spec"]["template"]["spec"]["containers"][0]
    subst = {"$(POD_NAME)": "c-brokers-0", "$(POD_NAMESPACE)": NS, "$(BROKER_ID)": "0",
             "$(ODRADEK_ZOOKEEPER)": "zk:2181", "$(ODRADEK_CLUSTER)": "c", "/etc/odradek": str(root / "etc/odradek")}

    def kubelet(arg):
        for k, v in subst.items():
            arg = arg.replace(k, v)
        return arg
    if "command" not in container:
        return child, container, [kubelet(a) for a in container["args"]]
    shell, flag, script = container["command"]
    assert (shell, flag) == ("sh", "-c") and script.startswith("exec odradek ")
    script = "exec printf '%s\\n' " + kubelet(script)[len("exec odradek "):]
    out = subprocess.run([shell, flag, script], capture_output=True, text=True, check=True,
                         env={"PATH": os.environ["PATH"], "POD_IP": "10.0.0.5", "POD_NAMESPACE": NS})
    return child, container, out.stdout.splitlines()


def test_controller_and_broker_arguments_parse_with_their_clis(secured):
    from odradek.broker.cli import parse_args as broker_args
    from odradek.controller.cli import parse_args as controller_args
    child, container, args = args_of(secured, "Deployment", "c-controller")
    parsed = controller_args(args[1:])
    assert args[0] == "controller"
    assert parsed.tls is not None and parsed.tls.peer_common_name == r"c-(broker|controller|operator)"
    assert parsed.zk_security.set_acl and parsed.zk_security.digest.startswith("odradek:")
    assert args[args.index("--advertised-url") + 1] == f"https://10-0-0-5.c-controller.{NS}.svc:8080"
    assert container["readinessProbe"]["exec"]["command"][:3] == ["odradek", "operator", "probe"]
    _, _, args = args_of(secured, "StatefulSet", "c-brokers")
    config = broker_args(args[1:])
    assert config.control_plane_tls() is not None and config.zookeeper_security().set_acl


@contextlib.contextmanager
def serving(root: Path, handlers):
    """``handlers`` served over mutual TLS with the controller's certificate (the probe checks
    the CA only) on an event loop of its own thread; yields the port."""
    ctl = root / "etc/odradek/certs"
    tls = ControlPlaneTls(str(ctl / "controller/controller.pem"), str(ctl / "cluster-ca/ca.crt"),
                          peer_common_name=certs.control_plane_config("c", "controller")[
                              "control.plane.ssl.peer.common.name.pattern"])
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    app = control_plane_http.server_app(handlers)
    runner, (_, port) = asyncio.run_coroutine_threadsafe(
        control_plane_http.serve(app, "127.0.0.1", 0, tls, "test control plane"), loop).result(10)
    try:
        yield port
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)


def test_control_plane_admits_the_operator_and_the_probe_not_the_gateway(secured, tmp_path):
    root, _, plan = secured
    ctl = root / "etc/odradek/certs"
    health = {"id": "ctl-0", "url": "", "active": True, "epoch": 1, "under_replicated_partitions": 0}

    async def answer(_: web.Request) -> web.Response:
        return web.json_response(health)

    with serving(root, {control_plane.HEALTH: answer}) as port:
        url = f"https://127.0.0.1:{port}"
        health["url"] = url
        secrets = {s["metadata"]["name"]: certs.decode(s) for s in plan.secrets}

        class FakeKube:
            def get(self, api_version, kind, namespace, name):
                return next(s for s in plan.secrets if s["metadata"]["name"] == name)

        tls = principals.operator_tls(FakeKube(), "c", NS)
        assert Path(tls.keystore).stat().st_mode & 0o077 == 0
        # 127.0.0.1 is not among the certificate's names: the host name check is tested by the cluster
        tls = ControlPlaneTls(tls.keystore, tls.truststore, check_hostname=False)
        assert admin.ControllerClient([url], tls=tls).health()["active"] is True
        # what a broker or the operator checks: the controller's certificate covers its DNS name
        context = ssl.create_default_context(cafile=tls.truststore)
        context.load_cert_chain(tls.keystore)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname=f"10-0-0-5.c-controller.{NS}.svc"):
                pass
        with pytest.raises(ssl.SSLCertVerificationError), socket.create_connection(("127.0.0.1", port)) as raw:
            context.wrap_socket(raw, server_hostname=f"c-brokers-0.c-brokers.{NS}.svc")
        path = control_plane.HEALTH.path()
        assert probe(["--port", str(port), "--path", path, "--keystore", str(ctl / "controller/controller.pem"),
                      "--truststore", str(ctl / "cluster-ca/ca.crt")]) == 0
        gateway = tmp_path / "gateway.pem"
        gateway.write_bytes(secrets["c-gateway-certs"]["gateway.pem"])
        assert probe(["--port", str(port), "--path", path, "--keystore", str(gateway),
                      "--truststore", str(ctl / "cluster-ca/ca.crt")]) == 1   # 403: its CN is not admitted


def broker_probe(secured, port: int) -> list[str]:
    """The brokers' probe as the kubelet runs it (no ``$(VAR)`` expanded: ``{hostname}`` is the
    pod's name), its arguments pointed at the test's files and ``port``."""
    root, _, _ = secured
    _, broker, _ = args_of(secured, "StatefulSet", "c-brokers")
    command = broker["readinessProbe"]["exec"]["command"]
    assert command[:3] == ["odradek", "operator", "probe"] and not any("$(" in part for part in command), command
    local = [part.replace("/etc/odradek", str(root / "etc/odradek")) for part in command[3:]]
    local[local.index("--port") + 1] = str(port)
    return local


def test_broker_probe_is_ready_in_every_isr_and_serving_on_the_previous_release(secured):
    """Ready = ``/ready``'s answer (503 while out of an ISR: not ready, no fall back to the status
    route). A broker API without ``/ready`` (the previous release's image, 404) is asked its status
    route, and that release's own probe, whose ``--path`` takes one value, keeps the last: the
    status route it always asked."""
    root, _, _ = secured
    readiness = {"broker_id": 0, "ready": False, "state": "RUNNING", "out_of_isr": 2}

    async def ready(_: web.Request) -> web.Response:
        return web.json_response(readiness, status=200 if readiness["ready"] else 503)

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"broker_id": 0})

    with mock.patch("socket.gethostname", return_value="c-brokers-0"):
        with serving(root, {control_plane.READY: ready, control_plane.STATUS: status}) as port:
            assert probe(broker_probe(secured, port)) == 1   # out of 2 ISRs
            readiness.update(ready=True, out_of_isr=0)
            assert probe(broker_probe(secured, port)) == 0
        with serving(root, {control_plane.STATUS: status}) as port:
            assert probe(broker_probe(secured, port)) == 0
    previous = argparse.ArgumentParser()   # 164ccb3's probe: --path stored once, the last wins
    previous.add_argument("--path", required=True)
    assert previous.parse_known_args(broker_probe(secured, 1))[0].path == control_plane.STATUS.path()


def test_gateway_gets_its_certificate_and_the_cluster_ca(secured):
    plan = certs.plan_certificates("c", NS, cluster_spec({}), {}, 1)
    children = planned("c", NS, {"gateway": {"replicas": 1}}, plan.versions)
    from odradek.gateway.settings import from_args
    dep = next(c for c in children if c["metadata"]["name"] == "c-gateway" and c["kind"] == "Deployment")
    settings, _ = from_args(dep["spec"]["template"]["spec"]["containers"][0]["args"][1:]
                            + ["--kafka-security-protocol", "SSL"])
    conf = settings.client_config()
    assert conf["ssl.certificate.location"] == "/etc/odradek/certs/gateway/gateway.crt"
    assert conf["ssl.ca.location"] == "/etc/odradek/certs/cluster-ca/ca.crt"
    assert dep["spec"]["template"]["metadata"]["annotations"][certs.CERTS_ANNOTATION] == plan.versions["gateway"]


def test_zookeeper_credentials_are_kept():
    first = principals.zookeeper_secret("c", NS, None)
    assert principals.zookeeper_secret("c", NS, first)["data"] == first["data"]
    assert principals.zookeeper_secret("c", NS, None)["data"] != first["data"]


def test_security_plan_is_a_frozen_value_decided_before_building():
    import dataclasses

    from odradek.operator import listeners
    plain = principals.security_plan("c", (), {"broker": "b", "controller": "k", "gateway": "g"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.broker_tls = None  # type: ignore[misc]
    assert plain.broker_tls is None and plain.broker_certificates == "b"
    assert plain.controller.annotations == {certs.CERTS_ANNOTATION: "k"} and not plain.broker.annotations
    assert plain.broker.probe["exec"]["command"][:3] == ["odradek", "operator", "probe"]
    assert plain.gateway.probe is None and "--kafka-ssl-ca-location" in plain.gateway.args
    # authentication on a listener: the brokers get TLS material (mutual TLS replication, principals)
    scram = listeners.parse({"listeners": [{"name": "a", "port": 9094,
                                            "authentication": {"type": "scram-sha-512"}}]})
    tls = principals.security_plan("c", scram, {"broker": "b", "controller": "k", "gateway": "g"}).broker_tls
    assert tls is not None and tls.principal == certs.principal("c", "broker")
