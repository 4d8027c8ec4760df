"""Execution messages: deliveries due in the same second travel together in one queue message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.domain.attempts import Delivery

MOST_PER_MESSAGE = 64  # deliveries one queue message carries: ~30 KiB, inside the 64 KiB limit


def message_of(deliveries: Sequence[Delivery]) -> dict[str, Any]:
    """One queue message for deliveries due in the same second (one alone: its own shape)."""
    if len(deliveries) == 1:
        return deliveries[0].to_message()
    return {"deliveries": [delivery.to_message() for delivery in deliveries]}


def deliveries_of(message: dict[str, Any]) -> list[Delivery]:
    """What a queue message carries; KeyError, TypeError or ValueError if malformed."""
    if "deliveries" not in message:
        return [Delivery.from_message(message)]
    carried = message["deliveries"]
    if not isinstance(carried, list) or not carried:
        raise ValueError("'deliveries' must be a list of at least one delivery")
    return [Delivery.from_message(item) for item in carried]
