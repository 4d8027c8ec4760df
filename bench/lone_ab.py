"""A/B of a lone job's lateness: one-offs 2 s apart, nothing else running, on two commits.

A lone job's p99 is the slowest call or two of a hundred, so one run says little: this runs
`bench.pipeline --lone-only` on the two commits in turn, round after round (base, work, base,
work, ...), each time on a fresh Azurite, and reports each round and all rounds pooled. Each
commit runs in a worktree with this checkout's harness, as in `bench.pipeline_ab`. Run
`python -m bench.lone_ab --base <commit> [--work <commit>] [--calls 100] [--rounds 2]`, about
4 minutes a run; results go to bench/results/lone_ab.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.pipeline import LONE_MARK, percentile
from bench.pipeline_ab import checked_out, resolved
from bench.schedule import machine

RESULTS = Path(__file__).parent / "results" / "lone_ab.md"


def lone_run(tree: Path, calls: int) -> list[float]:
    """Each call's lateness (ms) in one lone-only run of the app in `tree`."""
    ran = subprocess.run(
        [sys.executable, "-m", "bench.pipeline", "--lone-only", "--lone", str(calls)],
        cwd=tree, capture_output=True, text=True, check=True, timeout=60 + 3 * calls,
    )  # fmt: skip
    for line in ran.stdout.splitlines():
        if line.startswith(f"{LONE_MARK} "):
            return [float(late) for late in json.loads(line.removeprefix(f"{LONE_MARK} "))]
    raise RuntimeError(f"no lateness in the run's output:\n{ran.stdout[-2000:]}")


def figures(late: list[float]) -> str:
    return f"{statistics.median(late):.1f} / {percentile(late, 0.99):.1f} / {max(late):.1f}"


def report(base: str, work: str, rounds: list[tuple[list[float], list[float]]]) -> str:
    pooled_base = [late for before, _ in rounds for late in before]
    pooled_work = [late for _, after in rounds for late in after]
    p99 = percentile(pooled_work, 0.99) / percentile(pooled_base, 0.99)
    return "\n".join([
        "# A lone job's lateness, A/B",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `python -m bench.lone_ab` on"
        f" {machine()}: one-offs 2 s apart, {len(rounds[0][0])} calls a run, on {base[:7]}"
        f" (base) and {work[:7]} (work) in turn, each run on a fresh Azurite.",
        "",
        "| run | calls | base p50 / p99 / max, ms | work p50 / p99 / max, ms | work / base, p99 |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| round {number} | {len(before)} / {len(after)} | {figures(before)} |"
            f" {figures(after)} | {percentile(after, 0.99) / percentile(before, 0.99):.2f} |"
            for number, (before, after) in enumerate(rounds, 1)
        ),
        f"| all rounds | {len(pooled_base)} / {len(pooled_work)} | {figures(pooled_base)} |"
        f" {figures(pooled_work)} | {p99:.2f} |",
        "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--work", default="HEAD", help="the commit compared (default HEAD)")
    parser.add_argument("--calls", type=int, default=100, help="one-offs a run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", default=str(RESULTS))
    options = parser.parse_args(argv)
    base, work = resolved(options.base), resolved(options.work)
    if base == work:
        parser.error(f"--base and --work are both {base[:7]}: nothing to compare")
    folder = Path(tempfile.mkdtemp(prefix="bench-lone-ab-"))
    rounds = []
    with contextlib.ExitStack() as trees:
        base_tree = trees.enter_context(checked_out(base, folder))
        work_tree = trees.enter_context(checked_out(work, folder))
        for number in range(1, options.rounds + 1):
            before = lone_run(base_tree, options.calls)
            after = lone_run(work_tree, options.calls)
            print(f"round {number}: base {figures(before)} ms, work {figures(after)} ms")
            rounds.append((before, after))
    text = report(base, work, rounds)
    Path(options.output).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
