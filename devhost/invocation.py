"""Calling a function as the Python worker does, whatever triggered it.

An `async def` function runs on the worker's one event loop: its waits hold no thread. A plain
one runs in a thread of the worker's pool, which has PYTHON_THREADPOOL_THREAD_COUNT threads, or
min(32, cores + 4) when that is unset or invalid (a ThreadPoolExecutor's default, which the
worker takes). So no more plain functions run at once than that, whatever number of requests
and messages are in flight; the others wait their turn. Here each runs in the thread that
received it, once one of as many slots is free: the same limit, without handing the call to
another thread.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from shared.logs import app_logger

SYNC_THREAD_COUNT = "PYTHON_THREADPOOL_THREAD_COUNT"

log = app_logger("devhost")


def sync_thread_count(environment: Mapping[str, str]) -> int:
    """PYTHON_THREADPOOL_THREAD_COUNT, read as the runtime library reads it: any whole number of
    at least 1, with no upper limit; when unset, or set to anything else (which is logged as a
    warning, as the library logs it), a ThreadPoolExecutor's default, min(32, cores + 4)."""
    default = min(32, (os.cpu_count() or 1) + 4)
    value = environment.get(SYNC_THREAD_COUNT)
    if value is None:
        return default
    try:
        count = int(value)
    except ValueError:
        log.warning("%s must be an integer", SYNC_THREAD_COUNT)
        return default
    if count < 1:
        log.warning(
            "%s must be set to a value of at least 1. Reverting to the default value (%d).",
            SYNC_THREAD_COUNT, default,
        )  # fmt: skip
        return default
    return count


class Invocations:
    """Calls functions with at most `sync_threads` plain ones running at once."""

    def __init__(self, sync_threads: int) -> None:
        self._slots = threading.BoundedSemaphore(sync_threads)

    def __call__(self, function: Callable[..., Any], **arguments: Any) -> Any:
        if inspect.iscoroutinefunction(function):
            return on_event_loop(function(**arguments))
        with self._slots:
            result = function(**arguments)
        if inspect.iscoroutine(result):  # a plain function that hands on a coroutine
            return on_event_loop(result)
        return result


@functools.cache
def _worker_invocations() -> Invocations:
    return Invocations(sync_thread_count(os.environ))


def invoke(function: Callable[..., Any], **arguments: Any) -> Any:
    """Call `function` as this worker process calls every function (see the module's text)."""
    return _worker_invocations()(function, **arguments)


def on_event_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run `coroutine` on the worker's one event loop, waiting here for its result."""
    return asyncio.run_coroutine_threadsafe(coroutine, _event_loop()).result()


@functools.cache
def _event_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="worker-event-loop", daemon=True).start()
    return loop
