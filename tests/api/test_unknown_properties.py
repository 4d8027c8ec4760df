"""Properties the API does not know are ignored, as ARM resource providers ignore them, and
named in a Warning header (docs/behaviour.md#unknown-properties)."""

from __future__ import annotations

import httpx
import pytest

from shared.domain.job_definition import JobBody
from shared.domain.wire import ignored_properties
from tests.api.test_jobs import collection_path, http_job, job_path, new_collection, unique
from tests.conftest import Service

# (id, job properties sent, the warning expected, where the property belongs)
IGNORED = [
    ("retry-policy-inside-the-request",  # as the scheduler-webapp quickstart template sends it
     {"action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET",
                                              "retryPolicy": {"retryType": "None"}}}},
     "properties.action.request.retryPolicy was ignored; it belongs in properties.action"),
    ("error-action-beside-the-action",
     {"errorAction": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}},
     "properties.errorAction was ignored; it belongs in properties.action"),
    ("a-typo", {"recurence": {"frequency": "Hour"}}, "properties.recurence was ignored"),
    ("deep-in-a-list",
     {"recurrence": {"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Monday", "nth": 1}]}}},
     "properties.recurrence.schedule.monthlyOccurrences[0].nth was ignored"),
]  # fmt: skip


@pytest.mark.parametrize(("sent", "warning"), [case[1:] for case in IGNORED], ids=[c[0] for c in IGNORED])
def test_each_unknown_property_is_named_with_where_it_belongs(sent: dict[str, object], warning: str) -> None:
    body = http_job(**sent)
    assert [each.warning() for each in ignored_properties(JobBody, body)] == [warning]
    JobBody.model_validate(body)  # and the body is accepted


def test_known_properties_in_headers_and_status_are_never_unknown() -> None:
    body = http_job(status={"anything": 1})
    body["properties"]["action"]["request"]["headers"] = {"retryPolicy": "x"}
    assert ignored_properties(JobBody, body) == []


def test_a_job_with_the_webapp_templates_retry_policy_is_saved_and_the_answer_warns(api: httpx.Client, service: Service) -> None:
    collection, name = new_collection(api), unique("job")
    body = http_job(**IGNORED[0][1])
    saved = api.put(job_path(collection, name), json=body)
    assert saved.status_code == 201, saved.text
    assert saved.headers["Warning"] == f'299 - "{IGNORED[0][2]}"'
    assert "retryPolicy" not in saved.json()["properties"]["action"]["request"]
    assert "Warning" not in api.get(job_path(collection, name)).headers
    assert IGNORED[0][2] in service.log.read_text()  # and the service's log says so


def test_a_patch_warns_about_what_it_ignores_and_keeps_the_rest(api: httpx.Client) -> None:
    collection, name = new_collection(api), unique("job")
    assert api.put(job_path(collection, name), json=http_job()).status_code == 201
    patched = api.patch(job_path(collection, name), json={"properties": {"state": "Disabled", "colour": "red"}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["properties"]["state"] == "disabled"
    assert patched.headers["Warning"] == '299 - "properties.colour was ignored"'


def test_known_properties_keep_their_checks_beside_unknown_ones(api: httpx.Client) -> None:
    refused = put_with(api, http_job(recurrence={"frequency": "Fortnight"}, colour="red"))
    assert refused.status_code == 400
    assert "properties.recurrence.frequency" in refused.json()["error"]["message"]


def test_a_collection_with_an_unknown_property_is_saved_with_a_warning(api: httpx.Client) -> None:
    name = unique("jc")
    saved = api.put(collection_path(name), json={"location": "West Europe", "propertees": {}})
    assert saved.status_code == 201, saved.text
    assert saved.headers["Warning"] == '299 - "propertees was ignored"'


def test_many_unknown_properties_are_named_up_to_a_bound_and_quoted_safely(api: httpx.Client) -> None:
    extras = {f'odd"name\\{n}\n': n for n in range(30)}
    saved = put_with(api, http_job(**extras))
    assert saved.status_code == 201, saved.text
    warning = saved.headers["Warning"]
    assert warning.count("299 - ") == 21 and "and 10 more were ignored" in warning
    assert '\\"name\\\\0?' in warning


def put_with(api: httpx.Client, body: dict[str, object]) -> httpx.Response:
    return api.put(job_path(new_collection(api), unique("job")), json=body)
