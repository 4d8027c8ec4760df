"""The one mapping from the errors of the layers below to the API's ARM errors."""

from __future__ import annotations

import json

import azure.functions as func
import pytest

from shared.api.arm import ApiRequest, serve
from shared.api.collection_operations import list_collections_in_subscription
from shared.api.errors import MissingApiVersion, UnsupportedMediaType, arm_error
from shared.domain.ids import CollectionId, JobId
from shared.domain.problems import InvalidRequest, Refused
from shared.services import Services
from shared.storage.errors import EtagMismatch, ModifiedConcurrently, NotFound, QuotaExceeded

# The recorded wording: the job's own, and the ARM gateway's for a collection.
NIGHTLY = JobId.of(CollectionId.of("00000000-0000-0000-0000-000000000000", "rg", "jc"), "nightly")


@pytest.mark.parametrize(
    ("failure", "status", "code", "message"),
    [
        (InvalidRequest.because("properties.action", "is required"), 400, "BadRequest", "properties.action: is required"),
        (Refused("The job 'x' is Completed, a final state"), 409, "Conflict", "The job 'x' is Completed, a final state"),
        (NotFound(NIGHTLY), 404, "NotFound", "Job 'nightly' cannot be found."),
        (NotFound(NIGHTLY.collection), 404, "ResourceNotFound",
         "The Resource 'Microsoft.Scheduler/jobcollections/jc' under resource group 'rg' was not found."),
        (ModifiedConcurrently("job"), 409, "Conflict", "The job is being changed by other requests; try again."),
        (EtagMismatch(), 412, "PreconditionFailed", "The resource has changed since it was read: its ETag does not match If-Match."),
        (QuotaExceeded(5), 409, "Conflict", "The job collection already holds 5 jobs, its quota maxJobCount; delete a job or raise the quota."),
    ],
    ids=["invalid", "refused", "job-not-found", "collection-not-found", "modified-concurrently", "etag-mismatch", "quota-exceeded"],
)
def test_each_failure_of_a_lower_layer_has_its_arm_error(failure: Exception, status: int, code: str, message: str) -> None:
    error = arm_error(failure)
    assert error is not None
    assert (error.status, error.code, error.message) == (status, code, message)
    if isinstance(failure, InvalidRequest):  # ARM's details name each field, for a form
        detail = {"code": code, "target": "properties.action", "message": "is required"}
        assert error.envelope == {"error": {"code": code, "message": message, "details": [detail]}}
    else:
        assert error.envelope == {"error": {"code": code, "message": message}}


def test_arm_errors_pass_through_and_faults_of_our_own_have_none() -> None:
    missing = MissingApiVersion(["2016-03-01"])
    assert arm_error(missing) is missing
    assert arm_error(KeyError("definition")) is None  # a bug: answered as a 500 with a request id


def test_services_that_cannot_be_built_are_answered_in_the_arm_envelope() -> None:
    def unreachable_storage() -> Services:
        raise ConnectionError("storage unreachable")

    request = func.HttpRequest("GET", "http://localhost/subscriptions/s/providers/Microsoft.Scheduler/jobCollections",
                               params={"api-version": "2016-03-01"}, route_params={"subscriptionId": "s"}, body=b"")  # fmt: skip
    response = serve(request, list_collections_in_subscription, unreachable_storage)
    assert response.status_code == 500
    request_id = response.headers["x-ms-request-id"]
    assert json.loads(response.get_body()) == {"error": {"code": "InternalServerError", "message": f"Request {request_id} failed."}}
    missing_version = func.HttpRequest("GET", "http://localhost/", params={}, body=b"")
    assert serve(missing_version, list_collections_in_subscription, unreachable_storage).status_code == 400


@pytest.mark.parametrize(
    ("content_type", "read"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),  # PowerShell's and the .NET SDK's
        ("Application/JSON ;charset=UTF-8", True),
        ("text/json", True),
        (None, True),  # no Content-Type: read as JSON, as before
        ("application/jsonx", False),
        ("text/html; json", False),
        ("application/merge-patch+json", False),
        ("text/plain", False),
        ("", False),
    ],
    ids=["json", "json-charset", "json-any-case", "text-json", "none", "jsonx", "json-as-parameter", "merge-patch", "text", "empty"],
)
def test_a_body_is_read_only_when_declared_as_json(content_type: str | None, read: bool) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    request = ApiRequest("PUT", "http://localhost/", route={}, query={}, headers=headers, body=b'{"a": 1}')
    if read:
        assert request.json_body() == {"a": 1}
    else:
        with pytest.raises(UnsupportedMediaType) as refused:
            request.json_body()
        assert (refused.value.status, refused.value.code) == (415, "UnsupportedMediaType")
