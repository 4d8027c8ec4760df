"""A bounded set of open clients, shared by threads: one per key, the least recently used closed
when there are too many (each holds connections, and jobs can name any number of keys)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar


class Closable(Protocol):
    def close(self) -> None: ...


Client = TypeVar("Client", bound=Closable)


class ClientPool(Generic[Client]):
    def __init__(self, most: int) -> None:
        self._most = most
        self._clients: collections.OrderedDict[Hashable, Client] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, open_client: Callable[[], Client]) -> Client:
        """The client kept for `key`, opened (outside the lock: it may be slow) if there is none.
        Of two threads that open one for the same key at once, the first to finish has its
        client kept; the other closes its own, which nobody has used yet, and takes that one."""
        with self._lock:
            kept = self._clients.get(key)
            if kept is not None:
                self._clients.move_to_end(key)
                return kept
        opened = open_client()
        evicted = None
        with self._lock:
            kept = self._clients.get(key)
            if kept is None:
                self._clients[key] = opened
                if len(self) > self._most:
                    evicted = self._clients.popitem(last=False)[1]
        if kept is not None:
            opened.close()
            return kept
        if evicted is not None:
            evicted.close()
        return opened

    def pop(self, key: Hashable) -> Client | None:
        """Take the client kept for `key` out of the pool (the caller closes it)."""
        with self._lock:
            return self._clients.pop(key, None)

    def take_all(self) -> list[Client]:
        """Empty the pool; its clients are the caller's to close."""
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        return clients

    def __len__(self) -> int:
        return len(self._clients)
