"""Calling a function as the Python worker does, whatever triggered it.

An `async def` function runs on the worker's one event loop: its waits hold no thread. A plain
one runs in a thread of the worker's pool, which has PYTHON_THREADPOOL_THREAD_COUNT threads, or
min(32, cores + 4) when that is unset (a ThreadPoolExecutor's default, which the worker takes). So
no more plain functions run at once than that, whatever number of requests and messages are in
flight; the others wait their turn. Here each runs in the thread that received it, once one of
as many slots is free: the same limit, without handing the call to another thread.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

SYNC_THREAD_COUNT = "PYTHON_THREADPOOL_THREAD_COUNT"
MOST_SYNC_THREADS = 32  # the worker's own limit


def sync_thread_count(environment: Mapping[str, str]) -> int:
    """PYTHON_THREADPOOL_THREAD_COUNT, or the worker's default when unset; ValueError when not
    a whole number from 1 to 32."""
    value = environment.get(SYNC_THREAD_COUNT, "").strip()
    if not value:
        return min(MOST_SYNC_THREADS, (os.cpu_count() or 1) + 4)
    if not value.isdigit() or not 1 <= int(value) <= MOST_SYNC_THREADS:
        raise ValueError(
            f"{SYNC_THREAD_COUNT} must be a whole number from 1 to {MOST_SYNC_THREADS},"
            f" not '{value}'"
        )
    return int(value)


class Invocations:
    """Calls functions with at most `sync_threads` plain ones running at once."""

    def __init__(self, sync_threads: int) -> None:
        self._slots = threading.BoundedSemaphore(sync_threads)

    def __call__(self, function: Callable[..., Any], **arguments: Any) -> Any:
        if inspect.iscoroutinefunction(function):
            return _on_event_loop(function(**arguments))
        with self._slots:
            result = function(**arguments)
        if inspect.iscoroutine(result):  # a plain function that hands on a coroutine
            return _on_event_loop(result)
        return result


@functools.cache
def _worker_invocations() -> Invocations:
    return Invocations(sync_thread_count(os.environ))


def invoke(function: Callable[..., Any], **arguments: Any) -> Any:
    """Call `function` as this worker process calls every function (see the module's text)."""
    return _worker_invocations()(function, **arguments)


def _on_event_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run_coroutine_threadsafe(coroutine, _event_loop()).result()


@functools.cache
def _event_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="worker-event-loop", daemon=True).start()
    return loop
