"""The official client, azure-mgmt-scheduler, unchanged, against this service.

Only its endpoint and its credential are set: the base URL of the local host, and the function
key in place of an Entra ID token (a function key is what the Functions host checks).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.core.pipeline.policies import HeadersPolicy
from azure.mgmt.scheduler import SchedulerManagementClient, models

from shared.domain.attempts import Attempt
from shared.domain.ids import CollectionId, JobId
from shared.storage.table_store import table_storage_from_connection_string
from tests.conftest import Service

SUBSCRIPTION = "sdk-subscription"
GROUP = "sdk-rg"


@pytest.fixture(scope="module")
def client(service: Service) -> Iterator[SchedulerManagementClient]:
    with SchedulerManagementClient(
        credential=object(),  # unused: the authentication policy below sends the function key
        subscription_id=SUBSCRIPTION,
        base_url=service.base_url,
        authentication_policy=HeadersPolicy({"x-functions-key": service.key}),
        retry_total=0,
    ) as scheduler:
        yield scheduler


def http_action() -> models.JobAction:
    return models.JobAction(
        type=models.JobActionType.HTTP,
        request=models.HttpRequest(
            uri="https://example.org/hook", method="POST", body="ping",
            headers={"Content-Type": "text/plain"},
            authentication=models.BasicAuthentication(username="svc", password="hunter2"),
        ),
        retry_policy=models.RetryPolicy(retry_type=models.RetryType.FIXED, retry_interval=timedelta(minutes=2), retry_count=3),
    )  # fmt: skip


def test_collections_and_jobs_round_trip_through_the_sdk(client: SchedulerManagementClient, service: Service) -> None:
    name = f"sdk-{uuid.uuid4().hex[:8]}"
    collection = client.job_collections.create_or_update(
        GROUP, name,
        models.JobCollectionDefinition(
            location="westeurope",
            properties=models.JobCollectionProperties(sku=models.Sku(name=models.SkuDefinition.STANDARD), state="Enabled"),
        ),
    )  # fmt: skip
    # As the real service answered: no quota sent, none shown (Standard's still applies), and the
    # region by its display name.
    assert (collection.name, collection.properties.sku.name, collection.properties.quota) == (name, "Standard", None)
    assert client.job_collections.get(GROUP, name).location == "West Europe"
    assert name in [item.name for item in client.job_collections.list_by_resource_group(GROUP)]
    assert name in [item.name for item in client.job_collections.list_by_subscription()]
    patched = client.job_collections.patch(GROUP, name, models.JobCollectionDefinition(tags={"team": "ops"}))
    assert patched.tags == {"team": "ops"}

    start = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    job = client.jobs.create_or_update(
        GROUP, name, "report",
        models.JobDefinition(properties=models.JobProperties(
            start_time=start, action=http_action(),
            recurrence=models.JobRecurrence(
                frequency=models.RecurrenceFrequency.MONTH, interval=1, count=12,
                schedule=models.JobRecurrenceSchedule(
                    hours=[5], minutes=[15],
                    monthly_occurrences=[models.JobRecurrenceScheduleMonthlyOccurrence(day="Friday", occurrence=1)],
                ),
            ),
        )),
    )  # fmt: skip
    assert job.name == f"{name}/report"
    # The SDK's models type these enums as plain strings, so it hands on the service's own
    # spelling: lower case for these, as the real service answered them to the same SDK.
    assert job.properties.state == "enabled"
    assert job.properties.recurrence.frequency == "month"
    assert job.properties.action.retry_policy.retry_type == "fixed"
    assert job.properties.status.next_execution_time.weekday() == 4  # a Friday
    authentication = job.properties.action.request.authentication
    assert isinstance(authentication, models.BasicAuthentication)
    assert (authentication.username, authentication.password) == ("svc", None)
    assert job.properties.action.retry_policy.retry_interval == timedelta(minutes=2)
    schedule = client.jobs.get(GROUP, name, "report").properties.recurrence.schedule
    assert schedule.monthly_occurrences[0].day == "friday"
    # Known gap: the SDK's model reads "Occurrence" (capital O, as the published API description
    # spells it); our responses use the documented "occurrence", so the SDK sees None.
    # Writing works either way, since names are matched in any case.
    assert schedule.monthly_occurrences[0].occurrence is None

    disabled = client.jobs.patch(GROUP, name, "report", models.JobDefinition(properties=models.JobProperties(state="Disabled")))
    assert disabled.properties.state == "disabled"
    assert disabled.properties.status is None  # a disabled job that never ran, as recorded
    assert [item.name for item in client.jobs.list(GROUP, name)] == [f"{name}/report"]
    store = table_storage_from_connection_string(service.storage)
    job_id = JobId(CollectionId(SUBSCRIPTION, GROUP, name), "report")
    entry_id = Attempt(datetime(2026, 11, 6, 5, 15, tzinfo=UTC)).history_id
    store.history.add(job_id, [(entry_id, {"startTime": "2026-11-06T05:15:01Z", "endTime": "2026-11-06T05:15:02Z",
                                "expectedExecutionTime": "2026-11-06T05:15:00Z", "actionName": "MainAction",
                                "status": "Completed", "message": "OK", "retryCount": 0, "repeatCount": 1})])
    history = list(client.jobs.list_job_history(GROUP, name, "report"))
    assert [(item.properties.status, item.properties.action_name) for item in history] == [("Completed", "MainAction")]
    # After the history is read: the run's own entry may land at any moment once it is accepted.
    client.jobs.run(GROUP, name, "report")

    client.job_collections.begin_disable(GROUP, name).result()
    assert client.job_collections.get(GROUP, name).properties.state == "Disabled"
    client.job_collections.begin_enable(GROUP, name).result()
    assert client.job_collections.get(GROUP, name).properties.state == "Enabled"
    assert client.jobs.get(GROUP, name, "report").properties.state == "enabled"

    client.jobs.delete(GROUP, name, "report")
    with pytest.raises(ResourceNotFoundError):
        client.jobs.get(GROUP, name, "report")
    client.job_collections.begin_delete(GROUP, name).result()
    with pytest.raises(ResourceNotFoundError):
        client.job_collections.get(GROUP, name)


def test_errors_reach_the_sdk_in_the_arm_envelope(client: SchedulerManagementClient) -> None:
    name = f"sdk-{uuid.uuid4().hex[:8]}"
    client.job_collections.create_or_update(GROUP, name, models.JobCollectionDefinition(location="x"))
    with pytest.raises(HttpResponseError) as refused:
        client.jobs.create_or_update(
            GROUP, name, "bad",
            models.JobDefinition(properties=models.JobProperties(
                action=http_action(), recurrence=models.JobRecurrence(frequency="Day", interval=600),
            )),
        )  # fmt: skip
    assert refused.value.status_code == 400
    assert refused.value.error is not None
    assert refused.value.error.code == "BadRequest"
    assert "properties.recurrence.interval: 600 is too long for frequency day" in refused.value.error.message
