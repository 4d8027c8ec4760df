"""The pool of open action clients: one per key, bounded, and none left open unseen."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from shared.actions.clients import ClientPool

WAIT_S = 5.0


class Client:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


def test_a_key_keeps_its_client_and_the_least_recently_used_is_closed_beyond_the_bound() -> None:
    pool: ClientPool[Client] = ClientPool(2)
    a, b, c = Client("a"), Client("b"), Client("c")
    assert pool.get("a", lambda: a) is a
    assert pool.get("b", lambda: b) is b
    assert pool.get("a", lambda: Client("another a")) is a  # a is now the most recently used
    assert pool.get("c", lambda: c) is c
    assert (a.closed, b.closed, c.closed) == (False, True, False)
    assert len(pool) == 2
    assert sorted(client.name for client in pool.take_all()) == ["a", "c"]
    assert len(pool) == 0


def test_two_threads_opening_a_client_for_one_key_at_once_share_one_and_close_the_other() -> None:
    pool: ClientPool[Client] = ClientPool(4)
    both_opening = threading.Barrier(2, timeout=WAIT_S)
    opened: list[Client] = []

    def open_client() -> Client:
        client = Client(f"opened by {threading.current_thread().name}")
        opened.append(client)
        both_opening.wait()  # neither has stored its client yet
        return client

    with ThreadPoolExecutor(2) as threads:
        got = list(threads.map(lambda _: pool.get("key", open_client), range(2)))
    assert len(opened) == 2
    assert got[0] is got[1]
    [kept] = [client for client in opened if client is got[0]]
    [spare] = [client for client in opened if client is not kept]
    assert (kept.closed, spare.closed) == (False, True)
    assert pool.take_all() == [kept]
