"""Job collections over HTTP, against the local host on Azurite (docs/behaviour.md#resources, #collections)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import httpx
import pytest

SUBSCRIPTION = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"


def collection_path(name: str, group: str = "scheduler-rg", subscription: str = SUBSCRIPTION) -> str:
    return (
        f"/subscriptions/{subscription}/resourceGroups/{group}"
        f"/providers/Microsoft.Scheduler/jobCollections/{name}"
    )


def unique(prefix: str = "jc") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create(api: httpx.Client, name: str, body: dict[str, Any] | None = None, **path: str) -> httpx.Response:
    response = api.put(collection_path(name, **path), json=body or {"location": "West Europe"})
    assert response.status_code == 201, response.text
    return response


def test_create_fills_in_defaults_and_get_returns_the_same(api: httpx.Client) -> None:
    name = unique("Nightly")
    created = create(api, name, {"location": "North Europe", "tags": {"team": "data"}})
    expected = {
        "id": collection_path(name),
        "type": "Microsoft.Scheduler/jobCollections",
        "name": name,
        "location": "North Europe",
        "tags": {"team": "data"},
        "properties": {
            "sku": {"name": "Standard"},
            "state": "Enabled",
            "quota": {"maxJobCount": 50, "maxRecurrence": {"frequency": "Minute", "interval": 1}},
        },
    }
    assert created.json() == expected
    assert created.headers["ETag"]
    assert created.headers["x-ms-request-id"]
    fetched = api.get(collection_path(name))
    assert (fetched.status_code, fetched.json()) == (200, expected)
    assert fetched.headers["ETag"] == created.headers["ETag"]


@pytest.mark.parametrize(
    ("sku", "jobs", "frequency"),
    [("free", 5, "Hour"), ("STANDARD", 50, "Minute"), ("P10Premium", 50, "Minute"), ("p20premium", 1000, "Minute")],
)
def test_each_sku_brings_its_quota(api: httpx.Client, sku: str, jobs: int, frequency: str) -> None:
    body = create(api, unique(), {"location": "West Europe", "properties": {"sku": {"name": sku}}}).json()
    assert body["properties"]["quota"] == {
        "maxJobCount": jobs,
        "maxRecurrence": {"frequency": frequency, "interval": 1},
    }


def test_a_collection_quota_overrides_the_sku_default(api: httpx.Client) -> None:
    body = create(
        api, unique(),
        {"location": "West Europe", "properties": {"sku": {"name": "Free"}, "quota": {"maxJobCount": 2}}},
    ).json()  # fmt: skip
    assert body["properties"]["quota"] == {
        "maxJobCount": 2,
        "maxRecurrence": {"frequency": "Hour", "interval": 1},
    }


def test_put_again_replaces_and_answers_200(api: httpx.Client) -> None:
    name = unique()
    create(api, name, {"location": "West Europe", "tags": {"a": "1"}})
    replaced = api.put(collection_path(name), json={"location": "East US"})
    assert replaced.status_code == 200
    assert replaced.json()["location"] == "East US"
    assert replaced.json()["tags"] == {}


def test_names_are_case_insensitive_and_keep_their_case(api: httpx.Client) -> None:
    name = unique("MixedCase")
    create(api, name, group="Prod-RG")
    fetched = api.get(collection_path(name.upper(), group="prod-rg"))
    assert fetched.status_code == 200
    assert fetched.json()["name"] == name
    assert fetched.json()["id"] == collection_path(name, group="Prod-RG")
    literal_segments_in_any_case = fetched.request.url.path.replace("resourceGroups", "RESOURCEGROUPS")
    assert api.get(literal_segments_in_any_case).status_code == 200


def test_patch_merges_what_it_sets(api: httpx.Client) -> None:
    name = unique()
    create(api, name, {"location": "West Europe", "tags": {"a": "1"},
                       "properties": {"quota": {"maxJobCount": 7}}})  # fmt: skip
    patched = api.patch(collection_path(name), json={"properties": {"state": "disabled"}})
    assert patched.status_code == 200
    body = patched.json()
    assert body["properties"]["state"] == "Disabled"
    assert body["tags"] == {"a": "1"}
    assert body["properties"]["quota"]["maxJobCount"] == 7
    to_free = api.patch(collection_path(name), json={"properties": {"sku": {"name": "Free"}}}).json()
    assert to_free["properties"]["quota"] == {"maxJobCount": 5, "maxRecurrence": {"frequency": "Hour", "interval": 1}}
    assert api.patch(collection_path(unique()), json={"tags": {}}).status_code == 404


def test_if_match_is_honoured(api: httpx.Client) -> None:
    name = unique()
    etag = create(api, name).headers["ETag"]
    stale = api.put(collection_path(name), json={"location": "East US"}, headers={"If-Match": '"stale"'})
    assert stale.status_code == 412
    assert stale.json()["error"]["code"] == "PreconditionFailed"
    current = api.put(collection_path(name), json={"location": "East US"}, headers={"If-Match": etag})
    assert current.status_code == 200
    assert current.headers["ETag"] != etag
    assert api.patch(collection_path(name), json={"tags": {}}, headers={"If-Match": etag}).status_code == 412
    assert api.put(collection_path(name), json={"location": "x"}, headers={"If-None-Match": "*"}).status_code == 412
    assert api.put(collection_path(unique()), json={"location": "x"}, headers={"If-Match": "*"}).status_code == 412
    assert api.get(collection_path(name)).json()["location"] == "East US"


def test_delete_then_not_found(api: httpx.Client) -> None:
    name = unique()
    create(api, name)
    assert api.delete(collection_path(name)).status_code == 200
    missing = api.get(collection_path(name))
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {"code": "ResourceNotFound", "message": f"The job collection '{name}' was not found."}
    }
    assert api.delete(collection_path(name)).status_code == 204


def test_list_by_resource_group_and_by_subscription(api: httpx.Client) -> None:
    subscription = str(uuid.uuid4())
    names = {group: [unique() for _ in range(2)] for group in ("rg-one", "rg-one.b", "rg-two")}
    for group, group_names in names.items():
        for name in group_names:
            create(api, name, group=group, subscription=subscription)
    base = f"/subscriptions/{subscription}"
    in_group = api.get(f"{base}/resourceGroups/rg-one/providers/Microsoft.Scheduler/jobCollections")
    assert in_group.status_code == 200
    assert sorted(item["name"] for item in in_group.json()["value"]) == sorted(names["rg-one"])
    everything = api.get(f"{base}/providers/Microsoft.Scheduler/jobCollections").json()["value"]
    assert sorted(item["name"] for item in everything) == sorted(itertools.chain(*names.values()))
    assert api.get("/subscriptions/nobody/providers/Microsoft.Scheduler/jobCollections").json() == {"value": []}


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        ({}, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required"),
        ({"api-version": "2014-08-01"}, "InvalidApiVersionParameter", "The api-version '2014-08-01' is invalid. The supported versions are '2016-03-01'."),
    ],
)
def test_api_version_is_required(service: Any, query: dict[str, str], code: str, message: str) -> None:
    response = httpx.get(
        service.base_url + collection_path("any"), params=query, headers={"x-functions-key": service.key}, timeout=5
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert message in response.json()["error"]["message"]
    assert response.headers["x-ms-request-id"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "the request body is not valid JSON"),
        (b"", "the request body is empty"),
        (b"[]", "must be an object, not []"),
        (b"[" * 100_000 + b"]" * 100_000, "the request body is nested too deeply"),
        (b'{"tags": ' + b'{"a": ' * 5_000 + b"1" + b"}" * 5_001, "the request body is nested too deeply"),
        (b'{"location": "x", "propertees": {}}', "propertees: is not a known property"),
        (b'{"properties": {"sku": {"name": "Gold"}}, "location": "x"}',
         "properties.sku.name: \"Gold\" is not one of 'Free', 'Standard', 'P10Premium' or 'P20Premium'"),
        (b'{"tags": {"a": "1"}}', "location: is required"),
        (b'{"location": "x", "properties": {"quota": {"maxJobCount": 0}}}',
         "properties.quota.maxJobCount: 0 is too small: the least allowed is 1"),
    ],
)
def test_bad_bodies_are_400_naming_the_problem(api: httpx.Client, body: bytes, message: str) -> None:
    name = unique()
    response = api.put(collection_path(name), content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "BadRequest"
    assert message in response.json()["error"]["message"]
    assert api.get(collection_path(name)).status_code == 404


def test_bad_names_are_400(api: httpx.Client) -> None:
    response = api.put(collection_path("bad.name!"), json={"location": "x"})
    assert response.status_code == 400
    assert "jobCollectionName: 'bad.name!' is not a valid name" in response.json()["error"]["message"]
    group = api.put(collection_path("ok", group="ends-with-dot."), json={"location": "x"})
    assert "resourceGroupName" in group.json()["error"]["message"]


def test_a_body_that_is_not_json_is_415(api: httpx.Client) -> None:
    response = api.put(collection_path(unique()), content=b"location=x", headers={"Content-Type": "text/plain"})
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "UnsupportedMediaType"
