"""Conformance with Azure's Python runtime library (azure-functions-runtime, Python 3.13+).

The local host hands every invocation to the library where it is installed (devhost/runtime.py).
These tests check that what it serves is what the library indexes, and that each trigger's data
reaches a function, and its answer comes back, through the library's own conversions. They need
the library: on an interpreter without it (Python 3.11) they are skipped, and `make test` runs
them on its Python 3.13 environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Service

pytest.importorskip("azure_functions_runtime")

ROOT = Path(__file__).resolve().parents[2]
# The interpreter whose table the runtime's is compared with: by default this one, called
# directly; `make test` names its Python 3.11 environment's (azure-functions 1.x), so that the
# comparison spans the versions the README supports.
DIRECT_PYTHON = os.environ.get("DEVHOST_DIRECT_PYTHON") or sys.executable


def table(python: str, invocation: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [python, "-m", "devhost.table", "--invocation", invocation],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.services  # runs the local host's table tool and a host in processes of their own
def test_the_table_the_local_host_serves_is_what_the_runtime_indexes() -> None:
    through_runtime = table(sys.executable, "runtime")
    called_directly = table(DIRECT_PYTHON, "direct")
    assert [row["name"] for row in through_runtime] == [row["name"] for row in called_directly]
    for ours, theirs in zip(called_directly, through_runtime, strict=True):
        assert ours == theirs, ours["name"]
    kinds = {binding["type"] for row in through_runtime for binding in row["bindings"]}
    assert {"httpTrigger", "timerTrigger", "queueTrigger"} <= kinds


# --- each trigger through the library, on a small app of its own -------------------------------

SMALL_APP = '''
import json
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
seen = []

@app.route(route="things/{thing}", methods=["POST"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    body = {"route": dict(req.route_params), "query": dict(req.params), "method": req.method,
            "body": req.get_body().decode(), "header": req.headers.get("x-probe"), "url": req.url}
    return func.HttpResponse(json.dumps(body), status_code=201, mimetype="application/json",
                             headers={"x-seen": "yes"})

@app.route(route="broken")
def broken(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("secret internals")

@app.route(route="later")
async def later(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(b"\\xff\\x00", status_code=202)

@app.queue_trigger(arg_name="msg", queue_name="work", connection="AzureWebJobsStorage")
def work(msg: func.QueueMessage) -> None:
    seen.append({"body": msg.get_body().decode("latin-1"), "id": msg.id,
                 "dequeue_count": msg.dequeue_count, "pop_receipt": msg.pop_receipt,
                 "inserted": msg.insertion_time.isoformat()})

@app.timer_trigger(arg_name="timer", schedule="0 * * * * *")
def tick(timer: func.TimerRequest) -> None:
    seen.append({"past_due": timer.past_due})
'''

DRIVER = '''
import json, sys
from datetime import datetime, timezone
from pathlib import Path
import azure.functions as func
from azure.functions.queue import QueueMessage
from devhost.invocation import invoke
from devhost.runtime import RuntimeFailure, RuntimeWorker

functions = {f.get_function_name(): f for f in RuntimeWorker(Path(sys.argv[1])).start()}
call = lambda name, value: invoke(functions[name].get_user_function(), **{"x": value})
out = {}
request = func.HttpRequest(method="POST", url="http://localhost/things/a%20b?x=1",
                           headers={"x-probe": "p"}, params={"x": "1"},
                           route_params={"thing": "a b"}, body=b"hello")
response = call("echo", request)
out["http"] = {"status": response.status_code, "headers": dict(response.headers),
               "body": json.loads(response.get_body())}
later = call("later", func.HttpRequest(method="GET", url="http://localhost/later", body=b""))
out["async"] = {"status": later.status_code, "body": list(later.get_body())}
try:
    call("broken", func.HttpRequest(method="GET", url="http://localhost/broken", body=b""))
except RuntimeFailure as failure:
    out["broken"] = str(failure)
moment = datetime(2026, 11, 27, 1, 2, 3, tzinfo=timezone.utc)
call("work", QueueMessage(id="m-1", body="\u00e9t\u00e9".encode(), dequeue_count=3,
                          pop_receipt="pr", insertion_time=moment))
call("work", QueueMessage(id="m-2", body=b"\\xff", dequeue_count=1, pop_receipt="pr2",
                          insertion_time=moment))
call("tick", func.TimerRequest(past_due=True))
import function_app
out["seen"] = function_app.seen
print(json.dumps(out))
'''


@pytest.mark.services  # runs the local host's table tool and a host in processes of their own
def test_each_trigger_reaches_the_function_and_back_through_the_library(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(textwrap.dedent(SMALL_APP))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
        timeout=120, check=False, env=os.environ | {"AzureWebJobsStorage": "UseDevelopmentStorage=true"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["http"]["status"] == 201
    assert out["http"]["headers"]["x-seen"] == "yes"
    assert out["http"]["headers"]["content-type"] == "application/json"  # no charset: not text/*
    assert out["http"]["body"] == {
        "route": {"thing": "a b"}, "query": {"x": "1"}, "method": "POST", "body": "hello",
        "header": "p", "url": "http://localhost/things/a%20b?x=1",
    }
    assert out["async"] == {"status": 202, "body": [255, 0]}
    assert "function broken failed in the runtime library: RuntimeError: secret internals" in out["broken"]
    assert out["seen"] == [
        # Text travels as a string, anything else as bytes: both arrive as the same bytes.
        {"body": "\xc3\xa9t\xc3\xa9", "id": "m-1", "dequeue_count": 3, "pop_receipt": "pr",
         "inserted": "2026-11-27T01:02:03+00:00"},
        {"body": "\xff", "id": "m-2", "dequeue_count": 1, "pop_receipt": "pr2",
         "inserted": "2026-11-27T01:02:03+00:00"},
        {"past_due": True},
    ]


def test_the_session_host_runs_the_functions_through_the_library(service: Service) -> None:
    """So the API, executor and timer tests, run on this Python, go through the library."""
    started = service.log.read_text()
    assert "Functions run through the Azure Functions Python runtime library (azure-functions-runtime" in started
