"""A value built on its first use, once, whichever thread asks first.

A cold start imports and builds only what its first invocation needs (issue 49), so the parts
only some invocations use (the execution side, each kind of action's performer) are built when
they are first asked for. Several threads can ask at once (the executor's, the API's, the
metrics' export), and `functools.cached_property` no longer locks (Python 3.12), so this does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._built: T | None = None
        self._building = threading.Lock()

    def __call__(self) -> T:
        """The value, built now if no one has asked before."""
        built = self._built
        if built is None:
            with self._building:
                if self._built is None:
                    self._built = self._build()
                built = self._built
        return built

    @property
    def built(self) -> T | None:
        """The value if it was built, without building it (to close what was opened)."""
        return self._built
