"""The local host calls functions as the Python worker does: plain ones at most
PYTHON_THREADPOOL_THREAD_COUNT at once, `async def` ones on one event loop without a slot."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from devhost.invocation import Invocations, sync_thread_count

WAIT_S = 10.0


def test_no_more_plain_functions_run_at_once_than_the_worker_has_threads() -> None:
    invocations = Invocations(sync_threads=2)
    running, most, lock = 0, 0, threading.Lock()
    entered, release = threading.Semaphore(0), threading.Event()

    def function(number: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        entered.release()
        release.wait(WAIT_S)
        with lock:
            running -= 1
        return number

    results: list[int] = []
    callers = [
        threading.Thread(target=lambda n=n: results.append(invocations(function, number=n)))
        for n in range(6)
    ]
    for caller in callers:
        caller.start()
    assert entered.acquire(timeout=WAIT_S) and entered.acquire(timeout=WAIT_S)
    assert not entered.acquire(timeout=0.3)  # the other four wait for a slot
    release.set()
    for caller in callers:
        caller.join(WAIT_S)
    assert sorted(results) == list(range(6))
    assert most == 2


def test_an_async_function_needs_no_slot() -> None:
    invocations = Invocations(sync_threads=1)
    holding, release = threading.Event(), threading.Event()

    def plain() -> None:
        holding.set()
        release.wait(WAIT_S)

    async def asynchronous(value: str) -> str:
        return value.upper()

    holder = threading.Thread(target=invocations, args=(plain,))
    holder.start()
    assert holding.wait(WAIT_S)
    try:
        started = time.monotonic()
        assert invocations(asynchronous, value="ran") == "RAN"  # while the one slot is taken
        assert time.monotonic() - started < WAIT_S
    finally:
        release.set()
        holder.join(WAIT_S)


def test_a_plain_function_that_hands_on_a_coroutine_has_it_run() -> None:
    async def later(value: int) -> int:
        return value

    def hands_on(value: int) -> Any:  # as a wrapper of an async function would
        return later(value)

    assert Invocations(sync_threads=1)(hands_on, value=7) == 7


def test_the_thread_count_is_the_workers_default_or_the_setting() -> None:
    assert sync_thread_count({}) == min(32, (os.cpu_count() or 1) + 4)
    assert sync_thread_count({"PYTHON_THREADPOOL_THREAD_COUNT": " 8 "}) == 8
    assert sync_thread_count({"PYTHON_THREADPOOL_THREAD_COUNT": "32"}) == 32


def test_a_thread_count_above_32_is_taken_as_the_worker_takes_it() -> None:
    assert sync_thread_count({"PYTHON_THREADPOOL_THREAD_COUNT": "33"}) == 33
    assert sync_thread_count({"PYTHON_THREADPOOL_THREAD_COUNT": "200"}) == 200


@pytest.mark.parametrize("value", ["0", "-1", "four", "2.5", ""])
def test_an_invalid_thread_count_is_logged_and_the_default_used(value: str, caplog: pytest.LogCaptureFixture) -> None:
    assert sync_thread_count({"PYTHON_THREADPOOL_THREAD_COUNT": value}) == min(32, (os.cpu_count() or 1) + 4)
    assert "PYTHON_THREADPOOL_THREAD_COUNT must be" in caplog.text


@pytest.mark.parametrize("value", [None, "1", " 8 ", "33", "200", "0", "-1", "four", "2.5", ""])
def test_the_thread_count_is_read_as_the_runtime_library_reads_it(value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Conformance: where azure-functions-runtime is installed (Python 3.13+), its own reading of
    the setting gives the same pool size (None is its ThreadPoolExecutor's default)."""
    threadpool = pytest.importorskip("azure_functions_runtime.utils.threadpool")
    if value is None:
        monkeypatch.delenv("PYTHON_THREADPOOL_THREAD_COUNT", raising=False)
    else:
        monkeypatch.setenv("PYTHON_THREADPOOL_THREAD_COUNT", value)
    theirs = threadpool._get_max_workers()
    default = min(32, (os.cpu_count() or 1) + 4)
    ours = sync_thread_count({} if value is None else {"PYTHON_THREADPOOL_THREAD_COUNT": value})
    assert ours == (default if theirs is None else theirs)
