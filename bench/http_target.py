"""The server and request handler bases of the benchmarks' HTTP targets."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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


class TargetServer(ThreadingHTTPServer):
    """A threaded server whose listen queue holds a burst of new connections.

    socketserver listens with a backlog of 5. Linux drops the handshakes that do not fit, and
    the client tries again after a second. When the executor opened connections in bursts, the
    pipeline benchmark saw calls fail with "Connection reset by peer" about a second after they
    began, and counted the target's lapse as the scheduler's. Real servers listen with hundreds
    (nginx: 511).
    """

    daemon_threads = True
    request_queue_size = 1024
