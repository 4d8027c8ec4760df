"""A Store (shared/storage/interface.py) that passes every call on to a real one: a test that
needs storage to misbehave (fail, lose races, count calls) subclasses it and overrides only the
calls it changes, each calling `self.inner` for the real thing."""

from __future__ import annotations

from typing import Any

from shared.storage.interface import Store


class WrappedStore:
    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
