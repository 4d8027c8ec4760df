"""Jobs that call with the app's managed identity (docs/behaviour.md#http-authentication), through
the ARM API, previewOccurrences, the classic API and the unmodified azure-mgmt-scheduler client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from azure.core.pipeline.policies import HeadersPolicy
from azure.mgmt.scheduler import SchedulerManagementClient, models

from tests.api.test_classic_api import XML_CLOUD_SERVICE, XML_COLLECTION
from tests.api.test_jobs import (
    SUBSCRIPTION,
    collection_path,
    in_a_day,
    job_path,
    new_collection,
    unique,
)
from tests.conftest import Service

VM = ("https://management.azure.com/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/test-vms"
      "/providers/Microsoft.Compute/virtualMachines/build-01/deallocate?api-version=2024-07-01")  # fmt: skip
ARM = "https://management.azure.com/"
CLIENT_ID = "0e6a6a6b-3c0f-4a5e-9f5d-2a7c3b1d9e8f"
AUTHENTICATION = "properties.action.request.authentication"


def identity(**authentication: Any) -> dict[str, Any]:
    return {"type": "ManagedServiceIdentity", "audience": ARM} | authentication


def job(authentication: dict[str, Any], **action: Any) -> dict[str, Any]:
    request = {"uri": VM, "method": "POST", "authentication": authentication}
    return {"properties": {"startTime": in_a_day(), "recurrence": {"frequency": "Day", "schedule": {"hours": [19], "minutes": [0]}},
                           "action": {"type": "Https", "request": request} | action}}  # fmt: skip


@pytest.fixture(scope="module")
def collection(service: Service) -> Iterator[str]:
    with httpx.Client(base_url=service.base_url, headers={"x-functions-key": service.key},
                      params={"api-version": "2016-03-01"}, timeout=10.0) as client:  # fmt: skip
        yield new_collection(client)


def test_a_job_with_the_identity_is_saved_and_read_back_as_sent(
    api: httpx.Client, collection: str
) -> None:
    error_action = {"type": "Http", "request": {"uri": "https://ops.example.org/page", "method": "POST",
                                                "authentication": identity(audience="api://on-call", clientId=CLIENT_ID)}}  # fmt: skip
    path = job_path(collection, unique("stop-vm"))
    created = api.put(path, json=job(identity(), errorAction=error_action))
    assert created.status_code == 201, created.text
    action = api.get(path).json()["properties"]["action"]
    assert action["request"]["authentication"] == {
        "type": "ManagedServiceIdentity",
        "audience": ARM,
    }
    assert action["errorAction"]["request"]["authentication"] == {
        "type": "ManagedServiceIdentity",
        "audience": "api://on-call",
        "clientId": CLIENT_ID,
    }
    # Any case on the way in, the service's spelling on the way out, as for every enum.
    assert api.put(path, json=job(identity(type="managedserviceidentity"))).status_code == 200
    assert (
        api.get(path).json()["properties"]["action"]["request"]["authentication"]["type"]
        == "ManagedServiceIdentity"
    )


REFUSED = [
    ("no-audience", {"type": "ManagedServiceIdentity"},
     f"{AUTHENTICATION}.audience: is required for ManagedServiceIdentity authentication"),
    ("plain-http-audience", identity(audience="http://management.azure.com/"),
     f"{AUTHENTICATION}.audience: is neither an absolute https URI without user-info, query or "
     "fragment (https://management.azure.com/) nor an app ID URI (api://...)"),
    ("relative-audience", identity(audience="management.azure.com"),
     f"{AUTHENTICATION}.audience: is neither an absolute https URI"),
    ("empty-app-id-uri", identity(audience="api://"), f"{AUTHENTICATION}.audience: is neither"),
    ("audience-with-query", identity(audience="https://vault.azure.net/?x=1"), f"{AUTHENTICATION}.audience: "),
    ("client-id-not-a-guid", identity(clientId="my-identity"),
     f"{AUTHENTICATION}.clientId: 'my-identity' is not a GUID: it is the client id of a user-assigned managed identity"),
    ("client-id-not-a-string", identity(clientId=7), f"{AUTHENTICATION}.clientId: must be a string, not 7"),
    ("a-secret-along", identity(secret="s3cr3t-value"),
     f"{AUTHENTICATION}.secret: does not go with ManagedServiceIdentity authentication, which takes only audience and clientId"),
    ("a-tenant-along", identity(tenant="contoso.onmicrosoft.com"), f"{AUTHENTICATION}.tenant: does not go with"),
    # Tokens that would read the app's own storage, where every job's secrets are.
    ("storage-audience", identity(audience="https://storage.azure.com/"),
     f"{AUTHENTICATION}.audience: is a storage audience: its token would reach the storage the app's identity may read"),
    ("account-blob-audience", identity(audience="https://schedstore.blob.core.windows.net"),
     f"{AUTHENTICATION}.audience: is a storage audience"),
    ("account-table-audience", identity(audience="https://SchedStore.table.core.windows.net/"),
     f"{AUTHENTICATION}.audience: is a storage audience"),
    ("private-link-queue-audience", identity(audience="https://schedstore.privatelink.queue.core.windows.net/"),
     f"{AUTHENTICATION}.audience: is a storage audience"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("authentication", "message"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
def test_what_the_identity_cannot_use_is_400_naming_the_field(
    api: httpx.Client, collection: str, authentication: dict[str, Any], message: str
) -> None:
    path = job_path(collection, unique("refused"))
    response = api.put(path, json=job(authentication))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "BadRequest"
    assert message in response.json()["error"]["message"]
    assert "s3cr3t" not in response.text
    assert api.get(path).status_code == 404
    # The errorAction is held to the same rules, under its own path.
    error_action = {
        "type": "Http",
        "request": {
            "uri": "https://ops.example.org/",
            "method": "GET",
            "authentication": authentication,
        },
    }
    refused = api.put(path, json=job(identity(), errorAction=error_action))
    assert refused.status_code == 400, refused.text
    assert (
        message.replace("action.request", "action.errorAction.request")
        in refused.json()["error"]["message"]
    )
    # And so is a preview, which saves nothing.
    preview = api.post(
        f"{collection_path(collection)}/previewOccurrences", json=job(authentication)
    )
    assert preview.status_code == 400, preview.text
    assert message in preview.json()["error"]["message"]


def test_a_preview_of_a_job_with_the_identity_lists_its_evenings(
    api: httpx.Client, collection: str
) -> None:
    preview = api.post(
        f"{collection_path(collection)}/previewOccurrences",
        params={"count": 3},
        json=job(identity(clientId=CLIENT_ID)),
    )
    assert preview.status_code == 200, preview.text
    assert [run[11:16] for run in preview.json()["value"]] == ["19:00"] * 3


def test_the_official_sdk_still_reads_a_job_that_uses_the_identity(
    service: Service, api: httpx.Client, collection: str
) -> None:
    """azure-mgmt-scheduler knows only the 2016-03-01 types: it reads the authentication as its
    base class, and everything else of the job as usual."""
    name = unique("sdk-reads")
    assert (
        api.put(job_path(collection, name), json=job(identity(clientId=CLIENT_ID))).status_code
        == 201
    )
    with SchedulerManagementClient(credential=object(), subscription_id=SUBSCRIPTION, base_url=service.base_url,
                                   authentication_policy=HeadersPolicy({"x-functions-key": service.key}),
                                   retry_total=0) as client:  # fmt: skip
        read = client.jobs.get("jobs-rg", collection, name)
        listed = [each.name for each in client.jobs.list("jobs-rg", collection)]
    # It warns "Subtype value ManagedServiceIdentity has no mapping, use base class", and reads on.
    assert read.name == f"{collection}/{name}"  # as the real service named a job
    request = read.properties.action.request
    assert (request.uri, request.method) == (VM, "POST")
    # The base class, whose type the SDK leaves empty: it refuses to send such a job back
    # ("HttpAuthentication.type can not be None") rather than drop the authentication.
    assert type(request.authentication) is models.HttpAuthentication
    assert read.properties.recurrence.schedule.hours == [19]
    assert read.name in listed


def test_the_classic_api_takes_the_identity_too(service: Service) -> None:
    with httpx.Client(base_url=f"{service.base_url}/{unique('classic')}", timeout=10.0,
                      headers={"x-functions-key": service.key, "x-ms-version": "2014-10-01"}) as classic:  # fmt: skip
        assert (
            classic.put(
                "/cloudservices/cs",
                content=XML_CLOUD_SERVICE.format(label="l", region="West Europe"),
            ).status_code
            == 202
        )
        assert classic.put("/cloudservices/cs/resources/scheduler/jobCollections/jc",
                           content=XML_COLLECTION.format(plan="Standard", quota="")).status_code == 202  # fmt: skip
        jobs, version = (
            "/cloudservices/cs/resources/scheduler/~/jobCollections/jc/jobs",
            {"api-version": "2014-04-01"},
        )
        saved = classic.put(
            f"{jobs}/stop-vm", params=version, json=job(identity(clientId=CLIENT_ID))["properties"]
        )
        assert saved.status_code == 201, saved.text
        authentication = classic.get(f"{jobs}/stop-vm", params=version).json()["action"]["request"][
            "authentication"
        ]
        assert authentication == {
            "type": "ManagedServiceIdentity",  # an authentication type keeps ARM's spelling there
            "audience": ARM,
            "clientId": CLIENT_ID,
        }
        refused = classic.put(
            f"{jobs}/bad", params=version, json=job(identity(clientId="nope"))["properties"]
        )
        assert refused.status_code == 400
        assert "clientId" in refused.text


def test_the_openapi_document_offers_the_type(service: Service) -> None:
    document = httpx.get(f"{service.base_url}/openapi.json", timeout=10.0).json()
    assert (
        "ManagedServiceIdentity"
        in document["components"]["schemas"]["HttpAuthenticationType"]["enum"]
    )
    described = document["components"]["schemas"]["HttpAuthentication"]["description"]
    assert "ManagedServiceIdentity (an extension) takes `audience`" in " ".join(described.split())


@pytest.mark.parametrize("audience", ["https://management.azure.com/\ud800", "\ud800 management"], ids=["in-the-path", "alone"])
def test_an_audience_that_cannot_be_sent_is_400_not_a_fault(api: httpx.Client, collection: str, audience: str) -> None:
    body = json.dumps(job(identity(audience=audience))).encode()  # the surrogate travels escaped
    response = api.put(job_path(collection, unique("surrogate")), content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert f"{AUTHENTICATION}.audience: " in response.json()["error"]["message"]


def test_a_management_token_goes_only_to_the_management_endpoint(
    api: httpx.Client, collection: str
) -> None:
    """H3: a management token can list the app's storage keys; only the endpoint it is for
    receives it."""
    elsewhere = job(identity())
    elsewhere["properties"]["action"]["request"]["uri"] = "https://ops.example.org/hook"
    path = job_path(collection, unique("arm-elsewhere"))
    refused = api.put(path, json=elsewhere)
    assert refused.status_code == 400, refused.text
    assert (
        f"{AUTHENTICATION}.audience: is the Azure Resource Manager audience, whose token goes "
        "only to the management endpoint"
    ) in refused.json()["error"]["message"]
    assert "not to ops.example.org" in refused.text
    # At the management endpoint it is what it is for; moved elsewhere by a PATCH, refused.
    assert api.put(path, json=job(identity())).status_code == 201
    moved = {"properties": {"action": {"request": {"uri": "https://ops.example.org/hook"}}}}
    assert api.patch(path, json=moved).status_code == 400
    classic_spelling = job(identity(audience="https://management.core.windows.net/"))
    classic_spelling["properties"]["action"]["request"]["uri"] = "https://ops.example.org/hook"
    assert api.put(path, json=classic_spelling).status_code == 400


@pytest.mark.parametrize(
    "audience",
    ["https://ops:Aud-Pass-1@vault.azure.net/?sig=Aud-Sig-2", "http://ops:Aud-Pass-1@vault.azure.net/?sig=Aud-Sig-2",
     "https://vault.azure.net/?sv=1&sig=Aud-Sig-2", "api://ops:Aud-Pass-1@ x?sig=Aud-Sig-2"],
    ids=["user-info-and-sig", "plain-http", "sas-query", "app-id-with-a-space"],
)  # fmt: skip
def test_a_refused_audience_is_not_quoted(api: httpx.Client, collection: str, audience: str) -> None:
    """What stands in a malformed audience may be a key: the 400 says what is wrong, not what was sent."""
    response = api.put(job_path(collection, unique("quoted")), json=job(identity(audience=audience)))
    assert response.status_code == 400, response.text
    assert f"{AUTHENTICATION}.audience: is neither" in response.json()["error"]["message"]
    assert "Aud-Pass-1" not in response.text
    assert "Aud-Sig-2" not in response.text
