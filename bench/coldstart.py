"""A cold start: from a fresh process to the first answered API request and the first delivery.

Each sample is a new Python process that does what a worker of the local host does when an
instance starts (`devhost.worker`: import it, index the app through Azure's runtime library on
Python 3.13 with `declared_functions`), then invokes one function through the library, as the
host would for its first event:

  request   a GET of a job collection (the app's services built on first use, one table read)
  delivery  the executor on a queue message of a one-off job due now, whose HTTP action calls a
            target in this process (the job read, the call, its outcome and history written)

Wall time runs from just before this process starts the sample's process to the moment the
invocation has returned; CPU is the sample's process's own (user + system) at that moment,
interpreter start-up included. The app's modules are compiled to bytecode first (`compiled`).
Each figure is the median over `--runs` fresh processes of each
kind. Azurite is started once for the whole run; its tables and the collection exist before the
first sample, as for an instance that starts in a deployment that already serves.

`--base <commit>` checks the commit out into a temporary worktree (as `bench.ab` does) and runs
the samples alternately on it and on this tree, so that a shared machine's drift falls on both
alike; the same driver (this file's `SAMPLE`) runs in both trees, with the same Python.
`--floor` adds a third tree taking its turn: this tree's local host and `shared/` beside a
function_app whose two functions do nothing (`FLOOR_APP`). It measures what no change of the
app can take off (the interpreter, the local host's worker as it imports, the runtime library
and azure-functions), against the same base. The report also lists `python -X importtime -c
"import function_app"`'s slowest entries (cumulative) for the base and this tree.
`--python <interpreter>` runs the samples on another interpreter than this one: this one has
the test venv's packages, among them httpx's command line's optional ones (click, rich,
Pygments, brought by the test tools), which `import httpx` loads where they are installed; a
venv of requirements.txt and devhost/requirements.txt alone has what a deployment has.
`--tls` puts Azurite behind HTTPS, as storage is in Azure (a CA of its own, which the samples
trust). Run `python -m bench.coldstart [--runs N] [--base COMMIT] [--floor] [--tls]
[--python PATH]` on Python 3.13 (where azure-functions-runtime is installed); the report goes to
bench/results/coldstart.md.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import certifi
from azure.storage.queue import QueueClient

from bench.ab import Spread, paired_ratios
from bench.cpu import commit_of
from bench.http_target import QuietHandler, TargetServer
from bench.schedule import machine
from devhost import azurite

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "coldstart.md"
RUNS = 15  # fresh processes of each kind, per tree
SAMPLE_TIMEOUT_S = 120.0
KEY = "coldstart-bench-key"
SUBSCRIPTION, GROUP, COLLECTION = "bench", "coldstart", "cold"
FEED_QUEUE = "coldstart-feed"  # where this benchmark's own dispatcher puts the attempts
TARGET = 0.5  # issue 49: at most this ratio of the base's time to the first request / delivery
IMPORT_ENTRIES = 15

# The sample's process: only what both trees have (devhost.worker, devhost.invocation), so that
# the base's start is measured with the base's code. It prints its moment and CPU as JSON.
SAMPLE = """
import json, os, sys, time
from devhost.worker import declared_functions
from devhost.invocation import invoke
import azure.functions as func
from azure.functions.queue import QueueMessage

kind, argument = sys.argv[1], sys.argv[2]
functions = {f.get_function_name(): f.get_user_function() for f in declared_functions()}
if kind == "request":
    request = func.HttpRequest(method="GET", url="http://127.0.0.1/api/" + argument,
                               headers={"x-functions-key": os.environ["SCHEDULER_FUNCTION_KEY"]},
                               params={"api-version": "2016-03-01"}, body=b"",
                               route_params=json.loads(sys.argv[3]))
    answer = invoke(functions["get_job_collection"], req=request)
    outcome = answer.status_code
else:
    message = QueueMessage(id="cold", body=argument.encode(), dequeue_count=1, pop_receipt="p")
    invoke(functions["executor"], message=message)
    outcome = 0
print(json.dumps({"at": time.time(), "cpu": time.process_time(), "outcome": outcome}))
sys.stdout.flush()
os._exit(0)  # what a process costs to end is not the start's
"""


# The floor's app: the two functions the samples call, under the same names and triggers, doing
# nothing (the delivery's message is read by no one, and no target is called).
FLOOR_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
COLLECTION = ("subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/"
              "Microsoft.Scheduler/jobCollections/{jobCollectionName}")


@app.function_name("get_job_collection")
@app.route(route=COLLECTION, methods=["GET"])
def get_job_collection(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(status_code=200)


@app.queue_trigger(arg_name="message", queue_name="executions", connection="AzureWebJobsStorage")
async def executor(message: func.QueueMessage) -> None:
    pass
"""


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float


class _Target(QuietHandler):
    """Answers 200 and counts the calls (the deliveries' action)."""

    calls = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).calls += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class Deployment:
    """Azurite with the app's tables, one collection, and one-off jobs made due on demand."""

    def __init__(self, storage: str, target: str) -> None:
        from shared.domain.collection import CollectionBody  # noqa: PLC0415
        from shared.domain.collection_document import CollectionDocument  # noqa: PLC0415
        from shared.domain.ids import CollectionId  # noqa: PLC0415
        from shared.services import build  # noqa: PLC0415
        from shared.settings import Settings  # noqa: PLC0415
        from shared.storage.interface import Preconditions  # noqa: PLC0415

        settings = Settings(
            storage_connection=storage,
            lookahead=timedelta(0),
            outbound_allowlist="127.0.0.0/8",
            outbound_ca_file=None,
            authority_host="https://login.invalid",
            queue_endpoint_template=azurite.queue_endpoint_template(storage),
        )
        self.services = build(settings, queue_name=FEED_QUEUE, follow_up_gathering=timedelta(0))
        self.collection = CollectionId(SUBSCRIPTION, GROUP, COLLECTION)
        body = CollectionBody.model_validate(
            {"location": "westeurope", "properties": {"sku": {"name": "P20Premium"}}}
        )
        now = self.services.now()
        self.services.scheduling.save_collection_with_jobs(
            self.collection, CollectionDocument.created(body), now,
            preconditions=Preconditions(), previous=None,
        )  # fmt: skip
        self.target = target
        self.feed = QueueClient.from_connection_string(storage, FEED_QUEUE)
        self._jobs = 0

    def due_message(self) -> str:
        """A one-off job due now, and the text of the execution message the timer sent for it."""
        from shared.domain.ids import JobId  # noqa: PLC0415
        from shared.domain.job_definition import JobBody  # noqa: PLC0415
        from shared.execution.timer import tick  # noqa: PLC0415

        self._jobs += 1
        job = JobId(self.collection, f"job-{self._jobs}-{os.getpid()}")
        now = self.services.now().replace(microsecond=0)
        action = {"type": "Http", "request": {"uri": self.target, "method": "POST", "body": "x"},
                  "retryPolicy": {"retryType": "None"}}  # fmt: skip
        body = JobBody.model_validate({"properties": {"startTime": now.isoformat(),
                                                      "action": action}})  # fmt: skip
        self.services.scheduling.save_definition(job, body.properties, now)
        tick(self.services.due_index, self.services.dispatcher, now + timedelta(seconds=1),
             timedelta(seconds=1))  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for message in self.feed.receive_messages(messages_per_page=32):
                self.feed.delete_message(message)
                text = base64.b64decode(message.content).decode()
                if job.name in text:
                    return text
            time.sleep(0.05)
        raise RuntimeError(f"no execution message for {job.name} within 10 s")


def environment(storage: str) -> dict[str, str]:
    """The settings the sample's app reads (as local.settings.sample.json gives them)."""
    return os.environ | {
        "AzureWebJobsStorage": storage,
        "SCHEDULER_FUNCTION_KEY": KEY,
        "SCHEDULER_OUTBOUND_ALLOWLIST": "127.0.0.0/8",
        "SCHEDULER_QUEUE_ENDPOINT_TEMPLATE": azurite.queue_endpoint_template(storage),
        "SCHEDULER_TICK_SCHEDULE": "0 * * * * *",
        "SCHEDULER_CLEANUP_SCHEDULE": "0 30 3 * * *",
        "DEVHOST_INVOCATION": "runtime",
        "WEBSITE_AUTH_ENABLED": "false",
    }


def storage_account(tls_folder: Path | None) -> tuple[azurite.Azurite, str]:
    """Azurite, and the connection string that reaches it. With a folder, over HTTPS as storage
    is in Azure: a CA of its own (trustme) made there, its certificate for 127.0.0.1, and a
    bundle of certifi's roots and that CA trusted by the samples and this process through
    REQUESTS_CA_BUNDLE, which the SDKs' requests and the app's own storage client both read."""
    if tls_folder is None:
        emulator = azurite.start()
        return emulator, emulator.connection_string
    import trustme  # noqa: PLC0415  # a test tool: only this option needs it

    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1")
    issued.private_key_pem.write_to_path(str(tls_folder / "key.pem"))
    issued.cert_chain_pems[0].write_to_path(str(tls_folder / "cert.pem"))
    # certifi's roots with it, as many as storage's clients trust in Azure: loading them is part
    # of what a start over TLS costs, and one root alone would load in no time.
    roots = Path(certifi.where()).read_text() + authority.cert_pem.bytes().decode()
    (tls_folder / "ca.pem").write_text(roots)
    os.environ["REQUESTS_CA_BUNDLE"] = str(tls_folder / "ca.pem")  # environment() passes it on
    emulator = azurite.start(options=["--cert", str(tls_folder / "cert.pem"),
                                      "--key", str(tls_folder / "key.pem")])  # fmt: skip
    return emulator, emulator.connection_string.replace("http", "https")


def sample(
    tree: Path, env: dict[str, str], kind: str, argument: str, python: str = sys.executable
) -> Sample:
    """One fresh process of `kind` on the code of `tree`, run by the interpreter `python`."""
    route = {"subscriptionId": SUBSCRIPTION, "resourceGroupName": GROUP,
             "jobCollectionName": COLLECTION}  # fmt: skip
    command = [python, "-c", SAMPLE, kind, argument, json.dumps(route)]
    started = time.time()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True,
                          timeout=SAMPLE_TIMEOUT_S, check=False)  # fmt: skip
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the {kind} sample failed in {tree}:\n{done.stderr[-3000:]}")
    measured = json.loads(lines[-1])
    if kind == "request" and measured["outcome"] != 200:
        raise RuntimeError(f"the first request got {measured['outcome']}:\n{done.stderr[-3000:]}")
    return Sample(measured["at"] - started, measured["cpu"])


def compiled(tree: Path, python: str = sys.executable) -> None:
    """The app's own modules compiled to bytecode beforehand, as pip compiles the packages it
    installs: with PYTHONDONTWRITEBYTECODE set (as on these machines) every start would compile
    them again from source, a second of CPU here, and time that no change of the import path
    would touch."""
    subprocess.run([python, "-m", "compileall", "-q", "function_app.py", "shared",
                    "devhost"], cwd=tree, check=True, capture_output=True)  # fmt: skip


def import_times(
    tree: Path, env: dict[str, str], python: str = sys.executable
) -> list[tuple[float, str]]:
    """`-X importtime`'s slowest imports (cumulative ms, module) of `import function_app`."""
    done = subprocess.run([python, "-X", "importtime", "-c", "import function_app"],
                          cwd=tree, env=env, capture_output=True, text=True,
                          timeout=SAMPLE_TIMEOUT_S, check=True)  # fmt: skip
    entries = []
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if found:
            entries.append((int(found[1]) / 1000, found[2][1:] + found[3]))
    return sorted(entries, reverse=True)[:IMPORT_ENTRIES]


@contextmanager
def checked_out(commit: str) -> Iterator[Path]:
    """`commit` in a temporary worktree, removed afterwards (as bench.ab checks its base out)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-coldstart-"))
    checkout = folder / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(checkout), commit], cwd=ROOT,
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield checkout
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=ROOT,
                       check=False)  # fmt: skip


def measure(
    trees: Sequence[tuple[str, Path]],
    runs: int,
    deployment: Deployment,
    env: dict[str, str],
    python: str = sys.executable,
) -> dict[str, dict[str, list[Sample]]]:
    """`runs` samples of each kind on each tree, the trees taking turns within every run."""
    found: dict[str, dict[str, list[Sample]]] = {
        name: {"request": [], "delivery": []} for name, _ in trees
    }
    for number in range(runs):
        for name, tree in trees:
            found[name]["request"].append(sample(tree, env, "request", f"run-{number}", python))
            calls = _Target.calls
            due = deployment.due_message()
            found[name]["delivery"].append(sample(tree, env, "delivery", due, python))
            if name != "floor" and _Target.calls != calls + 1:
                raise RuntimeError(f"a delivery on {name} called the target {_Target.calls - calls}"
                                   " times, not once")  # fmt: skip
        print(f"{datetime.now(UTC):%H:%M:%S} run {number + 1} of {runs}", flush=True)
    return found


def _median(samples: list[Sample], field: str) -> float:
    return statistics.median(getattr(each, field) for each in samples) * 1000


def report(
    found: dict[str, dict[str, list[Sample]]],
    imports: dict[str, list[tuple[float, str]]],
    commits: dict[str, str],
    runs: int,
    python: str = sys.executable,
    *,
    tls: bool = False,
) -> str:
    names = list(found)
    lines = [
        "# A cold start: to the first answered request and the first delivery",
        "",
        f"Measured by `python -m bench.coldstart --runs {runs}"
        + (f" --base {commits['base']}" if "base" in found else "")
        + (" --floor" if "floor" in found else "")
        + (" --tls" if tls else "")
        + (f" --python {python}`" if python != sys.executable else "`")
        + f" on {machine()}, finished {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (load average"
        f" {os.getloadavg()[0]:.1f} at the end; other work may have shared the cores).",
        "Each sample is a fresh process: `devhost.worker`'s import, the app indexed through the",
        "runtime library, then one invocation; wall time from before the process was started to",
        "the invocation's return, CPU the process's own; the app's modules compiled to bytecode",
        "beforehand in each tree. Medians over the runs (lowest–highest).",
        "",
        "| tree | commit | first request: wall ms | CPU ms | first delivery: wall ms | CPU ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name in names:
        cells = []
        for kind in ("request", "delivery"):
            for field in ("wall_s", "cpu_s"):
                values = [getattr(each, field) * 1000 for each in found[name][kind]]
                cells.append(f"{Spread.of(values).median:.0f}"
                             f" ({min(values):.0f}–{max(values):.0f})")  # fmt: skip
        lines.append(f"| {name} | {commits[name]} | " + " | ".join(cells) + " |")
    if "base" in found:
        lines += ["", "Work over base, per run (the trees took turns), then the median of those"
                  f" ratios (lowest–highest); target ≤ {TARGET:g} for both wall times:", "",
                  "| measure | ratio work / base | target |", "|---|---:|---|"]  # fmt: skip
        for kind in ("request", "delivery"):
            for field, label in (("wall_s", "wall"), ("cpu_s", "CPU")):
                ratios = paired_ratios(
                    [getattr(each, field) for each in found["base"][kind]],
                    [getattr(each, field) for each in found["work"][kind]],
                )
                median = statistics.median(ratios)
                verdict = ""
                if field == "wall_s":
                    verdict = f"≤ {TARGET:g}: {'met' if median <= TARGET else 'missed'} (median)"
                lines.append(f"| first {kind}, {label} | {Spread.of(ratios)} | {verdict} |")
    if "base" in found and "floor" in found:
        lines += ["", "The floor (the app's two functions doing nothing) over base, per run: what"
                  " no change of the app can take off; the target leaves the app the rest:", "",
                  "| measure | ratio floor / base | left to the app under the target |",
                  "|---|---:|---:|"]  # fmt: skip
        for kind in ("request", "delivery"):
            ratios = paired_ratios([each.wall_s for each in found["base"][kind]],
                                   [each.wall_s for each in found["floor"][kind]])  # fmt: skip
            left = TARGET - statistics.median(ratios)
            lines.append(f"| first {kind}, wall | {Spread.of(ratios)} | {left:.2f} of base,"
                         f" {left * _median(found['base'][kind], 'wall_s'):.0f} ms |")  # fmt: skip
    for name, slowest in imports.items():
        lines += ["", f"`python -X importtime -c \"import function_app\"` on {name}, the"
                  f" {IMPORT_ENTRIES} slowest (cumulative ms, nesting shown by indent):", "",
                  "```"]  # fmt: skip
        lines += [f"{ms:8.1f}  {module}" for ms, module in slowest]
        lines.append("```")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS, help="fresh processes of each kind")
    parser.add_argument("--base", help="a commit to compare against, back to back")
    parser.add_argument("--floor", action="store_true",
                        help="also a tree whose app does nothing, taking its turn")  # fmt: skip
    parser.add_argument("--output", default=str(RESULTS), help="where the report goes")
    parser.add_argument("--tls", action="store_true",
                        help="storage over HTTPS, as in Azure: Azurite with a CA of its own,"
                        " which the samples trust through REQUESTS_CA_BUNDLE")  # fmt: skip
    parser.add_argument("--python", default=sys.executable,
                        help="the samples' interpreter: by default this one (the test venv's"
                        " packages); a venv of requirements.txt and devhost/requirements.txt"
                        " alone has a deployment's")  # fmt: skip
    options = parser.parse_args(argv)
    from devhost.runtime import runtime_installed  # noqa: PLC0415

    if not runtime_installed():
        print("bench.coldstart needs azure-functions-runtime: run it on Python 3.13",
              file=sys.stderr)  # fmt: skip
        return 1
    folder = Path(tempfile.mkdtemp(prefix="bench-coldstart-tls-")) if options.tls else None
    emulator, storage = storage_account(folder)
    target = TargetServer(("127.0.0.1", 0), _Target)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    try:
        deployment = Deployment(storage, f"http://127.0.0.1:{target.server_address[1]}/hook")
        env = environment(storage)
        with _trees(options.base, floor=options.floor) as trees:
            commits = {name: commit_of(tree) for name, tree in trees if name != "floor"}
            if options.floor:
                commits["floor"] = f"an app doing nothing, {commits['work']}'s host"
            for _, tree in trees:
                compiled(tree, options.python)
            imports = {name: import_times(tree, env, options.python)
                       for name, tree in trees if name != "floor"}  # fmt: skip
            found = measure(trees, options.runs, deployment, env, options.python)
        deployment.services.close()
    finally:
        target.shutdown()
        emulator.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    text = report(found, imports, commits, options.runs, options.python, tls=options.tls)
    Path(options.output).write_text(text)
    print(text)
    return 0


@contextmanager
def floor_tree() -> Iterator[Path]:
    """This tree's local host and `shared/` (which the worker imports) beside FLOOR_APP."""
    folder = Path(tempfile.mkdtemp(prefix="bench-coldstart-floor-"))
    try:
        for part in ("devhost", "shared"):
            shutil.copytree(ROOT / part, folder / part,
                            ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        shutil.copy(ROOT / "host.json", folder)
        (folder / "function_app.py").write_text(FLOOR_APP)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _trees(base: str | None, *, floor: bool) -> Iterator[list[tuple[str, Path]]]:
    with contextlib.ExitStack() as stack:
        trees = [("work", ROOT)]
        if base is not None:
            trees.insert(0, ("base", stack.enter_context(checked_out(base))))
        if floor:
            trees.append(("floor", stack.enter_context(floor_tree())))
        yield trees


if __name__ == "__main__":
    sys.exit(main())
