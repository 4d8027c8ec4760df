"""bench.pipeline_ab reads back what bench.pipeline's report says (the two are written apart,
and a change to one line of the report must not pass unnoticed into a wrong comparison), and
bench.lone_ab pools its rounds."""

from __future__ import annotations

import argparse

from bench.lone_ab import report as lone_report
from bench.pipeline import report
from bench.pipeline_ab import Measured


def test_the_ab_reads_each_figure_of_the_pipelines_report() -> None:
    options = argparse.Namespace(jobs=3000, measure=60.0, soak=600.0, step_measure=30.0)
    text = report(
        alone={"calls": 60, "p50": 6.14, "p99": 12.36},
        loaded={"rate": 50.0, "p50": 61.0, "p99": 163.0, "requests_per_execution": 1.27,
                "rss_start": 100.0, "rss_end": 104.3, "rss_max": 105.0},
        ramped=[(6000, 100.0, 300.0, 700.0), (6600, 110.0, 400.0, 1500.0)],
        raw=180.0,
        ticks=[(0, 1000, 77)],
        options=options,
    )  # fmt: skip
    measured = Measured.from_report(text)
    assert (measured.lone_p50_ms, measured.lone_p99_ms) == (6.1, 12.4)
    assert (measured.load_p50_ms, measured.load_p99_ms) == (61.0, 163.0)
    assert measured.requests_per_execution == 1.27
    assert measured.rss_growth_percent == 4.3
    assert measured.sustained_rate == 100.0  # 110/s missed its p99


def test_the_lone_ab_reports_each_round_and_all_rounds_pooled() -> None:
    base = [10.0] * 99 + [20.0]
    work = [5.0] * 99 + [15.0]
    text = lone_report("a" * 40, "b" * 40, [(base, work), (base, [6.0] * 100)])
    assert "| round 1 | 100 / 100 | 10.0 / 20.0 / 20.0 | 5.0 / 15.0 / 15.0 | 0.75 |" in text
    assert "| round 2 | 100 / 100 | 10.0 / 20.0 / 20.0 | 6.0 / 6.0 / 6.0 | 0.30 |" in text
    # Pooled, the 99th percentile of 200 calls is the second slowest: work's lone 15 ms call
    # is its maximum, no longer its p99.
    assert "| all rounds | 200 / 200 | 10.0 / 20.0 / 20.0 | 6.0 / 6.0 / 15.0 | 0.30 |" in text
