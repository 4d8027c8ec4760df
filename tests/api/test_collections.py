"""Job collections over HTTP, against the local host on Azurite (docs/behaviour.md#resources, #collections)."""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from shared.api.arm import _nesting_within
from shared.domain.collection import MaxRecurrence, Quota
from shared.domain.ids import CollectionId
from shared.domain.schedule.recurrence import Frequency
from shared.storage.table_store import table_storage_from_connection_string
from tests.conftest import Service

SUBSCRIPTION = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"


def collection_path(
    name: str, group: str = "scheduler-rg", subscription: str = SUBSCRIPTION
) -> str:
    return (
        f"/subscriptions/{subscription}/resourceGroups/{group}"
        f"/providers/Microsoft.Scheduler/jobCollections/{name}"
    )


def unique(prefix: str = "jc") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create(
    api: httpx.Client, name: str, body: dict[str, Any] | None = None, **path: str
) -> httpx.Response:
    response = api.put(collection_path(name, **path), json=body or {"location": "West Europe"})
    assert response.status_code == 201, response.text
    return response


def put_job(
    api: httpx.Client, collection: str, frequency: str = "Hour", name: str | None = None
) -> httpx.Response:
    """A job recurring once every `frequency`, in `collection` of the default resource group."""
    body = {"properties": {"action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}},
                           "recurrence": {"frequency": frequency, "interval": 1}}}  # fmt: skip
    return api.put(f"{collection_path(collection)}/jobs/{name or unique('job')}", json=body)


def too_often(response: httpx.Response) -> bool:
    """Whether `response` refuses a job for recurring more often than its collection allows."""
    return (
        response.status_code == 409
        and "quota maxRecurrence allows (once every 1 hour)" in response.text
    )


def stored_quota(service: Service, name: str) -> Quota:
    """The quota the jobs of a collection live under, from the collection as stored."""
    store = table_storage_from_connection_string(service.storage)
    collection = CollectionId.of(SUBSCRIPTION, "scheduler-rg", name)
    return store.collections.existing_collection(collection).document.effective_quota


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
        },  # no quota sent, none shown
    }
    assert created.json() == expected
    assert created.headers["ETag"]
    assert created.headers["x-ms-request-id"]
    fetched = api.get(collection_path(name))
    assert (fetched.status_code, fetched.json()) == (200, expected)
    assert fetched.headers["ETag"] == created.headers["ETag"]


def test_a_collection_without_tags_has_no_tags_key(api: httpx.Client) -> None:
    name = unique()
    assert "tags" not in create(api, name).json()
    assert "tags" not in api.get(collection_path(name)).json()
    assert "tags" not in create(api, unique(), {"location": "West Europe", "tags": {}}).json()


@pytest.mark.parametrize(
    ("location", "answered"),
    [("westus", "West US"), ("WestUS", "West US"), ("West US", "West US"), ("northeurope", "North Europe"),
     ("eastus2", "East US 2"), ("Mars Central", "Mars Central")],
)  # fmt: skip
def test_the_location_is_answered_by_its_display_name(
    api: httpx.Client, location: str, answered: str
) -> None:
    name = unique()
    assert create(api, name, {"location": location}).json()["location"] == answered
    assert api.get(collection_path(name)).json()["location"] == answered
    patched = api.patch(collection_path(name), json={"location": "westeurope"})
    assert patched.json()["location"] == "West Europe"


@pytest.mark.parametrize(
    ("sku", "jobs", "frequency"),
    [
        ("free", 5, "Hour"),
        ("STANDARD", 50, "Minute"),
        ("P10Premium", 50, "Minute"),
        ("p20premium", 1000, "Minute"),
    ],
)
def test_each_sku_brings_its_quota_without_showing_it(
    api: httpx.Client, service: Service, sku: str, jobs: int, frequency: str
) -> None:
    name = unique()
    body = create(
        api, name, {"location": "West Europe", "properties": {"sku": {"name": sku}}}
    ).json()
    assert "quota" not in body["properties"]
    assert "quota" not in api.get(collection_path(name)).json()["properties"]
    assert stored_quota(service, name) == Quota(
        max_job_count=jobs, max_recurrence=MaxRecurrence(frequency=Frequency(frequency.lower()))
    )
    # The SKU's maxRecurrence applies although the collection does not show it.
    minutely = put_job(api, name, "Minute")
    assert too_often(minutely) if frequency == "Hour" else minutely.status_code == 201
    assert put_job(api, name, "Hour").status_code == 201


def test_a_free_collection_shows_no_quota_but_holds_only_five_jobs(api: httpx.Client) -> None:
    name = unique()
    create(api, name, {"location": "West Europe", "properties": {"sku": {"name": "Free"}}})
    for _ in range(5):
        assert put_job(api, name).status_code == 201
    sixth = put_job(api, name)
    assert sixth.status_code == 409
    assert "already holds 5 jobs, its quota maxJobCount" in sixth.json()["error"]["message"]
    assert "quota" not in api.get(collection_path(name)).json()["properties"]


def test_a_collection_quota_overrides_the_sku_default_and_shows_only_what_was_sent(
    api: httpx.Client, service: Service
) -> None:
    name = unique()
    body = create(
        api, name,
        {"location": "West Europe", "properties": {"sku": {"name": "Free"}, "quota": {"maxJobCount": 2}}},
    ).json()  # fmt: skip
    assert body["properties"]["quota"] == {"maxJobCount": 2}
    assert api.get(collection_path(name)).json()["properties"]["quota"] == {"maxJobCount": 2}
    assert stored_quota(service, name) == Quota(
        max_job_count=2, max_recurrence=MaxRecurrence(frequency=Frequency.HOUR)
    )
    assert [put_job(api, name).status_code for _ in range(3)] == [201, 201, 409]
    assert too_often(put_job(api, name, "Minute"))  # the Free maxRecurrence still applies


def test_put_again_replaces_and_answers_201(api: httpx.Client) -> None:
    name = unique()
    create(
        api,
        name,
        {
            "location": "West Europe",
            "tags": {"a": "1"},
            "properties": {"quota": {"maxJobCount": 3}},
        },
    )
    replaced = api.put(collection_path(name), json={"location": "East US"})
    assert replaced.status_code == 201  # as the real service answered a replacement too
    assert replaced.json()["location"] == "East US"
    assert "tags" not in replaced.json()
    assert "quota" not in replaced.json()["properties"]
    assert api.get(collection_path(name)).json() == replaced.json()


def test_names_are_case_insensitive_and_keep_their_case(api: httpx.Client) -> None:
    name = unique("MixedCase")
    create(api, name, group="Prod-RG")
    fetched = api.get(collection_path(name.upper(), group="prod-rg"))
    assert fetched.status_code == 200
    assert fetched.json()["name"] == name
    assert fetched.json()["id"] == collection_path(name, group="Prod-RG")
    literal_segments_in_any_case = fetched.request.url.path.replace(
        "resourceGroups", "RESOURCEGROUPS"
    )
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
    assert body["properties"]["quota"] == {"maxJobCount": 7}
    more = api.patch(
        collection_path(name),
        json={"properties": {"quota": {"maxRecurrence": {"frequency": "hour"}}}},
    )
    assert more.json()["properties"]["quota"] == {
        "maxJobCount": 7,
        "maxRecurrence": {"frequency": "hour", "interval": 1},
    }
    to_free = api.patch(
        collection_path(name), json={"properties": {"sku": {"name": "Free"}, "state": "Enabled"}}
    )
    assert to_free.status_code == 200
    assert (
        "quota" not in to_free.json()["properties"]
    )  # a new SKU brings its own defaults, not shown
    assert too_often(put_job(api, name, "Minute"))  # the Free maxRecurrence applies
    assert api.patch(collection_path(unique()), json={"tags": {}}).status_code == 404


def test_if_match_is_honoured(api: httpx.Client) -> None:
    name = unique()
    etag = create(api, name).headers["ETag"]
    stale = api.put(
        collection_path(name), json={"location": "East US"}, headers={"If-Match": '"stale"'}
    )
    assert stale.status_code == 412
    assert stale.json()["error"]["code"] == "PreconditionFailed"
    current = api.put(
        collection_path(name), json={"location": "East US"}, headers={"If-Match": etag}
    )
    assert current.status_code == 201
    assert current.headers["ETag"] != etag
    assert (
        api.patch(collection_path(name), json={"tags": {}}, headers={"If-Match": etag}).status_code
        == 412
    )
    assert (
        api.put(
            collection_path(name), json={"location": "x"}, headers={"If-None-Match": "*"}
        ).status_code
        == 412
    )
    assert (
        api.put(
            collection_path(unique()), json={"location": "x"}, headers={"If-Match": "*"}
        ).status_code
        == 412
    )
    assert api.get(collection_path(name)).json()["location"] == "East US"


def test_delete_then_not_found(api: httpx.Client) -> None:
    name = unique()
    create(api, name)
    assert api.delete(collection_path(name)).status_code == 200
    missing = api.get(collection_path(name))
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {
            "code": "ResourceNotFound",
            "message": f"The Resource 'Microsoft.Scheduler/jobcollections/{name}' under resource group "
            "'scheduler-rg' was not found.",
        }
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
    assert in_group.json()["nextLink"] is None
    everything = api.get(f"{base}/providers/Microsoft.Scheduler/jobCollections").json()
    assert sorted(item["name"] for item in everything["value"]) == sorted(
        itertools.chain(*names.values())
    )
    assert everything["nextLink"] is None
    nobody = api.get("/subscriptions/nobody/providers/Microsoft.Scheduler/jobCollections").json()
    assert nobody == {"value": [], "nextLink": None}


def test_disable_and_enable_set_the_collection_state_and_its_jobs(api: httpx.Client) -> None:
    name = unique()
    create(api, name)
    jobs = [unique("job") for _ in range(2)]
    for job in jobs:
        assert put_job(api, name, name=job).status_code == 201
    assert api.post(f"{collection_path(name)}/disable").status_code == 200
    assert api.get(collection_path(name)).json()["properties"]["state"] == "Disabled"
    listed = api.get(f"{collection_path(name)}/jobs").json()["value"]
    assert sorted(job["properties"]["state"] for job in listed) == ["disabled", "disabled"]
    assert api.post(f"{collection_path(name)}/enable").status_code == 200
    assert api.get(collection_path(name)).json()["properties"]["state"] == "Enabled"
    for job in jobs:
        properties = api.get(f"{collection_path(name)}/jobs/{job}").json()["properties"]
        assert properties["state"] == "enabled"
        assert "nextExecutionTime" in properties["status"]


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        (
            {},
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required",
        ),
        (
            {"api-version": "2014-08-01"},
            "InvalidApiVersionParameter",
            "The api-version '2014-08-01' is invalid. The supported versions are '2016-03-01, 2016-01-01'.",
        ),
    ],
)
def test_api_version_is_required(
    service: Any, query: dict[str, str], code: str, message: str
) -> None:
    response = httpx.get(
        service.base_url + collection_path("any"),
        params=query,
        headers={"x-functions-key": service.key},
        timeout=5,
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
        (b"[]", "must be an object, not an array"),
        (b"[" * 100_000 + b"]" * 100_000, "the request body is nested too deeply"),
        (
            b'{"tags": ' + b'{"a": ' * 5_000 + b"1" + b"}" * 5_001,
            "the request body is nested too deeply",
        ),
        (
            b'{"properties": {"sku": {"name": "Gold"}}, "location": "x"}',
            "properties.sku.name: \"Gold\" is not one of 'Free', 'Standard', 'P10Premium' or 'P20Premium'",
        ),
        (b'{"tags": {"a": "1"}}', "location: is required"),
        (
            b'{"location": "x", "properties": {"quota": {"maxJobCount": 0}}}',
            "properties.quota.maxJobCount: 0 is too small: the least allowed is 1",
        ),
    ],
)
def test_bad_bodies_are_400_naming_the_problem(
    api: httpx.Client, body: bytes, message: str
) -> None:
    name = unique()
    response = api.put(
        collection_path(name), content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "BadRequest"
    assert message in response.json()["error"]["message"]
    assert api.get(collection_path(name)).status_code == 404


def test_bad_names_are_400(api: httpx.Client) -> None:
    response = api.put(collection_path("bad.name!"), json={"location": "x"})
    assert response.status_code == 400
    assert (
        "jobCollectionName: 'bad.name!' is not a valid name" in response.json()["error"]["message"]
    )
    group = api.put(collection_path("ok", group="ends-with-dot."), json={"location": "x"})
    assert "resourceGroupName" in group.json()["error"]["message"]


def test_a_body_that_is_not_json_is_415(api: httpx.Client) -> None:
    response = api.put(
        collection_path(unique()), content=b"location=x", headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "UnsupportedMediaType"


# --- deletion racing job writes -----------------------------------------------------------------

RACING_ROUNDS = 10
RACING_WRITERS = 5
PUTS_PER_WRITER = 6


def test_jobs_written_while_their_collection_is_deleted_never_outlive_it(service: Service) -> None:
    """Writers create jobs while their collection is deleted: no job survives the deletion, so a
    collection created again under the name starts empty and holds no more than its quota."""

    def client() -> httpx.Client:
        return httpx.Client(base_url=service.base_url, headers={"x-functions-key": service.key},
                            params={"api-version": "2016-03-01"}, timeout=30.0)  # fmt: skip

    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0).isoformat()

    def job(name: str) -> dict[str, Any]:
        action = {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}
        return {"properties": {"startTime": tomorrow, "action": action,
                               "recurrence": {"frequency": "Day"}}}  # fmt: skip

    free = {"location": "West Europe", "properties": {"sku": {"name": "Free"}}}
    roomy = {
        "location": "West Europe",
        "properties": {"sku": {"name": "Standard"}, "quota": {"maxJobCount": 50}},
    }
    with client() as api:
        for _ in range(RACING_ROUNDS):
            path = collection_path(unique("racing"))
            assert api.put(path, json=roomy).status_code == 201
            first_created = threading.Event()
            answers: list[int] = []

            def writer(number: int, path: str = path, first_created: threading.Event = first_created,
                       answers: list[int] = answers) -> None:  # fmt: skip
                with client() as own:
                    for n in range(PUTS_PER_WRITER):
                        status = own.put(
                            f"{path}/jobs/w{number}-{n}", json=job(f"w{number}-{n}")
                        ).status_code
                        answers.append(status)
                        if status == 201:
                            first_created.set()

            writers = [threading.Thread(target=writer, args=(n,)) for n in range(RACING_WRITERS)]
            for thread in writers:
                thread.start()
            assert first_created.wait(timeout=30)
            assert api.delete(path).status_code == 200
            for thread in writers:
                thread.join(timeout=120)
            assert set(answers) <= {201, 404}, answers  # a write that loses to the deletion: 404

            assert api.put(path, json=free).status_code == 201
            assert api.get(f"{path}/jobs").json()["value"] == [], "jobs outlived their collection"
            created = [
                api.put(f"{path}/jobs/again-{n}", json=job(f"again-{n}")).status_code
                for n in range(6)
            ]
            assert created == [201] * 5 + [409]  # a Free collection's quota: 5 jobs
            assert api.delete(path).status_code == 200


def test_nesting_is_judged_by_one_limit_on_every_python(api: httpx.Client) -> None:
    """600 levels parse on 3.11 and 3.13 alike (both parsers go that deep); 512 is the limit."""
    deep = b'{"tags": ' + b'{"a": ' * 600 + b"1" + b"}" * 601
    response = api.put(
        collection_path(unique()), content=deep, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert "the request body is nested too deeply" in response.json()["error"]["message"]


def test_answers_say_json_in_utf_8_as_arm_does(api: httpx.Client) -> None:
    """The header as ARM sends it, whichever path invokes the function: the Python worker's
    converter writes a charset only for text/* types, so the app writes the header itself."""
    response = api.put(
        collection_path(unique()),
        json={"location": "West Europe", "properties": {"sku": {"name": "Standard"}}},
    )
    assert response.status_code in (200, 201), response.text
    assert response.headers["content-type"] == "application/json; charset=utf-8"


@pytest.mark.parametrize(
    ("body", "most", "within"),
    [
        (b"{}", 1, True),
        (b"[[]]", 1, False),
        (b'{"a": "[[[[ {{ not brackets"}', 1, True),
        (b'{"a": "escaped \\" quote [[[", "b": [1]}', 2, True),
        (b'{"a": "a backslash \\\\", "b": [[1]]}', 2, False),
        ('{"é": [1, {"b": []}]}'.encode("utf-16"), 3, False),
        ('{"é": [1, {"b": []}]}'.encode("utf-16"), 4, True),
        (b"5", 0, True),
    ],
    ids=["empty-object", "two-levels", "brackets-in-text", "escaped-quote", "escaped-backslash", "utf-16-deep", "utf-16", "scalar"],
)
def test_depth_is_read_from_the_text_with_strings_and_escapes_left_out(body: bytes, most: int, within: bool) -> None:
    json.loads(body)  # each is valid JSON, as the check requires
    assert _nesting_within(body, most) is within
