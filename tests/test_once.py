"""`shared.once.Once`: built on the first call, once, whichever threads call; a build that fails
is tried again on the next call (storage unreachable at the first write must not stay so)."""

from __future__ import annotations

import threading

import pytest

from shared.once import Once


def test_threads_asking_at_once_get_one_value_built_once() -> None:
    builds: list[object] = []
    release = threading.Event()

    def build() -> object:
        release.wait(timeout=5)  # every thread asks before the first build ends
        builds.append(object())
        return builds[-1]

    once = Once(build)
    assert once.built is None
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(once())) for _ in range(8)]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(timeout=10)
    assert len(builds) == 1
    assert got == builds * 8
    assert once.built is builds[0]


def test_a_build_that_fails_is_tried_again_on_the_next_call() -> None:
    tries: list[int] = []

    def build() -> str:
        tries.append(len(tries))
        if len(tries) == 1:
            raise ConnectionError("storage unreachable")
        return "built"

    once = Once(build)
    with pytest.raises(ConnectionError):
        once()
    assert once.built is None
    assert once() == "built"
    assert once() == "built"
    assert tries == [0, 1]
