"""A fault-injecting HTTP proxy between the app and Azurite, for the answers Azure Storage gives
and Azurite never does: `ServerBusy` (503) without forwarding, `OperationTimedOut` (500) after
forwarding (the write applied, its answer lost), a connection dropped after forwarding, and
answers delayed by seconds. Each fault at a rate of its own, drawn from a seeded random so that
a run can be repeated; or forced for the next requests that match (`fail_next`).

It listens on one port per Azurite service it stands before (`connection_string` names them),
in threads of the test's own process (no process of its own). Every request it saw, and what it
did to it, is kept in `seen`.
"""

from __future__ import annotations

import http.client
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

from devhost import azurite

Fault = Literal["busy", "timed_out", "dropped", "delayed"]
FAULTS: tuple[Fault, ...] = ("busy", "timed_out", "dropped", "delayed")
UPSTREAM_TIMEOUT_S = 30.0
# Hop-by-hop headers a proxy must not pass on (RFC 9110).
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-authorization", "te"}


@dataclass
class Rates:
    """The share of requests (0 to 1) given each fault; `delay_s`: how long a delayed one waits."""

    busy: float = 0.0
    timed_out: float = 0.0
    dropped: float = 0.0
    delayed: float = 0.0
    delay_s: float = 2.0
    retry_after_s: int | None = 1  # the Retry-After of a busy answer (None: none sent)

    def of(self, fault: Fault) -> float:
        rate: float = getattr(self, fault)
        return rate


@dataclass(frozen=True)
class Seen:
    service: str  # "table" or "queue"
    method: str
    path: str
    fault: Fault | None


Matcher = Callable[[str, str, bytes], bool]  # method, path, body


@dataclass
class FaultProxy:
    """Stands before Azurite's table and queue ports; `rates` may be changed while it runs."""

    upstream: dict[str, int]  # service -> Azurite's port
    untouched: str = ""  # endpoints of the connection string reached directly (the blob's)
    rates: Rates = field(default_factory=Rates)
    seed: int = 43
    seen: list[Seen] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    _forced: list[tuple[Fault, Matcher]] = field(default_factory=list)
    _servers: list[ThreadingHTTPServer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def start(self) -> FaultProxy:
        for service, port in self.upstream.items():
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, service, port))
            server.daemon_threads = True
            self.ports[service] = server.server_address[1]
            self._servers.append(server)
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def connection_string(self) -> str:
        """Azurite's account, reached through the proxy."""
        endpoints = "".join(
            f"{service.capitalize()}Endpoint=http://127.0.0.1:{port}/{azurite.ACCOUNT};"
            for service, port in self.ports.items()
        )
        return (
            f"DefaultEndpointsProtocol=http;AccountName={azurite.ACCOUNT};"
            f"AccountKey={azurite.ACCOUNT_KEY};{endpoints}{self.untouched}"
        )

    def fail_next(self, fault: Fault, matching: Matcher = lambda *_: True, times: int = 1) -> None:
        """Give `fault` to the next `times` requests that match, whatever the rates."""
        with self._lock:
            self._forced.extend([(fault, matching)] * times)

    @contextmanager
    def faults(self, rates: Rates) -> Iterator[None]:
        """Faults at these rates inside the block, none after it."""
        self.rates = rates
        try:
            yield
        finally:
            self.rates = Rates()

    def count(self, fault: Fault | None = None) -> int:
        return sum(1 for each in self.seen if each.fault == fault)

    def _choose(self, method: str, path: str, body: bytes) -> Fault | None:
        with self._lock:
            for index, (fault, matching) in enumerate(self._forced):
                if matching(method, path, body):
                    del self._forced[index]
                    return fault
            draw = self._random.random()
            for fault in FAULTS:
                rate = self.rates.of(fault)
                if draw < rate:
                    return fault
                draw -= rate
            return None


def _handler(proxy: FaultProxy, service: str, upstream_port: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            fault = proxy._choose(self.command, self.path, body)
            with proxy._lock:
                proxy.seen.append(Seen(service, self.command, self.path, fault))
            if fault == "busy":
                self._answer_error(503, "ServerBusy", "The server is busy.", proxy.rates)
                return
            if fault == "delayed":
                time.sleep(proxy.rates.delay_s)
            status, headers, answer = self._forward(body)
            if fault == "timed_out":
                self._answer_error(500, "OperationTimedOut", "Operation could not be completed "
                                   "within the specified time.", None)  # fmt: skip
                return
            if fault == "dropped":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            connection = http.client.HTTPConnection(
                "127.0.0.1", upstream_port, timeout=UPSTREAM_TIMEOUT_S
            )
            try:
                headers = {
                    name: value
                    for name, value in self.headers.items()
                    if name.lower() not in _HOP_BY_HOP
                }
                connection.request(self.command, self.path, body=body or None, headers=headers)
                answer = connection.getresponse()
                return answer.status, answer.getheaders(), answer.read()
            finally:
                connection.close()

        def _answer_error(self, status: int, code: str, message: str, rates: Rates | None) -> None:
            if service == "table":
                text = (
                    f'{{"odata.error":{{"code":"{code}","message":'
                    f'{{"lang":"en-US","value":"{message}"}}}}}}'
                )
                kind = "application/json;odata=minimalmetadata"
            else:
                text = (
                    f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
                    f"<Message>{message}</Message></Error>"
                )
                kind = "application/xml"
            data = text.encode()
            self.send_response(status)
            self.send_header("x-ms-error-code", code)
            self.send_header("Content-Type", kind)
            if rates is not None and rates.retry_after_s is not None:
                self.send_header("Retry-After", str(rates.retry_after_s))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_MERGE = do_HEAD = _relay

    return Handler


def before(emulator_connection: str, rates: Rates | None = None, seed: int = 43) -> FaultProxy:
    """A started proxy before the Azurite of this connection string (its table and queue)."""
    parts = dict(part.split("=", 1) for part in emulator_connection.split(";") if "=" in part)
    ports = {
        service: int(parts[f"{service.capitalize()}Endpoint"].split(":")[2].split("/")[0])
        for service in ("table", "queue")
    }
    untouched = f"BlobEndpoint={parts['BlobEndpoint']};" if "BlobEndpoint" in parts else ""
    return FaultProxy(ports, untouched, rates or Rates(), seed).start()
