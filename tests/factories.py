"""Small builders that keep the tests reading like the spec."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Recurrence


def utc(text: str) -> datetime:
    """`"2026-06-01T09:00"` as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def occurrences(
    recurrence: dict[str, Any] | None,
    *,
    start: str | None,
    created: str,
) -> Occurrences:
    """The occurrences of a job defined at `created` (UTC) with a startTime and recurrence JSON."""
    return Occurrences(
        start_time=utc(start) if start else None,
        recurrence=Recurrence.model_validate(recurrence) if recurrence is not None else None,
        created_at=utc(created),
    )


def iso(instants: list[datetime]) -> list[str]:
    """Instants as minute-precision UTC strings, the way the expectations are written."""
    return [instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M" + (":%S" if instant.second else ""))
            for instant in instants]
