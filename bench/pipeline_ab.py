"""A/B of the execution pipeline: `bench.pipeline` on a chosen commit, then on this one, back to
back on one machine, and the measures that matter side by side.

Each commit is checked out with `git worktree add` into a temporary folder (removed at the end),
its `bench/` replaced by this checkout's, so that one harness measures both and only the app
differs; it runs `python -m bench.pipeline` with the same options and the same Python, on a
fresh Azurite, and what that writes to bench/results/pipeline.md is read back. The report
(bench/results/pipeline_ab.md, or `--output`) puts side by side: the lone job's lateness,
lateness and storage requests per execution under load, memory growth over the soak, and the
highest sustained rate; and keeps both runs' own reports below.

The options default to a shorter run than `bench.pipeline`'s own (no 10-minute soak, 1,000
rows beside the tick instead of 100,000, steps of 20 executions/s past the load up to 120/s):
about 15 minutes a side. Run
`python -m bench.pipeline_ab --base <commit> [--work <commit>]`.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.schedule import machine

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "pipeline_ab.md"
RUN_TIMEOUT_S = 3600.0
PIPELINE_OPTIONS = {
    "--lone": "60", "--jobs": "3000", "--ramp-step": "3000", "--step-measure": "30",
    "--measure": "60", "--soak": "60", "--beyond-step": "1200", "--beyond-most": "7200",
    "--extra-rows": "1000",
}  # fmt: skip


@dataclass(frozen=True)
class Measured:
    """What one run's report says, read from its table."""

    lone_p50_ms: float
    lone_p99_ms: float
    load_p50_ms: float
    load_p99_ms: float
    requests_per_execution: float
    rss_growth_percent: float  # over the soak
    sustained_rate: float  # executions/s, the highest with lateness p99 < 1 s
    report: str

    @classmethod
    def from_report(cls, text: str) -> Measured:
        def number(pattern: str) -> float:
            found = re.search(pattern, text)
            if found is None:
                raise ValueError(f"the report has no line matching {pattern!r}")
            return float(found.group(1).replace(",", ""))

        return cls(
            lone_p50_ms=number(r"\| lone job lateness p50 / p99 [^|]*\| ([\d,.]+) / "),
            lone_p99_ms=number(r"\| lone job lateness p50 / p99 [^|]*\| [\d,.]+ / ([\d,.]+) ms"),
            load_p50_ms=number(r"\| lateness p50 under load [^|]*\| ([\d,.]+) ms"),
            load_p99_ms=number(r"\| lateness p99 under the same load \| ([\d,.]+) ms"),
            requests_per_execution=number(r"\| storage requests per execution [^|]*\| ([\d.]+)"),
            rss_growth_percent=number(r"\| RSS over [^|]*\|[^|(]*\(([-+\d.]+)%\)"),
            sustained_rate=number(r"\| highest sustained rate with p99 < 1 s \| ([\d.]+)/s"),
            report=text,
        )


@contextlib.contextmanager
def checked_out(commit: str, folder: Path) -> Iterator[Path]:
    """`commit`'s app in a worktree under `folder`, with this checkout's harness (bench/) and
    Node packages; removed at the end."""
    tree = folder / commit[:12]
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT,
                   check=True, capture_output=True)  # fmt: skip
    try:
        # Azurite and the other Node packages are this checkout's (a worktree has none).
        (tree / "node_modules").symlink_to(ROOT / "node_modules")
        # The harness is this checkout's: what differs between the two runs is the app alone.
        shutil.rmtree(tree / "bench")
        shutil.copytree(
            ROOT / "bench", tree / "bench", ignore=shutil.ignore_patterns("__pycache__")
        )
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                       check=False, capture_output=True)  # fmt: skip


def resolved(name: str) -> str:
    """The full commit id `name` (a commit, branch or tag) stands for."""
    found = subprocess.run(["git", "rev-parse", "--verify", f"{name}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True, check=True)  # fmt: skip
    return found.stdout.strip()


def run_pipeline(commit: str, folder: Path, options: list[str]) -> Measured:
    with checked_out(commit, folder) as tree:
        subprocess.run([sys.executable, "-m", "bench.pipeline", *options], cwd=tree, check=True,
                       timeout=RUN_TIMEOUT_S)  # fmt: skip
        return Measured.from_report((tree / "bench" / "results" / "pipeline.md").read_text())


def report(base: tuple[str, Measured], work: tuple[str, Measured], options: list[str]) -> str:
    (base_commit, before), (work_commit, after) = base, work
    rows = [
        ("lone job lateness p50, ms", before.lone_p50_ms, after.lone_p50_ms),
        ("lone job lateness p99, ms", before.lone_p99_ms, after.lone_p99_ms),
        ("lateness p50 under load, ms", before.load_p50_ms, after.load_p50_ms),
        ("lateness p99 under load, ms", before.load_p99_ms, after.load_p99_ms),
        ("storage requests per execution", before.requests_per_execution,
         after.requests_per_execution),
        ("highest sustained rate (p99 < 1 s), executions/s", before.sustained_rate,
         after.sustained_rate),
    ]  # fmt: skip
    growth = (before.rss_growth_percent, after.rss_growth_percent)
    lines = [
        "# Execution pipeline, A/B",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `python -m bench.pipeline_ab` on"
        f" {machine()}: `bench.pipeline {' '.join(options)}` on {base_commit[:7]} (base), then"
        f" on {work_commit[:7]} (work), back to back, each on a fresh Azurite.",
        "",
        "| measure | base | work | work / base |",
        "|---|---:|---:|---:|",
        *(f"| {label} | {b:g} | {a:g} | {a / b:.2f} |" for label, b, a in rows),
        f"| RSS growth over the soak, % | {growth[0]:+g} | {growth[1]:+g} | |",
        "",
        "## Base's own report",
        "",
        before.report.split("\n", 1)[1].strip(),
        "",
        "## Work's own report",
        "",
        after.report.split("\n", 1)[1].strip(),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--work", default="HEAD", help="the commit compared (default HEAD)")
    parser.add_argument("--output", default=str(RESULTS))
    parsed, passed_on = parser.parse_known_args(argv)
    options = dict(PIPELINE_OPTIONS)
    for name, value in zip(passed_on[::2], passed_on[1::2], strict=True):
        options[name] = value
    flat = [part for pair in options.items() for part in pair]
    commits = [resolved(parsed.base), resolved(parsed.work)]
    folder = Path(tempfile.mkdtemp(prefix="bench-pipeline-ab-"))
    base = (commits[0], run_pipeline(commits[0], folder, flat))
    work = (commits[1], run_pipeline(commits[1], folder, flat))
    text = report(base, work, flat)
    Path(parsed.output).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
