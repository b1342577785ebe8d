"""The operator's admission webhook server: its serving certificate and where the API server
learns to trust it (docs/kubernetes.md, "Evictions and node drains").

The chart registers a ValidatingWebhookConfiguration (``webhook.enabled``) whose client config
names the operator's webhook Service, without a CA bundle; the operator keeps its own small CA
and serving certificate in a Secret (``ODRADEK_OPERATOR_WEBHOOK_SECRET``: created on first start,
shared by every operator replica, reissued at start-up when its names change or it has less than
``RENEW_BEFORE`` left) and writes the CA into each webhook of that configuration
(``publish_ca``, a strategic merge patch by webhook name). The tests on a local API server
register a ``url`` client config on 127.0.0.1 instead; the rest is the same.

Every operator replica serves the admission reviews (``AdmissionServer``: HTTPS, one path per
review function, e.g. ``/evictions``) for its whole life, the standbys of a leader election
included: the webhook Service selects every operator pod, and the decisions are idempotent and
safe from any replica (``evictions``). kopf only runs on the leader, so its webhook server would
leave the standbys' share of the reviews unanswered. The server re-reads the Secret every
``REFRESH`` seconds (a renewal by another replica, or its own when due) and serves the new
certificate from the next handshake on.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import ssl
import tempfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from odradek.certs import CertificateAuthority, alt_names, not_after

VALIDITY = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=30)
CONFIGURATION_API = "admissionregistration.k8s.io/v1"
REFRESH = 60.0     # seconds between re-reads of the certificate's Secret

log = logging.getLogger("odradek.operator.webhook")


def _fresh(data: dict[str, bytes], hosts: list[str]) -> bool:
    if not {"ca.crt", "tls.crt", "tls.key"} <= data.keys():
        return False
    left = not_after(data["tls.crt"]) - datetime.datetime.now(datetime.timezone.utc)
    return sorted(alt_names(data["tls.crt"])) == sorted(hosts) and left > RENEW_BEFORE


def issue(hosts: list[str]) -> dict[str, bytes]:
    """A new CA and a serving certificate for ``hosts`` (DNS names or IP addresses)."""
    ca = CertificateAuthority.create("odradek-operator-webhook-ca", "odradek", VALIDITY + RENEW_BEFORE)
    cert = ca.issue_certificate(*hosts, organization="odradek", validity=VALIDITY)
    return {"ca.crt": ca.cert_pem, "tls.crt": cert.cert_pem, "tls.key": cert.key_pem}


def serving_certificate(kube: Any, namespace: str, name: str, hosts: Iterable[str]) -> dict[str, bytes]:
    """``ca.crt``, ``tls.crt``, ``tls.key`` from the Secret, issued (and stored) when missing or due.
    Two replicas starting together: the loser of the create reads the winner's."""
    hosts = list(hosts)
    secret = kube.get("v1", "Secret", namespace, name)
    data = {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}
    if _fresh(data, hosts):
        return data
    data = issue(hosts)
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "odradek-operator"}},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
    try:
        if secret is None:
            kube.request("POST", f"/api/v1/namespaces/{namespace}/secrets", body)
        else:   # resourceVersion: a replica that renewed it first wins, this one reads it
            body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
            kube.merge_patch("v1", "Secret", namespace, name, body)
    except kube.ApiException as e:
        if e.status != 409:
            raise
        return serving_certificate(kube, namespace, name, hosts)
    return data


def publish_ca(kube: Any, configuration: str, ca_pem: bytes) -> int:
    """Write ``ca_pem`` into every webhook of the ValidatingWebhookConfiguration; how many (0:
    the configuration does not exist, e.g. ``webhook.enabled`` off)."""
    path = f"/apis/{CONFIGURATION_API}/validatingwebhookconfigurations/{configuration}"
    try:
        current = kube.request("GET", path)
    except kube.ApiException as e:
        if e.status == 404:
            return 0
        raise
    bundle = base64.b64encode(ca_pem).decode()
    hooks = [{"name": w["name"], "clientConfig": {"caBundle": bundle}} for w in current.get("webhooks") or []]
    if hooks:
        kube.request("PATCH", path, {"webhooks": hooks}, content_type="application/strategic-merge-patch+json")
    return len(hooks)


@dataclass(frozen=True)
class Answer:
    """A review's outcome: allowed, or denied with ``message`` and an HTTP ``code``."""
    allowed: bool
    message: str = ""
    code: int = 200


Review = Callable[[Mapping[str, Any]], Answer]   # the AdmissionReview's ``request`` in


def respond(review: Mapping[str, Any], answer: Answer) -> dict[str, Any]:
    """The AdmissionReview (admission.k8s.io/v1) answering ``review``."""
    response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": answer.allowed}
    if not answer.allowed:
        response["status"] = {"code": answer.code, "message": answer.message}
    return {"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
            "response": response}


class AdmissionServer:
    """HTTPS admission reviews on ``listen`` (``host:port``): POST ``/<name>`` goes to
    ``routes[name]``. Threads of its own, so it serves while kopf runs or before (a standby)."""

    def __init__(self, listen: str, data: dict[str, bytes], routes: Mapping[str, Review]) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="odradek-webhook-"))   # ssl loads files
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.load(data)
        addr, _, port = listen.rpartition(":")
        self.server = ThreadingHTTPServer((addr or "0.0.0.0", int(port)), _handler(routes))
        # The handshake in the request's thread (at its first read), not in the accepting one.
        self.server.socket = self.context.wrap_socket(self.server.socket, server_side=True,
                                                      do_handshake_on_connect=False)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True, name="admission").start()

    def load(self, data: dict[str, bytes]) -> None:
        """Serve ``data``'s certificate from the next handshake on."""
        self.data = data
        for key in ("tls.crt", "tls.key"):
            (self.directory / key).touch(mode=0o600)
            (self.directory / key).write_bytes(data[key])
        self.context.load_cert_chain(self.directory / "tls.crt", self.directory / "tls.key")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(routes: Mapping[str, Review]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 30   # seconds a silent connection may hold its thread

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            review = routes.get(self.path.split("?")[0].strip("/"))
            if review is None:
                return self.reply(404, {"error": f"no admission review at {self.path}"})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                request = body["request"]
            except (ValueError, KeyError, TypeError) as e:
                return self.reply(400, {"error": f"not an AdmissionReview: {e}"})
            self.reply(200, respond(body, review(request)))

        def reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: Any) -> None:   # the reviews log their decisions themselves
            pass
    return Handler


def keep_fresh(server: AdmissionServer, read: Callable[[], dict[str, bytes]], publish: Callable[[bytes], Any],
               stop: threading.Event, interval: float = REFRESH) -> None:
    """Every ``interval``: ``read()`` the certificate (issuing it when due) and serve (and
    publish the CA of) a changed one. An unreachable API server is retried at the next turn."""
    while not stop.wait(interval):
        try:
            data = read()
            if data != server.data:
                server.load(data)
                publish(data["ca.crt"])
                log.info("the webhook's certificate changed: serving the new one")
        except Exception:   # noqa: BLE001 (a thread that must outlive a failing API server)
            log.exception("re-reading the webhook's certificate failed; retrying in %.0fs", interval)
