"""StorageQueue and Service Bus actions (docs/behaviour.md#message-actions) against real peers: Azurite's queues
with real SAS tokens, and the test AMQP broker (devhost/service_bus.py) through the unmodified
azure-servicebus SDK."""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from azure.storage.queue import QueueClient, QueueSasPermissions, generate_queue_sas

from devhost.azurite import ACCOUNT, ACCOUNT_KEY, free_port, queue_endpoint_template
from shared.actions.service_bus import ServiceBusActions
from shared.actions.storage_queue import StorageQueueActions
from shared.domain.attempts import Attempt, execution_id
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionName
from shared.settings import QUEUE_ENDPOINT_TEMPLATE, SERVICEBUS_ENDPOINT, Settings
from tests.actions import typed
from tests.api.test_jobs import job_path, new_collection
from tests.conftest import SAS_KEY, SAS_KEY_NAME, Service
from tests.pipeline import START, Pipeline
from tests.targets import SilentPeer
from tests.test_service_runs_jobs import history

if TYPE_CHECKING:
    from devhost.service_bus import AmqpBroker

JOB = JobId(CollectionId("sub-actions", "group", "nightly"), "cleanup")
ATTEMPT = Attempt(START)
MESSAGE = "<clean> the \"old\" rows & report ünïcode"
KEY = "dGVzdC1icm9rZXIta2V5LWZvci10aGlzLW1vZHVsZQ=="


@pytest.fixture(scope="module")
def broker() -> Iterator[AmqpBroker]:
    """A broker of this module's own, so that its counts are this module's alone."""
    from devhost.service_bus import AmqpBroker  # noqa: PLC0415 (proton only where a broker runs)

    peer = AmqpBroker({"send-only": KEY}, queues=["orders", "billing/invoices"], topics=["reports"])
    yield peer.start()
    peer.stop()


def sas_for(queue: str, *, key: str = ACCOUNT_KEY, expiry: timedelta = timedelta(hours=1)) -> str:
    return generate_queue_sas(ACCOUNT, queue, key, permission=QueueSasPermissions(add=True),
                              expiry=datetime.now(UTC) + expiry)  # fmt: skip


def new_queue(storage: str) -> QueueClient:
    queue = QueueClient.from_connection_string(storage, f"sq-{uuid.uuid4().hex[:12]}")
    queue.create_queue()
    return queue


def queue_action(queue: str, sas: str, message: str = MESSAGE) -> dict[str, Any]:
    return {"type": "StorageQueue", "queueMessage": {
        "storageAccount": ACCOUNT, "queueName": queue, "sasToken": sas, "message": message}}  # fmt: skip


def bus_action(entity: str, *, topic: bool = False, key: str = KEY, **message: Any) -> dict[str, Any]:
    kind = "Topic" if topic else "Queue"
    body = {"namespace": "contoso-jobs", "topicPath" if topic else "queueName": entity,
            "transportType": "NetMessaging", "message": "nightly run",
            "authentication": {"type": "SharedAccessKey", "sasKeyName": "send-only", "sasKey": key}}  # fmt: skip
    return {"type": f"ServiceBus{kind}", f"serviceBus{kind}Message": body | message}


def storage_actions(storage: str) -> StorageQueueActions:
    return StorageQueueActions(Settings.from_environment({QUEUE_ENDPOINT_TEMPLATE: queue_endpoint_template(storage)}))


def bus_actions(endpoint: str, timeout: float = 10) -> ServiceBusActions:
    return ServiceBusActions(Settings.from_environment({SERVICEBUS_ENDPOINT: endpoint}), timeout=timeout)


def only_message(queue: QueueClient) -> tuple[str, ET.Element]:
    """The one message on the queue, read raw as a receiver would: its text and its XML."""
    [message] = queue.receive_messages(max_messages=32, visibility_timeout=1)
    text = base64.b64decode(message.content).decode("utf-8")
    return text, ET.fromstring(text.encode("utf-8"))


# --- where actions go ---


def test_endpoints_come_from_the_names_and_the_cloud_suffixes() -> None:
    public = Settings.from_environment({})
    assert public.queue_account_url("myStorageAccount") == "https://mystorageaccount.queue.core.windows.net"
    assert public.service_bus_host("mySBNamespace") == ("mysbnamespace.servicebus.windows.net", True)
    china = Settings.from_environment({"SCHEDULER_STORAGE_ENDPOINT_SUFFIX": "core.chinacloudapi.cn",
                                       "SCHEDULER_SERVICEBUS_ENDPOINT_SUFFIX": "servicebus.chinacloudapi.cn"})  # fmt: skip
    assert china.queue_account_url("contoso") == "https://contoso.queue.core.chinacloudapi.cn"
    assert china.service_bus_host("contoso-jobs") == ("contoso-jobs.servicebus.chinacloudapi.cn", True)
    local = Settings.from_environment({QUEUE_ENDPOINT_TEMPLATE: "http://127.0.0.1:10001/{account}",
                                       SERVICEBUS_ENDPOINT: "sb://127.0.0.1:5672/"})  # fmt: skip
    assert local.queue_account_url("devstoreaccount1") == "http://127.0.0.1:10001/devstoreaccount1"
    assert local.service_bus_host("contoso-jobs") == ("127.0.0.1:5672", False)


# --- StorageQueue ---


def test_a_queue_message_arrives_base64_encoded_in_azure_schedulers_envelope(storage: str) -> None:
    queue = new_queue(storage)
    succeeded, said = storage_actions(storage).perform(typed(queue_action(queue.queue_name, sas_for(queue.queue_name))), JOB, ATTEMPT, "westeurope")
    assert succeeded, said
    assert said == f"StorageQueue Action - The message was put on queue '{queue.queue_name}' of storage account '{ACCOUNT}'"
    text, envelope = only_message(queue)
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?><StorageQueueMessage ')
    assert envelope.tag == "StorageQueueMessage"
    fields = {child.tag: child.text for child in envelope}
    assert list(fields) == ["ExecutionTag", "ClientRequestId", "ExpectedExecutionTime", "SchedulerJobId",
                            "SchedulerJobCollectionId", "Region", "Message"]  # fmt: skip
    assert fields["Message"] == MESSAGE  # escaped on the way in, exact on the way out
    assert fields["ExecutionTag"] == execution_id(JOB, ATTEMPT)
    assert fields["ExpectedExecutionTime"] == START.isoformat().replace("+00:00", "Z")
    assert (fields["SchedulerJobId"], fields["SchedulerJobCollectionId"]) == ("cleanup", "nightly")
    assert fields["Region"] == "westeurope"
    assert uuid.UUID(fields["ClientRequestId"])


def test_queue_clients_are_kept_per_queue_and_token(storage: str) -> None:
    queue, actions = new_queue(storage), storage_actions(storage)
    sas = sas_for(queue.queue_name)
    for _ in range(3):
        assert actions.perform(typed(queue_action(queue.queue_name, sas)), JOB, ATTEMPT, "")[0]
    assert len(actions._clients) == 1
    assert len(queue.peek_messages(max_messages=32)) == 3


def test_sends_from_many_threads_at_once_to_one_queue_keep_their_connections(
    storage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """More sends under way than requests' default pool of 10 connections: none is closed and
    opened again for it."""
    queue, actions = new_queue(storage), storage_actions(storage)
    action = queue_action(queue.queue_name, sas_for(queue.queue_name))
    start = threading.Barrier(24)

    def sender(number: int) -> list[bool]:
        start.wait(timeout=10)
        return [actions.perform(typed(action), JOB, ATTEMPT, "")[0] for _ in range(5)]

    with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"), ThreadPoolExecutor(24) as pool:
        sent = [ok for oks in pool.map(sender, range(24)) for ok in oks]
    assert sent == [True] * 120
    assert queue.get_queue_properties().approximate_message_count == 120
    assert not [record.getMessage() for record in caplog.records if "pool is full" in record.getMessage()]


@pytest.mark.parametrize(
    ("sas", "reason"),
    [
        (lambda queue: sas_for(queue, key=base64.b64encode(b"not the account key").decode()), "The SAS token was refused"),
        (lambda queue: sas_for(queue, expiry=-timedelta(minutes=5)), "The SAS token was refused"),
        (lambda queue: "sv=2021-08-06&sig=bm90LWEtc2lnbmF0dXJl", "The SAS token was refused"),
    ],
    ids=["wrong-key", "expired", "malformed"],
)
def test_a_bad_sas_token_is_a_failure_that_does_not_leak_the_token(storage: str, sas: Any, reason: str) -> None:
    queue = new_queue(storage)
    token = sas(queue.queue_name)
    succeeded, said = storage_actions(storage).perform(typed(queue_action(queue.queue_name, token)), JOB, ATTEMPT, "")
    assert not succeeded
    assert said.startswith(f"StorageQueue Action - {reason} for queue '{queue.queue_name}'"), said
    assert "403 AuthenticationFailed" in said
    signature = dict(part.split("=", 1) for part in token.split("&"))["sig"]
    assert signature not in said and token not in said
    assert queue.peek_messages() == []


def test_a_missing_queue_is_a_failure(storage: str) -> None:
    succeeded, said = storage_actions(storage).perform(typed(queue_action("no-such-queue", sas_for("no-such-queue"))), JOB, ATTEMPT, "")
    assert not succeeded
    assert said.startswith(f"StorageQueue Action - There is no queue 'no-such-queue' of storage account '{ACCOUNT}': 404"), said


def test_unreachable_storage_is_a_bounded_failure() -> None:
    settings = Settings.from_environment({QUEUE_ENDPOINT_TEMPLATE: f"http://127.0.0.1:{free_port()}/{{account}}"})
    started = time.monotonic()
    succeeded, said = StorageQueueActions(settings, timeout=2).perform(typed(queue_action("jobs", "sv=1&sig=c2VjcmV0")), JOB, ATTEMPT, "")
    assert not succeeded
    assert said.startswith(f"StorageQueue Action - Storage for queue 'jobs' of storage account '{ACCOUNT}' could not be reached"), said
    assert "c2VjcmV0" not in said
    assert time.monotonic() - started < 15


# --- Service Bus ---


@pytest.mark.parametrize("time_to_live", ["P60D", "10675199.02:48:05.4775807"], ids=["sixty-days", "timespan-max-value"])
def test_a_time_to_live_beyond_what_amqp_carries_fails_every_send(broker: AmqpBroker, time_to_live: str) -> None:
    """Why the API refuses such a timeToLive (tests/api/test_write_validation.py): the header
    holds milliseconds in 32 bits, and the SDK cannot encode more."""
    action = bus_action("orders", brokeredMessageProperties={"timeToLive": time_to_live})
    succeeded, said = bus_actions(broker.endpoint).perform(typed(action), JOB, ATTEMPT)
    assert not succeeded
    assert "unsigned int" in said or "internal error" in said, said


def test_a_queue_message_carries_the_body_and_every_mapped_property(broker: AmqpBroker) -> None:
    properties = {
        "contentType": "application/json", "correlationId": "corr-1", "forcePersistence": True,
        "label": "nightly", "messageId": "msg-1", "partitionKey": "tenant-7", "replyTo": "replies",
        "replyToSessionId": "reply-session", "scheduledEnqueueTimeUtc": "2030-01-01T08:00:00Z",
        "sessionId": "tenant-7", "timeToLive": "PT10M", "to": "billing", "viaPartitionKey": "via-7",
    }  # fmt: skip
    action = bus_action("orders", message='{"run": "nightly"}', brokeredMessageProperties=properties,
                        customMessageProperties={"appname": "FromScheduler", "x-ms-scheduler-jobid": "forged"})  # fmt: skip
    succeeded, said = bus_actions(broker.endpoint).perform(typed(action), JOB, ATTEMPT)
    assert succeeded, said
    assert said == "ServiceBusQueue Action - The message was sent to queue 'orders' of namespace 'contoso-jobs'"
    [received] = broker.wait_for(1, "orders")
    assert received.body == b'{"run": "nightly"}'
    assert received.properties == {
        "message_id": "msg-1", "correlation_id": "corr-1", "content_type": "application/json",
        "subject": "nightly", "reply_to": "replies", "reply_to_group_id": "reply-session", "to": "billing",
        "group_id": "tenant-7", "ttl": 600.0,
    }  # fmt: skip
    assert received.annotations["x-opt-partition-key"] == "tenant-7"
    assert received.annotations["x-opt-via-partition-key"] == "via-7"
    scheduled = received.annotations["x-opt-scheduled-enqueue-time"]  # AMQP timestamp: ms since 1970
    assert int(scheduled) == int(datetime(2030, 1, 1, 8, tzinfo=UTC).timestamp() * 1000)
    assert received.durable is True
    assert received.application_properties["appname"] == "FromScheduler"
    # The occurrence's identity, which a job cannot forge, as with the HTTP action's headers.
    assert received.application_properties["x-ms-scheduler-jobid"] == JOB.arm_id
    assert received.application_properties["x-ms-scheduler-execution-id"] == execution_id(JOB, ATTEMPT)


def test_a_message_without_properties_takes_the_execution_id_as_message_id(broker: AmqpBroker) -> None:
    attempt = Attempt(START + timedelta(hours=1), action=ActionName.ERROR_ACTION, retry=2)
    succeeded, said = bus_actions(broker.endpoint).perform(typed(bus_action("reports", topic=True)), JOB, attempt)
    assert succeeded, said
    assert said == "ServiceBusTopic Action - The message was sent to topic 'reports' of namespace 'contoso-jobs'"
    [received] = broker.wait_for(1, "reports")
    assert received.body == b"nightly run"
    # duplicate detection works; an errorAction's message has an id of its own
    assert received.properties["message_id"] == execution_id(JOB, attempt) + "-error"
    assert received.application_properties["x-ms-scheduler-action"] == "ErrorAction"
    assert received.application_properties["x-ms-scheduler-retry-count"] == "2"
    assert received.durable is False


def test_senders_are_opened_once_and_reused_across_executions(broker: AmqpBroker) -> None:
    actions = bus_actions(broker.endpoint)
    links, tokens, before = broker.sender_links, broker.token_requests, len(broker.received("billing/invoices"))
    for n in range(20):
        attempt = Attempt(START + timedelta(minutes=n))
        assert actions.perform(typed(bus_action("billing/invoices")), JOB, attempt)[0]
    assert len(broker.wait_for(before + 20, "billing/invoices")) == before + 20
    assert broker.sender_links - links == 1
    assert broker.token_requests - tokens == 1
    actions.close()


def test_a_wrong_key_is_refused_and_never_shown(broker: AmqpBroker) -> None:
    wrong = base64.b64encode(b"a key the broker does not have").decode()
    succeeded, said = bus_actions(broker.endpoint).perform(typed(bus_action("orders", key=wrong)), JOB, ATTEMPT)
    assert not succeeded
    assert said == "ServiceBusQueue Action - The shared access key 'send-only' was refused for queue 'orders' of namespace 'contoso-jobs'"
    assert wrong not in said


def test_an_unknown_entity_is_a_failure(broker: AmqpBroker) -> None:
    succeeded, said = bus_actions(broker.endpoint).perform(typed(bus_action("no-such-queue")), JOB, ATTEMPT)
    assert not succeeded
    assert said == "ServiceBusQueue Action - There is no queue 'no-such-queue' of namespace 'contoso-jobs'"


@pytest.mark.timeout(60)
def test_a_broker_that_is_down_is_a_bounded_failure() -> None:
    started = time.monotonic()
    succeeded, said = bus_actions(f"sb://127.0.0.1:{free_port()}", timeout=10).perform(typed(bus_action("orders")), JOB, ATTEMPT)
    assert not succeeded
    assert said == "ServiceBusQueue Action - The namespace of queue 'orders' of namespace 'contoso-jobs' could not be reached"
    assert time.monotonic() - started < 15


@pytest.mark.timeout(60)
def test_a_broker_that_never_answers_is_a_bounded_failure_and_the_sender_is_dropped() -> None:
    silent = SilentPeer()
    actions = bus_actions(silent.endpoint, timeout=2)
    try:
        started = time.monotonic()
        succeeded, said = actions.perform(typed(bus_action("orders")), JOB, ATTEMPT)
        assert not succeeded
        assert said == "ServiceBusQueue Action - Sending to queue 'orders' of namespace 'contoso-jobs' timed out after 2 s"
        assert 2 <= time.monotonic() - started < 10
        assert len(actions._senders) == 0  # the next execution opens a fresh one
    finally:
        silent.stop()


# --- through the execution pipeline: retries, then an errorAction of another type ---


def test_a_failing_queue_action_is_retried_then_its_service_bus_error_action_runs(storage: str, broker: AmqpBroker) -> None:
    pipeline = Pipeline(storage, service_bus=broker.endpoint)
    before = len(broker.received("reports"))
    action = queue_action("missing-queue", sas_for("missing-queue")) | {
        "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30S", "retryCount": 1},
        "errorAction": bus_action("reports", topic=True, message="the nightly job failed"),
    }
    job = pipeline.put_job("queue-then-bus", {"startTime": START.isoformat(), "action": action})
    pipeline.advance(timedelta(minutes=1))
    pipeline.advance(timedelta(seconds=30))
    history = pipeline.history(job)
    assert [(e["actionName"], e["status"], e["retryCount"]) for e in history] == [
        ("MainAction", "Failed", 0), ("MainAction", "Failed", 1), ("ErrorAction", "Completed", 0),
    ]  # fmt: skip
    assert "There is no queue 'missing-queue'" in history[0]["message"]
    assert "sent to topic 'reports'" in history[2]["message"]
    received = broker.wait_for(before + 1, "reports")[before:]
    assert [r.body for r in received] == [b"the nightly job failed"]
    assert received[0].application_properties["x-ms-scheduler-jobid"] == job.arm_id
    status = pipeline.job(job).document.status
    assert (status.execution_count, status.failure_count, status.faulted_count) == (2, 2, 1)


def test_a_service_bus_action_failing_falls_back_to_a_queue_error_action(storage: str, broker: AmqpBroker) -> None:
    pipeline, queue = Pipeline(storage, service_bus=broker.endpoint), new_queue(storage)
    action = bus_action("orders", key=base64.b64encode(b"revoked").decode()) | {
        "retryPolicy": {"retryType": "None"},
        "errorAction": queue_action(queue.queue_name, sas_for(queue.queue_name), message="orders feed is down"),
    }
    job = pipeline.put_job("bus-then-queue", {"startTime": START.isoformat(), "action": action})
    pipeline.advance(timedelta(minutes=1))
    history = pipeline.history(job)
    assert [(e["actionName"], e["status"]) for e in history] == [("MainAction", "Failed"), ("ErrorAction", "Completed")]
    assert "was refused" in history[0]["message"]
    _, envelope = only_message(queue)
    assert envelope.findtext("Message") == "orders feed is down"
    assert envelope.findtext("SchedulerJobId") == "bus-then-queue"
    assert envelope.findtext("Region") == "West Europe"


def test_keys_and_tokens_stay_out_of_history(storage: str, broker: AmqpBroker) -> None:
    pipeline = Pipeline(storage, service_bus=broker.endpoint)
    token, key = sas_for("gone-queue"), base64.b64encode(b"another revoked key").decode()
    action = queue_action("gone-queue", token) | {
        "retryPolicy": {"retryType": "None"}, "errorAction": bus_action("orders", key=key)}
    job = pipeline.put_job("secrets", {"startTime": START.isoformat(), "action": action})
    pipeline.advance(timedelta(minutes=1))
    stored = str(pipeline.history(job))
    assert len(pipeline.history(job)) == 2
    assert token not in stored and key not in stored
    assert dict(p.split("=", 1) for p in token.split("&"))["sig"] not in stored


def test_the_broker_checks_signatures_with_the_sessions_key(service_bus: AmqpBroker) -> None:
    """The session broker, which the local host sends to, refuses any key but its own."""
    actions = bus_actions(service_bus.endpoint)
    own = bus_action("alerts", key=SAS_KEY)
    own["serviceBusQueueMessage"]["authentication"]["sasKeyName"] = SAS_KEY_NAME
    assert actions.perform(typed(own), JOB, ATTEMPT)[0]
    assert not actions.perform(typed(bus_action("alerts", key=KEY)), JOB, ATTEMPT)[0]


# --- in the local host, as in Azure ---


def test_the_service_delivers_queue_and_service_bus_jobs_and_keeps_their_secrets(
    api: httpx.Client, service: Service, service_bus: AmqpBroker, storage: str
) -> None:
    collection, queue = new_collection(api), new_queue(storage)
    token = sas_for(queue.queue_name)
    to_queue = {"properties": {"action": queue_action(queue.queue_name, token, message="hourly pull")}}
    to_topic = {"properties": {"action": {"type": "ServiceBusTopic", "serviceBusTopicMessage": {
        "namespace": "contoso-jobs", "topicPath": "reports", "message": "monthly report",
        "authentication": {"type": "SharedAccessKey", "sasKeyName": SAS_KEY_NAME, "sasKey": SAS_KEY}}}}}  # fmt: skip
    before = len(service_bus.received("reports"))
    assert api.put(job_path(collection, "pull"), json=to_queue).status_code == 201
    assert api.put(job_path(collection, "report"), json=to_topic).status_code == 201
    [received] = service_bus.wait_for(before + 1, "reports")[before:]
    assert received.body == b"monthly report"
    deadline = time.monotonic() + 10
    while not queue.peek_messages() and time.monotonic() < deadline:
        time.sleep(0.05)
    _, envelope = only_message(queue)
    assert envelope.findtext("Message") == "hourly pull"
    assert envelope.findtext("Region") == "West Europe"  # the collection's location
    for name in ("pull", "report"):
        [entry] = history(api, collection, name, 1)
        assert entry["status"] == "Completed", entry
        shown = api.get(job_path(collection, name)).text
        assert "sasToken" not in shown and "sasKey\"" not in shown
    logged = service.log.read_text()
    assert SAS_KEY not in logged
    assert dict(p.split("=", 1) for p in token.split("&"))["sig"] not in logged


def test_one_sender_serves_many_executions_at_once(broker: AmqpBroker) -> None:
    """The executor runs up to 32 executions at a time; they share a sender and none is lost
    (the broker refuses transfers out of order, as Service Bus does)."""
    actions = bus_actions(broker.endpoint)
    links, before = broker.sender_links, len(broker.received("orders"))
    with ThreadPoolExecutor(32) as pool:
        outcomes = list(pool.map(lambda n: actions.perform(typed(bus_action("orders")), JOB, Attempt(START + timedelta(seconds=n))), range(128)))
    assert [said for succeeded, said in outcomes if not succeeded] == []
    assert len(broker.wait_for(before + 128, "orders")) == before + 128
    assert broker.sender_links - links == 1
    actions.close()
