"""A stand-in for Kafka Connect's REST API (the routes ``connectors.ConnectClient`` calls), with
Kafka 3.9's status codes and bodies: 201 on create and 200 on update of a config, 202 for pause,
resume and restart, 204 for stop and delete, 404/400 as ``{"error_code", "message"}``; a
configuration naming an unknown class is refused (400) as Connect's validation refuses it. Tasks
follow their connector's state (none while STOPPED). ``calls`` records what was asked, in order.

The operator tests on the API server use it where no Connect worker runs (no pods); the compat
suite runs Apache Kafka's own Connect (tests/compat/test_connect.py)."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

KNOWN_CLASSES = {"org.apache.kafka.connect.file.FileStreamSourceConnector",
                 "org.apache.kafka.connect.file.FileStreamSinkConnector"}
_ROUTE = re.compile(r"^/connectors/([^/]+)(?:/(config|status|pause|resume|stop|restart|tasks/(\d+)/restart))?$")


class FakeConnect:
    """``credentials``: (user, password) the API asks for, as Kafka's basic authentication extension;
    ``restart_error``: the status restarts answer with (a worker's 500) instead of 202."""

    def __init__(self, credentials: tuple[str, str] | None = None) -> None:
        self.credentials = credentials
        self.restart_error: int | None = None
        self.connectors: dict[str, dict] = {}
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def status(self, name: str) -> dict:
        c = self.connectors[name]
        tasks = [] if c["state"] == "STOPPED" else [
            {"id": i, "state": c["state"], "worker_id": "fake:8083"} for i in range(int(c["config"]["tasks.max"]))]
        return {"name": name, "connector": {"state": c["state"], "worker_id": "fake:8083"}, "tasks": tasks,
                "type": "source"}

    def admits(self, authorization: str | None) -> bool:
        if self.credentials is None:
            return True
        return authorization == "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()

    def answer(self, method: str, path: str, body: dict | None) -> tuple[int, object]:
        match = _ROUTE.match(path)
        if match is None:
            return 404, {"error_code": 404, "message": f"HTTP 404 Not Found: {path}"}
        name, action = unquote(match.group(1)), match.group(2)
        self.calls.append((method, urlsplit(path).path if action is None else f"{action}"))
        if method == "PUT" and action == "config":
            if body.get("connector.class") not in KNOWN_CLASSES:
                return 400, {"error_code": 400, "message": "Connector configuration is invalid and contains the "
                             f"following 1 error(s):\nInvalid value {body.get('connector.class')} for configuration "
                             "connector.class: Class could not be found."}
            created = name not in self.connectors
            self.connectors.setdefault(name, {"state": "RUNNING"})["config"] = dict(body)
            return (201 if created else 200), {"name": name, "config": body, "tasks": [], "type": "source"}
        if name not in self.connectors:
            return 404, {"error_code": 404, "message": f"Connector {name} not found"}
        c = self.connectors[name]
        if method == "GET":
            return 200, c["config"] if action == "config" else self.status(name)
        if method == "DELETE" and action is None:
            del self.connectors[name]
            return 204, None
        states = {"pause": ("PAUSED", 202), "resume": ("RUNNING", 202), "stop": ("STOPPED", 204)}
        if method == "PUT" and action in states:
            c["state"], code = states[action]
            return code, None
        if method == "POST" and action.endswith("restart"):
            if self.restart_error is not None:
                return self.restart_error, {"error_code": self.restart_error, "message": "restart failed"}
            return 202, None
        return 405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.lock:
                    code, answer = fake.answer(self.command, urlsplit(self.path).path, body) if fake.admits(
                        self.headers.get("Authorization")) else (401, {"error_code": 401, "message": "Unauthorized"})
                data = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _serve

            def log_message(self, *args) -> None:
                pass

        return Handler
