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


Answer = tuple[int, bytes, dict[str, str]]
Responder = Callable[[Received], Answer]


class Target:
    """A threaded HTTP server on 127.0.0.1; with `tls`, an HTTPS one."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._answers: dict[str, Responder] = {}
        self._received: list[Received] = []
        self._lock = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
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
