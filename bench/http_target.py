"""The request handler base of the benchmarks' HTTP targets."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no log lines, and replies that are not held back.

    A reply goes out as two writes, headers then body. With Nagle's algorithm on, the body waits
    for the client's delayed ACK of the headers, about 40 ms: a benchmark would time that.
    """

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass
