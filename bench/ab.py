"""A/B: `bench.cpu`'s measurement against a chosen commit and the working tree, back to back.

The commit is checked out with `git worktree add` into a temporary folder (removed at the end);
then `bench.cpu` runs once per tree and round, alternately (base, work, base, work, ...), each
run on a fresh Azurite, so that a machine's drift and noise fall on both sides alike. The same
benchmark code (this tree's) drives both hosts, with the same Python and virtual environment;
only the code the host runs (`devhost/`, `shared/`, `function_app.py`) differs.

For each measure the report gives, per round, the working tree's value over the base's, and
over the rounds the median of those ratios and their range. Run `python -m bench.ab --base
<commit> [--rounds N]` (about three minutes a run, so 12 minutes for the default two rounds);
the report goes to bench/results/cpu_ab.md (`--output` to choose another file).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.cpu import Run, add_measurement_options

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "cpu_ab.md"
RUN_TIMEOUT_S = 900.0  # one run of bench.cpu, at most


@dataclass(frozen=True)
class Spread:
    """The median of some values, and their lowest and highest."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls(float("nan"), float("nan"), float("nan"))
        return cls(statistics.median(values), min(values), max(values))

    def __str__(self) -> str:
        if self.low == self.high:
            return f"{self.median:.2f}"
        return f"{self.median:.2f} ({self.low:.2f}–{self.high:.2f})"


def paired_ratios(base: Sequence[float], work: Sequence[float]) -> list[float]:
    """Each round's working-tree value over the same round's base value (rounds whose base is
    zero are left out: no ratio)."""
    return [after / before for before, after in zip(base, work, strict=True) if before]


@dataclass(frozen=True)
class Target:
    """Issue 34's bound on a ratio work / base: at most `bound`, or at least it (`at_least`)."""

    bound: float
    at_least: bool = False

    def met(self, ratios: Sequence[float]) -> bool:
        """Whether every round's ratio meets the bound (no ratio: not met)."""
        if not ratios:
            return False
        return min(ratios) >= self.bound if self.at_least else max(ratios) <= self.bound

    def __str__(self) -> str:
        return f"{'≥' if self.at_least else '≤'} {self.bound:g}"


def cost_of(item: str, field: str) -> Callable[[Run], float]:
    return lambda run: float(getattr(run.costs[item], field))


# What is compared: a label, how to read it from a run, issue 34's target for the ratio if any.
MEASURES: list[tuple[str, Callable[[Run], float], Target | None]] = [
    ("host CPU ms per execution", cost_of("execute", "host_cpu_ms"), Target(0.5)),
    ("Azurite CPU ms per execution", cost_of("execute", "azurite_cpu_ms"), None),
    ("storage requests per execution", cost_of("execute", "storage_requests"), None),
    ("lateness p99 ms", cost_of("execute", "p99_ms"), None),
    ("host CPU ms per create", cost_of("create", "host_cpu_ms"), Target(0.6)),
    ("host CPU ms per replacing PUT", cost_of("replace", "host_cpu_ms"), Target(0.6)),
    ("host CPU ms per changing PUT", cost_of("change", "host_cpu_ms"), None),
    ("host CPU ms per GET", cost_of("get", "host_cpu_ms"), None),
    ("Azurite CPU ms per create", cost_of("create", "azurite_cpu_ms"), None),
    ("Azurite CPU ms per replacing PUT", cost_of("replace", "azurite_cpu_ms"), None),
    ("storage requests per create", cost_of("create", "storage_requests"), None),
    ("storage requests per replacing PUT", cost_of("replace", "storage_requests"), None),
    ("storage requests per changing PUT", cost_of("change", "storage_requests"), None),
]
SUSTAINED = ("highest rate with lateness p99 < 1 s, executions/s", Target(1.6, at_least=True))


def table(base: list[Run], work: list[Run]) -> list[str]:
    measures = list(MEASURES)
    if all(run.ramp for run in (*base, *work)):
        measures.append((SUSTAINED[0], lambda run: run.sustained, SUSTAINED[1]))
    rows = []
    for label, read, target in measures:
        before, after = [read(run) for run in base], [read(run) for run in work]
        ratios = paired_ratios(before, after)
        verdict = "" if target is None else f"{target}: {'met' if target.met(ratios) else 'missed'}"
        rows.append(f"| {label} | {Spread.of(before)} | {Spread.of(after)} |"
                    f" {Spread.of(ratios)} | {verdict} |")  # fmt: skip
    return rows


def report(base: list[Run], work: list[Run], commit: str, options: argparse.Namespace) -> str:
    first = work[0]
    host_to_azurite = Spread.of([run.costs["execute"].host_to_azurite for run in work])
    lines = [
        "# CPU per execution and per request, A/B",
        "",
        f"Measured by `python -m bench.ab --base {commit} --rounds {options.rounds}` on"
        f" {first.machine} (the runs ended from {base[0].when} to {work[-1].when}); the host:"
        f" {first.host_python}. Other processes may have shared the cores.",
        *([options.note] if options.note else []),
        "",
        f"Base: {base[0].commit}; work: {first.commit}. Each round ran `bench.cpu` on the base,",
        "then on the working tree, each time on a fresh Azurite: "
        f"{options.api_jobs} jobs created, replaced twice",
        f"and read by 16 clients, then {round(options.rate * 60)} jobs once a minute"
        f" ({options.rate:g} executions/s) measured for {options.measure:.0f} s.",
        "",
        "Values: the median over the rounds (lowest–highest). Ratio: work / base, per round, then",
        "their median (lowest–highest); a target is met when every round's ratio meets it.",
        "",
        "| measure | base | work | ratio work / base | issue 34's target |",
        "|---|---:|---:|---:|---|",
        *table(base, work),
        "",
        f"Host CPU per execution over Azurite's, working tree: {host_to_azurite} (target ≤ 1.3).",
        "",
        "Each run, in order:",
        "",
        "| run | tree | host / Azurite CPU ms: create | replace | change | GET | execution |"
        + (" highest rate with p99 < 1 s |" if base[0].ramp else ""),
        "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if base[0].ramp else ""),
    ]  # fmt: skip
    for number, (before, after) in enumerate(zip(base, work, strict=True)):
        for tree, run in (("base", before), ("work", after)):
            cells = " | ".join(
                f"{run.costs[item].host_cpu_ms:.2f} / {run.costs[item].azurite_cpu_ms:.2f}"
                for item in ("create", "replace", "change", "get", "execute")
            )
            sustained = f" | {run.sustained:.1f}" if run.ramp else ""
            lines.append(f"| {2 * number + (tree == 'work') + 1} | {tree} | {cells}{sustained} |")
    return "\n".join([*lines, ""])


def one_run(tree: Path, options: argparse.Namespace, output: Path) -> Run:
    command = [
        sys.executable, "-m", "bench.cpu", "--app-root", str(tree), "--json", str(output),
        "--rate", str(options.rate), "--measure", str(options.measure),
        "--api-jobs", str(options.api_jobs), "--python", options.python,
        "--ramp-step", str(options.ramp_step), "--ramp-measure", str(options.ramp_measure),
        "--ramp-budget", str(options.ramp_budget),
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, check=True, timeout=RUN_TIMEOUT_S)
    return Run.from_json(json.loads(output.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=2, help="base-then-work pairs")
    parser.add_argument("--output", default=str(RESULTS), help="where the report goes")
    parser.add_argument("--note", help="a paragraph for the report: what else ran, say")
    parser.add_argument(
        "--runs-from", help="measure nothing: report the runs an earlier A/B left in this folder"
    )
    add_measurement_options(parser)
    options = parser.parse_args(argv)
    if options.runs_from:
        base, work = saved_runs(Path(options.runs_from))
    else:
        base, work = measure_rounds(options)
    text = report(base, work, options.base, options)
    Path(options.output).write_text(text)
    print(text)
    return 0


def measure_rounds(options: argparse.Namespace) -> tuple[list[Run], list[Run]]:
    """`options.rounds` runs of each tree, base first in each round; each run's JSON is kept in
    a temporary folder (printed), for `--runs-from`."""
    resolved = subprocess.run(["git", "rev-parse", "--verify", f"{options.base}^{{commit}}"],
                              cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    commit = resolved.stdout.strip()
    folder = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    print(f"runs kept in {folder}", flush=True)
    checkout = folder / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(checkout), commit], cwd=ROOT,
                   check=True, capture_output=True)  # fmt: skip
    base: list[Run] = []
    work: list[Run] = []
    try:
        for round_number in range(options.rounds):
            for tree, runs, name in ((checkout, base, "base"), (ROOT, work, "work")):
                print(f"{datetime.now(UTC):%H:%M:%S} round {round_number + 1}: {name}", flush=True)
                runs.append(one_run(tree, options, folder / f"{name}-{round_number}.json"))
                execute = runs[-1].costs["execute"]
                print(f"  execution: host {execute.host_cpu_ms:.2f} ms,"
                      f" Azurite {execute.azurite_cpu_ms:.2f} ms", flush=True)  # fmt: skip
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=ROOT,
                       check=False)  # fmt: skip
    return base, work


def saved_runs(folder: Path) -> tuple[list[Run], list[Run]]:
    """The runs `measure_rounds` kept in `folder`: (base's, work's), by round."""

    def of(name: str) -> list[Run]:
        paths = sorted(folder.glob(f"{name}-*.json"), key=lambda path: int(path.stem.split("-")[1]))
        return [Run.from_json(json.loads(path.read_text())) for path in paths]

    return of("base"), of("work")


if __name__ == "__main__":
    sys.exit(main())
