"""How long the schedule engine takes to find a job's next occurrence, and whether age matters.

For every schedule of docs/behaviour.md#schedule-examples (plus the worked example and a plain
minute grid) it times `Occurrences.next_after(now)` for a job anchored now and for the same job
anchored ten years ago, and, side by side, plain `rrule(...).after(now)` iterated from the anchor.

Targets (issue 2): the median per call at most 50 µs, and the ten-year-old job at most twice as
slow as the new one. Run with `make bench`; the table is written to bench/results/schedule.md.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dateutil import rrule as rr
from dateutil.relativedelta import relativedelta

from shared.domain.schedule.occurrences import _RRULE_FREQUENCY, Occurrences
from shared.domain.schedule.recurrence import Recurrence
from tests.domain.schedule.test_occurrences_spec import SCHEDULE_EXAMPLES

NOW = datetime(2026, 6, 1, 9, 0, 7, tzinfo=UTC)
TEN_YEARS = relativedelta(years=10)
CALLS = 2000  # per schedule and age, for the engine
RRULE_BUDGET = timedelta(
    seconds=1.5
)  # per schedule and age: plain rrule from a 10-year anchor is slow
MEDIAN_TARGET_US = 50.0
AGE_RATIO_TARGET = 2.0
RESULTS = Path(__file__).parent / "results" / "schedule.md"


def cases() -> list[tuple[str, dict[str, Any]]]:
    found = [(case[4], {"frequency": case[0], "schedule": case[1]}) for case in SCHEDULE_EXAMPLES]
    found.append(("worked_example-every_2_days", {"frequency": "day", "interval": 2}))
    found.append(("every_minute-no_schedule", {"frequency": "minute"}))
    found.append(("every_7_minutes-no_schedule", {"frequency": "minute", "interval": 7}))
    return found


def instants_asked(*series: Occurrences) -> list[datetime]:
    """`now` moving on in odd steps, so calls land at different places of the grid.

    It starts after every job's first occurrence: before it, the answer is that first
    occurrence, already known, and would time nothing.
    """
    start = max(job.first for job in series if job.first is not None)
    return [start + k * timedelta(minutes=37, seconds=11) for k in range(CALLS)]


def timed(
    call: Callable[[datetime], datetime | None],
    asked: list[datetime],
    budget: timedelta | None = None,
) -> tuple[float, list[datetime | None]]:
    """The median wall time of one call in µs, and the answers (fewer calls if over budget)."""
    timings, answers, spent = [], [], 0.0
    for instant in asked:
        started = time.perf_counter_ns()
        answers.append(call(instant))
        elapsed = time.perf_counter_ns() - started
        timings.append(elapsed / 1000)
        spent += elapsed / 1e9
        if budget is not None and spent > budget.total_seconds() and len(timings) >= 3:
            break
    return statistics.median(timings), answers


def plain_rrule(series: Occurrences) -> Callable[[datetime], datetime | None]:
    """rrule iterated from the job's anchor, with the same by* rules as the engine."""
    grid = series._grid  # the engine's own reading of the schedule, so both answer alike
    assert grid is not None
    rules = {**grid.rules}
    if grid.times_of_day:  # spelled as rrule's own times of day
        rules["byhour"] = sorted({moment.hour for moment in grid.times_of_day})
        rules["byminute"] = sorted({moment.minute for moment in grid.times_of_day})
        rules["bysecond"] = grid.anchor.second
    rule = rr.rrule(
        _RRULE_FREQUENCY[grid.frequency],
        interval=grid.interval,
        dtstart=grid.anchor,
        wkst=rr.MO,
        cache=False,
        **rules,
    )

    def after(instant: datetime) -> datetime | None:
        found = rule.after(instant.replace(tzinfo=None))
        return found.replace(tzinfo=UTC) if found else None

    return after


def main() -> int:
    rows, worst_median, worst_ratio = [], 0.0, 0.0
    for name, recurrence_json in cases():
        recurrence = Recurrence.model_validate(recurrence_json)
        new = Occurrences(
            start_time=NOW - timedelta(hours=1), recurrence=recurrence, created_at=NOW
        )
        old = Occurrences(
            start_time=NOW - TEN_YEARS, recurrence=recurrence, created_at=NOW - TEN_YEARS
        )
        asked = instants_asked(new, old)
        engine_new, _ = timed(new.next_after, asked)
        engine_old, engine_answers = timed(old.next_after, asked)
        rrule_new, _ = timed(plain_rrule(new), asked, RRULE_BUDGET)
        rrule_old, rrule_answers = timed(plain_rrule(old), asked, RRULE_BUDGET)
        rrule_calls = len(rrule_answers)
        # The jump must not change the answer: same instants as rrule's long walk.
        assert engine_answers[:rrule_calls] == rrule_answers, name
        ratio = engine_old / engine_new
        worst_median = max(worst_median, engine_new, engine_old)
        worst_ratio = max(worst_ratio, ratio)
        rows.append((name, engine_new, engine_old, ratio, rrule_new, rrule_old, rrule_calls))
        print(
            f"{name:70s} {engine_new:8.1f} {engine_old:8.1f} {ratio:5.2f} {rrule_old:12.1f}",
            flush=True,
        )

    met = worst_median <= MEDIAN_TARGET_US and worst_ratio <= AGE_RATIO_TARGET
    verdict = verdict_line(worst_median, worst_ratio, met)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(render(rows, verdict))
    print(f"\n{verdict}\nwritten to {RESULTS}")
    return 0 if met else 1


def verdict_line(worst_median: float, worst_ratio: float, met: bool) -> str:
    return (
        f"Worst median {worst_median:.1f} µs (target ≤ {MEDIAN_TARGET_US:g}); "
        f"worst ratio old/new {worst_ratio:.2f} (target ≤ {AGE_RATIO_TARGET:g}): "
        + ("targets met." if met else "TARGETS MISSED.")
    )


HEADER = (
    "| schedule (behaviour.md examples) | engine, anchored now | engine, anchored 10 years ago "
    "| ratio | rrule, anchored now | rrule, anchored 10 years ago | rrule calls timed |"
)


def render(rows: list[tuple[Any, ...]], verdict: str) -> str:
    lines = [
        "# Schedule engine: time per next-occurrence call",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} by `make bench` on {machine()}.",
        f"Each engine cell is the median of {CALLS} calls of `Occurrences.next_after(now)`;",
        "each rrule cell the median of as many calls of plain `rrule(...).after(now)` from the",
        f"anchor as fit in {RRULE_BUDGET.total_seconds():g} s (at least 3). Times in µs.",
        "`now` starts after the first occurrence of both jobs and moves on 37 min 11 s per call.",
        "The engine's answers are checked to equal rrule's.",
        "",
        f"**{verdict}**",
        "",
        HEADER,
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, engine_new, engine_old, ratio, rrule_new, rrule_old, rrule_calls in rows:
        lines.append(
            f"| {name} | {engine_new:.1f} | {engine_old:.1f} | {ratio:.2f} | {rrule_new:.1f} | "
            f"{rrule_old:,.1f} | {rrule_calls} |"
        )
    return "\n".join(lines) + "\n"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()} ({sys.platform})"


if __name__ == "__main__":
    sys.exit(main())
