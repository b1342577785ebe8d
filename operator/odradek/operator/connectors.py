"""OdradekConnector: a connector of an OdradekConnect, reconciled through Kafka Connect's REST API
(as Strimzi's KafkaConnector through its operator's REST client).

Pure part: the spec checked (``parse_connector``: ``connector.class``, ``tasks.max`` and ``name``
come from the resource, never from ``spec.config``), the configuration the workers get
(``desired_config``), the REST calls one pass makes (``plan``: create or update the config when
it differs, then bring the connector to ``spec.state`` with ``pause``/``stop``/``resume``, then the
restarts the annotations ask for) and the Ready verdict on what ``GET .../status`` returned
(``verdict``). I/O part: ``ConnectClient``, Kafka Connect's REST API (JSON; its error bodies carry
``error_code`` and ``message``; 409 is a rebalance in progress, retried; with basic authentication
on the REST API, the operator's login from the OdradekConnect's REST Secret).

Annotations (as Strimzi's ``strimzi.io/restart`` and ``strimzi.io/restart-task``):
``odradek.dev/restart: "true"`` restarts the connector and its tasks (``"failed"``: only the failed
instances, KIP-745's ``onlyFailed``); ``odradek.dev/restart-task: "<id>"`` restarts one task. The
handler claims the annotation before the call by removing it while it still holds the value read
(a JSON patch's test): of two passes holding the same body only one restarts, a restart asked
again meanwhile stays for the next pass, and a call that fails gives the annotation back.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping

from odradek.operator.spec import ConnectorSpec, SpecError

RESTART_ANNOTATION = "odradek.dev/restart"
RESTART_TASK_ANNOTATION = "odradek.dev/restart-task"
CONNECT_URL_ANNOTATION = "odradek.dev/connect-url"
CONNECT_LABEL = "odradek.dev/connect"
STATES = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}   # spec.state -> Connect's state
OWNED_KEYS = ("connector.class", "tasks.max", "name")
TIMEOUT_S = 10.0


def parse_connector(spec: Mapping[str, Any]) -> ConnectorSpec:
    config = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in (spec.get("config") or {}).items()}
    owned = sorted(k for k in config if k in OWNED_KEYS)
    if owned:
        raise SpecError(f"spec.config: {', '.join(owned)} come from spec.class, spec.tasksMax and metadata.name")
    if not spec.get("class"):
        raise SpecError("spec.class: the connector's class is required")
    state = spec.get("state", ConnectorSpec.state)
    if state not in STATES:
        raise SpecError(f"spec.state: {state!r} is not one of {', '.join(STATES)}")
    return ConnectorSpec(class_name=str(spec["class"]), connect=spec.get("connect"),
                         tasks_max=int(spec.get("tasksMax", ConnectorSpec.tasks_max)), state=state,
                         config=dict(sorted(config.items())))


def connect_name(meta: Mapping[str, Any], spec: ConnectorSpec) -> str:
    name = spec.connect or (meta.get("labels") or {}).get(CONNECT_LABEL)
    if not name:
        raise SpecError(f"no Connect cluster: set spec.connect or the label {CONNECT_LABEL}")
    return name


def desired_config(name: str, spec: ConnectorSpec) -> dict[str, str]:
    return {**spec.config, "connector.class": spec.class_name, "tasks.max": str(spec.tasks_max), "name": name}


@dataclass(frozen=True)
class Call:
    """One REST call of a pass: method, path (under the API's root), JSON body, and why."""
    method: str
    path: str
    body: Any = None
    why: str = ""


def _path(name: str, *rest: str) -> str:
    return "/connectors/" + "/".join(urllib.parse.quote(p, safe="") for p in (name, *rest))


def plan(name: str, spec: ConnectorSpec, current: Mapping[str, str] | None, status: Mapping[str, Any] | None,
         annotations: Mapping[str, str]) -> list[Call]:
    """The calls that make the connector match: ``current`` its config (None: absent), ``status``
    what ``GET .../status`` returned (None: absent)."""
    calls = []
    wanted = desired_config(name, spec)
    if current is None or dict(current) != wanted:
        calls.append(Call("PUT", _path(name, "config"), wanted, "created" if current is None else "config updated"))
    state = ((status or {}).get("connector") or {}).get("state")
    if spec.state != "running" and state != STATES[spec.state]:   # a new connector too: it would start running
        verb = "pause" if spec.state == "paused" else "stop"
        calls.append(Call("PUT", _path(name, verb), None, spec.state))
    elif spec.state == "running" and state in ("PAUSED", "STOPPED"):
        calls.append(Call("PUT", _path(name, "resume"), None, "resumed"))
    restart = str(annotations.get(RESTART_ANNOTATION, "")).lower()
    if restart in ("true", "failed"):
        query = f"?includeTasks=true&onlyFailed={'true' if restart == 'failed' else 'false'}"
        calls.append(Call("POST", _path(name, "restart") + query, None, "restarted"))
    task = str(annotations.get(RESTART_TASK_ANNOTATION, "")).strip()
    if task.isdigit():
        calls.append(Call("POST", _path(name, "tasks", task, "restart"), None, f"task {task} restarted"))
    return calls


def verdict(spec: ConnectorSpec, status: Mapping[str, Any] | None) -> tuple[bool, str, str]:
    """(ready, reason, message): the connector in its wanted state and no task failed."""
    if not status:
        return False, "ConnectorNotFound", "the Connect cluster does not report the connector yet"
    connector = status.get("connector") or {}
    tasks = status.get("tasks") or []
    failed = [t for t in tasks if t.get("state") == "FAILED"]
    if connector.get("state") == "FAILED" or failed:
        trace = (connector.get("trace") or next((t.get("trace") for t in failed if t.get("trace")), "") or "")
        which = "the connector" if connector.get("state") == "FAILED" else \
            "tasks " + ", ".join(str(t.get("id")) for t in failed)
        return False, "ConnectorFailed", f"{which} failed: {trace.splitlines()[0] if trace else 'no trace'}"
    target = STATES[spec.state]
    if connector.get("state") != target:
        return False, "ConnectorNotInState", f"connector {connector.get('state')}, wanted {target}"
    return True, "ConnectorReady", f"{target}, {len(tasks)} tasks"


def restart_annotation(call: Call) -> str | None:
    """The annotation a call acts on (the restarts), None for the others."""
    if call.method != "POST":
        return None
    return RESTART_TASK_ANNOTATION if "/tasks/" in call.path else RESTART_ANNOTATION


# -- I/O: the REST API -------------------------------------------------------------------------

class ConnectError(Exception):
    """Kafka Connect answered with an error (``status``: HTTP; 409 and 5xx are worth retrying)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message

    @property
    def retriable(self) -> bool:
        """A rebalance (409), a worker's error (5xx), or the credentials refused (401: workers
        that have not read the REST Secret yet; a password change needs them restarted)."""
        return self.status in (401, 409) or self.status >= 500


class ConnectUnreachable(Exception):
    """No answer from the Connect REST API (workers starting, or gone)."""


class ConnectClient:
    """``credentials``: (username, password) for a REST API behind Kafka's basic authentication
    extension (an OdradekConnect's ``restApi.authentication.type: basic``)."""

    def __init__(self, base_url: str, timeout: float = TIMEOUT_S, credentials: tuple[str, str] | None = None) -> None:
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if credentials is not None:
            token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw).get("message") or raw.decode(errors="replace")
            except (ValueError, AttributeError):
                message = raw.decode(errors="replace")
            raise ConnectError(e.code, message) from None
        except (urllib.error.URLError, OSError) as e:
            raise ConnectUnreachable(f"Connect REST API {self.base_url}: {e}") from None
        return json.loads(raw) if raw else None

    def _get_or_none(self, path: str) -> Any:
        try:
            return self.call("GET", path)
        except ConnectError as e:
            if e.status == 404:
                return None
            raise

    def config(self, name: str) -> dict | None:
        return self._get_or_none(_path(name, "config"))

    def status(self, name: str) -> dict | None:
        return self._get_or_none(_path(name, "status"))

    def delete(self, name: str) -> bool:
        """False when there was no such connector."""
        try:
            self.call("DELETE", _path(name))
        except ConnectError as e:
            if e.status == 404:
                return False
            raise
        return True
