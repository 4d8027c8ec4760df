"""A cold start imports only what every invocation needs (issue 49), and still works on first call.

The SDKs of the kinds of action, the Queue SDK, azure-identity, cryptography, the template
machinery, the API's operations (shared/api/routes.py), the OpenAPI document and the console's
views are imported on first use; a fresh process importing `function_app` (or the local
host's worker) must not load them, or the gain measured by `bench.coldstart` silently goes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueServiceClient

from devhost import azurite
from shared.actions import Performed
from shared.actions.deferred import BuiltOnFirstUse
from shared.api.routes import CLASSIC_ROUTES, ROUTES, OnFirstRequest
from shared.console.routes import ROUTES as CONSOLE_ROUTES
from shared.storage.clients import queue_service
from shared.storage.connection_strings import service_address

ROOT = Path(__file__).resolve().parent.parent
PROCESS_TIMEOUT_S = 120.0
# Imported on first use only (each a tenth of a second or more of a cold start, measured with
# `python -X importtime`), with where that first use is.
LAZY = {
    "httpx": "the first HTTP action",
    "azure.servicebus": "the first Service Bus action",
    "azure.identity": "storage or actions reached by managed identity",
    "msal": "azure-identity's",
    "azure.storage.queue": "the first message sent or received",
    "cryptography": "a client certificate read, or the local host's sign-in",
    "jwt": "the local host's sign-in",
    "lark": "the first template request",
    "shared.actions.http": "the first HTTP action",
    "shared.api.template_operations": "the first template request",
    "shared.api.job_operations": "the first ARM request about jobs",
    "shared.api.role_assignment_operations": "the first role assignments request",
    "shared.api.classic.operations": "the first classic API request",
    "shared.api.openapi": "the first /openapi.json request",
    "shared.console.views": "the console's first read",
    "shared.domain.schedule.words": "the first schedule described (console, ARM job reads)",
    "requests": "an SDK client built, or the own storage client's first request where the "
    "environment names a proxy",
    "azure.data.tables": "the SDK's table clients built (the `sdk` storage setting)",
    "shared.api.arm": "the first API request",
    "shared.api.access": "the first API request",
    "shared.api.health": "the first /health request",
    "shared.console.pages": "the console's first read or file",
    "shared.execution.composition": "the first write, tick or delivery (the execution side)",
    "shared.execution.scheduling": "the first write",
    "shared.execution.worker": "the first delivery",
}
KEY = azurite.ACCOUNT_KEY


def loaded_after(statement: str, env: dict[str, str]) -> set[str]:
    """The modules of LAZY a fresh interpreter has loaded after running `statement`."""
    check = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=PROCESS_TIMEOUT_S, check=True)  # fmt: skip
    return set(json.loads(done.stdout.strip().splitlines()[-1])) & set(LAZY)


@pytest.mark.services  # it starts a Python process
@pytest.mark.parametrize(
    "statement",
    ["import function_app", "import devhost.worker"],
    ids=["the function app", "the local host's worker"],
)
def test_a_cold_import_leaves_the_sdks_of_first_use_out(statement: str) -> None:
    env = os.environ | {"AzureWebJobsStorage": "UseDevelopmentStorage=true"}
    assert loaded_after(statement, env) == set()


@pytest.mark.services  # it starts a Python process
def test_the_check_sees_a_module_that_is_imported() -> None:
    env = os.environ | {"AzureWebJobsStorage": "UseDevelopmentStorage=true"}
    assert loaded_after("import function_app, httpx", env) == {"httpx"}


def test_each_operation_is_imported_on_first_request_and_names_a_function_of_its_module() -> None:
    routes = [*ROUTES, *CLASSIC_ROUTES, *CONSOLE_ROUTES]
    assert [route.name for route in routes if not isinstance(route.operation, OnFirstRequest)] == []
    for route in routes:
        assert callable(route.operation.resolved()), route.name  # type: ignore[attr-defined]


# A fresh process on a fresh Azurite: its first requests create the tables and the queue they
# need, then save and read what they were given (the local host's way of calling the functions),
# without building an SDK client.
FIRST_CALLS = """
import json, os, sys
from datetime import UTC, datetime, timedelta
import azure.functions as func
from devhost.invocation import invoke
from devhost.worker import declared_functions

functions = {f.get_function_name(): f.get_user_function() for f in declared_functions()}
route = {"subscriptionId": "cold", "resourceGroupName": "start", "jobCollectionName": "first"}
base = "http://127.0.0.1/subscriptions/cold/resourceGroups/start/providers/Microsoft.Scheduler"
headers = {"x-functions-key": os.environ["SCHEDULER_FUNCTION_KEY"],
           "content-type": "application/json"}

def call(name, method, url, route, body=None):
    request = func.HttpRequest(method=method, url=url, headers=headers, route_params=route,
                               params={"api-version": "2016-03-01"},
                               body=json.dumps(body).encode() if body else b"")
    answer = invoke(functions[name], req=request)
    if answer.status_code >= 300:  # why, for the test's message
        print(answer.get_body().decode())
    return answer.status_code

collection = f"{base}/jobCollections/first"
tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
job = {"properties": {"startTime": tomorrow, "action": {"type": "Http",
       "request": {"uri": "https://example.org/", "method": "GET"}}}}
print(json.dumps([
    call("get_job_collection", "GET", collection, route),  # none yet: a 404
    "shared.execution.composition" in sys.modules,  # a read builds no execution side
    call("put_job_collection", "PUT", collection, route,
         {"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}),
    call("put_job", "PUT", f"{collection}/jobs/one", route | {"jobName": "one"}, job),
    call("get_job", "GET", f"{collection}/jobs/one", route | {"jobName": "one"}),
    "requests" in sys.modules,  # with no proxy named, the own storage client has no use for it
    "azure.data.tables" in sys.modules,  # a job's create is a batch: no SDK for its refusal
    # pydantic never read every distribution's entry points for plugins (the app has none)
    sys.modules["pydantic.plugin._loader"]._plugins is not None,
]))
"""


@pytest.mark.services  # it starts Azurite and a Python process
def test_a_fresh_process_on_a_fresh_deployment_answers_its_first_calls() -> None:
    emulator = azurite.start()
    try:
        # No proxy, and pydantic's plugins left to the app (this process's import set them off).
        unproxied = {name: value for name, value in os.environ.items()
                     if not name.lower().endswith("_proxy")
                     and name != "PYDANTIC_DISABLE_PLUGINS"}  # fmt: skip
        env = unproxied | {
            "AzureWebJobsStorage": emulator.connection_string,
            "SCHEDULER_FUNCTION_KEY": "first-call-key",
            "SCHEDULER_TICK_SCHEDULE": "0 * * * * *",
            "SCHEDULER_CLEANUP_SCHEDULE": "0 30 3 * * *",
            "WEBSITE_AUTH_ENABLED": "false",
        }
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(FIRST_CALLS)], cwd=ROOT,
                              env=env, capture_output=True, text=True,
                              timeout=PROCESS_TIMEOUT_S, check=False)  # fmt: skip
    finally:
        emulator.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [404, False, 201, 201, 200, False, False, False], done.stdout


@pytest.mark.parametrize(
    "connection",
    [
        "UseDevelopmentStorage=true",
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};"
        "QueueEndpoint=http://127.0.0.1:20001/devstoreaccount1;"
        "TableEndpoint=http://127.0.0.1:20002/devstoreaccount1/;",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};"
        "EndpointSuffix=core.chinacloudapi.cn",
        f"AccountName=acct;AccountKey={KEY}",
        f"accountname=acct;accountkey={KEY};queueendpoint=https://queues.example.org/acct/",
    ],
    ids=["development storage", "Azurite's", "another cloud", "defaults", "lower-case names"],
)
def test_a_connection_string_names_the_services_the_sdks_find(connection: str) -> None:
    queues = QueueServiceClient.from_connection_string(connection)
    assert queue_service(connection) == (
        queues.url,
        queues.credential.account_name,
        queues.credential.account_key,
    )
    tables = TableServiceClient.from_connection_string(connection)
    assert service_address(connection, "table") == (tables.url, *tables.credential.named_key)


class _Counted:
    """A performer that counts its builds and actions."""

    builds = 0

    def __init__(self) -> None:
        type(self).builds += 1
        self.closed = False

    def perform(self, action: object, job: object, attempt: object, region: str = "") -> Performed:
        return Performed(True, f"done in {region}")

    def close(self) -> None:
        self.closed = True


def test_a_performer_is_built_on_its_first_action_and_only_once() -> None:
    _Counted.builds = 0
    built: list[_Counted] = []

    def build() -> _Counted:
        built.append(_Counted())
        return built[-1]

    performer = BuiltOnFirstUse(build)
    performer.close()  # nothing built yet: nothing to close, and nothing built for it
    assert _Counted.builds == 0
    threads = [
        threading.Thread(target=performer.perform, args=(None, None, None, "west"))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert _Counted.builds == 1
    assert performer.perform(None, None, None, "west") == Performed(True, "done in west")  # type: ignore[arg-type]
    performer.close()
    assert built[0].closed
