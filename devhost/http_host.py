"""HTTP triggers served the way the Functions host serves them.

Routes come from the app's own declarations (`app.get_functions()`, which may be called only
once per app), under host.json's
`extensions.http.routePrefix`; literal segments match in any case, as ASP.NET routing does,
against the path decoded once (an encoded "/" stays inside its segment).
Functions with authLevel function or admin need a key, sent as the `x-functions-key` header or
the `code` query parameter; a missing or wrong key is a 401 with no body.

What the host answers itself has an empty body, as the Functions host's answers do. It checks a
request before it reads the body: a malformed `Content-Length` or `Transfer-Encoding` (400), a
transfer coding other than chunked (501), a path no function serves (404), a missing or wrong
key (401), a body over `LARGEST_BODY` (413); each of these answers closes the connection when
the request announced a body, since that body is left unread. Chunked bodies are read, as the
Functions host reads them. A client that keeps the host waiting on its connection longer than
the server's `request_timeout` (idle between requests, or within a request line or header)
loses the connection; a body must arrive in full within `request_timeout`, or it is a 408.

Every answer carries `x-devhost-worker`, the process id of the worker process that gave it (the
Functions host sends no such header): with FUNCTIONS_WORKER_PROCESS_COUNT above 1 it shows
which of the workers answered.
"""

from __future__ import annotations

import hmac
import io
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import azure.functions as func

from devhost.identity import LocalSignIn
from devhost.invocation import invoke
from shared.logs import app_logger

log = app_logger("devhost")

LARGEST_BODY = 4 * 1024 * 1024
REQUEST_TIMEOUT_S = 30.0
WORKER_HEADER = "x-devhost-worker"  # the process id of the worker process that answered
_PARAMETER = re.compile(r"^\{(\*?)([A-Za-z_][A-Za-z0-9_]*)\}$")
# The one constrained parameter supported: an optional one that must be empty, which is how a
# Functions route matches the host's root (`{ignored:maxlength(0)?}`).
_EMPTY_PARAMETER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*):maxlength\(0\)\?\}$")
_ENCODED_SLASH = re.compile("%2F", re.IGNORECASE)
_CONTENT_LENGTH = re.compile(r"[0-9]{1,18}")  # beyond: answered 400, as Kestrel does
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,8}")  # larger chunks would be over LARGEST_BODY anyway
_CHUNKED = -1  # the length of a body sent in chunks, whose length is known only once read
_LONGEST_CHUNK_LINE = 4096  # a chunk's size line or a trailer line, extensions included
_MOST_TRAILER_LINES = 100


@dataclass(frozen=True)
class HttpFunction:
    name: str
    methods: frozenset[str]  # empty: any method
    needs_key: bool
    route: re.Pattern[str]
    literal_segments: int  # for precedence: the more literal, the more specific
    argument: str  # the name the function takes its request under
    call: Callable[..., Any]


def http_functions(functions: list[Any], route_prefix: str) -> list[HttpFunction]:
    """The HTTP-triggered ones of `app.get_functions()`, most specific route first."""
    found = []
    for function in functions:
        trigger = function.get_trigger().get_dict_repr()
        if trigger["type"] != "httpTrigger":
            continue
        route = trigger.get("route") or function.get_function_name()
        template = "/".join(part for part in (route_prefix.strip("/"), route.strip("/")) if part)
        pattern, literals = compile_route(template)
        auth_level = str(getattr(trigger.get("authLevel"), "value", trigger.get("authLevel")))
        found.append(
            HttpFunction(
                name=function.get_function_name(),
                methods=frozenset(
                    str(getattr(m, "value", m)).upper() for m in trigger.get("methods") or ()
                ),
                needs_key=auth_level.lower() != "anonymous",
                route=pattern,
                literal_segments=literals,
                argument=trigger["name"],
                call=function.get_user_function(),
            )
        )
    return sorted(found, key=lambda function: -function.literal_segments)


def compile_route(template: str) -> tuple[re.Pattern[str], int]:
    """A route template (`a/{id}/b`, `files/{*rest}`) as a regex, and its literal segment count."""
    parts, literals = [], 0
    for segment in template.split("/"):
        parameter = _PARAMETER.match(segment)
        empty = _EMPTY_PARAMETER.match(segment)
        if empty:
            parts.append(f"(?P<{empty.group(1)}>)")
        elif parameter:
            catch_all, name = parameter.groups()
            parts.append(f"(?P<{name}>.*)" if catch_all else f"(?P<{name}>[^/]+)")
        elif "{" in segment or "}" in segment:
            raise ValueError(f"route segment '{segment}' is beyond what devhost supports")
        else:
            parts.append(re.escape(segment))
            literals += 1
    return re.compile("/".join(parts), re.IGNORECASE), literals


def _decoded(path: str) -> str:
    """The path as routes see it: decoded once, as Kestrel does (so an old client's `%7E` or an
    encoded letter in a literal still matches), except that an encoded "/" stays `%2F` inside
    its segment. A "%" that decoding produced is written `%25` again, so that unquoting a route
    parameter afterwards decodes each character exactly once."""
    pieces = _ENCODED_SLASH.split(path)
    return "%2F".join(unquote(piece).replace("%", "%25") for piece in pieces)


class FunctionsHttpServer(ThreadingHTTPServer):
    """The host's HTTP server: `request_timeout` is how long it waits for a client, at most."""

    daemon_threads = True
    # The listen backlog (the OS caps it at net.core.somaxconn): socketserver's 5 reset
    # connections that came in a burst; Kestrel's default is 512.
    request_queue_size = 512

    def __init__(
        self,
        address: tuple[str, int],
        functions: list[HttpFunction],
        keys: list[str],
        *,
        request_timeout: float = REQUEST_TIMEOUT_S,
        listener: socket.socket | None = None,
        sign_in: LocalSignIn | None = None,
    ) -> None:
        if listener is None:
            super().__init__(address, _Handler)
        else:
            # A socket already listening, shared with the other worker processes: whichever
            # process is free first accepts the next connection.
            super().__init__(address, _Handler, bind_and_activate=False)
            self.socket.close()
            self.socket = listener
            self.server_address = listener.getsockname()
        self.functions = functions
        self.keys = [key.encode() for key in keys if key]
        self.request_timeout = request_timeout
        # The platform's authentication, played locally (devhost.identity); None: off.
        self.sign_in = sign_in

    def key_is_valid(self, key: str | None) -> bool:
        # Compared as bytes: compare_digest refuses str with characters beyond ASCII, and a
        # header is whatever bytes the client sent, read as latin-1.
        if key is None:
            return False
        given = key.encode("utf-8", "surrogateescape")
        return any(hmac.compare_digest(given, known) for known in self.keys)


class _Refusal(Exception):
    """A request the host answers itself with `status` and an empty body, before or while
    reading its body."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    server: FunctionsHttpServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Every read and write on the connection waits at most this long, so that a client
        # that stalls frees its thread.
        self.connection.settimeout(self.server.request_timeout)
        # Headers and body leave in two writes: without this, Nagle's algorithm holds the body
        # until the client's delayed ACK, about 40 ms on every response of a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        assert isinstance(self.rfile, io.BufferedReader)  # socketserver's rbufsize -1: buffered
        self._incoming = self.rfile  # typed as what it is: one that can peek

    def __getattr__(self, name: str) -> Any:
        # Every method goes to routing, as in the Functions host: one no route takes is a 404,
        # never the 501 that http.server gives methods it has no do_<METHOD> for.
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        # Without the query string: `?code=` carries the function key.
        log.debug("%s %s", self.address_string(), (format % args).split("?", 1)[0])

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What http.server answers itself (a malformed request line, headers too large): with
        an empty body, as every answer of the host's own, not http.server's HTML page."""
        self.log_error("code %d, message %s", code, message)
        # A request line too malformed to name its version leaves http.server assuming
        # HTTP/0.9, which would get neither a status line nor headers.
        self.request_version = self.protocol_version
        self.send_response(code)
        self.send_header(WORKER_HEADER, str(os.getpid()))
        self.send_header("Connection", "close")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def handle_expect_100(self) -> bool:
        # `Expect: 100-continue` is answered once the route and key are known to be good (in
        # `_read_body`), so that a refused client never sends its body.
        return True

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        path = _decoded(url.path.strip("/"))
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        try:
            length = self._announced_length()
        except _Refusal as refusal:
            self._reply(refusal.status, b"", {"Connection": "close"})
            return
        unread = {"Connection": "close"} if length else {}

        match = None
        for function in self.server.functions:
            match = function.route.fullmatch(path)
            if match and (not function.methods or self.command in function.methods):
                break
        else:
            self._reply(404, b"", unread)
            return
        if function.needs_key and not self.server.key_is_valid(
            self.headers.get("x-functions-key") or query.get("code")
        ):
            self._reply(401, b"", unread)
            return
        try:
            body = self._read_body(length)
        except _Refusal as refusal:
            self._reply(refusal.status, b"", {"Connection": "close"})
            return
        except TimeoutError:
            self.connection.settimeout(self.server.request_timeout)
            self._reply(408, b"", {"Connection": "close"})
            return
        except ConnectionError:  # the client left mid-body: there is no one to answer
            self.close_connection = True
            return
        self.connection.settimeout(self.server.request_timeout)

        headers = dict(self.headers.items())
        if self.server.sign_in is not None:
            headers = self.server.sign_in.platform_headers(headers)
        # As the platform's front end does: the address the request came from.
        headers = {name: value for name, value in headers.items()
                   if name.lower() != "x-forwarded-for"}  # fmt: skip
        headers["X-Forwarded-For"] = self.client_address[0]
        request = func.HttpRequest(
            method=self.command,
            url=f"http://{self.headers.get('Host', 'localhost')}{self.path}",
            headers=headers,
            params=query,
            route_params={name: unquote(value) for name, value in match.groupdict().items()},
            body=body,
        )
        try:
            response = invoke(function.call, **{function.argument: request})
        except Exception:
            # The Functions host answers an unhandled exception with a bare 500.
            log.exception("function %s failed", function.name)
            self._reply(500, b"", {})
            return
        headers = dict(response.headers)
        if response.mimetype and "content-type" not in {name.lower() for name in headers}:
            # As the Python worker's converter writes it: a charset for text/* types only.
            text = response.mimetype.startswith("text/")
            headers["Content-Type"] = (
                f"{response.mimetype}; charset={response.charset}" if text else response.mimetype
            )
        self._reply(response.status_code, response.get_body() or b"", headers)

    def _announced_length(self) -> int:
        """The body's length as the headers announce it (0 without a body, `_CHUNKED` for a
        chunked one), or _Refusal if they announce it ambiguously or in a way not supported."""
        lengths = self.headers.get_all("Content-Length") or []
        codings = self.headers.get_all("Transfer-Encoding") or []
        if codings:
            if lengths:  # RFC 9112 6.3: a sign of request smuggling; refused, never guessed at
                raise _Refusal(400)
            if [coding.strip().lower() for coding in ",".join(codings).split(",")] != ["chunked"]:
                raise _Refusal(501)  # gzip, deflate, ...: RFC 9112 6.1 answers 501
            return _CHUNKED
        if not lengths:
            return 0
        length = lengths[0].strip(" \t")
        if len(lengths) > 1 or not _CONTENT_LENGTH.fullmatch(length):
            raise _Refusal(400)
        return int(length)

    def _read_body(self, length: int) -> bytes:
        """The body, all of it received within the server's `request_timeout`; TimeoutError if
        not, _Refusal if it is larger than LARGEST_BODY or its chunks are malformed."""
        if length > LARGEST_BODY:
            raise _Refusal(413)
        if not length:
            return b""
        if self.headers.get("Expect", "").lower() == "100-continue" and (
            self.request_version >= "HTTP/1.1"
        ):
            self.send_response_only(100)
            self.end_headers()
        deadline = time.monotonic() + self.server.request_timeout
        if length != _CHUNKED:
            return self._read_exactly(length, deadline)
        body = bytearray()
        while True:
            size = self._read_line(deadline).split(b";", 1)[0].strip(b" \t\r\n")
            if not _CHUNK_SIZE.fullmatch(size):
                raise _Refusal(400)
            if not int(size, 16):
                break
            if len(body) + int(size, 16) > LARGEST_BODY:
                raise _Refusal(413)
            body += self._read_exactly(int(size, 16), deadline)
            if self._read_exactly(2, deadline) != b"\r\n":
                raise _Refusal(400)
        for _ in range(_MOST_TRAILER_LINES):  # trailers: read, and not passed on to functions
            if self._read_line(deadline) in (b"\r\n", b"\n"):
                return bytes(body)
        raise _Refusal(400)

    def _read_exactly(self, length: int, deadline: float) -> bytes:
        received = bytearray()
        while len(received) < length:
            waiting = self._received(deadline)
            received += self._incoming.read(min(len(waiting), length - len(received)))
        return bytes(received)

    def _read_line(self, deadline: float) -> bytes:
        line = bytearray()
        while not line.endswith(b"\n"):
            if len(line) > _LONGEST_CHUNK_LINE:
                raise _Refusal(400)
            waiting = self._received(deadline)
            end = waiting.find(b"\n")
            line += self._incoming.read(end + 1 if end >= 0 else len(waiting))
        return bytes(line)

    def _received(self, deadline: float) -> bytes:
        """Bytes that have arrived, without consuming them; at least one, or TimeoutError after
        the deadline (each wait on the socket is given only what is left of it)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's body took too long")
        self.connection.settimeout(left)
        waiting = self._incoming.peek(1)
        if not waiting:
            raise ConnectionResetError("the client closed the connection mid-body")
        return bytes(waiting)

    def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        # Not the Functions host's: which worker process answered, for tests and curious users.
        self.send_header(WORKER_HEADER, str(os.getpid()))
        for name, value in headers.items():
            if name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
