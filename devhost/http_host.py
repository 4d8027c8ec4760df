"""HTTP triggers served the way the Functions host serves them.

Routes come from the app's own declarations (`app.get_functions()`, which may be called only
once per app), under host.json's
`extensions.http.routePrefix`; literal segments match in any case, as ASP.NET routing does.
Functions with authLevel function or admin need a key, sent as the `x-functions-key` header or
the `code` query parameter; a missing or wrong key is a 401 with no body.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import azure.functions as func

log = logging.getLogger("devhost")

LARGEST_BODY = 4 * 1024 * 1024
_PARAMETER = re.compile(r"^\{(\*?)([A-Za-z_][A-Za-z0-9_]*)\}$")


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
        if parameter:
            catch_all, name = parameter.groups()
            parts.append(f"(?P<{name}>.*)" if catch_all else f"(?P<{name}>[^/]+)")
        elif "{" in segment or "}" in segment:
            raise ValueError(f"route segment '{segment}' is beyond what devhost supports")
        else:
            parts.append(re.escape(segment))
            literals += 1
    return re.compile("/".join(parts), re.IGNORECASE), literals


class FunctionsHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], functions: list[HttpFunction], keys: list[str]):
        super().__init__(address, _Handler)
        self.functions = functions
        self.keys = [key for key in keys if key]

    def key_is_valid(self, key: str | None) -> bool:
        return key is not None and any(hmac.compare_digest(key, known) for known in self.keys)


class _Handler(BaseHTTPRequestHandler):
    server: FunctionsHttpServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes: without this, Nagle's algorithm holds the body
        # until the client's delayed ACK, about 40 ms on every response of a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __getattr__(self, name: str) -> Any:
        # Every method goes to routing, as in the Functions host: one no route takes is a 404,
        # never the 501 that http.server gives methods it has no do_<METHOD> for.
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        # Without the query string: `?code=` carries the function key.
        log.debug("%s %s", self.address_string(), (format % args).split("?", 1)[0])

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        path = url.path.strip("/")  # matched raw: an encoded "/" in a name stays inside its segment
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        if length > LARGEST_BODY:
            self._reply(413, b"", {})
            self.close_connection = True
            return
        body = self.rfile.read(length) if length else b""

        match = None
        for function in self.server.functions:
            match = function.route.fullmatch(path)
            if match and (not function.methods or self.command in function.methods):
                break
        else:
            self._reply(404, b"", {})
            return
        if function.needs_key and not self.server.key_is_valid(
            self.headers.get("x-functions-key") or query.get("code")
        ):
            self._reply(401, b"", {})
            return

        request = func.HttpRequest(
            method=self.command,
            url=f"http://{self.headers.get('Host', 'localhost')}{self.path}",
            headers=dict(self.headers.items()),
            params=query,
            route_params={name: unquote(value) for name, value in match.groupdict().items()},
            body=body,
        )
        try:
            response = function.call(**{function.argument: request})
            if inspect.iscoroutine(response):  # what `async def` returns, all asyncio.run takes
                response = asyncio.run(response)
        except Exception:
            # The Functions host answers an unhandled exception with a bare 500.
            log.exception("function %s failed", function.name)
            self._reply(500, b"", {})
            return
        headers = dict(response.headers)
        if response.mimetype and "content-type" not in {name.lower() for name in headers}:
            headers["Content-Type"] = f"{response.mimetype}; charset={response.charset}"
        self._reply(response.status_code, response.get_body() or b"", headers)

    def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
