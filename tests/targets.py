"""Real HTTP(S) servers for actions to call: they record every request and answer as told."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

WAIT_S = 10.0


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    at: datetime
    client_certificate: dict[str, object] | None = None
    query: str = ""


Answer = tuple[int, bytes, dict[str, str]]
Responder = Callable[[Received], Answer]


class _Server(ThreadingHTTPServer):
    # Many jobs due at once call at once: their connections wait to be accepted rather than
    # overflow the listen queue (5 by default) and be reset.
    request_queue_size = 128


class Target:
    """A threaded HTTP server on 127.0.0.1; with `tls`, an HTTPS one."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._answers: dict[str, Responder] = {}
        self._received: list[Received] = []
        self._lock = threading.Condition()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def answer(self, path: str, status: int = 200, body: bytes = b"ok",
               headers: dict[str, str] | None = None) -> None:  # fmt: skip
        self._answers[path] = lambda _: (status, body, headers or {})

    def respond(self, path: str, responder: Responder) -> None:
        self._answers[path] = responder

    def received(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [item for item in self._received if path is None or item.path == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = WAIT_S) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(found := [r for r in self._received if r.path == path]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{path}: {len(found)} requests of {count} in {timeout} s")
                self._lock.wait(left)
            return found

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, received: Received) -> Answer:
        with self._lock:
            self._received.append(received)
            self._lock.notify_all()
        responder = self._answers.get(received.path)
        return responder(received) if responder else (404, b"no such path", {})


def _handler_for(target: Target) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body are two writes: without this, Nagle holds the body back 40 ms.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            certificate = None
            if isinstance(self.connection, ssl.SSLSocket):
                certificate = self.connection.getpeercert() or None
            headers: dict[str, str] = {}
            for name, value in self.headers.items():  # a repeated header shows all its values
                key = name.lower()
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
            received = Received(
                method=self.command,
                path=self.path.split("?")[0],
                headers=headers,
                body=body,
                at=datetime.now(UTC),
                client_certificate=certificate,
                query=self.path.partition("?")[2],
            )
            status, content, headers = target._record(received)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _any

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class HeldAnswer:
    """A responder that holds every request until the test releases it (at most `hold_s`), then
    answers `status`: a target slower than a job's interval, without sleeping in the test. It
    counts the requests it held at once."""

    def __init__(self, status: int = 200, body: bytes = b"held", hold_s: float = WAIT_S) -> None:
        self.status, self.body, self.hold_s = status, body, hold_s
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.holding = 0
        self.most_held_at_once = 0

    def __call__(self, received: Received) -> Answer:
        with self._lock:
            self.holding += 1
            self.most_held_at_once = max(self.most_held_at_once, self.holding)
        try:
            if not self._released.wait(self.hold_s):
                return 504, b"never released", {}
            return self.status, self.body, {}
        finally:
            with self._lock:
                self.holding -= 1

    def release(self) -> None:
        """Answer the held requests, and every later one at once."""
        self._released.set()

    def hold_again(self) -> None:
        self._released.clear()


def token_endpoint(tenant: str, client_id: str, secret: str, token: str) -> tuple[str, Responder]:
    """A path and responder that act as an Azure AD v1 token endpoint for one client."""

    def respond(received: Received) -> Answer:
        form = {name: values[0] for name, values in parse_qs(received.body.decode()).items()}
        if (form.get("grant_type"), form.get("client_id"), form.get("client_secret")) != (
            "client_credentials", client_id, secret,
        ):  # fmt: skip
            return 401, json.dumps({"error": "invalid_client"}).encode(), {}
        answer = {"access_token": f"{token}:{form.get('resource')}", "token_type": "Bearer",
                  "expires_in": "3599"}  # fmt: skip
        return 200, json.dumps(answer).encode(), {"Content-Type": "application/json"}

    return f"/{tenant}/oauth2/token", respond


class IdentityEndpoint:
    """The managed identity endpoint App Service and Functions provide (protocol 2019-08-01), for
    one app: it checks the secret header, the api-version, the resource and the identity, and
    issues a fresh token on every request, valid for `lifetime_s` seconds of the real clock."""

    path = "/msi/token"

    def __init__(self, secret: str, user_assigned: tuple[str, ...] = (),
                 system_assigned: bool = True, lifetime_s: int = 3600) -> None:  # fmt: skip
        self.secret, self.user_assigned = secret, user_assigned
        self.system_assigned, self.lifetime_s = system_assigned, lifetime_s
        self.issued: list[tuple[str, str, str | None]] = []  # token, resource, client id
        self._lock = threading.Lock()

    def respond(self, received: Received) -> Answer:
        asked = {name: values[0] for name, values in parse_qs(received.query).items()}
        if received.headers.get("x-identity-header") != self.secret:
            return _refusal(401, "The X-IDENTITY-HEADER header is missing or wrong.")
        if asked.get("api-version") != "2019-08-01":
            return _refusal(400, f"Unsupported api-version {asked.get('api-version')}.")
        resource, client_id = asked.get("resource"), asked.get("client_id")
        if not resource:
            return _refusal(400, "The resource parameter is required.")
        if client_id not in self.user_assigned and not (client_id is None and self.system_assigned):
            return _refusal(400, "No User Assigned or Delegated Managed Identity found for "
                                 "specified ClientId/ResourceId/PrincipalId.")  # fmt: skip
        with self._lock:
            token = f"identity-token-{len(self.issued) + 1}"
            self.issued.append((token, resource, client_id))
        answer = {"access_token": token, "expires_on": str(int(time.time()) + self.lifetime_s),
                  "resource": resource, "token_type": "Bearer", "client_id": client_id or "system"}  # fmt: skip
        return 200, json.dumps(answer).encode(), {"Content-Type": "application/json"}


def _refusal(status: int, message: str) -> Answer:
    return status, json.dumps({"statusCode": status, "message": message}).encode(), {}


class SilentPeer:
    """Accepts TCP connections and never answers: a broker that hangs."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"sb://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._held.append(connection)

    def stop(self) -> None:
        self._socket.close()
        for connection in self._held:
            connection.close()
