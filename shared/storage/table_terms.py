"""The two Table SDK terms the store writes in, an update mode and a refused batch, kept here so
that neither client needs the SDK imported for them.

The store runs on the own table client, or on the SDK's (the `sdk` setting, and tests that hand
it the SDK's to count or fail its requests). Importing azure.data.tables for these two names alone
was about 10 ms of every cold start (issue 49): the SDK is now imported only where its clients
are built.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import cast

from azure.core.exceptions import HttpResponseError


class UpdateMode(StrEnum):
    """How a write meets the stored entity: replaced whole, or merged into. The SDK compares
    its own UpdateMode by value (`mode == UpdateMode.REPLACE`), so it takes these as well."""

    REPLACE = "replace"
    MERGE = "merge"


class TransactionFailed(HttpResponseError):
    """Storage refused a batch: the own client's form of the SDK's TableTransactionError, with
    the same `status_code` and `index` (the failed operation, which the service names at the
    start of its message: `1:The update condition specified in the request was not satisfied.`;
    0 where it names none)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message=message)
        self.status_code = status
        try:
            self.index = int(message.split(":", 1)[0])
        except ValueError:
            self.index = 0


def transaction_failures() -> tuple[type[TransactionFailed], ...]:
    """What a refused batch raises, for an `except` clause (which evaluates it only when an
    exception reaches it): TransactionFailed, and the SDK's TableTransactionError once the SDK
    is loaded. It is looked up, not imported: before it is loaded, no SDK client can have
    raised it (nor while another thread is still importing it)."""
    sdk_error = getattr(sys.modules.get("azure.data.tables"), "TableTransactionError", None)
    if sdk_error is None:
        return (TransactionFailed,)
    # The SDK's class has the same `status_code` and `index`, which is all the store reads.
    return (TransactionFailed, cast("type[TransactionFailed]", sdk_error))
