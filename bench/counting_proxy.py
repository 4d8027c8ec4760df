"""A loopback proxy in front of Azurite that counts the HTTP requests passing through it.

The local host under measurement is pointed at the proxy's ports instead of Azurite's, so every
storage request it sends (the app's, the queue trigger's polling, retries) is counted from the
outside, whatever the code under measurement is: an A/B run counts an older commit the same way.
Bytes are forwarded unchanged; only the client's side is read, to find where each request ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable


class RequestFraming:
    """Counts the complete HTTP/1.1 requests in a client's byte stream, fed in any pieces.

    A request is its head (up to the blank line) and a body of `Content-Length` bytes, or a
    chunked body (`Transfer-Encoding: chunked`) up to its last, empty, chunk.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._body_left = 0  # bytes of a Content-Length body still to come
        self._chunked = False  # inside a chunked body
        self.requests = 0

    def feed(self, data: bytes) -> int:
        """Take the next bytes of the stream; how many requests they completed."""
        before = self.requests
        self._buffer += data
        while self._step():
            pass
        return self.requests - before

    def _step(self) -> bool:
        """Consume one piece of the buffer (a body, a chunk or a head); False when it needs
        more bytes."""
        if self._body_left:
            taken = min(self._body_left, len(self._buffer))
            self._buffer, self._body_left = self._buffer[taken:], self._body_left - taken
            if self._body_left:
                return False
            self.requests += 1
            return True
        if self._chunked:
            return self._chunk()
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        head, self._buffer = self._buffer[:end].decode("latin-1"), self._buffer[end + 4 :]
        fields = _header_fields(head.split("\r\n")[1:])
        if "chunked" in fields.get("transfer-encoding", "").lower():
            self._chunked = True
        elif int(fields.get("content-length", "0") or 0) > 0:
            self._body_left = int(fields["content-length"])
        else:
            self.requests += 1
        return True

    def _chunk(self) -> bool:
        line_end = self._buffer.find(b"\r\n")
        if line_end < 0:
            return False
        size = int(self._buffer[:line_end].split(b";", 1)[0], 16)
        if size == 0:  # the last chunk, then (no trailers are sent here) the blank line
            if len(self._buffer) < line_end + 4:
                return False
            self._buffer, self._chunked = self._buffer[line_end + 4 :], False
            self.requests += 1
            return True
        if len(self._buffer) < line_end + 2 + size + 2:
            return False
        self._buffer = self._buffer[line_end + 2 + size + 2 :]
        return True


def _header_fields(lines: Iterable[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    return found


class CountingProxy:
    """Listens on a free loopback port for each upstream port, forwards to it, and counts the
    requests sent to each (`counts`, by upstream port). Runs its own event loop in a thread."""

    def __init__(self, upstream_ports: Iterable[int]) -> None:
        self.counts: dict[int, int] = dict.fromkeys(upstream_ports, 0)
        self.ports: dict[int, int] = {}  # upstream port -> the proxy's port for it
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="counting-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the counting proxy did not start")

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        servers = [self._loop.run_until_complete(self._listen(port)) for port in self.counts]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            for server in servers:
                server.close()
            pending = asyncio.all_tasks(self._loop)  # connections still open
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    async def _listen(self, upstream: int) -> asyncio.Server:
        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._forward_connection(upstream, reader, writer)

        server = await asyncio.start_server(connected, "127.0.0.1", 0)
        self.ports[upstream] = server.sockets[0].getsockname()[1]
        return server

    async def _forward_connection(
        self, upstream: int, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        try:
            server_in, server_out = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_out.close()
            return
        framing = RequestFraming()

        def count(data: bytes) -> None:
            self.counts[upstream] += framing.feed(data)

        await asyncio.gather(
            _pipe(client_in, server_out, count), _pipe(server_in, client_out, None)
        )

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


async def _pipe(
    source: asyncio.StreamReader,
    sink: asyncio.StreamWriter,
    seen: Callable[[bytes], None] | None,
) -> None:
    """Copy `source` to `sink` until either side closes; `seen(data)` for every piece."""
    try:
        while data := await source.read(65536):
            if seen is not None:
                seen(data)
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        sink.close()
