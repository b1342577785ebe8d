"""``OdradekCluster.spec.listeners`` and ``spec.authorization``: Kafka listeners the way Strimzi
users write them, turned into the brokers' settings (Kafka's names), the Services that expose
them, and each listener's address for ``status.listeners``.

A listener is ``{name, port, type: internal | nodeport | loadbalancer, tls, authentication:
{type: scram-sha-512 | tls}}``. Kafka's listener name is the name in upper case; its protocol
follows from ``tls`` and the authentication (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). Besides
the user's listeners every broker has ``REPLICATION`` on 9091, the operator's own: followers
fetch on it (``inter.broker.listener.name``) and the gateway connects to it. Without
``spec.listeners`` nothing changes: one PLAINTEXT listener on 9092 (the ``--listen`` flag).

External listeners get a bootstrap Service ``<c>-<name>-bootstrap`` and one Service per broker
``<c>-brokers-<n>-<name>`` (type NodePort or LoadBalancer). A broker advertises, for such a
listener, the node's address (downward API ``status.hostIP``) and its Service's node port, or
its Service's load-balancer address. One StatefulSet template cannot hold a different port per
pod, so the operator writes every broker's ``advertised.listeners`` into the ``<c>-config``
ConfigMap (key ``advertised-listeners.json``, ``{host_ip}`` standing for the node's address) and
an init container (``odradek operator advertise``) writes the pod's own line as broker
arguments the broker reads with ``@file``.

Pure: no Kubernetes access; ``reconcile`` applies what this builds and reads the Services back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from odradek.operator.spec import Authorization, ClusterSpec, SpecError

TYPES = ("internal", "nodeport", "loadbalancer")
AUTHENTICATIONS = ("scram-sha-512", "tls")
REPLICATION = "REPLICATION"
REPLICATION_PORT = 9091
# Ports every broker already uses (builders.BROKER_INTERNAL_PORT, builders.METRICS_PORT).
RESERVED_PORTS = {REPLICATION_PORT: "the replication listener", 9093: "the brokers' control-plane API",
                  9404: "the metrics endpoint"}
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ADVERTISED_TABLE = "advertised-listeners.json"  # key of the <c>-config ConfigMap
LISTENERS_DIR = "/etc/odradek/listeners"        # that table, mounted in the init container
ADVERTISED_DIR = "/etc/odradek/advertised"      # the pod's own advertised.listeners (broker @file)
PLAIN_PORT = 9092                               # without spec.listeners: PLAINTEXT (the --listen flag)
HOST_IP = "{host_ip}"                           # the node's address in that table
LISTENER_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map",
                 "inter.broker.listener.name", "sasl.enabled.mechanisms", "authorizer.class.name", "super.users")
CLIENT_AUTH = "ssl.client.auth"
_CLIENT_AUTH_KEY = re.compile(r"^listener\.name\.[a-z0-9_]+\.ssl\.client\.auth$")
_NAME = re.compile(r"^[a-z0-9]{1,11}$")


@dataclass(frozen=True)
class Listener:
    name: str
    port: int
    type: str
    tls: bool
    authentication: str | None

    @property
    def kafka_name(self) -> str:
        return self.name.upper()

    @property
    def protocol(self) -> str:
        sasl = self.authentication == "scram-sha-512"
        return ("SASL_" if sasl else "") + ("SSL" if self.tls else ("PLAINTEXT"))

    @property
    def external(self) -> bool:
        return self.type != "internal"


@dataclass(frozen=True)
class BrokerTls:
    """What a TLS listener needs in the broker pod (from ``certs``): the broker's settings
    (``ssl.keystore.location``, ``ssl.truststore.location``...) and its certificate's principal."""

    settings: Mapping[str, str]
    principal: str                  # User:CN=..., the brokers' own, a super user
    extra_super_users: tuple[str, ...] = ()   # the operator's principal (never the gateway's)


def parse(spec: Mapping[str, Any]) -> list[Listener]:
    """``spec.listeners`` checked: SpecError names the listener and what is wrong. Empty list:
    no ``spec.listeners`` (the plain PLAINTEXT listener)."""
    out: list[Listener] = []
    for i, raw in enumerate(spec.get("listeners") or []):
        where = f"spec.listeners[{i}]"
        name = str(raw.get("name", ""))
        if not _NAME.match(name):
            raise SpecError(f"{where}: name {name!r} must be 1-11 lower-case letters or digits")
        where = f"{where} ({name})"
        kind = raw.get("type", "internal")
        if kind not in TYPES:
            raise SpecError(f"{where}: unknown listener type {kind!r}; one of {', '.join(TYPES)}")
        port = raw.get("port")
        if not isinstance(port, int) or not 1024 <= port <= 65535:
            raise SpecError(f"{where}: port {port!r} must be a number in 1024-65535")
        if port in RESERVED_PORTS:
            raise SpecError(f"{where}: port {port} is reserved for {RESERVED_PORTS[port]}")
        auth = (raw.get("authentication") or {}).get("type")
        if auth is not None and auth not in AUTHENTICATIONS:
            raise SpecError(f"{where}: unknown authentication type {auth!r}; one of {', '.join(AUTHENTICATIONS)}")
        tls = bool(raw.get("tls", False))
        if auth == "tls" and not tls:
            raise SpecError(f"{where}: authentication type tls needs a TLS listener (tls: true)")
        out.append(Listener(name, port, kind, tls, auth))
    _unique(out)
    return out


def _unique(listeners: list[Listener]) -> None:
    names: set[str] = set()
    ports: dict[int, str] = {}
    for li in listeners:
        if li.name in names or li.kafka_name == REPLICATION:
            raise SpecError(f"spec.listeners: duplicate listener name {li.name!r}"
                            if li.name in names else "spec.listeners: the name 'replication' is the operator's own")
        if li.port in ports:
            raise SpecError(f"spec.listeners: port {li.port} is used by both {ports[li.port]!r} and {li.name!r}")
        names.add(li.name)
        ports[li.port] = li.name


def validate(spec: Mapping[str, Any]) -> list[Listener]:
    """Listeners, authorization and the broker settings they own: SpecError before any change."""
    listeners = parse(spec)
    authz = spec.get("authorization")
    if authz is not None:
        _check_authorization(authz, listeners)
    config = (spec.get("brokers") or {}).get("config") or {}
    owned = sorted(k for k in config if k in LISTENER_KEYS or k == CLIENT_AUTH or _CLIENT_AUTH_KEY.match(k))
    if listeners and owned:
        raise SpecError(f"brokers.config: {', '.join(owned)} are set from spec.listeners and spec.authorization")
    return listeners


def _check_authorization(authz: Mapping[str, Any], listeners: Sequence[Listener]) -> None:
    """An authorizer needs principals: without an authenticating listener every client is
    ``User:ANONYMOUS``, and ANONYMOUS is never a super user (it would be everyone)."""
    if authz.get("type") != "simple":
        raise SpecError(f"spec.authorization.type: {authz.get('type')!r} is not supported; use simple")
    if not any(li.authentication for li in listeners):
        raise SpecError("spec.authorization needs a listener with authentication (scram-sha-512 or tls): "
                        "without one every client is User:ANONYMOUS", "NoAuthenticatingListener")
    anonymous = [u for u in authz.get("superUsers") or [] if str(u).removeprefix("User:") == "ANONYMOUS"]
    if anonymous:
        raise SpecError("spec.authorization.superUsers: ANONYMOUS (every unauthenticated client) cannot be a "
                        "super user", "AnonymousSuperUser")


def secured(listeners: Iterable[Listener]) -> bool:
    """Whether the cluster needs TLS material: a TLS listener, or any authentication (then
    replication goes over mutual TLS too, so its port is no back door)."""
    return any(li.tls or li.authentication for li in listeners)


def super_users(authorization: Authorization, broker_principal: str, extra: Iterable[str] = ()) -> str:
    """``super.users``: the brokers' principal, the operator's components', then the spec's
    (``alice`` and ``User:alice`` both mean ``User:alice``)."""
    users = [broker_principal, *extra]
    for user in authorization.super_users:
        users.append(user if user.startswith("User:") else f"User:{user}")
    return ";".join(dict.fromkeys(users))


def replication_protocol(tls: BrokerTls | None) -> str:
    return "SSL" if tls is not None else "PLAINTEXT"


def broker_settings(authorization: Authorization | None, listeners: Sequence[Listener], advertised: str,
                    tls: BrokerTls | None) -> dict[str, str]:
    """The brokers' listener, SASL and authorizer settings (``advertised`` is the
    ``advertised.listeners`` value, or empty when each pod reads its own from a file)."""
    protocols = [(REPLICATION, replication_protocol(tls))] + [(li.kafka_name, li.protocol) for li in listeners]
    out = {"listeners": ",".join(f"{n}://0.0.0.0:{p}" for n, p in
                                 [(REPLICATION, REPLICATION_PORT)] + [(li.kafka_name, li.port) for li in listeners]),
           "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in protocols),
           "inter.broker.listener.name": REPLICATION}
    if advertised:
        out["advertised.listeners"] = advertised
    if any(li.authentication == "scram-sha-512" for li in listeners):
        out["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
    if tls is not None:
        out.update(tls.settings)
        out.update(client_auth(listeners))
    if authorization is not None:
        if tls is None:   # validate() refuses it: no listener authenticates, all would be ANONYMOUS
            raise SpecError("spec.authorization needs a listener with authentication", "NoAuthenticatingListener")
        out["authorizer.class.name"] = AUTHORIZER
        out["super.users"] = super_users(authorization, tls.principal, tls.extra_super_users)
    return out


def client_listener_key(listener: str, key: str) -> str:
    """Kafka's per-listener form of ``key``: ``listener.name.<listener, lower case>.<key>``."""
    return f"listener.name.{listener.lower()}.{key}"


def client_auth(listeners: Sequence[Listener]) -> dict[str, str]:
    """``ssl.client.auth`` per listener (Kafka's ``listener.name.<l>.ssl.client.auth``):
    replication (9091) ``required``, mutual TLS with the components' certificates, as Strimzi
    sets it; a ``tls``-authenticated listener ``required``; other TLS listeners ``none`` (SASL_SSL
    clients log in with SASL). The broker-wide value stays what it was for brokers that read no
    per-listener key: ``required`` when every TLS listener authenticates by certificate, else
    ``requested``."""
    out = {client_listener_key(REPLICATION, CLIENT_AUTH): "required"}
    for li in (li for li in listeners if li.tls):
        out[client_listener_key(li.kafka_name, CLIENT_AUTH)] = "required" if li.authentication == "tls" else "none"
    cert_only = all(li.authentication == "tls" for li in listeners if li.tls)
    out[CLIENT_AUTH] = "required" if cert_only else "requested"
    return out


# -- addresses ------------------------------------------------------------------------------

def internal_advertised(host: str, listeners: Sequence[Listener]) -> list[str]:
    """``NAME://host:port`` of the replication listener and every internal listener."""
    return [f"{REPLICATION}://{host}:{REPLICATION_PORT}"] + [
        f"{li.kafka_name}://{host}:{li.port}" for li in listeners if not li.external]


def external_address(listener: Listener, service: Mapping[str, Any] | None) -> str | None:
    """What a broker advertises for an external listener, from its live Service: ``{host_ip}``
    and the node port, or the load balancer's address and the port; None until known."""
    if service is None:
        return None
    spec, status = service.get("spec") or {}, service.get("status") or {}
    if listener.type == "nodeport":
        node_port = next((p.get("nodePort") for p in spec.get("ports") or []), None)
        return f"{HOST_IP}:{node_port}" if node_port else None
    ingress = (status.get("loadBalancer") or {}).get("ingress") or []
    host = next((i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")), None)
    return f"{host}:{listener.port}" if host else None


def advertised_table(pod_host: Mapping[int, str], listeners: Sequence[Listener],
                     external: Mapping[tuple[str, int], str | None], fallback: Mapping[tuple[str, int], str]) -> str:
    """JSON ``{ordinal: advertised.listeners}`` for every broker; an external address not known
    yet (a load balancer still pending) is the per-broker Service's DNS name (``fallback``)."""
    table = {}
    for ordinal, host in sorted(pod_host.items()):
        entries = internal_advertised(host, listeners)
        for li in listeners:
            if li.external:
                address = external.get((li.name, ordinal)) or fallback[(li.name, ordinal)]
                entries.append(f"{li.kafka_name}://{address}")
        table[str(ordinal)] = ",".join(entries)
    return json.dumps(table, sort_keys=True)


def advertised_line(table: str, ordinal: int, host_ip: str) -> str:
    """One broker's ``advertised.listeners`` from the table, with the node's address filled in."""
    line = json.loads(table).get(str(ordinal))
    if line is None:
        raise SpecError(f"no advertised listeners for broker {ordinal} (the operator has not written them yet)")
    return line.replace(HOST_IP, f"[{host_ip}]" if ":" in host_ip else host_ip)


def certificate_names(listeners: Sequence[Listener], replicas: int, host_ips: Iterable[str],
                      external: Mapping[tuple[str, int], str | None]) -> dict[int, list[str]]:
    """The external names each broker's certificate must carry for its TLS external listeners
    (``certs.plan_certificates``' ``extra_broker_names``): ``host_ips`` for a nodeport listener
    (the nodes of every broker pod and every Node the operator can list: its bootstrap reaches
    any broker through any of them), the load balancer's address for a loadbalancer listener."""
    out: dict[int, list[str]] = {i: [] for i in range(replicas)}
    for li in (li for li in listeners if li.external and li.tls):
        for ordinal in range(replicas):
            if li.type == "nodeport":
                out[ordinal] += sorted(set(host_ips))
            else:
                address = external.get((li.name, ordinal))
                if address:
                    out[ordinal].append(address.rpartition(":")[0])
    return {i: list(dict.fromkeys(names)) for i, names in out.items() if names}


# -- the brokers' pods ------------------------------------------------------------------------

def kafka_ports(listeners: Sequence[Listener]) -> list[dict]:
    """The brokers' Kafka ports: 9092 without ``spec.listeners``; else replication and each listener."""
    if not listeners:
        return [{"name": "kafka", "port": PLAIN_PORT}]
    return [{"name": "replication", "port": REPLICATION_PORT}, *({"name": li.name, "port": li.port} for li in listeners)]


def broker_args(spec: ClusterSpec, host: str, tls: BrokerTls | None) -> list[str]:
    """The broker's Kafka listener arguments: the ``--listen`` flag's PLAINTEXT listener, or
    ``spec.listeners`` as Kafka's settings (with external listeners each pod reads its own
    ``advertised.listeners`` from the init container's argument file)."""
    listeners = spec.listeners
    if not listeners:
        return ["--listen", f"0.0.0.0:{PLAIN_PORT}", "--advertised", f"{host}:{PLAIN_PORT}"]
    external = any(li.external for li in listeners)
    advertised = "" if external else ",".join(internal_advertised(host, listeners))
    args = [f"@{ADVERTISED_DIR}/broker.args"] if external else []
    for key, value in broker_settings(spec.authorization, listeners, advertised, tls).items():
        args += ["--config", f"{key}={value}"]
    return args


def add_advertise_init(pod: dict, broker: dict, config_map: str) -> None:
    """An init container (the broker's image, env and security context) writes the pod's
    ``advertised.listeners`` (its node's address and its own node port or load balancer, from
    the ConfigMap's table) for the broker's ``@file``."""
    init = json.loads(json.dumps({key: broker[key] for key in ("image", "imagePullPolicy", "securityContext")}))
    init |= {"name": "advertise",
             "args": ["operator", "advertise", "--ordinal", "$(BROKER_ID)", "--host-ip", "$(HOST_IP)",
                      "--table", f"{LISTENERS_DIR}/{ADVERTISED_TABLE}", "--output", f"{ADVERTISED_DIR}/broker.args"],
             "env": [next(e for e in broker["env"] if e["name"] == "BROKER_ID"),
                     {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
             "volumeMounts": [{"name": "listeners", "mountPath": LISTENERS_DIR, "readOnly": True},
                              {"name": "advertised", "mountPath": ADVERTISED_DIR}]}
    broker["volumeMounts"].append({"name": "advertised", "mountPath": ADVERTISED_DIR, "readOnly": True})
    pod["initContainers"] = [*pod.get("initContainers", []), init]
    pod["volumes"] = [*pod.get("volumes", []), {"name": "advertised", "emptyDir": {}},
                      {"name": "listeners", "configMap": {"name": config_map, "items": [
                          {"key": ADVERTISED_TABLE, "path": ADVERTISED_TABLE}]}}]


# -- Services -------------------------------------------------------------------------------

def service_names(cluster: str, listener: Listener, replicas: int) -> tuple[str, list[str]]:
    """The bootstrap Service and the per-broker Services of an external listener."""
    return (f"{cluster}-{listener.name}-bootstrap",
            [f"{cluster}-brokers-{i}-{listener.name}" for i in range(replicas)])


def build_external_services(cluster: str, namespace: str, listeners: Sequence[Listener], replicas: int,
                            labels: Mapping[str, str], selector: Mapping[str, str]) -> list[dict]:
    """A bootstrap Service and one Service per broker for every external listener."""
    out = []
    for li in (li for li in listeners if li.external):
        kind = "NodePort" if li.type == "nodeport" else "LoadBalancer"
        port = [{"name": li.name, "port": li.port, "targetPort": li.port, "protocol": "TCP"}]
        bootstrap, per_broker = service_names(cluster, li, replicas)
        meta = {"namespace": namespace, "labels": {**labels, "odradek.dev/listener": li.name}}
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": bootstrap, **meta},
                    "spec": {"type": kind, "selector": dict(selector), "ports": port}})
        for ordinal, name in enumerate(per_broker):
            pod = f"{cluster}-brokers-{ordinal}"
            out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, **meta},
                        "spec": {"type": kind, "ports": port, "publishNotReadyAddresses": True,
                                 "selector": {**selector, "statefulset.kubernetes.io/pod-name": pod}}})
    return out


def bootstrap_address(cluster: str, namespace: str, listener: Listener, service: Mapping[str, Any] | None,
                      host_ips: Iterable[str]) -> str | None:
    """A client's bootstrap address for ``status.listeners``: the bootstrap Service's DNS name for
    an internal listener; the brokers' node addresses and the node port; the load balancer's."""
    if not listener.external:
        return f"{cluster}-bootstrap.{namespace}.svc:{listener.port}"
    address = external_address(listener, service)
    if address is None:
        return None
    if listener.type == "nodeport":
        return ",".join(address.replace(HOST_IP, ip) for ip in sorted(set(host_ips))) or None
    return address


# -- the brokers' init container: ``odradek operator advertise`` ------------------------------

def main(argv: list[str] | None = None) -> int:
    """Write this broker's ``--config advertised.listeners=...`` as an argument file (the broker
    reads it as ``@file``), from the operator's table and the node's address."""
    import argparse
    import sys
    from pathlib import Path

    p = argparse.ArgumentParser(prog="odradek operator advertise",
                                description="Write a broker's advertised listeners (external listeners).")
    p.add_argument("--ordinal", type=int, required=True, help="the broker's pod ordinal (its broker id)")
    p.add_argument("--host-ip", required=True, help="the node's address (downward API status.hostIP)")
    p.add_argument("--table", type=Path, required=True, help=f"the ConfigMap's {ADVERTISED_TABLE}, mounted")
    p.add_argument("--output", type=Path, required=True, help="argument file the broker reads as @file")
    args = p.parse_args(argv)
    try:
        line = advertised_line(args.table.read_text(), args.ordinal, args.host_ip)
    except (OSError, ValueError, SpecError) as e:
        print(f"odradek operator advertise: {e}", file=sys.stderr)
        return 1
    args.output.write_text(f"--config\nadvertised.listeners={line}\n")
    print(f"advertised.listeners={line}")
    return 0
