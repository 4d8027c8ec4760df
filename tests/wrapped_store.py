"""One storage aggregate (shared/storage/interface.py) that passes every call on to a real one:
a test that needs one aggregate to misbehave (fail, lose races, count calls) subclasses `Wrapped`
and overrides only the calls it changes, each calling `self.inner` for the real thing, and puts
it in place of that aggregate with `wrapping`; the other aggregates stay as they are."""

from __future__ import annotations

import dataclasses
from typing import Any

from shared.storage.interface import Storage


class Wrapped:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def wrapping(storage: Storage, **wrappers: type[Wrapped]) -> Storage:
    """`storage` with each named aggregate (e.g. `executor=Failing`) wrapped in its wrapper."""
    return dataclasses.replace(
        storage,
        **{part: wrapper(getattr(storage, part)) for part, wrapper in wrappers.items()},
    )
