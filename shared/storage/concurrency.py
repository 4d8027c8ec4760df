"""Optimistic concurrency: a read-modify-write that loses a race to another writer tries again.

Every such loop in the service is `for _ in optimistic_attempts(): read, decide, write`, leaving
the loop once its write held (etags make a lost race visible), and raising ModifiedConcurrently
after it when every try lost.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

WRITE_ATTEMPTS = 8
# Creating or deleting a job also moves its collection's job count, in counter rows that
# creators of other processes (and deleters) may be writing too; each round lets at least one of
# them through.
CONTENDED_WRITE_ATTEMPTS = 64
_BACKOFF_S = 0.004


def optimistic_attempts(most: int = WRITE_ATTEMPTS, *, back_off: bool = False) -> Iterator[int]:
    """The tries of one read-modify-write: 0, 1, ..., `most` - 1. With `back_off`, a short
    random pause before each retry, so that writers who collided do not collide again in step."""
    for attempt in range(most):
        if attempt and back_off:
            time.sleep(random.uniform(0, _BACKOFF_S * min(attempt, 8)))
        yield attempt
