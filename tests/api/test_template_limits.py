"""Template import from outside, hardened (docs/security.md#template-limits): ARM's limits
refused as 400 InvalidTemplate before anything is expanded, no Python error answered as a 500,
secure values never shown, and what-if never saying whether a guessed secret is the stored one."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.test_templates import import_into, new_group, outcomes
from tests.targets import Target

COLLECTION = "Microsoft.Scheduler/jobCollections"
SECRET = "TOPSECRET-PW-42"


def refused(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 400, answer.text[:2000]
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == "InvalidTemplate"
    return error


def test_the_nested_copy_bomb_is_refused_before_it_is_expanded(api: httpx.Client) -> None:
    inner = {
        "type": "child",
        "name": "[string(copyIndex('b'))]",
        "copy": {"name": "b", "count": 800},
    }
    outer = {"type": "Microsoft.Web/sites", "name": "[string(copyIndex('a'))]", "copy": {"name": "a", "count": 800},
             "resources": [inner]}  # fmt: skip
    error = refused(import_into(api, new_group(), template={"resources": [outer]}, whatIf=True))
    assert error["message"].startswith(
        "resources[0].resources[0], property 'copy.count': brings the template to 640,800 resources counting copies"
    )
    assert error["additionalInfo"][0]["info"]["property"] == "copy.count"


def test_an_expression_longer_than_arm_allows_is_refused(api: httpx.Client) -> None:
    name = "[concat('" + "a" * 3_000_000 + "')]"  # the 3 MB expression
    template = {"resources": [{"type": COLLECTION, "name": name, "location": "West Europe"}]}
    error = refused(import_into(api, new_group(), template=template, whatIf=True))
    assert "is an expression of 3,000,010 characters; ARM allows at most 24,576" in error["message"]


def test_a_python_error_inside_evaluation_is_a_400_naming_the_expression(api: httpx.Client) -> None:
    template = {
        "resources": [{"type": COLLECTION, "name": "jc", "location": "[string(split('abc', ''))]"}]
    }
    error = refused(import_into(api, new_group(), template=template, whatIf=True))
    assert "property 'location', expression '[string(split('abc', ''))]'" in error["message"]


def secret_job(target: Target) -> dict[str, Any]:
    """A template whose job authenticates with a securestring parameter."""
    job = {"type": "jobs", "name": "guarded", "dependsOn": ["jc"], "properties": {
        "recurrence": {"frequency": "Hour", "interval": 1},
        "action": {"type": "Http", "request": {
            "uri": target.url("/guarded"), "method": "GET",
            "authentication": {"type": "Basic", "username": "u", "password": "[parameters('password')]"}}}}}  # fmt: skip
    return {"parameters": {"password": {"type": "securestring"}},
            "resources": [{"type": COLLECTION, "name": "jc", "location": "West Europe", "resources": [job]}]}  # fmt: skip


def test_what_if_never_says_whether_a_guessed_secret_is_the_stored_one(
    api: httpx.Client, target: Target
) -> None:
    group, template = new_group(), secret_job(target)
    applied = import_into(api, group, template=template, parameters={"password": {"value": SECRET}})
    assert applied.status_code == 200, applied.text
    answers = []
    for guess in (SECRET, "wrong-guess"):
        answer = import_into(
            api, group, template=template, parameters={"password": {"value": guess}}, whatIf=True
        )
        assert answer.status_code == 200, answer.text
        report = answer.json()
        for each in report["resources"]:
            each.pop("firstRun", None)  # when it is asked, not what the secret is
        answers.append(report)
    assert answers[0] == answers[1]
    job = next(each for each in answers[0]["resources"] if each["name"] == "jc/guarded")
    assert job["outcome"] == "Updated"
    assert job["reason"].startswith("secret not compared")
    assert outcomes(answers[0])[f"{COLLECTION} jc"] == "Unchanged"


def test_a_rule_that_quotes_what_it_refuses_never_shows_a_secure_value(
    api: httpx.Client, target: Target
) -> None:
    template = secret_job(target)
    template["resources"][0]["resources"][0]["properties"]["state"] = "[parameters('password')]"
    answer = import_into(
        api, new_group(), template=template, parameters={"password": {"value": SECRET}}
    )
    assert answer.status_code == 400, answer.text
    assert "properties.state" in answer.json()["error"]["message"]
    assert SECRET not in answer.text


def test_an_allowed_values_mismatch_never_shows_a_secure_value(api: httpx.Client) -> None:
    template = {"parameters": {"password": {"type": "securestring", "allowedValues": ["other"]}},
                "resources": [{"type": COLLECTION, "name": "[parameters('password')]", "location": "West Europe"}]}  # fmt: skip
    error = refused(
        import_into(api, new_group(), template=template, parameters={"password": {"value": SECRET}})
    )
    assert (
        error["message"]
        == "parameters, property 'password': its value is not one of its allowedValues"
    )
