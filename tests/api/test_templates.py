"""Templates in and out over HTTP (docs/templates.md): the Azure quickstart templates imported
and their jobs run against local targets, export -> import round trips, what-if, complete mode,
failures half way, and errors that name resource, property and expression."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from devhost.service_bus import AmqpBroker
from tests.api.test_jobs import SUBSCRIPTION, http_job
from tests.conftest import SAS_KEY, SAS_KEY_NAME
from tests.factories import made_pfx
from tests.targets import Target

QUICKSTARTS = Path(__file__).resolve().parent.parent / "templates" / "quickstarts"
PROVIDER = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{{group}}/providers/Microsoft.Scheduler"
SITE = "reference(resourceId('Microsoft.Web/sites', parameters('webAppName')))"
RULE_KEYS = "listKeys(variables('queueSendOnlyKeyName'), '2018-01-01-preview')"


def quickstart(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((QUICKSTARTS / name).read_text())
    return loaded


def new_group() -> str:
    return f"rg-{uuid.uuid4().hex[:8]}"


def provider(group: str) -> str:
    return PROVIDER.format(group=group)


def import_into(api: httpx.Client, group: str, **body: Any) -> httpx.Response:
    return api.post(f"{provider(group)}/importTemplate", json=body, timeout=30)


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {f"{each['type']} {each['name']}": each["outcome"] for each in report["resources"]}


def webapp_import(api: httpx.Client, group: str, target: Target, **extra: Any) -> httpx.Response:
    return import_into(
        api, group, template=quickstart("scheduler-webapp.json"), location="West Europe",
        parameters={"appSvcPlanName": {"value": "plan"}, "webAppName": {"value": "site"},
                    "jobCollectionName": {"value": "webjobs"}, "jobName": {"value": "ping"}},
        expressionValues={SITE: {"hostNames": [f"127.0.0.1:{target.port}"]}}, **extra,
    )  # fmt: skip


def test_the_webapp_quickstart_imports_and_its_job_runs(api: httpx.Client, target: Target) -> None:
    group = new_group()
    target.answer("/")
    answer = webapp_import(api, group, target)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert outcomes(report) == {
        "Microsoft.Web/serverfarms plan": "Skipped",
        "Microsoft.Web/sites site": "Skipped",
        "Microsoft.Scheduler/jobCollections webjobs": "Created",
        "Microsoft.Scheduler/jobCollections/jobs webjobs/ping": "Created",
    }
    job = report["resources"][-1]
    assert job["warnings"] == [
        "properties.action.request.retryPolicy was ignored; it belongs in properties.action",
        "no startTime: it runs at once when imported, and takes its seconds from that moment; "
        "defaultStartTime (--default-start-time) gives it one",
    ]
    assert answer.headers["Warning"] == (
        '299 - "webjobs/ping: properties.action.request.retryPolicy was ignored; it belongs in properties.action"'
    )
    path = f"{provider(group)}/jobCollections/webjobs/jobs/ping"
    shown = api.get(path).json()["properties"]
    assert shown["action"]["request"] == {"uri": f"http://127.0.0.1:{target.port}", "method": "GET"}
    assert shown["recurrence"]["schedule"]["weekDays"] == ["monday", "tuesday", "wednesday", "thursday", "friday"]
    assert api.post(f"{path}/run").status_code == 200
    called = target.wait_for("/")[-1]
    assert called.method == "GET"
    again = webapp_import(api, group, target)  # a re-run converges: nothing changes
    assert set(outcomes(again.json()).values()) == {"Skipped", "Unchanged"}


def test_the_service_bus_quickstart_imports_with_its_parameters_file_and_posts_to_the_broker(
    api: httpx.Client, service_bus: AmqpBroker
) -> None:
    group, before = new_group(), len(service_bus.received("alerts"))
    parameters = quickstart("scheduler-service-bus.parameters.json")
    placeholder = import_into(
        api, group, template=quickstart("scheduler-service-bus.json"), parameters=parameters,
        location="North Europe", whatIf=True,
        expressionValues={RULE_KEYS: {"primaryKey": SAS_KEY, "keyName": SAS_KEY_NAME}},
    )  # fmt: skip
    assert placeholder.status_code == 400  # the file as published: the gallery's placeholder
    assert "'serviceBusNamespaceName': is 'GEN-UNIQUE', a placeholder" in placeholder.json()["error"]["message"]
    parameters["parameters"]["serviceBusNamespaceName"] = {"value": "contoso-bus"}
    parameters["parameters"]["queueName"] = {"value": "alerts"}  # a queue the test broker has
    answer = import_into(
        api, group, template=quickstart("scheduler-service-bus.json"), parameters=parameters,
        location="North Europe",
        expressionValues={RULE_KEYS: {"primaryKey": SAS_KEY, "keyName": SAS_KEY_NAME}},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert outcomes(answer.json()) == {
        "Microsoft.ServiceBus/namespaces contoso-bus": "Skipped",
        "Microsoft.ServiceBus/namespaces/queues contoso-bus/alerts": "Skipped",
        "Microsoft.ServiceBus/namespaces/queues/authorizationRules contoso-bus/alerts/Scheduler": "Skipped",
        "Microsoft.Scheduler/jobCollections QueuePoster": "Created",
        "Microsoft.Scheduler/jobCollections/jobs QueuePoster/PostMessage": "Created",
    }
    [received] = service_bus.wait_for(before + 1, "alerts")[before:]
    assert received.body == b"mymessage"
    shown = api.get(f"{provider(group)}/jobCollections/QueuePoster/jobs/PostMessage").json()
    assert "sasKey" not in shown["properties"]["action"]["serviceBusQueueMessage"]["authentication"]
    assert shown["properties"]["recurrence"] == {"frequency": "minute", "interval": 1}


def test_what_if_says_when_each_job_first_runs_and_a_default_start_time_moves_it(
    api: httpx.Client, target: Target
) -> None:
    group = new_group()
    before = datetime.now(UTC)
    at_once = webapp_import(api, group, target, whatIf=True).json()["resources"][-1]
    first = datetime.fromisoformat(at_once["firstRun"])
    assert before - timedelta(seconds=1) <= first <= datetime.now(UTC) + timedelta(seconds=1)  # at once, any day
    assert any(note.startswith("no startTime: it runs at once") for note in at_once["warnings"])

    minute = webapp_import(api, group, target, whatIf=True, defaultStartTime="NextWholeMinute").json()
    job = minute["resources"][-1]
    first = datetime.fromisoformat(job["firstRun"])
    assert first > before and first.weekday() < 5 and (first.hour, first.minute) in {(10, 0), (10, 30), (12, 0), (12, 30)}
    assert not any(note.startswith("no startTime") for note in job.get("warnings", []))

    chosen = webapp_import(api, group, target, defaultStartTime="2027-03-01T12:10:00Z")  # a Monday
    assert chosen.status_code == 200, chosen.text
    assert chosen.json()["resources"][-1]["firstRun"] == "2027-03-01T12:30:00Z"
    saved = api.get(f"{provider(group)}/jobCollections/webjobs/jobs/ping").json()["properties"]
    assert saved["startTime"] == "2027-03-01T12:10:00Z"
    assert saved["status"]["nextExecutionTime"] == "2027-03-01T12:30:00Z"

    refused = webapp_import(api, new_group(), target, whatIf=True, defaultStartTime="soon")
    assert refused.status_code == 400
    assert "defaultStartTime: must be NextWholeMinute or an ISO 8601 date-time, not 'soon'" in refused.text


def test_an_expression_only_azure_answers_is_an_error_naming_resource_property_and_expression(
    api: httpx.Client,
) -> None:
    group = new_group()
    answer = import_into(
        api, group, template=quickstart("scheduler-service-bus.json"), location="North Europe",
        parameters={"serviceBusNamespaceName": {"value": "ns"}},
    )  # fmt: skip
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "InvalidTemplate"
    violation = error["additionalInfo"][0]["info"]
    assert violation == {
        "resource": "resource 'QueuePoster/PostMessage' (Microsoft.Scheduler/jobCollections/jobs)",
        "property": "properties.action.serviceBusQueueMessage.authentication.sasKey",
        "expression": f"[{RULE_KEYS}.primaryKey]",
    }
    assert f'give its value in expressionValues under "{RULE_KEYS}"' in error["message"]
    assert api.get(f"{provider(group)}/jobCollections").json()["value"] == []  # nothing applied


def test_a_property_value_supplied_outright_replaces_the_expression(api: httpx.Client, service_bus: AmqpBroker) -> None:
    group, before = new_group(), len(service_bus.received("orders"))
    authentication = "properties.action.serviceBusQueueMessage.authentication"
    answer = import_into(
        api, group, template=quickstart("scheduler-service-bus.json"), location="North Europe",
        parameters={"serviceBusNamespaceName": {"value": "contoso-jobs"}, "queueName": {"value": "orders"}},
        propertyValues={"QueuePoster/PostMessage": {f"{authentication}.sasKey": SAS_KEY,
                                                    f"{authentication}.sasKeyName": SAS_KEY_NAME}},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    service_bus.wait_for(before + 1, "orders")


PFX, _ = made_pfx("pfx-password", subject="template-export")


def job_with_secrets(target: Target) -> dict[str, Any]:
    pfx = PFX
    body = http_job()
    body["properties"]["action"]["request"] = {
        "uri": target.url("/hook?code=func-key-value&x=1"), "method": "POST", "body": "[1, 2]",
        "headers": {"x-api-key": "header-secret", "content-type": "application/json"},
        "authentication": {"type": "ClientCertificate", "pfx": pfx, "password": "pfx-password"},
    }  # fmt: skip
    body["properties"]["action"]["errorAction"] = {
        "type": "Http", "request": {"uri": target.url("/failed"), "method": "PUT",
                                    "authentication": {"type": "Basic", "username": "u", "password": "hunter2"}},
    }  # fmt: skip
    return body


def test_export_then_import_into_another_group_gives_the_same_answers(api: httpx.Client, target: Target) -> None:
    source, copy = new_group(), new_group()
    collection = f"{provider(source)}/jobCollections/exported"
    assert api.put(collection, json={"location": "West Europe", "tags": {"team": "[ops]"},
                                     "properties": {"sku": {"name": "P10Premium"}, "quota": {"maxJobCount": 20}}}).status_code == 201  # fmt: skip
    assert api.put(f"{collection}/jobs/secret", json=job_with_secrets(target)).status_code == 201
    plain = http_job(state="Disabled", recurrence={"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Monday", "occurrence": -1}]}})
    assert api.put(f"{collection}/jobs/plain", json=plain).status_code == 201
    exported = api.post(f"{provider(source)}/exportTemplate")
    assert exported.status_code == 200, exported.text
    template = exported.json()["template"]
    text = json.dumps(template)
    for secret in ("func-key-value", "header-secret", "pfx-password", "hunter2", "MII"):
        assert secret not in text
    assert {p["type"] for p in template["parameters"].values()} == {"securestring"}
    secrets = {
        "exported_secret_action_request_uri": target.url("/hook?code=func-key-value&x=1"),
        "exported_secret_action_request_headers_x_api_key": "header-secret",
        "exported_secret_action_request_authentication_pfx": job_with_secrets(target)["properties"]["action"]["request"]["authentication"]["pfx"],
        "exported_secret_action_request_authentication_password": "pfx-password",
        "exported_secret_action_errorAction_request_authentication_password": "hunter2",
    }
    assert set(template["parameters"]) == set(secrets)
    imported = import_into(api, copy, template=template,
                           parameters={name: {"value": value} for name, value in secrets.items()})
    assert imported.status_code == 200, imported.text
    for path in ("", "/jobs/secret", "/jobs/plain"):
        before, after = api.get(f"{collection}{path}").json(), api.get(f"{provider(copy)}/jobCollections/exported{path}").json()
        for resource in (before, after):
            resource.pop("id")
            resource.get("properties", {}).pop("status", None)
        assert after == before
    one = api.post(f"{collection}/exportTemplate").json()["template"]
    assert one == template  # the group holds only this collection


def test_what_if_changes_nothing_and_says_what_would_change(api: httpx.Client, target: Target) -> None:
    group = new_group()
    first = webapp_import(api, group, target, whatIf=True)
    assert first.status_code == 200, first.text
    assert outcomes(first.json())["Microsoft.Scheduler/jobCollections/jobs webjobs/ping"] == "Created"
    assert api.get(f"{provider(group)}/jobCollections").json()["value"] == []
    assert webapp_import(api, group, target).status_code == 200
    jobs = f"{provider(group)}/jobCollections/webjobs/jobs"
    assert api.put(f"{jobs}/extra", json=http_job()).status_code == 201
    before = definitions(api, jobs)
    template = quickstart("scheduler-webapp.json")
    template["resources"][2]["resources"][0]["properties"]["recurrence"]["interval"] = 2
    changed = import_into(api, group, template=template, location="West Europe", mode="Complete", whatIf=True,
                          parameters={"appSvcPlanName": {"value": "plan"}, "webAppName": {"value": "site"},
                                      "jobCollectionName": {"value": "webjobs"}, "jobName": {"value": "ping"}},
                          expressionValues={SITE: {"hostNames": [f"127.0.0.1:{target.port}"]}})  # fmt: skip
    assert changed.status_code == 200, changed.text
    said = outcomes(changed.json())
    assert said["Microsoft.Scheduler/jobCollections webjobs"] == "Unchanged"
    assert said["Microsoft.Scheduler/jobCollections/jobs webjobs/ping"] == "Updated"
    assert said["Microsoft.Scheduler/jobCollections/jobs webjobs/extra"] == "Deleted"
    assert definitions(api, jobs) == before


def definitions(api: httpx.Client, jobs: str) -> dict[str, Any]:
    """Each job's definition, by name: what it reads without its status, which runs change."""
    listed = api.get(jobs).json()["value"]
    return {job["name"]: {k: v for k, v in job["properties"].items() if k != "status"} for job in listed}


def test_complete_mode_deletes_exactly_the_jobs_the_template_does_not_name(api: httpx.Client, target: Target) -> None:
    group = new_group()
    assert webapp_import(api, group, target).status_code == 200
    jobs = f"{provider(group)}/jobCollections/webjobs/jobs"
    other = f"{provider(group)}/jobCollections/untouched"
    assert api.put(other, json={"location": "West Europe"}).status_code == 201
    for path in (f"{jobs}/stray-1", f"{jobs}/stray-2", f"{other}/jobs/kept"):
        assert api.put(path, json=http_job()).status_code == 201
    incremental = webapp_import(api, group, target)
    assert "Deleted" not in outcomes(incremental.json()).values()
    complete = webapp_import(api, group, target, mode="complete")
    assert complete.status_code == 200, complete.text
    deleted = sorted(name for name, outcome in outcomes(complete.json()).items() if outcome == "Deleted")
    assert deleted == ["Microsoft.Scheduler/jobCollections/jobs webjobs/stray-1",
                       "Microsoft.Scheduler/jobCollections/jobs webjobs/stray-2"]
    assert [job["name"] for job in api.get(jobs).json()["value"]] == ["webjobs/ping"]
    assert api.get(f"{other}/jobs/kept").status_code == 200


def test_a_template_failing_half_way_reports_what_was_applied_and_a_rerun_converges(api: httpx.Client) -> None:
    group = new_group()
    job = {"type": "jobs", "name": "[concat('job-', copyIndex())]", "copy": {"name": "jobs", "count": 3},
           "dependsOn": ["jc"], "properties": "[if(equals(copyIndex(), parameters('broken')), json('{\"action\": {\"type\": \"Http\", \"request\": {\"uri\": \"ftp://x\", \"method\": \"GET\"}}}'), json('{\"action\": {\"type\": \"Http\", \"request\": {\"uri\": \"https://example.org/\", \"method\": \"GET\"}}, \"state\": \"Disabled\"}'))]"}  # fmt: skip
    template = {"parameters": {"broken": {"type": "int", "defaultValue": 1}},
                "resources": [{"type": "Microsoft.Scheduler/jobCollections", "apiVersion": "2016-03-01",
                               "name": "jc", "location": "West Europe", "resources": [job]}]}  # fmt: skip
    failed = import_into(api, group, template=template)
    assert failed.status_code == 400, failed.text
    report = failed.json()
    assert report["status"] == "Failed" and report["error"]["code"] == "BadRequest"
    assert [each["outcome"] for each in report["resources"]] == ["Created", "Created", "Failed", "NotApplied"]
    assert "uri" in report["resources"][2]["reason"]
    converged = import_into(api, group, template=template, parameters={"broken": {"value": -1}})
    assert converged.status_code == 200, converged.text
    assert [each["outcome"] for each in converged.json()["resources"]] == ["Unchanged", "Unchanged", "Created", "Created"]


BAD_TEMPLATES = [
    ("not-an-object", [], "template: must be an object, not an array"),
    ("no-resources", {"parameters": {}}, "the template, property 'resources'"),
    ("unknown-function", {"resources": [{"type": "Microsoft.Scheduler/jobCollections", "name": "[frobnicate('x')]"}]},
     "resources[0], property 'name', expression '[frobnicate('x')]': uses the function 'frobnicate'"),
    ("unparsable", {"resources": [{"type": "Microsoft.Scheduler/jobCollections", "name": "jc", "location": "[concat('a',]"}]},
     "resource 'jc' (Microsoft.Scheduler/jobCollections), property 'location', expression '[concat('a',]': is not a valid expression"),
    ("missing-parameter", {"parameters": {"p": {"type": "string"}}, "resources": [{"type": "Microsoft.Scheduler/jobCollections", "name": "[parameters('p')]"}]},
     "parameters, property 'p': has no default value and none was given"),
    ("missing-parameters-all-named", {"parameters": {"a": {"type": "string"}, "b": {"type": "int", "defaultValue": 1},
                                                     "c": {"type": "securestring"}, "unused": {"type": "bool"}},
                                      "resources": [{"type": "Microsoft.Scheduler/jobCollections", "name": "[parameters('a')]"}]},
     "parameters: 3 have no default value and none was given: 'a', 'c', 'unused'"),
    ("unknown-dependency", {"resources": [{"type": "Microsoft.Scheduler/jobCollections", "name": "jc", "location": "x", "dependsOn": ["nowhere"]}]},
     "resource 'jc' (Microsoft.Scheduler/jobCollections), property 'dependsOn[0]', expression 'nowhere': names no resource"),
    ("a-circle", {"resources": [{"type": "Microsoft.Scheduler/jobCollections", "name": "a", "location": "x", "dependsOn": ["b"]},
                                {"type": "Microsoft.Scheduler/jobCollections", "name": "b", "location": "x", "dependsOn": ["a"]}]},
     "depend on each other in a circle"),
]  # fmt: skip


@pytest.mark.parametrize(("template", "said"), [case[1:] for case in BAD_TEMPLATES], ids=[c[0] for c in BAD_TEMPLATES])
def test_every_template_error_is_a_400_naming_where(api: httpx.Client, template: Any, said: str) -> None:
    answer = import_into(api, new_group(), template=template, location="West Europe")
    assert answer.status_code == 400, answer.text
    assert said in answer.json()["error"]["message"]


def test_a_template_reading_the_groups_location_without_one_says_to_give_it(api: httpx.Client, target: Target) -> None:
    answer = import_into(
        api, new_group(), template=quickstart("scheduler-webapp.json"), whatIf=True,
        parameters={"appSvcPlanName": {"value": "plan"}, "webAppName": {"value": "site"},
                    "jobCollectionName": {"value": "webjobs"}, "jobName": {"value": "ping"}},
        expressionValues={SITE: {"hostNames": [f"127.0.0.1:{target.port}"]}},
    )  # fmt: skip
    assert answer.status_code == 400
    [detail] = answer.json()["error"]["details"]
    assert detail["target"] == "location"
    assert detail["message"].startswith("the template reads resourceGroup().location")
