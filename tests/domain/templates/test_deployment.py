"""A template's Scheduler resources in the order they apply (shared/domain/templates/planning.py)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.templates.deployment import Deployment, TemplateError
from shared.domain.templates.planning import plan

COLLECTION, JOB = "Microsoft.Scheduler/jobCollections", "Microsoft.Scheduler/jobCollections/jobs"
ACTION = {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}


def job(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": JOB, "apiVersion": "2016-03-01", "name": name, "properties": {"action": ACTION}, **extra}


def test_top_level_jobs_apply_after_what_they_depend_on_whatever_their_place() -> None:
    template = {"resources": [
        job("[concat('jc/', 'second')]", dependsOn=["[resourceId('Microsoft.Scheduler/jobCollections/jobs', 'jc', 'first')]"]),
        job("jc/first", dependsOn=["[resourceId('Microsoft.Scheduler/jobCollections', 'jc')]"]),
        {"type": COLLECTION, "name": "jc", "location": "West Europe", "properties": {"sku": {"name": "Standard"}}},
        job("other/alone"),  # its collection is not in the template: no dependency to wait for
    ]}  # fmt: skip
    planned = plan(template, Deployment("sub", "rg"))
    assert [r.name for r in planned.resources] == ["jc", "jc/first", "jc/second", "other/alone"]
    assert planned.resources[1].body == {"properties": {"action": ACTION}}


def test_copy_loops_and_conditions_make_and_skip_resources() -> None:
    template = {
        "parameters": {"count": {"type": "int", "defaultValue": 3}},
        "resources": [{"type": COLLECTION, "name": "jc", "location": "x", "resources": [
            {"type": "jobs", "name": "[format('job-{0}', copyIndex(1))]", "copy": {"name": "loop", "count": "[parameters('count')]"},
             "condition": "[not(equals(copyIndex(), 1))]", "properties": {"action": ACTION}},
        ]}],
    }  # fmt: skip
    planned = plan(template, Deployment("sub", "rg", parameters={"count": {"value": 4}}))
    assert [r.name for r in planned.resources] == ["jc", "jc/job-1", "jc/job-3", "jc/job-4"]
    assert [(s.name, s.reason) for s in planned.skipped] == [("jc/job-2", "its condition is false")]


def test_a_property_given_outright_is_not_evaluated() -> None:
    template = {"resources": [job("jc/j", properties={"action": {"type": "Http", "request": {
        "uri": "[reference('site').url]", "method": "GET"}}})]}  # fmt: skip
    values = {"jc/j": {"properties.action.request.uri": "https://given.example/"}}
    planned = plan(template, Deployment("sub", "rg", property_values=values))
    assert planned.resources[0].body["properties"]["action"]["request"]["uri"] == "https://given.example/"
    with pytest.raises(TemplateError, match="propertyValues, property 'jc/nope'"):
        plan(template, Deployment("sub", "rg", property_values=values | {"jc/nope": {}}))


def test_a_template_nested_past_reason_is_refused_not_a_crash() -> None:
    deep: dict[str, Any] = {"action": ACTION}
    for _ in range(5000):
        deep = {"x": deep}
    variables = {f"v{n}": f"[variables('v{n + 1}')]" for n in range(511)} | {"v511": "end"}  # ARM's most
    for template in ({"resources": [job("jc/j", properties=deep)]},
                     {"variables": variables, "resources": [job("[concat('jc/', variables('v0'))]")]}):  # fmt: skip
        with pytest.raises(TemplateError, match="is nested too deeply"):
            plan(template, Deployment("sub", "rg"))
